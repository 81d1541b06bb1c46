"""``method="picard-gn"``: Levenberg-Marquardt steps inside the Picard iteration.

The step on ``(p, x_j)`` is a Levenberg-Marquardt step on the residual vector
of ``L_{lambda,n}`` (data residuals and ``sqrt(2 lambda)``-weighted continuity
residuals).  Its Jacobian is either

* ``jacobian="fixed-point"`` (default): the exact derivative of the Picard
  fixed point, the ``n -> infinity`` limit of ``grad P^n`` (paper, Thm. 2),
  by the implicit function theorem (:mod:`picard_casadi.sensitivity`); or
* ``jacobian="picard"``: the exact Jacobian through ``P^n`` with ``U`` held
  fixed (CasADi forward mode on the per-interval SX graph), a truncated
  Neumann series of the former.

Measured on "vdp" (``T = 0.25``, ``n = 2``, where ``L T`` is near 1) the
truncated Jacobian is 10 % off, so Gauss-Newton with it converges linearly
and its limit is biased by the truncation; the fixed-point Jacobian gives
Gauss-Newton's fast convergence to the exactly continuous optimum.  The Jacobian is block sparse;
the normal equations are solved by block elimination
(:mod:`picard_casadi.blocksolve`), so the cost of a step grows linearly with
the number of intervals and experiments.

Bounds: variables at a bound whose gradient points outward are held fixed for
the step, the step is projected on the box, and it is accepted on the ratio of
actual to predicted reduction (Nielsen's damping update).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..blocksolve import NormalEquations, jacobian_times
from .base import LoopOptions, Setup, StepInfo

__all__ = ["LevenbergMarquardtStep", "PicardGNOptions", "JACOBIANS"]

JACOBIANS = ("fixed-point", "picard")


@dataclass
class PicardGNOptions(LoopOptions):
    """Options of ``method="picard-gn"`` (see :class:`LoopOptions` for the rest).

    Attributes
    ----------
    jacobian : {"fixed-point", "picard"}
        Which Jacobian the step uses (see the module doc).
    mu0 : float
        Initial Levenberg-Marquardt damping, relative to the diagonal of
        ``J^T J``.
    max_tries : int
        Damping increases per iteration before the step is given up.
    """

    max_iter: int = 200
    sigma: float = 1.0
    sweeps: int | str = "auto"
    jacobian: str = "fixed-point"
    mu0: float = 1e-3
    max_tries: int = 12

    def validate(self) -> None:
        super().validate()
        if self.jacobian not in JACOBIANS:
            raise ValueError(f"jacobian must be one of {JACOBIANS}, got {self.jacobian!r}")


class LevenbergMarquardtStep:
    """Levenberg-Marquardt step on ``(p, x_j)`` for fixed node values ``U``."""

    def __init__(self, setup: Setup, mu0: float = 1e-3, max_tries: int = 12,
                 jacobian: str = "fixed-point") -> None:
        self.setup = setup
        self.fixed_point = jacobian == "fixed-point"
        self.linearise = (setup.tr.fixed_point_jacobian if self.fixed_point
                          else setup.tr.jacobian)
        self.mu = float(mu0)
        self.nu = 2.0
        self.max_tries = int(max_tries)

    def step(self, Xs, U, ps, V, lam) -> StepInfo:
        s = self.setup
        tr, disc = s.tr, s.disc
        X, p = s.from_scaled(Xs, ps)
        r, Jx, Jp = self.linearise(X, U, p, V, lam)
        if not (np.all(np.isfinite(r)) and np.all(np.isfinite(Jx)) and np.all(np.isfinite(Jp))):
            return StepInfo(Xs, ps, np.nan, np.nan, np.nan, 0.0, False, 1, self.mu,
                            failed=True, message=(
                                "residuals or Jacobian are not finite at the current "
                                "iterate; the model left its domain (add or tighten "
                                "x0_bounds/p_bounds)"))
        phi = 0.5 * float(np.sum(r * r))
        Jx = Jx * s.x_scale[None, None, :]
        Jp = Jp * s.p_scale[None, None, :]
        a = np.sqrt(2.0 * lam) * disc.has_next.astype(float)
        ne = NormalEquations(r, Jx, Jp, a, disc.has_next)
        gnorm = s.projected_gradient_norm(Xs, ps, ne.gx, ne.gp)

        xl, xu, pl, pu = s.scaled_bounds
        tiny = 1e-12
        free_x = s.free_x & ~((Xs <= xl + tiny) & (ne.gx > 0)) & ~((Xs >= xu - tiny) & (ne.gx < 0))
        free_p = s.free_p & ~((ps <= pl + tiny) & (ne.gp > 0)) & ~((ps >= pu - tiny) & (ne.gp < 0))
        dmax = max(float(np.einsum("jii->", ne.D)), float(np.trace(ne.Hpp)), 1e-300)
        floor = 1e-12 * dmax / max(Xs.size + ps.size, 1)
        damp_x = np.maximum(np.einsum("jii->ji", ne.D), floor)
        damp_p = np.maximum(np.diag(ne.Hpp), floor)

        evals = 1
        for _ in range(self.max_tries):
            dX, dp = ne.solve(self.mu, free_x, free_p, damp_x, damp_p)
            Xn, pn = s.project(Xs + dX, ps + dp, Xs, ps)
            dX, dp = Xn - Xs, pn - ps
            lin = r + jacobian_times(Jx, Jp, a, disc.has_next, dX, dp)
            predicted = phi - 0.5 * float(np.sum(lin * lin))
            Xp, pp = s.from_scaled(Xn, pn)
            U_new = None
            if self.fixed_point:
                # the reduced objective: U re-settled on the fixed point of the trial z
                U_new = tr.predict_nodes(U, dX * s.x_scale, dp * s.p_scale)
                step = float(max(np.abs(dX).max(initial=0.0), np.abs(dp).max(initial=0.0)))
                U_new, _, sweeps = tr.settle(Xp, U_new, pp, tol=max(1e-3 * step, 1e-14))
                evals += sweeps
            r_new = tr.residuals(Xp, U if U_new is None else U_new, pp, V, lam)
            evals += 1
            phi_new = 0.5 * float(np.sum(r_new * r_new)) if np.all(np.isfinite(r_new)) else np.inf
            rho = (phi - phi_new) / predicted if predicted > 0 else -1.0
            if np.isfinite(phi_new) and rho > 1e-4:
                self.mu *= max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
                self.mu = max(self.mu, 1e-12)
                self.nu = 2.0
                step = float(max(np.abs(dX).max(initial=0.0), np.abs(dp).max(initial=0.0)))
                return StepInfo(Xn, pn, phi, phi_new, gnorm, step, True, evals, self.mu,
                                U=U_new)
            self.mu *= self.nu
            self.nu *= 2.0
            if predicted <= 1e-15 * max(phi, 1e-300):
                break  # nothing left to gain at this precision
        self.mu = min(self.mu, 1e10)
        return StepInfo(Xs, ps, phi, phi, gnorm, 0.0, False, evals, self.mu)
