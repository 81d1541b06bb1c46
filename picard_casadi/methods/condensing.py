"""Condensing: the linearised continuity conditions eliminate the interval starts.

The constrained step (:mod:`picard_casadi.methods.condensed`) minimises the
linearised data residuals subject to the linearised continuity conditions

    dx_{j+1} = E_j dx_j + F_j dp + c_j

(``E_j, F_j``: the exact end-state derivatives of interval ``j``; ``c_j``:
its current gap).  Along each experiment these give every interval start as
an affine function of the condensed unknowns ``theta = (dp, dx0_e)``:
``dx_j = S_j theta + s_j``, built interval by interval (cost linear in the
number of intervals).  The data rows of interval ``j`` become ``A_j theta +
b_j``; everything here is dense NumPy on arrays stacked over the intervals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..transcription.discretisation import Discretisation

__all__ = ["parameter_columns", "condense", "CondensedRows", "local_columns",
           "linearised_residuals", "gap_closing_shift"]


def parameter_columns(n_p: int, p_cols: np.ndarray, n_theta: int,
                      free_p: np.ndarray) -> np.ndarray:
    """``P`` with ``dp = P theta``: the free parameters' columns of ``theta``.

    Parameters
    ----------
    n_p : int
        Number of parameters.
    p_cols : ndarray of int
        The parameters that have a column in ``theta`` (in column order).
    n_theta : int
        Length of ``theta``.
    free_p : ndarray of bool (n_p,)
        Parameters free in this step (a parameter held on its bound gets a
        zero column).
    """
    P = np.zeros((n_p, n_theta))
    for col, i in enumerate(p_cols):
        if free_p[i]:
            P[i, col] = 1.0
    return P


@dataclass
class CondensedRows:
    """Every interval's condensed rows and start chain, in its experiment's own columns.

    Interval ``j`` of experiment ``e`` depends on the free parameters and on
    ``e``'s free first-state entries only, so its rows are held on those
    ``w`` *local* columns (the parameters', then ``e``'s first-state slots;
    an experiment with fewer free entries than the most has zero padding
    columns): memory and work linear in the number of experiments, where
    rows over all of ``theta`` grew with its square (a 40-state chain with 30
    experiments: 1,203 columns, of which each interval touches 43).

    Attributes
    ----------
    A : ndarray (J, m, w)
        Data rows ``A_j theta_e + b_j``.
    b : ndarray (J, m)
    S : ndarray (J, nx, w)
        Interval starts ``dx_j = S_j theta_e + s_j``.
    s : ndarray (J, nx)
    P : ndarray (np, w)
        ``dp = P theta_e`` (the same for every experiment).
    columns : ndarray of int (E, w)
        The column of ``theta`` of each local column, ``n_theta`` for padding.
    n_theta : int
    intervals_of : list of slice
        Each experiment's intervals (contiguous).
    """

    A: np.ndarray
    b: np.ndarray
    S: np.ndarray
    s: np.ndarray
    P: np.ndarray
    columns: np.ndarray
    n_theta: int
    intervals_of: list

    @property
    def blocks(self) -> list[tuple[slice, np.ndarray, np.ndarray]]:
        """Per experiment: its intervals, its local columns that are not
        padding, and their columns of ``theta`` (for
        :func:`~picard_casadi.methods.least_squares.triangular_factor`)."""
        out = []
        for e, sl in enumerate(self.intervals_of):
            local = np.flatnonzero(self.columns[e] < self.n_theta)
            out.append((sl, local, self.columns[e, local]))
        return out

    def _per_experiment(self, values: np.ndarray) -> np.ndarray:
        """Sums over each experiment's intervals of ``values`` ``(J, ...)``."""
        starts = np.array([sl.start for sl in self.intervals_of], dtype=int)
        return np.add.reduceat(values, starts, axis=0)

    def to_theta(self, local: np.ndarray) -> np.ndarray:
        """Per-interval vectors ``(J, w)`` on local columns, summed into ``theta``'s."""
        out = np.zeros(self.n_theta + 1)
        np.add.at(out, self.columns, self._per_experiment(local))
        return out[:self.n_theta]

    def gradient(self) -> np.ndarray:
        """``A^T b`` in ``theta``'s columns."""
        return self.to_theta(np.einsum("jmt,jm->jt", self.A, self.b))

    def local_theta(self, theta: np.ndarray) -> np.ndarray:
        """``theta`` on every interval's local columns, ``(J, w)``."""
        ext = np.append(theta, 0.0)[self.columns]  # (E, w)
        sizes = [sl.stop - sl.start for sl in self.intervals_of]
        return np.repeat(ext, sizes, axis=0)

    def starts(self, theta: np.ndarray) -> np.ndarray:
        """The interval starts' moves ``S_j theta + s_j``, ``(J, nx)``."""
        return np.matmul(self.S, self.local_theta(theta)[:, :, None])[:, :, 0] + self.s

    def global_rows(self, rows: np.ndarray, intervals: np.ndarray) -> np.ndarray:
        """Local rows ``(k, w)`` of the given intervals as rows over ``theta``, ``(k, n_theta)``."""
        out = np.zeros((rows.shape[0], self.n_theta + 1))
        experiment = np.searchsorted([sl.stop for sl in self.intervals_of], intervals,
                                     side="right")
        if rows.size:
            np.put_along_axis(out, self.columns[experiment], rows, axis=1)
        return out[:, :self.n_theta]

    def quadratic_form(self, local: np.ndarray) -> np.ndarray:
        """Per-interval ``(J, w, w)`` matrices on local columns, summed into ``(n_theta, n_theta)``."""
        per_exp = self._per_experiment(local)
        out = np.zeros((self.n_theta + 1, self.n_theta + 1))
        for e in range(per_exp.shape[0]):
            cols = self.columns[e]
            out[np.ix_(cols, cols)] += per_exp[e]
        return out[:self.n_theta, :self.n_theta]

    def dense(self) -> tuple[np.ndarray, np.ndarray]:
        """``A`` ``(J, m, n_theta)`` and ``S`` ``(J, nx, n_theta)`` over all of
        ``theta`` (for tests and small problems)."""
        A = np.zeros(self.A.shape[:2] + (self.n_theta + 1,))
        S = np.zeros(self.S.shape[:2] + (self.n_theta + 1,))
        for e, sl in enumerate(self.intervals_of):
            cols = self.columns[e]
            A[sl.start:sl.stop, :, cols] = self.A[sl]
            S[sl.start:sl.stop, :, cols] = self.S[sl]
        return A[..., :self.n_theta], S[..., :self.n_theta]


