"""A model's time delays restated as an ordinary problem centred on given delays.

``Model(output_delays=..., input_delays=...)``: output ``y_k`` observed as
``g_k(t - tau)``, input ``u_i`` acting as ``u_i(t - tau)``.  A problem
*centred* on delays ``c`` (:class:`DelayPlan`) is one no transcription needs
to know about:

- the samples of a delayed output are placed at ``t - c`` (held at ``t0``
  before ``t0 + c``), and its output is ``g_k - (tau - c) dg_k/dt``
  (``dg/dt = g_x f + g_u du/dt + g_t``, exact symbolic derivatives; zero
  where the sample was held at ``t0``);
- a delayed input is ``u_i(t - c) - (tau - c) du_i/dt(t - c)``; a sampled
  input held between samples (a staircase) whose delay is estimated is read
  with each jump a ramp centred on it (:func:`centred_ramps`): a staircase's
  delay lives in its jumps, which its slope (zero) does not carry, and a ramp
  centred on the jump keeps the input's integral (a linear reading, a ramp
  from the sample before, puts it half a sample early: a quadrotor's delay
  estimated 1.3-1.8 ms late at 2 ms rows, 2-3.5 standard errors);
- ``c``, the slopes ``du/dt`` and ``t0`` enter as inputs, so the model's
  functions are built (and compiled) once for every centre.

At ``tau = c`` the centred model is the delayed model exactly, and its
derivatives in ``tau`` are the exact ones; :mod:`picard_casadi.estimation.delays`
estimates the delays in rounds of such problems.  A known delay (a number)
is simply the data shifted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import casadi as ca
import numpy as np

from ..experiment import Experiment
from ..inputs import is_linear
from ..model import Model
from ..simulate import late_columns

__all__ = ["DelayPlan", "centred_ramps", "late_predictor", "simulated_predictor"]


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
    fixed : frozenset of int
        The delays held at their values (equal bounds, ``estimate=False``):
        their inputs are read as given (a staircase held exactly).
    """

    model: Model
    outputs: dict[int, tuple[int, float]]
    inputs: dict[int, tuple[int, float]]
    estimated: list[int]
    slopes: bool
    fixed: frozenset[int] = frozenset()

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
    def moving_inputs(self) -> list[int]:
        """The inputs whose delay is estimated and not held at its value."""
        return [k for k, (j, _) in self.inputs.items() if j >= 0 and j not in self.fixed]

    @property
    def t0_input(self) -> bool:
        """Whether the rounds need the experiment's ``t0`` (an estimated output delay)."""
        return any(i >= 0 for i, _ in self.outputs.values())

    def shifts(self, centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each output's and each input's delay in a round centred on ``centres``
        (the estimated delays, in the order of :attr:`estimated`)."""
        p = np.zeros(self.model.np)
        p[self.estimated] = centres
        return self.model.delay_values(p)

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
        knots = np.unique(t)
        for k in range(m.ny):
            rows = np.flatnonzero(np.isfinite(y[:, k]))
            times.append(_snapped(np.maximum(t[rows] - out_shift[k], exp.t0), knots)
                         if out_shift[k] > 0 else t[rows])
            names += [m.y_names[k]] * rows.size
            values.append(y[rows, k])
            sig.append(np.full(rows.size, np.nan) if sigma is None else sigma[rows, k])
        ramps = self._ramped_inputs(exp)
        sampled = m.nu and isinstance(exp.u, np.ndarray)
        # a round model without inputs (known output delays of a model without
        # inputs) takes none: its data were refused as "`u` was given"
        has_inputs = bool(m.nu or self.estimated or self.t0_input)
        inputs = _RoundInputs(exp, m.nu, in_shift, self.slopes,
                              np.asarray(centres, float), self.t0_input,
                              ramps) if has_inputs else None
        late = np.unique(in_shift[in_shift > 0])
        bp = [exp.breakpoints] + [exp.breakpoints + d for d in late]
        if self.slopes and sampled:  # the slopes jump at the (delayed) samples
            linear = [k for k in range(m.nu) if is_linear(exp.u_interpolation, k)]
            bp += [np.unique(exp.t) + d for d in np.unique(in_shift[linear]) if d > 0]
            bp += [inputs.ramps[k][0] + in_shift[k] for k in ramps]
        out = Experiment.from_measurements(
            np.concatenate(times), names, np.concatenate(values), m.y_names,
            sigma=None if sigma is None else np.concatenate(sig), u=inputs, x0=exp.x0,
            name=exp.name, t0=exp.t0, breakpoints=np.concatenate(bp),
            parameters=exp.parameters, noise_parameters=exp.noise_parameters)
        # the user's start, given or not (a clock left at the first sample with
        # a dose at 0: the lag 22.6 standard errors short, no word)
        out._t0_given = getattr(exp, "_t0_given", True)
        return out

    def _ramped_inputs(self, exp: Experiment) -> list[int]:
        """The inputs of ``exp`` held between samples whose delay is estimated
        (read as :func:`centred_ramps`); a ValueError where an output reads
        such an input, or a delayed output a held input, directly (its
        likelihood jumps with the delay)."""
        m = self.model
        if m.nu and callable(exp.u):
            self._refuse_jumps(exp)
        if not (m.nu and isinstance(exp.u, np.ndarray)):
            return []
        held = [k for k in range(m.nu) if not is_linear(exp.u_interpolation, k)]
        ramps = [k for k in self.moving_inputs if k in held]
        direct = [k for k in ramps if ca.depends_on(m.y, m.u[k])]
        late_out = [k for k, (j, _) in self.outputs.items() if j >= 0 and j not in self.fixed
                    and any(ca.depends_on(m.y[k], m.u[i]) for i in held)]
        if direct or late_out:
            what = (f"the outputs read the held input(s) "
                    f"{[m.u_names[k] for k in direct]} directly" if direct else
                    f"the delayed output(s) {[m.y_names[k] for k in late_out]} read held "
                    "inputs directly")
            raise ValueError(
                f"Experiment {exp.name!r}: a delay is estimated, and {what} (a staircase, "
                "u_interpolation='previous'): such an output jumps as the delay moves a "
                "sample across a jump, so its likelihood has no slope in the delay; read "
                "the samples linearly (u_interpolation='linear'), give a smooth callable, or "
                "fix the delay (equal bounds, or its Parameter(estimate=False))")
        return ramps

    def _refuse_jumps(self, exp: Experiment) -> None:
        """A ValueError where a callable input whose delay is estimated jumps
        (at a breakpoint or between them): a quadrotor's staircase command as
        a function with breakpoints at its ticks ran 14 minutes, the delay
        stuck at its start, and ended with advice about the mesh."""
        m = self.model
        late = self.moving_inputs
        if not late:
            return
        span = max(abs(exp.t_end - exp.t0), abs(exp.t_end), 1e-300)
        bp = exp.breakpoints
        eps = 1e-9 * span
        try:
            gap = np.abs(np.asarray(exp.inputs(bp + eps, m.nu), float)
                         - np.asarray(exp.inputs(bp - eps, m.nu), float)) if bp.size else None
            spread = np.ptp(np.asarray(exp.inputs(np.linspace(exp.t0, exp.t_end, 200),
                                                  m.nu), float), axis=0)
        except (TypeError, ValueError):
            return
        jumps = exp.input_jumps(m.nu)
        # (a smooth input moves by its slope times 2 eps across a breakpoint)
        jumping = [k for k in late if jumps or (gap is not None and np.any(
            gap[:, k] > 1e-6 * max(float(spread[k]), 1e-300)))]
        if jumping:
            raise ValueError(
                f"Experiment {exp.name!r}: the delay of input(s) "
                f"{[m.u_names[k] for k in jumping]} is estimated, and the function that gives "
                "them jumps (a staircase): its delay lives in the jumps, which a function's "
                "slope does not carry; give its samples as an array held between them "
                "(Experiment(..., u_interpolation='previous'): the delay's rounds read each "
                "jump as a narrow ramp), or fix the delay")


def centred_ramps(t: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A staircase (``values[i]`` held on ``[t[i], t[i + 1])``) with each jump
    read as a ramp centred on it, a tenth of the nearer of its two sample
    spacings wide: the knots and values of its piecewise-linear reading.
    The ramp keeps the staircase's integral, and its slope carries the
    jump's time (a delay's derivative).  Checked against the held
    staircase's likelihood with the delay known (tests/test_delays.py): a
    ramp as wide as the spacing put the estimate 0.2 standard errors off
    that optimum and the likelihood 0.7 above it; a tenth, 0.003 and 0.005."""
    t, v = np.asarray(t, float), np.asarray(values, float)
    jumps = np.flatnonzero(v[1:] != v[:-1]) + 1
    if jumps.size == 0:
        return t[:1], v[:1]
    h = np.diff(t)
    before = h[jumps - 1]
    after = np.where(jumps < t.size - 1, h[np.minimum(jumps, h.size - 1)], before)
    half = 0.05 * np.minimum(before, after)
    knots = np.concatenate([t[:1], np.column_stack([t[jumps] - half, t[jumps] + half]).ravel()])
    level = np.concatenate([v[:1], np.column_stack([v[jumps - 1], v[jumps]]).ravel()])
    keep = np.concatenate([[True], np.diff(knots) > 0])  # ramps that touch: one knot
    return knots[keep], level[keep]


def _snapped(times: np.ndarray, knots: np.ndarray) -> np.ndarray:
    """``times`` with those within round-off of a sample time (``knots``) on it:
    a delay of whole sample spacings puts the late samples on the others
    (1 - 0.3 is 0.7000000000000001), not 1e-16 beside them."""
    if knots.size == 0:
        return times
    tol = 1e-9 * max(1.0, float(np.max(np.abs(knots))))
    i = np.clip(np.searchsorted(knots, times), 1, max(knots.size - 1, 1))
    lo, hi = knots[i - 1], knots[np.minimum(i, knots.size - 1)]
    near = np.where(np.abs(times - lo) <= np.abs(times - hi), lo, hi)
    return np.where(np.abs(times - near) <= tol, near, times)


class _RoundInputs:
    """A round's inputs as a vectorized callable of time (picklable): the
    user's inputs shifted by their delays (held at ``t0`` before), their
    slopes (central differences: a linearly read input's slope on each piece,
    the mean of the two at a sample), the delays' centres and ``t0``."""

    vectorized = True

    def __init__(self, exp: Experiment, nu: int, shift: np.ndarray, slopes: bool,
                 centres: np.ndarray, t0_input: bool, ramps: Sequence[int] = ()) -> None:
        self.exp, self.nu, self.shift = exp, nu, shift
        self.slopes, self.centres, self.t0_input = slopes, centres, t0_input
        span = max(abs(exp.t_end - exp.t0), abs(exp.t_end), 1e-300)
        self.h = 1e-7 * span
        #: input -> the knots and values of its staircase read as centred ramps
        self.ramps: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if ramps:
            knots, first = np.unique(exp.t, return_index=True)
            u = np.asarray(exp.u, float)[first]
            self.ramps = {k: centred_ramps(knots, u[:, k]) for k in ramps}

    def _values(self, times: np.ndarray) -> np.ndarray:
        """The inputs at ``times`` (not delayed): the ramps' where read so."""
        out = np.array(self.exp.inputs(times, self.nu), float)
        for k, (knots, values) in self.ramps.items():
            out[:, k] = np.interp(times, knots, values)
        return out

    def _shifted(self, times: np.ndarray, k: int, offset: float) -> np.ndarray:
        """Input ``k`` at ``offset`` from its late time (for a central difference)."""
        at = np.maximum(np.maximum(times - self.shift[k], self.exp.t0) + offset, self.exp.t0)
        return self._values(at)[:, k], at

    def _slope(self, times: np.ndarray, k: int) -> np.ndarray:
        exp = self.exp
        if isinstance(exp.u, np.ndarray):
            # read linearly (or as ramps): the slope of the piece each time
            # lies on (a time on a knot belongs to the piece after it; the
            # transcription looks at its intervals' ends from inside); held
            # before t0.  A staircase held exactly (its delay fixed): none.
            if k in self.ramps:
                knots, values = self.ramps[k]
            elif not is_linear(exp.u_interpolation, k):
                return np.zeros(times.size)
            else:
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
            late = late_columns(self._values, times, self.shift, self.exp.t0)
            parts += [late[:, k] for k in range(self.nu)]
            if self.slopes:
                parts += [self._slope(times, k) for k in range(self.nu)]
        parts += [np.full(times.size, c) for c in self.centres]
        if self.t0_input:
            parts.append(np.full(times.size, self.exp.t0))
        return np.column_stack(parts) if parts else np.zeros((times.size, 0))


def late_predictor(plan: DelayPlan, experiments: Sequence[Experiment],
                   inner: Callable[..., np.ndarray], estimated: np.ndarray
                   ) -> Callable[..., np.ndarray]:
    """``predict`` at the user's times from ``inner``, a round's predictor (its
    problem centred on the delays ``estimated``): a delayed output at ``t -
    tau`` (held at ``t0`` before)."""
    out_shift, _ = plan.shifts(np.asarray(estimated, float))

    def predict(r: Any, exp_index: int, t: Any, source: str) -> np.ndarray:
        exp = experiments[exp_index]
        times = exp.t if t is None else np.atleast_1d(np.asarray(t, float))

        def at(s: np.ndarray) -> np.ndarray:  # each distinct time once, in order
            unique, back = np.unique(s, return_inverse=True)
            return np.asarray(inner(r, exp_index, unique, source), float)[back]
        return late_columns(at, times, out_shift, exp.t0)

    return predict


def simulated_predictor(model: Model, experiments: Sequence[Experiment], p: Any,
                        plan: DelayPlan | None = None) -> Callable[..., np.ndarray]:
    """``predict`` of a model with delays from a simulation at ``p`` (a result
    loaded from JSON): a round's problem centred on ``p``'s delays, where it is
    the delayed model exactly (``plan``: the fit's, with its fixed delays)."""
    from ..transcription.predict import simulation_predictor

    plan = DelayPlan.of(model) if plan is None else plan
    centres = np.asarray(p, float)[plan.estimated]
    inner = simulation_predictor(plan.round_model(),
                                 [plan.round_experiment(e, centres) for e in experiments])
    return late_predictor(plan, list(experiments), inner, centres)
