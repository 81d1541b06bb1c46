"""``estimate``: one entry point for every method.

The driver validates the user's input once, builds the shared
:class:`~picard_casadi.methods.base.Setup` (discretisation, transcription,
bounds, scales, starting point), runs the chosen method (re-running it when
``weights="auto"`` re-estimates the noise levels), and assembles an
:class:`~picard_casadi.result.EstimationResult`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, fields, replace
from typing import Any

import numpy as np

from .checks import (as_bool, as_codegen, as_int, as_positive_number, check_bounds_not_nan,
                     check_callback, check_choice, check_problem_size, check_seed)
from .discretisation import Discretisation
from .errors import ConvergenceError
from .experiment import Experiment
from .guess import GUESSES, initial_guess, measured_state_series
from .interrupts import interruptible_call
from .methods import get_method, method_options
from .methods.base import IterationRecord, LoopOutcome, Setup
from .model import Model
from .predict import simulation_predictor
from .result import EstimationResult
from .transcription import Transcription, build_interval_functions

__all__ = ["estimate", "build_setup", "default_T"]

DEFAULT_NODES = {"chebyshev": 9, "trapezoid": 21}
_AUTO_WEIGHT_ROUNDS = 6


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


def _vector(value: Any, n: int, field: str) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float).ravel()
    except (TypeError, ValueError):
        raise ValueError(f"`{field}` must be {n} numbers") from None
    if arr.size == 1 and n > 1:
        arr = np.full(n, arr[0])
    if arr.size != n:
        raise ValueError(f"`{field}` must have {n} entries, got {arr.size}")
    return arr


def _bounds(value: Any, n: int, field: str) -> tuple[np.ndarray, np.ndarray]:
    if value is None:
        return np.full(n, -np.inf), np.full(n, np.inf)
    try:
        lb, ub = value
    except (TypeError, ValueError):
        raise ValueError(f"`{field}` must be a pair (lower, upper) or None") from None
    lb = np.full(n, -np.inf) if lb is None else _vector(lb, n, f"{field}[0]")
    ub = np.full(n, np.inf) if ub is None else _vector(ub, n, f"{field}[1]")
    lb = np.where(np.isnan(lb), -np.inf, lb)
    ub = np.where(np.isnan(ub), np.inf, ub)
    if np.any(lb > ub):
        i = int(np.flatnonzero(lb > ub)[0])
        raise ValueError(f"`{field}`: lower bound {lb[i]} exceeds upper bound {ub[i]} at index {i}")
    return lb, ub


def _check_positive_int(value: Any, field: str, minimum: int = 1) -> int:
    return as_int(value, field, minimum)


def default_T(model: Model, experiments: list[Experiment], p0: np.ndarray) -> float:
    """An interval length from the Lipschitz constant of ``f`` (longer paper: T = 1/Kx).

    ``Kx`` is estimated as the largest spectral norm of ``df/dx`` at the
    measured and guessed initial states with ``p0``; ``T = 0.5 / Kx``, kept
    between 1/500 of the shortest horizon and the whole horizon.
    """
    import casadi as ca

    jac = ca.Function("dfdx", [model.t, model.x, model.p, model.u],
                      [ca.jacobian(model.rhs, model.x)])
    kx = 1e-12
    for e in experiments:
        x0 = e.x0_guess(model)
        u0 = e.inputs([e.t0], model.nu)[0]
        with np.errstate(all="ignore"):
            A = np.asarray(jac(e.t0, x0, p0, u0))
        if np.all(np.isfinite(A)):
            kx = max(kx, float(np.linalg.norm(A, 2)))
    horizon = min(e.t_end - e.t0 for e in experiments)
    return float(np.clip(0.5 / kx, horizon / 500.0, horizon))


def _initial_weights(disc: Discretisation) -> np.ndarray:
    """Inverse noise variance per output from second differences of the data."""
    ny = disc.model.ny
    var = np.zeros(ny)
    for k in range(ny):
        diffs = []
        for e in disc.experiments:
            col = e.y[:, k]
            ok = np.isfinite(col)
            v = col[ok]
            if v.size >= 3:
                diffs.append(v[2:] - 2 * v[1:-1] + v[:-2])
        d = np.concatenate(diffs) if diffs else np.zeros(0)
        var[k] = float(np.mean(d * d) / 6.0) if d.size else np.nan
    return _weights_from_variance(var, disc)


# Tolerances of the intermediate rounds of weights="auto" (any method's options
# that have these fields): loose enough to stop a Gauss-Newton iteration a few
# iterations early, tight enough that the residual variances are exact to ~1e-8.
_ROUND_TOLERANCES = {"gtol": 1e-5, "ftol": 1e-7, "tol": 1e-5}


def _loosened(opts: Any) -> Any:
    """A copy of a method's options with the round tolerances, or ``opts`` itself."""
    names = {f.name for f in fields(opts)}
    changes = {k: max(getattr(opts, k), v) for k, v in _ROUND_TOLERANCES.items() if k in names}
    if not changes or all(getattr(opts, k) == v for k, v in changes.items()):
        return opts
    return replace(opts, **changes)


