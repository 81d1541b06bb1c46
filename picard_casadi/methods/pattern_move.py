"""The pattern move: extrapolation along a valley that the steps cross in a zigzag.

Where the residuals are large (the unweighted F/A-18 loss) Gauss-Newton can
settle into a two-cycle: every other step is the same (measured on
fa18-roll-beta, seed 1: cosine 1.000 two steps apart, 0.91 between
neighbours), each step exactly as good as predicted and 1 % less than the one
before.  The sum of two consecutive steps then points along the valley
floor.  As in the pattern move of Hooke and Jeeves (or parallel tangents),
the point is extrapolated along it by doubling multiples while the merit
falls (interval starts and ``p`` kept in their boxes, node values settled on
the fixed point); the best point replaces the step's, or the step stands when
no multiple improves on it.  What it gains, and where it does not help,
is measured in docs/design.md.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .base import Setup, StepInfo
from .least_squares import room

__all__ = ["PatternMove"]

# two steps apart, accepted steps this parallel mark a zigzag across a valley
ZIGZAG_COSINE = 0.99
# largest multiple of the two-step progress tried by a pattern move
PATTERN_MAX_FACTOR = 2.0 ** 12
# below this ratio of the last step to the one two before, the first multiple
# overshoots the limit of the steps too far to lower the merit (see `after`)
PATTERN_MIN_RATIO = 0.2

#: ``(Xs, ps, U_start) -> (merit, U, evaluations)``: the merit at a scaled
#: point with its node values settled from ``U_start`` (``inf`` where not found)
SettledMerit = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[float, np.ndarray, int]]


class PatternMove:
    """Watches the accepted points and extrapolates where they zigzag.

    Parameters
    ----------
    setup : Setup
        Supplies the boxes and which variables are free.
    """

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        # the last accepted points (scaled X, p)
        self._trail: list[tuple[np.ndarray, np.ndarray]] = []

    def after(self, Xs: np.ndarray, ps: np.ndarray, info: StepInfo,
              settled_merit: SettledMerit) -> StepInfo:
        """The accepted step ``info`` from ``(Xs, ps)``, extrapolated where the
        last four accepted points zigzag, or ``info`` itself."""
        self._trail.append((info.Xs.copy(), info.ps.copy()))
        del self._trail[:-4]
        if len(self._trail) < 4:
            return info
        z = [np.concatenate([X.ravel(), p]) for X, p in self._trail]
        s1, s3 = z[1] - z[0], z[3] - z[2]
        n1, n3 = np.linalg.norm(s1), np.linalg.norm(s3)
        if n1 == 0.0 or n3 == 0.0 or float(s1 @ s3) < ZIGZAG_COSINE * n1 * n3:
            return info
        # Steps that shrink geometrically, by r every two (whether neighbours
        # point the same way or alternate), have their limit at r / (1 - r)
        # times the two-step progress from the last point, and the first trial
        # (one times it) lowers a quadratic merit only when that is above 1/2,
        # r > 1/3.  Where they shrink fast the iteration converges by itself:
        # no trial (docs/performance.md, "Pattern moves only where they can pay").
        if n3 < PATTERN_MIN_RATIO * n1:
            return info
        s = self.setup
        xl, xu, pl, pu = s.scaled_bounds
        dX = np.where(s.free_x, self._trail[3][0] - self._trail[1][0], 0.0)
        dp = np.where(s.free_p, self._trail[3][1] - self._trail[1][1], 0.0)
        # the largest multiple that keeps every start and parameter in its box
        limit = min(room(info.Xs, dX, xl, xu), room(info.ps, dp, pl, pu), PATTERN_MAX_FACTOR)
        best = None
        best_merit = info.phi_after
        factor = 1.0
        U_start = info.U
        evals = 0
        while factor <= limit and U_start is not None:
            Xn, pn = info.Xs + factor * dX, info.ps + factor * dp
            merit_new, U_new, n_evals = settled_merit(Xn, pn, U_start)
            evals += n_evals
            if not merit_new < best_merit:
                break
            best, best_merit, U_start = (Xn, pn, U_new), merit_new, U_new
            factor *= 2.0
        if best is None:
            return info
        self._trail.clear()
        Xn, pn, U_new = best
        step = float(max(np.abs(Xn - Xs).max(initial=0.0), np.abs(pn - ps).max(initial=0.0)))
        return StepInfo(Xn, pn, info.phi_before, best_merit, info.grad_norm, step, True,
                        info.evaluations + evals, info.control, U=U_new,
                        optimality=info.optimality, fraction=info.fraction)
