"""``method="picard"``: the paper's Algorithm 4 (Algorithm 3 for one interval).

Each iteration takes one projected gradient step on ``(p, x_j)`` of
``L_{lambda,n}(x, p; U)`` with ``U`` fixed, the gradient exact through ``P^n``
(CasADi reverse mode, mapped over intervals), then relaxes
``U <- (1 - sigma) U + sigma P U`` (``sigma = 0.5`` as the authors use).

The step length ``alpha`` is found by backtracking (Armijo) line search along
the projection arc, as in the authors' longer paper.  The first trial length
is the Barzilai-Borwein length of the last step (``initial_step="bb"``,
default) or twice the last accepted length (``initial_step="grow"``).  Steps
are taken in scaled variables ``p / p_scale``, ``x / x_scale``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..runtime.interrupts import interrupt_checked
from .base import (LoopOptions, Setup, StepInfo, require_fraction, require_one_of,
                   require_positive_int)

__all__ = ["ProjectedGradientStep", "PicardOptions"]

INITIAL_STEPS = ("bb", "grow")


@dataclass
class PicardOptions(LoopOptions):
    """Options of ``method="picard"`` (see :class:`LoopOptions` for the rest).

    Attributes
    ----------
    initial_step : {"bb", "grow"}
        First trial step length of each line search.
    armijo : float
        Sufficient-decrease constant of the line search.
    max_backtracks : int
        Halvings of the step before the iteration gives up.
    """

    max_iter: int = 5000
    sigma: float = 0.5
    sweeps: int = 1
    lam_max: float = 100.0
    continuity: str = "multiplier"
    initial_step: str = "bb"
    armijo: float = 1e-4
    max_backtracks: int = 40

    def validate(self) -> None:
        super().validate()
        if self.continuity == "constrained":
            raise ValueError(
                "continuity='constrained' is a Gauss-Newton step (method='picard-gn'); "
                "method='picard' supports 'multiplier' and 'penalty'"
            )
        require_one_of("initial_step", self.initial_step, INITIAL_STEPS)
        require_fraction("armijo", self.armijo)
        require_positive_int("max_backtracks", self.max_backtracks)


class ProjectedGradientStep:
    """Projected gradient step with Armijo backtracking, for fixed ``U``."""

    #: the transcription's functions the iteration calls (compiled side by side
    #: before the first step: cmg's six took 22 s one after another)
    units = ("residual", "gradient", "objective", "relax", "trajectory", "picard")

    def __init__(self, setup: Setup, initial_step: str = "bb", armijo: float = 1e-4,
                 max_backtracks: int = 40) -> None:
        self.setup = setup
        self.initial_step = initial_step
        self.armijo = armijo
        self.max_backtracks = max_backtracks
        self.alpha: float | None = None
        self._last_z: np.ndarray | None = None
        self._last_g: np.ndarray | None = None

    def reset(self) -> None:
        """Forget the Barzilai-Borwein memory (the objective changed)."""
        self._last_z, self._last_g = None, None

    def settled(self, info: StepInfo, gap_scaled: float, lam: float) -> bool:
        """A gradient step is always short, so settledness is judged by the
        gradient: small next to the penalty's pull, about ``2 lam |c|``."""
        return info.precision_reached or info.grad_norm <= 0.2 * lam * gap_scaled

    @interrupt_checked
    def step(self, Xs, U, ps, V, lam) -> StepInfo:
        s = self.setup
        tr = s.tr
        X, p = s.from_scaled(Xs, ps)
        phi, gX, gp = tr.gradient(X, U, p, V, lam)
        if not (np.isfinite(phi) and np.all(np.isfinite(gX)) and np.all(np.isfinite(gp))):
            return StepInfo(Xs, ps, np.nan, np.nan, np.nan, 0.0, False, 1, 0.0,
                            failed=True, message=(
                                "objective or gradient is not finite at the current "
                                "iterate; the model left its domain (add or tighten "
                                "x0_bounds/p_bounds)"))
        gX = np.where(s.free_x, gX * s.x_scale[None, :], 0.0)
        gp = np.where(s.free_p, gp * s.p_scale, 0.0)
        gnorm = s.projected_gradient_norm(Xs, ps, gX, gp)
        z = np.concatenate([ps, Xs.ravel()])
        g = np.concatenate([gp, gX.ravel()])
        gmax = float(np.abs(g).max(initial=0.0))
        if gmax == 0.0:
            return StepInfo(Xs, ps, phi, phi, 0.0, 0.0, False, 1, self.alpha or 0.0)

        alpha = self._trial_alpha(z, g, gmax)
        evals = 1
        for _ in range(self.max_backtracks):
            Xn, pn = s.project(Xs - alpha * gX, ps - alpha * gp, Xs, ps)
            d = np.concatenate([pn - ps, (Xn - Xs).ravel()])
            Xp, pp = s.from_scaled(Xn, pn)
            phi_new = tr.objective(Xp, U, pp, V, lam)
            evals += 1
            if not np.isfinite(phi_new):
                phi_new = np.inf
            if phi_new <= phi + self.armijo * float(g @ d):
                self.alpha = alpha
                self._last_z, self._last_g = z, g
                step = float(np.abs(d).max(initial=0.0))
                return StepInfo(Xn, pn, phi, phi_new, gnorm, step, True, evals, alpha)
            alpha *= 0.5
        self.alpha = alpha
        self._last_z, self._last_g = None, None
        return StepInfo(Xs, ps, phi, phi, gnorm, 0.0, False, evals, alpha)

    def _trial_alpha(self, z: np.ndarray, g: np.ndarray, gmax: float) -> float:
        if self.alpha is None:
            return 0.1 / gmax  # first step moves a scaled variable by at most 0.1
        if self.initial_step == "bb" and self._last_z is not None:
            sv = z - self._last_z
            yv = g - self._last_g
            sy = float(sv @ yv)
            if sy > 0:
                return float(np.clip(float(sv @ sv) / sy, 1e-12 / gmax, 1e3 / gmax))
        return 2.0 * self.alpha
