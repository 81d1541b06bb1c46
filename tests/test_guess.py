"""The starting point: node values of each interval from its data-anchored start."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.runtime import codegen
from picard_casadi.estimate import build_setup


def _ramp_setup(exp: pc.Experiment, p0: float, bound: float, estimate_x0: bool):
    """The starting point of x' = p on T = 0.1 intervals, state box [-bound, bound]."""
    x = ca.SX.sym("x")
    p = ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=p, name="ramp")
    return build_setup(model, [exp], np.array([p0]), T=0.1, n=2, nodes=5,
                       scheme="chebyshev", weights=np.ones(1),
                       p_bounds=(np.array([-1e3]), np.array([1e3])),
                       x_bounds=(np.array([-bound]), np.array([bound])),
                       estimate_x0=estimate_x0, codegen=False)


def test_an_interval_that_leaves_the_box_starts_constant():
    """x' = p: with p = 100 an interval of 0.1 s climbs by 10, far beyond the box [-1, 1]."""
    t = np.linspace(0.0, 1.0, 11)
    exp = pc.Experiment(t=t, y=(0.5 + 0.3 * np.sin(t))[:, None], name="e")
    setup = _ramp_setup(exp, 100.0, 1.0, estimate_x0=True)
    U0, X0 = setup.U0, setup.X0
    # every interval's fixed point would end 10 above its start: all start constant
    np.testing.assert_allclose(U0, np.repeat(X0[:, :, None], U0.shape[2], axis=2))
    # with a slope the box can hold, the nodes are the fixed point (a ramp)
    setup = _ramp_setup(exp, 1.0, 1.0, estimate_x0=True)
    rise = setup.U0[:, 0, -1] - setup.U0[:, 0, 0]
    np.testing.assert_allclose(rise, 0.1, rtol=1e-10)


def test_a_state_starting_at_zero_gets_its_fixed_point():
    """x' = p from x0 = 0: the first interval is a ramp, not held constant."""
    t = np.linspace(0.0, 1.0, 11)
    exp = pc.Experiment(t=t, y=t[:, None].copy(), x0=np.array([0.0]), name="e")
    setup = _ramp_setup(exp, 1.0, 10.0, estimate_x0=False)
    assert setup.X0[0, 0] == 0.0
    rise = setup.U0[:, 0, -1] - setup.U0[:, 0, 0]
    np.testing.assert_allclose(rise, 0.1, rtol=1e-10)


def _count_simulations(monkeypatch) -> list[int]:
    import importlib

    # the package exports the function under the module's name
    simulate_module = importlib.import_module("picard_casadi.simulate")
    calls = []
    real = simulate_module.simulate

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(simulate_module, "simulate", counting)
    return calls


def test_no_simulation_when_every_state_is_measured(monkeypatch):
    """The simulation only supplies unmeasured states: with none, it is not run,
    and the start is the same data-anchored one."""
    t = np.linspace(0.0, 1.0, 11)
    exp = pc.Experiment(t=t, y=(0.5 + 0.3 * np.sin(t))[:, None], name="e")
    calls = _count_simulations(monkeypatch)
    setup = _ramp_setup(exp, 1.0, 10.0, estimate_x0=True)
    assert calls == []
    # the starts are the local regression of the data (0.5 + 0.3 sin t)
    np.testing.assert_allclose(setup.X0[:, 0], 0.5 + 0.3 * np.sin(setup.disc.t0), atol=2e-3)


