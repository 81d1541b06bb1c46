"""The starting point of every method: interval starts ``x_j`` and node values.

The start matters as much as the step (measurements: ``docs/design.md``):

* states that are outputs (``y[k]`` is ``x[i]``) take, at each interval
  start, a local quadratic regression of their measurements (tricube
  weights over a window of ``max(T/2, 2 sample spacings)`` each side), not
  a raw noisy sample; beyond a window of the first or last measurement (a
  state measured late) the state counts as unmeasured.  Where the sampling
  is graded (log-spaced times,
  :func:`~picard_casadi.transcription.discretisation.graded_sampling`) the
  window is two of its own spacings each side wherever it lies (the fit is
  made against the sample index, :func:`graded_regressions`) and the fit
  stays within the range of the window's samples;
* the other states come from a CVODES simulation from the experiment's
  ``x0`` with ``p0`` (not run where every state is measured); where that
  simulation fails they are propagated interval by interval instead
  (``"anchored"``: the interval's fixed point from the data-anchored start,
  its end starting the next interval).
  ``guess="shooting"`` takes every state from the simulation (a continuous
  start);
* on every interval the node values are the fixed point ``U = P U`` from the
  interval start (Picard sweeps, Newton steps where the sweeps do not
  contract), the sweeps starting from the simulation's values at the nodes
  (moved to the interval's start) where the simulation ran, else from
  constant nodes; where neither settles, the nodes keep that first
  iterate; where the fixed point leaves the state box by more than the
  box's width within one interval, they are held constant.  The sweeps'
  changes are measured against each state's typical magnitude (its starts,
  the box's half-width and the simulation's values), not against its start
  alone, and a fixed point has settled when the last change is also
  negligible against its own values.  Where every start is
  known before any fixed point (from the simulation, or every state
  measured) the sweeps of all of an experiment's intervals are one mapped
  call, each interval taking the steps it would take on its own.

Every ``x_j`` is clipped into the state box.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import casadi as ca
import numpy as np

from ..runtime.interrupts import reraise_if_interrupted
from .discretisation import Discretisation, graded_sampling
from .fixed_point_system import FixedPointSystem
from .interval_functions import IntervalFunctions
from .sensitivity import PointDerivatives, fixed_point_system, newton_fixed_point_step

__all__ = ["GUESS_NOTE", "RUNAWAY_HEAD", "RUNAWAY", "initial_guess", "measured_state_series",
           "local_regression",
           "local_regressions", "graded_regressions", "GUESSES"]

#: how every note of the initial guess begins
GUESS_NOTE = "initial guess: "
#: a measured state whose simulation from the start grows this many times
#: its data's largest value within the record is named (days read as hours:
#: a tumour's volume grown to 1e26 against 2000, an objective of 3e52, and
#: minutes of silence before IPOPT hung) ...
RUNAWAY = 1e6
#: ... in a note that begins so (warned of before the fit)
RUNAWAY_HEAD = "at the start (p0) the model runs away from the data"
#: ``"auto"`` is estimate's: "simulation", then "anchored" where that never joins up
GUESSES = ("auto", "simulation", "anchored", "shooting")
#: up to this many samples the local regressions take every sample (weight zero
#: outside a point's window); beyond it only the window's, found by bisection
GATHER_ALL_SAMPLES = 4096
#: CVODES tolerances of the initial-guess simulation
GUESS_RTOL = 1e-6
GUESS_ATOL = 1e-8
#: where the sampling is graded, each regression's half-window in sample
#: spacings, its own wherever it lies: a window of T / 2 (the mesh's) spanned
#: ten decades of log-spaced samples, and the fits at the first interval
#: starts of a stiff kinetics to 1e6 were their mean (A = 0.93 at t = 1e-5,
#: where it is 1), the later ones quadratics carried between sparse samples
#: (A and B down to -0.2 where the data are 0 to 0.01)
GRADED_WINDOW = 2.01


class WholeMesh(Protocol):
    """Functions of every interval of the mesh at once (the transcription's,
    compiled where it is), for the fixed points of the guess."""

    def picard(self, X: np.ndarray, U: np.ndarray, p: np.ndarray) -> np.ndarray:
        """One Picard application, ``(J, nx, K)``, from starts ``(J, nx)``."""

    def newton_step(self, X: np.ndarray, U: np.ndarray, p: np.ndarray,
                    only: np.ndarray | None = None) -> np.ndarray:
        """Node values after one Newton step on the intervals ``only`` marks."""


def local_regression(ts: np.ndarray, vs: np.ndarray, t: float, half_width: float,
                     degree: int = 2) -> float:
    """Value at ``t`` of a tricube-weighted local polynomial fit of ``(ts, vs)``."""
    if ts.size == 1:
        return float(vs[0])
    d = np.abs(ts - t)
    w = half_width
    inside = d < w
    while inside.sum() < degree + 2 and w < 1e3 * half_width + (ts[-1] - ts[0]):
        w *= 1.5
        inside = d < w
    if inside.sum() < degree + 1:
        return float(np.interp(t, ts, vs))
    tt, vv = ts[inside] - t, vs[inside]
    wt = (1.0 - (np.abs(tt) / w) ** 3) ** 3
    deg = min(degree, int(inside.sum()) - 1)
    V = np.vander(tt, deg + 1, increasing=True) * np.sqrt(wt)[:, None]
    coef, *_ = np.linalg.lstsq(V, vv * np.sqrt(wt), rcond=None)
    return float(coef[0])


def local_regressions(ts: np.ndarray, vs: np.ndarray, t: np.ndarray, half_width: float,
                      degree: int = 2) -> np.ndarray:
    """:func:`local_regression` at every point of ``t`` (the same values to round-off).

    The points whose window holds enough samples for the full degree are fitted
    together (a batched QR of the weighted Vandermonde rows, a few hundred
    points at a time); the others, near a sparse stretch of data, one by one.
    ``vs`` may hold several series sampled at the same times ``ts``, one per
    row ``(s, len(ts))``: they share the windows and the factorisation, and
    the result is ``(s, len(t))``.
    """
    t = np.asarray(t, float)
    vs = np.asarray(vs, float)
    series = vs.reshape(-1, ts.size)
    distinct, where = np.unique(ts, return_inverse=True)
    if distinct.size < ts.size:
        # replicates: their mean at each time (repeated times made the windows'
        # Vandermonde rows rank-deficient: "Singular matrix" from the guess)
        sums = np.zeros((series.shape[0], distinct.size))
        np.add.at(sums.T, where, series.T)
        series = sums / np.bincount(where)[None, :]
        ts = distinct
        vs = series.reshape(vs.shape[:-1] + (ts.size,))
    out = np.empty((series.shape[0], t.size))
    if ts.size == 1 or t.size == 0:
        out[:] = series[:, :1] if ts.size else np.nan
        return out.reshape(vs.shape[:-1] + (t.size,))
    cap = 1e3 * half_width + (ts[-1] - ts[0])
    n = ts.size

    def window(tc: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The samples with ``|ts - tc| < w`` (``ts`` increases): ``[lo, hi)``."""
        return (np.searchsorted(ts, tc - w, side="right"),
                np.searchsorted(ts, tc + w, side="left"))

    # each point's window found by bisection, and only its samples gathered: over
    # every sample, 50,000 samples on 5,000 intervals took 89 s (a user's report)
    w_all = np.full(t.size, float(half_width))
    lo_all, hi_all = window(t, w_all)
    while True:  # widen where too few samples, as local_regression does
        grow = (hi_all - lo_all < degree + 2) & (w_all < cap)
        if not grow.any():
            break
        w_all[grow] *= 1.5
        lo_all[grow], hi_all[grow] = window(t[grow], w_all[grow])
    full_all = hi_all - lo_all >= degree + 1
    for i in np.flatnonzero(~full_all):
        for k, v in enumerate(series):
            out[k, i] = local_regression(ts, v, float(t[i]), half_width, degree)
    points = np.flatnonzero(full_all)
    if n <= GATHER_ALL_SAMPLES:
        # every sample, weight zero outside the window: the arithmetic (and so the
        # round-off) of the fits these starts were tuned on; a stiff kinetics fit
        # took another path to max_iter from starts 1e-16 apart
        lo_all, hi_all = np.zeros_like(lo_all), np.full_like(hi_all, n)
    width = int((hi_all - lo_all)[points].max(initial=1))
    chunk = max(1, 2 ** 20 // width)  # about 8 MB of Vandermonde rows at a time
    for start in range(0, points.size, chunk):
        sel = points[start:start + chunk]
        tc, w, lo, hi = t[sel], w_all[sel], lo_all[sel], hi_all[sel]
        idx = lo[:, None] + np.arange(width)[None, :]
        valid = idx < hi[:, None]
        idx = np.minimum(idx, n - 1)
        tt = ts[idx] - tc[:, None]
        d = np.abs(tt)
        sw = np.where(valid & (d < w[:, None]),
                      (1.0 - np.minimum(d / w[:, None], 1.0) ** 3) ** 1.5, 0.0)
        V = tt[:, :, None] ** np.arange(degree + 1) * sw[:, :, None]
        q, r = np.linalg.qr(V)
        # Q^T (sw v) of every series: (points, degree + 1, series)
        weighted = (series[:, idx] * sw[None, :, :]).transpose(1, 2, 0)
        qb = np.matmul(q.transpose(0, 2, 1), weighted)
        out[:, sel] = np.linalg.solve(r, qb)[:, 0, :].T
    return out.reshape(vs.shape[:-1] + (t.size,))


def _sample_index(distinct: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Times ``t`` on the scale of the sample index: linear through
    ``(distinct[k], k)``, carried beyond the ends with the end spacings."""
    n = distinct.size
    s = np.interp(t, distinct, np.arange(n, dtype=float))
    s = np.where(t < distinct[0], (t - distinct[0]) / (distinct[1] - distinct[0]), s)
    return np.where(t > distinct[-1], n - 1 + (t - distinct[-1]) / (distinct[-1] - distinct[-2]),
                    s)


def graded_regressions(ts: np.ndarray, vs: np.ndarray, t: np.ndarray, degree: int = 2
                       ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`local_regressions` for graded sampling (at least two distinct times).

    The fits are made against the sample index (the times mapped by
    :func:`_sample_index`), each over :data:`GRADED_WINDOW` spacings either
    side, so a window follows the sampling's density wherever it lies, and
    each fit is clipped into the range of the samples of its window (a
    quadratic through four log-spaced samples overshoots between them).

    Returns
    -------
    fits : ndarray (s, len(t)), or (len(t),) for one series
    outside : ndarray of bool (len(t),)
        The points beyond a window of the first or last sample (no fit there).
    """
    vs = np.asarray(vs, float)
    series = vs.reshape(-1, np.asarray(ts).size)
    distinct, where = np.unique(ts, return_inverse=True)
    n = distinct.size
    index = np.arange(n, dtype=float)[where]
    s = _sample_index(distinct, np.asarray(t, float))
    fits = local_regressions(index, series, s, GRADED_WINDOW, degree)
    # each distinct time's smallest and largest value (replicates), then the
    # window's: the indices within GRADED_WINDOW of each point (at most five)
    low = np.full((series.shape[0], n), np.inf)
    high = np.full((series.shape[0], n), -np.inf)
    np.minimum.at(low.T, where, series.T)
    np.maximum.at(high.T, where, series.T)
    first = np.clip(np.ceil(s - GRADED_WINDOW), 0, n - 1).astype(int)
    last = np.clip(np.floor(s + GRADED_WINDOW), 0, n - 1).astype(int)
    last = np.maximum(last, first)
    lo = np.full(fits.shape, np.inf)
    hi = np.full(fits.shape, -np.inf)
    for offset in range(int(2 * GRADED_WINDOW) + 2):
        k = np.minimum(first + offset, n - 1)
        inside = (first + offset <= last)[None, :]
        lo = np.where(inside, np.minimum(lo, low[:, k]), lo)
        hi = np.where(inside, np.maximum(hi, high[:, k]), hi)
    fits = np.clip(fits, lo, hi)
    outside = (s < -GRADED_WINDOW) | (s > n - 1 + GRADED_WINDOW)
    return fits.reshape(vs.shape[:-1] + (fits.shape[-1],)), outside


def measured_state_series(disc: Discretisation, e: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """For experiment ``e``: state index -> (times, values) of its measurements."""
    model = disc.model
    exp = disc.experiments[e]
    series: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for k, i in enumerate(model.output_state_index):
        if i is None or i in series:
            continue
        col = exp.y[:, k]
        ok = np.isfinite(col)
        if ok.sum() >= 1:
            series[i] = (exp.t[ok], model.output_as_state(k, col[ok]))
    return series


def _distinct_times(node_times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The increasing distinct times of ``node_times`` (an interval's last
    node and the next one's first are one time, within round-off) and where
    each node's time is among them."""
    flat = node_times.ravel()
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    gap = np.diff(ordered)
    new = np.concatenate([[True], gap > 1e-12 * max(1.0, float(np.abs(ordered).max()))])
    index = np.cumsum(new) - 1
    where = np.empty(flat.size, dtype=int)
    where[order] = index
    return ordered[new], where.reshape(node_times.shape)


def _interval_fixed_points(fns: IntervalFunctions, f_der, system: FixedPointSystem,
                           disc: Discretisation, js: np.ndarray, starts: np.ndarray,
                           p0: np.ndarray, max_sweeps: int, typical: np.ndarray,
                           whole: WholeMesh | None = None, first: np.ndarray | None = None
                           ) -> tuple[np.ndarray, np.ndarray] | None:
    """Solve ``U = P U`` on the intervals ``js`` from the starts ``starts``.

    Picard sweeps, switching to Newton steps on an interval whose sweeps do
    not contract (or diverge: it restarts from the first iterate; a
    diverging Newton step gives up).  Changes are measured relative to ``max(|x_i|, 1e-3
    typical_i)``: relative to ``|x_i|`` alone, a state that starts at exactly
    zero made every change look like divergence, and such an interval started
    constant.  The sweeps of all the intervals are one mapped call; each
    interval keeps its own state (sweeping, Newton, settled, failed) and
    takes the same steps as on its own.  Where ``js`` is every interval of
    the mesh and ``whole`` is given, its functions (the transcription's,
    compiled where it is) make the sweeps and one batched Newton step for
    all the intervals in Newton mode.  Where the mapped call fails, each
    interval is solved alone (one that fails alone keeps the first iterate).
    ``typical`` is ``(nx,)``, or ``(n, nx)``: one row per interval.
    ``first`` ``(n, nx, K)``, where given, is the first iterate instead of
    the constant nodes (a simulation's values at the nodes), and what a
    diverging interval restarts from and an unsettled one keeps: an
    interval with a fast transient (a calcium spike) whose sweeps do not
    settle then keeps values the model takes, where constant nodes were
    mapped by ``P`` off the model's domain (a negative concentration under
    a non-integer power).

    Returns
    -------
    U : ndarray (n, nx, K)
        The fixed points; where not settled ``first``, or constant.
    settled : ndarray of bool (n,)
    """
    n, nx = starts.shape
    K = disc.K
    const = (np.repeat(starts[:, :, None], K, axis=2) if first is None
             else np.array(first, float))
    U = const.copy()
    scale = np.maximum(np.maximum(np.abs(starts), 1e-3 * typical), 1e-8)[:, :, None]
    if whole is not None and not (n == disc.n_intervals and np.array_equal(js, np.arange(n))):
        whole = None  # its functions take every interval of the mesh
    if whole is None:
        mapped = fns.picard.map(n)
        t0, h = disc.t0[js][None, :], disc.h[js][None, :]
        inputs = np.concatenate([disc.node_inputs[j] for j in js], axis=1)

        def picard(U: np.ndarray) -> np.ndarray:
            out = mapped(starts.T, U.transpose(1, 0, 2).reshape(nx, n * K), p0, t0, h, inputs)
            return np.asarray(out).reshape(nx, n, K).transpose(1, 0, 2)
    else:
        def picard(U: np.ndarray) -> np.ndarray:
            return whole.picard(starts, U, p0)
    prev = np.full(n, np.inf)
    newton = np.zeros(n, dtype=bool)
    settled = np.zeros(n, dtype=bool)
    failed = np.zeros(n, dtype=bool)
    with np.errstate(all="ignore"):
        for k in range(max_sweeps):
            active = ~(settled | failed)
            if not active.any():
                break
            new = U.copy()
            if np.any(active & ~newton):
                try:
                    out = picard(U)
                except RuntimeError as err:
                    reraise_if_interrupted(err)
                    if n == 1:
                        break
                    parts = [_interval_fixed_points(
                        fns, f_der, system, disc, js[i:i + 1], starts[i:i + 1], p0, max_sweeps,
                        typical if np.ndim(typical) == 1 else typical[i],
                        first=None if first is None else first[i:i + 1]) for i in range(n)]
                    return (np.concatenate([u for u, _ in parts]),
                            np.concatenate([ok for _, ok in parts]))
                sweep = active & ~newton
                new[sweep] = out[sweep]
            stepping = active & newton
            if whole is not None and stepping.any():
                # one batched Newton step for every interval in Newton mode
                # (a singular interval's step is NaN: it fails below)
                try:
                    stepped = whole.newton_step(starts, U, p0, stepping)
                    new[stepping] = stepped[stepping]
                    stepping = np.zeros(n, dtype=bool)
                except RuntimeError as err:
                    reraise_if_interrupted(err)  # then interval by interval, below
            for i in np.flatnonzero(stepping):
                j = js[i]
                try:
                    new[i] = newton_fixed_point_step(
                        f_der, ca.DM(disc.node_times[j][None, :]), ca.DM(disc.node_inputs[j]),
                        system, disc.h[j:j + 1], starts[i][None, :], U[i][None], p0)[0][0]
                except RuntimeError as err:
                    reraise_if_interrupted(err)
                    failed[i] = True
            active &= ~failed
            moved = np.abs(new - U)
            change = np.max(moved / scale, axis=(1, 2))
            # settled: no change relative to the values themselves either (a
            # state with no typical magnitude keeps the tiny floor of `scale`)
            size = np.maximum(scale, np.abs(new).max(axis=2, keepdims=True))
            change_own = np.max(moved / size, axis=(1, 2))
            bad = active & ~(np.isfinite(change) & (change <= 1e6))
            # a diverging Newton step gives up; diverging sweeps restart as Newton
            failed |= bad & newton
            restart = bad & ~newton
            newton |= restart
            U[restart] = const[restart]
            good = active & ~bad
            newton |= good & ~newton & (k >= 2) & (change > 0.5 * prev)
            U[good], prev[good] = new[good], change[good]
            settled |= good & (change_own < 1e-10)
    U[~settled] = const[~settled]
    return U, settled


@dataclass
class _ExperimentPlan:
    """Where one experiment's interval starts come from (:func:`_experiment_plan`)."""

    sl: slice  # its intervals
    x0: np.ndarray
    typical: np.ndarray  # each state's typical magnitude
    start: Callable[[int, np.ndarray], np.ndarray]  # (interval, previous end) -> start
    starts: np.ndarray | None  # every start, where known before any fixed point
    first: np.ndarray | None  # (intervals, nx, K): the simulation's nodes from each start

    @property
    def batched(self) -> bool:
        """Whether every start is known before any fixed point."""
        return self.starts is not None

    @property
    def js(self) -> np.ndarray:
        """Its intervals' indices."""
        return np.arange(self.sl.start, self.sl.stop)


def _experiment_plan(disc: Discretisation, e: int, x0: np.ndarray, p0: np.ndarray,
                     estimate_x0: np.ndarray, lo: np.ndarray, hi: np.ndarray, typical: np.ndarray,
                     strategy: str, notes: list[str]) -> _ExperimentPlan:
    """Experiment ``e``'s interval starts: the local regressions of its measured
    states and, for the others, its simulation from ``x0`` with ``p0`` or
    (``start(j, carry)``) the previous interval's end ``carry``; ``starts``
    where every start is known before any fixed point."""
    from ..errors import SimulationError
    from ..simulate import simulate

    model = disc.model
    sl = disc.intervals_of[e]
    exp = disc.experiments[e]
    x0 = np.asarray(x0, float).copy()
    # the regressions of the states measured at the same times share their fits
    groups: list[tuple[np.ndarray, list[int], list[np.ndarray]]] = []
    for i, (ts, vs) in measured_state_series(disc, e).items():
        group = next((g for g in groups if np.array_equal(g[0], ts)), None)
        if group is None:
            groups.append((ts, [i], [vs]))
        else:
            group[1].append(i)
            group[2].append(vs)
    measured = {}
    t0s = disc.t0[sl]
    # states first measured after the clock starts: their initial value is the
    # experiment's own x0 where it gives one, not the regression carried back
    # (a virologist's loads from day 1, growing a thousandfold a day, with t0 =
    # 0: -9.9e6 for 1, and single shooting's CVODES failed at the start)
    own_start: set[int] = set()
    for ts, states, values in groups:
        if exp.x0 is not None and t0s[0] < ts[0]:
            own_start.update(states)
        distinct = np.unique(ts)  # replicates share a time
        # no extrapolation beyond a window of the data: a state measured only
        # from t = 12 on had its quadratic carried back to t = 0 (-16 to +30
        # where the truth is 0.1; a user's report); there the state is unmeasured
        if graded_sampling(distinct):
            fits, outside = graded_regressions(ts, np.array(values), t0s)
        else:
            spacing = float(np.median(np.diff(distinct))) if distinct.size > 1 else disc.T
            half_width = max(0.5 * disc.T, 2.01 * spacing)
            fits = local_regressions(ts, np.array(values), t0s, half_width)
            outside = (t0s < ts[0] - half_width) | (t0s > ts[-1] + half_width)
        fits[:, outside] = np.nan
        measured.update(zip(states, fits))

    held = ~np.asarray(estimate_x0, bool)  # the known initial states (estimate_x0 mask)

    def start_of(j: int, carry: np.ndarray) -> np.ndarray:
        x = carry.copy()
        for i, vals in measured.items():
            if np.isfinite(vals[j - sl.start]):
                x[i] = vals[j - sl.start]
        x = np.clip(x, lo, hi)
        if j == sl.start:
            x[held] = x0[held]
            for i in own_start:
                x[i] = x0[i]
        return x

    traj = nodes = None
    # the simulation supplies the unmeasured states: with every state
    # measured it would be overwritten entirely (docs/design.md)
    unmeasured = len(measured) < model.nx or any(
        not np.all(np.isfinite(vals)) for vals in measured.values())
    if strategy == "shooting" or (strategy == "simulation" and unmeasured):
        try:
            # a start, not an answer: CVODES at 1e-6 (fa18-roll-beta:
            # 0.5 s against 1.7 s at the default 1e-10)
            times, where = _distinct_times(disc.node_times[sl])
            # a failure is not located: its message is not used (locating it
            # took 2.4 of a PEtab start's 5.8 s, Boehm's uniform 0)
            at_nodes = simulate(model, x0, p0, times, exp, t0=exp.t0,
                                rtol=GUESS_RTOL, atol=GUESS_ATOL, locate=False)
            nodes = at_nodes[where].transpose(0, 2, 1)  # (intervals, nx, K)
            traj = nodes[:, :, 0]
            notes.extend(_runaway_notes(model, exp.name, measured, nodes))
        except (SimulationError, ValueError):
            notes.append(f"{GUESS_NOTE}the simulation of {exp.name!r} with p0 "
                         "failed; its states are propagated interval by interval")
    if traj is None:
        start = start_of  # anchored: unmeasured states carried from the previous interval
    else:
        def start(j: int, carry: np.ndarray) -> np.ndarray:
            """Interval ``j``'s start where the simulation supplies it."""
            if strategy == "shooting":
                x = np.clip(traj[j - sl.start], lo, hi)
                if j == sl.start:
                    x[held] = x0[held]
                return x
            return start_of(j, traj[j - sl.start])
    # the simulation's magnitudes too: an unmeasured state that starts at
    # zero (a pendulum's rate) otherwise has no scale but the 1e-8 floor,
    # and its first sweep looked like divergence
    typical_e = typical if traj is None else np.maximum(
        typical, np.max(np.abs(np.where(np.isfinite(traj), traj, 0.0)), axis=0))
    known = traj is not None or (len(measured) == model.nx and not unmeasured)
    starts = np.array([start(j, x0) for j in range(sl.start, sl.stop)]) if known else None
    first = None
    if nodes is not None and starts is not None and np.all(np.isfinite(nodes)):
        # the simulation's shape through each interval, from that interval's start
        first = nodes + (starts - nodes[:, :, 0])[:, :, None]
    return _ExperimentPlan(sl, x0, typical_e, start, starts, first)


def _runaway_notes(model, name: str, measured: dict[int, np.ndarray],
                   nodes: np.ndarray) -> list[str]:
    """Notes on the measured states whose simulation from the start (``nodes``,
    (intervals, nx, K)) grows :data:`RUNAWAY` times their data's largest
    value (``measured``: each one's regressions at the interval starts)."""
    found = []
    for i, vals in measured.items():
        data = float(np.nanmax(np.abs(vals))) if np.any(np.isfinite(vals)) else 0.0
        with np.errstate(invalid="ignore"):
            sim = float(np.nanmax(np.abs(nodes[:, i, :]))) if nodes.size else 0.0
        if data > 0.0 and sim > RUNAWAY * data:
            found.append(f"{model.x_names[i]} reaches {sim:.3g} where its data reach "
                         f"{data:.3g}")
    if not found:
        return []
    return [f"{RUNAWAY_HEAD} in {name!r} ({'; '.join(found)}): the times in another unit "
            "than the model's rates (hours for days, seconds for minutes?), a rate far too "
            "fast in p0, or the data in another unit; the fit may take long or fail"]


def initial_guess(
    disc: Discretisation,
    fns: IntervalFunctions,
    p0: np.ndarray,
    x0s: list[np.ndarray],
    estimate_x0: bool | np.ndarray,
    x_lb: np.ndarray,
    x_ub: np.ndarray,
    max_sweeps: int = 40,
    strategy: str = "simulation",
    whole: WholeMesh | None = None,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Build ``X`` (J, nx) and ``U`` (J, nx, K) as described in the module doc.

    Parameters
    ----------
    disc : Discretisation
    fns : IntervalFunctions
        Supplies the single-interval Picard map and trajectory.
    p0 : ndarray (np,)
    x0s : list of ndarray (nx,)
        Initial-state guess (or known value) per experiment.
    estimate_x0 : bool or ndarray of bool (nx,)
        Which initial states are estimated; the others are kept at ``x0s``.
    x_lb, x_ub : ndarray (nx,)
        State box for the ``x_j``.
    max_sweeps : int
        Fixed-point iterations per interval.
    strategy : {"simulation", "anchored", "shooting"}
        Where the unmeasured states come from (see the module doc).
    whole : WholeMesh, optional
        The mesh's own functions of all intervals (the transcription's):
        where every start is known before any fixed point, in every
        experiment, they solve all the fixed points at once.

    Returns
    -------
    X, U : ndarray
    notes : list of str
        What fell back (a failed simulation, intervals held constant).
    """
    if strategy not in GUESSES:
        raise ValueError(f"guess must be one of {GUESSES}, got {strategy!r}")
    model = disc.model
    nx, K = model.nx, disc.K
    J = disc.n_intervals
    X = np.zeros((J, nx))
    U = np.zeros((J, nx, K))
    notes: list[str] = []
    span = np.where(np.isfinite(x_ub - x_lb), x_ub - x_lb, np.inf)
    margin = np.where(np.isfinite(span), 1e-6 * span, 0.0)
    lo, hi = x_lb + margin, x_ub - margin
    f_der = PointDerivatives(model, K, 1).functions["f_derivatives"]
    system = fixed_point_system(model, disc.quad.integration)
    p0 = np.asarray(p0, float)
    # each state's typical magnitude: its starts and the box's half-width
    typical = np.max(np.abs(np.asarray(x0s, float)), axis=0)
    typical = np.maximum(typical, np.where(np.isfinite(span), 0.5 * span, 0.0))
    failed_total = 0
    mask = np.broadcast_to(np.asarray(estimate_x0, bool), (disc.model.nx,))
    plans = [_experiment_plan(disc, e, x0s[e], p0, mask, lo, hi, typical, strategy, notes)
             for e in range(len(disc.intervals_of))]
    # every start known before any fixed point (from the simulation, or every
    # state measured): the fixed points of all those intervals at once
    batched = [plan for plan in plans if plan.batched]
    batch: dict[int, tuple[np.ndarray, bool]] = {}
    first = None
    if batched:
        js = np.concatenate([plan.js for plan in batched])
        starts = np.concatenate([plan.starts for plan in batched])
        rows = np.concatenate([np.broadcast_to(plan.typical, plan.starts.shape)
                               for plan in batched])
        if any(plan.first is not None for plan in batched):
            first = np.concatenate([
                plan.first if plan.first is not None
                else np.repeat(plan.starts[:, :, None], K, axis=2) for plan in batched])
        Ub, ok = _interval_fixed_points(fns, f_der, system, disc, js, starts, p0, max_sweeps,
                                        rows, whole, first)
        batch = {int(j): (Ub[i], bool(ok[i])) for i, j in enumerate(js)}
    for plan in plans:
        carry = plan.x0.copy()
        for j in range(plan.sl.start, plan.sl.stop):
            reraise_if_interrupted()  # one lost by CasADi's wrapper on the last interval
            x = plan.start(j, carry)
            X[j] = x
            if j in batch:
                U[j], ok_j = batch[j]
            else:  # this start needs the previous interval's end: alone
                Uj, settled = _interval_fixed_points(fns, f_der, system, disc,
                                                     np.array([j]), x[None, :], p0,
                                                     max_sweeps, plan.typical)
                U[j], ok_j = Uj[0], bool(settled[0])
            if ok_j and np.any((U[j] < (x_lb - span)[:, None]) | (U[j] > (x_ub + span)[:, None])):
                # the interval leaves the state box by more than its width
                # within one T: a violent fixed point from a noisy start
                U[j], ok_j = np.repeat(x[:, None], K, axis=1), False
            failed_total += not ok_j
            carry = U[j][:, -1].copy()
    if failed_total:
        notes.append(
            f"{GUESS_NOTE}the fixed point with p0 did not settle on {failed_total} of "
            f"{J} intervals; their nodes start "
            + ("as the simulation's" if batch and first is not None else "constant")
        )
    return X, U, notes
