"""Exact second derivatives in the constrained step, and when to use them.

Gauss-Newton models the misfit by ``J^T J`` alone; where the residuals are
large and curved it converges only linearly.  The Newton model adds the
curvature of the Lagrangian per interval (:mod:`picard_casadi.transcription.second_order`:
exact second derivatives of the Picard fixed point, outputs weighted by
``-W r`` and end states by the continuity multipliers), condensed like
``J^T J`` and solved by the same active-set method in its Cholesky factor;
where it is not convex even with a damping of ``NEWTON_MAX_DAMPING``
(relative to ``J^T J``'s diagonal) the step is Gauss-Newton's.

``hessian="exact"`` takes Newton steps from the start; ``"auto"`` switches
when Gauss-Newton stalls (``STALL_STEPS`` accepted steps in a row, each
gaining less than ``STALL_GAIN`` of the merit), and a solve that continues
one that converged so (another weight round, a refined mesh:
``Setup.newton``) starts with Newton steps; ``"gauss-newton"`` never.
"""

from __future__ import annotations

import numpy as np

from ..transcription.problem_size import dense_fits
from ..transcription.second_order import FixedPointHessian
from .base import Setup, StepInfo, require_one_of

__all__ = ["HESSIANS", "NewtonSwitch"]

# which model the steps use: J^T J, the exact Hessian, or J^T J until it stalls
HESSIANS = ("auto", "exact", "gauss-newton")
# Gauss-Newton has stalled after STALL_STEPS accepted steps in a row that each
# gained less than STALL_GAIN of the merit (hessian="auto")
STALL_GAIN = 1e-5
STALL_STEPS = 10
# largest relative damping that may make the Newton model convex; beyond it
# the step is Gauss-Newton's (see NewtonSwitch.system)
NEWTON_MAX_DAMPING = 1e-4


