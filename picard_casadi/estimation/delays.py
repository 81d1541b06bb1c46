"""Time delays estimated: rounds of ordinary fits centred on the delays' last values.

A model declares its delays (``Model(output_delays={"r": tau},
input_delays=...)``).  With ``tau`` known the data are shifted; with ``tau``
estimated the sample times would move with a parameter, which no
transcription handles (the samples' intervals change).  Each round is the
problem centred on the delays' current values ``c``
(:mod:`picard_casadi.transcription.delayed`: the delayed model linearised in
``tau`` about ``c``, exact with its derivatives at ``tau = c``), fitted with
every other quantity: one Gauss-Newton step in the delays.  Where the delays
settle (``tau = c`` within :data:`SETTLED` of a standard error, or the
certificate's shift to the ODE's optimum where that is larger) the answer is
a stationary point of the delayed problem, with its standard errors from the
same Fisher information.  A round moves each delay by at most its trust
radius (:data:`FIRST_RADIUS` sample spacings at first, doubled while the
delay keeps reaching it); each starts from the last one's solution (a warm
start), and only the rounds near the answer (:data:`NEAR`) have their
certificate check the model's own solution.  ``multistart`` samples the
delays in their bounds and runs each start's rounds.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..analysis.certificate import MODEL_CHECK
from ..errors import FitWarning
from ..experiment import Experiment
from ..model import Model
from ..parameters import Parameter, is_table
from ..runtime.user_warnings import warn_user
from ..simulate import held_history_words, moving_before_late
from ..transcription.delayed import DelayPlan, late_predictor, simulated_predictor
from .arguments import as_bounds
from .input_notes import note_staircase_inputs
from .fallbacks import NOISE_NOT_POSITIVE, OUTPUT_NOT_POSITIVE
from .noise_plan import noise_plan
from .statement import flat_table

__all__ = ["estimate_with_delays", "MAX_ROUNDS"]

#: at most this many rounds (each a fit) before the delays are declared unsettled
MAX_ROUNDS = 30
#: the first trust radius of a delay, in sample spacings (the median spacing of
#: the experiments' sample times)
FIRST_RADIUS = 2.0
#: a first round whose likelihood is not finite (measured samples where a
#: log-normal output is still 0) is started again from delays a quarter as
#: long (from their lower bounds), at most this many times
SHORTER_STARTS = 3
#: a delay has settled when its last move is below this fraction of its
#: standard error (or of its trust radius, where there is none)
SETTLED = 0.01
#: the round after a move below this fraction of a standard error is likely
#: the last: its certificate checks the model's own solution (the rounds
#: before skip that, 41 % of a quadrotor's fit, analysis/certificate.py)
NEAR = 0.1


# ---------------------------------------------------------------------- the rounds
def _delay_box(plan: DelayPlan, experiments: Sequence[Experiment], p0: Any,
               p_bounds: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[bool]]:
    """Start, lower and upper bound of each estimated delay, checked; whether
    each is estimated (a table's ``estimate=False`` or equal bounds fix it)."""
    m = plan.model
    names = [m.p_names[j] for j in plan.estimated]
    longest = max(e.t_end - e.t0 for e in experiments)
    if is_table(p0):
        table = {q.name: q for q in p0}
        start, lb, ub, free = [], [], [], []
        for n in names:
            if n not in table:
                raise ValueError(f"`p0`: the parameter table has no entry for the delay {n!r}")
            q = table[n]
            if q.scale != "lin":
                raise ValueError(f"the delay {n!r} must be estimated on the linear scale (a "
                                 f"delay may be 0), got scale={q.scale!r}")
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
                             ">= 0 (its entry of `p0`)")
    lo = np.where(np.isfinite(lo), lo, 0.0)
    hi = np.where(np.isfinite(hi), hi, longest)
    for n, s, a, b in zip(names, start, lo, hi):
        if not a <= s <= b:
            raise ValueError(f"the delay {n!r} starts at {s:g}, outside its bounds [{a:g}, "
                             f"{b:g}] (unset bounds are 0 and the longest record, "
                             f"{longest:g}); start inside them or widen them")
        if s >= longest:
            # every sample would sit at t0 (a round with one sample time
            # raised "`t` needs at least 2 distinct sample times")
            raise ValueError(f"the delay {n!r} starts at {s:g}, as long as the longest record "
                             f"({longest:g}) or longer: every sample would lie before it; "
                             "start it shorter (in the record's time unit)")
    return start, lo, hi, [bool(f) for f in free]


