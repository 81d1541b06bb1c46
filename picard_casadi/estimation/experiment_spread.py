"""Parameters estimated per experiment that differ by orders of magnitude.

A parameter of its own per experiment (``per_experiment=``,
``Experiment(parameters=...)``) absorbs whatever sets that experiment apart,
a unit error included: a pharmacometrician's subject in ng/mL beside others
in mg/L fitted with its own volume 0.06 L beside 40-45 L, success, no word
(with the volume shared, the misfit names that subject's unit).  Where one
experiment's value of such a parameter is :data:`SPREAD_RATIO` times the
others' median or more (or less), the others agreeing within
:data:`OTHERS_AGREE`, a note names it.  So does an experiment
constant whose value in one experiment lies :data:`CONSTANT_APART` times
beyond every other experiment's (a subject's dose in µg among doses in mg:
V1 1000 times the truth, success, no word).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..analysis.fit_check import UNIT_FACTORS as UNIT_NAMES
from ..experiment import Experiment
from ..runtime.user_warnings import warn_user

__all__ = ["note_spread_between_experiments", "SPREAD_RATIO", "constants_apart_note",
           "CONSTANT_APART"]

#: one experiment's own value this many times the others' median (or 1 / it)
#: is named, as :data:`~picard_casadi.estimation.diagnosis.UNIT_RATIO` names
#: an experiment's data that far from the others'
SPREAD_RATIO = 50.0
#: ... and at most this many times (a kilogram beside a microgram): beyond it
#: no unit explains the value
UNIT_FACTORS = 1e9
#: ... where the other experiments' values agree within this factor: a unit
#: error stands alone among like values (a subject's volume 0.06 L beside 40
#: to 45 L), where values that span decades (a virologist's initial viral
#: loads per patient, 0.0086 to 2) have no one odd value to name
OTHERS_AGREE = 10.0

_PER_EXPERIMENT = re.compile(r"^(?P<base>.+)\[(?P<experiment>[^\[\]]+)\]$")


def note_spread_between_experiments(result: Any, experiments: Sequence[Experiment]) -> Any:
    """``result`` with a note (and a warning) for each parameter estimated per
    experiment whose value in one experiment is :data:`SPREAD_RATIO` times
    the others' median or more, or as much less (positive values, two
    experiments or more), and for the constants of ``experiments`` far
    apart (:func:`constants_apart_note`)."""
    apart = constants_apart_note(experiments)
    if apart:
        result.warnings.append(apart)
        warn_user(apart)
    if not getattr(result, "success", False) or not getattr(result, "p_names", None):
        return result
    groups: dict[str, list[tuple[str, float]]] = {}
    for name, value in zip(result.p_names, np.asarray(result.p, float)):
        found = _PER_EXPERIMENT.match(name)
        if found:
            groups.setdefault(found["base"], []).append((found["experiment"], float(value)))
    for base, items in groups.items():
        values = np.array([v for _, v in items])
        if len(items) < 2 or not np.all(values > 0):
            continue
        ratios = [v / float(np.median(np.delete(values, i))) for i, v in enumerate(values)]
        k = int(np.argmax(np.abs(np.log(ratios))))
        rest = np.delete(values, k)
        if rest.max() > OTHERS_AGREE * rest.min():
            continue
        if not SPREAD_RATIO <= max(ratios[k], 1.0 / ratios[k]) <= UNIT_FACTORS:
            # (beyond any unit: a value that ran off, 4.95e271 times the other
            # site's, which the valley's note names)
            continue
        others = ", ".join(f"{e} {v:.4g}" for i, (e, v) in enumerate(items) if i != k)
        size = max(ratios[k], 1.0 / ratios[k])
        # (a bias 1/56 of the other maneuver's cited "ng/mL beside mg/L": the
        # factor near 57.3 is degrees and radians)
        named = [w for f, w in UNIT_NAMES.items() if abs(size / f - 1.0) < 0.05]
        unit = named[0] if named else "a factor 1000: ng/mL beside mg/L, g beside mg"
        note = (f"{base}[{items[k][0]}] = {items[k][1]:.4g} is "
                + (f"{ratios[k]:.3g} times" if ratios[k] > 1 else f"1/{1 / ratios[k]:.3g} of")
                + f" the other experiments' {base} ({others}): where they share a physical "
                f"value, that experiment's data, inputs or constants may be in another unit "
                f"({unit}?); a shared parameter's fit "
                "would show it as a misfit")
        result.warnings.append(note)
        warn_user(note)
    return result


#: an experiment constant's value this many times every other experiment's
#: (or 1 / it), with three experiments or more, is named
CONSTANT_APART = 100.0


def constants_apart_note(experiments: Sequence[Experiment]) -> str:
    """A note naming the experiment constants (``Experiment(parameters=...)``,
    numbers) whose positive value in one experiment is :data:`CONSTANT_APART`
    times every other experiment's or more, or as much less, or ``""``.
    Designs that span decades in steps (doses 0.01 to 100 by tens) are not
    named: each value has a neighbour within the factor."""
    found = []
    names = dict.fromkeys(n for e in experiments for n in e.parameters)
    for name in names:
        items = [(e.name, float(e.parameters[name])) for e in experiments
                 if isinstance(e.parameters.get(name), (int, float, np.number))
                 and not isinstance(e.parameters.get(name), bool)]
        items = [(n, v) for n, v in items if v > 0]  # (a placebo's 0 is no scale)
        values = np.array([v for _, v in items])
        if len(items) < 3:
            continue
        for i, (exp_name, v) in enumerate(items):
            others = np.delete(values, i)
            if v >= CONSTANT_APART * others.max() or v * CONSTANT_APART <= others.min():
                found.append(f"{name} = {v:.4g} in {exp_name!r} (the others {others.min():.4g} "
                             f"to {others.max():.4g})")
    if not found:
        return ""
    return (f"an experiment constant lies a factor of {CONSTANT_APART:g} or more beyond every "
            f"other experiment's: {'; '.join(found)}; if that is a unit (a dose in µg among "
            "doses in mg, g among mg), convert it: the fit takes it as given")
