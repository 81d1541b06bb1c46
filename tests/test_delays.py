"""Time delays: outputs measured late, inputs acting late, the delays estimated.

The estimated delay is checked against the same problem with the delay
known (another path: the data shifted, no linearisation): at the estimate
the two agree, a known delay half a standard error away fits worse on both
sides, and one standard error away the likelihood has risen by about 1/2
(so the delay's standard error is the likelihood's curvature).
"""

from __future__ import annotations

import warnings

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc

TAU = 0.35
T = np.round(np.arange(0.0, 12.0 + 1e-9, 0.1), 10)


def _signal(t: np.ndarray) -> np.ndarray:
    return np.sin(1.3 * t) + 0.5 * np.sin(0.45 * t)


def _model(delay: object, where: str) -> pc.Model:
    """``x' = -a x + b u``; two outputs ``x`` (``y2`` the late one) or one."""
    x, u = ca.SX.sym("x"), ca.SX.sym("u")
    p = ca.SX.sym("p", 3)
    a, b, tau = p[0], p[1], p[2]
    late = delay if not isinstance(delay, str) else tau
    if where == "output":
        return pc.Model(x=x, p=p, u=u, rhs=-a * x + b * u, y=ca.vertcat(x, x),
                        y_names=["y1", "y2"], p_names=["a", "b", "tau"],
                        output_delays={"y2": late})
    return pc.Model(x=x, p=p, u=u, rhs=-a * x + b * u, y=ca.vertcat(x, x + 0.5 * u),
                    y_names=["y1", "y2"], p_names=["a", "b", "tau"], u_names=["u"],
                    input_delays={"u": late})


def _data(where: str, seed: int = 3) -> pc.Experiment:
    truth = [0.8, 1.5, TAU]
    clean = pc.simulate_experiment(_model("tau", where), [0.0], truth, T, _signal(T)[:, None],
                                   noise_std=0.0, u_interpolation="linear")
    rng = np.random.default_rng(seed)
    y = clean.y + rng.normal(0.0, [0.02, 0.01], clean.y.shape)
    return pc.Experiment(T, y, u=_signal(T)[:, None], x0=[0.0], name="run",
                         u_interpolation="linear")


@pytest.fixture(scope="module", params=["output", "input"])
def fits(request):
    where = request.param
    exp = _data(where)
    res = pc.estimate(_model("tau", where), [exp], [1.0, 1.0, 0.0], estimate_x0=False)

    def known(tau: float) -> pc.EstimationResult:
        return pc.estimate(_model(tau, where), [exp], [1.0, 1.0, tau], estimate_x0=False,
                           p_bounds=([None, None, tau], [None, None, tau]))
    return where, exp, res, known


def test_the_delay_is_estimated_with_the_other_parameters(fits):
    where, _, res, _ = fits
    assert res.success, res.message
    assert res.settings["delays"] == {("y2" if where == "output" else "u"): res.p[2]}
    assert abs(res.p[2] - TAU) < 4 * res.p_std[2]
    assert abs(res.p[0] - 0.8) < 4 * res.p_std[0] and abs(res.p[1] - 1.5) < 4 * res.p_std[1]


def test_the_estimate_is_the_known_delay_problem_s_optimum(fits):
    _, _, res, known = fits
    tau, se = res.p[2], res.p_std[2]
    at = known(tau)
    assert at.success, at.message
    # both certified: within the certificate's 0.1 standard errors of the ODE's optimum
    assert np.all(np.abs(at.p[:2] - res.p[:2]) < 0.1 * res.p_std[:2])
    # 0.1 standard errors from the optimum is 0.005 in the likelihood
    assert abs(at.nllh - res.nllh) < 0.01
    below, above = known(tau - 0.5 * se), known(tau + 0.5 * se)
    assert below.nllh > at.nllh and above.nllh > at.nllh
    # one standard error away the likelihood rises by about 1/2 (quadratic)
    one_off = 0.5 * (known(tau - se).nllh + known(tau + se).nllh) - at.nllh
    assert 0.4 < one_off < 0.6


def test_predictions_are_at_the_user_s_times(fits):
    where, exp, res, _ = fits
    y = res.predict(0)
    assert y.shape == exp.y.shape
    spread = np.std(exp.y - y, axis=0)
    assert np.all(spread < 2 * np.array([0.02, 0.01]))


