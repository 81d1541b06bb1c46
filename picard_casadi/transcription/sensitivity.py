"""Exact sensitivities of the Picard fixed point (the limit n -> infinity).

The paper's Theorem 2: ``grad_{x,p} (P^n u)(t) -> grad_{x,p} phi(t, x, p)`` as
``n -> infinity``.  The Jacobian through ``P^n`` with ``u`` held fixed is a
truncated Neumann series of that limit, with error of order
``(L T)^n / n!`` (``L`` the Lipschitz constant of ``f``).  When ``L T`` is
not small (Van der Pol at ``T = 0.25`` has ``L T`` near 1) the truncated
Jacobian makes Gauss-Newton converge slowly and biases its fixed point.

At a fixed point ``U = P(x, p, U)`` of one interval the limit is available
exactly by the implicit function theorem::

    dU/dz = (I - dP/dU)^{-1} dP/dz,       z = (x_j, p)

``dP/dU`` is ``h (A kron I) blockdiag(f_x(U_l))`` (``nx K`` square, dense), so
this costs one small dense LU per interval, batched over intervals with
LAPACK, or, where the functions are compiled, in one call of the generated
kernel of :mod:`picard_casadi.transcription.kernels` (made smaller by the structure of
:mod:`picard_casadi.transcription.fixed_point_system` either way).  The outputs at the samples and
the end state follow by the chain rule through ``x_j + h S f(U)``.  These are the exact derivatives of the
discretised (collocation) solution, so Gauss-Newton with them converges to
the same optimum as IPOPT on the collocation NLP.

The derivatives of ``f`` at the nodes and of ``g`` at the samples come from
CasADi functions mapped over all nodes and samples (code-generated with the
rest); the assembly here is NumPy (the kernel's, compiled, up to ``f``'s
derivatives at the nodes).
"""

from __future__ import annotations

from typing import Any

import casadi as ca
import numpy as np

from ..model import Model
from ..runtime.native import NativeFunction
from .discretisation import Discretisation, node_columns
from .fixed_point_system import FixedPointSystem, explicit_states, fixed_point_matrix, sink_states
from .kernels import kernel_loader

__all__ = ["PointDerivatives", "FixedPointLinearisation", "newton_fixed_point_step",
           "fixed_point_matrix", "fixed_point_system", "predict_nodes"]


def predict_nodes(S: np.ndarray, U: np.ndarray, dX: np.ndarray, dp: np.ndarray) -> np.ndarray:
    """First-order node values after a step: ``U + (dU/dx_j) dx_j + (dU/dp) dp``.

    Parameters
    ----------
    S : ndarray (J, K, nx, nx + np)
        Node sensitivities from :meth:`FixedPointLinearisation.interval_sensitivities`.
    U : (J, nx, K), dX : (J, nx), dp : (np,)
    """
    J, K, nx, nz = S.shape
    dz = np.concatenate([dX, np.broadcast_to(dp, (J, dp.size))], axis=1)
    # one batched product (einsum's generic loops cost several times more)
    dU = np.matmul(S.reshape(J, K * nx, nz), dz[:, :, None]).reshape(J, K, nx)
    return U + dU.transpose(0, 2, 1)


def fixed_point_system(model: Model, A: np.ndarray) -> FixedPointSystem:
    """The intervals' ``I - dP/dU`` for ``model`` and the node integration
    matrix ``A``, eliminating the model's explicit states where that pays
    (:func:`~picard_casadi.transcription.fixed_point_system.explicit_states`), else its
    sink states (:func:`~picard_casadi.transcription.fixed_point_system.sink_states`)."""
    pattern = model.jacobian_pattern
    explicit = explicit_states(pattern)
    if explicit.size:
        return FixedPointSystem(A, explicit)
    return FixedPointSystem(A, sink_states(pattern), sinks=True)


