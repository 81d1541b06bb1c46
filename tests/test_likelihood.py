"""The likelihood with unknown noise: the default criterion for several outputs.

docs/likelihood.md; picard_casadi/analysis/likelihood.py."""

from __future__ import annotations

import math

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.analysis.likelihood import ml_variances, noise_fit


def _oscillator():
    """Position (noise 0.01) and 100 x velocity (noise 20): outputs whose plain
    sum of squares is all velocity."""
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 3)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(x[1], -p[0] * x[0] - p[1] * x[1] + p[2]),
                     y=ca.vertcat(x[0], 100 * x[1]), p_names=["k", "c", "f"])
    t = np.linspace(0, 10, 80)
    X = pc.simulate(model, [1.0, 0.0], [2.0, 0.3, 0.5], t)
    rng = np.random.default_rng(0)
    Y = np.column_stack([X[:, 0] + 0.01 * rng.standard_normal(t.size),
                         100 * X[:, 1] + 20 * rng.standard_normal(t.size)])
    return model, pc.Experiment(t=t, y=Y)


def _profiled_nllh(model, exp, p, x0):
    """PEtab's nllh with each output's variance at its optimum, from CVODES."""
    X = pc.simulate(model, x0, p, exp.t)
    Y = pc.measure(model, exp.t, X, p, noise_std=0.0)
    r2 = (exp.y - Y) ** 2
    n = np.isfinite(exp.y).sum(axis=0)
    ssr = np.nansum(r2, axis=0)
    return float(np.sum(0.5 * n * (np.log(2 * math.pi * ssr / n) + 1)))


def test_the_likelihood_of_given_and_estimated_noise_is_petabs():
    r = [np.array([0.1, -0.2, 0.3]), np.array([2.0, -1.0])]
    ssr = np.array([float(v @ v) for v in r])
    counts = np.array([3, 2])
    known = noise_fit(ssr, counts, np.ones(2), n_quantities=4, weights=np.array([4.0, 0.25]))
    sigma = np.array([0.5, 2.0])
    by_hand = sum(0.5 * math.log(2 * math.pi * s ** 2) + 0.5 * (v / s) ** 2
                  for vals, s in zip(r, sigma) for v in vals)
    assert known.nllh == pytest.approx(by_hand, rel=1e-14)
    assert not known.estimated and np.isnan(known.det_R) and known.n_estimated == 4
    assert known.aic == pytest.approx(2 * by_hand + 8)
    assert known.bic == pytest.approx(2 * by_hand + 4 * math.log(5))
    est = noise_fit(ssr, counts, np.ones(2), n_quantities=4)
    var = ssr / counts
    assert est.sigma == pytest.approx(np.sqrt(var))
    assert est.nllh == pytest.approx(float(np.sum(0.5 * counts * (np.log(2 * math.pi * var)
                                                                  + 1))))
    assert est.det_R == pytest.approx(float(np.prod(var))) and est.n_estimated == 6
    # an exact fit has a floored variance, not log(0); an output without data none
    assert np.all(np.isfinite(ml_variances(np.zeros(2), np.array([3, 3]), np.ones(2))))
    assert np.isnan(ml_variances(np.zeros(1), np.zeros(1), np.ones(1))[0])


def test_several_outputs_are_fitted_by_the_likelihood_by_default():
    model, exp = _oscillator()
    res = pc.estimate(model, [exp], [1.5, 0.5, 0.3])
    assert res.success and res.settings["weights"] == "auto"
    assert res.settings["noise"] == "estimated" and res.settings["weight_rounds"] >= 2
    # the noise levels the data were made with, and the truth within 3 SE
    assert res.noise_sigma == pytest.approx([0.01, 20.0], rel=0.15)
    assert np.all(np.abs(res.p - [2.0, 0.3, 0.5]) < 3 * res.p_std)
    assert res.det_R == pytest.approx(float(np.prod(res.noise_sigma ** 2)))
    # its nllh is the profiled likelihood of the model's own solution, which
    # no nearby point improves on (one standard error each way, each parameter)
    at = _profiled_nllh(model, exp, res.p, res.x0[0])
    assert res.nllh == pytest.approx(at, abs=1e-6)
    for i in range(3):
        for sign in (-1, 1):
            p = res.p.copy()
            p[i] += sign * res.p_std[i]
            assert _profiled_nllh(model, exp, p, res.x0[0]) > at
    # the plain sum of squares lets the velocity decide: worse likelihood, and
    # standard errors ten times larger on the damping
    with pytest.warns(UserWarning, match=r"weights='none' pools the outputs into one noise "
                                         r"variance, but their residual levels differ by a "
                                         r"factor of \d+"):
        plain = pc.estimate(model, [exp], [1.5, 0.5, 0.3], weights="none")
    assert plain.success and plain.settings["weights"] == "none"
    assert plain.nllh > res.nllh + 50
    assert plain.p_std[1] > 5 * res.p_std[1]
    # given the noise levels as known weights, the same point is a fixed point
    known = pc.estimate(model, [exp], [1.5, 0.5, 0.3], weights=1 / res.noise_sigma ** 2)
    assert known.settings["noise"] == "given" and np.isnan(known.det_R)
    np.testing.assert_allclose(known.p, res.p, rtol=1e-4)
    assert known.nllh == pytest.approx(res.nllh, abs=1e-3)
    assert "-log likelihood" in res.summary() and "noise sigma (estimated)" in res.summary()


