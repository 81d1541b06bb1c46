"""The estimators on problems with known truth (issue: core acceptance)."""

import re
import time
import warnings

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.transcription.discretisation import Discretisation, interval_boundaries

from conftest import DUFFING_P, duffing_input


@pytest.fixture(scope="module")
def vdp():
    return pc.problem("vdp", seed=0, noise_std=0.01)


def test_vdp_picard_gn_converges_continuous_and_accurate(vdp):
    assert vdp.options["T"] == 0.25 and vdp.options["n"] == 2 and vdp.options["lam"] == 5.0
    res = pc.estimate(vdp.model, vdp.experiments, p0=[0.5, 0.5], p_bounds=vdp.p_bounds,
                      method="picard-gn", **vdp.options)
    print(f"picard-gn on vdp: {res.iterations} iterations, p = {res.p}")
    assert res.success, res.message
    assert res.continuity_gap < 1e-6
    assert np.max(np.abs(res.p - 1.0)) < 0.02
    assert res.iterations <= 100
    assert res.history["gap"][-1] < 1e-6
    assert res.fixed_point_residual < 1e-8


def test_vdp_paper_algorithm_reaches_two_percent_within_its_budget(vdp):
    res = pc.estimate(vdp.model, vdp.experiments, p0=[0.5, 0.5], p_bounds=vdp.p_bounds,
                      method="picard", **vdp.options)
    P = np.asarray(res.history["p"])
    err = np.max(np.abs(P - 1.0), axis=1)
    assert np.any(err < 0.02), "the paper's algorithm never got within 2 %"
    first = int(np.argmax(err < 0.02)) + 1
    print(f"picard (paper's Alg. 4) on vdp: within 2 % after {first} iterations; "
          f"{res.iterations} run, success={res.success}: {res.message}")
    assert np.max(np.abs(res.p - 1.0)) < 0.02
    if not res.success:
        assert "max_iter" in res.message


@pytest.mark.parametrize("factor", [1.5, 0.5])
def test_fitzhugh_nagumo_partial_observation(factor):
    prob = pc.problem("fitzhugh-nagumo", seed=0, noise_std=0.01)
    assert prob.model.ny == 1 and 70 <= prob.experiments[0].n_samples <= 90
    res = prob.estimate("picard-gn", p0=factor * prob.p_true)
    assert res.success, res.message
    rel = np.abs(res.p / prob.p_true - 1.0)
    print(f"FitzHugh-Nagumo from {factor} x truth: {res.p}, max rel. error {rel.max():.3f}")
    assert rel.max() < 0.05


def test_non_convergence_is_reported_not_hidden(vdp):
    res = vdp.estimate("picard-gn", max_iter=2)
    assert not res.success
    assert res.status == "max_iter"
    assert "max_iter=2" in res.message
    # the advice fits the method: picard-gn is not told to use picard-gn
    assert "warm_start" in res.message and "use method='picard-gn'" not in res.message
    assert np.all(np.isfinite(res.p))
    with pytest.raises(pc.ConvergenceError) as info:
        vdp.estimate("picard-gn", max_iter=2, raise_on_failure=True)
    assert info.value.result is not None and not info.value.result.success


def test_known_x0_is_held(duffing, duffing_experiment):
    res = pc.estimate(duffing, [duffing_experiment], p0=DUFFING_P * 1.2, method="picard-gn",
                      T=0.5, n=2, estimate_x0=False, uncertainty=False)
    assert res.success, res.message
    assert np.array_equal(res.x0[0], duffing_experiment.x0)
    assert np.max(np.abs(res.p / DUFFING_P - 1)) < 0.1



@pytest.mark.parametrize("estimate_x0", [False, True])
def test_a_fixed_first_parameter_leaves_the_others_free(estimate_x0):
    # theta's parameter columns were indexed by parameter number: with the
    # first parameter fixed and x0 known that was an IndexError (and profile(),
    # which fixes one parameter at a time, crashed on such a fit); with x0
    # estimated it marked an x0 column instead of the parameter's
    import casadi as ca

    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(x[1], -p[0] * x[1] - p[1] * ca.sin(x[0])),
                     y=x[0], p_names=["c", "k"])
    exp = pc.simulate_experiment(model, [1.0, 0.0], [0.25, 1.2], np.linspace(0, 10, 41),
                                 noise_std=0.02, seed=0)
    res = pc.estimate(model, [exp], p0=[0.25, 1.0], estimate_x0=estimate_x0,
                      p_bounds=([0.25, -np.inf], [0.25, np.inf]))
    assert res.success, res.message
    assert res.p[0] == 0.25 and abs(res.p[1] / 1.2 - 1) < 0.05
    free = pc.estimate(model, [exp], p0=[0.2, 1.0], estimate_x0=estimate_x0)
    prof = pc.profile(free, max_steps=10)
    for i, truth in enumerate((0.25, 1.2)):
        lo, hi = prof.intervals[i]
        assert lo < truth < hi, prof.intervals

