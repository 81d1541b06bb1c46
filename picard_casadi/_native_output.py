"""Capture what CasADi's C++ code prints on the process's stdout/stderr.

CVODES and CasADi print diagnostics (and, when a mapped call fails, the
inputs of every nested function), LAPACK prints ``** On entry to DLASCL
...`` when it meets a NaN.  Some of it goes straight to file descriptors 1
and 2, some through Python's ``sys.stdout``/``sys.stderr`` (CasADi's Python
module routes its own messages there).  The package calls the integrator,
the NLP solver and LAPACK where failure is an expected outcome (reported as
an error or a failed result), so those prints are captured from both places
and the useful line is put into the message instead.

Progress output of the package's own (a user's iteration callback called
from inside IPOPT, the note before a compilation) must still reach the
terminal: :func:`released_output` restores the real streams for its block
while a capture is active.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

__all__ = ["captured_native_output", "released_output"]

# The captures active in this process, outermost first: (saved descriptors or
# None, the Python streams before, the capture file's descriptor, its text buffer).
_ACTIVE: list[tuple[list[int] | None, tuple[Any, Any], int, io.StringIO]] = []


def _flush_c_stdio() -> None:
    """Flush C's stdio buffers (what IPOPT printed goes to the capture, not past it)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def released_output() -> Iterator[None]:
    """Inside a :func:`captured_native_output` block: the real stdout/stderr for this block.

    Used for progress lines printed from inside a captured call (an IPOPT
    iteration callback); outside any capture it does nothing.  Native output
    printed before the block stays in the capture.
    """
    if not _ACTIVE:
        yield
        return
    saved, python_streams, _, _ = _ACTIVE[0]
    _, _, capture_fd, text = _ACTIVE[-1]
    _flush_c_stdio()
    if saved is not None:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
    sys.stdout, sys.stderr = python_streams
    try:
        yield
    finally:
        for stream in python_streams:
            with contextlib.suppress(Exception):
                stream.flush()
        if saved is not None:
            os.dup2(capture_fd, 1)
            os.dup2(capture_fd, 2)
        sys.stdout = sys.stderr = text


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
            _ACTIVE.append((saved, python_streams, tmp.fileno(), text))
            yield box
        finally:
            if _ACTIVE and _ACTIVE[-1][3] is text:
                _ACTIVE.pop()
            sys.stdout, sys.stderr = python_streams
            if saved is not None:
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
                os.close(saved[0])
                os.close(saved[1])
            tmp.seek(0)
            box.append(tmp.read().decode("utf-8", "replace") + text.getvalue())
