"""``method="single-shooting"``: CVODES single shooting by a bounded Levenberg-Marquardt loop."""

from __future__ import annotations

import re
import warnings

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.transcription.discretisation import Discretisation
from picard_casadi.transcription.interval_integration import chained_interval_states


def _decay_with_input(hold: str = "previous") -> tuple[pc.Model, list[pc.Experiment]]:
    """x' = -k x + b u with a staircase input (``hold="previous"``: a step at
    t = 2, an interval boundary) or a sampled one interpolated linearly (a
    kink at every sample, inside the intervals: integrated in segments), two
    experiments of their own x0."""
    x, p, u = ca.SX.sym("x"), ca.SX.sym("p", 2), ca.SX.sym("u")
    model = pc.Model(x=x, p=p, u=u, rhs=-p[0] * x + p[1] * u, y=x, p_names=["k", "b"])
    t = np.linspace(0.0, 4.0, 17)
    steps = (np.where(t < 2.0, 1.0, 0.0) if hold == "previous"
             else np.random.default_rng(3).uniform(0.0, 1.0, t.size))
    exps = [pc.simulate_experiment(model, x0=[x0], p=[0.7, 1.5], t=t, u=steps, noise_std=0.01,
                                   seed=s, name=f"e{s}", u_interpolation=hold)
            for s, x0 in ((0, 0.5), (1, 2.0))]
    return model, exps


@pytest.mark.parametrize("hold", ["previous", "linear"])
def test_the_chained_intervals_are_the_simulation(hold):
    model, exps = _decay_with_input(hold)
    disc = Discretisation(model, exps, 0.5, 9, "chebyshev")
    chain = chained_interval_states(disc, 1e-10, 1e-10, 20000)
    Xs, xend, X = (np.asarray(v) for v in chain(np.array([[0.5, 2.0]]), [0.7, 1.5]))
    for e, (exp, x0) in enumerate(zip(exps, (0.5, 2.0))):
        sl = disc.intervals_of[e]
        # each interval starts where the last ended
        assert np.allclose(X[0, sl.start + 1:sl.stop], xend[0, sl.start:sl.stop - 1], rtol=0,
                           atol=1e-14)
        assert X[0, sl.start] == x0
        starts = disc.t0[sl]
        sim = pc.simulate(model, [x0], [0.7, 1.5], np.append(starts, disc.t0[sl.stop - 1]
                                                               + disc.h[sl.stop - 1]), exp)
        assert np.allclose(X[0, sl], sim[:-1, 0], rtol=1e-7, atol=1e-9)
        assert np.allclose(xend[0, sl.stop - 1], sim[-1, 0], rtol=1e-7, atol=1e-9)


