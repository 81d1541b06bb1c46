"""One estimate's run: solve, certify, refine the mesh, solve again.

:func:`solve_and_refine` runs the chosen method on a
:class:`~picard_casadi.transcription.problem.Setup`, re-running it while
``weights="auto"`` re-estimates the noise levels (:func:`solve_with_weights`),
certifies the converged solution against an accurate integration of the
model (:mod:`picard_casadi.analysis.certificate`) and, where the certificate
fails and ``refine`` allows, bisects the intervals it marks
(:mod:`picard_casadi.transcription.mesh`), carries the solution onto the new
mesh and solves again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from ..analysis.certificate import Certificate, certify, short_of_optimum
from ..analysis.reach import parameter_reach
from ..analysis.uncertainty import (noise_variance_factor, solution_sensitivity,
                                     undetermined_parameters)
from ..experiment import Experiment
from ..methods import MethodSpec
from ..methods.base import IterationRecord, LoopOutcome, Setup
from ..methods.condensed import TRIAL_ACCEPT_FIXED_POINT
from ..model import Model
from ..transcription.discretisation import Discretisation
from ..transcription.guess import GUESS_NOTE
from ..transcription.mesh import polish_boundaries, refined_boundaries, transfer_solution
from .fallbacks import ITERATION_LIMITS, STALLED, clipped, restarts_allowed
from ..analysis.likelihood import NoiseGroups
from .diagnosis import PLATEAU_REACH, fitted_outputs
from .valleys import ran_off, ran_off_at_limit
from .noise_formula import NoiseFormula
from .preequilibration import settling_intervals
from .arguments import default_picard_order
from .setup import build_setup, initial_weights, residual_weights, start_weights
from .solve_limits import budgeted_solve, continued_solve, out_of_budget
from ..transcription.stiffness import CREEPING_STIFF_STEP, STIFF_STEP, Stiffness, stiffness

__all__ = ["FitProblem", "Solved", "RefinedRun", "solve_with_weights", "solve_and_refine",
           "COLLOCATION_METHODS", "CVODES_METHODS"]

#: the likelihood's relaxation (weights="auto", the default for several
#: outputs): at most this many solves, the noise variances re-estimated
#: between them, until no weight changes by more than WEIGHT_TOLERANCE
_AUTO_WEIGHT_ROUNDS = 30
WEIGHT_TOLERANCE = 1e-4

#: the most rounds of :meth:`FitProblem.settled_start` (intervals up to 256 times shorter)
START_BISECTIONS = 8


#: stops that are the user's: no restart on Radau's nodes after them
_BUDGETS = ("stopped", "Maximum_CpuTime_Exceeded", "Maximum_WallTime_Exceeded")


# Methods whose estimate is of the collocation solution on the mesh (the
# certificate refines their mesh); shooting integrates with CVODES instead.
COLLOCATION_METHODS = ("picard", "picard-gn", "ipopt")

#: the methods whose own model is CVODES on the intervals (their standard errors
#: and certificate come from it, not from the mesh)
CVODES_METHODS = ("shooting", "single-shooting")


@dataclass
class FitProblem:
    """What a run needs besides the setup: the checked inputs and the options."""

    model: Model
    experiments: list[Experiment]
    spec: MethodSpec
    opts: Any
    T: float
    n: int
    lam: float
    nodes: int
    scheme: str
    p_bounds: tuple[np.ndarray, np.ndarray]
    x_bounds: tuple[np.ndarray, np.ndarray]
    estimate_x0: np.ndarray  # which initial states are estimated (x0_mask)
    weights_mode: str  # "none", "auto" or "given"
    codegen: bool | str
    guess: str
    callback: Callable[[IterationRecord], Any] | None
    max_intervals: int | None = None
    #: the likelihood's noise levels (weights_mode "auto"): known, estimated, shared
    noise: NoiseGroups | None = None
    #: noise formulas, and the data without their shift (``experiments`` hold it)
    formula: NoiseFormula | None = None
    data: list[Experiment] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: scheme="auto": the quadrature moves to Radau where the model is stiff
    scheme_auto: bool = False
    #: n=None: the Picard order follows the quadrature (default_picard_order)
    n_auto: bool = False
    #: a run whose parameters ran along a flat valley to where its estimate is
    #: not certified, or to its iteration limit (:func:`.valleys.ran_off`)
    ran_off: str = ""
    #: a stiff start searched on a coarser mesh: the first mesh's ``T``, on
    #: which the search's solution continues (:func:`solve_and_refine`)
    polish_T: float | None = None
    #: the user's ``x_scale`` and ``p_scale`` (a setup built as estimate's first)
    user_scales: dict[str, Any] = field(default_factory=dict)
    #: a second run with another method: the iterations its solves may take in
    #: all, weight rounds included (:func:`budgeted_solve`); None: each solve
    #: has the method's own ``max_iter``
    iteration_budget: int | None = None
    #: the iterations the solves have taken so far (counted against the budget)
    iterations_spent: int = 0
    #: the default path's first run: a solve continuing from a converged
    #: solution on a new mesh stops at the limits of
    #: :func:`~picard_casadi.estimation.solve_limits.continued_solve`; False:
    #: the method's own ``max_iter``
    limit_continuations: bool = False

    def budget_spent(self) -> bool:
        """Whether a budgeted run has no iterations left for another solve."""
        return (self.iteration_budget is not None
                and self.iterations_spent >= self.iteration_budget)

    def stiff_on(self, setup: Setup, U: np.ndarray, p: np.ndarray,
                 threshold: float = STIFF_STEP) -> Stiffness | None:
        """With ``scheme="auto"`` on an A-stable quadrature: the stiffness of the
        node values ``U`` at ``p`` on ``setup``'s mesh where its ``h |Re
        lambda|`` exceeds ``threshold``
        (:mod:`picard_casadi.transcription.stiffness`), else None."""
        if not self.scheme_auto or self.scheme == "radau":
            return None
        found = stiffness(setup.disc, setup.tr.node_jacobians(U, p))
        return found if found.step > threshold else None

    def use_radau(self, found: Stiffness, where: str, disc: Any) -> None:
        """Move to Radau collocation (and its Picard order, unless ``n`` was
        given) for what follows; a note says why and where (``found`` on the
        mesh ``disc``)."""
        self.scheme = "radau"
        if self.n_auto:
            self.n = default_picard_order("radau")
        above = (f"above {STIFF_STEP:g}" if found.step > STIFF_STEP else
                 f"above {CREEPING_STIFF_STEP:g}, the threshold of a run whose steps the "
                 "trust radius cuts to slivers")
        # (a PEtab user read "at t = -0.97" of a problem whose data start at 0;
        # the node at a settling's end is at the data's t0: its interval says)
        settling = bool(settling_intervals(disc)[found.interval])
        self.notes.append(
            f"the model is stiff on the mesh {where} (h |Re lambda| = {found.step:.3g} at "
            f"t = {found.time:.6g}" + (", in a preequilibration's settling before the data, "
                                       "whose clock runs fast there" if settling else "")
            + f", {above}, where the Chebyshev collocation "
            "carries a decaying mode on instead of damping it): solved with Radau IIA "
            "collocation (scheme='radau'), which is L-stable")

    def settled_start(self, setup: Setup, weights: np.ndarray, **kw: Any) -> Setup:
        """``setup`` with the intervals bisected where the fixed point at ``p0``
        did not settle, while that settles more of them.

        From such a start no trial step of the Picard iteration is evaluated
        (its fixed point is not found there either, :data:`TRIAL_ACCEPT_FIXED_POINT`):
        Robertson's kinetics sampled to t = 1e6, from ``log10 k = 0``, left
        12 of 97 intervals of up to 15625 unsettled on Radau's nodes (a
        transient of rate 1 from the data's states), every step failed, and
        the fallbacks took 18 s; bisected three times (12, 9, 2 unsettled,
        then none: 248 intervals) ``picard-gn`` converged in 1.4 s.  From
        ``log10 k = 1`` the bisections settled fewer (72 of 97, then 92 of
        169), so the first mesh is kept: each round must settle more than the
        last, and the mesh is used only where every fixed point settles on it
        (at most :data:`START_BISECTIONS` rounds, within the size limit).
        ``kw``: as :meth:`setup`.
        """
        best, unsettled = setup, self._unsettled(setup)
        before = best_notes = len(self.notes)
        for _ in range(START_BISECTIONS):
            if not unsettled.any():
                break
            boundaries = refined_boundaries(best.disc, unsettled)
            if not _within_limit(self, best, boundaries):
                break
            mark = len(self.notes)
            trial = self.setup(best.p0, weights, boundaries=boundaries, **kw)
            left = self._unsettled(trial)
            if not left.sum() < unsettled.sum():
                del self.notes[mark:]  # that mesh is not used
                break
            best, unsettled, best_notes = trial, left, mark
        if unsettled.any():
            # a trial's fixed point often settles where the guess's did not
            # (from the step's prediction): only a mesh on which every one
            # settles is worth its intervals (Robertson with B swamped by
            # noise, from ones: 41 of 64, then 1 of 105 and of 106; its run on
            # the 105 took 5.8 s to the same answer as 1.8 s on the 64)
            del self.notes[before:]
            return setup
        if best is not setup:
            # the notes of the meshes in between, and the first mesh's unsettled
            # fixed points, describe meshes no longer used; the last mesh's stay
            earlier = [n for n in self.notes[:before] if not (n.startswith(GUESS_NOTE)
                                                              and "did not settle" in n)]
            self.notes[:] = earlier + [
                f"the first mesh was bisected where the fixed point with p0 did not settle "
                f"({setup.disc.n_intervals} -> {best.disc.n_intervals} intervals)"
            ] + self.notes[best_notes:]
        return best

    @staticmethod
    def _unsettled(setup: Setup) -> np.ndarray:
        """Intervals whose start ``(X0, U0, p0)`` is not a fixed point, ``(J,)`` of bool."""
        res = setup.tr.fixed_point_residuals(setup.X0, setup.U0, setup.p0)
        return ~(res <= TRIAL_ACCEPT_FIXED_POINT)

    def setup(self, p0: np.ndarray, weights: np.ndarray, **kw: Any) -> Setup:
        """A setup of this problem (``kw``: scales, mesh, start)."""
        return build_setup(
            self.model, self.experiments, p0, T=self.T, n=self.n, nodes=self.nodes,
            scheme=self.scheme, weights=weights, p_bounds=self.p_bounds,
            x_bounds=self.x_bounds, estimate_x0=self.estimate_x0, codegen=self.codegen,
            timings=self.timings, notes=self.notes, guess=self.guess, **kw)


@dataclass
class Solved:
    """A method's outcome with everything accumulated over its rounds."""

    outcome: LoopOutcome
    records: list[IterationRecord]
    iterations: int
    weight_rounds: int
    weights: np.ndarray


