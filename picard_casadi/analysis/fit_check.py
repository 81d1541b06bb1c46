"""Lack of fit: residuals that are systematic and far above the data's noise.

A local method that converges reports a stationary point, which may be a
poor local minimum (or the model may not describe the data).  Convergence
tests cannot tell: the gradient vanishes at both.  The residuals can.  At a
good fit they look like the noise; at a poor one they run in long stretches
of one sign and are much larger than the noise.  Per experiment and output,
two measures are compared with the data alone, without any noise level from
the user:

* the **runs test** (Wald-Wolfowitz) on the signs of the residuals in time
  order: the number of runs against its mean under independent signs, as
  the z-score ``(runs - mean) / std`` (few runs: negative); and, stronger
  on a few dozen samples, the residuals' **lag-1 autocorrelation** ``phi``,
  as ``phi sqrt(n - 1)`` (about ``N(0, 1)`` for independent residuals);
* the residuals' **mean square against the noise variance estimated from
  the data's second differences** (``mean(d^2) / 6`` for ``d = y_{i+1} - 2
  y_i + y_{i-1}``, or the median's equivalent where gross outliers inflate the
  mean).  The signal's own curvature adds to that estimate, so the ratio
  errs towards a good fit.

An output is flagged when both say so: ``z < RUNS_Z`` (or the correlation's
z above ``LAG1_Z``) and the ratio above ``NOISE_RATIO``.  Each measure alone
gives false alarms: with dozens of outputs some correct fit has a strongly
negative ``z``, and the ratio alone mistakes a curved signal for noise.  The
thresholds against the registered problems' fits, and the cases they
catch: ``docs/reliability.md`` (``benchmarks/fit_check_registry.py``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

__all__ = ["lack_of_fit", "gross_outliers", "resolution_noise", "beyond_given_noise",
           "lone_outliers", "robust_noise", "runs_z", "lag1_z", "noise_variance",
           "second_differences", "RUNS_Z", "LAG1_Z", "LAG1_R", "NOISE_RATIO", "LACK_OF_FIT",
           "OUTLIERS_HEAD", "NAMED_OUTLIERS",
           "BEYOND_NOISE_HEAD", "ON_BOUND_NOTE", "STAIRCASE_DELAY", "ON_BOUNDS_NOTE",
           "NOT_UNIQUE", "is_fit_note", "ALIASED_NOTE"]

#: z-score of the runs test below which the residual signs are systematic
RUNS_Z = -2.5
#: residual mean square over the data's noise variance above which the fit is poor
NOISE_RATIO = 4.0
#: ... or above this where the runs test's z is below STRONG_RUNS_Z: thousands
#: of samples in long runs say a misfit the ratio alone would wait for (two
#: tanks with a 2 % leak left out: z = -23, a ratio of 2.4, no word; a
#: battery's drive cycle, its current stepping between samples: z = -25, a
#: ratio of 1.6, estimates 20-60 standard errors off; a pulse test at a
#: local minimum: z = -9.1, a ratio of 2.5); white noise's z is below -8
#: with a probability of 6e-16, and the registered problems' correct fits
#: reach z = -3.25 (benchmarks/fit_check_registry.py)
STRONG_RUNS_Z = -8.0
STRONG_NOISE_RATIO = 1.5
#: the residuals' lag-1 autocorrelation this many of its standard errors
#: (``1 / sqrt(n - 1)``) above 0, and at least LAG1_R, says what the runs test
#: says, with more power on few samples: a predator-prey fit from a start ten
#: times too low, 30 yearly counts, ended on a cycle of twice the period
#: (nllh 377.3 for 305.8) with z = -2.2 and -1.8 but correlations 0.67 and
#: 0.58 (z = 3.6 and 3.1) and ratios 9.2 and 4.9: `success=True`, no word.
#: Independent residuals exceed it with a probability of 1.3e-3, and then
#: still need the ratio, which the registered problems' fits keep below 2.5
LAG1_Z = 3.0
LAG1_R = 0.2
#: fewer finite samples than this in an output: no judgement ...
MIN_SAMPLES = 10
#: ... but where every residual has one sign, this many are enough (2 0.5^8
#: = 0.8 % by chance): a subject of a sparse PK study measured at 8 times,
#: all near 0, lay 0.3 to 2.05 below its fit with no word
MIN_ONE_SIGN = 8
#: a residual this many noise levels from the residuals' median is a gross outlier ...
OUTLIER = 20.0
#: ... where at most this share of an output's samples are (more: a poor fit)
MAX_OUTLIERS = 0.1
#: how every note of :func:`lack_of_fit` begins
LACK_OF_FIT = "the fit is systematically off the data"
#: an output's residuals, at least this many, this share of them of one sign
#: (and this far above the noise, STRONG_NOISE_RATIO) are flagged as an offset
OFFSET_SAMPLES = 30
OFFSET_SHARE = 0.9
#: how every note of :func:`gross_outliers` begins
OUTLIERS_HEAD = "gross outliers?"
#: what a note of :func:`lack_of_fit` that names its outliers says
NAMED_OUTLIERS = " noise levels off (t = "
#: how every note of :func:`beyond_given_noise` begins
BEYOND_NOISE_HEAD = "the fit is off the data beyond the noise given"
#: an output's chi-square on at least this many values ...
MIN_CHI2_VALUES = 20
#: ... this many times its expectation ...
CHI2_RATIO = 1.5
#: ... and this many of its standard deviations above it is flagged
CHI2_Z = 10.0
#: what the note of a parameter on its bound says after the parameter's name
#: (:func:`picard_casadi.estimation.diagnosis.note_bounds_reached`)
ON_BOUND_NOTE = " ended on its "
#: ... and the note of several parameters on their bounds, after their names
ON_BOUNDS_NOTE = " ended on their bounds"
#: what the note on a staircase read linearly says where an input delay is
#: estimated through it (a FitWarning: the delay half a sample late, 43
#: standard errors in a process engineer's PRBS test)
STAIRCASE_DELAY = "an estimated input delay half a sample spacing too long"
#: what the note on a delayed input that changes within its delay after t0
#: says (a FitWarning: the input's value before the record decides the fit;
#: :func:`picard_casadi.simulate.held_history_words`)
HELD_HISTORY = "a delayed input is held at its value at t0"
#: what the note on a converged run's parameter that ran off along a valley
#: says (a FitWarning; :func:`picard_casadi.estimation.valleys.note_converged_ran_off`)
RAN_OFF_NOTE = "ran along a direction the data do not determine"
#: what the note on an estimate whose model oscillates faster than the
#: samples says (a FitWarning; :mod:`picard_casadi.estimation.aliasing`)
ALIASED_NOTE = "the data cannot tell it from a slower oscillation"
#: what the note on two experiments with the same times and measurements
#: says (a FitWarning; :mod:`picard_casadi.estimation.input_notes`): the
#: standard errors of such a fit are too small
GIVEN_TWICE = "a run given twice counts twice"
#: how the note on initial states held at their first measurements, which the
#: data reject, begins (a FitWarning;
#: :mod:`picard_casadi.estimation.known_starts`)
NOISY_START = "the data reject the initial states held at their first measurements"
#: how the note on starts that reach the same objective elsewhere begins
#: (:func:`picard_casadi.estimation.multistart.note_equal_optima`)
NOT_UNIQUE = "the optimum is not unique"


def runs_z(residuals: np.ndarray) -> float:
    """Wald-Wolfowitz z-score of the runs of signs in ``residuals`` (time order).

    Zero residuals are skipped; ``0.0`` when one sign is missing.
    """
    s = np.sign(residuals[residuals != 0])
    n1, n2 = int(np.sum(s > 0)), int(np.sum(s < 0))
    n = n1 + n2
    if n1 == 0 or n2 == 0 or n < 3:
        return 0.0
    runs = 1 + int(np.sum(s[1:] != s[:-1]))
    mean = 1.0 + 2.0 * n1 * n2 / n
    var = (mean - 1.0) * (mean - 2.0) / (n - 1.0)
    return (runs - mean) / math.sqrt(var) if var > 0 else 0.0


def lag1_z(residuals: np.ndarray) -> tuple[float, float]:
    """The lag-1 autocorrelation ``phi`` of ``residuals`` (time order, their
    mean removed) and ``phi sqrt(n - 1)``, about ``N(0, 1)`` for independent
    residuals; ``(0.0, 0.0)`` for fewer than three or all equal."""
    r = np.asarray(residuals, float)
    if r.size < 3:
        return 0.0, 0.0
    r = r - r.mean()
    squares = float(np.dot(r, r))
    if not squares > 0:
        return 0.0, 0.0
    phi = float(np.dot(r[1:], r[:-1])) / squares
    return phi, phi * math.sqrt(r.size - 1)


def second_differences(values: np.ndarray) -> np.ndarray:
    """``y_{i+1} - 2 y_i + y_{i-1}`` of a series: for white noise of variance
    ``s^2`` their mean square is ``6 s^2`` (the signal's curvature adds to it)."""
    return values[2:] - 2.0 * values[1:-1] + values[:-2]


#: median of the chi-square distribution with one degree of freedom: the median
#: of ``d^2`` over ``6 s^2`` for white Gaussian noise
_CHI2_1_MEDIAN = 0.45493642311957283
#: second differences beyond this many of their robust standard deviations
#: are jumps of the signal (an input's step) or gross outliers, not noise
#: (white Gaussian noise exceeds it with a probability of 6e-7)
JUMP_CUT = 5.0


def noise_variance(values: np.ndarray) -> float:
    """Noise variance of a series from its second differences ``d``:
    ``mean(d^2) / 6`` over the differences within :data:`JUMP_CUT` of their
    robust standard deviation (``median(d^2) / 0.455``), unbiased for white
    Gaussian noise (the signal's curvature adds to it).  Left in, the
    differences at a step of the signal or at a gross outlier inflate the
    mean: a battery's pulse test, its voltage stepping 50-150 mV at each
    current step, read 3.99 mV of noise for 1.5 mV, and a misfit of 2.9 mV
    in long runs (z = -33) passed as noise; two outliers of 50 noise levels
    on 41 samples read 0.227 for 0.020.  Where most differences are 0
    (samples quantised coarser than the noise) the mean of all is taken."""
    d = second_differences(values)
    if not d.size:
        return float("nan")
    floor = resolution_noise(values) ** 2
    robust = _median_variance(d)
    if not robust > 0:
        return max(float(np.mean(d * d)) / 6.0, floor)
    kept = d * d <= JUMP_CUT ** 2 * 6.0 * robust
    return max(float(np.mean(d[kept] ** 2)) / 6.0, floor)


def resolution_noise(values: np.ndarray) -> float:
    """The noise standard deviation of readings rounded to their resolution
    (the smallest gap between distinct values, over ``sqrt(12)``): the least
    noise a series is given.  An encoder's 0.1-degree readings of a pendulum
    at rest read 1.3e-16 of noise from their repeats, and a correct fit was
    flagged with residuals 2.6e14 times that; continuous readings give a
    floor far below their noise."""
    distinct = np.unique(np.asarray(values, float)[np.isfinite(values)])
    gaps = np.diff(distinct)
    return float(gaps.min()) / math.sqrt(12.0) if gaps.size else 0.0


def _median_variance(d: np.ndarray) -> float:
    """``median(d^2) / (6 * 0.455)`` of second differences ``d``: white noise's
    variance, whatever a few gross outliers do to ``d``."""
    return float(np.median(d * d)) / (6.0 * _CHI2_1_MEDIAN)


def _mad(r: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """The median absolute deviation of ``r`` (NaN left out), scaled to a
    normal distribution's standard deviation."""
    centre = np.nanmedian(r, axis=axis, keepdims=True)
    spread = 1.4826 * np.nanmedian(np.abs(r - centre), axis=axis)
    return float(spread) if axis is None else spread


def lack_of_fit(data: Sequence[np.ndarray], fitted: Sequence[np.ndarray],
                experiment_names: Sequence[str], output_names: Sequence[str],
                unweighted: bool = False,
                times: Sequence[np.ndarray] | None = None,
                estimated: bool = True, unmoved: Sequence[int] = ()) -> list[str]:
    """Notes on the outputs whose residuals are systematic and far above the noise.

    Parameters
    ----------
    data, fitted : sequences of ndarray (N_e, ny)
        Per experiment, the measurements (NaN: missing) and the fitted
        outputs at the sample times.
    experiment_names, output_names : sequences of str
    unweighted : bool
        The fit weighed every output alike (``weights="none"``): with outputs
        of different noise levels the notes also name that cause.
    times : sequence of ndarray (N_e,), optional
        The sample times, to say where residuals beyond :data:`OUTLIER`
        noise levels lie (gross outliers pull a least-squares fit into runs
        of one sign: the notes name them as a cause).
    estimated : bool
        Something was estimated; where nothing was (every parameter and
        initial state fixed), the notes name the values, not a local minimum.
    unmoved : sequence of int
        The outputs no estimated quantity moves (their model a function of
        known initial states, inputs and constants alone): their notes name
        those values, not a local minimum.

    Returns
    -------
    list of str
        One note per flagged (experiment, output), empty for a fit that
        looks like the noise.
    """
    # neither cause is the likelier in general: synthetic data fitted from a
    # poor start are a local minimum, a real record is model error (each of the
    # flight-test textbook's own optima is flagged so)
    causes = ("this is a local minimum (try multistart=8 or another p0)" if estimated else
              "these are fixed values (nothing was estimated), not an optimum,")
    if unweighted and len(output_names) > 1:
        causes += (", the unweighted loss neglecting an output whose values are small "
                   "next to the others' (weights='auto' weighs each by its noise)")
    notes = []
    for e, (name, Y, G) in enumerate(zip(experiment_names, data, fitted)):
        Y, G = np.asarray(Y, float), np.asarray(G, float)
        t = (np.asarray(times[e], float) if times is not None
             else np.arange(Y.shape[0], dtype=float))
        for k, output in enumerate(output_names):
            ok = np.isfinite(Y[:, k]) & np.isfinite(G[:, k])
            if np.count_nonzero(ok) < MIN_ONE_SIGN:
                continue
            r = Y[ok, k] - G[ok, k]
            noise = noise_variance(Y[ok, k])
            if not noise > 0:
                continue
            z, ratio = runs_z(r), float(np.mean(r * r)) / noise
            phi, phi_z = lag1_z(r)
            correlated = phi >= LAG1_R and phi_z >= LAG1_Z
            # every residual of one sign is the most systematic misfit, though
            # the runs test has no z for it (an output fitted as 0 against data
            # near 1 went unnamed while two others were)
            one_sign = bool(np.all(r > 0) or np.all(r < 0))
            if r.size < MIN_SAMPLES and not one_sign:
                continue
            # nearly all of one sign: an offset the model lacks, which the runs
            # test with so few of the other sign misses (an accelerometer's
            # bias of 3 noise levels: 99.8 % positive, no word)
            share = max(int(np.sum(r > 0)), int(np.sum(r < 0))) / r.size
            offset = r.size >= OFFSET_SAMPLES and share >= OFFSET_SHARE and not one_sign
            if ((z < RUNS_Z or correlated or one_sign) and ratio > NOISE_RATIO
                    or (z < STRONG_RUNS_Z or offset) and ratio > STRONG_NOISE_RATIO):
                far = lone_outliers(r, math.sqrt(noise))
                n_far = int(np.count_nonzero(far))
                these = causes
                if k in unmoved:
                    # a fed-batch's volume V0 + int F, the feed given in L/min
                    # for L/h: 134 noise levels off, "a local minimum"
                    these = (f"no estimated parameter or initial state moves {output!r}, so "
                             "no other optimum fits it better: its known values are off "
                             "(its initial states, the inputs, the constants: their units "
                             "and scales?),")
                if 0 < n_far <= MAX_OUTLIERS * r.size:
                    where = ", ".join(f"{v:g}" for v in t[ok][far][:5])
                    more = ", ..." if n_far > 5 else ""
                    these = (f"{n_far} sample(s) lie over {OUTLIER:g}{NAMED_OUTLIERS}"
                             f"{where}{more}): gross outliers pull a "
                             "least-squares fit (if they are faulty, drop them: NaN in "
                             "y); or " + these)
                scaled = unit_factor(Y[ok, k], G[ok, k], noise)
                if scaled:
                    these = scaled + "; or " + these
                # every residual of one sign has a single run: no z to quote
                # (a user read "z = 0.0" as no evidence)
                sign = "positive" if np.mean(r) > 0 else "negative"
                # (all of one sign over many samples is an offset's case too: a
                # temperature anomaly on another baseline, 100 % of 171 one sign)
                runs = (f"every residual {sign} (an offset the model lacks, such as a "
                        "sensor's bias or another baseline?)" if one_sign
                        and r.size >= OFFSET_SAMPLES else "every residual of one sign"
                        if one_sign else f"{share:.1%} of them {sign} (an offset the model "
                        "lacks, such as a sensor's bias?)" if offset else
                        f"in long runs of one sign (runs test z = {z:.1f})" if z < RUNS_Z
                        else f"following each other (consecutive ones correlate {phi:.2f}, "
                        f"z = {phi_z:.1f}; runs test z = {z:.1f})")
                notes.append(
                    f"{LACK_OF_FIT} of output {output!r} in "
                    f"experiment {name!r}: residuals {math.sqrt(ratio):.1f} times the noise "
                    f"level estimated from the data, {runs}; {these} or a model that cannot "
                    "describe these data exactly (unmodelled dynamics or correlated noise, "
                    "usual in real records: then the standard errors are too small, "
                    "docs/uncertainty.md)")
    # some experiments off, the others fitted: a parameter they do not share
    # (a tumour study's growth rate shared by every mouse: three mice named,
    # the advice a local minimum)
    off = {n.split("in experiment ", 1)[1].split(":", 1)[0] for n in notes}
    if estimated and 0 < len(off) < len(experiment_names):
        notes = [n.replace(f"; {causes}", "; a parameter whose value differs between the "
                           "experiments, shared by them here (per_experiment=['NAME'] "
                           f"estimates one per experiment), or {causes}", 1) for n in notes]
    return notes


#: factors between units, named where the data are the fit times one of them
#: (or its inverse)
UNIT_FACTORS = {180.0 / math.pi: "degrees and radians", 60.0: "minutes and seconds, or hours "
                "and minutes", 3600.0: "hours and seconds", 1000.0: "a milli- or kilo- prefix",
                100.0: "percent", 3.6: "km/h and m/s", 2.0 * math.pi: "rad/s and Hz"}


def unit_factor(y: np.ndarray, g: np.ndarray, noise: float) -> str:
    """Where the data ``y`` are the fitted outputs ``g`` times a factor far
    from 1, to within the noise (``noise``: its variance), the words saying
    so (naming a unit conversion it is within 2 % of), else ``""``.  An
    angle in degrees fitted by a model in radians: "residuals 63 times the
    noise level ... a local minimum" and "noise='log-normal'", where the
    data were 57.3 times the fit."""
    gg = float(np.dot(g, g))
    if not gg > 0:
        return ""
    a = float(np.dot(g, y)) / gg
    if not (a > 0 and abs(math.log10(a)) > math.log10(1.5)):
        return ""
    if float(np.mean((y - a * g) ** 2)) > NOISE_RATIO * noise:
        return ""
    named = [w for f, w in UNIT_FACTORS.items()
             if abs(a / f - 1.0) < 0.02 or abs(a * f - 1.0) < 0.02]
    # a clock in ms for s scales every rate by 1000: a yaw rate's data 999.9
    # times its fit was asked about its own unit, never the time column's
    clock = any(abs(a / f - 1.0) < 0.02 or abs(a * f - 1.0) < 0.02
                for f in (60.0, 1000.0, 3600.0))
    # (a climate model's forcing ten times too large was read as the
    # temperatures' unit: the output scales with what drives it too)
    return (f"the data are {a:.4g} times the fitted output, to within the noise: a unit other "
            f"than the model's{' (' + named[0] + '?)' if named else ''}, in these data or in "
            "what drives them (an input, a known initial state or constant)"
            + (", or in the times (ms for s, minutes for hours: a rate's data are then that "
               "factor times its fit)" if clock else ""))


#: a run of far residuals at most this long whose readings are one value (a
#: dropout logged as 0, a stuck sensor) is outliers, not a stretch the model misses
STUCK_RUN = 5


def lone_outliers(r: np.ndarray, noise: float | np.ndarray,
                  values: np.ndarray | None = None) -> np.ndarray:
    """The residuals ``r`` (time order) over :data:`OUTLIER` noise levels
    (``noise``: a standard deviation, or one per residual) from their median
    whose neighbours are not: an outlier stands alone, where neighbours far
    off too are a stretch the model misses (a fit with its damping held at 0
    missed its first three samples, which were then called outliers).  With
    the readings ``values``, a run of up to :data:`STUCK_RUN` far residuals
    whose readings are all one value is outliers too (a building's sensor
    dropouts logged as 0 degC in runs of 2 and 3: 1 of 6 named)."""
    far = np.abs(r - np.median(r)) > OUTLIER * noise
    beside = np.zeros_like(far)
    beside[1:] |= far[:-1]
    beside[:-1] |= far[1:]
    lone = far & ~beside
    if r.size >= 3:
        # ... and that stands out from them: the crest of a smooth misfit just
        # over the threshold, its neighbours just under it, is the misfit's (a
        # ship's bias shared by two maneuvers: 5 samples called gross outliers)
        around = np.empty_like(r)
        around[1:-1] = 0.5 * (r[:-2] + r[2:])
        around[0], around[-1] = r[1], r[-2]
        lone &= np.abs(r - around) > 0.5 * OUTLIER * noise
    if values is not None:
        edges = np.flatnonzero(np.diff(np.r_[0, far.astype(int), 0]))
        for a, b in zip(edges[::2], edges[1::2]):
            if 2 <= b - a <= STUCK_RUN and np.ptp(values[a:b]) == 0:
                lone[a:b] = True
    return lone


#: the neighbours on each side whose spread a residual is held against
NEIGHBOURS = 5


def neighbours_spread(r: np.ndarray) -> np.ndarray:
    """Each residual's neighbours' spread (time order, :data:`NEIGHBOURS` on
    each side, itself left out): their median absolute deviation, scaled to
    a standard deviation."""
    half = NEIGHBOURS
    padded = np.full(r.size + 2 * half, np.nan)
    padded[half:half + r.size] = r
    window = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1).copy()
    window[:, half] = np.nan
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (an all-NaN window: none)
        spread = _mad(window, axis=1)
    return np.where(np.isfinite(spread), spread, 0.0)


def robust_noise(values: np.ndarray) -> float:
    """The noise standard deviation of a series from the median of its squared
    second differences alone (the level :func:`noise_variance` cuts its
    jumps and outliers at)."""
    d = second_differences(values)
    return max(math.sqrt(_median_variance(d)), resolution_noise(values)) if d.size else math.nan


def gross_outliers(data: Sequence[np.ndarray], fitted: Sequence[np.ndarray],
                   experiment_names: Sequence[str], output_names: Sequence[str],
                   times: Sequence[np.ndarray]) -> list[tuple[int, int, np.ndarray, str]]:
    """Samples that lie alone over :data:`OUTLIER` noise levels off the fit
    (the smaller of the data's :func:`robust_noise` and the residuals' median
    absolute deviation), at most
    :data:`MAX_OUTLIERS` of an output's: ``(experiment, output, mask of its
    samples, note)`` each.

    A fit that follows the data elsewhere hides them from :func:`lack_of_fit`:
    a historian's temperature spike of 90 noise levels moved two Arrhenius
    parameters 1.8 standard errors with no word, and a lab reading of 0 was
    taken for noise that grows with the output.
    """
    found = []
    for e, (name, Y, G) in enumerate(zip(experiment_names, data, fitted)):
        Y, G, t = np.asarray(Y, float), np.asarray(G, float), np.asarray(times[e], float)
        for k, output in enumerate(output_names):
            ok = np.isfinite(Y[:, k]) & np.isfinite(G[:, k])
            if np.count_nonzero(ok) < MIN_SAMPLES:
                continue
            r = Y[ok, k] - G[ok, k]
            # the smaller of the data's and the residuals' robust noise level:
            # sparse lab samples' second differences hold the signal's changes
            # (0.029 for a noise of 0.009), a poor fit's residuals hold its misfit
            candidates = [v for v in (robust_noise(Y[ok, k]), _mad(r)) if v > 0]
            if not candidates:
                continue
            noise = min(candidates)
            # ... and no smaller than its neighbours' spread: noise that grows
            # with the output (10 % over four decades) is large where the
            # output is, and those residuals were called outliers
            far = lone_outliers(r, np.maximum(noise, neighbours_spread(r)), Y[ok, k])
            n_far = int(np.count_nonzero(far))
            if not 0 < n_far <= MAX_OUTLIERS * r.size:
                continue
            levels = np.abs(r[far] - np.median(r)) / noise
            where = ", ".join(f"t = {v:g}: {lv:.0f}" for v, lv in zip(t[ok][far][:5],
                                                                      levels[:5]))
            mask = np.zeros(Y.shape[0], bool)
            mask[np.flatnonzero(ok)[far]] = True
            found.append((e, k, mask, (
                f"{OUTLIERS_HEAD} {n_far} sample(s) of output {output!r} in experiment "
                f"{name!r} lie alone (or in a short run of one repeated reading) over "
                f"{OUTLIER:g} noise levels off the fit ({where}"
                f"{', ...' if n_far > 5 else ''} noise levels of {noise:.3g}, a level "
                "robust to them): gross outliers pull a least-squares fit; if they are faulty "
                "(a spike, a glitch, a reading of 0), drop them (NaN in y) and fit again")))
    return found


def beyond_given_noise(data: Sequence[np.ndarray], fitted: Sequence[np.ndarray],
                       sigma: Sequence[np.ndarray], output_names: Sequence[str]) -> list[str]:
    """A note for each output whose noise is given (``sigma``: per experiment,
    each value's standard deviation, NaN where not given) and whose
    residuals, in those units, are far beyond it: the chi-square of at
    least :data:`MIN_CHI2_VALUES` values :data:`CHI2_RATIO` times its
    expectation and :data:`CHI2_Z` of its standard deviations above it, and
    the median of the squared residuals :data:`CHI2_RATIO` times its own
    (an excess spread over the values, not a spike's).

    With the noise known, that is evidence the model misses what the data
    show: two tanks with a 2 % leak left out, the level's noise given as
    2 mm, fitted 42 standard deviations of the chi-square above it with no
    word, and their estimates 1400 to 2000 standard errors off (the
    second-difference check of :func:`lack_of_fit` needs four times the
    noise variance).
    """
    notes = []
    for k, output in enumerate(output_names):
        z2 = []
        for Y, G, S in zip(data, fitted, sigma):
            r = (np.asarray(Y, float)[:, k] - np.asarray(G, float)[:, k]) / np.asarray(S)[:, k]
            z2.append(r[np.isfinite(r)] ** 2)
        values = np.concatenate(z2) if z2 else np.zeros(0)
        n = values.size
        if n < MIN_CHI2_VALUES:
            continue
        chi2 = float(values.sum())
        z = (chi2 - n) / math.sqrt(2.0 * n)
        # the excess spread over the values, not one spike's (15 noise levels
        # in 200 values is z = 11: the outlier, not the model)
        spread = float(np.median(values)) > CHI2_RATIO * _CHI2_1_MEDIAN
        if chi2 > CHI2_RATIO * n and z > CHI2_Z and spread:
            notes.append(
                f"{BEYOND_NOISE_HEAD} of output {output!r}: its residuals are "
                f"{math.sqrt(chi2 / n):.2f} times the noise given for it (chi-square "
                f"{chi2:.4g} over {n} values, {z:.0f} of its standard deviations above its "
                "expectation): the model misses something these data show (unmodelled "
                "dynamics, a leak, an input's timing), or the noise given is too small; "
                "its standard errors hold only if the noise is as given (weights='auto' "
                "estimates the level the data have)")
    return notes


def is_fit_note(note: str) -> bool:
    """Whether a line of ``result.warnings`` is one raised as a
    :class:`~picard_casadi.FitWarning` (lack of fit, gross outliers, a
    parameter on its bound, an optimum that is not unique)."""
    from .repeated_values import REPEAT_HEAD
    from .replicates import REPLICATE_HEAD
    from .time_units import SAME_DESIGN

    return (note.startswith((LACK_OF_FIT, NOT_UNIQUE, OUTLIERS_HEAD, BEYOND_NOISE_HEAD,
                             REPLICATE_HEAD, REPEAT_HEAD))
            or ON_BOUND_NOTE in note
            or ON_BOUNDS_NOTE in note
            or STAIRCASE_DELAY in note
            or HELD_HISTORY in note
            or RAN_OFF_NOTE in note
            or ALIASED_NOTE in note
            or GIVEN_TWICE in note
            or SAME_DESIGN in note
            or note.startswith(NOISY_START))
