"""Checks of :func:`~picard_casadi.estimate`'s arguments, and the forms the run uses.

:func:`check_arguments` checks every argument where it enters (a
``ValueError`` or ``TypeError`` naming it) before anything is built,
settles the default ``T`` and the warm start's mesh, and checks the
problem's size (:mod:`picard_casadi.transcription.problem_size`).
"""

from __future__ import annotations

from dataclasses import fields
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ..experiment import DEFAULT_NAME, Experiment
from .noise_plan import NoisePlan, check_positive_at_start, noise_plan
from ..methods import MethodSpec, get_method, method_options
from ..model import Model
from ..result import EstimationResult
from ..runtime.user_warnings import warn_user
from ..runtime.arguments import (as_bool, as_codegen, as_int, as_positive_number,
                                 check_bounds_not_nan, check_callback, check_choice, check_seed)
from ..transcription.guess import GUESSES
from ..transcription.mesh import default_T
from ..transcription.problem_size import check_problem_size
from .setup import as_vector, estimated_quantities, x0_mask

__all__ = ["check_arguments", "Arguments", "as_bounds", "options_of", "DEFAULT_NODES",
           "AUTO_FIRST_SCHEME", "SCHEME_CHOICES", "default_picard_order",
           "MAX_REFINEMENTS"]

DEFAULT_NODES = {"chebyshev": 9, "radau": 9, "trapezoid": 21}
#: ``scheme="auto"`` (the default) starts with this quadrature and moves to
#: Radau IIA where the model is stiff on the mesh
#: (:mod:`picard_casadi.transcription.stiffness`)
AUTO_FIRST_SCHEME = "chebyshev"
SCHEME_CHOICES = ("auto",) + tuple(DEFAULT_NODES)


def default_picard_order(scheme: str) -> int:
    """The Picard order ``n`` of ``n=None``: 1 for Radau (a stiff component
    amplifies the fixed point's round-off ``h |f_x|`` fold in ``P^2 U``:
    Boehm's import rate of 1e5 held the continuity gaps at 1e-6 of the
    state's scale and the run at ``max_iter``), the paper's 2 otherwise."""
    return 1 if scheme == "radau" else 2


MAX_REFINEMENTS = 5


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
    names = [e.name for e in exps]
    if len(set(names)) < len(names):
        # messages name experiments: three called "experiment" (the default)
        # were told apart by nothing
        given = sorted({n for n in names if names.count(n) > 1 and n != DEFAULT_NAME})
        if given:
            # a subject ID given twice, renamed without a word
            told = "; ".join(f"{n!r} as " + ", ".join(repr(f"{n} {i}") for i, m in
                                                      enumerate(names) if m == n)
                             for n in given)
            warn_user(f"experiments share a name ({told}): each is fitted as an experiment "
                      "of its own, under those names (and its per_experiment parameters "
                      "with them); if they are one experiment's records, give them as one "
                      "Experiment (replicates may share times), else give unique names")
        exps = [e.replaced(name=f"{e.name} {i}") if names.count(e.name) > 1 else e
                for i, e in enumerate(exps)]
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


def as_bounds(value: Any, n: int, field: str) -> tuple[np.ndarray, np.ndarray]:
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


def _weights(weights: Any, ny: int) -> tuple[str, np.ndarray]:
    """``estimate``'s ``weights`` as a mode and the starting weights per output.

    Modes: ``"auto"``, the likelihood with each output's noise variance
    estimated (``weights="auto"``, and the default where there is more than
    one output); ``"none"``, the unweighted sum of squares (``weights="none"``,
    and the default for one output, whose estimate is the likelihood's too);
    ``"given"``: known inverse noise variances."""
    if isinstance(weights, str) and weights not in ("auto", "none"):
        raise ValueError(f"`weights` must be None, 'auto', 'none' or {ny} numbers (inverse noise "
                         f"variances, one per output), got {weights!r}")
    if weights is None:
        mode = "auto" if ny > 1 else "none"
    else:
        mode = weights if isinstance(weights, str) else "given"
    if mode != "given":
        return mode, np.ones(ny)
    w = as_vector(weights, ny, "weights")
    if np.any(w < 0) or not np.all(np.isfinite(w)) or not np.any(w > 0):
        raise ValueError("`weights` must be finite, non-negative and not all zero")
    return mode, w


