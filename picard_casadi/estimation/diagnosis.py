"""What a finished run's result says beyond the optimiser's verdict.

:func:`~picard_casadi.estimate` calls these on the assembled result:

* :func:`check_fit`: a converged estimate whose residuals are systematic
  and far above the data's noise gets a :class:`~picard_casadi.FitWarning`
  (the test itself: :mod:`picard_casadi.analysis.fit_check`);
* :func:`diagnose_open_gaps`: a run that hit ``max_iter`` with its
  continuity gaps open is told whether the model's solution exists at its
  last ``p`` at all, instead of being advised more iterations;
* :func:`diagnose_stuck_step`: a ``picard-gn`` run whose step could gain
  nothing with the gaps open is told whether the model blows up at its
  last ``p``, is unstable along the trajectory (or, stable, has a step
  that no longer describes the merit), where condensing (the interval
  starts eliminated through the intervals' sensitivities) loses all
  precision and IPOPT, which keeps them unknown, does not;
* :func:`late_clock_note`: known initial states of an experiment whose
  clock was left at a first sample later than 0 are named (a dose at time
  0 fitted as a dose at the first sample);
* :func:`note_bounds_reached`: a converged estimate with a free parameter
  on its bound gets a :class:`~picard_casadi.FitWarning` naming it, and its
  confidence interval stops at the bound;
* parameters that ran off along a valley the data do not bound:
  :mod:`picard_casadi.estimation.valleys`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import casadi as ca
import numpy as np

from ..analysis.certificate import short_of_optimum
from ..analysis.fit_check import (NAMED_OUTLIERS, ON_BOUND_NOTE, ON_BOUNDS_NOTE,
                                  beyond_given_noise, gross_outliers, is_fit_note, lack_of_fit)
from ..analysis.input_timing import own_input_rate_notes
from ..analysis.reach import INERT_REACH
from ..analysis.repeated_values import repeated_values
from ..analysis.replicates import replicate_misfit
from ..analysis.serial_correlation import serial_correlation_notes
from ..analysis.time_units import time_unit_notes
from ..analysis.unstable_rest import unstable_rest_note
from ..analysis.poorly_determined import is_poorly_determined_note
from ..errors import FitWarning, SimulationError
from ..experiment import Experiment
from ..model import Model
from ..result import EstimationResult
from ..runtime.user_warnings import warn_user
from ..inputs import sampled_input_names
from ..simulate import own_inputs, simulate
from ..transcription.discretisation import Discretisation
from .setup import x0_bound_edges

__all__ = ["check_fit", "declare_plateau", "PLATEAU_REACH", "unit_outlier_note", "UNIT_RATIO",
           "UNIT_CERTAIN",
           "outside_box_note", "bounds_reached", "held_by_bounds_note",
           "drop_uncertainty",
           "fitted_outputs",
           "diagnose_open_gaps", "diagnose_stuck_step", "note_bounds_reached", "OPEN_GAP",
           "ON_BOUND", "late_clock_note", "UNSTABLE_THERE",
           "unmeasured_outputs_note", "linear_commands_note", "sign_flip_note",
           "sampled_input_names",
           "clipped_intervals"]

#: a parameter within this fraction of its bound's size (or of the box's width,
#: where larger) is on the bound: IPOPT stops within about 1e-8 of it
ON_BOUND = 1e-7
#: ... or within this fraction of its standard error: an interior-point method
#: stops short of an active bound by its barrier's last step (ipopt and
#: shooting on a user's toggle switch: 1.4e-6 inside an upper bound of 5,
#: standard error 2.6, and no note), and the data cannot tell the two apart
ON_BOUND_SE = 1e-3
#: a standard error this many times the parameter's size (or the bound's, or
#: 1) is no measure of closeness to a bound
UNDETERMINED_SE = 1e3


def bounds_reached(p: np.ndarray, lower: Any, upper: Any, std: Any = None
                   ) -> list[tuple[int, str, float]]:
    """``(index, "lower" or "upper", bound)`` of each free parameter of ``p``
    on a bound: within :data:`ON_BOUND` of its size or :data:`ON_BOUND_SE` of
    its standard error ``std`` (where given), the nearer bound where both."""
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    span = np.where(np.isfinite(upper - lower), upper - lower, 0.0)
    std = np.zeros_like(p) if std is None else np.nan_to_num(np.asarray(std, float), nan=0.0,
                                                              posinf=0.0)
    reached = []
    for i in np.flatnonzero(lower < upper):
        sides = []
        for side, b in (("lower", lower[i]), ("upper", upper[i])):
            # a standard error far above the parameter's size says the data do
            # not determine it: being within it of a bound is no sign of the
            # bound (k12 = 0.144 "on its lower bound 0" with a standard error 3e5)
            se_part = (ON_BOUND_SE * std[i]
                       if std[i] <= UNDETERMINED_SE * max(abs(p[i]), abs(b), 1.0) else 0.0)
            if span[i] > 0:
                # at most half the box: a standard error wider than the box
                # put a user's b = 5.2e-5 in [0, 0.01] "on both its bounds"
                se_part = min(se_part, 0.5 * span[i])
            close = max(ON_BOUND * max(abs(b), span[i], 1e-300), se_part)
            if np.isfinite(b) and abs(p[i] - b) <= close:
                sides.append((abs(p[i] - b), side, b))
        if sides:  # the nearer bound
            _, side, b = min(sides)
            reached.append((int(i), side, float(b)))
    return reached


def note_bounds_reached(result: EstimationResult, lower: np.ndarray, upper: np.ndarray,
                        states: tuple | None = None) -> None:
    """Name the free parameters of a converged ``result`` that ended on a bound.

    On a bound means within :data:`ON_BOUND` of its size or :data:`ON_BOUND_SE`
    of the standard error.  There the bound, not the data, holds the estimate:
    the data would move it further, and the fit may be far worse than the
    unbounded one (an SIR fit with the recovery rate held at 0.15 against a
    true 0.2: SSR doubled, success, and a 95 % interval reaching past the
    bound, without a word).
    Adds a :class:`~picard_casadi.FitWarning` (and a line in
    ``result.warnings``) and clips ``result.p_ci`` to the bounds; the
    standard errors stay those of an interior optimum and the warning says so.
    ``states`` ``(x_lb, x_ub, estimate_x0, model)``: the estimated initial
    states on an edge of ``x0_bounds`` (not of the model's ``x_domain``) are
    named too, in a note of their own (:func:`_initial_states_on_bounds`).
    """
    if states is not None:
        _initial_states_on_bounds(result, *states)
    reached = bounds_reached(np.asarray(result.p, float), lower, upper,
                             getattr(result, "p_std", None))
    if len(reached) == 1:
        i, side, b = reached[0]
        note = (f"{result.p_names[i]}{ON_BOUND_NOTE}{side} bound {b:g} (p_bounds): there the "
                "bound, not the data, holds it, and the data would move it further; its "
                "standard error assumes an optimum inside the bounds. If the bound is not a "
                "physical limit, widen it and fit again")
    elif reached:
        # one note for all (PEtab's Armistead: five parameters, five notes of
        # three lines each)
        groups: dict[tuple[str, float], list[str]] = {}
        for i, side, b in reached:
            groups.setdefault((side, float(b)), []).append(result.p_names[i])
        where = "; ".join(f"{_listed(names)} on the {side} {b:g}"
                          for (side, b), names in groups.items())
        note = (f"{_listed([result.p_names[i] for i, _, _ in reached])}{ON_BOUNDS_NOTE} "
                f"({where}; p_bounds): there the bounds, not the data, hold them, and the data "
                "would move them further; their standard errors assume an optimum inside the "
                "bounds. If a bound is not a physical limit, widen it and fit again")
    if reached:
        result.warnings.append(note)
        warn_user(note, FitWarning)
    if reached and getattr(result, "p_ci", None) is not None:
        result.p_ci = clipped_intervals(result.p_ci, lower, upper)


def _initial_states_on_bounds(result: EstimationResult, x_lb: np.ndarray, x_ub: np.ndarray,
                              estimate_x0: np.ndarray, model: Model) -> None:
    """A note naming the estimated initial states on an edge of ``x0_bounds``
    (a neuron's local minimum held its gates' m at 0 and h at 1, parameters
    on bounds were named and the states were not); not a fit warning: a
    state may start where its box begins."""
    nx = len(x_lb)
    free = np.broadcast_to(np.asarray(estimate_x0, bool), (nx,))
    own_lo, own_hi = x0_bound_edges(model, x_lb, x_ub)
    span = np.where(np.isfinite(x_ub - x_lb), x_ub - x_lb, 0.0)
    found = []
    for e, x0 in enumerate(result.x0):
        x0 = np.asarray(x0, float)[:nx]
        for i in np.flatnonzero(free[:x0.size]):
            for b, own in ((x_lb[i], own_lo[i]), (x_ub[i], own_hi[i])):
                close = ON_BOUND * max(abs(b), span[i], 1e-300)
                if own and abs(x0[i] - b) <= close:
                    name = (result.experiment_names[e] if e < len(result.experiment_names)
                            else str(e))
                    found.append(f"{result.x_names[i]} = {b:g} of {name!r}")
    if found:
        shown = ", ".join(found[:6]) + (f" and {len(found) - 6} more" if len(found) > 6 else "")
        note = (f"initial state(s) ended on their x0_bounds: {shown}; there the bound, not "
                "the data, holds them (a local minimum the box stopped, or a start where "
                "the box begins); where the bound is no physical limit, widen it")
        result.warnings.append(note)
        warn_user(note)


def _listed(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def clipped_intervals(ci: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Intervals ``ci`` (np, 2) clipped to the box ``[lower, upper]``."""
    ci = np.asarray(ci, float)
    return np.column_stack([np.maximum(ci[:, 0], lower), np.minimum(ci[:, 1], upper)])


def clip_intervals_to_bounds(result: EstimationResult, lower: np.ndarray,
                             upper: np.ndarray) -> None:
    """Clip the Wald intervals ``result.p_ci`` to the box and name the
    parameters whose interval reached past a bound (``ka`` in ``[-0.12, 2.02]``
    with ``ka >= 0``): a symmetric interval says nothing beyond the bound; the
    profile likelihood (``pc.profile``) gives one that respects it."""
    if getattr(result, "p_ci", None) is None:
        return
    ci = np.asarray(result.p_ci, float)
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    past = (ci[:, 0] < lower) | (ci[:, 1] > upper)
    if not past.any():
        return
    result.p_ci = clipped_intervals(ci, lower, upper)
    names = [result.p_names[i] if result.p_names else f"p{i}" for i in np.flatnonzero(past)]
    note = (f"the 95 % Wald interval of {', '.join(names)} reached past a bound (p_bounds) "
            "and is clipped to it; pc.profile(res) gives intervals that respect the bounds")
    if note not in result.warnings:
        result.warnings.append(note)


def fitted_outputs(disc: Discretisation, Ys: np.ndarray) -> list[np.ndarray]:
    """The outputs ``Ys (J, ny, M)`` at the sample slots, back in each experiment's
    sample order: one ``(N_e, ny)`` array per experiment."""
    out = []
    for e, exp in enumerate(disc.experiments):
        js, ss = np.nonzero(disc.sample_exp == e)
        G = np.full((exp.n_samples, disc.model.ny), np.nan)
        G[disc.sample_index[js, ss]] = Ys[js, :, ss]
        out.append(G)
    return out


def unmoved_outputs(model: Model, free_p: np.ndarray, free_x0: np.ndarray) -> list[int]:
    """The outputs that no free parameter (``free_p``) and no estimated
    initial state (``free_x0``) reaches through the model's equations: each a
    function of known initial states, the inputs and constants alone."""
    def pattern(expr: ca.SX, wrt: ca.SX) -> np.ndarray:  # which entries depend on which
        return np.array(ca.DM(ca.jacobian(expr, wrt).sparsity(), 1),
                        dtype=bool).reshape(expr.numel(), wrt.numel())

    free_p, moved = np.asarray(free_p, bool), np.asarray(free_x0, bool).copy()
    if free_p.any():
        moved |= pattern(model.rhs, model.p)[:, free_p].any(axis=1)
    coupling = model.jacobian_pattern
    while True:
        more = moved | coupling[:, moved].any(axis=1)
        if np.array_equal(more, moved):
            break
        moved = more
    y_x, y_p = pattern(model.y, model.x), pattern(model.y, model.p)
    return [k for k in range(model.ny)
            if not (y_x[k, moved].any() or y_p[k, free_p].any())]


def check_fit(result: EstimationResult, experiments: list[Experiment],
              fitted: list[np.ndarray], model: Model | None = None,
              free_x0: np.ndarray | None = None) -> list[np.ndarray]:
    """Warn (:class:`FitWarning`, and in ``result.warnings``) where a converged
    estimate's residuals are systematic and far above the data's noise, or
    where samples lie alone far off it
    (:mod:`picard_casadi.analysis.fit_check`).  ``fitted``: the outputs the run fitted,
    per experiment at its sample times (:func:`fitted_outputs`); ``model`` and
    ``free_x0`` (which initial states were estimated): the outputs nothing
    estimated moves (:func:`unmoved_outputs`) get their own cause.

    Returns
    -------
    list of ndarray (N_e, ny) of bool
        Per experiment, the samples named as gross outliers.
    """
    unweighted = result.settings.get("weights", "none") == "none"
    # nothing estimated: every parameter pinned (a table's fixed entries are
    # bounds lo = hi) and no initial state free
    bounds, x0_free = result.settings.get("p_bounds"), result.settings.get("estimate_x0")
    pinned = (np.size(result.p) == 0 or (bounds is not None and np.array_equal(
        np.asarray(bounds[0], float), np.asarray(bounds[1], float))))
    estimated = not pinned or x0_free is None or bool(np.any(x0_free))
    unmoved: list[int] = []
    if model is not None and free_x0 is not None and bounds is not None and estimated:
        unmoved = unmoved_outputs(model, np.asarray(bounds[0], float)
                                  < np.asarray(bounds[1], float), free_x0)
    notes = lack_of_fit([e.y for e in experiments], fitted,
                        [e.name for e in experiments], result.y_names, unweighted,
                        times=[e.t for e in experiments], estimated=estimated,
                        unmoved=unmoved)
    notes += beyond_given_noise([e.y for e in experiments], fitted,
                                given_sigma(result, experiments), result.y_names)
    notes += own_input_rate_notes(notes, result.y_names, experiments, fitted, model)
    flagged = [k for k, n in enumerate(result.y_names)
               if any(f"of output {n!r}" in note for note in notes)]
    notes += replicate_misfit([e.y for e in experiments], fitted, [e.t for e in experiments],
                              [e.sigma for e in experiments], [e.name for e in experiments],
                              result.y_names, flagged)
    notes += repeated_values([e.y for e in experiments], [e.t for e in experiments],
                             [e.name for e in experiments], result.y_names)
    outliers = [np.zeros(np.shape(e.y), bool) for e in experiments]
    for e, k, mask, note in gross_outliers([e.y for e in experiments], fitted,
                                           [e.name for e in experiments], result.y_names,
                                           [e.t for e in experiments]):
        outliers[e][:, k] = mask
        pair = f"of output {result.y_names[k]!r} in experiment {experiments[e].name!r}"
        if not any(pair in n and NAMED_OUTLIERS in n for n in notes):
            # (unless its lack-of-fit note names them; one that does not, its
            # noise level raised by the spike, said only "a local minimum")
            notes.insert(0, note)
    if notes and model is not None:
        rest = unstable_rest_note(model, experiments, result.x0, np.asarray(result.p, float))
        if rest:
            notes.insert(0, rest)
    for note in notes:
        result.warnings.append(note)
        warn_user(note, FitWarning)
    held = linear_commands_note(experiments, model.u_names) if notes and model else ""
    if held:  # a candidate cause of the misfit, not a misfit of its own
        result.warnings.append(held)
        warn_user(held)
    # standard errors too narrow for noise correlated in time, by how much:
    # beside a misfit too (a flight test's lack of fit said only "too small",
    # where the residuals' correlation 0.93-0.98 makes it 5 to 11 times)
    for note in serial_correlation_notes([e.y for e in experiments], fitted,
                                         [e.t for e in experiments], result.y_names):
        result.warnings.append(note)
        warn_user(note)
    # one experiment's times in another unit: named with a misfit or without
    # (a sparse PK subject in minutes beside hours had CL 160 standard errors
    # off with no misfit the checks could see), a FitWarning where the
    # sampling schedules match under a time unit's factor
    for note in time_unit_notes(experiments):
        result.warnings.append(note)
        warn_user(note, FitWarning if notes or is_fit_note(note) else UserWarning)
    return outliers


#: sampled inputs this dense are candidates for a digital command held between samples
DENSE_INPUT_SAMPLES = 100


def linear_commands_note(experiments: Sequence[Experiment], u_names: Sequence[str]) -> str:
    """A note for a flagged fit whose dense sampled inputs are read linearly by
    default (``u_interpolation`` not given), or ``""``: a drive's command held
    between samples reads half a sample early so, which a precise fit sees (a
    robot joint's torque held at 1 kHz, data at 1 kHz: J 57 standard errors
    off, flagged, and the note blamed outliers and local minima)."""
    # each experiment's own inputs (those its phases' constants wrap, as the
    # other notes on sampled inputs read them, estimation/assembly.py)
    owns = [(e.name, own_inputs(e)) for e in experiments]
    dense = [(name, own) for name, own in owns
             if isinstance(own.u, np.ndarray) and not own._u_interpolation_given
             and len(np.unique(own.t)) >= DENSE_INPUT_SAMPLES and not own.staircase_inputs()]
    if not dense:
        return ""
    named = [name for name, _ in dense]
    sampled = sampled_input_names(u_names[:np.shape(dense[0][1].u)[1]])
    return (f"the input(s) {', '.join(map(repr, sampled))} of "
            f"{_listed([repr(n) for n in named])} are samples read linearly between them "
            "(the default); if they are a digital command held between samples (a drive's, "
            "a controller's, a DAC's), that reading puts "
            "them half a sample early, which a fit this precise sees: fit again with "
            "Experiment(..., u_interpolation='previous') and keep the fit of the lower "
            "-log likelihood (a physical signal moving between samples, a rudder's or a "
            "valve's angle, is read right linearly: held, a ship's time constant came 57 "
            "standard errors off with no word)")


def given_sigma(result: EstimationResult, experiments: list[Experiment]) -> list[np.ndarray]:
    """Per experiment, each value's noise standard deviation where the fit was
    given it (``weights`` given, a known ``sigma``, or each measurement's
    own as the noise model), NaN elsewhere."""
    models = [str(m) for m in result.settings.get("noise_model") or []]
    weights = np.asarray(result.weights, float) if result.weights is not None else None
    given = result.settings.get("weights") == "given" and weights is not None
    out = []
    for e in experiments:
        S = np.full(np.shape(e.y), np.nan)
        for k in range(S.shape[1]):
            model = models[k] if k < len(models) else ""
            if model.endswith("sigma per measurement (the data's)") and e.sigma is not None:
                S[:, k] = np.asarray(e.sigma, float)[:, k]
            elif model.endswith("(known)") and result.noise_sigma is not None:
                S[:, k] = float(result.noise_sigma[k])
            elif given and not models and e.sigma is None and weights[k] > 0:
                S[:, k] = 1.0 / np.sqrt(weights[k])
        out.append(S)
    return out


def late_clock_note(experiments: Sequence[Experiment], x_names: Sequence[str],
                    known: np.ndarray) -> str:
    """A note where known initial states (``known``, one bool per state: a
    number, an expression of the parameters or constants, ``estimate_x0``
    False) start an experiment whose clock was left at a first sample later
    than 0 (``t0`` not given), or ``""``.

    The initial state is the state at ``t0``; a dose at time 0 with samples
    from 0.5 h on was fitted as a dose at 0.5 h (a pharmacometrician's
    one-compartment model: ka 2.53 +- 1.3 for 1.2, ``success=True``, no
    warning).  A preequilibrated experiment's clock has its own note.
    """
    if not np.any(known):
        return ""
    late = [e for e in experiments if not getattr(e, "_t0_given", True) and e.t0 != 0.0
            and e.preequilibration is None]
    if not late:
        return ""
    states = [n for n, k in zip(x_names, known) if k]
    times = _listed([f"{e.t0:g}" for e in late[:5]] + (["..."] if len(late) > 5 else []))
    # a clock that reads a date (UNIX seconds 1.7e9 over a 10 s record): t0=0.0
    # integrated the model from 0 to there, 40 s, the standard errors 300 times wider
    dated = all(abs(e.t0) > ABSOLUTE_CLOCK * (e.t_end - e.t0) for e in late)
    return (f"the known initial states ({', '.join(states)}) are the states at each "
            f"experiment's t0, which for {_listed([repr(e.name) for e in late])} is its first "
            f"sample time (t0 not given: {times}): " + (
                "a clock that reads a date, a calendar year, a day number or a time of day "
                "(UNIX seconds?), "
                "the states at its "
                "first sample; if so, nothing to change (the times from the first sample, t - "
                "t[0], read better; t0=0.0 would run the model from 0 to there)" if dated else
                "where they are the states at t = 0 (a dose at time 0, say), pass "
                "Experiment(..., t0=0.0)"))


#: a first sample time this many times the record's span reads like a date
#: (late_clock_note; day numbers 18323 over 59 days: 310; calendar years 1850
#: to 2020: 10.9, where t0=0.0 ran a climate model from year 0)
ABSOLUTE_CLOCK = 5.0


#: an experiment's data of an output whose RMS is this many times (or this
#: fraction of) the median of the experiments' that measure it looks like
#: data in another unit (mmol/L among mol/L: 1000; percent: 100; minutes
#: among seconds: 60)
UNIT_RATIO = 50.0
#: ... named whatever the fit, at this factor: a subject in ng/mL among
#: subjects in mg/L (868 times their median) with V1 44 standard errors off,
#: the fit not flagged, so not named
UNIT_CERTAIN = 300.0


def unmeasured_outputs_note(experiments: Sequence[Experiment], y_names: Sequence[str]) -> str:
    """A note naming the outputs no experiment measures, or ``""``: they do
    not enter the fit, and their noise levels are NaN (a spacecraft's ground
    stations that never saw it printed ``noise sigma ... rho2 nan`` with no
    word)."""
    missing = [name for k, name in enumerate(y_names)
               if not any(np.any(np.isfinite(np.asarray(e.y, float)[:, k])) for e in experiments)]
    if not missing:
        return ""
    return (f"output(s) {', '.join(missing)} are measured in no experiment (every value NaN): "
            "they do not enter the fit, and their noise levels are NaN")


def unit_outlier_note(experiments: Sequence[Experiment], y_names: Sequence[str],
                      factor: float = UNIT_RATIO) -> str:
    """A note naming the experiments whose data of an output are ``factor``
    times (or a fraction) the size of the other experiments' (by RMS, where
    at least three measure it), or ``""``.

    A kineticist's one experiment in mmol/L among four in mol/L ended
    ``plateau`` after 27 s with "Start elsewhere", the noise levels
    inflated by it and the fit check naming two innocent experiments.
    """
    found: dict[str, list[str]] = {}
    for k, name in enumerate(y_names):
        sizes = {e.name: float(np.sqrt(np.nanmean(e.y[:, k] ** 2))) for e in experiments
                 if np.any(np.isfinite(e.y[:, k]))}
        sizes = {n: v for n, v in sizes.items() if v > 0}
        if len(sizes) < 3:
            continue
        middle = float(np.median(list(sizes.values())))
        for exp_name, v in sizes.items():
            ratio = v / middle
            if ratio >= factor or ratio <= 1.0 / factor:
                found.setdefault(exp_name, []).append(f"{name} {ratio:.3g}x")
    if not found:
        return ""
    listed = "; ".join(f"{n!r} ({', '.join(parts)})" for n, parts in found.items())
    return (f"an experiment's data differ in size from the other experiments' by a factor "
            f"of {factor:g} or more, by their RMS against the median: {listed}; if that "
            "is a unit (mmol/L among mol/L, percent among fractions), convert them: one "
            "experiment in another unit sets the noise levels of all")


#: a converged estimate where no parameter moves the fit by this many noise
#: levels (moved by its own size, all the others held) lies on a plateau: the
#: outputs do not depend on the parameters there, no such move changes the
#: negative log-likelihood by more than 5e-3, and every parameter's 95 % Wald
#: interval spans more than +-19.6 of its sizes (decades on a log scale).
#: Robertson's rates from log10 k = 0 reached log10 k = (-303, -2715, -45877),
#: where nothing reacts: 1e-30; PEtab's Fujita "converged" 10,000 above its
#: best at 10011.49 (uniform starts 13, 17) and 10011.41 (uniform 5, IPOPT's
#: second run): 4.8e-6, 5.6e-4 and 0.055; the optima of Boehm, Bruno,
#: Armistead, Elowitz and Fujita: 61 to 3415 (docs/reliability.md)
PLATEAU_REACH = INERT_REACH


def drop_uncertainty(result: EstimationResult) -> None:
    """No optimum, no standard errors (``docs/api.md``): a failed ``result``
    loses its covariance, standard errors, intervals and the notes drawn
    from them (a clock 18322 days early printed +-1.7e17, and "the data
    determine beta poorly" blamed the data; a restated result's candidates
    for that note would be judged again on standard errors no longer there)."""
    result.p_cov = result.p_std = result.p_ci = result.p_corr = result.x0_std = None
    result._covariance = None
    result.warnings = [w for w in result.warnings if not is_poorly_determined_note(w)]
    for key in ("poorly_determined", "poorly_determined_candidates"):
        result.settings.pop(key, None)


def declare_plateau(result: EstimationResult,
                    fitted: Sequence[np.ndarray] | None = None) -> None:
    """A converged estimate on a plateau (:data:`PLATEAU_REACH`, measured by
    the uncertainty, or at a stiff start's search, as
    ``settings["parameter_reach"]``) is no optimum: the result fails with
    status ``"plateau"``, and the default path runs no second run after it
    (:func:`~picard_casadi.estimation.fallbacks.second_runs`: another start
    is the remedy, which the message names).  ``fitted`` (the outputs fitted
    per experiment): where none moves, the message names the inputs, which
    then excite nothing."""
    reach = result.settings.get("parameter_reach")
    # (a plateau's tiny Jacobian makes the Gauss-Newton step from it long, and
    # its predicted gain large: the plateau is the diagnosis, not the stop
    # short of an optimum that the certificate reports)
    stopped_short = (result.status == "not_certified" and bool(result.certificate)
                     and short_of_optimum(result.certificate.get("stopped_short", 0.0)))
    if not (result.success or stopped_short) or reach is None or not reach < PLATEAU_REACH:
        return
    shown = ", ".join(f"{n} = {v:.6g}" for n, v in zip(result.p_names, result.p))
    result.success = False
    result.status = "plateau"
    drop_uncertainty(result)
    result.message = (
        f"the estimate lies on a plateau, not at an optimum: no parameter moves the fit by "
        f"more than {reach:.1e} noise levels ({shown}); the outputs do not depend on the "
        "parameters there, so every direction is flat. Start elsewhere (multistart=8), "
        "or bound the parameters away from where the model goes inert")
    if fitted is not None and all(
            np.all(np.ptp(np.nan_to_num(np.asarray(g, float)), axis=0)
                   <= 1e-9 * (np.abs(np.nan_to_num(np.asarray(g, float))).max(axis=0) + 1e-12))
            for g in fitted):
        # (a generator at rest: its fault missing from the input column, "Start
        # elsewhere" where nothing in the data moved the model)
        result.message += ("; the fitted outputs are constant in every experiment (the model "
                           "stays where it starts): check that the inputs hold what moves it "
                           "(a step, a fault, a dose)")


#: a run that ends at max_iter with the scaled gaps still this open never found
#: a continuous trajectory: worth checking whether one exists for its p
OPEN_GAP = 1e-3


def diagnose_open_gaps(result: EstimationResult, model: Model,
                       experiments: list[Experiment]) -> None:
    """Where a run hit ``max_iter`` (or stalled) with its gaps open, simulate the model with
    the last ``p`` and ``x0``: if the solution does not exist over the data
    (a blow-up), say so instead of advising more iterations
    (``docs/reliability.md``, "Numerical breakdowns").
    """
    gaps = result.history.get("gap_scaled") or [0.0]
    if not gaps[-1] > OPEN_GAP:
        return
    for i, e in enumerate(experiments):
        try:
            simulate(model, result.x0[i], result.p, e.t, e, t0=e.t0)
        except SimulationError as err:
            limit = result.message.split("; ")[0]  # the limit and the last numbers
            result.message = (
                f"{limit}; the gaps stayed open because the model's solution with the last "
                f"p does not exist over the data of experiment {e.name!r} ({err}), which "
                "more iterations will not change; start from a p0 (and x0) whose solution "
                "exists over the data (check with pc.simulate), bound p (p_bounds), or fit "
                "a shorter horizon")
            return
        except (ValueError, RuntimeError):
            return


#: the words of :func:`diagnose_stuck_step`'s message where the model's
#: linearisation grows along the data (the second runs' note says which)
UNSTABLE_THERE = "the model is unstable there"


def diagnose_stuck_step(result: EstimationResult, model: Model,
                        experiments: list[Experiment]) -> bool:
    """Where ``picard-gn`` stopped because no step could gain with the gaps open,
    or its trust region collapsed with sensitivities beyond
    :data:`~picard_casadi.methods.condensed.UNSTABLE_SENSITIVITY` (both name
    :data:`~picard_casadi.methods.condensed.STUCK_CAUSES`), simulate the model
    with the last ``p`` and ``x0`` and say which of the two causes it is.

    A solution that blows up keeps the message's advice.  A finite solution
    means the growth is that of the linearised dynamics along the iterate: a
    CSTR whose ``p0`` puts it on its ignited branch while the data sit on
    the cold one has sensitivities of 2.3e17 over the data (the condensed step
    chains every interval's sensitivity from the experiment's start, as
    single shooting does), and no mesh changes that; IPOPT on the same
    collocation keeps every interval start an unknown and converged there.

    Returns
    -------
    bool
        Whether the model's solution is finite over every experiment (the
        unstable case, where ``method="ipopt"`` is the remedy).
    """
    from ..methods.condensed import STUCK_CAUSES, UNSTABLE_SENSITIVITY

    if result.status != "step_failed" or STUCK_CAUSES not in result.message:
        return False
    growth = 0.0  # the linearisation's e-folds along the data, at most
    jacobian = ca.Function("A", [model.t, model.x, model.p, model.u],
                           [ca.jacobian(model.rhs, model.x)])
    for i, e in enumerate(experiments):
        try:
            X = simulate(model, result.x0[i], result.p, e.t, e, t0=e.t0)
        except SimulationError as err:
            result.message = result.message.replace(STUCK_CAUSES, (
                f"the model's solution blows up there (experiment {e.name!r}: {err})"))
            return False
        except (ValueError, RuntimeError):
            return False
        if not np.all(np.isfinite(X)):
            return False
        U = e.inputs(e.t, model.nu)
        rates = [float(np.max(np.linalg.eigvals(np.atleast_2d(np.asarray(
            jacobian(tk, xk, result.p, uk), float))).real)) for tk, xk, uk in zip(e.t, X, U)]
        growth = max(growth, max(max(rates), 0.0) * float(e.t_end - e.t0))
    head = result.message.split(STUCK_CAUSES)[0]
    if growth < np.log(UNSTABLE_SENSITIVITY):
        # a stable model whose outputs are steep (a two-compartment model's
        # log concentration at 3e-6, eigenvalues -1.32 and -0.076, was told
        # "unstable")
        result.message = (
            f"{head}the model's own solution at this p is finite over the data (simulated) "
            f"and its linearisation does not grow there (at most e^{growth:.3g} over an "
            "experiment, from the eigenvalues of df/dx along it): not an instability, but "
            "picard-gn's step, which chains the intervals' sensitivities from each "
            "experiment's start, no longer describes the merit here (outputs on a log scale "
            "near 0 are steep in the states) -- method='ipopt' keeps every interval start an "
            "unknown and is not affected")
        return True
    result.message = (
        f"{head}the model's own solution at this p is finite over the data (simulated), so "
        "the growth is that of the model linearised along the current trajectory, whose "
        f"gaps are open: {UNSTABLE_THERE} (for example a p that puts the "
        "solution on another branch than the data's), and picard-gn's step, which "
        "chains the intervals' sensitivities from each experiment's start as single "
        "shooting does, loses all precision; a shorter T does not change that -- "
        "method='ipopt' keeps every interval start an unknown and is not affected; or "
        "start from a p0 whose simulation follows the data (multistart)")
    return True


#: CasADi operations whose value jumps (a sign, a rounding, a branch), and
#: whose derivative jumps (a kink), as a message names them
def held_by_bounds_note(result: EstimationResult, lower: np.ndarray, upper: np.ndarray) -> str:
    """A failed run's parameters that ended on a bound (:func:`bounds_reached`),
    in words (``""`` where none did): a k1ref bounded below its truth stalled
    after 158 s, the message speaking of continuity gaps and guesses, not of
    the bound."""
    p = np.asarray(result.p, float).ravel()
    if p.size != np.size(lower) or p.size != np.size(upper) or not np.all(np.isfinite(p)):
        return ""
    named = [f"{result.p_names[i]} on its {side} bound {b:g}"
             for i, side, b in bounds_reached(p, lower, upper)]
    if not named:
        return ""
    return (f"the run ended with {_listed(named)} (p_bounds): where the data would put it "
            "beyond, no fit inside the box exists; if the bound is not a physical limit, "
            "widen it and fit again")


def sign_flip_note(result: EstimationResult, p0: np.ndarray) -> str:
    """A failed run's parameters that ended with the other sign than their
    start (on a linear scale), in words, or ``""``: a building's envelope
    resistance started at 0.007 ended at -0.0036 after 523 s, the message
    advising more iterations and IPOPT."""
    p, start = np.asarray(result.p, float).ravel(), np.asarray(p0, float).ravel()
    if p.size != start.size or not np.all(np.isfinite(p)):
        return ""
    flipped = [f"{n} {a:.4g} -> {b:.4g}" for n, a, b in zip(result.p_names, start, p)
               if a * b < 0 and not str(n).startswith(("log(", "log10("))]
    if not flipped:
        return ""
    return (f"the run ended with {_listed(flipped)}, the other sign than its start: if a "
            "parameter cannot change sign (a resistance, a capacity, a rate), bound it "
            "(p_bounds, lower 0) or estimate it on a log scale (parameter_scale='log10'), "
            "which also steadies parameters that span decades")


def outside_box_note(result: EstimationResult, x_names: Sequence[str], lb: np.ndarray,
                     ub: np.ndarray) -> str:
    """A note where the returned solution's interval starts leave the box
    ``x0_bounds`` (with the model's ``x_domain``), or ``""``: single shooting
    (a fallback of the default path) bounds the initial states only.  A
    controls engineer's motor "starting at rest", bounded to |w| <= 2, came
    back as a success with w at 118 and no word of the bounds."""
    X = getattr(result, "_X", None)
    if X is None or not (np.any(np.isfinite(lb)) or np.any(np.isfinite(ub))):
        return ""
    X = np.asarray(X, float)
    slack = 1e-6 * np.maximum(1.0, np.where(np.isfinite(ub - lb), ub - lb, 1.0))
    low, high = X < lb - slack, X > ub + slack
    out = np.flatnonzero(np.any(low | high, axis=0))
    if out.size == 0:
        return ""
    reached = [X[:, i].min() if low[:, i].any() else X[:, i].max() for i in out]
    parts = [f"{x_names[i]} reaches at least {v:.4g} outside [{lb[i]:g}, {ub[i]:g}]"
             for i, v in zip(out, reached)]
    return (f"the returned trajectory leaves x0_bounds (with the model's x_domain: "
            f"{'; '.join(parts)}): "
            f"method={result.method!r} bounds the initial states only, and the bounds held "
            "no other run to an answer; widen them if the states may go there, or where "
            "they may not, the data and the model disagree")


#: the model's own solution from the estimated x0 of a fit held by continuity
#: (unstable along the data) reproduces it where its sum of squares is at most
#: this many times the fitted trajectory's
UNSTABLE_REPRODUCTION = 2.0


def unstable_departure(cert: Any, simulated: tuple[np.ndarray, np.ndarray] | None) -> str:
    """A note where the certificate held the fit by continuity (the model
    unstable along the data) and the model's own solution from the estimated
    initial states does not reproduce it (its sum of squares above
    :data:`UNSTABLE_REPRODUCTION` times the fitted one's, or not finite): the
    likelihood is then the fitted trajectory's.  Empty otherwise (the book's
    unstable aircraft reproduces its fit from x0)."""
    growth = float(getattr(cert, "unstable_growth", 1.0))
    if not growth > 1.0:
        return ""
    held = float(np.sum(cert.ssr_model_per_output))
    own = np.inf if simulated is None else float(np.sum(simulated[0]))
    if own <= UNSTABLE_REPRODUCTION * held:
        return ""
    return (f"the fitted model is unstable along the data (its state sensitivities grow by "
            f"{growth:.1e} over an experiment): each interval holds to the model, joined "
            "by continuity, but its own solution from the estimated x0 leaves the data "
            f"(sum of squares {own:.3g}, the fit's {held:.3g}), so the likelihood and the "
            "noise levels are the fitted trajectory's; res.predict simulates from x0 and "
            "departs too (res.predict(e, source='collocation') follows the fit).  Where the "
            "system is stable, an unstable fit is a parameter outside its physical range "
            "(a negative inertia, mass or time constant) or a model that misses something: "
            "bound the parameters (p_bounds)")
