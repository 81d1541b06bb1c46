"""Simulation with CasADi's CVODES integrator, and the paper's noise model.

Inputs given as a Python callable cannot enter the integrator directly, so the
horizon is cut into segments (at the output times, the breakpoints and, for
inputs given as samples, their sample times) and on each segment the input
is replaced by its Chebyshev interpolant of degree 8 through interior
(Chebyshev-Gauss) points.  A segment is halved while that
interpolant misses the input, at the segment's ends and midpoint, by more
than ``rtol`` times the input's magnitude (down to ``horizon / 4096``); a
model without inputs is integrated between output times only.  One CVODES
integrator in normalised time serves every segment; the segments are
chained with ``Function.mapaccum`` in one call, and CVODES restarts at each
segment, so an input that jumps on a segment boundary is integrated exactly
and seen from the correct side.  A jump inside a segment is smeared (on a
segment refined around it): declare it as a breakpoint.

Noise model (docs/models.md): ``y_i = (1 + n_i) g(t_i, x(t_i), p) + m_i`` with one
scalar ``n_i`` per sample time and one ``m_i`` per output, both normal with
standard deviation ``noise_std``.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Literal

import casadi as ca
import numpy as np

from .errors import SimulationError
from .experiment import Experiment
from .inputs import check_input_interpolation, evaluate_inputs, is_linear
from .model import Model
from .runtime.interrupts import interruptible, reraise_if_interrupted
from .runtime.native_output import captured_native_output
from .runtime.user_warnings import called_by_user, warn_user

__all__ = ["simulate", "measure", "simulate_experiment", "own_inputs", "input_breaks"]

_INPUT_DEGREE = 8
#: shortest segment the input fit refines to, as a fraction of the horizon
_MIN_SEGMENT_FRACTION = 1.0 / 4096
#: pieces a failing segment is cut into to say where the simulation failed
_FAILURE_PIECES = 20


def _segments(t0: float, t: np.ndarray, breakpoints: np.ndarray) -> np.ndarray:
    """Segment boundaries: ``t0``, the output times and the breakpoints."""
    return np.unique(np.concatenate([[t0], t, breakpoints]))


def _fitted_inputs(u_of_t: Callable[[np.ndarray], np.ndarray], bounds: np.ndarray, nu: int,
                   rtol: float) -> tuple[np.ndarray, np.ndarray]:
    """Segments on which each input's interpolant is accurate, and its coefficients.

    A segment is halved while the interpolant of degree ``_INPUT_DEGREE``
    misses an input by more than ``rtol`` times that input's largest
    magnitude, at the segment's ends or midpoint (points the fit does not
    use), until it is ``_MIN_SEGMENT_FRACTION`` of the horizon long.

    Returns
    -------
    bounds : ndarray (S + 1,)
        The refined segment boundaries (every given boundary among them).
    coef : ndarray (nu (degree + 1), S)
        As :func:`_input_coefficients`.
    """
    d = _INPUT_DEGREE
    min_len = (bounds[-1] - bounds[0]) * _MIN_SEGMENT_FRACTION
    # Chebyshev polynomials at s = -1, 0, 1 (segment start, midpoint, end)
    T_check = np.polynomial.chebyshev.chebvander(np.array([-1.0, 0.0, 1.0]), d)  # (3, d+1)
    starts, ends = bounds[:-1], bounds[1:]
    done_a: list[np.ndarray] = []
    done_coef: list[np.ndarray] = []
    scale = None
    while starts.size:
        coef = _segment_coefficients(u_of_t, starts, ends, nu)  # (nu (d+1), S)
        checks = np.stack([starts, 0.5 * (starts + ends), ends], axis=1)  # (S, 3)
        exact = np.asarray(u_of_t(checks.ravel()), float).reshape(starts.size, 3, nu)
        if scale is None:
            scale = np.max(np.abs(exact), axis=(0, 1))
        fit = np.einsum("ck,skn->scn", T_check, coef.T.reshape(starts.size, d + 1, nu))
        miss = np.any(np.abs(fit - exact) > rtol * scale, axis=(1, 2))
        split = miss & (ends - starts > 2.0 * min_len)
        done_a.append(starts[~split])
        done_coef.append(coef[:, ~split])
        mids = 0.5 * (starts[split] + ends[split])
        starts, ends = (np.concatenate([starts[split], mids]),
                        np.concatenate([mids, ends[split]]))
    a = np.concatenate(done_a)
    order = np.argsort(a)
    return (np.append(a[order], bounds[-1]),
            np.concatenate(done_coef, axis=1)[:, order])


def _input_coefficients(u_of_t: Callable[[np.ndarray], np.ndarray], bounds: np.ndarray,
                        nu: int, degree: int = _INPUT_DEGREE) -> np.ndarray:
    """Chebyshev coefficients of the inputs on each segment, ``(nu (degree+1), S)``."""
    return _segment_coefficients(u_of_t, bounds[:-1], bounds[1:], nu, degree)


def _segment_coefficients(u_of_t: Callable[[np.ndarray], np.ndarray], a: np.ndarray,
                          b: np.ndarray, nu: int, degree: int = _INPUT_DEGREE) -> np.ndarray:
    """:func:`_input_coefficients` on the segments ``[a_i, b_i]``."""
    d = degree
    k = np.arange(d + 1)
    xi = np.cos(np.pi * (k + 0.5) / (d + 1))  # Chebyshev-Gauss points in (-1, 1)
    V = np.polynomial.chebyshev.chebvander(xi, d)
    Vinv = np.linalg.inv(V)
    times = 0.5 * (a[:, None] + b[:, None]) + 0.5 * (b - a)[:, None] * xi[None, :]
    vals = u_of_t(times.ravel()).reshape(a.size, d + 1, nu)  # (S, d+1, nu)
    coef = np.einsum("mk,skn->snm", Vinv, vals)  # (S, nu, d+1)
    # column-major (input fastest), as casadi.reshape(q, nu, d+1) reads it
    return coef.transpose(0, 2, 1).reshape(a.size, (d + 1) * nu).T


#: CVODES' smallest step, as a fraction of the segment (its time is normalised
#: to [0, 1]).  Where a solution blows up inside a segment the steps shrink
#: until ``t + h == t``; plain CVODES then stops at ``max_num_steps``, but the
#: forward pass of an adjoint gradient (``CVodeF``, which steps one step at a
#: time) was seen to take such steps for ever, keeping a checkpoint every 20
#: of them: a shooting solve grew by 40 MB/s until killed (docs/reliability.md,
#: "Shooting on a solution that blows up").  A floor far below any step the
#: tolerances ask for ends that with ``CV_ERR_FAILURE`` instead.
MIN_STEP = 1e-14

# segment integrators already built in this process, per model and settings
# (building one costs a few milliseconds: the initial guess simulates every
# experiment, the certificate every interval group)
_INTEGRATORS: weakref.WeakKeyDictionary[Model, dict[tuple, ca.Function]] = (
    weakref.WeakKeyDictionary())
_INTEGRATORS_LOCK = threading.Lock()


def _segment_integrator(model: Model, rtol: float, atol: float, max_steps: int,
                        degree: int = _INPUT_DEGREE,
                        grid: tuple[float, ...] = (1.0,), method: str = "bdf") -> ca.Function:
    """:func:`_build_segment_integrator`, once per model and settings in this process."""
    key = (float(rtol), float(atol), int(max_steps), int(degree), tuple(float(g) for g in grid),
           method)
    with _INTEGRATORS_LOCK:
        step = _INTEGRATORS.get(model, {}).get(key)
    if step is None:
        step = _build_segment_integrator(model, rtol, atol, max_steps, degree, grid, method)
        with _INTEGRATORS_LOCK:
            step = _INTEGRATORS.setdefault(model, {}).setdefault(key, step)
    return step


def _build_segment_integrator(model: Model, rtol: float, atol: float, max_steps: int,
                              degree: int = _INPUT_DEGREE,
                              grid: tuple[float, ...] = (1.0,),
                              method: str = "bdf") -> ca.Function:
    """CVODES over one segment in normalised time ``s in [0, 1]``.

    ``method``: ``"bdf"`` (CVODES' BDF with Newton iterations and the exact
    Jacobian, for stiff and non-stiff models alike) or ``"adams"`` (Adams-
    Moulton with fixed-point iterations: no Jacobian and no factorisation,
    and orders up to 12, so fewer and cheaper steps at tight tolerances, but
    only for a model that is not stiff on the segment).

    Parameters of the returned ``step(x, q, p) -> xf``: ``q`` holds the
    segment start, its length and the input's Chebyshev coefficients (of
    ``degree``); ``xf`` is the state at each point of ``grid`` (normalised
    times in ``(0, 1]``, one column each; CVODES is not restarted between them).
    """
    nu = model.nu
    d = degree
    s = ca.SX.sym("s")
    q = ca.SX.sym("q", 2 + nu * (d + 1))
    a, L = q[0], q[1]
    xi = 2.0 * s - 1.0
    T = [ca.SX(1.0), xi]
    for _ in range(2, d + 1):
        T.append(2.0 * xi * T[-1] - T[-2])
    C = ca.reshape(q[2:], nu, d + 1)
    u_expr = ca.mtimes(C, ca.vertcat(*T[: d + 1])) if nu else ca.SX(0, 1)
    rhs = model.f(a + L * s, model.x, model.p, u_expr)
    dae = {"x": model.x, "p": ca.vertcat(model.p, q), "t": s, "ode": L * rhs}
    opts = {
        "abstol": atol, "reltol": rtol, "max_num_steps": max_steps, "min_step_size": MIN_STEP,
        "disable_internal_warnings": True, "show_eval_warnings": False,
        "linear_solver": "csparse",
    }
    if method == "adams":
        opts.update(linear_multistep_method="adams", nonlinear_solver_iteration="functional")
    elif method != "bdf":
        raise ValueError(f"method must be 'bdf' or 'adams', got {method!r}")
    F = ca.integrator("segment", "cvodes", dae, 0.0, [float(g) for g in grid], opts)
    xk, qk, pk = ca.MX.sym("x", model.nx), ca.MX.sym("q", q.numel()), ca.MX.sym("p", model.np)
    xf = F(x0=xk, p=ca.vertcat(pk, qk))["xf"]
    return ca.Function("segment_step", [xk, qk, pk], [xf], ["x", "q", "p"], ["xf"])


def _cvodes_reason(err: Exception, printed: list[str]) -> str:
    """The CVODES flag and its own explanation (e.g. where it stopped)."""
    m = re.search(r'CVode returned "([A-Z_]+)"', str(err))
    flag = m.group(1) if m else str(err).strip().splitlines()[-1][:200]
    text = printed[0] if printed else ""
    detail = re.search(r"(At t = [^\n]*)", text)
    return f"{flag}: {detail.group(1).strip()}" if detail else flag


# what CVODES' failure flags mean for a user (SUNDIALS' CVODE documentation)
CVODES_FLAGS = {
    "CV_TOO_MUCH_WORK": "the step limit (max_steps) was reached",
    "CV_TOO_MUCH_ACC": "the tolerances cannot be met",
    "CV_ERR_FAILURE": "the error test failed repeatedly or at the smallest step",
    "CV_CONV_FAILURE": "the corrector did not converge",
    "CV_RHSFUNC_FAIL": "the right-hand side could not be evaluated",
    "CV_REPTD_RHSFUNC_ERR": "the right-hand side was not finite, repeatedly",
    "CV_UNREC_RHSFUNC_ERR": "the right-hand side was not finite",
}


def cvodes_flag(err: BaseException) -> str:
    """``"CV_TOO_MUCH_WORK (the step limit (max_steps) was reached)"`` from a CasADi
    error, or the error's last line when it names no CVODES flag."""
    m = re.search(r'CVode returned "([A-Z_]+)"', str(err))
    if not m:
        lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
        return re.sub(r"^.*?\.cpp:\d+: ", "", lines[-1] if lines else "unknown error")[:200]
    flag = m.group(1)
    return f"{flag} ({CVODES_FLAGS[flag]})" if flag in CVODES_FLAGS else flag


