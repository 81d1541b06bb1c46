"""The default path's second runs (picard_casadi/estimation/fallbacks.py), one rule at a time.

The end-to-end cases (a fed-batch falling back to shooting, the CSTR to
IPOPT, the SIR to guess='anchored') are in tests/test_defaults.py; here the
rules, with stand-in results so that each runs in microseconds."""

from __future__ import annotations

import time
from types import SimpleNamespace

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.estimation.fallbacks import DefaultPath, clipped, second_runs


def _result(success=False, status="max_iter", gap=0.0, message="iteration limit reached",
            nllh=float("nan"), discretisation_error=float("nan"), n_measurements=0):
    return SimpleNamespace(success=success, status=status, message=message, warnings=[],
                           history={"gap_scaled": [gap]}, wall_time=1.0, p=np.array([1.0]),
                           p_names=["k"],
                           settings={}, _ran_off=False,
                           _continuation_stopped=False, nllh=nllh,
                           discretisation_error=discretisation_error,
                           n_measurements=n_measurements, iterations=1000)


def _path(**kw):
    base = dict(method="picard-gn", method_chosen=False, guess="auto", warm_start=False,
                every_state_measured=True, unstable=False)
    base.update(kw)
    return DefaultPath(**base)


class _Reruns:
    """Records the second runs asked for; each returns ``outcomes[method]``."""

    def __init__(self, **outcomes):
        self.calls: list[tuple[str, str]] = []
        self.budgets: list[int | None] = []
        self.ipopt_options: list[dict | None] = []
        self.outcomes = outcomes

    def __call__(self, method, guess, max_iter, warm_start=None, ipopt_options=None):
        self.calls.append((method, guess) if warm_start is None
                          else (method, guess, "warm"))
        self.budgets.append(max_iter)
        self.ipopt_options.append(ipopt_options)
        key = method if warm_start is None else (
            "single-shooting warm" if method == "single-shooting" else "continued")
        if key.startswith("single-shooting") and key not in self.outcomes:
            return _single_shooting_failed()
        return self.outcomes[key]()


#: the second run after a failed step where the model is not unstable, and
#: before multiple shooting after any other failure
SS = ("single-shooting", "auto")
#: ... and from the last iterate of a run its iteration limit stopped while it
#: still converged, before picard-gn is continued from there
SS_WARM = ("single-shooting", "auto", "warm")


def _single_shooting_failed():
    """single shooting failing at its start (no iterate to continue from)."""
    res = _result(status="step_failed", message="single shooting stopped: CVODES failed at "
                  "the start")
    res.history = {"gap_scaled": []}
    return res


def test_a_failure_falls_back_to_shooting_and_says_why():
    reruns = _Reruns(shooting=lambda: _result(success=True, status="converged"))
    res = second_runs(_result(), _path(), reruns, time.perf_counter())
    assert reruns.calls == [SS, ("shooting", "auto")] and res.success
    assert res.warnings[0].startswith("picard-gn on the collocation mesh did not reach")
    assert "(max_iter: iteration limit reached)" in res.warnings[0]
    assert res.wall_time == 2.0  # both runs


@pytest.mark.parametrize("case", [
    dict(path=_path(method_chosen=True)),
    dict(path=_path(warm_start=True)),
    dict(path=_path(max_iter_given=True)),
    dict(path=_path(), status="stopped"),
])
def test_what_the_user_chose_runs_once(case):
    reruns = _Reruns()
    first = _result(status=case.get("status", "max_iter"))
    assert second_runs(first, case["path"], reruns, time.perf_counter()) is first
    assert reruns.calls == []


def test_a_user_max_iter_still_lets_a_breakdown_fall_back():
    # the budget is the user's; a breakdown before it is not
    reruns = _Reruns(ipopt=lambda: _result(status="Restoration_Failed", message="ipopt: r"),
                     shooting=lambda: _result(success=True, status="converged"))
    res = second_runs(_result(status="step_failed", message="no acceptable step: x"),
                      _path(max_iter_given=True), reruns, time.perf_counter())
    # a failed step: IPOPT on the same collocation first, then shooting
    assert res.success and reruns.calls == [SS, ("ipopt", "auto"), ("shooting", "auto")]


def test_open_gaps_retry_anchored_then_shooting_and_the_message_says_both():
    reruns = _Reruns(**{"picard-gn": lambda: _result(message="no acceptable step: y"),
                        "shooting": lambda: _result(status="Evaluation_Failed",
                                                    message="shooting stopped: CVODES")})
    first = _result(gap=1.0, message="iteration limit reached: try guess='anchored' or "
                    "guess='shooting' (every state simulated with p0)")
    res = second_runs(first, _path(every_state_measured=False), reruns, time.perf_counter())
    assert reruns.calls == [("picard-gn", "anchored"), SS, ("shooting", "auto")]
    assert res is first and not res.success
    assert "guess='anchored' did not converge either (no acceptable step)" in res.message
    assert "method='shooting' from p0 did not converge either (shooting stopped)" in res.message