def test_it_reaches_the_optimum_picard_gn_reaches():
    model, exps = _decay_with_input()
    kw = dict(p_bounds=([0.01, 0.01], [10.0, 10.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pc.FitWarning)
        ref = pc.estimate(model, exps, [0.2, 0.5], "picard-gn", **kw)
        res = pc.estimate(model, exps, [0.2, 0.5], "single-shooting", **kw)
    assert ref.success and res.success and res.method == "single-shooting"
    assert res.nllh == pytest.approx(ref.nllh, abs=1e-6)
    assert np.all(np.abs(res.p - ref.p) < 1e-3 * ref.p_std)
    assert np.all(np.abs(np.subtract(res.x0, ref.x0)) < 1e-3 * np.asarray(ref.x0_std))
    # the standard errors from its own model's sensitivities
    assert np.allclose(res.p_std, ref.p_std, rtol=1e-3)


def test_a_bound_holds_and_is_where_picard_gn_ends_too():
    model, exps = _decay_with_input()
    kw = dict(p_bounds=([0.01, 0.01], [10.0, 1.2]), uncertainty=False)  # b's truth is 1.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pc.FitWarning)
        ref = pc.estimate(model, exps, [0.2, 0.5], "picard-gn", **kw)
        res = pc.estimate(model, exps, [0.2, 0.5], "single-shooting", **kw)
    assert res.success and res.p[1] == pytest.approx(1.2, abs=1e-12) and res.p[1] <= 1.2
    assert res.nllh == pytest.approx(ref.nllh, abs=1e-6)


def test_a_start_cvodes_cannot_integrate_is_a_failure_that_says_so():
    # x' = p x^2 from x = 1 blows up at t = 1/p: at p = 10 before the first sample
    x, p = ca.SX.sym("x"), ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=p * x ** 2, y=x)
    exp = pc.Experiment(t=np.linspace(0.0, 1.0, 11), y=1.0 / (1.0 - 0.5 * np.linspace(0, 1, 11)),
                        x0=[1.0])
    res = pc.estimate(model, [exp], [10.0], "single-shooting", estimate_x0=False,
                      p_bounds=([0.0], [20.0]))
    assert not res.success and res.status == "step_failed"
    assert "CVODES failed at the start" in res.message


def test_bad_options_are_named():
    model, exps = _decay_with_input()
    with pytest.raises(ValueError, match="gtol"):
        pc.estimate(model, exps, [0.2, 0.5], "single-shooting", gtol=-1.0)
    with pytest.raises(TypeError, match="max_iter"):
        pc.estimate(model, exps, [0.2, 0.5], "single-shooting", max_iter="ten")
    with pytest.raises(ValueError, match="sensitivity_rtol"):
        pc.estimate(model, exps, [0.2, 0.5], "single-shooting", sensitivity_rtol=0.0)


def test_the_callback_sees_every_iteration_and_can_stop_it():
    model, exps = _decay_with_input()
    seen = []

    def stop_at_3(rec):
        seen.append(rec.iteration)
        return rec.iteration == 2

    res = pc.estimate(model, exps, [0.2, 0.5], "single-shooting", callback=stop_at_3,
                      p_bounds=([0.01, 0.01], [10.0, 10.0]), uncertainty=False)
    assert res.status == "stopped" and not res.success and seen == [0, 1, 2]


def test_a_reweighting_round_starts_where_the_last_ended():
    # the start was read once per setup: each round of weights="auto" began
    # again from p0 (Van der Pol: 14, 11 and 11 iterations; now 14, 4, 2)
    vdp = pc.problem("vdp", seed=0)
    rounds: list[int] = []

    def count(rec):
        if rec.iteration == 0:
            rounds.append(0)
        rounds[-1] += 1

    res = pc.estimate(vdp.model, vdp.experiments, vdp.p0, "single-shooting",
                      p_bounds=vdp.p_bounds, weights="auto", callback=count, uncertainty=False)
    assert res.success and len(rounds) >= 2
    assert all(n < rounds[0] / 2 for n in rounds[1:]), rounds


def _decay_with_constants() -> tuple[pc.Model, list[pc.Experiment]]:
    """x' = -k x + b c, y = (x, z) with z' = -k2 z: ``c`` an input constant in each
    experiment (one CVODES run per experiment), the first state's x0 free."""
    x, p, u = ca.SX.sym("x", 2), ca.SX.sym("p", 3), ca.SX.sym("c")
    model = pc.Model(x=x, p=p, u=u, rhs=ca.vertcat(-p[0] * x[0] + p[1] * u, -p[2] * x[1]),
                     y=x, p_names=["k", "b", "k2"])
    t = np.linspace(0.0, 4.0, 13)
    exps = [pc.simulate_experiment(model, x0=[x0, 1.0], p=[0.7, 1.5, 0.3], t=t,
                                   u=np.full(t.size, c), noise_std=0.01, seed=s, name=f"e{s}")
            for s, (x0, c) in enumerate(((0.5, 1.0), (2.0, 0.25)))]
    return model, exps


def test_intervals_of_one_constant_input_are_one_run_with_the_chain_s_states():
    from picard_casadi.transcription import interval_integration as ii

    model, exps = _decay_with_constants()
    disc = Discretisation(model, exps, 0.5, 9, "chebyshev")
    pieces = ii._constant_pieces(disc)
    assert [js for js, _ in pieces] == [list(range(sl.start, sl.stop)) for sl in disc.intervals_of]
    assert [float(v[0]) for _, v in pieces] == [1.0, 0.25]
    merged = chained_interval_states(disc, 1e-11, 1e-11, 20000)
    ii_pieces = ii._constant_pieces
    try:  # every interval alone: the chain restarted at each
        ii._constant_pieces = lambda d: [([j], None) for j in range(d.n_intervals)]
        alone = chained_interval_states(disc, 1e-11, 1e-11, 20000)
    finally:
        ii._constant_pieces = ii_pieces
    X0, p = np.array([[0.5, 2.0], [1.0, 1.0]]), [0.7, 1.5, 0.3]
    for a, b in zip(merged(X0, p), alone(X0, p)):
        assert np.allclose(np.asarray(a), np.asarray(b), rtol=1e-8, atol=1e-10)


def test_a_held_input_is_not_one_constant_across_its_step():
    from picard_casadi.transcription import interval_integration as ii

    model, exps = _decay_with_input("previous")  # a step at t = 2
    disc = Discretisation(model, exps, 0.5, 9, "chebyshev")
    pieces = ii._constant_pieces(disc)
    for js, value in pieces:
        if value is None:
            continue
        inside = (disc.t0[js][:, None] + disc.h[js][:, None] * np.linspace(0, 0.999, 50)).ravel()
        exp = disc.experiments[disc.exp_of[js[0]]]
        assert np.all(exp.inputs(inside, 1) == value)
    # the step at t = 2 (a boundary) splits each experiment into two pieces
    assert len(pieces) == 4 and all(v is not None for _, v in pieces)


def _single_shooting_model(**options):
    """The :class:`SingleShootingModel` one iteration of ``_decay_with_constants``
    built (the first state's x0 free)."""
    from picard_casadi.methods.single_shooting import SingleShootingModel

    model, exps = _decay_with_constants()
    captured = {}
    original = SingleShootingModel.__init__

    def keep(self, setup, opts):
        original(self, setup, opts)
        captured["model"] = self

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SingleShootingModel, "__init__", keep)
        pc.estimate(model, exps, [0.5, 1.0, 0.5], "single-shooting", max_iter=1,
                    estimate_x0=[True, False], **options)
    return captured["model"]


