"""``method="shooting"``: CVODES multiple shooting solved by IPOPT (a baseline).

The approach the paper argues against, on the same intervals: one shooting
node ``x_j`` per Picard interval; on each interval CVODES integrates from
``x_j`` with the current ``p`` (sensitivities from the integrator) to the
sample times and the interval's end; IPOPT minimises the same data misfit
subject to ``x_end,j = x_{j+1}``, with the same bounds, start and weights.

Each interval is integrated by CVODES through its sample times to its end
(:class:`~picard_casadi.transcription.interval_integration.IntervalIntegrator`, shared
with the discretisation certificate).  The Hessian is the Gauss-Newton one
(second-order sensitivities of CVODES would be far slower); it, the
objective's gradient and the constraints' Jacobian come from one
integration per iterate of the model with its sensitivities as states
(:func:`_derivatives`, :mod:`~picard_casadi.methods.shared_derivatives`).

A failing integration (too much work, blow-up) inside IPOPT's iterations
comes back as ``success=False`` with CVODES' flag in the message.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import casadi as ca
import numpy as np

from ..runtime.interrupts import reraise_if_interrupted
from ..runtime.native_output import captured_native_output
from ..simulate import _input_coefficients, _segment_integrator, locate_cvodes_failure
from ..transcription.discretisation import to_map_layout
from ..transcription.forward_sensitivity import (initial_sensitivities, output_sensitivities,
                                                 sensitivity_model)
from ..transcription.interval_integration import interval_integrator
from .registry import MethodSpec, register
from .base import (LoopOutcome, Setup, require_nonnegative_int, require_positive,
                   require_positive_int)
from .breakdown import describe_interval
from .ipopt import StopOnInterrupt, check_ipopt_options, ipopt_history, run_nlp, stalled_message
from .shared_derivatives import nlpsol_derivatives

__all__ = ["ShootingOptions", "solve_shooting", "shooting_sensitivity"]


@dataclass
class ShootingOptions:
    """Options of ``method="shooting"``.

    Attributes
    ----------
    max_iter : int
        IPOPT iteration limit.
    tol : float
        IPOPT tolerance.
    rtol, atol : float
        CVODES tolerances.
    max_steps : int
        CVODES step limit per segment.
    ipopt_options : dict, optional
        Passed to IPOPT unchanged.
    print_level : int
    lam : float
        Accepted for a uniform call signature; unused.
    """

    max_iter: int = 1000
    tol: float = 1e-10
    rtol: float = 1e-10
    atol: float = 1e-10
    max_steps: int = 20000
    ipopt_options: dict[str, Any] | None = field(default=None)
    print_level: int = 0
    lam: float = 0.0
    #: the solver is built for its tolerances: re-weighting rounds keep them
    tolerance_fixed_at_build: ClassVar[bool] = True

    def validate(self) -> None:
        """Raise ValueError/TypeError naming a bad option."""
        require_positive_int("max_iter", self.max_iter)
        for name in ("tol", "rtol", "atol"):
            require_positive(name, getattr(self, name))
        require_positive_int("max_steps", self.max_steps)
        require_nonnegative_int("print_level", self.print_level)
        self.ipopt_options = check_ipopt_options(self.ipopt_options)


class ShootingNLP:
    """The multiple-shooting NLP of a :class:`Setup`."""

    def __init__(self, setup: Setup, opts: ShootingOptions) -> None:
        disc = setup.disc
        m = disc.model
        J, M, nx, np_ = disc.n_intervals, disc.M, m.nx, m.np
        self.setup, self.J, self.nx, self.np = setup, J, nx, np_
        states = interval_integrator(disc, opts.rtol, opts.atol, opts.max_steps).function
        self._cvodes = (opts.rtol, opts.atol, opts.max_steps)  # to locate a failure
        xs = ca.DM(setup.x_scale)
        ps = ca.DM(setup.p_scale)
        w = ca.MX.sym("w", np_ + J * nx)
        Wt = ca.MX.sym("Wt", m.ny, M * J)
        # the data are a parameter too: the likelihood's rounds of a noise
        # formula move them (the data shift of estimation.noise_formula)
        Y = ca.MX.sym("Y", m.ny, M * J)
        p = w[:np_] * ps
        X = ca.reshape(w[np_:], nx, J) * ca.repmat(xs, 1, J)
        Xs, xend = states(X, p)
        # the outputs, residuals and continuity gaps written once, of stand-ins
        # S and E for the states at the sample slots and the end states: the
        # NLP evaluates them at (Xs, xend), its derivatives differentiate them
        S, E = ca.MX.sym("S", nx, M * J), ca.MX.sym("E", nx, J)
        c = setup.tr._data_common
        G_S = m.g.map(M * J)(c["ts"], S, ca.repmat(p, 1, M * J), c["Ws"])
        r_S = ca.vec(Wt * (Y - G_S))
        nxt = [j for j in range(J) if disc.has_next[j]]
        gap_E = ca.vec(ca.horzcat(*[(E[:, j] - X[:, j + 1]) / xs for j in nxt])) if nxt \
            else ca.MX(0, 1)
        G = ca.Function("shooting_outputs", [S, w], [G_S])(Xs, w)
        # the outputs and end states of the shooting model itself: what the
        # result's sum of squares and continuity gap are made of
        self.trajectory = ca.Function("shooting_trajectory", [w], [G, xend])
        r_data, g = ca.Function("shooting_residuals", [S, E, w, Wt, Y],
                                [r_S, gap_E])(Xs, xend, w, Wt, Y)
        f = 0.5 * ca.sumsqr(r_data)
        nlp = {"x": w, "p": ca.vertcat(ca.vec(Wt), ca.vec(Y)), "f": f, "g": g}
        aug = sensitivity_model(m)
        aug_states = interval_integrator(disc, opts.rtol, opts.atol, opts.max_steps,
                                         model=aug).function
        derivatives = nlpsol_derivatives(
            _derivatives(w, (X, p), aug_states, initial_sensitivities(m), (xs, ps),
                         (J, M, nx, np_), Wt, Y, (S, E), (r_S, gap_E)), g.numel())
        ipopt = {"max_iter": int(opts.max_iter), "tol": float(opts.tol),
                 "print_level": int(opts.print_level), "sb": "yes"}
        ipopt.update(opts.ipopt_options or {})
        self._stop = StopOnInterrupt(w.numel(), g.numel(), Wt.numel() + Y.numel())
        self.monitor = self._stop
        # calc_lam_p: the multipliers of the NLP's parameters (weights, data) are
        # not used, and computing them ran an adjoint sweep through CVODES after
        # IPOPT returned, which can fail where IPOPT converged (CVodeB:
        # CV_TOO_MUCH_WORK on Robertson's kinetics)
        self.solver = ca.nlpsol("shooting", "ipopt", nlp, {
            "ipopt": ipopt, "print_time": False, "error_on_fail": False,
            "iteration_callback": self._stop, "calc_lam_p": False, **derivatives,
        })
        self._derivatives = derivatives  # the callbacks live as long as the solver
        xl, xu, pl, pu = setup.scaled_bounds
        lbw = np.concatenate([np.where(setup.free_p, pl, setup.p0 / setup.p_scale), xl.ravel()])
        ubw = np.concatenate([np.where(setup.free_p, pu, setup.p0 / setup.p_scale), xu.ravel()])
        fixed = ~setup.free_x.ravel()
        x_start = (setup.X0 / setup.x_scale).ravel()
        lbw[np_:][fixed] = x_start[fixed]
        ubw[np_:][fixed] = x_start[fixed]
        self.lbw, self.ubw = lbw, ubw

    def start(self) -> np.ndarray:
        """The decision vector of the setup's start (scaled, clipped into the box)."""
        s = self.setup
        w0 = np.concatenate([s.p0 / s.p_scale, (s.X0 / s.x_scale).ravel()])
        return np.clip(w0, self.lbw, self.ubw)

    def solve(self) -> tuple[dict[str, Any], dict[str, Any], str]:
        """Solve from the setup's start; return IPOPT's result, stats and output."""
        Wt = to_map_layout(self.setup.tr._Wt).ravel(order="F")
        Y = to_map_layout(self.setup.disc.y).ravel(order="F")
        return run_nlp(self.solver, np.concatenate([Wt, Y]), self.start(), self.lbw, self.ubw)

    def locate_failure(self, w: np.ndarray) -> str:
        """Where CVODES fails at the point ``w``: interval, experiment and time, or ''.

        Each interval is integrated from its start through its sample times,
        segment by segment (only after a failure: about a millisecond per
        segment), until one fails.
        """
        s = self.setup
        disc = s.disc
        nu = disc.model.nu
        p = w[: self.np] * s.p_scale
        X = w[self.np:].reshape(self.J, self.nx) * s.x_scale
        step = _segment_integrator(disc.model, *self._cvodes)
        for j in range(self.J):
            exp = disc.experiments[disc.exp_of[j]]
            ts = disc.sample_times[j][disc.sample_exp[j] == disc.exp_of[j]]
            b = np.unique(np.concatenate([[disc.t0[j]], ts, [disc.t0[j] + disc.h[j]]]))
            Q = np.vstack([b[None, :-1], np.diff(b)[None, :],
                           _input_coefficients(lambda tt: exp.inputs(tt, nu), b, nu)
                           if nu else np.zeros((0, b.size - 1))])
            k, xk, reason, frac = locate_cvodes_failure(step, X[j], Q, p)
            if k >= 0:
                a, length = float(Q[0, k]), float(Q[1, k])
                when = f" at t = {a + length * frac:.6g}" if frac is not None else ""
                return (f"{reason}{when} on {describe_interval(s, j)}, integrating from "
                        f"x = {np.array2string(xk, precision=4)} (t = {a:.6g}) with "
                        f"p = {np.array2string(p, precision=6)}")
        return ""


