"""Time delays: outputs measured late and inputs acting late, the delays estimated.

A model declares them (``Model(output_delays={"r": tau}, input_delays=...)``):
output ``y_k`` is observed as ``g_k(t - tau)`` (a sensor's lag), input
``u_i`` acts as ``u_i(t - tau)``.  With ``tau`` known both are a restatement
of the data: the output's samples move to ``t - tau``, the input is shifted.

With ``tau`` estimated, the sample times would move with a parameter, which
no transcription handles (the samples' intervals change).  The delays are
estimated in rounds instead; each round is an ordinary problem, centred on
the delays' current values ``c``:

- the samples of a delayed output are placed at ``t - c`` and its output is
  ``g_k - (tau - c) dg_k/dt`` (``dg/dt = g_x f + g_u du/dt + g_t``, exact
  symbolic derivatives; zero where ``t - c`` was held at ``t0``);
- a delayed input is ``u_i(t - c) - (tau - c) du_i/dt(t - c)``;
- ``c``, the slopes ``du/dt`` and ``t0`` enter as inputs, so the model's
  functions are built (and compiled) once.

At ``tau = c`` each round's model is the delayed model exactly, and its
derivatives in ``tau`` are the exact ones: a round's fit is one Gauss-Newton
step in the delays (with every other quantity fitted), and where the delays
settle (``tau = c``, within :data:`SETTLED` of a standard error, or the
certificate's shift to the ODE's optimum where that is larger) the answer
is a stationary point of the delayed problem, with its standard errors from
the same Fisher information.  A round moves each delay by at most its trust
radius (:data:`FIRST_RADIUS` sample spacings at first, doubled while the
delay keeps reaching it).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import casadi as ca
import numpy as np

from ..experiment import Experiment
from ..model import Model
from ..parameters import Parameter
from ..runtime.user_warnings import warn_user
from .arguments import as_bounds

__all__ = ["DelayPlan", "estimate_with_delays", "MAX_ROUNDS"]

#: at most this many rounds (each a fit) before the delays are declared unsettled
MAX_ROUNDS = 30
#: the first trust radius of a delay, in sample spacings (the median spacing of
#: the experiments' sample times)
FIRST_RADIUS = 2.0
#: a delay has settled when its last move is below this fraction of its
#: standard error (or of its trust radius, where there is none)
SETTLED = 0.01


@dataclass
class DelayPlan:
    """Which outputs and inputs are delayed, by which parameter or value.

    Attributes
    ----------
    model : Model
        The user's model (with its delays).
    outputs, inputs : dict
        Index -> ``(parameter index, value)`` (``Model.delay_spec``).
    estimated : list of int
        The parameters that are delays, each once, in order.
    slopes : bool
        Whether the rounds need the inputs' slopes (an estimated input delay,
        or a delayed output that depends on an input).
    """

    model: Model
    outputs: dict[int, tuple[int, float]]
    inputs: dict[int, tuple[int, float]]
    estimated: list[int]
    slopes: bool

    @classmethod
    def of(cls, model: Model) -> DelayPlan:
        """The plan of ``model``'s delays."""
        outputs, inputs = model.delay_spec
        estimated = sorted({i for i, _ in list(outputs.values()) + list(inputs.values())
                            if i >= 0})
        uses_u = any(i >= 0 and model.nu and ca.depends_on(model.y[k], model.u)
                     for k, (i, _) in outputs.items())
        slopes = bool(model.nu) and (uses_u or any(i >= 0 for i, _ in inputs.values()))
        return cls(model, outputs, inputs, estimated, slopes)

    @property
    def t0_input(self) -> bool:
        """Whether the rounds need the experiment's ``t0`` (an estimated output delay)."""
        return any(i >= 0 for i, _ in self.outputs.values())

    def shifts(self, centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each output's and each input's delay in a round centred on ``centres``
        (the estimated delays, in the order of :attr:`estimated`)."""
        m = self.model
        out, inp = np.zeros(m.ny), np.zeros(m.nu)
        for table, target in ((self.outputs, out), (self.inputs, inp)):
            for k, (i, v) in table.items():
                target[k] = centres[self.estimated.index(i)] if i >= 0 else v
        return out, inp

    # ------------------------------------------------------------------ the round's model
    def round_model(self) -> Model:
        """The delayed model linearised in the delays about centres given as
        inputs (the module docstring); the same for every round."""
        m = self.model
        u = m.u
        s = ca.SX.sym("du_dt", m.nu) if self.slopes else ca.SX(0, 1)
        c = ca.SX.sym("delay_centre", len(self.estimated))
        t0 = ca.SX.sym("t0") if self.t0_input else ca.SX(0, 1)
        rhs, y = m.rhs, m.y
        moved = ca.SX(u) if m.nu else u
        for i, (j, _) in self.inputs.items():
            if j >= 0:
                moved[i] = u[i] - (m.p[j] - c[self.estimated.index(j)]) * s[i]
        if m.nu:
            rhs = ca.substitute(rhs, u, moved)
            y = ca.substitute(y, u, moved)
        y_new = [y[k] for k in range(m.ny)]
        for k, (j, _) in self.outputs.items():
            if j < 0:
                continue
            g = m.y[k]
            rate = ca.jtimes(g, m.x, m.rhs) + ca.jacobian(g, m.t)
            if m.nu:
                rate = rate + (ca.jtimes(g, u, s) if self.slopes else 0)
            late = ca.if_else(m.t > t0, 1.0, 0.0)
            y_new[k] = y_new[k] - (m.p[j] - c[self.estimated.index(j)]) * rate * late
        names = list(m.u_names) + ([f"d{n}/dt" for n in m.u_names] if self.slopes else []) \
            + [f"centre of {m.p_names[j]}" for j in self.estimated] \
            + (["t0"] if self.t0_input else [])
        units = list(m.u_units) + ([f"{q}/{m.t_unit}" if q else "" for q in m.u_units]
                                   if self.slopes else []) \
            + [m.t_unit] * len(self.estimated) + ([m.t_unit] if self.t0_input else [])
        return m.replaced(t=m.t, u=ca.vertcat(u, s, c, t0), rhs=rhs, y=ca.vertcat(*y_new),
                          u_names=names, u_units=units, output_delays=None, input_delays=None)

    # ------------------------------------------------------------------ the round's data
    def round_experiment(self, exp: Experiment, centres: np.ndarray) -> Experiment:
        """``exp`` restated for a round centred on ``centres``: delayed outputs'
        samples at ``t - c`` (held at ``t0``), the inputs shifted, with the
        round's extra inputs (slopes, centres, ``t0``)."""
        m = self.model
        out_shift, in_shift = self.shifts(centres)
        t, y = exp.t, exp.y
        sigma = exp.sigma
        times, names, values, sig = [], [], [], []
        for k in range(m.ny):
            rows = np.flatnonzero(np.isfinite(y[:, k]))
            times.append(np.maximum(t[rows] - out_shift[k], exp.t0) if out_shift[k] > 0
                         else t[rows])
            names += [m.y_names[k]] * rows.size
            values.append(y[rows, k])
            sig.append(np.full(rows.size, np.nan) if sigma is None else sigma[rows, k])
        sampled = m.nu and isinstance(exp.u, np.ndarray)
        if self.slopes and sampled and exp.u_interpolation == "previous":
            raise ValueError(
                f"Experiment {exp.name!r}: a delay is estimated through the inputs "
                f"{list(m.u_names)}, but they are held between samples "
                "(u_interpolation='previous'): a staircase's delay shows only in its jumps, "
                "which its slope (zero) does not carry; read the samples linearly, give a "
                "smooth callable, or fix the delay")
        inputs = _RoundInputs(exp, m.nu, in_shift, self.slopes,
                              np.asarray(centres, float), self.t0_input)
        late = np.unique(in_shift[in_shift > 0])
        bp = [exp.breakpoints] + [exp.breakpoints + d for d in late]
        if self.slopes and sampled:  # the slopes jump at the (delayed) samples
            bp += [np.unique(exp.t) + d for d in late]
        return Experiment.from_measurements(
            np.concatenate(times), names, np.concatenate(values), m.y_names,
            sigma=None if sigma is None else np.concatenate(sig), u=inputs, x0=exp.x0,
            name=exp.name, t0=exp.t0, breakpoints=np.concatenate(bp),
            parameters=exp.parameters, noise_parameters=exp.noise_parameters)


class _RoundInputs:
    """A round's inputs as a vectorized callable of time (picklable): the
    user's inputs shifted by their delays (held at ``t0`` before), their
    slopes (central differences: a linearly read input's slope on each piece,
    the mean of the two at a sample), the delays' centres and ``t0``."""

    vectorized = True

    def __init__(self, exp: Experiment, nu: int, shift: np.ndarray, slopes: bool,
                 centres: np.ndarray, t0_input: bool) -> None:
        self.exp, self.nu, self.shift = exp, nu, shift
        self.slopes, self.centres, self.t0_input = slopes, centres, t0_input
        span = max(abs(exp.t_end - exp.t0), abs(exp.t_end), 1e-300)
        self.h = 1e-7 * span

    def _shifted(self, times: np.ndarray, k: int, offset: float) -> np.ndarray:
        at = np.maximum(np.maximum(times - self.shift[k], self.exp.t0) + offset, self.exp.t0)
        return self.exp.inputs(at, self.nu)[:, k], at

    def _slope(self, times: np.ndarray, k: int) -> np.ndarray:
        exp = self.exp
        if isinstance(exp.u, np.ndarray):
            # read linearly: the slope of the piece each time lies on (a time
            # on a sample belongs to the piece after it; the transcription
            # looks at its intervals' ends from inside); held before t0
            knots, first = np.unique(exp.t, return_index=True)
            values = np.asarray(exp.u, float)[first, k]
            if knots.size < 2:
                return np.zeros(times.size)
            pieces = np.diff(values) / np.diff(knots)
            at = times - self.shift[k]
            i = np.clip(np.searchsorted(knots, at, side="right") - 1, 0, knots.size - 2)
            inside = (at >= max(exp.t0, knots[0])) & (at < knots[-1])
            return np.where(inside, pieces[i], 0.0)
        hi, t_hi = self._shifted(times, k, self.h)
        lo, t_lo = self._shifted(times, k, -self.h)
        return (hi - lo) / (t_hi - t_lo)

    def __call__(self, times: Any) -> np.ndarray:
        times = np.atleast_1d(np.asarray(times, float))
        parts = []
        if self.nu:
            parts += [self._shifted(times, k, 0.0)[0] for k in range(self.nu)]
            if self.slopes:
                parts += [self._slope(times, k) for k in range(self.nu)]
        parts += [np.full(times.size, c) for c in self.centres]
        if self.t0_input:
            parts.append(np.full(times.size, self.exp.t0))
        return np.column_stack(parts) if parts else np.zeros((times.size, 0))


# ---------------------------------------------------------------------- the rounds
def _delay_box(plan: DelayPlan, experiments: Sequence[Experiment], p0: Any,
               p_bounds: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[bool]]:
    """Start, lower and upper bound of each estimated delay, checked; whether
    each is estimated (a table's ``estimate=False`` or equal bounds fix it)."""
    m = plan.model
    names = [m.p_names[j] for j in plan.estimated]
    longest = max(e.t_end - e.t0 for e in experiments)
    if _is_table(p0):
        table = {q.name: q for q in p0}
        start, lb, ub, free = [], [], [], []
        for n in names:
            if n not in table:
                raise ValueError(f"`p0`: the parameter table has no entry for the delay {n!r}")
            q = table[n]
            if q.scale != "lin":
                raise ValueError(f"the delay {n!r} must be estimated on the linear scale "
                                 f"(it starts at 0 and may be 0), got scale={q.scale!r}")
            start.append(q.start)
            lb.append(-np.inf if q.bounds[0] is None else float(q.bounds[0]))
            ub.append(np.inf if q.bounds[1] is None else float(q.bounds[1]))
            free.append(bool(q.estimate))
        start, lo, hi = np.array(start, float), np.array(lb), np.array(ub)
    else:
        p = np.asarray(p0, float).ravel()
        if p.size != m.np:
            raise ValueError(f"`p0` must have {m.np} entries (the model's parameters), "
                             f"got {p.size}")
        all_lb, all_ub = as_bounds(p_bounds, m.np, "p_bounds")
        start, lo, hi = p[plan.estimated], all_lb[plan.estimated], all_ub[plan.estimated]
        free = list(lo < hi)
    for n, s, a, b in zip(names, start, lo, hi):
        if np.isfinite(a) and a < 0:
            raise ValueError(f"the delay {n!r} has the lower bound {a:g}: a delay is >= 0 "
                             "(a negative one would see the future); give a bound >= 0 "
                             "(unset, it is 0)")
        if b < 0:
            raise ValueError(f"the delay {n!r} has the upper bound {b:g}: a delay is >= 0")
        if not np.isfinite(s) or s < 0:
            raise ValueError(f"the delay {n!r} starts at {s:g}: a delay starts at a number "
                             ">= 0 (in `p0`)")
    lo = np.where(np.isfinite(lo), lo, 0.0)
    hi = np.where(np.isfinite(hi), hi, longest)
    return start, lo, hi, [bool(f) for f in free]


def _is_table(p0: Any) -> bool:
    return isinstance(p0, (list, tuple)) and bool(p0) and all(
        isinstance(q, Parameter) for q in p0)


def _spacing(experiments: Sequence[Experiment]) -> float:
    steps = np.concatenate([np.diff(np.unique(e.t)) for e in experiments])
    steps = steps[steps > 0]
    return float(np.median(steps)) if steps.size else 1.0


def estimate_with_delays(estimate: Callable[..., Any], model: Model,
                         experiments: Sequence[Experiment], p0: Any,
                         options: dict[str, Any]) -> Any:
    """``estimate`` of a model with delays: rounds of ordinary fits (the module
    docstring).  ``options`` are ``estimate``'s other arguments."""
    plan = DelayPlan.of(model)
    experiments = list(experiments)
    options = dict(options)
    if options.get("warm_start") is not None:
        raise ValueError("`warm_start` cannot start a model with delays (each round restates "
                         "the data); pass the earlier result's `p` as `p0`")
    per = options.get("per_experiment")
    per = [per] if isinstance(per, str) else list(per or [])
    for j in plan.estimated:
        n = model.p_names[j]
        if n in per or any(n in e.parameters for e in experiments):
            raise ValueError(f"the delay {n!r} cannot differ by experiment (per_experiment or "
                             "Experiment(parameters=...)); give each its own delay parameter")
    start, lo, hi, free = _delay_box(plan, experiments, p0, options.get("p_bounds"))
    radius = np.full(len(start), FIRST_RADIUS * _spacing(experiments))
    centres = np.clip(start, lo, hi)
    round_model = plan.round_model()
    p_now: Any = p0
    result = None
    rounds = 0
    for rounds in range(1, MAX_ROUNDS + 1):
        exps = [plan.round_experiment(e, centres) for e in experiments]
        box_lo = np.where(free, np.maximum(lo, centres - radius), centres)
        box_hi = np.where(free, np.minimum(hi, centres + radius), centres)
        p_round, bounds = _round_start(plan, p_now, options.get("p_bounds"), centres,
                                       box_lo, box_hi)
        kwargs = dict(options, p_bounds=bounds)
        if rounds > 1:
            kwargs["multistart"] = None
        with warnings.catch_warnings(record=True) as said:
            # a round's warnings (a delay on its trust box, a misfit before the
            # delay is right) are the last round's alone
            warnings.simplefilter("always")
            result = estimate(round_model, exps, p_round, **kwargs)
        if not result.success:
            break
        tau = np.asarray(result.p, float)[plan.estimated]
        move = np.abs(tau - centres)
        std = (np.full(len(tau), np.nan) if result.p_std is None
               else np.asarray(result.p_std, float)[plan.estimated])
        # no finer than the discretisation knows the estimate (the certificate's
        # shift to the ODE's optimum, in standard errors): each round's data sit
        # on another mesh, and the delay moves by that much from round to round
        shift = np.asarray((result.certificate or {}).get("p_shift_se", []), float)
        known = float(np.nanmax(shift)) if shift.size and np.isfinite(shift).any() else 0.0
        tol = np.where(np.isfinite(std) & (std > 0), max(SETTLED, known) * std,
                       SETTLED * radius)
        settled = bool(np.all(move <= tol))
        reached = np.isclose(move, radius, rtol=1e-6) & (tau > lo) & (tau < hi)
        radius = np.where(reached, 2.0 * radius, radius)
        centres = tau
        p_now = _next_start(p0, result, model)
        experiments = [e.with_x0(x) for e, x in zip(experiments, result.x0)]
        if settled:
            break
    else:
        result.success = False
        result.status = "max_iter"
        result.message = (f"the delays did not settle in {MAX_ROUNDS} rounds (each a fit with "
                          "the delays linearised about their last values); last "
                          + ", ".join(f"{model.p_names[j]} = {v:.6g}"
                                      for j, v in zip(plan.estimated, centres)))
    for w in said:
        warn_user(str(w.message), w.category)
    _, user_bounds = _round_start(plan, p0, options.get("p_bounds"), centres,
                                  np.where(free, lo, centres), np.where(free, hi, centres))
    if user_bounds is not None:
        result.settings["p_bounds"] = [np.asarray(b, float).tolist() for b in user_bounds]
    return _user_result(result, plan, experiments, rounds)


def _round_start(plan: DelayPlan, p_now: Any, p_bounds: Any, centres: np.ndarray,
                 box_lo: np.ndarray, box_hi: np.ndarray) -> tuple[Any, Any]:
    """This round's ``p0`` (the delays at their centres) and bounds (the delays
    in their trust box)."""
    m = plan.model
    if _is_table(p_now):
        at = {m.p_names[j]: k for k, j in enumerate(plan.estimated)}
        table = []
        for q in p_now:
            if q.name in at:
                k = at[q.name]
                q = dataclasses.replace(q, start=float(centres[k]),
                                        bounds=(float(box_lo[k]), float(box_hi[k])),
                                        estimate=bool(box_lo[k] < box_hi[k]))
            table.append(q)
        return table, None
    p = np.asarray(p_now, float).ravel().copy()
    lb, ub = as_bounds(p_bounds, m.np, "p_bounds")
    lb, ub = lb.copy(), ub.copy()
    p[plan.estimated] = centres
    lb[plan.estimated], ub[plan.estimated] = box_lo, box_hi
    return p, (lb, ub)


def _next_start(p0: Any, result: Any, model: Model) -> Any:
    """The next round's start: the last estimate (a table's starts moved)."""
    if not _is_table(p0):
        return np.asarray(result.p, float).copy()
    value = dict(zip(result.p_names, np.asarray(result.p, float)))
    return [dataclasses.replace(q, start=float(value[q.name])) if q.name in value else q
            for q in p0]


def _user_result(result: Any, plan: DelayPlan, experiments: list[Experiment],
                 rounds: int) -> Any:
    """The last round's result in the user's terms: predictions at the user's
    times (a delayed output at ``t - tau``), sample counts of the user's data."""
    m = plan.model
    delays = {}
    p = np.asarray(result.p, float)
    for table, names in ((plan.outputs, m.y_names), (plan.inputs, m.u_names)):
        for k, (j, v) in table.items():
            delays[names[k]] = float(p[j]) if j >= 0 else float(v)
    result.settings["delays"] = delays
    result.settings["delay_rounds"] = rounds
    N = sum(e.n_samples for e in experiments)
    if result.n_samples and N:
        result.objective = result.objective * result.n_samples / N
        result.weighted_objective = result.weighted_objective * result.n_samples / N
    result.n_samples = N
    if result._predictor is not None:
        result._predictor = late_predictor(plan, experiments, result._predictor,
                                           p[plan.estimated])
    result._delays = plan
    return result


def late_predictor(plan: DelayPlan, experiments: Sequence[Experiment],
                   inner: Callable[..., np.ndarray], estimated: np.ndarray
                   ) -> Callable[..., np.ndarray]:
    """``predict`` at the user's times from ``inner``, a round's predictor (its
    problem centred on the delays ``estimated``): a delayed output at ``t -
    tau`` (held at ``t0`` before)."""
    m = plan.model
    out_shift, _ = plan.shifts(np.asarray(estimated, float))

    def predict(r: Any, exp_index: int, t: Any, source: str) -> np.ndarray:
        exp = experiments[exp_index]
        times = exp.t if t is None else np.atleast_1d(np.asarray(t, float))
        y = np.empty((times.size, m.ny))
        for shift in np.unique(out_shift):
            cols = np.flatnonzero(out_shift == shift)
            at = np.maximum(times - shift, exp.t0) if shift > 0 else times
            unique, back = np.unique(at, return_inverse=True)
            values = np.asarray(inner(r, exp_index, unique, source), float)
            y[:, cols] = values[back][:, cols]
        return y

    return predict


def simulated_predictor(model: Model, experiments: Sequence[Experiment], p: Any
                        ) -> Callable[..., np.ndarray]:
    """``predict`` of a model with delays from a simulation at ``p`` (a result
    loaded from JSON): a round's problem centred on ``p``'s delays, where it is
    the delayed model exactly."""
    from ..transcription.predict import simulation_predictor

    plan = DelayPlan.of(model)
    centres = np.asarray(p, float)[plan.estimated]
    inner = simulation_predictor(plan.round_model(),
                                 [plan.round_experiment(e, centres) for e in experiments])
    return late_predictor(plan, list(experiments), inner, centres)
