"""The information about the parameters and initial states from each
interval's own sensitivities, held together by the continuity constraints,
for a model that is unstable along the data.

:func:`~picard_casadi.analysis.uncertainty.chain_sensitivities` chains the
intervals' sensitivities into the outputs' derivatives in ``(p, x0)``.
Along a trajectory that grows like ``e^{lambda t}`` (an open-loop-unstable
plant flown or driven in closed loop, its input recorded), every chained
column turns towards the growing mode, and the information ``J^T J`` keeps
what the data say of the other directions only below round-off: a
cart-pendulum identified from 4 s of closed-loop data got every standard
error infinite and a note that the data "do not determine M, m, l, b",
though the estimates were within 1-11 % of the truth.

Here the chain is not formed.  The linearised problem keeps every interval
start ``x_j`` as an unknown, each interval's outputs depending on its own
start and ``p`` (bounded sensitivities), and the continuity
``x_{j+1} = x_j^end(x_j, p)`` as linear constraints: the information about
``theta = (p, x0)`` is the inverse of the ``theta`` block of the inverse of
the constrained system's KKT matrix, solved by a sparse LU factorisation.
In exact arithmetic both routes give the same matrix; on a stable model the
chain is used (cheaper, and as accurate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import casadi as ca
import numpy as np

from ..transcription.problem import Setup

__all__ = ["chain_growth", "iterate_growth", "interval_information", "interval_shift",
           "IntervalShift", "GROWTH_LIMIT"]

#: a chain of the intervals' state sensitivities whose entries grow past this
#: (from the identity at each experiment's start) is handled by
#: :func:`interval_information`: the chained columns keep the directions they
#: do not grow in to about ``1e-16 * growth`` of their size
GROWTH_LIMIT = 1e6
#: a direction of the correlations of ``(p, x0)`` with a variance below this
#: fraction of the largest is held at it: determined to round-off (a
#: cart-pendulum's: -4e-13), its information at most 1e6 times the rest,
#: far from the identifiability threshold (1e-12); a standard error moves by
#: at most 5e-7 of its size
PRECISION_FLOOR = 1e-6


def chain_growth(setup: Setup, sens: dict[str, np.ndarray]) -> float:
    """The largest entry of the chained state sensitivities ``d x_j / d x0``
    over every experiment (``inf`` where it overflows)."""
    nx = setup.disc.model.nx
    largest = 1.0
    with np.errstate(all="ignore"):
        for sl in setup.disc.intervals_of:
            S = np.eye(nx)
            for j in range(sl.start, sl.stop):
                S = sens["dend"][j][:, :nx] @ S
                size = float(np.max(np.abs(S), initial=0.0))
                if not math.isfinite(size):
                    return math.inf
                largest = max(largest, size)
    return largest


def iterate_growth(setup: Setup, X: np.ndarray, U: np.ndarray, p: np.ndarray) -> float:
    """:func:`chain_growth` at an iterate that is not a solution (interval
    starts ``X``, node values ``U``, parameters ``p``): the sensitivities
    evaluated there; ``inf`` where they are not finite."""
    with np.errstate(all="ignore"):
        sens = setup.tr.interval_sensitivities(X, setup.tr.nodes_np(U), p)
    return chain_growth(setup, sens)


class _Kkt:
    """The linearised problem's KKT matrix: the Gauss-Newton Hessian in the
    free parameters and every interval's start, with the continuity
    constraints and the known initial states as equality constraints."""

    def __init__(self, setup: Setup, sens: dict[str, np.ndarray], blocks: list[np.ndarray],
                 columns: list[tuple[str, int, int]]) -> None:
        disc = setup.disc
        nx = disc.model.nx
        self.nx = nx
        self.p_cols = [i for kind, _, i in columns if kind == "p"]
        self.n_p = len(self.p_cols)
        #: the free parameters, then every interval's start
        self.n_w = self.n_p + disc.n_intervals * nx
        #: each continuity constraint's first row (of interval j's end)
        self.joins: dict[int, int] = {}
        rows: list[np.ndarray] = []
        cols: list[np.ndarray] = []
        vals: list[np.ndarray] = []

        def put(r: np.ndarray, c: np.ndarray, v: np.ndarray) -> None:
            rr, cc = np.meshgrid(r, c, indexing="ij")
            rows.append(rr.ravel())
            cols.append(cc.ravel())
            vals.append(np.asarray(v, float).ravel())

        for j in range(disc.n_intervals):  # the Gauss-Newton Hessian, interval by interval
            M = self.own_columns(blocks[j])
            if M.shape[0]:
                idx = self.variables(j)
                put(idx, idx, M.T @ M)
        n_c = 0
        theta_of: dict[tuple[str, int, int], int] = {
            ("p", -1, i): k for k, i in enumerate(self.p_cols)}
        # the unknowns in the order of time (each interval's constraints, then
        # its start; the parameters last): a banded matrix with a border, which
        # the sparse LU factorises in 0.3 s where in the order of kinds its
        # fill took 27 s (400 intervals of 4 states)
        order: list[np.ndarray] = []
        for e, sl in enumerate(disc.intervals_of):
            own = {i for kind, ex, i in columns if kind == "x0" and ex == e}
            for i in range(nx):
                theta_of[("x0", e, i)] = int(self.starts(sl.start)[i])
                if i not in own:  # a known initial state stays where it is
                    c = np.array([self.n_w + n_c])
                    put(c, self.starts(sl.start)[i:i + 1], np.ones((1, 1)))
                    put(self.starts(sl.start)[i:i + 1], c, np.ones((1, 1)))
                    order.append(c)
                    n_c += 1
            order.append(self.starts(sl.start))
            for j in range(sl.start, sl.stop - 1):  # x_{j+1} - x_j^end(x_j, p) = 0
                dend = sens["dend"][j]
                c = self.n_w + n_c + np.arange(nx)
                block = np.hstack([np.eye(nx), -dend[:, :nx], -dend[:, nx:][:, self.p_cols]])
                idx = np.r_[self.starts(j + 1), self.starts(j), np.arange(self.n_p)]
                put(c, idx, block)
                put(idx, c, block.T)
                self.joins[j] = self.n_w + n_c
                order += [c, self.starts(j + 1)]
                n_c += nx
        n = self.n_w + n_c
        self.n = n
        order.append(np.arange(self.n_p))
        #: the unknowns' places in the factorised order
        self.order = np.concatenate(order).astype(np.int64)
        place = np.empty(n, np.int64)
        place[self.order] = np.arange(n)
        key = (place[np.concatenate(rows).astype(np.int64)] * n
               + place[np.concatenate(cols).astype(np.int64)])
        unique, where = np.unique(key, return_inverse=True)
        summed = np.bincount(where, weights=np.concatenate(vals), minlength=unique.size)
        #: the matrix in the factorised order
        self.K = ca.DM.triplet((unique // n).tolist(), (unique % n).tolist(), ca.DM(summed),
                               n, n)
        #: where each of ``columns`` is among the unknowns
        self.theta = [theta_of[col] for col in columns]

    def starts(self, j: int) -> np.ndarray:
        """Interval ``j``'s start among the unknowns."""
        return self.n_p + j * self.nx + np.arange(self.nx)

    def variables(self, j: int) -> np.ndarray:
        """Interval ``j``'s unknowns: its start, then the free parameters."""
        return np.r_[self.starts(j), np.arange(self.n_p)]

    def own_columns(self, A: np.ndarray) -> np.ndarray:
        """An interval's rows (every column of ``(x_j, p)``) on its unknowns."""
        return np.hstack([A[:, :self.nx], A[:, self.nx:][:, self.p_cols]])

    def solve(self, rhs: np.ndarray) -> np.ndarray | None:
        """``K^-1 rhs`` (rows in the unknowns' own order) by a sparse LU
        factorisation with partial pivoting (CSparse), or None where it fails
        or is not finite."""
        try:
            solver = ca.Linsol("interval_information", "csparse", self.K.sparsity())
            Z = np.asarray(solver.solve(self.K, ca.DM(rhs[self.order])))
        except RuntimeError:
            return None
        if not np.all(np.isfinite(Z)):
            return None
        out = np.empty_like(Z)
        out[self.order] = Z
        return out