@pytest.mark.parametrize("method", ["ipopt", "shooting"])
def test_every_method_reaches_the_same_likelihood_optimum(method):
    model, exp = _oscillator()
    ref = pc.estimate(model, [exp], [1.5, 0.5, 0.3], uncertainty=False)
    res = pc.estimate(model, [exp], [1.5, 0.5, 0.3], method, uncertainty=False)
    assert res.success and res.settings["noise"] == "estimated", res.message
    np.testing.assert_allclose(res.p, ref.p, rtol=1e-4)
    assert res.nllh == pytest.approx(ref.nllh, abs=1e-3)


def test_one_output_keeps_its_estimate_and_reports_its_noise():
    x, k = ca.SX.sym("x"), ca.SX.sym("k", 2)
    model = pc.Model(x=x, p=k, rhs=-k[0] * x + k[1], y=x)
    exp = pc.simulate_experiment(model, [0.5], [0.7, 1.4], np.linspace(0, 10, 40),
                                 noise_std=0.05, seed=3)
    res = pc.estimate(model, [exp], [1.0, 1.0])
    plain = pc.estimate(model, [exp], [1.0, 1.0], weights="none")
    assert res.settings["weights"] == "none" and res.settings["weight_rounds"] == 1
    np.testing.assert_array_equal(res.p, plain.p)
    n = exp.t.size
    assert res.noise_sigma[0] == pytest.approx(math.sqrt(res.ssr / n), rel=1e-6)
    assert res.nllh == pytest.approx(0.5 * n * (math.log(2 * math.pi * res.ssr / n) + 1),
                                     rel=1e-6)
    assert res.aic == pytest.approx(2 * res.nllh + 2 * (2 + 1 + 1))  # p, x0, sigma


def test_the_likelihood_survives_json():
    model, exp = _oscillator()
    res = pc.estimate(model, [exp], [1.5, 0.5, 0.3], uncertainty=False)
    back = pc.EstimationResult.from_json(res.to_json())
    for name in ("nllh", "det_R", "aic", "bic"):
        assert getattr(back, name) == getattr(res, name)
    np.testing.assert_array_equal(back.noise_sigma, res.noise_sigma)
    assert back.summary() == res.summary()


def test_a_warm_start_of_a_likelihood_fit_keeps_its_noise_levels():
    model, exp = _oscillator()
    res = pc.estimate(model, [exp], [1.5, 0.5, 0.3], uncertainty=False, refine=False)
    again = pc.estimate(model, [exp], [1.5, 0.5, 0.3], uncertainty=False, refine=False,
                        warm_start=res)
    # no restart from the data's second differences: fewer rounds, few iterations
    assert again.success and again.settings["weight_rounds"] < res.settings["weight_rounds"]
    assert again.iterations <= 3
    np.testing.assert_allclose(again.p, res.p, rtol=1e-6)


def test_an_unknown_weights_word_names_the_choices():
    model, exp = _oscillator()
    with pytest.raises(ValueError, match=r"`weights` must be None, 'auto', 'none' or 2 numbers"):
        pc.estimate(model, [exp], [1.5, 0.5, 0.3], weights="likelihood")


def test_rounds_that_end_unsettled_say_so(monkeypatch):
    from picard_casadi.estimation import refinement

    monkeypatch.setattr(refinement, "_AUTO_WEIGHT_ROUNDS", 2)
    model, exp = _oscillator()
    res = pc.estimate(model, [exp], [1.5, 0.5, 0.3], uncertainty=False)
    assert any(w.startswith("the noise levels had not settled after 2 weight rounds")
               for w in res.warnings), res.warnings
    again = pc.estimate(model, [exp], [1.5, 0.5, 0.3], uncertainty=False, warm_start=res)
    assert again.success