def test_a_parameter_fixed_by_its_bounds_is_returned_as_given():
    # with a p_scale that is not the value's, the fixed value made a round trip
    # through the scale and came back off by its last bit (4 of 12 values)
    import casadi as ca

    x, k = ca.SX.sym("x"), ca.SX.sym("k", 2)
    model = pc.Model(x=x, p=k, rhs=-k[0] * x + k[1])
    t = np.linspace(0.0, 2.0, 21)
    exp = pc.Experiment(t, 0.7 * np.exp(-0.7 * t) + 0.3 / 0.7 * (1 - np.exp(-0.7 * t)),
                        x0=[0.7])
    for value in np.random.default_rng(0).uniform(0.01, 1.0, 12):
        res = pc.estimate(model, [exp], [0.5, value], p_bounds=([0.0, value], [5.0, value]),
                          estimate_x0=False, p_scale=[1.0, 3.0], uncertainty=False)
        assert res.p[1] == value, (res.p[1], value)


def test_partial_and_missing_data_with_inputs(duffing):
    """Only position measured, 30 % of it missing, input and time dependence."""
    t = np.linspace(0.0, 8.0, 81)
    exp = pc.simulate_experiment(duffing, [0.5, 0.0], DUFFING_P, t, duffing_input,
                                 noise_std=0.005, seed=11, x0_guess=[0.4, 0.2])
    rng = np.random.default_rng(0)
    y = exp.y.copy()
    y[rng.random(y.shape) < 0.3] = np.nan
    exp = pc.Experiment(t, y, u=duffing_input, x0=exp.x0, name="duffing-missing")
    res = pc.estimate(duffing, [exp], p0=DUFFING_P * 0.8, method="picard-gn", T=0.5, n=2,
                      uncertainty=False)
    assert res.success, res.message
    assert np.max(np.abs(res.p / DUFFING_P - 1)) < 0.1
    assert abs(res.x0[0][0] - 0.5) < 0.05 and abs(res.x0[0][1]) < 0.1


def test_several_experiments_share_p_and_have_own_x0(duffing):
    t = np.linspace(0.0, 5.0, 51)
    exps = [pc.simulate_experiment(duffing, x0, DUFFING_P, t, duffing_input, noise_std=0.005,
                                   seed=s, name=f"e{s}")
            for s, x0 in enumerate([[0.5, 0.0], [-1.0, 0.5]])]
    res = pc.estimate(duffing, exps, p0=DUFFING_P * 1.2, method="picard-gn", T=0.5,
                      uncertainty=False)
    assert res.success, res.message
    assert len(res.x0) == 2
    assert np.allclose(res.x0[1], [-1.0, 0.5], atol=0.05)


def test_interval_rule_when_T_does_not_divide_the_horizon():
    # 1.0 / 0.3: boundaries 0, .3, .6, .9 -> last piece 0.1 < T/5? no (0.06): kept 0.1
    b = interval_boundaries(0.0, 1.0, 0.3, np.zeros(0))
    assert np.allclose(b, [0, 0.3, 0.6, 0.9, 1.0])
    # 1.0 / 0.33: last piece 0.01 < T/5 -> merged into a 0.34 interval
    b = interval_boundaries(0.0, 1.0, 0.33, np.zeros(0))
    assert np.allclose(b, [0, 0.33, 0.66, 1.0])
    # a breakpoint starts an interval; a regular boundary within T/5 of it goes
    b = interval_boundaries(0.0, 1.0, 0.2, np.array([0.41]))
    assert np.allclose(b, [0, 0.2, 0.41, 0.6, 0.8, 1.0])


def test_samples_between_nodes_use_the_integral_up_to_the_sample():
    import casadi as ca

    x = ca.SX.sym("x")
    p = ca.SX.sym("a")
    model = pc.Model(x=x, p=p, rhs=p * x)
    t = np.array([0.0, 0.037, 0.1, 0.163, 0.25])
    exp = pc.Experiment(t, np.exp(-t), x0=[1.0])
    disc = Discretisation(model, [exp], 0.25, 13, "chebyshev")
    from picard_casadi.transcription.functions import Transcription

    tr = Transcription(disc, 3, np.ones(1), np.ones(1))
    X = np.ones((1, 1))
    U, _, _ = tr.settle(X, np.ones((1, 1, 13)), np.array([-1.0]), tol=1e-15)
    _, Ys, _ = tr.trajectory(X, U, np.array([-1.0]))
    assert np.max(np.abs(Ys[0, 0, :5] - np.exp(-t))) < 1e-12


def test_rounds_after_a_converged_one_start_undamped():
    """weights='auto': a round that continues from a converged solution starts with
    the damping of PicardGNOptions.continuing (1e-9), not mu0's 1e-3; the first
    round keeps mu0.  A user's smaller mu0 is kept."""
    from picard_casadi.methods.picard_gn import CONTINUING_MU0, PicardGNOptions

    assert PicardGNOptions().continuing().mu0 == CONTINUING_MU0
    assert PicardGNOptions(mu0=1e-12).continuing().mu0 == 1e-12
    prob = pc.problem("fa18-roll-ail", seed=0)
    res = prob.estimate(uncertainty=False, refine=False)
    assert res.success and res.settings["weight_rounds"] >= 2
    its = np.asarray(res.history["iteration"])
    control = np.asarray(res.history["control"])
    starts = np.flatnonzero(its == 1)
    assert control[starts[0]] >= 1e-4  # the first round: mu0 = 1e-3, divided once
    for k in starts[1:]:
        assert control[k] <= 2 * CONTINUING_MU0  # at most doubled by one rejection


