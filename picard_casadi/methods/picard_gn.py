"""``method="picard-gn"``: Levenberg-Marquardt steps inside the Picard iteration.

The step on ``(p, x_j)`` is a Levenberg-Marquardt step on the residual vector
of ``L_{lambda,n}`` (data residuals and ``sqrt(2 lambda)``-weighted continuity
residuals).  Its Jacobian is either

* ``jacobian="fixed-point"`` (default): the exact derivative of the Picard
  fixed point, the ``n -> infinity`` limit of ``grad P^n`` (paper, Thm. 2),
  by the implicit function theorem (:mod:`picard_casadi.transcription.sensitivity`); or
* ``jacobian="picard"``: the exact Jacobian through ``P^n`` with ``U`` held
  fixed (CasADi forward mode on the per-interval SX graph), a truncated
  Neumann series of the former.

The truncated Jacobian makes Gauss-Newton converge linearly and biases its
limit where ``L T`` is not small (``docs/design.md``); the fixed-point
Jacobian gives Gauss-Newton's fast convergence to the exactly continuous
optimum.  The Jacobian is block sparse;
the normal equations are solved by block elimination
(:mod:`picard_casadi.transcription.blocksolve`), so the cost of a step grows linearly with
the number of intervals and experiments.

Bounds: variables at a bound whose gradient points outward are held fixed for
the step, the step is projected on the box, and it is accepted on the ratio of
actual to predicted reduction (Nielsen's damping update).  The scaled step is
also kept inside a trust radius (the damping is raised until it fits), which
grows after good steps and shrinks after poor ones: at the start the
continuity penalty can dominate the data term, and an unbounded first
Gauss-Newton step then jumps to a distant basin (seen on FitzHugh-Nagumo).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from ..transcription.blocksolve import NormalEquations, jacobian_times
from .base import (WEIGHTS_ADVICE, LoopOptions, Setup, StepInfo, require_one_of, require_positive,
                   require_positive_int, step_size)
from .breakdown import guarded_step, not_finite_message
from .newton_switch import HESSIANS

__all__ = ["LevenbergMarquardtStep", "PicardGNOptions", "JACOBIANS", "TR_SOLVERS"]

JACOBIANS = ("fixed-point", "picard")
TR_SOLVERS = ("auto", "exact", "cg")
PRECISION = 1e-14  # predicted relative reduction below this is round-off
SETTLED_COSINE = 1e-4  # inner problem solved: max cosine(residual, Jacobian column)
# initial damping of a solve that continues from a converged solution
CONTINUING_MU0 = 1e-9
# ... and its continuity penalty: the one the converged solve ended with
# (Setup.penalty), at most CONTINUING_PENALTY.  Started from 2 lam = 20, each
# round of PEtab's Boehm reopened the closed gaps and raised rho back to 1e7
# over 20 to 30 iterations; carried in full (1e7 to 1e10), the gaps that
# settling the nodes leaves (~1e-8 of the states' scales) outweighed the
# steps' gains, and a round crept 100 iterations (docs/performance.md,
# "The continuity penalty of a continuing solve")
CONTINUING_PENALTY = 1e3


@dataclass
class PicardGNOptions(LoopOptions):
    """Options of ``method="picard-gn"`` (see :class:`LoopOptions` for the rest).

    Attributes
    ----------
    max_iter : int
        Iteration limit of one solve (each weight round and each refined
        mesh is a solve).  1000: from random starts in the bounds, PEtab's
        Boehm and Zheng problems converge after 14 to 1290 iterations of
        about 20 ms, most of them between 100 and 300 (docs/performance.md,
        "Iteration budget").
    progress_window : int
        100: where the objective falls by less than ``progress_tol`` (1e-3,
        relative) over 100 iterations while the continuity gaps stay open
        (from iteration 200 on), the steps that the trust radius would cut to
        less than a tenth of the Gauss-Newton step are damped instead, and
        the solves that continue this one start so; a run that stalls again
        ends ``"stalled"`` (and the default path tries other starts;
        :class:`LoopOptions`).
    jacobian : {"fixed-point", "picard"}
        Which Jacobian the step uses (see the module doc).
    mu0 : float
        Initial Levenberg-Marquardt damping, relative to the diagonal of
        ``J^T J``.
    max_tries : int
        Damping increases per iteration before the step is given up.
    radius0 : float
        Initial trust radius: the largest change of a scaled variable
        (``p / p_scale``, ``x / x_scale``) in one step.
    hessian : {"auto", "exact", "gauss-newton"}
        The model of the constrained step (``continuity="constrained"``):
        ``"gauss-newton"`` uses ``J^T J`` only; ``"exact"`` adds the
        residuals' and the continuity conditions' curvature (exact second
        derivatives of the Picard fixed point, a Newton/SQP step);
        ``"auto"`` takes Gauss-Newton steps and switches to exact ones when
        they stall (linear convergence on a large-residual loss, see
        :mod:`picard_casadi.methods.newton_switch`).
    tr_solver : {"auto", "exact", "cg"}
        How the constrained step's least-squares problem is solved, as
        ``scipy.optimize.least_squares``' option of that name: ``"exact"``
        forms the condensed Jacobian from every interval's sensitivities
        (:mod:`picard_casadi.methods.condensed`); ``"cg"`` solves it by
        conjugate gradients with products only, never forming a sensitivity
        (:mod:`picard_casadi.methods.matrix_free`), whose cost grows linearly
        with the number of states of a sparsely coupled model; ``"auto"``
        takes ``"cg"`` where it is measured to pay
        (:func:`picard_casadi.methods.matrix_free.cg_pays`), else ``"exact"``.
    """

    max_iter_advice: ClassVar[str] = (
        f"increase max_iter; {WEIGHTS_ADVICE}check the last point with method='ipopt' "
        "(warm_start=this result)")

    max_iter: int = 1000
    progress_window: int = 100
    sigma: float = 1.0
    sweeps: int | str = "auto"
    continuity: str = "constrained"
    jacobian: str = "fixed-point"
    mu0: float = 1e-3
    max_tries: int = 12
    radius0: float = 0.5
    hessian: str = "auto"
    tr_solver: str = "auto"

    def continuing(self) -> "PicardGNOptions":
        """These options with the damping started at ``min(mu0, CONTINUING_MU0)``.

        A solve that continues from a converged solution of the same loss (a
        new round of weights, a refined mesh, a profile point) starts where
        the Gauss-Newton model is good; ``mu0``'s damping, meant for a distant
        start, only shortens the first steps along weakly determined
        directions (measurements: docs/design.md).  The trust region still
        bounds every step.
        """
        return replace(self, mu0=min(self.mu0, CONTINUING_MU0))

    def validate(self) -> None:
        super().validate()
        require_positive("radius0", self.radius0)
        require_positive("mu0", self.mu0)
        require_positive_int("max_tries", self.max_tries)
        require_one_of("hessian", self.hessian, HESSIANS)
        if self.hessian == "exact" and self.continuity != "constrained":
            raise ValueError(
                "hessian='exact' needs continuity='constrained' (the Newton step is the "
                "constrained step's); use hessian='gauss-newton' or 'auto' with "
                f"continuity={self.continuity!r}"
            )
        require_one_of("jacobian", self.jacobian, JACOBIANS)
        require_one_of("tr_solver", self.tr_solver, TR_SOLVERS)
        if self.tr_solver == "cg" and (self.continuity != "constrained"
                                       or self.hessian == "exact"):
            raise ValueError(
                "tr_solver='cg' is the constrained Gauss-Newton step's: it needs "
                "continuity='constrained' and hessian='auto' or 'gauss-newton' (got "
                f"continuity={self.continuity!r}, hessian={self.hessian!r}); use "
                "tr_solver='exact' for the others")
        if self.continuity == "constrained" and self.jacobian != "fixed-point":
            raise ValueError(
                "continuity='constrained' needs jacobian='fixed-point' (the end-state "
                "derivatives of the fixed point); use continuity='multiplier' with "
                "jacobian='picard'"
            )


class LevenbergMarquardtStep:
    """Levenberg-Marquardt step on ``(p, x_j)`` for fixed node values ``U``."""

    #: the transcription's functions the iteration calls (compiled side by side)
    units = ("residual", "summary")

    def __init__(self, setup: Setup, mu0: float = 1e-3, max_tries: int = 12,
                 jacobian: str = "fixed-point", radius0: float = 0.5) -> None:
        self.setup = setup
        self.radius0 = float(radius0)
        self.radius = float(radius0)
        self.mu0 = float(mu0)
        self.fixed_point = jacobian == "fixed-point"
        self.linearise = (setup.tr.fixed_point_jacobian if self.fixed_point
                          else setup.tr.jacobian)
        self.mu = float(mu0)
        self.nu = 2.0
        self.max_tries = int(max_tries)

    def reset(self) -> None:
        """Forget the damping and radius (the objective changed: new multipliers)."""
        self.mu = self.mu0
        self.nu = 2.0
        self.radius = max(self.radius, self.radius0)

    def settled(self, info: StepInfo, gap_scaled: float, lam: float) -> bool:
        """The inner least-squares problem is solved when the residual is
        (nearly) orthogonal to every Jacobian column (MINPACK's gtol test)."""
        return info.precision_reached or info.optimality <= SETTLED_COSINE

    @guarded_step
    def step(self, Xs, U, ps, V, lam) -> StepInfo:
        with np.errstate(all="ignore"):  # overflowing trials are rejected below
            return self._step(Xs, U, ps, V, lam)

    def _step(self, Xs, U, ps, V, lam) -> StepInfo:
        s = self.setup
        tr, disc = s.tr, s.disc
        X, p = s.from_scaled(Xs, ps)
        U = tr.nodes_np(U)
        r, Jx, Jp = self.linearise(X, U, p, V, lam)
        if not (np.all(np.isfinite(r)) and np.all(np.isfinite(Jx)) and np.all(np.isfinite(Jp))):
            return StepInfo(Xs, ps, np.nan, np.nan, np.nan, 0.0, False, 1, self.mu,
                            failed=True, message=not_finite_message(
                                self.setup, U, "residuals or Jacobian", p))
        phi = 0.5 * float(np.sum(r * r))
        zero = s.merit_floor()  # the merit of a zero residual (exact data)
        if phi <= zero:
            return StepInfo(Xs, ps, phi, phi, 0.0, 0.0, False, 1, self.mu,
                            precision_reached=True, optimality=0.0)
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
        rnorm = max(np.sqrt(2.0 * phi), 1e-300)
        cos_x = np.where(free_x, np.abs(ne.gx) / np.sqrt(damp_x), 0.0)
        cos_p = np.where(free_p, np.abs(ne.gp) / np.sqrt(damp_p), 0.0)
        optimality = float(max(cos_x.max(initial=0.0), cos_p.max(initial=0.0))) / rnorm

        evals = 1
        for _ in range(self.max_tries):
            dX, dp = ne.solve(self.mu, free_x, free_p, damp_x, damp_p)
            for _ in range(60):  # raise the damping until the step fits the radius
                if step_size(dX, dp) <= self.radius:
                    break
                self.mu = max(self.mu, 1e-8) * 4.0
                dX, dp = ne.solve(self.mu, free_x, free_p, damp_x, damp_p)
            Xn, pn = s.project(Xs + dX, ps + dp, Xs, ps)
            dX, dp = Xn - Xs, pn - ps
            lin = r + jacobian_times(Jx, Jp, a, disc.has_next, dX, dp)
            predicted = phi - 0.5 * float(np.sum(lin * lin))
            if predicted <= PRECISION * max(phi, zero):
                # nothing left to gain at double precision: not a failed step
                return StepInfo(Xs, ps, phi, phi, gnorm, 0.0, False, evals, self.mu,
                                precision_reached=True, optimality=optimality)
            Xp, pp = s.from_scaled(Xn, pn)
            step = step_size(dX, dp)
            U_new = None
            if self.fixed_point:
                # the reduced objective: U re-settled on the fixed point of the trial z
                U_new = tr.predict_nodes(U, dX * s.x_scale, dp * s.p_scale)
                U_new, _, sweeps = tr.settle(Xp, U_new, pp, tol=max(1e-3 * step, 1e-14))
                evals += sweeps
            r_new = tr.residuals(Xp, U if U_new is None else U_new, pp, V, lam)
            evals += 1
            phi_new = 0.5 * float(np.sum(r_new * r_new)) if np.all(np.isfinite(r_new)) else np.inf
            rho = (phi - phi_new) / predicted
            if np.isfinite(phi_new) and rho > 1e-4:
                self.mu *= max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
                self.mu = max(self.mu, 1e-12)
                self.nu = 2.0
                if rho > 0.75 and step > 0.5 * self.radius:
                    self.radius *= 2.0
                elif rho < 0.25:
                    self.radius = max(0.25 * self.radius, 1e-12)
                return StepInfo(Xn, pn, phi, phi_new, gnorm, step, True, evals, self.mu,
                                U=U_new, optimality=optimality)
            self.mu *= self.nu
            self.nu *= 2.0
            self.radius = max(0.25 * min(self.radius, step), 1e-12)
        self.mu = min(self.mu, 1e10)
        return StepInfo(Xs, ps, phi, phi, gnorm, 0.0, False, evals, self.mu,
                        optimality=optimality)
