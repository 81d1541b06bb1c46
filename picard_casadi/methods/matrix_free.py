"""The constrained Gauss-Newton step from products only (``tr_solver="cg"``).

The same step as :mod:`picard_casadi.methods.condensed` (minimise the
linearised data residuals subject to the linearised continuity conditions,
in the condensed unknowns ``theta = (dp, dx0_e)``, inside a trust region,
accepted on the merit ``|r|^2 / 2 + (rho / 2) |c|^2``), but the condensed
Jacobian is never formed.  Its products with a vector and with its
transpose run along the intervals (:class:`~picard_casadi.transcription.interval_products.IntervalProducts`:
linear Picard sweeps, no factorisation), and the damped least-squares
problem is solved by conjugate gradients on it (CGLS).  An iteration costs
a few tens of products, each linear in the number of states for a sparsely
coupled model, where the factorised step forms every interval's ``nx x nx``
sensitivity (``nx^2`` at least, ``nx^3`` in its dense algebra).

What it keeps from the factorised step: the trust region on the scaled step,
the merit and its ``rho``, the second-order correction, the pattern move,
the stationarity measure (:func:`~picard_casadi.methods.least_squares.reach_cosine`
of the undamped step, computed when the damped step reaches little).  What
it does not have: the exact-Hessian (Newton) model, and the active-set solve
that keeps the interval starts and ``p`` in their boxes.  Where a step
reaches a box, where the products are not trustworthy (the sweeps have not
converged: ``dP/dU`` contracts slowly on this mesh) or where conjugate
gradients stall, the iteration takes the factorised step instead, so the
answer never depends on the products being good.
"""

from __future__ import annotations

import numpy as np

from ..transcription.interval_linearisation import sparse_pays
from ..transcription.interval_products import IntervalProducts
from .base import Setup, StepInfo, step_size
from .condensed import PRECISION, STATIONARITY_DAMPING, ConstrainedGaussNewtonStep
from .least_squares import compress_rows, triangular_factor

__all__ = ["MatrixFreeGaussNewtonStep", "cg_pays", "use_cg", "CG_TOL", "SWEEP_CHANGE_TOL"]

#: relative residual of the damped normal equations at which CGLS stops: the
#: step is solved as loosely as the last stationarity measure allows (inexact
#: Gauss-Newton, Dembo, Eisenstat and Steihaug 1982), between these bounds
CG_TOL = 1e-8
CG_TOL_FAR = 1e-3
#: relative accuracy of a product (the sweeps' truncation and round-off)
ROUNDOFF = 1e-12
#: a CGLS run out of iterations still gives a usable step if it cut the
#: normal equations' residual by this much
CG_USABLE = 1e-3
#: ... for the undamped step that measures stationarity
STATIONARITY_CG_TOL = 1e-10
#: damped reach below which stationarity is measured with the undamped step
STATIONARITY_CHECK = 1e-5
#: a product whose last linear Picard sweep still changed the node derivatives
#: by more than this (relative) is not used: the factorised step is taken
SWEEP_CHANGE_TOL = 1e-8
#: after this many iterations in a row that took the factorised step (sweeps
#: not converged, or a step reaching a box), the solve keeps to it: the mesh,
#: p and the active bounds change little between iterations
FALLBACKS_IN_ROW = 2
#: conjugate-gradient iterations of a step above which the preconditioner is
#: formed afresh at the next iteration
REFRESH_ITERATIONS = 10
#: tr_solver="auto" takes this step for sparsely coupled models of at least
#: this many states (docs/performance.md)
CG_MIN_STATES = 40