def cvodes_failure(err: Exception, printed: str) -> tuple[str, float | None]:
    """CVODES' flag with its explanation, and the time (in the integrator's own
    time variable) where it stopped, from a failed call and its printed output."""
    flag = cvodes_flag(err)
    detail = re.search(r"At t = ([-+0-9.eE]+)[,;]?\s*([^\n]*)", printed)
    if not detail:
        return flag, None
    try:
        s = float(detail.group(1))
    except ValueError:
        s = None
    why = detail.group(2).strip().rstrip(".")
    return (f"{flag} ({why})" if why else flag), s


def locate_cvodes_failure(step: ca.Function, x0: np.ndarray, controls: np.ndarray,
                          p: np.ndarray) -> tuple[int, np.ndarray, str, float | None]:
    """Integrate segment by segment to find the one that fails.

    Returns the failing segment's index, the state at its start, CVODES'
    reason and where in the segment (``s`` in ``[0, 1]``) it stopped; the
    index is -1 when every segment succeeds on its own.
    """
    x = np.asarray(x0, float)
    for k in range(controls.shape[1]):
        try:
            with interruptible(), captured_native_output() as printed:
                x_next = np.asarray(step(x, controls[:, k], p)).ravel()
        except RuntimeError as err:
            text = printed[0] if printed else ""
            reraise_if_interrupted(err, text)
            reason, s = cvodes_failure(err, text)
            return k, x, reason, s
        if not np.all(np.isfinite(x_next)):
            return k, x, "the state became non-finite", None
        x = x_next
    return -1, x, "", None