def test_the_jacobian_from_sensitivity_states_is_the_derivative():
    from picard_casadi.methods.single_shooting import SingleShootingOptions

    ss = _single_shooting_model()
    assert ss.x0_columns == (0,)
    w = ss.start() * 1.01
    Wt, Y = ss.data()
    r, Jm = ss.jacobian(w, Wt, Y)
    # two integrations (with and without the sensitivities) under one tolerance
    assert np.allclose(r, np.asarray(ss.residuals(w, Wt, Y)).ravel(), rtol=0, atol=1e-7)
    eps = 1e-6
    for k in np.flatnonzero(ss.free):
        dw = np.zeros_like(w)
        dw[k] = eps
        fd = (np.asarray(ss.residuals(w + dw, Wt, Y)).ravel()
              - np.asarray(ss.residuals(w - dw, Wt, Y)).ravel()) / (2 * eps)
        assert np.allclose(Jm[:, k], fd, rtol=1e-5, atol=1e-7), k
    # the known initial states have no column of their own
    assert not np.any(Jm[:, ~ss.free])
    assert isinstance(SingleShootingOptions(), SingleShootingOptions)


def test_the_search_s_jacobian_is_integrated_at_its_own_tolerance_and_the_answer_s_at_rtol():
    from picard_casadi.methods import single_shooting as ss

    model, exps = _decay_with_constants()
    built = []
    original = ss.chained_output_sensitivities

    def record(disc, ts, Ws, rtol, atol, *rest):
        built.append((rtol, atol))
        return original(disc, ts, Ws, rtol, atol, *rest)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ss, "chained_output_sensitivities", record)
        searched = pc.estimate(model, exps, [0.3, 1.0, 0.6], "single-shooting",
                               estimate_x0=[True, False], uncertainty=False,
                               sensitivity_rtol=1e-8)
    # the search at 1e-8 (atol scaled with it); the stop judged with the Jacobian at rtol
    assert built[:2] == [(1e-8, 1e-8), (1e-10, 1e-10)]
    assert all(tolerances == (1e-10, 1e-10) for tolerances in built[2:])
    built.clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ss, "chained_output_sensitivities", record)
        exact = pc.estimate(model, exps, [0.3, 1.0, 0.6], "single-shooting",
                            estimate_x0=[True, False], uncertainty=False)
    assert set(built) == {(1e-10, 1e-10)}  # the default: every Jacobian at rtol
    assert searched.success and exact.success
    assert np.allclose(searched.p, exact.p, rtol=1e-6) and abs(searched.nllh - exact.nllh) < 1e-6


def test_the_search_s_residuals_are_integrated_at_rtol_without_the_sensitivities():
    m = _single_shooting_model(sensitivity_rtol=1e-8)
    assert not m.search_is_exact
    w = m.start() * 1.01
    Wt, Y = m.data()
    r, J_search = m.jacobian(w, Wt, Y, exact=False)
    assert np.array_equal(r, np.asarray(m.residuals(w, Wt, Y)).ravel())
    _, J_exact = m.jacobian(w, Wt, Y, exact=True)
    assert np.allclose(J_search, J_exact, rtol=1e-5, atol=1e-7)


