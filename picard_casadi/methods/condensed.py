"""Gauss-Newton with the continuity conditions as linearised constraints.

``picard-gn``'s default step (``continuity="constrained"``).  It is the limit
``lambda -> infinity`` of the Levenberg-Marquardt step on the penalised
residuals of ``L_{lambda,n}``: the data residuals are minimised subject to
the linearised continuity conditions (Bock's multiple-shooting Gauss-Newton),

    minimise   sum_j | r_j + Jx_j dx_j + Jp_j dp |^2
    subject to dx_{j+1} = E_j dx_j + F_j dp + c_j      (c_j: the current gap)

with ``E_j, F_j`` the exact derivatives of the interval's end state at the
Picard fixed point (:mod:`picard_casadi.transcription.sensitivity`).  The constraints are
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
regularises the small condensed system.  Where a step so cut gained only
part of what the model predicted (a curved valley the Gauss-Newton direction
leaves at once), the next is damped until it fits the radius instead
(More's step, :data:`FITTED_STEP_RATIO`), while that one's model holds.

This module holds the step itself: the linearisation, the trust-region
loop and its acceptance test, the second-order correction and the merit's
``rho``.  Its parts, one module each:

* :mod:`~picard_casadi.methods.condensing`: the chain ``dx_j = S_j theta +
  s_j`` and the linearised residuals;
* :mod:`~picard_casadi.methods.least_squares`: row compression and the
  active-set solve of the bounded condensed problem (state box and
  parameter box as inequalities; least squares on ``A``, never ``A^T A``);
* :mod:`~picard_casadi.methods.newton_switch`: the exact-Hessian (Newton)
  model and when it replaces Gauss-Newton's (``hessian=``);
* :mod:`~picard_casadi.methods.pattern_move`: the extrapolation along a
  valley the steps cross in a zigzag;
* :mod:`~picard_casadi.methods.fitted_step`: the damping of the step that
  fits the radius.

Safeguards here (why each, with its measurements: ``docs/design.md``):

* second-order correction: a trial whose merit ratio is below 0.75 is also
  evaluated with its new gaps closed along the current linearisation
  (``d_{j+1} = E_j d_j + c_j``), again from that point while the ratio
  stays low and each correction gains (``SOC_ROUNDS``), and the best point
  is kept;
* ``rho`` is not raised at a continuous point (dividing by a round-off
  predicted gap reduction sends it to overflow), and a trial whose fixed
  point is not found (``|P U - U| > 1e-8``) is rejected, not evaluated.

Stationarity is the cosine between the residual and what the undamped
Gauss-Newton step within the boxes reaches of it (:func:`reach_cosine`),
not MINPACK's largest cosine with one column, which ill-conditioning fools.
"""

from __future__ import annotations

import numpy as np

from ..transcription.problem import ZERO_MERIT
from ..transcription.sensitivity import predict_nodes
from .base import GAP_FLOOR_MAX, NO_GAIN_COSINE, Setup, StepInfo, step_size
from .breakdown import (describe_interval, failed_step, first_nonfinite_interval, guarded_step,
                        not_finite_message)
from .condensing import condense, gap_closing_shift, linearised_residuals, parameter_columns
from .fitted_step import fitted_step
from .least_squares import (bounded_least_squares, compress_rows, least_violation, reach_cosine,
                            triangular_factor)
from .newton_switch import NewtonSwitch
from .pattern_move import PatternMove

__all__ = ["ConstrainedGaussNewtonStep"]