def test_unmeasured_states_still_come_from_the_simulation(monkeypatch):
    """x1' = x2, x2' = -p x1 with only x1 measured: x2's starts are simulated."""
    x = ca.SX.sym("x", 2)
    p = ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(x[1], -p * x[0]), y=x[0], name="osc")
    t = np.linspace(0.0, 2.0, 41)
    exp = pc.Experiment(t=t, y=np.cos(t)[:, None], x0=np.array([1.0, 0.0]), name="e")
    calls = _count_simulations(monkeypatch)
    setup = build_setup(model, [exp], np.array([1.0]), T=0.25, n=2, nodes=5,
                        scheme="chebyshev", weights=np.ones(1),
                        p_bounds=(np.array([0.1]), np.array([10.0])),
                        x_bounds=(np.array([-5.0, -5.0]), np.array([5.0, 5.0])),
                        estimate_x0=True, codegen=False)
    assert len(calls) == 1
    # x2 = -sin t at the interval starts (simulated with p0 = 1 from a start
    # regressed from the data, so to the regression's accuracy)
    np.testing.assert_allclose(setup.X0[:, 1], -np.sin(setup.disc.t0), atol=1e-3)


def _registry_setup(name: str, guess: str, codegen: bool = False):
    prob = pc.problem(name, seed=1)
    m, o = prob.model, prob.options
    lb, ub = o.get("x0_bounds", (np.full(m.nx, -np.inf), np.full(m.nx, np.inf)))
    return build_setup(m, prob.experiments, prob.p0, T=o["T"], n=o["n"],
                       nodes=o.get("nodes", 9), scheme="chebyshev", weights=np.ones(m.ny),
                       p_bounds=(np.full(m.np, -np.inf), np.full(m.np, np.inf)),
                       x_bounds=(np.asarray(lb, float), np.asarray(ub, float)),
                       estimate_x0=True, codegen=codegen, guess=guess)


@pytest.mark.parametrize("name, guess", [("cmg", "simulation"), ("cmg", "shooting"),
                                         ("fa18-roll-ail", "simulation"),
                                         ("fitzhugh-nagumo", "simulation")])
def test_fixed_points_of_all_intervals_at_once_equal_one_by_one(name, guess, monkeypatch):
    # cmg: starts from the simulation (8 states unmeasured), 23 Newton steps;
    # fa18: every state measured, 2 intervals that do not settle;
    # fitzhugh-nagumo: 239 Newton steps
    import picard_casadi.transcription.guess as guess_module

    batched = _registry_setup(name, guess)
    calls = []
    solve = guess_module._interval_fixed_points

    def alone(fns, f_der, system, disc, js, starts, p0, max_sweeps, typical, whole=None,
              first=None):
        # every interval solved on its own
        calls.append(len(js))
        rows = np.broadcast_to(typical, starts.shape)
        parts = [solve(fns, f_der, system, disc, js[i:i + 1], starts[i:i + 1], p0, max_sweeps,
                       rows[i], whole, None if first is None else first[i:i + 1])
                 for i in range(len(js))]
        return np.concatenate([u for u, _ in parts]), np.concatenate([ok for _, ok in parts])

    monkeypatch.setattr(guess_module, "_interval_fixed_points", alone)
    one_by_one = _registry_setup(name, guess)
    assert max(calls) > 1  # the batched path is taken, and split here
    np.testing.assert_array_equal(batched.X0, one_by_one.X0)
    np.testing.assert_array_equal(batched.U0, one_by_one.U0)


@pytest.mark.skipif(codegen.find_compiler() is None, reason="no C compiler")
def test_fixed_points_of_the_guess_in_generated_code(monkeypatch):
    """Where every start is known first (the F/A-18: every state measured), the
    guess's sweeps and Newton steps are the transcription's generated calls
    over the whole mesh: the same guess as the virtual machine's, to round-off."""
    from picard_casadi.transcription.functions import Transcription

    calls = []
    picard = Transcription.picard

    def counted(self, X, U, p):
        calls.append(self.native)
        return picard(self, X, U, p)

    monkeypatch.setattr(Transcription, "picard", counted)
    compiled = _registry_setup("fa18-roll-ail", "simulation", codegen=True)
    assert calls and all(calls)  # the guess's sweeps, generated
    calls.clear()
    vm = _registry_setup("fa18-roll-ail", "simulation")
    assert calls and not any(calls)
    np.testing.assert_array_equal(compiled.X0, vm.X0)
    np.testing.assert_allclose(compiled.U0, vm.U0, rtol=1e-12, atol=1e-12)
    # the scales come from U0, which the compiled and NumPy solves give to
    # round-off (bit for bit only by the chance of one processor's rounding)
    np.testing.assert_allclose(compiled.tr.x_scale, vm.tr.x_scale, rtol=1e-14)
    assert np.all(compiled.tr.x_scale != 1.0)  # set after the guess


