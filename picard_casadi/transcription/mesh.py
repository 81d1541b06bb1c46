"""The Picard intervals: the first choice of ``T``, refinement, and moving a solution.

The first mesh is regular (length ``T``, cut at the input breakpoints, see
:mod:`picard_casadi.transcription.discretisation`).  When the user gives no ``T``,
:func:`default_T` takes the shorter of two time scales:

* the data's: each experiment measured at two times or more gets at least
  ``MIN_INTERVALS`` intervals and at least one per swing of its most active
  measured signal (a swing is a
  rise or fall by more than four noise levels and 5 % of the signal's
  range, counted on the raw samples with that hysteresis, so noise does
  not count);
* the dynamics': ``0.5 / rho`` with ``rho`` the spectral radius of
  ``df/dx`` at each experiment's start with ``p0`` (scale-free: a norm
  changes with the units of the states, the eigenvalues do not), but never
  below an eighth of the data's, so a poor ``p0`` cannot ask for thousands
  of intervals, and ignored where it is zero (``p0 = 0``).

Neither depends on the time unit.  Where the model is stiff on that first
mesh at ``p0`` even so (its fastest mode decays within a fraction of an
interval: ``T`` is at the floor, and Radau's nodes damp the mode whatever
``T`` is), ``picard-gn`` searches on the data's time scale, whose mesh is
up to eight times coarser, and then continues from the solution it found on
the first mesh (:func:`search_time_scale`, :func:`polish_boundaries`), so
the answer is never on a coarser mesh than the rule above gives.

The discretisation certificate
(:mod:`picard_casadi.analysis.certificate`) then decides whether the mesh is fine
enough; :func:`refined_boundaries` bisects the intervals it marks, and
:func:`transfer_solution` carries a solution onto the new mesh through each
interval's interpolating polynomial, so the next solve starts where the
last one ended.
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from ..experiment import Experiment
from ..model import Model
from .discretisation import Discretisation, interval_boundaries, mesh_breakpoints

__all__ = ["default_T", "data_time_scale", "dynamics_time_scale", "refined_boundaries",
           "transfer_solution", "search_time_scale", "polish_boundaries", "MIN_INTERVALS"]

MIN_INTERVALS = 8
_SWING_NOISE_LEVELS = 4.0
_SWING_RANGE_FRACTION = 0.05


def _swings(values: np.ndarray) -> int:
    """Rises and falls of a sampled signal beyond a hysteresis (noise and 5 % of range)."""
    v = values[np.isfinite(values)]
    if v.size < 5:
        return 1
    d2 = v[2:] - 2.0 * v[1:-1] + v[:-2]
    noise = float(np.sqrt(np.mean(d2 * d2) / 6.0))
    span = float(v.max() - v.min())
    h = max(_SWING_NOISE_LEVELS * noise, _SWING_RANGE_FRACTION * span)
    if h <= 0.0:
        return 1
    count, hi, lo, direction = 0, v[0], v[0], 0
    for x in v[1:]:
        if direction >= 0:
            hi = max(hi, x)
        if direction <= 0:
            lo = min(lo, x)
        if direction >= 0 and hi - x > h:
            count += direction > 0
            direction, lo = -1, x
        elif direction <= 0 and x - lo > h:
            count += direction < 0
            direction, hi = 1, x
    return count + 1


def data_time_scale(experiments: list[Experiment]) -> float:
    """The longest ``T`` the data allow: ``horizon / max(MIN_INTERVALS, swings)``,
    smallest over the experiments measured at two times or more (one measured
    at a single time, such as a PEtab condition measured at ``t = 0`` only,
    has no time scale of its own); the longest horizon over ``MIN_INTERVALS``
    where none is."""
    T = np.inf
    for e in experiments:
        measured = np.any(np.isfinite(e.y), axis=1)
        if np.unique(e.t[measured]).size < 2:
            continue
        swings = max((_swings(e.y[:, k]) for k in range(e.y.shape[1])), default=1)
        T = min(T, (e.t_end - e.t0) / max(MIN_INTERVALS, swings))
    if not np.isfinite(T):
        T = max(e.t_end - e.t0 for e in experiments) / MIN_INTERVALS
    return float(T)


def dynamics_time_scale(model: Model, experiments: list[Experiment], p0: np.ndarray) -> float:
    """``0.5 / rho(df/dx)`` at each experiment's start with ``p0``; ``inf`` where ``rho`` is 0."""
    jac = ca.Function("dfdx", [model.t, model.x, model.p, model.u],
                      [ca.jacobian(model.rhs, model.x)])
    rho = 0.0
    for e in experiments:
        u0 = e.inputs([e.t0], model.nu)[0]
        with np.errstate(all="ignore"):
            A = np.asarray(jac(e.t0, e.x0_guess(model), p0, u0), float)
        if np.all(np.isfinite(A)):
            rho = max(rho, float(np.abs(np.linalg.eigvals(A)).max(initial=0.0)))
    return 0.5 / rho if rho > 0.0 else np.inf