PRECISION = 1e-14  # predicted relative gain of a full step that counts as nothing
COLLAPSE_PRECISION = 1e-9  # gain that is round-off when no shortened step realises it
# a merit this fraction of the data's own (residuals ~1e-7 of the data) is as
# exact as the evaluations: the node values are settled to fixed_point_tol =
# 1e-9 of their scale, so a gain below |r| 1e-9 |y| cannot be told from their
# round-off, and a trust region that collapsed there found the exact fit (noise-
# free data: "step_failed" at an SSR of 6e-17 with every digit of p right)
EXACT_FIT = 1e-14
# ... and with the gaps at their floor (GAP_FLOOR_MAX), a predicted gain this
# small against the merit is the stiff evaluations' round-off: a user's stiff
# kinetics (rates to 1e4) collapsed at gaps of 3.5e-8, its estimate right, with
# 1.4e-7 of the merit left to gain, and ended "step_failed"
FLOOR_GAIN = 1e-6
# Trial points are compared on the merit, so their fixed point is solved tightly
# (from the first-order prediction this takes a few sweeps); a loose solve made
# the merit noisier than the gains near convergence (FitzHugh-Nagumo, seed 1).
TRIAL_FIXED_POINT_TOL = 1e-12
# ... and a trial whose solve stalls above this is rejected (F/A-18 unweighted:
# accepting a trial at 3e-2 left the iteration where no step could be evaluated)
TRIAL_ACCEPT_FIXED_POINT = 1e-8
# a step whose merit ratio falls below this gets a second-order correction
SOC_RATIO = 0.75
# ... and another from the corrected point, while the ratio stays below it and
# each correction lowers the merit, up to this many in all: one correction
# leaves the trial's gaps some 60 times smaller, and with the large rho that
# gap-closing steps far from the solution raise (2.7e7 on PEtab's Armistead)
# what it leaves can still outweigh a data gain the model predicted to 2 %
SOC_ROUNDS = 3
# ... unless the correction moves an interval start (scaled, largest shift)
# by more than SOC_MAX_SHIFT_RADII trust-region radii or by SOC_MAX_SHIFT of
# the state's scale: not a second-order correction, and settling its node
# values cost up to 50 Picard applications for a point never kept on the
# F/A-18 runs (docs/performance.md).  (A warm start on a finer mesh needed a
# correction of five radii.)
SOC_MAX_SHIFT_RADII = 10.0
SOC_MAX_SHIFT = 1.0
# a stalled run's steps (damp_long_steps): a Gauss-Newton step the trust
# radius would cut to less than this fraction of its length is damped instead
# (the damping times 10 per solve, at most DAMPING_RAISES times)
TRUNCATED_FRACTION = 0.1
DAMPING_RAISES = 12
# below this scaled gap norm the gaps are round-off: no reason to raise rho
RHO_GAP_FLOOR = 1e-10
# predicted gains below this fraction of the merit are at the level of its round-off
NOISE_GAIN = 1e-10
# relative damping of the Gauss-Newton step that measures stationarity
STATIONARITY_DAMPING = 1e-14
# iterations in a row with nothing to gain while the scaled gap norm is above
# STUCK_GAP before the step gives up (far above gap_tol: a converging run
# never has gaps this open when it runs out of gains)
STUCK_ITERATIONS = 3
STUCK_GAP = 1e-6
#: the two possible causes of that failure, which estimate's diagnosis tells
#: apart by a simulation
STUCK_CAUSES = ("the solution nearly blows up there, or the model is strongly unstable "
                "along the current trajectory")
#: condensed sensitivities (scaled) beyond which a collapsed trust region is
#: that breakdown too: growth by e^18 along the intervals
UNSTABLE_SENSITIVITY = 1e8
# the damping of a column of the condensed step (a parameter or a first
# state) is at least that of one moving the linear model's residual by this
# fraction of its norm, moved by its own size: relative to the largest column
# only, it is relative to nothing where every column is that small (the fast
# binding with log10 k = -40, every column ~1e-38: steps of 4e37, and the
# trust region collapsed where the gaps alone needed closing)
SILENT_STEP_COLUMN = 1e-12
# condensed rows larger than this overflow when squared (LAPACK then fails on
# inf, e.g. "SVD did not converge"): the step reports the interval instead
OVERFLOW = 1e150
# the fitted step: after an accepted step the trust radius cut, whose gain
# ratio was below FITTED_STEP_RATIO (the Gauss-Newton direction leaves a
# curved valley within a sliver of its length, and neither grows the radius),
# a trial the radius would cut is the step damped until it fits the radius
# instead (More's Levenberg-Marquardt step), and so is the next while a
# fitted step gains at least that ratio; one below it hands back to the cut
# step (docs/performance.md, "The step fitted to the radius")
FITTED_STEP_RATIO = 0.75
# ... only where the scaled continuity gaps are within FITTED_STEP_GAP (a start
# whose states outgrow their scales, gaps of 191, went to a merit dominated by
# its gap penalty and stalled), and where closing them alone (the step of
# infinite damping) moves the interval starts by less than
# FITTED_STEP_CLOSURE radii (PEtab's Crauste from its nominal vector, closures
# of 70 to 1000 radii: 1000 iterations where the cut steps take 157)
FITTED_STEP_GAP = 0.1
FITTED_STEP_CLOSURE = 30.0