def test_a_run_that_stalled_with_its_gaps_open_retries_as_one_at_max_iter():
    """picard-gn's "stalled" (no progress over progress_window iterations with
    the gaps open) is handled as its iteration limit: the other starts first."""
    reruns = _Reruns(**{"picard-gn": lambda: _result(success=True, status="converged")})
    first = _result(status="stalled", gap=0.01, message="no progress: the objective fell")
    res = second_runs(first, _path(every_state_measured=False), reruns, time.perf_counter())
    assert reruns.calls == [("picard-gn", "anchored")] and res.success
    assert "ended (stalled)" in res.warnings[0]


def test_an_unstable_model_tries_ipopt_before_shooting():
    reruns = _Reruns(ipopt=lambda: _result(success=True, status="converged"))
    res = second_runs(_result(status="step_failed"), _path(unstable=True), reruns,
                      time.perf_counter())
    assert reruns.calls == [("ipopt", "auto")] and res.success
    assert res.warnings[0].startswith("picard-gn stopped: its step could not gain at")


def test_a_second_run_that_ends_on_a_plateau_ends_the_path():
    # PEtab's Fujita from uniform start 5: IPOPT's second run converged on a
    # plateau (reach 0.055 noise levels), then picard-gn continued from it for
    # 105 s, shooting failed, and the call ended step_failed
    plateau = _result(status="plateau", message="the estimate lies on a plateau")
    reruns = _Reruns(ipopt=lambda: plateau, shooting=lambda: _result(success=True))
    res = second_runs(_result(status="step_failed"), _path(unstable=True), reruns,
                      time.perf_counter())
    assert reruns.calls == [("ipopt", "auto")] and res is plateau
    assert res.status == "plateau" and "ended on a plateau" in res.warnings[0]
    # the same after a first run stopped while converging: single shooting
    # from its last iterate on a plateau is returned, not continued
    reruns = _Reruns(**{"single-shooting warm": lambda: plateau})
    first = _result(status="max_iter")
    first._X, first.history = np.zeros((1, 1)), {"gap_scaled": [0.0], "objective": [2.0, 1.0]}
    res = second_runs(first, _path(), reruns, time.perf_counter())
    assert reruns.calls == [SS_WARM] and res is plateau
    # and where picard-gn, continued from IPOPT's joined-up last iterate, ends
    # on one: no shooting after it
    stopped = _result(status="Maximum_Iterations_Exceeded", message="IPOPT: stopped")
    stopped._X, stopped.history = np.zeros((1, 1)), {"gap_scaled": [1e-9]}
    reruns = _Reruns(ipopt=lambda: stopped, continued=lambda: plateau,
                     shooting=lambda: _result(success=True))
    res = second_runs(_result(status="step_failed"), _path(unstable=True), reruns,
                      time.perf_counter())
    assert reruns.calls == [("ipopt", "auto"), ("picard-gn", "simulation", "warm")]
    assert res is plateau and "joined the intervals up" in res.warnings[0]
    assert "ended on a plateau" in res.warnings[0]


def test_quoted_messages_keep_their_first_clause_and_ipopts_status():
    assert clipped("iteration limit reached (max_iter=200) before convergence: gradient") == (
        "iteration limit reached (max_iter=200) before convergence")
    assert clipped("IPOPT: Restoration_Failed; CVODES reported X") == "IPOPT: Restoration_Failed"
    assert clipped("a (b: c") == "a (b)"
    assert clipped("word " * 50, 20).endswith(" ...")


def test_another_methods_run_is_one_solve():
    from picard_casadi.estimation.fallbacks import another_method, restarts_allowed

    assert restarts_allowed()
    with another_method():
        assert not restarts_allowed()
    assert restarts_allowed()


