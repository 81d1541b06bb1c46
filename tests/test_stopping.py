"""The iteration's stops where nothing changes any more: a floor reached, a
step rule that gives up, or an objective that stopped falling with the gaps open."""

from __future__ import annotations

import casadi as ca
import numpy as np

import picard_casadi as pc
from picard_casadi.estimation.setup import build_setup
import pytest

from picard_casadi.methods.base import (GIVE_UP_ITERATIONS, LoopOptions, StepInfo,
                                        run_picard_iteration)


def test_a_fixed_point_at_its_floor_ends_the_run_as_converged():
    """A fixed-point tolerance below what double precision reaches: the run stops
    once no step gains (the floor rule), not at max_iter.  PEtab's Boehm spun
    from iteration 1100 to 2000 on one iterate whose scaled fixed-point
    residual, 1.1e-9, was just above the default 1e-9."""
    prob = pc.problem("vdp", seed=0)
    res = prob.estimate("picard-gn", fixed_point_tol=1e-30, max_iter=300, uncertainty=False,
                        refine=False)
    assert res.success and res.status == "converged", res.message
    assert "fixed-point residual" in res.message
    assert "the smallest double precision reaches" in res.message
    assert res.iterations < 300
    reference = prob.estimate("picard-gn", uncertainty=False, refine=False)
    np.testing.assert_allclose(res.p, reference.p, rtol=1e-6)


class _NeverAccepts:
    """A step rule that rejects every step: the iterate never changes."""

    units = ()

    def step(self, Xs, U, ps, V, lam) -> StepInfo:
        return StepInfo(Xs, ps, 1.0, 1.0, 0.5, 0.0, False, 1, 1.0)

    def reset(self) -> None:
        pass

    def settled(self, info, gap_scaled, lam) -> bool:
        return False  # no multiplier update either


class _Creeps(_NeverAccepts):
    """Accepts every step but moves nothing, the objective falling by ``rate``
    (relative) per iteration: the gaps stay as the start has them."""

    def __init__(self, rate: float) -> None:
        self.rate, self.phi = rate, 1.0

    def step(self, Xs, U, ps, V, lam) -> StepInfo:
        before, self.phi = self.phi, self.phi * (1.0 - self.rate)
        return StepInfo(Xs, ps, before, self.phi, 0.5, 1e-3, True, 1, 1.0)


def _open_gaps_setup():
    """x' = p x from p = 3 against data of p = 1, starts anchored on the data:
    the continuity gaps are open and stay so while the starts do not move."""
    x, p = ca.SX.sym("x"), ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=p * x, name="growth")
    t = np.linspace(0.0, 1.0, 11)
    exp = pc.Experiment(t=t, y=np.exp(t)[:, None], name="e")
    return build_setup(model, [exp], np.array([3.0]), T=0.1, n=2, nodes=5,
                       scheme="chebyshev", weights=np.ones(1),
                       p_bounds=(np.array([-10.0]), np.array([10.0])),
                       x_bounds=(np.array([-np.inf]), np.array([np.inf])),
                       estimate_x0=np.array([True]), codegen=False, guess="anchored")


@pytest.mark.parametrize("rate,window,status,iterations", [
    (1e-6, 100, "stalled", 200),     # 1e-4 over 100 iterations: no progress
    (1e-4, 100, "max_iter", 300),    # 1 % over 100: progress, to the limit
    (1e-6, 0, "max_iter", 300),      # not checked
])
def test_a_run_that_stops_making_progress_with_its_gaps_open_ends_stalled(
        rate, window, status, iterations):
    opts = LoopOptions(max_iter=300, sweeps=1, continuity="penalty", progress_window=window)
    out = run_picard_iteration(_open_gaps_setup(), _Creeps(rate), opts)
    assert out.status == status and out.iterations == iterations and not out.success
    if status == "stalled":
        assert "no progress: the objective fell by 0.0001 (relative) over the last 100" \
            in out.message
        assert "guess='anchored'" in out.message


