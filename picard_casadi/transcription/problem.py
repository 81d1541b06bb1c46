"""One estimation problem as numbers, ready for any method: :class:`Setup`.

The discretisation and its transcription, the boxes of the parameters and
interval starts, the scales the methods work in, which entries are free, and
the starting point.  Built by :func:`~picard_casadi.estimation.setup.build_setup`;
every method (:mod:`picard_casadi.methods`) and every judgement of an answer
(:mod:`picard_casadi.analysis`) reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .discretisation import Discretisation
from .functions import Transcription

__all__ = ["Setup", "ZERO_MERIT"]

# A merit below this fraction of the data's own (the merit of a model that
# predicts zero) is a zero residual: residuals 1e-12 of the data.  The
# stopping tests relative to the merit need it as a floor, or exact data
# (an exact fit, merit 1e-30) never converge.
ZERO_MERIT = 1e-24


@dataclass
class Setup:
    """One estimation problem, ready for any method.

    Attributes
    ----------
    disc : Discretisation
    tr : Transcription
        Mapped functions (``P``, ``P^n``, residuals, derivatives).
    p_lb, p_ub : ndarray (np,)
        Parameter box (``-inf``/``inf`` where unbounded).
    x_lb, x_ub : ndarray (nx,)
        Box for every interval start ``x_j`` (the paper's ``X``).
    p_scale, x_scale : ndarray
        Nominal magnitudes; the methods work in ``p / p_scale``, ``x / x_scale``.
    free_p : ndarray (np,) of bool
    free_x : ndarray (J, nx) of bool
        ``False`` for a known ``x0`` (``estimate_x0=False``).
    X0, U0, p0 : ndarray
        Starting point: interval starts (J, nx), node values (J, nx, K), p.
    timings : dict
        Seconds per phase; methods add what they build (e.g. an NLP) to ``build``.
    cache : dict
        Objects a method builds once per setup (the IPOPT solver), reused when
        the method runs again (re-weighting, multistart).
    compiled : bool
        Whether functions are code-generated (methods that build their own
        functions, such as IPOPT's NLP, compile them too).
    reweight : callable or None
        ``reweight(X, U, p)``, called by the Picard iteration after each
        accepted step with the new point (unscaled): the likelihood's rounds
        re-estimate the noise weights there (``tr.set_weights``) while a
        solve runs (:func:`picard_casadi.estimation.refinement.solve_with_weights`).
    damp_long_steps : bool
        A solve on this problem stalled and its step's remedy was turned on
        (``ConstrainedGaussNewtonStep.damp_long_steps``, see
        :func:`picard_casadi.methods.base.run_picard_iteration`): the solves
        that continue it (weight rounds, a refined mesh) start with it.
    stiff_check : callable or None
        ``stiff_check(X, U, p, creeping=False) -> str``: where the model is
        stiff on this mesh at the point (unscaled), why, else ``""``.  The
        Picard iteration calls it every
        :data:`~picard_casadi.methods.base.STIFF_CHECK_ITERATIONS` iterations,
        and with ``creeping=True`` (the lower threshold of a creeping run)
        after every :data:`~picard_casadi.methods.base.CREEP_STIFF_CHECK_STEPS`
        slivers in a row, and ends ``"stiff"`` on a reason, so that a run
        creeping on a quadrature that is not L-stable moves to Radau's nodes
        early (``scheme="auto"``; :mod:`picard_casadi.estimation.refinement`).
    penalty : float
        The continuity penalty (the merit's ``rho``) with which the last
        solve of ``picard-gn``'s constrained step on this problem converged,
        0 before one did: the solves that continue it (weight rounds, a
        refined mesh) start with it, up to
        :data:`~picard_casadi.methods.picard_gn.CONTINUING_PENALTY`, so that
        they do not reopen the closed continuity gaps and raise the penalty
        again step by step.
    newton : bool
        The last solve of ``picard-gn``'s constrained step on this problem
        converged with Newton's model (``hessian="auto"`` switched to it when
        Gauss-Newton stalled, :mod:`picard_casadi.methods.newton_switch`):
        the solves that continue it (weight rounds, a refined mesh) start
        with it rather than stall again before they switch.
    """

    disc: Discretisation
    tr: Transcription
    p_lb: np.ndarray
    p_ub: np.ndarray
    x_lb: np.ndarray
    x_ub: np.ndarray
    p_scale: np.ndarray
    x_scale: np.ndarray
    free_p: np.ndarray
    free_x: np.ndarray
    X0: np.ndarray
    U0: np.ndarray
    p0: np.ndarray
    timings: dict[str, float] = field(default_factory=dict)
    cache: dict[Any, Any] = field(default_factory=dict)
    compiled: bool = False
    reweight: Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None = None
    damp_long_steps: bool = False
    stiff_check: Callable[[np.ndarray, np.ndarray, np.ndarray], str] | None = None
    penalty: float = 0.0
    newton: bool = False

    # --------------------------------------------------------------- scaling
    def to_scaled(self, X: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Physical to scaled variables."""
        return X / self.x_scale, p / self.p_scale

    def from_scaled(self, Xs: np.ndarray, ps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Scaled to physical variables; the known initial states (``free_x``
        False) are the start's own values and the fixed parameters (equal
        bounds) their bound, not their round trip through the scale (``x / s
        * s`` is not always ``x``: a known ``x0 = 2`` came back as ``2 -
        2.2e-16``, a parameter fixed at a value off by its last bit)."""
        X = Xs * self.x_scale
        if Xs.shape == self.free_x.shape and not self.free_x.all():
            X = np.where(self.free_x, X, self.X0)
        p = ps * self.p_scale
        if ps.shape == self.free_p.shape and not self.free_p.all():
            p = np.where(self.free_p, p, self.p_lb)
        return X, p

    @property
    def scaled_bounds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(X_lb, X_ub, p_lb, p_ub)`` in scaled variables, fixed entries pinned."""
        J = self.disc.n_intervals
        xl = np.broadcast_to(self.x_lb / self.x_scale, (J, self.x_scale.size)).copy()
        xu = np.broadcast_to(self.x_ub / self.x_scale, (J, self.x_scale.size)).copy()
        return xl, xu, self.p_lb / self.p_scale, self.p_ub / self.p_scale

    def project(self, Xs: np.ndarray, ps: np.ndarray, Xs_fixed: np.ndarray,
                ps_fixed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Project scaled variables on the box; fixed entries keep their values."""
        xl, xu, pl, pu = self.scaled_bounds
        Xs = np.where(self.free_x, np.clip(Xs, xl, xu), Xs_fixed)
        ps = np.where(self.free_p, np.clip(ps, pl, pu), ps_fixed)
        return Xs, ps

    def weight_level(self) -> float:
        """``sum log Wt_i / N`` over the weighted values (``Wt_i``: a value's
        residual weight, ``N``: the sample times): the negative log-likelihood
        over ``N`` is the data merit less this, up to a constant, so that
        merits under different noise weights compare as likelihoods."""
        Wt = self.tr._Wt
        positive = Wt[Wt > 0]
        return float(np.sum(np.log(positive))) / self.disc.n_samples_total

    def merit_floor(self) -> float:
        """The merit of a zero residual (``ZERO_MERIT`` of the data's own)."""
        Wt = self.tr._Wt
        return ZERO_MERIT * 0.5 * float(np.sum((Wt * self.disc.y) ** 2)) + 1e-300

    def projected_gradient_norm(self, Xs: np.ndarray, ps: np.ndarray,
                                gX: np.ndarray, gp: np.ndarray) -> float:
        """``|z - Proj(z - g)|_inf`` in scaled variables (0 at a KKT point)."""
        xl, xu, pl, pu = self.scaled_bounds
        dX = np.where(self.free_x, Xs - np.clip(Xs - gX, xl, xu), 0.0)
        dp = np.where(self.free_p, ps - np.clip(ps - gp, pl, pu), 0.0)
        return float(max(np.abs(dX).max(initial=0.0), np.abs(dp).max(initial=0.0)))
