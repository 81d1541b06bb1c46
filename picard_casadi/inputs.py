"""An experiment's inputs: a callable of time or samples, held or
interpolated between them, evaluated at given times; and the check of a
sampled input that looks like a staircase."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["InputSpec", "check_input_interpolation", "is_linear", "held_input_columns",
           "held_jumps", "evaluate_inputs", "HELD_SHARE", "callable_jumps",
           "JUMP_GRID_PER_SAMPLE", "JUMP_GRID_MAX", "sampled_input_names"]

InputSpec = Callable[[float], Any] | np.ndarray | None


def check_input_interpolation(value: Any, where: str) -> str | tuple[str, ...]:
    """``value`` as a hold: ``"previous"`` or ``"linear"`` for every input, or a
    tuple of them, one per input column; a ValueError, prefixed ``where``,
    for anything else."""
    if isinstance(value, str) and value in ("previous", "linear"):
        return value
    if not isinstance(value, str):
        try:
            holds = tuple(value)
        except TypeError:
            holds = None
        if holds and all(isinstance(h, str) and h in ("previous", "linear") for h in holds):
            return holds
    raise ValueError(f"{where}: `u_interpolation` must be 'previous' or 'linear', or a list "
                     f"of them with one per input (['previous', 'linear']), got {value!r}")


def is_linear(hold: str | tuple[str, ...], k: int) -> bool:
    """Whether a hold (:func:`check_input_interpolation`'s) reads input ``k`` linearly."""
    return (hold if isinstance(hold, str) else hold[k]) == "linear"


#: a sampled input is a staircase where at least this share of consecutive
#: samples repeat the value before them (and it changes somewhere)
HELD_SHARE = 0.5


#: ... or where at least this share of its samples sit exactly at its
#: smallest value, with pulses off it: amounts per sample period (daily rain,
#: 30 % of days wet: 49 % of consecutive days repeat, both dry), doses
PULSE_SHARE = 0.3
#: ... in runs of at most this many samples (the median run)
PULSE_SAMPLES = 3


def held_input_columns(u: np.ndarray) -> list[int]:
    """Columns of sampled inputs ``u`` ``(N, nu)`` that look piecewise constant:
    they change, and at least :data:`HELD_SHARE` of their consecutive samples
    are equal (a controller's staircase logged at the sample times repeats
    each level exactly; samples of a smooth signal do not repeat) with at
    least half of their changes single jumps between repeats (not a ramp
    sampled on its way), or
    :data:`PULSE_SHARE` of their samples sit exactly at their smallest value
    (pulses from a baseline: rain per day)."""
    u = np.asarray(u, float)
    if u.ndim != 2 or u.shape[0] < 3:
        return []
    same = np.diff(u, axis=0) == 0.0
    at_floor = u == u.min(axis=0, initial=np.inf)[None, :]
    # a staircase jumps in one sample, between repeats; a sampled physical step
    # passes through values on the way (a car's step steer, ramped over 15
    # samples at 100 Hz, was told to hold: its inertia 2.75 standard errors off)
    change = ~same
    before = np.vstack([np.zeros((1, u.shape[1]), bool), change[:-1]])
    after = np.vstack([change[1:], np.zeros((1, u.shape[1]), bool)])
    jumps = change & ~before & ~after
    return [int(k) for k in range(u.shape[1])
            if not same[:, k].all()
            and ((same[:, k].mean() >= HELD_SHARE and 2 * jumps[:, k].sum() >= change[:, k].sum())
                 or (at_floor[:, k].mean() >= PULSE_SHARE and _short_pulses(~at_floor[:, k])))]


def _short_pulses(off: np.ndarray) -> bool:
    """Whether the runs of ``off`` (samples off an input's floor) are short,
    their median at most :data:`PULSE_SAMPLES` samples: amounts per period
    (rain: wet days alone or a few in a row), not a long pulse sampled on its
    way up and down."""
    edges = np.flatnonzero(np.diff(np.r_[0, off.astype(int), 0]))
    runs = edges[1::2] - edges[::2]
    return bool(runs.size) and float(np.median(runs)) <= PULSE_SAMPLES


def held_jumps(t: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The sample times at which a held input (any column of ``u``, ``(N,
    nu)`` at times ``t``) changes value: where its staircase jumps."""
    u = np.asarray(u, float)
    if u.ndim != 2 or u.shape[0] < 2:
        return np.zeros(0)
    changes = np.any(np.diff(u, axis=0) != 0.0, axis=1)
    return np.unique(np.asarray(t, float)[1:][changes])


def evaluate_inputs(u: InputSpec, times: Any, nu: int, where: str,
                    t_samples: np.ndarray | None = None,
                    interpolation: str = "previous") -> np.ndarray:
    """Input values at the given times, shape ``(M, nu)``.

    Parameters
    ----------
    u : callable, ndarray (N, nu) or None
        A callable ``u(t) -> (nu,)`` or values at ``t_samples``.
    times : array_like (M,)
    nu : int
        Number of inputs the model expects.
    where : str
        Prefix of error messages (names the experiment).
    t_samples : ndarray (N,), optional
        Times of the rows of an array ``u``.
    interpolation : {"previous", "linear"}
        Hold of an array ``u`` between its times.

    Raises
    ------
    ValueError
        If ``u`` is missing, returns the wrong length, or non-finite values.
    Exception
        Any other error a callable ``u`` raises, unchanged, with a note
        (``__notes__``, shown in the traceback; Python 3.11 and newer)
        naming the experiment and time.
    """
    times = np.atleast_1d(np.asarray(times, dtype=float))
    if nu == 0:
        return np.zeros((times.size, 0))
    if u is None:
        raise ValueError(
            f"{where}: the model has {nu} input(s) but `u` was not given; pass "
            "a callable u(t) or an array of shape (len(t), nu)"
        )
    if callable(u) and getattr(u, "vectorized", False):
        try:
            out = np.asarray(u(times.copy()), dtype=float)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{where}: the vectorized `u` failed on {times.size} times: "
                             f"{err}") from None
        if out.shape != (times.size, nu):
            raise ValueError(f"{where}: a vectorized `u` must return shape (len(times), nu) "
                             f"= ({times.size}, {nu}), returned {out.shape}")
        if not np.all(np.isfinite(out)):
            i = int(np.flatnonzero(~np.isfinite(out).all(axis=1))[0])
            raise ValueError(f"{where}: `u` returned non-finite {out[i]} at t = {times[i]}")
        return out
    if callable(u):
        out = np.empty((times.size, nu))
        for i, s in enumerate(times):
            try:
                val = np.asarray(u(float(s)), dtype=float).ravel()
            except (TypeError, ValueError) as err:
                raise ValueError(f"{where}: `u` failed at t = {s}: {err}") from None
            except Exception as err:  # the user's own error, kept, with where it arose
                if hasattr(err, "add_note"):  # Python 3.11 and newer
                    err.add_note(f"{where}: raised by the input function `u` at t = {s}")
                raise
            if val.size != nu:
                raise ValueError(
                    f"{where}: `u` must return {nu} value(s) (the model's nu), "
                    f"returned {val.size} at t = {s}"
                )
            if not np.all(np.isfinite(val)):
                raise ValueError(f"{where}: `u` returned non-finite {val} at t = {s}")
            out[i] = val
        return out
    table = np.asarray(u, dtype=float)
    if table.ndim != 2 or table.shape[1] != nu:
        raise ValueError(
            f"{where}: `u` has {table.shape[-1]} column(s) but the model has "
            f"nu = {nu} input(s)"
        )
    if t_samples is None or t_samples.size != table.shape[0]:
        raise ValueError(f"{where}: an array `u` needs one row per sample time")
    if not isinstance(interpolation, str) and len(interpolation) != nu:
        raise ValueError(f"{where}: `u_interpolation` has {len(interpolation)} entries but the "
                         f"model has nu = {nu} input(s): give one per input")
    # round-off of the times, well inside a sample spacing and below the
    # shift of an interval's end nodes into it (1e-7 of its length,
    # transcription/discretisation.py): relative to |t| alone it was 1.7 ms
    # for a logger's Unix-epoch times (1.7e9 s) sampled every 1 ms, a held
    # input read a sample early; and 1e-9 s at t = 1000 with 1 ms samples,
    # past the 5e-10 s shift, so the node before each jump read the value
    # after it (a motor certified at t0 = 0 to 300, not at 1000)
    tol = 1e-12 * max(1.0, float(np.abs(t_samples).max()))
    steps = np.diff(t_samples)
    if steps.size and np.any(steps > 0):
        tol = min(tol, 1e-9 * float(steps[steps > 0].min()))
    idx = np.clip(np.searchsorted(t_samples, times + tol, side="right") - 1, 0,
                  t_samples.size - 1)
    return np.column_stack([np.interp(times, t_samples, table[:, k])
                            if is_linear(interpolation, k) else table[idx, k]
                            for k in range(nu)])


#: points per sample at which a callable input is looked at for jumps (at most
#: JUMP_GRID_MAX in all; :func:`callable_jumps`)
JUMP_GRID_PER_SAMPLE = 20
JUMP_GRID_MAX = 20000


def callable_jumps(values_at: Callable[[np.ndarray], Any], t0: float, t_end: float,
                   n_samples: int, breakpoints: np.ndarray) -> list[float]:
    """Times where an input given by a function jumps away from the breakpoints.

    A jump is a step between neighbouring points of a grid of
    :data:`JUMP_GRID_PER_SAMPLE` points per sample (at most
    :data:`JUMP_GRID_MAX`) larger than a quarter of the input's range, with
    both neighbouring steps ten times smaller (a pulse's edges; a fast
    smooth input changes as much at the steps beside), or a pulse one point
    wide (its edges back to back), half a grid step or more from a
    breakpoint; each found is then located by bisection to the clock's
    round-off (a grid step's midpoint named 0.1 h for a pulse that ended at
    0.01 h, which a user would give as a breakpoint).

    Parameters
    ----------
    values_at
        The inputs at an array of M times, shape (M, nu).
    t0, t_end
        The span looked at.
    n_samples
        The experiment's samples (the grid's density).
    breakpoints
        Times where jumps are expected.

    Returns
    -------
    list of float
        Empty where ``values_at`` cannot be evaluated on the grid (doses as
        0.1 h pulses were never certified).
    """
    n = int(min(JUMP_GRID_MAX, JUMP_GRID_PER_SAMPLE * max(n_samples, 2)))
    grid = np.linspace(t0, t_end, n)
    try:
        values = np.asarray(values_at(grid), float).reshape(n, -1)
    except (TypeError, ValueError):
        return []
    signed = np.diff(values, axis=0)  # (n - 1, nu)
    step, span, zero = np.abs(signed), np.ptp(values, axis=0), np.zeros((1, signed.shape[1]))
    before, after = np.vstack([zero, step[:-1]]), np.vstack([step[1:], zero])
    # a pulse one grid point wide (a 0.005 h bolus on a 0.004 h grid went unnamed)
    back, apart = np.vstack([signed[1:], zero]) * signed < 0, np.vstack([step[2:], zero, zero])
    edge = (step > 0.25 * span) & (before < 0.1 * step)
    spike = edge & back & (abs(after - 1.25 * step) <= 0.75 * step) & (apart < 0.1 * step)
    spike = spike.any(axis=1)  # (its second edge too, where it ends)
    jump = (edge & (after < 0.1 * step)).any(axis=1) | spike | np.r_[False, spike[:-1]]
    h = grid[1] - grid[0]
    at = np.flatnonzero(jump)
    at = at[[not np.any(np.abs(np.asarray(breakpoints, float) - t) <= 0.51 * h)
             for t in 0.5 * (grid[at] + grid[at + 1])]]
    lo, hi, left, right = grid[at], grid[at + 1], values[at], values[at + 1]
    tiny = 4.0 * np.finfo(float).eps * max(abs(t0), abs(t_end), 1.0)
    for _ in range(64):
        if lo.size == 0 or np.all(hi - lo <= tiny):
            break
        mid = 0.5 * (lo + hi)
        try:
            v = np.asarray(values_at(mid), float).reshape(mid.size, -1)
        except (TypeError, ValueError):
            break
        near_left = np.linalg.norm(v - left, axis=1) <= np.linalg.norm(v - right, axis=1)
        lo, hi = np.where(near_left, mid, lo), np.where(near_left, hi, mid)
    return [float(t) for t in hi]


def sampled_input_names(u_names: Sequence[str]) -> list[str]:
    """The names of ``u_names`` that are the user's inputs: a restated
    problem's experiment constants (``NAME@constant``, with the indicators
    ``NAME@is_PARAMETER`` of a parameter per experiment and the settling's
    copies ``NAME@start``; estimation/statement.py) are columns of its
    inputs too, no samples (a pharmacologist's model without inputs had a
    note per subject on "sampled inputs" held before their first sample)."""
    return [n for n in u_names if "@" not in n]
