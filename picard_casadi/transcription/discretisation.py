"""Intervals, nodes and the data laid out per interval.

Every method (Picard, Picard-GN, IPOPT collocation) reads the same
:class:`Discretisation`, so the comparison cannot drift between methods.

Interval rule
-------------
Experiment ``e`` covers ``[t0_e, t_end_e]`` (``t_end`` is its last sample).
Interval boundaries are ``t0 + j T`` and the experiment's input breakpoints
(and, where its sampling is graded, the samples closer than ``T / 2`` to a
neighbour: :func:`mesh_breakpoints`).
A regular boundary closer than ``T / 5`` to a breakpoint or to ``t_end`` is
dropped.  So when ``T`` does not divide the horizon the last interval is
shorter than ``T`` (but at least ``T / 5``) or, where the remainder would
be shorter than that, the last interval is up to ``1.2 T`` long.

Samples
-------
A sample at time ``t_i`` belongs to the interval whose start is the last
boundary ``<= t_i`` (a sample on a boundary is the start, ``tau = 0``, of the
later interval); the last sample is the end (``tau = 1``) of the last interval.
Its model value is ``(P^n u_j)(tau_i)``, an integral up to ``tau_i`` (one row
of an integration matrix), not a lookup of the nearest node.

Inputs at nodes
---------------
Inputs are evaluated at the node times, with the first node moved inside the
interval by ``1e-7 h`` and the last one likewise, so an input that jumps on an
interval boundary is seen from the correct side.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..experiment import Experiment
from ..model import Model
from .quadrature import Quadrature

__all__ = ["Discretisation", "to_map_layout", "from_map_layout", "mesh_breakpoints",
           "GRADED_SPACING", "graded_sampling", "locate_samples"]

_INSIDE = 1e-7  # relative shift of end nodes into the interval for inputs


def to_map_layout(blocks: np.ndarray) -> np.ndarray:
    """Stack per-interval blocks ``(J, r, c)`` side by side as ``(r, J c)``.

    This is the layout ``casadi.Function.map`` expects for its inputs.
    """
    J, r, c = blocks.shape
    return np.ascontiguousarray(blocks.transpose(1, 0, 2).reshape(r, J * c))


def from_map_layout(mat: np.ndarray, J: int) -> np.ndarray:
    """Inverse of :func:`to_map_layout`: ``(r, J c)`` to ``(J, r, c)``."""
    mat = np.asarray(mat)
    r = mat.shape[0]
    return mat.reshape(r, J, -1).transpose(1, 0, 2)


def node_columns(intervals: np.ndarray, K: int) -> np.ndarray:
    """The columns of intervals ``intervals`` in a ``(r, J K)`` node layout
    (:func:`to_map_layout` of ``(J, r, K)`` blocks), interval by interval."""
    return (np.asarray(intervals)[:, None] * K + np.arange(K)[None, :]).ravel()


#: sample spacings whose 90th percentile is this many times their 10th make a
#: graded sampling (log-spaced times: 1e6 for 46 samples over 7.5 decades;
#: uniformly random times: about 22)
GRADED_SPACING = 100.0


def graded_sampling(times: np.ndarray) -> bool:
    """Whether the distinct sample times ``times`` are graded: at least four, with
    the 90th percentile of their spacings over :data:`GRADED_SPACING` times the
    10th (log-spaced times are; uniform or uniformly random ones are not)."""
    t = np.unique(np.asarray(times, float))
    if t.size < 4:
        return False
    lo, hi = np.percentile(np.diff(t), [10, 90])
    return bool(hi > GRADED_SPACING * lo)


def mesh_breakpoints(exp: Experiment, T: float) -> np.ndarray:
    """The times where ``exp``'s intervals must start: its input breakpoints and,
    where its sampling is graded (:data:`GRADED_SPACING`), every sample closer
    than ``T / 2`` to a neighbour.

    Uniform intervals of ``T`` cannot follow samples log-spaced from 1e-5: a
    user's stiff kinetics (rates up to 1e4, 46 samples from 1e-5 to 300) had
    intervals of 4.7, failed after five refinements with a rate 27 times too
    small, and the advice "a smaller T" at T = 0.01 meant 30,000 intervals,
    3.5 GB and ten minutes; with intervals starting at the samples it
    converged in 0.1 to 0.5 s.
    """
    breakpoints = np.asarray(exp.breakpoints, float)
    t = np.unique(np.asarray(exp.t, float))
    if not graded_sampling(t):
        return breakpoints
    gaps = np.diff(t)
    near = np.minimum(np.r_[np.inf, gaps], np.r_[gaps, np.inf]) < 0.5 * T
    return np.union1d(breakpoints, t[near])


def interval_boundaries(t0: float, t_end: float, T: float, breakpoints: np.ndarray) -> np.ndarray:
    """Boundaries of the Picard intervals of one experiment (see module doc)."""
    horizon = t_end - t0
    n_regular = int(np.floor(horizon / T + 1e-9))
    regular = t0 + T * np.arange(1, n_regular + 1)
    keep = regular < t_end - 0.2 * T
    for b in breakpoints:
        keep &= np.abs(regular - b) >= 0.2 * T
    inner = np.concatenate([regular[keep], np.asarray(breakpoints, float)])
    inner = np.unique(inner[(inner > t0) & (inner < t_end)])
    return np.concatenate([[t0], inner, [t_end]])


def locate_samples(b: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The interval of the boundaries ``b`` holding each time ``t``, and its
    local ``tau`` in ``[0, 1]``.

    A time at a boundary (or within round-off of it, relative to the
    interval's own length) is the start of the interval after it; the last
    boundary is the end of the last interval.  A tolerance relative to the
    interval length ``T`` instead put a sample at t = 0 of Robertson's
    kinetics sampled from 1e-5 to 1e6 (``T`` 15625, ``1e-9 T`` above 1e-5) at
    the next sample's time: the fit compared the data at 0 with the model at
    1e-5.
    """
    t = np.asarray(t, float)
    n = b.size - 1
    j = np.clip(np.searchsorted(b, t, side="right") - 1, 0, n - 1)
    tau = (t - b[j]) / (b[j + 1] - b[j])
    up = (tau > 1.0 - 1e-9) & (j < n - 1)  # a round-off below the next start
    j = np.where(up, j + 1, j)
    tau = np.where(up, 0.0, tau)
    tau = np.where(np.abs(tau) < 1e-9, 0.0, tau)
    return j, np.clip(tau, 0.0, 1.0)


