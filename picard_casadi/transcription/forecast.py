"""An experiment's inputs beyond its data: given for a forecast, or held.

``res.predict(e, t, u=...)`` and ``pc.prediction_band(res, e, t, u=...)``
take the inputs at times past an experiment's last input sample (tomorrow's
rain, the next manoeuvre's control): the states are integrated from the
estimated ``x0`` through the experiment's own inputs and then through the
given ones, from the last input sample on, read between their samples as
the experiment reads its own (``u_interpolation``; held where its inputs
are a callable).  Without them a sampled input is held at its last value
there, which a note says (:func:`held_beyond_note`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..experiment import Experiment
from ..inputs import evaluate_inputs, held_input_columns, is_linear
from ..runtime.user_warnings import warn_user
from ..simulate import input_breaks, own_inputs

__all__ = ["ForecastInputs", "forecast_inputs", "held_beyond_note", "prediction_inputs"]


class ForecastInputs:
    """Vectorised inputs ``u(t)``: an experiment's own up to its last input
    sample ``t_end``, the given ones after it.

    The first ``given`` inputs come from the forecast's samples (or its
    callable); the others (the constants a restated problem appends) keep
    their value at ``t_end``.  ``breakpoints`` are the times where the
    inputs jump or kink: the experiment's own, and past the data ``t_end``
    and the samples.
    """

    vectorized = True

    def __init__(self, exp: Experiment, nu: int, given: int, u: Any,
                 t_samples: np.ndarray | None) -> None:
        self.exp, self.nu, self.given = exp, int(nu), int(given)
        own = own_inputs(exp)
        self.t_end = float(exp.t_end)
        last = np.asarray(exp.inputs([self.t_end], self.nu), float)[0]
        self.tail = last[self.given:]
        if callable(u):
            self.u, self.t_samples = u, None
        elif t_samples[0] > self.t_end:
            # the last own sample first: between it and the first given one
            # the inputs are held or interpolated as the experiment's
            self.t_samples = np.r_[self.t_end, t_samples]
            self.u = np.vstack([last[None, :self.given], u])
        else:  # given from the last sample on (a dose at the trough sample)
            self.t_samples, self.u = np.asarray(t_samples, float), u
        # read as the experiment reads its samples; held where its inputs are a
        # callable, which has no reading of samples (a 1-h infusion read
        # linearly was a ramp: the concentration 4.37 for 5.91)
        sampled = isinstance(own.u, np.ndarray)
        self.breakpoints = np.r_[input_breaks(exp),
                                 self.t_end if self.t_samples is None else self.t_samples]
        self.interpolation = tuple("linear" if sampled and is_linear(own.u_interpolation, k)
                                   else "previous" for k in range(self.given))

    def __call__(self, t: Any) -> np.ndarray:
        times = np.atleast_1d(np.asarray(t, float))
        out = np.empty((times.size, self.nu))
        inside = times < self.t_end if self.t_samples is not None and (
            self.t_samples[0] == self.t_end) else times <= self.t_end
        if inside.any():
            out[inside] = self.exp.inputs(times[inside], self.nu)
        if not inside.all():
            where = f"the inputs beyond experiment {self.exp.name!r}'s data"
            out[~inside, :self.given] = evaluate_inputs(
                self.u, times[~inside], self.given, where, self.t_samples, self.interpolation)
            out[~inside, self.given:] = self.tail
        return out[0].copy() if np.ndim(t) == 0 else out

    def inputs(self, times: Any, nu: int) -> np.ndarray:
        """As :meth:`Experiment.inputs`."""
        return self(np.atleast_1d(np.asarray(times, float)))


def forecast_inputs(exp: Experiment, nu: int, times: np.ndarray, u: Any,
                    given: int | None = None) -> ForecastInputs | None:
    """The inputs of a prediction at ``times`` with ``u`` past the data.

    Parameters
    ----------
    exp : Experiment
    nu : int
        The (restated) model's inputs.
    times : ndarray
        The prediction's times.
    u : callable, array_like (len(times), given) or None
        The inputs at ``times`` (rows before the experiment's last input
        sample are its own and not used; a row at it holds from there), or a
        callable ``u(t)``.
    given : int, optional
        How many inputs ``u`` gives (the user's model's; default ``nu``).

    Returns
    -------
    ForecastInputs, or None where ``u`` is None or no time lies past the data.

    Raises
    ------
    ValueError
        Naming ``u`` where its shape or values do not fit.
    """
    if u is None:
        return None
    given = nu if given is None else int(given)
    if given == 0:
        raise ValueError("`u`: the model has no inputs; leave it out")
    if callable(u):
        return ForecastInputs(exp, nu, given, u, None)
    table = np.asarray(u, dtype=float)
    if table.ndim == 1 and given == 1:
        table = table[:, None]
    if table.ndim != 2 or table.shape != (times.size, given):
        raise ValueError(f"`u` must hold the model's {given} input(s) at each of the "
                         f"{times.size} times `t`, shape ({times.size}, {given}); got "
                         f"{np.shape(u)} (or give a callable u(t))")
    # from the last input sample on: a row there says what follows it (a dose
    # started at the trough sample, its first hour lost before)
    beyond = times >= exp.t_end
    if not np.any(times > exp.t_end):
        return None
    t_beyond, first = np.unique(times[beyond], return_index=True)
    rows = table[beyond][first]
    if not np.all(np.isfinite(rows)):
        bad = float(t_beyond[~np.isfinite(rows).all(axis=1)][0])
        raise ValueError(f"`u` is not finite at t = {bad:g}: give every input's value at "
                         "every time past the data")
    return ForecastInputs(exp, nu, given, rows, t_beyond)


def held_beyond_note(exp: Experiment, times: np.ndarray, nu: int) -> str:
    """A note where ``times`` run past the last input sample of ``exp`` and
    its sampled inputs vary: they are held at their last values there
    (inputs constant over the data, an experiment's constants among them,
    are the same held).  Empty otherwise."""
    u = own_inputs(exp).u
    if not (nu and isinstance(u, np.ndarray) and times.size
            and float(np.max(times)) > exp.t_end
            and np.any(np.ptp(np.asarray(u, float), axis=0) > 0)):
        return ""
    return (f"`t` runs to {float(np.max(times)):g}, beyond the last input sample of "
            f"experiment {exp.name!r} (t = {exp.t_end:g}): the inputs are held at their last "
            "values there; give them there with u=... (an array of their values at `t`, or "
            "a callable u(t))")


def prediction_inputs(exp: Experiment, nu: int, t: Any, u: Any, given: int | None = None
                      ) -> tuple[np.ndarray, ForecastInputs | None]:
    """The times of a prediction of ``exp`` (its samples where ``t`` is None)
    and its inputs past the data (:func:`forecast_inputs`; without ``u``,
    :func:`held_beyond_note` warned of), as ``res.predict`` and
    ``pc.prediction_band`` take them.

    Raises
    ------
    ValueError
        Where ``t`` is not a 1-D array of finite times from ``exp``'s ``t0`` on,
        or ``u`` does not fit.
    """
    times = exp.t if t is None else np.atleast_1d(np.asarray(t, float))
    if times.ndim != 1 or not np.all(np.isfinite(times)):
        raise ValueError("`t` must be a 1-D array of finite times")
    if np.any(times < exp.t0):
        raise ValueError(
            f"`t`: {float(np.min(times)):g} is before experiment {exp.name!r} starts "
            f"(t0 = {exp.t0:g}, where the estimated x0 holds): predictions run forward "
            "from t0")
    ahead = forecast_inputs(exp, nu, times, u, given)
    if ahead is None and u is None:
        note = held_beyond_note(exp, times, nu)
        if note:
            warn_user(note)
    smooth = (ahead is not None and ahead.t_samples is not None
              and not isinstance(own_inputs(exp).u, np.ndarray) and ahead.u.shape[0] > 2
              and len(held_input_columns(ahead.u)) < int(np.count_nonzero(
                  np.ptp(np.asarray(ahead.u, float), axis=0) > 0)))
    if smooth:
        # (a 12.5 Hz sine given at 1 kHz, held: a phase error of 2.25 degrees
        # near resonance, the truth in the band at 18 % of the samples)
        warn_user(f"`u` as samples is held from each to the next (experiment {exp.name!r} "
                  "gives its inputs as a callable, which has no reading of samples): a "
                  "smooth input is better given as a callable u(t)")
    before = int(np.count_nonzero(times < exp.t_end))
    if u is not None and before:
        # (a new feed profile asked for over the fitted run's own 30 h came
        # back as that run's trajectory, no word)
        warn_user(f"`u` acts past the last input sample of experiment {exp.name!r} (t = "
                  f"{exp.t_end:g}) only: at the {before} time(s) of `t` before it the outputs "
                  "are that experiment's, with its own inputs; a new run from its start, "
                  "with its band, is pc.prediction_band(res, pc.Experiment(t, None, u=..., "
                  "x0=...)) (docs/uncertainty.md, New runs)")
    return times, ahead