class Arguments(NamedTuple):
    """``estimate``'s arguments, checked and in the forms the solve uses."""

    exps: list[Experiment]
    p0: np.ndarray
    p_lb: np.ndarray
    p_ub: np.ndarray
    x_lb: np.ndarray
    x_ub: np.ndarray
    n: int
    scheme: str
    scheme_auto: bool
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
    noise: NoisePlan | None


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


def warn_constants_outside_bounds(model: Model, experiments: Sequence[Experiment],
                                  table: Any, p_bounds: Any, user_table: bool = False) -> None:
    """Warn where an experiment sets a parameter to a number outside the bounds
    given for it (its table entry's, or ``p_bounds``): a model file bounding
    a temperature T to [250, 400] K, the conditions giving T = 20 to 50
    (degC), took them without a note and the fit failed elsewhere.  And where
    a user's parameter table (``user_table``) estimates a parameter that every
    experiment sets to a number: the entry is not used (a biochemist's E0,
    meant to be estimated with kcat, was a known constant in every well; the
    fit gave a tight kcat and no word)."""
    unused = [n for n, q in (table or {}).items() if user_table and q.estimate
              and experiments and all(isinstance(e.parameters.get(n), float)
                                      for e in experiments)]
    if unused:
        warn_user(f"the parameter table estimates {', '.join(unused)}, but every experiment "
                  "sets it to a number (Experiment(parameters={...})), so its entry is not "
                  "used and it is not estimated; to estimate it, leave it out of the "
                  "experiments' parameters (or map it there to a parameter's name)")
    if table:
        box = {n: q.bounds for n, q in table.items()}
    elif p_bounds is not None:
        lb, ub = as_bounds(p_bounds, model.np, "p_bounds")
        box = {n: (float(lo), float(hi)) for n, lo, hi in zip(model.p_names, lb, ub)}
    else:
        return
    outside = [(e.name, n, float(v)) for e in experiments for n, v in e.parameters.items()
               if not isinstance(v, str) and n in box and not box[n][0] <= float(v) <= box[n][1]]
    if outside:
        names = sorted({n for _, n, _ in outside})
        shown = ", ".join(f"{e!r} sets {n} = {v:g}" for e, n, v in outside[:4])
        warn_user(f"experiment(s) {shown}{', ...' * (len(outside) > 4)}: "
                  f"outside the bounds given for {', '.join(names)} "
                  f"({', '.join(f'[{box[n][0]:g}, {box[n][1]:g}]' for n in names)}; p_bounds): "
                  "an experiment's value is used as given, bounds or not; another unit "
                  "(degC for K, mmol for mol)?")


#: a given t0 this many data spans before the first sample reads like a clock
#: of dates (check_arguments warns; calendar years from t0 = 0: 1850 over 170 years)
EARLY_CLOCK = 5.0


