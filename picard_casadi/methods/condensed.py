"""Gauss-Newton with the continuity conditions as linearised constraints.

``picard-gn``'s default step (``continuity="constrained"``).  It is the limit
``lambda -> infinity`` of the Levenberg-Marquardt step on the penalised
residuals of ``L_{lambda,n}``: the data residuals are minimised subject to
the linearised continuity conditions (Bock's multiple-shooting Gauss-Newton),

    minimise   sum_j | r_j + Jx_j dx_j + Jp_j dp |^2
    subject to dx_{j+1} = E_j dx_j + F_j dp + c_j      (c_j: the current gap)

with ``E_j, F_j`` the exact derivatives of the interval's end state at the
Picard fixed point (:mod:`picard_casadi.sensitivity`).  The constraints are
used to eliminate every ``dx_j`` but the first of each experiment
("condensing": ``dx_j = S_j theta + s_j`` built interval by interval, cost
linear in the number of intervals), leaving a small dense least-squares
problem in ``theta = (dp, dx0_e)``.  A full step closes every gap to first
order, so no penalty weight is needed to drive the gap to zero; the penalty
survives only in the merit function ``M = |r|^2 / 2 + (rho / 2) |c|^2`` that
accepts steps, with ``rho`` raised when a step's predicted data cost would
otherwise outweigh the gap it closes (as in SQP).  Globalisation is a trust
region on the whole scaled step (parameter part and gap closure alike): the
step is shortened to the radius, which grows after steps the model predicts
well and shrinks after poor ones; Levenberg-Marquardt damping ``mu`` only
regularises the small condensed system.

Safeguards (why each, with its measurements: ``docs/design.md``):

* second-order correction: a trial whose merit ratio is below 0.75 is also
  evaluated with its new gaps closed along the current linearisation
  (``d_{j+1} = E_j d_j + c_j``), and the better point is kept;
* the state box and the parameter box are inequalities of the condensed
  QP, solved by a primal active-set method (never more active bounds than
  free unknowns) from a feasible start found by minimising the violation;
  each working-set solve is a least-squares solve on ``A``, never on the
  normal equations ``A^T A``;
* a pattern move: where the steps zigzag across a valley (every other step
  the same), the point is extrapolated along the two-step progress;
* ``rho`` is not raised at a continuous point (dividing by a round-off
  predicted gap reduction sends it to overflow), and a trial whose fixed
  point is not found (``|P U - U| > 1e-8``) is rejected, not evaluated.

Exact-Hessian (Newton) steps, ``hessian="auto"`` or ``"exact"``: the Newton
model adds the curvature of the Lagrangian per interval
(:mod:`picard_casadi.second_order`: exact second derivatives of the Picard
fixed point, outputs weighted by ``-W r`` and end states by the continuity
multipliers), condensed like ``J^T J`` and solved by the same active-set
method in its Cholesky factor; where it is not convex even with a damping
``mu`` of 1e-4 (relative to ``J^T J``'s diagonal) the step is
Gauss-Newton's.  With ``"auto"`` the switch is made when Gauss-Newton
stalls (``STALL_STEPS`` accepted steps in a row, each gaining less than
``STALL_GAIN`` of the merit).

Stationarity is the cosine between the residual and what the undamped
Gauss-Newton step within the boxes reaches of it (:func:`reach_cosine`),
not MINPACK's largest cosine with one column, which ill-conditioning fools.
"""

from __future__ import annotations

import numpy as np

from ..checks import dense_fits
from ..second_order import FixedPointHessian
from ..sensitivity import predict_nodes
from .base import Setup, StepInfo, require_one_of
from .breakdown import describe_interval, failed_step, first_nonfinite_interval, guarded_step
from .least_squares import compress_rows, least_violation, reach_cosine, room, working_set_step

__all__ = ["ConstrainedGaussNewtonStep"]