def note_held_history(result: Any, model: Model, experiments: Sequence[Experiment],
                      late: np.ndarray) -> None:
    """A :class:`~picard_casadi.FitWarning` where a delayed input changes
    within its delay after ``t0`` (the larger of its start and its estimate):
    its value before the record, a guess, decides the fit
    (:func:`~picard_casadi.simulate.moving_before_late`)."""
    if model.nu == 0:
        return
    seen: dict[int, list[str]] = {}
    for e in experiments:
        for k, u0, at, value in moving_before_late(lambda s, e=e: e.inputs(s, model.nu), e.t0,
                                                   late, np.unique(e.t)):
            seen.setdefault(k, []).append(f"experiment {e.name!r}: " + held_history_words(
                model.u_names[k], u0, e.t0, at, value, float(late[k])))
    for k, notes in seen.items():
        note = notes[0] + (f" (and as much in {len(notes) - 1} other experiment(s))"
                           if len(notes) > 1 else "")
        result.warnings.append(note)
        warn_user(note, FitWarning)


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
    for e in experiments:  # before a round restates them (a y of the wrong width)
        e.check(model)
    # the noise model against the user's data, before a round moves a delayed
    # output's samples (a 0 under log-normal noise at 0.25 h named as t = 0.05)
    noise_plan(options.get("noise"), model, experiments)
    options = dict(options)
    if isinstance(p0, Mapping) and p0 and all(isinstance(q, Parameter) for q in p0.values()):
        p0 = list(p0.values())  # the table's other form (as estimate reads it)
    scale = options.get("parameter_scale")
    if scale is not None:
        # one scale for every parameter leaves the delays linear (a delay may be
        # 0), before a parameter table is made of them; a list must say "lin"
        scales = [scale] * model.np if isinstance(scale, str) else list(scale)
        if len(scales) == model.np:
            for j in plan.estimated:
                if scales[j] != "lin" and not isinstance(scale, str):
                    raise ValueError(f"`parameter_scale`: the delay {model.p_names[j]!r} must "
                                     f"be estimated on the linear scale (a delay may be 0), "
                                     f"got {scales[j]!r}")
                scales[j] = "lin"
            options["parameter_scale"] = scales
    restated = (options.get("per_experiment") is not None
                or any(e.parameters for e in experiments))
    if restated and not is_table(p0) and (options.get("multistart") or 1) <= 1:
        # the rounds' estimates are the restated problem's (a parameter per
        # experiment), no flat vector of the model's: a table carries them
        # from round to round (a user's bias per maneuver: "p0 must have 7
        # entries, got 8" in the second round)
        p0 = flat_table(model, experiments, p0, options.pop("p_bounds", None),
                        options.pop("parameter_scale", None))
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
    # a delay held at its value reads its inputs as given (a staircase exactly)
    plan.fixed = frozenset(j for j, f in zip(plan.estimated, free) if not f)
    if (options.get("multistart") or 1) > 1:
        return _multistart(estimate, model, plan, experiments, p0, options, lo, hi)
    radius = np.full(len(start), FIRST_RADIUS * _spacing(experiments))
    centres = np.clip(start, lo, hi)
    round_model = plan.round_model()
    wall = 0.0
    p_now: Any = p0
    result = None
    rounds = 0
    warm = None
    checked = False  # whether a round's certificate checks the model's own solution
    shortened = 0  # starts of the delays made shorter (a first round not finite)
    for rounds in range(1, MAX_ROUNDS + 1):
        exps = [plan.round_experiment(e, centres) for e in experiments]
        box_lo = np.where(free, np.maximum(lo, centres - radius), centres)
        box_hi = np.where(free, np.minimum(hi, centres + radius), centres)
        p_round, bounds = _round_start(plan, p_now, options.get("p_bounds"), centres,
                                       box_lo, box_hi)
        kwargs = dict(options, p_bounds=bounds)
        if warm is not None and all(
                (a.n_samples, a.t0, a.t_end) == (b.n_samples, b.t0, b.t_end)
                for a, b in zip(warm._disc.experiments, exps)):
            # from the last round's solution on its mesh's step (the delays
            # moved the inputs by less than their trust radius): no guess, no
            # first weights, no settling of the start again
            kwargs.update(warm_start=warm, T=warm._disc.T)
        with warnings.catch_warnings(record=True) as said:
            # a round's warnings (a delay on its trust box, a misfit before the
            # delay is right) are the last round's alone
            warnings.simplefilter("always")
            token = MODEL_CHECK.set(checked)
            try:
                result = estimate(round_model, exps, p_round, **kwargs)
            finally:
                MODEL_CHECK.reset(token)
        wall += result.wall_time
        last_centres = centres.copy()
        if (not result.success and warm is None and shortened < SHORTER_STARTS
                and result.status in (OUTPUT_NOT_POSITIVE, NOISE_NOT_POSITIVE)
                and np.any(free & (centres > lo))):
            # a start so late that measured samples fall where the output is
            # still 0, whose log-normal (or proportional) likelihood is not
            # finite: a lag started at 0.6 h, the first sample at 0.5 h, failed
            # with every method; again from a quarter as late
            shortened += 1
            centres = np.where(free, lo + (centres - lo) / 4.0, centres)
            continue
        if not result.success:
            break
        warm = result if result._X is not None else None
        tau = _delays_of(result, result.p, plan)
        move = np.abs(tau - centres)
        std = (np.full(len(tau), np.nan) if result.p_std is None
               else _delays_of(result, result.p_std, plan))
        # no finer than the discretisation knows the estimate (the certificate's
        # shift to the ODE's optimum, in standard errors): each round's data sit
        # on another mesh, and the delay moves by that much from round to round
        shift = np.asarray((result.certificate or {}).get("p_shift_se", []), float)
        known = float(np.nanmax(shift)) if shift.size and np.isfinite(shift).any() else 0.0
        tol = np.where(np.isfinite(std) & (std > 0), max(SETTLED, known) * std,
                       SETTLED * radius)
        settled = bool(np.all(move <= tol))
        if settled and not checked:
            # the answer's round checks the model's own solution too: once more
            checked, settled = True, False
        else:
            # a round that moves the delays this little is likely the last
            checked = checked or bool(np.all(move <= NEAR * np.where(
                np.isfinite(std) & (std > 0), std, radius)))
        reached = np.isclose(move, radius, rtol=1e-6) & (tau > lo) & (tau < hi)
        radius = np.where(reached, 2.0 * radius, radius)
        centres = np.clip(tau, lo, hi)  # (round-off beyond a bound)
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
    # a delay on its round's trust box, not on a bound of the user's (a
    # quadrotor's fit "ended on its upper bound 0.004 (p_bounds)", its bound 0.2)
    reword = _trust_box_words(model, plan, rounds, box_lo, box_hi, lo, hi, free)
    result.message = reword(result.message)
    result.warnings = [reword(w) for w in result.warnings]
    for w in said:
        warn_user(reword(str(w.message)), w.category)
    # the rounds read the inputs through a callable: the user's own samples
    # say whether a staircase is read as ramps (a quadrotor's 250 Hz command
    # read linearly: its delay 2-3.5 standard errors late, no word)
    note_staircase_inputs(result, model, experiments, plan.moving_inputs)
    note_held_history(result, model, experiments, plan.shifts(np.maximum(start, centres))[1])
    _, user_bounds = _round_start(plan, p0, options.get("p_bounds"), centres,
                                  np.where(free, lo, centres), np.where(free, hi, centres))
    scales = options.get("parameter_scale")
    scaled = scales is not None and any(
        s != "lin" for s in ([scales] if isinstance(scales, str) else scales))
    if user_bounds is not None and not scaled:
        result.settings["p_bounds"] = [np.asarray(b, float).tolist() for b in user_bounds]
    elif result.settings.get("p_bounds") is not None:
        # a table's (restated) bounds, in the result's order and on its
        # scales (a log10 fit's linear bounds had profiled log10(ka) from 0.5):
        # the delays' are the user's, not the last round's trust box
        lower, upper = (list(b) for b in result.settings["p_bounds"])
        for k, j in enumerate(plan.estimated):
            name = model.p_names[j]
            if name in result.p_names and len(lower) == len(result.p_names):
                i = list(result.p_names).index(name)
                lower[i], upper[i] = ((float(lo[k]), float(hi[k])) if free[k]
                                      else (float(centres[k]), float(centres[k])))
        result.settings["p_bounds"] = [lower, upper]
    result.wall_time = wall
    return _user_result(result, plan, experiments, rounds, last_centres)


