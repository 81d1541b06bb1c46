"""The bands of a fit's outputs (``pc.prediction_band``), by the delta method.

Checked against ordinary least squares' closed form on a model linear in its
unknowns (where the delta method is exact), against the delta method by
finite differences of ``res.predict`` with the parameters' covariance on a
restated nonlinear fit (a log10 rate, an initial state from a parameter),
and by coverage: over repeated data sets the 95 % band holds the true output
about 95 % of the time.
"""

from __future__ import annotations

from typing import Any

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc


def _ramp() -> pc.Model:
    """``x' = b``, ``x(0) = a``: ``y = a + b t``."""
    x, b = ca.SX.sym("x"), ca.SX.sym("b")
    return pc.Model(x=x, p=b, rhs=b, y=x, x_names=["x"], p_names=["b"])


def _decay() -> pc.Model:
    """``x' = -k x``, ``x(0) = A``."""
    x, k, A = ca.SX.sym("x"), ca.SX.sym("k"), ca.SX.sym("A")
    return pc.Model(x=x, p=ca.vertcat(k, A), rhs=-k * x, y=x, x0=[A], x_names=["x"],
                    p_names=["k", "A"])


DECAY_TABLE = [pc.Parameter("k", 1.0, (1e-3, 1e2), "log10"), pc.Parameter("A", 1.0, (0, 10))]


def test_a_straight_line_s_band_is_least_squares_own():
    t = np.linspace(0, 4, 21)
    y = 1.0 + 0.5 * t + 0.1 * np.random.default_rng(0).standard_normal(t.size)
    res = pc.estimate(_ramp(), [pc.Experiment(t, y, x0=[0.8])], [0.3],
                      noise=pc.Noise(sigma=0.1))
    at = np.array([0.0, 2.0, 6.0])  # 6: beyond the data
    X = np.column_stack([np.ones_like(t), t])
    cov = 0.01 * np.linalg.inv(X.T @ X)
    ols = np.sqrt([np.array([1.0, s]) @ cov @ np.array([1.0, s]) for s in at])
    band = pc.prediction_band(res, 0, at)
    assert band.std.ravel() == pytest.approx(ols, rel=1e-6)
    assert band.y.ravel() == pytest.approx(res.predict(0, at).ravel(), rel=1e-9)
    assert band.upper.ravel() == pytest.approx(band.y.ravel() + 1.959964 * ols, rel=1e-6)
    new = pc.prediction_band(res, "experiment", at, noise=True, level=0.9)
    assert new.std.ravel() == pytest.approx(np.sqrt(ols ** 2 + 0.01), rel=1e-6)
    assert new.lower.ravel() == pytest.approx(new.y.ravel() - 1.644854 * new.std.ravel(),
                                              rel=1e-6)
    assert new.noise and new.level == 0.9 and new.y_names == ["x"]
    # by default at the experiment's own samples
    assert pc.prediction_band(res).t == pytest.approx(t)


def test_a_restated_fit_s_band_is_the_delta_method_of_its_parameters():
    """k on a log10 scale and x(0) = A: the band from the estimation scale's
    covariance and the exact sensitivities equals the delta method of the
    user's parameters (``p_cov``) by central differences of ``simulate``."""
    model = _decay()
    t = np.linspace(0, 4, 15)
    y = 2.0 * np.exp(-0.7 * t) + 0.05 * np.random.default_rng(1).standard_normal(t.size)
    res = pc.estimate(model, [pc.Experiment(t, y)], DECAY_TABLE)  # the noise estimated
    assert res.success, res.message
    at = np.array([0.0, 1.0, 3.0, 6.0])

    def outputs(theta: np.ndarray) -> np.ndarray:
        return pc.simulate(model, [theta[1]], theta, at, rtol=1e-12)[:, 0]

    steps = 1e-5 * np.abs(res.p)
    J = np.column_stack([(outputs(res.p + h) - outputs(res.p - h)) / (2 * h.sum())
                         for h in np.diag(steps)])
    by_differences = np.sqrt(np.einsum("ia,ab,ib->i", J, res.p_cov, J))
    assert pc.prediction_band(res, 0, at).std.ravel() == pytest.approx(by_differences,
                                                                       rel=1e-4)


