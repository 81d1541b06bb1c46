"""Residuals correlated in time: standard errors that assume independent noise.

The standard errors (and the likelihood's intervals) count every sample as
an independent measurement.  Where consecutive residuals are correlated (a
climate record's internal variability, a sensor's drift, dynamics the model
leaves out) the data hold fewer independent measurements than samples, and
the intervals are too narrow: for first-order autoregressive noise of lag-1
correlation ``phi``, by about ``sqrt((1 + phi) / (1 - phi))`` (1.7 at 0.5).
A two-layer climate model fitted to annual temperatures with AR(1) noise of
``phi = 0.5``: estimates 3 to 4.6 standard errors off, the standard errors
about half what the spread of ten data sets gave, and no word.

Per output, the residuals of each experiment in time order (replicates
averaged) give the lag-1 autocorrelation, pooled over the experiments with
each one's residuals scaled by their own root mean square.  For independent
noise it is about ``N(0, 1/n)`` over ``n`` pairs (the fitted parameters take
it slightly negative); a note where it is both large (:data:`SERIAL_R`) and
far beyond chance (:data:`SERIAL_Z`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["serial_correlation_notes", "SERIAL_HEAD", "SERIAL_R", "SERIAL_Z", "MIN_PAIRS"]

#: how the note begins
SERIAL_HEAD = "the residuals are correlated in time"
#: a lag-1 autocorrelation at least this large (the intervals 1.2 times too narrow) ...
SERIAL_R = 0.2
#: ... and this many of its standard errors under independent noise is noted
#: (a false note on white noise: 3e-5 per output)
SERIAL_Z = 4.0
#: at least this many pairs of consecutive residuals in an output
MIN_PAIRS = 20
#: residuals whose root mean square is below this fraction of the data's are
#: round-off or the discretisation's (noise-free data), not noise
NOISE_FREE = 1e-6


def _series(y: np.ndarray, g: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The residuals of one output in time order, replicates averaged."""
    ok = np.isfinite(y) & np.isfinite(g)
    if not np.any(ok):
        return np.zeros(0)
    times, back = np.unique(t[ok], return_inverse=True)
    r = y[ok] - g[ok]
    return np.bincount(back, weights=r) / np.bincount(back)


def serial_correlation_notes(data: Sequence[np.ndarray], fitted: Sequence[np.ndarray],
                             times: Sequence[np.ndarray], output_names: Sequence[str],
                             skipped: Sequence[int] = ()) -> list[str]:
    """One note per output whose residuals are correlated in time (the
    module docstring); empty where none are.

    Parameters
    ----------
    data, fitted, times, output_names
        As :func:`picard_casadi.analysis.replicates.replicate_misfit` takes
        them: per experiment the measurements (NaN where missing), the fit
        at its sample times and those times; the outputs' names.
    skipped : sequence of int
        Outputs another note already calls a misfit.
    """
    notes = []
    for k, name in enumerate(output_names):
        if k in skipped:
            continue
        lagged = squares = 0.0
        pairs = 0
        for y, g, t in zip(data, fitted, times):
            y, g = np.asarray(y, float), np.asarray(g, float)
            if y.ndim != 2 or y.shape[1] <= k or np.shape(g) != y.shape:
                continue
            r = _series(y[:, k], g[:, k], np.asarray(t, float))
            scale = float(np.sqrt(np.mean(r * r))) if r.size else 0.0
            data_scale = float(np.sqrt(np.nanmean(y[:, k] ** 2))) if r.size else 0.0
            if r.size < 3 or not scale > NOISE_FREE * data_scale:
                continue
            r = (r - r.mean()) / scale
            lagged += float(np.sum(r[1:] * r[:-1]))
            squares += float(np.sum(r * r))
            pairs += r.size - 1
        if pairs < MIN_PAIRS or not squares > 0:
            continue
        phi = lagged / squares
        z = phi * math.sqrt(pairs)
        if phi >= SERIAL_R and z >= SERIAL_Z:
            factor = math.sqrt((1 + phi) / (1 - phi)) if phi < 1 else math.inf
            notes.append(
                f"{SERIAL_HEAD} in output {name!r}: consecutive residuals correlate "
                f"{phi:.2f} over {pairs} pairs (z = {z:.1f}; independent noise gives about 0 "
                f"+- {1 / math.sqrt(pairs):.2f}); the standard errors and intervals count each "
                f"sample as independent and are too narrow, by about {factor:.1f} times for "
                "noise of that lag-1 correlation (correlated noise, as a climate record's "
                "variability, or dynamics the model leaves out; docs/uncertainty.md)")
    return notes
