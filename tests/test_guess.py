"""The starting point: node values of each interval from its data-anchored start."""

from __future__ import annotations

import casadi as ca
import numpy as np

import picard_casadi as pc
from picard_casadi.estimate import build_setup


def _ramp_setup(exp: pc.Experiment, p0: float, bound: float, estimate_x0: bool):
    """The starting point of x' = p on T = 0.1 intervals, state box [-bound, bound]."""
    x = ca.SX.sym("x")
    p = ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=p, name="ramp")
    return build_setup(model, [exp], np.array([p0]), T=0.1, n=2, nodes=5,
                       scheme="chebyshev", weights=np.ones(1),
                       p_bounds=(np.array([-1e3]), np.array([1e3])),
                       x_bounds=(np.array([-bound]), np.array([bound])),
                       estimate_x0=estimate_x0, codegen=False)


def test_an_interval_that_leaves_the_box_starts_constant():
    """x' = p: with p = 100 an interval of 0.1 s climbs by 10, far beyond the box [-1, 1]."""
    t = np.linspace(0.0, 1.0, 11)
    exp = pc.Experiment(t=t, y=(0.5 + 0.3 * np.sin(t))[:, None], name="e")
    setup = _ramp_setup(exp, 100.0, 1.0, estimate_x0=True)
    U0, X0 = setup.U0, setup.X0
    # every interval's fixed point would end 10 above its start: all start constant
    np.testing.assert_allclose(U0, np.repeat(X0[:, :, None], U0.shape[2], axis=2))
    # with a slope the box can hold, the nodes are the fixed point (a ramp)
    setup = _ramp_setup(exp, 1.0, 1.0, estimate_x0=True)
    rise = setup.U0[:, 0, -1] - setup.U0[:, 0, 0]
    np.testing.assert_allclose(rise, 0.1, rtol=1e-10)


def test_a_state_starting_at_zero_gets_its_fixed_point():
    """x' = p from x0 = 0: the first interval is a ramp, not held constant."""
    t = np.linspace(0.0, 1.0, 11)
    exp = pc.Experiment(t=t, y=t[:, None].copy(), x0=np.array([0.0]), name="e")
    setup = _ramp_setup(exp, 1.0, 10.0, estimate_x0=False)
    assert setup.X0[0, 0] == 0.0
    rise = setup.U0[:, 0, -1] - setup.U0[:, 0, 0]
    np.testing.assert_allclose(rise, 0.1, rtol=1e-10)
