"""The live progress lines of a running fit on the terminal."""

from __future__ import annotations

import math
import os
import sys
from typing import Any


class Progress:
    """Progress on stdout: a line per iteration, in place on a terminal, plain when piped.

    Every method reports through it (``estimate``'s ``callback``): the Picard
    methods per iteration, IPOPT and shooting per IPOPT iteration (no
    gradient norm: ``-``).  :meth:`note` prints a line of its own (the
    compilation notice) without breaking an in-place line.  In a worker
    process (``--multistart`` with ``--jobs``) the lines are plain and
    prefixed with the worker's process id.

    From Python, ``pc.estimate(..., callback=pc.Progress())`` prints the
    same lines (a quadrotor's 15-minute fit printed nothing without a
    callback of the user's own).

    Parameters
    ----------
    stream : file-like, optional
        Where the lines go (default ``sys.stdout``).
    quiet : bool
        Print nothing.
    """

    def __init__(self, stream: Any = None, quiet: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.quiet = quiet
        self.open_line = False
        self.prefix = ""
        #: iterations reported so far (printed or not)
        self.iterations = 0

    def __getstate__(self) -> dict[str, Any]:
        # a stream does not pickle: a worker writes plain lines to its own stdout
        return {"quiet": self.quiet}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(None, state["quiet"])  # type: ignore[misc]
        self.tty = False
        self.prefix = f"[worker {os.getpid()}] "

    @staticmethod
    def _num(value: float, width: int, spec: str) -> str:
        return f"{value:{width}{spec}}" if math.isfinite(value) else f"{'-':>{width}}"

    def __call__(self, rec: Any) -> None:
        """Print the line of one iteration (``rec``: a ``pc.IterationRecord``)."""
        self.iterations += 1
        if self.quiet:
            return
        line = (f"{self.prefix}iter {rec.iteration:5d}  objective "
                f"{self._num(rec.objective, 11, '.5e')}  |grad| "
                f"{self._num(rec.grad_norm, 9, '.2e')}  gap {self._num(rec.gap, 9, '.2e')}")
        if self.tty:
            self.stream.write("\r" + line)
            self.open_line = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        """A line of its own (ends an in-place iteration line first)."""
        if self.quiet:
            return
        if self.open_line:
            self.stream.write("\n")
            self.open_line = False
        self.stream.write(f"{self.prefix}{text}\n")
        self.stream.flush()

    def done(self) -> None:
        """End an in-place line (after the last iteration)."""
        if self.open_line and not self.quiet:
            self.stream.write("\n")
            self.stream.flush()
        self.open_line = False
