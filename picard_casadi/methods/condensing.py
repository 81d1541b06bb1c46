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

import numpy as np

from ..discretisation import Discretisation

__all__ = ["parameter_columns", "condense", "linearised_residuals", "gap_closing_shift"]


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


def condense(disc: Discretisation, x0_cols: list[tuple[np.ndarray, np.ndarray]],
             P: np.ndarray, Jx: np.ndarray, Jp: np.ndarray, r: np.ndarray, E: np.ndarray,
             F: np.ndarray, c: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The data rows ``A_j theta + b_j`` of every interval and the chain ``S_j, s_j``.

    Parameters
    ----------
    disc : Discretisation
        Supplies the experiments' interval ranges.
    x0_cols : list of (ndarray, ndarray)
        Per experiment: the free entries of its first state and their columns
        of ``theta``.
    P : ndarray (np, n_theta)
        From :func:`parameter_columns`.
    Jx, Jp, r : ndarray (J, m, nx), (J, m, np), (J, m)
        Each interval's (compressed) data rows in the scaled unknowns.
    E, F, c : ndarray (J, nx, nx), (J, nx, np), (J, nx)
        Scaled end-state derivatives and gaps.

    Returns
    -------
    A : (J, m, n_theta), b : (J, m), S_all : (J, nx, n_theta), s_all : (J, nx)
    """
    J, nx = E.shape[0], E.shape[1]
    nth = P.shape[1]
    # T_j = [S_j | s_j] follows T_{j+1} = E_j T_j + [F_j P | c_j], one step
    # for all experiments at once (their j-th intervals side by side)
    T = np.zeros((J, nx, nth + 1))
    drive = np.concatenate([np.matmul(F, P), c[:, :, None]], axis=2)
    starts = np.array([sl.start for sl in disc.intervals_of], dtype=int)
    lengths = np.array([sl.stop - sl.start for sl in disc.intervals_of], dtype=int)
    for e, sl in enumerate(disc.intervals_of):
        comps, cols = x0_cols[e]
        T[sl.start, comps, cols] = 1.0
    for i in range(1, int(lengths.max(initial=0))):
        prev = starts[lengths > i] + (i - 1)
        T[prev + 1] = np.matmul(E[prev], T[prev]) + drive[prev]
    S_all, s_all = T[:, :, :nth], T[:, :, nth]
    # (batched BLAS products: einsum's generic loops cost several times more here)
    A = np.matmul(Jx, S_all)
    A += np.matmul(Jp, P)
    b = r + np.matmul(Jx, s_all[:, :, None])[:, :, 0]
    return A, b, S_all, s_all


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
