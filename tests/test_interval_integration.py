"""The inputs of the accurate per-interval integration (certificate, shooting)."""

from __future__ import annotations

import numpy as np

from picard_casadi.transcription.interval_integration import _interval_inputs
from picard_casadi.simulate import _input_coefficients


class _Inputs:
    """An experiment's ``inputs(t, nu)``: a slow cosine, a fast one, a step at 2.5."""

    def inputs(self, t, nu):
        t = np.asarray(t, float)
        return np.stack([np.cos(t), np.cos(40.0 * t), np.where(t >= 2.5, 1.0, 0.0)],
                        axis=1)[:, :nu]


def test_each_interval_gets_the_lowest_degree_that_reproduces_its_inputs():
    exp = _Inputs()
    t0 = np.array([0.0, 1.0, 2.0, 3.0])
    h = np.full(4, 1.0)
    slow = _interval_inputs(exp, t0, h, 1)
    assert [fit[0] for fit in slow] == [16, 16, 16, 16]
    # the same coefficients as fitting each interval on its own
    for i, (d, coef) in enumerate(slow):
        bounds = np.array([t0[i], t0[i] + h[i]])
        alone = _input_coefficients(lambda tt: exp.inputs(tt, 1), bounds, 1, d)[:, 0]
        np.testing.assert_allclose(coef, alone, rtol=0, atol=1e-15)
    # cos(40 t) needs degree 64 on a unit interval
    assert [fit[0] for fit in _interval_inputs(exp, t0, h, 2)] == [64, 64, 64, 64]
    # the step inside [2, 3] is reproduced by no polynomial: that interval is None
    step = _interval_inputs(exp, np.array([0.0, 2.0, 3.0]), np.ones(3), 3)
    assert step[0][0] == 64 and step[1] is None and step[2][0] == 64
    # no inputs: the lowest degree, no coefficients
    assert all(d == 16 and c.size == 0 for d, c in _interval_inputs(exp, t0, h, 0))


def test_interval_integrator_is_reused_on_the_same_mesh_only():
    """Repeated certificates on one mesh share the integrator; another mesh or
    tolerance builds its own, and the reused one gives the same states."""
    from picard_casadi.transcription.interval_integration import interval_integrator

    import casadi as ca

    import picard_casadi as pc
    from picard_casadi.transcription.discretisation import Discretisation

    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    m = pc.Model(x=x, p=k, rhs=-k * x, name="decay")
    t = np.linspace(0.0, 2.0, 21)
    exp = pc.Experiment(t=t, y=np.exp(-t)[:, None])
    d1 = Discretisation(m, [exp], T=0.5, nodes=5, scheme="chebyshev")
    d2 = Discretisation(m, [exp], T=0.5, nodes=5, scheme="chebyshev")
    d3 = Discretisation(m, [exp], T=0.25, nodes=5, scheme="chebyshev")
    a = interval_integrator(d1, 1e-10, 1e-12, 10000)
    assert interval_integrator(d2, 1e-10, 1e-12, 10000) is a
    assert interval_integrator(d3, 1e-10, 1e-12, 10000) is not a
    assert interval_integrator(d1, 1e-8, 1e-12, 10000) is not a
    X = np.exp(-d1.t0)[:, None]
    Xs, xend = a(X, np.array([1.0]))
    assert np.allclose(xend[:, 0], np.exp(-(d1.t0 + d1.h)), rtol=1e-7)
