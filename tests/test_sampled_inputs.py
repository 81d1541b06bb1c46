"""Sampled inputs: interpolated linearly unless the experiment declares a hold.

Holding samples of a smooth input delays it by about half a sample; the
parameters absorb the delay with residuals at the noise level, so the default
must be the interpolation that is right for a smooth signal.
"""
from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc


def _forced_oscillator() -> pc.Model:
    x = ca.SX.sym("x", 2)
    p = ca.SX.sym("p", 2)
    u = ca.SX.sym("u", 1)
    return pc.Model(x=x, p=p, u=u, y=x[0:1],
                    rhs=ca.vertcat(x[1], -p[0] * x[0] - p[1] * x[1] + u[0]))


def _smooth_input(s: float) -> np.ndarray:
    return np.array([np.sin(1.3 * s) + 0.5 * np.cos(0.4 * s)])


P_TRUE = np.array([4.0, 0.5])


@pytest.fixture(scope="module")
def sampled_problem():
    model = _forced_oscillator()
    t = np.linspace(0.0, 10.0, 61)
    made = pc.simulate_experiment(model, [0.2, 0.0], P_TRUE, t, _smooth_input,
                                  noise_std=0.02, seed=3)
    samples = np.array([_smooth_input(s) for s in t])
    return model, t, made.y, samples


def test_default_interpolates_and_recovers_the_truth(sampled_problem):
    model, t, y, samples = sampled_problem
    exp = pc.Experiment(t, y, u=samples, x0=[0.2, 0.0])
    assert exp.u_interpolation == "linear"
    res = pc.estimate(model, [exp], p0=[2.0, 1.0])
    assert res.success
    assert np.all(np.abs(res.p - P_TRUE) < 3.0 * res.p_std), (res.p, res.p_std)


def test_holding_a_smooth_input_biases_the_fit(sampled_problem):
    # The case the default guards against: were the default a hold, the test
    # above would see this bias.  It stays invisible to the residuals.
    model, t, y, samples = sampled_problem
    exp = pc.Experiment(t, y, u=samples, x0=[0.2, 0.0], u_interpolation="previous")
    res = pc.estimate(model, [exp], p0=[2.0, 1.0])
    assert res.success
    assert np.max(np.abs(res.p - P_TRUE) / res.p_std) > 4.0


def test_simulate_experiment_keeps_its_held_input():
    model = _forced_oscillator()
    t = np.linspace(0.0, 4.0, 21)
    samples = np.array([_smooth_input(s) for s in t])
    exp = pc.simulate_experiment(model, [0.2, 0.0], P_TRUE, t, samples, noise_std=0.0)
    assert exp.u_interpolation == "previous"
    np.testing.assert_allclose(exp.breakpoints, t[1:-1])  # the interior samples
    again = pc.simulate(model, [0.2, 0.0], P_TRUE, t, exp)
    np.testing.assert_allclose(again[:, 0], exp.y[:, 0], rtol=1e-6, atol=1e-8)