def test_a_warm_start_keeps_the_callers_damping():
    """estimate(warm_start=...) may start another loss from an answer (the unweighted
    F/A-18 loss from the weighted one needs mu0's damping): its first step is damped
    by mu0, not by the continuing solve's 1e-9."""
    prob = pc.problem("vdp", seed=0)
    first = prob.estimate(uncertainty=False)
    res = prob.estimate(warm_start=first, weights="auto", uncertainty=False)
    assert res.success
    assert np.asarray(res.history["control"])[0] >= 1e-4


def test_a_registry_warm_start_keeps_the_warm_starts_mesh():
    """prob.estimate(warm_start=res) starts on res's final mesh, not on the protocol's
    T (the F/A-18 optimality check compared IPOPT on the registry mesh of 100
    intervals with picard-gn's answer on its refined mesh of 102)."""
    prob = pc.problem("vdp", seed=0)
    T = prob.options["T"]
    first = prob.estimate(T=0.7 * T, uncertainty=False, refine=False)
    assert first.success
    again = prob.estimate(warm_start=first, uncertainty=False, refine=False)
    assert again.settings["intervals"] == first.settings["intervals"]
    assert again.iterations <= 2  # it starts at the answer, on the same discretisation
    moved = prob.estimate(warm_start=first, T=T, uncertainty=False, refine=False)
    assert moved.settings["intervals"] != first.settings["intervals"]  # the caller's T


def test_a_failed_weight_round_ends_the_rounds():
    """weights='auto': a round that fails (here its iteration limit) is the answer;
    no more rounds re-weight from its residuals (the paper's algorithm on the
    F/A-18 ran six more rounds of 5000 iterations)."""
    prob = pc.problem("vdp", seed=0)
    res = prob.estimate(weights="auto", max_iter=2, uncertainty=False, refine=False)
    assert not res.success and res.status == "max_iter"
    assert res.settings["weight_rounds"] == 1 and res.iterations == 2


def test_the_summary_says_the_iterations_span_several_solves(vdp):
    # a user read "FAILED (max_iter) after 395 iterations ... (max_iter=200)":
    # the count is over every mesh of the refinement, the limit per solve
    import dataclasses

    res = vdp.estimate("picard-gn", uncertainty=False, refine=False, weights="none")  # one solve
    assert f"after {res.iterations} iterations, " in res.summary()
    refined = dataclasses.replace(res, status="max_iter",
                                  settings=dict(res.settings, refinements=3))
    assert (f"after {res.iterations} iterations in all (4 meshes; max_iter applies to each "
            "solve)") in refined.summary()


def test_wall_time_counts_the_second_runs_that_failed(vdp, monkeypatch):
    """A second run that failed was not counted: a battery engineer's
    multistart recorded a start's 119 s of its 273, the rest in a single
    shooting run whose result was not returned."""
    import sys

    module = sys.modules["picard_casadi.estimate"]
    real = module.second_runs

    def slow(result, *args, **kwargs):  # a second run that took 0.5 s and failed
        time.sleep(0.5)
        return real(result, *args, **kwargs)

    monkeypatch.setattr(module, "second_runs", slow)
    res = pc.estimate(vdp.model, vdp.experiments, vdp.p0, codegen=False, uncertainty=False)
    assert res.wall_time >= 0.5


def test_multistart_wall_time_is_the_calls(vdp):
    # it was the best start's time: a tester's 7 s call reported 0.07 s
    res = vdp.estimate("picard-gn", multistart=3, seed=0, uncertainty=False)
    starts = sum(s["wall_time"] for s in res.starts)
    assert res.wall_time >= starts > max(s["wall_time"] for s in res.starts)
    assert "iterations over all starts" in res.settings["multistart_summary"]