def test_a_second_run_stopped_by_its_budget_says_so():
    reruns = _Reruns(shooting=lambda: _result(status="Maximum_Iterations_Exceeded",
                                              message="IPOPT: Maximum_Iterations_Exceeded"),
                     ipopt=lambda: _result(status="Maximum_Iterations_Exceeded",
                                           message="IPOPT: Maximum_Iterations_Exceeded"))
    first = _result(status="step_failed", message="no acceptable step: z")
    first.wall_time = 30.0
    res = second_runs(first, _path(), reruns, time.perf_counter())
    assert ("method='shooting' from p0 did not converge either (stopped at its budget "
            "of 300 iterations; method='shooting' runs without one)") in res.message
    assert ("method='ipopt' from the same start did not converge either (stopped at its "
            "budget of 300 iterations") in res.message
    # single shooting's own iterations are milliseconds: its budget is its
    # default max_iter (PEtab's Borghans from uniform start 0 needs 342)
    assert reruns.calls[0] == SS
    assert reruns.budgets == [1000, 300, 300]
    # and IPOPT's Hessian shift bounded in both (MUMPS factorised shifts of up to
    # 1e18 at 2 s per iteration on a run that failed anyway); shooting solved to
    # 1e-6, which picard-gn finishes from (below)
    # IPOPT on the collocation orders its KKT matrix by METIS (Crauste's 11
    # starts: 903 -> 246 CPU s in IPOPT's second runs)
    assert reruns.ipopt_options == [None, {"max_hessian_perturbation": 1e10,
                                           "mumps_pivot_order": 5},
                                    {"max_hessian_perturbation": 1e10, "tol": 1e-6}]


def test_the_second_runs_budget_does_not_depend_on_the_first_runs_time():
    # the budget was max(60 s, 10 x the first run's wall time): the same call
    # could end differently on a slow or busy machine
    budgets = []
    for seconds in (0.01, 1000.0):
        reruns = _Reruns(shooting=lambda: _result(status="Maximum_Iterations_Exceeded"),
                         ipopt=lambda: _result(status="Maximum_Iterations_Exceeded"))
        first = _result(status="step_failed", message="no acceptable step: z")
        first.wall_time = seconds
        second_runs(first, _path(), reruns, time.perf_counter())
        budgets += reruns.budgets
    assert budgets == [1000, 300, 300] * 2


@pytest.mark.slow  # 60 s on a 2-core machine: a fuzz case reproduced to its end
def test_a_relaxation_oscillator_no_method_fits_ends_within_the_budget(monkeypatch):
    # FitzHugh-Nagumo with eps = 0.05 sampled once per time unit (its spikes
    # fall between samples): picard-gn's step breaks down, and IPOPT's fallback
    # ran for over ten minutes, restarting on finer meshes.  Each other
    # method's run is now one solve within an iteration budget (here 5)
    import casadi as ca

    import picard_casadi as pc
    from picard_casadi.estimation import fallbacks

    monkeypatch.setattr(fallbacks, "BUDGET_ITERATIONS", 5)
    # single shooting, which now runs first after a failed step, converges
    # here in 1000 iterations or less (0.708, 0.827, 0.048): held to 5 too
    monkeypatch.setattr(fallbacks, "BUDGET_SINGLE_SHOOTING_ITERATIONS", 5)
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 3)
    rhs = ca.vertcat((x[0] - x[0] ** 3 / 3 - x[1] + 0.5) / p[2], x[0] + p[0] - p[1] * x[1])
    model = pc.Model(x=x, p=p, rhs=rhs, y=x[0])
    t = np.arange(0.0, 40.0001, 1.0)
    X = pc.simulate(model, [-1.0, 1.0], [0.7, 0.8, 0.05], t)
    y = X[:, 0] + 0.05 * np.random.default_rng(6).standard_normal(t.size)
    res = pc.estimate(model, [pc.Experiment(t=t, y=y)], [0.6, 0.7, 0.07],
                      p_bounds=([0.0, 0.0, 0.005], [2.0, 2.0, 1.0]), uncertainty=False)
    assert not res.success and res.method == "picard-gn"
    assert "method='ipopt' from the same start did not converge either (stopped at its " \
           "budget of 5 iterations" in res.message, res.message
    assert "method='shooting' from p0 did not converge either" in res.message


def test_the_returned_wall_time_counts_every_run():
    # a failed anchored retry followed by a converged shooting run reported the
    # first and the last run's time only
    reruns = _Reruns(**{"picard-gn": lambda: _result(message="no acceptable step: y"),
                        "shooting": lambda: _result(success=True, status="converged")})
    t_start = time.perf_counter() - 5.0  # the first two runs took 5 s
    res = second_runs(_result(gap=1.0), _path(every_state_measured=False), reruns, t_start)
    assert reruns.calls == [("picard-gn", "anchored"), SS, ("shooting", "auto")] and res.success
    assert res.wall_time >= 6.0  # 5 s before, 1 s of shooting


def _ipopt_stopped(gap):
    res = _result(status="Maximum_Iterations_Exceeded", gap=gap, message="IPOPT: budget")
    res._X = np.zeros((1, 1))
    return res


