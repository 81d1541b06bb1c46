"""The paper's unweighted F/A-18 loss: runs that exposed faults of the condensed step.

Each of these stopped with "trust region collapsed" or at the iteration
limit before the fault was mended (the fault is named in each test).
"""

from __future__ import annotations

import numpy as np
import pytest

import picard_casadi as pc


def _unweighted(run: str, seed: int, max_iter: int = 1000) -> pc.EstimationResult:
    prob = pc.problem(f"fa18-{run}", seed=seed)
    return prob.estimate("picard-gn", weights="none", uncertainty=False, max_iter=max_iter)


def test_parameter_on_its_bound_does_not_stall_the_step():
    """fa18-drag-stab, seed 0: the optimum has mu_Dstab[2] on its bound -50.

    The QP bounded only the interval starts; its step pushed that parameter
    out, the clip afterwards broke the step's gap prediction, and every
    shortened step was refused until the trust region collapsed.
    """
    res = _unweighted("drag-stab", 0)
    assert res.success, res.message
    assert res.continuity_gap < 1e-4
    assert res.p[2] == pytest.approx(-50.0)  # the bound is active at this optimum
    assert np.all(res.p >= -50.0) and np.all(res.p <= 50.0)


def test_bound_in_the_working_set_holds_and_gaps_close():
    """fa18-drag, seed 2: a bound in the active set, violated by 1e-2 by the
    least-squares KKT solve, made the clipped step unevaluable."""
    res = _unweighted("drag", 2)
    assert res.success, res.message
    assert res.continuity_gap < 1e-4
    lb, ub = pc.problem("fa18-drag").options["x0_bounds"]
    X = res._X
    assert np.all(X >= lb - 1e-9) and np.all(X <= ub + 1e-9)


@pytest.mark.slow
def test_zigzag_across_a_valley_is_followed_by_pattern_moves():
    """fa18-roll-ail, seed 2: Gauss-Newton steps alternate between two
    directions; with pattern moves the run converges within 1000 iterations."""
    res = _unweighted("roll-ail", 2)
    assert res.success, res.message
    assert res.continuity_gap < 1e-4