#: CVODES's absolute tolerance for states of size 1 and above
DEFAULT_ATOL = 1e-10
#: CVODES's relative tolerance and step limit by default
DEFAULT_RTOL = 1e-10
DEFAULT_MAX_STEPS = 100000


def _state_size(model: Model, x0: np.ndarray) -> float:
    """The states' typical size: ``x_nominal``'s smallest, else the largest ``|x0|``
    (1 where that is 0)."""
    if model.x_nominal is not None:
        return float(np.min(model.x_nominal))
    top = float(np.max(np.abs(x0))) if x0.size else 0.0
    return top if top > 0 else 1.0


def own_inputs(exp: Experiment) -> Experiment:
    """The experiment whose inputs are the user's: ``exp``, or the one a
    restated experiment's constants wrap (``PhasedConstants.head``)."""
    head = getattr(exp.u, "head", None)
    return head if isinstance(head, Experiment) else exp


def input_breaks(exp: Experiment) -> np.ndarray:
    """Where the inputs of ``exp`` may jump or kink: its breakpoints, and the
    samples of its own sampled inputs (:func:`own_inputs`; a hammer's 4 ms
    blow between them, stepped over in a preequilibrated run's prediction and
    in a forecast, was lost)."""
    own = own_inputs(exp)
    sampled = own.u is not None and not callable(own.u)
    return np.r_[exp.breakpoints, np.unique(own.t) if sampled else []]


