"""Measurements that repeat the sample before: a historian's compression.

A process historian stores a value only when it moves by more than a
deadband, or at a slower rate, and a logger's export fills the rows between
with the last stored value; a sample-and-hold does the same.  Those rows are
no new measurements of the output at their times: fitted as such, each
stretch of repeats pulls the fit towards a staircase that lags the process.
A process engineer's PRBS test, its temperature stored every 5 s and read
at 1 s (four rows in five repeating the one before): the dead time 9.16 +-
0.06 s for 7.3, 32 standard errors late, success, no word.

An output whose finite samples (one per time) equal the one before at
:data:`REPEAT_SHARE` or more of them, and that changes somewhere, gets a
note naming the share and the longest run.  Readings quantised coarser
than the noise repeat too (an encoder at rest); the note names both causes.
Whole numbers (counts, which repeat by themselves) and repeats of an
output's smallest value (zeros, a detection limit) are left alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["repeated_values", "REPEAT_HEAD", "REPEAT_SHARE", "MIN_REPEAT_SAMPLES"]

#: how the note begins (a FitWarning: analysis/fit_check.py's is_fit_note)
REPEAT_HEAD = "the measurements repeat"
#: this share of an output's samples equal to the sample before ...
REPEAT_SHARE = 0.5
#: ... over at least this many samples is noted
MIN_REPEAT_SAMPLES = 10


def _runs(equal: np.ndarray) -> int:
    """The longest run of ``True`` in ``equal`` (a sample equal to the one
    before), plus the sample it repeats."""
    longest = current = 0
    for same in equal:
        current = current + 1 if same else 0
        longest = max(longest, current)
    return longest + 1


def repeated_values(data: Sequence[np.ndarray], times: Sequence[np.ndarray],
                    experiment_names: Sequence[str], output_names: Sequence[str]) -> list[str]:
    """One note per output whose samples repeat the one before at
    :data:`REPEAT_SHARE` or more of them in an experiment (the module
    docstring); empty where none do.

    Parameters
    ----------
    data : sequence of ndarray (N_e, ny)
        Per experiment, the measurements (NaN: missing).
    times : sequence of ndarray (N_e,)
    experiment_names, output_names : sequences of str
    """
    notes = []
    for k, output in enumerate(output_names):
        found = []
        for y, t, name in zip(data, times, experiment_names):
            y = np.asarray(y, float)
            if y.ndim != 2 or y.shape[1] <= k:
                continue
            ok = np.isfinite(y[:, k])
            _, first = np.unique(np.asarray(t, float)[ok], return_index=True)
            values = y[ok, k][first]  # one per time (replicates are no repeats)
            if (values.size < MIN_REPEAT_SAMPLES or np.all(values == values[0])
                    or np.all(values == np.round(values))):
                # (counts repeat by themselves: daily cases 0 0 1 0 2)
                continue
            # a floor repeats too (zeros, a detection limit): not counted
            equal = (values[1:] == values[:-1]) & (values[1:] != values.min())
            share = float(np.mean(equal))
            if share >= REPEAT_SHARE:
                found.append(f"{name!r} ({share:.0%} of {values.size} samples, runs of up to "
                             f"{_runs(equal)})")
        if found:
            notes.append(
                f"{REPEAT_HEAD}: output {output!r} equals its sample before in experiment(s) "
                f"{', '.join(found)}: a historian's compression or a sample-and-hold (a value "
                "kept until the next is stored), or readings quantised coarser than the "
                "noise; repeats are no new measurements at their times, and fitted as such "
                "they bias the estimates (a lag, as a dead time late) and the standard errors: "
                "where they are stored values held, keep only the stored samples (NaN in y "
                "for the repeats)")
    return notes