PRECISION = 1e-14  # predicted relative gain of a full step that counts as nothing
COLLAPSE_PRECISION = 1e-9  # gain that is round-off when no shortened step realises it
# Trial points are compared on the merit, so their fixed point is solved tightly
# (from the first-order prediction this takes a few sweeps); a loose solve made
# the merit noisier than the gains near convergence (FitzHugh-Nagumo, seed 1).
TRIAL_FIXED_POINT_TOL = 1e-12
# ... and a trial whose solve stalls above this is rejected (F/A-18 unweighted:
# accepting a trial at 3e-2 left the iteration where no step could be evaluated)
TRIAL_ACCEPT_FIXED_POINT = 1e-8
# a step whose merit ratio falls below this gets a second-order correction
SOC_RATIO = 0.75
# below this scaled gap norm the gaps are round-off: no reason to raise rho
RHO_GAP_FLOOR = 1e-10
# predicted gains below this fraction of the merit are at the level of its round-off
NOISE_GAIN = 1e-10
# two steps apart, accepted steps this parallel mark a zigzag across a valley
ZIGZAG_COSINE = 0.99
# largest multiple of the two-step progress tried by a pattern move
PATTERN_MAX_FACTOR = 2.0 ** 12
# which model the steps use: J^T J, the exact Hessian, or J^T J until it stalls
HESSIANS = ("auto", "exact", "gauss-newton")
# Gauss-Newton has stalled after STALL_STEPS accepted steps in a row that each
# gained less than STALL_GAIN of the merit (hessian="auto")
STALL_GAIN = 1e-5
STALL_STEPS = 10
# largest relative damping that may make the Newton model convex; beyond it
# the step is Gauss-Newton's (see _newton_system)
NEWTON_MAX_DAMPING = 1e-4
# relative damping of the Gauss-Newton step that measures stationarity
STATIONARITY_DAMPING = 1e-14
# iterations in a row with nothing to gain while the scaled gap norm is above
# STUCK_GAP before the step gives up (far above gap_tol: a converging run
# never has gaps this open when it runs out of gains)
STUCK_ITERATIONS = 3
STUCK_GAP = 1e-6
# condensed rows larger than this overflow when squared (LAPACK then fails on
# inf, e.g. "SVD did not converge"): the step reports the interval instead
OVERFLOW = 1e150


