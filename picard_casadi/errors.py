"""Exceptions of the package, and the closest spelling its messages offer.

Bad user input raises the built-in :class:`ValueError` or :class:`TypeError`
with a message naming the argument and the fix.  The classes here are for
conditions that are not a wrong argument.  A message naming an unknown
parameter, output, option or flag offers the nearest known name through
:func:`closest` and :func:`with_closest`, so the hint reads the same
everywhere.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["PicardError", "SimulationError", "ConvergenceError", "CodegenError",
           "StartNotFiniteError", "DiscretisationWarning", "FitWarning", "closest",
           "with_closest", "dated_times"]


class PicardError(Exception):
    """Base class of the package's own errors."""


class SimulationError(PicardError, RuntimeError):
    """CVODES failed, or the solution left the model's domain.

    Attributes
    ----------
    time : float or None
        A time up to which the solution exists (the start of the step
        where CVODES failed, or the last sample inside the domain); None
        where it is not known.
    """

    def __init__(self, message: str, time: float | None = None) -> None:
        super().__init__(message)
        self.time = time


class ConvergenceError(PicardError, RuntimeError):
    """Raised by ``estimate(..., raise_on_failure=True)`` when a run fails.

    Attributes
    ----------
    result : EstimationResult
        The failed result, with its message and history.
    """

    def __init__(self, message: str, result: object = None) -> None:
        super().__init__(message)
        self.result = result


class StartNotFiniteError(PicardError, ValueError):
    """The model cannot be evaluated at the start (``p0`` and the states'
    initial guess): the objective there is not finite.

    A ``ValueError`` (the start is the caller's input); ``multistart`` records
    a sampled start that raises it as a failed start and goes on.
    """


class CodegenError(PicardError, RuntimeError):
    """Code generation was requested but cannot be done (no compiler, build error)."""


class DiscretisationWarning(UserWarning):
    """The estimate is of the discretisation: its certificate failed on a mesh
    the user fixed (``refine=False``), or shooting's integration is too coarse."""


class FitWarning(UserWarning):
    """A converged estimate whose residuals are systematic and far above the data's
    noise: a local minimum, or a model that cannot describe the data (unmodelled
    dynamics, correlated noise: usual in real records)
    (:mod:`picard_casadi.analysis.fit_check`)."""


_LOOKALIKE = str.maketrans("lIO", "110")


def _confusable(name: str) -> str:
    """``name`` with the letters that look like digits (l, I, O) as those digits,
    in lower case."""
    return name.translate(_LOOKALIKE).lower()


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest in spelling to ``name``, or None where none is
    close (``difflib.get_close_matches`` with its default cutoff, 0.6)."""
    known = [str(k) for k in known]
    for alike in (str.lower, _confusable):
        same = [k for k in known if alike(k) == alike(str(name))]
        if len(same) == 1:  # in case only ('MQ' for 'Mq'), or a letter for a
            return same[0]  # digit that looks like it ('kbl' for 'kb1')
    match = difflib.get_close_matches(str(name), known, n=1)
    return match[0] if match else None


def with_closest(name: str, known: Iterable[str]) -> str:
    """``name`` quoted, followed by ``(did you mean 'x'?)`` where a known
    name is close: ``'kb1' (did you mean 'k_b1'?)``."""
    near = closest(name, known)
    return f"{str(name)!r}" + (f" (did you mean {near!r}?)" if near else "")


def dated_times(where: str, dtype: Any) -> str:
    """The message for dates (``datetime64``, a pandas date column) or time
    spans (``timedelta64``) given as times: as numbers they were nanoseconds
    or microseconds since 1970 (an SEIR fitted on a clock of 1.6e15 ended
    ``step_failed`` with nothing pointing there)."""
    dates = np.dtype(dtype).kind == "M"
    # (in the model's unit, exactly: .dt.days truncated a 15-minute log to
    # whole days, and an example in days misled a model in seconds)
    how = ("the time since the first in the model's unit: (t - t[0]) / np.timedelta64(1, "
           "'s') for seconds ('m', 'h', 'D' for minutes, hours, days; pandas: (df.date - "
           "df.date.iloc[0]).dt.total_seconds(), / 3600 for hours), and give t0 where the "
           "model's x0 holds" if dates else
           "in the model's unit: t / np.timedelta64(1, 's') for seconds ('h', 'D' ...)")
    return (f"{where}: `t` holds {'dates' if dates else 'time spans'} ({dtype}), not numbers "
            f"in the model's time unit; convert them, for example {how}")
