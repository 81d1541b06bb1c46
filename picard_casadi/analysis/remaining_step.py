"""How far a solution is from the optimum of what it fitted: the
Gauss-Newton step from it, kept in the box.

The discretisation certificate's ``stopped_short``
(:mod:`picard_casadi.analysis.certificate`) and its ``model_short`` (the
model's own objective from ``x0``) both take this step: a method whose
convergence test passed where its objective still falls is caught by it.
"""

from __future__ import annotations

import numpy as np

from ..transcription.problem import Setup
from .uncertainty import IDENTIFIABILITY_THRESHOLD, SolutionSensitivity

__all__ = ["remaining_shift", "best_step", "BLOCKED_FRACTION"]

#: a bound that allows less than this fraction of the remaining step holds its column
BLOCKED_FRACTION = 1e-3


def remaining_shift(setup: Setup, X: np.ndarray, p: np.ndarray, info: SolutionSensitivity,
                    g: np.ndarray, s: float) -> float:
    """How far the fitted problem's own optimum is from the solution, in standard errors.

    The Gauss-Newton step ``d`` from the solution, ``J = d r / d theta`` as
    the uncertainty has it (``info``), the fitted residuals' gradient ``g =
    J^T r``, over the directions the data determine (the unit-diagonal
    ``J^T J``'s eigenvalues above ``IDENTIFIABILITY_THRESHOLD`` of the largest,
    the directions whose standard errors the uncertainty reports finite), kept in
    the box: a column that the box allows less than ``BLOCKED_FRACTION`` of
    its step is held at its bound and the others are solved again; the step
    scaled back into the box, and the steepest descent along the columns not
    held, as far as the box allows.  Every step tried is feasible, so a bound
    never makes the measure larger than it is.

    Parameters
    ----------
    setup : Setup
        Its boxes (``p_lb``, ``p_ub``, ``x_lb``, ``x_ub``).
    X, p : ndarray
        The solution's interval starts and parameters.
    info : SolutionSensitivity
        Its ``Jt`` and ``columns``.
    g : ndarray (n_theta,)
        ``J^T r`` of what the method fitted.
    s : float
        The residual standard deviation.

    Returns
    -------
    float
        ``sqrt(2 (m(0) - m(d))) / s`` for the best step ``d`` tried, ``m(d)
        = |r + J d|^2 / 2`` (``|J d| / s`` where no bound binds); ``inf``
        where ``g`` or ``J^T J`` is not finite.
    """
    return float(np.sqrt(2.0 * best_step(setup, X, p, info, g)[0])) / s


def best_step(setup: Setup, X: np.ndarray, p: np.ndarray, info: SolutionSensitivity,
              g: np.ndarray) -> tuple[float, np.ndarray]:
    """:func:`remaining_shift`'s best step kept in the box: the decrease of the
    Gauss-Newton model ``m(0) - m(d)`` (``inf`` where ``g`` or ``J^T J`` is not
    finite) and the step ``d`` in ``theta`` (``info.columns``' order)."""
    n = info.Jt.n
    if n == 0:
        return 0.0, np.zeros(0)
    theta, lb, ub = np.empty(n), np.empty(n), np.empty(n)
    starts = [sl.start for sl in setup.disc.intervals_of]
    for k, (kind, e, i) in enumerate(info.columns):
        if kind == "p":
            theta[k], lb[k], ub[k] = p[i], setup.p_lb[i], setup.p_ub[i]
        else:
            theta[k], lb[k], ub[k] = X[starts[e], i], setup.x_lb[i], setup.x_ub[i]
    H = info.Jt.gram()
    if not (np.all(np.isfinite(g)) and np.all(np.isfinite(H))):
        return np.inf, np.zeros(n)
    scale = np.sqrt(np.maximum(np.diag(H), 1e-300))
    Hs = H / np.outer(scale, scale)
    gs = g / scale

    def solve(free: np.ndarray) -> np.ndarray:
        """The Gauss-Newton step (scaled columns) on ``free``, the others held."""
        d = np.zeros(n)
        if free.any():
            w, V = np.linalg.eigh(Hs[np.ix_(free, free)])
            keep = w > IDENTIFIABILITY_THRESHOLD * max(float(w.max(initial=0.0)), 1e-300)
            d[free] = -(V[:, keep] @ ((V[:, keep].T @ gs[free]) / w[keep]))
        return d

    def decrease(ds: np.ndarray) -> float:
        return float(-(gs @ ds) - 0.5 * ds @ Hs @ ds)

    def room(ds: np.ndarray) -> np.ndarray:
        """Per column, the fraction of ``ds`` the box allows (``inf`` where unbounded)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(ds < 0, (lb - theta) * scale / ds,
                            np.where(ds > 0, (ub - theta) * scale / ds, np.inf))

    free = np.ones(n, bool)
    gain, best = 0.0, np.zeros(n)

    def consider(ds: np.ndarray) -> None:
        nonlocal gain, best
        value = decrease(ds)
        if value > gain:
            gain, best = value, ds

    for _ in range(n):
        d = solve(free)
        fraction = room(d)
        alpha = float(np.clip(np.min(fraction, initial=1.0), 0.0, 1.0))
        consider(alpha * d)
        blocked = free & (fraction < BLOCKED_FRACTION)
        if not blocked.any():
            break
        free &= ~blocked  # at its bound in the step's direction: held there
    # the steepest descent along the free columns, as long as the box allows
    c = np.where(free, -gs, 0.0)
    for _ in range(2):  # (the second pass without the columns the box holds)
        curvature = float(c @ Hs @ c)
        if not (c @ c > 0 and curvature > 0):
            break
        t = float(c @ c) / curvature
        fraction = room(c)
        consider(min(t, float(np.min(fraction, initial=np.inf))) * c)
        c = np.where(fraction < BLOCKED_FRACTION * t, 0.0, c)
    return gain, best / scale
