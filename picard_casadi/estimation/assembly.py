"""A finished run as an :class:`~picard_casadi.result.EstimationResult`.

:func:`assemble` gathers the estimate, the history, the fit at the samples
and the settings; :func:`judge` turns the discretisation certificate into
the result's status and notes; the other functions word the notes a result
carries about its start and its noise levels (its inputs':
:mod:`.input_notes`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

import numpy as np

from ..analysis.certificate import INTEGRATION_FAILED, Certificate, short_of_optimum
from ..analysis.fit_check import LACK_OF_FIT
from ..analysis.interval_information import GROWTH_LIMIT
from ..analysis.likelihood import NoiseGroups, noise_fit
from ..analysis.prediction_band import sensitivity_source
from ..analysis.quantiles import beta_cdf
from ..errors import DiscretisationWarning
from ..experiment import Experiment
from ..methods.base import (ANCHORED_ADVICE, SHOOTING_ADVICE, WEIGHTS_ADVICE, IterationRecord,
                            LoopOutcome, Setup)
from ..model import Model
from ..result import EstimationResult
from ..runtime.user_warnings import warn_user
from ..transcription.guess import GUESS_NOTE
from ..transcription.predict import simulation_predictor
from .diagnosis import fitted_outputs
from .refinement import COLLOCATION_METHODS, FitProblem

__all__ = ["assemble", "attach_noise", "degenerate_noise_note", "pooled_noise_note",
           "POOLED_NOISE_HEAD", "judge", "unfinite_start",
           "applicable_advice", "growing_noise_notes", "GROWING_NOISE_HEAD",
           "given_weights_note",
           "SMALL_VALUES_MISSED"]


def unfinite_start(model: Model, experiments: Sequence[Experiment], p0: np.ndarray) -> str:
    """Where ``f`` is not finite at an experiment's start with its guessed
    ``x0``: which states were guessed 0 for want of a measurement (a fed-batch
    volume dividing the feed, ``F / V``), and the fix."""
    for e in experiments:
        x0 = e.x0_guess(model, p0)
        u0 = e.inputs([e.t0], model.nu)[0]
        with np.errstate(all="ignore"):
            value = np.asarray(model.f(e.t0, x0, p0, u0), float)
        blamed = (_input_at_start(model, e, x0, p0, u0) if not np.all(np.isfinite(value))
                  else "")
        if blamed:
            # (a car's log from standstill: the slip angles divide by V = 0,
            # and the message blamed x0, then p0)
            return (f"; the right-hand side is not finite at the start of experiment "
                    f"{e.name!r} (t = {e.t0:g}), where its input {blamed}, and finite with that "
                    "input at its later values: the model divides by it (or takes its log "
                    "or a power) there; start the record where it is away from that value "
                    "(leave out the samples before), or write the model to stay finite there")
        zero = (_zero_parameters(model, e.t0, x0, np.asarray(p0, float), u0)
                if not np.all(np.isfinite(value)) else "")
        if zero:
            # (a quadrotor's 1/Iyy started at Iyy = 0 was told to guess x0)
            return (f"; the right-hand side is not finite at the start of experiment "
                    f"{e.name!r} (t = {e.t0:g}) with {zero} in p0, and finite with it moved "
                    "off 0: the model divides by it (or takes its log or a power); start it "
                    "at its expected size, and bound it away from 0 (p_bounds) where 0 is "
                    "not physical")
        if np.all(np.isfinite(value)):
            with np.errstate(all="ignore"):
                out = np.asarray(model.g(e.t0, x0, p0, u0), float).ravel()
            if np.all(np.isfinite(out)):
                continue
            # (a battery's OCV, exp(-30 (1 - SOC)), at SOC = 70 given in percent)
            bad = [model.y_names[k] for k in np.flatnonzero(~np.isfinite(out))]
            state = ", ".join(f"{n} = {v:.4g}" for n, v in zip(model.x_names, x0))
            return (f"; the output(s) {', '.join(bad)} are not finite at the start of "
                    f"experiment {e.name!r} (t = {e.t0:g}), at its initial state ({state}), "
                    "though the right-hand side is: an overflow (exp of a large argument: a "
                    "state or parameter in other units than the model's, a percentage for "
                    "a fraction) or a logarithm of a value that is not positive; check the "
                    "experiment's x0 and p0")
        if e.x0 is not None:  # the start as given: the model itself, not a guess
            bad = [model.x_names[i] for i in np.flatnonzero(~np.isfinite(value))]
            shifted = getattr(model, "_shifted_states", None) or (False,) * model.nx
            # a shifted state's x0 is 0 here, its deviation from Model(x0=...)
            # (a kineticist's A = purity * A0 = 1.8 was shown as 0)
            state = ", ".join(f"{n} from Model(x0=...)" if s else f"{n} = {v:.4g}"
                              for n, v, s in zip(model.x_names, x0, shifted))
            where = (f"; the right-hand side for {', '.join(bad)} is not finite at the start "
                     f"of experiment {e.name!r} (t = {e.t0:g}), at its initial state "
                     f"({state}), and a simulation fails there too: ")
            if _not_finite_anywhere(model, e.t0, p0, u0):
                # (an activation energy in J/mol beside R in kJ/mol/K: exp overflows)
                return where + (
                    "it is not finite at other states either, so the parameter values make "
                    "it so (an overflow, such as exp of a large argument, a value in other "
                    "units than the model's, or 0/0 such as a Hill term whose powers "
                    "underflow): check p0's units, start from another p0, or bound the "
                    "parameters, p_bounds, to where the model is finite")
            # (a user's x' = -a x^b from x0 = -1 was told only of the parameters)
            return where + (
                "either that state lies outside the model's domain (a non-integer power "
                "or a logarithm of a negative state, a division by a state that is 0: "
                "check the experiment's x0), or the model cannot be evaluated at these "
                "parameter values (an overflow, or 0/0 such as a Hill term whose powers "
                "underflow: start from another p0, or bound the parameters, p_bounds, "
                "to where the model is finite)")
        measured = {i for i in model.output_state_index if i is not None}
        zero = [model.x_names[i] for i in range(model.nx) if i not in measured]
        first_nan = [model.x_names[i] for k, i in enumerate(model.output_state_index)
                     if i is not None and not np.isfinite(e.y[0, k])]
        guessed = (f"{', '.join(zero)} not measured, so guessed 0" if zero else "")
        if first_nan:
            guessed += ("; " if guessed else "") + (
                f"{', '.join(first_nan)} taken from a later sample (the first is missing)")
        return (f"; f is not finite at the start of experiment {e.name!r} (t = {e.t0:g}) "
                f"with x0 guessed {np.array2string(x0, precision=4)} ({guessed}): give a "
                f"guess, Experiment(..., x0=[...]) (estimated from there unless "
                "estimate_x0=False)")
    return ""


def _zero_parameters(model: Model, t: float, x0: np.ndarray, p: np.ndarray,
                     u0: np.ndarray) -> str:
    """``"Iyy = 0"``: the parameters at 0 in ``p`` without which ``f`` (not
    finite there) is finite at ``x0`` (each moved to 1 alone, then all
    of them), else ``""``."""
    zeros = np.flatnonzero(p == 0.0)
    for group in [[j] for j in zeros] + ([list(zeros)] if zeros.size > 1 else []):
        moved = p.copy()
        moved[group] = 1.0
        with np.errstate(all="ignore"):
            if np.all(np.isfinite(np.asarray(model.f(t, x0, moved, u0), float))):
                return ", ".join(f"{model.p_names[j]} = 0" for j in group)
    return ""


def _input_at_start(model: Model, e: Experiment, x0: np.ndarray, p: np.ndarray,
                    u0: np.ndarray) -> str:
    """``"V = 0"`` where ``f`` is finite at ``x0`` and ``p`` with that input at
    the median of its later values in place of its value at the start (the
    first such input), else ``""``."""
    if model.nu == 0:
        return ""
    later = e.inputs(np.linspace(e.t0, e.t_end, 50)[1:], model.nu)
    for k in range(model.nu):
        moved = np.array(u0, float)
        moved[k] = float(np.median(later[:, k]))
        if moved[k] == u0[k]:
            continue
        with np.errstate(all="ignore"):
            value = np.asarray(model.f(e.t0, x0, p, moved), float)
        if np.all(np.isfinite(value)):
            return f"{model.u_names[k]} = {u0[k]:.4g}"
    return ""


def _not_finite_anywhere(model: Model, t: float, p: np.ndarray, u: np.ndarray) -> bool:
    """Whether ``f`` is not finite at ``p`` at a few positive states of
    different sizes either: the parameters, not the state, make it so."""
    with np.errstate(all="ignore"):
        return not any(np.all(np.isfinite(np.asarray(model.f(t, np.full(model.nx, level), p, u),
                                                     float)))
                       for level in (0.5, 1.0, 2.0))


def applicable_advice(message: str, weights_mode: str, ny: int, guess: str) -> str:
    """``message`` without the advice this run has taken already: per-output
    weights where ``weights="auto"`` was used or there is one output, the
    start it was given (a user with weights="auto" was told to use it)."""
    if weights_mode == "auto" or ny == 1:
        message = message.replace(WEIGHTS_ADVICE, "")
    tried = {"anchored": ANCHORED_ADVICE, "shooting": SHOOTING_ADVICE}.get(guess)
    if tried is not None:
        other = SHOOTING_ADVICE if tried == ANCHORED_ADVICE else ANCHORED_ADVICE
        message = message.replace(f"try {ANCHORED_ADVICE} or {SHOOTING_ADVICE}",
                                  f"try {other}")
    return message


def judge(result: EstimationResult, cert: Certificate, refinements: int,
           budget: int, method: str, kinked: Sequence[str] = (),
           jumps: Sequence[str] = (), growth: float = 1.0) -> None:
    """Attach the certificate and let it decide what ``success`` means
    (``kinked``: experiments from :func:`.input_notes.kinked_inputs`,
    ``jumps`` from :func:`.input_notes.jumping_inputs`, named in the advice;
    ``growth``: how much the solution's sensitivities grow along the data,
    where the model is unstable there)."""
    result.certificate = cert.to_dict()
    result.discretisation_error = float(cert.discretisation_error)
    if cert.passed:
        # the numbers of the ODE's own solution at the estimate, not of the mesh's
        N = result.n_samples
        result.ssr, result.weighted_ssr = cert.ssr_model, cert.weighted_ssr_model
        result.objective = 0.5 * result.ssr / N
        result.weighted_objective = 0.5 * result.weighted_ssr / N
        return
    if short_of_optimum(cert.stopped_short) or cert.model_failed:
        # whatever the method and the mesh: its convergence test passed where
        # its own objective still falls (PEtab's Borghans from uniform 19, seed
        # 0, before ae9bacc: picard-gn "converged" at nllh 277.2579, 8.6
        # standard errors from its own optimum; from p0, single shooting
        # reached -52.4638), or where the model's own solution is not the
        # fitted one (a fed-batch's substrate fitted through the pole of its
        # rate, tests/test_defaults.py)
        result.success = False
        result.status = "not_certified"
        result.message = (
            f"{method} met its convergence test, but its answer is not certified: "
            f"{cert.message}; try another p0, or another method (method=...)")
        return
    if method not in COLLOCATION_METHODS:
        # (where: the default path's fallback is no method the user chose)
        note = (f"{method}: its integration is not accurate enough for this data "
                f"({cert.message}); tighten its tolerances: estimate(..., method={method!r}, "
                "rtol=..., atol=...), below their defaults 1e-10")
        if cert.message.startswith(INTEGRATION_FAILED):
            # (its own integration converged; the check's of its intervals did
            # not: a car's tyres fed the steering wheel's degrees, whose
            # RuntimeError ended the call, and PEtab's Elowitz from uniform 16,
            # whose single shooting reaches the better optimum so)
            note = (f"{method}: the certificate's integration of its intervals failed at the "
                    f"estimate ({cert.message}): the answer is the method's own integration's, "
                    "not checked; check the units and scales of the data and inputs")
        if growth > GROWTH_LIMIT:
            # a closed-loop cart-pendulum, 4 s: 40 noise levels, which no
            # tolerance mends (the model's own solution from x0 is the check)
            note = (f"shooting: the check integrates the model from the estimated x0 through "
                    f"each whole experiment, and the model is unstable along the data (its "
                    f"sensitivities grow by {growth:.1e}): round-off and each interval's "
                    f"tolerance grow by as much ({cert.message}); each interval agrees with "
                    "the model, and the standard errors come from the intervals held by "
                    "continuity (docs/uncertainty.md), but the model's own solution from x0 "
                    "is not the fitted one (a record cut into experiments of their own, each "
                    "with its x0, is checked segment by segment)")
        result.warnings.append(note)
        warn_user(note, DiscretisationWarning)
        return
    if budget == 0:
        note = (f"the estimate is of the discretisation, not certified as the ODE's "
                f"({cert.message}); refine=True refines the mesh until it is, or pass a "
                f"smaller T or more nodes")
        result.warnings.append(note)
        warn_user(note, DiscretisationWarning)
        return
    result.success = False
    result.status = "not_certified"
    kinks = ""
    if kinked:
        # a user's forced Duffing: never certified after 5 refinements (285
        # intervals); with breakpoints at the input's samples, 206 intervals
        kinks = (f"the inputs of experiment(s) {', '.join(map(repr, kinked))} are samples "
                 "interpolated linearly, which kink at every sample inside the intervals: "
                 "give their sample times as breakpoints (Experiment(..., breakpoints=t)) "
                 "so that intervals start there; or ")
    if jumps:
        kinks += (f"the inputs of experiment(s) {'; '.join(jumps)} jump inside the "
                  "intervals: give those times as breakpoints (Experiment(..., "
                  "breakpoints=[...])) so that intervals start there; or ")
    result.message = (
        f"the estimate is not certified as the ODE's after {refinements} mesh "
        f"refinement(s) ({result.settings['intervals']} intervals): {cert.message}; "
        f"{kinks}pass a smaller T, more nodes, or refine=<more rounds>"
    )


def _history_dict(records: list[IterationRecord]) -> dict[str, list[float]]:
    if not records:
        return {}
    names = [f.name for f in fields(IterationRecord)]
    return {k: [getattr(r, k) for r in records] for k in names}


def attach_noise(result: EstimationResult, setup: Setup, weights_mode: str,
                 ssr_per_output: np.ndarray, groups: NoiseGroups | None = None) -> None:
    """Fill the result's likelihood (``nllh``, ``noise_sigma``, ``det_R``,
    ``aic``, ``bic``, ``settings["noise"]``) from each output's sum of squared
    residuals (:func:`~picard_casadi.analysis.likelihood.noise_fit`): the
    noise estimated unless the weights were given; ``groups``: which levels
    are known, estimated, shared (the noise models)."""
    disc = setup.disc
    noise = noise_fit(ssr_per_output, disc.mask.sum(axis=(0, 2)), disc.output_rms() ** 2,
                      int(setup.free_p.sum()) + sum(int(setup.free_x[sl.start].sum())
                                                    for sl in disc.intervals_of),
                      weights=(np.asarray(setup.tr.weights, float) if weights_mode == "given"
                               else None),
                      groups=groups if weights_mode == "auto" else None,
                      constant=-0.5 * disc.log_sample_weights())
    # values with their own sigma_i: the output's level times their RMS (1 / s_i)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(disc.mask > 0, 1.0 / disc.sample_weights, 0.0).sum(axis=(0, 2))
        own_rms = np.sqrt(inv / np.maximum(disc.mask.sum(axis=(0, 2)), 1))
    own_rms = np.where(np.isfinite(own_rms) & (own_rms > 0), own_rms, 1.0)
    result.nllh, result.det_R = noise.nllh, noise.det_R
    result.noise_sigma = noise.sigma * own_rms
    if not result.success:
        # a run that failed stopped at no optimum (gaps open: its misfit is not
        # the model's): a likelihood there would be taken for a result
        result.nllh = result.det_R = float("nan")
    result.aic, result.bic = ((noise.aic, noise.bic) if result.success
                              else (float("nan"), float("nan")))
    if groups is not None and weights_mode == "auto":
        values = dict(result.settings.get("noise_parameter_values", {}))
        stds = dict(result.settings.get("noise_parameter_std") or {})
        counts = disc.mask.sum(axis=(0, 2))  # each output's measured values
        for g, name in enumerate(groups.names):
            members = np.flatnonzero(groups.group == g)
            if members.size:
                values[name] = float(noise.sigma[members[0]])
                n = float(counts[members].sum())
                if result.success and n > 0:
                    # the expected information's: sigma^2 / (2 n), the noise
                    # parameter orthogonal to the model's (docs/likelihood.md)
                    stds[name] = float(values[name] / np.sqrt(2.0 * n))
        result.settings["noise_parameter_values"] = values
        if stds:
            result.settings["noise_parameter_std"] = stds
        note = noise_bound_note(groups.names, [values.get(n, np.nan) for n in groups.names],
                                groups.lower, groups.upper)
        if note and note not in result.warnings:
            result.warnings.append(note)
        est = groups.estimated.copy()
        est[list(groups.formula_outputs)] = True
        result.settings["noise"] = ("estimated" if est.all() else "given" if not est.any()
                                    else "mixed")
    else:
        result.settings["noise"] = "estimated" if noise.estimated else "given"
    if weights_mode == "auto":
        note = degenerate_noise_note(result, disc,
                                     None if groups is None else groups.estimated,
                                     noise_models=bool(result.settings.get("noise_given")))
        if note and note not in result.warnings:
            result.warnings.append(note)


#: how :func:`pooled_noise_note` begins
POOLED_NOISE_HEAD = "weights='none' pools the outputs into one noise variance"

#: the ratio of the outputs' residual levels beyond which pooling them is noted
POOLED_NOISE_RATIO = 10.0


#: given weights whose noise levels (``1 / sqrt(w)``) against the residuals'
#: RMS differ between outputs by this factor or more are named
GIVEN_WEIGHTS_RATIO = 10.0


def given_weights_note(result: EstimationResult, experiments: Sequence[Any],
                       fitted: Sequence[np.ndarray]) -> str:
    """A note where given weights (``weights=``, inverse noise variances,
    relative: the residuals give their scale) weigh the outputs against each
    other :data:`GIVEN_WEIGHTS_RATIO` times or more unlike their residuals'
    scatter, or ``""``: an engineer's weights given as the standard
    deviations, [0.02, 0.5], put the current's noise at 337 times its
    residuals' RMS and the speed's at 2.8, made every standard error 80 times
    too wide, and the warnings blamed an outlier."""
    w = np.asarray(result.weights if result.weights is not None else [], float).ravel()
    if result.settings.get("weights") != "given" or w.size != len(result.y_names):
        return ""
    ratios = {}
    for k, name in enumerate(result.y_names):
        r = np.concatenate([(np.asarray(e.y, float)[:, k] - np.asarray(G, float)[:, k])
                            for e, G in zip(experiments, fitted)])
        r = r[np.isfinite(r)]
        rms = float(np.sqrt(np.mean(r * r))) if r.size >= 3 else 0.0
        if rms > 0 and w[k] > 0:
            ratios[name] = (1.0 / float(np.sqrt(w[k])), rms)
    if len(ratios) < 2:
        return ""
    scale = {n: implied / rms for n, (implied, rms) in ratios.items()}
    if max(scale.values()) < GIVEN_WEIGHTS_RATIO * min(scale.values()):
        return ""
    listed = "; ".join(f"{n}: sigma {implied:.3g} from its weight, residuals' RMS {rms:.3g}"
                       for n, (implied, rms) in ratios.items())
    return (f"the weights given weigh the outputs {max(scale.values()) / min(scale.values()):.3g} "
            f"times unlike their residuals' scatter ({listed}): weights are inverse variances, "
            "1 / sigma^2 (given as the standard deviations?), and set how the outputs weigh "
            "against each other; noise=pc.Noise(sigma=...) states known noise levels, and "
            "weights='auto' estimates them")


def pooled_noise_note(result: EstimationResult) -> str:
    """A note where ``weights="none"`` (one variance for every output) met
    outputs whose residual levels (``result.noise_sigma``, each in its own
    unit) differ by more than :data:`POOLED_NOISE_RATIO`: the standard errors
    assume one level for all (a user's CSTR, concentration noise 0.01 beside
    temperature noise 0.5 K, had no word of it).  Empty where the levels are
    alike."""
    sigma = None if result.noise_sigma is None else np.asarray(result.noise_sigma, float)
    if sigma is None or sigma.size < 2 or not np.all(np.isfinite(sigma) & (sigma > 0)):
        return ""
    ratio = float(sigma.max() / sigma.min())
    if ratio <= POOLED_NOISE_RATIO:
        return ""
    levels = ", ".join(f"{n} {v:.3g}" for n, v in zip(result.y_names, sigma))
    return (f"{POOLED_NOISE_HEAD}, but their residual levels differ by a factor of "
            f"{ratio:.3g} ({levels}, each in its own unit): the fit weighs the outputs by "
            "their units, and the standard errors assume one noise level for all of them; "
            "leave `weights` unset to estimate each output's noise level (the likelihood), "
            "or give weights=[1/sigma_1^2, ...]")


#: how :func:`growing_noise_notes`' notes begin
GROWING_NOISE_HEAD = "the residuals of output"

#: an output's residuals where it is largest (the top third of its fitted
#: values' sizes) against where it is smallest (the bottom third), as
#: Goldfeld and Quandt compare them: noted as growing where their variance
#: ratio's F test gives a p-value below GROWING_NOISE_P and their RMS ratio
#: is at least GROWING_NOISE_RATIO (no note for a slight growth that many
#: values make significant), with at least GROWING_NOISE_MIN values a third
GROWING_NOISE_P = 1e-3
#: how the lack-of-fit note on an output's smallest values, all on one side
#: of the fit, goes on after the output's name (a FitWarning, with the
#: growing noise's test level)
SMALL_VALUES_MISSED = " where it is smallest: "
GROWING_NOISE_RATIO = 2.0
GROWING_NOISE_MIN = 5


def growing_noise_notes(result: EstimationResult, experiments: Sequence[Any],
                        fitted: Sequence[np.ndarray],
                        outliers: Sequence[np.ndarray] | None = None) -> list[str]:
    """A note for each output of one sign (a concentration, a count) fitted
    with one estimated noise level (normal noise, ``sigma`` estimated) whose
    residuals grow with its fitted value (:data:`GROWING_NOISE_P`): proportional noise
    (an assay's relative error over five decades of concentration gave 95 %
    intervals that held the truth in half of 30 data sets, with no word).
    ``fitted``: the outputs per experiment at its sample times; ``outliers``:
    per experiment, the samples named as gross outliers: an output with any
    gets no note (a lab reading of 0 made a CSTR's concentration "noise that
    grows"; the outliers' note comes first)."""
    models = [str(m) for m in result.settings.get("noise_model") or []]
    if models:
        names = [m.split(": ", 1)[0] for m in models]
        each = [m.endswith(": normal, sigma estimated") for m in models]
    else:  # noise unset: every output's normal, its sigma estimated unless given
        names = list(result.y_names)
        each = [result.settings.get("noise") == "estimated"] * len(names)
    notes = []
    for k, estimated in enumerate(each):
        if not estimated:
            continue
        g = np.concatenate([np.asarray(G, float)[:, k] for G in fitted])
        y = np.concatenate([np.asarray(e.y, float)[:, k] for e in experiments])
        keep = np.isfinite(y) & np.isfinite(g)
        if outliers is not None and any(np.asarray(m)[:, k].any() for m in outliers):
            # outliers first: a spike where the output is large pulls the fit
            # there, and the residuals beside it "grow with the output" too
            continue
        g, r = g[keep], (y - g)[keep]
        third = g.size // 3
        if third < GROWING_NOISE_MIN or not (np.all(g > 0) or np.all(g < 0)):
            # (an output of one sign, a concentration or a count, whose noise
            # is relative; a flight test's roll acceleration, swinging through
            # 0, has its larger model errors where it is large: ATTAS's pdot)
            continue
        order = np.argsort(np.abs(g))
        small, large = order[:third], order[-third:]
        rms_small = float(np.sqrt(np.mean(r[small] ** 2)))
        rms_large = float(np.sqrt(np.mean(r[large] ** 2)))
        ratio = (rms_large / rms_small) ** 2 if rms_small > 0 else np.inf
        # P(F(third, third) >= ratio) under one noise level for all
        p_value = (0.0 if not np.isfinite(ratio) else
                   1.0 - beta_cdf(ratio / (ratio + 1.0), 0.5 * third, 0.5 * third))
        size = np.abs(g)
        above = int(np.sum(r[small] > 0))
        p_sign = _sign_test(above, small.size)
        if p_sign < GROWING_NOISE_P:
            # the small values lost in one noise level: a sparse PK design's
            # additive fit (2-3 decades) left all 23 of its smallest above the
            # fit, by 6 times, V2 16 standard errors off with no word, the
            # residuals' RMS ratio 1.66 below the growth criterion
            side, ratio_y = ("above", "under") if above > small.size / 2 else ("below", "over")
            times = float(np.median(np.abs((r[small] + g[small]) / g[small])))
            notes.append(
                f"{LACK_OF_FIT} of output {names[k]!r}{SMALL_VALUES_MISSED}"
                f"{max(above, small.size - above)} of its {small.size} values where the fit is "
                f"smallest ({size[small].min():.3g} to {size[small].max():.3g}) lie {side} it "
                f"(sign test p = {p_sign:.2g}; the data {times:.3g} times the fit there, by "
                "their median), where one noise level was estimated for all: the large values "
                "set the fit and the small ones, lost in that noise, do not. A relative error "
                "(noise='log-normal', or pc.Noise(sigma=a + b*g, output=g, ...); "
                f"docs/likelihood.md) weighs each by its size; or the model is {ratio_y} the "
                "data there (a misfit)")
        elif rms_large >= GROWING_NOISE_RATIO * rms_small and p_value < GROWING_NOISE_P:
            notes.append(
                f"{GROWING_NOISE_HEAD} {names[k]!r} grow with its size: their RMS is "
                f"{rms_large:.3g} where |{names[k]}| is largest ({size[large].min():.3g} to "
                f"{size[large].max():.3g}) and {rms_small:.3g} where it is smallest "
                f"({size[small].min():.3g} to {size[small].max():.3g}), where one noise level "
                "was estimated for all: the large values weigh more than their noise allows "
                "and the standard errors assume a constant noise. noise='log-normal' (a "
                "relative error) or pc.Noise(sigma=a + b*g, output=g, ...) (docs/likelihood.md) "
                "models noise that grows with the output; a misfit where the output is "
                "largest looks the same")
    return notes


def _sign_test(k: int, n: int) -> float:
    """Two-sided p-value of ``k`` of ``n`` signs positive where each is so
    with probability 1/2."""
    extreme = max(k, n - k)
    tail = sum(math.comb(n, j) for j in range(extreme, n + 1)) / 2.0 ** n
    return min(1.0, 2.0 * tail)


def noise_bound_note(names: Sequence[str], values: Sequence[float],
                     lower: Sequence[float], upper: Sequence[float]) -> str:
    """A note naming the noise parameters that ended on a bound (``"s = 0.001"``;
    a lower bound of 0 is none): the data do not determine them within their
    bounds.  Empty where none did."""
    on_bound = [f"{n} = {v:.4g}" for n, v, lo, hi in zip(names, values, lower, upper)
                if (lo > 0 and np.isclose(v, lo, rtol=1e-9))
                or np.isclose(v, hi, rtol=1e-9)]
    if not on_bound:
        return ""
    return (f"noise parameter(s) {', '.join(on_bound)} ended on a bound: the data do not "
            "determine them inside their bounds (pc.Noise(bounds=...)); the likelihood "
            "and the standard errors hold for that value")


#: an output whose estimated noise, relative to its size, is this far below the
#: others' (or that has at most FEW_MEASUREMENTS values) decides the likelihood
DEGENERATE_NOISE = 1e-3
FEW_MEASUREMENTS = 2


def degenerate_noise_note(result: EstimationResult, disc: Any,
                          estimated: np.ndarray | None = None,
                          noise_models: bool = False) -> str:
    """A note where the likelihood with estimated noise is degenerate: an output
    fitted (nearly) exactly, or with too few values for a variance, gets a
    weight that lets it decide the estimate (a single measurement of the
    predators beside a measured prey: sigma 1e-6, the estimate 4 standard
    errors off, no word).  ``estimated``: the outputs whose noise was
    estimated (default every one); only they are judged.  ``noise_models``:
    the fit had noise models (``noise=``), so the advice is theirs, not
    ``weights=``, which such a fit refuses."""
    counts = disc.mask.sum(axis=(0, 2))
    rms = disc.output_rms()
    with np.errstate(all="ignore"):
        relative = result.noise_sigma / np.where(rms > 0, rms, 1.0)
    measured = (counts > 0) & (np.ones(counts.size, bool) if estimated is None
                               else np.asarray(estimated, bool))
    if np.count_nonzero(measured) < 2 or np.all(np.isnan(relative[measured])):
        return ""
    typical = float(np.nanmedian(relative[measured]))
    names = result.y_names or [f"y{k}" for k in range(counts.size)]
    odd = [f"{names[k]} ({int(counts[k])} value(s), sigma {result.noise_sigma[k]:.3g})"
           for k in np.flatnonzero(measured)
           if counts[k] <= FEW_MEASUREMENTS or relative[k] < DEGENERATE_NOISE * typical]
    if not odd:
        return ""
    fix = ("give that output's noise as known (pc.Noise(sigma=...) in noise=)"
           if noise_models else
           "give the outputs' noise as known weights (weights=[1 / sigma_k^2, ...]) or use "
           "weights='none'")
    return ("the likelihood with each output's noise estimated is degenerate here: "
            f"{', '.join(odd)} fitted nearly exactly or measured too few times for a "
            "variance, so its weight 1 / sigma^2 lets it decide the estimate and the "
            f"standard errors are too small; {fix}")


def assemble(prob: FitProblem, setup: Setup, outcome: LoopOutcome, w: np.ndarray,
              records: list[IterationRecord], iterations: int,
              settings: dict[str, Any]) -> tuple[EstimationResult, list[np.ndarray]]:
    """The result of a run, and its fitted outputs per experiment (sample order)."""
    disc, tr = setup.disc, setup.tr
    model = prob.model
    X, U, p = outcome.X, outcome.U, outcome.p
    if outcome.trajectory is not None:  # shooting: its own model's, from CVODES
        Ys, xend = outcome.trajectory
    else:
        _, Ys, xend = tr.trajectory(X, U, p)
    with np.errstate(all="ignore"):  # a diverged run: non-finite is reported, not warned
        res2 = disc.mask * (disc.y - Ys) ** 2
        ssr = float(res2.sum())
        ssr_k = disc.weighted_ssr_per_output(Ys)  # each value by its own 1 / sigma_i^2
        weighted_ssr = float(np.sum(disc.sample_weights * res2 * w[None, :, None]))
        hn = disc.has_next
        gap = float(np.abs(xend[hn] - X[1:][hn[:-1]]).max(initial=0.0)) if np.any(hn) else 0.0
    if outcome.trajectory is not None:
        fp = 0.0  # no fixed point in the method
    else:
        PU = tr.picard(X, U, p)
        fp = float(np.max(np.abs(PU - U) / setup.x_scale[None, :, None]))
    x0 = [X[sl.start].copy() for sl in disc.intervals_of]
    N = disc.n_samples_total
    notes = list(dict.fromkeys([*prob.notes, *outcome.notes,
                                # every function that fell back to the virtual
                                # machine, also during the setup and the guess
                                *getattr(tr.functions, "notes", [])]))
    if outcome.success:
        # how the start was made matters where the run failed from it; a converged
        # run left it behind ("did not settle on 1 of 20 intervals" on an exact fit)
        notes = [note for note in notes if not note.startswith(GUESS_NOTE)]
    result = EstimationResult(
        p=np.asarray(p, float).copy(), x0=x0, success=bool(outcome.success),
        status=outcome.status, message=outcome.message, iterations=int(iterations),
        objective=0.5 * ssr / N, weighted_objective=0.5 * weighted_ssr / N,
        ssr=ssr, weighted_ssr=weighted_ssr, n_samples=N, n_measurements=disc.n_measurements,
        continuity_gap=gap, fixed_point_residual=fp, wall_time=0.0, timings=prob.timings,
        history=_history_dict(records), method=prob.spec.name, settings=settings,
        weights=np.asarray(w, float).copy(), p_names=list(model.p_names),
        x_names=list(model.x_names), y_names=list(model.y_names),
        experiment_names=[e.name for e in prob.experiments],
        warnings=notes,
    )
    attach_noise(result, setup, prob.weights_mode, ssr_k, prob.noise)
    result._predictor = simulation_predictor(model, prob.experiments, disc, X, U)
    result._sensitivities = sensitivity_source(model, prob.experiments)
    result._X, result._U, result._disc = X.copy(), U.copy(), disc
    return result, fitted_outputs(disc, Ys)
