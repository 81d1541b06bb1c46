"""``method="single-shooting"``: CVODES single shooting, a bounded Levenberg-Marquardt loop.

The field's reference route (AMICI with fides or pyPESTO's least squares):
the unknowns are the parameters and each experiment's free initial states
only; every experiment is integrated from its initial state by CVODES with
error control, in one run where its inputs are constant
(:func:`~picard_casadi.transcription.interval_integration.chained_interval_states`),
and the residuals' Jacobian comes from the states' forward sensitivities,
integrated as states beside them
(:mod:`~picard_casadi.transcription.forward_sensitivity`).  The step minimises the Gauss-Newton model with a
Levenberg-Marquardt damping within the box (the bounds of ``p`` and of the
initial states, :func:`~picard_casadi.methods.least_squares.bounded_least_squares`),
its length held to :data:`MAX_STEP` scaled units; the damping follows
Nielsen's rule (shrunk after a step the model predicted well, doubled,
then quadrupled and so on after a rejected one).  It stops where no step
can be judged any more: the trial steps' predicted gains below the
objective's accuracy, with the Gauss-Newton step predicting at most
:data:`ACCURACY_GAIN` times that.  The accuracy is the round-off CVODES'
tolerance promises, or more where measured: a trial integrated without
sensitivities is judged against the iterate's objective integrated the same
way (CVODES' steps, and so the objective, differ with the sensitivities in
its error control), the two objectives' difference is a measure of the
accuracy, and so is a trial's difference where its step's predicted gain is
below the accuracy.

Where it helps: far from the data, at a start whose trajectory no fixed mesh
resolves (PEtab's Crauste from random rates, 1e-5 to 1e3 on a log10 scale,
a pathogen growing by e^130 on one interval), the collocation's fixed points
are not found at the trial steps and ``picard-gn`` crawls or fails, while
CVODES follows any trajectory with its own steps.  The price: one
sensitivity integration of every experiment per iteration, and the
instability of single shooting along a trajectory that diverges (the
Picard methods keep every interval start an unknown).  The default path
runs it where ``picard-gn``'s step failed, and before multiple shooting
after any other failure (:mod:`picard_casadi.estimation.fallbacks`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import casadi as ca
import numpy as np

from ..runtime.interrupts import interruptible, reraise_if_interrupted
from ..runtime.native_output import captured_native_output
from ..transcription.discretisation import to_map_layout
from ..transcription.forward_sensitivity import (chained_output_sensitivities,
                                                 initial_sensitivities)
from ..transcription.interval_integration import chained_interval_states
from ..transcription.problem_size import MEMORY_BUDGET_BYTES, human_size
from .base import (IterationRecord, LoopOutcome, Setup, require_nonnegative_int, require_positive,
                   require_positive_int)
from .least_squares import bounded_least_squares
from .registry import MethodSpec, register

__all__ = ["SingleShootingOptions", "solve_single_shooting", "MAX_STEP", "ACCURACY_RTOL",
           "ACCURACY_GAIN", "CREEP_RATIO", "creeping"]

#: the longest step, in scaled units (a decade of a log-scale parameter, a
#: state's scale): the Gauss-Newton model of an integrated trajectory rarely
#: holds further, and a trial beyond it is an integration wasted
MAX_STEP = 2.0

#: the damping beyond which no step is tried: the model predicts nothing there
MAX_DAMPING = 1e16

#: CVODES' global error in the outputs, in units of its ``rtol`` (the local
#: error control lets the global error grow beyond ``rtol``): the objective's
#: round-off is taken as this many times ``rtol |r| |W y|``
ACCURACY_RTOL = 10.0

#: converged where the trial steps' predicted gains are below the objective's
#: accuracy and the Gauss-Newton step predicts at most this many times it
ACCURACY_GAIN = 100.0


@dataclass
class SingleShootingOptions:
    """Options of ``method="single-shooting"``.

    Attributes
    ----------
    max_iter : int
        Iteration limit (each iteration one sensitivity integration; rejected
        trials cost one integration without sensitivities).
    ftol : float
        Converged where an accepted step lowers the objective by less than
        ``ftol`` times it ...
    gtol : float
        ... or where the projected scaled gradient is below ``gtol`` times
        the objective.
    xtol : float
        ... or where the step is shorter than ``xtol`` (scaled, inf-norm).
    rtol, atol : float
        CVODES tolerances of the residuals: every objective the loop
        compares, and the trajectory returned.
    sensitivity_rtol : float or None
        CVODES' ``rtol`` of the integration with the sensitivities while the
        loop searches (``atol`` scaled with it), which then gives the
        Jacobian only: the residuals, and so every objective the loop
        compares, are integrated at ``rtol`` without the sensitivities.
        Where the loop would stop, a trial whose predicted gain is below the
        objective's accuracy fails, or the damping reaches its limit, the
        Jacobian comes from ``rtol`` from then on.  ``None`` (the default):
        ``rtol`` throughout.  An option to try, not the default: PEtab's
        Elowitz from uniform start 17 (seed 0) at 1e-8 took 11-13 CPU s
        to the same optimum as 109 s at ``rtol`` (the sensitivities' steps
        grow fast with the tolerance), but from the last iterate of
        Fujita's ``picard-gn`` run it walked elsewhere and ended
        ``step_failed`` (docs/performance.md).
    max_steps : int
        CVODES step limit between outputs.
    progress_window : int
        Iterations over which the objective must fall by ``progress_tol``
        (relative), or by a tenth of what one Gauss-Newton step from the
        last iterate predicts (:func:`creeping`), checked from iteration
        ``progress_window`` on; else the run ends ``"stalled"``.  0 never
        checks.  A run that creeps along a
        valley its steps cannot shorten (a Duffing record in mm against a
        model in m: 1000 iterations, 633 s, the objective 2.87604 ->
        2.87563) ends after a window.
    progress_tol : float
    damping : float
        Initial Levenberg-Marquardt damping, relative to the largest diagonal
        entry of ``J^T J`` (the damping is the same in every scaled unknown:
        Marquardt's scaling by the diagonal, tried, took PEtab's Elowitz from
        uniform start 0 from 44 iterations to 500).
    print_level : int
        1 prints one line per iteration.
    lam : float
        Accepted for a uniform call signature; unused.
    ipopt_options : dict, optional
        Accepted for a uniform call signature (the default path passes
        IPOPT's budget options to every fallback); unused.
    """

    max_iter: int = 1000
    ftol: float = 1e-10
    gtol: float = 1e-8
    xtol: float = 1e-10
    rtol: float = 1e-10
    atol: float = 1e-10
    sensitivity_rtol: float | None = None
    max_steps: int = 20000
    progress_window: int = 100
    progress_tol: float = 1e-3
    damping: float = 1e-3
    print_level: int = 0
    lam: float = 0.0
    ipopt_options: dict[str, Any] | None = field(default=None)
    #: the functions are built for the CVODES tolerances: re-weighting keeps them
    tolerance_fixed_at_build: ClassVar[bool] = True

    def validate(self) -> None:
        """Raise ValueError/TypeError naming a bad option."""
        require_positive_int("max_iter", self.max_iter)
        for name in ("ftol", "gtol", "xtol", "rtol", "atol", "damping"):
            require_positive(name, getattr(self, name))
        require_positive_int("max_steps", self.max_steps)
        require_nonnegative_int("progress_window", self.progress_window)
        require_positive("progress_tol", self.progress_tol)
        require_nonnegative_int("print_level", self.print_level)
        if self.sensitivity_rtol is not None:
            require_positive("sensitivity_rtol", self.sensitivity_rtol)

    def sensitivity_tolerances(self) -> tuple[float, float]:
        """CVODES' ``(rtol, atol)`` of the integration with the sensitivities."""
        if self.sensitivity_rtol is None:
            return float(self.rtol), float(self.atol)
        factor = float(self.sensitivity_rtol) / float(self.rtol)
        return float(self.sensitivity_rtol), float(self.atol) * factor


class SingleShootingModel:
    """The residuals of a :class:`Setup` as functions of ``w = (p / p_scale,
    X0 / x_scale)`` (every experiment's initial state), by single shooting.

    The residuals' Jacobian comes from the states' forward sensitivities
    integrated as states of one larger ODE beside them
    (:func:`~picard_casadi.transcription.forward_sensitivity.sensitivity_model`,
    with columns for the parameters and the initial states some experiment
    estimates), as AMICI integrates them: on PEtab's Crauste 14 times faster
    than CasADi's derivative of the chain of CVODES calls (0.022 against
    0.31 s, docs/performance.md).
    """

    def __init__(self, setup: Setup, opts: SingleShootingOptions) -> None:
        disc = setup.disc
        m = disc.model
        J, M, nx, np_ = disc.n_intervals, disc.M, m.nx, m.np
        E = len(disc.intervals_of)
        self.setup, self.nx, self.np, self.E = setup, nx, np_, E
        chain = chained_interval_states(disc, opts.rtol, opts.atol, opts.max_steps)
        xs, ps = ca.DM(setup.x_scale), ca.DM(setup.p_scale)
        w = ca.MX.sym("w", np_ + E * nx)
        Wt = ca.MX.sym("Wt", m.ny, M * J)
        Y = ca.MX.sym("Y", m.ny, M * J)
        p = w[:np_] * ps
        X0 = ca.reshape(w[np_:], nx, E) * ca.repmat(xs, 1, E)
        Xs, xend, X = chain(X0, p)
        c = setup.tr._data_common
        G = m.g.map(M * J)(c["ts"], Xs, ca.repmat(p, 1, M * J), c["Ws"])
        r = ca.vec(Wt * (Y - G))
        self.residuals = ca.Function("single_shooting_residuals", [w, Wt, Y], [r])
        self.trajectory = ca.Function("single_shooting_trajectory", [w], [G, xend, X])
        self.firsts = [sl.start for sl in disc.intervals_of]
        self.free = np.concatenate([setup.free_p, setup.free_x[self.firsts].ravel()])
        # the sensitivities: the states' and those of every initial state some
        # experiment estimates, through the same chain of CVODES runs; built
        # per tolerance when first needed (the search's, then the answer's)
        self.x0_columns = tuple(int(i) for i in np.flatnonzero(setup.free_x[self.firsts].any(0)))
        self._opts, self._w, self._p = opts, w, p
        self._sensitivities: dict[tuple[float, float], ca.Function] = {}
        self.exact_tolerances = (float(opts.rtol), float(opts.atol))
        #: whether the search's Jacobian is integrated at the answer's tolerance already
        self.search_is_exact = opts.sensitivity_tolerances() == self.exact_tolerances
        self.S0 = initial_sensitivities(m, self.x0_columns)
        self.slot_experiment = np.repeat(disc.exp_of, M)

    def sensitivities(self, exact: bool) -> ca.Function:
        """``(w, Z0) -> (G, dG)``: the outputs and their sensitivities at every
        sample slot, integrated at the answer's tolerance (``exact``) or the
        search's (:meth:`SingleShootingOptions.sensitivity_tolerances`)."""
        opts = self._opts
        tolerances = self.exact_tolerances if exact else opts.sensitivity_tolerances()
        if tolerances not in self._sensitivities:
            disc = self.setup.disc
            c = self.setup.tr._data_common
            outputs = chained_output_sensitivities(disc, c["ts"], c["Ws"], *tolerances,
                                                   opts.max_steps, self.x0_columns)
            Z0 = ca.MX.sym("Z0", outputs.size1_in(0), self.E)
            self._sensitivities[tolerances] = ca.Function(
                "single_shooting_sensitivities", [self._w, Z0], outputs(Z0, self._p))
        return self._sensitivities[tolerances]

    def jacobian(self, w: np.ndarray, Wt: np.ndarray, Y: np.ndarray, exact: bool = True
                 ) -> tuple[np.ndarray, np.ndarray]:
        """``(r, dr/dw)`` at ``w``: the outputs and their sensitivities at every
        sample slot (one integration of the sensitivity model), then the chain
        rule through the weights and the scaling; the residuals from an
        integration of the states alone at ``rtol`` where the sensitivities
        are integrated at the search's tolerance (not ``exact``,
        :attr:`SingleShootingOptions.sensitivity_rtol`), so that every
        objective the loop compares is integrated alike.

        Parameters
        ----------
        w : ndarray
            ``(p / p_scale, X0 / x_scale)``.
        Wt, Y : ndarray
            The weights and data in the functions' layout (:meth:`data`).
        exact : bool
            The sensitivities at the answer's tolerance, or the search's.

        Returns
        -------
        r : ndarray (ny M J,)
        dr_dw : ndarray (ny M J, w.size)
            Zero in the columns of the known initial states.

        Raises
        ------
        RuntimeError
            Where CVODES fails.
        """
        s, nx, np_, E = self.setup, self.nx, self.np, self.E
        X0 = w[np_:].reshape(E, nx) * s.x_scale
        Z0 = np.column_stack([np.r_[X0[e], self.S0] for e in range(E)])
        separate = not (exact or self.search_is_exact)
        r = np.asarray(self.residuals(w, Wt, Y)).ravel() if separate else None
        G, dG = (np.asarray(v) for v in self.sensitivities(exact)(w, Z0))
        ny, slots = G.shape
        nc = np_ + len(self.x0_columns)
        if r is None:
            r = (Wt * (Y - G)).ravel(order="F")
        dG = dG.reshape(ny, slots, nc).transpose(1, 0, 2) * (-Wt.T)[:, :, None]  # (slot, ny, nc)
        Jm = np.zeros((slots, ny, np_ + E * nx))
        Jm[:, :, :np_] = dG[:, :, :np_] * s.p_scale
        cols = np.asarray(self.x0_columns, int)
        if cols.size:
            scaled = dG[:, :, np_:] * s.x_scale[cols]
            for e in range(E):
                rows = np.flatnonzero(self.slot_experiment == e)
                Jm[np.ix_(rows, np.arange(ny), np_ + e * nx + cols)] = scaled[rows]
        return r, Jm.reshape(slots * ny, -1)

    def start(self) -> np.ndarray:
        """The setup's start (read at each solve: a re-weighting round starts
        where the last ended) and the box ``(w0, lbw, ubw)``; fixed entries
        are pinned at the start."""
        s, firsts = self.setup, self.firsts
        xl, xu, pl, pu = s.scaled_bounds
        w0 = np.concatenate([s.p0 / s.p_scale, (s.X0[firsts] / s.x_scale).ravel()])
        self.lbw = np.where(self.free, np.concatenate([pl, xl[firsts].ravel()]), w0)
        self.ubw = np.where(self.free, np.concatenate([pu, xu[firsts].ravel()]), w0)
        return np.clip(w0, self.lbw, self.ubw)

    def data(self) -> tuple[np.ndarray, np.ndarray]:
        """The weights and data in the functions' layout (the weights move between rounds)."""
        return to_map_layout(self.setup.tr._Wt), to_map_layout(self.setup.disc.y)

    def evaluate(self, w: np.ndarray, with_jacobian: bool, exact: bool = True
                 ) -> tuple[np.ndarray, np.ndarray | None] | None:
        """``(r, dr/dw)`` at ``w`` (``None`` for the Jacobian unless asked; its
        sensitivities at the answer's tolerance where ``exact``, else the
        search's), or None where CVODES fails or a residual is not finite."""
        Wt, Y = self.data()
        try:
            with interruptible(), captured_native_output() as printed:
                if with_jacobian:
                    r, Jm = self.jacobian(w, Wt, Y, exact)
                else:
                    r, Jm = self.residuals(w, Wt, Y), None
        except RuntimeError as err:
            reraise_if_interrupted(err, printed[0] if printed else "")
            return None
        r = np.asarray(r).ravel()
        if not np.all(np.isfinite(r)) or (Jm is not None and not np.all(np.isfinite(Jm))):
            return None
        return r, Jm


def _step(Jm: np.ndarray, r: np.ndarray, mu: float, model: SingleShootingModel,
          w: np.ndarray) -> np.ndarray:
    """The damped Gauss-Newton step within the box, at most :data:`MAX_STEP` long."""
    n = w.size
    free = model.free
    s = bounded_least_squares(Jm, r, np.full(n, mu), free, np.eye(n), w,
                              model.lbw, model.ubw)
    s = np.where(free, s, 0.0)
    longest = float(np.abs(s).max(initial=0.0))
    if longest > MAX_STEP:  # the box is convex and holds 0 and s: s shortened stays in it
        s *= MAX_STEP / longest
    return s


def _half_squares(r: np.ndarray) -> float:
    """``|r|^2 / 2``, ``inf`` without a warning where a trial's residuals,
    finite each, overflow in the sum (the trial is rejected)."""
    with np.errstate(over="ignore"):
        return 0.5 * float(r @ r)


def _largest_column(Jm: np.ndarray) -> float:
    """The largest diagonal entry of ``J^T J`` (the damping's unit)."""
    return max(float(np.max(np.sum(Jm ** 2, axis=0), initial=0.0)), 1e-300)


def _gauss_newton_gain(Jm: np.ndarray, r: np.ndarray, model: SingleShootingModel,
                       w: np.ndarray) -> float:
    """The reduction the (barely damped) Gauss-Newton step within the box predicts."""
    s = _step(Jm, r, 1e-12 * _largest_column(Jm), model, w)
    return 0.5 * float(r @ r) - 0.5 * float(np.sum((r + Jm @ s) ** 2))


def _objective_accuracy(model: SingleShootingModel, r: np.ndarray, rtol: float) -> float:
    """How far apart two evaluations of the objective near ``r`` can be by the
    integration's error alone: the outputs off by ``ACCURACY_RTOL * rtol`` of
    the data's size, ``|r| |W y| ACCURACY_RTOL rtol``."""
    Wt, Y = model.data()
    scale = float(np.linalg.norm(np.nan_to_num(Wt * Y)))
    return float(np.linalg.norm(r)) * scale * ACCURACY_RTOL * rtol


def _projected_gradient(model: SingleShootingModel, w: np.ndarray, g: np.ndarray) -> float:
    d = np.where(model.free, w - np.clip(w - g, model.lbw, model.ubw), 0.0)
    return float(np.abs(d).max(initial=0.0))


def solve_single_shooting(setup: Setup, opts: SingleShootingOptions, callback=None
                          ) -> LoopOutcome:
    """Build (once per setup) the single-shooting residuals and minimise them."""
    key = ("single-shooting", opts.rtol, opts.atol, opts.sensitivity_rtol, opts.max_steps)
    t_build = time.perf_counter()
    if key not in setup.cache:
        setup.cache[key] = SingleShootingModel(setup, opts)
        setup.timings["build"] = setup.timings.get("build", 0.0) + time.perf_counter() - t_build
    model = setup.cache[key]
    t0 = time.perf_counter()
    w = model.start()
    history: list[IterationRecord] = []
    status, message = "max_iter", (f"single shooting stopped at its iteration limit "
                                   f"(max_iter={opts.max_iter})")
    success = False
    if not np.any(model.free):
        # nothing to estimate (every parameter and initial state fixed: the
        # likelihood at given values): one integration, no sensitivities
        if model.evaluate(w, False) is None:
            return _outcome(setup, model, w, 0, False, "step_failed",
                            "single shooting stopped: CVODES failed at the start (the solution "
                            "blows up there or needs more steps, max_steps)", history)
        return _outcome(setup, model, w, 0, True, "converged",
                        "single shooting: nothing to estimate (every parameter and initial "
                        "state is fixed)", history)
    disc = setup.disc
    need = 8.0 * disc.M * disc.n_intervals * disc.model.ny * w.size
    if need > MEMORY_BUDGET_BYTES:
        # the Jacobian is dense in every experiment's initial states, known
        # ones too (PEtab's Alkan, 73 experiments: 13.7 GB, a MemoryError)
        return _outcome(setup, model, w, 0, False, "step_failed",
                        f"single shooting not run: its Jacobian ({disc.M * disc.n_intervals} "
                        f"sample slots x {disc.model.ny} outputs x {w.size} columns, a column "
                        f"for each initial state of each of the {model.E} experiments) would "
                        f"need {human_size(need)}, more than the "
                        f"{human_size(MEMORY_BUDGET_BYTES)} budget", history)
    # the Jacobian from the search's sensitivities until the loop would stop
    # or its trials keep failing, then from the answer's (exact)
    exact = model.search_is_exact
    evaluated = model.evaluate(w, True, exact)
    if evaluated is None and not exact:
        exact = True
        evaluated = model.evaluate(w, True, exact)
    if evaluated is None:
        return _outcome(setup, model, w, 0, False, "step_failed",
                        "single shooting stopped: CVODES failed at the start (the solution "
                        "blows up there or needs more steps, max_steps) -- bound p (p_bounds) "
                        "and the states (x0_bounds) or start from a better p0", history)
    r, Jm = evaluated
    f = 0.5 * float(r @ r)
    accuracy = _objective_accuracy(model, r, opts.rtol)
    mu = opts.damping * _largest_column(Jm)
    nu = 2.0
    iteration = 0
    last_accepted = True
    evaluations = 1
    f_plain = None  # the objective at w integrated without sensitivities, once needed

    def made_exact() -> bool:
        """The Jacobian at w from the answer's sensitivities, where it was the
        search's (True: the loop goes on with it instead of stopping)."""
        nonlocal exact, r, Jm, f, f_plain, accuracy, evaluations
        if exact:
            return False
        exact = True
        again = model.evaluate(w, True, True)
        evaluations += 1
        if again is not None:
            # the residuals now come with the sensitivities, as the trials'
            r, Jm = again
            f, f_plain = 0.5 * float(r @ r), None
            accuracy = _objective_accuracy(model, r, opts.rtol)
        return True

    for iteration in range(opts.max_iter):
        g = Jm.T @ r
        pg = _projected_gradient(model, w, g)
        if pg <= opts.gtol * max(f, 1e-300) and made_exact():
            g = Jm.T @ r
            pg = _projected_gradient(model, w, g)
        if pg <= opts.gtol * max(f, 1e-300):
            status, message, success = "converged", "single shooting converged (gradient)", True
            break
        s = _step(Jm, r, mu, model, w)
        predicted = f - 0.5 * float(np.sum((r + Jm @ s) ** 2))
        step = float(np.abs(s).max(initial=0.0))
        # after an accepted step the next is likely accepted too: its
        # sensitivities come with the trial (one integration, not two)
        trial = model.evaluate(w + s, last_accepted, exact)
        evaluations += 1
        f_new = _half_squares(trial[0]) if trial is not None else np.inf
        ratio = (f - f_new) / predicted if predicted > 0 else -np.inf
        accepted = ratio > 1e-4
        base = f  # the objective at w the trial is judged against
        if not accepted and trial is not None and trial[1] is None and predicted > 0:
            # a trial without sensitivities is judged against the objective
            # integrated the same way: CVODES' steps differ with the
            # sensitivities in its error control, and so does the objective
            # (PEtab's Fujita from its nominal vector: by 1.3e-5 at 7.92,
            # 150 times the accuracy rtol promises, so every short step
            # failed and the damping grew to its limit)
            if f_plain is None and not exact:
                f_plain = f  # f is integrated without the sensitivities already
            elif f_plain is None:
                plain = model.evaluate(w, False)
                evaluations += 1
                f_plain = _half_squares(plain[0]) if plain is not None else f
                accuracy = max(accuracy, abs(f_plain - f))
            base = f_plain
            ratio = (base - f_new) / predicted
            accepted = ratio > 1e-4
            if not accepted and predicted <= accuracy and not made_exact():
                # a step whose effect the model puts below the accuracy: what
                # the trial's objective differs by is the integration's noise
                # (Fujita from picard-gn's last iterate: 4.5e-5 at a step of
                # 5e-13 in the scaled parameters); in the search, where the
                # Jacobian's own error may be the cause, the Jacobian comes
                # from rtol first
                accuracy = max(accuracy, abs(f_plain - f_new) - predicted)
        full = trial
        if accepted and trial[1] is None:
            full = model.evaluate(w + s, True, exact)
            evaluations += 1
            accepted = full is not None
        last_accepted = accepted
        if accepted:
            w = w + s
            r, Jm = full
            f_plain = None
            gain = base - f_new
            f = 0.5 * float(r @ r)
            accuracy = _objective_accuracy(model, r, opts.rtol)
            mu *= max(1.0 / 3.0, 1.0 - (2.0 * ratio - 1.0) ** 3)
            nu = 2.0
        else:
            mu *= nu
            nu *= 2.0
        record = IterationRecord(iteration=iteration, objective=f, misfit=float("nan"),
                                 grad_norm=pg, step_norm=step if accepted else 0.0, gap=0.0,
                                 gap_scaled=0.0, fixed_point=float("nan"), lam=0.0, control=mu,
                                 time=time.perf_counter() - t0,
                                 p=[float(v) for v in w[:model.np] * setup.p_scale])
        history.append(record)
        if opts.print_level:
            print(f"{iteration:5d} f {f:.8e} |g| {pg:.2e} step {step:.2e} ratio {ratio:.3f} "
                  f"mu {mu:.2e}{'' if accepted else ' rejected'}", flush=True)
        if callback is not None and callback(record) is True:  # as every method's
            status, message = "stopped", "stopped by the callback"
            break
        if accepted and (gain <= opts.ftol * max(f, 1e-300) or step <= opts.xtol):
            # a short step of a large damping gains little too: converged only
            # where the Gauss-Newton step itself predicts no more (PEtab's
            # Crauste from uniform start 3 stopped after one step, 24 above
            # the optimum its next steps reached); else the damping drops
            if _gauss_newton_gain(Jm, r, model, w) <= 10.0 * opts.ftol * max(f, 1e-300):
                if not made_exact():
                    status, success = "converged", True
                    message = ("single shooting converged ("
                               + ("objective" if gain <= opts.ftol * max(f, 1e-300) else "step")
                               + ")")
                    break
            else:
                mu *= 1e-3
        if (not accepted and predicted <= accuracy
                and _gauss_newton_gain(Jm, r, model, w) <= ACCURACY_GAIN * accuracy
                and not made_exact()):
            # no trial can be judged any more: the steps' predicted gains are
            # below what CVODES' tolerance lets the objective tell apart, and
            # what the Gauss-Newton model predicts beyond the iterate is
            # within ACCURACY_GAIN of it (PEtab's Crauste from uniform start
            # 3 at 291.7270, 9e-8 of the objective left along a curved valley
            # no short step follows, and each step below 3e-9 is noise)
            status, success = "converged", True
            message = "single shooting converged (the objective within the integration's accuracy)"
            break
        if mu > MAX_DAMPING and made_exact():
            # the search's sensitivities no longer point downhill on the
            # objective integrated at rtol: on with the answer's, the damping
            # started anew
            mu, nu = opts.damping * _largest_column(Jm), 2.0
        if mu > MAX_DAMPING:
            status = "step_failed"
            message = ("single shooting stopped: no acceptable step (the damping grew to "
                       f"{mu:.1e}: the Gauss-Newton model does not describe the problem near "
                       "this point, or CVODES fails at every trial point)")
            break
        # (after the convergence tests: a run converging at this iteration has
        # gained little over the window's last stretch too)
        window = int(opts.progress_window)
        if window and len(history) > window:
            before = history[-1 - window].objective
            fallen = (before - f) / max(abs(before), 1e-300)
            predicted_gain = (_gauss_newton_gain(Jm, r, model, w) / max(abs(f), 1e-300)
                              if fallen < opts.progress_tol else 0.0)
            if creeping(fallen, predicted_gain, opts.progress_tol):
                status = "stalled"
                message = (f"single shooting stopped: no progress: the objective fell by "
                           f"{max(fallen, 0.0):.2g} (relative) over the last {window} "
                           f"iterations, less than progress_tol={opts.progress_tol:g}, where one "
                           f"Gauss-Newton step predicts {predicted_gain:.2g}: its steps "
                           "creep along a valley the linearisation does not describe "
                           "(parameters heading for a bound or for infinity), or the model "
                           "cannot reach the data (their units?); progress_window=0 iterates "
                           "on")
                break
    else:
        iteration = opts.max_iter
    return _outcome(setup, model, w, iteration + (1 if status != "max_iter" else 0), success,
                    status, message, history, evaluations)


#: a run creeps where one Gauss-Newton step from its iterate predicts this many
#: times what its last ``progress_window`` iterations gained
CREEP_RATIO = 10.0


def creeping(fallen: float, predicted: float, tol: float) -> bool:
    """Whether a run whose objective fell by ``fallen`` (relative) over its
    window, where one Gauss-Newton step predicts ``predicted`` (relative),
    creeps: less than ``tol`` gained, and :data:`CREEP_RATIO` times less
    than the step predicts.  A Duffing record in mm: 2.3e-5 gained over 100
    iterations against 8.3e-4 predicted (1000 iterations, 633 s, to nothing).
    A run converging slowly gains more than one step predicts (PEtab's
    Crauste from uniform 2: 6.2e-4 against 1e-4, converged 45 iterations
    later), or about as much (the Duffing record's 400 samples alone:
    9.7e-4 against 1.5e-3, converged 23 iterations later); one at its
    optimum predicts nothing (Elowitz from uniform 1: 2e-8)."""
    return fallen < tol and predicted > CREEP_RATIO * max(fallen, 0.0)


def _outcome(setup: Setup, model: SingleShootingModel, w: np.ndarray, iterations: int,
             success: bool, status: str, message: str, history: list[IterationRecord],
             evaluations: int = 1) -> LoopOutcome:
    """The outcome at ``w``: the chained trajectory's interval starts and nodes."""
    disc = setup.disc
    p = w[:model.np] * setup.p_scale
    own = None
    try:
        with captured_native_output():
            G, xend, X = (np.asarray(v) for v in model.trajectory(w))
        X = X.T
        J, M, ny = disc.n_intervals, disc.M, disc.model.ny
        own = (G.T.reshape(J, M, ny).transpose(0, 2, 1), xend.T)
    except RuntimeError as err:
        reraise_if_interrupted(err)
        X = setup.X0.copy()
        X[model.firsts] = w[model.np:].reshape(model.E, model.nx) * setup.x_scale
        success, status = False, "step_failed" if status == "converged" else status
    U, _, _ = setup.tr.settle(X, np.repeat(X[:, :, None], disc.K, axis=2), p, tol=1e-12,
                              max_sweeps=200)
    return LoopOutcome(X=X, U=U, p=p, V=np.zeros_like(X), lam=0.0, iterations=iterations,
                       success=success, status="converged" if success else status,
                       message=message, history=history, evaluations=evaluations,
                       trajectory=own)


register(MethodSpec(
    "single-shooting", SingleShootingOptions, solve_single_shooting,
    "CVODES single shooting by a bounded Levenberg-Marquardt loop (the field's route)",
    uses_picard_order=False,
))
