"""The warning naming the parameters the data determine poorly.

Outside the directions the data do not determine at all (their standard
errors inf, :mod:`picard_casadi.analysis.uncertainty`), a parameter is
poorly determined where its standard error exceeds its size on a linear
scale, or spans more than a decade on a log scale; the warning names them
all at once, in the result's current terms, and the product or ratio the
data do determine where two log-scale ones are correlated beyond
:data:`COMBINATION_CORRELATION`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["POORLY_DETERMINED_HEAD", "is_poorly_determined_note", "note_poorly_determined",
           "COMBINATION_CORRELATION"]


#: how the warning of :func:`note_poorly_determined` begins
POORLY_DETERMINED_HEAD = "the data determine "


def is_poorly_determined_note(note: str) -> bool:
    """Whether ``note`` is :func:`note_poorly_determined`'s warning."""
    return note.startswith(POORLY_DETERMINED_HEAD) and " poorly" in note.split(":")[0]


def note_poorly_determined(result: Any) -> None:
    """One warning naming every parameter the data determine poorly, in the
    result's current terms (replacing the one written before).

    The parameters (outside every near-singular combination, indices into
    ``result.p``) are judged each on its scale: on a linear scale, a
    standard error above the estimate's size, and the warning gives the two
    (the 95 % interval spans zero); where ``result.p_scales`` gives a log
    scale (a restated problem's result in the user's terms), a standard
    error spanning more than a decade on that scale.  The candidates are
    ``settings["poorly_determined_candidates"]`` (kept in the result, so a
    result from another process is judged again in the user's terms), those
    named ``settings["poorly_determined"]``.
    """
    result.warnings = [w for w in result.warnings if not is_poorly_determined_note(w)]
    which = result.settings.get("poorly_determined_candidates")
    if which is None:
        which = result.settings.get("poorly_determined") or []
    scales = getattr(result, "p_scales", None)
    scaled_std = getattr(result, "p_scaled_std", None)
    # (name, the detail alone, the detail in a list of several)
    items: list[tuple[str, str, str]] = []
    named: list[int] = []
    for i in which:
        name = result.p_names[i]
        scale = "lin" if scales is None or scaled_std is None else scales[i]
        if scale == "lin":
            std, value = float(result.p_std[i]), float(result.p[i])
            if not std > abs(value):
                continue
            named.append(int(i))
            items.append((name, f"its standard error {std:.3g} exceeds the estimate "
                                f"{value:.6g} (the 95 % interval spans zero)",
                          f"standard error {std:.3g} against the estimate {value:.6g}, its 95 % "
                          "interval spanning zero"))
            continue
        decades = float(scaled_std[i]) / (1.0 if scale == "log10" else math.log(10.0))
        if decades > 1.0:
            named.append(int(i))
            items.append((name, f"its standard error on the {scale} scale spans "
                                f"{decades:.3g} decades",
                          f"standard error spanning {decades:.3g} decades on the {scale} "
                          "scale"))
    result.settings["poorly_determined"] = named
    if len(items) == 1:
        name, detail, _ = items[0]
        result.warnings.append(f"{POORLY_DETERMINED_HEAD}{name} poorly: {detail}; a "
                               "likelihood profile (pc.profile) shows what the data allow")
    elif items:
        listed = ", ".join(n for n, _, _ in items[:-1]) + f" and {items[-1][0]}"
        details = "; ".join(f"{n}: {d}" for n, _, d in items)
        result.warnings.append(f"{POORLY_DETERMINED_HEAD}{listed} poorly ({details})"
                               f"{_determined_combination(result, named, scales)}; "
                               "likelihood profiles (pc.profile) show what the data allow")


#: a correlation this close to +-1 between two poorly determined log-scale
#: parameters says the data determine their ratio or product
COMBINATION_CORRELATION = 0.99


def _determined_combination(result: Any, named: list[int], scales: Any) -> str:
    """Where two of the ``named`` parameters, both on a log scale, are
    correlated beyond :data:`COMBINATION_CORRELATION`: what the data do
    determine, their product or ratio (an SEIR's reporting fraction and
    initial infected, each spanning 35 decades, whose product the incidence
    fixes); else ``""``."""
    corr = getattr(result, "p_corr", None)
    if corr is None or scales is None or len(named) < 2:
        return ""
    corr = np.asarray(corr, float)
    logs = [i for i in named if scales[i] != "lin"]
    pairs = [(abs(corr[i, j]), i, j) for a, i in enumerate(logs) for j in logs[a + 1:]
             if np.isfinite(corr[i, j])]
    if not pairs:
        return ""
    r, i, j = max(pairs)
    if r < COMBINATION_CORRELATION:
        return ""
    a, b = result.p_names[i], result.p_names[j]
    what = f"{a} * {b}" if corr[i, j] < 0 else f"{a} / {b}"
    return (f"; {a} and {b} are correlated {corr[i, j]:+.3f}: the data determine {what}, "
            "not each")