# Tolerances of the intermediate rounds of weights="auto" (any method's options
# that have these fields).  A round only has to give the next weights, which
# the rounds settle to 1 %: at a Gauss-Newton cosine of 1e-3 the misfit and the
# residual variances are within ~1e-6 of their minimum; the last round is
# solved to the method's own tolerance (docs/performance.md, "Weight rounds").
_ROUND_TOLERANCES = {"gtol": 1e-3, "ftol": 1e-7, "tol": 1e-5}


def _loosened(opts: Any) -> Any:
    """A copy of a method's options with the round tolerances, or ``opts`` itself."""
    if getattr(opts, "tolerance_fixed_at_build", False):
        return opts  # a looser round would rebuild the solver (IPOPT: ~10 s on F/A-18)
    names = {f.name for f in fields(opts)}
    changes = {k: max(getattr(opts, k), v) for k, v in _ROUND_TOLERANCES.items() if k in names}
    if not changes or all(getattr(opts, k) == v for k, v in changes.items()):
        return opts
    return replace(opts, **changes)


def _continuing(opts: Any) -> Any:
    """The method's options for a solve that starts from a converged solution
    (``LoopOptions.continuing``), or ``opts`` where the method has none."""
    continuing = getattr(opts, "continuing", None)
    return continuing() if continuing is not None else opts