def test_a_run_without_an_accepted_step_gives_up_instead_of_spinning():
    """Iterations that return the same iterate with its gaps open end as a
    failure after GIVE_UP_ITERATIONS, saying so (PEtab's Zheng from a random
    start returned one iterate 1700 times at 0.19 s each)."""
    out = run_picard_iteration(_open_gaps_setup(), _NeverAccepts(),
                               LoopOptions(max_iter=500, sweeps=1))
    assert not out.success and out.status == "step_failed"
    assert out.iterations == GIVE_UP_ITERATIONS
    assert f"no step was accepted in {GIVE_UP_ITERATIONS} iterations" in out.message


@pytest.mark.parametrize("growth,status,iterations", [
    (1.02, "max_iter", 300),   # the noise levels fall with every step: progress
    (1.0, "stalled", 200),     # nothing moves: a stall, as without re-weighting
])
def test_a_round_that_re_weights_is_judged_by_its_likelihood(growth, status, iterations):
    """Where the noise weights are re-estimated after every accepted step
    (the likelihood's intermediate round), each re-weighting sets the merit
    back to the same value (the cmg multistart's sixth start: 3.5 throughout
    300 iterations while its noise levels fell), so the progress window
    compares the merits as likelihoods, each less its weights' level."""
    setup = _open_gaps_setup()

    def reweight(X, U, p):
        setup.tr.set_weights(setup.tr.weights * growth)  # every sigma down by sqrt(growth)

    setup.reweight = reweight
    out = run_picard_iteration(setup, _Creeps(1e-6), LoopOptions(
        max_iter=300, sweeps=1, continuity="penalty", progress_window=100))
    assert out.status == status and out.iterations == iterations
    assert out.history[-1].objective > 0.999  # the merit all but still


class _CreepsUntilDamped(_Creeps):
    """Creeps (``rate``) until its steps are damped, then gains 1 % per
    iteration: a step rule with the stall's remedy (``damp_long_steps``)."""

    def __init__(self, rate: float) -> None:
        super().__init__(rate)
        self.damp_long_steps = False
        self.damped_from: int | None = None
        self.calls = 0

    def step(self, Xs, U, ps, V, lam) -> StepInfo:
        self.calls += 1
        if self.damp_long_steps and self.damped_from is None:
            self.damped_from = self.calls
        self.rate = 1e-2 if self.damp_long_steps else self.rate
        return super().step(Xs, U, ps, V, lam)


def test_a_stall_turns_on_the_step_s_remedy_before_it_ends_the_run():
    """The first stall damps the long steps (and the setup keeps that for the
    solves that continue it); a run that then progresses goes on, one that
    stalls again ends ``stalled`` a window later."""
    setup = _open_gaps_setup()
    rule = _CreepsUntilDamped(1e-6)
    out = run_picard_iteration(setup, rule, LoopOptions(max_iter=300, sweeps=1,
                                                        continuity="penalty",
                                                        progress_window=100))
    assert rule.damped_from == 201 and setup.damp_long_steps
    assert out.status == "max_iter" and out.iterations == 300  # progressed after it

    again = _Creeps(1e-6)
    again.damp_long_steps = False
    setup = _open_gaps_setup()
    out = run_picard_iteration(setup, again, LoopOptions(max_iter=500, sweeps=1,
                                                         continuity="penalty",
                                                         progress_window=100))
    assert again.damp_long_steps and out.status == "stalled" and out.iterations == 300

    continued = _CreepsUntilDamped(1e-6)  # a later solve of a damped setup
    run_picard_iteration(setup, continued, LoopOptions(max_iter=5, sweeps=1,
                                                       continuity="penalty"))
    assert continued.damped_from == 1