def test_a_result_read_back_predicts_with_the_delays(fits, tmp_path):
    where, exp, res, _ = fits
    path = tmp_path / "res.json"
    res.to_json(path)
    back = pc.EstimationResult.from_json(path, model=_model("tau", where), experiments=[exp])
    assert back.settings["delays"] == res.settings["delays"]
    np.testing.assert_allclose(back.predict(0), res.predict(0), atol=1e-6)


def test_a_profile_of_an_estimated_delay_says_it_is_not_available(fits):
    _, _, res, _ = fits
    with pytest.raises(ValueError, match="profiles of a fit with estimated delays"):
        pc.profile(res)


def test_a_known_delay_is_the_data_shifted():
    exp = _data("output")
    res = pc.estimate(_model(TAU, "output"), [exp], [1.0, 1.0, TAU], estimate_x0=False,
                      p_bounds=([None, None, TAU], [None, None, TAU]))
    x, u, p = ca.SX.sym("x"), ca.SX.sym("u"), ca.SX.sym("p", 3)
    plain = pc.Model(x=x, p=p, u=u, rhs=-p[0] * x + p[1] * u, y=ca.vertcat(x, x),
                     y_names=["y1", "y2"])
    times = np.concatenate([T, np.maximum(T - TAU, 0.0)])
    names = ["y1"] * T.size + ["y2"] * T.size
    values = np.concatenate([exp.y[:, 0], exp.y[:, 1]])
    shifted = pc.Experiment.from_measurements(
        times, names, values, ["y1", "y2"], x0=[0.0], u=lambda s: [np.interp(s, T, _signal(T))])
    ref = pc.estimate(plain, [shifted], [1.0, 1.0, TAU], estimate_x0=False,
                      p_bounds=([None, None, TAU], [None, None, TAU]))
    np.testing.assert_allclose(res.p, ref.p, rtol=1e-5)
    assert abs(res.nllh - ref.nllh) < 1e-6


def test_a_numeric_output_delay_of_a_model_without_inputs():
    """`output_delays={"y": 0.5}` on a model without inputs raised "`u` was
    given but model 'model' has no inputs" (the rounds' inputs are the
    centres of estimated delays: here there are none).  Its fit is the fit
    of the data shifted by the delay."""
    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    t = np.linspace(0, 10, 21)
    y = 5 * np.exp(-0.3 * np.maximum(t - 0.5, 0)) * (
        1 + 0.01 * np.random.default_rng(0).standard_normal(t.size))
    delayed = pc.Model(x=x, p=k, rhs=-k * x, y_names=["y"], output_delays={"y": 0.5})
    res = pc.estimate(delayed, [pc.Experiment(t, y, x0=[5.0], t0=0.0)], [0.5],
                      estimate_x0=False)
    plain = pc.Model(x=x, p=k, rhs=-k * x, y_names=["y"])
    shifted = pc.Experiment(np.maximum(t - 0.5, 0.0), y, x0=[5.0], t0=0.0)
    ref = pc.estimate(plain, [shifted], [0.5], estimate_x0=False)
    assert res.success and res.p == pytest.approx(ref.p, rel=1e-6)
    assert res.p[0] == pytest.approx(0.3, abs=3 * res.p_std[0])


def test_simulate_applies_the_delays():
    model = _model(TAU, "input")
    X = pc.simulate(model, [0.0], [0.8, 1.5, TAU], T, _signal(T)[:, None],
                    u_interpolation="linear")
    x, u, p = ca.SX.sym("x"), ca.SX.sym("u"), ca.SX.sym("p", 2)
    plain = pc.Model(x=x, p=p, u=u, rhs=-p[0] * x + p[1] * u)
    late = pc.simulate(plain, [0.0], [0.8, 1.5], T,
                       lambda s: [np.interp(max(s - TAU, 0.0), T, _signal(T))],
                       breakpoints=T + TAU)
    np.testing.assert_allclose(X, late, atol=1e-7)


# ---------------------------------------------------------------------- bad input
def test_a_negative_delay_bound_is_named():
    exp = _data("output")
    with pytest.raises(ValueError, match="delay 'tau' has the lower bound -0.1"):
        pc.estimate(_model("tau", "output"), [exp], [1.0, 1.0, 0.0],
                    p_bounds=([0, 0, -0.1], [5, 5, 1]), estimate_x0=False)
    table = [pc.Parameter("a", 1.0), pc.Parameter("b", 1.0),
             pc.Parameter("tau", 0.0, bounds=(-1.0, 1.0))]
    with pytest.raises(ValueError, match="delay 'tau' has the lower bound -1"):
        pc.estimate(_model("tau", "output"), [exp], table, estimate_x0=False)