def solve_with_weights(prob: FitProblem, setup: Setup, w: np.ndarray,
                        continuing: bool = False) -> Solved:
    """Run the method; with ``weights="auto"`` re-weight and re-run until the weights settle.

    The rounds are the output-error method's relaxation: the weights
    ``1 / sigma_k^2`` held fixed for a solve, each output's noise variance
    re-estimated from its residuals (``SSR_k / N_k``), until no weight moves
    by :data:`WEIGHT_TOLERANCE`; its fixed point is the optimum of the
    likelihood with unknown noise (:mod:`picard_casadi.analysis.likelihood`).

    The rounds that only serve to re-estimate the noise variances are solved
    to a loose tolerance (the variances need the estimate to ~1e-5, not to
    round-off), the last one to the method's own.  Every round after the
    first continues from a converged one and uses the options for a
    continuing solve (:func:`_continuing`), and so does the first with
    ``continuing`` (the setup starts from a converged solution carried to a
    refined mesh; on the default path within the limits of
    :func:`continued_solve`).  In ``picard-gn``'s intermediate rounds the weights are
    re-estimated after every accepted step (:func:`_reweighting`), so one
    round moves the parameters and the noise together; the first solve
    (from the start, whose residuals say little about the noise) and the last
    (at the final weights) keep theirs fixed.  A round that fails ends the
    rounds: its outcome is the answer, and says why.
    """
    auto = prob.weights_mode == "auto" and (prob.noise is None or bool(prob.formula)
                                             or bool(prob.noise.estimated.any()))
    opts = _loosened(prob.opts) if auto else prob.opts
    outcome = (continued_solve(prob, setup, _continuing(opts)) if continuing
               else budgeted_solve(prob, setup, opts))
    records, iterations, rounds = list(outcome.history), outcome.iterations, 1

    def again(options: Any) -> None:
        nonlocal outcome, iterations, rounds, w
        if prob.budget_spent():
            # a second run's budget ends the rounds: the noise levels did not settle
            outcome = out_of_budget(prob, outcome, "the noise levels settled")
            return
        setup.X0, setup.U0, setup.p0 = outcome.X, outcome.U, outcome.p
        # an intermediate round of picard-gn moves the weights with the steps
        setup.reweight = (_reweighting(prob, setup)
                          if options is opts and prob.spec.name == "picard-gn" else None)
        try:
            outcome = budgeted_solve(prob, setup, _continuing(options))
        finally:
            if setup.reweight is not None:
                w = setup.tr.weights  # the weights the round ended with
            setup.reweight = None
        records.extend(outcome.history)
        iterations += outcome.iterations
        rounds += 1

    if auto:
        # the rounds solved to the method's own tolerance have begun (a method
        # whose tolerance is fixed at its build has no looser rounds)
        final = opts is prob.opts
        for _ in range(_AUTO_WEIGHT_ROUNDS - 1):
            if not outcome.success:
                # the residuals of a failed fit say nothing about the noise, and
                # another round would fail alike (the paper's algorithm on the
                # F/A-18: six more rounds of 5000 iterations each)
                break
            # a shooting method's own outputs (CVODES'), as its result reports
            # them: the collocation polynomials through its nodes are not its
            # model (Robertson to t = 1e6: their sums of squares 0.3 to 1 %
            # off CVODES', and the weights with them)
            Ys = (outcome.trajectory[0] if outcome.trajectory is not None
                  else setup.tr.trajectory(outcome.X, outcome.U, outcome.p)[1])
            w_new = residual_weights(setup.disc, Ys, prob.noise)
            change = float(np.max(np.abs(w_new / w - 1.0)))
            held = _held_by_formula(prob, setup.disc, Ys)
            if held is not None:
                change = max(change, NoiseFormula.change(prob.experiments, held))
            if change < WEIGHT_TOLERANCE:
                if final:
                    break
                # the weights solved to the full tolerance, and checked again
                # where that solve ends: only the solve after a round that moved
                # them tells whether they hold (PEtab's Armistead from uniform 0,
                # a noise formula: its nllh reported 3e-4 below the likelihood
                # at the estimate, sigma_i held where the last solve moved on)
                final = True
                again(prob.opts)
                continue
            w = w_new
            if held is not None:
                prob.experiments = held
                setup.disc.replace_data(held)
            setup.tr.set_weights(w)
            again(prob.opts if final else opts)
        else:
            if outcome.success:
                prob.notes.append(
                    f"the noise levels had not settled after {_AUTO_WEIGHT_ROUNDS} weight rounds "
                    f"(the last moved a weight by {change:.1e}, more than "
                    f"{WEIGHT_TOLERANCE:g}): the estimate is not yet at the likelihood's "
                    "optimum; warm_start=this result continues the rounds")
        if not final and outcome.success:
            again(prob.opts)  # the final weights, solved to the full tolerance
    return Solved(outcome, records, iterations, rounds, w)