def _trust_box_words(model: Model, plan: DelayPlan, rounds: int, box_lo: np.ndarray,
                     box_hi: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                     free: Sequence[bool]) -> Callable[[str], str]:
    """A rewording of a round's words "tau ended on its upper bound 0.004"
    where that bound is the round's trust box, not the user's."""
    pairs = []
    for k, j in enumerate(plan.estimated):
        for side, b in (("lower", box_lo[k]), ("upper", box_hi[k])):
            if free[k] and b not in (lo[k], hi[k]):
                name = model.p_names[j]
                words = (f"{name} on the edge {b:g} of its trust region in delay round "
                         f"{rounds} ({box_lo[k]:g} to {box_hi[k]:g}; its bounds are "
                         f"{lo[k]:g} to {hi[k]:g})")
                pairs += [(f"{name} ended on its {side} bound {b:g} (p_bounds)", words),
                          (f"{name} ended on its {side} bound {b:g}", words),
                          (f"{name} on its {side} bound {b:g}", words)]

    # a delay held at 0 by its floor: the data want the input earlier than
    # recorded (a flow 12 ms late against its pressure), which no delay says
    floors = [model.p_names[j] for k, j in enumerate(plan.estimated) if free[k] and lo[k] == 0]

    def reword(text: str) -> str:
        said = [s for s, _ in pairs if s in text]
        for old, words in pairs:
            text = text.replace(old, words)
        for name in floors:
            if text.startswith(f"{name} ended on its lower bound 0 (p_bounds)"):
                text = text.replace(
                    "If the bound is not a physical limit, widen it and fit again",
                    "A delay is not negative: the data may want the input to act before its "
                    "samples say (the input recorded late against the outputs); shift the "
                    "input's times earlier, or delay the outputs instead (Model(output_delays="
                    "...) for input_delays, or the reverse), and fit again")
        # (a round's box is no physical limit: "widen it" would not help)
        return text + (" (a round's trust region holds a delay near its last value: one on "
                       "its edge had further to go; start it nearer its value, p0)"
                       if said else "")
    return reword