def test_bad_delays_in_the_model_are_named():
    x, u, p = ca.SX.sym("x"), ca.SX.sym("u"), ca.SX.sym("p", 2)
    args = dict(x=x, p=p, u=u, rhs=-p[0] * x + u, y=x, y_names=["y"], u_names=["u"])
    with pytest.raises(ValueError, match="'z', which is not one of"):
        pc.Model(**args, output_delays={"z": p[1]})
    with pytest.raises(ValueError, match=r"output_delays\['y'\].*>= 0"):
        pc.Model(**args, output_delays={"y": -0.2})
    with pytest.raises(ValueError, match=r"input_delays\['u'\]` must be one symbol of `p`"):
        pc.Model(**args, input_delays={"u": ca.SX.sym("other")})


def test_a_delay_per_experiment_is_refused():
    exp = _data("output")
    with pytest.raises(ValueError, match="delay 'tau' cannot differ by experiment"):
        pc.estimate(_model("tau", "output"), [exp], [1.0, 1.0, 0.0], per_experiment="tau",
                    estimate_x0=False)


def _held(delay: object) -> pc.Model:
    """A damped oscillator driven by a delayed input, measured in position only."""
    x, u = ca.SX.sym("x", 2), ca.SX.sym("u")
    p = ca.SX.sym("p", 3)
    rhs = ca.vertcat(x[1], -p[0] * x[0] - 0.8 * x[1] + p[1] * u)
    return pc.Model(x=x, p=p, u=u, rhs=rhs, y=x[0], p_names=["a", "b", "tau"], u_names=["u"],
                    input_delays={"u": p[2] if delay is None else delay})