def interval_information(setup: Setup, sens: dict[str, np.ndarray],
                         blocks: list[np.ndarray], columns: list[tuple[str, int, int]]
                         ) -> np.ndarray | None:
    """The information ``J^T J`` about ``columns`` (``("p", -1, i)`` and
    ``("x0", e, i)``, as :func:`~picard_casadi.analysis.uncertainty.chain_sensitivities`
    orders them) from the intervals' own sensitivities and the continuity
    constraints, without chaining them.

    ``blocks`` are each interval's measured, weighted rows of ``sens["dG"]``
    (its derivative in ``(x_j, p)``, every column), as
    :func:`~picard_casadi.analysis.uncertainty.measured_rows` gives them;
    ``sens["dend"]`` the end states' derivatives.  Returns None where the
    system is singular or the solve not finite (a direction no data
    determine: the chained route names it).
    """
    kkt = _Kkt(setup, sens, blocks, columns)
    cov = _covariance(kkt)
    return None if cov is None else _floored_inverse(cov)


def _covariance(kkt: _Kkt, Z: np.ndarray | None = None) -> np.ndarray | None:
    """The ``theta`` block of ``K^-1`` (``Z``: ``K^-1`` times the unit
    columns of ``theta``, solved here where not given), or None where it is
    not finite or not positive on its diagonal."""
    if Z is None:
        rhs = np.zeros((kkt.n, len(kkt.theta)))
        rhs[kkt.theta, np.arange(len(kkt.theta))] = 1.0
        Z = kkt.solve(rhs)
    if Z is None:
        return None
    cov = Z[kkt.theta, :]
    cov = 0.5 * (cov + cov.T)
    if not (np.all(np.isfinite(cov)) and np.all(np.diag(cov) > 0)):
        return None
    return cov


