"""Ctrl-C inside CasADi: turned back into :class:`KeyboardInterrupt`.

CasADi polls for Ctrl-C inside its long C++ loops (CVODES' right-hand side,
IPOPT's iterations) by running Python's signal handler, and then turns the
interrupt into something else (measured with casadi 3.8.2):

* CVODES: the right-hand side "fails"; the call raises ``RuntimeError ...
  CVode returned "CV_RHSFUNC_FAIL"`` and prints ``rhs failed:
  KeyboardInterrupt`` on the terminal.  The package read that as a
  simulation that blows up;
* IPOPT: the solve *returns*, with status ``NonIpopt_Exception_Thrown`` (or,
  inside a CVODES-based NLP, ``Invalid_Number_Detected``) and a printed
  ``WARNING("KeyboardInterruptException")``: an ordinary failed result;
* plain function evaluation on the virtual machine does not poll: the
  interrupt arrives when the call returns.

In each case Python's own ``KeyboardInterrupt`` is raised inside CasADi and
cleared there.  (So is one that arrives while CasADi's Python wrapper converts
arguments: it tries conversions and clears the errors of those that fail.
Measured: about one Ctrl-C in ten during ``picard-gn`` iterations was lost
that way, and the run went on.)  :func:`interruptible` therefore installs, for the duration of
a block, a SIGINT handler that records the interrupt before raising it (so
CasADi still stops at once), and re-raises :class:`KeyboardInterrupt` when
the block ends, whatever CasADi made of it.

One Ctrl-C fails one evaluation, and IPOPT answers a failed evaluation by
trying another point: inside a shooting NLP whose solution blows up each
evaluation ran for minutes, and the solve did not stop.  So inside
:func:`repeated_interrupts` (around an IPOPT solve), once an interrupt is
recorded the signal is sent to the main thread again every
:data:`REPEAT_SECONDS`: every evaluation then fails at once, and IPOPT's
next iteration callback stops the solve.  No signal is sent outside that
block, so clean-up code after it is not interrupted again.  Blocks nest; only the outermost
installs the handler, every one re-raises.  :func:`reraise_if_interrupted`
covers what is visible without the handler (the error text or CasADi's
printed output names the interrupt).
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["interruptible", "reraise_if_interrupted", "is_interrupt", "deferred_interrupt",
           "interruptible_call", "interrupt_checked", "interrupted", "record_interrupt",
           "repeated_interrupts"]

_LOCK = threading.Lock()
_state: dict[str, Any] = {"depth": 0, "flag": False, "previous": None, "installed": False,
                          "repeating": False, "repeater": None}
# held while the repeater sends a signal, and while a repeated block ends
_REPEAT_LOCK = threading.Lock()
#: inside :func:`repeated_interrupts`, a recorded Ctrl-C is sent again this often
REPEAT_SECONDS = 0.05

# what CasADi prints or raises when it turned an interrupt into an error
_MARKERS = ("KeyboardInterrupt",)


def _handler(signum: int, frame: Any) -> None:
    previous = _state["previous"]
    if previous is signal.default_int_handler or not callable(previous):
        _record()
        raise KeyboardInterrupt
    try:  # the application's own handler decides
        previous(signum, frame)
    except KeyboardInterrupt:
        _record()
        raise


def _record() -> None:
    """Record the interrupt; start the thread that repeats it inside
    :func:`repeated_interrupts` (see the module doc)."""
    _state["flag"] = True
    if _state["repeater"] is not None or not hasattr(signal, "pthread_kill"):
        return
    stop = threading.Event()
    target = threading.main_thread().ident

    def repeat() -> None:
        while not stop.wait(REPEAT_SECONDS):
            with _REPEAT_LOCK:
                if _state["repeating"] and not stop.is_set():
                    signal.pthread_kill(target, signal.SIGINT)

    thread = threading.Thread(target=repeat, name="picard_interrupt", daemon=True)
    _state["repeater"] = (stop, thread)
    thread.start()


def _stop_repeater() -> None:
    repeater = _state["repeater"]
    _state["repeater"] = None
    if repeater is not None:
        repeater[0].set()
        repeater[1].join()


@contextlib.contextmanager
def repeated_interrupts() -> Iterator[None]:
    """Inside an :class:`interruptible` block: a recorded Ctrl-C is raised again
    every :data:`REPEAT_SECONDS` while this block runs (around a call that
    retries what an interrupt fails, such as an IPOPT solve)."""
    with _REPEAT_LOCK:
        outer = _state["repeating"]
        _state["repeating"] = True
    try:
        yield
    finally:
        # after this no signal is sent; one already sent arrives (and raises)
        # here, not in the caller's clean-up.  A signal's handler runs at a
        # call, so it may interrupt this reset: then it is done again, and the
        # interrupt raised once it holds.
        caught = False
        while True:
            try:
                with _REPEAT_LOCK:
                    _state["repeating"] = outer
                for _ in range(3):
                    pass
                break
            except KeyboardInterrupt:
                caught = True
        if caught:
            raise KeyboardInterrupt


class interruptible:
    """Context manager: a Ctrl-C during the block ends as :class:`KeyboardInterrupt`.

    Use it around any call into CasADi that may run long (integrators, NLP
    solvers).  Outside the main thread, or when SIGINT is ignored or left to
    the operating system's default, it installs nothing and relies on
    :func:`reraise_if_interrupted`.
    """

    def __enter__(self) -> interruptible:
        with _LOCK:
            if _state["depth"] == 0 and threading.current_thread() is threading.main_thread():
                previous = signal.getsignal(signal.SIGINT)
                if callable(previous):
                    _state["previous"] = previous
                    _state["flag"] = False
                    signal.signal(signal.SIGINT, _handler)
                    _state["installed"] = True
            _state["depth"] += 1
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        with _LOCK:
            _state["depth"] -= 1
            flagged = bool(_state["flag"])
            if _state["depth"] == 0:
                with _REPEAT_LOCK:
                    _state["repeating"] = False
                _stop_repeater()
                if _state["installed"]:
                    signal.signal(signal.SIGINT, _state["previous"])
                _state.update(previous=None, installed=False, flag=False)
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            return False
        if flagged or (exc is not None and is_interrupt(exc)):
            _state["flag"] = _state["depth"] > 0 and flagged  # outer blocks re-raise too
            raise KeyboardInterrupt from None
        return False


def is_interrupt(err: BaseException | None, printed: str = "") -> bool:
    """Whether ``err`` (or CasADi's ``printed`` output) is an interrupt in disguise.

    True for :class:`KeyboardInterrupt` itself, for an error whose text names
    it (CasADi's ``KeyboardInterruptException``), for printed output such
    as CVODES' ``rhs failed: KeyboardInterrupt``, and for an error raised
    while a :class:`KeyboardInterrupt` was being handled (a ``SystemError``
    "returned a result with an exception set").
    """
    if isinstance(err, KeyboardInterrupt):
        return True
    if any(m in printed for m in _MARKERS):
        return True
    if err is None:
        return False
    if any(m in str(err) for m in _MARKERS):
        return True
    cause = err.__cause__ or err.__context__
    return isinstance(cause, KeyboardInterrupt)


def record_interrupt() -> None:
    """Record an interrupt that arrived by another signal (the command line's
    SIGTERM, whose handler raises its own exception): CasADi clears that
    exception as it clears a Ctrl-C's (IPOPT then returns
    ``Invalid_Number_Detected``, and a killed fit wrote its files and exited
    1), so the enclosing :class:`interruptible` block ends in
    :class:`KeyboardInterrupt`, and inside :func:`repeated_interrupts` the
    interrupt is sent again until the solve stops."""
    _record()


def interrupted() -> bool:
    """Whether a Ctrl-C was recorded in the current :class:`interruptible` block
    (and CasADi may have swallowed it)."""
    return bool(_state["flag"])


def reraise_if_interrupted(err: BaseException | None = None, printed: str = "") -> None:
    """Raise :class:`KeyboardInterrupt` if ``err``/``printed`` is an interrupt in
    disguise (see :func:`is_interrupt`) or one was recorded in an enclosing
    :class:`interruptible` block."""
    if _state["flag"] or is_interrupt(err, printed):
        raise KeyboardInterrupt from None


def interruptible_call(func: Callable[..., T]) -> Callable[..., T]:
    """Decorate a function so that its whole call is an :class:`interruptible` block."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        with interruptible():
            return func(*args, **kwargs)

    return wrapper


def interrupt_checked(step: Callable[..., T]) -> Callable[..., T]:
    """Decorate one step of a loop: an interrupt recorded (and lost on the way) before
    or during the step is raised at its start and end, not when the loop ends."""

    @functools.wraps(step)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        reraise_if_interrupted()
        out = step(*args, **kwargs)
        reraise_if_interrupted()
        return out

    return wrapper


class deferred_interrupt:
    """Context manager: a Ctrl-C during the block is held until its end.

    For short critical sections that must not stop half-way (moving a set of
    finished output files into place).  Raises :class:`KeyboardInterrupt`
    after the block if one arrived.
    """

    def __enter__(self) -> deferred_interrupt:
        self._received = False
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGINT)
            if callable(previous):
                self._previous = previous
                signal.signal(signal.SIGINT, self._hold)
        return self

    def _hold(self, signum: int, frame: Any) -> None:
        self._received = True

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        if self._received and exc_type is None:
            raise KeyboardInterrupt
        return False
