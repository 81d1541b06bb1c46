"""Structured Gauss-Newton normal equations of the Picard residuals.

The residual vector of interval ``j`` depends on the parameters ``p``, on the
interval start ``x_j`` and, through its continuity rows only, on the next
start ``x_{j+1}`` (with derivative ``-a_j I``, ``a_j = sqrt(2 lambda) c_j``).
So the Jacobian is block sparse and the normal matrix ``J^T J`` is, per
experiment, block tridiagonal in the ``x_j`` with a dense border for ``p``
(an "arrow").  :class:`NormalEquations` builds its blocks from the per-interval
Jacobian blocks with vectorised products, and :meth:`NormalEquations.solve`
eliminates the interval blocks by a block Thomas sweep (cost linear in the
number of intervals) and solves the small Schur complement for ``p``.
A dense matrix is never formed; :meth:`NormalEquations.dense` exists for tests.

Variables can be held fixed (active bounds, known ``x0``): their rows and
columns are replaced by the identity and their step is zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["NormalEquations", "jacobian_times"]


def jacobian_times(Jx: np.ndarray, Jp: np.ndarray, a: np.ndarray, has_next: np.ndarray,
                   dX: np.ndarray, dp: np.ndarray) -> np.ndarray:
    """Product of the block Jacobian with a step, per interval ``(J, m)``.

    Parameters
    ----------
    Jx : ndarray (J, m, nx)
    Jp : ndarray (J, m, np)
    a : ndarray (J,)
        Continuity weights ``sqrt(2 lambda) c_j`` (derivative of the
        continuity rows with respect to ``x_{j+1}`` is ``-a_j I``).
    has_next : ndarray (J,) of bool
    dX : ndarray (J, nx)
    dp : ndarray (np,)
    """
    out = np.einsum("jmn,jn->jm", Jx, dX) + np.einsum("jmk,k->jm", Jp, dp)
    nx = dX.shape[1]
    nxt = np.zeros_like(dX)
    nxt[:-1] = dX[1:]
    nxt[~has_next] = 0.0
    out[:, -nx:] -= a[:, None] * nxt
    return out


@dataclass
class NormalEquations:
    """Blocks of ``J^T J`` and ``J^T r`` for the Picard residuals.

    Parameters
    ----------
    r : ndarray (J, m)
        Residuals; the last ``nx`` entries of each row are the continuity rows.
    Jx, Jp : ndarray (J, m, nx), (J, m, np)
        Jacobian blocks with respect to ``x_j`` and ``p`` (already scaled).
    a : ndarray (J,)
        Continuity weights, see :func:`jacobian_times`.
    has_next : ndarray (J,) of bool
        Whether interval ``j`` is followed by another of the same experiment.

    Attributes
    ----------
    D : ndarray (J, nx, nx)      diagonal blocks ``d2/dx_j dx_j``
    B : ndarray (J, nx, nx)      super-diagonal blocks ``d2/dx_j dx_{j+1}``
    C : ndarray (J, nx, np)      border blocks ``d2/dx_j dp``
    Hpp : ndarray (np, np)
    gx : ndarray (J, nx)         gradient in ``x_j``
    gp : ndarray (np,)           gradient in ``p``
    """

    r: np.ndarray
    Jx: np.ndarray
    Jp: np.ndarray
    a: np.ndarray
    has_next: np.ndarray

    def __post_init__(self) -> None:
        r, Jx, Jp, a = self.r, self.Jx, self.Jp, self.a
        J, m, nx = Jx.shape
        self.nx, self.np, self.J = nx, Jp.shape[2], J
        prev = np.zeros(J)  # weight of the continuity rows of interval j-1 in x_j
        prev[1:] = np.where(self.has_next[:-1], a[:-1], 0.0)
        eye = np.eye(nx)
        self.D = np.einsum("jmn,jmk->jnk", Jx, Jx) + (prev ** 2)[:, None, None] * eye
        Jx_c = Jx[:, -nx:, :]
        Jp_c = Jp[:, -nx:, :]
        r_c = r[:, -nx:]
        self.B = -(np.where(self.has_next, a, 0.0))[:, None, None] * Jx_c.transpose(0, 2, 1)
        self.C = np.einsum("jmn,jmk->jnk", Jx, Jp)
        self.C[1:] -= prev[1:, None, None] * Jp_c[:-1]
        self.Hpp = np.einsum("jmn,jmk->nk", Jp, Jp)
        self.gx = np.einsum("jmn,jm->jn", Jx, r)
        self.gx[1:] -= prev[1:, None] * r_c[:-1]
        self.gp = np.einsum("jmk,jm->k", Jp, r)

    # ------------------------------------------------------------------ solve
    def solve(self, mu: float, free_x: np.ndarray, free_p: np.ndarray,
              damping_x: np.ndarray | None = None,
              damping_p: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Solve ``(J^T J + mu Dm) d = -J^T r`` with some variables held fixed.

        Parameters
        ----------
        mu : float
            Levenberg-Marquardt damping.
        free_x : ndarray (J, nx) of bool
        free_p : ndarray (np,) of bool
        damping_x, damping_p : ndarray, optional
            Diagonal ``Dm`` (default: the diagonal of ``J^T J``, Marquardt's).

        Returns
        -------
        dX : ndarray (J, nx)
        dp : ndarray (np,)
        """
        J, nx, np_ = self.J, self.nx, self.np
        mx = free_x.astype(float)
        mp = free_p.astype(float)
        if damping_x is None:
            damping_x = np.einsum("jii->ji", self.D)
        if damping_p is None:
            damping_p = np.diag(self.Hpp).copy()
        eye = np.eye(nx)
        D = self.D * mx[:, :, None] * mx[:, None, :]
        D = D + eye * (mu * damping_x * mx + (1.0 - mx))[:, :, None]
        mx_next = np.zeros_like(mx)
        mx_next[:-1] = mx[1:]
        B = self.B * mx[:, :, None] * mx_next[:, None, :]
        C = self.C * mx[:, :, None] * mp[None, None, :]
        Hpp = self.Hpp * mp[:, None] * mp[None, :]
        Hpp = Hpp + np.diag(mu * damping_p * mp + (1.0 - mp))
        gx = self.gx * mx
        gp = self.gp * mp

        # Block Thomas: Hxx^{-1} [ -gx | C ], chain by chain (B is zero across
        # experiment boundaries, so one sweep over all intervals is exact).
        R = np.concatenate([-gx[:, :, None], C], axis=2)  # (J, nx, 1+np)
        Dhat = np.empty_like(D)
        Rhat = np.empty_like(R)
        Dinv_B = np.empty_like(B)
        for j in range(J):
            if j > 0 and self.has_next[j - 1]:
                Bt = B[j - 1].T
                Dhat[j] = D[j] - Bt @ Dinv_B[j - 1]
                Rhat[j] = R[j] - Bt @ np.linalg.solve(Dhat[j - 1], Rhat[j - 1])
            else:
                Dhat[j] = D[j]
                Rhat[j] = R[j]
            Dinv_B[j] = np.linalg.solve(Dhat[j], B[j])
        Z = np.empty_like(R)
        for j in range(J - 1, -1, -1):
            rhs = Rhat[j]
            if self.has_next[j]:
                rhs = rhs - B[j] @ Z[j + 1]
            Z[j] = np.linalg.solve(Dhat[j], rhs)
        W = Z[:, :, 0]  # Hxx^{-1} (-gx)
        Q = Z[:, :, 1:]  # Hxx^{-1} C
        S = Hpp - np.einsum("jnk,jnl->kl", C, Q)
        rhs_p = -gp - np.einsum("jnk,jn->k", C, W)
        dp = np.linalg.solve(0.5 * (S + S.T), rhs_p) if np_ else np.zeros(0)
        dX = W - np.einsum("jnk,k->jn", Q, dp)
        return dX * mx, dp * mp

    # ------------------------------------------------------------------ reference
    def dense(self) -> tuple[np.ndarray, np.ndarray]:
        """The full matrix ``J^T J`` and vector ``J^T r`` (ordering: p, then x_j).

        For tests and small problems only.
        """
        J, nx, np_ = self.J, self.nx, self.np
        n = np_ + J * nx
        H = np.zeros((n, n))
        g = np.zeros(n)
        H[:np_, :np_] = self.Hpp
        g[:np_] = self.gp
        for j in range(J):
            s = np_ + j * nx
            H[s:s + nx, s:s + nx] = self.D[j]
            H[s:s + nx, :np_] = self.C[j]
            H[:np_, s:s + nx] = self.C[j].T
            g[s:s + nx] = self.gx[j]
            if self.has_next[j]:
                H[s:s + nx, s + nx:s + 2 * nx] = self.B[j]
                H[s + nx:s + 2 * nx, s:s + nx] = self.B[j].T
        return H, g
