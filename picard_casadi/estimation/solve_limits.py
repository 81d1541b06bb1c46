"""The iteration limits of a run's solves, and the messages of a solve stopped there.

:func:`budgeted_solve` runs one solve of the method within what is left of a
second run's budget (``LimitedRun.iteration_budget``) and stops a second run's
IPOPT that gains no feasibility (:data:`BUDGET_PROGRESS_WINDOW`);
:func:`continued_solve` gives a solve that continues a converged one on a new
mesh at most :data:`CONTINUATION_LIMIT` iterations, and at most
:data:`CONTINUATION_CREEP_STEPS` steps in a row cut to slivers, on the
default path, and names these limits in the stop's message.  Both
count iterations, never time: the same call takes the same path on any
machine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from ..methods import MethodSpec
from ..methods.base import IterationRecord, LoopOutcome, Setup
from ..methods.ipopt import STALL_VIOLATION

__all__ = ["BUDGET_PROGRESS_WINDOW", "CONTINUATION_CREEP_STEPS", "CONTINUATION_LIMIT",
           "LimitedRun", "budgeted_solve", "continued_solve", "out_of_budget"]


class LimitedRun(Protocol):
    """What the limits read of a run
    (:class:`picard_casadi.estimation.refinement.FitProblem` has it)."""

    spec: MethodSpec
    callback: Callable[[IterationRecord], Any] | None
    iteration_budget: int | None
    iterations_spent: int
    limit_continuations: bool


#: methods whose iterations are IPOPT's: its first record is the start (iteration 0)
_IPOPT_METHODS = ("ipopt", "shooting")


def budgeted_solve(prob: LimitedRun, setup: Setup, options: Any) -> LoopOutcome:
    """One solve of the method, within what is left of ``prob.iteration_budget``.

    A second run with another method is bounded by its ``max_iter`` in all:
    each solve of its weight rounds gets the iterations the solves before
    it left (a second run solves once per round, up to 30 rounds; PEtab's
    Fujita from uniform start 2 also refined IPOPT's mesh then, and had not
    returned after 25 minutes).  The limit is passed to each solve as a stop
    in its callback (a new ``max_iter`` would rebuild IPOPT's NLP), and a
    solve stopped there is reported as stopped by its iteration limit.  The
    same callback stops an IPOPT solve whose lowest constraint violation has
    stopped falling (:data:`BUDGET_PROGRESS_WINDOW`), reported ``"stalled"``.
    """
    user, ipopt = prob.callback, prob.spec.name in _IPOPT_METHODS
    start = int(ipopt)
    seen, limited = 0, False
    # IPOPT's best constraint violation after each of its iterations (a second
    # run's progress test, _no_progress)
    best: list[float] = []

    def counted(record: IterationRecord) -> bool:
        nonlocal seen, limited
        if user is not None and user(record) is True:
            return True
        seen += 1
        limited = seen - start >= prob.iteration_budget - spent_before
        if ipopt:
            gap = record.gap if np.isfinite(record.gap) else np.inf
            best.append(min(gap, best[-1]) if best else gap)
        return limited or (ipopt and _no_progress(best))

    spent_before = prob.iterations_spent
    outcome = prob.spec.solve(setup, options,
                              prob.callback if prob.iteration_budget is None else counted)
    prob.iterations_spent += outcome.iterations
    if outcome.status == "stopped" and not limited and ipopt and _no_progress(best):
        # "IPOPT: <status> (...)" as IPOPT's own, so the note quoting it (clipped) keeps why
        return replace(outcome, success=False, status="stalled", message=(
            f"IPOPT: stalled (its lowest constraint violation did not fall tenfold in "
            f"{BUDGET_PROGRESS_WINDOW} iterations, from "
            f"{best[-1 - BUDGET_PROGRESS_WINDOW]:.2e} to {best[-1]:.2e}); the result is not "
            "an optimum"))
    return out_of_budget(prob, outcome) if limited and outcome.status == "stopped" else outcome


#: a second run's IPOPT (``"ipopt"``, ``"shooting"``) whose lowest constraint
#: violation has not fallen tenfold in this many iterations, still above
#: :data:`~picard_casadi.methods.ipopt.STALL_VIOLATION`, is stopped as stalled
#: (PEtab's Crauste from its 20 uniform starts, seed 0: 13 IPOPT second runs,
#: none converged, 403 of the problem's 616 CPU s; uniform 1 wandered with its
#: violation between 0.02 and 5e6 from iteration 80 to its budget, 281, 85 s).
#: The converging second runs on record go at most 20 iterations without such
#: a fall (the test suite's 23 budgeted IPOPT and shooting solves, logged);
#: Crauste's 13 that did not converge spent 272 CPU s with a window of 100,
#: 167 s with this one, every start ending as before (docs/design.md)
BUDGET_PROGRESS_WINDOW = 50


def _no_progress(best: list[float]) -> bool:
    """Whether IPOPT's lowest violation ``best`` (after each iteration, the
    start first) stalled over the last :data:`BUDGET_PROGRESS_WINDOW` iterations."""
    if len(best) <= BUDGET_PROGRESS_WINDOW:
        return False
    now, before = best[-1], best[-1 - BUDGET_PROGRESS_WINDOW]
    return bool(now > STALL_VIOLATION and now > 0.1 * before)


def out_of_budget(prob: LimitedRun, outcome: LoopOutcome, before: str = "convergence"
                  ) -> LoopOutcome:
    """``outcome`` as stopped by its iteration limit, the budget of
    :func:`budgeted_solve` spent before ``before``."""
    budget = (f"this second run's budget of {prob.iteration_budget} iterations in all, its "
              "weight rounds included")
    if prob.spec.name in _IPOPT_METHODS:
        return replace(outcome, success=False, status="Maximum_Iterations_Exceeded",
                       message=f"IPOPT: Maximum_Iterations_Exceeded ({budget}) before {before}")
    return replace(outcome, success=False, status="max_iter",
                   message=f"iteration limit reached ({budget}) before {before}")


#: iterations a solve that continues from a converged solution on a new mesh
#: may take on the default path (``LimitedRun.limit_continuations``), twice
#: picard-gn's ``progress_window``.  Such a start is next to its answer: the
#: continuations on record converge in 1 to 151 iterations (PEtab's Boehm,
#: Bruno, Armistead, Crauste, Fujita; ``benchmarks/petab_collection.py
#: --solves``).  Where the coarser mesh's answer was not one on the new mesh
#: (Bruno from uniform starts 6, 10, 13 and 19, seed 0: scaled gaps of 1.8 to
#: 22 at the carried start), the continuation crept for 523 to 1000
#: iterations, 22 to 35 CPU s each; stopped at this limit, single shooting from
#: its last iterate (the default path's answer to a continuation stopped so)
#: reached the best optimum in 10 to 32 iterations
CONTINUATION_LIMIT = 200

#: ... and the accepted steps in a row, each cut by the trust radius to less
#: than ``CREEP_FRACTION`` (1 %) of its Gauss-Newton step, that stop it
#: earlier (``LoopOptions.creep_steps``).  Those four Bruno continuations
#: took 171 to 195 such steps in a row, from their 24th to 48th step on,
#: each gaining about 0.1 of a merit of 350 (uniform 11's converged after 151
#: iterations, 90 of them such steps in a row); Boehm's, logged from seven
#: uniform starts (0, 4, 6, 7, 11, 12, 14; 18 to 66 iterations each), never
#: took more than two in a row
CONTINUATION_CREEP_STEPS = 20


def continued_solve(prob: LimitedRun, setup: Setup, options: Any) -> LoopOutcome:
    """The first solve of a run continuing from a converged solution on a new
    mesh: :func:`budgeted_solve`; where ``prob.limit_continuations``, within
    :data:`CONTINUATION_LIMIT` iterations (where the method's ``max_iter`` is
    higher) and :data:`CONTINUATION_CREEP_STEPS` creeping steps.  A solve
    stopped so says so (``LoopOutcome.continuation_stopped``)."""
    own = getattr(options, "max_iter", None)
    if not prob.limit_continuations or own is None:
        return budgeted_solve(prob, setup, options)
    limits = {"max_iter": CONTINUATION_LIMIT} if own > CONTINUATION_LIMIT else {}
    if getattr(options, "creep_steps", None) == 0:  # picard-gn's, unless set
        limits["creep_steps"] = CONTINUATION_CREEP_STEPS
    if limits and hasattr(options, "limits_set_by"):  # the loop's stop names them
        limits["limits_set_by"] = ("the default method gives a solve that continues a "
                                   f"converged one on a new mesh; its max_iter is {own}")
    outcome = budgeted_solve(prob, setup, replace(options, **limits))
    if outcome.status != "max_iter":
        return outcome
    return replace(outcome, continuation_stopped=True)