def test_ipopt_s_joined_up_last_iterate_is_continued_by_picard_gn():
    reruns = _Reruns(ipopt=lambda: _ipopt_stopped(8e-7),
                     continued=lambda: _result(success=True, status="converged"))
    res = second_runs(_result(status="step_failed"), _path(), reruns, time.perf_counter())
    assert reruns.calls == [SS, ("ipopt", "auto"), ("picard-gn", "simulation", "warm")]
    assert res.success and "continued from IPOPT's last iterate" in res.warnings[0]


def test_shooting_s_joined_up_last_iterate_is_continued_by_picard_gn():
    # Robertson's kinetics to t = 1e6 from log10 k = 1: shooting stopped near the
    # optimum where CVODES's adjoint failed at a trial point; picard-gn finished
    reruns = _Reruns(ipopt=lambda: _ipopt_stopped(0.14),
                     shooting=lambda: _ipopt_stopped(3e-10),
                     continued=lambda: _result(success=True, status="converged"))
    res = second_runs(_result(status="step_failed"), _path(), reruns, time.perf_counter())
    assert reruns.calls == [SS, ("ipopt", "auto"), ("shooting", "auto"),
                            ("picard-gn", "simulation", "warm")]
    assert res.success and "continued from shooting's last iterate" in res.warnings[0]
    # ... but not from an open one: the failure, saying what was tried
    reruns = _Reruns(ipopt=lambda: _ipopt_stopped(0.14), shooting=lambda: _ipopt_stopped(0.2))
    res = second_runs(_result(status="step_failed"), _path(), reruns, time.perf_counter())
    assert reruns.calls == [SS, ("ipopt", "auto"), ("shooting", "auto")] and not res.success
    assert "method='shooting' from p0 did not converge either" in res.message


def test_a_plateau_gets_no_second_run():
    # PEtab's Boehm from five of 20 uniform starts: picard-gn ended on the
    # plateau at 249.75 in 0.2 s, then shooting from the same p0 spent 11 to
    # 159 s there; another start is the remedy, which the message names
    reruns = _Reruns()
    first = _result(status="plateau", message="the estimate lies on a plateau")
    assert second_runs(first, _path(), reruns, time.perf_counter()) is first
    assert reruns.calls == []


def test_a_run_that_ran_off_along_a_valley_gets_no_second_run():
    # Robertson's kinetics with B lost in the noise: picard-gn converged at
    # log10 k2 = 63, where CVODES cannot integrate the model; IPOPT and
    # shooting from p0 then spent 175 s along the same valley, both failing
    reruns = _Reruns()
    first = _result(status="not_certified", message="picard-gn converged ... ran along")
    first._ran_off = True
    assert second_runs(first, _path(), reruns, time.perf_counter()) is first
    assert reruns.calls == []


def test_a_second_run_that_ran_off_along_a_valley_ends_the_second_runs():
    # the same from log10 k = 0 with other noise: picard-gn's step failed,
    # guess='shooting' ran to log10 k2 = 25, then IPOPT and shooting followed
    def ran_off():
        r = _result(status="not_certified", message="picard-gn converged at p = ...")
        r._ran_off = True
        return r

    for first, path, asked in (
            (_result(status="step_failed", gap=1.0), _path(every_state_measured=False,
                                                           some_state_measured=True),
             [("picard-gn", "shooting")]),
            (_result(status="step_failed"), _path(), [SS, ("ipopt", "auto")])):
        reruns = _Reruns(**{"picard-gn": ran_off, "ipopt": ran_off})
        out = second_runs(first, path, reruns, time.perf_counter())
        assert reruns.calls == asked
        assert out._ran_off and not out.success
        assert "ran along a valley" in out.warnings[0] and "no other run" in out.warnings[0]


def test_ipopt_s_open_last_iterate_is_not_continued():
    reruns = _Reruns(ipopt=lambda: _ipopt_stopped(0.14),
                     shooting=lambda: _result(success=True, status="converged"))
    res = second_runs(_result(status="step_failed"), _path(), reruns, time.perf_counter())
    assert reruns.calls == [SS, ("ipopt", "auto"), ("shooting", "auto")] and res.success



def test_open_gaps_from_the_data_s_states_retry_from_a_simulated_start():
    reruns = _Reruns(**{"picard-gn": lambda: _result(success=True, status="converged")})
    res = second_runs(_result(status="step_failed", gap=23.0), _path(some_state_measured=True),
                      reruns, time.perf_counter())
    assert reruns.calls == [("picard-gn", "shooting")] and res.success
    assert res.warnings[0].startswith("the first run, its measured states' trajectories "
                                      "started at the data")