def test_steps_below_the_integration_s_accuracy_end_converged_at_the_optimum():
    from picard_casadi.methods import single_shooting as ss

    model, exps = _decay_with_constants()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pc.FitWarning)
        ref = pc.estimate(model, exps, [0.5, 1.0, 0.5], "single-shooting")
        # with CVODES that loose, the objective is noise at the optimum
        res = pc.estimate(model, exps, ref.p, "single-shooting", rtol=1e-4, atol=1e-8,
                          ftol=1e-15, gtol=1e-15, xtol=1e-15)
    assert ref.success
    assert res.success and "accuracy" in res.message, res.message
    assert np.all(np.abs(res.p - ref.p) < 0.05 * ref.p_std)
    assert ss.ACCURACY_GAIN > 1 and ss.ACCURACY_RTOL >= 1


def test_trials_are_judged_against_the_objective_integrated_as_they_are(monkeypatch):
    # CVODES' steps differ with the sensitivities in its error control, and so
    # does the objective: by more than rtol promises (PEtab's Fujita, 150
    # times). Here the promise is made negligible and CVODES loose: a plain
    # trial compared with the iterate's objective from the sensitivity run
    # fails however short, and the damping grew to its limit (step_failed);
    # judged against the iterate's plain objective, their difference is the
    # accuracy measured, and the run ends converged at the optimum
    from picard_casadi.methods import single_shooting as ss

    model, exps = _decay_with_constants()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pc.FitWarning)
        ref = pc.estimate(model, exps, [0.5, 1.0, 0.5], "single-shooting")
        monkeypatch.setattr(ss, "_objective_accuracy", lambda model, r, rtol: 1e-300)
        res = pc.estimate(model, exps, ref.p, "single-shooting", rtol=1e-4, atol=1e-8,
                          ftol=1e-15, gtol=1e-15, xtol=1e-15)
    assert ref.success
    assert res.success and "accuracy" in res.message, res.message
    assert np.all(np.abs(res.p - ref.p) < 0.05 * ref.p_std)


def test_samples_over_eleven_decades_are_integrated_not_read_as_the_start():
    """Robertson to t = 1e6, sampled from t = 1e-5: in one run over the whole
    horizon the first samples sat within 2e-9 of its normalised start, where
    CasADi's CVODES returns the initial state (B = 0 at eight samples); single
    shooting's noise weights then came out 2500 times too small, and its
    answer 0.39 above the likelihood's optimum.  Kept apart, each sample is
    the simulation's."""
    from picard_casadi.transcription import interval_integration as ii

    x, q = ca.SX.sym("x", 3), ca.SX.sym("q", 3)
    a, b, c = x[0], x[1], x[2]
    rhs = ca.vertcat(-q[0] * a + q[2] * b * c, q[0] * a - q[2] * b * c - q[1] * b ** 2,
                     q[1] * b ** 2)
    model = pc.Model(x=x, p=q, rhs=rhs)
    t = np.concatenate([[0.0], np.logspace(-5, 6, 23)])
    exp = pc.Experiment(t, np.zeros((t.size, 3)), x0=[1.0, 0.0, 0.0])
    disc = Discretisation(model, [exp], 1e6, 5, "radau", [t])
    assert len(ii._short_pieces(disc, ii._interval_plan(disc)[0])) > 1
    k = [0.04, 3e7, 1e4]
    Xs = np.asarray(chained_interval_states(disc, 1e-10, 1e-12, 50000)(
        np.array([[1.0], [0.0], [0.0]]), k)[0])  # nx x (J M): the sample slots
    slots = Xs.T.reshape(disc.n_intervals, disc.M, 3)[disc.mask[:, 0, :] > 0]  # sample order
    sim = pc.simulate(model, [1.0, 0.0, 0.0], k, t, rtol=1e-10, atol=1e-14)
    assert slots.shape == sim.shape
    assert np.allclose(slots[:, 1], sim[:, 1], rtol=1e-4, atol=1e-11), (slots[:5, 1], sim[:5, 1])