def _reweighting(prob: FitProblem, setup: Setup) -> Callable[..., None]:
    """The noise weights re-estimated at each accepted point of a solve
    (``Setup.reweight``); with noise formulas, their parameters re-fitted and
    their held data and ``sigma_i`` recomputed there too (:func:`_held_by_formula`).

    The rounds' relaxation converges linearly, and each round is a solve:
    on PEtab's Boehm problem (three noise levels) 9 to 13 rounds of 20 to 50
    iterations each, two thirds of a start's iterations; on Armistead (a
    noise formula ``sd * g`` per output) 11 rounds, half of a start's time.
    Moving the weights with the steps reaches the same fixed point (the
    rounds' own test still decides the last) in one intermediate round
    (docs/performance.md, "Weight rounds").  A point whose residuals give a
    weight that is not finite, or a formula that is not positive, keeps the
    weights and data it has."""

    def reweight(X: np.ndarray, U: np.ndarray, p: np.ndarray) -> None:
        _, Ys, _ = setup.tr.trajectory(X, U, p)
        w_new = residual_weights(setup.disc, Ys, prob.noise)
        if not (np.all(np.isfinite(w_new)) and np.all(w_new >= 0)):
            return
        if prob.formula:
            held = _held_by_formula(prob, setup.disc, Ys, note=False)
            if held is None:
                return
            prob.experiments = held
            setup.disc.replace_data(held)
        setup.tr.set_weights(w_new)  # the data too: replace_data moved them

    return reweight


