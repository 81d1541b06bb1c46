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
the constrained system's KKT matrix, solved by a sparse QR factorisation.
In exact arithmetic both routes give the same matrix; on a stable model the
chain is used (cheaper, and as accurate).
"""

from __future__ import annotations

import math

import casadi as ca
import numpy as np

from ..transcription.problem import Setup

__all__ = ["chain_growth", "interval_information", "GROWTH_LIMIT"]

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
    disc = setup.disc
    nx = disc.model.nx
    p_cols = [i for kind, _, i in columns if kind == "p"]
    n_p = len(p_cols)
    n_w = n_p + disc.n_intervals * nx  # the free parameters, then every interval's start
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []

    def put(r: np.ndarray, c: np.ndarray, v: np.ndarray) -> None:
        rr, cc = np.meshgrid(r, c, indexing="ij")
        rows.append(rr.ravel())
        cols.append(cc.ravel())
        vals.append(np.asarray(v, float).ravel())

    def starts(j: int) -> np.ndarray:
        return n_p + j * nx + np.arange(nx)

    for j in range(disc.n_intervals):  # the Gauss-Newton Hessian, interval by interval
        A = blocks[j]
        if A.shape[0]:
            M = np.hstack([A[:, :nx], A[:, nx:][:, p_cols]])
            idx = np.r_[starts(j), np.arange(n_p)]
            put(idx, idx, M.T @ M)
    n_c = 0
    theta_of: dict[tuple[str, int, int], int] = {("p", -1, i): k for k, i in enumerate(p_cols)}
    for e, sl in enumerate(disc.intervals_of):
        own = {i for kind, ex, i in columns if kind == "x0" and ex == e}
        for i in range(nx):
            theta_of[("x0", e, i)] = int(starts(sl.start)[i])
            if i not in own:  # a known initial state stays where it is
                c = np.array([n_w + n_c])
                put(c, starts(sl.start)[i:i + 1], np.ones((1, 1)))
                put(starts(sl.start)[i:i + 1], c, np.ones((1, 1)))
                n_c += 1
        for j in range(sl.start, sl.stop - 1):  # x_{j+1} - x_j^end(x_j, p) = 0
            dend = sens["dend"][j]
            c = n_w + n_c + np.arange(nx)
            block = np.hstack([np.eye(nx), -dend[:, :nx], -dend[:, nx:][:, p_cols]])
            idx = np.r_[starts(j + 1), starts(j), np.arange(n_p)]
            put(c, idx, block)
            put(idx, c, block.T)
            n_c += nx
    n = n_w + n_c
    key = np.concatenate(rows).astype(np.int64) * n + np.concatenate(cols)
    unique, where = np.unique(key, return_inverse=True)
    summed = np.bincount(where, weights=np.concatenate(vals), minlength=unique.size)
    K = ca.DM.triplet((unique // n).tolist(), (unique % n).tolist(), ca.DM(summed), n, n)
    theta = [theta_of[col] for col in columns]
    rhs = np.zeros((n, len(theta)))
    rhs[theta, np.arange(len(theta))] = 1.0
    try:
        solver = ca.Linsol("interval_information", "qr", K.sparsity())
        Z = np.asarray(solver.solve(K, ca.DM(rhs)))
    except RuntimeError:
        return None
    cov = Z[theta, :]
    cov = 0.5 * (cov + cov.T)
    scale = np.sqrt(np.diag(cov))
    if not (np.all(np.isfinite(cov)) and np.all(scale > 0)):
        return None
    # the inverse through the correlations, each direction's variance at
    # least PRECISION_FLOOR of the largest: along the growing mode the data
    # fix the initial states to e^{-lambda T} of the rest, below round-off
    # (a cart-pendulum's: a correlation eigenvalue of -4e-13), which
    # inverted whole gave negative information
    try:
        evals, evecs = np.linalg.eigh(cov / scale[:, None] / scale[None, :])
    except np.linalg.LinAlgError:
        return None
    floor = PRECISION_FLOOR * float(evals[-1])
    F = (evecs / np.maximum(evals, floor)) @ evecs.T / scale[:, None] / scale[None, :]
    return 0.5 * (F + F.T) if np.all(np.isfinite(F)) else None
