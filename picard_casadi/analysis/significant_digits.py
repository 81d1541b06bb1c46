"""How many significant digits show an estimate beside its standard error.

Six digits hide a standard error below a millionth of the estimate: a robot
joint's inertia 0.0500724 +- 1.3e-6 was shown as ``0.05`` with the interval
``[0.05, 0.05]``.  As MATLAB's ``present`` does, an estimate gets the digits
down to its standard error's second significant digit.
"""

from __future__ import annotations

import math

__all__ = ["digits_beside"]

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