def _held_by_formula(prob: FitProblem, disc: Discretisation, Ys: np.ndarray,
                     note: bool = True) -> list[Experiment] | None:
    """The noise formulas' next held data (:mod:`.noise_formula`): the noise
    parameters re-estimated for the solution's outputs ``Ys``, each value's
    ``sigma_i`` and data shift recomputed; None without formulas, or where the
    formula is not positive there (the parameters then kept, and with
    ``note`` the result's notes saying so)."""
    if not prob.formula or prob.data is None:
        return None
    fitted = fitted_outputs(disc, Ys)
    not_positive = prob.formula.not_positive(prob.data, fitted)
    if not_positive:
        # the likelihood is not finite at these outputs whatever theta (b*g
        # where g is 0): IPOPT's noise NLP would print its NaNs (estimate
        # fails the result where this holds at the end)
        message = f"the noise parameters were not re-estimated further: {not_positive}"
        if note and message not in prob.notes:
            prob.notes.append(message)
        return None
    theta = prob.formula.fit_theta(prob.data, fitted)
    previous = prob.formula.theta
    prob.formula.theta = theta
    try:
        return prob.formula.held(prob.data, fitted)
    except FloatingPointError as err:
        prob.formula.theta = previous
        message = f"the noise parameters were not re-estimated further: {err}"
        if note and message not in prob.notes:
            prob.notes.append(message)
        return None


def _timed_solve(prob: FitProblem, setup: Setup, w: np.ndarray,
                 continuing: bool = False) -> Solved:
    """:func:`solve_with_weights`, its time booked as build (what the method
    compiled or built, an NLP) and solve."""
    from ..runtime.codegen import STATS as codegen_stats

    timings = prob.timings
    if prob.scheme_auto and prob.scheme != "radau" and prob.spec.name in COLLOCATION_METHODS:
        setup.stiff_check = _stiff_check(prob, setup)
    t_solve = time.perf_counter()
    build_before = timings.get("build", 0.0)
    compile_before = codegen_stats.prepare_seconds
    solved = solve_with_weights(prob, setup, w, continuing)
    # What a method builds inside its solve (an NLP) it adds to "build" itself;
    # functions compiled (or loaded from the cache) on first use are counted here.
    # Whichever is larger (the NLP's build includes its compilation) is build time.
    extra = max(timings.get("build", 0.0) - build_before,
                codegen_stats.prepare_seconds - compile_before)
    timings["build"] = build_before + extra
    timings["solve"] = timings.get("solve", 0.0) + time.perf_counter() - t_solve - extra
    return solved


def _stiff_check(prob: FitProblem, setup: Setup) -> Callable[[np.ndarray, np.ndarray,
                                                               np.ndarray], str]:
    """``setup.stiff_check`` of a run on ``setup``: why the model is stiff on
    its mesh at a point (:meth:`FitProblem.stiff_on`), or ``""``."""

    def check(X: np.ndarray, U: np.ndarray, p: np.ndarray, creeping: bool = False) -> str:
        found = prob.stiff_on(setup, U, p, CREEPING_STIFF_STEP if creeping else STIFF_STEP)
        if found is None:
            return ""
        return (f"the model is stiff on the mesh (h |Re lambda| = {found.step:.3g} at "
                f"t = {found.time:.6g})")

    return check


def _certificate(prob: FitProblem, setup: Setup, outcome: LoopOutcome
                 ) -> tuple[Certificate, Any]:
    """The certificate of a converged outcome, and the sensitivities it computed.

    Timings: ``sensitivity`` (the solution's exact sensitivities, which the
    uncertainty reuses) and ``certificate`` (the accurate integration and the
    propagation of its defects).
    """
    from ..analysis.uncertainty import solution_sensitivity

    t0 = time.perf_counter()
    info = solution_sensitivity(setup, outcome.X, outcome.U, outcome.p)
    t1 = time.perf_counter()
    fitted = None
    rtol = None
    if prob.spec.name in CVODES_METHODS:
        # shooting's own model is CVODES at its tolerances: held against tighter ones
        from ..analysis.certificate import integrated_outputs, integration_failed

        o = prob.opts
        try:
            fitted = integrated_outputs(setup, outcome.X, outcome.p, o.rtol, o.atol,
                                        o.max_steps)
        except RuntimeError as err:
            # (a car's Pacejka tyres with the steering wheel's degrees: shooting
            # converged, CVODES failed on its intervals here, and the
            # RuntimeError ended the call after 109 s)
            return integration_failed(setup, info, prob.weights_mode != "none", err), info
        rtol = min(1e-2 * o.rtol, 1e-10)
    cert = certify(setup, outcome.X, outcome.p, info,
                   from_weights=prob.weights_mode != "none", fitted=fitted,
                   **({} if rtol is None else {"rtol": rtol}))
    t2 = time.perf_counter()
    prob.timings["sensitivity"] = prob.timings.get("sensitivity", 0.0) + t1 - t0
    prob.timings["certificate"] = prob.timings.get("certificate", 0.0) + t2 - t1
    return cert, info


