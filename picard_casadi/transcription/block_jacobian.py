"""The Jacobian of a fit's residuals in ``theta = (p, x0 of every experiment)``, block by block.

At a solution each experiment's outputs depend on the free parameters and
on that experiment's own initial states only, so the rows of interval ``j``
(experiment ``e``) are zero outside ``n_p + nx_e`` of the ``n_p + sum_e
nx_e`` columns.  Held dense, the matrix of a study with many experiments is
mostly zeros: 30 experiments of a 40-state network (145,000 measurements,
1,203 columns) took 1.4 GB, and the QR factorisation of the certificate a
copy more (4.7 GB at its peak; a user's report).  Here every interval keeps
its rows on its experiment's columns, and the products the uncertainty and
the certificate need are formed from the blocks:

* :meth:`BlockJacobian.gram`: ``J^T J``;
* :meth:`BlockJacobian.triangular`: an ``R`` with ``R^T R = J^T J`` (each
  experiment's rows reduced by QR on its own columns first, then the
  stacked factors once more), whose SVD gives ``J``'s singular values and
  right singular vectors;
* :meth:`BlockJacobian.rows_transposed`: ``J_j^T v`` for interval ``j``'s rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BlockJacobian"]


@dataclass
class BlockJacobian:
    """``d r / d theta`` with each interval's rows on its experiment's columns.

    Attributes
    ----------
    blocks : list of ndarray
        Per interval ``j``, its rows ``(m_j, len(columns[exp_of[j]]))``.
    columns : list of ndarray of int
        Per experiment, the ``theta`` indices its rows can touch (the free
        parameters', then its own initial states').
    exp_of : ndarray of int (J,)
        The experiment of each interval.
    n : int
        Number of columns (``theta``'s size).
    """

    blocks: list[np.ndarray]
    columns: list[np.ndarray]
    exp_of: np.ndarray
    n: int

    @property
    def shape(self) -> tuple[int, int]:
        """``(m, n)``: measurements, estimated quantities."""
        return int(sum(b.shape[0] for b in self.blocks)), self.n

    def gram(self) -> np.ndarray:
        """``J^T J``, ``(n, n)``."""
        F = np.zeros((self.n, self.n))
        for e, cols in enumerate(self.columns):
            mine = [b for b, k in zip(self.blocks, self.exp_of) if k == e and b.shape[0]]
            if mine:
                B = np.concatenate(mine, axis=0)
                F[np.ix_(cols, cols)] += B.T @ B
        return F

    def triangular(self) -> np.ndarray:
        """An upper triangular ``R`` (at most ``n`` rows) with ``R^T R = J^T J``.

        Each experiment's rows are reduced on its own columns, and the stacked
        factors once more: the factor of the whole matrix, at the cost of
        blocks of ``n_p + nx`` columns.
        """
        parts = []
        for e, cols in enumerate(self.columns):
            mine = [b for b, k in zip(self.blocks, self.exp_of) if k == e and b.shape[0]]
            if not mine:
                continue
            B = np.concatenate(mine, axis=0)
            if B.shape[0] > B.shape[1]:
                B = np.linalg.qr(B, mode="r")
            part = np.zeros((B.shape[0], self.n))
            part[:, cols] = B
            parts.append(part)
        stacked = np.concatenate(parts, axis=0) if parts else np.zeros((0, self.n))
        if stacked.shape[0] > self.n:
            stacked = np.linalg.qr(stacked, mode="r")
        return stacked

    def rows_transposed(self, j: int, v: np.ndarray) -> np.ndarray:
        """``J_j^T v`` over all ``n`` columns for interval ``j``'s rows (``v``:
        ``(m_j,)`` or ``(m_j, c)``)."""
        cols = self.columns[int(self.exp_of[j])]
        out = np.zeros((self.n,) + np.shape(v)[1:])
        out[cols] = self.blocks[j].T @ v
        return out

    def dense(self) -> np.ndarray:
        """The whole ``(m, n)`` matrix (small problems, tests)."""
        out = np.zeros(self.shape)
        start = 0
        for b, e in zip(self.blocks, self.exp_of):
            out[start:start + b.shape[0], self.columns[int(e)]] = b
            start += b.shape[0]
        return out
