"""What a newcomer tripped on (the issue "Hard problems with every default",
items 2, 7 and 14, and item 1 for the model's own box), each with a
reproduction that failed before its fix."""

from __future__ import annotations

import warnings

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.estimation.diagnosis import note_bounds_reached


def _decay():
    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    model = pc.Model(x=x, p=k, rhs=-k * x, p_names=["rate"])
    t = np.linspace(0.0, 3.0, 13)
    y = pc.simulate(model, [1.0], [0.7], t)[:, 0] + 0.01 * np.random.default_rng(0).standard_normal(13)
    return model, pc.Experiment(t, y)


def test_an_input_inside_a_log_output_is_finite_in_every_sample_slot():
    # item 2: y = log(dose c / V) was evaluated at empty sample slots with the
    # dose 0 there: "the objective is not finite at the starting point"
    c, k, V, dose = ca.SX.sym("c"), ca.SX.sym("k"), ca.SX.sym("V"), ca.SX.sym("dose")
    model = pc.Model(x=c, p=ca.vertcat(k, V), u=dose, rhs=-k * c, y=ca.log(dose * c / V))
    t = np.array([0.5, 1, 2, 3, 5, 8, 12.0])
    X = pc.simulate(model, [1.0], [0.3, 2.0], t, u=lambda s: [100.0], t0=0.0)
    y = np.log(100 * X[:, 0] / 2.0) + 0.01 * np.random.default_rng(0).standard_normal(t.size)
    exp = pc.Experiment(t, y, u=np.full((t.size, 1), 100.0), x0=[1.0], t0=0.0)
    res = pc.estimate(model, [exp], [0.5, 1.0], estimate_x0=False,
                      p_bounds=([0, 0.01], [None, None]))
    assert res.success and res.p == pytest.approx([0.3, 2.0], rel=0.02)


