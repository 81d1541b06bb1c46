"""What a result says about its experiments' inputs and rows.

Sampled inputs read linearly that look like a staircase, held ones that
jump off the breakpoints, inputs that start after ``t0`` or are read across
a gap in the samples, callables that jump inside the mesh's intervals, and
rows pasted twice: each a note (and a warning) naming the fix.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from ..analysis.fit_check import GIVEN_TWICE, STAIRCASE_DELAY
from ..errors import FitWarning
from ..experiment import Experiment
from ..model import Model
from ..result import EstimationResult
from ..runtime.user_warnings import warn_user
from ..simulate import own_inputs
from ..inputs import sampled_input_names

__all__ = ["note_staircase_inputs", "note_copied_rows", "kinked_inputs", "jumping_inputs",
           "jump_notes", "INPUT_GAP"]


def note_staircase_inputs(result: EstimationResult, model: Model,
                           experiments: Sequence[Experiment],
                           delayed: Collection[int] = ()) -> None:
    """A note (and a warning) where sampled inputs that look like a staircase
    are read linearly, by default: a user's CSTR coolant staircase, read as
    a ramp across each jump, gave estimates 2 to 3 standard errors off, every
    95 % interval missing the truth, with no visible misfit.  ``delayed``:
    the inputs whose delay is estimated (a ramp from the sample before puts
    each jump half a sample early, the delay as much late): their note is a
    :class:`~picard_casadi.FitWarning`."""
    _note_inputs_before_their_samples(result, model, experiments)
    _note_gaps_in_sampled_inputs(result, model, experiments)
    # one note per reading, naming its experiments (a CSTR's three runs alike
    # had three notes of one text)
    staircases: dict[tuple[str, str, bool], list[str]] = {}
    for e in experiments:
        off = e.held_jumps_off_breakpoints()
        if off:
            # a controls engineer's held voltage without breakpoints: picard-gn
            # not certified, single shooting's answer in 13 s for 4.5 s, no word
            names = ", ".join(repr(model.u_names[k]) for k in off)
            note = (f"input(s) {names} of experiment {e.name!r} are held between samples "
                    "(u_interpolation='previous') and jump at sample times that are no "
                    "breakpoints: the jumps fall inside the intervals, which costs the "
                    "collocation its accuracy there; pass Experiment(..., breakpoints=t) "
                    "(or the times where they change)")
            result.warnings.append(note)
            warn_user(note)
        columns = e.staircase_inputs()
        if not columns:
            continue
        names = ", ".join(repr(model.u_names[k]) for k in columns)
        if len(columns) < model.nu:
            # holding the smooth ones too would bias them (a temperature ramp
            # held with a feed's staircase: kref 3.4 standard errors off)
            holds = ["previous" if k in columns else "linear" for k in range(model.nu)]
            hold = (f"Experiment(..., u_interpolation={holds!r}, breakpoints=t) (one per "
                    f"input; {'+'.join(model.u_names[k] for k in columns)} held)")
        else:
            # (breakpoints at its jumps by default, where every input is held)
            hold = "Experiment(..., u_interpolation='previous')"
        late = bool(set(columns) & set(delayed))
        staircases.setdefault((names, hold, late), []).append(repr(e.name))
    for (names, hold, delay_late), which in staircases.items():
        late = f", and {STAIRCASE_DELAY}" if delay_late else ""
        note = (f"input(s) {names} of experiment{'s' if len(which) > 1 else ''} "
                f"{', '.join(which)} look piecewise constant (most "
                "samples repeat the one before, or sit at one level with pulses off it: "
                "amounts per sample period, as rain per day) but are read linearly between "
                "samples, the default: a ramp across each jump biases the estimates without "
                f"a visible misfit{late}; if each value holds until the next sample, pass "
                f"{hold}, "
                "or u_interpolation='linear' to keep this reading without the note")
        result.warnings.append(note)
        warn_user(note, FitWarning if late else UserWarning)
        if not result.success:  # (a likely cause: a bolus column read linearly failed
            # on "the noise formula's sigma is -6.9e-52", this the last of 5 warnings)
            result.message = f"{result.message}. Note: {note}"


def _note_inputs_before_their_samples(result: EstimationResult, model: Model,
                                      experiments: Sequence[Experiment]) -> None:
    """A note where sampled inputs start after ``t0``: before their first
    sample they are held at it (a new user's IVGTT with the mixing phase's
    rows dropped and ``t0=0.0``: insulin held at its 8-minute value over
    [0, 8), where it had peaked and fallen, with no word)."""
    inputs = sampled_input_names(model.u_names)
    for e in experiments:
        own = own_inputs(e)
        if (not inputs or not isinstance(own.u, np.ndarray) or own.preequilibration
                is not None or not float(own.t[0]) > own.t0):
            continue
        first = np.asarray(own.u, float).reshape(len(own.t), -1)[0]
        values = ", ".join(f"{n} = {v:.6g}" for n, v in zip(model.u_names, first) if n in inputs)
        note = (f"experiment {e.name!r}: its sampled input(s) start at t = {own.t[0]:.6g}, "
                f"after t0 = {own.t0:.6g}, and are held at their first sample before it "
                f"({values}); if they were something else there (a basal level, a bolus), "
                "give their samples from t0 (rows with NaN outputs)")
        result.warnings.append(note)
        warn_user(note)


#: a spacing between sample times this many times their median is a gap the
#: sampled inputs are read across
INPUT_GAP = 20.0


def _note_gaps_in_sampled_inputs(result: EstimationResult, model: Model,
                                 experiments: Sequence[Experiment]) -> None:
    """A note where samples of an experiment with sampled inputs are missing
    over a stretch (rows left out): the inputs are read across it as if
    measured (a building's log with two days of rows absent: the heating held
    and the weather ramped over 48 h, the fit flagged with the blame on
    correlated noise and bounds)."""
    if not sampled_input_names(model.u_names):
        return
    for e in experiments:
        own = own_inputs(e)
        t = np.unique(np.asarray(own.t, float))
        if not isinstance(own.u, np.ndarray) or t.size < 10:
            continue
        steps = np.diff(t)
        typical = float(np.median(steps))
        i = int(np.argmax(steps))
        if not typical > 0 or steps[i] < INPUT_GAP * typical:
            continue
        note = (f"experiment {e.name!r}: its samples jump from t = {t[i]:.6g} to "
                f"{t[i + 1]:.6g}, {steps[i] / typical:.0f} times their median spacing "
                f"{typical:.6g}, and its sampled inputs are read across the gap as if "
                "measured there; if they were not, split the experiment at the gap (two "
                "experiments, each with its own initial states)")
        result.warnings.append(note)
        warn_user(note)


def note_copied_rows(result: EstimationResult, experiments: Sequence[Experiment]) -> None:
    """A note (and a warning) where replicate rows repeat an earlier row of
    their time in every measured value at most of the times with replicates:
    rows pasted twice, which the fit counts as measurements (a bioprocess
    engineer's CSV with every row twice: the standard errors 1/sqrt(2) of the
    clean file's, no word; duplicates pasted below and sorted by time, a1 a2
    a1 a2).  Rounded readings that agree now and then do not reach half of
    the times.  Two experiments with the same times and measurements: a run
    given twice."""
    notes = []
    for e in experiments:
        t, y = np.asarray(e.t, float), np.asarray(e.y, float)
        times = np.unique(t[np.flatnonzero(np.diff(t) == 0)])
        copies, at = 0, []
        for when in times:  # (a row equal to an earlier one at its time, not only the one before)
            rows = [tuple(np.where(np.isnan(r), np.inf, r)) for r in y[t == when]
                    if np.any(np.isfinite(r))]
            if len(set(rows)) < len(rows):
                copies, at = copies + len(rows) - len(set(rows)), at + [when]
        if len(at) < 2 or len(at) < 0.5 * times.size:
            continue
        shown = ", ".join(f"{v:g}" for v in at[:3]) + (", ..." if len(at) > 3 else "")
        notes.append(
            f"experiment {e.name!r}: {copies} replicate row(s) repeat a row of their time in "
            f"every measured value (at {len(at)} of the {times.size} times with replicates: "
            f"t = {shown}); each counts as a measurement, so a row pasted twice makes the "
            "standard errors too small (by about 1/sqrt(2)): drop the copies if they are copies")
    seen: dict[bytes, str] = {}
    for e in experiments:  # a run given twice (its name made unique)
        key = np.asarray(e.t, float).tobytes() + np.nan_to_num(np.asarray(e.y, float),
                                                               nan=np.inf).tobytes()
        if key in seen:
            notes.append(f"experiments {seen[key]!r} and {e.name!r} hold the same times and "
                         f"measurements: {GIVEN_TWICE}, and makes the standard "
                         "errors too small; drop the copy if it is one")
        seen.setdefault(key, e.name)
    for note in notes:  # (a copy of a run flags the fit: its standard errors are wrong)
        result.warnings.append(note)
        warn_user(note, FitWarning if GIVEN_TWICE in note else UserWarning)


def kinked_inputs(model: Model, experiments: Sequence[Experiment]) -> list[str]:
    """Experiments whose sampled inputs kink inside the intervals
    (:meth:`Experiment.kinks_between_breakpoints`)."""
    if model.nu == 0:
        return []
    return [e.name for e in experiments if e.kinks_between_breakpoints()]


def jumping_inputs(model: Model, experiments: Sequence[Experiment]) -> list[str]:
    """``"'name' (t ~ a, b, ...)"`` per experiment whose callable input jumps
    away from the breakpoints (:meth:`Experiment.input_jumps`)."""
    from .preequilibration import settles

    out = []
    for e in experiments:
        if settles(e):  # (a settling's clock rate is the package's: from the data's start)
            if e.t_end <= e.u.t0:
                continue
            e = e.replaced(t0=e.u.t0)
        times = e.input_jumps(model.nu)
        if times:
            shown = ", ".join(f"{t:.6g}" for t in times[:5]) + (", ..." if len(times) > 5 else "")
            out.append(f"{e.name!r} (t ~ {shown})")
    return out


def jump_notes(model: Model, experiments: Sequence[Experiment], certified: bool,
               refinements: int, intervals: int) -> list[str]:
    """The notes of a certified run whose callable inputs jump away from the
    breakpoints (:func:`jumping_inputs`): the mesh refined around each jump
    (a user's CSTR coolant steps: 4 refinements, 1232 intervals, 10.6 s; 1.1 s
    with the step times as breakpoints, the same estimates), or the jumps
    unseen by the mesh and the integrations (a bolus as 0.005 h at 33 L/h:
    single shooting's CVODES never saw it, Yxs 3.7 standard errors off, "a
    local minimum")."""
    jumps = jumping_inputs(model, experiments) if certified else []
    if jumps and refinements:
        return [f"the inputs of {', '.join(jumps)} jump inside the mesh's intervals, which "
                f"were refined {refinements} time(s) around them ({intervals} "
                "intervals); the exact jump times as Experiment(..., breakpoints=[...]) "
                "start intervals there: the same fit on fewer intervals"]
    if jumps:
        return [f"the inputs of {', '.join(jumps)} jump at times that are no breakpoints: the "
                "mesh and the integrations can step over a short pulse there without seeing "
                "it; give the jump times as Experiment(..., breakpoints=[...])"]
    return []
