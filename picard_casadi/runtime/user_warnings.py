"""Warnings attributed to the user's line, not to the package's wrappers.

``estimate`` runs inside decorators (Ctrl-C handling, BLAS threads) and
helpers of different depths, so a fixed ``stacklevel`` pointed at one of
them (every warning was reported from ``picard_casadi/runtime/interrupts.py``).
:func:`warn_user` counts the package's own frames instead, as Python 3.12's
``skip_file_prefixes`` does.
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["warn_user"]

# the package's folder (this file is in its runtime/ wing)
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)`` from the innermost frame outside
    the package: the user's call (or the test's, or a thread's entry point)."""
    frame = sys._getframe(1)  # warn_user's caller: stacklevel 2 of warnings.warn here
    level = 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)
