"""Dense least-squares building blocks of the condensed Gauss-Newton step.

The step of :mod:`picard_casadi.methods.condensed` minimises a damped linear
least-squares model in the condensed unknowns ``theta = (dp, dx0)`` subject
to bounds on ``theta`` and on the interval starts it implies.  These are its
pieces, each a function of dense arrays only:

* :func:`compress_rows`: each interval's data rows reduced to the triangular
  factor of ``[Jx Jp r]`` before condensing;
* :func:`triangular_factor`: the condensed rows reduced the same way, an
  experiment at a time;
* :func:`least_squares_solution`: a least-squares solve by QR, by SVD where
  the matrix is (nearly) rank deficient;
* :func:`nearest_feasible`: the smallest ``theta`` that meets the bounds
  (a dual active-set method);
* :func:`least_violation`: a feasible start for the bounds, or the least
  violation where there is none;
* :func:`working_set_step`: the minimiser on a working set of active bounds
  (null-space method, least squares on ``A``, never ``A^T A``);
* :func:`bounded_least_squares`: the primal active-set method built from
  these two;
* :func:`room`: how far a step can go before a bound blocks it;
* :func:`reach_cosine`: the stationarity measure.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["bounded_least_squares", "compress_rows", "least_squares_solution",
           "least_violation", "nearest_feasible", "reach_cosine", "room", "triangular_factor",
           "working_set_step"]


def working_set_step(A: np.ndarray, b: np.ndarray, damp: np.ndarray, active: np.ndarray,
                      theta: np.ndarray, Cw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The step to the minimiser on a working set, and the working bounds' multipliers.

    Minimises ``q(theta + s) = |A (theta + s) + b|^2 / 2 + (theta + s)^T
    diag(damp) (theta + s) / 2`` over ``s`` with ``Cw s = 0`` and ``s = 0``
    on the inactive entries.  Null-space method: ``s = Z w`` with ``Z`` an
    orthonormal basis of the null space of the working rows (from an SVD),
    so the working bounds hold exactly; ``w`` is a least-squares solution
    (QR/SVD of ``[A Z; sqrt(damp) Z]``), whose accuracy depends on the
    condition of ``A``, not of ``A^T A``.  (A KKT matrix solved by least
    squares violated a working bound by 1e-2 on the F/A-18's unweighted
    loss.)  The multipliers ``nu`` solve ``Cw^T nu = -grad q(theta + s)``.
    """
    n = A.shape[1]
    cols = np.flatnonzero(active)
    if Cw.shape[0]:
        _, sv, Vt = np.linalg.svd(Cw[:, cols])
        rank = int(np.count_nonzero(sv > 1e-12 * max(float(sv[0]), 1e-300)))
        Za = Vt[rank:].T
    else:
        Za = np.eye(cols.size)
    Z = np.zeros((n, Za.shape[1]))
    Z[cols] = Za
    root = np.sqrt(damp)
    step = np.zeros(n)
    if Z.shape[1]:
        M = np.vstack([A @ Z, root[:, None] * Z])
        rhs = -np.concatenate([A @ theta + b, root * theta])
        step = Z @ least_squares_solution(M, rhs)
    if not Cw.shape[0]:
        return step, np.zeros(0)
    new = theta + step
    grad = A.T @ (A @ new + b) + damp * new
    nu = np.linalg.lstsq(Cw[:, cols].T, -grad[cols], rcond=None)[0]
    return step, nu


#: a triangular factor whose diagonal spans more than this is treated as
#: rank deficient and the least-squares problem solved by SVD instead
QR_RANK_RATIO = 1e-12