@pytest.mark.parametrize("hold", ["previous", "linear"])
def test_the_likelihood_s_simulation_on_the_mesh_is_the_simulation(hold):
    """The likelihood's simulations follow the mesh (one CVODES run per
    stretch of one constant input, per interval elsewhere) where simulate
    restarts at every sample: the same sums of squares."""
    from picard_casadi.estimation.setup import simulated_ssr, state_sizes

    model, exps = _decay_with_input(hold)
    disc = Discretisation(model, exps, 0.5, 9, "chebyshev")
    x0s, p = [np.array([0.5]), np.array([2.0])], np.array([0.7, 1.5])
    alone = simulated_ssr(model, exps, x0s, p)
    on_mesh = simulated_ssr(model, exps, x0s, p, disc, state_sizes(np.ones((4, 1, 9))))
    assert np.array_equal(on_mesh[1], alone[1])
    assert np.allclose(on_mesh[0], alone[0], rtol=1e-6, atol=0)


def test_a_trial_whose_squares_overflow_is_rejected_without_a_warning():
    # a user's fit with its time in milliseconds: residuals of 1e160 at a trial
    # point printed "warning: overflow encountered in matmul" on the command line
    from picard_casadi.methods.single_shooting import _half_squares

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _half_squares(np.array([1e160, -1e160])) == np.inf
        assert _half_squares(np.array([3.0, 4.0])) == 12.5


def test_a_jacobian_beyond_the_memory_budget_is_a_failed_run_not_a_memory_error(monkeypatch):
    # PEtab's Alkan (73 experiments): the dense Jacobian, a column for every
    # experiment's initial states, was 13.7 GB and raised MemoryError
    import picard_casadi.methods.single_shooting as ss

    monkeypatch.setattr(ss, "MEMORY_BUDGET_BYTES", 1000)
    vdp = pc.problem("vdp", seed=0)
    res = pc.estimate(vdp.model, vdp.experiments, vdp.p0, "single-shooting", codegen=False)
    assert not res.success and res.status == "step_failed"
    assert re.search(r"single shooting not run: its Jacobian \(\d+ sample slots x 2 outputs x "
                     r"\d+ columns, .*\) would need [\d.]+ KB, more than the 0.977 KB budget",
                     res.message), res.message


def test_a_run_that_creeps_ends_stalled(monkeypatch):
    """A Duffing record in mm against a model in m crept for 1000 iterations
    (633 s, the objective 2.87604 -> 2.87563): a run that gains less than
    progress_tol over its window, and ten times less than one Gauss-Newton
    step predicts, stops.  The rule on the measured numbers, then its wiring
    on a valley to infinity (A (1 - exp(-k t)) fitted to a line) with the
    ratio set to 0, so that the window alone decides."""
    from picard_casadi.methods import single_shooting as ss

    assert ss.creeping(2.3e-5, 8.3e-4, 1e-3)  # the Duffing record in mm
    assert not ss.creeping(6.2e-4, 1e-4, 1e-3)  # PEtab's Crauste, converging slowly
    assert not ss.creeping(9.7e-4, 1.5e-3, 1e-3)  # 400 samples of it, converging
    assert not ss.creeping(5e-7, 2e-8, 1e-3)  # Elowitz at its optimum
    assert not ss.creeping(2e-3, 1.0, 1e-3)  # progress enough
    x = ca.SX.sym("x")
    k, A = ca.SX.sym("k"), ca.SX.sym("A")
    model = pc.Model(x=x, p=ca.vertcat(k, A), rhs=k * (A - x), y=x, p_names=["k", "A"])
    t = np.linspace(0, 10, 41)
    exp = pc.Experiment(t, t + 0.01 * np.random.default_rng(0).standard_normal(t.size),
                        x0=[0.0])
    kw = dict(estimate_x0=False, uncertainty=False, max_iter=200, progress_tol=0.5)
    monkeypatch.setattr(ss, "CREEP_RATIO", 0.0)
    res = pc.estimate(model, [exp], [1.0, 5.0], "single-shooting", progress_window=20, **kw)
    assert res.status == "stalled" and not res.success
    assert 40 < res.iterations < 200
    assert "over the last 20 iterations, less than progress_tol=0.5" in res.message
    on = pc.estimate(model, [exp], [1.0, 5.0], "single-shooting", progress_window=0, **kw)
    assert on.status == "max_iter" and on.iterations == 200
    with pytest.raises(ValueError, match="progress_window"):
        pc.estimate(model, [exp], [1.0, 5.0], "single-shooting", progress_window=-1, **kw)