def simulate(
    model: Model,
    x0: Any,
    p: Any,
    t: Any,
    u: Callable[[float], Any] | Experiment | np.ndarray | None = None,
    *,
    t0: float | None = None,
    breakpoints: Any = None,
    u_interpolation: Literal["previous", "linear"] | Sequence[str] = "previous",
    rtol: float = DEFAULT_RTOL,
    atol: float | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    locate: bool = True,
) -> np.ndarray:
    """Simulate the model with CVODES and return the states at the times ``t``.

    Parameters
    ----------
    model : Model
    x0 : array_like, shape (nx,), or None
        State at ``t0``; None, or NaN entries: the model's ``x0`` expressions
        of ``p`` (``Model(x0=...)``).
    p : array_like, shape (np,)
    t : array_like, shape (N,)
        Output times, increasing (a time repeated gives its row again), not
        before ``t0``.  A single
        number needs ``t0`` (without it the result would be ``x0``).
    u : callable, Experiment, or array, optional
        Inputs: a callable ``u(t) -> (nu,)``, an :class:`Experiment` (its
        inputs are used), or an array ``(N, nu)`` of values at ``t``, read
        as ``u_interpolation`` says.
    t0 : float, optional
        Initial time; default ``t[0]``.
    breakpoints : array_like, optional
        Times where the inputs jump.
    u_interpolation : {"previous", "linear"}
        How an array ``u`` goes between its samples: held (zero-order hold,
        the default here: how synthetic staircase inputs are made) or
        interpolated linearly (as an :class:`Experiment` reads its samples
        by default).  Ignored for a callable or an Experiment (which brings
        its own).
    rtol, atol : float
        CVODES tolerances.  ``atol`` by default ``1e-10`` times the states'
        size where that is below 1 (``model.x_nominal``, else the largest
        ``|x0|``): a state of size 1e-12 is then solved to ``rtol``, not
        lost below a fixed absolute tolerance.
    max_steps : int
        CVODES step limit between output times.
    locate : bool
        Where CVODES fails, integrate again segment by segment to name the
        time and state of the failure in the error (the default).  False
        raises at once, naming CVODES's reason only: for a caller that
        discards the message (a failure can take many times the failed
        simulation to locate).

    Returns
    -------
    ndarray, shape (N, nx)

    Raises
    ------
    SimulationError
        If CVODES fails (too much work, blow-up), the solution is not finite,
        or it leaves ``model.x_domain``.
    ValueError
        On bad arguments, naming the argument.
    """
    if np.ndim(t) == 0 and t0 is None:
        # one number and no start: the start would be that time and the result x0
        raise ValueError(
            f"simulate: `t` = {t!r} is a single time and no `t0` is given, so the result "
            "would be x0 itself; pass the output times as an array (e.g. "
            f"np.linspace(0, {t!r}, 101)), or give `t0` for the state at time {t!r}")
    t = np.atleast_1d(np.asarray(t, float))
    if t.ndim != 1 or t.size == 0 or not np.all(np.isfinite(t)):
        raise ValueError("simulate: `t` must be a non-empty 1-D array of finite times")
    if np.any(np.diff(t) < 0):
        raise ValueError("simulate: `t` must be increasing")
    if np.unique(t).size < t.size:  # replicates: the states at each distinct time
        times, first, back = np.unique(t, return_index=True, return_inverse=True)
        if u is not None and not callable(u) and not isinstance(u, Experiment):
            u_arr = np.asarray(u, float)
            u = u_arr[first] if u_arr.ndim >= 1 and u_arr.shape[0] == t.size else u
        return simulate(model, x0, p, times, u, t0=t0, rtol=rtol, atol=atol,
                        max_steps=max_steps, u_interpolation=u_interpolation,
                        breakpoints=breakpoints, locate=locate)[back]
    p = np.asarray(p, float).ravel()
    if p.size != model.np or not np.all(np.isfinite(p)):
        raise ValueError(f"simulate: `p` must be {model.np} finite numbers, got {p}")
    x0 = np.full(model.nx, np.nan) if x0 is None else np.asarray(x0, float).ravel()
    if x0.size == model.nx and np.any(np.isnan(x0)):  # the model's x0 expressions of p
        given = ca.Function("x0_of_p", [model.p], [model.x0_expression])(p)
        x0 = np.where(np.isnan(x0), np.asarray(given, float).ravel(), x0)
    if x0.size != model.nx or not np.all(np.isfinite(x0)):
        unset = (f" (the states {[model.x_names[i] for i in np.flatnonzero(np.isnan(x0))]} "
                 "have no value: give them, or Model(x0=...) expressions of p)"
                 if x0.size == model.nx and np.isnan(x0).any() else "")
        raise ValueError(f"simulate: `x0` must be {model.nx} finite numbers, got {x0}{unset}")
    if atol is None:
        atol = DEFAULT_ATOL * min(1.0, _state_size(model, x0))
    t0 = float(t[0]) if t0 is None else float(t0)
    if t0 > t[0]:
        raise ValueError(f"simulate: `t0` = {t0} is after the first output time {t[0]}")
    bp = np.zeros(0) if breakpoints is None else np.asarray(breakpoints, float).ravel()

    if isinstance(u, Experiment):
        if u.preequilibration is not None:
            raise ValueError(f"simulate: experiment {u.name!r} starts from a steady state "
                             "(its preequilibration), which simulate does not compute; give "
                             "x0 at its t0 and the experiment without it (e.replaced("
                             "preequilibration=None)), or predict with a fit (res.predict)")
        bp = np.concatenate([bp, input_breaks(u)])
    u_interpolation = check_input_interpolation(u_interpolation, "simulate")
    u_spec, u_times, interp = _input_spec(u, t, u_interpolation)
    if model.nu and u_spec is not None and not callable(u_spec):
        # sampled inputs are held or linear between their samples: jumps or
        # kinks there, which no polynomial on a segment across them reproduces
        bp = np.concatenate([bp, u_times])

    late = model.delay_values(p)[1]
    if np.any(late > 0):  # inputs acting late: their jumps and kinks move too
        moved = [u_times + d for d in np.unique(late[late > 0])] if (
            u_spec is not None and not callable(u_spec)) else []
        moved += [bp + d for d in np.unique(late[late > 0])]
        bp = np.concatenate([bp] + moved)

    def u_of_t(times: np.ndarray) -> np.ndarray:
        return late_columns(lambda s: evaluate_inputs(u_spec, s, model.nu, "simulate",
                                                      u_times, interp), times, late, t0)

    u_of_t(np.array([t0]))  # fail early on a missing or wrong-length input
    if np.any(late > 0) and called_by_user():  # (predictions' own calls say nothing)
        def raw(times: np.ndarray) -> np.ndarray:
            return evaluate_inputs(u_spec, times, model.nu, "simulate", u_times, interp)
        for k, u0, at, value in moving_before_late(raw, t0, late, np.asarray(t, float)):
            warn_user("simulate: " + held_history_words(model.u_names[k], u0, t0, at, value,
                                                        float(late[k])))
    bp = bp[(bp > t0) & (bp < t[-1])]
    bounds = _segments(t0, t, bp)
    out = np.empty((t.size, model.nx))
    start = 0
    if t[0] == t0:
        out[0] = x0
        start = 1
    if bounds.size < 2 or start == t.size:
        return out
    if model.nu:
        bounds, coef = _fitted_inputs(u_of_t, bounds, model.nu, rtol)
    else:
        coef = np.zeros((0, bounds.size - 1))
    controls = np.vstack([bounds[None, :-1], np.diff(bounds)[None, :], coef])
    step = _segment_integrator(model, rtol, atol, max_steps)
    chain = step.mapaccum("simulate", bounds.size - 1, [0], [0])
    try:
        with interruptible(), captured_native_output() as printed:
            xf = np.asarray(chain(x0, controls, p)).T  # (S, nx) at bounds[1:]
    except RuntimeError as err:
        reraise_if_interrupted(err, printed[0] if printed else "")
        k, xk, reason, s = (locate_cvodes_failure(step, x0, controls, p) if locate
                            else (-1, x0, "", None))
        if k < 0:  # not reproduced (or not located) segment by segment: the chain's reason
            raise SimulationError(
                f"simulation of model {model.name!r} failed: CVODES reported "
                f"{_cvodes_reason(err, printed)} (the solution blows up or leaves the "
                f"model's domain for p = {p.tolist()})"
            ) from None
        a, b = float(bounds[k]), float(bounds[k + 1])
        if s is None:
            # where CVODES does not say, the failing segment is cut in 20 and
            # the one that fails named (segments run between output times)
            fine = np.linspace(a, b, _FAILURE_PIECES + 1)
            sub = np.vstack([fine[None, :-1], np.diff(fine)[None, :],
                             _segment_coefficients(u_of_t, fine[:-1], fine[1:], model.nu)
                             if model.nu else np.zeros((0, _FAILURE_PIECES))])
            i, x_i, reason_i, s = locate_cvodes_failure(step, xk, sub, p)
            if i >= 0:
                a, b, xk, reason = float(fine[i]), float(fine[i + 1]), x_i, reason_i
        when = f"t = {a + (b - a) * s:.6g}" if s is not None else f"t in [{a:.6g}, {b:.6g}]"
        with np.errstate(all="ignore"):
            rates = np.asarray(model.f(a, xk, p, u_of_t(np.array([a]))[0]), float).ravel()
        bad = [model.x_names[i] for i in np.flatnonzero(~np.isfinite(rates))]
        # (a textbook neuron's rate 0.1 (V + 40) / (1 - exp(-(V + 40) / 10)) at
        # V = -40 was told "blows up")
        why = (f"the right-hand side of {', '.join(bad)} is not finite at that state itself: "
               "0/0 at a removable singularity (x / (1 - exp(-x)) at x = 0: write its limit "
               "there, ca.if_else(ca.fabs(x) < 1e-6, 1 + x / 2, x / (1 - ca.exp(-x)))), or an "
               "overflow; start elsewhere or guard the expression" if bad else
               "the solution blows up or leaves the model's domain")
        raise SimulationError(
            f"simulation of model {model.name!r} failed at {when}: CVODES reported "
            f"{reason}; the state was {np.array2string(xk, precision=4)} at t = {a:.6g} "
            f"(p = {p.tolist()}): {why}",
            time=a) from None
    idx = np.searchsorted(bounds[1:], t[start:])
    out[start:] = xf[idx]
    _check_trajectory(model, t, out)
    return out