def test_each_experiment_s_band_has_its_own_initial_states():
    """Two runs of the decay from their own estimated x(0): at t = 0 each
    band's standard deviation is its own x0's standard error."""
    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    model = pc.Model(x=x, p=k, rhs=-k * x, y=x, x_names=["x"], p_names=["k"])
    t = np.linspace(0, 3, 12)
    rng = np.random.default_rng(2)
    exps = [pc.Experiment(t, a * np.exp(-0.5 * t) + 0.02 * rng.standard_normal(t.size),
                          name=n) for a, n in ((1.0, "low"), (3.0, "high"))]
    res = pc.estimate(model, exps, [1.0], noise=pc.Noise(sigma=0.02))
    for e in range(2):
        band = pc.prediction_band(res, exps[e].name, [0.0])
        assert band.std[0, 0] == pytest.approx(res.x0_std[e][0], rel=1e-6)


def test_the_95_percent_band_holds_the_true_output_95_percent_of_the_time():
    model = _decay()
    t = np.linspace(0, 4, 10)
    at = np.array([0.5, 2.0, 5.0])
    truth = 2.0 * np.exp(-0.7 * at)
    rng = np.random.default_rng(3)
    inside = []
    for _ in range(60):
        y = 2.0 * np.exp(-0.7 * t) + 0.05 * rng.standard_normal(t.size)
        res = pc.estimate(model, [pc.Experiment(t, y)], DECAY_TABLE,
                          noise=pc.Noise(sigma=0.05), codegen=False)
        band = pc.prediction_band(res, 0, at)
        inside.append((band.lower[:, 0] <= truth) & (truth <= band.upper[:, 0]))
    coverage = np.mean(inside, axis=0)
    # 60 data sets: a binomial standard deviation of 2.8 %
    assert np.all(coverage >= 0.85) and np.all(coverage <= 1.0), coverage


def test_no_band_where_it_cannot_be_said(tmp_path):
    model = _decay()
    t = np.linspace(0, 4, 15)
    y = 2.0 * np.exp(-0.7 * t)
    res = pc.estimate(model, [pc.Experiment(t, y + 0.01 * np.sin(7 * t))], DECAY_TABLE,
                      noise=pc.Noise(sigma=0.01))
    with pytest.raises(ValueError, match=r"`level` must be a probability in \(0, 1\)"):
        pc.prediction_band(res, 0, level=95)
    with pytest.raises(ValueError, match=r"is before experiment 'experiment' starts"):
        pc.prediction_band(res, 0, [-1.0])
    with pytest.raises(ValueError, match=r"exp_index: 1 is no experiment's index; the fit "
                                         r"has 1, 0 to 0: \['experiment'\]"):
        pc.prediction_band(res, 1)  # (an IndexError from inside)
    bare = pc.estimate(model, [pc.Experiment(t, y)], DECAY_TABLE, noise=pc.Noise(sigma=0.01),
                       uncertainty=False)
    with pytest.raises(ValueError, match=r"no band for this result: it has no standard "
                                         r"errors"):
        pc.prediction_band(bare)
    # read from JSON with its model attached: that cause, and the route (a
    # biochemist was told "no standard errors ... or no model attached")
    path = tmp_path / "fit.json"
    res.to_json(str(path))
    read = pc.EstimationResult.from_json(str(path), model=model,
                                         experiments=[pc.Experiment(t, y)])
    with pytest.raises(ValueError, match=r"it was read from JSON .* refit in this session"):
        pc.prediction_band(read, 0)
    # a new run's band needs the parameters' covariance alone, which the JSON
    # keeps (on the linear scale; k was estimated on log10): the session's (a
    # CLI user's band for a new force record was refused)
    new_run = pc.Experiment(np.linspace(0, 6, 13), None)
    for noise in (False, True):
        kept, here = (pc.prediction_band(r, new_run, noise=noise) for r in (read, res))
        assert np.allclose(kept.std, here.std, rtol=1e-6) and np.allclose(kept.y, here.y)
    # noise given per measurement: no one noise level for a new one
    per_sample = pc.estimate(model, [pc.Experiment(t, y, sigma=np.full(t.size, 0.01))],
                             DECAY_TABLE, noise=pc.Noise(sigma="data"))
    pc.prediction_band(per_sample)  # the mean's band needs none
    with pytest.raises(ValueError, match=r"noise=True needs one noise level per output"):
        pc.prediction_band(per_sample, noise=True)