class _Slivers(_Creeps):
    """Creeps at 1 % per iteration with every step a ``fraction`` of its
    Gauss-Newton step, except every ``every``-th (if any), which is whole."""

    def __init__(self, fraction: float, every: int = 0) -> None:
        super().__init__(1e-2)
        self.fraction, self.every, self.calls = fraction, every, 0

    def step(self, Xs, U, ps, V, lam) -> StepInfo:
        self.calls += 1
        info = super().step(Xs, U, ps, V, lam)
        whole = self.every and self.calls % self.every == 0
        info.fraction = 1.0 if whole else self.fraction
        return info


@pytest.mark.parametrize("fraction,every,status,iterations", [
    (1e-3, 0, "max_iter", 20),      # 20 slivers in a row: stopped there
    (1e-3, 10, "max_iter", 300),    # a whole step every 10th: never 20 in a row
    (0.5, 0, "max_iter", 300),      # half steps are no slivers
])
def test_creep_steps_stops_a_run_of_slivers(fraction, every, status, iterations):
    """``creep_steps`` ends a run whose accepted steps the trust radius cut to
    less than 1 % of their Gauss-Newton step that many times in a row (a
    continuation on a new mesh on the default path: PEtab's Bruno crept so
    for 171 to 195 steps), though its objective still falls."""
    opts = LoopOptions(max_iter=300, sweeps=1, continuity="penalty", creep_steps=20)
    out = run_picard_iteration(_open_gaps_setup(), _Slivers(fraction, every), opts)
    assert out.status == status and out.iterations == iterations and not out.success
    if iterations == 20:
        assert "creep_steps=20: the trust radius cut each of the last 20 steps to less " \
               "than 1% of its Gauss-Newton step" in out.message
    with pytest.raises(ValueError, match="creep_steps"):
        LoopOptions(creep_steps=-1).validate()


def test_an_iterate_where_no_trial_is_finite_is_a_failed_step_not_convergence(monkeypatch):
    """Every trial point not finite, however short the step (an iterate at the
    edge of the model's domain: PEtab's Elowitz from uniform 15, a protein's
    node at zero under a Hill exponent of 0.82): the run says so and fails,
    instead of "converged: no step reduces the objective further" on a gain
    that only the damping raised by the rejections had shrunk."""
    from picard_casadi.methods import condensed

    prob = pc.problem("vdp", seed=0)
    solved = prob.estimate("picard-gn", uncertainty=False, refine=False)
    assert solved.success

    def not_finite(self, Xp, U_start, pp):
        self._trials_since_step += 1
        self._unsettled_trials += 1
        self._unsettled_residual = np.inf
        return U_start, np.inf, np.zeros(0), 1

    monkeypatch.setattr(condensed.ConstrainedGaussNewtonStep, "_trial", not_finite)
    res = prob.estimate("picard-gn", p0=solved.p * 1.001, uncertainty=False, refine=False)
    assert not res.success and res.status == "step_failed", res.message
    assert "the model is not finite at any of the" in res.message
    np.testing.assert_array_equal(res.p, solved.p * 1.001)


def test_a_collapse_is_round_off_only_where_the_gauss_newton_model_sees_no_gain(monkeypatch):
    """The trust region collapsed: "precision reached" (the run then converges
    at its floor) only where the undamped Gauss-Newton step predicts no gain
    (cosine at most NO_GAIN_COSINE) and some trial was finite.  The damping
    the rejections raise shrinks the damped prediction at any iterate: PEtab's
    Borghans from uniform 19 (trials settled at 1.0e-8, cosine 0.999) and
    Elowitz from uniform 15 (no trial finite, cosine 0.75) were reported
    converged far from any optimum."""
    from picard_casadi.methods import condensed
    from picard_casadi.methods.base import NO_GAIN_COSINE

    steps = []
    made = condensed.ConstrainedGaussNewtonStep.__init__

    def recorded(self, *args, **kwargs):
        made(self, *args, **kwargs)
        steps.append(self)

    monkeypatch.setattr(condensed.ConstrainedGaussNewtonStep, "__init__", recorded)
    assert pc.problem("vdp", seed=0).estimate("picard-gn", uncertainty=False,
                                             refine=False).success
    rule = steps[-1]
    Xs, ps = np.zeros((3, 2)), np.zeros(2)
    cases = [  # (last trial's fixed-point residual, cosine, failed, what the message says)
        (np.inf, 0.5 * NO_GAIN_COSINE, True, "the model is not finite"),
        (1e-3, 0.5 * NO_GAIN_COSINE, False, ""),
        (1e-3, 0.5, True, "was not found at any of the 4 trial points"),
    ]
    for residual, cosine, failed, says in cases:
        rule.radius, rule._trials_since_step, rule._unsettled_trials = 1e-11, 4, 4
        rule._unsettled_residual = residual
        info = rule._without_step(Xs, ps, merit=1.0, gnorm=1.0, evals=4, full_pred=0.0,
                                  zero=0.0, optimality=cosine, gap=0.0)
        assert info.failed is failed and info.precision_reached is not failed
        assert says in info.message


