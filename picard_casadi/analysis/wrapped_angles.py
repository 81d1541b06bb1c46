"""Angles recorded wrapped to one turn, fitted by a model whose angle runs on.

A compass records a heading within (-180, 180] degrees (or (-pi, pi]
radians); a model's heading integrates its rate and runs on past a turn.
Fitted as they are, the data jump a turn where the model does not: a ship's
20/20 zig-zag about a course of 170 degrees, its heading wrapped, was flagged
as "a local minimum (try multistart)", the noise level of the heading
estimated at 2.2 rad, nothing naming the jumps.

A series is named where consecutive samples differ by a whole turn (2 pi or
360, within :data:`TURN_TOL`) while its other steps are small
(:data:`SMOOTH_SHARE` of a turn at the median): a signal's own steps of a
turn between smooth neighbours are not plausible.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["wrapped_angle_note", "TURNS", "TURN_TOL", "SMOOTH_SHARE"]

#: a whole turn in radians and in degrees
TURNS = {2.0 * math.pi: "2 pi", 360.0: "360"}
#: a step within this fraction of a turn of a whole turn (after the series'
#: typical step) is a wrap
TURN_TOL = 0.05
#: the series' median step at most this fraction of a turn: smooth
SMOOTH_SHARE = 0.02


def wrapped_angle_note(experiments: Sequence, output_names: Sequence[str]) -> str:
    """A note naming the outputs whose data jump by a whole turn between
    samples (the module docstring), or ``""``."""
    found = []
    for e in experiments:
        t, Y = np.asarray(e.t, float), np.asarray(e.y, float)
        if Y.ndim != 2:
            continue
        for k, name in enumerate(output_names[:Y.shape[1]]):
            ok = np.isfinite(Y[:, k])
            y, when = Y[ok, k], t[ok]
            if y.size < 4:
                continue
            d = np.diff(y)
            typical = float(np.median(np.abs(d)))
            for turn, words in TURNS.items():
                if typical > SMOOTH_SHARE * turn:
                    continue
                jumps = np.flatnonzero(np.abs(np.abs(d) - turn) <= TURN_TOL * turn + 10 * typical)
                if jumps.size:
                    at = ", ".join(f"{when[j + 1]:g}" for j in jumps[:3])
                    found.append(f"{name!r} of {e.name!r} by {words} at t = {at}"
                                 + (", ..." if jumps.size > 3 else "")
                                 + f" ({jumps.size} time(s))")
                    break
    if not found:
        return ""
    return (f"the data jump by a whole turn between samples ({'; '.join(found[:4])}"
            f"{'; ...' if len(found) > 4 else ''}), as an angle recorded within one turn "
            "(a compass's heading within +-180 degrees) does, where the model's angle runs on: "
            "unwrap the data (numpy.unwrap, with period=360 for degrees), or fit the sine and "
            "cosine of the angle")