def test_an_output_that_moves_with_an_undetermined_quantity_is_unbounded():
    """The data see ``c`` only while it is switched on (t < 2): a prediction
    after it is unbounded (inf), one before it keeps its band; a rate and a
    gain the data see only as their product give a bounded band (the output
    does not move along their undetermined ratio)."""
    x, a, b, c, u = (ca.SX.sym(n) for n in ("x", "a", "b", "c", "u"))
    t = np.linspace(0, 4, 15)
    y = 2.0 * np.exp(-0.7 * t) + 0.01 * np.sin(7 * t)
    twice = pc.Model(x=x, p=ca.vertcat(a, b), rhs=-a * b * x, y=x, x_names=["x"],
                     p_names=["a", "b"])
    flat = pc.estimate(twice, [pc.Experiment(t, y, x0=[2.0])], [1.0, 0.5],
                       noise=pc.Noise(sigma=0.01), estimate_x0=False)
    assert any("the data do not determine" in w for w in flat.warnings)
    band = pc.prediction_band(flat, 0, [1.0, 6.0])
    assert np.all(np.isfinite(band.std)) and np.all(band.std > 0)
    # c acts only after t = 5, beyond the data (an input switches it on)
    late = pc.Model(x=x, p=ca.vertcat(a, c), u=u, rhs=-a * x + c * u, y=x, x_names=["x"],
                    p_names=["a", "c"], u_names=["u"])
    switch = pc.Experiment(t, y, u=lambda s: [float(s >= 5.0)], x0=[2.0], breakpoints=[5.0])
    res = pc.estimate(late, [switch], [1.0, 0.5], noise=pc.Noise(sigma=0.01),
                      estimate_x0=False)
    assert any("the data do not determine c" in w for w in res.warnings)
    band = pc.prediction_band(res, 0, [1.0, 4.0, 6.0])
    assert np.all(np.isfinite(band.std[:2])) and np.isinf(band.std[2, 0])


def test_fit_png_shades_the_band_where_there_is_one():
    from picard_casadi.io.plotting import plot_fit

    t = np.linspace(0, 4, 21)
    y = 1.0 + 0.5 * t + 0.1 * np.random.default_rng(0).standard_normal(t.size)
    exp = pc.Experiment(t, y, x0=[0.8])
    res = pc.estimate(_ramp(), [exp], [0.3], noise=pc.Noise(sigma=0.1))
    fig = plot_fit(res, _ramp(), [exp])
    ax = {a.get_gid(): a for a in fig.axes}["fit:0:0"]
    (shade,) = [c for c in ax.collections if c.get_label() == "95 % confidence band"]
    # its edges: the band's, interpolated from 50 times (exact for a line)
    edges = shade.get_paths()[0].vertices
    band = pc.prediction_band(res, 0, [4.0])
    assert np.max(edges[:, 1]) == pytest.approx(band.upper[0, 0], rel=1e-6)
    assert "95 % confidence band of the fit" in [t.get_text() for t in fig.legends[0].texts]
    bare = plot_fit(res, _ramp(), [exp], band=False)
    assert not {a.get_gid(): a for a in bare.axes}["fit:0:0"].collections


def _plant() -> pc.Model:
    x, u = ca.SX.sym("x"), ca.SX.sym("u")
    k, b = ca.SX.sym("k"), ca.SX.sym("b")
    return pc.Model(x=x, p=ca.vertcat(k, b), u=u, rhs=(b * u - x) / k, y=x, name="plant",
                    p_names=["k", "b"], u_names=["u"])