def check_arguments(model: Any, experiments: Any, p0: Any, method: str, p_bounds: Any,
                     x0_bounds: Any, estimate_x0: Any, T: Any, n: Any, lam: Any, nodes: Any,
                     scheme: Any, weights: Any, noise: Any, refine: Any, codegen: Any,
                     guess: Any,
                     warm_start: Any, uncertainty: Any, multistart: Any, seed: Any,
                     callback: Any, raise_on_failure: Any, max_intervals: Any,
                     options: dict[str, Any], own_arguments: tuple[str, ...]) -> Arguments:
    """Check every argument of :func:`estimate` where it enters (ValueError or
    TypeError naming it), before anything is built; the default ``T`` and the
    warm start's mesh are settled here, and the problem's size is checked.
    ``own_arguments``: ``estimate``'s own argument names (not method options),
    for the message on an unknown name."""
    if not isinstance(model, Model):
        raise TypeError(f"model must be a picard_casadi.Model, got {type(model).__name__}")
    exps = _as_experiments(model, experiments)
    p0 = as_vector(p0, model.np, "p0")
    if not np.all(np.isfinite(p0)):
        raise ValueError(f"`p0` must be finite, got {p0}")
    check_bounds_not_nan(p_bounds, "p_bounds")
    p_lb, p_ub = as_bounds(p_bounds, model.np, "p_bounds")
    outside = (p0 < p_lb) | (p0 > p_ub)
    if np.any(outside):
        i = int(np.flatnonzero(outside)[0])
        raise ValueError(
            f"`p0`[{i}] = {p0[i]} ({model.p_names[i]}) is outside p_bounds "
            f"[{p_lb[i]}, {p_ub[i]}]; start inside the box"
        )
    check_bounds_not_nan(x0_bounds, "x0_bounds")
    x_lb, x_ub = as_bounds(x0_bounds, model.nx, "x0_bounds")
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
    early = [e for e in exps if getattr(e, "_t0_given", False) and e.preequilibration is None
             and float(e.t[0]) - e.t0 > EARLY_CLOCK * max(float(e.t_end - e.t[0]), 1e-300)]
    if early:
        # (day numbers from 18323 with t0 = 0: the model ran 18322 days to the
        # data, and the fit failed after 60 s naming meaningless sensitivities)
        e = early[0]
        warn_user(f"experiment {e.name!r} starts at t0 = {e.t0:g}, {float(e.t[0]) - e.t0:g} time "
                  f"units before its first sample, its data spanning {float(e.t_end - e.t[0]):g}"
                  f" ({len(early)} such experiment(s)): the model runs all that time before the "
                  "data; a clock that reads dates or day numbers? Times from the first sample "
                  "(t - t[0]) with t0 where the known states hold read better")
    scheme = "auto" if scheme is None else scheme
    check_choice(scheme, "scheme", SCHEME_CHOICES)
    scheme_auto = scheme == "auto"
    if scheme_auto:
        # a warm start continues on its own quadrature
        ws_disc = getattr(warm_start, "_disc", None) if warm_start is not None else None
        scheme = ws_disc.scheme if ws_disc is not None else AUTO_FIRST_SCHEME
    n = default_picard_order(scheme) if n is None else _check_positive_int(n, "n")
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
    T_chosen = T is None  # by the package, from the data (the message says so)
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
    check_problem_size(model, exps, T, nodes, max_intervals, chosen=T_chosen)
    spec = get_method(method)
    opts_given = dict(options)
    if "lam" in {f.name for f in fields(spec.options)}:
        opts_given.setdefault("lam", float(lam))
    opts = method_options(spec, opts_given, "estimate", own_arguments)

    if noise is not None and weights is not None:
        raise ValueError("give the outputs' noise either as `noise` (noise models) or as "
                         "`weights` (inverse variances, 'auto' or 'none'), not both")
    weights_mode, w = _weights(weights, model.ny)
    plan = None
    data_sigma = any(e.sigma is not None for e in exps)
    if (noise is not None or (isinstance(weights, str) and weights == "auto")
            or (weights is None and (model.ny > 1 or data_sigma))):
        plan = noise_plan(noise, model, exps)
        check_positive_at_start(model, exps, ~x0_mask(estimate_x0, model.nx), plan.noise)
        weights_mode = "auto"
        w = np.where(plan.groups.estimated, 1.0, plan.groups.known_weights)
    return Arguments(exps, p0, p_lb, p_ub, x_lb, x_ub, n, scheme, scheme_auto, nodes,
                     max_refinements,
                     mesh_of_warm_start, T, lam, seed, uncertainty, raise_on_failure, spec, opts,
                     weights_mode, w, plan)


def options_of(spec: MethodSpec, options: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``options`` that method ``spec`` takes (a fallback to
    another method keeps the options they share, such as ``max_iter``)."""
    valid = {f.name for f in fields(spec.options)}
    return {k: v for k, v in options.items() if k in valid}
