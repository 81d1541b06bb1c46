"""``estimate``: one entry point for every method.

The driver checks the user's input once, builds the shared
:class:`~picard_casadi.methods.base.Setup` (:mod:`picard_casadi.problem_setup`),
and then, until the answer is certified or the budget is spent:

1. runs the chosen method, re-running it while ``weights="auto"``
   re-estimates the noise levels (:func:`_solve_with_weights`);
2. certifies the converged solution against an accurate integration of the
   model (:mod:`picard_casadi.certificate`); where the certificate fails and
   ``refine`` allows, bisects the intervals it marks
   (:mod:`picard_casadi.mesh`), carries the solution onto the new mesh and
   goes back to 1.

Where the run fails, the default path's second runs (another start, IPOPT,
shooting; :mod:`picard_casadi.fallbacks`) follow.  The result
(:class:`~picard_casadi.result.EstimationResult`) carries the estimate, the
certificate, the final mesh, the uncertainty and the timings.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, NamedTuple

import numpy as np

from .certificate import Certificate, certify
from .checks import (as_bool, as_codegen, as_int, as_positive_number, check_bounds_not_nan,
                     check_callback, check_choice, check_problem_size, check_seed)
from .errors import ConvergenceError, DiscretisationWarning
from .diagnosis import (check_fit, diagnose_open_gaps, diagnose_stuck_step, fitted_outputs,
                        note_bounds_reached)
from .experiment import Experiment
from .fallbacks import ITERATION_LIMITS, DefaultPath, clipped, restarts_allowed, second_runs
from .guess import GUESS_NOTE, GUESSES
from .interrupts import interruptible_call
from .mesh import default_T, refined_boundaries, transfer_solution
from .methods import MethodSpec, get_method, method_options
from .methods.base import (ANCHORED_ADVICE, SHOOTING_ADVICE, WEIGHTS_ADVICE,
                           IterationRecord, LoopOutcome, Setup)
from .model import Model
from .predict import simulation_predictor
from .problem_setup import (as_vector, build_setup, estimated_quantities, initial_weights,
                            residual_variance, weights_from_variance, x0_mask, x0_setting)
from .result import EstimationResult
from .threads import with_solver_threads
from .user_warnings import warn_user

__all__ = ["estimate", "build_setup", "default_T", "MAX_REFINEMENTS"]

DEFAULT_METHOD = "picard-gn"
DEFAULT_NODES = {"chebyshev": 9, "trapezoid": 21}
MAX_REFINEMENTS = 5
_AUTO_WEIGHT_ROUNDS = 6
# Methods whose estimate is of the collocation solution on the mesh (the
# certificate refines their mesh); shooting integrates with CVODES instead.
_COLLOCATION_METHODS = ("picard", "picard-gn", "ipopt")


# ---------------------------------------------------------------------- checks
def _as_experiments(model: Model, experiments: Any) -> list[Experiment]:
    if isinstance(experiments, Experiment):
        experiments = [experiments]
    try:
        exps = list(experiments)
    except TypeError:
        raise TypeError("experiments must be an Experiment or a list of them") from None
    if not exps:
        raise ValueError("experiments is empty; pass at least one Experiment")
    for i, e in enumerate(exps):
        if not isinstance(e, Experiment):
            raise TypeError(f"experiments[{i}] is a {type(e).__name__}, not an Experiment")
        e.check(model)
    return exps


def _per_entry_pairs(value: Any, n: int) -> tuple[list[Any], list[Any]] | None:
    """``value`` read as ``n`` pairs ``(min, max)``, one per entry (the layout of
    ``scipy.optimize.minimize``'s ``bounds``), as (mins, maxs); None if it is not."""
    try:
        pairs = list(value)
        if len(pairs) != n or not all(len(pair) == 2 for pair in pairs):
            return None
        mins, maxs = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
        ok = all(a is None or b is None or float(a) < float(b) for a, b in zip(mins, maxs))
    except (TypeError, ValueError):
        return None
    return (mins, maxs) if ok else None


def _bounds(value: Any, n: int, field: str) -> tuple[np.ndarray, np.ndarray]:
    if value is None:
        return np.full(n, -np.inf), np.full(n, np.inf)
    pairs = _per_entry_pairs(value, n)
    hint = (f"; for one (min, max) pair per entry, as scipy.optimize.minimize's bounds, "
            f"pass `{field}`=({pairs[0]}, {pairs[1]}) (all lower bounds, then all upper "
            "bounds, as scipy.optimize.least_squares)" if pairs else "")
    try:
        lb, ub = value
    except (TypeError, ValueError):
        raise ValueError(f"`{field}` must be a pair (lower, upper) or None{hint}") from None
    lb = np.full(n, -np.inf) if lb is None else as_vector(lb, n, f"{field}[0]")
    ub = np.full(n, np.inf) if ub is None else as_vector(ub, n, f"{field}[1]")
    lb = np.where(np.isnan(lb), -np.inf, lb)
    ub = np.where(np.isnan(ub), np.inf, ub)
    if np.any(lb > ub):
        i = int(np.flatnonzero(lb > ub)[0])
        raise ValueError(f"`{field}`: lower bound {lb[i]} exceeds upper bound {ub[i]} at "
                         f"index {i}{hint}")
    minimize_layout = isinstance(value, list) and all(isinstance(v, tuple) for v in value)
    if pairs and minimize_layout and np.any(lb == ub):
        # [(0, 5), (0, 5)] for two parameters: (lower, upper) = ([0, 5], [0, 5])
        # holds both fixed, and the fit "succeeded" without moving them; [(0, 1),
        # (0, 2)] fixed the first at 0 (a user's damping), and the misfit that
        # followed was blamed on "gross outliers"
        fixed = np.flatnonzero(lb == ub).tolist()
        which = "every entry" if len(fixed) == n else f"entry {', '.join(map(str, fixed))}"
        raise ValueError(f"`{field}` = {value!r} reads as lower bounds {lb.tolist()} and upper "
                         f"bounds {ub.tolist()}, which fix {which}{hint}; to fix it so, "
                         f"pass `{field}` as a tuple of two lists or arrays")
    return lb, ub


def _check_positive_int(value: Any, field: str, minimum: int = 1) -> int:
    return as_int(value, field, minimum)


def _refinement_budget(refine: Any) -> int:
    """``refine`` as the number of refinement rounds allowed."""
    if isinstance(refine, (bool, np.bool_)):
        return MAX_REFINEMENTS if refine else 0
    if isinstance(refine, (int, np.integer)) and refine >= 0:
        return int(refine)
    raise ValueError(
        f"`refine` must be True, False or a number of refinement rounds >= 0, got {refine!r}"
    )


# ---------------------------------------------------------------------- the run
@dataclass
class _Problem:
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
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def setup(self, p0: np.ndarray, weights: np.ndarray, **kw: Any) -> Setup:
        """A setup of this problem (``kw``: scales, mesh, start)."""
        return build_setup(
            self.model, self.experiments, p0, T=self.T, n=self.n, nodes=self.nodes,
            scheme=self.scheme, weights=weights, p_bounds=self.p_bounds,
            x_bounds=self.x_bounds, estimate_x0=self.estimate_x0, codegen=self.codegen,
            timings=self.timings, notes=self.notes, guess=self.guess, **kw)


@dataclass
class _Solved:
    """A method's outcome with everything accumulated over its rounds."""

    outcome: LoopOutcome
    records: list[IterationRecord]
    iterations: int
    weight_rounds: int
    weights: np.ndarray


# Tolerances of the intermediate rounds of weights="auto" (any method's options
# that have these fields).  A round only has to give the next weights, which
# the rounds settle to 1 %: at a Gauss-Newton cosine of 1e-3 the misfit is
# within ~1e-6 of its minimum, and so are the residual variances; the last
# round is solved to the method's own tolerance (docs/performance.md,
# "Weight rounds").
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


def _solve_with_weights(prob: _Problem, setup: Setup, w: np.ndarray,
                        continuing: bool = False) -> _Solved:
    """Run the method; with ``weights="auto"`` re-weight and re-run until the weights settle.

    The rounds that only serve to re-estimate the noise variances are solved
    to a loose tolerance (the variances need the estimate to ~1e-5, not to
    round-off), the last one to the method's own.  Every round after the
    first continues from a converged one and uses the options for a
    continuing solve (:func:`_continuing`), and so does the first with
    ``continuing`` (the setup starts from a converged solution carried to a
    refined mesh).  A round that fails ends the rounds: its outcome is the
    answer, and says why.
    """
    auto = prob.weights_mode == "auto"
    opts = _loosened(prob.opts) if auto else prob.opts
    outcome = prob.spec.solve(setup, _continuing(opts) if continuing else opts, prob.callback)
    records, iterations, rounds = list(outcome.history), outcome.iterations, 1

    def again(options: Any) -> None:
        nonlocal outcome, iterations, rounds
        setup.X0, setup.U0, setup.p0 = outcome.X, outcome.U, outcome.p
        outcome = prob.spec.solve(setup, _continuing(options), prob.callback)
        records.extend(outcome.history)
        iterations += outcome.iterations
        rounds += 1

    if auto:
        for _ in range(_AUTO_WEIGHT_ROUNDS - 1):
            if not outcome.success:
                # the residuals of a failed fit say nothing about the noise, and
                # another round would fail alike (the paper's algorithm on the
                # F/A-18: six more rounds of 5000 iterations each)
                break
            w_new = weights_from_variance(
                residual_variance(setup, outcome.X, outcome.U, outcome.p), setup.disc)
            if np.max(np.abs(w_new / w - 1.0)) < 0.01:
                break
            w = w_new
            setup.tr.set_weights(w)
            again(opts)
        if opts is not prob.opts and outcome.success:
            again(prob.opts)  # the final weights, solved to the full tolerance
    return _Solved(outcome, records, iterations, rounds, w)


def _timed_solve(prob: _Problem, setup: Setup, w: np.ndarray,
                 continuing: bool = False) -> _Solved:
    """:func:`_solve_with_weights`, its time booked as build (what the method
    compiled or built, an NLP) and solve."""
    from .codegen import STATS as codegen_stats

    timings = prob.timings
    t_solve = time.perf_counter()
    build_before = timings.get("build", 0.0)
    compile_before = codegen_stats.prepare_seconds
    solved = _solve_with_weights(prob, setup, w, continuing)
    # What a method builds inside its solve (an NLP) it adds to "build" itself;
    # functions compiled (or loaded from the cache) on first use are counted here.
    # Whichever is larger (the NLP's build includes its compilation) is build time.
    extra = max(timings.get("build", 0.0) - build_before,
                codegen_stats.prepare_seconds - compile_before)
    timings["build"] = build_before + extra
    timings["solve"] = timings.get("solve", 0.0) + time.perf_counter() - t_solve - extra
    return solved


def _certificate(prob: _Problem, setup: Setup, outcome: LoopOutcome
                 ) -> tuple[Certificate, Any]:
    """The certificate of a converged outcome, and the sensitivities it computed.

    Timings: ``sensitivity`` (the solution's exact sensitivities, which the
    uncertainty reuses) and ``certificate`` (the accurate integration and the
    propagation of its defects).
    """
    from .uncertainty import solution_sensitivity

    t0 = time.perf_counter()
    info = solution_sensitivity(setup, outcome.X, outcome.U, outcome.p)
    t1 = time.perf_counter()
    fitted = None
    rtol = None
    if prob.spec.name == "shooting":
        # shooting's own model is CVODES at its tolerances: held against tighter ones
        from .certificate import integrated_outputs

        o = prob.opts
        fitted = integrated_outputs(setup, outcome.X, outcome.p, o.rtol, o.atol, o.max_steps)
        rtol = min(1e-2 * o.rtol, 1e-10)
    cert = certify(setup, outcome.X, outcome.p, info,
                   from_weights=prob.weights_mode != "none", fitted=fitted,
                   **({} if rtol is None else {"rtol": rtol}))
    t2 = time.perf_counter()
    prob.timings["sensitivity"] = prob.timings.get("sensitivity", 0.0) + t1 - t0
    prob.timings["certificate"] = prob.timings.get("certificate", 0.0) + t2 - t1
    return cert, info


def _refined_setup(prob: _Problem, setup: Setup, marked: np.ndarray, *,
                   solved: _Solved | None = None, U: np.ndarray | None = None,
                   p0: np.ndarray | None = None) -> Setup:
    """A setup on the mesh with the marked intervals bisected.

    It starts from the solution ``solved`` (node values ``U``, settled) carried
    over to the new mesh, or, given ``p0``, from a new initial guess.
    """
    from .discretisation import Discretisation

    boundaries = refined_boundaries(setup.disc, marked)
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
    return new


def _within_limit(prob: _Problem, setup: Setup, marked: np.ndarray) -> bool:
    """Whether the refined mesh stays within the size limit
    (:func:`~picard_casadi.checks.check_problem_size`); a note if not."""
    from .checks import interval_limit

    wanted = setup.disc.n_intervals + int(np.count_nonzero(marked))
    limit = interval_limit(prob.model, prob.nodes, setup.disc.M, prob.max_intervals)
    if wanted <= limit:
        return True
    prob.notes.append(
        f"mesh refinement stopped: {wanted:,} intervals would exceed the limit of {limit:,} "
        "(pass max_intervals to estimate() to raise it)")
    return False


def _unresolved(setup: Setup, outcome: LoopOutcome) -> np.ndarray | None:
    """Intervals a failed run's mesh does not resolve at its last iterate, or None."""
    from .certificate import resolution_check

    sigma = 1.0 / np.sqrt(initial_weights(setup.disc))
    marked, _ = resolution_check(setup, outcome.X, outcome.U, outcome.p, sigma)
    return marked


def _weights(weights: Any, ny: int) -> tuple[str, np.ndarray]:
    """``estimate``'s ``weights`` as a mode (``"none"``, ``"auto"``, ``"given"``)
    and the starting weights per output."""
    if isinstance(weights, str) and weights != "auto":
        raise ValueError(f"`weights` must be None, 'auto' or {ny} numbers, got {weights!r}")
    mode = "none" if weights is None else "auto" if isinstance(weights, str) else "given"
    if mode != "given":
        return mode, np.ones(ny)
    w = as_vector(weights, ny, "weights")
    if np.any(w < 0) or not np.all(np.isfinite(w)) or not np.any(w > 0):
        raise ValueError("`weights` must be finite, non-negative and not all zero")
    return mode, w


@dataclass
class _Run:
    """The last solve of :func:`_solve_and_refine`, on its final mesh."""

    setup: Setup
    solved: _Solved
    certificate: Certificate | None
    info: Any
    records: list
    iterations: int
    refinements: int


def _solve_and_refine(prob: _Problem, setup: Setup, w: np.ndarray, p0: np.ndarray,
                      max_refinements: int) -> _Run:
    """Solve, certify, and refine the mesh where the certificate fails.

    A converged run is certified; where it fails, the marked intervals are
    bisected and the run continues from its solution on the new mesh.  A run
    that broke down (not an iteration limit) on a mesh that does not resolve
    the model at its last iterate is refined and restarted from ``p0``.
    Stops when the certificate holds, the budget ``max_refinements`` is
    spent, or the refined mesh would pass the size limit.
    """
    spec = prob.spec
    weights_mode = prob.weights_mode
    solved = _timed_solve(prob, setup, w)
    records, iterations = list(solved.records), solved.iterations
    cert, info, refinements = None, None, 0
    refinable = spec.name in _COLLOCATION_METHODS
    while True:
        outcome = solved.outcome
        if outcome.success:
            cert, info = _certificate(prob, setup, outcome)
            if (cert.passed or not refinable or refinements >= max_refinements
                    or not _within_limit(prob, setup, cert.marked())):
                break
            setup = _refined_setup(prob, setup, cert.marked(), solved=solved, U=info.U)
        else:
            # a breakdown (not an iteration or time limit) on a mesh that does not
            # resolve the model at the last iterate: refine it and start again
            if (not refinable or refinements >= max_refinements or not restarts_allowed()
                    or outcome.status in ITERATION_LIMITS + ("stopped",)):
                break
            marked = _unresolved(setup, outcome)
            if marked is None or not _within_limit(prob, setup, marked):
                break
            prob.notes.append(
                f"{spec.name} failed on a mesh of {setup.disc.n_intervals} intervals, which "
                f"did not resolve the model ({clipped(outcome.message, 100)}); the mesh was "
                "refined and the run started again from p0, and the result is that run's")
            setup = _refined_setup(prob, setup, marked, p0=p0)
        refinements += 1
        solved = _timed_solve(prob, setup, solved.weights if outcome.success else
                              (initial_weights(setup.disc) if weights_mode == "auto" else w),
                              continuing=outcome.success)
        records.extend(solved.records)
        iterations += solved.iterations
        cert, info = None, None
    return _Run(setup, solved, cert, info, records, iterations, refinements)


class _Arguments(NamedTuple):
    """``estimate``'s arguments, checked and in the forms the solve uses."""

    exps: list[Experiment]
    p0: np.ndarray
    p_lb: np.ndarray
    p_ub: np.ndarray
    x_lb: np.ndarray
    x_ub: np.ndarray
    n: int
    nodes: int
    max_refinements: int
    mesh_of_warm_start: Any
    T: float
    lam: float
    seed: Any
    uncertainty: bool
    raise_on_failure: bool
    spec: MethodSpec
    opts: Any
    weights_mode: str
    w: np.ndarray


def _check_determined(model: Model, exps: list[Experiment], p_lb: np.ndarray,
                      p_ub: np.ndarray, estimate_x0: Any) -> None:
    """ValueError where the data hold fewer measurements than there are
    quantities to estimate: no data can then determine them (SciPy's
    ``curve_fit`` refuses the same; without this the fit ran to its iteration
    limit and advised more iterations)."""
    measured = sum(int(np.isfinite(e.y).sum()) for e in exps)
    n_p, n_x0 = estimated_quantities(p_lb, p_ub, model.nx, len(exps), estimate_x0)
    if measured >= n_p + n_x0:
        return
    parts = [f"{n_p} parameter(s)"] + (
        [f"{n_x0} initial state(s), {model.nx} per experiment"] if n_x0 else [])
    fixes = ["add measurements", "fix parameters (equal lower and upper p_bounds)"]
    if n_x0:
        fixes.append("give the experiments' known x0 and pass estimate_x0=False")
    raise ValueError(
        f"`experiments`: {measured} measurement(s) for {n_p + n_x0} estimated quantities "
        f"({' and '.join(parts)}); the data cannot determine them: "
        + ", or ".join(fixes))


def _check_arguments(model: Any, experiments: Any, p0: Any, method: str, p_bounds: Any,
                     x0_bounds: Any, estimate_x0: Any, T: Any, n: Any, lam: Any, nodes: Any,
                     scheme: Any, weights: Any, refine: Any, codegen: Any, guess: Any,
                     warm_start: Any, uncertainty: Any, multistart: Any, seed: Any,
                     callback: Any, raise_on_failure: Any, max_intervals: Any,
                     options: dict[str, Any]) -> _Arguments:
    """Check every argument of :func:`estimate` where it enters (ValueError or
    TypeError naming it), before anything is built; the default ``T`` and the
    warm start's mesh are settled here, and the problem's size is checked."""
    if not isinstance(model, Model):
        raise TypeError(f"model must be a picard_casadi.Model, got {type(model).__name__}")
    exps = _as_experiments(model, experiments)
    p0 = as_vector(p0, model.np, "p0")
    if not np.all(np.isfinite(p0)):
        raise ValueError(f"`p0` must be finite, got {p0}")
    check_bounds_not_nan(p_bounds, "p_bounds")
    p_lb, p_ub = _bounds(p_bounds, model.np, "p_bounds")
    outside = (p0 < p_lb) | (p0 > p_ub)
    if np.any(outside):
        i = int(np.flatnonzero(outside)[0])
        raise ValueError(
            f"`p0`[{i}] = {p0[i]} ({model.p_names[i]}) is outside p_bounds "
            f"[{p_lb[i]}, {p_ub[i]}]; start inside the box"
        )
    check_bounds_not_nan(x0_bounds, "x0_bounds")
    x_lb, x_ub = _bounds(x0_bounds, model.nx, "x0_bounds")
    if model.x_domain is not None:
        x_lb = np.maximum(x_lb, model.x_domain[0])
        x_ub = np.minimum(x_ub, model.x_domain[1])
    domain = " (with model.x_domain)" if model.x_domain is not None else ""
    for e in exps:  # a given x0 (held, or the start of its estimate), checked as p0 is
        outside = (e.x0 < x_lb) | (e.x0 > x_ub) if e.x0 is not None else np.zeros(0, bool)
        if np.any(outside):
            i = int(np.flatnonzero(outside)[0])
            raise ValueError(
                f"Experiment {e.name!r}: its x0 starts state {model.x_names[i]!r} (index {i}) "
                f"at {e.x0[i]}, outside x0_bounds [{x_lb[i]}, {x_ub[i]}]{domain}; give an x0 "
                "inside the box, or widen x0_bounds")
    held = ~x0_mask(estimate_x0, model.nx)  # the initial states known, not estimated
    if np.any(held):
        for e in exps:
            if e.x0 is None:
                names = ", ".join(model.x_names[i] for i in np.flatnonzero(held))
                raise ValueError(
                    f"Experiment {e.name!r}: estimate_x0={estimate_x0!r} holds the initial "
                    f"value of {names} at the experiment's `x0`, which it does not have: "
                    "give Experiment(..., x0=[...]) (its other entries start the estimate)")
    _check_determined(model, exps, p_lb, p_ub, ~held)
    n = _check_positive_int(n, "n")
    check_choice(scheme, "scheme", tuple(DEFAULT_NODES))
    nodes = DEFAULT_NODES[scheme] if nodes is None else _check_positive_int(nodes, "nodes", 2)
    max_refinements = _refinement_budget(refine)
    mesh_of_warm_start = None
    if warm_start is not None:
        if not isinstance(warm_start, EstimationResult) or warm_start._X is None:
            raise ValueError(
                "`warm_start` must be an EstimationResult of a run on the same experiments; "
                "results loaded from JSON carry no node values"
            )
        disc_ws = warm_start._disc
        if np.size(warm_start.p) != model.np or disc_ws.model.nx != model.nx:
            raise ValueError(
                f"`warm_start` is a result of another model ({np.size(warm_start.p)} "
                f"parameters, {disc_ws.model.nx} states; this model has {model.np} and "
                f"{model.nx}); warm-start from a run of this model")
        if len(disc_ws.experiments) != len(exps) or any(
                a.n_samples != b.n_samples or a.t0 != b.t0 or a.t_end != b.t_end
                for a, b in zip(disc_ws.experiments, exps)):
            raise ValueError("`warm_start` must be a result of a run on the same experiments")
        if T is None and nodes == disc_ws.nodes and scheme == disc_ws.scheme:
            mesh_of_warm_start = disc_ws.boundaries
            T = disc_ws.T
    if T is None:
        T = default_T(model, exps, p0)
    T = as_positive_number(T, "T")
    lam = as_positive_number(lam, "lam")
    if multistart is not None:
        _check_positive_int(multistart, "multistart")
    seed, uncertainty = check_seed(seed), as_bool(uncertainty, "uncertainty")
    raise_on_failure = as_bool(raise_on_failure, "raise_on_failure")
    check_callback(callback)
    check_choice(guess, "guess", GUESSES)
    as_codegen(codegen)
    check_problem_size(model, exps, T, nodes, max_intervals)
    spec = get_method(method)
    opts_given = dict(options)
    if "lam" in {f.name for f in fields(spec.options)}:
        opts_given.setdefault("lam", float(lam))
    opts = method_options(spec, opts_given, "estimate", _ESTIMATE_ARGUMENTS)

    weights_mode, w = _weights(weights, model.ny)
    return _Arguments(exps, p0, p_lb, p_ub, x_lb, x_ub, n, nodes, max_refinements, mesh_of_warm_start, T, lam, seed, uncertainty, raise_on_failure, spec, opts, weights_mode, w)


# ---------------------------------------------------------------------- estimate
@interruptible_call  # Ctrl-C in any phase ends as KeyboardInterrupt (interrupts.py)
@with_solver_threads
def estimate(
    model: Model,
    experiments: Experiment | Sequence[Experiment],
    p0: Any,
    method: str | None = None,
    *,
    p_bounds: tuple[Any, Any] | None = None,
    x0_bounds: tuple[Any, Any] | None = None,
    estimate_x0: bool | Sequence[bool] = True,
    T: float | None = None,
    n: int = 2,
    lam: float = 10.0,
    nodes: int | None = None,
    scheme: str = "chebyshev",
    weights: Any = None,
    refine: bool | int = True,
    codegen: bool | str = "auto",
    x_scale: Any = None,
    p_scale: Any = None,
    guess: str = "auto",
    warm_start: EstimationResult | None = None,
    uncertainty: bool = True,
    multistart: int | None = None,
    seed: int | None = 0,
    executor: Any = None,
    n_jobs: int | None = None,
    callback: Callable[[IterationRecord], Any] | None = None,
    raise_on_failure: bool = False,
    max_intervals: int | None = None,
    **options: Any,
) -> EstimationResult:
    """Estimate parameters (and initial states) of an ODE model from data.

    Parameters
    ----------
    model : Model
    experiments : Experiment or sequence of Experiment
        They share ``p``; each has its own ``x0`` and inputs.
    p0 : array_like (np,)
        Starting parameter values.
    method : {"picard-gn", "picard", "ipopt", "shooting"}, optional
        ``"picard-gn"`` (default): the Picard iteration with Gauss-Newton
        steps on the exact fixed-point derivatives, continuity as linearised
        constraints.  Left unset, a ``picard-gn`` run whose step lost all
        precision on a model that is unstable along the trajectory (its
        own solution finite) is repeated with ``"ipopt"`` on the same
        discretisation, and one that reaches no certified answer otherwise
        (but a stop by the callback or by a ``max_iter`` you set) with
        ``"shooting"`` from ``p0``; the result says so
        (:mod:`picard_casadi.fallbacks`).  ``"picard"``: the paper's Algorithm 4 (projected
        gradient steps with line search and relaxed Picard updates).
        ``"ipopt"``: IPOPT on the collocation NLP of the same discretisation.
        ``"shooting"``: CVODES multiple shooting solved by IPOPT.
    p_bounds : (array_like, array_like), optional
        Box for ``p``; ``None`` entries or infinities are unbounded.  Equal
        bounds hold a parameter fixed.  A bound given as one number (not in
        a list) applies to every parameter.  ``p0`` must lie in the box.
    x0_bounds : (array_like, array_like), optional
        Box for every interval start ``x_j`` (the paper's ``X``), including
        each ``x0``; intersected with ``model.x_domain``.  An experiment's
        given ``x0`` must lie in it; one built from the data is clipped into it.
    estimate_x0 : bool or sequence of bool (nx,)
        False holds every experiment's ``x0`` at its given value; one entry
        per state holds the states marked False at each experiment's given
        ``x0`` and estimates the others (a fed-batch's known start volume).
    T : float, optional
        Length of the first mesh's intervals; default from the data's and
        the model's time scales (:func:`~picard_casadi.mesh.default_T`).
    n : int
        Order of the Picard composition ``P^n`` in the loss.
    lam : float
        Initial continuity penalty ``lambda``.
    nodes : int, optional
        Nodes per interval (default 9 Chebyshev, 21 trapezoid).
    scheme : {"chebyshev", "trapezoid"}
    weights : None, "auto" or array_like (ny,)
        Per-output weights of the data misfit.  ``None`` is the paper's
        unweighted sum of squares; ``"auto"`` uses inverse noise variances
        estimated from the residuals and re-estimated until they settle
        (maximum likelihood for Gaussian noise).
    refine : bool or int
        After a collocation method converges, check the estimate against an
        accurate integration of the model (the discretisation certificate,
        :mod:`picard_casadi.certificate`) and, where it fails, bisect the
        intervals with the largest defects and solve again, at most
        ``MAX_REFINEMENTS`` (5) times, or the given number of times.  A
        result whose certificate still fails has ``success=False``.
        ``False`` keeps the first mesh: the certificate is still reported,
        and a failing one is a warning.
    codegen : bool or "auto"
        Generate and compile C for the iteration's functions (``True``), use
        CasADi's virtual machine (``False``), or generate when a C compiler
        is found (``"auto"``).
    x_scale, p_scale : array_like, optional
        Nominal magnitudes of states and parameters (default from the data,
        the start and ``p0``).
    guess : {"auto", "simulation", "anchored", "shooting"}
        How the states start (see :mod:`picard_casadi.guess`): measured
        states from the data and the others from a simulation with ``p0``
        (``"simulation"``), or propagated interval by interval from the data
        (``"anchored"``), or every state from the simulation (a continuous
        start).  ``"auto"`` (default): ``"simulation"``, and where that run
        of ``picard-gn`` ends at ``max_iter`` with its continuity gaps still
        open (the trajectory never joined up), a second run from
        ``"anchored"``, returned if it converges (a note says so; the
        callback sees both runs).
    warm_start : EstimationResult, optional
        Start from this result's solution (interval starts, node values,
        ``p``) instead of ``p0`` and the guess; it must come from a run on the
        same experiments.  Without ``T`` the run starts on that result's
        final mesh; otherwise its solution is carried onto the new one.  The
        method's options are the caller's (a warm start may be the answer
        of another loss: from the weighted answer, the unweighted F/A-18
        loss needs ``mu0``'s damping).
    uncertainty : bool
        Compute standard errors and confidence intervals of the estimate.
    multistart : int, optional
        Run from this many starts (``p0`` and Latin-hypercube samples of
        ``p_bounds``, uniform in ``log |p|`` where a range of one sign spans
        two decades or more) and return the best; all are kept in
        ``result.starts``.
    seed : int, optional
        Seed of the multistart sampling.
    executor : concurrent.futures.Executor, optional
        Run the multistart starts on it (a process pool, a Dask client's
        ``get_executor()``); same seed, same result as serial
        (:mod:`picard_casadi.parallel`: what must pickle).
    n_jobs : int, optional
        The multistart starts on a local pool of this many processes
        (``-1``: one per core).
    callback : callable, optional
        Called with an :class:`~picard_casadi.methods.base.IterationRecord`
        after each iteration of every method; returning True stops (status
        ``"stopped"``).  For ``"ipopt"`` and ``"shooting"`` once per IPOPT
        iteration, from iteration 0 (the start): the objective, the largest
        scaled constraint violation as ``gap``, and ``p``; the fields IPOPT
        does not expose (``grad_norm``, ``misfit``, ...) are NaN.
    raise_on_failure : bool
        Raise :class:`~picard_casadi.ConvergenceError` instead of returning a
        result with ``success=False``.
    max_intervals : int, optional
        The most Picard intervals accepted (the resource guard,
        :func:`~picard_casadi.checks.check_problem_size`): by default 100,000,
        or fewer where their estimated memory would exceed 4 GB.  A larger
        problem is refused with a ValueError before anything is built.
    **options
        Method options (``max_iter``, ``sigma``, ``gap_tol``, ...; IPOPT
        options as ``ipopt_options={...}``).  Unknown names are an error
        listing the valid ones.

    Returns
    -------
    EstimationResult

    Raises
    ------
    ValueError, TypeError
        On bad input, naming the argument.
    ConvergenceError
        When ``raise_on_failure`` and the run did not converge.
    """
    t_start = time.perf_counter()
    method_chosen = method is not None
    method = DEFAULT_METHOD if method is None else method
    (exps, p0, p_lb, p_ub, x_lb, x_ub, n, nodes, max_refinements, mesh_of_warm_start, T, lam,
     seed, uncertainty, raise_on_failure, spec, opts, weights_mode, w) = _check_arguments(
        model, experiments, p0, method, p_bounds, x0_bounds, estimate_x0, T, n, lam, nodes,
        scheme, weights, refine, codegen, guess, warm_start, uncertainty, multistart, seed,
        callback, raise_on_failure, max_intervals, options)

    if multistart is not None and multistart > 1:
        from .multistart import run_multistart

        return run_multistart(
            estimate, model, exps, p0, method, multistart, seed,
            dict(p_bounds=(p_lb, p_ub), x0_bounds=x0_bounds, estimate_x0=estimate_x0,
                 T=T, n=n, lam=lam, nodes=nodes, scheme=scheme, weights=weights,
                 refine=refine, codegen=codegen, x_scale=x_scale, p_scale=p_scale,
                 guess=guess, uncertainty=uncertainty, callback=callback,
                 raise_on_failure=raise_on_failure, max_intervals=max_intervals, **options),
            executor=executor, n_jobs=n_jobs,
        )

    prob = _Problem(model=model, experiments=exps, spec=spec, opts=opts, T=float(T), n=n,
                    lam=float(lam), nodes=nodes, scheme=scheme, p_bounds=(p_lb, p_ub),
                    x_bounds=(x_lb, x_ub), estimate_x0=x0_mask(estimate_x0, model.nx),
                    weights_mode=weights_mode, codegen=codegen,
                    guess="simulation" if guess == "auto" else guess,
                    callback=callback, max_intervals=max_intervals)
    start = None
    if warm_start is not None:
        from .discretisation import Discretisation

        mesh = Discretisation(model, exps, prob.T, nodes, scheme, mesh_of_warm_start)
        start = transfer_solution(warm_start._disc, warm_start._X, warm_start._U, mesh)
        p0 = np.clip(np.asarray(warm_start.p, float), p_lb, p_ub)
    setup = prob.setup(p0, w, x_scale=x_scale, p_scale=p_scale,
                       boundaries=mesh_of_warm_start, start=start)
    if weights_mode == "auto":
        w = initial_weights(setup.disc)
        setup.tr.set_weights(w)
    # the outputs and end states of the start (what the residuals are made of),
    # from a function every method compiles anyway
    _, Ys0, xend0 = setup.tr.trajectory(setup.X0, setup.U0, setup.p0)
    if not (np.all(np.isfinite(Ys0)) and np.all(np.isfinite(xend0))):
        raise ValueError(
            "the objective is not finite at the starting point: the model cannot be "
            "evaluated at p0 and the initial guess of the states (check p0, the "
            "experiments' x0 and x0_bounds)" + _unfinite_start(model, exps, p0))
    initial_intervals = setup.disc.n_intervals

    run = _solve_and_refine(prob, setup, w, p0, max_refinements)
    setup, solved, cert, info = run.setup, run.solved, run.certificate, run.info
    records, iterations, refinements = run.records, run.iterations, run.refinements

    outcome = solved.outcome
    mesh = setup.disc.mesh_summary()
    result, fitted = _assemble(prob, setup, outcome, solved.weights, records, iterations, dict(
        T=prob.T, n=n, lam=float(lam), nodes=nodes, scheme=scheme, weights=weights_mode,
        weight_rounds=solved.weight_rounds,
        estimate_x0=x0_setting(prob.estimate_x0),
        intervals=mesh["intervals"], shortest_interval=mesh["shortest"],
        longest_interval=mesh["longest"], initial_intervals=initial_intervals,
        refinements=refinements, refine=max_refinements, codegen=str(codegen),
        options=asdict(opts), p_bounds=[p_lb.tolist(), p_ub.tolist()],
        x0_bounds=[x_lb.tolist(), x_ub.tolist()],
    ))
    if cert is not None:
        _judge(result, cert, refinements, max_refinements, spec.name,
               _kinked_inputs(prob.model, prob.experiments),
               _jumping_inputs(prob.model, prob.experiments) if not cert.passed else ())
    # where every state is an output, both starts take every state from the data
    every_state_measured = set(model.output_state_index) >= set(range(model.nx))
    if result.success:
        check_fit(result, prob.experiments, fitted)
    elif result.status in ITERATION_LIMITS:
        diagnose_open_gaps(result, prob.model, prob.experiments)
        result.message = _applicable_advice(
            result.message, weights_mode, model.ny,
            # where every state is an output, "anchored" starts as the default does
            "anchored" if every_state_measured else guess)
    unstable = (not result.success
                and diagnose_stuck_step(result, prob.model, prob.experiments))
    if uncertainty and outcome.success and info is not None:
        t_unc = time.perf_counter()
        from .uncertainty import attach_uncertainty

        if spec.name == "shooting":  # its own model's derivatives, not the mesh's
            from .interrupts import is_interrupt
            from .methods.shooting import shooting_sensitivity

            try:
                info = shooting_sensitivity(setup, prob.opts, outcome.X, outcome.p)
            except RuntimeError as err:  # CVODES failed at the estimate
                if is_interrupt(err):
                    raise KeyboardInterrupt from None
                result.warnings.append(
                    "shooting: standard errors from the collocation mesh (its CVODES "
                    f"sensitivities failed at the estimate: {str(err).splitlines()[-1][:200]})")
        attach_uncertainty(result, setup, info)
        prob.timings["uncertainty"] = time.perf_counter() - t_unc
    if result.success:
        note_bounds_reached(result, p_lb, p_ub)
    _note_staircase_inputs(result, model, prob.experiments)
    result.wall_time = time.perf_counter() - t_start

    def rerun(run_method: str, run_guess: str, max_iter: int | None) -> EstimationResult:
        """This call again with another method or start (a failure, not raised),
        stopped after ``max_iter`` iterations unless the user set a limit."""
        run_options = dict(options if run_method == method
                           else _options_of(get_method(run_method), options))
        if max_iter is not None:
            run_options.setdefault("max_iter", max_iter)
        return estimate(model, experiments, p0, run_method, p_bounds=p_bounds,
                        x0_bounds=x0_bounds, estimate_x0=estimate_x0, T=T, n=n, lam=lam,
                        nodes=nodes, scheme=scheme, weights=weights, refine=refine,
                        codegen=codegen, x_scale=x_scale, p_scale=p_scale, guess=run_guess,
                        uncertainty=uncertainty, seed=seed, callback=callback,
                        raise_on_failure=False, max_intervals=max_intervals, **run_options)

    result = second_runs(result, DefaultPath(
        method=spec.name, method_chosen=method_chosen, guess=guess,
        warm_start=warm_start is not None, every_state_measured=every_state_measured,
        unstable=unstable, max_iter_given="max_iter" in options), rerun, t_start)
    for note in result.warnings:
        if "information matrix" in note:
            warn_user(note)
    if raise_on_failure and not result.success:
        raise ConvergenceError(f"{spec.name} did not converge: {result.message}", result)
    return result


def _unfinite_start(model: Model, experiments: Sequence[Experiment], p0: np.ndarray) -> str:
    """Where ``f`` is not finite at an experiment's start with its guessed
    ``x0``: which states were guessed 0 for want of a measurement (a fed-batch
    volume dividing the feed, ``F / V``), and the fix."""
    for e in experiments:
        x0 = e.x0_guess(model)
        u0 = e.inputs([e.t0], model.nu)[0]
        with np.errstate(all="ignore"):
            value = np.asarray(model.f(e.t0, x0, p0, u0), float)
        if np.all(np.isfinite(value)) or e.x0 is not None:
            continue
        measured = {i for i in model.output_state_index if i is not None}
        zero = [model.x_names[i] for i in range(model.nx) if i not in measured]
        first_nan = [model.x_names[i] for k, i in enumerate(model.output_state_index)
                     if i is not None and not np.isfinite(e.y[0, k])]
        guessed = (f"{', '.join(zero)} not measured, so guessed 0" if zero else "")
        if first_nan:
            guessed += ("; " if guessed else "") + (
                f"{', '.join(first_nan)} taken from a later sample (the first is missing)")
        return (f"; f is not finite at the start of experiment {e.name!r} (t = {e.t0:g}) "
                f"with x0 guessed {np.array2string(x0, precision=4)} ({guessed}): give a "
                f"guess, Experiment(..., x0=[...]) (estimated from there unless "
                "estimate_x0=False)")
    return ""


def _applicable_advice(message: str, weights_mode: str, ny: int, guess: str) -> str:
    """``message`` without the advice this run has taken already: per-output
    weights where ``weights="auto"`` was used or there is one output, the
    start it was given (a user with weights="auto" was told to use it)."""
    if weights_mode == "auto" or ny == 1:
        message = message.replace(WEIGHTS_ADVICE, "")
    tried = {"anchored": ANCHORED_ADVICE, "shooting": SHOOTING_ADVICE}.get(guess)
    if tried is not None:
        other = SHOOTING_ADVICE if tried == ANCHORED_ADVICE else ANCHORED_ADVICE
        message = message.replace(f"try {ANCHORED_ADVICE} or {SHOOTING_ADVICE}",
                                  f"try {other}")
    return message


def _options_of(spec: MethodSpec, options: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``options`` that method ``spec`` takes (a fallback to
    another method keeps the options they share, such as ``max_iter``)."""
    valid = {f.name for f in fields(spec.options)}
    return {k: v for k, v in options.items() if k in valid}


#: estimate's own argument names (not method options), for the unknown-name message
_ESTIMATE_ARGUMENTS = tuple(name for name, prm in inspect.signature(estimate).parameters.items()
                            if prm.kind is not prm.VAR_KEYWORD)


def _note_staircase_inputs(result: EstimationResult, model: Model,
                           experiments: Sequence[Experiment]) -> None:
    """A note (and a warning) where sampled inputs that look like a staircase
    are read linearly, by default: a user's CSTR coolant staircase, read as
    a ramp across each jump, gave estimates 2 to 3 standard errors off, every
    95 % interval missing the truth, with no visible misfit."""
    for e in experiments:
        columns = e.staircase_inputs()
        if not columns:
            continue
        names = ", ".join(repr(model.u_names[k]) for k in columns)
        note = (f"input(s) {names} of experiment {e.name!r} look piecewise constant (most "
                "samples repeat the one before) but are read linearly between samples, the "
                "default: a ramp across each jump biases the estimates without a visible "
                "misfit; if they are a staircase, pass Experiment(..., "
                "u_interpolation='previous', breakpoints=t), or u_interpolation='linear' "
                "to keep this reading without the note")
        result.warnings.append(note)
        warn_user(note)


def _kinked_inputs(model: Model, experiments: Sequence[Experiment]) -> list[str]:
    """Experiments whose sampled inputs kink inside the intervals
    (:meth:`Experiment.kinks_between_breakpoints`)."""
    if model.nu == 0:
        return []
    return [e.name for e in experiments if e.kinks_between_breakpoints()]


def _jumping_inputs(model: Model, experiments: Sequence[Experiment]) -> list[str]:
    """``"'name' (t ~ a, b, ...)"`` per experiment whose callable input jumps
    away from the breakpoints (:meth:`Experiment.input_jumps`)."""
    out = []
    for e in experiments:
        times = e.input_jumps(model.nu)
        if times:
            shown = ", ".join(f"{t:.4g}" for t in times[:5]) + (", ..." if len(times) > 5 else "")
            out.append(f"{e.name!r} (t ~ {shown})")
    return out


def _judge(result: EstimationResult, cert: Certificate, refinements: int,
           budget: int, method: str, kinked: Sequence[str] = (),
           jumps: Sequence[str] = ()) -> None:
    """Attach the certificate and let it decide what ``success`` means
    (``kinked``: experiments from :func:`_kinked_inputs`, ``jumps`` from
    :func:`_jumping_inputs`, named in the advice)."""
    result.certificate = cert.to_dict()
    result.discretisation_error = float(cert.discretisation_error)
    if cert.passed:
        # the numbers of the ODE's own solution at the estimate, not of the mesh's
        N = result.n_samples
        result.ssr, result.weighted_ssr = cert.ssr_model, cert.weighted_ssr_model
        result.objective = 0.5 * result.ssr / N
        result.weighted_objective = 0.5 * result.weighted_ssr / N
        return
    if method not in _COLLOCATION_METHODS:
        note = (f"shooting: its integration is not accurate enough for this data "
                f"({cert.message}); tighten rtol and atol")
        result.warnings.append(note)
        warn_user(note, DiscretisationWarning)
        return
    if budget == 0:
        note = (f"the estimate is of the discretisation, not certified as the ODE's "
                f"({cert.message}); refine=True refines the mesh until it is, or pass a "
                f"smaller T or more nodes")
        result.warnings.append(note)
        warn_user(note, DiscretisationWarning)
        return
    result.success = False
    result.status = "not_certified"
    kinks = ""
    if kinked:
        # a user's forced Duffing: never certified after 5 refinements (285
        # intervals); with breakpoints at the input's samples, 206 intervals
        kinks = (f"the inputs of experiment(s) {', '.join(map(repr, kinked))} are samples "
                 "interpolated linearly, which kink at every sample inside the intervals: "
                 "give their sample times as breakpoints (Experiment(..., breakpoints=t)) "
                 "so that intervals start there; or ")
    if jumps:
        kinks += (f"the inputs of experiment(s) {'; '.join(jumps)} jump inside the "
                  "intervals: give those times as breakpoints (Experiment(..., "
                  "breakpoints=[...])) so that intervals start there; or ")
    result.message = (
        f"the estimate is not certified as the ODE's after {refinements} mesh "
        f"refinement(s) ({result.settings['intervals']} intervals): {cert.message}; "
        f"{kinks}pass a smaller T, more nodes, or refine=<more rounds>"
    )


def _history_dict(records: list[IterationRecord]) -> dict[str, list[float]]:
    if not records:
        return {}
    names = [f.name for f in fields(IterationRecord)]
    return {k: [getattr(r, k) for r in records] for k in names}


def _assemble(prob: _Problem, setup: Setup, outcome: LoopOutcome, w: np.ndarray,
              records: list[IterationRecord], iterations: int,
              settings: dict[str, Any]) -> tuple[EstimationResult, list[np.ndarray]]:
    """The result of a run, and its fitted outputs per experiment (sample order)."""
    disc, tr = setup.disc, setup.tr
    model = prob.model
    X, U, p = outcome.X, outcome.U, outcome.p
    if outcome.trajectory is not None:  # shooting: its own model's, from CVODES
        Ys, xend = outcome.trajectory
    else:
        _, Ys, xend = tr.trajectory(X, U, p)
    with np.errstate(all="ignore"):  # a diverged run: non-finite is reported, not warned
        res2 = disc.mask * (disc.y - Ys) ** 2
        ssr = float(res2.sum())
        weighted_ssr = float(np.sum(res2 * w[None, :, None]))
        hn = disc.has_next
        gap = float(np.abs(xend[hn] - X[1:][hn[:-1]]).max(initial=0.0)) if np.any(hn) else 0.0
    if outcome.trajectory is not None:
        fp = 0.0  # no fixed point in the method
    else:
        PU = tr.picard(X, U, p)
        fp = float(np.max(np.abs(PU - U) / setup.x_scale[None, :, None]))
    x0 = [X[sl.start].copy() for sl in disc.intervals_of]
    N = disc.n_samples_total
    notes = list(dict.fromkeys([*prob.notes, *outcome.notes,
                                # every function that fell back to the virtual
                                # machine, also during the setup and the guess
                                *getattr(tr.functions, "notes", [])]))
    if outcome.success:
        # how the start was made matters where the run failed from it; a converged
        # run left it behind ("did not settle on 1 of 20 intervals" on an exact fit)
        notes = [note for note in notes if not note.startswith(GUESS_NOTE)]
    result = EstimationResult(
        p=np.asarray(p, float).copy(), x0=x0, success=bool(outcome.success),
        status=outcome.status, message=outcome.message, iterations=int(iterations),
        objective=0.5 * ssr / N, weighted_objective=0.5 * weighted_ssr / N,
        ssr=ssr, weighted_ssr=weighted_ssr, n_samples=N, n_measurements=disc.n_measurements,
        continuity_gap=gap, fixed_point_residual=fp, wall_time=0.0, timings=prob.timings,
        history=_history_dict(records), method=prob.spec.name, settings=settings,
        weights=np.asarray(w, float).copy(), p_names=list(model.p_names),
        x_names=list(model.x_names), y_names=list(model.y_names),
        experiment_names=[e.name for e in prob.experiments],
        warnings=notes,
    )
    result._predictor = simulation_predictor(model, prob.experiments, disc, X, U)
    result._X, result._U, result._disc = X.copy(), U.copy(), disc
    return result, fitted_outputs(disc, Ys)