def newton_fixed_point_step(f_der: ca.Function, node_t: ca.DM, node_u: ca.DM,
                            system: FixedPointSystem, h: np.ndarray, X: np.ndarray,
                            U: np.ndarray, p: np.ndarray, only: np.ndarray | None = None
                            ) -> tuple[np.ndarray, float]:
    """One Newton step on ``U = P(x, p, U)`` for every interval at once.

    Solves ``(I - dP/dU) dU = P U - U`` with ``dP/dU = h (A kron I)
    blockdiag(f_x)``, the same matrix whose solve gives the fixed-point
    sensitivities.  Converges where the plain Picard iteration does not
    contract (stiff or strongly nonlinear intervals).

    Parameters
    ----------
    f_der : casadi.Function or NativeFunction
        ``f_derivatives`` mapped over all ``J K`` nodes.
    node_t, node_u : DM or ndarray
        Node times ``(1, J K)`` and inputs ``(nu, J K)``.
    system : FixedPointSystem
        The quadrature's node integration matrix and the states to eliminate.
    h : ndarray (J,)
    X : (J, nx), U : (J, nx, K), p : (np,)
    only : ndarray of bool (J,), optional
        The intervals to step; the others keep ``U`` (settled already: the
        later steps of a settle move a fraction of the intervals).  With
        ``f_der`` compiled (a mapped :class:`~picard_casadi.runtime.native.NativeFunction`)
        ``f`` and ``f_x`` are evaluated at these intervals' nodes only.

    Returns
    -------
    U_new : ndarray (J, nx, K)
    residual : float
        ``max |P U - U|`` before the step, over the intervals stepped.
    """
    J, nx, K = U.shape
    sel = np.arange(J) if only is None else np.flatnonzero(only)
    n = sel.size
    dU = np.zeros((J, K * nx, 1))
    if n == 0:
        return U.copy(), 0.0
    if n < J and isinstance(f_der, NativeFunction) and f_der.count == J * K:
        # compiled: f and f_x at the marked intervals' nodes only (the
        # generated loop takes its count at run time)
        nodes = node_columns(sel, K)
        F, Fx, _ = f_der(np.asarray(node_t)[:, nodes],
                         U[sel].transpose(1, 0, 2).reshape(nx, n * K), p,
                         np.asarray(node_u)[:, nodes], count=n * K)
    else:
        F, Fx, _ = f_der(node_t, U.transpose(1, 0, 2).reshape(nx, J * K), p, node_u)
        F = np.asarray(F).reshape(nx, J, K)[:, sel].reshape(nx, n * K)
        Fx = np.asarray(Fx).reshape(nx, J, K, nx)[:, sel].reshape(nx, n * K * nx)
    F = np.asarray(F).reshape(nx, n, K).transpose(1, 0, 2)  # (n, nx, K)
    Fx = np.asarray(Fx).reshape(nx, n, K, nx).transpose(1, 2, 0, 3)  # (n, K, nx, nx)
    Us = U[sel]
    R = X[sel][:, :, None] + h[sel][:, None, None] * np.einsum("jal,kl->jak", F, system.A) - Us
    rhs = R.transpose(0, 2, 1).reshape(n, K * nx, 1)
    with np.errstate(all="ignore"):
        try:
            dU[sel] = system.solve(h[sel], Fx, rhs)
        except np.linalg.LinAlgError:
            dU[sel] = np.nan
    dU = dU.reshape(J, K, nx).transpose(0, 2, 1)
    return U + dU, float(np.max(np.abs(R)))


class PointDerivatives:
    """``f, f_x, f_p`` at nodes and ``g, g_x, g_p`` at samples, mapped.

    Parameters
    ----------
    model : Model
    n_nodes, n_samples : int
        Number of points each mapped function takes per call.
    """

    def __init__(self, model: Model, n_nodes: int, n_samples: int) -> None:
        t, x, p, u = model.t, model.x, model.p, model.u
        f_fun = ca.Function(
            "f_derivatives", [t, x, p, u],
            [model.rhs, ca.jacobian(model.rhs, x), ca.jacobian(model.rhs, p)],
            ["t", "x", "p", "u"], ["f", "fx", "fp"],
        )
        g_fun = ca.Function(
            "g_derivatives", [t, x, p, u],
            [model.y, ca.jacobian(model.y, x), ca.jacobian(model.y, p)],
            ["t", "x", "p", "u"], ["g", "gx", "gp"],
        )
        self.units = {"f_derivatives": f_fun, "g_derivatives": g_fun}
        self.functions = {
            "f_derivatives": f_fun.map(n_nodes),
            "g_derivatives": g_fun.map(n_samples),
        }