def _check_trajectory(model: Model, t: np.ndarray, X: np.ndarray) -> None:
    bad = ~np.all(np.isfinite(X), axis=1)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise SimulationError(
            f"simulation of model {model.name!r} is not finite at t = {t[i]:g}"
        )
    if model.x_domain is not None:
        lb, ub = model.x_domain
        out = (X <= lb) | (X >= ub)
        if np.any(out):
            i, k = np.argwhere(out)[0]
            # the box is open (sqrt(h) at h = 0 has no derivative): a start on
            # its bound is said so (an SEIR's E(0) = 0 with x_domain x >= 0)
            edge = (" (its initial value on the bound of the open x_domain: start inside it, "
                    "or move the bound)" if i == 0 and X[i, k] in (lb[k], ub[k]) else "")
            raise SimulationError(
                f"simulation of model {model.name!r} left the model's domain at "
                f"t = {t[i]:g}: {model.x_names[k]} = {X[i, k]:.6g} is outside "
                f"({lb[k]:g}, {ub[k]:g}){edge}"
            )


def _check_noise_std(noise_std: Any) -> None:
    """``noise_std`` is one non-negative number; anything else is refused
    with the fix (the paper's noise has one level for all outputs)."""
    if np.ndim(noise_std) != 0:
        raise ValueError(
            f"noise_std must be one number (the paper's noise, one level for every "
            f"output), got an array of shape {np.shape(noise_std)}: for a level per output "
            f"pass noise_std=0 and add your own, y = exp.y + rng.normal(0.0, [s1, s2, ...], "
            f"size=exp.y.shape), then pc.Experiment(exp.t, y, ...)")
    try:
        value = float(noise_std)
    except (TypeError, ValueError):
        value = np.nan
    if not (np.isfinite(value) and value >= 0):
        raise ValueError(f"noise_std must be a non-negative number, got {noise_std!r}")


