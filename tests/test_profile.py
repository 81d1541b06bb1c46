"""Profile-likelihood intervals: exact on a linear model, open where not identifiable,
asymmetric on saturating kinetics, parallel equal to serial; the coverage study."""

from __future__ import annotations

import json
import re
import warnings

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.models import michaelis_menten
from picard_casadi.analysis.quantiles import chi2_1, f_1, student_t
from conftest import product_model_data


# ---------------------------------------------------------------------- quantiles
@pytest.mark.parametrize("q, dof, table", [
    (0.975, 1, 12.706204736), (0.975, 5, 2.570581836), (0.975, 10, 2.228138852),
    (0.995, 3, 5.840909309), (0.95, 30, 1.697260887),
])
def test_student_t_quantiles_match_the_tables(q, dof, table):
    assert student_t(q, dof) == pytest.approx(table, rel=1e-8)
    assert student_t(1 - q, dof) == pytest.approx(-table, rel=1e-8)


def test_f_and_chi_square_quantiles_match_the_tables():
    assert f_1(0.95, 7) == pytest.approx(5.591447851, rel=1e-8)
    assert f_1(0.99, 30) == pytest.approx(7.562476095, rel=1e-8)
    assert chi2_1(0.95) == pytest.approx(3.841458821, rel=1e-10)
    assert f_1(0.95, 1e7) == pytest.approx(chi2_1(0.95), rel=1e-5)  # F(1, inf) = chi2(1)


# ---------------------------------------------------------------------- problems
def _quadratic_trend():
    """x' = a + b t, y = x: outputs linear in (x0, a, b); profiles are exact t intervals."""
    t = ca.SX.sym("t")
    x = ca.SX.sym("x")
    p = ca.SX.sym("p", 2)
    model = pc.Model(t=t, x=x, p=p, rhs=p[0] + p[1] * t, name="trend", p_names=["a", "b"])
    times = np.linspace(0.0, 3.0, 13)
    exp = pc.simulate_experiment(model, [1.0], [0.5, -0.4], times, noise_std=0.0, seed=0)
    y = np.asarray(exp.y) + np.random.default_rng(1).normal(0, 0.05, size=exp.y.shape)
    return model, pc.Experiment(times, y, x0=y[0])


@pytest.fixture(scope="module")
def saturating():
    """Michaelis-Menten from 17 samples (seed 1): K's profile is skewed."""
    prob = michaelis_menten.make_problem(seed=1)
    return prob, prob.estimate()


# ---------------------------------------------------------------------- profiles
def test_profile_of_a_linear_model_is_the_exact_t_interval():
    model, exp = _quadratic_trend()
    res = pc.estimate(model, [exp], [0.0, 0.0])
    prof = pc.profile(res)
    dof = exp.t.size - 3  # a, b and x0
    assert prof.dof == dof and prof.threshold == pytest.approx(f_1(0.95, dof))
    t = student_t(0.975, dof)
    exact = np.column_stack([res.p - t * res.p_std, res.p + t * res.p_std])
    assert np.allclose(prof.intervals, exact, rtol=0, atol=1e-3 * res.p_std[:, None])
    # the Wald interval of the package is the normal one: narrower by z / t
    assert np.allclose(res.p_ci[:, 1] - res.p, 1.959963984540054 * res.p_std)
    assert not prof.warnings
    assert all(p.ends == ("threshold", "threshold") for p in prof.paths.values())


def test_profile_of_the_only_free_quantity_fixes_it_and_fits_nothing_else():
    # x' = a with x0 known: each profile point holds a, the only unknown, so the
    # fit at that point has nothing to estimate (it raised a reshape ValueError
    # in picard-gn's condensed step: `fit --x0-known --profile` on one parameter)
    x, a = ca.SX.sym("x"), ca.SX.sym("a")
    model = pc.Model(x=x, p=a, rhs=a, name="ramp", p_names=["a"])
    times = np.linspace(0.0, 3.0, 13)
    y = 1.0 + 0.5 * times + np.random.default_rng(2).normal(0, 0.05, times.size)
    exp = pc.Experiment(times, y[:, None], x0=[1.0])
    res = pc.estimate(model, [exp], [0.0], estimate_x0=False)
    assert res.success
    prof = pc.profile(res)
    dof = times.size - 1
    assert prof.dof == dof
    t = student_t(0.975, dof)
    exact = [res.p[0] - t * res.p_std[0], res.p[0] + t * res.p_std[0]]
    assert np.allclose(prof.intervals[0], exact, rtol=0, atol=1e-3 * res.p_std[0])
    # and the fit with nothing free returns the given point, converged
    held = pc.estimate(model, [exp], [0.5], p_bounds=([0.5], [0.5]), estimate_x0=False,
                       uncertainty=False)
    assert held.success and held.p[0] == 0.5
    # the objective SSR / (2 N) of the line through the data
    assert held.objective == pytest.approx(np.sum((y - 1.0 - 0.5 * times) ** 2)
                                           / (2 * times.size), rel=1e-8)