def test_multistart_raises_the_best_start_s_warnings_only(vdp):
    """A user read a lost start's "the data do not determine k_phos" (PEtab's
    Boehm, a start ending on a plateau) as the result's own warning."""
    import warnings

    from picard_casadi.estimation.multistart import run_multistart

    def warning_estimate(model, experiments, p0, method, **kw):
        warnings.warn(f"from the start at {p0[0]:.6f}", UserWarning)
        return pc.estimate(model, experiments, p0, method, **kw)

    kw = dict(p_bounds=(np.asarray(vdp.p_bounds[0], float), np.asarray(vdp.p_bounds[1], float)),
              uncertainty=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run_multistart(warning_estimate, vdp.model, vdp.experiments,
                             np.asarray(vdp.p0, float), "picard-gn", 3, 0, kw)
    raised = [str(w.message) for w in caught if str(w.message).startswith("from the start")]
    returned = [s["p0"][0] for s in res.starts if s["p"] == [float(v) for v in res.p]]
    assert len(raised) == 1 and raised[0] in [f"from the start at {v:.6f}" for v in returned]


def test_multistart_with_the_method_unset_takes_the_default_path_from_each_start():
    """Each start of ``multistart`` with ``method`` unset is the call's own
    default path: on van der Pol with T = 2.5 and one refinement picard-gn is
    not certified, and the default path's single shooting converges.  The
    starts ran with method="picard-gn" named, and every start failed."""
    vdp = pc.problem("vdp", seed=0)
    kw = dict(p_bounds=vdp.p_bounds, T=2.5, refine=1, uncertainty=False)
    single = pc.estimate(vdp.model, vdp.experiments, vdp.p0, **kw)
    assert single.success and single.method == "single-shooting", single.message
    res = pc.estimate(vdp.model, vdp.experiments, vdp.p0, multistart=2, seed=0, **kw)
    assert res.success and res.method == "single-shooting", res.message
    assert res.starts[0]["success"] and res.starts[0]["nllh"] == pytest.approx(single.nllh)
    named = pc.estimate(vdp.model, vdp.experiments, vdp.p0, "picard-gn", multistart=2, seed=0,
                        **kw)
    assert named.method == "picard-gn" and not named.starts[0]["success"]


def test_multistart_with_t_unset_lets_each_start_choose_its_mesh_as_the_call_does():
    """The starts were given the call's resolved T, so none searched on the
    data's time scale as the call does: an ecologist's predator-prey fit
    converged alone and failed as start 0 of multistart=2 (output_not_positive,
    on CasADi's virtual machine), its p0 the caller's."""
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 6)
    N, P = x[0], x[1]
    r, K, a, h, e, m = (p[i] for i in range(6))
    f = a * N / (1 + a * h * N)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(r * N * (1 - N / K) - f * P, e * f * P - m * P),
                     y=x, x_domain=([0, 0], [np.inf, np.inf]),
                     p_names=["r", "K", "a", "h", "e", "m"])
    t = np.arange(0, 30.0)
    X = pc.simulate(model, [100.0, 30.0], [0.8, 600.0, 0.02, 1.0, 0.5, 0.3], t)
    y = X * np.exp(0.25 * np.random.default_rng(5).standard_normal(X.shape))
    exp = pc.Experiment(t=t, y=y, x0=y[0])
    table = [pc.Parameter(n, start=v, bounds=(1e-3, 1e4), scale="log10")
             for n, v in zip(model.p_names, [1.0, 1000.0, 0.1, 0.1, 0.1, 1.0])]
    single = pc.estimate(model, [exp], table, noise="log-normal", uncertainty=False)
    assert single.success and any("searched on the data's time scale" in w
                                  for w in single.warnings), single.warnings
    res = pc.estimate(model, [exp], table, noise="log-normal", uncertainty=False, multistart=2)
    first = res.starts[0]
    assert first["success"] and first["iterations"] == single.iterations, first["message"]
    assert first["nllh"] == pytest.approx(single.nllh, rel=1e-12)


def test_the_convergence_plot_draws_several_solves_one_after_another():
    # weight rounds restart the iteration count: the plot joined each round's
    # last point back to iteration 1 (a tangle a tester could not read)
    import matplotlib

    matplotlib.use("Agg")
    from picard_casadi.io.plotting import plot_convergence

    res = pc.problem("lotka-volterra", seed=0).estimate(weights="auto", uncertainty=False)
    restarts = int(np.sum(np.diff(res.history["iteration"]) <= 0))
    assert restarts >= 1
    ax = plot_convergence(res).axes[0]
    for line in ax.get_lines():
        x = line.get_xdata()
        if len(x) > 1 and x[0] != x[-1]:  # the data, not the dotted solve boundaries
            assert np.all(np.diff(x) > 0)
    assert sum(1 for line in ax.get_lines() if line.get_linestyle() == ":") == restarts
    assert ax.get_xlim()[1] >= len(res.history["iteration"])


