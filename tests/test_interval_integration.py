"""The inputs of the accurate per-interval integration (certificate, shooting)."""

from __future__ import annotations

import numpy as np

from picard_casadi.interval_integration import _interval_inputs
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