def test_known_noise_uses_the_chi_square_threshold():
    model, exp = _quadratic_trend()
    res = pc.estimate(model, [exp], [0.0, 0.0], weights=[1 / 0.05 ** 2])
    prof = pc.profile(res, noise="known", parameters=["b"])
    assert prof.threshold == pytest.approx(chi2_1(0.95)) and prof.s2 == 1.0
    # known sigma = 0.05: b +- 1.96 sigma_b, sigma_b from the unscaled information
    s_b = res.p_std[1] / np.sqrt(res.settings["noise_variance_factor"])
    assert prof.intervals[1] == pytest.approx(res.p[1] + np.array([-1, 1]) * 1.959964 * s_b,
                                              abs=2e-3 * s_b)
    assert np.all(np.isnan(prof.intervals[0]))  # not asked for


def test_non_identifiable_pair_gives_open_intervals_and_a_warning():
    """Only a*b enters the dynamics: a's profile is flat to the bound."""
    model, exp = product_model_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = pc.estimate(model, [exp], p0=[0.7, 1.2, 0.2], T=0.5,
                          p_bounds=([0.05, 0.05, 0.0], [20.0, 20.0, 1.0]))
    with pytest.warns(UserWarning, match=r"profile of a does not cross .* open .* a is "
                                         r"practically non-identifiable"):
        prof = pc.profile(res, parameters=["a", "c"])
    assert np.isinf(prof.intervals[0]).all()
    assert prof.paths[0].ends == ("bound", "bound")
    assert np.all(prof.paths[0].statistic < prof.threshold)
    # along a's profile, b follows 1 / a (where b is inside its box): the
    # product is what the data fix
    a, b = prof.paths[0].p[:, 0], prof.paths[0].p[:, 1]
    inside = b < 20.0
    assert inside.sum() >= 5
    assert np.allclose(a[inside] * b[inside], res.p[0] * res.p[1], rtol=1e-4)
    # c is identifiable: a closed interval around its estimate
    assert np.all(np.isfinite(prof.intervals[2]))
    assert prof.intervals[2, 0] < res.p[2] < prof.intervals[2, 1]


def test_saturating_kinetics_profile_is_asymmetric_unlike_wald(saturating, tmp_path):
    prob, res = saturating
    prof = pc.profile(res)
    lo, hi = prof.intervals[1]  # K
    k = res.p[1]
    assert lo < k < hi and (hi - k) > 1.5 * (k - lo)  # long towards large K
    w_lo, w_hi = res.p_ci[1]
    assert w_hi - k == pytest.approx(k - w_lo)  # Wald: symmetric
    assert w_lo < lo  # Wald reaches down where the data rule K out
    assert np.all(np.isfinite(prof.intervals)) and not prof.warnings
    assert np.all((prof.intervals[:, 0] < prob.p_true) & (prob.p_true < prof.intervals[:, 1]))
    fig = prof.plot(path=tmp_path / "profile.png")
    assert (tmp_path / "profile.png").stat().st_size > 0 and len(fig.axes) == 2
    text = json.dumps(prof.to_dict())
    assert json.loads(text)["names"] == ["V", "K"]
    assert "profile 95 %" in prof.summary()


def test_profile_on_a_process_pool_equals_serial(saturating):
    prob, res = saturating
    serial = pc.profile(res)
    pooled = pc.profile(res, n_jobs=2)
    assert np.array_equal(serial.intervals, pooled.intervals)
    for i in serial.paths:
        assert np.array_equal(serial.paths[i].values, pooled.paths[i].values)