def test_no_state_from_the_data_no_simulated_restart():
    reruns = _Reruns(ipopt=lambda: _result(success=True, status="converged"))
    res = second_runs(_result(status="step_failed", gap=23.0), _path(some_state_measured=False),
                      reruns, time.perf_counter())
    assert reruns.calls == [SS, ("ipopt", "auto")] and res.success


def _stopped_at_the_limit(objective, gap=1e-2):
    """A picard-gn run stopped at max_iter, its last solve's objectives ``objective``
    (its gaps open unless ``gap`` says otherwise)."""
    res = _result()
    res.history = {"gap_scaled": [gap] * len(objective), "objective": list(objective),
                   "iteration": list(range(1, len(objective) + 1))}
    res._X = np.zeros((1, 1))
    return res


def test_a_run_stopped_while_still_converging_is_continued_from_its_last_iterate():
    # PEtab's Bruno from uniform 6: 29.7 -> 7.66 in its last 50 of 1000 iterations
    falling = np.linspace(30.0, 7.7, 1000)
    reruns = _Reruns(continued=lambda: _result(success=True, status="converged"))
    res = second_runs(_stopped_at_the_limit(falling), _path(), reruns, time.perf_counter())
    assert reruns.calls == [SS_WARM, ("picard-gn", "simulation", "warm")] and res.success
    assert res.warnings[0].startswith("picard-gn reached its iteration limit while still "
                                      "converging after 1000 iterations (")
    # (a user read "max_iter=1000" beside the continuation's "21 iterations in all")
    assert "its iterations counted from there" in res.warnings[0]


def test_single_shooting_from_the_last_iterate_comes_before_the_continuation():
    # PEtab's Bruno from uniform 13 (seed 0): picard-gn stopped at 1105
    # iterations; single shooting from its last iterate converged to the best
    # optimum in 1.4 s, picard-gn continued in 36 s
    falling = np.linspace(30.0, 7.7, 1000)
    reruns = _Reruns(**{"single-shooting warm": lambda: _result(success=True,
                                                                 status="converged")},
                     continued=lambda: _result(success=True, status="converged"))
    res = second_runs(_stopped_at_the_limit(falling), _path(), reruns, time.perf_counter())
    assert reruns.calls == [SS_WARM] and res.success
    assert reruns.budgets == [1000]
    assert res.warnings[0].startswith("picard-gn reached its iteration limit while still converging")
    assert "method='single-shooting' from its last iterate" in res.warnings[0]
    # a user's max_iter, or a method named: neither runs
    for path in (_path(max_iter_given=True), _path(method_chosen=True)):
        reruns = _Reruns(shooting=lambda: _result(message="shooting stopped"))
        second_runs(_stopped_at_the_limit(falling), path, reruns, time.perf_counter())
        assert SS_WARM not in reruns.calls


def test_ipopt_from_the_last_iterate_comes_first_on_a_model_unstable_along_the_data():
    # a closed-loop cart-pendulum, 4 s (growth 7e8): picard-gn's condensed
    # step crept for 1382 iterations; IPOPT from its last iterate converged in
    # 6, where the default path took 273 s through single shooting
    falling = np.linspace(30.0, 7.7, 1000)
    reruns = _Reruns(continued=lambda: _result(success=True, status="converged"))
    res = second_runs(_stopped_at_the_limit(falling), _path(growth=7e8), reruns,
                      time.perf_counter())
    assert reruns.calls == [("ipopt", "auto", "warm")] and res.success
    assert "method='ipopt' from its last iterate" in res.warnings[0]
    # its Hessian's perturbation capped: a swing equation at its unstable
    # equilibrium had IPOPT at 1e8-1e10, MUMPS filling in, the call over 14 min
    assert reruns.ipopt_options == [{"max_hessian_perturbation": 1e8}]
    # where it fails, single shooting and the continuation follow as before
    reruns = _Reruns(continued=lambda: _result(status="max_iter", message="ipopt stopped"),
                     shooting=lambda: _result(message="shooting stopped"))
    second_runs(_stopped_at_the_limit(falling), _path(growth=7e8), reruns, time.perf_counter())
    assert reruns.calls[:2] == [("ipopt", "auto", "warm"), SS_WARM]