def _refined_setup(prob: FitProblem, setup: Setup, boundaries: list[np.ndarray], *,
                   solved: Solved | None = None, U: np.ndarray | None = None,
                   p0: np.ndarray | None = None) -> Setup:
    """A setup on the refined mesh ``boundaries``
    (:func:`~picard_casadi.transcription.mesh.refined_boundaries`).

    It starts from the solution ``solved`` (node values ``U``, settled) carried
    over to the new mesh, or, given ``p0``, from a new initial guess.
    """
    from ..transcription.discretisation import Discretisation

    if solved is None:
        new = prob.setup(p0, setup.tr.weights, x_scale=setup.x_scale, p_scale=setup.p_scale,
                         boundaries=boundaries)
        new.tr.set_weights(setup.tr.weights)
        return new
    new_disc = Discretisation(prob.model, prob.experiments, prob.T, prob.nodes, prob.scheme,
                              boundaries)
    X, U_new = transfer_solution(setup.disc, solved.outcome.X, U, new_disc)
    # a new interval start inside an old interval may lie outside the state box
    # (which bounds interval starts only): the start must be in it
    X = np.where(new_disc.is_first[:, None] & ~prob.estimate_x0[None, :], X,
                 np.clip(X, *prob.x_bounds))
    U_new[:, :, 0] = X
    p = solved.outcome.p
    new = prob.setup(p, solved.weights, x_scale=setup.x_scale, p_scale=setup.p_scale,
                     boundaries=boundaries, start=(X, U_new))
    new.U0, _, _ = new.tr.settle(X, U_new, p, tol=1e-12)
    new.damp_long_steps = setup.damp_long_steps  # a continuation of that solve
    new.penalty = setup.penalty
    new.newton = setup.newton
    return new


def _within_limit(prob: FitProblem, setup: Setup, boundaries: list[np.ndarray]) -> bool:
    """Whether the refined mesh ``boundaries`` stays within the size limit
    (:func:`~picard_casadi.transcription.problem_size.check_problem_size`); a note if not."""
    from ..transcription.problem_size import interval_limit

    # a marked interval may split at several input samples, not only in two
    wanted = sum(b.size - 1 for b in boundaries)
    limit = interval_limit(prob.model, prob.nodes, setup.disc.M, prob.max_intervals)
    if wanted <= limit:
        return True
    prob.notes.append(
        f"mesh refinement stopped: {wanted:,} intervals would exceed the limit of {limit:,} "
        "(pass max_intervals to estimate() to raise it)")
    return False


def _unresolved(setup: Setup, outcome: LoopOutcome) -> np.ndarray | None:
    """Intervals a failed run's mesh does not resolve at its last iterate, or None."""
    from ..analysis.certificate import resolution_check

    sigma = 1.0 / np.sqrt(initial_weights(setup.disc))
    marked, _ = resolution_check(setup, outcome.X, outcome.U, outcome.p, sigma)
    return marked


@dataclass
class RefinedRun:
    """The last solve of :func:`solve_and_refine`, on its final mesh."""

    setup: Setup
    solved: Solved
    certificate: Certificate | None
    info: Any
    records: list
    iterations: int
    refinements: int
    #: a stiff start's search that converged on a plateau (no certificate:
    #: its reach, :func:`_searched_plateau`); None otherwise
    plateau_reach: float | None = None


def _searched_plateau(prob: FitProblem, setup: Setup, outcome: LoopOutcome
                      ) -> tuple[Any, float | None]:
    """The sensitivities at a stiff start's converged search, and its
    parameter reach where it lies on a plateau
    (:data:`~picard_casadi.estimation.diagnosis.PLATEAU_REACH`), else None."""
    t0 = time.perf_counter()
    info = solution_sensitivity(setup, outcome.X, outcome.U, outcome.p)
    prob.timings["sensitivity"] = prob.timings.get("sensitivity", 0.0) + (
        time.perf_counter() - t0)
    with np.errstate(all="ignore"):
        F = info.Jt.gram()
        s2 = noise_variance_factor(info.r, *info.Jt.shape, prob.weights_mode == "auto")
    if not (np.all(np.isfinite(F)) and np.isfinite(s2)):
        return info, None
    reach = parameter_reach(setup, np.diag(F), info.columns, outcome.p, s2)
    return info, (reach if reach is not None and reach < PLATEAU_REACH else None)