def test_profile_refuses_what_it_cannot_do(saturating):
    prob, res = saturating
    with pytest.raises(ValueError, match="unknown parameter 'Q'; the parameters are V, K"):
        pc.profile(res, parameters=["Q"])
    with pytest.raises(ValueError, match="`noise` must be one of"):
        pc.profile(res, noise="guess")
    with pytest.raises(ValueError, match="`confidence`"):
        pc.profile(res, confidence=95)
    loaded = pc.EstimationResult.from_json(res.to_json())
    with pytest.raises(ValueError, match="pass model=... and experiments="):
        pc.profile(loaded)
    # with them, from the JSON's numbers: the same intervals
    again = pc.profile(loaded, model=prob.model, experiments=prob.experiments,
                       parameters=["V"])
    assert again.intervals[0] == pytest.approx(pc.profile(res, parameters=["V"]).intervals[0],
                                               rel=1e-4)


# ---------------------------------------------------------------------- coverage
def test_coverage_study_counts_pairs_and_runs_on_a_pool():
    from picard_casadi.studies.coverage import coverage_study

    serial = coverage_study(michaelis_menten.make_problem, [0, 1], profile=False)
    pooled = coverage_study(michaelis_menten.make_problem, [0, 1], profile=False, n_jobs=2)
    assert serial.coverage == pooled.coverage
    assert [r["wald"] for r in serial.rows] == [r["wald"] for r in pooled.rows]
    assert set(serial.coverage) == {"wald", "wald_t"}
    assert "wald_t" in serial.summary()


@pytest.mark.slow
def test_profile_intervals_cover_the_truth_where_wald_does_not():
    """100 seeds of few-sample Michaelis-Menten data on two processes."""
    from picard_casadi.studies.coverage import coverage_study

    study = coverage_study(michaelis_menten.make_problem, range(100), n_jobs=2)
    print()
    print(study.summary())
    assert study.failed <= 2
    assert 0.90 <= study.coverage["profile"] <= 0.99
    assert study.coverage["wald"] < study.coverage["profile"] - 0.05


def test_profile_points_continue_undamped_unless_told():
    """Each profile point starts next to a neighbouring optimum of the same loss:
    picard-gn's damping starts at CONTINUING_MU0; a caller's mu0 wins."""
    from picard_casadi.methods.picard_gn import CONTINUING_MU0
    from picard_casadi.studies.profile import _estimate_options

    res = pc.problem("vdp", seed=0).estimate(uncertainty=False)
    assert _estimate_options(res, {})["mu0"] == CONTINUING_MU0
    assert _estimate_options(res, {"mu0": 1e-3})["mu0"] == 1e-3