class FixedPointLinearisation:
    """Residuals and their exact fixed-point Jacobian for all intervals.

    Parameters
    ----------
    disc : Discretisation
    functions : dict
        ``"f_derivatives"`` and ``"g_derivatives"`` (possibly code-generated)
        from :class:`PointDerivatives` with ``J K`` nodes and ``J M`` samples,
        and ``"interval_linearisation"``, ``"interval_newton"``
        (:mod:`picard_casadi.transcription.interval_linearisation`) mapped over ``J``.
    common : callable, optional
        Returns the problem's constant data in the mapped functions' layout
        (``t0``, ``h``, ``Wn``, ``S``, ``ts``, ``Ws``); needed by the
        per-interval functions.
    """

    def __init__(self, disc: Discretisation, functions: dict[str, ca.Function],
                 common: Any = None) -> None:
        self.disc = disc
        self._functions = functions
        # the problem's constant data in the mapped functions' layout (a
        # callable, from the transcription): the sparse per-interval functions need it
        self._common = common
        self._resolved: dict[str, Any] = {}
        # compiled functions are called on NumPy buffers where the backend allows
        native = getattr(functions, "native", None)
        d = disc
        J, K, M = d.n_intervals, d.K, d.M
        as_arg = np.asarray if native else ca.DM
        self._node_t = as_arg(d.node_times.reshape(1, J * K))
        self._samp_t = as_arg(d.sample_times.reshape(1, J * M))
        self._samp_u = as_arg(d.sample_inputs.transpose(1, 0, 2).reshape(d.model.nu, J * M))
        self._node_u = as_arg(d.node_inputs.transpose(1, 0, 2).reshape(d.model.nu, J * K))
        self._A = d.quad.integration  # K x K
        #: the interval systems I - dP/dU, with the model's explicit states
        #: eliminated, solved in generated C where the functions are compiled
        self.system = fixed_point_system(d.model, self._A)
        if native is not None:
            self.system.use_kernel(kernel_loader(self.system, d.model.nx,
                                                 d.model.nx + d.model.np, functions,
                                                 d.model.jacobian_pattern))
        # (h, f_x at the nodes) of the last dense linearisation, and the
        # inverse of its I - dP/dU, formed only when asked for (last_inverse)
        self._last_jacobians: tuple[np.ndarray, np.ndarray] | None = None
        self._last_inverse: np.ndarray | None = None
        self._constants: tuple[np.ndarray, ...] | None = None

    def _function(self, name: str) -> Any:
        """``name`` as called here: on NumPy buffers when compiled (resolved,
        and so compiled, on first use: ``picard`` never needs derivatives)."""
        if name not in self._resolved:
            native = getattr(self._functions, "native", None)
            fn = native(name) if native is not None else None
            self._resolved[name] = fn if fn is not None else self._functions[name]
        return self._resolved[name]

    @property
    def kernels(self) -> Any:
        """The compiled kernels (:class:`~picard_casadi.transcription.kernels.IterationKernels`)
        of :attr:`system`, loaded on first use; None where there are none."""
        return self.system.compiled_solve()

    @property
    def f_der(self) -> Any:
        """``(t, x, p, u) -> (f, f_x, f_p)`` mapped over all nodes."""
        return self._function("f_derivatives")

    def node_derivatives(self, U: np.ndarray, p: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``f``, ``f_x`` and ``f_p`` at every node for node values ``U``
        ``(J, nx, K)``: ``(J, K, nx)``, ``(J, K, nx, nx)``, ``(J, K, nx, np)``."""
        d = self.disc
        J, K, nx, np_ = d.n_intervals, d.K, d.model.nx, d.model.np
        Uflat = np.asarray(U, float).transpose(1, 0, 2).reshape(nx, J * K)
        F, Fx, Fp = self.f_der(self._node_t, Uflat, p, self._node_u)
        return (np.asarray(F).reshape(nx, J, K).transpose(1, 2, 0),
                np.asarray(Fx).reshape(nx, J, K, nx).transpose(1, 2, 0, 3),
                np.asarray(Fp).reshape(nx, J, K, np_).transpose(1, 2, 0, 3))

    @property
    def g_der(self) -> Any:
        """``(t, x, p, u) -> (g, g_x, g_p)`` mapped over all samples."""
        return self._function("g_derivatives")

    @property
    def last_inverse(self) -> np.ndarray | None:
        """Inverse of ``I - dP/dU`` at the last dense linearisation ``(J, K nx, K nx)``.

        Formed on first use (the second-order terms of Newton steps) and kept
        until the next linearisation: the sensitivities themselves come from
        an LU solve, about a third of the inverse's operations
        (docs/performance.md).  ``None`` after a sparse linearisation or where
        the matrix is singular.
        """
        if self._last_inverse is None and self._last_jacobians is not None:
            try:
                self._last_inverse = self.system.inverse(*self._last_jacobians)
            except np.linalg.LinAlgError:
                pass
            self._last_jacobians = None
        return self._last_inverse

    def _forget_linearisation(self, jacobians: tuple[np.ndarray, np.ndarray] | None = None
                              ) -> None:
        """A new linearisation: keep its ``(h, f_x)`` (dense path), drop the old inverse."""
        self._last_jacobians, self._last_inverse = jacobians, None

    def chord_step(self, U: np.ndarray, PU: np.ndarray) -> np.ndarray | None:
        """A Newton step on ``U = P U`` with the Jacobian of the last linearisation.

        After a Gauss-Newton step the fixed-point Jacobian of the new point
        differs little from the one just built, so its inverse settles the
        trial point in one batched matrix-vector product per step.  Taken
        only where :attr:`last_inverse` has been formed anyway (the Newton
        model's second-order terms need it): forming it for chord steps
        alone cost more than the Picard sweeps and Newton steps that settle a
        trial point without it (docs/performance.md, "the dense path").
        Returns ``None`` when no inverse is at hand; callers check that the
        residual fell.

        Parameters
        ----------
        U, PU : (J, nx, K)
            Node values and their Picard image.
        """
        inverse = self._last_inverse  # only where already formed (see last_inverse)
        if inverse is None or inverse.shape[0] != U.shape[0]:
            return None
        J, nx, K = U.shape
        R = (PU - U).transpose(0, 2, 1).reshape(J, K * nx, 1)
        with np.errstate(all="ignore"):
            dU = np.matmul(inverse, R).reshape(J, K, nx).transpose(0, 2, 1)
        return U + dU

    def newton_step(self, X: np.ndarray, U: np.ndarray, p: np.ndarray,
                    only: np.ndarray | None = None) -> tuple[np.ndarray, float]:
        """One Newton step on the fixed-point equations of all intervals (or of
        the intervals ``only`` marks)."""
        return newton_fixed_point_step(self.f_der, self._node_t, self._node_u, self.system,
                                       self.disc.h, X, U, p, only)

    @property
    def sparse(self) -> bool:
        """Whether the per-interval sparse functions
        (:mod:`picard_casadi.transcription.interval_linearisation`) are available."""
        return self._common is not None and "interval_linearisation" in self._functions

    def interval_sensitivities(self, X: np.ndarray, U: np.ndarray, p: np.ndarray,
                               full: bool = False, trimmed: bool = False
                               ) -> dict[str, np.ndarray]:
        """Outputs and end states of one Picard application, with exact derivatives.

        Parameters
        ----------
        X : (J, nx), U : (J, nx, K), p : (np,)
        full : bool
            Also the intermediate quantities the second-order terms need, on
            the dense path (whose ``f_x`` is kept to form ``I - dP/dU`` for
            :attr:`last_inverse`, for the adjoint solves).  Otherwise, where the
            per-interval sparse function is available, only the first five
            entries below, from one generated call.
        trimmed : bool
            ``dG``'s sample axis may stop at the discretisation's
            ``samples_used`` (the rest is padding, where ``G`` has no data);
            without ``full`` only.

        Returns
        -------
        dict with
            ``G`` (J, ny, M): outputs at the samples;
            ``dG`` (J, M, ny, nx + np): their derivatives with respect to
            ``(x_j, p)`` through the fixed point;
            ``xend`` (J, nx) and ``dend`` (J, nx, nx + np): end states;
            ``S`` (J, K, nx, nx + np): node sensitivities ``dU/d(x_j, p)``;
            with ``full``: ``Fx`` (J, K, nx, nx): ``f_x`` at the nodes; ``Xs``
            (J, M, nx) and ``dXs`` (J, M, nx, nx + np): states at the samples
            and their derivatives; ``Gx`` (J, M, ny, nx): ``g_x`` at the
            samples (the second-order terms of :mod:`picard_casadi.transcription.second_order`).
        """
        with np.errstate(all="ignore"):  # non-finite values are checked by the callers
            if full or not self.sparse:
                return self._interval_sensitivities(X, U, p, trimmed and not full)
            return self._sparse_sensitivities(X, U, p)

    def _sparse_sensitivities(self, X, U, p):
        """The per-interval generated function (sparse QR inside), reshaped."""
        d = self.disc
        m = d.model
        J, K, M = d.n_intervals, d.K, d.M
        nx, nz, ny = m.nx, m.nx + m.np, m.ny
        c = self._common()
        G, dG, xend, dend, dU = (np.asarray(o) for o in self._function("interval_linearisation")(
            X.T, U.transpose(1, 0, 2).reshape(nx, J * K), p, c["t0"], c["h"], c["Wn"], c["S"],
            c["ts"], c["Ws"]))
        self._forget_linearisation()
        return {"G": G.reshape(ny, J, M).transpose(1, 0, 2),
                "dG": dG.reshape(M * ny, J, nz).transpose(1, 0, 2).reshape(J, M, ny, nz),
                "xend": xend.T, "dend": dend.reshape(nx, J, nz).transpose(1, 0, 2),
                "S": dU.reshape(K * nx, J, nz).transpose(1, 0, 2).reshape(J, K, nx, nz)}

    def sparse_newton_step(self, X: np.ndarray, U: np.ndarray, p: np.ndarray,
                           x_scale: np.ndarray) -> tuple[np.ndarray, float]:
        """One Newton step on every interval's fixed point, sparse and generated.

        Returns
        -------
        U_new : ndarray (J, nx, K)
        residual : float
            Scaled ``max |P U - U|`` at ``U`` (before the step); ``inf`` if not finite.
        """
        d = self.disc
        J, K, nx = d.n_intervals, d.K, d.model.nx
        c = self._common()
        with np.errstate(all="ignore"):
            U_new, res = (np.asarray(o) for o in self._function("interval_newton")(
                X.T, U.transpose(1, 0, 2).reshape(nx, J * K), p, c["t0"], c["h"], c["Wn"],
                x_scale))
            r = float(np.max(res))
        if not (np.isfinite(r) and np.all(np.isfinite(U_new))):
            r = np.inf if not np.isfinite(r) else r
        return U_new.reshape(nx, J, K).transpose(1, 0, 2), r

    def _interval_sensitivities(self, X, U, p, trimmed: bool = False):
        d = self.disc
        m = d.model
        J, K, M = d.n_intervals, d.K, d.M
        nx, np_, ny = m.nx, m.np, m.ny
        nz = nx + np_
        h = d.h
        A = self._A
        rows, end_row, rhs, F1, dF1 = self._constant_factors()
        F, Fx, Fp = self.node_derivatives(U, p)

        # solve (I - dP/dU) S = dP/dz: the x_j columns of dP/dz are the
        # identity at every node (kept in rhs), the p columns h (A kron I) f_p
        # (einsum's generic loops cost several times BLAS's batched matmul here);
        # dF_l/dz = Fx[l] S_l + [0 | Fp[l]], written into dF1's first K nodes;
        # its last "node" is [I | 0] (F1's is x_j), so that the states at the
        # samples x_j + h S f(U) and their derivatives [I | 0] + h S dF come
        # from one product each with the rows [h S | 1].  Compiled, all of it
        # is one call of the generated kernel (kernels.py)
        dF = dF1[:, :K]
        kernel = self.kernels
        try:
            if kernel is not None and kernel.max_rhs == nz and kernel.K == K:
                S = kernel.sensitivities(h, Fx, Fp, dF1)
            else:
                rhs.reshape(J, K, nx, nz)[..., nx:] = (h[:, None, None] * np.matmul(
                    A, Fp.reshape(J, K, nx * np_))).reshape(J, K, nx, np_)
                S = self.system.solve(h, Fx, rhs)
                np.matmul(Fx, S.reshape(J, K, nx, nz), out=dF)
                dF[..., nx:] += Fp
            self._forget_linearisation((h, Fx))  # kept for last_inverse
        except np.linalg.LinAlgError:  # a singular interval: callers see non-finite values
            S = np.full(rhs.shape, np.nan)
            dF[...] = np.nan
            self._forget_linearisation()
        S = S.reshape(J, K, nx, nz)
        F1[:, :K] = F
        F1[:, K] = X
        Xs = np.matmul(rows, F1)  # (J, M, nx)
        Mt = d.samples_used if trimmed else M
        dXs = np.matmul(rows[:, :Mt], dF1.reshape(J, K + 1, nx * nz)).reshape(J, Mt, nx, nz)
        xend = np.matmul(end_row, F1)[:, 0]
        dend = np.matmul(end_row, dF1.reshape(J, K + 1, nx * nz)).reshape(J, nx, nz)

        G, Gx, Gp = self.g_der(self._samp_t, Xs.transpose(2, 0, 1).reshape(nx, J * M), p,
                               self._samp_u)
        G = np.asarray(G).reshape(ny, J, M).transpose(1, 0, 2)  # (J, ny, M)
        Gx = np.asarray(Gx).reshape(ny, J, M, nx).transpose(1, 2, 0, 3)[:, :Mt]  # (J, M, ny, nx)
        Gp = np.asarray(Gp).reshape(ny, J, M, np_).transpose(1, 2, 0, 3)[:, :Mt]  # (J, M, ny, np)
        dG = np.matmul(Gx, dXs)
        dG[..., nx:] += Gp
        return {"G": G, "dG": dG, "xend": xend, "dend": dend, "S": S,
                "Fx": Fx, "Xs": Xs, "dXs": dXs, "Gx": Gx}

    def _constant_factors(self) -> tuple[np.ndarray, ...]:
        """What the dense linearisation reuses from call to call: the sample
        rows ``[h S | 1]`` ``(J, M, K + 1)`` and the end row ``[h A_K | 1]``
        ``(J, 1, K + 1)``; the right-hand side buffer ``(J, K nx, nx + np)``
        whose ``x_j`` columns (the identity at every node) are written once;
        and the buffers ``(J, K + 1, nx)`` of ``(f(U), x_j)`` and ``(J, K + 1,
        nx, nx + np)`` of ``(dF, [I | 0])``, whose last entries are constant."""
        if self._constants is None:
            d = self.disc
            J, K, M = d.n_intervals, d.K, d.M
            nx, nz = d.model.nx, d.model.nx + d.model.np
            h = d.h
            rows = np.ones((J, M, K + 1))
            rows[..., :K] = h[:, None, None] * d.sample_rows
            end_row = np.ones((J, 1, K + 1))
            end_row[:, 0, :K] = h[:, None] * self._A[K - 1][None, :]
            rhs = np.zeros((J, K, nx, nz))
            rhs[..., :nx] = np.eye(nx)
            dF1 = np.zeros((J, K + 1, nx, nz))
            dF1[:, K, :, :nx] = np.eye(nx)
            self._constants = (rows, end_row, rhs.reshape(J, K * nx, nz),
                               np.empty((J, K + 1, nx)), dF1)
        return self._constants

    def linearise(self, X: np.ndarray, U: np.ndarray, p: np.ndarray, V: np.ndarray,
                  lam: float, Wt: np.ndarray, x_scale: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Residuals ``(J, m)`` from ``U`` and exact Jacobians ``(J, m, nx)``, ``(J, m, np)``.

        The residuals are those of one Picard application to ``U`` (equal to
        ``P^n U``'s when ``U`` is a fixed point); pass ``U = P^{n-1} U`` to
        match the ``P^n`` residuals exactly.

        Parameters
        ----------
        X : (J, nx), U : (J, nx, K), p : (np,), V : (J, nx)
        lam : float
        Wt : (J, ny, M)
            Square-root weights of the data residuals (zero where missing).
        x_scale : (nx,)
        """
        d = self.disc
        J, M = d.n_intervals, d.M
        nx, np_, ny = d.model.nx, d.model.np, d.model.ny
        sens = self.interval_sensitivities(X, U, p)
        r_data = (Wt * (d.y - sens["G"])).transpose(0, 2, 1).reshape(J, M * ny)
        J_data = -(Wt.transpose(0, 2, 1)[..., None] * sens["dG"]).reshape(J, M * ny, nx + np_)
        a = np.sqrt(2.0 * lam) * d.has_next.astype(float)
        xn = np.zeros_like(X)
        xn[:-1] = X[1:]
        xn[~d.has_next] = 0.0
        r_cont = a[:, None] * ((sens["xend"] - xn) / x_scale[None, :] + V)
        J_cont = a[:, None, None] * sens["dend"] / x_scale[None, :, None]
        r = np.concatenate([r_data, r_cont], axis=1)
        Jz = np.concatenate([J_data, J_cont], axis=1)
        self.last_node_sensitivity = sens["S"]
        return r, Jz[:, :, :nx], Jz[:, :, nx:]

    def predict_nodes(self, U: np.ndarray, dX: np.ndarray, dp: np.ndarray) -> np.ndarray:
        """First-order prediction ``U + (dU/dz) dz`` after :meth:`linearise`."""
        return predict_nodes(self.last_node_sensitivity, U, dX, dp)
