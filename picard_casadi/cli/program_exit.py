"""How the ``picard-casadi`` program ends other than by finishing: SIGTERM
(status 143, the output files cleaned up), Ctrl-C (130, one line) and a
closed output pipe (141, quietly)."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["Terminated", "terminate_cleanly", "interrupted", "quiet_broken_pipe",
           "STOP_GRACE"]

#: seconds the program has to unwind after a SIGTERM or a Ctrl-C before it is
#: ended at once: native code that never returns to Python (an IPOPT iteration
#: on a model grown to 1e52, days read as hours) ran on for minutes after a
#: SIGTERM, until a SIGKILL
STOP_GRACE = 10.0


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
    _stop_watchdog()


def _stop_watchdog() -> None:
    """End the process :data:`STOP_GRACE` seconds after a SIGTERM (status 143)
    or a Ctrl-C (130) that it has not unwound from by then.  Python runs a
    signal's handler only where the main thread runs Python again, so the
    signal reaches a thread through the interpreter's wake-up file (written by
    the C-level handler at once); CasADi's native code lets threads run."""
    import signal
    import threading
    import time

    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except (ValueError, OSError):  # not the main thread, or no such file
        os.close(read)
        os.close(write)
        return
    codes = {int(signal.SIGTERM): 143, int(signal.SIGINT): 130}
    # the terminal's stderr as it is now: native output is captured by
    # redirecting file 2 while a solve runs
    stderr = os.dup(2)

    def watch() -> None:
        while True:
            try:
                got = os.read(read, 64)
            except OSError:
                return
            if not got:
                return
            stopping = [codes[b] for b in got if b in codes]
            if stopping:
                time.sleep(STOP_GRACE)
                os.write(stderr, (f"picard-casadi: still running {STOP_GRACE:g} s after the "
                              "signal (inside native code): ended at once\n").encode())
                os._exit(stopping[0])

    threading.Thread(target=watch, name="picard-casadi stop watchdog", daemon=True).start()


def interrupted(command: str, as_program: bool) -> int:
    """One line for Ctrl-C; as a program, a second Ctrl-C while exiting is ignored
    (it would print a traceback from the interpreter's shutdown)."""
    if as_program:
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
    print(f"{command}: interrupted", file=sys.stderr)
    return 130
