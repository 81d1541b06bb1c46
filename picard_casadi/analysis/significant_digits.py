"""How many significant digits show an estimate beside its standard error.

Six digits hide a standard error below a millionth of the estimate: a robot
joint's inertia 0.0500724 +- 1.3e-6 was shown as ``0.05`` with the interval
``[0.05, 0.05]``.  As MATLAB's ``present`` does, an estimate gets the digits
down to its standard error's second significant digit.
"""

from __future__ import annotations

import math

__all__ = ["digits_beside", "shown"]

#: the fewest digits shown, and the most (double precision)
FEWEST, MOST = 6, 15


def digits_beside(value: float, std: float | None) -> int:
    """Significant digits that show ``value`` down to the second digit of
    ``std``: at least :data:`FEWEST`, at most :data:`MOST`."""
    try:
        ratio = abs(float(value)) / abs(float(std))  # type: ignore[arg-type]
    except (TypeError, ValueError, ZeroDivisionError):
        return FEWEST
    if not math.isfinite(ratio) or ratio <= 0:
        return FEWEST
    return min(MOST, max(FEWEST, math.floor(math.log10(ratio)) + 2))


def shown(value: float, digits: int) -> str:
    """``value`` to ``digits`` significant digits, its trailing zeros kept
    where they are more than :data:`FEWEST` (they are digits the standard
    error vouches for: 20.000004 +- 0.000107 was printed ``20``, its
    profile interval ``[20, 20]``)."""
    return f"{value:#.{digits}g}" if digits > FEWEST and math.isfinite(value) else f"{value:.{digits}g}"
