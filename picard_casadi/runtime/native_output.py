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
while a capture is active.  What other threads print through Python while
a capture is active (a progress bar beside an estimate in a thread) reaches
the real streams too: during a capture ``sys.stdout``/``sys.stderr`` take
the text of the threads inside a capture block only
(:class:`_ThreadStream`); file descriptors 1 and 2 are the process's, so
what other threads write to them natively is still captured.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

from .interrupts import deferred_interrupt

__all__ = ["captured_native_output", "released_output"]


class _ThreadStream(io.TextIOBase):
    """``sys.stdout`` (or ``sys.stderr``) during a capture: the text of the
    threads inside a capture block goes to the capture, any other thread's to
    the real stream (by the saved file descriptor where the real stream is
    descriptor 1 or 2, which now points into the capture)."""

    def __init__(self, session: "_Session", index: int) -> None:
        super().__init__()
        self._session = session
        self._index = index

    def _target(self) -> Any:
        session = self._session
        if threading.get_ident() in session.threads:
            return session.text
        return session.passthrough[self._index]

    def write(self, text: str) -> int:
        self._target().write(text)
        return len(text)

    def flush(self) -> None:
        with contextlib.suppress(Exception):
            self._target().flush()

    def writable(self) -> bool:
        return True


def _passthrough(stream: Any, saved: int | None) -> Any:
    """Where another thread's text goes during a capture: ``stream`` itself,
    or a writer on the saved descriptor where ``stream`` writes to descriptor
    1 or 2 (which the capture redirects)."""
    try:
        fd = stream.fileno()
    except Exception:  # pytest's or Jupyter's streams: no descriptor of their own
        return stream
    if saved is None or fd not in (1, 2):
        return stream
    raw = os.fdopen(os.dup(saved), "wb", buffering=0)
    return io.TextIOWrapper(raw, encoding=getattr(stream, "encoding", None) or "utf-8",
                            errors="replace", line_buffering=True, write_through=True)


class _Session:
    """One redirection of the process's output, shared by every capture that
    overlaps it (nested, or in other threads): file descriptors 1 and 2 are
    the process's, not a thread's, so two captures that each saved and
    restored them in turn left the process writing into a deleted file."""

    def __init__(self) -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        try:
            self.saved: list[int] | None = [os.dup(1), os.dup(2)]
        except OSError:  # no real file descriptors (embedded interpreters)
            self.saved = None
        self.python_streams = (sys.stdout, sys.stderr)
        self.file = tempfile.TemporaryFile(mode="w+b")
        self.text = io.StringIO()
        self.users = 0
        #: the threads inside a capture block (their Python text is captured)
        self.threads: dict[int, int] = {}
        self.passthrough = [
            _passthrough(stream, None if self.saved is None else self.saved[k])
            for k, stream in enumerate(self.python_streams)]
        self.streams = (_ThreadStream(self, 0), _ThreadStream(self, 1))
        self.redirect()

    def redirect(self) -> None:
        """Output into the capture (again, after :func:`released_output`)."""
        if self.saved is not None:
            os.dup2(self.file.fileno(), 1)
            os.dup2(self.file.fileno(), 2)
        sys.stdout, sys.stderr = self.streams

    def release(self) -> None:
        """Output to the real streams (for a :func:`released_output` block, or for good)."""
        _flush_c_stdio()
        if self.saved is not None:
            os.dup2(self.saved[0], 1)
            os.dup2(self.saved[1], 2)
        sys.stdout, sys.stderr = self.python_streams

    def position(self) -> tuple[int, int]:
        """Where the capture's bytes and text end now."""
        _flush_c_stdio()
        return os.fstat(self.file.fileno()).st_size, len(self.text.getvalue())

    def since(self, start: tuple[int, int]) -> str:
        """What was captured after ``start`` (:meth:`position`), by any thread."""
        end, _ = self.position()
        fd, size = self.file.fileno(), end - start[0]
        if size <= 0:
            raw = b""
        elif hasattr(os, "pread"):  # leaves the offset the redirected writes use
            raw = os.pread(fd, size, start[0])
        else:  # pragma: no cover - no pread (Windows)
            offset = os.lseek(fd, 0, os.SEEK_CUR)
            os.lseek(fd, start[0], os.SEEK_SET)
            raw = os.read(fd, size)
            os.lseek(fd, offset, os.SEEK_SET)
        return raw.decode("utf-8", "replace") + self.text.getvalue()[start[1]:]

    def close(self) -> None:
        """Back to the real streams for good."""
        self.release()
        for k, target in enumerate(self.passthrough):
            if target is not self.python_streams[k]:
                with contextlib.suppress(Exception):
                    target.close()
        if self.saved is not None:
            os.close(self.saved[0])
            os.close(self.saved[1])
        self.file.close()


_LOCK = threading.Lock()
#: the redirection in force, or None
_SESSION: _Session | None = None


#: the process's C library, opened on the first flush (8.5 us each time
#: otherwise; a picard-gn step flushes about five times)
_LIBC: list[Any] = []


def _flush_c_stdio() -> None:
    """Flush C's stdio buffers (what IPOPT printed goes to the capture, not past it)."""
    with contextlib.suppress(Exception):
        if not _LIBC:
            import ctypes

            _LIBC.append(ctypes.CDLL(None))
        _LIBC[0].fflush(None)


@contextlib.contextmanager
def released_output() -> Iterator[None]:
    """Inside a :func:`captured_native_output` block: the real stdout/stderr for this block.

    Used for progress lines printed from inside a captured call (an IPOPT
    iteration callback); outside any capture it does nothing.  Native output
    printed before the block stays in the capture.  (With captures running
    in other threads, their output during the block reaches the terminal
    too: the streams are the process's.)
    """
    session: _Session | None = None
    try:
        with deferred_interrupt(), _LOCK:
            if _SESSION is not None:
                _SESSION.release()
                session = _SESSION
        yield
    finally:
        if session is not None:
            with deferred_interrupt(), _LOCK:
                for stream in session.python_streams:
                    with contextlib.suppress(Exception):
                        stream.flush()
                if _SESSION is session:
                    session.redirect()


@contextlib.contextmanager
def captured_native_output() -> Iterator[list[str]]:
    """Redirect file descriptors 1 and 2, and ``sys.stdout``/``sys.stderr``, for the block.

    Yields a list that, after the block, holds the captured text as one
    string (empty when nothing was printed).  Captures that overlap, nested
    or in other threads, share one redirection, undone when the last of
    them ends; each gets what was printed during its own block (by any
    thread: the streams are the process's).
    """
    global _SESSION
    box: list[str] = []
    session: _Session | None = None
    try:
        # a Ctrl-C between the redirection and its bookkeeping would leave the
        # process writing into the capture for good: it is held until each
        # step is whole (and, raised at the end of this one, still undone below)
        with deferred_interrupt(), _LOCK:
            if _SESSION is None:
                _SESSION = _Session()
            _SESSION.users += 1
            session = _SESSION
            me = threading.get_ident()
            session.threads[me] = session.threads.get(me, 0) + 1
            start = session.position()
        yield box
    finally:
        if session is not None:
            with deferred_interrupt(), _LOCK:
                try:
                    box.append(session.since(start))
                finally:
                    session.threads[me] -= 1
                    if session.threads[me] == 0:
                        del session.threads[me]
                    session.users -= 1
                    if session.users == 0:
                        _SESSION = None
                        session.close()
