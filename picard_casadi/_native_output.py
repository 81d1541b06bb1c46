"""Capture what CasADi's C++ code prints on the process's stdout/stderr.

CVODES and CasADi print diagnostics (and, when a mapped call fails, the
inputs of every nested function) straight to file descriptors 1 and 2.  The
package calls the integrator where failure is an expected outcome (a
simulation that blows up is reported as an error), so those prints are
captured and the useful line is put into the error message instead.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

__all__ = ["captured_native_output"]


@contextlib.contextmanager
def captured_native_output() -> Iterator[list[str]]:
    """Redirect file descriptors 1 and 2 to a temporary file for the block.

    Yields a list that, after the block, holds the captured text as one
    string (empty when nothing was printed).
    """
    box: list[str] = []
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        saved = [os.dup(1), os.dup(2)]
    except OSError:  # no real file descriptors (embedded interpreters)
        yield box
        return
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        try:
            os.dup2(tmp.fileno(), 1)
            os.dup2(tmp.fileno(), 2)
            yield box
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            tmp.seek(0)
            box.append(tmp.read().decode("utf-8", "replace"))