def local_columns(x0_cols: list[tuple[np.ndarray, np.ndarray]], n_p_cols: int, n_theta: int
                  ) -> tuple[int, np.ndarray]:
    """The local layout: its width ``w`` and each experiment's ``theta``
    columns ``(E, w)`` (parameters first, then its first-state slots;
    ``n_theta`` for padding)."""
    width = n_p_cols + max((cols.size for _, cols in x0_cols), default=0)
    columns = np.full((len(x0_cols), width), n_theta, dtype=int)
    columns[:, :n_p_cols] = np.arange(n_p_cols)
    for e, (_, cols) in enumerate(x0_cols):
        columns[e, n_p_cols:n_p_cols + cols.size] = cols
    return width, columns


def condense(disc: Discretisation, x0_cols: list[tuple[np.ndarray, np.ndarray]],
             P: np.ndarray, Jx: np.ndarray, Jp: np.ndarray, r: np.ndarray, E: np.ndarray,
             F: np.ndarray, c: np.ndarray) -> CondensedRows:
    """The data rows ``A_j theta + b_j`` of every interval and the chain ``S_j, s_j``.

    Parameters
    ----------
    disc : Discretisation
        Supplies the experiments' interval ranges.
    x0_cols : list of (ndarray, ndarray)
        Per experiment: the free entries of its first state and their columns
        of ``theta``.
    P : ndarray (np, n_theta)
        From :func:`parameter_columns` (the parameters' columns come first).
    Jx, Jp, r : ndarray (J, m, nx), (J, m, np), (J, m)
        Each interval's (compressed) data rows in the scaled unknowns.
    E, F, c : ndarray (J, nx, nx), (J, nx, np), (J, nx)
        Scaled end-state derivatives and gaps.

    Returns
    -------
    CondensedRows
        On each experiment's own columns.
    """
    J, nx = E.shape[0], E.shape[1]
    n_theta = P.shape[1]
    n_p_cols = n_theta - sum(cols.size for _, cols in x0_cols)
    width, columns = local_columns(x0_cols, n_p_cols, n_theta)
    P_loc = np.zeros((P.shape[0], width))
    P_loc[:, :n_p_cols] = P[:, :n_p_cols]
    # T_j = [S_j | s_j] follows T_{j+1} = E_j T_j + [F_j P | c_j], one step
    # for all experiments at once (their j-th intervals side by side)
    T = np.zeros((J, nx, width + 1))
    drive = np.concatenate([np.matmul(F, P_loc), c[:, :, None]], axis=2)
    starts = np.array([sl.start for sl in disc.intervals_of], dtype=int)
    lengths = np.array([sl.stop - sl.start for sl in disc.intervals_of], dtype=int)
    for e, sl in enumerate(disc.intervals_of):
        comps, cols = x0_cols[e]
        T[sl.start, comps, n_p_cols + np.arange(cols.size)] = 1.0
    for i in range(1, int(lengths.max(initial=0))):
        prev = starts[lengths > i] + (i - 1)
        T[prev + 1] = np.matmul(E[prev], T[prev]) + drive[prev]
    S, s = T[:, :, :width], T[:, :, width]
    # (batched BLAS products: einsum's generic loops cost several times more here)
    A = np.matmul(Jx, S)
    A += np.matmul(Jp, P_loc)
    b = r + np.matmul(Jx, s[:, :, None])[:, :, 0]
    return CondensedRows(A=A, b=b, S=S, s=s, P=P_loc, columns=columns, n_theta=n_theta,
                         intervals_of=list(disc.intervals_of))


def linearised_residuals(disc: Discretisation, r: np.ndarray, Jx: np.ndarray, Jp: np.ndarray,
                         E: np.ndarray, F: np.ndarray, c: np.ndarray, dX: np.ndarray,
                         dp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Linearised data residuals ``(J, m)`` and gaps ``(J, nx)`` after the step ``(dX, dp)``."""
    data_lin = r + np.matmul(Jx, dX[:, :, None])[:, :, 0] + Jp @ dp
    nxt = np.zeros_like(dX)
    nxt[:-1] = dX[1:]
    gap_lin = c + np.matmul(E, dX[:, :, None])[:, :, 0] + F @ dp - nxt
    gap_lin[~disc.has_next] = 0.0  # no continuity after an experiment's end
    return data_lin, gap_lin


def gap_closing_shift(disc: Discretisation, E: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Moves of the interval starts that close the gaps ``c`` to first order.

    With ``p`` and each experiment's first state held, the later starts move
    by ``d_{j+1} = E_j d_j + c_j`` (the second-order correction of SQP for
    the continuity conditions).  Returns ``d`` ``(J, nx)``.
    """
    d = np.zeros_like(c)
    for sl in disc.intervals_of:
        for j in range(sl.start, sl.stop - 1):
            d[j + 1] = E[j] @ d[j] + c[j]
    return d