def test_some_initial_states_known_the_others_estimated():
    # a process engineer knows the start volume of a fed-batch but not its
    # concentrations; estimate_x0 was all or nothing, and x0_bounds (a box for
    # every interval start, not x0 alone) held the state fixed along the whole run
    import casadi as ca

    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, y=x, x_names=["A", "B"],
                     rhs=ca.vertcat(-p[0] * x[0], p[0] * x[0] - p[1] * x[1]))
    made = pc.simulate_experiment(model, [2.0, 0.5], [0.8, 0.3], np.linspace(0, 8, 33),
                                  noise_std=0.01, seed=1)
    exp = pc.Experiment(made.t, made.y, x0=[1.5, 0.5])  # A's guess, B's known value
    results = [pc.estimate(model, [exp], [0.5, 0.5], method, estimate_x0=[True, False])
               for method in ("picard-gn", "ipopt")]
    for res in results:
        assert res.success, res.message
        assert res.x0[0][1] == 0.5 and abs(res.x0[0][0] - 2.0) < 3 * res.x0_std[0][0]
        assert np.all(np.abs(res.p - [0.8, 0.3]) < 3 * res.p_std)
        assert res.settings["estimate_x0"] == [True, False]
    assert np.allclose(results[0].p, results[1].p, rtol=1e-6)
    assert "initial states (estimated, B known" in results[0].summary()
    prof = pc.profile(results[0], parameters=["p0"])
    # nearly linear here: the profile's interval is the Wald interval (the truth
    # 0.8 sits at its edge, 2.2 standard errors from the likelihood's estimate)
    width = results[0].p_ci[0, 1] - results[0].p_ci[0, 0]
    assert np.all(np.abs(prof.intervals[0] - results[0].p_ci[0]) < 0.1 * width)
    with pytest.raises(ValueError, match=r"holds the initial value of B at the experiment's "
                                         r"`x0`, which it does not have"):
        pc.estimate(model, [pc.Experiment(made.t, made.y)], [0.5, 0.5],
                    estimate_x0=[True, False])
    with pytest.raises(ValueError, match=r"`estimate_x0` has 3 entries; the model has nx = 2"):
        pc.estimate(model, [exp], [0.5, 0.5], estimate_x0=[True, False, True])
    with pytest.raises(TypeError, match=r"`estimate_x0` must be True, False, or one"):
        pc.estimate(model, [exp], [0.5, 0.5], estimate_x0="no")


def _sqrt_inflow():
    """``x' = -k x + sqrt(c - 1)``: not finite for ``c < 1``."""
    import casadi as ca

    x = ca.SX.sym("x")
    p = ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=-p[0] * x + ca.sqrt(p[1] - 1.0), name="sqrt_inflow", x_names=["x"],
                     p_names=["k", "c"])
    t = np.linspace(0.0, 5.0, 21)
    x_true = pc.simulate(model, [3.0], [1.0, 2.0], t)
    y = x_true + 0.01 * np.random.default_rng(1).standard_normal(x_true.shape)
    return model, pc.Experiment(t=t, y=y, x0=[3.0], name="decay")


def test_multistart_goes_on_past_starts_where_the_model_is_not_finite():
    """A sampled start with ``c < 1`` (the Latin hypercube puts one of 6 in
    ``c`` in [0, 2/3)) cannot be evaluated: it is listed as a failed start
    with the reason, and the others find the optimum.  The caller's own p0
    there raises, as a single estimate does (a ValueError naming the fix)."""
    model, exp = _sqrt_inflow()
    bounds = ([0.1, 0.0], [5.0, 4.0])
    res = pc.estimate(model, [exp], [0.5, 3.0], p_bounds=bounds, multistart=6, seed=0,
                      uncertainty=False)
    assert res.success
    np.testing.assert_allclose(res.p, [1.0, 2.0], rtol=0.05)
    below = [s for s in res.starts if s["p0"][1] < 1.0]
    assert below, "the strata put a start below c = 1"
    for s in below:
        assert not s["success"] and np.isnan(s["nllh"]) and np.all(np.isnan(s["p"]))
        assert "not finite at the starting point" in s["message"]
        assert "right-hand side for x is not finite" in s["message"]
    assert f"({len(below)} not evaluable" in res.settings["multistart_summary"]
    with pytest.raises(pc.StartNotFiniteError, match="start from another p0"):
        pc.estimate(model, [exp], [0.5, 0.5], p_bounds=bounds, multistart=3, seed=0)
    with pytest.raises(ValueError, match="not finite at the starting point"):
        pc.estimate(model, [exp], [0.5, 0.5], p_bounds=bounds)


def test_ipopt_s_failure_advises_the_gauss_newton_hessian_only_where_it_was_not_used(vdp):
    kw = dict(p0=[0.5, 0.5], p_bounds=vdp.p_bounds, method="ipopt", max_iter=1,
              uncertainty=False, T=0.25)
    exact = pc.estimate(vdp.model, vdp.experiments, **kw)
    gauss_newton = pc.estimate(vdp.model, vdp.experiments, hessian="gauss-newton", **kw)
    assert not exact.success and not gauss_newton.success
    assert "try hessian='gauss-newton'" in exact.message
    assert "hessian=" not in gauss_newton.message, gauss_newton.message


def test_the_summary_s_name_column_fits_the_longest_name():
    # PEtab's Epo_degradation_BaF3 pushed its row out of line
    import casadi as ca

    x, p = ca.SX.sym("x"), ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=-p[0] * x + p[1], p_names=["a_rather_long_rate_name", "b"])
    exp = pc.simulate_experiment(model, [1.0], [0.5, 0.2], np.linspace(0, 5, 21),
                                 noise_std=0.01, seed=0)
    lines = pc.estimate(model, [exp], [0.3, 0.1]).summary().splitlines()
    head = next(line for line in lines if line.lstrip().startswith("parameter"))
    rows = [line for line in lines if line.lstrip().startswith(("a_rather", "b "))]
    column = head.index("estimate") + len("estimate")  # right-aligned under its header
    assert len(rows) == 2 and all(row[:column].rstrip()[-1].isdigit() for row in rows), lines
    assert all(len(row[:column].rstrip()) == column for row in rows), lines


