"""From the user's model, data and options to a :class:`~picard_casadi.methods.base.Setup`.

:func:`build_setup` discretises the experiments (a regular mesh of ``T`` or
given boundaries), builds the transcription's functions (compiled or on the
virtual machine), chooses the scales of states and parameters, and the
starting point: the data-anchored initial guess (:mod:`picard_casadi.transcription.guess`),
or a given start (a refined mesh carrying the last solution, a warm start).

The data weights start as inverse noise variances from second differences
of the data (:func:`initial_weights`) when the user asks for
``weights="auto"``; :func:`weights_from_variance` turns residual variances
into the next round's weights.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..analysis.fit_check import second_differences
from ..analysis.likelihood import NoiseGroups, ml_variances
from ..experiment import Experiment
from ..methods.base import Setup
from ..model import Model
from ..runtime.interrupts import reraise_if_interrupted
from ..runtime.native_output import captured_native_output
from ..transcription.discretisation import Discretisation
from ..transcription.functions import Transcription
from ..transcription.interval_functions import IntervalFunctions, build_interval_functions
from ..transcription.guess import initial_guess, measured_state_series
from ..transcription.predict import sample_outputs, simulated_outputs

__all__ = ["state_sizes", "build_setup", "initial_weights", "start_weights", "weights_from_variance",
           "residual_weights", "variance_weights", "with_known_weights", "simulated_ssr",
           "as_vector", "interval_functions", "estimated_quantities", "x0_mask", "x0_setting"]

# Interval functions already built in this process, per model and shape.
_BUILT: weakref.WeakKeyDictionary[Model, dict[tuple, IntervalFunctions]] = (
    weakref.WeakKeyDictionary())
_BUILT_LOCK = threading.Lock()


def interval_functions(disc: Discretisation, n: int) -> IntervalFunctions:
    """:func:`~picard_casadi.transcription.interval_functions.build_interval_functions`, once
    per model and shape.

    The functions depend on the model, the quadrature (scheme, nodes), the
    padded sample count ``M`` and ``n`` only, not on the data, the mesh's
    times or the start; multistart starts, profile points and refined
    meshes of the same shape in one process share them (CMG: 0.32 s per
    build).  Kept as long as the model object lives.
    """
    key = (disc.scheme, disc.nodes, disc.K, disc.M, n)
    with _BUILT_LOCK:
        fns = _BUILT.get(disc.model, {}).get(key)
    if fns is None:
        fns = build_interval_functions(disc, n)
        with _BUILT_LOCK:
            fns = _BUILT.setdefault(disc.model, {}).setdefault(key, fns)
    return fns


def as_vector(value, n: int, field: str) -> np.ndarray:
    """``value`` as ``n`` floats; ValueError naming ``field``.

    A number (not in a list) applies to all ``n`` entries; a list or array
    must have ``n`` entries, also when it has one (``p0=[0.1]`` for two
    parameters is a mistake more often than a shorthand), and be flat (a
    nested list such as ``[[1, 2]]`` is an error, not read row by row).
    """
    if value is None:  # np.asarray(None, float) is NaN: say what is missing instead
        raise ValueError(f"`{field}` is missing: give {n} number(s)")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise ValueError(f"`{field}` must be {n} numbers, got {shown}") from None
    if arr.ndim == 0:
        return np.full(n, float(arr))
    if arr.ndim > 1:
        raise ValueError(f"`{field}` must be a flat list or 1-D array of {n} numbers, "
                         f"got an array of shape {arr.shape}")
    if arr.size != n:
        raise ValueError(f"`{field}` must have {n} entries, got {arr.size}"
                         + (" (a single number, not in a list, applies to all)"
                            if arr.size == 1 else ""))
    return arr


def x0_bound_edges(model: Model, x_lb: np.ndarray, x_ub: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Which lower and upper edges of the estimate's state box (``x0_bounds``
    within the model's ``x_domain``) are finite and ``x0_bounds``' own: the
    user's range of the states, not where the model is valid."""
    lo, hi = np.asarray(x_lb, float), np.asarray(x_ub, float)
    domain = model.x_domain
    if domain is None:
        return np.isfinite(lo), np.isfinite(hi)
    return (np.isfinite(lo) & (lo != np.asarray(domain[0], float)),
            np.isfinite(hi) & (hi != np.asarray(domain[1], float)))