@pytest.fixture(scope="module")
def staircase():
    """A staircase input (held between samples, switching every 5th sample)
    acting 0.33 late, and the fit of its delay."""
    rng = np.random.default_rng(1)
    t = np.round(np.arange(0.0, 20.0 + 1e-9, 0.1), 10)
    u = np.repeat(rng.choice([-1.0, 0.0, 1.0], size=t.size // 5 + 1), 5)[:t.size, None]
    clean = pc.simulate_experiment(_held(None), [0.0, 0.0], [2.0, 1.5, 0.33], t, u,
                                   noise_std=0.0, u_interpolation="previous")
    y = clean.y + rng.normal(0.0, 0.01, clean.y.shape)
    exp = pc.Experiment(t, y, u=u, x0=[0.0, 0.0], u_interpolation="previous")
    return exp, pc.estimate(_held(None), [exp], [1.0, 1.0, 0.2], estimate_x0=False)


def test_an_estimated_delay_of_a_staircase_is_the_held_input_s_optimum(staircase):
    # its jumps read as narrow ramps centred on them (their slope carries the
    # delay); checked against the staircase held exactly with the delay known
    # on a grid: the likelihood's minimum and curvature there
    exp, res = staircase
    assert res.success, res.message
    # the last round's certificate checked the model's own solution (the
    # rounds before skip that)
    assert "not checked" not in res.certificate["message"], res.certificate
    tau, se = res.p[2], res.p_std[2]
    grid = tau + se * np.linspace(-2.0, 2.0, 5)
    nllh = [pc.estimate(_held(d), [exp], [2.0, 1.5, d], estimate_x0=False,
                        p_bounds=([None, None, d], [None, None, d])).nllh for d in grid]
    c = np.polyfit(grid, nllh, 2)
    assert abs(-c[1] / (2 * c[0]) - tau) < 0.05 * se
    assert abs(1 / np.sqrt(2 * c[0]) / se - 1) < 0.05
    assert abs(min(nllh) - res.nllh) < 0.05
    # read linearly (the default), a ramp from the sample before: the delay
    # half a sample late, and a note saying so
    linear = pc.Experiment(exp.t, exp.y, u=exp.u, x0=[0.0, 0.0])
    with pytest.warns(UserWarning, match="piecewise constant"):
        late = pc.estimate(_held(None), [linear], [1.0, 1.0, 0.2], estimate_x0=False)
    assert abs(late.p[2] - tau - 0.05) < 0.5 * se  # (31 standard errors late)
    assert any("half a sample spacing too long" in w for w in late.warnings)
    assert late.fit_flagged  # (a process engineer's dead time 43 standard errors late)


def test_a_fixed_delay_of_a_staircase_reads_it_held(staircase):
    exp, _ = staircase
    fixed = pc.estimate(_held(None), [exp], [1.0, 1.0, 0.33], estimate_x0=False,
                        p_bounds=([None, None, 0.33], [None, None, 0.33]))
    known = pc.estimate(_held(0.33), [exp], [1.0, 1.0, 0.33], estimate_x0=False,
                        p_bounds=([None, None, 0.33], [None, None, 0.33]))
    assert fixed.success and known.success
    np.testing.assert_allclose(fixed.p, known.p, rtol=1e-6)


def test_an_output_reading_a_held_input_with_an_estimated_delay_is_refused():
    steps = np.repeat([0.0, 1.0, -1.0, 0.5], T.size // 4 + 1)[:T.size, None]
    exp = pc.Experiment(T, _data("input").y, u=steps, x0=[0.0], u_interpolation="previous")
    with pytest.raises(ValueError, match="read the held input.*directly.*no slope in the "
                                         "delay"):
        pc.estimate(_model("tau", "input"), [exp], [1.0, 1.0, 0.0], estimate_x0=False)


def test_multistart_samples_the_delay_and_keeps_the_likelihood_s_best():
    # the first round's trust box held every start's delay near p0; the starts
    # now sample it in its bounds.  Each likelihood fit's weighted objective
    # is sum n_k / 2N at its own noise levels, so the best start is the one
    # of lowest nllh (it was an accident of the starts' order)
    exp = _data("output")
    res = pc.estimate(_model("tau", "output"), [exp], [1.0, 1.0, 9.0], multistart=4,
                      p_bounds=([0, 0, 0], [5, 5, 10]), estimate_x0=False)
    assert len(res.starts) == 4
    assert np.ptp([s["p0"][2] for s in res.starts]) > 2.0  # not a box around 9
    done = [s for s in res.starts if s["success"]]
    assert res.success and res.nllh == pytest.approx(min(s["nllh"] for s in done))
    assert max(s["nllh"] for s in done) > res.nllh + 1  # the starts found other optima


def test_a_parameter_table_may_list_the_delay_first(fits):
    # the rounds read the delay from a result by its name, not by the model's
    # order (a table's order is its own)
    where, exp, res, _ = fits
    table = [pc.Parameter("tau", 0.0, bounds=(0.0, 2.0)), pc.Parameter("b", 1.0),
             pc.Parameter("a", 1.0)]
    other = pc.estimate(_model("tau", where), [exp], table, estimate_x0=False)
    assert other.success, other.message
    value = dict(zip(other.p_names, other.p))
    assert abs(value["tau"] - res.p[2]) < 0.1 * res.p_std[2]
    assert other.settings["delays"] == {("y2" if where == "output" else "u"): value["tau"]}
    # the table as a mapping of names to entries, as estimate reads it
    mapped = pc.estimate(_model("tau", where), [exp], {q.name: q for q in table},
                         estimate_x0=False)
    np.testing.assert_array_equal(mapped.p, other.p)


def test_a_delay_of_whole_sample_spacings_keeps_the_mesh():
    # 1.0 - 0.3 is 0.7000000000000001: the late samples beside the others
    # made intervals of 3e-17
    exp = _data("output")
    res = pc.estimate(_model(0.3, "output"), [exp], [1.0, 1.0, 0.3], estimate_x0=False,
                      p_bounds=([None, None, 0.3], [None, None, 0.3]))
    assert res.success and np.min(np.diff(res._disc.boundaries[0])) > 1e-3


def test_a_delay_naming_no_parameter_is_a_value_error_listing_them():
    x, k, tau, u = ca.SX.sym("x"), ca.SX.sym("k"), ca.SX.sym("tau"), ca.SX.sym("u")
    with pytest.raises(ValueError, match=r"`input_delays\['u'\]` names 'taux', which is not a "
                                         r"parameter \(k, tau\)"):
        pc.Model(x=x, p=ca.vertcat(k, tau), u=u, rhs=-k * x + u, p_names=["k", "tau"],
                 u_names=["u"], input_delays={"u": "taux"})


def _biased(seed: int = 5) -> tuple[pc.Model, list[pc.Experiment]]:
    """``_model``'s late input, ``y1`` with a bias of its own per run."""
    x, u = ca.SX.sym("x"), ca.SX.sym("u")
    p = ca.SX.sym("p", 4)
    a, b, tau, bias = p[0], p[1], p[2], p[3]
    model = pc.Model(x=x, p=p, u=u, rhs=-a * x + b * u, y=ca.vertcat(x + bias, x + 0.5 * u),
                     y_names=["y1", "y2"], p_names=["a", "b", "tau", "bias"], u_names=["u"],
                     input_delays={"u": tau})
    rng = np.random.default_rng(seed)
    exps = []
    for name, bias_true, phase in (("run1", 0.3, 0.0), ("run2", -0.2, 1.0)):
        signal = (lambda t, ph=phase: _signal(t + ph))(T)[:, None]
        clean = pc.simulate_experiment(model, [0.0], [0.8, 1.5, TAU, bias_true], T, signal,
                                       noise_std=0.0, u_interpolation="linear")
        y = clean.y + rng.normal(0.0, [0.02, 0.01], clean.y.shape)
        exps.append(pc.Experiment(T, y, u=signal, x0=[0.0], name=name,
                                  u_interpolation="linear"))
    return model, exps


def test_a_bias_per_experiment_beside_an_estimated_delay():
    # a user's bias per maneuver with an estimated input delay: the second
    # round was given the first's restated estimate as the model's p0 ("p0
    # must have 7 entries, got 8"), and a profile of the fit read the model's
    # bounds against the restated parameters
    model, exps = _biased()
    bounds = ([None, None, 0.0, -2.0], [None, None, 2.0, 2.0])
    res = pc.estimate(model, exps, [1.0, 1.0, 0.0, 0.0], p_bounds=bounds,
                      per_experiment="bias", estimate_x0=False)
    assert res.success, res.message
    value = dict(zip(res.p_names, res.p))
    std = dict(zip(res.p_names, res.p_std))
    assert list(res.p_names) == ["a", "b", "tau", "bias[run1]", "bias[run2]"]
    for name, truth in (("tau", TAU), ("bias[run1]", 0.3), ("bias[run2]", -0.2)):
        assert abs(value[name] - truth) < 4 * std[name], name
    # the delay held at its estimate: the profile of a bias runs, and the
    # summary shows the delay fixed
    held = pc.estimate(model, exps, [*res.p[:3], 0.0],
                       p_bounds=([None, None, value["tau"], -2.0],
                                 [None, None, value["tau"], 2.0]),
                       per_experiment="bias", estimate_x0=False)
    assert held.success and held.settings["p_bounds"][0][2] == held.settings["p_bounds"][1][2]
    assert next(r for r in held.summary().splitlines() if r.strip().startswith("tau ")
                ).split()[2] == "fixed"
    prof = pc.profile(held, parameters=["bias[run1]"])
    lo, hi = prof.intervals[prof.names.index("bias[run1]")]
    assert lo < dict(zip(held.p_names, held.p))["bias[run1]"] < hi


def test_a_delay_fixed_in_a_table_can_be_profiled():
    model, exps = _biased()
    # (a table's order is its own: the delay was looked up at the model's index)
    table = [pc.Parameter("tau", TAU, estimate=False), pc.Parameter("bias", 0.0, (-2, 2)),
             pc.Parameter("a", 1.0), pc.Parameter("b", 1.0)]
    res = pc.estimate(model, exps, table, per_experiment="bias", estimate_x0=False)
    assert res.success, res.message
    prof = pc.profile(res, parameters=["a"])
    lo, hi = prof.intervals[prof.names.index("a")]
    assert lo < res.p[list(res.p_names).index("a")] < hi


def test_a_delayed_model_s_experiment_of_the_wrong_width_is_named():
    model, exps = _biased()
    narrow = pc.Experiment(T, exps[0].y[:, :1], u=exps[0].u, x0=[0.0], name="run1",
                           u_interpolation="linear")
    with pytest.raises(ValueError, match=r"Experiment 'run1': `y` has 1 column\(s\) but model"):
        pc.estimate(model, [narrow], [1.0, 1.0, 0.0, 0.0], estimate_x0=False)


def test_a_staircase_function_with_an_estimated_delay_is_refused_with_the_fix(staircase):
    # (a quadrotor's command as a function with breakpoints at its ticks: 14
    # minutes, the delay stuck at its start, advice about the mesh)
    exp, _ = staircase
    knots, values = exp.t, exp.u[:, 0]

    def command(t):
        i = np.clip(np.searchsorted(knots, np.atleast_1d(t), side="right") - 1, 0, None)
        return values[i][:, None]
    command.vectorized = True
    as_function = pc.Experiment(exp.t, exp.y, u=command, x0=[0.0, 0.0], breakpoints=knots)
    with pytest.raises(ValueError, match=r"jumps \(a staircase\).*u_interpolation='previous'"):
        pc.estimate(_held(None), [as_function], [1.0, 1.0, 0.2], estimate_x0=False)
    # a smooth function with breakpoints is no staircase
    smooth = pc.Experiment(T, _data("input").y, u=lambda t: np.sin(1.3 * t), x0=[0.0],
                           breakpoints=[3.0, 6.0])
    assert pc.estimate(_model("tau", "input"), [smooth], [1.0, 1.0, 0.3],
                       estimate_x0=False).success


def test_a_delay_on_its_round_s_trust_region_is_not_said_on_a_bound():
    # a quadrotor's failed fit: "delay ended on its upper bound 0.004 (p_bounds)"
    # where its bound was 0.2 (0.004: the first round's trust region)
    from picard_casadi.estimation.delays import _trust_box_words
    from picard_casadi.transcription.delayed import DelayPlan

    plan = DelayPlan.of(_model("tau", "input"))
    reword = _trust_box_words(plan.model, plan, 1, np.array([0.0]), np.array([0.004]),
                              np.array([0.0]), np.array([0.2]), [True])
    text = reword("the run ended with tau on its upper bound 0.004 (p_bounds): widen it")
    assert "tau on the edge 0.004 of its trust region in delay round 1 (0 to 0.004; its " \
           "bounds are 0 to 0.2)" in text and "had further to go" in text, text
    assert reword("tau on its lower bound 0 (p_bounds)") == "tau on its lower bound 0 (p_bounds)"


def test_a_new_run_of_a_delayed_model_has_its_band(staircase):
    """A process engineer's FOPDT and a quadrotor's pitch axis: no band for a
    new step sequence of a model with a dead time.  Checked against the exact
    band (CVODES sensitivities) of the same model without the delay, its
    input shifted by hand."""
    exp, res = staircase
    fixed = ([None, None, 0.33], [None, None, 0.33])
    known = pc.estimate(_held(0.33), [exp], [1.0, 1.0, 0.33], estimate_x0=False,
                        p_bounds=fixed)
    t, u = np.linspace(0.0, 10.0, 51), np.repeat([0.0, 1.0, 1.0, -1.0, 0.5], 11)[:51, None]

    def late(s, knots=t, values=u[:, 0]):  # the new run's staircase 0.33 late
        i = np.clip(np.searchsorted(knots, np.atleast_1d(s) - 0.33, side="right") - 1, 0, None)
        return values[i][:, None]
    late.vectorized = True

    def late_data(s):
        i = np.clip(np.searchsorted(exp.t, np.atleast_1d(s) - 0.33, side="right") - 1, 0,
                    None)
        return exp.u[i, 0][:, None]
    late_data.vectorized = True
    plain = pc.estimate(_held(0), [pc.Experiment(exp.t, exp.y, u=late_data, x0=[0.0, 0.0],
                                                 breakpoints=exp.t + 0.33)],
                        [1.0, 1.0, 0.33], estimate_x0=False, p_bounds=fixed)
    new = pc.Experiment(t, None, u=u, x0=[0.0, 0.0], u_interpolation="previous")
    band = pc.prediction_band(known, new)
    exact = pc.prediction_band(plain, pc.Experiment(t, None, u=late, x0=[0.0, 0.0],
                                                    breakpoints=t + 0.33))
    np.testing.assert_allclose(band.y, exact.y, atol=1e-7)
    np.testing.assert_allclose(band.std, exact.std, rtol=1e-4, atol=1e-12)
    np.testing.assert_allclose(known.predict(new), band.y, atol=1e-12)
    # the delay estimated: its uncertainty widens the band where the steps are
    wider = pc.prediction_band(res, new)
    moving = exact.std[:, 0] > 0
    assert np.all(np.isfinite(wider.std))
    assert np.max(wider.std[moving, 0] / band.std[moving, 0]) > 1.3
    with pytest.raises(ValueError, match="state the run as a new one"):
        pc.prediction_band(res, 0)


def _dosed(t0: float) -> tuple[pc.Model, pc.Experiment]:
    """An oral dose, 0.1 h of 1000 mg/h into the gut, absorbed with a lag
    (an input delay); the concentration sampled at 1-24 h, from ``t0``
    (the dose's start at 0)."""
    x = ca.SX.sym("x", 2)
    p = ca.SX.sym("p", 3)
    rate = ca.SX.sym("rate")
    model = pc.Model(x=x, p=p, u=rate,
                     rhs=ca.vertcat(-p[0] * x[0] + rate, p[0] * x[0] - 0.1 * x[1]),
                     y=x[1] / p[1], p_names=["ka", "V", "tlag"], u_names=["rate"],
                     input_delays={"rate": p[2]})
    full = np.array([-1.0, 0.0, 0.1, 1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24])
    dose = np.where((full >= 0.0) & (full < 0.1), 1000.0, 0.0)[:, None]
    clean = pc.simulate(model, [0.0, 0.0], [1.2, 50.0, 0.4], full, u=dose,
                        u_interpolation="previous")[:, 1] / 50.0
    keep = full >= t0
    t, u = full[keep], dose[keep]
    y = np.where(t >= 1, clean[keep], np.nan)[:, None]
    return model, pc.Experiment(t, y, u=u, u_interpolation="previous", x0=[0.0, 0.0], t0=t0)


def test_a_dose_at_t0_held_before_its_lag_is_flagged():
    """A delayed input holds its value at t0 before t0 + tau: right for an
    input at rest before the record, but a dose given at t0 becomes 1000 mg/h
    over the whole lag (a pharmacometrician's lag estimated at 0.0005 for 0.4,
    success, no word).  Such an input gets a FitWarning naming the fix (and
    simulate a note); started before the dose, with its 0 there, none."""
    model, exp = _dosed(0.0)
    with pytest.warns(pc.FitWarning, match="a delayed input is held at its value at t0"):
        res = pc.estimate(model, [exp], [1.0, 40.0, 0.2], estimate_x0=False)
    assert res.fit_flagged
    assert any("'rate' is 1000 at t0 = 0" in w for w in res.warnings)
    with pytest.warns(UserWarning, match="simulate: input 'rate' is 1000 at t0 = 0"):
        pc.simulate(model, [0.0, 0.0], [1.2, 50.0, 0.4], exp.t, u=exp.u,
                    u_interpolation="previous")
    model, exp = _dosed(-1.0)
    res = pc.estimate(model, [exp], [1.0, 40.0, 0.2], estimate_x0=False)
    assert res.success and not res.fit_flagged, res.warnings
    assert not any("held at its value at t0" in w for w in res.warnings)
    np.testing.assert_allclose(res.p, [1.2, 50.0, 0.4], rtol=1e-3)


def test_a_fixed_delay_fit_on_log_scales_keeps_its_bounds_on_those_scales():
    """The result's box is on its parameters' scales, as without a delay: a
    log10 fit with the delay held had recorded the linear bounds, and its
    profile read ka's bound 0.5 as log10(ka) >= 0.5 (the estimate shown as
    0.5, an interval for ka of [3.2, 4.0] for 1.13)."""
    exp = _data("output")
    res = pc.estimate(_model("tau", "output"), [exp], [1.0, 1.0, TAU], estimate_x0=False,
                      parameter_scale=["log10", "log10", "lin"],
                      p_bounds=([0.5, 0.1, TAU], [10.0, 10.0, TAU]))
    assert res.success, res.message
    lower, upper = res.settings["p_bounds"]
    np.testing.assert_allclose([lower[0], upper[0]], np.log10([0.5, 10.0]))
    prof = pc.profile(res, parameters=["a"])
    lo, hi = prof.intervals[0]
    assert lo < np.log10(res.p[0]) < hi


def test_a_clock_left_at_the_first_sample_is_named_with_a_delay():
    """Known initial states at a first sample later than 0, ``t0`` not given:
    the note that names ``t0=0.0`` (a dose at 0 with samples from 0.25 h had
    the lag 22.6 standard errors short and no word where the model had a
    delay: the rounds' experiments had their t0 given)."""
    exp = _data("output")
    late = pc.Experiment(exp.t[5:], exp.y[5:], u=exp.u[5:], x0=[0.0], name="late",
                         u_interpolation="linear")
    with pytest.warns(UserWarning, match=r"t0 not given: 0\.5.*t0=0\.0"):
        pc.estimate(_model("tau", "output"), [late], [1.0, 1.0, 0.2], estimate_x0=False)


def test_one_log_scale_word_leaves_the_delay_linear_beside_per_experiment_parameters():
    """``parameter_scale="log10"`` for every parameter leaves the delays
    linear, with ``per_experiment`` too (refused there: "the delay 'tlag' must
    be estimated on the linear scale", where the same word alone worked)."""
    exps = [_data("input", seed).replaced(name=f"run{seed}") for seed in (3, 4)]
    res = pc.estimate(_model("tau", "input"), exps, [1.0, 1.0, 0.2], estimate_x0=False,
                      parameter_scale="log10", per_experiment="b")
    assert res.success, res.message
    value = dict(zip(res.p_names, res.p))
    std = dict(zip(res.p_names, res.p_std))
    assert abs(value["tau"] - TAU) < 4 * std["tau"]
    assert res.p_scales[res.p_names.index("tau")] == "lin"


def test_a_lag_started_past_the_first_sample_of_a_log_normal_output_is_found():
    """A start that puts measured samples before the lag, where a log-normal
    output is still 0 (no finite likelihood), is started again shorter: a lag
    started at 0.6 h with the first sample at 0.5 h had failed with every
    method, and multistart lost 6 of its 8 starts so."""
    x = ca.SX.sym("x", 2)
    p = ca.SX.sym("p", 3)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(-p[0] * x[0], p[0] * x[0] - 0.1 * x[1]),
                     y=x[1] / p[1], p_names=["ka", "V", "tlag"], output_delays={"y0": p[2]},
                     x0=[100.0, 0.0])
    t = np.array([0.5, 1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24])
    clean = pc.simulate_experiment(model, [100.0, 0.0], [1.2, 50.0, 0.4], np.r_[0.0, t],
                                   noise_std=0.0).y[1:]
    y = clean * np.exp(0.1 * np.random.default_rng(1).standard_normal(clean.shape))
    exp = pc.Experiment(t, y, t0=0.0)
    res = pc.estimate(model, [exp], [1.0, 30.0, 0.6], noise="log-normal", estimate_x0=False)
    assert res.success, res.message
    assert abs(res.p[2] - 0.4) < 4 * res.p_std[2]


def test_a_log_normal_zero_is_named_at_the_user_s_time_with_a_delay():
    """The noise model is checked against the user's data before a round moves
    a delayed output's samples (a 0 at 0.25 h was named as t = 0.05)."""
    exp = _data("output")
    y = np.abs(exp.y) + 0.1
    y[7, 1] = 0.0
    with pytest.raises(ValueError, match=r"sample 7 \(counted from 0; t = 0\.7\) has y = 0"):
        pc.estimate(_model("tau", "output"), [exp.replaced(y=y)], [1.0, 1.0, 0.2],
                    estimate_x0=False, noise="log-normal")


def test_a_delay_started_beyond_the_record_is_named():
    exp = _data("output")
    with pytest.raises(ValueError, match=r"the delay 'tau' starts at 30, as long as the longest "
                                         r"record \(12\) or longer"):
        pc.estimate(_model("tau", "output"), [exp], [1.0, 1.0, 30.0], estimate_x0=False,
                    p_bounds=([None, None, 0.0], [None, None, 50.0]))


def test_a_smooth_input_acting_late_is_no_held_history_case():
    """A smooth input that merely moves near t0 is held there as an input at
    rest (the rule's purpose), with no note: only an excursion at t0 (a dose,
    a pulse) is one."""
    exp = _data("input")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        res = pc.estimate(_model("tau", "input"), [exp], [1.0, 1.0, 0.2], estimate_x0=False)
    assert res.success and not res.fit_flagged, res.warnings
    assert not [w for w in said if "held at its value at t0" in str(w.message)]


def test_a_delay_held_at_zero_names_an_input_recorded_late():
    """A flow recorded 12 ms late against its pressure: the delay ran to its
    floor 0, and the note said "widen the bound", which the next fit refused
    (a delay is >= 0).  The note names the shift instead."""
    truth = [0.8, 1.5, 0.0]
    early = pc.simulate_experiment(_model(0.0, "input"), [0.0], truth, T,
                                   _signal(T + 0.3)[:, None], noise_std=0.0,
                                   u_interpolation="linear")
    y = early.y + np.random.default_rng(1).normal(0.0, [0.02, 0.01], early.y.shape)
    late = pc.Experiment(T, y, u=_signal(T)[:, None], x0=[0.0], name="run",
                         u_interpolation="linear")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = pc.estimate(_model("tau", "input"), [late], [1.0, 1.0, 0.1], estimate_x0=False)
    assert res.p[2] == pytest.approx(0.0, abs=1e-9), res.p
    [note] = [w for w in res.warnings if w.startswith("tau ended on its lower bound 0")]
    assert "A delay is not negative" in note and "shift the input's times earlier" in note
    assert "widen it" not in note
