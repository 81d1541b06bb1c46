"""What the user's call says once, after its second runs.

A second run of :func:`~picard_casadi.estimate` (another start, method or
mesh) returns its result to the call that made it, which words the notes
that hold for the problem as the user stated it: the likeliest causes of a
failed or flagged fit (a clock left at the first sample, outputs in other
units, states never measured that start at 0), outputs never measured,
states outside their box, initial states given but estimated, a noise level
from few measurements per estimated quantity, and for a failure a model
that is not smooth, parameters held by their bounds, or a start of the
wrong sign.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..analysis.fit_check import LACK_OF_FIT
from ..errors import FitWarning
from ..experiment import Experiment
from ..model import Model
from ..result import EstimationResult
from ..runtime.user_warnings import warn_user
from .assembly import GROWING_NOISE_HEAD, POOLED_NOISE_HEAD, SMALL_VALUES_MISSED
from ..analysis.nonsmooth import nonsmooth_note
from .diagnosis import (UNIT_CERTAIN, UNIT_RATIO, drop_uncertainty, held_by_bounds_note,
                        late_clock_note, outside_box_note, sign_flip_note,
                        unit_outlier_note, unmeasured_outputs_note)
from .fallbacks import NOISE_NOT_POSITIVE, OUTPUT_NOT_POSITIVE

__all__ = ["close_call"]

#: failures whose cause the message already names
_NAMED_FAILURES = ("plateau", "stopped", NOISE_NOT_POSITIVE, OUTPUT_NOT_POSITIVE)


def close_call(result: EstimationResult, experiments: Sequence[Experiment], model: Model,
               user_model: Model, user_experiments: Sequence[Experiment], p0: np.ndarray,
               bounds: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
               x0_known: np.ndarray) -> None:
    """Word the notes of the call's result (changed in place).

    Parameters
    ----------
    result
        The call's result, after its second runs.
    experiments, model
        The problem as fitted (each output on the scale of its noise model).
    user_model, user_experiments
        The problem as the user stated it.
    p0
        The call's start.
    bounds
        ``(p_lb, p_ub, x_lb, x_ub)``.
    x0_known
        Per state, whether its initial value is given rather than estimated.
    """
    p_lb, p_ub, x_lb, x_ub = bounds
    if not result.success:  # no optimum, no standard errors (docs/api.md)
        drop_uncertainty(result)
    for note in result.warnings:
        if ("information matrix" in note or note.startswith(POOLED_NOISE_HEAD)
                or note.startswith(GROWING_NOISE_HEAD)):
            warn_user(note)
        elif note.startswith(LACK_OF_FIT) and SMALL_VALUES_MISSED in note:
            warn_user(note, FitWarning)
    late = late_clock_note(experiments, model.x_names, x0_known)
    if late:
        # first: where the fit is flagged, this is the likelier cause
        result.warnings.insert(0, late)
        warn_user(late)
    units = unit_outlier_note(user_experiments, user_model.y_names,
                              UNIT_RATIO if not result.success or result.fit_flagged
                              else UNIT_CERTAIN)
    if units:
        # the likeliest cause of a failed or flagged fit where it holds
        result.warnings.insert(0, units)
        warn_user(units)
        if not result.success:
            result.message = f"{result.message}. Note: {units}"
    for note in (unmeasured_outputs_note(user_experiments, user_model.y_names),
                 outside_box_note(result, model.x_names, x_lb, x_ub),
                 _given_x0_estimated_note(result, user_experiments, model.x_names, x0_known),
                 _unmeasured_start_note(result, user_experiments, user_model, x0_known),
                 _own_unknowns_note(result, user_experiments, user_model, x0_known,
                                    p_lb < p_ub),
                 _few_degrees_note(result)):
        if note:
            result.warnings.append(note)
            warn_user(note)
    if not result.success and result.status not in _NAMED_FAILURES:
        for rough in (_out_of_reach_note(result, experiments), nonsmooth_note(model),
                      held_by_bounds_note(result, p_lb, p_ub), sign_flip_note(result, p0)):
            if rough:
                result.message = f"{result.message}. Note: {rough}"


def _given_x0_estimated_note(result: EstimationResult, experiments: Sequence[Experiment],
                             x_names: Sequence[str], x0_known: np.ndarray) -> str:
    """A note where every experiment gives its initial states and all are
    estimated (``estimate_x0`` left at True), and the data do not determine
    some of them (an infinite standard error), or ``""``: the values given
    were starting guesses (a pharmacologist's doses as ``x0=[dose, 0]``: the
    peripheral amount estimated at -240 mg, the volumes 10 times the truth,
    the warnings naming 24 undetermined initial states and never the flag)."""
    if (not result.success or np.any(x0_known) or result.x0_std is None
            or not all(e.x0 is not None for e in experiments)
            or len(result.x0_std) != len(experiments)):
        return ""
    unseen = [(e.name, x_names[i]) for e, std in zip(experiments, result.x0_std)
              for i in np.flatnonzero(np.isinf(np.asarray(std, float)))]
    if not unseen:
        return ""
    shown = ", ".join(f"{x} of {n!r}" for n, x in unseen[:3]) + (", ..." if len(unseen) > 3
                                                               else "")
    return (f"every experiment gives its initial states (Experiment(x0=...)), and all were "
            f"estimated from those values as starting guesses (estimate_x0=True, the "
            f"default); the data do not determine {len(unseen)} of them ({shown}). If the "
            "values given are known (a dose at t0, a state at rest), pass estimate_x0=False "
            "(or one flag per state; the CLI's --x0-known)")


def _unmeasured_start_note(result: EstimationResult, experiments: Sequence[Experiment],
                           model: Model, x0_known: np.ndarray) -> str:
    """A note for a failed or flagged fit where an experiment never measures
    an output that is a state whose initial value is estimated from the
    guess, or ``""``: that guess is 0 (no measurement to start from), where
    0 may be a state no run leaves (an ecologist's site whose predators were
    never counted: predators 0 at the start, a worse optimum even from the
    true rates, and a note blaming another unit)."""
    if result.success and not result.fit_flagged:
        return ""
    found = []
    for e in experiments:
        if e.x0 is not None:
            continue
        y = np.asarray(e.y, float)
        for k, i in enumerate(model.output_state_index):
            if (i is not None and i < len(x0_known) and not x0_known[i] and k < y.shape[1]
                    and not np.any(np.isfinite(y[:, k]))):
                found.append(f"{model.x_names[i]} of {e.name!r}")
    if not found:
        return ""
    return (f"the initial {', '.join(found)} start{'s' * (len(found) == 1)} from 0, as no "
            "measurement of "
            f"{'it' if len(found) == 1 else 'them'} in that experiment gives a start; where 0 "
            "is a state the model does not leave (no predators, no cells), the fit cannot move "
            "it: give that experiment's x0 (Experiment(..., x0=[...]), estimated from there)")


def _own_unknowns_note(result: EstimationResult, experiments: Sequence[Experiment],
                       model: Model, x0_known: np.ndarray, free: np.ndarray) -> str:
    """A note naming the experiments with at least as many unknowns of their
    own (estimated initial states, parameters per experiment) as
    measurements, or ``""``: their data are matched whatever the noise (a
    mouse with 2 readings for its growth rate and initial volume: no word,
    the first reading returned as the initial volume)."""
    if not result.success:
        return ""
    states = [n for i, n in enumerate(model.x_names)
              if not x0_known[i] and not model.x0_given[i]]
    names = list(result.p_names or [])
    found = []
    for e in experiments:
        own = [n for j, n in enumerate(names) if f"[{e.name}]" in n
               and j < free.size and free[j]] + [f"x0[{s}]" for s in states]
        measured = int(np.count_nonzero(np.isfinite(np.asarray(e.y, float))))
        if own and measured <= len(own):
            found.append(f"{e.name!r} ({measured} for {', '.join(own)})")
    if not found:
        return ""
    return (f"experiment(s) with no more measurements than unknowns of their own: "
            f"{'; '.join(found[:5])}{'; ...' if len(found) > 5 else ''}: their data are "
            "matched whatever the noise, so they test nothing of the model, and their own "
            "values' standard errors rest on the other experiments' noise level")


#: a failed fit whose residuals' sum of squares is this share of the data's
#: (about 0) or more never came near the data
OUT_OF_REACH = 0.95


def _out_of_reach_note(result: EstimationResult, experiments: Sequence[Experiment]) -> str:
    """A note for a failed fit whose residuals are about as large as the data
    themselves (:data:`OUT_OF_REACH`), or ``""``: the model's outputs never
    came near the data (viral loads in copies/mL, about 1e8, fitted by a
    model of log10 copies: 9 minutes, four methods, and a message advising
    a better p0)."""
    squares = sum(float(np.nansum(np.asarray(e.y, float) ** 2)) for e in experiments)
    if not (squares > 0 and np.isfinite(result.ssr) and result.ssr >= OUT_OF_REACH * squares):
        return ""
    return (f"the residuals are about as large as the data themselves (their sum of squares "
            f"{result.ssr:.3g}, the data's {squares:.3g}): the model's outputs never came near "
            "the data; are the data in the unit and on the scale of the model's outputs "
            "(copies/mL for a model of log10 copies, or the reverse; mm for m)?")


#: estimated quantities per measurement from which the noise variance's bias
#: is named
FEW_DEGREES = 0.2


def _few_degrees_note(result: EstimationResult) -> str:
    """A note where the noise levels were estimated by the likelihood from
    few measurements per estimated quantity (:data:`FEW_DEGREES` or more),
    or ``""``: the variance ``SSR / N`` is biased low by ``(N - n) / N``,
    and the standard errors are too small by its square root (a
    pharmacologist's 26 parameters per subject and a noise level on 69
    concentrations: 4 of 26 intervals missed the truth, the noise 0.099 for
    0.15)."""
    covariance = getattr(result, "_covariance", None)
    if (not result.success or covariance is None or result.settings.get("weights") != "auto"
            or result.settings.get("noise") not in ("estimated", "mixed")):
        return ""
    noise = len(result.settings.get("noise_parameter_values") or {}) or len(result.y_names)
    n, N = len(covariance[0]) + noise, int(result.n_measurements)
    if N <= n or n < FEW_DEGREES * N:
        return ""
    kept = (N - n) / N
    return (f"{N} measurements for {n} estimated quantities (parameters, initial states and "
            f"noise levels): the noise variance, estimated as SSR / N, is biased low by about "
            f"(N - n) / N = {kept:.2f} with so few left, so the standard errors are about "
            f"{1 / np.sqrt(kept):.2f} times too small and the 95 % intervals cover less "
            "(docs/likelihood.md); widen them by that factor to compare, or estimate fewer "
            "quantities")