def test_unmeasured_state_starting_at_zero_settles():
    """A pendulum's rate, unmeasured and started at zero, has no typical size
    but the simulation's: its fixed points settle, with no note (every
    interval used to be judged on a 1e-8 floor and one started constant)."""
    x = ca.SX.sym("x", 2)
    p = ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, y=x[0:1],
                     rhs=ca.vertcat(x[1], -p[0] * ca.sin(x[0]) - p[1] * x[1]))
    t = np.linspace(0.0, 20.0, 101)
    exp = pc.simulate_experiment(model, [1.0, 0.0], [9.81, 0.2], t, noise_std=0.02, seed=1)
    res = pc.estimate(model, [exp], p0=[1.0, 1.0], uncertainty=False)
    assert res.success
    # a converged result drops the guess's notes: look at the start's own, after
    # one iteration (a run that stops keeps them)
    start = pc.estimate(model, [exp], p0=[1.0, 1.0], uncertainty=False, max_iter=1,
                        guess="simulation", refine=False)
    assert not start.success
    assert not [w for w in start.warnings if "did not settle" in w], start.warnings


def test_local_regressions_equal_the_pointwise_fits():
    """The batched fit gives each point's local_regression, including points
    whose window must widen and points beyond the data."""
    from picard_casadi.transcription.guess import local_regression, local_regressions

    rng = np.random.default_rng(0)
    for _ in range(50):
        ts = np.unique(np.sort(rng.uniform(0.0, 5.0, rng.integers(1, 60))))
        vs = np.sin(ts) + 0.1 * rng.standard_normal(ts.size)
        t = np.sort(rng.uniform(-0.5, 5.5, rng.integers(1, 40)))
        half_width = float(rng.uniform(0.05, 1.0))
        expected = [local_regression(ts, vs, float(s), half_width) for s in t]
        np.testing.assert_allclose(local_regressions(ts, vs, t, half_width), expected,
                                   rtol=1e-10, atol=1e-10)
        # several series at the same times: each row its own fit
        more = np.vstack([vs, np.cos(3.0 * ts), rng.standard_normal(ts.size)])
        together = local_regressions(ts, more, t, half_width)
        assert together.shape == (3, t.size)
        for row, v in zip(together, more):
            np.testing.assert_allclose(row, local_regressions(ts, v, t, half_width),
                                       rtol=1e-12, atol=1e-12)


def test_a_state_measured_late_is_not_extrapolated_back_over_the_gap():
    """Holling-II predator-prey with the prey counted only from t = 12: the start
    carried the prey's local quadratic back to t = 0 (-16 to +30 where the truth
    is 0.1) and picard-gn's trust region collapsed at iteration 2 (a user's
    report); there the simulation now supplies the prey."""
    import casadi as ca

    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 5)
    fr = p[2] * x[0] / (1 + p[2] * p[3] * x[0])
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(p[0] * x[0] * (1 - x[0] / p[1]) - fr * x[1],
                                              0.5 * fr * x[1] - p[4] * x[1]))
    rng = np.random.default_rng(101)
    t = np.sort(rng.uniform(0, 35, 40))
    truth = np.array([1.0, 5.0, 1.2, 0.8, 0.25])
    Y = pc.simulate(model, [0.5, 2.0], truth, t) + 0.05 * rng.normal(size=(40, 2))
    Y[:10, 0] = np.nan
    res = pc.estimate(model, [pc.Experiment(t=t, y=Y)], [0.5, 10.0, 0.6, 0.4, 0.5])
    assert res.success, res.message
    assert np.all(np.abs(res.p - truth) < 3 * res.p_std), (res.p, res.p_std)


