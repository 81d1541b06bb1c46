"""Parameters estimated per experiment that differ by orders of magnitude.

A parameter of its own per experiment (``per_experiment=``,
``Experiment(parameters=...)``) absorbs whatever sets that experiment apart,
a unit error included: a pharmacometrician's subject in ng/mL beside others
in mg/L fitted with its own volume 0.06 L beside 40-45 L, success, no word
(with the volume shared, the misfit names that subject's unit).  Where one
experiment's value of such a parameter is :data:`SPREAD_RATIO` times the
others' median or more (or less), a note names it.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..runtime.user_warnings import warn_user

__all__ = ["note_spread_between_experiments", "SPREAD_RATIO"]

#: one experiment's own value this many times the others' median (or 1 / it)
#: is named, as :data:`~picard_casadi.estimation.diagnosis.UNIT_RATIO` names
#: an experiment's data that far from the others'
SPREAD_RATIO = 50.0

_PER_EXPERIMENT = re.compile(r"^(?P<base>.+)\[(?P<experiment>[^\[\]]+)\]$")


def note_spread_between_experiments(result: Any) -> Any:
    """``result`` with a note (and a warning) for each parameter estimated per
    experiment whose value in one experiment is :data:`SPREAD_RATIO` times
    the others' median or more, or as much less (positive values, two
    experiments or more)."""
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
        if max(ratios[k], 1.0 / ratios[k]) < SPREAD_RATIO:
            continue
        others = ", ".join(f"{e} {v:.4g}" for i, (e, v) in enumerate(items) if i != k)
        note = (f"{base}[{items[k][0]}] = {items[k][1]:.4g} is "
                + (f"{ratios[k]:.3g} times" if ratios[k] > 1 else f"1/{1 / ratios[k]:.3g} of")
                + f" the other experiments' {base} ({others}): where they share a physical "
                "value, that experiment's data, inputs or constants may be in another unit "
                "(a factor 1000: ng/mL beside mg/L, g beside mg); a shared parameter's fit "
                "would show it as a misfit")
        result.warnings.append(note)
        warn_user(note)
    return result