class MatrixFreeGaussNewtonStep(ConstrainedGaussNewtonStep):
    """The constrained Gauss-Newton step with the condensed Jacobian as an operator.

    Parameters
    ----------
    setup : Setup
    mu0, max_tries, rho0, radius0 :
        As :class:`~picard_casadi.methods.condensed.ConstrainedGaussNewtonStep`.
    """

    def __init__(self, setup: Setup, mu0: float = 1e-3, max_tries: int = 12,
                 rho0: float = 20.0, radius0: float = 0.5) -> None:
        super().__init__(setup, mu0, max_tries, rho0=rho0, radius0=radius0,
                         hessian="gauss-newton")
        compiled, _ = setup.tr.product_functions()
        prefetch = getattr(compiled, "prefetch", None)
        if prefetch is not None:  # compiled: both products built side by side
            prefetch(list(compiled))
        #: iterations that took the factorised step, and why (the last reason)
        self.factorised_steps = 0
        self.factorised_reason = ""
        #: conjugate-gradient iterations of each step (for benchmarks)
        self.cg_iterations: list[int] = []
        self._last_optimality = 1.0
        #: the preconditioner (R^-1 of a factorised linearisation) and the
        #: damping's scale (its squared column norms), formed when needed
        self._Rinv: np.ndarray | None = None
        self._diag: np.ndarray | None = None
        self._last_cg = 0
        self._fallbacks_in_row = 0
        self.preconditioner_builds = 0

    def fallback_note(self) -> str:
        """What the result should say about iterations that took the factorised
        step (empty when none did)."""
        if not self.factorised_steps:
            return ""
        return (f"tr_solver='cg': {self.factorised_steps} iteration(s) took the factorised "
                f"step instead ({self.factorised_reason}); where that is every iteration, "
                "tr_solver='exact' is as good and a smaller T makes the products converge")

    def _tolerance(self) -> float:
        """CGLS's tolerance for this step: loose far from a stationary point."""
        return float(np.clip(0.1 * self._last_optimality, CG_TOL, CG_TOL_FAR))

    # ------------------------------------------------------------------ operator
    def _operator(self, X: np.ndarray, U: np.ndarray, p: np.ndarray) -> IntervalProducts:
        return self.setup.tr.interval_products(X, U, p)

    def _split(self, theta: np.ndarray, free_p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``theta`` (scaled) as unscaled first-state moves ``(E, nx)`` and ``dp``."""
        s = self.setup
        dp = np.zeros(self.np)
        cols = self.p_cols[free_p[self.p_cols]]
        dp[cols] = theta[:self.p_cols.size][free_p[self.p_cols]] * s.p_scale[cols]
        dx0 = np.zeros((len(self.x0_cols), self.nx))
        for e, (comps, tcols) in enumerate(self.x0_cols):
            dx0[e, comps] = theta[tcols] * s.x_scale[comps]
        return dx0, dp

    def _gather(self, bar_x0: np.ndarray, bar_p: np.ndarray, free_p: np.ndarray) -> np.ndarray:
        """Transposed :meth:`_split`: derivatives in the unscaled moves to ``theta``."""
        s = self.setup
        g = np.zeros(self.n_theta)
        head = bar_p[self.p_cols] * s.p_scale[self.p_cols]
        g[:self.p_cols.size] = np.where(free_p[self.p_cols], head, 0.0)
        for e, (comps, tcols) in enumerate(self.x0_cols):
            g[tcols] = bar_x0[e, comps] * s.x_scale[comps]
        return g

    def _rows(self, dG: np.ndarray) -> np.ndarray:
        """Moves of the weighted residuals ``Wt (y - G)`` for output moves ``dG``."""
        return -self.setup.tr._Wt * dG

    def _cgls(self, ops: IntervalProducts, b: np.ndarray, damp: np.ndarray, free_p: np.ndarray,
              tol: float) -> tuple[np.ndarray | None, int]:
        """``min |J theta + b|^2 / 2 + theta^T diag(damp) theta / 2`` by CGLS.

        Preconditioned on the right by the triangular factor of a factorised
        linearisation (:meth:`_refresh_preconditioner`): ``theta = R^-1 phi``,
        so that near the point where ``R`` was formed ``J R^-1`` is nearly
        orthogonal and a few iterations solve the step.  Stops when the
        (preconditioned) normal equations' residual ``s`` is below ``tol``
        times its start, or below what the products resolve (``ROUNDOFF
        |J R^-1| |J theta + b|``, LSQR's test for a residual no step
        removes: near a solution the start itself is at that level).
        Returns ``(theta, iterations)``; ``theta`` is ``None`` where neither
        held within ``2 n + 20`` iterations and ``s`` did not fall by
        ``CG_USABLE`` either, or a product was not finite.
        """
        n = self.n_theta
        Rinv = self._Rinv

        def J(v):
            dx0, dp = self._split(v, free_p)
            return self._rows(ops.forward(dx0, dp)[2])

        def JT(w):
            return self._gather(*ops.transpose(self._rows(w)), free_p)

        theta = np.zeros(n)
        res = -b
        s = Rinv.T @ JT(res)
        q = s.copy()
        gamma = float(s @ s)
        g0 = np.sqrt(gamma)
        if g0 == 0.0:
            return theta, 0
        norm_K = 0.0  # largest |J R^-1 q| / |q| seen: a lower bound of |J R^-1|
        best, best_s = theta.copy(), g0
        limit = 2 * n + 20
        for it in range(1, limit + 1):
            t = Rinv @ q
            Jt = J(t)
            qq = float(q @ q)
            JtJt = float(np.sum(Jt * Jt))
            norm_K = max(norm_K, float(np.sqrt(JtJt / qq)) if qq > 0 else 0.0)
            denom = JtJt + float(t @ (damp * t))
            if not (np.isfinite(denom) and denom > 0.0):
                return None, it
            alpha = gamma / denom
            theta += alpha * t
            res -= alpha * Jt
            s = Rinv.T @ (JT(res) - damp * theta)
            gamma_new = float(s @ s)
            if not np.isfinite(gamma_new):
                return None, it
            s_norm = np.sqrt(gamma_new)
            if s_norm < best_s:
                best, best_s = theta.copy(), s_norm
            floor = ROUNDOFF * norm_K * float(np.sqrt(np.sum(res * res)))
            if s_norm <= max(tol * g0, floor):
                return theta, it
            q = s + (gamma_new / gamma) * q
            gamma = gamma_new
        return (best if best_s <= CG_USABLE * g0 else None), limit

    def _refresh_preconditioner(self, X: np.ndarray, U: np.ndarray, p: np.ndarray) -> bool:
        """Form the preconditioner and the damping's scale from a factorised
        linearisation at this point: ``R`` of the condensed least-squares
        matrix (its QR factor, kept as ``R^-1``) and its squared column norms.
        Costs one iteration of the factorised step; done at the first
        iteration and when conjugate gradients need more than
        ``REFRESH_ITERATIONS`` (the iterate has moved far from where ``R``
        was formed).  Returns ``False`` where the linearisation is not finite.
        """
        lin = self._linearise(X, U, p)
        if lin is None:
            return False
        _, r, Jx, Jp, E, F, c = lin
        r, Jx, Jp = compress_rows(r, Jx, Jp, self.setup.tr.kernels)
        rows, _ = self._condense(Jx, Jp, r, E, F, c, self.setup.free_p.copy())
        # A's triangular factor, an experiment at a time (one QR of all its rows
        # cost 4.6 s of a 20-experiment chain's 19 s solve)
        A2, _ = triangular_factor(rows.A, rows.b, rows.blocks, self.n_theta)
        col2 = np.einsum("mt,mt->t", A2, A2)
        top = max(float(np.max(col2, initial=0.0)), 1e-300)
        diag = np.maximum(col2, 1e-12 * top)
        # a tiny ridge keeps R invertible where a column is (nearly) zero
        R = np.linalg.qr(np.vstack([A2, np.diag(np.sqrt(1e-12 * diag))]), mode="r")
        with np.errstate(all="ignore"):
            Rinv = np.linalg.solve(R, np.eye(self.n_theta))
        if not (np.all(np.isfinite(Rinv)) and np.all(np.isfinite(diag))):
            return False
        self._Rinv, self._diag = Rinv, diag
        self.preconditioner_builds += 1
        return True

    # ------------------------------------------------------------------ step
    def _factorised(self, reason: str, Xs, U, ps, V, lam) -> StepInfo:
        """This iteration's step from the factorised linearisation."""
        self.factorised_steps += 1
        self._fallbacks_in_row += 1
        self.factorised_reason = reason
        return super()._step(Xs, U, ps, V, lam)

    def _step(self, Xs, U, ps, V, lam) -> StepInfo:
        s = self.setup
        xs, psc = s.x_scale, s.p_scale
        X, p = s.from_scaled(Xs, ps)
        U = s.tr.nodes_np(U)
        r, c = self._residuals(X, U, p)  # (J, ny, M), (J, nx)
        if not (np.all(np.isfinite(r)) and np.all(np.isfinite(c))):
            return self._factorised("the residuals are not finite", Xs, U, ps, V, lam)
        data = 0.5 * float(np.sum(r * r))
        gap2 = float(np.sum(c * c))
        zero = s.merit_floor()
        if data + 0.5 * self.rho * gap2 <= zero:
            merit = data + 0.5 * self.rho * gap2
            return StepInfo(Xs, ps, merit, merit, 0.0, 0.0, False, 1, self.mu,
                            precision_reached=True, optimality=0.0)

        if self._fallbacks_in_row >= FALLBACKS_IN_ROW:
            return self._factorised(self.factorised_reason, Xs, U, ps, V, lam)
        ops = self._operator(X, U, p)
        n_exp = len(self.x0_cols)
        # the gap-closing chain s (theta = 0): b = r + J_x s
        _, _, dG_shift = ops.forward(np.zeros((n_exp, self.nx)), np.zeros(self.np),
                                     offsets=c * xs)
        b = r + self._rows(dG_shift)
        if not (ops.change <= SWEEP_CHANGE_TOL and np.all(np.isfinite(b))):
            return self._factorised(
                f"the linear Picard sweeps changed by {ops.change:.1e} in their last sweep",
                Xs, U, ps, V, lam)

        # parameters at a bound with the reduced gradient pointing out stay fixed
        _, _, pl, pu = s.scaled_bounds
        free_p = s.free_p.copy()
        bars = ops.transpose(self._rows(b))
        g = self._gather(*bars, free_p)
        gp = np.zeros(self.np)
        gp[self.p_cols] = g[:self.p_cols.size]
        tiny = 1e-12
        out = ((ps <= pl + tiny) & (gp > 0)) | ((ps >= pu - tiny) & (gp < 0))
        if np.any(out & free_p):
            free_p &= ~out
            g = self._gather(*bars, free_p)
        active = np.ones(self.n_theta, dtype=bool)
        active[:self.p_cols.size] = free_p[self.p_cols]
        gnorm = float(np.max(np.abs(g[active]), initial=0.0))
        self._last_gap = float(np.sqrt(gap2))
        bnorm = float(np.sqrt(np.sum(b * b)))
        if self._Rinv is None or self._last_cg > REFRESH_ITERATIONS:
            if not self._refresh_preconditioner(X, U, p):
                return self._factorised("the linearisation is not finite", Xs, U, ps, V, lam)
        diag = np.where(active, self._diag, 1.0)  # the damping's scale

        merit = data + 0.5 * self.rho * gap2
        evals = 1
        full_pred = np.inf
        mu_solved = None
        theta = optimality = None
        for _ in range(self.max_tries):
            if mu_solved != self.mu:
                theta, its = self._cgls(ops, b, self.mu * diag, free_p, self._tolerance())
                self.cg_iterations.append(its)
                self._last_cg = its
                if theta is None:
                    return self._factorised(
                        f"conjugate gradients did not converge in {its} iterations",
                        Xs, U, ps, V, lam)
                mu_solved = self.mu
                # the full step: theta, with the gaps closed along the chain
                dx0, dp_full = self._split(theta, free_p)
                full_used, _, dG_full = ops.forward(dx0, dp_full, offsets=c * xs)
                full_nodes = ops.last_nodes
                # where the step moves the starts most (the stuck message names it)
                self._worst_interval = int(np.argmax(np.abs(full_used / xs).max(axis=1)))
                full_data = r + self._rows(dG_full)
                reach = full_data - b  # J theta
                if optimality is None:
                    optimality = _reach(b, reach, bnorm)
                    if optimality <= STATIONARITY_CHECK:
                        optimality = self._stationarity(ops, b, diag, free_p, bnorm)
                    self._last_optimality = optimality
            full_dX = full_used / xs
            full_dp = np.zeros(self.np)
            full_dp[free_p] = dp_full[free_p] / psc[free_p]
            full_pred_data = 0.5 * float(np.sum(r * r) - np.sum(full_data * full_data))
            full_pred_gap = 0.5 * gap2  # the chained step closes every gap to first order
            self._raise_rho(full_pred_data, full_pred_gap, gap2)
            full_pred = full_pred_data + self.rho * full_pred_gap
            if full_pred <= PRECISION * max(merit, zero):
                merit = data + 0.5 * self.rho * gap2
                return StepInfo(Xs, ps, merit, merit, gnorm, 0.0, False, evals, self.mu,
                                precision_reached=True, optimality=optimality)
            size = step_size(full_dX, full_dp)
            alpha = min(1.0, self.radius / size) if size > 0 else 1.0
            xl, xu, _, _ = s.scaled_bounds
            X_try = np.where(s.free_x, Xs + alpha * full_dX, Xs)
            p_try = np.where(s.free_p, ps + alpha * full_dp, ps)
            Xn = np.where(s.free_x, np.clip(X_try, xl, xu), Xs)
            pn = np.where(s.free_p, np.clip(p_try, pl, pu), ps)
            if not (np.array_equal(Xn, X_try) and np.array_equal(pn, p_try)):
                # the step leaves a box: the factorised step keeps the interval
                # starts and p inside by its active-set solve, where clipping
                # the step collapsed the trust region (Fisher-KPP, states at 0)
                return self._factorised("the step reached x0_bounds or p_bounds",
                                        Xs, U, ps, V, lam)
            dX, dp = Xn - Xs, pn - ps
            # the scaled full step: its linear model is the full one, scaled
            data_lin = r + alpha * (full_data - r)
            gap_lin = (1.0 - alpha) * c
            dU = alpha * full_nodes
            pred_data = 0.5 * float(np.sum(r * r) - np.sum(data_lin * data_lin))
            pred_gap = 0.5 * (gap2 - float(np.sum(gap_lin * gap_lin)))
            self._raise_rho(pred_data, pred_gap, gap2)
            merit = data + 0.5 * self.rho * gap2
            predicted = pred_data + self.rho * pred_gap
            if predicted <= PRECISION * max(merit, zero):
                self.radius = max(0.25 * self.radius, 1e-12)
                if self.radius <= 1e-10:
                    break
                continue
            step = step_size(dX, dp)
            Xn, U_new, merit_new, ratio, sweeps = self._tried(
                Xn, pn, U + dU, merit, predicted,
                lambda *trial: self._closed_gaps(ops, *trial))
            evals += sweeps
            if self._judge(ratio, predicted, merit, merit_new, zero, alpha, step):
                self._fallbacks_in_row = 0
                return StepInfo(Xn, pn, merit, merit_new, gnorm, step, True, evals, self.mu,
                                U=U_new, optimality=optimality, fraction=alpha)
            if self.radius <= 1e-10:
                break
        return self._without_step(Xs, ps, merit, gnorm, evals, full_pred, zero, optimality)

    def _stationarity(self, ops, b, diag, free_p, bnorm) -> float:
        """The reach cosine of the (nearly) undamped Gauss-Newton step."""
        theta, its = self._cgls(ops, b, STATIONARITY_DAMPING * diag, free_p,
                                STATIONARITY_CG_TOL)
        self.cg_iterations.append(its)
        if theta is None or bnorm == 0.0:
            return np.inf if theta is None else 0.0
        dx0, dp = self._split(theta, free_p)
        return _reach(b, self._rows(ops.forward(dx0, dp)[2]), bnorm)

    def _closed_gaps(self, ops, Xn, pn, U_new, c_new):
        """The second-order correction (as the factorised step's), from one product:
        the trial's gaps closed along the current linearisation."""
        s = self.setup
        d_used, _, _ = ops.forward(np.zeros((len(self.x0_cols), self.nx)), np.zeros(self.np),
                                   offsets=c_new * s.x_scale)
        xl, xu, _, _ = s.scaled_bounds
        X_try = np.where(s.free_x, Xn + d_used / s.x_scale, Xn)
        Xc = np.where(s.free_x, np.clip(X_try, xl, xu), Xn)
        if not np.array_equal(Xc, X_try):
            return None  # a bound cuts the correction: its node moves do not apply
        U_c = U_new + ops.last_nodes
        merit_c, U_c, c_c, evals = self._settled_point(Xc, pn, U_c)
        if not np.isfinite(merit_c):
            return None
        return Xc, U_c, merit_c, c_c, evals


def _reach(b: np.ndarray, reach: np.ndarray, bnorm: float) -> float:
    """Cosine between the residual ``b`` and what a step reaches of it (``reach = J
    theta``), as :func:`~picard_casadi.methods.least_squares.reach_cosine`."""
    if bnorm == 0.0:
        return 0.0
    gain2 = -2.0 * float(np.sum(b * reach)) - float(np.sum(reach * reach))
    return float(np.sqrt(max(gain2, 0.0))) / bnorm


def cg_pays(model) -> bool:
    """Whether ``tr_solver="auto"`` takes the products-only step for this model:
    large and sparsely coupled (docs/performance.md)."""
    return sparse_pays(model) and model.nx >= CG_MIN_STATES


def use_cg(opts, setup: Setup) -> bool:
    """Whether the options' ``tr_solver`` asks for the products-only step here."""
    if opts.tr_solver == "cg":
        return True
    return (opts.tr_solver == "auto" and opts.hessian != "exact"
            and cg_pays(setup.disc.model))
