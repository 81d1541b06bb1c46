"""The step damped to fit the trust radius (More's Levenberg-Marquardt step).

Where the trust radius cuts a Gauss-Newton step to a sliver of its length and
the cut step's gain ratio stays between the radius's thresholds, the cut step
walks a curved valley in slivers that neither grow nor shrink the radius.
The damped step whose largest scaled move fills the radius bends with the
valley instead.  The constrained Gauss-Newton step
(:class:`~picard_casadi.methods.condensed.ConstrainedGaussNewtonStep`)
decides when to take it; this module finds its damping.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["FITTED_STEP_BISECTIONS", "FITTED_STEP_FILL", "FITTED_STEP_MAX_DAMPING",
           "fitted_step"]

# its length within [FITTED_STEP_FILL, 1] of the radius: the damping raised
# tenfold until the step fits, then at most FITTED_STEP_BISECTIONS bisections
# of its logarithm, the damping (relative to the diagonal of A^T A) at most
# FITTED_STEP_MAX_DAMPING, whose step (the closure, nearly) is cut to the radius
FITTED_STEP_FILL = 0.5
FITTED_STEP_BISECTIONS = 4
FITTED_STEP_MAX_DAMPING = 1e10

#: a damped step: the interval starts' moves, the parameters' and its size
Step = tuple[np.ndarray, np.ndarray, float]


def fitted_step(solve: Callable[[float], Step], radius: float, floor: float,
                last: float) -> tuple[Step, float]:
    """The damped step that fits ``radius``, and its damping.

    ``solve(mu)`` is the step with damping ``mu`` (relative to the diagonal
    of ``A^T A``) and its size (its largest scaled move); ``floor`` is a
    damping whose step is longer than the radius (the Gauss-Newton step's),
    ``last`` the damping of the last fitted step (0 before one).  The search
    starts from ``max(10 floor, last / 10)``, raises the damping tenfold
    until the step fits, then bisects its logarithm until the step fills
    ``FITTED_STEP_FILL`` of the radius.  Where even
    :data:`FITTED_STEP_MAX_DAMPING` leaves the step longer, that step (the
    caller cuts it).
    """
    mu = min(max(10.0 * floor, 0.1 * last), FITTED_STEP_MAX_DAMPING)
    best = solve(mu)
    lo = max(floor, 1e-3 * mu)
    while best[2] > radius:
        if mu >= FITTED_STEP_MAX_DAMPING:
            return best, mu
        lo, mu = mu, min(10.0 * mu, FITTED_STEP_MAX_DAMPING)
        best = solve(mu)
    for _ in range(FITTED_STEP_BISECTIONS):
        if best[2] >= FITTED_STEP_FILL * radius:
            break
        mid = float(np.sqrt(lo * mu))
        trial = solve(mid)
        if trial[2] <= radius:
            mu, best = mid, trial
        else:
            lo = mid
    return best, mu