def _weights_from_variance(var: np.ndarray, disc: Discretisation) -> np.ndarray:
    meas = disc.measured_values()
    out = np.zeros_like(var)
    for k in range(var.size):
        typical = float(np.sqrt(np.mean(meas[k] ** 2))) if meas[k].size else 1.0
        floor = (1e-6 * max(typical, 1e-12)) ** 2
        v = var[k] if np.isfinite(var[k]) else max(typical, 1e-12) ** 2
        out[k] = 1.0 / max(v, floor)
    return out


# ---------------------------------------------------------------------- setup
def build_setup(
    model: Model,
    experiments: list[Experiment],
    p0: np.ndarray,
    *,
    T: float,
    n: int,
    nodes: int,
    scheme: str,
    weights: np.ndarray,
    p_bounds: tuple[np.ndarray, np.ndarray],
    x_bounds: tuple[np.ndarray, np.ndarray],
    estimate_x0: bool,
    x_scale: np.ndarray | None = None,
    p_scale: np.ndarray | None = None,
    codegen: bool | str = "auto",
    timings: dict[str, float] | None = None,
    notes: list[str] | None = None,
    guess: str = "simulation",
) -> Setup:
    """Discretise, build the functions, and choose scales and the start.

    Returns
    -------
    Setup
    """
    timings = {} if timings is None else timings
    notes = [] if notes is None else notes
    t0 = time.perf_counter()
    disc = Discretisation(model, experiments, float(T), nodes, scheme)
    fns = build_interval_functions(disc, n)
    timings["build"] = timings.get("build", 0.0) + time.perf_counter() - t0

    t1 = time.perf_counter()
    x_lb, x_ub = x_bounds
    x0s = [e.x0_guess(model) for e in experiments]
    X0, U0, guess_notes = initial_guess(disc, fns, p0, x0s, estimate_x0, x_lb, x_ub,
                                        strategy=guess)
    notes.extend(guess_notes)
    if x_scale is None:
        x_scale = model.x_nominal
    if x_scale is None:
        mags = np.maximum(np.abs(U0).max(axis=(0, 2)), np.abs(X0).max(axis=0))
        for e in range(len(experiments)):
            for i, (_, vals) in measured_state_series(disc, e).items():
                mags[i] = max(mags[i], float(np.abs(vals).max()))
        top = float(mags.max()) if mags.size else 1.0
        x_scale = np.where(mags > 1e-9 * max(top, 1e-300), mags, 1.0)
    x_scale = _vector(x_scale, model.nx, "x_scale")
    if np.any(x_scale <= 0) or not np.all(np.isfinite(x_scale)):
        raise ValueError("`x_scale` must be positive and finite")
    timings["guess"] = timings.get("guess", 0.0) + time.perf_counter() - t1

    t2 = time.perf_counter()
    from .codegen import backend_for

    backend, codegen_note = backend_for(codegen)
    if codegen_note:
        notes.append(codegen_note)
    tr = Transcription(disc, n, weights, x_scale, backend=backend, interval_functions=fns)
    timings["build"] += time.perf_counter() - t2
    p_lb, p_ub = p_bounds
    if p_scale is None:
        width = np.where(np.isfinite(p_ub - p_lb), 0.5 * (p_ub - p_lb), np.nan)
        p_scale = np.where(np.abs(p0) > 0, np.abs(p0), np.where(np.isfinite(width) & (width > 0), width, 1.0))
    p_scale = _vector(p_scale, model.np, "p_scale")
    if np.any(p_scale <= 0) or not np.all(np.isfinite(p_scale)):
        raise ValueError("`p_scale` must be positive and finite")
    J = disc.n_intervals
    free_x = np.ones((J, model.nx), dtype=bool)
    if not estimate_x0:
        free_x[disc.is_first] = False
    free_p = p_lb < p_ub
    return Setup(disc=disc, tr=tr, p_lb=p_lb, p_ub=p_ub, x_lb=x_lb, x_ub=x_ub,
                 p_scale=p_scale, x_scale=x_scale, free_p=free_p, free_x=free_x,
                 X0=X0, U0=U0, p0=p0.copy(), timings=timings, compiled=backend is not None)