class NewtonSwitch:
    """The Newton model of the constrained step: its curvature, its system, its switch.

    Parameters
    ----------
    setup : Setup
    hessian : {"auto", "exact", "gauss-newton"}

    Attributes
    ----------
    newton : bool
        Whether the steps use the Newton model now.
    """

    def __init__(self, setup: Setup, hessian: str) -> None:
        require_one_of("hessian", hessian, HESSIANS)
        self.setup = setup
        self.hessian = hessian
        # "auto" in a solve that continues one that converged with Newton's
        # model (Setup.newton) starts with it
        self.newton = hessian == "exact" or (hessian == "auto" and setup.newton
                                             and self._dense_fits())
        self._slow_steps = 0  # accepted steps in a row that gained less than STALL_GAIN
        self._second_order: FixedPointHessian | None = None  # built on the first Newton step

    def curvature(self, U: np.ndarray, p: np.ndarray, sens: dict[str, np.ndarray],
                  r: np.ndarray, Jx: np.ndarray, E: np.ndarray) -> np.ndarray | None:
        """The Lagrangian's second-order terms per interval, scaled: ``(J, nx + np, nx + np)``.

        The Lagrangian ``|r|^2 / 2 + sum_j lam_j^T (x_end_j - x_{j+1})`` (scaled
        continuity conditions).  Its multipliers make it stationary in every
        interval start after an experiment's first, backwards along each
        experiment: ``lam_j = Jx_{j+1}^T r_{j+1} + E_{j+1}^T lam_{j+1}`` (zero
        after the last interval).  With them, ``S~^T (J^T J + curvature) S~``
        is the exact Hessian of the condensed objective at a continuous
        point.  The data residuals ``r = W (y - g)`` weight the outputs'
        curvature by ``-W r``.  ``None`` where a value is not finite.
        """
        s = self.setup
        disc = s.disc
        J, M, ny, nx = disc.n_intervals, disc.M, disc.model.ny, disc.model.nx
        hn = disc.has_next
        lam = np.zeros((J, nx))
        for j in range(J - 2, -1, -1):
            if hn[j]:
                lam[j] = Jx[j + 1].T @ r[j + 1] + E[j + 1].T @ lam[j + 1]
        w = -s.tr._Wt.transpose(0, 2, 1) * r.reshape(J, M, ny)
        inverse = s.tr.last_fixed_point_inverse
        if inverse is None:
            return None
        if self._second_order is None:
            self._second_order = FixedPointHessian(disc)
        H = self._second_order.contracted(U, p, sens, inverse, w, lam / s.x_scale)
        zs = np.concatenate([s.x_scale, s.p_scale])
        Hs = zs[None, :, None] * H * zs[None, None, :]
        return Hs if np.all(np.isfinite(Hs)) else None

    @staticmethod
    def quadratic(Hs: np.ndarray | None, dX: np.ndarray, dp: np.ndarray) -> float:
        """``sum_j dz_j^T Hs_j dz_j``, ``dz_j = (dX_j, dp)``; 0 without ``Hs`` (Gauss-Newton)."""
        if Hs is None:
            return 0.0
        dz = np.concatenate([dX, np.broadcast_to(dp, (dX.shape[0], dp.size))], axis=1)
        return float(np.einsum("ja,jab,jb->", dz, Hs, dz))

    @staticmethod
    def system(H0: np.ndarray, g: np.ndarray, diag: np.ndarray, active: np.ndarray,
               mu: float) -> tuple[np.ndarray, np.ndarray, float] | None:
        """The damped Newton model as a least-squares problem ``(L^T, L^-1 g, mu)``.

        The model ``q(t) = t^T H0 t / 2 + g^T t`` (``H0 = A^T A + Hc``, ``g =
        A^T b + hc``) plus the damping ``mu t^T diag(diag) t / 2`` equals
        ``|L^T t + L^-1 g|^2 / 2`` up to a constant, with ``L L^T`` the
        Cholesky factor of its Hessian.  Inactive entries (parameters held on
        their bound) get unit rows.  Where that Hessian is not positive
        definite, ``mu`` is raised until it is (the ``mu`` used is returned),
        but not beyond ``NEWTON_MAX_DAMPING``: ``None`` then, the iterate is
        not near a minimum and the step falls back to Gauss-Newton's convex
        model.  (Without the cap, as in a trust-region Newton method,
        ``fa18-roll-rud`` seed 2 crept with ``mu`` ~1e-5..1e-4 and steps
        ~1e-5 for 2000 iterations where Gauss-Newton converges in 1147; with
        no damping allowed at all, ``fa18-roll-beta`` seed 0 took 885
        iterations instead of 379.)
        """
        inactive = ~active
        while True:
            H = H0 + np.diag(mu * diag)
            H[inactive, :] = 0.0
            H[:, inactive] = 0.0
            H[inactive, inactive] = 1.0
            try:
                L = np.linalg.cholesky(H)
            except np.linalg.LinAlgError:
                mu = max(mu, 1e-12) * 4.0
                if mu > NEWTON_MAX_DAMPING:
                    return None
                continue
            return L.T, np.linalg.solve(L, np.where(active, g, 0.0)), mu

    def watch(self, info: StepInfo) -> None:
        """Switch to Newton steps (``hessian="auto"``) once Gauss-Newton stalls.

        Stalled: ``STALL_STEPS`` accepted steps in a row each lowered the
        merit by less than ``STALL_GAIN`` of it, while the iteration has not
        converged (Gauss-Newton's linear convergence where the residuals are
        large; it converges in a few steps where they are not, so the switch
        costs nothing there).  Not where the second-order terms' dense
        ``(K nx)^2`` matrices per interval would not fit in memory
        (:func:`~picard_casadi.transcription.problem_size.dense_fits`).
        """
        if self.hessian != "auto" or self.newton:
            return
        if not self._dense_fits():
            return  # the second-order terms' dense matrices would not fit: Gauss-Newton
        gain = (info.phi_before - info.phi_after) / max(abs(info.phi_before), 1e-300)
        self._slow_steps = self._slow_steps + 1 if gain < STALL_GAIN else 0
        if self._slow_steps >= STALL_STEPS:
            self.newton = True

    def _dense_fits(self) -> bool:
        """Whether the second-order terms' dense ``(K nx)^2`` matrices per
        interval fit in memory on this mesh."""
        d = self.setup.disc
        return dense_fits(d.n_intervals, d.K, d.model.nx)