def test_a_parameter_on_its_bound_has_an_interval_that_stops_there():
    """k held by its upper bound 0.3 (truth 0.5): the profile's interval was
    [0.277, inf] with "k is practically non-identifiable", next to the estimate's
    own warning that the bound holds k (a user's report); and the profile raised
    the estimate's FitWarnings a second time."""
    x, k = ca.SX.sym("x"), ca.SX.sym("k", 2)
    model = pc.Model(x=x, p=k, rhs=-k[0] * x + k[1], p_names=["k", "b"])
    exp = pc.simulate_experiment(model, [1.0], [0.5, 0.2], np.linspace(0, 5, 26), noise_std=0.01)
    with pytest.warns(pc.FitWarning, match="k ended on its upper bound 0.3"):
        res = pc.estimate(model, [exp], [0.1, 0.1], p_bounds=([0.0, 0.0], [0.3, 1.0]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prof = pc.profile(res, parameters=["k"])
    assert prof.intervals[0, 1] == 0.3 and prof.intervals[0, 0] < 0.3
    texts = [str(w.message) for w in caught]
    assert not [w for w in caught if issubclass(w.category, pc.FitWarning)], texts
    assert any("k is on its bound 0.3" in t for t in texts), texts
    assert not any("non-identifiable" in t for t in texts), texts


def test_multistart_raises_the_bound_warning_of_its_best_start():
    x, k = ca.SX.sym("x"), ca.SX.sym("k", 2)
    model = pc.Model(x=x, p=k, rhs=-k[0] * x + k[1], p_names=["k", "b"])
    exp = pc.simulate_experiment(model, [1.0], [0.5, 0.2], np.linspace(0, 5, 26), noise_std=0.01)
    with pytest.warns(pc.FitWarning, match="k ended on its upper bound 0.3"):
        pc.estimate(model, [exp], [0.1, 0.1], p_bounds=([0.0, 0.0], [0.3, 1.0]), multistart=2,
                    uncertainty=False)


def test_a_result_loaded_from_json_profiles_from_its_own_initial_states():
    # a user's tank cascade (three runs, 10 % of the samples missing): the live
    # profile worked; after from_json(model=, experiments=) profile said the result
    # "carries no model", and given them again it failed with "the objective is
    # not finite at the starting point" (its fits started from states guessed from
    # the data, not from the estimated x0 in the file)
    x, c, q_in = ca.SX.sym("h", 3), ca.SX.sym("c", 3), ca.SX.sym("qin")
    out = [c[i] * ca.sqrt(x[i]) for i in range(3)]
    model = pc.Model(x=x, p=c, u=q_in,
                     rhs=ca.vertcat(q_in - out[0], out[0] - out[1], out[1] - out[2]) / 0.5,
                     y=ca.vertcat(x[0], x[2]), p_names=["c1", "c2", "c3"],
                     x_domain=([0, 0, 0], [10, 10, 10]))
    inputs = [lambda s: [0.015 + 0.005 * np.sin(s / 60.0)],
              lambda s: [0.005 if s < 300 else 0.025],
              lambda s: [0.02 * (1.0 - np.exp(-s / 100.0))]]
    rng = np.random.default_rng(11)
    exps = []
    for k, (x0, u) in enumerate(zip([[0.5, 0.8, 0.3], [1.2, 0.2, 0.9], [0.1, 0.1, 0.1]], inputs)):
        t = np.sort(rng.uniform(0, 900, 60))
        t[0] = 0.0
        breakpoints = [300.0] if k == 1 else None
        sim = pc.simulate_experiment(model, x0, [0.02, 0.015, 0.025], t, u=u, noise_std=0.0,
                                     breakpoints=breakpoints)
        y = sim.y + np.random.default_rng(20 + k).normal(size=sim.y.shape) * [0.005, 0.02]
        y[rng.random(y.shape) < 0.1] = np.nan
        exps.append(pc.Experiment(t, y, u=u, breakpoints=breakpoints, name=f"run{k}"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = pc.estimate(model, exps, p0=[0.01, 0.01, 0.01])
        assert res.success, res.message
        live = pc.profile(res, parameters=["c2"]).intervals[1]
        loaded = pc.EstimationResult.from_json(res.to_json(), model=model, experiments=exps)
        again = pc.profile(loaded, parameters=["c2"]).intervals[1]
    assert np.allclose(again, live, rtol=1e-4), (again, live)


def test_a_log_scale_profile_walks_through_zero_like_any_other_value():
    # log10 k near 0 (k near 1): steps relative to the value shrank to 1e-6
    # there, the walk ran out of its 30 points and the interval came out open
    # ("practically non-identifiable") where Wald's is [-0.037, 0.023]
    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    model = pc.Model(x=x, p=k, rhs=-k * x, name="decay", p_names=["k"])
    e = pc.simulate_experiment(model, x0=[1.0], p=[0.95], t=np.linspace(0, 3, 20),
                               noise_std=0.05, seed=0)
    res = pc.estimate(model, [e], p0=[0.5], p_bounds=(0.01, 100), parameter_scale="log10")
    lo_wald, hi_wald = res.p_scaled - 1.96 * res.p_scaled_std, res.p_scaled + 1.96 * res.p_scaled_std
    assert lo_wald < 0 < hi_wald
    with warnings.catch_warnings():
        warnings.simplefilter("error", pc.FitWarning)
        prof = pc.profile(res)
    lo, hi = prof.intervals[0]
    assert np.isfinite(lo) and np.isfinite(hi), prof.summary()
    # the parameter's own name selects it too (its profile is on the log scale)
    assert pc.profile(res, parameters="k").intervals[0] == pytest.approx(prof.intervals[0])
    # a nearly linear problem: the profile interval is close to Wald's
    assert abs(lo - lo_wald) < 0.3 * (hi_wald - lo_wald)
    assert abs(hi - hi_wald) < 0.3 * (hi_wald - lo_wald)
    # and on k's own scale, as res.p_ci is (a pharmacometrician found log10 only)
    assert prof.scales == ["log10"] and prof.own_names == ["k"]
    assert prof.linear_intervals[0] == pytest.approx([10 ** lo, 10 ** hi])
    assert f"on their own scale: k [{10 ** lo:.5g}, {10 ** hi:.5g}]" in prof.summary()
    assert prof.to_dict()["linear_intervals"][0] == pytest.approx([10 ** lo, 10 ** hi])


def test_a_wald_interval_far_wider_than_the_profile_is_clipped_and_cut():
    """Only rho * A0 is determined: the Wald interval of log10(rho) was shown
    as [-68, 68] beside its bounds [-3, 0], and its bar set the plot's axis,
    the profile a spike in the middle."""
    x = ca.SX.sym("x")
    k, rho, a0 = ca.SX.sym("k"), ca.SX.sym("rho"), ca.SX.sym("A0")
    model = pc.Model(x=x, p=ca.vertcat(k, rho, a0), rhs=-k * x, y=rho * x, x0=[a0],
                     p_names=["k", "rho", "A0"])
    t = np.linspace(0.5, 5, 12)
    y = 6.0 * np.exp(-0.5 * t) * np.exp(0.05 * np.random.default_rng(0).standard_normal(t.size))
    table = [pc.Parameter("k", 1.0, (0.01, 10), "log10"),
             pc.Parameter("rho", 0.5, (1e-3, 1), "log10"),
             pc.Parameter("A0", 5.0, (1e-2, 1e4), "log10")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = pc.estimate(model, [pc.Experiment(t, y, t0=0.0)], table, noise="log-normal")
        prof = pc.profile(res, parameters=["rho"])
    assert prof.wald[1].tolist() == [-3.0, 0.0] and prof.wald[2].tolist() == [-2.0, 4.0]
    c = prof.paths[1].values
    left, right = prof.plot().axes[0].get_xlim()
    assert left >= c.min() - 0.1 * np.ptp(c) and right <= c.max() + 0.1 * np.ptp(c)


def test_a_profile_point_that_fails_says_how_far_the_profile_got(monkeypatch):
    """A fast pre-equilibrium's profile ended "the re-optimisation failed at
    4.9079: no acceptable step ... (start from a better p0, or try
    multistart)": an estimate's advice, and no word of how far it had got."""
    import dataclasses

    import picard_casadi.studies.profile as profile_module

    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    model = pc.Model(x=x, p=k, rhs=-k * x, y=x, p_names=["k"])
    t = np.linspace(0, 4, 21)
    made = pc.simulate_experiment(model, [1.0], [0.7], t, noise_std=0.01, seed=0)
    res = pc.estimate(model, [made], [0.5], estimate_x0=False)
    real = profile_module._fit

    def failing(ctx, i, c, warm):
        out = real(ctx, i, c, warm)
        if c > res.p[0] * 1.004:
            return dataclasses.replace(out, success=False, message=(
                "no acceptable step: the trust region collapsed (the linear model does not "
                "describe the problem near this point; start from a better p0, or try "
                "multistart)"))
        return out

    monkeypatch.setattr(profile_module, "_fit", failing)
    with pytest.warns(UserWarning, match="re-optimisation failed"):
        prof = pc.profile(res)
    note = next(w for w in prof.warnings if "re-optimisation failed" in w)
    assert "(no acceptable step: the trust region collapsed; its step halved 3 times)" in note
    assert "try multistart" not in note and "of the way to the threshold" in note, note
    # the values named as the parameter's ("at 335.593 ... at 304.846, the last
    # point fitted" read as values of the likelihood)
    assert re.search(r"failed at k = [0-9.]+ \(no acceptable.*; at k = [0-9.]+, the last point "
                     r"fitted", note), note


def test_a_profile_that_grows_stiff_moves_its_points_to_radau():
    """A fast pre-equilibrium A <=> I (kf, kr), I -> P: pushed up, log10(kf)
    made the model stiff on the estimate's mesh, and the points, held to
    its Chebyshev nodes, failed on refined meshes of up to 1584 intervals
    (87 s for one parameter, the interval left open with "the
    re-optimisation failed"); a point's warm start now moves to Radau's
    nodes where the run chose its quadrature (2 s)."""
    x, p = ca.SX.sym("x", 3), ca.SX.sym("p", 3)
    A, I = x[0], x[1]
    kf, kr, k2 = p[0], p[1], p[2]
    rhs = ca.vertcat(-kf * A + kr * I, kf * A - kr * I - k2 * I, k2 * I)
    model = pc.Model(x=x, p=p, rhs=rhs, y=ca.vertcat(A, x[2]), p_names=["kf", "kr", "k2"])
    t = np.linspace(0, 60, 31)
    made = pc.simulate_experiment(model, [1.0, 0.0, 0.0], [1e4, 2e4, 0.1], t, noise_std=0.005,
                                  seed=0)
    res = pc.estimate(model, [made], p0=[10.0, 10.0, 1.0], p_bounds=([1e-3] * 3, [1e8] * 3),
                      parameter_scale="log10", estimate_x0=False)
    assert res.success, res.message
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prof = pc.profile(res, parameters=["log10(kf)"])
    assert not any("re-optimisation failed" in w for w in prof.warnings), prof.warnings
    path = prof.paths[0]
    values, statistic = np.asarray(path.values), np.asarray(path.statistic)
    flat = (values > 2.5) & (values < 7.3)  # fast enough: only kf / kr matters
    assert flat.sum() >= 3 and statistic[flat].max() < 0.1, (values, statistic)
    # its upper end is kr's bound (kr = 2 kf reaches 1e8), not the data's
    assert any("crosses the threshold above the estimate where log10(kr) = 8 is on a bound"
               in w for w in prof.warnings), prof.warnings


def test_a_profile_point_where_the_model_is_not_finite_ends_its_side(monkeypatch):
    """A climate model's profile of a heat capacity it divides by walked to
    0 and raised StartNotFiniteError ("check p0"): every side lost."""
    import sys

    from picard_casadi.errors import StartNotFiniteError

    x, c = ca.SX.sym("x"), ca.SX.sym("c")
    model = pc.Model(x=x, p=c, rhs=(1 - x) / c, y=x, p_names=["c"])
    t = np.concatenate([[0.0], np.linspace(1.0, 10.0, 19)])
    y = 1 - np.exp(-t / 0.3) + np.random.default_rng(0).normal(0.0, 0.05, t.size)
    res = pc.estimate(model, [pc.Experiment(t, y[:, None], x0=[0.0])], [0.5],
                      estimate_x0=False, p_bounds=([0.0], [None]))
    module = sys.modules["picard_casadi.estimate"]
    real = module.estimate

    def not_finite_near_zero(model, experiments, p0, *args, **kwargs):
        if p0[0] < 0.05:
            raise StartNotFiniteError("the objective is not finite at the starting point")
        return real(model, experiments, p0, *args, **kwargs)

    monkeypatch.setattr(module, "estimate", not_finite_near_zero)
    with pytest.warns(UserWarning, match="re-optimisation failed"):
        prof = pc.profile(res)
    assert prof.intervals[0][0] == -np.inf and np.isfinite(prof.intervals[0][1])
    assert any("the model is not finite there" in w for w in prof.warnings), prof.warnings


def test_a_crossing_far_beyond_the_first_step_is_bisected_to_the_threshold(monkeypatch):
    """An inhibition constant on its bound (log10 Ki = 6), its first step 4.6
    decades to where the fit is 120 thresholds off: four secant points crept
    0.14 decades and the interval's end was interpolated a decade short (4.6
    from hand-made refits, 5.82 reported).  Far beyond, the bracket is halved."""
    from types import SimpleNamespace

    import picard_casadi.studies.profile as prof

    def delta(c):  # quadratic to its threshold at 4.63, then a wall
        return ((6.0 - c) / 1.37) ** 2 if c >= 4.0 else 1e4 * (1.0 + 4.0 - c)

    monkeypatch.setattr(prof, "_fit", lambda ctx, i, c, warm: SimpleNamespace(
        success=True, weighted_ssr=delta(c), p=np.array([c])))
    ctx = SimpleNamespace(likelihood=False, wssr=0.0, scale=1.0)
    side = prof.Side([], [], [], "threshold", None)
    c = prof._crossing(ctx, side, 0, (6.0, 0.0, None), (1.4, float(np.sqrt(delta(1.4)))))
    assert abs(c - (6.0 - 1.37)) < 0.03, c
    assert len(side.values) <= prof._CROSSING_FITS + prof._BISECTIONS
