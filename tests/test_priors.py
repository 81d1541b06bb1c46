"""Parameter priors (``pc.Parameter(prior=...)``, PEtab's objectivePriorType).

A normal prior is a measurement of the parameter: on ``x' = a`` (``x = a t``)
observed with known noise, the posterior's mode, its curvature and its
``-log`` density are closed-form.
"""

from __future__ import annotations

import math

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc

T = np.linspace(0.0, 2.0, 9)
SIGMA = 0.1


def ramp() -> pc.Model:
    x, a = ca.SX.sym("x"), ca.SX.sym("a")
    return pc.Model(x=x, p=a, rhs=a, y=x, x0=[0.0], p_names=["a"])


def data(seed: int = 0) -> np.ndarray:
    return 1.3 * T + SIGMA * np.random.default_rng(seed).standard_normal(T.size)


def test_a_normal_prior_gives_the_posterior_s_mode_and_curvature():
    y = data()
    m, s = 1.0, 0.05  # a prior as sharp as the data
    res = pc.estimate(ramp(), [pc.Experiment(T, y)],
                      [pc.Parameter("a", 1.0, prior=("normal", m, s))], noise=pc.Noise(sigma=SIGMA))
    assert res.success, res.message
    info = np.sum(T ** 2) / SIGMA ** 2 + 1 / s ** 2
    mode = (np.sum(T * y) / SIGMA ** 2 + m / s ** 2) / info
    assert res.p[0] == pytest.approx(mode, abs=1e-6)
    assert res.p_std[0] == pytest.approx(1 / math.sqrt(info), rel=1e-4)
    terms = np.r_[(y[1:] - mode * T[1:]) / SIGMA, (mode - m) / s]  # x(0) = 0 is known: y[0] too
    const = np.r_[np.full(T.size, math.log(2 * math.pi * SIGMA ** 2)),
                  math.log(2 * math.pi * s ** 2)]
    expected = 0.5 * np.sum(terms ** 2) + 0.5 * ((y[0] - 0.0) / SIGMA) ** 2 + 0.5 * np.sum(const)
    assert res.nllh == pytest.approx(expected, abs=1e-6)


def test_a_prior_on_the_log_scale_is_a_measurement_of_the_logarithm():
    y = data(1)
    m, s = math.log10(1.0), 0.02  # log10(a) ~ N(0, 0.02): a pulled towards 1
    table = [pc.Parameter("a", 1.0, (1e-3, 1e3), "log10", prior=("parameterScaleNormal", m, s))]
    res = pc.estimate(ramp(), [pc.Experiment(T, y)], table, noise=pc.Noise(sigma=SIGMA))
    assert res.success, res.message

    def posterior(a: float) -> float:
        return (0.5 * np.sum(((y - a * T) / SIGMA) ** 2)
                + 0.5 * ((math.log10(a) - m) / s) ** 2)

    a = float(res.p[0])
    h = 1e-6
    assert abs(posterior(a + h) - posterior(a - h)) / (2 * h) < 1e-3
    free = pc.estimate(ramp(), [pc.Experiment(T, y)],
                       [pc.Parameter("a", 1.0, (1e-3, 1e3), "log10")], noise=pc.Noise(sigma=SIGMA))
    assert 1.0 < a < free.p[0]  # between the prior's and the data's
    assert res.p_scaled_std[0] < free.p_scaled_std[0]


def test_a_prior_with_estimated_noise_and_several_experiments():
    """The default noise (estimated) for the data, the prior's known sd; the
    prior measured once however many experiments."""
    e1, e2 = pc.Experiment(T, data(2), name="one"), pc.Experiment(T, data(3), name="two")
    res = pc.estimate(ramp(), [e1, e2], [pc.Parameter("a", 1.0, prior=("normal", 1.3, 0.5))])
    assert res.success, res.message
    wide = pc.estimate(ramp(), [e1, e2], [pc.Parameter("a", 1.0)])
    # a wide prior barely moves the estimate; the nllh gains about its constant
    assert res.p[0] == pytest.approx(wide.p[0], abs=0.1 * wide.p_std[0])
    gain = 0.5 * math.log(2 * math.pi * 0.5 ** 2)
    assert res.nllh - wide.nllh == pytest.approx(gain, abs=0.05)


@pytest.mark.parametrize("prior, match", [
    (("laplace", 0.0, 1.0), "laplace"),
    (("normal", 0.0, 0.0), "standard deviation positive"),
    (("normal", 1.0), "kind, mean, standard deviation"),
])
def test_a_prior_that_cannot_be_used_names_it(prior, match):
    with pytest.raises(ValueError, match=match):
        pc.Parameter("a", 1.0, prior=prior)


def test_priors_and_weights_cannot_be_mixed():
    with pytest.raises(ValueError, match="weights"):
        pc.estimate(ramp(), [pc.Experiment(T, data())],
                    [pc.Parameter("a", 1.0, prior=("normal", 1.0, 0.1))], weights=[1.0])


def test_a_prior_s_minus_log_density_on_its_scale():
    q = pc.Parameter("KD", 100.0, scale="log10", prior=("parameterScaleNormal", 1.5, 0.2))
    assert q.prior_nllh() == pytest.approx(0.5 * (0.5 / 0.2) ** 2
                                           + 0.5 * math.log(2 * math.pi * 0.04))
    linear = pc.Parameter("k", 2.0, prior=("normal", 1.0, 0.5))
    assert linear.prior_nllh(3.0) == pytest.approx(0.5 * 16.0 + 0.5 * math.log(2 * math.pi / 4))
    assert pc.Parameter("c", 1.0).prior_nllh() == 0.0