def _checked_boundaries(b: np.ndarray, exp: Experiment) -> np.ndarray:
    """Given boundaries of one experiment, checked against its time span."""
    if (b.ndim != 1 or b.size < 2 or np.any(np.diff(b) <= 0)
            or not np.isclose(b[0], exp.t0) or not np.isclose(b[-1], exp.t_end)):
        raise ValueError(
            f"mesh of experiment {exp.name!r}: boundaries must increase from t0 = "
            f"{exp.t0:g} to the last sample time {exp.t_end:g}"
        )
    b = b.copy()
    b[0], b[-1] = exp.t0, exp.t_end
    return b


@dataclass
class Discretisation:
    """The problem laid out on Picard intervals, for all experiments at once.

    Parameters
    ----------
    model : Model
    experiments : list of Experiment
    T : float
        Nominal interval length.
    nodes : int
        Nodes per interval (both end points included).
    scheme : {"chebyshev", "trapezoid"}
    boundaries : list of ndarray, optional
        The interval boundaries of each experiment (its ``t0`` first, its
        last sample time last), for a mesh that is not the regular one of
        ``T`` (a refined mesh, see :mod:`picard_casadi.transcription.mesh`).  ``T`` then
        stays the nominal length.

    Notes
    -----
    Arrays are indexed by the global interval number ``j`` (intervals of
    experiment 0 first).  Sample data are padded with zero weight to ``M``,
    the largest number of samples in one interval (``samples_used``) rounded
    up to a power of two.
    """

    model: Model
    experiments: list[Experiment]
    T: float
    nodes: int
    scheme: str
    boundaries: list[np.ndarray] | None = None
    quad: Quadrature = field(init=False)

    def __post_init__(self) -> None:
        if not (np.isfinite(self.T) and self.T > 0):
            raise ValueError(f"T must be a positive interval length, got {self.T!r}")
        self.quad = Quadrature(self.scheme, self.nodes)
        K = self.quad.n_nodes
        m = self.model
        if self.boundaries is None:
            self.boundaries = [
                interval_boundaries(e.t0, e.t_end, float(self.T),
                                    mesh_breakpoints(e, float(self.T)))
                for e in self.experiments
            ]
        else:
            self.boundaries = [_checked_boundaries(np.asarray(b, float), e)
                               for b, e in zip(self.boundaries, self.experiments, strict=True)]
        counts = [b.size - 1 for b in self.boundaries]
        self.n_intervals = int(sum(counts))
        self.intervals_of = []  # slice of global intervals per experiment
        start = 0
        for c in counts:
            self.intervals_of.append(slice(start, start + c))
            start += c
        J = self.n_intervals
        self.exp_of = np.concatenate([np.full(c, e) for e, c in enumerate(counts)])
        self.t0 = np.concatenate([b[:-1] for b in self.boundaries])
        self.h = np.concatenate([np.diff(b) for b in self.boundaries])
        self.has_next = np.ones(J, dtype=bool)
        self.is_first = np.zeros(J, dtype=bool)
        for sl in self.intervals_of:
            self.has_next[sl.stop - 1] = False
            self.is_first[sl.start] = True
        self.node_times = self.t0[:, None] + self.h[:, None] * self.quad.tau[None, :]

        # inputs at the nodes, end nodes nudged inside
        shift = np.zeros(K)
        shift[0], shift[-1] = _INSIDE, -_INSIDE
        eval_times = self.node_times + self.h[:, None] * shift[None, :]
        self.node_inputs = np.zeros((J, m.nu, K))
        for e, exp in enumerate(self.experiments):
            sl = self.intervals_of[e]
            vals = exp.inputs(eval_times[sl].ravel(), m.nu)  # (nJ*K, nu)
            n_here = sl.stop - sl.start
            self.node_inputs[sl] = vals.reshape(n_here, K, m.nu).transpose(0, 2, 1)

        # samples per interval: the rows with a measured output (a row of inputs
        # only, such as a CSV's t = 0 row before the first measurement, is none)
        assign = []
        measured_rows = []
        for e, exp in enumerate(self.experiments):
            rows = np.flatnonzero(np.any(np.isfinite(exp.y), axis=1))
            measured_rows.append(rows)
            j, tau = locate_samples(self.boundaries[e], exp.t[rows])
            assign.append((j + self.intervals_of[e].start, tau))
        per_interval = np.zeros(J, dtype=int)
        for jj, _ in assign:
            np.add.at(per_interval, jj, 1)
        # padded to a power of two: the compiled functions of one interval depend
        # on M, so a refined mesh (fewer samples per interval) rarely needs new ones
        #: sample slots in use: the most samples an interval has (the rest of
        #: the padded ``M`` hold no data)
        self.samples_used = max(1, int(per_interval.max()))
        M = 1 << (self.samples_used - 1).bit_length()
        self.M = M
        self.sample_tau = np.zeros((J, M))
        self.sample_times = np.repeat(self.t0[:, None], M, axis=1).astype(float)
        # the slots without a sample hold the interval start's inputs: their
        # outputs carry no weight but must be finite (log(dose c / V) with a
        # dose of 0 made the whole objective "not finite at the start")
        self.sample_inputs = np.repeat(self.node_inputs[:, :, :1], M, axis=2)
        self.y = np.zeros((J, m.ny, M))
        self.mask = np.zeros((J, m.ny, M))
        #: each measurement's relative weight ``1 / sigma_i^2`` from its
        #: experiment's ``sigma`` (1 where not given, 0 in empty slots); the
        #: objective's weight of a value is this times its output's weight
        self.sample_weights = np.zeros((J, m.ny, M))
        self.sample_exp = np.full((J, M), -1)
        self.sample_index = np.full((J, M), -1)
        #: per experiment, the interval and slot of each sample, and its row
        self._slots: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for e, (jj, tau) in enumerate(assign):
            exp = self.experiments[e]
            rows = measured_rows[e]
            # the samples are in time order, so an interval's are consecutive:
            # each takes the next slot of its interval
            slot = np.arange(jj.size) - np.searchsorted(jj, jj, side="left")
            self._slots.append((jj, slot, rows))
            self.sample_tau[jj, slot] = tau
            self.sample_times[jj, slot] = exp.t[rows]
            self.sample_inputs[jj, :, slot] = exp.inputs(exp.t[rows], m.nu)
            self.sample_exp[jj, slot] = e
            self.sample_index[jj, slot] = rows
        self._fill_empty_slots(per_interval)
        self._lay_out_data()
        self.sample_rows = self.quad.integration_rows(self.sample_tau.ravel()).reshape(
            J, M, K)
        #: ``N`` of the objective: the sample times where an output is measured
        #: (a time with inputs only, a CSV row without outputs, is not a sample)
        self.n_samples_total = max(1, int(np.any(self.mask > 0, axis=1).sum()))
        self.n_measurements = int(self.mask.sum())

    def _fill_empty_slots(self, per_interval: np.ndarray) -> None:
        """Slots without a sample sit at the interval's last sample (its middle
        where it has none), with the inputs there: their outputs carry no
        weight but must be finite, and at the interval's start a state may be
        0 where an output takes its log."""
        J, M = self.sample_tau.shape
        short = np.flatnonzero(per_interval < M)
        for j in short:
            used = int(per_interval[j])
            tau = self.sample_tau[j, used - 1] if used else 0.5
            self.sample_tau[j, used:] = tau
            self.sample_times[j, used:] = self.t0[j] + tau * self.h[j]
        if not self.model.nu:
            return
        # the inputs at those times, one evaluation per experiment
        for e, exp in enumerate(self.experiments):
            here = short[self.exp_of[short] == e]
            if not here.size:
                continue
            used = per_interval[here]
            u = exp.inputs(self.sample_times[here, used], self.model.nu)  # (n, nu)
            for j, k, row in zip(here, used, u):
                self.sample_inputs[j, :, k:] = row[:, None]

    def _lay_out_data(self) -> None:
        """The experiments' measurements, masks and own weights in the sample slots."""
        for e, (jj, slot, rows) in enumerate(self._slots):
            exp = self.experiments[e]
            ok = np.isfinite(exp.y[rows])
            self.y[jj, :, slot] = np.where(ok, exp.y[rows], 0.0)
            self.mask[jj, :, slot] = ok
            self.sample_weights[jj, :, slot] = np.where(ok, exp.value_weights()[rows], 0.0)

    def replace_data(self, experiments: list[Experiment]) -> None:
        """Take the measurements and their ``sigma`` from ``experiments``: the same
        experiments (times, inputs, which values are measured) with other data
        (the likelihood's rounds of a noise formula); the mesh stays."""
        if len(experiments) != len(self.experiments) or any(
                a.t.shape != b.t.shape or not np.array_equal(a.t, b.t)
                or not np.array_equal(np.isfinite(a.y), np.isfinite(b.y))
                for a, b in zip(experiments, self.experiments)):
            raise ValueError("replace_data: the experiments must have the same times and "
                             "measured values as the discretisation's")
        self.experiments = list(experiments)
        self._lay_out_data()

    # ------------------------------------------------------------------ helpers
    @property
    def K(self) -> int:
        """Nodes per interval."""
        return self.quad.n_nodes

    @property
    def n_experiments(self) -> int:
        """Number of experiments."""
        return len(self.experiments)

    def interval_of_time(self, e: int, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Global interval index and local ``tau`` of times of experiment ``e``."""
        b = self.boundaries[e]
        t = np.atleast_1d(np.asarray(t, float))
        j = np.clip(np.searchsorted(b, t, side="right") - 1, 0, b.size - 2)
        tau = np.clip((t - b[j]) / (b[j + 1] - b[j]), 0.0, 1.0)
        return j + self.intervals_of[e].start, tau

    def measured_values(self) -> list[np.ndarray]:
        """Per output, the finite measurements over all experiments."""
        return [self.y[:, k, :][self.mask[:, k, :] > 0] for k in range(self.model.ny)]

    def sample_sigma(self, sigma: np.ndarray) -> np.ndarray:
        """Each value's noise level ``(J, ny, M)`` for outputs' levels ``sigma``
        ``(ny,)``: its output's over the root of its own weight."""
        w = self.sample_weights
        return np.asarray(sigma, float)[None, :, None] / np.sqrt(np.where(w > 0, w, 1.0))

    def weighted_ssr_per_output(self, G: np.ndarray) -> np.ndarray:
        """Each output's sum of ``sample_weights * (y - G)^2`` for outputs ``G``
        laid out like :attr:`y` (NaN stays NaN: a diverged fit is reported)."""
        with np.errstate(all="ignore"):
            return np.where(self.mask > 0, self.sample_weights * (self.y - G) ** 2,
                            0.0).sum(axis=(0, 2))

    def log_sample_weights(self) -> float:
        """``sum log sample_weights`` over the measurements: the likelihood's
        constant of per-measurement sigmas (0 where none are given)."""
        w = self.sample_weights[self.mask > 0]
        return float(np.sum(np.log(w)))

    def output_rms(self) -> np.ndarray:
        """Each output's root mean square over its measurements (0 without any)."""
        count = np.maximum(self.mask.sum(axis=(0, 2)), 1)
        return np.sqrt((self.mask * self.y ** 2).sum(axis=(0, 2)) / count)

    def mesh_summary(self) -> dict[str, float | int]:
        """Interval count and the shortest and longest interval."""
        return {"intervals": int(self.n_intervals), "shortest": float(self.h.min()),
                "longest": float(self.h.max())}

    def describe(self) -> str:
        """One line: intervals, nodes, scheme, samples."""
        uniform = np.allclose(self.h, self.h[0], rtol=1e-9) if self.n_intervals else True
        size = f"T={self.T:g}" if uniform else (
            f"lengths {self.h.min():.3g}..{self.h.max():.3g}")
        return (
            f"{self.n_intervals} intervals ({size}) x {self.K} {self.scheme} "
            f"nodes over {self.n_experiments} experiment(s), "
            f"{self.n_samples_total} sample times, {self.n_measurements} measurements"
        )
