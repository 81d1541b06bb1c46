"""Warnings attributed to the user's line, not to the package's wrappers.

``estimate`` runs inside decorators (Ctrl-C handling, BLAS threads) and
helpers of different depths, so a fixed ``stacklevel`` pointed at one of
them (every warning was reported from ``picard_casadi/runtime/interrupts.py``).
:func:`warn_user` counts the package's own frames instead, as Python 3.12's
``skip_file_prefixes`` does.  Where the caller stated the problem in other
terms (a parameter table's bounds for ``p_bounds``), :data:`SPELLING`
rewrites the advice before it is shown.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import warnings
from collections.abc import Callable, Iterator

__all__ = ["warn_user", "SPELLING", "held_warnings", "raised_again", "called_by_user"]

#: the caller's terms for the package's advice (``p_bounds`` as a parameter
#: table's bounds), set around a restated problem's solve; None: as written
SPELLING: contextvars.ContextVar[Callable[[str], str] | None] = contextvars.ContextVar(
    "picard_casadi_spelling", default=None)

# the package's folder (this file is in its runtime/ wing)
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)`` from the innermost frame outside
    the package: the user's call (or the test's, or a thread's entry point),
    in the caller's terms (:data:`SPELLING`)."""
    spell = SPELLING.get()
    if spell is not None:
        message = spell(message)
    frame = sys._getframe(1)  # warn_user's caller: stacklevel 2 of warnings.warn here
    level = 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)


def called_by_user() -> bool:
    """Whether the caller of the function that asks was called from outside
    the package (the user's own call, not one of the package's)."""
    frame = sys._getframe(2)
    return not os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE)


@contextlib.contextmanager
def held_warnings(ignore: tuple[type[Warning], ...] = ()
                  ) -> Iterator[list[tuple[str, type[Warning]]]]:
    """Every warning raised in the block held back, as ``(message, category)``
    pairs in the list yielded (plain data: it crosses to another process), to
    be raised again by :func:`raised_again` where the caller decides;
    ``ignore``: categories dropped."""
    caught: list[tuple[str, type[Warning]]] = []
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        for category in ignore:
            warnings.simplefilter("ignore", category)
        try:
            yield caught
        finally:
            caught.extend((str(w.message), w.category) for w in records)


def raised_again(caught: list[tuple[str, type[Warning]]], prefix: str = "") -> None:
    """Warnings held by :func:`held_warnings` raised again (once each, after
    ``prefix``), from the user's line, the caller's filters deciding what shows."""
    for message, category in dict.fromkeys(caught):
        warn_user(prefix + message, category)