def test_a_continuation_that_fails_too_goes_on_to_the_other_runs_and_says_so():
    falling = np.linspace(30.0, 7.7, 1000)
    reruns = _Reruns(continued=lambda: _result(message="iteration limit reached again"),
                     shooting=lambda: _result(message="shooting stopped"))
    res = second_runs(_stopped_at_the_limit(falling), _path(), reruns, time.perf_counter())
    assert reruns.calls == [SS_WARM, ("picard-gn", "simulation", "warm"), SS,
                            ("shooting", "auto")]
    assert not res.success
    assert "single shooting from its last iterate did not converge" in res.message
    assert "continued from its last iterate, it did not converge either" in res.message


def test_a_stopped_continuation_goes_to_single_shooting_and_not_on_creeping():
    """A continuation on a new mesh the default path stopped (creeping, its
    gaps open, its objective flat: neither still converging nor joined up)
    gets single shooting from its last iterate; where that fails, the other
    failures' remedies follow, not picard-gn continued from there nor the
    other states' starts (PEtab's Borghans from uniform 10, seed 0: continued,
    it failed its step on five refined meshes, 38 s)."""
    stopped = _stopped_at_the_limit([21.29, 21.28, 21.28], gap=0.04)
    stopped._continuation_stopped = True
    reruns = _Reruns(**{"single-shooting warm": lambda: _result(success=True,
                                                                 status="converged")})
    res = second_runs(stopped, _path(every_state_measured=False), reruns, time.perf_counter())
    assert reruns.calls == [SS_WARM] and res.success
    assert res.warnings[0].startswith("picard-gn stopped in its continuation on a new mesh")
    stopped = _stopped_at_the_limit([21.29, 21.28, 21.28], gap=0.04)
    stopped._continuation_stopped = True
    reruns = _Reruns(shooting=lambda: _result(message="shooting stopped"))
    res = second_runs(stopped, _path(every_state_measured=False), reruns, time.perf_counter())
    assert reruns.calls == [SS_WARM, SS, ("shooting", "auto")] and not res.success
    # not stopped by the default path: no single shooting from it (neither
    # converging nor joined up), the states' other start first
    first = _stopped_at_the_limit([21.29, 21.28, 21.28], gap=0.04)
    reruns = _Reruns(**{"picard-gn": lambda: _result(success=True, status="converged")})
    second_runs(first, _path(every_state_measured=False), reruns, time.perf_counter())
    assert reruns.calls == [("picard-gn", "anchored")]


@pytest.mark.parametrize("case", [
    dict(objective=np.full(1000, 7.7)),  # nothing left to gain: not converging
    dict(objective=7.7 + 1e-6 * np.arange(1000)[::-1]),  # falls by 1.3e-5 per 100 iterations
    dict(objective=np.linspace(30.0, 7.7, 50)),  # fewer iterations than the window
    dict(objective=np.linspace(30.0, 7.7, 1000), path=_path(max_iter_given=True)),
    dict(objective=np.linspace(30.0, 7.7, 1000), path=_path(method_chosen=True)),
])
def test_a_run_stopped_at_the_limit_without_progress_is_not_continued(case):
    reruns = _Reruns(shooting=lambda: _result(message="shooting stopped"))
    second_runs(_stopped_at_the_limit(case["objective"]), case.get("path", _path()), reruns,
                time.perf_counter())
    assert not any(len(c) == 3 for c in reruns.calls)


def test_the_window_must_lie_within_the_last_solve():
    # a weight round restarted the count 20 iterations before the end: the
    # objectives of two solves are not compared
    res = _stopped_at_the_limit(np.linspace(30.0, 7.7, 1000))
    res.history["iteration"] = list(range(1, 981)) + list(range(1, 21))
    reruns = _Reruns(shooting=lambda: _result(message="shooting stopped"))
    second_runs(res, _path(), reruns, time.perf_counter())
    assert reruns.calls == [SS, ("shooting", "auto")]


def _stalled(gap=7e-4):
    res = _result(status="stalled", gap=gap, message="no progress: the objective fell")
    res._X = np.zeros((1, 1))
    return res


def test_a_run_that_stalled_is_continued_from_its_last_iterate_first():
    # PEtab's Boehm from uniform 5 (seed 0): 778 iterations creeping off a
    # plateau, stalled; shooting from p0 then failed after 125 s, while a fresh
    # solve from the last iterate converged in 188 iterations (2.2 s)
    reruns = _Reruns(continued=lambda: _result(success=True, status="converged"))
    res = second_runs(_stalled(), _path(every_state_measured=False), reruns,
                      time.perf_counter())
    assert reruns.calls == [("picard-gn", "simulation", "warm")] and res.success
    assert res.warnings[0].startswith("picard-gn stalled after 1000 iterations (no progress")
    assert "continues it from its last iterate" in res.warnings[0]


