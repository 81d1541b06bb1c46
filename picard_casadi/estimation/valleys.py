"""Parameters that ran off along a valley the data do not bound.

Where the fit barely changes along a direction of the parameters, Gauss-Newton
steps follow it: a parameter travels tens of its scales (decades, on a log
scale) to where the model no longer sees it.  The run is told so, with the
parameters' starts and ends, instead of being refined, continued or rerun
along the same valley:

* :func:`ran_off` (called by
  :func:`~picard_casadi.estimation.refinement.solve_and_refine` where a
  certificate fails): a converged run whose undetermined parameters
  travelled far to where the certificate fails;
* :func:`ran_off_at_limit`: a run stopped at its iteration limit far along
  such a valley;
* :func:`note_converged_ran_off`: a converged, certified run with such a
  parameter gets a :class:`~picard_casadi.FitWarning` (the estimate is the
  limit along the valley, and the others' standard errors hold it there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..analysis.fit_check import RAN_OFF_NOTE
from ..errors import FitWarning
from ..result import EstimationResult
from ..runtime.user_warnings import warn_user

__all__ = ["ran_off", "ran_off_at_limit", "ran_off_message", "note_converged_ran_off",
           "RAN_OFF_DISTANCE", "RAN_OFF_NOTE"]


#: a parameter the data do not determine at a converged estimate that the
#: certificate rejects, this many of its scales (``p_scale``) from p0, ran
#: there along a valley: Robertson's kinetics with B lost in the noise took
#: log10 k2 from 0 to 63 and log10 k3 to 32 (the fit within 4e-5 of its last
#: value from log10 k2 = 9.4 on), where CVODES fails at once
RAN_OFF_DISTANCE = 10.0


def ran_off(p0: np.ndarray, p: np.ndarray, p_scale: np.ndarray, undetermined: np.ndarray,
            names: Sequence[str]) -> str:
    """How the parameters the data do not determine ran from ``p0`` to ``p``, or ``''``.

    ``undetermined`` marks the parameters in a direction the information
    matrix at ``p`` does not determine
    (:func:`~picard_casadi.analysis.uncertainty.undetermined_parameters`);
    where one of them lies :data:`RAN_OFF_DISTANCE` of its scales or more
    from its start, the fit barely changes along that direction and the
    iterations followed it: the data bound those parameters from one side
    at most.

    Returns
    -------
    str
        A sentence naming those parameters with their starts and ends, or ``''``.
    """
    travel = np.where(undetermined, _travel(p0, p, p_scale), 0.0)
    if not travel.max(initial=0.0) >= RAN_OFF_DISTANCE:
        return ""
    which = np.flatnonzero(undetermined)
    listed = names[which[-1]]
    if which.size > 1:
        listed = ", ".join(names[i] for i in which[:-1]) + " and " + listed
    moved = _moved(names, p0, p, which, 4)
    return (f"the data do not determine {listed} there, and the iterations ran along that "
            f"direction from p0 ({moved}: {travel.max():.3g} of their scales): the fit "
            "barely changes along it, so the data bound these parameters from one side "
            "at most")


def _travel(p0: np.ndarray, p: np.ndarray, p_scale: np.ndarray) -> np.ndarray:
    """How far each parameter went from ``p0`` to ``p``, in its scales."""
    return (np.abs(np.asarray(p, float) - np.asarray(p0, float))
            / np.asarray(p_scale, float))


def _moved(names: Sequence[str], p0: np.ndarray, p: np.ndarray, which: np.ndarray,
           digits: int) -> str:
    """``"name start -> end"`` of the parameters ``which``, the ends to ``digits``."""
    return ", ".join(f"{names[i]} {p0[i]:.4g} -> {p[i]:.{digits}g}" for i in which)


def ran_off_at_limit(setup: Any, outcome: Any, p0: np.ndarray, names: Sequence[str]) -> str:
    """:func:`ran_off` of a run stopped at its iteration limit (``outcome``),
    over the parameters no bound holds (PEtab's Blasi ran to a bound of -12
    and converged there when continued); ``""`` where its sensitivities
    cannot be computed."""
    from ..analysis.uncertainty import solution_sensitivity, undetermined_parameters

    p = np.asarray(outcome.p, float)
    try:
        off = undetermined_parameters(setup, solution_sensitivity(setup, outcome.X, outcome.U,
                                                                  p))
    except (RuntimeError, ValueError, ArithmeticError, np.linalg.LinAlgError):
        return ""
    return ran_off(p0, p, setup.p_scale, off & (p > setup.p_lb) & (p < setup.p_ub), names)


def ran_off_message(method: str, p: np.ndarray, cert_message: str | None, how: str) -> str:
    """A run's message where its parameters ran off along a valley (``how``:
    :func:`ran_off`'s sentence): converged there without a certificate
    (``cert_message``), or stopped there at its iteration limit (``None``: a
    climate model's feedbacks ran to -212 and 214 in 1000 iterations, then
    four other runs followed them for 163 s, the message "increase max_iter")."""
    where = (f"where its estimate is not certified as the ODE's ({cert_message})"
             if cert_message is not None else "where it reached its iteration limit")
    return (f"{method} {'converged' if cert_message is not None else 'stopped'} at p = "
            f"{np.array2string(np.asarray(p, float), precision=6)}, {where}: {how}. No "
            "further refinement and no other method was tried (each follows the same "
            "valley); bound these parameters (p_bounds), fix them, or add data that "
            "determine them")


def note_converged_ran_off(result: EstimationResult, p0: np.ndarray, p_scale: np.ndarray,
                           names: Sequence[str]) -> None:
    """A :class:`~picard_casadi.FitWarning` where a converged run's parameter
    whose standard error is inf (on the estimation's scale: ``p0``,
    ``p_scale``) ended :data:`RAN_OFF_DISTANCE` of its scales or more from
    its start.

    A Bergman model started with p3 1e5 times too large: log10(p2) ran from
    -1.3 to -90128 (p2 = 0), a local optimum 16 in nllh above the best,
    reported as success with p3's interval 31 standard errors from the truth
    and no flag.
    """
    p, std = np.asarray(result.p, float), result.p_std
    if std is None or p.size != np.size(p0) or p.size != np.size(p_scale):
        return
    travel = _travel(p0, p, p_scale)
    off = np.flatnonzero(np.isinf(np.asarray(std, float)) & (travel >= RAN_OFF_DISTANCE))
    if off.size == 0:
        return
    moved = _moved(names, p0, p, off, 6)
    note = (f"{' and '.join(names[i] for i in off)} {RAN_OFF_NOTE} from p0 ({moved}: "
            f"{travel[off].max():.3g} of its scale): the fit no longer depends on it there, "
            "so its estimate is the end of a valley, not a value the data give, and the "
            "other estimates and standard errors hold it there; this is often a local "
            "optimum (try multistart=8 or another p0), or bound it (p_bounds) or fix it "
            "where its value is known")
    result.warnings.append(note)
    warn_user(note, FitWarning)