def _sensitivity_matrices(values: ca.MX, J: int, M: int, nx: int, np_: int,
                          scales: tuple[ca.DM, ca.DM]) -> tuple[ca.MX, ca.MX]:
    """The derivatives of the sampled states ``vec(Xs)`` and the end states
    ``vec(xend)`` in the scaled decision vector ``w = (p / p_scale, vec(X / x_scale))``.

    ``values`` is ``vertcat(vec(Zs), vec(zend))`` of the sensitivity model's
    interval states (:func:`~picard_casadi.transcription.forward_sensitivity.
    sensitivity_model`, every state's column): slot ``c`` belongs to interval
    ``c // M`` and depends on that interval's start and the parameters only,
    so each matrix is a gather of those nonzeros into its sparsity (an
    interval's dense block beside the parameters' columns).
    """
    xs, ps = (np.asarray(v, float).ravel() for v in scales)
    nz, naug = np_ + nx, nx * (1 + np_ + nx)
    i, k = np.meshgrid(np.arange(nx), np.arange(nz), indexing="ij")  # state, column
    scale = np.concatenate([ps, xs])[k]

    def gather(n_points: int, interval_of: np.ndarray, offset: int) -> ca.MX:
        point = np.arange(n_points)[:, None, None]
        rows = np.broadcast_to(point * nx + i, (n_points, nx, nz)).ravel()
        j = interval_of[:, None, None]
        cols = np.where(k < np_, k, np_ + j * nx + (k - np_))
        cols = np.broadcast_to(cols, (n_points, nx, nz)).ravel()
        index = (offset + point * naug + nx + i + k * nx).ravel()
        factor = np.broadcast_to(scale, (n_points, nx, nz)).ravel()
        order = np.lexsort((rows, cols))  # the nonzeros column by column
        sparsity = ca.Sparsity.triplet(n_points * nx, np_ + J * nx, rows[order].tolist(),
                                       cols[order].tolist())
        return ca.MX(sparsity, values[index[order].tolist()] * ca.DM(factor[order]))

    return (gather(M * J, np.arange(M * J) // M, 0),
            gather(J, np.arange(J), M * J * naug))


def _derivatives(w: ca.MX, starts: tuple[ca.MX, ca.MX], aug_states: ca.Function,
                 S0: np.ndarray, scales: tuple[ca.DM, ca.DM], sizes: tuple[int, int, int, int],
                 Wt: ca.MX, Y: ca.MX, stand_ins: tuple[ca.MX, ca.MX],
                 residuals: tuple[ca.MX, ca.MX]) -> ca.Function:
    """``(w, data) -> (f, grad f, g, jac g, triu(Jr' Jr))`` from one sensitivity run.

    ``starts`` are the interval starts ``X`` and the parameters ``p`` as
    expressions of ``w``; ``residuals`` are the data residuals and the
    continuity gaps as expressions of ``w`` and of the ``stand_ins`` ``(S, E)``
    for the states at the sample slots and the end states.  Those states and their derivatives
    in each interval's start and the parameters come from one integration of
    the model with its sensitivities as states (``aug_states``: the interval
    integrator of the sensitivity model, started at ``S0``), as AMICI
    integrates them; the residuals' and the gaps' Jacobians follow by the
    chain rule through the output function.  CasADi's own ``nlp_grad_f``
    (an adjoint sweep), ``nlp_jac_g`` and ``nlp_hess_l`` would integrate the
    sensitivities three times per iterate, and its forward derivative of the
    interval integrators once per direction set (docs/performance.md).
    """
    J, M, nx, np_ = sizes
    X, p = starts
    S, E = stand_ins
    r, gap = residuals
    Zs, zend = aug_states(ca.vertcat(X, ca.repmat(ca.DM(S0), 1, J)), p)
    sens_S, sens_E = _sensitivity_matrices(ca.vertcat(ca.vec(Zs), ca.vec(zend)), J, M, nx,
                                           np_, scales)
    chain = ca.Function("shooting_chain", [S, E, w, Wt, Y],
                        [r, ca.jacobian(r, S), ca.jacobian(r, w),
                         gap, ca.jacobian(gap, E), ca.jacobian(gap, w)])
    r, dr_dS, dr_dw, gap, dg_dE, dg_dw = chain(Zs[:nx, :], zend[:nx, :], w, Wt, Y)
    Jr = ca.mtimes(dr_dS, sens_S) + dr_dw
    Jg = ca.mtimes(dg_dE, sens_E) + dg_dw
    data = ca.vertcat(ca.vec(Wt), ca.vec(Y))
    return ca.Function("shooting_derivatives", [w, data],
                       [0.5 * ca.sumsqr(r), ca.densify(ca.mtimes(Jr.T, r)), gap, Jg,
                        ca.triu(ca.mtimes(Jr.T, Jr))])


def solve_shooting(setup: Setup, opts: ShootingOptions, callback=None) -> LoopOutcome:
    """Build (once per setup) and solve the multiple-shooting NLP."""
    key = ("shooting", opts.rtol, opts.atol, opts.max_steps, opts.max_iter, opts.tol,
           tuple(sorted((opts.ipopt_options or {}).items())), opts.print_level)
    t0 = time.perf_counter()
    if key not in setup.cache:
        setup.cache[key] = ShootingNLP(setup, opts)
        setup.timings["build"] = setup.timings.get("build", 0.0) + time.perf_counter() - t0
    nlp = setup.cache[key]
    with nlp.monitor.reporting(callback, lambda w: w[:nlp.np] * setup.p_scale):
        sol, stats, printed = nlp.solve()
    status = str(stats.get("return_status", "unknown"))
    w = np.asarray(sol["x"]).ravel()
    last = nlp.monitor.last_iterate
    kept_last = "error" in stats and last is not None and last.shape == w.shape
    if kept_last:  # an evaluation raised: IPOPT's solution is lost, its last iterate is not
        w = last
    p = w[: nlp.np] * setup.p_scale
    X = w[nlp.np:].reshape(nlp.J, nlp.nx) * setup.x_scale
    U, _, _ = setup.tr.settle(X, np.repeat(X[:, :, None], setup.disc.K, axis=2), p,
                                tol=1e-12, max_sweeps=200)
    success = bool(stats.get("success", False))
    cv = re.findall(r'CVode returned "([A-Z_]+)"', printed)
    flags = ", ".join(sorted(set(cv)))
    message = f"IPOPT: {status}"
    where = ""
    if "error" not in stats and status == "Invalid_Number_Detected" and cv:
        # IPOPT's start could not be evaluated: CVODES failed there (a NaN
        # from a failed integration); say where, as for an outright failure
        where = nlp.locate_failure(nlp.start())
        if where:
            stats["error"] = "CVODES failed at the start"
            status = "Evaluation_Failed"
    if "error" in stats:  # an evaluation failed outright: say where
        where = where or nlp.locate_failure(nlp.start())
        message = ("shooting stopped: CVODES failed "
                   + (f"at the start: {where}" if where else
                      f"({stats['error']}) at a point IPOPT tried (every interval "
                      "integrates at the start)")
                   + "; the solution blows up or CVODES needs more steps (max_steps) -- "
                     "bound p (p_bounds) and the states (x0_bounds) or start from a "
                     "better p0"
                   + (f"; the result is IPOPT's last iterate (iteration "
                      f"{nlp.monitor.iterations}), not an optimum" if kept_last else ""))
    elif not success:
        message += (f"; CVODES reported {flags} during the iterations"
                    if cv else "; see IPOPT's documentation of this status")
    if nlp.monitor.stalled:
        status = "stalled"
        message = stalled_message("shooting") + (
            f"; CVODES reported {flags} at the points it tried: the "
            "solution blows up there -- bound p (p_bounds) and the states (x0_bounds) or "
            "start from a better p0" if cv else "")
    if nlp.monitor.stopped:
        status, message = "stopped", "stopped by the callback"
    history = ipopt_history(stats)
    try:  # CVODES at the solution (the node values U only carry a warm start)
        # (a failure's error text, the inputs of every function in the chain,
        # stays off the terminal)
        with captured_native_output():
            G, xend = (np.asarray(v) for v in nlp.trajectory(w))
        J, M, ny = nlp.J, setup.disc.M, setup.disc.model.ny
        own = (G.T.reshape(J, M, ny).transpose(0, 2, 1), xend.T)
    except RuntimeError as err:
        reraise_if_interrupted(err)
        own = None
    return LoopOutcome(X=X, U=U, p=p, V=np.zeros_like(X), lam=0.0,
                       iterations=int(stats.get("iter_count", len(history)))
                       if "error" not in stats else nlp.monitor.iterations,
                       success=success, status="converged" if success else status,
                       message=message, history=history, trajectory=own)


register(MethodSpec(
    "shooting", ShootingOptions, solve_shooting,
    "CVODES multiple shooting on the same intervals, solved by IPOPT (baseline)",
    uses_picard_order=False,
))


def shooting_sensitivity(setup: Setup, opts: ShootingOptions, X: np.ndarray, p: np.ndarray):
    """Residuals and their derivatives in ``(p, x0)`` through the shooting model
    itself (CVODES' forward sensitivities from each interval's start), as a
    :class:`~picard_casadi.analysis.uncertainty.SolutionSensitivity`.

    The shooting estimate's standard errors must come from its own model: the
    collocation mesh it shares need not resolve the dynamics (a user's stiff
    kinetics, samples log-spaced from 1e-5: a certified shooting fit reported
    standard errors 15 to 50,000 times too large, taken from the mesh).  Each
    interval depends on its own start only, so the sensitivities to its start
    and to the parameters, integrated as states beside it
    (:func:`~picard_casadi.transcription.forward_sensitivity.sensitivity_model`),
    give every interval's derivatives (on PEtab's Bruno, 384 intervals, 20
    times faster than CasADi's forward derivatives of the interval
    integrators, docs/performance.md).
    """
    from ..analysis.uncertainty import SolutionSensitivity, chain_sensitivities

    disc = setup.disc
    m = disc.model
    J, M, nx, np_, ny = disc.n_intervals, disc.M, m.nx, m.np, m.ny
    nz = nx + np_
    aug = sensitivity_model(m)
    states = interval_integrator(disc, opts.rtol, opts.atol, opts.max_steps, model=aug)
    Z0 = np.hstack([X, np.tile(initial_sensitivities(m), (J, 1))])
    Zs, zend = states(Z0, p)  # (J, nz_aug, M), (J, nz_aug)
    c = setup.tr._common_np
    slots = np.asarray(Zs).transpose(1, 0, 2).reshape(aug.nx, J * M)
    G_, dG_ = (np.asarray(v) for v in output_sensitivities(m).map(M * J)(
        c["ts"], slots, np.repeat(np.asarray(p, float)[:, None], M * J, axis=1), c["Ws"]))
    # the sensitivities' columns are the parameters' then the states'; here
    # the states' come first
    order = np.r_[np_ + np.arange(nx), np.arange(np_)]
    dG = dG_.reshape(ny, J * M, nz).transpose(1, 0, 2)[:, :, order].reshape(J, M, ny, nz)
    dend = zend[:, nx:].reshape(J, nz, nx).transpose(0, 2, 1)[:, :, order]
    sens = {"G": G_.T.reshape(J, M, ny).transpose(0, 2, 1), "dG": dG,
            "xend": zend[:, :nx], "dend": dend}
    r, Jt, columns, rows, sens = chain_sensitivities(setup, sens)
    return SolutionSensitivity(U=np.repeat(X[:, :, None], disc.K, axis=2), sens=sens, r=r,
                               Jt=Jt, columns=columns, rows=rows)