def test_a_stalled_continuation_that_fails_goes_on_to_the_other_starts_and_says_so():
    reruns = _Reruns(continued=lambda: _result(status="stalled", message="no progress again"),
                     **{"picard-gn": lambda: _result(message="no acceptable step"),
                        "shooting": lambda: _result(message="shooting stopped")})
    res = second_runs(_stalled(gap=0.01), _path(every_state_measured=False), reruns,
                      time.perf_counter())
    assert reruns.calls == [("picard-gn", "simulation", "warm"), ("picard-gn", "anchored"),
                            SS, ("shooting", "auto")]
    assert not res.success
    assert "continued from its last iterate, it did not converge either (no progress" \
        in res.message


def test_a_stalled_run_of_a_method_the_user_named_is_not_continued():
    reruns = _Reruns()
    first = _stalled()
    assert second_runs(first, _path(method_chosen=True), reruns, time.perf_counter()) is first
    assert reruns.calls == []


def _converged_shooting():
    res = _result(success=True, status="converged", gap=1e-12)
    res._X = np.zeros((1, 1))
    return res


def test_converged_shooting_is_finished_by_picard_gn_and_kept_where_that_fails():
    # the shooting second run solves to IPOPT's tol 1e-6 (Robertson's kinetics
    # to t = 1e6 from log10 k = 0: 24 iterations instead of 97); picard-gn
    # finishes from its solution, and the certificate judges
    reruns = _Reruns(ipopt=lambda: _result(status="Restoration_Failed", message="IPOPT: r"),
                     shooting=_converged_shooting,
                     continued=lambda: _result(success=True, status="converged"))
    res = second_runs(_result(status="step_failed"), _path(), reruns, time.perf_counter())
    assert reruns.calls == [SS, ("ipopt", "auto"), ("shooting", "auto"),
                            ("picard-gn", "simulation", "warm")]
    assert res.success and "converged" in res.warnings[0]
    assert "this result is picard-gn continued from its solution" in res.warnings[0]
    # where picard-gn does not finish (a mesh that does not resolve the model),
    # shooting's own converged result is returned
    shot = _converged_shooting()
    reruns = _Reruns(ipopt=lambda: _result(status="Restoration_Failed", message="IPOPT: r"),
                     shooting=lambda: shot,
                     continued=lambda: _result(status="not_certified", message="not certified"))
    res = second_runs(_result(status="step_failed"), _path(), reruns, time.perf_counter())
    assert res is shot and "this result is from method='shooting' from p0" in res.warnings[0]


def test_a_run_stopped_at_the_limit_with_its_intervals_joined_up_is_continued():
    # PEtab's Armistead from uniform 0 (seed 0): 1000 iterations of steps of
    # 0.0025-0.08 with the gaps closed, the objective falling 1.4e-4 per 100
    # iterations; continued, it converged in 581 iterations (7.7 s), where the
    # shooting fallback from p0 failed after 125 s
    creeping = 1.6706 + 2e-6 * np.arange(1000)[::-1]
    reruns = _Reruns(continued=lambda: _result(success=True, status="converged"))
    res = second_runs(_stopped_at_the_limit(creeping, gap=1e-8), _path(), reruns,
                      time.perf_counter())
    assert reruns.calls == [SS_WARM, ("picard-gn", "simulation", "warm")] and res.success
    assert res.warnings[0].startswith(
        "picard-gn reached its iteration limit with its intervals joined up")
    # ... and not with them open, nor where the user set the limit
    for first, path in ((_stopped_at_the_limit(creeping), _path()),
                        (_stopped_at_the_limit(creeping, gap=1e-8), _path(max_iter_given=True))):
        reruns = _Reruns(shooting=lambda: _result(message="shooting stopped"))
        second_runs(first, path, reruns, time.perf_counter())
        assert not any(len(c) == 3 for c in reruns.calls)


def test_any_other_failure_tries_single_shooting_before_multiple_shooting():
    # PEtab's Elowitz from uniform start 9: max_iter, continued, then multiple
    # shooting failed after 547 s; single shooting converged in 5.2 s
    reruns = _Reruns(**{"single-shooting": lambda: _result(success=True, status="converged")})
    res = second_runs(_result(status="max_iter", gap=1.0), _path(), reruns, time.perf_counter())
    assert reruns.calls == [SS] and res.success
    assert res.warnings[0].startswith("picard-gn on the collocation mesh did not reach")
    assert "method='single-shooting' from p0" in res.warnings[0]