def least_squares_solution(M: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """A least-squares solution of ``M w ~ rhs`` from a QR factorisation.

    Where the triangular factor's diagonal shows ``M`` (nearly) rank
    deficient, the minimum-norm solution of an SVD (``numpy.linalg.lstsq``)
    instead.  Both work on ``M``, never ``M^T M``; the QR costs a fraction
    of the SVD (docs/performance.md, "The step's NumPy work, trimmed").
    """
    n = M.shape[1]
    # what LAPACK does with NaN, without its print to the terminal ("On entry
    # to DLASCL parameter number 4 had an illegal value"): numpy raises for
    # the matrix, and returns NaN for the right-hand side
    if not np.all(np.isfinite(M)):
        raise np.linalg.LinAlgError("the least-squares system is not finite")
    if not np.all(np.isfinite(rhs)):
        return np.full(n, np.nan)
    if M.shape[0] <= n or n == 0:
        return np.linalg.lstsq(M, rhs, rcond=None)[0]
    # the triangular factor of [M rhs] holds R and Q^T rhs; Q is never formed
    Rb = np.linalg.qr(np.column_stack([M, rhs]), mode="r")
    R = Rb[:n, :n]
    diag = np.abs(np.diagonal(R))
    if not (np.all(np.isfinite(Rb)) and diag.min() > QR_RANK_RATIO * diag.max()):
        return np.linalg.lstsq(M, rhs, rcond=None)[0]
    return np.linalg.solve(R, Rb[:n, n])


def nearest_feasible(C: np.ndarray, d: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                     scale: np.ndarray, max_changes: int | None = None) -> np.ndarray | None:
    """The smallest ``theta`` with ``lo <= C theta + d <= hi``, or ``None``.

    Smallest in the norm ``|sqrt(scale) theta|`` (entries with ``scale = 0``
    weighted like the largest), found by the dual active-set method of
    Goldfarb and Idnani (Math. Programming 27, 1983) for ``min |phi|^2 / 2``
    with ``phi = sqrt(scale) theta``: from ``theta = 0`` (the unconstrained
    minimiser) the most violated bound (by its distance in ``phi``) joins
    the working set, and the point moves to the nearest one that meets the
    working bounds as equalities, dropping a bound whose multiplier would
    turn negative.  Each change costs a QR of the working rows (at most
    ``n`` of them) and one product with ``C``: made for a few unknowns and
    many bounds, as in the condensed step (``fa18-roll-rud``: 31 unknowns,
    1246 bounded rows, found in 0.1-0.8 ms where Newton's method on the
    violation took 3-7 ms; docs/performance.md).

    Returns ``None`` where the bounds contradict each other (no ``theta``
    meets them all), the data are not finite, or no point is found within
    ``max_changes`` working-set changes (default ``4 n + 50``).  A bound is
    met when violated by at most ``1e-12`` of the size of its row's values.
    """
    n = C.shape[1]
    if not (np.all(np.isfinite(C)) and np.all(np.isfinite(d))):
        return None
    if C.shape[0] == 0:
        return np.zeros(n)  # no bounds: theta = 0 meets them
    w = np.sqrt(np.maximum(np.asarray(scale, float), 0.0))
    w = np.where(w > 0, w, max(float(np.max(w, initial=0.0)), 1.0))
    Cs = C / w[None, :]
    norm = np.sqrt(np.einsum("ij,ij->i", Cs, Cs))
    size = np.maximum.reduce([np.ones_like(d), np.abs(d),
                              np.where(np.isfinite(lo), np.abs(lo), 0.0),
                              np.where(np.isfinite(hi), np.abs(hi), 0.0)])
    lo_t, hi_t = lo - 1e-12 * size, hi + 1e-12 * size
    max_changes = 4 * n + 50 if max_changes is None else max_changes
    phi = np.zeros(n)
    rows: list[int] = []  # the working bounds: row of C and side (+1 lower, -1 upper)
    sides: list[float] = []
    u = np.zeros(0)  # their multipliers (>= 0)
    Q, R = np.zeros((n, 0)), np.zeros((0, 0))
    changes = 0
    while True:
        v = Cs @ phi + d
        with np.errstate(divide="ignore", invalid="ignore"):
            below = np.where(v < lo_t, (lo - v) / norm, 0.0)
            above = np.where(v > hi_t, (v - hi) / norm, 0.0)
        i_lo, i_hi = int(np.argmax(below)), int(np.argmax(above))
        if below[i_lo] <= 0.0 and above[i_hi] <= 0.0:
            return phi / w
        if not np.isfinite(below[i_lo] + above[i_hi]):
            return None  # a violated row with no entries: no theta moves it
        row, side = (i_lo, 1.0) if below[i_lo] >= above[i_hi] else (i_hi, -1.0)
        a = side * Cs[row]
        slack = side * (v[row] - (lo[row] if side > 0 else hi[row]))  # < 0: violated
        u_new = 0.0
        while True:  # move until the new bound holds, dropping bounds on the way
            changes += 1
            if changes > max_changes:
                return None
            qa = Q.T @ a
            r = np.linalg.solve(R, qa) if rows else np.zeros(0)
            z = a - Q @ qa  # the direction in the working rows' null space
            za = float(z @ a)
            pos = r > 0.0
            t2, k = np.inf, -1
            if pos.any():
                ratios = np.where(pos, u / np.where(pos, r, 1.0), np.inf)
                k = int(np.argmin(ratios))
                t2 = float(ratios[k])
            if za <= 1e-12 * float(a @ a):
                if k < 0:
                    return None  # the new bound contradicts the working ones
                u, u_new = u - t2 * r, u_new + t2  # a dual step only
            else:
                t1 = -slack / za
                t = min(t1, t2)
                phi = phi + t * z
                u, u_new = u - t * r, u_new + t
                if t1 <= t2:
                    rows.append(row)
                    sides.append(side)
                    u = np.append(u, u_new)
                    Q, R = _working_factor(Cs, rows, sides)
                    break
                slack += t * za
            del rows[k], sides[k]
            u = np.delete(u, k)
            Q, R = _working_factor(Cs, rows, sides)


def _working_factor(Cs: np.ndarray, rows: list[int], sides: list[float]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``Q, R`` of the working rows' normals as columns (``(n, k)``, ``(k, k)``)."""
    if not rows:
        return np.zeros((Cs.shape[1], 0)), np.zeros((0, 0))
    return np.linalg.qr((Cs[rows] * np.asarray(sides)[:, None]).T)


def least_violation(C: np.ndarray, d: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                    scale: np.ndarray, max_rounds: int = 50) -> np.ndarray:
    """A ``theta`` with ``lo <= C theta + d <= hi``, or the least violation of it.

    The condensed QP needs a feasible start.  ``theta = 0`` (the gaps closed
    with ``p`` and ``x0`` held) is one unless closing the gaps moves a later
    interval start out of the box, and near a solution with an active state
    bound it does: the previous interval ends outside the box, and only a
    change of ``p`` or ``x0`` brings the start back in.  The start is the
    smallest feasible ``theta`` (:func:`nearest_feasible`, in the norm of
    ``scale``); it is ``theta = 0`` when that is feasible.  Where the bounds
    contradict each other, the least violation, by Newton's method on
    ``|violation|^2 / 2`` (piecewise quadratic: the violated rows are fitted
    to their bounds) with a tiny ``scale``-weighted damping that picks the
    smallest move.
    """
    theta = nearest_feasible(C, d, lo, hi, scale)
    if theta is not None:
        return theta
    theta = np.zeros(C.shape[1])
    reg = 1e-12 * np.maximum(scale, 1e-300)

    def violation(th: np.ndarray) -> tuple[float, np.ndarray]:
        v = C @ th + d
        excess = np.where(v < lo, v - lo, 0.0) + np.where(v > hi, v - hi, 0.0)
        return 0.5 * float(excess @ excess), excess

    f, excess = violation(theta)
    for _ in range(max_rounds):
        if f == 0.0:
            break
        rows = excess != 0.0
        grad = C[rows].T @ excess[rows]
        step = -np.linalg.lstsq(C[rows].T @ C[rows] + np.diag(reg), grad, rcond=None)[0]
        t = 1.0
        while t > 1e-8:
            f_new, excess_new = violation(theta + t * step)
            if f_new <= f - 1e-4 * t * float(grad @ -step):
                break
            t *= 0.5
        else:
            break
        improved = f - f_new
        theta, f, excess = theta + t * step, f_new, excess_new
        if improved <= 1e-14 * max(f, 1e-300) + 1e-30:
            break
    return theta


def compress_rows(r: np.ndarray, Jx: np.ndarray, Jp: np.ndarray, kernels: Any = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each interval's data rows as the triangular factor of ``[Jx Jp r]``.

    The linear model of interval ``j``'s residuals, ``r_j + Jx_j dx_j + Jp_j
    dp``, has ``M ny`` rows but depends on ``nx + np`` unknowns: with
    ``[Jx_j Jp_j r_j] = Q_j R_j`` its squared norm is that of ``R_j``'s rows
    (``nx + np + 1`` of them) applied to ``(dx_j, dp, 1)``, plus a part no step
    reaches.  Every least-squares problem of the step keeps its solution;
    the condensed matrix shrinks from ``J M ny`` to ``J (nx + np + 1)`` rows
    (cmg: 8540 rows to 1159, for 63 unknowns).  ``kernels``: the iteration's
    compiled kernels (:class:`~picard_casadi.transcription.kernels.IterationKernels`), which
    do the same by a Householder QR in generated C; None for NumPy's.
    """
    if kernels is not None and kernels.nx == Jx.shape[2] \
            and kernels.max_rhs == Jx.shape[2] + Jp.shape[2]:
        return kernels.compress_rows(r, Jx, Jp)
    J, rows, nx = Jx.shape
    cols = nx + Jp.shape[2] + 1
    if rows <= cols:
        return r, Jx, Jp
    R = np.linalg.qr(np.concatenate([Jx, Jp, r[..., None]], axis=2), mode="r")
    return R[:, :, -1], R[:, :, :nx], R[:, :, nx:-1]


def triangular_factor(A: np.ndarray, b: np.ndarray,
                      blocks: list[tuple[slice, np.ndarray, np.ndarray]],
                      n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``R`` and ``Q^T b`` of ``[A b] = Q R``: the least-squares problem ``A theta ~ -b``
    in at most ``n`` rows (the rest of ``b`` is out of ``A``'s reach).

    ``A`` ``(J, m, w)`` holds the condensed rows of ``J`` intervals; each of
    ``blocks`` is a range of intervals (an experiment), the columns of ``A``
    its rows use, and their columns of ``theta`` (the parameters and that
    experiment's first state: :attr:`~picard_casadi.methods.condensing.CondensedRows.blocks`).
    Each block is reduced on its own columns first, and the stacked factors
    once more: the same triangular factor, at a fraction of the cost of one
    factorisation of all rows (cmg: 1159 rows, 64 columns, of which each
    experiment touches 18).

    Parameters
    ----------
    A : ndarray (J, m, w)
    b : ndarray (J, m)
    blocks : list of (slice, ndarray of int, ndarray of int)
    n : int, optional
        Length of ``theta`` (default ``w``: ``A`` over all of it).

    Returns
    -------
    R : ndarray (k, n), k <= n
    c : ndarray (k,)
    """
    J, m, _ = A.shape
    n = A.shape[2] if n is None else int(n)
    parts = []
    for sl, local, cols in blocks:
        rows = A[sl].shape[0] * m  # explicit: with no columns, reshape(-1, 0) is ambiguous
        Ab = np.concatenate([A[sl][:, :, local].reshape(rows, local.size),
                             b[sl].reshape(rows, 1)], axis=1)
        if Ab.shape[0] > Ab.shape[1]:
            Ab = np.linalg.qr(Ab, mode="r")
        part = np.zeros((Ab.shape[0], n + 1))
        part[:, cols] = Ab[:, :-1]
        part[:, n] = Ab[:, -1]
        parts.append(part)
    Ab = np.concatenate(parts, axis=0)
    if Ab.shape[0] > n:
        Ab = np.linalg.qr(Ab, mode="r")[:n]
    return Ab[:, :n], Ab[:, n]


def reach_cosine(A: np.ndarray, b: np.ndarray, theta: np.ndarray,
                  bnorm: float | None = None) -> float:
    """Cosine between the residual ``b`` and what the step ``theta`` reaches of it.

    For ``theta`` the least-squares step (``A theta ~ -b``) this is
    ``|P_A b| / |b|``, the cosine between the residual and the range of the
    Jacobian, and its square is the relative gain Gauss-Newton predicts; for
    a step that stops at bounds, the gain it predicts.  0 at a stationary
    point.  MINPACK's ``gtol`` test takes the largest cosine with a single
    column instead, which ill-conditioning fools: on the unweighted
    ``fa18-roll-beta`` loss (seed 1), with columns of norm 1e9 (an unstable
    trajectory), it was 7e-9 where the gradient was 68 (objective 96) and
    the step would still gain.  Computed from the gain ``-2 b^T A theta -
    |A theta|^2``, which has no cancellation of large terms.  ``bnorm``: the
    residual's norm when ``A, b`` are its compressed form (``R, Q^T b``).
    """
    bnorm = float(np.sqrt(b @ b)) if bnorm is None else bnorm
    if bnorm == 0.0:
        return 0.0
    reach = A @ theta
    gain2 = -2.0 * float(b @ reach) - float(reach @ reach)
    return float(np.sqrt(max(gain2, 0.0))) / bnorm


def room(z: np.ndarray, dz: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    """The largest ``t >= 0`` with ``lo <= z + t dz <= hi`` (``inf`` when nothing blocks)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(dz > 0, (hi - z) / dz, np.where(dz < 0, (lo - z) / dz, np.inf))
    return float(np.min(t, initial=np.inf))


def bounded_least_squares(A: np.ndarray, b: np.ndarray, damp: np.ndarray, active: np.ndarray,
                          C: np.ndarray, d: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                          max_rounds: int = 100, start: np.ndarray | None = None) -> np.ndarray:
    """``min |A theta + b|^2 / 2 + theta^T diag(damp) theta / 2`` with ``lo <= C theta + d <= hi``.

    A primal active-set method: from a feasible point (:func:`least_violation`)
    move towards the minimiser on the working set, stop at the first bound
    that blocks and add it; at a minimiser on the working set drop the bound
    whose multiplier has the wrong sign.  The working set never has more
    bounds than ``theta`` has free (``active``) entries.  Each minimiser on
    the working set is a least-squares solve on ``A`` restricted to the null
    space of the working bounds (:func:`working_set_step`), never the normal
    equations: on the unweighted F/A-18 loss ``A^T A`` spans 17 orders of
    magnitude, its smallest computed eigenvalue was negative, and the steps
    crept.  Where no ``theta`` meets every bound, the least violation found
    is kept and not made worse.

    Parameters
    ----------
    A, b : ndarray (m, n), (m,)
    damp : ndarray (n,)
        Diagonal damping.
    active : ndarray of bool (n,)
        Entries of ``theta`` that may move (the others stay zero).
    C, d, lo, hi : ndarray (k, n), (k,), (k,), (k,)
        The bounded quantities ``C theta + d`` and their bounds.
    max_rounds : int
        Working-set changes before the current point is returned.
    start : ndarray (n,), optional
        Where to start: :func:`least_violation`'s point for these bounds
        (found here when not given), e.g. kept from an earlier solve with the
        same bounds.
    """
    theta = least_violation(C, d, lo, hi, damp * active) if start is None else start.copy()
    v = C @ theta + d
    lo, hi = np.minimum(lo, v), np.maximum(hi, v)
    work: dict[int, int] = {}  # row of C -> -1 (lower bound) or +1 (upper bound)
    n_free = int(np.count_nonzero(active))
    for _ in range(max_rounds):
        rows = list(work)
        step, nu = working_set_step(A, b, damp, active, theta, C[rows])
        if np.max(np.abs(step), initial=0.0) <= 1e-14 * (1.0 + np.max(np.abs(theta), initial=0.0)):
            # a minimiser on the working set: a bound pulling inwards is released
            wrong = [(abs(v), r) for r, v in zip(rows, nu) if v * work[r] < 0]
            if not wrong:
                return theta
            del work[max(wrong)[1]]
            continue
        x_now = C @ theta + d
        dx = C @ step
        with np.errstate(divide="ignore", invalid="ignore"):
            to_lo = np.where(dx < 0, (lo - x_now) / dx, np.inf)
            to_hi = np.where(dx > 0, (hi - x_now) / dx, np.inf)
        limit = np.minimum(to_lo, to_hi)
        if work:
            limit[list(work)] = np.inf
        k = int(np.argmin(limit)) if limit.size else -1
        beta = float(limit[k]) if limit.size else np.inf
        if beta >= 1.0:
            # the minimiser on the working set: done unless a bound pulls inwards
            theta = theta + step
            wrong = [(abs(v), r) for r, v in zip(rows, nu) if v * work[r] < 0]
            if not wrong:
                return theta
            del work[max(wrong)[1]]
            continue
        theta = theta + max(beta, 0.0) * step
        if len(work) >= n_free:
            return theta  # no freedom left: the blocked point
        work[k] = -1 if to_lo[k] <= to_hi[k] else 1
    return theta
