"""The constrained step's second-order correction: tried only where it is small."""
from __future__ import annotations

import numpy as np

import picard_casadi as pc
from picard_casadi.transcription import functions as transcription
from picard_casadi.methods import condensed

GUARD = (condensed.SOC_MAX_SHIFT_RADII, condensed.SOC_MAX_SHIFT)


def _solve(prob, monkeypatch, guard: bool):
    """A picard-gn solve; the settles of its trial points counted."""
    radii, shift = GUARD if guard else (np.inf, np.inf)
    monkeypatch.setattr(condensed, "SOC_MAX_SHIFT_RADII", radii)
    monkeypatch.setattr(condensed, "SOC_MAX_SHIFT", shift)
    settles = []
    settle = transcription.Transcription.settle

    def counted(self, *args, **kwargs):
        settles.append(1)
        return settle(self, *args, **kwargs)

    monkeypatch.setattr(transcription.Transcription, "settle", counted)
    res = prob.estimate("picard-gn", refine=False, uncertainty=False)
    monkeypatch.setattr(transcription.Transcription, "settle", settle)
    return res, len(settles)


def test_large_corrections_are_skipped_without_changing_the_solve(monkeypatch):
    """From ``fa18-roll-rud`` seed 12's start the correction's chain shifts
    interval starts by up to 72 state scales for steps below one, and none
    of those points was ever kept: skipping them leaves every iteration and
    the estimate as they were and saves their settles."""
    prob = pc.problem("fa18-roll-rud", seed=12)
    unguarded, settles_unguarded = _solve(prob, monkeypatch, guard=False)
    guarded, settles_guarded = _solve(prob, monkeypatch, guard=True)
    assert unguarded.success and guarded.success
    assert guarded.iterations == unguarded.iterations
    np.testing.assert_array_equal(guarded.p, unguarded.p)
    assert settles_guarded < settles_unguarded
