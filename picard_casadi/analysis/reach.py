"""How far each parameter moves the fit at an estimate, in noise levels, for
a move by its own size: a plateau where none moves it
(:func:`~picard_casadi.estimation.diagnosis.declare_plateau`), and the
parameters that do not act where others do (:func:`inert_note`); and which
columns are round-off (:func:`round_off_reach`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..parameters import from_scale
from ..transcription.problem import Setup

__all__ = ["parameter_reach", "parameter_reaches", "round_off_reach", "inert_note", "INERT_REACH"]


def parameter_reach(setup: Setup, F_diagonal: np.ndarray, columns: list[tuple[str, int, int]],
                    p: np.ndarray, s2: float) -> float | None:
    """The most any parameter moves the fit (:func:`parameter_reaches`), or
    ``None`` without parameter columns."""
    reaches = parameter_reaches(setup, F_diagonal, columns, p, s2)
    return float(reaches.max()) if reaches.size else None


def parameter_reaches(setup: Setup, F_diagonal: np.ndarray,
                      columns: list[tuple[str, int, int]], p: np.ndarray,
                      s2: float) -> np.ndarray:
    """How far the fit moves, in noise levels, for each parameter moved by its
    own size (one entry per parameter column of ``columns``, in their order).

    A parameter's size is its scale (``setup.p_scale``), or its value where
    that is larger on a linear scale (a rate started at 1e-3 that converged at
    1 moves by 1, not by 1e-3).  A parameter on a log scale moves by one
    decade (or e-fold).  :func:`~picard_casadi.estimation.diagnosis.declare_plateau`
    reads it.

    Parameters
    ----------
    setup : Setup
    F_diagonal : ndarray
        The information matrix's diagonal (``|d r / d theta_k|^2``).
    columns : list of (kind, experiment, index)
        What each entry of ``F_diagonal`` is (:class:`SolutionSensitivity`).
    p : ndarray
        The parameters (the model's, on their estimation scale).
    s2 : float
        The noise variance the residuals are in units of (1 with the
        likelihood's weights).
    """
    scales = getattr(setup.disc.model, "_parameter_scales", None)
    logged = (np.array([v != "lin" for v in scales]) if scales is not None
              and len(scales) == len(p) else np.zeros(len(p), dtype=bool))
    size = np.where(logged, setup.p_scale, np.maximum(setup.p_scale, np.abs(p)))
    reach = np.array([np.sqrt(max(float(F_diagonal[k]), 0.0)) * size[i]
                      for k, (kind, _, i) in enumerate(columns) if kind == "p"])
    return reach / np.sqrt(s2) if s2 > 0 else np.full(reach.size, np.inf)


def round_off_reach(model: Any, columns: Sequence[tuple[str, int, int]], p: np.ndarray,
                    F_diagonal: np.ndarray, reach: np.ndarray) -> np.ndarray:
    """The columns' ``reach`` for the test that zeroes round-off columns, a
    parameter on a log scale measured on its own (linear) scale too.

    Its column is ``theta ln(b)`` times the outputs' derivative in
    ``theta``: small because ``theta`` is, not round-off.  An ecologist's
    harvest rate ``q`` (log10 scale, no lower bound) ran to 3e-17 where only
    ``r - qE`` and ``K (1 - qE / r)`` are determined: zeroed as round-off,
    its column left ``q`` alone undetermined, and ``K`` got 766 +- 27 for
    1000, where at ``q = 1e-6`` on a bound every one of them was.  Here the
    column counts with ``theta`` moved by its start's size
    (``model._parameter_starts``, the statement's): a column the outputs do
    not depend on stays round-off at any value.
    """
    scales = getattr(model, "_parameter_scales", None)
    starts = getattr(model, "_parameter_starts", None)
    if scales is None or starts is None:
        return reach
    out = np.array(reach, float)
    for k, (kind, _, i) in enumerate(columns):
        if kind != "p" or scales[i] == "lin" or not starts[i] > 0:
            continue
        # d theta / d (its scale's value): theta, or theta ln 10
        slope = from_scale(p[i], scales[i]) * (math.log(10.0) if scales[i] == "log10" else 1.0)
        if not (slope > 0 and math.isfinite(slope)):
            continue
        linear = math.sqrt(max(float(F_diagonal[k]), 0.0)) / slope * float(starts[i])
        if math.isfinite(linear):
            out[k] = max(out[k], linear)
    return out


#: a parameter whose move by its own size moves the fit by less than this
#: many noise levels does not act on the outputs at the estimate (every
#: parameter so: a plateau, estimation/diagnosis.py)
INERT_REACH = 1e-1


def inert_note(names: Sequence[str], reaches: np.ndarray) -> str:
    """A note naming the parameters that do not move the fit at all
    (:data:`INERT_REACH`) where others do, or ``""``.

    A kineticist's temperatures in Celsius in an Arrhenius term (every rate
    exp(-120)): converged, the six rate parameters at their starts with
    infinite standard errors and no word of a model that does not react.
    """
    inert = [n for n, r in zip(names, reaches) if r < INERT_REACH]
    if not inert or len(inert) == len(names):
        return ""
    one = len(inert) == 1
    return (f"{', '.join(inert)} {'does' if one else 'do'} not move the fit at the estimate "
            f"({'it moves' if one else 'each moves'} it by less than {INERT_REACH:g} noise "
            "levels when moved by its own size): the outputs do not depend on "
            f"{'it' if one else 'them'} there, as where the terms "
            f"{'it enters' if one else 'they enter'} vanish (a rate of 0, a reaction that does "
            "not run), saturate or stay on one side of a threshold (min, max, if_else); "
            f"check the units of what {'it multiplies' if one else 'they multiply'} (a "
            "temperature in Celsius in "
            f"exp(-Ea/RT)) and the bounds, or fix {'it' if one else 'them'}")
