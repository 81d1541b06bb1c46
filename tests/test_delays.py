"""Time delays: outputs measured late, inputs acting late, the delays estimated.

The estimated delay is checked against the same problem with the delay
known (another path: the data shifted, no linearisation): at the estimate
the two agree, a known delay half a standard error away fits worse on both
sides, and one standard error away the likelihood has risen by about 1/2
(so the delay's standard error is the likelihood's curvature).
"""

from __future__ import annotations

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


def test_an_estimated_delay_of_a_staircase_input_is_refused():
    steps = np.repeat([0.0, 1.0, -1.0, 0.5], T.size // 4 + 1)[:T.size, None]
    exp = pc.Experiment(T, _data("input").y, u=steps, x0=[0.0], u_interpolation="previous",
                        breakpoints=T)
    with pytest.raises(ValueError, match="held between samples"):
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
