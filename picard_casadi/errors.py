"""Exceptions of the package.

Bad user input raises the built-in :class:`ValueError` or :class:`TypeError`
with a message naming the argument and the fix.  The classes here are for
conditions that are not a wrong argument.
"""

from __future__ import annotations

__all__ = ["PicardError", "SimulationError", "ConvergenceError", "CodegenError",
           "StartNotFiniteError", "DiscretisationWarning", "FitWarning"]


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
