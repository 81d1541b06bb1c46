"""The iteration's stops where nothing changes any more: a floor reached, or a step rule that gives up."""

from __future__ import annotations

import casadi as ca
import numpy as np

import picard_casadi as pc
from picard_casadi.estimation.setup import build_setup
from picard_casadi.methods.base import (GIVE_UP_ITERATIONS, LoopOptions, StepInfo,
                                        run_picard_iteration)


def test_a_fixed_point_at_its_floor_ends_the_run_as_converged():
    """A fixed-point tolerance below what double precision reaches: the run stops
    once no step gains (the floor rule), not at max_iter.  PEtab's Boehm spun
    from iteration 1100 to 2000 on one iterate whose scaled fixed-point
    residual, 1.1e-9, was just above the default 1e-9."""
    prob = pc.problem("vdp", seed=0)
    res = prob.estimate("picard-gn", fixed_point_tol=1e-30, max_iter=300, uncertainty=False,
                        refine=False)
    assert res.success and res.status == "converged", res.message
    assert "fixed-point residual" in res.message and "smallest reachable" in res.message
    assert res.iterations < 300
    reference = prob.estimate("picard-gn", uncertainty=False, refine=False)
    np.testing.assert_allclose(res.p, reference.p, rtol=1e-6)


class _NeverAccepts:
    """A step rule that rejects every step: the iterate never changes."""

    units = ()

    def step(self, Xs, U, ps, V, lam) -> StepInfo:
        return StepInfo(Xs, ps, 1.0, 1.0, 0.5, 0.0, False, 1, 1.0)

    def reset(self) -> None:
        pass

    def settled(self, info, gap_scaled, lam) -> bool:
        return False  # no multiplier update either


def test_a_run_without_an_accepted_step_gives_up_instead_of_spinning():
    """Iterations that return the same iterate with its gaps open end as a
    failure after GIVE_UP_ITERATIONS, saying so (PEtab's Zheng from a random
    start returned one iterate 1700 times at 0.19 s each)."""
    x, p = ca.SX.sym("x"), ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=p * x, name="growth")
    t = np.linspace(0.0, 1.0, 11)
    exp = pc.Experiment(t=t, y=np.exp(t)[:, None], name="e")
    # p = 3 against data of p = 1: the data-anchored starts leave the gaps open
    setup = build_setup(model, [exp], np.array([3.0]), T=0.1, n=2, nodes=5,
                        scheme="chebyshev", weights=np.ones(1),
                        p_bounds=(np.array([-10.0]), np.array([10.0])),
                        x_bounds=(np.array([-np.inf]), np.array([np.inf])),
                        estimate_x0=np.array([True]), codegen=False, guess="anchored")
    out = run_picard_iteration(setup, _NeverAccepts(), LoopOptions(max_iter=500, sweeps=1))
    assert not out.success and out.status == "step_failed"
    assert out.iterations == GIVE_UP_ITERATIONS
    assert f"no step was accepted in {GIVE_UP_ITERATIONS} iterations" in out.message