def _floored_inverse(cov: np.ndarray) -> np.ndarray | None:
    """The information from a covariance, inverted through the correlations,
    each direction's variance at least :data:`PRECISION_FLOOR` of the largest:
    along the growing mode the data fix the initial states to ``e^{-lambda
    T}`` of the rest, below round-off (a cart-pendulum's: a correlation
    eigenvalue of -4e-13), which inverted whole gave negative information."""
    scale = np.sqrt(np.diag(cov))
    try:
        evals, evecs = np.linalg.eigh(cov / scale[:, None] / scale[None, :])
    except np.linalg.LinAlgError:
        return None
    floor = PRECISION_FLOOR * float(evals[-1])
    F = (evecs / np.maximum(evals, floor)) @ evecs.T / scale[:, None] / scale[None, :]
    return 0.5 * (F + F.T) if np.all(np.isfinite(F)) else None


@dataclass
class IntervalShift:
    """The nearest solution of the linearised model to a fitted one whose
    intervals the model does not quite follow (:func:`interval_shift`).

    Attributes
    ----------
    delta : ndarray (J, ny, M)
        The fitted outputs minus that solution's.
    theta_shift : ndarray (n_theta,)
        Its move of ``theta`` (``columns``' order).
    shift : float
        The move's length in standard errors (the residual standard
        deviation ``s`` and the intervals' information).
    theta_se : ndarray (n_theta,)
        Each quantity's standard error (``inf`` where not finite).
    """

    delta: np.ndarray
    theta_shift: np.ndarray
    shift: float
    theta_se: np.ndarray


def interval_shift(setup: Setup, sens: dict[str, np.ndarray], blocks: list[np.ndarray],
                   columns: list[tuple[str, int, int]], e: np.ndarray, e_rows: list[np.ndarray],
                   d: np.ndarray, gaps: np.ndarray, s: float) -> IntervalShift | None:
    """The discretisation certificate's shift, interval by interval, for a
    model unstable along the data.

    The fitted solution's outputs are ``e`` above the model's integrated
    over each interval from its fitted start, and its ends ``d`` above the
    model's.  The model's optimum near the fit solves the linearised
    problem with every interval start an unknown: the residual changes by
    ``sqrt(w) e`` and each continuity constraint is open by the fitted gap
    less ``d_j``.  Carried
    from ``x0`` through the chain instead, an unstable model's end defects
    grew with its modes: an unstable oscillator over 8 s (growth 8e6) was
    "4e3 standard errors" from its optimum, 1e-3 in fact.

    Parameters
    ----------
    setup : Setup
    sens : dict
        The solution's interval sensitivities (``dG``, ``dend``).
    blocks : list of ndarray
        Each interval's measured, weighted rows of ``sens["dG"]``.
    columns : list of (kind, experiment, index)
        ``theta``.
    e : ndarray (J, ny, M)
        The output defects (zero where not measured).
    e_rows : list of ndarray
        Each interval's ``e`` at its measured rows, weighted (``blocks``' rows).
    d : ndarray (J, nx)
        The end defects.
    gaps : ndarray (J, nx)
        The fitted solution's own continuity gaps, each interval's end minus
        the next interval's start (zero at an experiment's last): the model's
        solution closes them too.
    s : float
        The residual standard deviation.

    Returns
    -------
    IntervalShift or None
        None where the system is singular or the solve not finite.
    """
    disc = setup.disc
    kkt = _Kkt(setup, sens, blocks, columns)
    n_th = len(kkt.theta)
    rhs = np.zeros((kkt.n, n_th + 1))
    rhs[kkt.theta, np.arange(n_th)] = 1.0
    for j in range(disc.n_intervals):
        M = kkt.own_columns(blocks[j])
        if M.shape[0]:
            rhs[kkt.variables(j), n_th] += M.T @ e_rows[j]
        if j in kkt.joins:  # the model's end is d_j short of the fitted end
            rhs[kkt.joins[j] + np.arange(kkt.nx), n_th] = gaps[j] - d[j]
    Z = kkt.solve(rhs)
    cov = None if Z is None else _covariance(kkt, Z[:, :n_th])
    F = None if cov is None else _floored_inverse(cov)
    if F is None or not np.all(np.isfinite(Z[:, n_th:])):
        return None
    w = Z[:, n_th]
    nx = kkt.nx
    delta = np.array(e, float)
    dG = sens["dG"]
    for j in range(disc.n_intervals):
        dx = w[kkt.starts(j)]
        dp = w[np.arange(kkt.n_p)]
        change = (np.einsum("moa,a->om", dG[j][..., :nx], dx)
                  + np.einsum("moa,a->om", dG[j][..., nx:][..., kkt.p_cols], dp))
        delta[j] = e[j] - change
    delta = np.where(disc.mask > 0, delta, 0.0)
    theta_shift = w[kkt.theta]
    with np.errstate(over="ignore", invalid="ignore"):  # (inf where the model diverges)
        shift = float(np.sqrt(max(float(theta_shift @ F @ theta_shift), 0.0))) / s
    return IntervalShift(delta=delta, theta_shift=theta_shift, shift=shift,
                         theta_se=s * np.sqrt(np.diag(cov)))
