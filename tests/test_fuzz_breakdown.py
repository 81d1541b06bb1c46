"""Fuzz: numerical breakdowns end as an honest result or a clear error.

Never a raw CasADi ``RuntimeError`` or NumPy ``LinAlgError`` out of
``estimate``, never LAPACK's messages on the terminal, and a message that
says what broke and where.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc


def _blowup_model() -> pc.Model:
    x = ca.SX.sym("x")
    p = ca.SX.sym("p")
    return pc.Model(x=x, p=p, rhs=p * x ** 2, name="blowup")


def _blowup_experiment(p_true: float, t_end: float, n: int) -> pc.Experiment:
    t = np.linspace(0.0, t_end, n)
    return pc.Experiment(t, (1.0 / (1.0 - p_true * t))[:, None], x0=[1.0], name="run")


@pytest.fixture(scope="module")
def blowup():
    """The issue's example: x' = p x^2 from p0 = 50, default T (x blows up at t = 0.02)."""
    return _blowup_model(), _blowup_experiment(0.05, 10.0, 101)


WHERE = r"interval \d+ of experiment 'run' \(t = [\d.e+-]+ to [\d.e+-]+\)"


def test_picard_gn_blowup_is_an_honest_failure_naming_the_interval(blowup, capfd):
    model, exp = blowup
    res = pc.estimate(model, [exp], [50.0], "picard-gn", codegen=False)
    assert not res.success and res.status == "step_failed"
    assert re.search(r"overflowed at " + WHERE, res.message), res.message
    assert "p = [50.]" in res.message
    out, err = capfd.readouterr()
    assert "DLASCL" not in out + err and "illegal value" not in out + err


def test_shooting_blowup_names_cvodes_flag_interval_and_time(blowup, capfd):
    model, exp = blowup
    res = pc.estimate(model, [exp], [50.0], "shooting", codegen=False)
    # CasADi's error text (every function's inputs in the failing chain) was
    # printed on the terminal by the integration at the result
    out, err = capfd.readouterr()
    assert "Input 0" not in out + err, (out + err)[:300]
    assert not res.success and res.status == "Evaluation_Failed"
    # the step limit, or (with CVODES' smallest step) the error test at the blow-up
    assert re.search(r"CV_(TOO_MUCH_WORK|ERR_FAILURE)", res.message), res.message
    assert "blows up" in res.message and "max_steps" in res.message
    assert re.search(r"on " + WHERE, res.message), res.message


@pytest.mark.parametrize("method", ["ipopt", "picard"])
def test_other_methods_on_the_blowup_return_a_result(blowup, method):
    model, exp = blowup
    res = pc.estimate(model, [exp], [50.0], method, codegen=False, max_iter=200)
    assert isinstance(res.success, bool)
    if res.success:
        assert np.all(np.isfinite(res.p)) and res.continuity_gap < 1e-6
    else:
        assert res.message


def test_linearisation_out_of_range_stops_instead_of_repeating(capfd):
    """Short horizon: sensitivities of 1e148, no step can gain; it used to repeat the
    same iterate 200 times and end with "increase max_iter"."""
    model = _blowup_model()
    exp = _blowup_experiment(0.5, 1.0, 11)
    res = pc.estimate(model, [exp], [50.0], "picard-gn", codegen=False)
    assert not res.success and res.status == "step_failed"
    # a few iterations on each mesh (the first is bisected where the fixed
    # point at p0 did not settle, and each failed mesh is refined once)
    assert res.iterations <= 5 * (1 + res.settings["refinements"])
    assert "numerically meaningless" in res.message and "increase max_iter" not in res.message
    assert re.search(WHERE, res.message)


def test_a_breakdown_that_recurs_on_the_refined_mesh_is_not_restarted_again():
    """A run that broke down on a mesh that does not resolve the model is
    refined and started again from p0 once; where that run breaks down too,
    its failure is the result (each failure was refined and restarted, five
    times here; PEtab's Borghans took chains of up to five restarts, none
    converging after the first)."""
    model = _blowup_model()
    exp = _blowup_experiment(0.5, 1.0, 11)
    res = pc.estimate(model, [exp], [50.0], "picard-gn", codegen=False)
    assert not res.success and res.status == "step_failed"
    restarted = [w for w in res.warnings if "the run started again from p0" in w]
    assert len(restarted) == 1 and res.settings["refinements"] == 1
    assert any("failed again on the refined mesh" in w and "not restarted once more" in w
               for w in res.warnings)


def test_multiplier_continuity_blowup(blowup):
    model, exp = blowup
    res = pc.estimate(model, [exp], [50.0], "picard-gn", codegen=False,
                      continuity="multiplier", hessian="gauss-newton", max_iter=30)
    assert not res.success and res.message


def test_simulation_failure_names_the_time(blowup):
    model, _ = blowup
    with pytest.raises(pc.SimulationError,
                       match=r"failed at t in \[0\.015, 0\.02\]: CVODES reported CV_\w+ \("):
        pc.simulate(model, [1.0], [50.0], np.linspace(0, 1, 11))


@pytest.mark.parametrize("p0", [1e150, 1e300, -1e300])
def test_huge_p0_is_a_clear_error_or_an_honest_failure(p0):
    model = _blowup_model()
    exp = _blowup_experiment(0.05, 2.0, 21)
    try:
        res = pc.estimate(model, [exp], [p0], "picard-gn", codegen=False, max_iter=20)
    except ValueError as err:
        assert "not finite at the starting point" in str(err)
    else:
        assert not res.success or np.all(np.isfinite(res.p))


def test_nan_at_the_start_is_a_clear_error():
    x = ca.SX.sym("x")
    p = ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=-p * ca.sqrt(x - 5), name="sqrt")
    exp = _blowup_experiment(0.05, 2.0, 21)
    with pytest.raises(ValueError, match=r"not finite at the starting point"):
        pc.estimate(model, [exp], [1.0], "picard-gn", codegen=False)


def test_an_output_never_measured_is_handled():
    x = ca.SX.sym("x", 2)
    p = ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(-p * x[0], x[0]), y=x, name="half")
    t = np.linspace(0, 2, 21)
    rng = np.random.default_rng(0)
    y = np.column_stack([np.exp(-t) + 0.01 * rng.normal(size=21), np.full(21, np.nan)])
    exp = pc.Experiment(t, y, x0=[1.0, 0.0])
    with pytest.warns(UserWarning, match=r"x0\[x1\].*practically unidentifiable"):
        res = pc.estimate(model, [exp], [0.5], "picard-gn", codegen=False, weights="auto")
    assert res.success and abs(res.p[0] - 1.0) < 0.05


def test_an_unidentifiable_parameter_is_a_warning_not_a_crash():
    """Noise-free data, fitted exactly (merit 5e-27): it ended "trust region collapsed"."""
    x = ca.SX.sym("x")
    p = ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=-(p[0] + p[1]) * x, name="sum")
    t = np.linspace(0, 2, 21)
    exp = pc.Experiment(t, np.exp(-t)[:, None], x0=[1.0])
    with pytest.warns(UserWarning, match="information matrix"):
        res = pc.estimate(model, [exp], [0.3, 0.3], "picard-gn", codegen=False)
    assert res.success and not np.all(np.isfinite(res.p_std))


def test_a_linear_algebra_error_inside_a_step_is_a_failed_step(monkeypatch, capfd):
    """The shared guard: whatever LAPACK raises inside a step, with its prints."""
    import picard_casadi.methods.least_squares as least_squares

    def broken(*args, **kwargs):
        import ctypes
        import os

        os.write(2, b" ** On entry to DLASCL parameter number  4 had an illegal value\n")
        ctypes.CDLL(None)  # native code ran
        raise np.linalg.LinAlgError("SVD did not converge in Linear Least Squares")

    monkeypatch.setattr(least_squares, "working_set_step", broken)
    model = _blowup_model()
    exp = _blowup_experiment(0.05, 2.0, 21)
    res = pc.estimate(model, [exp], [0.1], "picard-gn", codegen=False)
    assert not res.success and res.status == "step_failed"
    assert "SVD did not converge" in res.message and "DLASCL" in res.message
    out, err = capfd.readouterr()
    assert "DLASCL" not in out + err


@pytest.mark.parametrize("error", [RuntimeError("Error in Function::call for 'x' [MXFunction]"),
                                   np.linalg.LinAlgError("Singular matrix"),
                                   FloatingPointError("overflow"), OverflowError("big")])
def test_an_error_escaping_a_method_is_success_false(monkeypatch, error):
    """The method-level net (``guarded_solve``) for anything the steps did not catch."""
    import picard_casadi.methods.condensed as condensed

    # raised from "inside the package" (the net tells package errors from a user's
    # callback by where they were raised)
    ns = {"error": error}
    exec(compile("def broken(self, *args):\n    raise error\n",
                 "/site-packages/picard_casadi/methods/fake.py", "exec"), ns)
    monkeypatch.setattr(condensed.ConstrainedGaussNewtonStep, "_step", ns["broken"])
    model = _blowup_model()
    exp = _blowup_experiment(0.05, 2.0, 21)
    res = pc.estimate(model, [exp], [0.1], "picard-gn", codegen=False)
    if isinstance(error, np.linalg.LinAlgError):
        assert res.status == "step_failed"
    else:
        assert res.status == "breakdown" and "picard-gn broke down" in res.message
    assert not res.success and str(error).split("[")[0].strip() in res.message
    assert np.array_equal(res.p, [0.1])


def test_package_errors_are_not_hidden_by_the_net(monkeypatch):
    import picard_casadi.methods.condensed as condensed

    def broken(self, *args):
        raise pc.CodegenError("the C compiler failed")

    monkeypatch.setattr(condensed.ConstrainedGaussNewtonStep, "_step", broken)
    model = _blowup_model()
    exp = _blowup_experiment(0.05, 2.0, 21)
    with pytest.raises(pc.CodegenError):
        pc.estimate(model, [exp], [0.1], "picard-gn", codegen=False)


@pytest.mark.parametrize("error", [RuntimeError("my callback broke"), ZeroDivisionError("x"),
                                   np.linalg.LinAlgError("mine")])
def test_an_error_in_the_users_callback_is_not_hidden(error):
    def callback(rec):
        raise error

    model = _blowup_model()
    exp = _blowup_experiment(0.05, 2.0, 21)
    with pytest.raises(type(error), match=str(error)):
        pc.estimate(model, [exp], [0.1], "picard-gn", codegen=False, callback=callback)


def test_max_iter_with_a_solution_that_blows_up_says_so_not_more_iterations():
    # x' = a x^2 from x0 = 1 blows up at t = 1/a: data from a = 0.05 on [0, 10],
    # start a = 0.5 (blow-up at t = 2).  The run used to end after 200
    # iterations at a = 0.4999997 advising "increase max_iter"; now it stalls
    # there (no progress over 100 iterations with the gaps open), saying why
    x, a = ca.SX.sym("x"), ca.SX.sym("a")
    model = pc.Model(x=x, p=a, rhs=a * x ** 2)
    exp = pc.simulate_experiment(model, [1.0], [0.05], np.linspace(0, 10, 41),
                                 noise_std=0.01, seed=0)
    res = pc.estimate(model, [exp], p0=[0.5], method="picard-gn", uncertainty=False)
    assert not res.success and res.status == "stalled" and res.iterations < 1000
    assert "does not exist over the data of experiment" in res.message
    assert "increase max_iter" not in res.message
    # the failure is placed on a short span holding the blow-up time 1 / (a x0)
    where = re.search(r"failed at t in \[([0-9.]+), ([0-9.]+)\]", res.message)
    assert where, res.message
    lo, hi = float(where.group(1)), float(where.group(2))
    assert lo <= 1.0 / (res.p[0] * res.x0[0][0]) <= hi and hi - lo <= 0.05
    # with the method left unset, shooting from p0 (CVODES stops at the blow-up,
    # and its intervals restart past it) reaches the truth, and picard-gn
    # finishes from its solution
    default = pc.estimate(model, [exp], p0=[0.5], uncertainty=False)
    assert default.success, default.message
    assert abs(default.p[0] - 0.05) < 1e-3
    assert "(stalled: no progress" in default.warnings[0]
    assert "method='shooting' from p0 converged" in default.warnings[0]


SHOOTING_ON_A_BLOW_UP = textwrap.dedent("""
    import resource
    import casadi as ca, numpy as np
    import picard_casadi as pc
    x, a = ca.SX.sym("x"), ca.SX.sym("a")
    model = pc.Model(x=x, p=a, rhs=a * x ** 2, y=x)
    t = np.linspace(0, 10, 11)
    y = 1 / (1 + 0.2 * t) + 0.01 * np.random.default_rng(0).standard_normal(t.size)
    exp = pc.Experiment(t=t, y=y[:, None], x0=[1.0])
    res = pc.estimate(model, [exp], p0=[1.0], p_bounds=([0.5], [2.0]), estimate_x0=False,
                      method="shooting", uncertainty=False)
    print(res.status, res.iterations, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    print(res.message)
""")


@pytest.mark.slow  # 70 s on a 2-core machine: a user's case reproduced to its end
def test_shooting_where_every_allowed_p_blows_up_ends_in_bounded_time_and_memory():
    # x' = a x^2, a in [0.5, 2], blows up before t = 2 for every allowed a while
    # the data decay over [0, 10].  IPOPT's restoration phase drove the shooting
    # states to ~1e154, where CVODES' forward pass for the adjoint gradient took
    # steps of t + h = t for ever: +40 MB/s until killed.  Now CVODES' smallest
    # step ends each such integration, and IPOPT's stalled iterate ends the solve.
    run = subprocess.run([sys.executable, "-c", SHOOTING_ON_A_BLOW_UP], capture_output=True,
                         text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    first, message = run.stdout.strip().splitlines()[-2:]
    status, iterations, max_rss_kb = first.split()
    assert status == "stalled" and int(iterations) > 30, run.stdout
    assert int(max_rss_kb) < 1_000_000, first
    assert "did not move in 30 iterations" in message
    # the reason: the model's solution with the last p does not exist over the
    # data (located by a simulation; CVODES' flags from CasADi's adjoint sweep
    # after IPOPT returned said so before that sweep was turned off)
    assert "does not exist over the data" in message and "failed at t in" in message
    assert "blows up" in message and "p_bounds" in message


def test_the_stall_counter_needs_thirty_unmoved_infeasible_iterations_in_a_row():
    from picard_casadi.methods.ipopt import STALL_ITERATIONS, StopOnInterrupt

    stop = StopOnInterrupt(3, 1, 0)
    x = np.array([1e12, -2.0, 0.5])
    gap, feasible = np.array([0.7]), np.array([1e-9])
    assert not stop._stalls(x, gap)
    # moves of 1e-3 of the largest entry, then of nothing, then a NaN (a move)
    assert not any(stop._stalls(x + 1e9 * k, gap) for k in range(1, 40))
    assert not any(stop._stalls(x + 1e-5, gap) for _ in range(STALL_ITERATIONS - 1))
    assert not stop._stalls(np.array([np.nan, -2.0, 0.5]), gap)
    assert not stop._stalls(x, gap)  # away from the NaN: a move
    # a feasible iterate that stands still (converged, tol out of reach) is no stall
    assert not any(stop._stalls(x, feasible) for _ in range(3 * STALL_ITERATIONS))
    assert not any(stop._stalls(x, gap) for _ in range(STALL_ITERATIONS - 1))
    assert stop._stalls(x, gap)


def test_shooting_whose_evaluation_raises_late_returns_its_last_iterate(monkeypatch):
    # a user's shooting run ended in Evaluation_Failed after 100 good iterations
    # and returned the start: IPOPT's solution is lost when an evaluation
    # raises, but the iteration callback saw every iterate
    from picard_casadi.methods import shooting

    x, a = ca.SX.sym("x"), ca.SX.sym("a")
    model = pc.Model(x=x, p=a, rhs=-a * x)
    exp = pc.simulate_experiment(model, [1.0], [0.5], np.linspace(0, 4, 21), noise_std=0.01,
                                 seed=0)

    def solve_then_raise(self):
        w = self.start().copy()
        w[0] = 0.45 / self.setup.p_scale[0]  # IPOPT's last iterate before the failure
        for _ in range(7):
            self.monitor.eval([w, 0.0, np.zeros(1)])
        stats = {"return_status": "Evaluation_Failed", "success": False, "iter_count": 0,
                 "error": "CV_TOO_MUCH_WORK"}
        return {"x": ca.DM(self.start())}, stats, ""

    monkeypatch.setattr(shooting.ShootingNLP, "solve", solve_then_raise)
    res = pc.estimate(model, [exp], [2.0], "shooting", uncertainty=False)
    assert res.status == "Evaluation_Failed" and not res.success
    assert abs(res.p[0] - 0.45) < 1e-12, res.p
    assert "IPOPT's last iterate (iteration 7)" in res.message


def _toggle_switch():
    """Gardner's toggle switch, u measured in 3 experiments; v**beta has the
    derivative v**beta log(v) in beta, NaN at v = 0, inside x_domain [0, inf)."""
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 4)
    model = pc.Model(x=x, p=p, y=x[0], x_names=["u", "v"], x_domain=([0, 0], [np.inf, np.inf]),
                     rhs=ca.vertcat(p[0] / (1 + x[1] ** p[2]) - x[0],
                                    p[1] / (1 + x[0] ** p[3]) - x[1]))
    t = np.linspace(0.25, 10, 40)
    rng = np.random.default_rng(10)
    exps = []
    for i, x0 in enumerate([[0.5, 0.2], [0.2, 0.8], [2.0, 2.0]]):
        X = pc.simulate(model, x0, [4.0, 3.0, 2.5, 2.0], t, t0=0.0)
        y = X[:, 0] + 0.05 * rng.standard_normal(t.size)
        exps.append(pc.Experiment(t=t, y=y, t0=0.0, x0=[y[0], 1.0], name=f"e{i}"))
    return model, exps


def test_a_state_on_its_domain_edge_is_named_not_the_domain_left():
    # picard-gn said "the model left its domain" (a user's toggle switch)
    model, exps = _toggle_switch()
    bounds = ([0.1, 0.1, 1.0, 1.0], [20.0, 20.0, 5.0, 5.0])
    # whether the iterates reach v = 0 from this start depends on round-off:
    # with the fixed-point solves in generated C (codegen) they go to another
    # local optimum (beta on its bound, with a FitWarning); NumPy's solves on
    # the virtual machine reach the edge.  guess="simulation": the "auto"
    # guess's retry from every state simulated with p0 converges instead
    res = pc.estimate(model, exps, [2.0] * 4, "picard-gn", p_bounds=bounds, uncertainty=False,
                      codegen=False, guess="simulation")
    assert res.status == "step_failed"
    assert "v is exactly on the edge of the model's domain" in res.message, res.message
    assert "x0_bounds" in res.message and "left its domain" not in res.message
    # the fix it names converges
    fixed = pc.estimate(model, exps, [2.0] * 4, "picard-gn", p_bounds=bounds,
                        x0_bounds=([1e-6, 1e-6], [50.0, 50.0]), uncertainty=False)
    assert fixed.success, fixed.message


@pytest.mark.parametrize("B0", [0.0, 0.1])
def test_a_fractional_order_past_full_conversion_names_the_state_under_the_power(B0):
    """r = k A**n with n = 0.5, data past the time A reaches 0: the message
    blamed B (the product, at 0 at the start, in no power) and its fix, a
    lower bound on every state, was refused for B(0) = 0.  With no state
    exactly on the edge (B from 0.1) it said "the model left its domain",
    naming none (a hydrologist's soil store run dry under fmax(SM, 0)**beta)."""
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 2)
    r = p[0] * x[0] ** p[1]
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(-r, r), y=x, x_names=["A", "B"],
                     p_names=["k", "n"])
    t = np.linspace(0, 20, 41)
    rng = np.random.default_rng(0)
    exps = []
    for A0 in [1.0, 2.0]:
        A = np.maximum(A0 ** 0.5 - 0.5 * 0.15 * t, 0) ** 2  # k = 0.15, n = 0.5
        Y = np.column_stack([A, B0 + A0 - A]) + 0.01 * rng.standard_normal((len(t), 2))
        exps.append(pc.Experiment(t=t, y=Y, x0=[A0, B0], name=f"A0={A0}"))
    res = pc.estimate(model, exps, [0.1, 1.0], "picard-gn", p_bounds=([1e-4, 0.1], [10, 3]),
                      estimate_x0=False, uncertainty=False)
    assert not res.success
    assert "A is below the edge of the model's domain" in res.message, res.message
    assert "B is" not in res.message