def test_log_spaced_samples_start_the_intervals_from_their_neighbours():
    """Robertson's kinetics measured at 40 log-spaced times to t = 1e6: a
    regression window of T / 2 (7812) spanned ten decades of samples, so the
    first interval starts were their mean (A = 0.93 at t = 1e-5, where the
    data say 0.99) and the later ones quadratics carried between sparse
    samples (A and B down to -0.2 where the data are 0 to 0.01).  Each start
    now follows its own neighbours and stays within their range."""
    x, q = ca.SX.sym("x", 3), ca.SX.sym("q", 3)
    k = 10 ** q
    rhs = ca.vertcat(-k[0] * x[0] + k[2] * x[1] * x[2],
                     k[0] * x[0] - k[2] * x[1] * x[2] - k[1] * x[1] ** 2, k[1] * x[1] ** 2)
    model = pc.Model(x=x, p=q, rhs=rhs)
    t = np.concatenate([[0.0], np.logspace(-5, 6, 40)])
    clean = pc.simulate(model, [1.0, 0.0, 0.0], np.log10([0.04, 3e7, 1e4]), t,
                        rtol=1e-10, atol=1e-14)
    y = clean * (1.0 + 0.01 * np.random.default_rng(0).standard_normal(clean.shape))
    setup = build_setup(model, [pc.Experiment(t=t, y=y, x0=[1.0, 0.0, 0.0])],
                        np.array([1.0, 1.0, 1.0]), T=15625.0, n=2, nodes=9,
                        scheme="chebyshev", weights=np.ones(3),
                        p_bounds=(np.full(3, -np.inf), np.full(3, np.inf)),
                        x_bounds=(np.full(3, -np.inf), np.full(3, np.inf)),
                        estimate_x0=False, codegen=False)
    X0, t0 = setup.X0, setup.disc.t0
    assert np.all(X0 >= 0.0), X0.min(axis=0)
    early = (t0 > 0) & (t0 < 1e-3)
    assert early.sum() >= 5
    np.testing.assert_allclose(X0[early, 0], y[1:early.sum() + 1, 0], rtol=0.02)
    # each start lies within the range of the samples around it (two either side)
    for j in np.flatnonzero(t0 > 0):
        k = int(np.searchsorted(t, t0[j]))
        near = y[max(k - 2, 0):k + 3]
        assert np.all(X0[j] <= near.max(axis=0)) and np.all(X0[j] >= near.min(axis=0)), j


def _buckets() -> pc.Model:
    # a soil store S feeding a groundwater store G through (S / FC)**beta, only
    # the outflow K G measured (a two-bucket rainfall-runoff model)
    S, G, P = ca.SX.sym("S"), ca.SX.sym("G"), ca.SX.sym("P")
    FC, beta, K = ca.SX.sym("FC"), ca.SX.sym("beta"), ca.SX.sym("K")
    R = P * (ca.fmax(S, 0) / FC) ** beta
    return pc.Model(x=ca.vertcat(S, G), p=ca.vertcat(FC, beta, K), u=P,
                    rhs=ca.vertcat(P - R - 0.02 * S, R - K * G), y=K * G,
                    x_names=["S", "G"], p_names=["FC", "beta", "K"], u_names=["P"])