def test_a_run_where_no_step_gains_but_the_model_predicts_one_is_not_converged():
    """The loop's own exits "no step reduces the objective further" need the
    step rule's stationarity cosine at most NO_GAIN_COSINE: a rule that
    reports precision at a cosine of 0.5 makes the run give up, not converge."""
    from picard_casadi.methods.base import GIVE_UP_ITERATIONS, NO_GAIN_COSINE

    class _PreciseButFar(_NeverAccepts):
        def step(self, Xs, U, ps, V, lam) -> StepInfo:
            return StepInfo(Xs, ps, 1.0, 1.0, 0.5, 0.0, False, 1, 1.0,
                            precision_reached=True, optimality=self.cosine)

    for cosine, status in ((0.5, "step_failed"), (1e-4, "converged")):
        rule = _PreciseButFar()
        rule.cosine = cosine
        x, p = ca.SX.sym("x"), ca.SX.sym("p")
        model = pc.Model(x=x, p=p, rhs=p * x, name="growth")
        t = np.linspace(0.0, 1.0, 11)
        exp = pc.Experiment(t=t, y=np.exp(t)[:, None], x0=[1.0], name="e")
        # the start is the solution: gaps closed, fixed point settled
        setup = build_setup(model, [exp], np.array([1.0]), T=0.1, n=2, nodes=5,
                            scheme="chebyshev", weights=np.ones(1), codegen=False,
                            p_bounds=(np.array([-10.0]), np.array([10.0])),
                            x_bounds=(np.array([-np.inf]), np.array([np.inf])),
                            estimate_x0=np.array([False]))
        out = run_picard_iteration(setup, rule, LoopOptions(max_iter=200))
        assert out.status == status, out.message
        if cosine > NO_GAIN_COSINE:
            assert out.iterations == GIVE_UP_ITERATIONS and not out.success
        else:
            assert out.iterations <= 3 and out.success  # the floor rule's iterations


def test_an_iteration_limit_reached_far_along_a_valley_says_so():
    """A climate model without bounds: its feedbacks ran to -212 and 214 with
    the deep ocean's heat capacity to 1e7 in 1000 iterations; four other runs
    followed the same valley for 163 s, and the message said "increase
    max_iter".  Here the data are one decay, the second box's coupling and
    its capacity free."""
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 3)
    exchange = p[1] * (x[0] - x[1])
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(-p[0] * x[0] - exchange, exchange / p[2]),
                     y=x[0], p_names=["k", "k2", "Cd"])
    t = np.linspace(0.0, 5.0, 51)
    y = np.exp(-0.8 * t) + np.random.default_rng(0).normal(0.0, 0.01, t.size)
    res = pc.estimate(model, [pc.Experiment(t, y[:, None], x0=[1.0, 0.0])], [0.5, 0.3, 1.0],
                      estimate_x0=False, max_iter=200)
    assert not res.success and res.status == "max_iter"
    assert "where it reached its iteration limit: the data do not determine k and k2" \
        in res.message, res.message
    assert "bound these parameters (p_bounds)" in res.message
    assert "increase max_iter" not in res.message