def test_the_summary_shows_an_estimate_down_to_its_standard_error():
    """Six digits hid a standard error of 1e-6 of the estimate: a robot
    joint's inertia showed as 0.05 with the interval [0.05, 0.05]."""
    import casadi as ca

    from picard_casadi.analysis.significant_digits import digits_beside, shown

    assert digits_beside(0.0500724, 1.28e-6) == 6 and digits_beside(0.0500724, 1.28e-8) == 8
    # the zeros the standard error vouches for are shown (a pendulum's w2
    # 20.000004 +- 0.000107 printed 20, its profile interval [20, 20])
    d = digits_beside(20.000004277, 0.000107)
    assert d == 7 and shown(20.000004277, d) == "20.00000" and shown(19.99957, d - 1) == "19.9996"
    assert shown(20.0, 6) == "20" and shown(float("inf"), 8) == "inf"
    assert digits_beside(1.0, float("inf")) == 6 and digits_beside(1.0, 0.0) == 6
    assert digits_beside(1.0, 1e-20) == 15
    x, p = ca.SX.sym("x"), ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=-p[0] * x + p[1], p_names=["a", "b"])
    exp = pc.simulate_experiment(model, [1.0], [0.5, 0.2], np.linspace(0, 5, 21),
                                 noise_std=1e-8, seed=0)
    res = pc.estimate(model, [exp], [0.3, 0.1])
    # the gap in the states' units and scales (a growth model's 2.03e+14 beside
    # "converged" read as broken: its scaled 1.3e-10)
    assert res.method != "picard-gn" or re.search(r"continuity gap \S+ \(\S+ of the states' "
                                                  r"scales\)", res.message), res.message
    row = next(line for line in res.summary().splitlines() if line.lstrip().startswith("a "))
    lo, hi = row.split("[")[1].rstrip("]").split(",")
    assert float(lo) < float(row.split()[1]) < float(hi), row


def test_the_readme_first_fit_runs_as_written():
    """The README's first example, run from the README itself: the pendulum's
    truth without a flag.  (Without its bounds, from p0 = 0 the fit ends in the
    inverted pendulum's minimum on 3 of 40 noise draws, flagged:
    docs/design.md.)"""
    import re
    import warnings
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    code = re.search(r"## A first fit\n\n```python\n(.*?)```", readme, re.S).group(1)
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", pc.FitWarning)  # a flagged fit fails the example
        exec(code.replace("print(res.summary())", ""), namespace)
    res = namespace["res"]
    assert res.success and not res.warnings, res.summary()
    assert np.all(np.abs(res.p - [0.25, 1.2]) < 5 * res.p_std), (res.p, res.p_std)


def test_a_state_read_through_a_sensor_bias_is_guessed_from_its_output():
    """A temperature measured as y = T + bias, no x0 given: T was guessed 0 K
    (only outputs that are a state were taken from the data), where its
    Arrhenius term has no finite derivative; four methods failed from there
    (18-30 s on a user's CSTR) with advice about x0_bounds."""
    T, a, E, bias = (ca.SX.sym(n) for n in ("T", "a", "E", "bias"))
    model = pc.Model(x=T, p=ca.vertcat(a, E, bias), rhs=a * (340.0 - T) + 1e9 * ca.exp(-E / T),
                     y=T + bias, x_names=["T"], p_names=["a", "E", "bias"], y_names=["T_meas"])
    assert model.affine_output_states == [0]
    t = np.linspace(0.0, 60.0, 121)
    X = pc.simulate(model, [300.0], [0.1, 8000.0, 0.5], t)
    y = X[:, :1] + 0.5 + 0.3 * np.random.default_rng(0).standard_normal((t.size, 1))
    exp = pc.Experiment(t, y)
    p0 = [0.05, 8000.0, 2.0]
    assert exp.x0_guess(model)[0] == 0.0  # without parameters: as before
    assert exp.x0_guess(model, p0)[0] == pytest.approx(y[0, 0] - 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (E is barely determined by these data)
        res = pc.estimate(model, [exp], p0=p0, p_bounds=([0, 1000, -5], [10, 20000, 5]),
                          uncertainty=False)
    assert res.success, res.message
    assert abs(res.x0[0][0] + res.p[2] - 300.5) < 1.0


def test_an_output_not_affine_in_one_state_is_not_inverted():
    x = ca.SX.sym("x", 2)
    p = ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=-p * x, y=ca.vertcat(x[0] ** 2, x[0] + x[1], 3 * x[1] + p))
    assert model.affine_output_states == [None, None, 1]


