"""What every method reads, and the iteration shared by the two Picard methods.

:class:`Setup` is one estimation problem ready to solve: the transcription,
bounds, scales, which variables are free, and the starting point.  Every
method (Picard, Picard-GN, IPOPT, shooting) receives the same ``Setup``.

:func:`run_picard_iteration` is the paper's Algorithm 4 loop with a pluggable
step on ``(p, x_j)``:

1. a step on ``(p, x_j)`` that decreases ``L_{lambda,n}(x, p; U)`` with ``U``
   held fixed (projected gradient with line search, or Levenberg-Marquardt);
2. the relaxed Picard update ``U <- (1 - sigma) U + sigma P_{x,p} U``;
3. control of the continuity gap by the method of multipliers: the penalty
   ``lambda |c_j|^2`` becomes ``lambda |c_j + v_j|^2`` and, once the inner
   iteration has settled, ``v_j <- v_j + c_j``; ``lambda`` grows tenfold when
   the gap does not fall fourfold between updates.  With
   ``continuity="penalty"`` (the paper) ``v = 0`` and ``lambda`` is fixed.

All quantities are in scaled variables ``x / x_scale``, ``p / p_scale``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from ..transcription.problem import Setup

__all__ = [
    "Setup", "LoopOptions", "StepInfo", "StepRule", "IterationRecord",
    "LoopOutcome", "run_picard_iteration", "step_size",
]

CONTINUITY_MODES = ("constrained", "multiplier", "penalty")
# Iterations in a row where no step gains anything at double precision, with
# the fixed point solved and the scaled gaps at most GAP_FLOOR_MAX, that end
# the run as converged although the gaps are above gap_tol: they are then at
# the floor the linearisation can reach (a stiff model's); a step rule that
# stops on such iterations with wider gaps (condensed.STUCK_GAP, the same
# 1e-6) reports a failure instead.
FLOOR_ITERATIONS = 3
#: scaled continuity gap above which a run stopped by max_iter is advised to
#: start its states elsewhere (the guess) before iterating longer
OPEN_GAP_ADVICE = 1e-3
#: the two other starts such a run is advised to try (estimate's guess="auto"
#: drops the first where it has tried it)
ANCHORED_ADVICE = "guess='anchored' (states propagated from the data)"
SHOOTING_ADVICE = "guess='shooting' (every state simulated with p0)"
#: picard-gn's advice at max_iter on a loss that may be badly scaled; estimate
#: drops it where weights='auto' was used or the model has one output
WEIGHTS_ADVICE = ("on a badly scaled loss use weights='auto', or start this loss from "
                  "that answer (warm_start=the weights='auto' result), and ")
GAP_FLOOR_MAX = 1e-6
#: a state's largest interval start above this many times its scale gives it
#: a new scale (:func:`grown_scales`), at most MAX_RESCALES times in a run (a
#: bound for a run whose states blow up: each rescale grows a scale tenfold or
#: more, and PEtab's Bruno from its random starts took up to 18 in a solve)
SCALE_GROWTH = 10.0
MAX_RESCALES = 30
#: iterations in a row without an accepted step (rejected, or nothing to
#: gain) that end the run the same way: PEtab's Boehm from a random start
#: reached four of its six bounds with a gradient of 2e-22, the gaps at 1e-7
#: of a nearly empty state's scale (5.7e-14 absolute), and returned the same
#: iterate 190 times to max_iter, alternating a rejected trial and a
#: collapsed trust region
STALLED_ITERATIONS = 10
#: ... and where the fixed point cannot be solved further either: PEtab's Boehm
#: from another start (uniform 4, seed 0) returned the same iterate from
#: iteration 1100 to max_iter=2000, its gaps at 1.8e-9 and its fixed-point
#: residual at 1.1e-9 (both scaled, 2.8e-14 absolute), just above their
#: tolerances of 1e-9: the floor rule accepts a fixed point up to this, as it
#: accepts gaps up to GAP_FLOOR_MAX, and the certificate judges the estimate
FIXED_POINT_FLOOR_MAX = 1e-6
#: iterations in a row without an accepted step that end a run which meets
#: neither floor: nothing changes in them (the iterate is returned as it was)
GIVE_UP_ITERATIONS = 50
#: the stationarity cosine (``StepInfo.optimality``: the square root of the
#: relative gain the undamped Gauss-Newton step predicts) above which an
#: iterate where no step was accepted is not converged: the exits "no step
#: reduces the objective further" need it at most this.  The trials failed
#: there for another reason (PEtab's Borghans from uniform 19, seed 0: every
#: trial's fixed point settled at 1.0-1.2e-8, just above the trials' 1e-8, at
#: cosine 0.999, and the run was reported converged at nllh 277.26 with the
#: ODE's gradient 42 per decade of a parameter).  A stiff model's floor,
#: where the gain left is round-off (1.4e-7 of the merit, condensed.FLOOR_GAIN's
#: case), is a cosine of about 5e-4.
NO_GAIN_COSINE = 1e-2
#: a run calls its setup's ``stiff_check`` every this many iterations (a
#: fixed count: the same path on any machine).  Robertson's kinetics with B
#: lost in the noise crept for 1000 iterations (18 of its 20 s) on the
#: Chebyshev nodes, stiff there from iteration 100 on, before the check at
#: the run's end moved it to Radau's
STIFF_CHECK_ITERATIONS = 100
#: scaled continuity gap above which a run that stopped making progress
#: (``progress_window``) is a trajectory that does not join up: PEtab's
#: Crauste from a random start crept from 15.888 to 15.847 in 975 iterations
#: (0.3 s each) with its gaps at 0.008 to 0.011, to max_iter and then the
#: fallbacks' 435 s in all
CREEP_GAP = 1e-4
#: an accepted step the trust radius cut to less than this fraction of its
#: Gauss-Newton step is a sliver; ``creep_steps`` of them in a row stop a run
#: (``LoopOptions.creep_steps``)
CREEP_FRACTION = 0.01
#: a run whose last this many accepted steps were slivers checks whether the
#: model is stiff on its mesh by the lower threshold of a creeping run
#: (:data:`~picard_casadi.transcription.stiffness.CREEPING_STIFF_STEP`)
CREEP_STIFF_CHECK_STEPS = 20


@dataclass
class LoopOptions:
    """Options of the shared Picard iteration.

    Attributes
    ----------
    max_iter : int
        Iteration limit.
    sigma : float
        Relaxation of the Picard update ``U <- (1 - sigma) U + sigma P U``.
    sweeps : int or "auto"
        Picard updates of ``U`` per iteration.  ``"auto"`` repeats the update
        until the fixed-point residual is below a tenth of the last step (at
        most ``max_sweeps``): ``U`` then tracks ``(p, x_j)`` closely, which
        the Gauss-Newton step needs to converge fast.
    max_sweeps : int
        Cap of ``"auto"`` sweeps.
    lam : float
        Initial penalty weight ``lambda`` of the continuity residuals.
    continuity : {"constrained", "multiplier", "penalty"}
        How the gap is driven to zero: linearised constraints in each
        Gauss-Newton step (``picard-gn`` only, its default), multiplier
        updates of the penalty (the default of ``picard``), or the paper's
        fixed penalty (the gap is only reported).
    lam_max : float
        Largest ``lambda`` the multiplier method may grow to, as a multiple of
        the initial ``lam``.
    gap_tol : float
        Largest scaled continuity gap accepted as continuous.
    fixed_point_tol : float
        Largest scaled ``|P U - U|`` accepted as a fixed point.
    ftol : float
        Relative objective change over ``ftol_window`` iterations that counts
        as converged.
    ftol_window : int
    progress_window : int
        Iterations over which the objective must fall by ``progress_tol``
        (relative) while the continuity gaps are open (scaled, above
        :data:`CREEP_GAP`); checked from iteration ``2 progress_window`` on;
        0 never checks.  A step rule with a remedy (``damp_long_steps``: the
        condensed Gauss-Newton step's) gets it at the first such stall, and
        the run ends ``"stalled"`` if it stalls again a window later.
    progress_tol : float
    creep_steps : int
        Stop (status ``"max_iter"``) after this many accepted steps in a row
        that the trust radius cut to less than :data:`CREEP_FRACTION` of their
        Gauss-Newton step, or would have where they were damped to fit it
        (``StepInfo.fraction``): a creep along a direction
        the linearisation does not describe.  0 (the default) never stops so;
        the default path sets it for a solve that continues a converged one
        on a new mesh (:mod:`picard_casadi.estimation.solve_limits`).
    limits_set_by : str
        Who set ``max_iter`` and ``creep_steps``, where not the user: a stop at
        either names it (``"the default method gives a solve that continues a
        converged one on a new mesh"``); empty (the default): the options.
    gtol : float
        Projected scaled gradient norm, relative to the objective, that counts
        as converged; for Gauss-Newton steps also the step rule's cosine
        between the residual vector and what the Jacobian can reach of it
        (the largest cosine with a single scaled column for
        ``continuity="multiplier"``; the cosine with the Jacobian's range,
        within the boxes, for the constrained step).
    """

    # what the iteration-limit message advises (a class constant, not an option)
    max_iter_advice: ClassVar[str] = "increase max_iter or use method='picard-gn'"

    max_iter: int = 200
    sigma: float = 1.0
    sweeps: int | str = 1
    max_sweeps: int = 20
    lam: float = 10.0
    continuity: str = "multiplier"
    lam_max: float = 1e6
    gap_tol: float = 1e-9
    fixed_point_tol: float = 1e-9
    ftol: float = 1e-10
    ftol_window: int = 5
    progress_window: int = 0
    progress_tol: float = 1e-3
    creep_steps: int = 0
    limits_set_by: str = ""
    gtol: float = 1e-8

    def continuing(self) -> "LoopOptions":
        """The options of a solve that continues from a converged solution.

        Another round of ``weights="auto"`` and the solve on a refined mesh
        start next to their answer; methods whose step has a damping that
        only a distant start needs return a copy without it (see
        :meth:`PicardGNOptions.continuing`).  Here: the options themselves.
        """
        return self

    def validate(self) -> None:
        """Raise ValueError/TypeError naming a bad option and what it accepts."""
        require_positive_int("max_iter", self.max_iter)
        require_number("sigma", self.sigma)
        if not 0.0 < self.sigma <= 1.0:
            raise ValueError(f"sigma must be in (0, 1], got {self.sigma!r}")
        if self.sweeps != "auto":
            require_positive_int("sweeps", self.sweeps, "a positive integer or 'auto'")
        require_positive_int("max_sweeps", self.max_sweeps)
        require_positive("lam", self.lam)
        require_one_of("continuity", self.continuity, CONTINUITY_MODES)
        require_number("lam_max", self.lam_max)
        if not self.lam_max >= 1.0:  # NaN too
            raise ValueError(f"lam_max must be a number >= 1 (a multiple of lam), "
                             f"got {self.lam_max!r}")
        for name in ("gap_tol", "fixed_point_tol", "ftol", "gtol"):
            val = getattr(self, name)
            require_number(name, val)
            if not (np.isfinite(val) and val >= 0):
                raise ValueError(f"{name} must be a non-negative number, got {val!r}")
        require_positive_int("ftol_window", self.ftol_window)
        require_nonnegative_int("progress_window", self.progress_window)
        require_positive("progress_tol", self.progress_tol)
        require_nonnegative_int("creep_steps", self.creep_steps)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))


def require_number(name: str, value: Any, accepted: str = "a number") -> None:
    """Raise TypeError naming option ``name`` unless it is a (Python or NumPy) real number."""
    if not _is_number(value):
        raise TypeError(f"{name} must be {accepted}, got {value!r} ({type(value).__name__})")


def require_positive_int(name: str, value: Any, accepted: str = "a positive integer") -> None:
    """Raise TypeError/ValueError naming option ``name`` unless it is an integer >= 1."""
    require_number(name, value, accepted)
    if not np.isfinite(value) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be {accepted}, got {value!r}")


def require_nonnegative_int(name: str, value: Any) -> None:
    """Raise TypeError/ValueError naming option ``name`` unless it is an integer >= 0."""
    require_number(name, value, "an integer >= 0")
    if not np.isfinite(value) or int(value) != value or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")


def require_one_of(name: str, value: Any, choices: tuple[str, ...]) -> None:
    """Raise ValueError naming option ``name`` unless ``value`` is one of ``choices``."""
    if not (isinstance(value, str) and value in choices):
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def require_positive(name: str, value: Any) -> None:
    """Raise TypeError/ValueError naming option ``name`` unless it is a finite number > 0."""
    require_number(name, value, "a positive number")
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def require_fraction(name: str, value: Any) -> None:
    """Raise TypeError/ValueError naming option ``name`` unless ``0 < value < 1``."""
    require_number(name, value, "a number in (0, 1)")
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}")


def require_bool(name: str, value: Any) -> None:
    """Raise TypeError naming option ``name`` unless it is True or False."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")


@dataclass
class StepInfo:
    """What a step rule reports for one iteration."""

    Xs: np.ndarray
    ps: np.ndarray
    phi_before: float
    phi_after: float
    grad_norm: float
    step_norm: float
    accepted: bool
    evaluations: int
    control: float  # LM damping mu or gradient step alpha
    failed: bool = False
    message: str = ""
    U: np.ndarray | None = None  # node values settled at the new point, if the rule did
    precision_reached: bool = False  # no step can reduce the objective at double precision
    optimality: float = np.inf  # scale-free stationarity measure of the inner problem
    # the fraction of its Gauss-Newton step the trust radius let an accepted step
    # take, or would have let it take where the step was damped to fit the
    # radius instead (1 where the rule has no such step; LoopOptions.creep_steps)
    fraction: float = 1.0


def step_size(dX: np.ndarray, dp: np.ndarray) -> float:
    """The trust region's measure of a step in the scaled unknowns: its
    largest move of an interval start ``dX`` or a parameter ``dp``."""
    return float(max(np.abs(dX).max(initial=0.0), np.abs(dp).max(initial=0.0)))


class StepRule(Protocol):
    """A rule that moves ``(p, x_j)`` for fixed ``U`` (scaled variables)."""

    def step(self, Xs: np.ndarray, U: np.ndarray, ps: np.ndarray,
             V: np.ndarray, lam: float) -> StepInfo: ...

    def reset(self) -> None:
        """Forget step-size memory after the objective changed (multiplier update)."""

    def settled(self, info: StepInfo, gap_scaled: float, lam: float) -> bool:
        """Whether the inner iteration has converged enough to update multipliers."""


@dataclass
class IterationRecord:
    """One row of the iteration history: what ``estimate``'s ``callback`` receives
    after every iteration (exported as ``pc.IterationRecord``).

    Attributes
    ----------
    iteration : int
        Iteration number, from 0 (for ``"ipopt"`` and ``"shooting"``, IPOPT's).
    objective : float
        The method's objective before the step (the penalised loss with its
        multiplier shift for the Picard methods; IPOPT's objective).
    misfit : float
        Unweighted data misfit ``1/(2N) sum |y - g|^2`` after the update.
    grad_norm, step_norm : float
        Norms of the (projected) gradient and of the step.
    gap, gap_scaled : float
        Largest continuity gap ``|u_j(T) - x_{j+1}|`` in state units, and scaled
        by the states' scales (IPOPT: the largest scaled constraint violation).
    fixed_point : float
        Scaled ``max |P U - U|``.
    lam : float
        Continuity penalty ``lambda``.
    control : float
        The step's control: the damping (Levenberg-Marquardt, trust region) or
        the gradient step length (``"picard"``); IPOPT's barrier parameter
        in the history IPOPT returns, NaN in the callback.
    time : float
        Seconds since the solve started.
    p : list of float
        Parameters after the step.

    Values a method does not have (IPOPT's gradient norm, say) are NaN.
    """

    iteration: int
    objective: float  # L_{lambda,n} (with multiplier shift) before the step
    misfit: float  # unweighted data misfit 1/(2N) sum |y - g|^2 after the update
    grad_norm: float
    step_norm: float
    gap: float  # max |u_j(T) - x_{j+1}| in state units
    gap_scaled: float
    fixed_point: float  # scaled max |P U - U|
    lam: float
    control: float
    time: float
    p: list[float] = field(default_factory=list)  # parameters after the step


@dataclass
class LoopOutcome:
    """Final state of the shared iteration."""

    X: np.ndarray
    U: np.ndarray
    p: np.ndarray
    V: np.ndarray
    lam: float
    iterations: int
    success: bool
    status: str
    message: str
    history: list[IterationRecord] = field(default_factory=list)
    evaluations: int = 0
    notes: list[str] = field(default_factory=list)  # for the result's warnings
    #: a method's own outputs ``(J, ny, M)`` and end states ``(J, nx)`` at the
    #: solution, where they are not the collocation's (shooting: CVODES)
    trajectory: tuple[np.ndarray, np.ndarray] | None = None
    #: a solve continuing a converged one on a new mesh, stopped at the default
    #: path's limits (:func:`~picard_casadi.estimation.solve_limits.continued_solve`)
    continuation_stopped: bool = False


Callback = Callable[[IterationRecord], Any]


def _relative_change(a: float, b: float, shift: float = 0.0) -> float:
    """``|a - b - shift|`` relative to the larger of ``|a|, |b|`` (``shift``:
    the weights' level between them, where the weights moved)."""
    return abs(a - b - shift) / max(abs(a), abs(b), 1e-300)


def grown_scales(setup: Setup, X: np.ndarray) -> np.ndarray | None:
    """New state scales where the interval starts ``X`` have outgrown theirs.

    A state's scale comes from the start (its trajectory simulated with
    ``p0``); a state that grows far beyond it moves by many of its scales per
    step, and the trust region on the scaled starts then holds every step to
    a few hundredths in ``p`` (docs/design.md, "State scales grow with the
    states").  Where a state's largest start exceeds :data:`SCALE_GROWTH`
    times its scale, its scale becomes that largest start (scales only grow,
    as MINPACK's ``diag``).  Returns the new scales, or None where none has
    grown so.
    """
    size = np.abs(X).max(axis=0)
    grown = size > SCALE_GROWTH * setup.x_scale
    if not np.any(grown):
        return None
    return np.where(grown, size, setup.x_scale)


def run_picard_iteration(setup: Setup, rule: StepRule, opts: LoopOptions,
                         callback: Callback | None = None,
                         new_rule: Callable[[], StepRule] | None = None) -> LoopOutcome:
    """Run the paper's Algorithm 4 with the given step rule.

    Parameters
    ----------
    setup : Setup
    rule : StepRule
        Projected gradient (``"picard"``) or Levenberg-Marquardt (``"picard-gn"``).
    opts : LoopOptions
    callback : callable, optional
        Called with each :class:`IterationRecord`; returning ``True`` stops.
    new_rule : callable, optional
        Builds the step rule afresh: given, the states' scales grow where the
        iterates outgrow them (:func:`grown_scales`), and the rule (whose
        trust region and memory are in scaled units) is rebuilt.

    Returns
    -------
    LoopOutcome
    """
    opts.validate()
    tr = setup.tr
    prefetch = getattr(tr.functions, "prefetch", None)
    if prefetch is not None:  # compiled: build what the step calls, side by side
        prefetch(getattr(rule, "units", ()))
    disc = setup.disc
    J, nx = disc.n_intervals, disc.model.nx
    xs = setup.x_scale
    Xs, ps = setup.to_scaled(setup.X0, setup.p0)
    U = tr.nodes_arg(setup.U0)  # kept in the functions' layout: no conversion per call
    V = np.zeros((J, nx))
    lam = float(opts.lam)
    use_multipliers = opts.continuity == "multiplier"
    enforce_gap = opts.continuity != "penalty"
    history: list[IterationRecord] = []
    phis: list[float] = []
    # where the weights move with the steps (setup.reweight), the objectives
    # compare as likelihoods: less the weights' level (Setup.weight_level)
    # under which each iteration measured them (phis are the last of these)
    levels: list[float] = []
    gap_at_update = np.inf
    evaluations = 0
    t_start = time.perf_counter()
    status, message, success = "max_iter", "", False
    rejected_in_row = 0
    precise_in_row = 0  # iterations in a row where no step could gain anything
    idle_in_row = 0  # iterations in a row without an accepted step
    slivers_in_row = 0  # accepted steps in a row cut to a sliver (creep_steps)
    rescaled = 0
    # the iteration a stall turned on the step's damping of long steps (0: at
    # the start, or never)
    damped_at = 0

    def carry_remedy(rule: StepRule) -> None:
        # a solve that continues a stalled one (or a rule rebuilt after a
        # rescale) starts with the remedy the stall turned on
        if setup.damp_long_steps and hasattr(rule, "damp_long_steps"):
            rule.damp_long_steps = True

    carry_remedy(rule)
    floor = setup.merit_floor()
    it = 0
    for it in range(1, int(opts.max_iter) + 1):
        level = setup.weight_level() if setup.reweight is not None else 0.0
        info = rule.step(Xs, U, ps, V, lam)
        evaluations += info.evaluations
        if info.failed:
            status, message = "step_failed", info.message
            break
        rejected_in_row = 0 if (info.accepted or info.precision_reached) else rejected_in_row + 1
        precise_in_row = precise_in_row + 1 if info.precision_reached else 0
        idle_in_row = 0 if info.accepted else idle_in_row + 1
        if info.accepted:
            slivers_in_row = slivers_in_row + 1 if info.fraction < CREEP_FRACTION else 0
        Xs, ps = info.Xs, info.ps
        X, p = setup.from_scaled(Xs, ps)
        if info.U is not None:
            U = tr.nodes_arg(info.U)
        if setup.reweight is not None and info.accepted:
            setup.reweight(X, tr.nodes_np(U), p)  # the noise weights at the new point

        # update of the node values: the paper's relaxed Picard sweeps, or
        # ("auto") the fixed point solved to a tenth of the step (Picard sweeps
        # while they contract, Newton steps where they do not)
        if opts.sweeps == "auto":
            U_np, fp, _ = tr.settle(X, U, p, tol=max(0.1 * info.step_norm, opts.fixed_point_tol),
                                    max_sweeps=int(opts.max_sweeps))
            U = tr.nodes_arg(U_np)
            misfit, xend = tr.summary(X, U, p)
        else:
            # one generated call per sweep: update, its size, and the summary
            for _ in range(int(opts.sweeps)):
                U, fp, misfit, xend = tr.relax(X, U, p, opts.sigma)
                if not np.isfinite(fp):
                    break
        if not np.isfinite(fp):
            status = "diverged"
            message = (
                "the Picard update produced non-finite node values: the Picard "
                "map does not contract on these intervals; use a shorter T or a "
                "smaller sigma"
            )
            break

        if new_rule is not None and rescaled < MAX_RESCALES:
            scales = grown_scales(setup, X)
            if scales is not None:
                setup.x_scale = scales
                tr.set_x_scale(scales)
                xs = setup.x_scale
                Xs = X / xs
                rule = new_rule()
                carry_remedy(rule)
                rescaled += 1
        hn = disc.has_next
        cgap = np.zeros((J, nx))
        cgap[hn] = (xend[hn] - X[1:][hn[:-1]]) / xs
        gap_scaled = float(np.abs(cgap).max(initial=0.0))
        gap = float((np.abs(cgap) * xs).max(initial=0.0))

        rec = IterationRecord(
            iteration=it, objective=info.phi_before, misfit=misfit,
            grad_norm=info.grad_norm, step_norm=info.step_norm, gap=gap,
            gap_scaled=gap_scaled, fixed_point=fp, lam=lam, control=info.control,
            time=time.perf_counter() - t_start, p=[float(v) for v in p],
        )
        history.append(rec)
        phis.append(info.phi_after)
        levels.append(level)
        if callback is not None and callback(rec) is True:
            status, message = "stopped", "stopped by the callback"
            break

        window = int(opts.progress_window)
        if (window and it >= 2 * window and it >= damped_at + window
                and gap_scaled > CREEP_GAP):
            before = history[-1 - window].objective
            gain = ((before - levels[-1 - window]) - (rec.objective - level)) / max(
                abs(before), floor)
            if gain < opts.progress_tol and not getattr(rule, "damp_long_steps", True):
                # the remedy first: steps the trust radius would cut to a
                # sliver of the Gauss-Newton step (a direction dominated by
                # weakly determined parameters) are damped towards the
                # gradient instead (PEtab's Elowitz from its own optimum: the
                # objective 0.49996 -> 0.49988 in 1000 iterations with the
                # gaps opening; docs/performance.md, "Stalled runs")
                rule.damp_long_steps = setup.damp_long_steps = True
                damped_at = it
            elif gain < opts.progress_tol:
                status = "stalled"
                message = (
                    f"no progress: the objective fell by {max(gain, 0.0):.2g} (relative) over "
                    f"the last {window} iterations, less than progress_tol="
                    f"{opts.progress_tol:g}, while the continuity gaps stayed open (scaled "
                    f"{gap_scaled:.3g}, gradient norm {info.grad_norm:.3g}): the trajectory "
                    f"does not join up from this start; try {ANCHORED_ADVICE} or "
                    f"{SHOOTING_ADVICE}, or another p0 (progress_window=0 iterates on)")
                break

        # continuity control: method of multipliers
        settled = rule.settled(info, gap_scaled, lam) and fp <= 0.1 * gap_scaled
        if use_multipliers and gap_scaled > opts.gap_tol and settled:
            # multiplier estimate 2 lam (c + v); the shift carries it to the next solve
            V = V + cgap
            if gap_scaled > 0.25 * gap_at_update and lam < opts.lam_max * opts.lam:
                new_lam = min(10.0 * lam, opts.lam_max * opts.lam)
                V *= lam / new_lam  # same multiplier with the larger penalty
                lam = new_lam
            gap_at_update = gap_scaled
            phis.clear()
            rule.reset()
            continue

        # stopping rules
        continuous = (not enforce_gap) or gap_scaled <= opts.gap_tol
        fixed = fp <= opts.fixed_point_tol
        scale = max(abs(info.phi_after), floor)
        # the gradient relative to the objective, or (Gauss-Newton steps) the
        # cosine between the residual and what the Jacobian reaches: scale-free,
        # and reached in a step or two once Gauss-Newton converges, where the
        # objective-change test needs ftol_window more iterations
        stationary = info.grad_norm <= opts.gtol * scale or info.optimality <= opts.gtol
        w = int(opts.ftol_window)
        flat = len(phis) > w and all(
            _relative_change(phis[-1], phis[-1 - k], level - levels[-1 - k])
            <= opts.ftol for k in range(1, w + 1)
        )
        if continuous and fixed and (stationary or flat):
            success, status = True, "converged"
            why = "projected gradient norm" if stationary else (
                f"relative objective change < {opts.ftol:g} over {w} iterations")
            message = (
                f"converged: {why}; continuity gap {gap:.3g} ({gap_scaled:.3g} of the "
                f"states' scales), fixed-point residual {fp:.3g} (scaled)"
            )
            break
        # (where the step rule measures it, the Gauss-Newton model must agree
        # that nothing is left to gain: NO_GAIN_COSINE)
        gain_left = np.isfinite(info.optimality) and info.optimality > NO_GAIN_COSINE
        if ((info.precision_reached or rejected_in_row >= 3) and continuous and fixed
                and not gain_left):
            success, status = True, "converged"
            message = (
                "converged: no step reduces the objective further (relative "
                f"precision reached); continuity gap {gap:.3g} ({gap_scaled:.3g} of the "
                "states' scales)"
            )
            break
        no_gain = precise_in_row >= FLOOR_ITERATIONS or idle_in_row >= STALLED_ITERATIONS
        if (no_gain and fp <= FIXED_POINT_FLOOR_MAX and gap_scaled <= GAP_FLOOR_MAX
                and not gain_left):
            # the gaps (or the fixed point) cannot close further in double
            # precision (a stiff model: Robertson's kinetics stopped at 2.7e-9
            # with gap_tol 1e-9 and spun to max_iter with zero steps); the
            # certificate judges the estimate
            success, status = True, "converged"
            message = (
                f"converged: no step reduces the objective or the continuity gap "
                f"further (relative precision reached); the continuity gap, {gap_scaled:.3g} "
                f"of the states' scales ({gap:.3g} in their units), and the fixed-point "
                f"residual, {fp:.3g} (scaled), are the smallest double precision reaches on "
                f"this mesh (above gap_tol {opts.gap_tol:g} and fixed_point_tol "
                f"{opts.fixed_point_tol:g}); the certificate judges the estimate"
            )
            break
        if idle_in_row >= GIVE_UP_ITERATIONS:
            status = "step_failed"
            message = (
                f"no step was accepted in {idle_in_row} iterations in a row (the iterate "
                f"does not change): gradient norm {info.grad_norm:.3g}, continuity gap "
                f"{gap:.3g} (scaled {gap_scaled:.3g}), fixed-point residual {fp:.3g}; "
                "start from a better p0, or try multistart")
            break
        if opts.creep_steps and slivers_in_row >= opts.creep_steps:
            status = "max_iter"
            set_by = f", which {opts.limits_set_by}" if opts.limits_set_by else ""
            message = (
                f"iteration limit reached (creep_steps={opts.creep_steps}{set_by}: the trust "
                f"radius cut each of the last {slivers_in_row} steps to less than "
                f"{CREEP_FRACTION:.0%} of its Gauss-Newton step) before convergence: "
                f"gradient norm {info.grad_norm:.3g}, continuity gap {gap:.3g}, fixed-point "
                f"residual {fp:.3g}; {opts.max_iter_advice}")
            break
        # every CREEP_STIFF_CHECK_STEPS-th sliver in a row, once (not again on
        # the iterations that accept no step after it)
        creeping = (info.accepted and bool(slivers_in_row)
                    and slivers_in_row % CREEP_STIFF_CHECK_STEPS == 0)
        if setup.stiff_check is not None and (it % STIFF_CHECK_ITERATIONS == 0 or creeping):
            why = setup.stiff_check(X, tr.nodes_np(U), p, creeping=creeping)
            if why:  # the caller moves to an L-stable quadrature
                status, message = "stiff", why
                break
    else:
        last = history[-1] if history else None
        advice = opts.max_iter_advice
        if last is not None and last.gap_scaled > OPEN_GAP_ADVICE:
            # the trajectory never joined up: the states' start is the likelier
            # cause (a 200 s pendulum drifted to w2 = 80 and, with max_iter=1000,
            # to 147; guess="anchored" converged in 4 s: a user's report)
            advice = ("the continuity gaps are still open, so the states' start may be "
                      f"the trouble: try {ANCHORED_ADVICE} or {SHOOTING_ADVICE}; or " + advice)
        limit = (f"the {opts.max_iter} iterations {opts.limits_set_by}" if opts.limits_set_by
                 else f"max_iter={opts.max_iter}")
        message = (
            f"iteration limit reached ({limit}) before convergence"
            + (f": gradient norm {last.grad_norm:.3g}, continuity gap {last.gap:.3g}, "
               f"fixed-point residual {last.fixed_point:.3g}" if last else "")
            + "; " + advice
        )
    X, p = setup.from_scaled(Xs, ps)
    if not message:
        message = status
    return LoopOutcome(X=X, U=tr.nodes_np(U), p=p, V=V, lam=lam, iterations=it, success=success,
                       status=status, message=message, history=history,
                       evaluations=evaluations)