def _residual_variance(setup: Setup, X: np.ndarray, U: np.ndarray, p: np.ndarray) -> np.ndarray:
    disc = setup.disc
    _, Ys, _ = setup.tr.trajectory(X, U, p)
    with np.errstate(all="ignore"):  # a diverged run: non-finite is reported, not warned
        res2 = disc.mask * (disc.y - Ys) ** 2
    count = disc.mask.sum(axis=(0, 2))
    dof = np.maximum(count - (setup.free_p.sum() + 0.0) / max(disc.model.ny, 1), 1.0)
    return np.where(count > 0, res2.sum(axis=(0, 2)) / dof, np.nan)


def _history_dict(records: list[IterationRecord]) -> dict[str, list[float]]:
    if not records:
        return {}
    names = [f.name for f in fields(IterationRecord)]
    return {k: [getattr(r, k) for r in records] for k in names}


# ---------------------------------------------------------------------- estimate
@interruptible_call  # Ctrl-C in any phase ends as KeyboardInterrupt (interrupts.py)
def estimate(
    model: Model,
    experiments: Experiment | Sequence[Experiment],
    p0: Any,
    method: str = "picard",
    *,
    p_bounds: tuple[Any, Any] | None = None,
    x0_bounds: tuple[Any, Any] | None = None,
    estimate_x0: bool = True,
    T: float | None = None,
    n: int = 2,
    lam: float = 10.0,
    nodes: int | None = None,
    scheme: str = "chebyshev",
    weights: Any = None,
    codegen: bool | str = "auto",
    x_scale: Any = None,
    p_scale: Any = None,
    guess: str = "simulation",
    warm_start: EstimationResult | None = None,
    uncertainty: bool = True,
    multistart: int | None = None,
    seed: int | None = 0,
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
    method : {"picard", "picard-gn", "ipopt", "shooting"}
        ``"picard"``: the paper's Algorithm 4 (projected gradient steps with
        line search and relaxed Picard updates).  ``"picard-gn"``: the same
        iteration with structured Levenberg-Marquardt steps.  ``"ipopt"``:
        IPOPT on the collocation NLP of the same discretisation.
        ``"shooting"``: CVODES multiple shooting solved by IPOPT.
    p_bounds : (array_like, array_like), optional
        Box for ``p``; ``None`` entries or infinities are unbounded.  Equal
        bounds hold a parameter fixed.
    x0_bounds : (array_like, array_like), optional
        Box for every interval start ``x_j`` (the paper's ``X``), including
        each ``x0``; intersected with ``model.x_domain``.
    estimate_x0 : bool
        False holds every experiment's ``x0`` at its given value.
    T : float, optional
        Picard interval length; default from the Lipschitz constant of ``f``
        (see :func:`default_T`).
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
    codegen : bool or "auto"
        Generate and compile C for the iteration's functions (``True``), use
        CasADi's virtual machine (``False``), or generate when a C compiler
        is found (``"auto"``).
    x_scale, p_scale : array_like, optional
        Nominal magnitudes of states and parameters (default from the data,
        the start and ``p0``).
    guess : {"simulation", "anchored", "shooting"}
        How the states start (see :mod:`picard_casadi.guess`): measured
        states from the data and the others from a simulation with ``p0``
        (default), or propagated interval by interval from the data, or every
        state from the simulation (a continuous start).
    warm_start : EstimationResult, optional
        Start from this result's interval starts, node values and ``p``
        (instead of ``p0`` and the guess); it must come from a run with the
        same experiments and discretisation.  For example, to check one
        method's solution with another.
    uncertainty : bool
        Compute standard errors and confidence intervals of the estimate.
    multistart : int, optional
        Run from this many starts (``p0`` and Latin-hypercube samples of
        ``p_bounds``) and return the best; all are kept in ``result.starts``.
    seed : int, optional
        Seed of the multistart sampling.
    callback : callable, optional
        Called with an :class:`~picard_casadi.methods.base.IterationRecord`
        after each iteration of the Picard methods; returning True stops.
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
    if not isinstance(model, Model):
        raise TypeError(f"model must be a picard_casadi.Model, got {type(model).__name__}")
    exps = _as_experiments(model, experiments)
    p0 = _vector(p0, model.np, "p0")
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
    if not isinstance(estimate_x0, (bool, np.bool_)):
        raise TypeError(f"`estimate_x0` must be True or False, got {estimate_x0!r}")
    if not estimate_x0:
        for e in exps:
            if e.x0 is None:
                raise ValueError(
                    f"Experiment {e.name!r}: estimate_x0=False needs the known `x0`"
                )
    n = _check_positive_int(n, "n")
    check_choice(scheme, "scheme", tuple(DEFAULT_NODES))
    nodes = DEFAULT_NODES[scheme] if nodes is None else _check_positive_int(nodes, "nodes", 2)
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
    opts = method_options(spec, opts_given)

    auto_weights = isinstance(weights, str)
    if auto_weights and weights != "auto":
        raise ValueError(f"`weights` must be None, 'auto' or {model.ny} numbers, got {weights!r}")
    if weights is None:
        w = np.ones(model.ny)
    elif auto_weights:
        w = None
    else:
        w = _vector(weights, model.ny, "weights")
        if np.any(w < 0) or not np.all(np.isfinite(w)) or not np.any(w > 0):
            raise ValueError("`weights` must be finite, non-negative and not all zero")

    if multistart is not None and multistart > 1:
        from .multistart import run_multistart

        return run_multistart(
            estimate, model, exps, p0, method, multistart, seed,
            dict(p_bounds=(p_lb, p_ub), x0_bounds=x0_bounds, estimate_x0=estimate_x0,
                 T=T, n=n, lam=lam, nodes=nodes, scheme=scheme, weights=weights,
                 codegen=codegen, x_scale=x_scale, p_scale=p_scale, guess=guess,
                 uncertainty=uncertainty, callback=callback,
                 raise_on_failure=raise_on_failure, max_intervals=max_intervals, **options),
        )

    timings: dict[str, float] = {}
    notes: list[str] = []
    setup = build_setup(
        model, exps, p0, T=float(T), n=n, nodes=nodes, scheme=scheme,
        weights=np.ones(model.ny) if w is None else w, p_bounds=(p_lb, p_ub),
        x_bounds=(x_lb, x_ub), estimate_x0=bool(estimate_x0), x_scale=x_scale,
        p_scale=p_scale, codegen=codegen, timings=timings, notes=notes,
        guess=guess,
    )
    if w is None:
        w = _initial_weights(setup.disc)
        setup.tr.set_weights(w)
    if warm_start is not None:
        X_ws, U_ws = getattr(warm_start, "_X", None), getattr(warm_start, "_U", None)
        if X_ws is None or X_ws.shape != setup.X0.shape or U_ws.shape != setup.U0.shape:
            raise ValueError(
                "`warm_start` must be a result of a run on the same experiments and "
                f"discretisation ({setup.disc.n_intervals} intervals x {setup.disc.K} nodes); "
                "results loaded from JSON carry no node values"
            )
        setup.X0, setup.U0 = X_ws.copy(), U_ws.copy()
        setup.p0 = np.clip(np.asarray(warm_start.p, float), p_lb, p_ub)

    r0 = setup.tr.residuals(setup.X0, setup.U0, setup.p0,
                            np.zeros_like(setup.X0), float(lam))
    if not np.all(np.isfinite(r0)):
        raise ValueError(
            "the objective is not finite at the starting point: the model cannot be "
            "evaluated at p0 and the initial guess of the states (check p0, the "
            "experiments' x0 and x0_bounds)"
        )

    from .codegen import STATS as codegen_stats

    t_solve = time.perf_counter()
    build_before = timings.get("build", 0.0)
    compile_before = codegen_stats.prepare_seconds
    # with weights="auto" the rounds that only serve to re-estimate the noise
    # variances are solved to a loose tolerance, and the last one to the given
    # one (the variances need the estimate to ~1e-5, not to round-off)
    round_opts = _loosened(opts) if auto_weights else opts
    outcome = spec.solve(setup, round_opts, callback)
    records = list(outcome.history)
    iterations = outcome.iterations
    rounds = 1
    if auto_weights:
        for _ in range(_AUTO_WEIGHT_ROUNDS - 1):
            var = _residual_variance(setup, outcome.X, outcome.U, outcome.p)
            w_new = _weights_from_variance(var, setup.disc)
            if np.max(np.abs(w_new / w - 1.0)) < 0.01:
                break
            w = w_new
            setup.tr.set_weights(w)
            setup.X0, setup.U0, setup.p0 = outcome.X, outcome.U, outcome.p
            outcome = spec.solve(setup, round_opts, callback)
            records.extend(outcome.history)
            iterations += outcome.iterations
            rounds += 1
        if round_opts is not opts:  # the final weights, solved to the full tolerance
            setup.X0, setup.U0, setup.p0 = outcome.X, outcome.U, outcome.p
            outcome = spec.solve(setup, opts, callback)
            records.extend(outcome.history)
            iterations += outcome.iterations
    # What a method builds inside its solve (an NLP) it adds to "build" itself;
    # functions compiled (or loaded from the cache) on first use are counted here.  Whichever is larger
    # (the NLP's build includes its compilation) is build time, not solve time.
    compiled = codegen_stats.prepare_seconds - compile_before
    built = timings.get("build", 0.0) - build_before
    extra = max(built, compiled)
    timings["build"] = build_before + extra
    timings["solve"] = time.perf_counter() - t_solve - extra
    result = _assemble(model, exps, setup, outcome, spec.name, w, records, iterations,
                       timings, notes, dict(
                           T=float(T), n=n, lam=float(lam), nodes=nodes, scheme=scheme,
                           weights="auto" if auto_weights else ("none" if weights is None else "given"),
                           weight_rounds=rounds, estimate_x0=bool(estimate_x0),
                           intervals=setup.disc.n_intervals,
                           codegen=str(codegen), options=asdict(opts),
                       ))
    if uncertainty and result.success:
        t_unc = time.perf_counter()
        from .uncertainty import attach_uncertainty

        attach_uncertainty(result, setup, outcome)
        timings["uncertainty"] = time.perf_counter() - t_unc
    result.wall_time = time.perf_counter() - t_start
    for note in result.warnings:
        if "information matrix" in note:
            warnings.warn(note, stacklevel=2)
    if raise_on_failure and not result.success:
        raise ConvergenceError(f"{spec.name} did not converge: {result.message}", result)
    return result


def _assemble(model: Model, exps: list[Experiment], setup: Setup, outcome: LoopOutcome,
              method: str, w: np.ndarray, records: list[IterationRecord], iterations: int,
              timings: dict[str, float], notes: list[str],
              settings: dict[str, Any]) -> EstimationResult:
    disc, tr = setup.disc, setup.tr
    X, U, p = outcome.X, outcome.U, outcome.p
    _, Ys, xend = tr.trajectory(X, U, p)
    with np.errstate(all="ignore"):  # a diverged run: non-finite is reported, not warned
        res2 = disc.mask * (disc.y - Ys) ** 2
        misfit = float(0.5 * res2.sum() / disc.n_samples_total)
        weighted = float(0.5 * np.sum(res2 * w[None, :, None]) / disc.n_samples_total)
        hn = disc.has_next
        gap = float(np.abs(xend[hn] - X[1:][hn[:-1]]).max(initial=0.0)) if np.any(hn) else 0.0
    PU = tr.picard(X, U, p)
    fp = float(np.max(np.abs(PU - U) / setup.x_scale[None, :, None]))
    x0 = [X[sl.start].copy() for sl in disc.intervals_of]
    result = EstimationResult(
        p=np.asarray(p, float).copy(), x0=x0, success=bool(outcome.success),
        status=outcome.status, message=outcome.message, iterations=int(iterations),
        objective=misfit, weighted_objective=weighted, continuity_gap=gap,
        fixed_point_residual=fp, wall_time=0.0, timings=timings,
        history=_history_dict(records), method=method, settings=settings,
        weights=np.asarray(w, float).copy(), p_names=list(model.p_names),
        x_names=list(model.x_names), y_names=list(model.y_names),
        experiment_names=[e.name for e in exps], warnings=list(notes) + list(outcome.notes),
    )
    result._predictor = simulation_predictor(model, exps, disc, X, U)
    result._X, result._U = X.copy(), U.copy()
    return result