def measure(model: Model, t: Any, X: np.ndarray, p: Any,
            u: Callable[[float], Any] | Experiment | np.ndarray | None = None, *,
            noise_std: float = 0.05,
            rng: np.random.Generator | int | None = 0,
            u_interpolation: Literal["previous", "linear"] | Sequence[str] = "previous"
            ) -> np.ndarray:
    """Noisy outputs ``(1 + n_i) g(t_i, x_i, p, u_i) + m_i`` (docs/models.md).

    Parameters
    ----------
    model : Model
    t : array_like (N,)
    X : ndarray (N, nx)
        States at ``t`` (from :func:`simulate`).
    p : array_like (np,)
    u : callable, Experiment, array (N, nu) or None
        As for :func:`simulate`.
    noise_std : float
        Standard deviation of both ``n_i`` (one per sample) and ``m_i`` (one
        per output and sample).
    rng : numpy Generator or int seed
    u_interpolation : {"previous", "linear"}
        How an array ``u`` goes between its samples (for a delayed input,
        read between them), as for :func:`simulate`.

    Returns
    -------
    ndarray (N, ny)
    """
    _check_noise_std(noise_std)
    t = np.asarray(t, float)
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    p = np.asarray(p, float)
    G = np.empty((t.size, model.ny))
    U = _inputs_at(model, t, u, p, u_interpolation)
    for i, ti in enumerate(t):
        G[i] = model.output_value(ti, X[i], p, U[i])
    return _noisy(G, noise_std, rng)


def _noisy(G: np.ndarray, noise_std: float, rng: np.random.Generator) -> np.ndarray:
    """``(1 + n_i) G + m_i`` (:func:`measure`)."""
    n = rng.normal(0.0, noise_std, size=(G.shape[0], 1))
    m = rng.normal(0.0, noise_std, size=G.shape)
    return (1.0 + n) * G + m


