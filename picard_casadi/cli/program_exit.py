"""How the ``picard-casadi`` program ends other than by finishing: SIGTERM
(status 143, the output files cleaned up), Ctrl-C (130, one line) and a
closed output pipe (141, quietly)."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["Terminated", "terminate_cleanly", "interrupted", "quiet_broken_pipe"]


def quiet_broken_pipe() -> int:
    """stdout was closed (``| head``): stop quietly, as ``yes | head`` does."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return 141  # 128 + SIGPIPE, what a shell reports for a process killed by it


class Terminated(BaseException):
    """SIGTERM, raised where Python next runs, so that the output files' clean-up
    runs (a ``kill`` while results were written left ``.part`` files)."""

    #: a SIGTERM arrived (native code may turn the exception into an interrupt)
    seen = False


def terminate_cleanly() -> None:
    """As a program: SIGTERM unwinds like an exception (exit status 143)."""
    import signal
    import threading

    from ..runtime.interrupts import record_interrupt

    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, frame: Any) -> None:
        # a second SIGTERM (the first swallowed by native code, or the clean-up
        # hanging) ends the process at once, as without this handler
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        Terminated.seen = True
        # native code clears the exception below (IPOPT returned a failure,
        # and the fit went on to write its files): recorded as an interrupt,
        # it is raised again when the solve returns
        record_interrupt()
        raise Terminated()

    signal.signal(signal.SIGTERM, handler)


def interrupted(command: str, as_program: bool) -> int:
    """One line for Ctrl-C; as a program, a second Ctrl-C while exiting is ignored
    (it would print a traceback from the interpreter's shutdown)."""
    if as_program:
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
    print(f"{command}: interrupted", file=sys.stderr)
    return 130