class ConstrainedGaussNewtonStep:
    """Levenberg-Marquardt-damped condensed Gauss-Newton step on ``(p, x_j)``."""

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
        self.pattern = PatternMove(setup)
        # Newton steps now (exact), once Gauss-Newton stalls (auto), or never
        self.switch = NewtonSwitch(setup, hessian)
        # iterations in a row where no step gained while the gaps were open
        self._stuck = 0
        #: the loop's remedy for a stalled run (set by run_picard_iteration): a
        #: step the trust radius would cut to less than TRUNCATED_FRACTION of
        #: its length is damped (bent towards the gradient) instead of cut
        self.damp_long_steps = False
        self._last_gap = 0.0  # scaled gap norm of the last linearisation
        # trials since the last accepted step, those in a row whose fixed point
        # was not found, and the last one's residual
        self._trials_since_step = 0
        self._unsettled_trials = 0
        self._unsettled_residual = 0.0
        self._worst_interval = 0  # where the condensed sensitivities were largest
        self._largest_sensitivity = 0.0  # and their size there (scaled)
        self._scaled_weights: tuple[np.ndarray, int, np.ndarray] | None = None  # see _row_scale
        # the boxes of this step, its entries that may move, a theta in the boxes
        self._feasible: tuple[tuple, np.ndarray, np.ndarray] | None = None
        # whether the next trial the radius would cut is fitted to it instead
        # (FITTED_STEP_RATIO), and the damping of the last fitted step
        self._fit_next = False
        self._fit_mu = 0.0

    @property
    def units(self) -> tuple[str, ...]:
        """The transcription's functions the iteration calls (compiled side by
        side before the first iteration)."""
        return ("summary", "trajectory", "picard") + self.setup.tr.linearisation_units

    def reset(self) -> None:
        """Nothing to forget: no multipliers in this formulation."""

    def settled(self, info: StepInfo, gap_scaled: float, lam: float) -> bool:
        return True

    # ------------------------------------------------------------------ helpers
    def _residuals(self, X: np.ndarray, U: np.ndarray, p: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
        """Weighted data residuals ``(J, ny, M)`` and scaled gaps ``(J, nx)`` at a
        settled point (unscaled ``X``, ``p``)."""
        s = self.setup
        disc, tr = s.disc, s.tr
        _, Ys, xend = tr.trajectory(X, U, p)
        r = tr._Wt * (disc.y - Ys)  # weighted: the merit needs more than the misfit
        gaps = np.zeros_like(X)
        hn = disc.has_next
        gaps[hn] = (xend[hn] - X[1:][hn[:-1]]) / s.x_scale
        return r, gaps

    def _merit_parts(self, X: np.ndarray, U: np.ndarray, p: np.ndarray
                     ) -> tuple[float, np.ndarray]:
        """Data objective ``|r|^2 / 2`` and scaled gaps ``(J, nx)`` at a settled point."""
        r, gaps = self._residuals(X, U, p)
        return 0.5 * float(np.sum(r * r)), gaps

    def _condense(self, Jx, Jp, r, E, F, c, free_p):
        """Rows ``A_j theta + b_j`` of every interval and the chain ``S_j, s_j``,
        on each experiment's own columns, and ``P`` (``dp = P theta``):
        :mod:`picard_casadi.methods.condensing`."""
        P = parameter_columns(self.np, self.p_cols, self.n_theta, free_p)
        return condense(self.setup.disc, self.x0_cols, P, Jx, Jp, r, E, F, c), P

    def _box_rows(self, active, rows, Xs, xl, xu, P, ps, pl, pu):
        """The bounded quantities of the condensed step as ``lo <= C theta + d <= hi``.

        The starts are affine in ``theta`` (``x_j = Xs_j + S_j theta + s_j``),
        so the state box is a set of linear inequalities of the small condensed
        problem; the free parameters' boxes are rows too (a parameter on its
        bound that the step pushed out, clipped afterwards, made the step's gap
        prediction wrong: fa18-drag-stab, unweighted).  Starts with no finite
        bound are left out: they never bind, and their rows over all of
        ``theta`` grew with the square of the number of experiments.
        Returns ``(C, d, lo, hi)``.
        """
        free = self.setup.free_x & (np.isfinite(xl) | np.isfinite(xu))
        intervals, states = np.nonzero(free)
        p_rows = self.p_cols[active[np.arange(self.p_cols.size)]]
        C = np.vstack([rows.global_rows(rows.S[intervals, states], intervals),
                       P[p_rows]]) * active[None, :]
        d = np.concatenate([(Xs + rows.s)[free], ps[p_rows]])
        lo = np.concatenate([xl[free], pl[p_rows]])
        hi = np.concatenate([xu[free], pu[p_rows]])
        return C, d, lo, hi

    def _bounded_step(self, A2, b2, damp, active, boxes):
        """The damped condensed step ``min |A theta + b|^2 / 2 + theta^T
        diag(damp) theta / 2`` with every interval start and ``p`` kept in
        their boxes (``boxes``: :meth:`_box_rows`), solved by
        :func:`~picard_casadi.methods.least_squares.bounded_least_squares`.

        Its feasible start (the smallest ``theta`` that meets the boxes,
        :func:`~picard_casadi.methods.least_squares.least_violation`) is found
        once per step's boxes and kept for the step's other solves (another
        damping, the Newton model): a strictly convex QP has one minimiser
        whatever the start, and where closing the gaps leaves later interval
        starts outside the box (``fa18-roll-rud``'s first iterations: 30 to
        220 of 1246 bounds) finding it is work.
        """
        kept = self._feasible
        if kept is not None and kept[0] is boxes and np.array_equal(kept[1], active):
            start = kept[2]
        else:
            start = least_violation(*boxes, damp * active)
            self._feasible = (boxes, active.copy(), start)
        return bounded_least_squares(A2, b2, damp, active, *boxes, start=start)

    def _second_order_correction(self, Xn, pn, U_new, c_new, E, S_nodes):
        """Trial point with its gaps closed to first order by the interval starts.

        With ``p`` and each experiment's first state held, the later starts
        move by ``d_{j+1} = E_j d_j + c_j`` (``c``: the trial's scaled gaps,
        ``E``: the end-state derivatives of the current linearisation), the
        second-order correction of SQP for these constraints.

        Returns
        -------
        (Xs, U, merit, gaps, evaluations) or None when the corrected point
        cannot be evaluated, or its shift is not small (``SOC_MAX_SHIFT_RADII``,
        ``SOC_MAX_SHIFT``).
        """
        s = self.setup
        d = gap_closing_shift(s.disc, E, c_new)
        if not float(np.max(np.abs(d), initial=0.0)) <= min(SOC_MAX_SHIFT_RADII * self.radius,
                                                           SOC_MAX_SHIFT):
            return None  # not a small correction (NaN too): not worth settling
        xl, xu, _, _ = s.scaled_bounds
        Xc = np.where(s.free_x, np.clip(Xn + d, xl, xu), Xn)
        d = Xc - Xn
        U_c = predict_nodes(S_nodes, U_new, d * s.x_scale, np.zeros_like(pn))
        merit_c, U_c, c_c, evals = self._settled_point(Xc, pn, U_c)
        if not np.isfinite(merit_c):
            return None
        return Xc, U_c, merit_c, c_c, evals

    def _settled_point(self, Xs, ps, U_start
                       ) -> tuple[float, np.ndarray, np.ndarray, int]:
        """Merit and scaled gaps at a scaled point with its node values settled
        from ``U_start``.

        Returns
        -------
        (merit, U, gaps, evaluations); the merit is ``inf`` (and the gaps
        empty) where the fixed point is not found (``|P U - U| >
        TRIAL_ACCEPT_FIXED_POINT``), ``inf`` where it is not finite.
        """
        Xp, pp = self.setup.from_scaled(Xs, ps)
        U, res, sweeps = self.setup.tr.settle(Xp, U_start, pp, tol=TRIAL_FIXED_POINT_TOL)
        if not res <= TRIAL_ACCEPT_FIXED_POINT:
            return np.inf, U, np.zeros(0), sweeps + 1
        data, c = self._merit_parts(Xp, U, pp)
        merit = data + 0.5 * self.rho * float(np.sum(c * c))
        return (merit if np.isfinite(merit) else np.inf), U, c, sweeps + 1

    def _settled_merit(self, Xs, ps, U_start) -> tuple[float, np.ndarray, int]:
        """``(merit, U, evaluations)`` of :meth:`_settled_point`."""
        merit, U, _, evals = self._settled_point(Xs, ps, U_start)
        return merit, U, evals

    def _raise_rho(self, pred_data: float, pred_gap: float, gap2: float) -> None:
        """Raise ``rho`` so a step that closes gaps is predicted to lower the merit.

        Not at a continuous point: there the predicted gap reduction is
        round-off (~1e-26), and dividing by it sent ``rho`` to 1e27 on the
        F/A-18's unweighted loss, after which the merit was round-off.
        """
        if pred_gap > 0 and gap2 > RHO_GAP_FLOOR ** 2:
            self.rho = max(self.rho, 4.0 * max(0.0, -pred_data) / pred_gap)

    def _linearise(self, X: np.ndarray, U: np.ndarray, p: np.ndarray, full: bool = False):
        """Every interval's linearisation at a settled point, in the scaled unknowns.

        Returns ``(sens, r, Jx, Jp, E, F, c)``: the interval sensitivities
        (:meth:`~picard_casadi.transcription.functions.Transcription.interval_sensitivities`),
        the weighted data residuals ``(J, M ny)`` and their Jacobians, the
        end-state derivatives and the scaled gaps ``(J, nx)``; ``None`` where
        they are not finite.
        """
        s = self.setup
        disc, tr = s.disc, s.tr
        xs, psc = s.x_scale, s.p_scale
        # without the second-order terms, the data rows of the padding samples
        # (zero weight) are left out: M is padded to a power of two
        M = disc.M if full else disc.samples_used
        sens = tr.interval_sensitivities(X, U, p, full=full, trimmed=not full)
        dG = sens["dG"][:, :M]
        if not all(np.all(np.isfinite(v)) for v in (sens["G"], dG, sens["dend"])):
            return None
        J = disc.n_intervals
        nx, np_, ny = self.nx, self.np, disc.model.ny
        Wt = tr._Wt[:, :, :M]
        r = (Wt * (disc.y[:, :, :M] - sens["G"][:, :, :M])).transpose(0, 2, 1).reshape(J, M * ny)
        # -weight times the unknowns' scale, applied in one pass
        dG = dG.reshape(J, M * ny, nx + np_) * self._row_scale(tr._Wt, M)
        Jx, Jp = dG[:, :, :nx], dG[:, :, nx:]
        E = sens["dend"][:, :, :nx] * xs[None, None, :] / xs[None, :, None]
        F = sens["dend"][:, :, nx:] * psc[None, None, :] / xs[None, :, None]
        c = np.zeros((J, nx))
        hn = disc.has_next
        c[hn] = (sens["xend"][hn] - X[1:][hn[:-1]]) / xs
        return sens, r, Jx, Jp, E, F, c

    def _row_scale(self, Wt: np.ndarray, M: int) -> np.ndarray:
        """``-Wt`` times the scales of ``(x_j, p)``, ``(J, M ny, nx + np)`` for
        the first ``M`` samples, as the data Jacobian's rows need it (kept
        while the weights are the same)."""
        last = self._scaled_weights
        if last is None or last[0] is not Wt or last[1] != M:
            s = self.setup
            J, ny, _ = Wt.shape
            scale = np.concatenate([s.x_scale, s.p_scale])
            rows = (-Wt[:, :, :M].transpose(0, 2, 1).reshape(J, M * ny)[..., None]
                    * scale[None, None, :])
            self._scaled_weights = last = (Wt, M, rows)
        return last[2]

    def _linear_model(self, r, Jx, Jp, E, F, c, dX, dp):
        """Linearised data residuals and gaps after the step ``(dX, dp)``."""
        return linearised_residuals(self.setup.disc, r, Jx, Jp, E, F, c, dX, dp)

    # ------------------------------------------------------------------ step
    @guarded_step
    def step(self, Xs, U, ps, V, lam) -> StepInfo:
        # trial points far from the solution can overflow; they are rejected
        # below (non-finite merit), so the floating-point warnings are noise
        with np.errstate(all="ignore"):
            info = self._step(Xs, U, ps, V, lam)
            if info.accepted:
                info = self.pattern.after(Xs, ps, info, self._settled_merit)
                self.switch.watch(info)
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
        return failed_step(Xs, ps, (
            "no step can lower the merit although the continuity gaps are still open "
            f"(scaled norm {self._last_gap:.3g}): the linearisation is numerically "
            f"meaningless (gradient norm {info.grad_norm:.3g}; {self._unstable_detail(Xs, ps)}"),
            self.mu, info.phi_before)

    def _unstable_detail(self, Xs, ps) -> str:
        """Where the condensed sensitivities are largest and how large, the ``p``,
        and :data:`STUCK_CAUSES` with their advice: the end of both messages of
        a linearisation out of double precision."""
        _, p = self.setup.from_scaled(Xs, ps)
        return (f"the sensitivities of the interval starts to (p, x0) reach "
                f"{self._largest_sensitivity:.3g}, at "
                f"{describe_interval(self.setup, self._worst_interval)}) at p = "
                f"{np.array2string(p, precision=6)}: {STUCK_CAUSES} -- start from a better "
                "p0, bound p (p_bounds) and the states (x0_bounds), or use a shorter T")

    def _step(self, Xs, U, ps, V, lam) -> StepInfo:
        s = self.setup
        disc, tr = s.disc, s.tr
        xs, psc = s.x_scale, s.p_scale
        X, p = s.from_scaled(Xs, ps)
        U = tr.nodes_np(U)
        # the second-order terms (Newton steps) need the full set
        lin = self._linearise(X, U, p, full=self.switch.newton)
        if lin is None:
            return StepInfo(Xs, ps, np.nan, np.nan, np.nan, 0.0, False, 1, self.mu,
                            failed=True, message=not_finite_message(
                                self.setup, U, "residuals or Jacobian", p))
        sens, r, Jx, Jp, E, F, c = lin
        J = disc.n_intervals
        np_ = self.np
        data = 0.5 * float(np.sum(r * r))
        gap2 = float(np.sum(c * c))
        zero = s.merit_floor()  # the merit of a zero residual (exact data)
        if data + 0.5 * self.rho * gap2 <= zero:
            merit = data + 0.5 * self.rho * gap2
            return StepInfo(Xs, ps, merit, merit, 0.0, 0.0, False, 1, self.mu,
                            precision_reached=True, optimality=0.0)
        # the second-order terms weight the outputs by the full residuals
        r_full, Jx_full = r, Jx
        r, Jx, Jp = compress_rows(r, Jx, Jp, self.setup.tr.kernels)
        # the linear model's data part, less what no step can reach
        data_c = 0.5 * float(np.sum(r * r))

        # parameters at a bound with the reduced gradient pointing out stay fixed
        _, _, pl, pu = s.scaled_bounds
        free_p = s.free_p.copy()
        rows, P = self._condense(Jx, Jp, r, E, F, c, free_p)
        g = rows.gradient()
        gp = P @ g
        tiny = 1e-12
        out = ((ps <= pl + tiny) & (gp > 0)) | ((ps >= pu - tiny) & (gp < 0))
        if np.any(out & free_p):
            free_p &= ~out
            rows, P = self._condense(Jx, Jp, r, E, F, c, free_p)
            g = rows.gradient()
        A, b = rows.A, rows.b
        bad = first_nonfinite_interval(A, b, rows.S, rows.s, limit=OVERFLOW)
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
        largest = np.abs(rows.S).reshape(rows.S.shape[0], -1).max(axis=1, initial=0.0)
        self._worst_interval = int(np.argmax(largest))
        self._largest_sensitivity = float(largest[self._worst_interval]) if largest.size else 0.0
        b2 = b.ravel()
        # |b| of the uncompressed rows: what no step reaches adds 2 (data - data_c)
        bnorm = float(np.sqrt(b2 @ b2 + 2.0 * max(data - data_c, 0.0)))
        # every least-squares problem of this step has the matrix A: its
        # triangular factor and Q^T b carry all of it in n_theta rows, so the
        # QP's many solves are small (fa18-drag-stab: 2754 rows for 31
        # unknowns, 17 ms per solve); Q is never formed (docs/performance.md)
        A2, b2 = triangular_factor(A, b, rows.blocks, self.n_theta)
        col2 = np.einsum("mt,mt->t", A2, A2)  # the diagonal of A^T A
        active = np.ones(self.n_theta, dtype=bool)
        # theta's first columns are the free parameters, in p_cols' order
        active[:self.p_cols.size] = free_p[self.p_cols]
        diag = np.maximum(col2, max(1e-12 * float(np.max(col2, initial=0.0)),
                                    (SILENT_STEP_COLUMN * bnorm) ** 2, 1e-300))
        xl, xu, _, _ = s.scaled_bounds
        # stationarity: the gain of the undamped Gauss-Newton step within the
        # boxes, as a cosine (see reach_cosine)
        boxes = self._box_rows(active, rows, Xs, xl, xu, P, ps, pl, pu)
        theta_gn = self._bounded_step(A2, b2, STATIONARITY_DAMPING * diag, active, boxes)
        optimality = reach_cosine(A2, b2, theta_gn, bnorm)
        gnorm = float(np.max(np.abs(g[active]), initial=0.0))

        # Newton steps: the curvature per interval, condensed like J^T J
        # (dz_j = St_j theta + st_j), added to the model's Hessian and gradient
        Hs = (self.switch.curvature(U, p, sens, r_full, Jx_full, E) if self.switch.newton
              else None)
        if Hs is not None:
            # on each experiment's own columns, summed into theta's
            St = np.concatenate([rows.S, np.broadcast_to(rows.P, (J,) + rows.P.shape)], axis=1)
            st = np.concatenate([rows.s, np.zeros((J, np_))], axis=1)
            Hc = rows.quadratic_form(np.matmul(St.transpose(0, 2, 1), np.matmul(Hs, St)))
            H_newton = A2.T @ A2 + 0.5 * (Hc + Hc.T)
            g_newton = g + rows.to_theta(np.einsum("jat,jab,jb->jt", St, Hs, st))

        evals = 1
        merit = data + 0.5 * self.rho * gap2
        full_pred = np.inf
        theta = None
        mu_solved = None
        for _ in range(self.max_tries):
            # with damp_long_steps (a stalled run's remedy), the damping is
            # raised while the radius would cut the step to a sliver of itself
            raises = 0
            while True:
                if mu_solved != self.mu:
                    newton = (self.switch.system(H_newton, g_newton, diag, active, self.mu)
                              if Hs is not None else None)
                    if newton is None:
                        Hs = None  # Gauss-Newton model for this iteration
                        theta = self._bounded_step(A2, b2, self.mu * diag, active, boxes)
                    else:  # the damping is in the factor
                        L_t, rhs, self.mu = newton
                        theta = self._bounded_step(L_t, rhs, np.zeros(self.n_theta), active,
                                                   boxes)
                    mu_solved = self.mu
                full_dX = rows.starts(theta)
                full_dp = P @ theta
                size = step_size(full_dX, full_dp)
                if (Hs is not None or not self.damp_long_steps or raises >= DAMPING_RAISES
                        or not size * TRUNCATED_FRACTION > self.radius):
                    break
                self.mu = max(self.mu, 1e-8) * 10.0
                raises += 1
            full_data, full_gap = self._linear_model(r, Jx, Jp, E, F, c, full_dX, full_dp)
            full_pred_data = data_c - 0.5 * float(np.sum(full_data * full_data)) \
                - 0.5 * self.switch.quadratic(Hs, full_dX, full_dp)
            full_pred_gap = 0.5 * (gap2 - float(np.sum(full_gap * full_gap)))
            self._raise_rho(full_pred_data, full_pred_gap, gap2)
            full_pred = full_pred_data + self.rho * full_pred_gap
            if full_pred <= PRECISION * max(data + 0.5 * self.rho * gap2, zero):
                merit = data + 0.5 * self.rho * gap2
                return StepInfo(Xs, ps, merit, merit, gnorm, 0.0, False, evals, self.mu,
                                precision_reached=True, optimality=optimality)
            # the fraction of the Gauss-Newton step the radius lets through
            # (what the loop counts as a creep, also where the step is fitted)
            fraction = min(1.0, self.radius / size) if size > 0 else 1.0
            fitted = (Hs is None and fraction < 1.0 and self._fit_next
                      and float(np.abs(c).max(initial=0.0)) <= FITTED_STEP_GAP
                      and float(np.abs(rows.s).max(initial=0.0))
                      < FITTED_STEP_CLOSURE * self.radius)
            if fitted:
                full_dX, full_dp, size = self._fitted_step(A2, b2, diag, active, boxes,
                                                           rows, P)
            alpha = min(1.0, self.radius / size) if size > 0 else 1.0
            Xn = np.where(s.free_x, Xs + alpha * full_dX, Xs)
            pn = np.where(s.free_p, np.clip(ps + alpha * full_dp, pl, pu), ps)
            Xn = np.where(s.free_x, np.clip(Xn, xl, xu), Xs)  # round-off of the bounded step
            dX, dp = Xn - Xs, pn - ps
            data_lin, gap_lin = self._linear_model(r, Jx, Jp, E, F, c, dX, dp)
            pred_data = data_c - 0.5 * float(np.sum(data_lin * data_lin)) \
                - 0.5 * self.switch.quadratic(Hs, dX, dp)
            pred_gap = 0.5 * (gap2 - float(np.sum(gap_lin * gap_lin)))
            self._raise_rho(pred_data, pred_gap, gap2)
            merit = data + 0.5 * self.rho * gap2
            predicted = pred_data + self.rho * pred_gap
            if predicted <= PRECISION * max(merit, zero):
                self.radius = max(0.25 * self.radius, 1e-12)  # shortened to nothing
                if self.radius <= 1e-10:
                    break
                continue
            step = step_size(dX, dp)
            Xn, U_new, merit_new, ratio, sweeps = self._tried(
                Xn, pn, predict_nodes(sens["S"], U, dX * xs, dp * psc), merit, predicted,
                lambda *trial: self._second_order_correction(*trial, E, sens["S"]))
            evals += sweeps
            if self._judge(ratio, predicted, merit, merit_new, zero, alpha, step,
                           fitted=fitted):
                self._trials_since_step = 0
                return StepInfo(Xn, pn, merit, merit_new, gnorm, step, True, evals, self.mu,
                                U=U_new, optimality=optimality, fraction=fraction)
            if self.radius <= 1e-10:
                break
        return self._without_step(Xs, ps, merit, gnorm, evals, full_pred, zero, optimality,
                                  float(np.abs(c).max(initial=0.0)))

    def _fitted_step(self, A2, b2, diag, active, boxes, rows, P
                     ) -> tuple[np.ndarray, np.ndarray, float]:
        """The damped step that fits the trust radius, ``(dX, dp, size)``
        (:func:`~picard_casadi.methods.fitted_step.fitted_step`); ``self.mu``,
        the regularisation of the Gauss-Newton step, is left alone."""

        def solve(mu: float) -> tuple[np.ndarray, np.ndarray, float]:
            theta = self._bounded_step(A2, b2, mu * diag, active, boxes)
            dX, dp = rows.starts(theta), P @ theta
            return dX, dp, step_size(dX, dp)

        best, self._fit_mu = fitted_step(solve, self.radius, max(self.mu, 1e-12), self._fit_mu)
        return best

    def _tried(self, Xn, pn, U_start, merit: float, predicted: float, correct
               ) -> tuple[np.ndarray, np.ndarray, float, float, int]:
        """Evaluate the trial ``(Xn, pn)`` (scaled) from the node values ``U_start``,
        with second-order corrections ``correct(Xn, pn, U, gaps)`` while its
        merit ratio is below ``SOC_RATIO`` (at most ``SOC_ROUNDS``, each from
        the point the last one gave, while each lowers the merit).  Returns
        ``(Xn, U, merit, ratio, evaluations)`` of the best point."""
        Xp, pp = self.setup.from_scaled(Xn, pn)
        U_new, merit_new, c_new, evals = self._trial(Xp, U_start, pp)
        ratio = (merit - merit_new) / predicted
        for _ in range(SOC_ROUNDS):
            if not (np.isfinite(merit_new) and ratio < SOC_RATIO and np.any(c_new)):
                break
            # the gaps' curvature spoilt the step (Maratos effect): close the
            # new gaps along the old linearisation and keep the better point
            corrected = correct(Xn, pn, U_new, c_new)
            if corrected is None:
                break
            evals += corrected[4]
            if not corrected[2] < merit_new:
                break
            Xn, U_new, merit_new, c_new = corrected[:4]
            ratio = (merit - merit_new) / predicted
        return Xn, U_new, merit_new, ratio, evals

    def _trial(self, Xp, U_start, pp) -> tuple[np.ndarray, float, np.ndarray, int]:
        """A trial point (unscaled) settled from ``U_start``: ``(U, merit, scaled
        gaps, evaluations)``.

        A trial whose fixed point was not found is not evaluated (merit
        ``inf``): its merit would be that of a discontinuous U, and once
        accepted the next linearisation (which assumes a fixed point) would
        not fit.
        """
        U_new, res, sweeps = self.setup.tr.settle(Xp, U_start, pp, tol=TRIAL_FIXED_POINT_TOL)
        self._trials_since_step += 1
        if not res <= TRIAL_ACCEPT_FIXED_POINT:
            self._unsettled_trials += 1
            self._unsettled_residual = float(res)
            return U_new, np.inf, np.zeros(0), sweeps + 1
        self._unsettled_trials = 0
        data_new, c_new = self._merit_parts(Xp, U_new, pp)
        return (U_new, data_new + 0.5 * self.rho * float(np.sum(c_new * c_new)), c_new,
                sweeps + 1)

    def _judge(self, ratio: float, predicted: float, merit: float, merit_new: float,
               zero: float, alpha: float, step: float, fitted: bool = False) -> bool:
        """Accept or reject a trial on its merit ratio, and move the trust region
        and the damping accordingly; choose whether the next trial the radius
        would cut is fitted to it (``fitted``: this one was, :meth:`_fitted_step`).
        Returns whether it is accepted."""
        # a gain within a few round-offs of the merit says nothing about the
        # model: such a step is kept if it does not raise the merit, and the
        # radius is left alone (shrinking it on noise cost fa18-roll-rud ten
        # iterations of doubling it back)
        in_noise = predicted <= NOISE_GAIN * max(merit, zero)
        if in_noise and np.isfinite(merit_new) and merit_new <= merit:
            ratio = max(ratio, 1e-3)
        if np.isfinite(merit_new) and ratio > 1e-4:
            # a fitted step that the model describes keeps the steps fitted; a
            # cut step it describes only half hands over to them
            self._fit_next = (ratio >= FITTED_STEP_RATIO if fitted
                              else alpha < 1.0 and ratio < FITTED_STEP_RATIO)
            # (a fitted step lies at the radius, within fitted_step.FITTED_STEP_FILL)
            if ratio > 0.75 and (alpha < 1.0 or fitted):
                self.radius = min(2.0 * self.radius, 1e6)
            elif ratio < 0.25 and not in_noise:
                self.radius = max(0.25 * min(self.radius, step), 1e-12)
            # regularisation only: dropped fast while the model predicts well
            # (divided by 3, a 1e-3 damping shortened steps along a flat
            # direction for ten iterations on fa18-roll-rud)
            self.mu = max(self.mu / 10.0, 1e-12) if ratio > 0.75 else self.mu
            return True
        # rejected: shrink the trust region; regularise a little more
        self._fit_next = False
        self.radius = max(0.25 * min(self.radius, step), 1e-12)
        self.mu = min(self.mu * 2.0, 1e6)
        return False

    def _without_step(self, Xs, ps, merit: float, gnorm: float, evals: int, full_pred: float,
                      zero: float, optimality: float, gap: float = np.inf) -> StepInfo:
        """The iteration's outcome when no trial was accepted (``gap``: the largest
        scaled continuity gap)."""
        if self.radius > 1e-10:  # the trust region has room to shrink further
            return StepInfo(Xs, ps, merit, merit, gnorm, 0.0, False, evals, self.mu,
                            optimality=optimality)
        exact = merit <= EXACT_FIT * zero / ZERO_MERIT  # zero: ZERO_MERIT of the data's merit
        at_floor = gap <= GAP_FLOOR_MAX and full_pred <= FLOOR_GAIN * max(merit, zero)
        # no trial since the last step was settled (its fixed point not found)
        none_settled = 0 < self._trials_since_step == self._unsettled_trials
        if none_settled and not np.isfinite(self._unsettled_residual):
            # no trial could be evaluated at all, however short its step: not a
            # gain below the evaluations' accuracy (the precision test below,
            # its prediction shrunk by the damping the rejections raised),
            # but an iterate at the edge of the model's domain (PEtab's
            # Elowitz from uniform 15, seed 0: a protein's node at zero under
            # a Hill exponent of 0.82, every trial down to 1e-10 not finite,
            # ended "converged" at nllh 30.62 with the ODE's gradient 120 per
            # decade of a parameter)
            return StepInfo(Xs, ps, merit, merit, gnorm, 0.0, False, evals, self.mu,
                            failed=True, optimality=optimality, message=(
                                "no acceptable step: the model is not finite at any of the "
                                f"{self._unsettled_trials} trial points since the last step, "
                                "however close to the iterate (a state at the edge of the "
                                "model's domain: a negative amount under a fractional power "
                                "or a logarithm, say) -- start from another p0, or use "
                                "method='single-shooting' (CVODES shortens its steps there)"))
        if exact or optimality <= NO_GAIN_COSINE and (
                full_pred <= COLLAPSE_PRECISION * max(merit, zero) or at_floor):
            # what is left to gain is below the accuracy of the evaluations (an
            # exact fit's residual is round-off, its cosine with the Jacobian
            # meaningless; elsewhere the undamped model must agree: the
            # damping the rejections raised shrinks full_pred at any iterate)
            self.radius = self.radius0
            return StepInfo(Xs, ps, merit, merit, gnorm, 0.0, False, evals, self.mu,
                            precision_reached=True, optimality=0.0 if exact else optimality)
        if self._largest_sensitivity > UNSTABLE_SENSITIVITY:
            # the same breakdown as _check_stuck's, met through the trust region
            # (a CSTR on T = 0.05: sensitivities of 7e12)
            return StepInfo(Xs, ps, merit, merit, gnorm, 0.0, False, evals, self.mu,
                            failed=True, optimality=optimality, message=(
                                "no acceptable step: the trust region collapsed ("
                                + self._unstable_detail(Xs, ps)))
        if none_settled:
            # not the model: no trial could be evaluated, however short its
            # step (PEtab's Crauste from random rates: residuals of 11 to 47
            # state scales on every trial down to 1e-10 from the iterate)
            return StepInfo(Xs, ps, merit, merit, gnorm, 0.0, False, evals, self.mu,
                            failed=True, optimality=optimality, message=(
                                "no acceptable step: the solution on the intervals (the "
                                "fixed point of the Picard map) was not found at any of the "
                                f"{self._unsettled_trials} trial points since the last step, "
                                "however close to the iterate (the last one's fixed-point "
                                f"residual {self._unsettled_residual:.2g} of the states' "
                                "scales): the "
                                "intervals are too long for the dynamics there -- shorten "
                                "them (T, n), start from a better p0, or use "
                                "method='single-shooting'"))
        xl, xu, _, _ = self.setup.scaled_bounds
        advice = ("a state bound may block every descent direction -- widen "
                  "x0_bounds, or start from a better p0" if np.any(np.isfinite(xl))
                  or np.any(np.isfinite(xu)) else "start from a better p0, or try "
                  "multistart")
        return StepInfo(Xs, ps, merit, merit, gnorm, 0.0, False, evals, self.mu,
                        failed=True, optimality=optimality, message=(
                            "no acceptable step: the trust region collapsed (the "
                            "linear model does not describe the problem near this "
                            f"point; {advice})"))
