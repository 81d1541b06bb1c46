"""Capture what CasADi's C++ code prints on the process's stdout/stderr.

CVODES and CasADi print diagnostics (and, when a mapped call fails, the
inputs of every nested function), LAPACK prints ``** On entry to DLASCL
...`` when it meets a NaN.  Some of it goes straight to file descriptors 1
and 2, some through Python's ``sys.stdout``/``sys.stderr`` (CasADi's Python
module routes its own messages there).  The package calls the integrator,
the NLP solver and LAPACK where failure is an expected outcome (reported as
an error or a failed result), so those prints are captured from both places
and the useful line is put into the message instead.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from collections.abc import Iterator

__all__ = ["captured_native_output"]


@contextlib.contextmanager
def captured_native_output() -> Iterator[list[str]]:
    """Redirect file descriptors 1 and 2, and ``sys.stdout``/``sys.stderr``, for the block.

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
        saved = None
    python_streams = (sys.stdout, sys.stderr)
    text = io.StringIO()
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        try:
            if saved is not None:
                os.dup2(tmp.fileno(), 1)
                os.dup2(tmp.fileno(), 2)
            sys.stdout = sys.stderr = text
            yield box
        finally:
            sys.stdout, sys.stderr = python_streams
            if saved is not None:
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
                os.close(saved[0])
                os.close(saved[1])
            tmp.seek(0)
            box.append(tmp.read().decode("utf-8", "replace") + text.getvalue())