def _input_spec(u: Any, t: np.ndarray, interpolation: str = "previous"
                ) -> tuple[Any, np.ndarray, str]:
    """``u`` of :func:`simulate` as ``(spec, times, interpolation)`` for
    :func:`~picard_casadi.experiment.evaluate_inputs`: a callable, an
    Experiment's inputs, or values at ``t`` (one column per input) read as
    ``interpolation`` says."""
    if isinstance(u, Experiment):
        spec, times, interp = u.u, u.t, u.u_interpolation
    else:
        spec, times, interp = u, t, interpolation
    if spec is not None and not callable(spec):
        spec = np.asarray(spec, float)
        if spec.ndim == 1:
            spec = spec[:, None]
    return spec, times, interp


def _inputs_at(model: Model, t: np.ndarray, u: Any, p: Any = None,
               interpolation: str = "previous", t0: float | None = None,
               samples: np.ndarray | None = None) -> np.ndarray:
    """Input values ``(N, nu)`` at the times ``t``, ``u`` read as :func:`simulate`
    reads it (an array ``u`` at the times ``samples``, default ``t``), each
    delayed input at ``t - tau`` (``p`` gives estimated delays)."""
    if model.nu == 0:
        return np.zeros((t.size, 0))
    spec, times, interp = _input_spec(u, t if samples is None else samples, interpolation)
    late = np.zeros(model.nu) if p is None else model.delay_values(p)[1]
    return late_columns(lambda s: evaluate_inputs(spec, s, model.nu, "simulate", times, interp),
                        t, late, float(t[0]) if t0 is None else t0)


def moving_before_late(values: Callable[[np.ndarray], np.ndarray], t0: float,
                       late: np.ndarray, samples: np.ndarray
                       ) -> list[tuple[int, float, float, float]]:
    """The delayed columns of ``values`` that change within their delay after
    ``t0``, each ``(k, u(t0), t, u(t))`` at its largest change there.

    Before ``t0 + late[k]`` a delayed input is held at ``u(t0)``, an input at
    rest before the record; one that changes at once (a dose given at ``t0``,
    a pulse) was not, and the held value is a guess the fit rests on (a
    pharmacometrician's 0.1 h infusion of 1000 mg/h, held for a 0.4 h lag: 400
    mg more of the dose, the lag estimated at 0.0005).  Such a column is one
    whose value at ``t0`` lies more than half its range (over ``samples`` and
    the window) from its median over ``samples`` (an excursion, not its usual
    level: a smooth signal that merely moves is no such case) and that changes
    inside the window by more than 1e-6 of that range.
    """
    out = []
    sampled = np.asarray(values(samples), float)  # (every column: evaluated once)
    for k in np.flatnonzero(late > 0):
        window = np.linspace(t0, t0 + late[k], 201)
        inside = samples[(samples > t0) & (samples <= t0 + late[k])]
        times = np.unique(np.concatenate([window, inside]))
        u = np.asarray(values(times), float)[:, k]
        at_samples = sampled[:, k]
        u_all = np.concatenate([u, at_samples])
        spread = float(np.nanmax(u_all) - np.nanmin(u_all))
        change = np.abs(u - u[0])
        i = int(np.nanargmax(change))
        excursion = abs(u[0] - float(np.nanmedian(at_samples))) > 0.5 * spread
        if spread > 0 and excursion and change[i] > 1e-6 * spread:
            out.append((int(k), float(u[0]), float(times[i]), float(u[i])))
    return out


def held_history_words(name: str, u0: float, t0: float, at: float, value: float,
                       tau: float) -> str:
    """What a delayed input that changes within its delay after ``t0`` is
    taken to have been before the record (:func:`moving_before_late`)."""
    return (f"input {name!r} is {u0:.6g} at t0 = {t0:.6g} and {value:.6g} at t = {at:.6g}, "
            f"inside its delay {tau:.6g}: a delayed input is held at its value at t0 "
            f"before t0 + its delay (an input at rest before the record), here {u0:.6g} "
            f"for {tau:.6g}; if it was something else before the record (a dose or a "
            f"pulse given at t0: 0), start the experiment earlier with a sample of that "
            f"value (t0 before the pulse), or give a dose as an initial amount and delay "
            f"the output (output_delays)")


def late_columns(values: Callable[[np.ndarray], np.ndarray], times: Any,
                 late: np.ndarray, t0: float) -> np.ndarray:
    """``values(times)`` (a column per input or output), each column ``k`` at
    ``times - late[k]`` (held at its value at ``t0`` before ``t0 + late[k]``;
    an undelayed column at ``times`` as they are)."""
    times = np.asarray(times, float)
    if not np.any(late > 0):
        return values(times)
    out = np.empty((times.size, late.size))
    for d in np.unique(late):
        cols = np.flatnonzero(late == d)
        out[:, cols] = values(np.maximum(times - d, t0) if d > 0 else times)[:, cols]
    return out


