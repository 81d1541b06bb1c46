"""A model that oscillates faster than the data are sampled.

Samples can follow an oscillation of less than half a cycle between them;
beyond that, a faster one passes through the same points (aliasing).  At the
start, such a model makes the fit slow or fail (a Duffing oscillator's times
in milliseconds for seconds: 15 cycles between samples, no result after 15
minutes); at an estimate, it is an answer the data cannot tell from a slower
oscillation: an ecologist's annual counts of an 8.2-year predator-prey
cycle, from a start 10 times off, converged on a 0.89-year cycle (nllh 2.3
above the best), certified and unflagged, h 37 standard errors off.
Both are measured by
:func:`~picard_casadi.transcription.stiffness.cycles_per_sample`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analysis.fit_check import ALIASED_NOTE
from ..methods.base import Setup
from ..transcription.stiffness import ALIASED_CYCLES, cycles_per_sample

__all__ = ["aliased_start_note", "aliased_estimate_note", "ALIASED_AT_ESTIMATE"]

#: the model at a converged estimate oscillating more than this many times
#: between consecutive samples (Nyquist's half cycle) is flagged
ALIASED_AT_ESTIMATE = 0.5


def aliased_start_note(setup: Setup) -> str:
    """A note where the model at the start oscillates more than
    :data:`~picard_casadi.transcription.stiffness.ALIASED_CYCLES` times
    between consecutive samples, or ``""``."""
    cycles = cycles_per_sample(setup.disc, setup.tr.node_jacobians(setup.U0, setup.p0))
    if not cycles > ALIASED_CYCLES:
        return ""
    return (f"at the start the model oscillates {cycles:.3g} times between consecutive "
            "samples: the data cannot follow it, and the fit will be slow or fail; the times "
            "in another unit than the model's (ms for s?), measured states in another unit "
            "(mm for m? a nonlinear model started from them runs elsewhere), or a start far "
            "too fast?")


def aliased_estimate_note(setup: Setup, U: Any, p: Any) -> str:
    """A note (for a :class:`~picard_casadi.FitWarning`) where the model at the
    estimate (the solution ``U`` at the nodes, parameters ``p``) oscillates
    more than :data:`ALIASED_AT_ESTIMATE` times between consecutive samples
    over most of the record, in a mode that lasts from one sample to the
    next, or ``""``."""
    if U is None:
        return ""
    try:
        cycles = cycles_per_sample(setup.disc, setup.tr.node_jacobians(U, np.asarray(p, float)),
                                   lasting=True)
    except (RuntimeError, ValueError, np.linalg.LinAlgError):
        return ""
    if not cycles > ALIASED_AT_ESTIMATE:
        return ""
    return (f"at the estimate the model oscillates {cycles:.3g} times between consecutive "
            f"samples (its linearisation's fastest lasting cycle, over most of the record), "
            f"more than half a cycle, so "
            f"{ALIASED_NOTE} passing through the same samples (aliasing): this is often a "
            "poor local optimum (try multistart=8 or another p0); if the oscillation is that "
            "fast, only samples closer together can show it")