def test_a_degenerate_likelihood_is_named():
    # a user's predator-prey with the predators measured once: its noise came
    # out 1e-6, the estimate 4 standard errors off, and no word
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 4)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(p[0] * x[0] - p[1] * x[0] * x[1],
                                              -p[2] * x[1] + p[3] * x[0] * x[1]),
                     y=x, y_names=["prey", "predators"])
    t = np.linspace(0, 15, 40)
    X = pc.simulate(model, [2.0, 1.0], [1.0, 0.5, 0.8, 0.3], t)
    Y = X + np.random.default_rng(3).standard_normal(X.shape) * [0.02, 0.3]
    Y[:, 1] = np.nan
    Y[30, 1] = X[30, 1] + 0.1
    res = pc.estimate(model, [pc.Experiment(t=t, y=Y)], [0.8, 0.4, 1.0, 0.4],
                      uncertainty=False)
    assert any(w.startswith("the likelihood with each output's noise estimated is degenerate")
               and "predators (1 value(s)" in w for w in res.warnings), res.warnings
    assert "criterion: the likelihood, each output's noise estimated" in res.summary()
    assert any("weights=[1 / sigma_k^2" in w for w in res.warnings)
    # with noise models, whose fit refuses weights=, the advice is the model's
    modelled = pc.estimate(model, [pc.Experiment(t=t, y=Y)], [0.8, 0.4, 1.0, 0.4],
                           noise=[pc.Noise(), pc.Noise()], uncertainty=False)
    note = next(w for w in modelled.warnings if "is degenerate" in w)
    assert "pc.Noise(sigma=...)" in note and "weights=" not in note
    # outputs all measured alike: no note
    fine = pc.estimate(model, [pc.Experiment(t=t, y=X + 0.01 * np.random.default_rng(4)
                                             .standard_normal(X.shape))],
                       [0.8, 0.4, 1.0, 0.4], uncertainty=False)
    assert not any("degenerate" in w for w in fine.warnings), fine.warnings


def test_an_intermediate_round_moves_the_weights_with_the_steps(monkeypatch):
    """picard-gn's intermediate weight rounds re-estimate the noise weights
    after every accepted step; the rounds' fixed point, the likelihood's
    optimum, is the one the rounds with fixed weights reach."""
    from picard_casadi.estimation import refinement

    model, exp = _oscillator()
    calls = []
    made = refinement._reweighting

    def counted(prob, setup):
        inner = made(prob, setup)

        def reweight(X, U, p):
            calls.append(setup.tr.weights.copy())
            inner(X, U, p)
        return reweight

    monkeypatch.setattr(refinement, "_reweighting", counted)
    moving = pc.estimate(model, [exp], [1.5, 0.5, 0.3], uncertainty=False)
    assert moving.success and moving.settings["weight_rounds"] >= 2
    assert len(calls) >= 2 and not np.allclose(calls[0], calls[-1])
    monkeypatch.setattr(refinement, "_reweighting", lambda prob, setup: None)
    fixed = pc.estimate(model, [exp], [1.5, 0.5, 0.3], uncertainty=False)
    assert fixed.success
    np.testing.assert_allclose(moving.p, fixed.p, rtol=1e-5)
    np.testing.assert_allclose(moving.weights, fixed.weights, rtol=1e-3)
    assert moving.nllh == pytest.approx(fixed.nllh, abs=1e-6)


def test_a_round_after_a_converged_solve_starts_with_its_penalty(monkeypatch):
    """Each weight round continues a converged solve: it starts with the
    continuity penalty that solve ended with (at most CONTINUING_PENALTY),
    not the first solve's 2 lam, which let the rounds reopen the closed gaps
    (PEtab's Boehm: 20 to 30 iterations a round); the optimum is the one
    the rounds reach from 2 lam."""
    from picard_casadi.methods import condensed, picard_gn

    model, exp = _oscillator()
    starts, ends = [], []
    made = condensed.ConstrainedGaussNewtonStep.__init__

    def recorded(self, setup, *args, **kwargs):
        made(self, setup, *args, **kwargs)
        starts.append(self.rho)
        ends.append(self)

    monkeypatch.setattr(condensed.ConstrainedGaussNewtonStep, "__init__", recorded)
    carried = pc.estimate(model, [exp], [1.5, 0.5, 0.3], uncertainty=False)
    assert carried.success and carried.settings["weight_rounds"] >= 2
    lam = picard_gn.PicardGNOptions().lam
    assert starts[0] == 2 * lam
    # each round starts where the solve before it ended, capped
    for before, start in zip(ends[:-1], starts[1:]):
        assert start == max(2 * lam, min(before.rho, picard_gn.CONTINUING_PENALTY))
    assert max(starts[1:]) > 2 * lam
    monkeypatch.setattr("picard_casadi.methods.CONTINUING_PENALTY", 0.0)  # the name the solve reads
    starts.clear()
    ends.clear()
    fresh = pc.estimate(model, [exp], [1.5, 0.5, 0.3], uncertainty=False)
    assert fresh.success and set(starts) == {2 * lam}
    np.testing.assert_allclose(carried.p, fresh.p, rtol=1e-5)
    assert carried.nllh == pytest.approx(fresh.nllh, abs=1e-6)