def default_T(model: Model, experiments: list[Experiment], p0: np.ndarray) -> float:
    """The first interval length when the user gives none (see the module doc).

    Returns
    -------
    float
        ``min(T_data, max(T_dynamics, T_data / 8))``.
    """
    t_data = data_time_scale(experiments)
    t_dyn = dynamics_time_scale(model, experiments, np.asarray(p0, float))
    return float(min(t_data, max(t_dyn, t_data / 8.0)))


def search_time_scale(experiments: list[Experiment], T: float) -> float | None:
    """The interval length of a stiff start's search mesh, or None.

    Called where the model is stiff at ``p0`` on the first mesh of length
    ``T`` (:func:`default_T`): the data's time scale
    (:func:`data_time_scale`) where it is longer than ``T``, else None (the
    first mesh is already the data's).  The search needs the mesh that
    represents the data, not the start's fast mode, which Radau's nodes damp
    on any mesh; every iteration on it costs a fraction of one on the first
    mesh (docs/certificate.md, "The first mesh").
    """
    t_data = data_time_scale(experiments)
    return t_data if t_data > T * (1.0 + 1e-9) else None


def polish_boundaries(disc: Discretisation, T: float) -> list[np.ndarray]:
    """Each experiment's boundaries of ``disc`` with those of the regular mesh
    of length ``T`` added: a search mesh's solution continues on a mesh no
    coarser than the first mesh of length ``T`` (nor than ``disc``, which
    may hold bisections of its own)."""
    out = []
    for b, e in zip(disc.boundaries, disc.experiments):
        f = interval_boundaries(e.t0, e.t_end, float(T), mesh_breakpoints(e, float(T)))
        merged = np.union1d(b, f)
        # boundaries closer than round-off of the horizon are one boundary
        span = float(merged[-1] - merged[0])
        keep = np.r_[True, np.diff(merged) > 1e-9 * span]
        merged = merged[keep]
        merged[-1] = b[-1]
        out.append(merged)
    return out


def refined_boundaries(disc: Discretisation, marked: np.ndarray) -> list[np.ndarray]:
    """Each experiment's boundaries with every marked interval split.

    A marked interval is split at the kinks of the experiment's inputs
    inside it (samples read linearly: each sample time, where the
    interpolant's slope jumps and no polynomial of the interval can follow
    it), or bisected where it holds none.  So sampled inputs get the mesh
    they need where the certificate asks for it: the flight-test textbook's
    unstable aircraft (elevator sampled at 0.05 s) was not certified after
    five bisections and needed ``breakpoints=t`` by hand.

    Parameters
    ----------
    disc : Discretisation
    marked : ndarray (J,) of bool
        Intervals to split (global numbering).
    """
    out = []
    for e, sl in enumerate(disc.intervals_of):
        b = disc.boundaries[e]
        exp = disc.experiments[e]
        kinks = np.unique(exp.t[1:-1]) if exp.kinks_between_breakpoints() else np.zeros(0)
        new: list[float] = []
        for k in range(b.size - 1):
            if not marked[sl.start + k]:
                continue
            tol = 1e-9 * (b[k + 1] - b[k])
            inside = kinks[(kinks > b[k] + tol) & (kinks < b[k + 1] - tol)]
            new.extend(inside if inside.size else [0.5 * (b[k] + b[k + 1])])
        out.append(np.sort(np.concatenate([b, new])))
    return out


def _interpolate(disc: Discretisation, U: np.ndarray, e: int, t: np.ndarray) -> np.ndarray:
    """Values ``(len(t), nx)`` of the interval polynomials of experiment ``e`` at ``t``."""
    j, tau = disc.interval_of_time(e, t)
    rows = disc.quad.interpolation_rows(tau)  # (len(t), K)
    return np.einsum("tk,tak->ta", rows, U[j])


def transfer_solution(old: Discretisation, X: np.ndarray, U: np.ndarray,
                      new: Discretisation) -> tuple[np.ndarray, np.ndarray]:
    """Interval starts and node values on ``new`` from a solution on ``old``.

    Each new node takes the value of the old interval's interpolating
    polynomial at its time; each new interval start is its first node (a
    continuous solution stays continuous up to the interpolation error).

    Returns
    -------
    X : ndarray (J_new, nx), U : ndarray (J_new, nx, K)
    """
    nx, K = old.model.nx, new.K
    U_new = np.empty((new.n_intervals, nx, K))
    for e, sl in enumerate(new.intervals_of):
        times = new.node_times[sl].ravel()
        U_new[sl] = _interpolate(old, U, e, times).reshape(sl.stop - sl.start, K, nx
                                                            ).transpose(0, 2, 1)
        # an old interval start keeps its value exactly (a known x0 stays known)
        for jn in range(sl.start, sl.stop):
            jo = np.flatnonzero(np.isclose(old.t0[old.intervals_of[e]], new.t0[jn],
                                           rtol=0.0, atol=1e-12 * max(1.0, abs(new.t0[jn]))))
            if jo.size:
                U_new[jn, :, 0] = X[old.intervals_of[e].start + jo[0]]
    return U_new[:, :, 0].copy(), U_new
