"""Initial states held at a noisy first measurement.

A state measured directly, held at its first sample as a known initial
state (``Experiment(x0=y[0])`` with ``estimate_x0=False``, or the command
line's ``--x0-known``), starts the model at a value that carries the
measurement's noise; a slow or integrating state keeps that error, and the
parameters absorb it.  A ship's yaw model fitted to two zig-zags with the
heading and yaw rate held at their first samples: the rudder biases 25 and
29 standard errors off (their standard errors half those of the fit that
estimates the initial states), `success=True`, one note that the standard
errors were 1.3 times too narrow; over 20 data sets every interval of the
biases missed the truth.

Where every experiment's known initial value of such a state is its first
measurement, the call fits again with those initial states estimated,
from its own result, and compares the likelihoods: where twice the gain
exceeds the chi-square's 0.1 % point for as many degrees of freedom as
initial states were freed, the data reject the values held, and the
result gets a :class:`~picard_casadi.FitWarning` naming how far each
parameter moves, in its standard errors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ..analysis.fit_check import NOISY_START
from ..errors import FitWarning
from ..experiment import Experiment
from ..model import Model
from ..result import EstimationResult
from ..runtime.user_warnings import held_warnings, warn_user

__all__ = ["held_first_samples", "note_noisy_known_starts", "NOISY_START", "chi2_upper"]

#: the standard normal quantile of the test's level (0.1 %)
_Z_LEVEL = 3.090232306167813


def chi2_upper(k: int) -> float:
    """The chi-square distribution's upper 0.1 % point for ``k`` degrees of
    freedom (Wilson and Hilferty's cube: at most 3 % above it, at ``k = 1``)."""
    a = 2.0 / (9.0 * k)
    return k * (1.0 - a + _Z_LEVEL * math.sqrt(a)) ** 3


def held_first_samples(model: Model, experiments: Sequence[Experiment],
                       known: np.ndarray) -> list[int]:
    """The states held known (``known``, one bool per state) that are an
    output themselves and whose known initial value is, in every
    experiment, that output's measurement at ``t0``."""
    states: list[int] = []
    by_model = model.x0_given
    for k, i in enumerate(model.output_state_index):
        if i is None or not known[i] or i in states or by_model[i]:
            continue
        held = bool(experiments)
        for e in experiments:
            y = np.asarray(e.y, float)
            x0 = None if e.x0 is None else np.asarray(e.x0, float).ravel()
            if (x0 is None or x0.size <= i or y.ndim != 2 or y.shape[0] == 0
                    or not np.isclose(float(e.t[0]), float(e.t0), rtol=0.0, atol=1e-12)
                    or not np.isfinite(y[0, k])
                    or abs(x0[i] - y[0, k]) > 1e-12 * max(1.0, abs(y[0, k]))):
                held = False
                break
        if held:
            states.append(i)
    return states


def _finite(value: float | None) -> bool:
    return value is not None and bool(np.isfinite(value))


def note_noisy_known_starts(result: EstimationResult, model: Model,
                            experiments: Sequence[Experiment], known: np.ndarray,
                            refit: Callable[[np.ndarray], EstimationResult]) -> None:
    """Test the initial states held at their first measurements (the module
    docstring) and note in ``result`` (changed in place) where the data
    reject them.  ``refit(estimate_x0)`` fits again with that mask of
    estimated initial states, from ``result``."""
    if not result.success or not _finite(result.nllh):
        return
    states = held_first_samples(model, experiments, known)
    if not states:
        return
    mask = ~np.asarray(known, bool)
    mask[states] = True
    with held_warnings():  # the refit's own notes are not this call's
        freed = refit(mask)
    if not freed.success or not _finite(freed.nllh):
        return
    k = len(states) * len(experiments)
    gain = float(result.nllh - freed.nllh)
    if not 2.0 * gain > chi2_upper(k):
        return
    std = np.asarray(result.p_std if result.p_std is not None else [], float)
    moved = []
    if std.size == np.size(result.p):
        shift = np.abs(np.asarray(freed.p, float) - np.asarray(result.p, float)) / std
        order = [j for j in np.argsort(-shift) if np.isfinite(shift[j])][:4]
        moved = [f"{result.p_names[j]} by {shift[j]:.3g}" for j in order]
    names = ", ".join(model.x_names[i] for i in states)
    note = (f"{NOISY_START} ({names}, in each experiment; a measurement carries its noise): "
            f"estimated, from this fit, they raise the likelihood by {gain:.4g} (twice that "
            f"against {chi2_upper(k):.3g}, the chi-square's 0.1 % point for {k} initial "
            "states)" + (f", and the parameters move ({', '.join(moved)} of their standard "
                         "errors here)" if moved else "")
            + ": estimate them (estimate_x0 at its default; the command line without "
            "--x0-known), or give values known better than the noise")
    result.warnings.append(note)
    warn_user(note, FitWarning)