def solve_and_refine(prob: FitProblem, setup: Setup, w: np.ndarray, p0: np.ndarray,
                      max_refinements: int) -> RefinedRun:
    """Solve, certify, and refine the mesh where the certificate fails.

    A converged run is certified; where it fails, the marked intervals are
    bisected and the run continues from its solution on the new mesh.  A run
    that broke down (not an iteration limit) on a mesh that does not resolve
    the model at its last iterate is refined and restarted from ``p0``, once:
    a restart that breaks down too is the result.  A
    stiff start's search (``prob.polish_T``) continues from its converged
    solution on the first mesh before it is certified, unless it converged on
    a plateau (``RefinedRun.plateau_reach``), where it stops.
    Stops when the certificate holds, the budget ``max_refinements`` is
    spent, or the refined mesh would pass the size limit.
    """
    spec = prob.spec
    weights_mode = prob.weights_mode
    solved = _timed_solve(prob, setup, w)
    records, iterations = list(solved.records), solved.iterations
    cert, info, refinements, plateau_reach = None, None, 0, None
    refinable = spec.name in COLLOCATION_METHODS
    # whether the last solve started again from p0 after a breakdown (below)
    restarted = False
    while True:
        restarting = False
        outcome = solved.outcome
        # a second run whose budget is spent solves nothing more: its
        # converged answer is still certified (budgeted_solve)
        spent = prob.budget_spent()
        if spent and not outcome.success:
            break
        # a run that stopped "stiff" found it so by its own check, perhaps by a
        # creeping run's lower threshold (methods.base.CREEP_STIFF_CHECK_STEPS)
        found = (prob.stiff_on(setup, outcome.U, outcome.p,
                               CREEPING_STIFF_STEP if outcome.status == "stiff" else STIFF_STEP)
                 if refinable and not spent else None)
        if found is not None and (outcome.success or outcome.status == "stiff" or (
                restarts_allowed() and outcome.status not in _BUDGETS)):
            # the same mesh on Radau's nodes (not a refinement): from this
            # solution, or from p0 where the run did not converge or found
            # the model stiff on its way (setup.stiff_check: its node values
            # carry the fast modes the paper's nodes do not damp; Robertson's
            # kinetics from ones, continued from them, ended step_failed)
            if outcome.success:
                prob.use_radau(found, f"at {spec.name}'s solution", setup.disc)
                setup = _refined_setup(prob, setup, setup.disc.boundaries, solved=solved,
                                       U=outcome.U)
            elif outcome.status == "stiff":
                prob.use_radau(found, f"at iteration {solved.iterations} of {spec.name}; the "
                               "run started again from p0", setup.disc)
                setup = _refined_setup(prob, setup, setup.disc.boundaries, p0=p0)
            else:
                prob.use_radau(found, f"at the last iterate of {spec.name}, which did not "
                               f"converge ({clipped(outcome.message, 100)}); the run "
                               "started again from p0", setup.disc)
                setup = _refined_setup(prob, setup, setup.disc.boundaries, p0=p0)
        elif prob.polish_T is not None and not outcome.success:
            if outcome.status in _BUDGETS + ITERATION_LIMITS + STALLED:
                # a limit, not a breakdown: the result says where it stopped (a
                # continuation from it, estimate's second run, is on the first mesh)
                prob.notes.append(
                    f"{spec.name} searched on the data's time scale "
                    f"({setup.disc.n_intervals} intervals, T = {prob.T:.6g}) and stopped "
                    f"there ({outcome.status}); converged, it would have continued on the "
                    f"first mesh (T = {prob.polish_T:.6g})")
                break
            # the search failed: the first mesh from p0, as without it (Robertson's
            # kinetics to t = 1e6 from log10 k = 0: the search's step failed;
            # on the first mesh picard-gn converges)
            prob.notes.append(
                f"{spec.name} on the data's time scale ({setup.disc.n_intervals} intervals) "
                f"did not converge ({clipped(outcome.message, 100)}); the run started again "
                "from p0 on the first mesh, and the result is that run's")
            prob.T, prob.polish_T = prob.polish_T, None
            setup = prob.settled_start(prob.setup(p0, w, **prob.user_scales), w,
                                       **prob.user_scales)
            w_start = start_weights(setup, prob.noise) if weights_mode == "auto" else w
            setup.tr.set_weights(w_start)
            solved = _timed_solve(prob, setup, w_start)
            records.extend(solved.records)
            iterations += solved.iterations
            continue
        elif outcome.success and prob.polish_T is not None:
            info, plateau_reach = _searched_plateau(prob, setup, outcome)
            if plateau_reach is not None:
                # no parameter moves the fit there: the first mesh would find
                # the same (PEtab's Fujita from uniform start 13: the search
                # converged at 10011.49 in 0.6 s; on the first mesh picard-gn's
                # step failed after 84 s and IPOPT's second run converged there
                # after 961 s)
                prob.notes.append(
                    f"{spec.name} searched on the data's time scale "
                    f"({setup.disc.n_intervals} intervals) and converged where no parameter "
                    f"moves the fit by more than {plateau_reach:.1e} noise levels; it did not "
                    f"continue on the first mesh (T = {prob.polish_T:.6g})")
                break
            info = None
            # a stiff start's search mesh: its solution continues on the first
            # mesh (not a refinement; the certificate judges that mesh's answer)
            boundaries = polish_boundaries(setup.disc, prob.polish_T)
            coarse, prob.T, prob.polish_T = setup.disc.n_intervals, prob.polish_T, None
            prob.notes.append(
                f"{spec.name} searched on the data's time scale ({coarse} intervals) and "
                f"continued from its solution on the first mesh "
                f"({sum(b.size - 1 for b in boundaries)} intervals, T = {prob.T:.6g})")
            setup = _refined_setup(prob, setup, boundaries, solved=solved, U=outcome.U)
        elif outcome.success:
            cert, info = _certificate(prob, setup, outcome)
            if not cert.passed:
                # where the parameters ran off along a flat valley to get here,
                # a finer mesh follows them (Robertson's kinetics with B lost in
                # the noise: at log10 k2 = 63 CVODES failed and the refined
                # start's fixed point blew up to 1e70; from other data, at
                # log10 k2 = 24, five refinements failed to certify)
                prob.ran_off = ran_off(p0, outcome.p, setup.p_scale,
                                       undetermined_parameters(setup, info),
                                       prob.model.p_names)
                if prob.ran_off:
                    break
            # a run that never left its start, short of its own optimum there
            # (no step lowered the objective), would not on a finer mesh either:
            # a frame's stiffness started negative (growing by e^300) was refined
            # five times at p0, each mesh twice the last's cost, the call over
            # 15 min (a warm start at its optimum is refined: not short of it)
            unmoved = (refinements == 0 and np.array_equal(outcome.p, p0)
                       and short_of_optimum(cert.stopped_short))
            if (cert.passed or not refinable or refinements >= max_refinements
                    or cert.discretisation_passed or unmoved):
                # (a mesh that resolves the model is not refined where the method
                # stopped short of its own optimum: judge() says so)
                break
            if not restarts_allowed():
                # a second run (IPOPT's) is not refined: picard-gn continues
                # from its answer and refines (fallbacks._continued).  PEtab's
                # Fujita from uniform start 2: IPOPT converged on 384 intervals
                # in 24 iterations, 23 s; its solve on the refined mesh grew
                # MUMPS's factors to 7 GB and had not returned after 17 minutes
                prob.notes.append(
                    f"{spec.name}'s second run converged on its mesh and was not refined "
                    f"({setup.disc.n_intervals} intervals; {cert.message})")
                break
            boundaries = refined_boundaries(setup.disc, cert.marked())
            if not _within_limit(prob, setup, boundaries):
                break
            setup = _refined_setup(prob, setup, boundaries, solved=solved, U=info.U)
            refinements += 1
        else:
            if outcome.status in ITERATION_LIMITS and np.all(np.isfinite(outcome.p)):
                prob.ran_off = ran_off_at_limit(setup, outcome, p0, prob.model.p_names)
            # a breakdown (not an iteration or time limit) on a mesh that does not
            # resolve the model at the last iterate: refine it and start again
            if (not refinable or refinements >= max_refinements or not restarts_allowed()
                    or outcome.status in ITERATION_LIMITS + STALLED + ("stopped",)):
                break
            if restarted:
                # that restart broke down too: restarting again has not helped
                # on record (PEtab's Borghans, uniform starts of seed 0: chains
                # of up to five restarts refining one to 34 intervals, the ten
                # after a first 105 CPU s in all, none converging); the default
                # path's second runs follow instead
                prob.notes.append(
                    f"{spec.name} failed again on the refined mesh ({setup.disc.n_intervals} "
                    "intervals) and was not restarted once more")
                break
            marked = _unresolved(setup, outcome)
            if marked is None:
                break
            boundaries = refined_boundaries(setup.disc, marked)
            if not _within_limit(prob, setup, boundaries):
                break
            prob.notes.append(
                f"{spec.name} failed on a mesh of {setup.disc.n_intervals} intervals, which "
                f"did not resolve the model ({clipped(outcome.message, 100)}); the mesh was "
                "refined and the run started again from p0, and the result is that run's")
            setup = _refined_setup(prob, setup, boundaries, p0=p0)
            refinements += 1
            restarting = True
        restarted = restarting
        solved = _timed_solve(prob, setup, solved.weights if outcome.success else
                              (start_weights(setup, prob.noise) if weights_mode == "auto"
                               else w),
                              continuing=outcome.success)
        records.extend(solved.records)
        iterations += solved.iterations
        cert, info = None, None
    return RefinedRun(setup, solved, cert, info, records, iterations, refinements,
                      plateau_reach)