def test_a_huge_standard_error_does_not_put_a_parameter_on_its_bound():
    # item 7: "k12 ended on its lower bound 0" at k12 = 0.144, standard error 3e5
    model, exp = _decay()
    res = pc.estimate(model, [exp], [0.5])
    res.warnings = []
    res.p, res.p_std = np.array([0.144]), np.array([3e5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        note_bounds_reached(res, np.array([0.0]), np.array([np.inf]))
    assert res.warnings == []
    # within a thousandth of a meaningful standard error it is on the bound
    res.p, res.p_std = np.array([1e-9]), np.array([0.1])
    with pytest.warns(pc.FitWarning, match="rate ended on its lower bound 0"):
        note_bounds_reached(res, np.array([0.0]), np.array([np.inf]))


def test_profile_takes_one_parameter_name_as_a_string():
    # item 14: parameters="rate" was read letter by letter ("unknown parameter 'r'")
    model, exp = _decay()
    res = pc.estimate(model, [exp], [0.5], p_bounds=([0.0], [5.0]))
    prof = pc.profile(res, parameters="rate")
    assert np.all(np.isfinite(prof.intervals[0]))
    assert prof.intervals[0, 0] < res.p[0] < prof.intervals[0, 1]


def test_predictions_of_tiny_states_are_the_fitted_curve():
    # item 11: x ~ 1e-12 simulated at a fixed absolute tolerance 1e-10 came
    # out 10.8 % off the fitted curve (predict, pc.simulate, fit.png)
    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    model = pc.Model(x=x, p=k, rhs=-k * x, x_nominal=[1e-12])
    t = np.linspace(0.0, 10.0, 21)
    truth = 1e-12 * np.exp(-0.8 * t)
    y = truth * (1 + 0.01 * np.random.default_rng(1).standard_normal(t.size))
    res = pc.estimate(model, [pc.Experiment(t, y)], [0.5])
    assert res.success and res.p[0] == pytest.approx(0.8, rel=0.02)
    fitted = res.predict(0, source="collocation")
    assert res.predict(0) == pytest.approx(fitted, rel=1e-5, abs=0)
    X = pc.simulate(pc.Model(x=x, p=k, rhs=-k * x), [1e-12], [0.8], t)[:, 0]
    assert X == pytest.approx(truth, rel=1e-6, abs=0)


def test_predict_names_its_experiment_by_index_or_name_and_refuses_times_there():
    # res.predict(exp.t) raised "The truth value of an array ... is ambiguous"
    model, exp = _decay()
    res = pc.estimate(model, [exp], [0.5], p_bounds=([0.0], [5.0]))
    assert res.predict(exp.name) == pytest.approx(res.predict(0), rel=0, abs=0)
    with pytest.raises(TypeError, match=r"exp_index .*the times go in t="):
        res.predict(exp.t)
    with pytest.raises(ValueError, match="no experiment is named 'other'"):
        res.predict("other")


def test_c_export_is_a_public_name():
    # item 9: export_c worked but was in neither the README, the docs, nor pc.
    assert "export_c" in pc.__all__ and callable(pc.export_c)


def test_a_result_file_with_inconsistent_arrays_is_refused_by_name(tmp_path):
    # item 15: a short p_std made summary() raise IndexError; a wrong-shape x0
    # loaded silently; certificate arrays came back as lists; to_json into a
    # missing folder named the temporary .part file
    import json

    model, exp = _decay()
    res = pc.estimate(model, [exp], [0.5])
    back = pc.EstimationResult.from_json(res.to_json())
    assert isinstance(back.certificate["p_shift"], np.ndarray)
    d = json.loads(res.to_json())
    for key, value, pattern in (("p_std", [], r"field 'p_std' has shape \(0,\)"),
                                ("x0", [[1.0, 2.0]], r"field 'x0'\[0\] has 2 entries, the "
                                                     r"model has 1 states")):
        bad = dict(d, **{key: value})
        with pytest.raises(ValueError, match=pattern):
            pc.EstimationResult.from_dict(bad)
    with pytest.raises(FileNotFoundError, match=r"the folder .*missing.* does not exist"):
        res.to_json(tmp_path / "missing" / "r.json")


@pytest.mark.parametrize("start", [1e-300, 1e-30])
def test_a_start_far_below_any_scale_still_moves(start):
    # item 12: p0 = 1e-300 became the parameter's scale and no step could move
    # it: "converged" at p0 with 6,900 times the optimum's misfit
    model, exp = _decay()
    res = pc.estimate(model, [exp], [start])
    assert res.success and res.p[0] == pytest.approx(0.7, rel=0.02)


def test_wald_intervals_stay_inside_the_bounds():
    # item 8: ka in [-0.12, 2.02] with ka >= 0
    x, p = ca.SX.sym("x"), ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=-p[0] * x, y=x + p[1], p_names=["ka", "c"])
    t = np.linspace(0.0, 3.0, 13)
    y = pc.simulate(model, [1.0], [0.01, 0.0], t)[:, 0]
    y = y + 0.05 * np.random.default_rng(2).standard_normal(t.size)
    res = pc.estimate(model, [pc.Experiment(t, y, x0=[1.0])], [0.1, 0.0], estimate_x0=False,
                      p_bounds=([0.0, -1.0], [5.0, 1.0]))
    assert res.success and 0 < res.p[0] < 2 * res.p_std[0]  # near 0 and poorly determined
    assert np.all(res.p_ci[:, 0] >= [0.0, -1.0]) and np.all(res.p_ci[:, 1] <= [5.0, 1.0])
    assert res.p_ci[0, 0] == 0.0
    assert any("Wald interval of ka reached past a bound" in w for w in res.warnings)


def test_a_failed_picard_gn_step_is_retried_by_single_shooting_and_ipopt_before_shooting():
    # item 5: where picard-gn's step failed at the first mesh's optimum, the
    # default path went to shooting (which failed), not to IPOPT on the mesh;
    # single shooting (every experiment integrated from its start) comes first,
    # IPOPT after it where it fails (tests/test_fallbacks.py)
    from picard_casadi.estimation.fallbacks import DefaultPath, second_runs

    model, exp = _decay()
    first = pc.estimate(model, [exp], [0.5], "picard-gn", max_iter=1)
    first.success, first.status = False, "step_failed"
    first.message = "step_failed: no step reduces the objective"
    tried = []

    def rerun(method, guess, max_iter, ipopt_options=None):
        tried.append(method)
        return pc.estimate(model, [exp], [0.5], method)

    path = DefaultPath(method="picard-gn", method_chosen=False, guess="auto", warm_start=False,
                       every_state_measured=True, unstable=False)
    res = second_runs(first, path, rerun, 0.0)
    assert tried == ["single-shooting"] and res.success and res.method == "single-shooting"
    assert res.warnings[0].startswith("picard-gn stopped: its step failed")


def test_a_log_output_of_a_state_that_starts_at_zero():
    # item 3: a t = 0 row without a measurement (a CSV's) and the empty sample
    # slots evaluated log(x) at x(0) = 0: "not finite at the starting point"
    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    rhs = k * (1 - x)
    model = pc.Model(x=x, p=k, rhs=rhs, y=ca.log(x), y_names=["logx"])
    t = np.linspace(0.0, 5.0, 11)
    X = pc.simulate(pc.Model(x=x, p=k, rhs=rhs), [0.0], [0.8], t)[:, 0]
    y = np.full(t.size, np.nan)
    y[1:] = np.log(X[1:]) + 0.01 * np.random.default_rng(0).standard_normal(t.size - 1)
    res = pc.estimate(model, [pc.Experiment(t, y, x0=[0.0])], [0.5], estimate_x0=False)
    assert res.success and res.p[0] == pytest.approx(0.8, rel=0.02)
    assert np.isnan(res.predict(0)[0, 0]) or res.predict(0)[0, 0] < -10  # log 0 at t = 0


def test_a_fit_all_on_one_side_of_its_data_is_named():
    # item 6: the lack-of-fit warnings named B and C but not A, fitted as 0
    # against data near 1 (every residual of one sign: no runs-test z)
    from picard_casadi.analysis.fit_check import lack_of_fit

    t = np.linspace(0.0, 1.0, 30)
    rng = np.random.default_rng(0)
    Y = np.column_stack([1.0 - 0.01 * t + 1e-3 * rng.standard_normal(t.size),
                         np.sin(6 * t) + 1e-3 * rng.standard_normal(t.size)])
    G = np.column_stack([np.zeros(t.size), np.sin(6 * t)])
    notes = lack_of_fit([Y], [G], ["run"], ["A", "B"], times=[t])
    assert len(notes) == 1 and "output 'A'" in notes[0]


def _chain_of_two_rates():
    """A -> B -> C with the rates as log10 k (0.5 and 0.2), B measured."""
    x, q = ca.SX.sym("x", 2), ca.SX.sym("q", 2)
    k = 10 ** q
    model = pc.Model(x=x, p=q, rhs=ca.vertcat(-k[0] * x[0], k[0] * x[0] - k[1] * x[1]),
                     y=x[1:2], y_names=["B"])
    t = np.linspace(0, 10, 41)
    clean = pc.simulate_experiment(model, [1, 0], np.log10([0.5, 0.2]), t, noise_std=0)
    exp = pc.Experiment(t, clean.y + 0.01 * np.random.default_rng(1).standard_normal(
        clean.y.shape), x0=[1, 0])
    return model, exp


def test_an_estimate_where_nothing_reacts_is_a_plateau_not_a_success():
    # Robertson's rates from log10 k = 0 ended, by the shooting fallback, at
    # log10 k = (-303, -2715, -45877): nothing reacts, every direction flat,
    # and the result said success.  Here A -> B -> C from log10 k = -40: IPOPT
    # stops where the gradient vanishes, which is no optimum
    model, exp = _chain_of_two_rates()
    res = pc.estimate(model, [exp], [-40.0, -40.0], "ipopt", estimate_x0=False)
    assert not res.success and res.status == "plateau"
    assert "plateau" in res.message and "p0 = -40" in res.message
    assert res.settings["parameter_reach"] < 1e-30
    # no optimum, no standard errors (a failed fit printed +-1.7e17 and "the data
    # determine beta poorly")
    assert res.p_std is None and res.p_ci is None and res.x0_std is None
    assert not any(w.startswith("the data determine") for w in res.warnings)
    good = pc.estimate(model, [exp], [0.0, 0.0], "ipopt", estimate_x0=False)
    assert good.success and good.settings["parameter_reach"] > 1.0


def test_a_fit_no_parameter_moves_by_more_than_a_tenth_of_a_noise_level_is_a_plateau():
    # PEtab's Fujita from uniform start 5 "converged" by IPOPT's second run 10,000
    # above its best with a reach of 0.055 noise levels: no parameter moved by a
    # decade changed the nllh by more than 1.5e-3.  Here the rates held below
    # 1e-5, where B barely forms within the record: reach 0.02, a plateau
    model, exp = _chain_of_two_rates()
    res = pc.estimate(model, [exp], [-10.0, -10.0], estimate_x0=False,
                      p_bounds=([-40.0, -40.0], [-5.0, -5.0]))
    assert 1e-2 < res.settings["parameter_reach"] < 1e-1
    assert not res.success and res.status == "plateau" and "plateau" in res.message


def test_a_state_domain_takes_none_per_entry_as_the_bounds_do():
    # item 1's friction for the model's own box: x_domain=([0, 0], [None, None])
    # said "needs lower < upper" (a None entry read as NaN); None is unbounded
    x, k = ca.SX.sym("x", 2), ca.SX.sym("k")
    model = pc.Model(x=x, p=k, rhs=-k * x, x_domain=([0.0, 0.0], [None, None]))
    lb, ub = model.x_domain
    assert lb.tolist() == [0.0, 0.0] and ub.tolist() == [np.inf, np.inf]
    with pytest.raises(ValueError, match=r"`x_domain` needs lower < upper .* entry 1 has "
                                         r"lower 2.0 and upper 1.0"):
        pc.Model(x=x, p=k, rhs=-k * x, x_domain=([0.0, 2.0], [None, 1.0]))


def test_a_linear_parameters_reach_is_measured_at_its_size_where_it_grew():
    """A rate started at 1e-3 (its scale) that converged at 2 moves the fit by
    its sensitivity times 2, not times 1e-3; on a log scale by one decade."""
    from types import SimpleNamespace

    from picard_casadi.analysis.uncertainty import parameter_reach

    setup = SimpleNamespace(disc=SimpleNamespace(model=SimpleNamespace()),
                            p_scale=np.array([1e-3, 1.0]))
    columns = [("p", -1, 0), ("p", -1, 1), ("x0", 0, 0)]
    F_diagonal = np.array([4.0, 0.0, 100.0])  # |dr/dp_0| = 2; x0 is no parameter
    assert parameter_reach(setup, F_diagonal, columns, np.array([2.0, -5.0]), 1.0) == 4.0
    assert parameter_reach(setup, F_diagonal, columns, np.array([2.0, -5.0]), 4.0) == 2.0
    setup.disc.model._parameter_scales = ("log10", "lin")
    assert parameter_reach(setup, F_diagonal, columns, np.array([2.0, -5.0]), 1.0) == 2e-3


def test_picard_gns_step_in_parameters_the_data_do_not_see_stays_short():
    """A -> B -> C from log10 k = -40 on a mesh whose start leaves gaps: every
    parameter column of the step is ~1e-38, so a damping relative to the
    largest column is relative to nothing (steps of 4e37, the trust region
    collapsed).  Damped at least as a column moving the residual by 1e-12 of
    its norm, the step closes the gaps and the run ends on the plateau."""
    x, q = ca.SX.sym("x", 3), ca.SX.sym("q", 2)
    k = 10 ** q
    bind = 1e4 * (3 * x[1] - x[2])
    model = pc.Model(x=x, p=q, rhs=ca.vertcat(-k[0] * x[0], k[0] * x[0] - bind - k[1] * x[1],
                                              bind), y=x[:2], y_names=["A", "B"])
    exp = pc.simulate_experiment(model, [1.0, 0.4, 0.0], np.log10([0.5, 0.2]),
                                 np.linspace(0, 10, 41), noise_std=0.005, seed=1)
    res = pc.estimate(model, [exp], [-40.0, -40.0], "picard-gn", estimate_x0=False, T=1.25,
                      scheme="radau", refine=0)
    assert res.status == "plateau" and res.settings["parameter_reach"] < 1e-30


def test_progress_lines_are_a_public_callback():
    # a quadrotor's 15-minute fit printed nothing: the command line's lines,
    # from Python, needed a callback of the user's own
    import io

    model, exp = _decay()
    out = io.StringIO()
    res = pc.estimate(model, [exp], [0.5], callback=pc.Progress(out))
    lines = out.getvalue().splitlines()
    assert res.success and "Progress" in pc.__all__
    assert lines and all(line.startswith("iter ") and "objective" in line for line in lines)