def test_a_last_iterate_the_collocation_cannot_evaluate_is_not_continued():
    # PEtab's Borghans from its nominal vector: single shooting stopped with
    # its (joined-up) last iterate settled on the mesh to nodes where the
    # model is not finite; the continuation raised StartNotFiniteError out of
    # the whole call instead of the failure with what was tried
    from picard_casadi.errors import StartNotFiniteError

    def not_finite():
        raise StartNotFiniteError("the objective is not finite at the starting point")

    stopped = _result(status="step_failed", gap=0.0, message="single shooting stopped: no "
                      "acceptable step")
    stopped._X = np.zeros((1, 1))
    reruns = _Reruns(**{"single-shooting": lambda: stopped}, continued=not_finite,
                     shooting=lambda: _ipopt_stopped(0.2))
    res = second_runs(_result(status="max_iter", gap=1.0), _path(), reruns, time.perf_counter())
    assert ("picard-gn", "simulation", "warm") in reruns.calls
    assert reruns.calls[-1] == ("shooting", "auto")
    assert not res.success
    assert "method='single-shooting' from p0 did not converge either" in res.message


def test_a_second_run_at_a_worse_optimum_than_the_uncertified_first_is_not_returned():
    # a user's CSTR started at its optimum: picard-gn converged there (nllh
    # -496.17) but was not certified (0.14 noise levels), single shooting
    # from p0 walked off, and picard-gn continued from its last iterate
    # converged at 613.17, which was returned; multiple shooting from p0
    # reaches the first run's optimum
    first = dict(status="not_certified", message="the estimate is not certified",
                 nllh=-496.17, discretisation_error=0.14, n_measurements=404)

    def walked_off():  # joined up: picard-gn is continued from its last iterate
        res = _result(status="step_failed", gap=1e-9)
        res._X = np.zeros((1, 1))
        return res

    right = _result(success=True, status="converged", nllh=-496.17)
    reruns = _Reruns(**{"single-shooting": walked_off,
                        "continued": lambda: _result(success=True, status="converged",
                                                     nllh=613.17),
                        "shooting": lambda: right})
    res = second_runs(_result(**first), _path(), reruns, time.perf_counter())
    assert reruns.calls == [SS, ("picard-gn", "simulation", "warm"), ("shooting", "auto")]
    assert res is right and res.nllh == -496.17
    # where no run finds it, the first result is returned and says what the
    # second runs found
    reruns = _Reruns(**{"single-shooting": lambda: _result(success=True, status="converged",
                                                           nllh=613.17),
                        "shooting": lambda: _result(message="shooting stopped")})
    res = second_runs(_result(**first), _path(), reruns, time.perf_counter())
    assert res.status == "not_certified" and not res.success
    assert ("method='single-shooting' from p0 converged to another optimum, worse than this "
            "estimate's (nllh 613.17 against -496.17), not returned") in res.message
    # within what the first's discretisation error allows (404 x 0.15 + 1):
    # the ODE's version of the first optimum, returned
    near = _result(success=True, status="converged", nllh=-496.17 + 50.0)
    reruns = _Reruns(**{"single-shooting": lambda: near})
    assert second_runs(_result(**first), _path(), reruns, time.perf_counter()) is near


def test_a_trajectory_that_leaves_x0_bounds_says_so():
    """Single shooting bounds the initial states only: a motor bounded to
    |w| <= 2 ("it starts at rest") came back from the default path's
    fallback as a success with w at 118, and no word of the bounds."""
    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    model = pc.Model(x=x, p=k, rhs=k * x, y=x, x_names=["w"], p_names=["k"])
    t = np.linspace(0, 2, 21)
    exp = pc.Experiment(t, np.exp(t), x0=[1.0])
    with pytest.warns(UserWarning, match=r"the returned trajectory leaves x0_bounds .*w reaches "
                                         r"at least 5\.7\d* outside \[0, 2\]\): "
                                         r"method='single-shooting'"):
        res = pc.estimate(model, [exp], [0.5], "single-shooting", x0_bounds=([0.0], [2.0]),
                          uncertainty=False)
    assert res.success
    inside = pc.estimate(model, [exp], [0.5], "single-shooting", x0_bounds=([0.0], [10.0]),
                         uncertainty=False)
    assert not any("leaves x0_bounds" in w for w in inside.warnings)


def test_a_shooting_second_run_not_certified_is_not_said_to_have_a_mesh():
    # single shooting has no mesh: "converged on its mesh ... not refined"
    # confused a spacecraft engineer
    from picard_casadi.estimation.fallbacks import _not_converged

    retry = _result(status="not_certified", message="discretisation error 2.1 noise levels")
    for method in ("shooting", "single-shooting"):
        said = _not_converged(retry, method)
        assert "mesh" not in said and "discretisation error 2.1" in said
    assert "converged on its mesh" in _not_converged(retry, "ipopt")