class ConstrainedGaussNewtonStep:
    """Levenberg-Marquardt-damped condensed Gauss-Newton step on ``(p, x_j)``."""

    #: the transcription's functions the iteration calls (compiled side by side)
    units = ("residual", "summary")

    def __init__(self, setup: Setup, mu0: float = 1e-3, max_tries: int = 12,
                 rho0: float = 20.0, radius0: float = 0.5, hessian: str = "auto") -> None:
        self.setup = setup
        self.mu0 = float(mu0)
        self.mu = float(mu0)
        self.radius0 = float(radius0)
        self.radius = float(radius0)
        self.max_tries = int(max_tries)
        self.rho = float(rho0)
        disc = setup.disc
        m = disc.model
        # columns of theta: free parameters, then the free x0 entries per experiment
        self.p_cols = np.flatnonzero(setup.free_p)
        self.x0_cols = []
        k = self.p_cols.size
        for sl in disc.intervals_of:
            free = np.flatnonzero(setup.free_x[sl.start])
            self.x0_cols.append((free, np.arange(k, k + free.size)))
            k += free.size
        self.n_theta = k
        self.nx, self.np = m.nx, m.np
        # the last accepted points (scaled X, p), for the pattern move
        self._trail: list[tuple[np.ndarray, np.ndarray]] = []
        require_one_of("hessian", hessian, HESSIANS)
        self.hessian = hessian
        self.newton = hessian == "exact"  # Newton steps now (exact), or once GN stalls (auto)
        self._slow_steps = 0  # accepted steps in a row that gained less than STALL_GAIN
        self._second_order: FixedPointHessian | None = None  # built on the first Newton step
        # iterations in a row where no step gained while the gaps were open
        self._stuck = 0
        self._last_gap = 0.0  # scaled gap norm of the last linearisation
        self._worst_interval = 0  # where the condensed sensitivities were largest

    def reset(self) -> None:
        """Nothing to forget: no multipliers in this formulation."""

    def settled(self, info: StepInfo, gap_scaled: float, lam: float) -> bool:
        return True

    # ------------------------------------------------------------------ helpers
    def _merit_parts(self, X: np.ndarray, U: np.ndarray, p: np.ndarray
                     ) -> tuple[float, np.ndarray]:
        """Data objective ``|r|^2 / 2`` and scaled gaps ``(J, nx)`` at a settled point."""
        s = self.setup
        disc, tr = s.disc, s.tr
        _, Ys, xend = tr.trajectory(X, U, p)
        r = tr._Wt * (disc.y - Ys)  # weighted: the merit needs more than the misfit
        gaps = np.zeros_like(X)
        hn = disc.has_next
        gaps[hn] = (xend[hn] - X[1:][hn[:-1]]) / s.x_scale
        return 0.5 * float(np.sum(r * r)), gaps

    def _condense(self, Jx, Jp, r, E, F, c, free_p):
        """Rows ``A_j theta + b_j`` of every interval and the chain ``S_j, s_j``."""
        disc = self.setup.disc
        J = disc.n_intervals
        nx, nth = self.nx, self.n_theta
        P = np.zeros((self.np, nth))
        for col, i in enumerate(self.p_cols):
            if free_p[i]:
                P[i, col] = 1.0
        S_all = np.zeros((J, nx, nth))
        s_all = np.zeros((J, nx))
        for e, sl in enumerate(disc.intervals_of):
            S = np.zeros((nx, nth))
            comps, cols = self.x0_cols[e]
            S[comps, cols] = 1.0
            sv = np.zeros(nx)
            for j in range(sl.start, sl.stop):
                S_all[j], s_all[j] = S, sv
                if j + 1 < sl.stop:
                    S = E[j] @ S + F[j] @ P
                    sv = E[j] @ sv + c[j]
        A = np.einsum("jmn,jnt->jmt", Jx, S_all) + np.einsum("jmk,kt->jmt", Jp, P)
        b = r + np.einsum("jmn,jn->jm", Jx, s_all)
        return A, b, S_all, s_all, P

    def _bounded_step(self, A2, b2, damp, active, S_all, s_all, Xs, xl, xu, P, ps, pl, pu,
                      max_rounds=100):
        """The damped condensed step with every interval start and ``p`` kept in their boxes.

        The starts are affine in ``theta`` (``x_j = Xs_j + S_j theta + s_j``),
        so the state box is a set of linear inequalities of the small condensed
        problem ``min |A theta + b|^2 / 2 + theta^T diag(damp) theta / 2``.
        It is solved by a primal active-set method: from a feasible point
        (:func:`least_violation`) move towards the minimiser on the working
        set, stop at the first bound that blocks and add it; at a minimiser on
        the working set drop the bound whose multiplier has the wrong sign.
        The working set never has more bounds than ``theta`` has free
        entries.  Each minimiser on the working set is a least-squares solve
        on ``A`` restricted to the null space of the working bounds
        (:func:`working_set_step`), never the normal equations: on the
        unweighted F/A-18 loss ``A^T A`` spans 17 orders of magnitude (the
        starts' sensitivity to ``x0`` grows along a tumbling trajectory), its
        smallest computed eigenvalue was negative, and the steps crept.
        Where no ``theta`` meets every bound, the least violation found is
        kept and not made worse.
        """
        n = A2.shape[1]
        free = self.setup.free_x.ravel()
        # rows: free interval-start entries, then the free parameters (a
        # parameter on its bound that the step pushed out, clipped afterwards,
        # made the step's gap prediction wrong: fa18-drag-stab, unweighted)
        p_rows = self.p_cols[active[np.arange(self.p_cols.size)]]
        C = np.vstack([S_all.reshape(-1, n)[free], P[p_rows]]) * active[None, :]
        d = np.concatenate([(Xs + s_all).ravel()[free], ps[p_rows]])
        lo = np.concatenate([xl.ravel()[free], pl[p_rows]])
        hi = np.concatenate([xu.ravel()[free], pu[p_rows]])
        theta = least_violation(C, d, lo, hi, damp * active)
        v = C @ theta + d
        lo, hi = np.minimum(lo, v), np.maximum(hi, v)
        work: dict[int, int] = {}  # row of C -> -1 (lower bound) or +1 (upper bound)
        n_free = int(np.count_nonzero(active))
        for _ in range(max_rounds):
            rows = list(work)
            step, nu = working_set_step(A2, b2, damp, active, theta, C[rows])
            if np.max(np.abs(step), initial=0.0) <= 1e-14 * (1.0 + np.max(np.abs(theta), initial=0.0)):
                # a minimiser on the working set: a bound pulling inwards is released
                wrong = [(abs(v), r) for r, v in zip(rows, nu) if v * work[r] < 0]
                if not wrong:
                    return theta
                del work[max(wrong)[1]]
                continue
            x_now = C @ theta + d
            dx = C @ step
            with np.errstate(divide="ignore", invalid="ignore"):
                to_lo = np.where(dx < 0, (lo - x_now) / dx, np.inf)
                to_hi = np.where(dx > 0, (hi - x_now) / dx, np.inf)
            limit = np.minimum(to_lo, to_hi)
            if work:
                limit[list(work)] = np.inf
            k = int(np.argmin(limit))
            beta = float(limit[k])
            if beta >= 1.0:
                # the minimiser on the working set: done unless a bound pulls inwards
                theta = theta + step
                wrong = [(abs(v), r) for r, v in zip(rows, nu) if v * work[r] < 0]
                if not wrong:
                    return theta
                del work[max(wrong)[1]]
                continue
            theta = theta + max(beta, 0.0) * step
            if len(work) >= n_free:
                return theta  # no freedom left: the blocked point
            work[k] = -1 if to_lo[k] <= to_hi[k] else 1
        return theta

    def _second_order_correction(self, Xn, pn, U_new, c_new, E, S_nodes):
        """Trial point with its gaps closed to first order by the interval starts.

        With ``p`` and each experiment's first state held, the later starts
        move by ``d_{j+1} = E_j d_j + c_j`` (``c``: the trial's scaled gaps,
        ``E``: the end-state derivatives of the current linearisation), the
        second-order correction of SQP for these constraints.

        Returns
        -------
        (Xs, U, merit, evaluations) or None when the corrected point cannot be evaluated.
        """
        s = self.setup
        disc = s.disc
        d = np.zeros_like(Xn)
        for sl in disc.intervals_of:
            for j in range(sl.start, sl.stop - 1):
                d[j + 1] = E[j] @ d[j] + c_new[j]
        xl, xu, _, _ = s.scaled_bounds
        Xc = np.where(s.free_x, np.clip(Xn + d, xl, xu), Xn)
        d = Xc - Xn
        U_c = predict_nodes(S_nodes, U_new, d * s.x_scale, np.zeros_like(pn))
        merit_c, U_c, evals = self._settled_merit(Xc, pn, U_c)
        if not np.isfinite(merit_c):
            return None
        return Xc, U_c, merit_c, evals

    def _settled_merit(self, Xs, ps, U_start) -> tuple[float, np.ndarray, int]:
        """Merit at a scaled point with its node values settled from ``U_start``.

        Returns
        -------
        (merit, U, evaluations); the merit is ``inf`` where the fixed point
        is not found (``|P U - U| > TRIAL_ACCEPT_FIXED_POINT``) or not finite.
        """
        Xp, pp = self.setup.from_scaled(Xs, ps)
        U, res, sweeps = self.setup.tr.settle(Xp, U_start, pp, tol=TRIAL_FIXED_POINT_TOL)
        if not res <= TRIAL_ACCEPT_FIXED_POINT:
            return np.inf, U, sweeps + 1
        data, c = self._merit_parts(Xp, U, pp)
        merit = data + 0.5 * self.rho * float(np.sum(c * c))
        return (merit if np.isfinite(merit) else np.inf), U, sweeps + 1

    def _interval_curvature(self, U: np.ndarray, p: np.ndarray, sens: dict[str, np.ndarray],
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
        J, M, ny, nx = disc.n_intervals, disc.M, disc.model.ny, self.nx
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
    def _quadratic(Hs: np.ndarray | None, dX: np.ndarray, dp: np.ndarray) -> float:
        """``sum_j dz_j^T Hs_j dz_j``, ``dz_j = (dX_j, dp)``; 0 without ``Hs`` (Gauss-Newton)."""
        if Hs is None:
            return 0.0
        dz = np.concatenate([dX, np.broadcast_to(dp, (dX.shape[0], dp.size))], axis=1)
        return float(np.einsum("ja,jab,jb->", dz, Hs, dz))

    def _newton_system(self, H0: np.ndarray, g: np.ndarray, diag: np.ndarray,
                       active: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The damped Newton model as a least-squares problem for :meth:`_bounded_step`.

        The model ``q(t) = t^T H0 t / 2 + g^T t`` (``H0 = A^T A + Hc``, ``g =
        A^T b + hc``) plus the damping ``mu t^T diag(diag) t / 2`` equals
        ``|L^T t + L^-1 g|^2 / 2`` up to a constant, with ``L L^T`` the
        Cholesky factor of its Hessian.  Inactive entries (parameters held on
        their bound) get unit rows.  Where that Hessian is not positive
        definite, ``mu`` is raised until it is, but not beyond
        ``NEWTON_MAX_DAMPING``: ``None`` then, the iterate is not near a
        minimum and the step falls back to Gauss-Newton's convex model.
        (Without the cap, as in a trust-region Newton method,
        ``fa18-roll-rud`` seed 2 crept with ``mu`` ~1e-5..1e-4 and steps
        ~1e-5 for 2000 iterations where Gauss-Newton converges in 1147; with
        no damping allowed at all, ``fa18-roll-beta`` seed 0 took 885
        iterations instead of 379.)
        """
        inactive = ~active
        mu = self.mu
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
            self.mu = mu
            return L.T, np.linalg.solve(L, np.where(active, g, 0.0))

    def _raise_rho(self, pred_data: float, pred_gap: float, gap2: float) -> None:
        """Raise ``rho`` so a step that closes gaps is predicted to lower the merit.

        Not at a continuous point: there the predicted gap reduction is
        round-off (~1e-26), and dividing by it sent ``rho`` to 1e27 on the
        F/A-18's unweighted loss, after which the merit was round-off.
        """
        if pred_gap > 0 and gap2 > RHO_GAP_FLOOR ** 2:
            self.rho = max(self.rho, 4.0 * max(0.0, -pred_data) / pred_gap)

    def _linear_model(self, r, Jx, Jp, E, F, c, dX, dp):
        """Linearised data residuals and gaps after the step ``(dX, dp)``."""
        data_lin = r + np.einsum("jmn,jn->jm", Jx, dX) + np.einsum("jmk,k->jm", Jp, dp)
        nxt = np.zeros_like(dX)
        nxt[:-1] = dX[1:]
        gap_lin = c + np.einsum("jab,jb->ja", E, dX) + np.einsum("jak,k->ja", F, dp) - nxt
        gap_lin[~self.setup.disc.has_next] = 0.0  # no continuity after an experiment's end
        return data_lin, gap_lin

    # ------------------------------------------------------------------ step
    @guarded_step
    def step(self, Xs, U, ps, V, lam) -> StepInfo:
        # trial points far from the solution can overflow; they are rejected
        # below (non-finite merit), so the floating-point warnings are noise
        with np.errstate(all="ignore"):
            info = self._step(Xs, U, ps, V, lam)
            if info.accepted:
                info = self._pattern_move(Xs, ps, info)
                self._watch_for_stall(info)
            return self._check_stuck(Xs, ps, info)

    def _check_stuck(self, Xs, ps, info: StepInfo) -> StepInfo:
        """Fail, rather than repeat forever, where no step can gain with the gaps open.

        "Nothing to gain at double precision" is convergence at a continuous
        point; with gaps still open (scaled norm above ``STUCK_GAP``) it means
        the linearisation is numerically meaningless (measured: ``x' = p
        x^2`` from ``p0 = 50`` has sensitivities of 1e148 and the same
        iterate was returned 200 times, ending in "increase max_iter").
        """
        if info.precision_reached and self._last_gap > STUCK_GAP:
            self._stuck += 1
        else:
            self._stuck = 0
        if self._stuck < STUCK_ITERATIONS:
            return info
        _, p = self.setup.from_scaled(Xs, ps)
        return failed_step(Xs, ps, (
            f"no step can lower the merit although the continuity gaps are still open "
            f"(scaled norm {self._last_gap:.3g}): the linearisation is numerically "
            f"meaningless (gradient norm {info.grad_norm:.3g}; the sensitivities are largest "
            f"at {describe_interval(self.setup, self._worst_interval)}); the solution nearly "
            f"blows up for p = {np.array2string(p, precision=6)} -- start from a better p0, "
            "bound p (p_bounds) and the states (x0_bounds), or use a shorter T"),
            self.mu, info.phi_before)

    def _watch_for_stall(self, info: StepInfo) -> None:
        """Switch to Newton steps (``hessian="auto"``) once Gauss-Newton stalls.

        Stalled: ``STALL_STEPS`` accepted steps in a row each lowered the
        merit by less than ``STALL_GAIN`` of it, while the iteration has not
        converged (Gauss-Newton's linear convergence where the residuals are
        large; it converges in a few steps where they are not, so the switch
        costs nothing there).  Not where the second-order terms' dense
        ``(K nx)^2`` matrices per interval would not fit in memory
        (:func:`~picard_casadi.checks.dense_fits`).
        """
        if self.hessian != "auto" or self.newton:
            return
        d = self.setup.disc
        if not dense_fits(d.n_intervals, d.K, d.model.nx):
            return  # the second-order terms' dense matrices would not fit: Gauss-Newton
        gain = (info.phi_before - info.phi_after) / max(abs(info.phi_before), 1e-300)
        self._slow_steps = self._slow_steps + 1 if gain < STALL_GAIN else 0
        if self._slow_steps >= STALL_STEPS:
            self.newton = True

    def _pattern_move(self, Xs, ps, info: StepInfo) -> StepInfo:
        """Extrapolate along a valley that the Gauss-Newton steps cross in a zigzag.

        Where the residuals are large (the unweighted F/A-18 loss) Gauss-Newton
        can settle into a two-cycle: every other step is the same (measured on
        fa18-roll-beta, seed 1: cosine 1.000 two steps apart, 0.91 between
        neighbours), each step exactly as good as predicted and 1 % less
        than the one before.  The sum of two consecutive steps then points
        along the valley floor.  As in the pattern move of Hooke and Jeeves
        (or parallel tangents), the point is extrapolated along it by
        doubling multiples while the merit falls (interval starts and ``p``
        kept in their boxes, node values settled on the fixed point); the
        best point replaces the step's, or the step stands when no multiple
        improves on it.  Measured: fa18-roll-ail, seed 2, unweighted,
        converges in 978 iterations (not within 1000 without); fa18-roll-beta,
        seed 1, still does not within 4000 (its valley is where the second
        experiment's trajectory is violently unstable; README, Known
        limitations).
        """
        self._trail.append((info.Xs.copy(), info.ps.copy()))
        del self._trail[:-4]
        if len(self._trail) < 4:
            return info
        z = [np.concatenate([X.ravel(), p]) for X, p in self._trail]
        s1, s3 = z[1] - z[0], z[3] - z[2]
        n1, n3 = np.linalg.norm(s1), np.linalg.norm(s3)
        if n1 == 0.0 or n3 == 0.0 or float(s1 @ s3) < ZIGZAG_COSINE * n1 * n3:
            return info
        s = self.setup
        xl, xu, pl, pu = s.scaled_bounds
        dX = np.where(s.free_x, self._trail[3][0] - self._trail[1][0], 0.0)
        dp = np.where(s.free_p, self._trail[3][1] - self._trail[1][1], 0.0)
        # the largest multiple that keeps every start and parameter in its box
        limit = min(room(info.Xs, dX, xl, xu), room(info.ps, dp, pl, pu), PATTERN_MAX_FACTOR)
        best = None
        best_merit = info.phi_after
        factor = 1.0
        U_start = info.U
        evals = 0
        while factor <= limit and U_start is not None:
            Xn, pn = info.Xs + factor * dX, info.ps + factor * dp
            merit_new, U_new, n_evals = self._settled_merit(Xn, pn, U_start)
            evals += n_evals
            if not merit_new < best_merit:
                break
            best, best_merit, U_start = (Xn, pn, U_new), merit_new, U_new
            factor *= 2.0
        if best is None:
            return info
        self._trail.clear()
        Xn, pn, U_new = best
        step = float(max(np.abs(Xn - Xs).max(initial=0.0), np.abs(pn - ps).max(initial=0.0)))
        return StepInfo(Xn, pn, info.phi_before, best_merit, info.grad_norm, step, True,
                        info.evaluations + evals, info.control, U=U_new,
                        optimality=info.optimality)

    def _step(self, Xs, U, ps, V, lam) -> StepInfo:
        s = self.setup
        disc, tr = s.disc, s.tr
        xs, psc = s.x_scale, s.p_scale
        X, p = s.from_scaled(Xs, ps)
        U = tr.nodes_np(U)
        # the second-order terms (Newton steps) need the full set
        sens = tr.interval_sensitivities(X, U, p, full=self.newton)
        if not all(np.all(np.isfinite(v)) for v in (sens["G"], sens["dG"], sens["dend"])):
            return StepInfo(Xs, ps, np.nan, np.nan, np.nan, 0.0, False, 1, self.mu,
                            failed=True, message=(
                                "residuals or Jacobian are not finite at the current "
                                "iterate; the model left its domain (add or tighten "
                                "x0_bounds/p_bounds)"))
        J, M = disc.n_intervals, disc.M
        nx, np_, ny = self.nx, self.np, disc.model.ny
        Wt = tr._Wt
        r = (Wt * (disc.y - sens["G"])).transpose(0, 2, 1).reshape(J, M * ny)
        dG = -(Wt.transpose(0, 2, 1)[..., None] * sens["dG"]).reshape(J, M * ny, nx + np_)
        Jx = dG[:, :, :nx] * xs[None, None, :]
        Jp = dG[:, :, nx:] * psc[None, None, :]
        E = sens["dend"][:, :, :nx] * xs[None, None, :] / xs[None, :, None]
        F = sens["dend"][:, :, nx:] * psc[None, None, :] / xs[None, :, None]
        c = np.zeros((J, nx))
        hn = disc.has_next
        c[hn] = (sens["xend"][hn] - X[1:][hn[:-1]]) / xs
        data = 0.5 * float(np.sum(r * r))
        gap2 = float(np.sum(c * c))
        zero = s.merit_floor()  # the merit of a zero residual (exact data)
        if data + 0.5 * self.rho * gap2 <= zero:
            merit = data + 0.5 * self.rho * gap2
            return StepInfo(Xs, ps, merit, merit, 0.0, 0.0, False, 1, self.mu,
                            precision_reached=True, optimality=0.0)
        # the second-order terms weight the outputs by the full residuals
        r_full, Jx_full = r, Jx
        r, Jx, Jp = compress_rows(r, Jx, Jp)
        # the linear model's data part, less what no step can reach
        data_c = 0.5 * float(np.sum(r * r))

        # parameters at a bound with the reduced gradient pointing out stay fixed
        _, _, pl, pu = s.scaled_bounds
        free_p = s.free_p.copy()
        A, b, S_all, s_all, P = self._condense(Jx, Jp, r, E, F, c, free_p)
        g = np.einsum("jmt,jm->t", A, b)
        gp = P @ g
        tiny = 1e-12
        out = ((ps <= pl + tiny) & (gp > 0)) | ((ps >= pu - tiny) & (gp < 0))
        if np.any(out & free_p):
            free_p &= ~out
            A, b, S_all, s_all, P = self._condense(Jx, Jp, r, E, F, c, free_p)
            g = np.einsum("jmt,jm->t", A, b)
        bad = first_nonfinite_interval(A, b, S_all, s_all, limit=OVERFLOW)
        if bad is not None:
            # the chain S_{j+1} = E_j S_j + F_j P overflowed: the trajectory with
            # the current p and x0 is violently unstable (or blows up) there
            return failed_step(Xs, ps, (
                "the condensed Gauss-Newton step overflowed at "
                f"{describe_interval(s, bad)}: the sensitivities of the states to p and "
                "x0, chained from the experiment's start, exceed the floating-point range "
                f"there (p = {np.array2string(p, precision=6)}); the solution blows up or "
                "is violently unstable for these parameters -- start from a better p0, "
                "bound p (p_bounds) and the states (x0_bounds), or fit a shorter horizon"),
                self.mu, data + 0.5 * self.rho * gap2)
        self._last_gap = float(np.sqrt(gap2))
        self._worst_interval = int(np.argmax(np.abs(S_all).reshape(S_all.shape[0], -1)
                                             .max(axis=1, initial=0.0)))
        A2, b2 = A.reshape(-1, self.n_theta), b.ravel()
        # |b| of the uncompressed rows: what no step reaches adds 2 (data - data_c)
        bnorm = float(np.sqrt(b2 @ b2 + 2.0 * max(data - data_c, 0.0)))
        if A2.shape[0] > A2.shape[1]:
            # every least-squares problem of this step has the matrix A: its
            # triangular factor and Q^T b carry all of it in n_theta rows (the
            # rest of b is out of A's reach), so the QP's many solves are small
            # (fa18-drag-stab: 2754 rows for 31 unknowns, 17 ms per solve).
            # Rows of missing or padding samples are zero; R and Q^T b come
            # from the triangular factor of [A b], Q is never formed
            # (docs/performance.md)
            keep = np.any(A2 != 0.0, axis=1) | (b2 != 0.0)
            A2, b2 = A2[keep], b2[keep]
            n = self.n_theta
            if A2.shape[0] > n:
                R = np.linalg.qr(np.column_stack([A2, b2]), mode="r")
                A2, b2 = R[:n, :n], R[:n, n]
        col2 = np.einsum("mt,mt->t", A2, A2)  # the diagonal of A^T A
        active = np.ones(self.n_theta, dtype=bool)
        active[self.p_cols] = free_p[self.p_cols]
        diag = np.maximum(col2, 1e-12 * max(float(np.max(col2, initial=0.0)), 1e-300))
        xl, xu, _, _ = s.scaled_bounds
        # stationarity: the gain of the undamped Gauss-Newton step within the
        # boxes, as a cosine (see reach_cosine)
        theta_gn = self._bounded_step(A2, b2, STATIONARITY_DAMPING * diag, active,
                                      S_all, s_all, Xs, xl, xu, P, ps, pl, pu)
        optimality = reach_cosine(A2, b2, theta_gn, bnorm)
        gnorm = float(np.max(np.abs(g[active]), initial=0.0))

        # Newton steps: the curvature per interval, condensed like J^T J
        # (dz_j = St_j theta + st_j), added to the model's Hessian and gradient
        Hs = self._interval_curvature(U, p, sens, r_full, Jx_full, E) if self.newton else None
        if Hs is not None:
            St = np.concatenate([S_all, np.broadcast_to(P, (J,) + P.shape)], axis=1)
            st = np.concatenate([s_all, np.zeros((J, np_))], axis=1)
            nth = self.n_theta
            Hc = St.reshape(-1, nth).T @ np.matmul(Hs, St).reshape(-1, nth)
            H_newton = A2.T @ A2 + 0.5 * (Hc + Hc.T)
            g_newton = g + np.einsum("jat,jab,jb->t", St, Hs, st)

        evals = 1
        merit = data + 0.5 * self.rho * gap2
        full_pred = np.inf
        theta = None
        mu_solved = None
        for _ in range(self.max_tries):
            if mu_solved != self.mu:
                newton = (self._newton_system(H_newton, g_newton, diag, active)
                          if Hs is not None else None)
                if newton is None:
                    Hs = None  # Gauss-Newton model for this iteration
                    theta = self._bounded_step(A2, b2, self.mu * diag, active,
                                               S_all, s_all, Xs, xl, xu, P, ps, pl, pu)
                else:  # the damping is in the factor
                    theta = self._bounded_step(newton[0], newton[1], np.zeros(self.n_theta),
                                               active, S_all, s_all, Xs, xl, xu, P, ps, pl, pu)
                mu_solved = self.mu
            full_dX = np.einsum("jnt,t->jn", S_all, theta) + s_all
            full_dp = P @ theta
            full_data, full_gap = self._linear_model(r, Jx, Jp, E, F, c, full_dX, full_dp)
            full_pred_data = data_c - 0.5 * float(np.sum(full_data * full_data)) \
                - 0.5 * self._quadratic(Hs, full_dX, full_dp)
            full_pred_gap = 0.5 * (gap2 - float(np.sum(full_gap * full_gap)))
            self._raise_rho(full_pred_data, full_pred_gap, gap2)
            full_pred = full_pred_data + self.rho * full_pred_gap
            if full_pred <= PRECISION * max(data + 0.5 * self.rho * gap2, zero):
                merit = data + 0.5 * self.rho * gap2
                return StepInfo(Xs, ps, merit, merit, gnorm, 0.0, False, evals, self.mu,
                                precision_reached=True, optimality=optimality)
            size = float(max(np.abs(full_dX).max(initial=0.0), np.abs(full_dp).max(initial=0.0)))
            alpha = min(1.0, self.radius / size) if size > 0 else 1.0
            Xn = np.where(s.free_x, Xs + alpha * full_dX, Xs)
            pn = np.where(s.free_p, np.clip(ps + alpha * full_dp, pl, pu), ps)
            Xn = np.where(s.free_x, np.clip(Xn, xl, xu), Xs)  # round-off of the bounded step
            dX, dp = Xn - Xs, pn - ps
            data_lin, gap_lin = self._linear_model(r, Jx, Jp, E, F, c, dX, dp)
            pred_data = data_c - 0.5 * float(np.sum(data_lin * data_lin)) \
                - 0.5 * self._quadratic(Hs, dX, dp)
            pred_gap = 0.5 * (gap2 - float(np.sum(gap_lin * gap_lin)))
            self._raise_rho(pred_data, pred_gap, gap2)
            merit = data + 0.5 * self.rho * gap2
            predicted = pred_data + self.rho * pred_gap
            if predicted <= PRECISION * max(merit, zero):
                self.radius = max(0.25 * self.radius, 1e-12)  # shortened to nothing
                if self.radius <= 1e-10:
                    break
                continue
            step = float(max(np.abs(dX).max(initial=0.0), np.abs(dp).max(initial=0.0)))
            Xp, pp = s.from_scaled(Xn, pn)
            U_new = predict_nodes(sens["S"], U, dX * xs, dp * psc)
            U_new, res, sweeps = tr.settle(Xp, U_new, pp, tol=TRIAL_FIXED_POINT_TOL)
            evals += sweeps + 1
            # a trial whose fixed point was not found is not evaluated: its merit
            # would be that of a discontinuous U, and once accepted the next
            # linearisation (which assumes a fixed point) would not fit
            if res <= TRIAL_ACCEPT_FIXED_POINT:
                data_new, c_new = self._merit_parts(Xp, U_new, pp)
                merit_new = data_new + 0.5 * self.rho * float(np.sum(c_new * c_new))
            else:
                merit_new = np.inf
            ratio = (merit - merit_new) / predicted
            if np.isfinite(merit_new) and ratio < SOC_RATIO and np.any(c_new):
                # the gaps' curvature spoilt the step (Maratos effect): close the
                # new gaps along the old linearisation and keep the better point
                corrected = self._second_order_correction(Xn, pn, U_new, c_new, E, sens["S"])
                evals += corrected[3] if corrected is not None else 0
                if corrected is not None and corrected[2] < merit_new:
                    Xn, U_new, merit_new = corrected[0], corrected[1], corrected[2]
                    ratio = (merit - merit_new) / predicted
            # a gain within a few round-offs of the merit says nothing about the
            # model: such a step is kept if it does not raise the merit, and the
            # radius is left alone (shrinking it on noise cost fa18-roll-rud ten
            # iterations of doubling it back)
            in_noise = predicted <= NOISE_GAIN * max(merit, zero)
            if in_noise and np.isfinite(merit_new) and merit_new <= merit:
                ratio = max(ratio, 1e-3)
            if np.isfinite(merit_new) and ratio > 1e-4:
                if ratio > 0.75 and alpha < 1.0:
                    self.radius = min(2.0 * self.radius, 1e6)
                elif ratio < 0.25 and not in_noise:
                    self.radius = max(0.25 * min(self.radius, step), 1e-12)
                # regularisation only: dropped fast while the model predicts well
                # (divided by 3, a 1e-3 damping shortened steps along a flat
                # direction for ten iterations on fa18-roll-rud)
                self.mu = max(self.mu / 10.0, 1e-12) if ratio > 0.75 else self.mu
                return StepInfo(Xn, pn, merit, merit_new, gnorm, step, True, evals, self.mu,
                                U=U_new, optimality=optimality)
            # rejected: shrink the trust region; regularise a little more
            self.radius = max(0.25 * min(self.radius, step), 1e-12)
            self.mu = min(self.mu * 2.0, 1e6)
            if self.radius <= 1e-10:
                break
        if self.radius <= 1e-10 and full_pred <= COLLAPSE_PRECISION * max(merit, zero):
            # what is left to gain is below the accuracy of the evaluations
            self.radius = self.radius0
            return StepInfo(Xs, ps, merit, merit, gnorm, 0.0, False, evals, self.mu,
                            precision_reached=True, optimality=optimality)
        if self.radius <= 1e-10:
            return StepInfo(Xs, ps, merit, merit, gnorm, 0.0, False, evals, self.mu,
                            failed=True, optimality=optimality, message=(
                                "no acceptable step: the trust region collapsed (the "
                                "linear model does not describe the problem near this "
                                "point; a state bound may block every descent direction "
                                "-- widen x0_bounds, or start from a better p0)"))
        return StepInfo(Xs, ps, merit, merit, gnorm, 0.0, False, evals, self.mu,
                        optimality=optimality)
