"""Second derivatives of the Picard fixed point, contracted with weights.

Gauss-Newton models the data misfit with ``J^T J`` alone.  Where the
residuals are large and the model is curved (the unweighted F/A-18 loss) the
missing term ``sum_i r_i grad^2 r_i``, and the curvature of the continuity
constraints weighted by their multipliers, are what a Newton step needs.  For
one interval with ``z = (x_j, p)`` this module returns the Hessian of

    phi(z) = sum_m w_m^T g(x(t_m), p) + lambda^T x_end(z)

where the node values ``U(z)`` solve ``U = P(x_j, p, U)`` (the fixed point,
an implicit function of ``z``), ``x(t_m) = x_j + h sum_k S_mk f(u_k)`` are
the states at the samples and ``x_end = x_j + h sum_k A_Kk f(u_k)``.

Every nonlinearity sits in ``f`` at the nodes and ``g`` at the samples, so
the Hessian is a sum of node-local and sample-local terms::

    grad^2 phi = sum_k D_k^T grad^2 (nu_k^T f)(u_k, p) D_k
               + sum_m E_m^T grad^2 (w_m^T g)(x(t_m), p) E_m

with ``D_k = d(u_k, p)/dz`` (the node sensitivities), ``E_m = d(x(t_m),
p)/dz``, and node weights ``nu`` found by one adjoint solve with the matrix
``I - dP/dU`` already inverted for the first derivatives:

    omega_k = h (sum_m S_mk g_x(m)^T w_m + A_Kk lambda)
    (I - dP/dU)^T c = blockdiag(f_x)^T omega,     nu_k = omega_k + h sum_l A_lk c_l

(``omega`` weights ``f`` directly; ``c`` carries the curvature of ``U(z)``
itself, which enters every later node through the Picard map).  The
Hessians of ``nu^T f`` and ``w^T g`` are CasADi functions mapped over the
nodes and samples, built on first use (run on CasADi's virtual machine:
only :class:`~picard_casadi.methods.condensed.ConstrainedGaussNewtonStep`'s
Newton steps need them), evaluated into NumPy memory (:class:`_MappedHessian`).
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from .discretisation import Discretisation

__all__ = ["FixedPointHessian"]


class FixedPointHessian:
    """Per-interval Hessians ``grad^2_z phi`` of weighted outputs and end states.

    Parameters
    ----------
    disc : Discretisation
    """

    def __init__(self, disc: Discretisation) -> None:
        self.disc = disc
        m = disc.model
        J, K, M = disc.n_intervals, disc.K, disc.M
        z = ca.vertcat(m.x, m.p)
        nu = ca.SX.sym("nu", m.nx)
        w = ca.SX.sym("w", m.ny)
        f_hess = ca.Function("f_weighted_hessian", [m.t, m.x, m.p, m.u, nu],
                             [ca.hessian(ca.dot(nu, m.rhs), z)[0]])
        g_hess = ca.Function("g_weighted_hessian", [m.t, m.x, m.p, m.u, w],
                             [ca.hessian(ca.dot(w, m.y), z)[0]])
        self._f_hess = _MappedHessian(f_hess.map(J * K))
        self._g_hess = _MappedHessian(g_hess.map(J * M))
        self._node_t = disc.node_times.reshape(1, J * K)
        self._node_u = disc.node_inputs.transpose(1, 0, 2).reshape(m.nu, J * K)
        self._samp_t = disc.sample_times.reshape(1, J * M)
        self._samp_u = disc.sample_inputs.transpose(1, 0, 2).reshape(m.nu, J * M)
        self._A = disc.quad.integration

    def contracted(self, U: np.ndarray, p: np.ndarray, sens: dict[str, np.ndarray],
                   inverse: np.ndarray, w: np.ndarray, lam: np.ndarray) -> np.ndarray:
        """``grad^2_z phi_j`` for every interval, shape ``(J, nx + np, nx + np)``.

        Parameters
        ----------
        U : (J, nx, K)
            Node values at which ``sens`` was computed (a fixed point).
        p : (np,)
        sens : dict
            :meth:`FixedPointLinearisation.interval_sensitivities` at ``U``.
        inverse : (J, K nx, K nx)
            ``(I - dP/dU)^{-1}`` of that linearisation.
        w : (J, M, ny)
            Weights of the outputs at the samples.
        lam : (J, nx)
            Weights of the end states.
        """
        d = self.disc
        m = d.model
        J, K, M = d.n_intervals, d.K, d.M
        nx, np_, ny = m.nx, m.np, m.ny
        nz = nx + np_
        h = d.h
        A = self._A
        Fx, Gx, S, dXs, Xs = sens["Fx"], sens["Gx"], sens["S"], sens["dXs"], sens["Xs"]
        a = np.einsum("jmoa,jmo->jma", Gx, w)  # g_x^T w at each sample
        omega = h[:, None, None] * (np.einsum("jmk,jma->jka", d.sample_rows, a)
                                    + A[K - 1][None, :, None] * lam[:, None, :])
        rhs = np.einsum("jkab,jka->jkb", Fx, omega).reshape(J, K * nx, 1)
        c = np.matmul(inverse.transpose(0, 2, 1), rhs).reshape(J, K, nx)
        nu = omega + h[:, None, None] * np.einsum("lk,jla->jka", A, c)

        Hf = self._f_hess(self._node_t, U.transpose(1, 0, 2).reshape(nx, J * K),
                          p, self._node_u, nu.reshape(J * K, nx).T)
        Hf = Hf.reshape(nz, J, K, nz).transpose(1, 2, 0, 3)  # (J, K, nz, nz)
        D = np.zeros((J, K, nz, nz))
        D[:, :, :nx, :] = S
        D[:, :, nx:, nx:] = np.eye(np_)
        H = _sandwich(D, Hf)

        Hg = self._g_hess(self._samp_t, Xs.transpose(2, 0, 1).reshape(nx, J * M),
                          p, self._samp_u, w.reshape(J * M, ny).T)
        if np.any(Hg):
            Hg = Hg.reshape(nz, J, M, nz).transpose(1, 2, 0, 3)
            E = np.zeros((J, M, nz, nz))
            E[:, :, :nx, :] = dXs
            E[:, :, nx:, nx:] = np.eye(np_)
            H += _sandwich(E, Hg)
        return 0.5 * (H + H.transpose(0, 2, 1))


class _MappedHessian:
    """A mapped Hessian function evaluated on the virtual machine into NumPy
    memory (``casadi.Function.buffer``), its sparse output scattered into a
    dense array with indices computed once.

    ``numpy.asarray`` of the ``casadi.DM`` a call returns builds a Python list
    of every entry, zeros included: on PEtab's Armistead (4 states, 10
    parameters, 1152 nodes) 12.7 ms per call against 1.4 ms for the
    evaluation itself, 12 % of a start's time where the Newton steps run;
    here both take 0.8 ms.

    Parameters
    ----------
    function : casadi.Function
        Dense inputs, one output.
    """

    def __init__(self, function: ca.Function) -> None:
        self.function = function
        sp = function.sparsity_out(0)
        self.shape = (sp.size1(), sp.size2())
        rows, cols = sp.get_triplet()
        self._scatter = np.asarray(cols, np.int64) * sp.size1() + np.asarray(rows, np.int64)
        self._sizes = [function.nnz_in(i) for i in range(function.n_in())]
        self._buffer: tuple | None = None  # (buffer, evaluate), made on the first call

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_buffer": None}  # a buffer holds raw pointers

    def __call__(self, *args: np.ndarray) -> np.ndarray:
        """The output, dense, for ``args`` in the function's input order (an
        input given for one call of the map is repeated for every call)."""
        if self._buffer is None:
            self._buffer = self.function.buffer()
        buffer, evaluate = self._buffer
        kept = []  # the buffer keeps pointers: the arrays must live until evaluate()
        for i, (a, size) in enumerate(zip(args, self._sizes)):
            v = np.asarray(a, float).ravel(order="F")
            if v.size != size:
                if v.size == 0 or size % v.size:
                    raise ValueError(f"input {i} of {self.function.name()}: {v.size} values "
                                     f"for {size}")
                v = np.tile(v, size // v.size)
            v = np.ascontiguousarray(v)
            kept.append(v)
            buffer.set_arg(i, memoryview(v))
        out = np.empty(self._scatter.size)
        buffer.set_res(0, memoryview(out))
        evaluate()
        dense = np.zeros(self.shape[0] * self.shape[1])
        dense[self._scatter] = out
        return dense.reshape(self.shape, order="F")


def _sandwich(D: np.ndarray, H: np.ndarray) -> np.ndarray:
    """``sum_k D_k^T H_k D_k`` per interval: ``(J, K, a, b), (J, K, a, a) -> (J, b, b)``.

    Two batched matrix products (a three-operand ``einsum`` loops over all
    five indices at once: 0.14 s per call on ``fa18-drag`` against a few ms).
    """
    J, K, a, b = D.shape
    HD = np.matmul(H, D)  # (J, K, a, b)
    return np.matmul(D.transpose(0, 3, 1, 2).reshape(J, b, K * a), HD.reshape(J, K * a, b))
