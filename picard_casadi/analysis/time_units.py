"""Experiments whose clocks run in another unit than the others'.

The model has one time unit.  One run's times in minutes among runs in
seconds (a user's CSTR: spans of 60 against 3600) were flagged only as "a
local minimum or a model that cannot describe these data"; a subject's
times in minutes among subjects in hours (a pharmacometrician's, 1440
against 24) gave `CL` 76 standard errors off, `success=True`, the fit not
flagged, where the residuals of that subject's 8 samples could not show it.

Experiments whose time spans differ :data:`SPAN_RATIO`-fold or more are
named.  Where a short experiment's sample times, times a factor between
time units (:data:`TIME_FACTORS`), are a longer one's sample times (the
same design on another clock), the note says so, and it is a
:class:`~picard_casadi.FitWarning` (:data:`SAME_DESIGN`): runs planned
apart by such a factor do not share their sampling schedule to 1 %.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["time_unit_notes", "SPAN_RATIO", "TIME_FACTORS", "SAME_DESIGN", "MATCHED_SHARE"]

#: experiments whose time spans differ by this factor or more are named
SPAN_RATIO = 30.0
#: factors between time units, with their names
TIME_FACTORS = {60.0: "minutes and hours, or seconds and minutes", 1000.0: "ms and s",
                1440.0: "minutes and days", 3600.0: "seconds and hours",
                86400.0: "seconds and days", 365.25: "days and years"}
#: what the note says where the sampling schedules match under a factor (a
#: FitWarning: :func:`picard_casadi.analysis.fit_check.is_fit_note`)
SAME_DESIGN = "are the sample times of another experiment"
#: this share of a short experiment's distinct sample times (at least
#: MIN_MATCHED of them), times the factor, within MATCH_TOL (relative) of
#: the longer one's
MATCHED_SHARE = 0.8
MIN_MATCHED = 4
MATCH_TOL = 0.01


def _matching_factor(short: np.ndarray, long_: np.ndarray) -> float | None:
    """The factor of :data:`TIME_FACTORS` under which the distinct nonzero
    times ``short`` are the times ``long_``, or None."""
    s = np.unique(short[np.isfinite(short) & (short != 0.0)])
    target = np.unique(long_[np.isfinite(long_)])
    if s.size < MIN_MATCHED or target.size == 0:
        return None
    for factor in TIME_FACTORS:
        scaled = s * factor
        where = np.clip(np.searchsorted(target, scaled), 1, target.size - 1)
        nearest = np.where(np.abs(target[where] - scaled) < np.abs(target[where - 1] - scaled),
                           target[where], target[where - 1]) if target.size > 1 else target[0]
        close = np.abs(nearest - scaled) <= MATCH_TOL * np.abs(scaled)
        if np.count_nonzero(close) >= max(MIN_MATCHED, MATCHED_SHARE * s.size):
            return factor
    return None


def time_unit_notes(experiments: Sequence) -> list[str]:
    """A note naming the experiments whose time spans are :data:`SPAN_RATIO`
    times shorter than the longest's, or none; it contains
    :data:`SAME_DESIGN` where a short one's times, times a factor between
    time units, are a longer one's."""
    spans = {e.name: float(e.t_end - e.t0) for e in experiments}
    longest = max(spans.values(), default=0.0)
    short = [n for n, v in spans.items() if 0.0 < v and v * SPAN_RATIO <= longest]
    if not short:
        return []
    long_ = [n for n, v in spans.items() if v * SPAN_RATIO > longest]
    note = (f"experiment(s) {short} span {', '.join(f'{spans[n]:g}' for n in short)} time "
            f"units, {longest / max(spans[n] for n in short):.0f} times less than "
            f"{long_} ({', '.join(f'{spans[n]:g}' for n in long_)}): if their times are in "
            "another unit (minutes beside seconds, say), convert them; the model has one "
            "time unit")
    times = {e.name: np.asarray(e.t, float) - float(e.t0) for e in experiments}
    for s in short:
        for n in long_:
            factor = _matching_factor(times[s], times[n])
            if factor is not None:
                return [note + f" (the times of {s!r}, times {factor:g}, {SAME_DESIGN}, "
                        f"{n!r}: {TIME_FACTORS[factor]}?)"]
    return [note]