def _late_outputs(model: Model, x0: Any, p: Any, t: np.ndarray, u: Any, late: np.ndarray,
                  breakpoints: Any, interpolation: str) -> np.ndarray:
    """Noise-free outputs ``(N, ny)`` at ``t``, each delayed output ``k`` the
    model's ``g_k`` at ``t - late[k]`` (its value at ``t[0]`` before)."""
    t0 = float(t[0])
    times = np.unique(np.concatenate([np.maximum(t - d, t0) for d in np.unique(late)]))
    spec = u
    if u is not None and not callable(u) and not isinstance(u, Experiment):
        values = np.asarray(u, float)  # samples at t: read between them as the model does
        spec = values if values.ndim != 2 else _Sampled(t, values, model.nu, interpolation)
    X = simulate(model, x0, p, times, spec, breakpoints=breakpoints,
                 u_interpolation=interpolation)
    U = _inputs_at(model, times, spec, p, interpolation, t0)
    G = np.array([model.output_value(s, X[i], p, U[i]) for i, s in enumerate(times)])
    return late_columns(lambda s: G[np.searchsorted(times, s)], t, late, t0)


class _Sampled:
    """Sampled inputs as a vectorized callable (read between samples as given)."""

    vectorized = True

    def __init__(self, t: np.ndarray, values: np.ndarray, nu: int, interpolation: str) -> None:
        self.t, self.values, self.nu, self.interpolation = t, values, nu, interpolation

    def __call__(self, times: np.ndarray) -> np.ndarray:
        return evaluate_inputs(self.values, times, self.nu, "simulate", self.t,
                               self.interpolation)


def simulate_experiment(
    model: Model,
    x0: Any,
    p: Any,
    t: Any,
    u: Callable[[float], Any] | Experiment | np.ndarray | None = None,
    *,
    noise_std: float = 0.05,
    seed: int | np.random.Generator | None = 0,
    name: str | None = None,
    x0_guess: Any = None,
    breakpoints: Any = None,
    observe: Any = None,
    u_interpolation: Literal["previous", "linear"] | Sequence[str] = "previous",
) -> Experiment:
    """Synthetic data: simulate, add the paper's noise, wrap as an Experiment.

    Parameters
    ----------
    model, x0, p, t, u
        As for :func:`simulate` (``u`` a callable, an array ``(N, nu)`` of
        values at ``t``, or None); the experiment keeps ``u`` and reads an
        array as the data were made (``u_interpolation``), with the sample
        times as its ``breakpoints`` (unless given) where it is held: the
        held input jumps there.
    noise_std : float
        Standard deviation of both parts of the paper's noise: the outputs are
        ``(1 + n_i) g + m_i``, ``n_i`` one draw per sample time shared by all
        outputs (noise proportional to the signal), ``m_i`` one draw per
        output (additive); see :func:`measure` and docs/models.md (0.05 is
        the paper's level).  Its variance follows the signal, so standard
        errors from a fit with one weight per output come out too narrow
        (docs/uncertainty.md); for purely additive noise pass ``noise_std=0``
        and add your own.
    seed : int or Generator
        Random seed of the noise.
    name : str, optional
    x0_guess : array_like, optional
        The initial-state guess stored in the experiment; default the true x0.
    breakpoints : array_like, optional
        Input jump times, kept in the experiment.
    observe : array_like of bool, shape (N, ny), optional
        Which measurements to keep; the rest become NaN (missing).
    u_interpolation : {"previous", "linear"}
        How an array ``u`` goes between its samples, in the simulation and
        in the returned experiment: held (the default; the sample times
        become breakpoints) or interpolated linearly.

    Returns
    -------
    Experiment
    """
    t = np.asarray(t, float)
    late = model.delay_values(p)[0]
    if np.any(late > 0):  # outputs measured late
        _check_noise_std(noise_std)
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        Y = _noisy(_late_outputs(model, x0, p, t, u, late, breakpoints, u_interpolation),
                   noise_std, rng)
    else:
        X = simulate(model, x0, p, t, u, breakpoints=breakpoints,
                     u_interpolation=u_interpolation)
        Y = measure(model, t, X, p, u, noise_std=noise_std, rng=seed,
                    u_interpolation=u_interpolation)
    if observe is not None:
        keep = np.asarray(observe, bool)
        if keep.shape != Y.shape:
            raise ValueError(f"observe must have shape {Y.shape}, got {keep.shape}")
        Y = np.where(keep, Y, np.nan)
    if isinstance(u, Experiment):
        raise TypeError("simulate_experiment: `u` must be a callable or an array of values at "
                        "`t`, not an Experiment (pass its inputs: u=experiment.u)")
    if (u is not None and not callable(u) and breakpoints is None and model.nu
            and not all(is_linear(check_input_interpolation(u_interpolation,
                                                            "simulate_experiment"), k)
                        for k in range(model.nu))):
        breakpoints = t  # the held input jumps at the samples: intervals start there
    # x0 is the state at the first sample, where the simulation started: the
    # clock is stated (no note that a known x0 may be meant at t = 0)
    return Experiment(t, Y, u=u, x0=np.asarray(x0 if x0_guess is None else x0_guess, float),
                      name=name, breakpoints=breakpoints, u_interpolation=u_interpolation,
                      t0=float(t[0]))