def _inside_the_box(model: Model, exp: Experiment, x0: np.ndarray, estimate_x0: Any,
                    x_lb: np.ndarray, x_ub: np.ndarray, p0: Any = None) -> np.ndarray:
    """``x0``, the guess of an experiment without a given ``x0``, with each
    estimated state the data do not give (guessed 0) moved to the middle of
    its ``x0_bounds`` where they are finite and the guess is on or outside
    their edge: a neuron's gates in [0, 1], guessed 0, held on the edge by
    the box while the parameters ran off along a valley (gL -> 0, EL ->
    -1500); from 0.5 the same fit converged in 29 iterations.  Not where
    the edge is the model's ``x_domain``, where the model is valid, not
    where its states lie (a tank's level in [0, 10] m, guessed 5 for 0.8,
    started the collocation outside the domain).  With ``p0``, such a state
    still guessed 0 where the model's derivatives are undefined (NaN) there,
    but not at 1, starts at 1."""
    if exp.x0 is not None:
        return x0
    from_data = {i for i in (*model.output_state_index, *model.affine_output_states)
                 if i is not None}
    free = np.broadcast_to(np.asarray(estimate_x0, bool), (model.nx,))
    own_lo, own_hi = x0_bound_edges(model, x_lb, x_ub)
    out = x0.copy()
    for i in range(model.nx):
        lo, hi = float(x_lb[i]), float(x_ub[i])
        if (i not in from_data and free[i] and own_lo[i] and own_hi[i] and lo < hi
                and not lo < out[i] < hi):
            out[i] = 0.5 * (lo + hi)
    zeros = [i for i in range(model.nx) if i not in from_data and free[i] and out[i] == 0.0
             and x_lb[i] <= 1.0 <= x_ub[i]]
    if zeros and p0 is not None:
        # a state guessed 0 where the model's derivative is undefined (a soil
        # store in (SM / FC)**beta, whose derivative in beta is log(0) 0 = NaN):
        # every method failed at the start (34.5 s of second runs); from 1 it
        # fits.  (Not where it is infinite, sqrt(h) at h = 0: a tank's middle
        # level guessed 0 converges, and from 1 its start left the domain)
        moved = out.copy()
        moved[zeros] = 1.0
        if not _defined_derivatives(model, exp, out, p0) and _defined_derivatives(
                model, exp, moved, p0):
            out = moved
    return out


def _defined_derivatives(model: Model, exp: Experiment, x0: np.ndarray, p: np.ndarray) -> bool:
    """Whether the right-hand side and its derivatives in the states and the
    parameters are defined (not NaN) at ``x0`` and ``p`` at the experiment's
    start."""
    u = exp.inputs([exp.t0], model.nu)[0]
    p = np.asarray(p, float)
    with np.errstate(all="ignore"):
        values = [f(exp.t0, x0, p, u) for f in (model.f, model.f_jacobian)]
    return not any(np.any(np.isnan(np.asarray(v, float))) for v in values)


def x0_mask(estimate_x0: Any, nx: int) -> np.ndarray:
    """``estimate``'s ``estimate_x0`` as one bool per state (which initial
    states are estimated): ``True``/``False`` for all, or a sequence of ``nx``.

    Raises
    ------
    TypeError, ValueError
        Naming ``estimate_x0`` and what it takes.
    """
    if isinstance(estimate_x0, (bool, np.bool_)):
        return np.full(nx, bool(estimate_x0))
    try:
        mask = [v for v in estimate_x0]
    except TypeError:
        mask = None
    if mask is None or not all(isinstance(v, (bool, np.bool_)) for v in mask):
        raise TypeError("`estimate_x0` must be True, False, or one True/False per state "
                        f"(which initial states are estimated), got {estimate_x0!r}")
    if len(mask) != nx:
        raise ValueError(f"`estimate_x0` has {len(mask)} entries; the model has nx = {nx} "
                         "states (one True/False each: estimated, or known from each "
                         "experiment's x0)")
    return np.asarray(mask, dtype=bool)