def _multistart(estimate: Callable[..., Any], model: Model, plan: DelayPlan,
                experiments: list[Experiment], p0: Any, options: dict[str, Any],
                lo: np.ndarray, hi: np.ndarray) -> Any:
    """``multistart`` of a model with delays: the starts sample the delays in
    their bounds too, and each start runs its own rounds."""
    from .multistart import run_multistart

    if is_table(p0):
        raise ValueError("`multistart` with a parameter table and delays is not available; "
                         "pass `p0` and `p_bounds` as arrays")
    p = np.asarray(p0, float).ravel()
    lb, ub = as_bounds(options.get("p_bounds"), model.np, "p_bounds")
    lb, ub = lb.copy(), ub.copy()
    lb[plan.estimated], ub[plan.estimated] = lo, hi
    kwargs = {k: v for k, v in options.items()
              if k not in ("method", "multistart", "seed", "executor", "n_jobs", "p_bounds")}
    return run_multistart(estimate, model, experiments, p, options.get("method"),
                          int(options["multistart"]), options.get("seed", 0),
                          dict(kwargs, p_bounds=(lb, ub)), executor=options.get("executor"),
                          n_jobs=options.get("n_jobs"))


def _round_start(plan: DelayPlan, p_now: Any, p_bounds: Any, centres: np.ndarray,
                 box_lo: np.ndarray, box_hi: np.ndarray) -> tuple[Any, Any]:
    """This round's ``p0`` (the delays at their centres) and bounds (the delays
    in their trust box)."""
    m = plan.model
    if is_table(p_now):
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
    if not is_table(p0):
        return np.asarray(result.p, float).copy()
    value = dict(zip(result.p_names, np.asarray(result.p, float)))
    table = [dataclasses.replace(q, start=float(value[q.name])) if q.name in value else q
             for q in p0]
    # a parameter per experiment (per_experiment's "b[run 1]"): its own entry,
    # the shared one's bounds and scale, so that the next round starts there
    shared = {q.name: q for q in p0}
    for name, v in value.items():
        base = name.split("[", 1)[0]
        if name not in shared and name.endswith("]") and base in shared:
            table.append(dataclasses.replace(shared[base], name=name, start=float(v)))
    return table