def test_a_failed_fit_of_a_model_with_a_jump_names_it():
    """Coulomb friction written Fc * sign(w): every method failed from a
    moderate start, the messages advising a better p0 (a controls
    engineer's motor)."""
    from picard_casadi.analysis.nonsmooth import nonsmooth_note, nonsmooth_terms, state_jump_note

    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 2)
    rhs = ca.vertcat(x[1], -p[0] * x[0] - p[1] * ca.sign(x[1]))
    model = pc.Model(x=x, p=p, rhs=rhs, y=x[0], p_names=["k", "Fc"])
    assert nonsmooth_note(model).startswith("the model's right-hand side uses sign() of x1, "
                                            "where its value jumps")
    assert "tanh(x1 / eps) for sign(x1)" in nonsmooth_note(model)
    assert state_jump_note(model).startswith("the model's right-hand side jumps where a state "
                                             "crosses a threshold (sign() of x1)")
    kinked = pc.Model(x=x, p=p, rhs=ca.vertcat(x[1], -p[0] * x[0] - p[1] * ca.fabs(x[1])),
                      y=x[0])
    assert "uses fabs() of x1, where its derivative jumps" in nonsmooth_note(kinked)
    assert state_jump_note(kinked) == ""
    smooth = pc.Model(x=x, p=p, rhs=ca.vertcat(x[1], -p[0] * x[0] - p[1] * ca.tanh(x[1])),
                      y=x[0])
    assert nonsmooth_note(smooth) == ""
    t = np.linspace(0, 5, 26)
    exp = pc.Experiment(t, np.cos(2 * t), x0=[1.0, 0.0])
    res = pc.estimate(model, [exp], [3.0, 0.1], "picard-gn", estimate_x0=False, max_iter=2,
                      uncertainty=False)
    assert not res.success and "Note: the model's right-hand side uses sign()" in res.message
    # a switch in time (a piecewise input) is no state's: not named
    t_sym = ca.SX.sym("t")
    timed = pc.Model(x=x, p=p, t=t_sym, rhs=ca.vertcat(
        x[1], -p[0] * x[0] + ca.if_else(t_sym > 1, p[1], 0) - p[1] * ca.fmax(x[1], -1)), y=x[0])
    assert [(n.name, n.states) for n in nonsmooth_terms(timed)] == [("if_else", ()),
                                                                   ("fmax", ("x1",))]
    assert state_jump_note(timed) == "" and "fmax() of x1" in nonsmooth_note(timed)


def test_a_failed_fit_whose_outputs_never_reach_the_data_says_so():
    """Viral loads in copies/mL (about 1e8) fitted by a model of log10 copies: four
    methods over 9 minutes, the message advising a better p0."""
    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    model = pc.Model(x=x, p=k, rhs=-k * x, y=ca.log10(x), y_names=["log10V"],
                     x_domain=([1e-12], [np.inf]))
    t = np.linspace(0, 3, 16)
    exp = pc.Experiment(t, 1e8 * np.exp(-t), x0=[1e8])
    res = pc.estimate(model, [exp], [1.0], "picard-gn", estimate_x0=False, max_iter=2,
                      uncertainty=False)
    assert not res.success
    assert "Note: the residuals are about as large as the data themselves" in res.message
    logs = pc.Experiment(t, 8.0 - 0.5 * t * np.log10(np.e), x0=[1e8])  # the log10 loads
    near = pc.estimate(model, [logs], [1.0], "picard-gn", estimate_x0=False, max_iter=2,
                       uncertainty=False)
    assert not near.success and "as large as the data" not in near.message