def test_an_output_not_finite_at_the_start_is_named():
    """A battery's OCV, exp(-30 (1 - SOC)), with SOC given in percent (70):
    the right-hand side is finite, the output overflows, and the message
    named nothing."""
    x, p = ca.SX.sym("soc"), ca.SX.sym("R")
    model = pc.Model(x=x, p=p, rhs=-0.001 * x, y=3.5 + 0.5 * ca.exp(-30 * (1 - x)) + p,
                     x_names=["SOC"], p_names=["R"], y_names=["V"])
    t = np.linspace(0, 100, 20)
    exp = pc.Experiment(t, 3.6 + 0.01 * np.sin(t), x0=[70.0])
    with pytest.raises(pc.StartNotFiniteError, match=r"the output\(s\) V are not finite at "
                                                     r"the start of experiment 'experiment' "
                                                     r"\(t = 0\), at its initial state "
                                                     r"\(SOC = 70\)"):
        pc.estimate(model, [exp], [0.1], estimate_x0=False)


def test_a_sampled_start_s_fallback_note_does_not_say_the_caller_s_p0():
    """The best of a multistart came from sampled start 4, finished by single
    shooting: its note said "from p0", which a user read as their own."""
    from picard_casadi.estimation.multistart import run_multistart

    def fake(model, experiments, p0, method, multistart=None, **kwargs):
        won = p0[0] != 1.0  # the sampled starts win
        return pc.EstimationResult(
            p=np.array(p0, float), x0=[np.zeros(1)], success=True, status="converged",
            message="", iterations=3, objective=1.0 if won else 2.0,
            weighted_objective=1.0 if won else 2.0, continuity_gap=0.0,
            fixed_point_residual=0.0, wall_time=0.0, p_names=["k"],
            warnings=["picard-gn stopped; this result is from method='single-shooting' "
                      "from p0 (its step ...)"])

    res = run_multistart(fake, None, [], np.array([1.0]), None, 3, 0,
                         {"p_bounds": (np.array([0.5]), np.array([5.0]))})
    assert "from its start (start 1 of res.starts, not the caller's p0)" in res.warnings[0]


def test_a_guessed_state_on_the_edge_of_its_box_starts_in_its_middle():
    """A neuron's gates in [0, 1] (x0_bounds), unmeasured, guessed 0: held on
    the box's edge, the fit ran its parameters off along a valley (gL -> 0,
    EL -> -1500) to its iteration limit; from the box's middle it converged
    in 29 iterations.  Measured states, given x0, known or half-open states,
    and the edges of the model's x_domain keep their guess."""
    from picard_casadi.estimation.setup import _inside_the_box

    x, p = ca.SX.sym("x", 3), ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=-p * x, y=x[0], x_names=["V", "m", "c"])
    exp = pc.Experiment(np.linspace(0, 1, 5), np.full(5, -60.0))
    lb, ub = np.array([-np.inf, 0.0, 0.0]), np.array([np.inf, 1.0, np.inf])
    guess = exp.x0_guess(model)
    assert list(guess) == [-60.0, 0.0, 0.0]
    assert list(_inside_the_box(model, exp, guess, True, lb, ub)) == [-60.0, 0.5, 0.0]
    assert list(_inside_the_box(model, exp, guess, [True, False, True], lb, ub)) == [
        -60.0, 0.0, 0.0]
    given = exp.replaced(x0=[-60.0, 0.0, 0.0])
    assert list(_inside_the_box(model, given, given.x0_guess(model), True, lb, ub)) == [
        -60.0, 0.0, 0.0]
    # the model's x_domain says where it is valid, not where its states lie (a
    # tank's level in [0, 10], guessed 5 for 0.8, started outside the domain)
    valid = pc.Model(x=x, p=p, rhs=-p * x, y=x[0], x_names=["V", "m", "c"],
                     x_domain=(lb, ub))
    assert list(_inside_the_box(valid, exp, guess, True, lb, ub)) == [-60.0, 0.0, 0.0]


def test_initial_states_ended_on_their_x0_bounds_are_named():
    """A neuron's local minimum held its gates' initial values at 0 and 1
    (x0_bounds): parameters on bounds were named, the states were not.  The
    edges of the model's x_domain (where it is valid) are not named."""
    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    t = np.linspace(0, 2, 15)
    y = 2.0 * np.exp(-0.7 * t)
    model = pc.Model(x=x, p=k, rhs=-k * x, y=x, x_names=["A"])
    res = pc.estimate(model, [pc.Experiment(t, y, name="run")], [1.0],
                      x0_bounds=([0.0], [1.5]))
    assert any(w.startswith("initial state(s) ended on their x0_bounds: A = 1.5 of 'run'")
               for w in res.warnings), res.warnings
    inside = pc.estimate(model, [pc.Experiment(t, y, name="run")], [1.0],
                         x0_bounds=([0.0], [3.0]))
    assert not any("ended on their x0_bounds" in w for w in inside.warnings)