def _delays_of(result: Any, values: Any, plan: DelayPlan) -> np.ndarray:
    """The delays' entries of ``values`` (``result.p`` or ``p_std``), found by
    name: a parameter table's order is its own, not the model's."""
    at = {n: i for i, n in enumerate(result.p_names)}
    values = np.asarray(values, float)
    return np.array([values[at[plan.model.p_names[j]]] for j in plan.estimated])


def _user_result(result: Any, plan: DelayPlan, experiments: list[Experiment],
                 rounds: int, centres: np.ndarray) -> Any:
    """The last round's result in the user's terms: predictions at the user's
    times (a delayed output at ``t - tau``), sample counts of the user's data."""
    m = plan.model
    p = np.zeros(m.np)
    p[plan.estimated] = _delays_of(result, result.p, plan)
    late_outputs, late_inputs = m.delay_values(p)
    result.settings["delays"] = (
        {m.y_names[k]: float(late_outputs[k]) for k in plan.outputs}
        | {m.u_names[k]: float(late_inputs[k]) for k in plan.inputs})
    result.settings["delay_rounds"] = rounds
    N = sum(e.n_samples for e in experiments)
    if result.n_samples and N:
        result.objective = result.objective * result.n_samples / N
        result.weighted_objective = result.weighted_objective * result.n_samples / N
    result.n_samples = N
    if result._predictor is not None:
        # the fitted curve (collocation) of the last round, centred on its
        # centres; a simulation from a round centred on the estimate itself,
        # where it is the delayed model exactly
        fitted = late_predictor(plan, experiments, result._predictor, centres)
        exact: dict[bytes, Any] = {}  # by p: a round's problem centred there

        def predict(r: Any, exp_index: int, t: Any, source: str) -> np.ndarray:
            if source != "simulate" or result._statement is not None:
                # (a restated problem's p is not the model's: its rounds' own)
                return fitted(r, exp_index, t, source)
            key = np.asarray(r.p, float).tobytes()
            if key not in exact:
                exact[key] = simulated_predictor(plan.model, experiments, r.p, plan)
            return exact[key](r, exp_index, t, source)

        result._predictor = predict
    if plan.estimated:
        result.message += (f"; the delays settled in {rounds} round(s) of fits"
                           if result.success else f" (delay round {rounds})")
    late = {m.y_names[k]: float(late_outputs[k]) for k in plan.outputs if late_outputs[k] > 0}
    if not result.success and late and "t = " in result.message:
        # a round places a delayed output's samples earlier: its times are not
        # the user's (a pharmacometrician's samples at 0.25 h and 0.5 h named
        # as t = 0.05 and t = 0)
        shifts = ", ".join(f"{n} by {d:.6g}" for n, d in late.items())
        result.message += (f"; the times named are the round's, where a delayed output's "
                           f"samples sit earlier by its delay ({shifts}; at t0 where that "
                           "is before it)")
    result._delays, result._model = plan, plan.model  # (the user's, not a round's)
    # (a fitted run's band: the delays' rounds are other models; a new run's
    # by central differences of the delayed model, analysis/prediction_band.py)
    result._sensitivities = None
    return result