def test_a_log_normal_output_and_a_singular_zero_start_the_states_where_they_fit():
    # the outflow K G is log-normal, so the guess inverts exp(log(K G)) at p0
    # (G started at 0 before); S, which no output gives, guessed 0 where the
    # derivative of (S / FC)**beta in beta is log(0) 0, starts at 1: every
    # method failed at the start before (a hydrologist's fit, 34.5 s of
    # second runs), and the default fit converges
    model = _buckets()
    t = np.arange(200.0)
    rng = np.random.default_rng(3)
    rain = np.where(rng.random(200) < 0.3, rng.uniform(5, 40, 200), 0.0)
    X = pc.simulate(model, [80.0, 10.0], [150.0, 2.0, 0.1], t, rain)
    y = 0.1 * X[:, 1] * np.exp(0.05 * rng.standard_normal(200))
    exp = pc.Experiment(t=t, y=y, u=rain, u_interpolation="previous")
    logged = model.with_outputs(ca.log(model.y), scales=["log"])
    on_log = exp.replaced(y=np.log(y))  # (as the fit states it)
    assert on_log.x0_guess(logged, [150.0, 2.0, 0.05])[1] == pytest.approx(y[0] / 0.05)
    res = pc.estimate(model, exp, [100.0, 1.5, 0.05], p_bounds=([10, 0.5, 1e-3], [1000, 5, 1]),
                      noise="log-normal")
    assert res.success, res.message
    assert res.p[2] == pytest.approx(0.1, rel=0.05)


def test_a_measured_state_carried_before_its_first_sample_stays_in_the_data_s_range():
    """Viral loads measured from day 1, the clock started at t0 = 0 (the
    target-cell-limited model): the loads' regression was carried back to
    -9.9e6 at t0, and single shooting's CVODES failed at the start."""
    T, I, V = (ca.SX.sym(n) for n in ("T", "I", "V"))
    beta, delta, p, c = (ca.SX.sym(n) for n in ("beta", "delta", "p", "c"))
    model = pc.Model(x=ca.vertcat(T, I, V), p=ca.vertcat(beta, delta, p, c),
                     rhs=ca.vertcat(-beta * T * V, beta * T * V - delta * I, p * I - c * V),
                     y=V, x_names=["T", "I", "V"], y_names=["V"])
    t = np.arange(1.0, 11.0)
    truth = [1.2e-8, 2.5, 30.0, 10.0]
    X = pc.simulate(model, [4e8, 0.0, 1.0], truth, t, t0=0.0)
    exp = pc.Experiment(t, X[:, 2] * 10 ** (0.3 * np.random.default_rng(0).standard_normal(10)),
                        x0=[4e8, 0.0, 1.0], t0=0.0)
    res = pc.estimate(model, [exp], [1e-8, 2.0, 20.0, 10.0], "single-shooting", max_iter=3,
                      p_bounds=([1e-11, 0.1, 0.1, 10.0], [1e-5, 20.0, 1e4, 10.0]),
                      estimate_x0=[False, False, True], noise="log10-normal",
                      uncertainty=False)
    assert "failed at the start" not in res.message, res.message


def test_a_start_that_runs_away_from_the_data_is_warned_of_before_the_fit():
    """A tumour's days read as hours: the volume simulated from p0 grew to
    1e24 against data of 2000, and the fit sat in silence for minutes."""
    import warnings

    from picard_casadi.transcription.guess import RUNAWAY_HEAD

    v, drug, g, k = ca.SX.sym("V"), ca.SX.sym("A"), ca.SX.sym("g"), ca.SX.sym("k")
    model = pc.Model(x=ca.vertcat(v, drug), p=ca.vertcat(g, k),
                     rhs=ca.vertcat(g * v - k * drug * v, -drug), y=v, x_names=["V", "A"],
                     p_names=["g", "k"])
    days = np.arange(0.0, 36.0, 2.0)
    volume = 100.0 * np.exp(0.12 * days)
    for factor, warned in ((24.0, True), (1.0, False)):
        exp = pc.Experiment(days * factor, volume[:, None], x0=[100.0, 1.0], t0=0.0)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            pc.estimate(model, [exp], [0.12, 0.01], estimate_x0=[True, False], max_iter=3,
                        method="picard-gn")
        runaway = [str(w.message) for w in seen if str(w.message).startswith(RUNAWAY_HEAD)]
        assert bool(runaway) == warned, runaway
        assert not warned or "(V reaches" in runaway[0] and "hours for days" in runaway[0]