def test_a_forecast_takes_the_inputs_past_the_data():
    # a held input over 40 samples, then 20 more samples of it the fit never
    # saw: predict and the band integrate through them, as a simulation of
    # the whole record does (held at its last value they would not)
    model = _plant()
    t = np.arange(61.0)
    u = np.where((t // 7) % 2 == 0, 1.0, -0.5)
    truth = pc.simulate(model, [0.3], [4.0, 2.0], t, u, u_interpolation="previous")[:, 0]
    rng = np.random.default_rng(1)
    exps = [pc.Experiment(t=t[:41], y=truth[:41] + 0.02 * rng.standard_normal(41), u=u[:41],
                          u_interpolation="previous", name=name) for name in ("a", "b")]
    for res in (pc.estimate(model, exps[:1], [3.0, 1.0]),
                # restated: log10 k, a gain per run (the inputs pass through)
                pc.estimate(model, exps, [3.0, 1.0], parameter_scale=["log10", "lin"],
                            per_experiment="b")):
        whole = pc.simulate(model, res.x0[0], res.model_parameters(model, experiment="a"),
                            t, u, u_interpolation="previous")[40:]
        ahead = res.predict(0, t[40:], u=u[40:])
        band = pc.prediction_band(res, 0, t[40:], u=u[40:])
        assert np.allclose(ahead[:, 0], whole[:, 0], rtol=1e-6, atol=1e-8)
        assert np.allclose(band.y, ahead, rtol=1e-6, atol=1e-8)
        assert np.all(np.isfinite(band.std)) and np.all(band.std > 0)
        # a callable gives the same; without u the inputs are held, and it says so
        called = res.predict(0, t[40:], u=lambda s: np.where((s // 7) % 2 == 0, 1.0, -0.5))
        assert np.allclose(called, ahead, rtol=1e-6, atol=1e-8)
        with pytest.warns(UserWarning, match="held at their last values"):
            held = pc.prediction_band(res, 0, t[40:])
        assert np.max(np.abs(held.y - band.y)) > 0.5
        # a new input profile over the fitted record is that record's (a
        # bioprocess engineer's new feed came back as the fitted run): said
        with pytest.warns(UserWarning, match=r"`u` acts past the last input sample of "
                                             r"experiment 'a' \(t = 40\) only: at the 40 "
                                             r"time\(s\) of `t` before it"):
            over = pc.prediction_band(res, 0, t, u=-u)
        later = pc.prediction_band(res, 0, t[40:], u=-u[40:])
        assert np.allclose(over.y[40:], later.y, rtol=1e-6, atol=1e-8)
    with pytest.raises(ValueError, match=r"`u` must hold the model's 1 input\(s\) at each of "
                                         r"the 21 times"):
        res.predict(0, t[40:], u=u[41:])
    bad = u[40:].copy()
    bad[5] = np.nan
    with pytest.raises(ValueError, match="`u` is not finite at t = 45"):
        pc.prediction_band(res, 0, t[40:], u=bad)


def test_a_forecast_carries_a_short_sampled_pulse_of_the_data():
    """A hammer's 4 ms blow sampled at 1 kHz, read linearly: the forecast's
    integration restarted only at the breakpoints, stepped over the blow,
    and started the forecast from rest (u = 0 after the data gave 0 where the
    held forecast gave the free decay).  A smooth forecast given as samples
    for an experiment whose inputs are a callable is held, and says so."""
    x, p, f = ca.SX.sym("x", 2), ca.SX.sym("p", 2), ca.SX.sym("f")
    model = pc.Model(x=x, p=p, u=f, rhs=ca.vertcat(x[1], f - p[0] * x[1] - p[1] * x[0]),
                     y=x[0])
    t = np.arange(0.0, 2.0005, 0.001)
    blow = np.where((t > 0.1) & (t < 0.104), 100.0 * np.sin(np.pi * (t - 0.1) / 0.004), 0.0)
    truth = pc.simulate(model, [0.0, 0.0], [0.5, 400.0], t, blow, u_interpolation="linear",
                        breakpoints=t)
    exp = pc.Experiment(t=t, y=truth[:, 0] + 1e-5 * np.random.default_rng(0).normal(size=t.size),
                        u=blow, x0=[0.0, 0.0])
    ahead = np.arange(2.0, 2.5, 0.01)
    # plain, and restated (at rest before, settled: the user's inputs wrapped)
    for res in (pc.estimate(model, exp, [0.4, 380.0], estimate_x0=False),
                pc.estimate(model, exp.replaced(preequilibration=pc.Preequilibration()),
                            [0.4, 380.0], estimate_x0=False)):
        with pytest.warns(UserWarning, match="held at their last values"):
            held = res.predict(0, ahead)
        quiet = res.predict(0, ahead, u=np.zeros(ahead.size))
        assert np.max(np.abs(held)) > 1e-3 and np.allclose(quiet, held, rtol=1e-5, atol=1e-9)
    # a callable experiment's forecast samples of a sine: held, said
    called = exp.replaced(u=lambda s: [0.0], breakpoints=None)
    res_c = pc.estimate(model, called, [0.4, 380.0], estimate_x0=False)
    with pytest.warns(UserWarning, match="`u` as samples is held from each to the next"):
        res_c.predict(0, ahead, u=np.sin(10.0 * ahead))


def test_a_forecast_dose_from_the_last_sample_on_is_held_from_there():
    # a pharmacologist's redose at the trough sample (the last data time, 24
    # h): the row there counted as the data's own, and the infusion's first
    # hour was lost; an experiment whose inputs are a callable has no reading
    # of samples, and the 1-h infusion read linearly was a ramp
    x, k, rate = ca.SX.sym("x"), ca.SX.sym("k"), ca.SX.sym("rate")
    model = pc.Model(x=x, p=k, u=rate, rhs=rate - k * x, y=x)
    infusion = lambda s: [10.0 if s < 1.0 else 0.0]  # noqa: E731
    t = np.linspace(0.5, 24, 48)
    truth = pc.simulate(model, [0.0], [0.3], t, infusion, t0=0.0, breakpoints=[1.0])[:, 0]
    exp = pc.Experiment(t=t, y=truth * np.exp(0.02 * np.random.default_rng(0).normal(size=48)),
                        u=infusion, breakpoints=[1.0], x0=[0.0], t0=0.0)
    res = pc.estimate(model, exp, [0.5], noise="log-normal", estimate_x0=False)
    ahead = np.arange(24.0, 30.0, 0.5)
    dose = np.where(ahead < 25.0, 10.0, 0.0)
    fc = np.exp(res.predict(0, ahead, u=dose)[:, 0])
    whole = lambda s: [10.0 if s < 1.0 or 24.0 <= s < 25.0 else 0.0]  # noqa: E731
    exact = pc.simulate(model, [0.0], res.p, np.r_[0.0, ahead], whole,
                        breakpoints=[1.0, 24.0, 25.0])[1:, 0]
    assert np.allclose(fc, exact, rtol=1e-5)


def test_a_result_pickles_without_its_model_s_closures():
    # "Can't pickle local object 'simulation_predictor.<locals>.predict'" (a
    # pharmacologist's restated fit; any fit did): the data pickle, predict
    # then needs the model attached, as from JSON
    import pickle

    res = pc.estimate(_decay(), pc.Experiment(t=np.linspace(0, 3, 12),
                                              y=np.exp(-np.linspace(0, 3, 12))),
                      [0.5, 1.0], parameter_scale=["log10", "lin"])
    back = pickle.loads(pickle.dumps(res))
    assert np.array_equal(back.p, res.p) and np.array_equal(back.p_std, res.p_std)
    with pytest.raises(RuntimeError, match="no model attached"):
        back.predict(0)
    # a new run, from a result without its model: the fix named (a ship
    # engineer's res.predict(Experiment) was told of prediction_band alone)
    new = pc.Experiment(t=np.linspace(0, 1, 5), y=None)
    with pytest.raises(ValueError, match=r"predict: this result has no model attached .*"
                                         r"EstimationResult\.from_json\(path, model="):
        back.predict(new)


def test_a_new_run_s_band_is_the_parameters_alone():
    """A run not fitted, ``Experiment(t, None, x0=...)``: on the straight
    line its initial state is known, so its band is ``t sd(b)``, least
    squares' own, and with the noise ``sqrt(t^2 var(b) + sigma^2)``."""
    t = np.linspace(0, 4, 21)
    y = 1.0 + 0.5 * t + 0.1 * np.random.default_rng(0).standard_normal(t.size)
    res = pc.estimate(_ramp(), [pc.Experiment(t, y, x0=[0.8])], [0.3],
                      noise=pc.Noise(sigma=0.1))
    X = np.column_stack([np.ones_like(t), t])
    var_b = 0.01 * np.linalg.inv(X.T @ X)[1, 1]
    at = np.array([0.0, 2.0, 6.0])
    new = pc.Experiment(at, None, x0=[3.0], name="tomorrow")
    band = pc.prediction_band(res, new)
    assert band.y.ravel() == pytest.approx(3.0 + res.p[0] * at, rel=1e-8)
    assert band.std.ravel() == pytest.approx(at * np.sqrt(var_b), rel=1e-6, abs=1e-12)
    noisy = pc.prediction_band(res, new, noise=True)
    assert noisy.std.ravel() == pytest.approx(np.sqrt(at ** 2 * var_b + 0.01), rel=1e-6)
    assert res.predict(new).ravel() == pytest.approx(band.y.ravel(), rel=1e-10)


def _gain_model() -> pc.Model:
    """``x' = -k x + b u``, ``x(0) = A``: ``b`` a constant of each run."""
    x, k, b, A, u = (ca.SX.sym(n) for n in ("x", "k", "b", "A", "u"))
    return pc.Model(x=x, p=ca.vertcat(k, b, A), rhs=-k * x + b * u, y=x, u=u, x0=[A],
                    x_names=["x"], p_names=["k", "b", "A"])


def test_a_new_run_of_a_restated_fit_follows_its_constants_and_initial_states():
    """Two runs with the constant ``b`` of each (1 and 2), ``k`` on a log10
    scale, ``x(0) = A``: a new run with ``b = 2`` has the fitted second
    run's band; one with ``b = 3`` the delta method of the user's
    parameters by central differences of ``simulate``."""
    model, t = _gain_model(), np.linspace(0, 5, 26)
    rng = np.random.default_rng(4)

    def run(b: float, name: str, theta: Any = (0.7, 2.0), times: Any = t) -> Any:
        clean = pc.simulate(model, [theta[1]], [theta[0], b, theta[1]], times, lambda s: [1.0])
        return clean[:, 0] + 0.02 * rng.standard_normal(times.size)

    exps = [pc.Experiment(t, run(b, n), u=lambda s: [1.0], name=n, parameters={"b": b})
            for b, n in ((1.0, "one"), (2.0, "two"))]
    res = pc.estimate(model, exps, [pc.Parameter("k", 0.5, scale="log10"),
                                    pc.Parameter("A", 1.5)])
    assert res.success and res.p_names == ["k", "A"], res.message
    like_two = pc.prediction_band(res, pc.Experiment(t, None, u=lambda s: [1.0],
                                                     parameters={"b": 2.0}))
    two = pc.prediction_band(res, "two")
    assert like_two.y == pytest.approx(two.y, rel=1e-7)
    assert like_two.std == pytest.approx(two.std, rel=1e-6)
    at = np.array([0.5, 2.0, 8.0])
    three = pc.prediction_band(res, pc.Experiment(at, None, u=lambda s: [1.0],
                                                  parameters={"b": 3.0}))

    def outputs(theta: np.ndarray) -> np.ndarray:
        return pc.simulate(model, [theta[1]], [theta[0], 3.0, theta[1]], at, lambda s: [1.0],
                           rtol=1e-12)[:, 0]

    steps = 1e-5 * np.abs(res.p)
    J = np.column_stack([(outputs(res.p + h) - outputs(res.p - h)) / (2 * h.sum())
                         for h in np.diag(steps)])
    by_differences = np.sqrt(np.einsum("ia,ab,ib->i", J, res.p_cov, J))
    assert three.std.ravel() == pytest.approx(by_differences, rel=1e-4)
    # a log-normal output's band is on its log scale, as the fitted runs'
    logged = pc.estimate(model, exps, [pc.Parameter("k", 0.5, scale="log10"),
                                       pc.Parameter("A", 1.5)], noise="log-normal")
    assert pc.prediction_band(logged, pc.Experiment(t, None, u=lambda s: [1.0],
                                                    parameters={"b": 1.0})).y == \
        pytest.approx(pc.prediction_band(logged, "one").y, rel=1e-7)


def test_a_new_run_says_what_it_lacks():
    model, t = _gain_model(), np.linspace(0, 5, 26)
    y = pc.simulate(model, [2.0], [0.7, 1.0, 2.0], t, lambda s: [1.0])[:, 0]
    fitted = pc.Experiment(t, y + 0.01 * np.sin(9 * t), u=lambda s: [1.0],
                           parameters={"b": 1.0})
    res = pc.estimate(model, [fitted], {"k": 0.5, "A": 1.5})
    with pytest.raises(ValueError, match=r"no value for the model parameter\(s\) b: give "
                                         r"them in Experiment\(parameters=\{\.\.\.\}\)"):
        pc.prediction_band(res, pc.Experiment(t, None, u=lambda s: [1.0]))
    with pytest.raises(ValueError, match=r"`u` is a fitted experiment's forecast"):
        pc.prediction_band(res, pc.Experiment(t, None, parameters={"b": 1.0}),
                           u=lambda s: [1.0])
    with pytest.raises(ValueError, match=r"`y` is None, a run to predict"):
        pc.estimate(model, [fitted, pc.Experiment(t, None, u=lambda s: [1.0],
                                                  parameters={"b": 1.0})], {"k": 0.5, "A": 1.5})
    plain = _ramp()
    line = pc.estimate(plain, [pc.Experiment(t, 1.0 + 0.5 * t + 0.01 * np.sin(9 * t),
                                             x0=[0.8])], [0.3])
    with pytest.raises(ValueError, match=r"the initial states \['x'\] are not known"):
        pc.prediction_band(line, pc.Experiment(t, None))