def test_initial_states_given_everywhere_and_estimated_name_the_flag():
    """Doses as ``Experiment(x0=[dose, 0])`` with ``estimate_x0`` left at
    True: the values were starting guesses, an undetermined amount went to
    -240 mg, and no warning named ``estimate_x0=False``.  Now one does; with
    the flag, nothing is said."""
    x, k = ca.SX.sym("x", 2), ca.SX.sym("k", 2)
    model = pc.Model(x=x, p=k, rhs=ca.vertcat(-k[0] * x[0], -k[1] * x[1]), y=x[0],
                     x_names=["A1", "A2"])
    t = np.linspace(0.5, 6.0, 12)
    exps = [pc.Experiment(t, d * np.exp(-0.4 * t) * (1 + 0.01 * np.cos(5 * t)), t0=0.0,
                          x0=[d, 0.0], name=f"S{i}") for i, d in enumerate((50.0, 100.0))]
    with pytest.warns(UserWarning, match=r"every experiment gives its initial states .* the "
                                         r"data do not determine 2 of them \(A2 of 'S0', A2 of "
                                         r"'S1'\)\. If the values given are known"):
        res = pc.estimate(model, exps, [0.3, 0.3])
    assert any("pass estimate_x0=False" in w for w in res.warnings)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        res = pc.estimate(model, exps, [0.3, 0.3], estimate_x0=False)
    assert not [w for w in said if "every experiment gives" in str(w.message)]


def test_a_state_never_measured_in_an_experiment_is_said_to_start_at_zero():
    """An ecologist's site whose predators were never counted: its initial
    predators started at the guess 0, a state the model does not leave, and
    the flagged fit blamed another unit.  The note names the start."""
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 4)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(p[0] * x[0] - p[1] * x[0] * x[1],
                                              -p[2] * x[1] + p[3] * x[0] * x[1]),
                     y=x, x_names=["N", "P"], y_names=["N", "P"],
                     p_names=["a", "b", "c", "d"])
    t = np.arange(0.0, 20.0, 0.5)
    truth = [1.0, 0.5, 1.0, 0.3]
    rng = np.random.default_rng(0)
    A = pc.simulate(model, [3.0, 1.0], truth, t) * np.exp(0.05 * rng.standard_normal((40, 2)))
    B = pc.simulate(model, [2.0, 2.0], truth, t) * np.exp(0.05 * rng.standard_normal((40, 2)))
    B[:, 1] = np.nan
    with pytest.warns(UserWarning, match=r"the initial P of 'B' starts from 0, as no "
                                         r"measurement of it in that experiment gives a start"):
        res = pc.estimate(model, [pc.Experiment(t, A, name="A"), pc.Experiment(t, B, name="B")],
                          [0.8, 0.4, 0.8, 0.2], noise="log-normal")
    assert not res.success or res.fit_flagged
    assert any("give that experiment's x0" in w for w in res.warnings)


def test_few_measurements_per_estimated_quantity_name_the_noise_bias():
    """26 parameters per subject and a noise level on 69 concentrations: the
    maximum-likelihood noise 0.099 for 0.15, 4 of 26 intervals missing the
    truth, no word.  The bias (N - n) / N is named; many measurements
    per quantity say nothing."""
    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    model = pc.Model(x=x, p=k, rhs=-k * x, y=x, p_names=["k"])
    rng = np.random.default_rng(0)

    def runs(n_t):
        t = np.linspace(0.5, 4.0, n_t)
        return [pc.Experiment(t, 10.0 * np.exp(-kk * t) + 0.1 * rng.standard_normal(n_t),
                              x0=[10.0], name=f"s{i}") for i, kk in enumerate((0.5, 0.6, 0.7))]
    with pytest.warns(UserWarning, match=r"12 measurements for 4 estimated quantities .* "
                                         r"\(N - n\) / N = 0\.67 .* about 1\.22 times too small"):
        res = pc.estimate(model, runs(4), [0.3], per_experiment="k", estimate_x0=False,
                          weights="auto")
    assert res.success
    res = pc.estimate(model, runs(40), [0.3], per_experiment="k", estimate_x0=False,
                      weights="auto")
    assert res.success and not any("estimated quantities" in w for w in res.warnings)


def test_weights_given_as_standard_deviations_are_named():
    """A motor's weights given as the noise's standard deviations, [0.02, 0.5]
    for inverse variances: every standard error 80 times too wide and the
    warnings blaming an outlier.  Weights that weigh the outputs as their
    residuals scatter say nothing."""
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(-p[0] * x[0], p[0] * x[0] - p[1] * x[1]),
                     y=x, y_names=["A", "B"])
    t = np.linspace(0.0, 5.0, 40)
    rng = np.random.default_rng(0)
    X = pc.simulate(model, [10.0, 0.0], [0.7, 0.3], t)
    y = X + rng.standard_normal(X.shape) * [0.02, 0.5]
    exp = pc.Experiment(t, y, x0=[10.0, 0.0])
    with pytest.warns(UserWarning, match=r"the weights given weigh the outputs \S+ times unlike "
                                         r"their residuals' scatter .*\(given as the standard "
                                         r"deviations\?"):
        pc.estimate(model, [exp], [0.5, 0.5], estimate_x0=False, weights=[0.02, 0.5])
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        pc.estimate(model, [exp], [0.5, 0.5], estimate_x0=False,
                    weights=[1 / 0.02 ** 2, 1 / 0.5 ** 2])
    assert not [w for w in said if "weights given weigh" in str(w.message)]
