"""The linear system of every interval's fixed point, ``(I - dP/dU) v = b``.

``dP/dU = h (A kron I) blockdiag(f_x(u_l))``: block ``(k, l)`` is
``h A[k, l] f_x(u_l)``, rows and columns ordered node-major (node, then
state).  The fixed-point sensitivities (one right-hand side per interval
start and parameter) and the Newton steps on the fixed point both solve it.
A dense LU of the ``K nx`` square matrix costs ``(K nx)^3``; two structures
make it smaller without changing the solution:

* **First node fixed.**  With a quadrature whose first node is the interval
  start (Lobatto), the first block row of ``dP/dU`` is zero: the first
  node's block of the solution is the right-hand side's, and the rest solves
  a system one node smaller.
* **Explicit states.**  A set ``E`` of states whose derivatives depend on no
  state of ``E`` (``f_x[E, E] = 0``; kinematic states such as ``angle' =
  rate`` or ``position' = velocity``) has ``v_E = b_E + h (A kron I)
  f_x[E, R] v_R`` at every node, ``R`` the other states.  Substituted into
  the ``R`` rows this leaves the Schur complement::

      I - h (A kron I) f_x[R, R] - h^2 (A kron I) f_x[R, E] (A kron I) f_x[E, R]

  of size ``K |R|``, formed without any inversion (the ``E`` block is the
  identity), so it is singular exactly when the whole matrix is.  Taken
  where ``E`` holds at least a quarter of the states
  (:func:`explicit_states`); below that the extra products cost about what
  the smaller LU saves (docs/performance.md, "Explicit states").
* **Sink states.**  States that no state's derivative depends on (``f_x[:,
  E] = 0``; a heading angle that only integrates the rates) are explicit
  with ``f_x[R, E] = 0`` too: the Schur complement is the ``R`` states' own
  matrix ``I - h (A kron I) f_x[R, R]``, with no extra products, so they
  are eliminated however few they are (:func:`sink_states`; the F/A-18's
  heading: 48 unknowns per interval instead of 54).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["FixedPointSystem", "explicit_states", "fixed_point_matrix", "sink_states"]

#: smallest share of the states, and number, that makes the elimination pay
EXPLICIT_SHARE = 0.25
EXPLICIT_MIN = 2
#: intervals are solved in groups whose matrices take about this much memory,
#: so that the temporaries stay in the processor's cache (docs/performance.md)
GROUP_BYTES = 1 << 20


def explicit_states(fx_pattern: np.ndarray) -> np.ndarray:
    """States to eliminate: a set ``E`` with ``f_x[E, E]`` structurally zero.

    Chosen greedily in state order (a state joins when it depends neither on
    itself nor on a chosen state, and no chosen state depends on it), and
    returned only where it pays: at least a quarter of the states and at
    least two.

    Parameters
    ----------
    fx_pattern : ndarray of bool (nx, nx)
        Structural nonzeros of ``df/dx``.

    Returns
    -------
    ndarray of int
        Indices of the states to eliminate (empty where it does not pay).
    """
    D = np.asarray(fx_pattern, dtype=bool)
    nx = D.shape[0]
    chosen: list[int] = []
    for i in range(nx):
        if not D[i, i] and not any(D[i, j] or D[j, i] for j in chosen):
            chosen.append(i)
    if len(chosen) < max(EXPLICIT_MIN, EXPLICIT_SHARE * nx):
        return np.zeros(0, dtype=int)
    return np.asarray(chosen, dtype=int)


def sink_states(fx_pattern: np.ndarray) -> np.ndarray:
    """Indices of the states no state's derivative depends on: the zero
    columns of ``fx_pattern`` (``df/dx``'s structural nonzeros, ``(nx, nx)``
    bool), their own entry included.  Empty where there are none, or where
    every state is one (nothing would be left to factorise: the plain path
    is as cheap)."""
    D = np.asarray(fx_pattern, dtype=bool)
    sinks = np.flatnonzero(~D.any(axis=0))
    return sinks if sinks.size < D.shape[0] else np.zeros(0, dtype=int)


def fixed_point_matrix(A: np.ndarray, h: np.ndarray, Fx: np.ndarray) -> np.ndarray:
    """``I - dP/dU`` for every interval, shape ``(J, K nx, K nx)``.

    Parameters
    ----------
    A : (K, K) node integration matrix
    h : (J,) interval lengths
    Fx : (J, K, nx, nx) vector-field Jacobians at the nodes
    """
    J, K, nx, _ = Fx.shape
    n = K * nx
    # written once, straight into the (node k, state a, node l, state b) layout
    out = np.empty((J, K, nx, K, nx))
    hA = -h[:, None, None] * A[None, :, :]  # (J, K, K)
    np.multiply(hA[:, :, None, :, None], Fx.transpose(0, 2, 1, 3)[:, None], out=out)
    out = out.reshape(J, n, n)
    out.reshape(J, n * n)[:, :: n + 1] += 1.0
    return out


class FixedPointSystem:
    """Solves and inverts ``I - dP/dU`` for all intervals, using its structure.

    Parameters
    ----------
    A : ndarray (K, K)
        Node integration matrix of the quadrature.
    explicit : ndarray of int, optional
        States to eliminate (:func:`explicit_states`, or :func:`sink_states`);
        none by default.
    sinks : bool
        The eliminated states drive no other state (``f_x[R, E] = 0``), so
        the Schur complement is the other states' own matrix.
    """

    def __init__(self, A: np.ndarray, explicit: np.ndarray | None = None,
                 sinks: bool = False) -> None:
        self.A = np.asarray(A, dtype=float)
        #: node 0 is the interval start (its block row of dP/dU is zero)
        self.first_node_fixed = not np.any(self.A[0])
        self.explicit = np.zeros(0, dtype=int) if explicit is None else np.asarray(explicit, int)
        self.sinks = bool(sinks) and self.explicit.size > 0
        self._kept: tuple[int, np.ndarray] | None = None
        #: builds the compiled solve (:mod:`picard_casadi.transcription.kernels`)
        #: on first use, or returns None where there is none; see use_kernel
        self._kernel_loader: Callable[[], Any] | None = None
        self._kernel: Any = None
        # work arrays of the Schur complement by (nodes, intervals, |E|, |R|)
        self._work: dict[tuple[int, int, int, int], tuple[np.ndarray, ...]] = {}

    def solve(self, h: np.ndarray, Fx: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        """``(I - dP/dU)^-1 rhs`` for every interval, by LU (no inverse formed).

        Parameters
        ----------
        h : (J,) interval lengths
        Fx : (J, K, nx, nx) vector-field Jacobians at the nodes
        rhs : (J, K nx, c)

        Raises
        ------
        numpy.linalg.LinAlgError
            When an interval's matrix is singular.
        """
        J, K, nx, _ = Fx.shape
        kernel = self.compiled_solve()
        if kernel is not None and kernel.handles(Fx, rhs.shape[-1]):
            return kernel.solve(h, Fx, rhs)
        group = self.group_size(K, nx)
        if J <= group:
            return self._solve_group(h, Fx, rhs)
        out = np.empty(rhs.shape)
        for start in range(0, J, group):
            part = slice(start, start + group)
            out[part] = self._solve_group(h[part], Fx[part], rhs[part])
        return out

    def use_kernel(self, loader: Callable[[], Any] | None) -> None:
        """Solve with generated C where it can: ``loader()`` returns a
        :class:`~picard_casadi.transcription.kernels.IterationKernels` (compiled
        or loaded from the cache on the first solve) or None, and the NumPy
        path runs where it returns None or the shapes are not the kernel's."""
        self._kernel_loader, self._kernel = loader, None

    def compiled_solve(self) -> Any:
        """The :class:`~picard_casadi.transcription.kernels.IterationKernels`
        set by :meth:`use_kernel` (loaded now if not yet), or None."""
        if self._kernel_loader is not None:
            loader, self._kernel_loader = self._kernel_loader, None
            self._kernel = loader()
        return self._kernel

    def order(self, K: int, nx: int) -> int:
        """Order of the matrix each interval factorises: the unknown nodes
        times the states kept (not eliminated)."""
        return (K - self.first_node_fixed) * (nx - self.explicit.size)

    def group_size(self, K: int, nx: int) -> int:
        """How many intervals to solve at once: their matrices fill about
        :data:`GROUP_BYTES`, so that the batched products' temporaries stay
        in cache (docs/performance.md, "Solving in groups of intervals")."""
        n = max(1, self.order(K, nx))
        return max(1, GROUP_BYTES // (8 * n * n))

    def _solve_group(self, h: np.ndarray, Fx: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        """:meth:`solve` for one group of intervals."""
        J, K, nx, _ = Fx.shape
        if self.first_node_fixed:
            # [[I, 0], [-C, B]]: node 0 keeps the right-hand side, B solves the rest
            c = rhs.shape[-1]
            r = rhs.reshape(J, K, nx, c)
            r0 = r[:, 0]
            # -C r0 = -h A[1:, 0] f_x(u_0) r0 moved to the right-hand side
            fold = (h[:, None] * self.A[None, 1:, 0])[:, :, None, None] \
                * np.matmul(Fx[:, 0], r0)[:, None]
            out = np.empty_like(r)
            out[:, 0] = r0
            out[:, 1:] = self._solve_nodes(self.A[1:, 1:], h, Fx[:, 1:],
                                           r[:, 1:] + fold).reshape(J, K - 1, nx, c)
            return out.reshape(J, K * nx, c)
        return self._solve_nodes(self.A, h, Fx, rhs)

    def _solve_nodes(self, A: np.ndarray, h: np.ndarray, Fx: np.ndarray,
                     rhs: np.ndarray) -> np.ndarray:
        """``(I - h (A kron I) blockdiag(Fx)) v = rhs`` over the nodes of ``A``."""
        J, K, nx, _ = Fx.shape
        c = rhs.shape[-1]
        if self.explicit.size == 0:
            return np.linalg.solve(fixed_point_matrix(A, h, Fx), rhs.reshape(J, K * nx, c))
        E, R = self.explicit, self._kept_states(nx)
        nR, nE = R.size, E.size
        order = np.concatenate([R, E])
        # f_x and the right-hand side with the kept states first: the blocks are views
        Fo = Fx[:, :, order[:, None], order]
        FRR, FRE, FER = Fo[:, :, :nR, :nR], Fo[:, :, :nR, nR:], Fo[:, :, nR:, :nR]
        ro = rhs.reshape(J, K, nx, c)[:, :, order]
        rR, rE = ro[:, :, :nR], ro[:, :, nR:]
        hA = h[:, None, None] * A[None]  # (J, K, K)
        if self.sinks:
            # f_x[R, E] = 0: the kept states solve their own system
            vR = np.linalg.solve(fixed_point_matrix(A, h, FRR),
                                 rR.reshape(J, K * nR, c)).reshape(J, K, nR, c)
            return self._scatter(J, K, nx, c, R, E, vR, rE, hA, FER)
        # the Schur complement is built transposed, (J, m, b, k, a) for entry
        # (k a, m b), so that each node m's columns are one matrix product:
        # S^T[m] = -Z_m Y_m with Z_m = [h^2 FER_m^T | h FRR_m^T] and
        # Y_m = [sum_l A_kl A_lm FRE_l^T ; A_km I] over (k, a); Y's identity
        # part is constant and written once per group size (_schur_factors)
        AA, Y, Z = self._schur_factors(A, J, nE, nR)
        Y[:, :, :nE] = np.matmul(AA, FRE.transpose(0, 1, 3, 2).reshape(J, K, nE * nR)).reshape(
            J, K, K, nE, nR).transpose(0, 1, 3, 2, 4)
        np.multiply(FER.transpose(0, 1, 3, 2), -(h * h)[:, None, None, None], out=Z[..., :nE])
        np.multiply(FRR.transpose(0, 1, 3, 2), -h[:, None, None, None], out=Z[..., nE:])
        ST = np.matmul(Z, Y.reshape(J, K, nE + nR, K * nR))
        ST = ST.reshape(J, K * nR, K * nR)
        ST.reshape(J, -1)[:, :: K * nR + 1] += 1.0
        bR = rR + np.matmul(hA, np.matmul(FRE, rE).reshape(J, K, nR * c)).reshape(J, K, nR, c)
        vR = np.linalg.solve(ST.transpose(0, 2, 1), bR.reshape(J, K * nR, c)).reshape(J, K, nR, c)
        return self._scatter(J, K, nx, c, R, E, vR, rE, hA, FER)

    @staticmethod
    def _scatter(J: int, K: int, nx: int, c: int, R: np.ndarray, E: np.ndarray,
                 vR: np.ndarray, rE: np.ndarray, hA: np.ndarray, FER: np.ndarray) -> np.ndarray:
        """The whole solution from the kept states' part: ``v_E = b_E + h (A
        kron I) f_x[E, R] v_R``, in the states' order, ``(J, K nx, c)``."""
        nE = E.size
        out = np.empty((J, K, nx, c))
        out[:, :, R] = vR
        out[:, :, E] = rE + np.matmul(hA, np.matmul(FER, vR).reshape(J, K, nE * c)).reshape(
            J, K, nE, c)
        return out.reshape(J, K * nx, c)

    def _kept_states(self, nx: int) -> np.ndarray:
        """The states not eliminated, in order."""
        if self._kept is None or self._kept[0] != nx:
            self._kept = (nx, np.setdiff1d(np.arange(nx), self.explicit))
        return self._kept[1]

    def _schur_factors(self, A: np.ndarray, J: int, nE: int, nR: int
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``AA = (A_kl A_lm)`` as ``(m k, l)`` and the work arrays ``Y`` (its
        identity part ``A_km I`` filled) and ``Z`` of the Schur complement for
        ``J`` intervals: the same few group sizes recur at every call."""
        K = A.shape[0]
        key = (K, J, nE, nR)
        if key not in self._work:
            AA = (A[:, :, None] * A[None, :, :]).transpose(2, 0, 1).reshape(K * K, K)
            Y = np.empty((J, K, nE + nR, K, nR))
            Y[:, :, nE:] = A.T[None, :, None, :, None] * np.eye(nR)[None, None, :, None, :]
            self._work[key] = (AA, Y, np.empty((J, K, nR, nE + nR)))
        return self._work[key]

    def inverse(self, h: np.ndarray, Fx: np.ndarray) -> np.ndarray:
        """Inverse of ``I - dP/dU`` for every interval, ``(J, K nx, K nx)``.

        With the first node fixed the matrix is ``[[I, 0], [-C, B]]`` and its
        inverse ``[[I, 0], [B^-1 C, B^-1]]``, so only ``B`` is inverted.

        Raises
        ------
        numpy.linalg.LinAlgError
            When an interval's matrix is singular.
        """
        J, K, nx, _ = Fx.shape
        lhs = fixed_point_matrix(self.A, h, Fx)
        if not self.first_node_fixed:
            return np.linalg.inv(lhs)
        Binv = np.linalg.inv(lhs[:, nx:, nx:])
        out = np.zeros_like(lhs)
        out[:, :nx, :nx] = np.eye(nx)
        out[:, nx:, nx:] = Binv
        out[:, nx:, :nx] = -np.matmul(Binv, lhs[:, nx:, :nx])
        return out