def x0_setting(mask: np.ndarray) -> bool | list[bool]:
    """The mask as ``settings["estimate_x0"]`` keeps it: one bool where every
    state agrees (as ``estimate`` was given it most often), else the list."""
    return bool(mask[0]) if mask.size and np.all(mask == mask[0]) else [bool(v) for v in mask]


def estimated_quantities(p_lb: Any, p_ub: Any, nx: int, n_experiments: int,
                         estimate_x0: Any) -> tuple[int, int]:
    """How many quantities a fit estimates: the free parameters (lower bound
    below upper; equal bounds hold one), and the initial states (those
    ``estimate_x0`` marks, :func:`x0_mask`, in every experiment)."""
    n_p = int(np.sum(np.asarray(p_lb, float) < np.asarray(p_ub, float)))
    return n_p, int(x0_mask(estimate_x0, nx).sum()) * n_experiments


def initial_weights(disc: Discretisation) -> np.ndarray:
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
                diffs.append(second_differences(v))
        d = np.concatenate(diffs) if diffs else np.zeros(0)
        var[k] = float(np.mean(d * d) / 6.0) if d.size else np.nan
    return weights_from_variance(var, disc)


def start_weights(setup: Setup, groups: NoiseGroups | None = None) -> np.ndarray:
    """The likelihood's first weights: ``1 / sigma_k^2`` from the residuals of the
    model simulated with ``p0`` from each experiment's starting ``x0``.

    This is the output-error method's first ``R`` (the book's ``ml_oem2``
    computes it at the starting values): scale-free, and it weighs each
    output by how far the start is from its data.  The data's second
    differences (:func:`initial_weights`) measure the white noise alone,
    and on the HFB-320 flight test, whose residuals are mostly model error,
    they led the relaxation to another optimum of the likelihood (``det R``
    1.47 times the book's).  Where the simulation fails or its outputs are
    not finite (an unstable model from a poor start), the second
    differences are used.  ``groups``: the noise levels known, estimated and
    shared (:class:`~picard_casadi.analysis.likelihood.NoiseGroups`); without,
    every output's is estimated.
    """
    from ..transcription.interval_integration import inputs_vary

    if groups is not None and not np.any(groups.estimated):
        # every noise level known (or a noise formula's, held in the data's
        # weights): the simulation would set none of them
        return with_known_weights(np.ones(groups.group.size), groups)
    disc = setup.disc
    x0s = [setup.X0[sl.start] for sl in disc.intervals_of]
    # on the mesh where the inputs vary (what simulate's restart at every
    # sample costs: a cmg fit's 0.7 s of 2.1); else as before, as the weights
    # steer the path (on the mesh, PEtab's Boehm from uniform start 0 ended at
    # 149.5878 instead of 138.2220, its start weights 1e-8 apart)
    simulated = simulated_ssr(disc.model, disc.experiments, x0s, setup.p0,
                              disc if inputs_vary(disc) else None, state_sizes(setup.U0))
    if simulated is None:
        return with_known_weights(initial_weights(disc), groups)
    return variance_weights(*simulated, disc, groups)


def simulated_ssr(model: Model, experiments: Sequence[Experiment], x0s: Sequence[np.ndarray],
                  p: np.ndarray, disc: Discretisation | None = None,
                  x_scale: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """Each output's sum of squared residuals (each value weighted by its own
    ``1 / sigma_i^2``) and number of values, of the model simulated by CVODES
    from each experiment's ``x0s[e]`` with ``p``; None where a simulation
    fails or a residual is not finite.

    ``disc`` and ``x_scale``: a mesh of ``model`` and ``experiments``, whose
    intervals the simulation then follows, and the states' typical sizes
    (:func:`state_sizes` of a solution or a guess; :func:`mesh_simulated_ssr`).
    """
    if (disc is not None and x_scale is not None and disc.model is model
            and not model.has_delays):
        from ..transcription.interval_integration import SHORTEST_OUTPUT, output_grids

        # a sample within SHORTEST_OUTPUT of its interval's start would be read
        # as that start (interval_integration.SHORTEST_OUTPUT): simulated alone
        if min(g[0] for g in output_grids(disc)) >= SHORTEST_OUTPUT:
            return mesh_simulated_ssr(disc, x0s, p, x_scale)
    ssr, counts = np.zeros(model.ny), np.zeros(model.ny)
    outputs = simulated_outputs(model, experiments, x0s, p)
    if outputs is None:
        return None
    for exp, Y in zip(experiments, outputs):
        measured = np.isfinite(exp.y)
        with np.errstate(all="ignore"):
            r2 = np.where(measured, exp.value_weights() * (exp.y - Y) ** 2, 0.0)
        if not np.all(np.isfinite(r2)):
            return None
        ssr += r2.sum(axis=0)
        counts += measured.sum(axis=0)
    return ssr, counts


def state_sizes(U: np.ndarray) -> np.ndarray:
    """Each state's root mean square over the node values ``U`` ``(J, nx, K)``
    (1 for a state that is 0 throughout or not finite)."""
    with np.errstate(all="ignore"):
        rms = np.sqrt(np.mean(np.asarray(U, float) ** 2, axis=(0, 2)))
    return np.where(np.isfinite(rms) & (rms > 0), rms, 1.0)


def mesh_simulated_ssr(disc: Discretisation, x0s: Sequence[np.ndarray], p: np.ndarray,
                       x_scale: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`simulated_ssr` by one CVODES run per stretch of the mesh where the
    inputs are one constant, and per interval elsewhere (its inputs' fit,
    :func:`~picard_casadi.transcription.interval_integration.chained_interval_states`),
    each experiment chained from ``x0s[e]``: the same simulation as
    :func:`simulate`, which restarts CVODES at every sample (with callable
    inputs: the paper's CMG, 301 samples per experiment, 0.15 s each, 70 % of
    a fit's time in the likelihood's two simulations).  Its absolute
    tolerance is :data:`~picard_casadi.simulate.DEFAULT_ATOL` times the
    smallest of the states' typical sizes ``x_scale`` (where below 1;
    :func:`simulate`'s rule is the largest ``|x0|``): Robertson's
    B, of size 2e-5 beside A and C of 1, was 2.4e-5 off a tight integration
    with 1e-10 (by :func:`simulate`, restarting at each sample), the
    likelihood 2e-3 off; with the rule it is within 1e-6 of the tight
    integration's (``tests/test_stiff.py``)."""
    from ..simulate import DEFAULT_ATOL, DEFAULT_MAX_STEPS, DEFAULT_RTOL
    from ..transcription.interval_integration import chained_interval_states

    model = disc.model
    X0 = np.column_stack([np.asarray(x, float) for x in x0s])
    if not np.all(np.isfinite(X0)):
        return None
    atol = DEFAULT_ATOL * min(1.0, float(np.min(x_scale)))
    try:
        with np.errstate(all="ignore"), captured_native_output():
            chain = chained_interval_states(disc, DEFAULT_RTOL, atol, DEFAULT_MAX_STEPS)
            Xs = np.asarray(chain(X0, np.asarray(p, float))[0])
        Xs = Xs.reshape(model.nx, disc.n_intervals, disc.M).transpose(1, 0, 2)
        with np.errstate(all="ignore"):
            Ys = sample_outputs(disc, Xs, np.asarray(p, float))
    except RuntimeError as err:
        reraise_if_interrupted(err)
        return None
    ssr = disc.weighted_ssr_per_output(Ys)
    if not np.all(np.isfinite(ssr)):
        return None
    return ssr, disc.mask.sum(axis=(0, 2)).astype(float)


def with_known_weights(w: np.ndarray, groups: NoiseGroups | None) -> np.ndarray:
    """``w`` with the known noise levels' weights in place."""
    if groups is None:
        return w
    return np.where(groups.estimated, w, groups.known_weights)


def variance_weights(ssr: np.ndarray, counts: np.ndarray, disc: Discretisation,
                     groups: NoiseGroups | None) -> np.ndarray:
    """The weights ``1 / sigma_k^2`` of the likelihood's optimum over the noise
    levels for residuals with ``ssr[k]`` over ``counts[k]`` values per output
    (each value weighted by its own ``1 / sigma_i^2``): known ones as given,
    shared ones pooled (``groups``; ``None``: every output its own)."""
    rms2 = disc.output_rms() ** 2
    var = (ml_variances(ssr, counts, rms2) if groups is None
           else groups.variances(ssr, counts, rms2))
    return with_known_weights(weights_from_variance(var, disc), groups)


def weights_from_variance(var: np.ndarray, disc: Discretisation) -> np.ndarray:
    """Weights ``1 / var`` per output, floored at (1e-6 x the output's RMS)^2."""
    meas = disc.measured_values()
    out = np.zeros_like(var)
    for k in range(var.size):
        typical = float(np.sqrt(np.mean(meas[k] ** 2))) if meas[k].size else 1.0
        floor = (1e-6 * max(typical, 1e-12)) ** 2
        v = var[k] if np.isfinite(var[k]) else max(typical, 1e-12) ** 2
        out[k] = 1.0 / max(v, floor)
    return out


def residual_weights(disc: Discretisation, Ys: np.ndarray,
                     groups: NoiseGroups | None = None) -> np.ndarray:
    """The next weights of the likelihood's relaxation: :func:`variance_weights`
    of the residuals of a solution's outputs ``Ys`` (laid out like ``disc.y``)."""
    return variance_weights(disc.weighted_ssr_per_output(Ys), disc.mask.sum(axis=(0, 2)),
                            disc, groups)


def _data_scale(X0: np.ndarray, U0: np.ndarray, disc: Discretisation) -> np.ndarray:
    """Each state's typical magnitude from the start and its measurements."""
    mags = np.maximum(np.abs(U0).max(axis=(0, 2)), np.abs(X0).max(axis=0))
    for e in range(disc.n_experiments):
        for i, (_, vals) in measured_state_series(disc, e).items():
            mags[i] = max(mags[i], float(np.abs(vals).max()))
    top = float(mags.max()) if mags.size else 1.0
    return np.where(mags > 1e-9 * max(top, 1e-300), mags, 1.0)


#: a parameter's start this small gives no scale (``build_setup``'s ``p_scale``)
TINY_START = 1e-12


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
    estimate_x0: bool | np.ndarray,
    x_scale: np.ndarray | None = None,
    p_scale: np.ndarray | None = None,
    codegen: bool | str = "auto",
    timings: dict[str, float] | None = None,
    notes: list[str] | None = None,
    guess: str = "simulation",
    boundaries: list[np.ndarray] | None = None,
    start: tuple[np.ndarray, np.ndarray] | None = None,
) -> Setup:
    """Discretise, build the functions, and choose scales and the start.

    Parameters
    ----------
    boundaries : list of ndarray, optional
        Each experiment's interval boundaries (default: the regular mesh of ``T``).
    start : (X, U), optional
        Interval starts ``(J, nx)`` and node values ``(J, nx, K)`` on this
        mesh to start from, instead of the initial guess.
    (the others as :func:`~picard_casadi.estimate`)

    Returns
    -------
    Setup
    """
    timings = {} if timings is None else timings
    notes = [] if notes is None else notes
    t0 = time.perf_counter()
    disc = Discretisation(model, experiments, float(T), nodes, scheme, boundaries)
    fns = interval_functions(disc, n)
    from ..runtime.codegen import STATS as codegen_stats
    from ..runtime.compiled_functions import backend_for

    backend, codegen_note = backend_for(codegen)
    if codegen_note and codegen_note not in notes:
        notes.append(codegen_note)
    # built before the guess, whose fixed points it solves for all intervals
    # at once (compiled where it is); its state scales are set after the guess
    tr = Transcription(disc, n, weights, np.ones(model.nx), backend=backend,
                       interval_functions=fns)
    timings["build"] = timings.get("build", 0.0) + time.perf_counter() - t0

    t1 = time.perf_counter()
    compile_before = codegen_stats.prepare_seconds
    x_lb, x_ub = x_bounds
    if start is None:
        prefetch = getattr(tr.functions, "prefetch", None)
        if prefetch is not None:  # compiled: what the guess calls, side by side
            prefetch(("picard", "f_derivatives"))
        x0s = [_inside_the_box(model, e, e.x0_guess(model, p0), estimate_x0, x_lb, x_ub, p0)
               for e in experiments]
        X0, U0, guess_notes = initial_guess(disc, fns, p0, x0s, estimate_x0, x_lb, x_ub,
                                            strategy=guess, whole=tr)
        notes.extend(guess_notes)
    else:
        X0, U0 = (np.array(a, float) for a in start)
    if x_scale is None:
        x_scale = model.x_nominal
    if x_scale is None:
        x_scale = _data_scale(X0, U0, disc)
    x_scale = as_vector(x_scale, model.nx, "x_scale")
    if np.any(x_scale <= 0) or not np.all(np.isfinite(x_scale)):
        raise ValueError("`x_scale` must be positive and finite")
    tr.set_x_scale(x_scale)
    # what the guess compiled (or loaded) on first use is build time
    compiled = codegen_stats.prepare_seconds - compile_before
    timings["build"] += compiled
    timings["guess"] = timings.get("guess", 0.0) + time.perf_counter() - t1 - compiled

    p_lb, p_ub = p_bounds
    if p_scale is None:
        width = np.where(np.isfinite(p_ub - p_lb), 0.5 * (p_ub - p_lb), np.nan)
        # a start below TINY_START says nothing of its parameter's size: with
        # p0 = 1e-300 as the scale, no step could move it (converged at p0)
        p_scale = np.where(np.abs(p0) > TINY_START, np.abs(p0),
                           np.where(np.isfinite(width) & (width > 0), width, 1.0))
        scales = getattr(model, "_parameter_scales", None)
        if scales is not None and len(scales) == model.np:
            # a parameter on a log scale moves in decades (or e-folds) whatever
            # its value: |log10 k| = 0.03 as its scale made every step that
            # moved it 30 times its length to the trust region (PEtab's Bruno,
            # uniform 19: 1395 iterations, 54 s; 275 and 9 s with 1)
            p_scale = np.where(np.array([v != "lin" for v in scales]), 1.0, p_scale)
    p_scale = as_vector(p_scale, model.np, "p_scale")
    if np.any(p_scale <= 0) or not np.all(np.isfinite(p_scale)):
        raise ValueError("`p_scale` must be positive and finite")
    J = disc.n_intervals
    free_x = np.ones((J, model.nx), dtype=bool)
    free_x[disc.is_first] = x0_mask(estimate_x0, model.nx)  # the known initial states held
    free_p = p_lb < p_ub
    return Setup(disc=disc, tr=tr, p_lb=p_lb, p_ub=p_ub, x_lb=x_lb, x_ub=x_ub,
                 p_scale=p_scale, x_scale=x_scale, free_p=free_p, free_x=free_x,
                 X0=X0, U0=U0, p0=p0.copy(), timings=timings, compiled=backend is not None)
