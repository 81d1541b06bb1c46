"""Second runs after a failed fit on the default path.

:func:`~picard_casadi.estimate.estimate` runs ``picard-gn`` unless the user
names a method.  Where that run fails, a few causes have a known remedy that
another start or method applies, and the default path applies it rather than
returning the failure (an explicit ``method`` runs once, so comparisons
measure what they name):

0. **The run was still converging** (``picard-gn`` stopped at its own
   ``max_iter`` while its objective still fell by more than
   :data:`CONVERGING_GAIN` over its last :data:`CONVERGING_WINDOW`
   iterations, or with its intervals joined up, :func:`joined_up`: a walk
   of short steps), **or it stalled** (``status="stalled"``: its objective
   stopped falling with the gaps open): it is continued once from its last
   iterate (``warm_start``: a fresh solve, its trust radius, damping and
   penalty started anew), with another budget of iterations, before any
   other start or method (which would begin again from ``p0``).  A run its
   iteration limit stopped is first followed by ``"single-shooting"`` from
   its last iterate (its parameters and initial states): Levenberg-Marquardt
   in the parameters alone takes the steps the collocation's trust region
   keeps short, and where it converges its result is returned; on a model
   unstable along the data (the last iterate's chained sensitivities grow
   past :data:`~picard_casadi.analysis.interval_information.GROWTH_LIMIT`,
   where picard-gn's condensed step creeps) ``"ipopt"`` from its last
   iterate comes first, which keeps every interval start an unknown.  So is a
   solve continuing a converged one on a new mesh that the default path
   stopped at its limits (``_continuation_stopped``,
   :func:`~picard_casadi.estimation.solve_limits.continued_solve`); where
   single shooting fails there, the remedies for other failures follow
   (single shooting from ``p0``, then shooting), not the continuation.
1. **The trajectory never joined up** (``guess="auto"``; the run from the
   states simulated with ``p0`` ended at ``max_iter`` with the continuity
   gaps open, and some state is not measured): the run is repeated from
   ``guess="anchored"``, the states propagated from the data.
   Where the first run ended (``max_iter`` or ``step_failed``) with the gaps
   open and some state was taken from the data, the run is repeated from
   ``guess="shooting"``, every state simulated with ``p0`` (a continuous
   start: sparse, noisy counts of a state make a start the model cannot
   join).
2. **picard-gn's step failed** (``step_failed``; ``method`` unset): the
   run is repeated with ``"single-shooting"`` from ``p0`` (every experiment
   integrated from its initial state by CVODES: far from the data, where the
   collocation's fixed points at the trial steps are not found, CVODES
   follows any trajectory), first where the model is not unstable along the
   last iterate, after IPOPT (below) where it is; where it fails, as below.
   **The model is unstable along the data** (the condensed step stuck with
   a finite solution, :func:`~picard_casadi.estimation.diagnosis.diagnose_stuck_step`),
   **or picard-gn's step failed** (``step_failed``: stiff kinetics at the
   first mesh's optimum; ``method`` unset): the run is repeated with
   ``"ipopt"`` on the same collocation, which keeps every interval start an
   unknown, before shooting is tried; where IPOPT stops with the intervals
   joined up, ``picard-gn`` is continued from its last iterate.
3. **The collocation did not reach a certified answer** (any other failure
   but a stop by the callback, or by a ``max_iter`` the user set; ``method``
   unset): the run is repeated with ``"single-shooting"`` from ``p0``
   (where it has not run yet: one sensitivity integration per iteration,
   where each of multiple shooting's IPOPT iterations integrates every
   interval with its sensitivities and factorises the whole NLP), then with
   ``"shooting"`` from ``p0``, whose intervals are integrated by CVODES with
   error control, so a state that turns fast late in the data (a fed-batch's
   substrate running out) is resolved where a fixed mesh's polynomials find
   spurious fixed points.  It solves to :data:`BUDGET_SHOOTING_TOL`, and
   ``picard-gn`` finishes from its converged solution (shooting's own
   result is returned where that fails); where it stops with its intervals
   joined up (a trial point CVODES cannot integrate, or its budget),
   ``picard-gn`` is continued from its last iterate, as from IPOPT's.

A run that ended on a plateau (``status="plateau"``: the outputs do not
depend on the parameters there) gets no second run: another start is the
remedy, and the message says so.  Nor does a run whose parameters ran off
along a flat valley the data do not bound (``not_certified``, named by
:func:`~picard_casadi.estimation.valleys.ran_off`): every other run
follows the same valley; a second run that ends so is returned.

A second run that converges is returned with a first warning saying why;
one that does not leaves the first result, its message extended with what
was tried.  ``wall_time`` counts every run.

The other methods' runs are bounded, so that a problem no method solves
ends in a failure within minutes: they are one solve each (a failure is not
refined and restarted from ``p0``, :func:`restarts_allowed`) of at most
:data:`BUDGET_ITERATIONS` IPOPT iterations, single shooting's of
:data:`BUDGET_SINGLE_SHOOTING_ITERATIONS` of its own.  The budget holds
for the run in all (:func:`run_limit`): the likelihood's weight rounds share
it (:func:`~picard_casadi.estimation.solve_limits.budgeted_solve`), and a
converged answer the certificate does not pass is not refined either;
``picard-gn`` continues from it (:func:`_continued`) and refines.  The budget counts
iterations, not seconds, so that the same call returns the same result on a
fast machine and on a slow or busy one.  The choices, the cases behind each
and what they cost are in docs/design.md and docs/reliability.md.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import re
import time
from collections.abc import Callable, Iterator
from typing import Any
from dataclasses import dataclass

import numpy as np

from ..analysis.interval_information import GROWTH_LIMIT
from ..errors import StartNotFiniteError
from ..methods.base import ANCHORED_ADVICE, OPEN_GAP_ADVICE, SHOOTING_ADVICE, LoopOptions
from ..methods.picard_gn import PicardGNOptions
from ..result import EstimationResult
from .diagnosis import UNSTABLE_THERE

__all__ = ["Rerun", "DefaultPath", "second_runs", "single_shooting_instead", "clipped",
           "ITERATION_LIMITS", "STALLED", "NOISE_NOT_POSITIVE", "OUTPUT_NOT_POSITIVE",
           "UNFINISHED",
           "restarts_allowed", "another_method", "run_limit", "BUDGET_ITERATIONS",
           "BUDGET_SINGLE_SHOOTING_ITERATIONS",
           "CONVERGING_WINDOW", "CONVERGING_GAIN", "still_converging", "joined_up",
           "BUDGET_HESSIAN_PERTURBATION", "BUDGET_SHOOTING_TOL", "BUDGET_PIVOT_ORDER"]

#: a second run with another method (``"ipopt"``, ``"shooting"``) stops after
#: this many IPOPT iterations (its ``max_iter``), unless the user set one
BUDGET_ITERATIONS = 300

#: ... and single shooting's second run stops after this many of its own
#: iterations (its default ``max_iter``): each is one CVODES run with the
#: sensitivities as states, milliseconds where a multiple-shooting IPOPT
#: iteration takes a second.  PEtab's Borghans from uniform start 0 (seed 0)
#: needs 342 (4.9 s); stopped at 300 it went on to multiple shooting, 300
#: iterations in over 200 s, and failed (docs/petab.md)
BUDGET_SINGLE_SHOOTING_ITERATIONS = 1000

#: ... and IPOPT's largest shift of its Hessian there (``max_hessian_perturbation``,
#: IPOPT's default 1e20; beyond it IPOPT abandons the step): a shift this large
#: makes the step a sliver of the gradient, and factorising the KKT matrix with
#: shifts up to 1e18 took IPOPT 2 s per iteration on Robertson's kinetics to
#: t = 1e6 (MUMPS's pivoting), 166 s for a run that failed anyway
BUDGET_HESSIAN_PERTURBATION = 1e10

#: ... and, in the IPOPT second run on the collocation, MUMPS's fill-reducing
#: ordering (``mumps_pivot_order``; 5 is METIS, IPOPT's default 7 lets MUMPS
#: choose): far from the data the KKT matrix spans many decades, and MUMPS's
#: own choice then fills it in.  PEtab's Crauste from the 11 uniform starts
#: (seed 0) where the default path reaches IPOPT, 300 iterations at most from
#: p0: 903 CPU s in all with MUMPS's choice, 246 s with METIS, each converging
#: from one start (docs/design.md, "The IPOPT second run orders its KKT
#: matrix by METIS")
BUDGET_PIVOT_ORDER = 5

#: ... and shooting's IPOPT tolerance there (its own is 1e-10): picard-gn
#: finishes from the converged shooting solution (its intervals joined up), as
#: from a stopped one, and the certificate judges; on Robertson's kinetics to
#: t = 1e6 from log10 k = 0 shooting needs 24 iterations (10.5 s) to 1e-6, 97
#: (35 s) to 1e-10, for the same nllh to 1e-4
BUDGET_SHOOTING_TOL = 1e-6

_ANOTHER_METHOD: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "picard_casadi_another_method", default=False)


def restarts_allowed() -> bool:
    """Whether a run may be refined, or a failed one restarted from ``p0``: not
    in a second run with another method (one solve, see the module doc)."""
    return not _ANOTHER_METHOD.get()


@contextlib.contextmanager
def another_method() -> Iterator[None]:
    """The block is a second run with another method (:func:`restarts_allowed`)."""
    token = _ANOTHER_METHOD.set(True)
    try:
        yield
    finally:
        _ANOTHER_METHOD.reset(token)


def run_limit(opts: Any) -> int | None:
    """The iterations a second run with options ``opts`` may take in all, its
    weight rounds included: its ``max_iter`` (IPOPT's own,
    where ``ipopt_options`` sets one), or None for a method without one."""
    ipopt = getattr(opts, "ipopt_options", None) or {}
    limit = ipopt.get("max_iter", getattr(opts, "max_iter", None))
    return None if limit is None else int(limit)


#: statuses of a run stopped by its iteration or time limit (the package's
#: methods, and IPOPT's for "ipopt" and "shooting")
ITERATION_LIMITS = ("max_iter", "Maximum_Iterations_Exceeded", "Maximum_CpuTime_Exceeded",
                    "Maximum_WallTime_Exceeded")
#: the status of a picard-gn run ended because its objective stopped falling
#: with the gaps open (``progress_window``): handled as its iteration limit
STALLED = ("stalled",)

#: a converged fit where a noise formula's sigma is not positive at a measured
#: value: no run fixes the statement, so none follows
NOISE_NOT_POSITIVE = "noise_not_positive"
#: a fit where a log-normal output is 0 or negative at a measured value
#: (the logarithm's floor): likewise
OUTPUT_NOT_POSITIVE = "output_not_positive"
#: picard-gn's runs that ended before their answer: the other starts follow
UNFINISHED = ("max_iter",) + STALLED

#: iterations at the end of a run stopped by its iteration limit over which
#: its objective is compared (the stall check's window, ``progress_window``)
CONVERGING_WINDOW = PicardGNOptions.progress_window
#: relative fall of the objective over :data:`CONVERGING_WINDOW` iterations
#: above which a run stopped by its iteration limit was still converging (the
#: stall check's ``progress_tol``): PEtab's Bruno from two of 20 random
#: starts and Boehm from one stopped at 1000 iterations falling by 1 % to 70 %
#: per 100 iterations and, given more, converged to the best optimum
CONVERGING_GAIN = LoopOptions.progress_tol

#: ``rerun(method, guess, max_iter, warm_start=None, ipopt_options=None) ->
#: result``: the same call with another method or start, a failure returned (not
#: raised); ``max_iter`` (or None) goes to the method's option of that name
#: unless the user set it; ``warm_start`` continues a result (its solution and
#: mesh); ``ipopt_options`` are IPOPT's, under the user's own
Rerun = Callable[..., EstimationResult]


def clipped(message: str, limit: int = 160) -> str:
    """The first clause of ``message`` (up to its first ``": "``, ``"; "`` or
    ``" -- "``), cut at a word within ``limit`` characters and its
    parentheses closed: another run's message quoted inside a note."""
    parts = re.split(r": |; | -- ", message, maxsplit=2)
    # IPOPT's messages open with "IPOPT: <status>"
    head = (": ".join(parts[:2]) if parts[0] == "IPOPT" and len(parts) > 1 else parts[0]).strip()
    if len(head) > limit:
        head = head[:limit].rsplit(" ", 1)[0].rstrip(",;:( ") + " ..."
    return head + ")" * max(0, head.count("(") - head.count(")"))


@dataclass(frozen=True)
class DefaultPath:
    """What the first run was and what the user chose.

    Attributes
    ----------
    method : str
        The first run's method.
    method_chosen : bool
        Whether the user named it (then no other method is tried).
    guess : str
        The ``guess`` argument (``"auto"`` allows the anchored retry).
    warm_start : bool
        Whether the run continued a result (no second runs: its start is the user's).
    every_state_measured : bool
        Every state is an output (both starts take every state from the data).
    unstable : bool
        :func:`~picard_casadi.estimation.diagnosis.diagnose_stuck_step` found the model
        unstable along the last iterate with a finite solution.
    max_iter_given : bool
        The user set ``max_iter``: a run stopped by it stopped where asked,
        and no other method is tried.
    some_state_measured : bool
        Some output is a state: the ``"simulation"`` start took it from the data.
    growth : float
        Where picard-gn stopped at its iteration limit, how much the chained
        sensitivities of its last iterate grow along the data
        (:func:`~picard_casadi.analysis.interval_information.chain_growth`);
        1 where not measured.
    floored_by_statement : bool
        A run ended ``"output_not_positive"`` where the model simulated from
        the start floors the output too (no run changes that); False: it
        was positive there, and the second runs follow.
    """

    method: str
    method_chosen: bool
    guess: str
    warm_start: bool
    every_state_measured: bool
    unstable: bool
    max_iter_given: bool = False
    some_state_measured: bool = False
    growth: float = 1.0
    floored_by_statement: bool = True


def _after(first: EstimationResult) -> str:
    """The iterations of the run a second run continues ("max_iter=1000" beside "21")."""
    return f" after {first.iterations} iterations" if first.iterations else ""


def _returned(retry: EstimationResult, first: EstimationResult, why: str) -> EstimationResult:
    """The second run returned (converged, or one that ends the path), its first
    warning saying why it ran."""
    retry.warnings.insert(0, why)
    retry.wall_time += first.wall_time
    return retry


def _on_a_plateau(retry: EstimationResult, first: EstimationResult, why: str
                  ) -> EstimationResult:
    """A second run that ended on a plateau, returned: the plateau is the start's
    basin, not the method's (as after a first run, :func:`second_runs`), so no
    other run follows.  PEtab's Fujita from uniform start 5 (seed 0): IPOPT's
    second run converged at 10011.41, 10,000 above the best, where no parameter
    moves the fit by more than 0.055 noise levels; picard-gn continued from
    there for 105 s and shooting failed, and the call ended ``step_failed``."""
    return _returned(retry, first, f"{why} ended on a plateau; another start is the remedy, "
                                   "and no other run was tried")


#: the first warning of a second run returned because its parameters ran off
#: along a valley (estimation/valleys.py): the other runs would follow it
#: (Robertson's kinetics with B lost in the noise, from log10 k = 0: picard-gn's
#: step failed, guess='shooting' ran to log10 k2 = 25, then IPOPT and shooting)
_RAN_OFF_NOTE = ("{}; {} ran along a valley the data do not bound (its message says where): "
                 "this result is that run's, and no other run was tried")


def _not_converged(retry: EstimationResult, method: str) -> str:
    """Why another method's second run is not returned, quoted in the first's message."""
    if retry.status == "Maximum_Iterations_Exceeded":
        return (f"stopped at its budget of {BUDGET_ITERATIONS} iterations; method='{method}' "
                "runs without one")
    if retry.status == "not_certified" and method in ("shooting", "single-shooting"):
        # (no mesh to refine: CVODES integrates each interval or experiment)
        return f"converged where its estimate is not certified ({clipped(retry.message)})"
    if retry.status == "not_certified":
        return ("converged on its mesh, where its estimate is not certified as the ODE's; a "
                "second run is not refined")
    return clipped(retry.message)


def _with_another_method(rerun: Rerun, method: str, guess: str) -> EstimationResult:
    """A second run with another method: one solve (:func:`another_method`) of at
    most :data:`BUDGET_ITERATIONS` iterations (single shooting
    :data:`BUDGET_SINGLE_SHOOTING_ITERATIONS`), IPOPT's Hessian shifted by at
    most :data:`BUDGET_HESSIAN_PERTURBATION`, IPOPT's KKT matrix on the
    collocation ordered by :data:`BUDGET_PIVOT_ORDER`, and shooting's IPOPT tolerance
    :data:`BUDGET_SHOOTING_TOL` (unless the user set these; single shooting
    has no IPOPT)."""
    options: dict | None = None  # single shooting: no IPOPT
    if method != "single-shooting":
        options = {"max_hessian_perturbation": BUDGET_HESSIAN_PERTURBATION}
    if method == "ipopt":
        options["mumps_pivot_order"] = BUDGET_PIVOT_ORDER
    if method == "shooting":
        options["tol"] = BUDGET_SHOOTING_TOL
    budget = (BUDGET_SINGLE_SHOOTING_ITERATIONS if method == "single-shooting"
              else BUDGET_ITERATIONS)
    with another_method():
        return rerun(method, guess, budget, ipopt_options=options)


@dataclass(frozen=True)
class _AnotherMethod:
    """A second run with another method and how its notes name it."""

    method: str
    stopped: str  # how the first run ended (the notes' first clause)
    named: str  # the run, where it converged
    why: str  # ... and why it was tried (in parentheses)
    failed: str  # the run, where it did not converge
    last: str  # whose last iterate picard-gn continues


def _single_shooting(stopped: str, where: str = "") -> _AnotherMethod:
    """The single-shooting second run after the first ``stopped`` (``where``: when
    the default method falls back to it, for its note)."""
    return _AnotherMethod(
        "single-shooting", stopped, "method='single-shooting' from p0",
        "CVODES integrates every experiment from its initial state with error control; "
        f"the default method falls back to it{' ' + where if where else ''}; "
        "pass method= to choose", "method='single-shooting' from p0", "single shooting's")


def worse_optimum(retry: EstimationResult, first: EstimationResult) -> bool:
    """Whether ``retry`` converged to another, worse optimum than the first
    run's uncertified estimate: its ``nllh`` above the first's by more than
    the first's discretisation error can account for.

    A first run ``not_certified`` converged on its mesh, its outputs within
    ``d = discretisation_error`` noise levels of the ODE's own; each
    residual then moves by at most ``d`` noise levels, and the likelihood
    by at most ``n (d + d^2 / 2)`` over ``n`` measurements (plus 1 for the
    noise levels' round-off).  A second run beyond that found a worse local
    optimum, not the ODE's version of the first: a user's CSTR, started at
    its optimum, was not certified at nllh -496.17 (0.14 noise levels), and
    picard-gn continued from single shooting's failed walk converged at
    613.17, which was returned as the answer.  Any other first run (one that
    did not converge) has no likelihood to compare with.
    """
    if first.status != "not_certified":
        return False
    d = float(first.discretisation_error)
    if not (math.isfinite(d) and math.isfinite(first.nllh)):
        return False
    margin = first.n_measurements * (d + 0.5 * d * d) + 1.0
    return bool(retry.nllh > first.nllh + margin)


def _another_optimum(retry: EstimationResult, first: EstimationResult) -> str:
    """How a second run that converged to a worse optimum (:func:`worse_optimum`)
    is named in the first run's message."""
    return (f"converged to another optimum, worse than this estimate's (nllh "
            f"{retry.nllh:.6g} against {first.nllh:.6g}), not returned")


def _another_method_run(rerun: Rerun, result: EstimationResult, guess: str,
                        run: _AnotherMethod) -> EstimationResult | None:
    """The converged second run with ``run.method``, or picard-gn continued from
    its joined-up last iterate (:func:`_continued`), each with a first warning
    saying why; the second run, or that continuation, where it ended on a
    plateau (:func:`_on_a_plateau`); or None with the first result's message
    extended."""
    retry = _with_another_method(rerun, run.method, guess)
    if retry.status == "plateau":
        return _on_a_plateau(retry, result, f"{run.stopped}; {run.named} ({run.why})")
    if retry.success and worse_optimum(retry, result):
        result.message += f"; {run.failed} {_another_optimum(retry, result)}"
        return None
    if retry.success:
        if run.method == "shooting":
            # solved to BUDGET_SHOOTING_TOL: picard-gn finishes on the mesh
            polished = _continued(rerun, retry)
            if polished is not None and polished.success:
                return _returned(polished, result, (
                    f"{run.stopped}; {run.named} converged ({run.why}) to IPOPT's tol "
                    f"{BUDGET_SHOOTING_TOL:g}; this result is picard-gn continued from its "
                    "solution"))
        return _returned(retry, result, (
            f"{run.stopped}; this result is from {run.named} ({run.why})"))
    if retry._ran_off:
        return _returned(retry, result, _RAN_OFF_NOTE.format(run.stopped, run.named))
    polished = _continued(rerun, retry)
    joined = (f"{run.stopped}; {run.named} joined the intervals up but stopped "
              f"({_not_converged(retry, run.method)})")
    if polished is not None and polished.status == "plateau":
        return _on_a_plateau(polished, result,
                             f"{joined}; picard-gn continued from {run.last} last iterate")
    if polished is not None and polished.success and worse_optimum(polished, result):
        result.message += (f"; {run.failed} did not converge either "
                           f"({_not_converged(retry, run.method)}), and picard-gn continued "
                           f"from {run.last} last iterate {_another_optimum(polished, result)}")
        return None
    if polished is not None and polished.success:
        return _returned(polished, result, (
            f"{joined}; this result is picard-gn continued from {run.last} last iterate"))
    result.message += (f"; {run.failed} did not converge either "
                       f"({_not_converged(retry, run.method)})")
    return None


def _continued(rerun: Rerun, retry: EstimationResult) -> EstimationResult | None:
    """picard-gn continued from a failed IPOPT or shooting run's last iterate
    where that iterate joined the intervals up (scaled gaps within
    :data:`OPEN_GAP_ADVICE`): IPOPT often gets there and then stops short of
    the optimum (its budget, ``Error_In_Step_Computation`` in the last steps,
    or, shooting, a trial point where CVODES fails); the Gauss-Newton step
    finishes from a continuous trajectory.  Robertson's kinetics to t = 1e6
    from log10 k = 0: picard-gn's step failed, IPOPT stopped at its budget with
    gaps of 8e-7 at log10 k2 = 3.9, and picard-gn from there reached the
    optimum (log10 k2 = 7.48) in 46 iterations, 0.3 s; from log10 k = 1,
    shooting stopped at log10 k = (-1.396, 7.479, 4.006) where CVODES's adjoint
    ran out of steps at a trial point, and picard-gn from there converged in
    0.1 s (docs/performance.md)."""
    gaps = retry.history.get("gap_scaled") or [math.inf]
    if not float(gaps[-1]) <= OPEN_GAP_ADVICE:
        return None
    return _from_last_iterate(rerun, retry)


#: IPOPT's options in a run from picard-gn's last iterate on a model unstable
#: along the data: its Hessian's perturbation at most this (IPOPT's default
#: 1e20).  A generator's swing equation started at its unstable equilibrium:
#: from iteration 14 on IPOPT raised it to 1e8-1e10, MUMPS' factorisations
#: filled in (its memory raised to 16000 %), and iteration 18 took minutes,
#: the call over 14 min; capped, 300 iterations took 149 s
HELD_IPOPT = {"max_hessian_perturbation": 1e8}


def _from_last_iterate(rerun: Rerun, result: EstimationResult, method: str = "picard-gn",
                       guess: str = "simulation",
                       max_iter: int | None = None) -> EstimationResult | None:
    """picard-gn (or ``method``, a second run of another method stopped after
    ``max_iter`` iterations) continued from ``result``'s last iterate
    (``warm_start``), or None where it has none to continue from (no
    solution, ``p`` not finite, or a trajectory the collocation cannot
    evaluate: PEtab's Borghans from its nominal vector, where single
    shooting's last iterate settled on the mesh to nodes at which the calcium
    model is not finite, and the continuation raised
    :class:`~picard_casadi.errors.StartNotFiniteError` out of the whole call
    after 141 s)."""
    if getattr(result, "_X", None) is None or not np.all(np.isfinite(result.p)):
        return None
    try:
        with another_method() if method != "picard-gn" else contextlib.nullcontext():
            return rerun(method, guess, max_iter, warm_start=result,
                         ipopt_options=HELD_IPOPT if method == "ipopt" else None)
    except StartNotFiniteError:
        return None


def joined_up(result: EstimationResult) -> bool:
    """Whether the last iterate of ``result`` has its intervals joined up:
    scaled continuity gaps within :data:`OPEN_GAP_ADVICE`."""
    gaps = result.history.get("gap_scaled") or [math.inf]
    return bool(float(gaps[-1]) <= OPEN_GAP_ADVICE)


def still_converging(result: EstimationResult) -> bool:
    """Whether a run stopped by its iteration limit was still converging: its
    objective fell by more than :data:`CONVERGING_GAIN` (relative) over the
    last :data:`CONVERGING_WINDOW` iterations of its last solve (a count of
    iterations, never a time)."""
    objective = result.history.get("objective") or []
    iteration = result.history.get("iteration") or []
    if len(objective) <= CONVERGING_WINDOW or len(iteration) != len(objective):
        return False
    # the window must lie within the last solve (its iterations count up)
    tail = [int(v) for v in iteration[-1 - CONVERGING_WINDOW:]]
    if any(b != a + 1 for a, b in zip(tail, tail[1:])):
        return False
    before, after = float(objective[-1 - CONVERGING_WINDOW]), float(objective[-1])
    return bool(np.isfinite(before) and np.isfinite(after)
                and before - after > CONVERGING_GAIN * abs(before))


def _run_from_last_iterate(rerun: Rerun, result: EstimationResult, t_start: float, why: str,
                           method: str = "picard-gn", guess: str = "simulation"
                           ) -> EstimationResult | None:
    """``method`` from the last iterate of ``result`` (``warm_start``: its
    parameters and initial states): picard-gn continued (a run its iteration
    limit stopped while it still converged, :func:`still_converging`, or one
    that stalled), or single shooting (at most
    :data:`BUDGET_SINGLE_SHOOTING_ITERATIONS` iterations).  Converged (or on a
    plateau, :func:`_on_a_plateau`), the result with its first warning saying
    ``why`` picard-gn stopped; else None, the first result's message extended
    (or unchanged where there is no iterate to start from, or the model cannot
    be simulated there)."""
    shooting = method == "single-shooting"
    retry = _from_last_iterate(rerun, result, method, guess,
                               BUDGET_SINGLE_SHOOTING_ITERATIONS if shooting else None)
    if retry is None:
        return None
    if retry.status == "plateau":
        return _on_a_plateau(retry, result, f"picard-gn {why}{_after(result)} ("
                                            f"{clipped(result.message)}); method='{method}' "
                                            "from its last iterate")
    if retry.success:
        how = ("is from method='single-shooting' from its last iterate (warm_start=the "
               "stopped result; CVODES integrates every experiment from its initial state, "
               "and its steps in the parameters are not held to the collocation's trust "
               "region)" if shooting else
               "is from method='ipopt' from its last iterate (warm_start=the stopped result; "
               "IPOPT keeps every interval start an unknown, where picard-gn's step chains "
               "their sensitivities, which grow past round-off along a model unstable along "
               "the data)" if method == "ipopt" else
               "continues it from its last iterate (warm_start=the stopped result)")
        return _returned(retry, result, f"picard-gn {why}{_after(result)} "
                                        f"({clipped(result.message)}); this result {how}, "
                                        f"its iterations counted from there")
    result.message += ("; single shooting from its last iterate did not converge"
                       if shooting else "; continued from its last iterate, it did not "
                       "converge either") + f" ({clipped(retry.message)})"
    result.wall_time = time.perf_counter() - t_start
    return None


def _another_start(rerun: Rerun, result: EstimationResult, path: DefaultPath, guess: str,
                   why: tuple[str, str], t_start: float) -> EstimationResult | None:
    """picard-gn again from ``guess``: the converged second run, or one that
    ended on a plateau (its note ``why``: how the first ended, what the new
    start is), or None with the first result's message extended."""
    retry = rerun(path.method, guess, None)
    if retry.status == "plateau":
        return _on_a_plateau(retry, result, f"{why[0]} ({clipped(result.message)}); a second "
                                            f"run with guess='{guess}'")
    if retry.success:
        retry.settings["guess"] = f"{guess} (after 'simulation')"
        return _returned(retry, result, (
            f"{why[0]} with the continuity gaps open ({clipped(result.message)}); this "
            f"result is from a second run with guess='{guess}' ({why[1]})"))
    if retry._ran_off:
        return _returned(retry, result, _RAN_OFF_NOTE.format(
            f"{why[0]} ({clipped(result.message)})", f"a second run with guess='{guess}'"))
    result.message += (f"; a second run from guess='{guess}' did not converge either "
                       f"({clipped(retry.message)})")
    result.wall_time = time.perf_counter() - t_start  # every run
    return None


def single_shooting_instead(rerun: Rerun, not_finite: StartNotFiniteError, guess: str,
                            t_start: float) -> EstimationResult:
    """Single shooting from ``p0`` where the collocation's start is not finite
    but the model simulated with ``p0`` is (``method`` unset).

    The collocation's start maps the guess's nodes through the Picard map;
    on an interval whose fixed point did not settle (a fast transient) that
    can leave the model's domain where CVODES stays in it: PEtab's
    Borghans from uniform start 16 (seed 0), ``n_par`` = 0.007, where the
    first interval's end took the calcium below zero and ``Z ** n_par`` was
    not finite, although its simulation runs.  Single shooting (at most
    :data:`BUDGET_SINGLE_SHOOTING_ITERATIONS` iterations) is then the
    default path's first run; where it cannot start either, ``not_finite``
    is raised.  Its result, converged or not, is returned, its first warning
    (or its message) saying why it ran.
    """
    try:
        result = _with_another_method(rerun, "single-shooting", guess)
    except StartNotFiniteError:
        raise not_finite from None
    why = ("the collocation's start is not finite (the guess's nodes mapped by the Picard map "
           "leave the model's domain) where the model simulated with p0 is; this result is "
           "from method='single-shooting' from p0 (CVODES integrates every experiment from its "
           "initial state with error control; pass method= to choose)")
    if result.success:
        result.warnings.insert(0, why)
    else:
        result.message = f"{why}: {result.message}"
    result.wall_time = time.perf_counter() - t_start
    return result


def _unstable_why(result: EstimationResult) -> str:
    """Why ``picard-gn`` stopped where its stuck step was diagnosed at a
    finite solution (:func:`~picard_casadi.estimation.diagnosis.diagnose_stuck_step`):
    the model unstable along the iterate, or a stable model (a two-compartment
    model's log concentrations were told "unstable")."""
    shown = ", ".join(f"{n} = {v:.4g}" for n, v in zip(result.p_names, result.p))
    cause = ("an unstable model along the iterate" if UNSTABLE_THERE in result.message
             else "a stable model: its step no longer describes the merit")
    return (f"its step could not gain at {shown}, where the model's own solution is finite "
            f"({cause})")


def second_runs(result: EstimationResult, path: DefaultPath, rerun: Rerun,
                t_start: float) -> EstimationResult:
    """The result the default path returns after ``result`` (see the module doc).

    Parameters
    ----------
    result : EstimationResult
        The first run's.
    path : DefaultPath
    rerun : callable
        ``rerun(method, guess, max_iter)``: the same call with another
        method or start (:data:`Rerun`).
    t_start : float
        ``time.perf_counter()`` at the call's start (``wall_time`` of the
        returned failure counts every run).
    """
    if (result.success or result.status in ("stopped", "plateau", NOISE_NOT_POSITIVE)
            or (result.status == OUTPUT_NOT_POSITIVE and path.floored_by_statement)
            or path.warm_start
            or result._ran_off):
        # a plateau (the outputs do not depend on the parameters there) is a
        # property of the start's basin: another start is the remedy, which the
        # message names; PEtab's Boehm from five of 20 starts spent 11 to 159 s
        # in shooting from the same p0 there, to no avail (fides stops at once).
        # A run whose parameters ran off along a flat valley gets none either:
        # the other runs follow the same valley (Robertson's kinetics with B
        # lost in the noise: 175 s in IPOPT and shooting, both failing)
        return result
    if (path.method == "picard-gn" and not path.method_chosen and not path.max_iter_given
            and result.status == "max_iter"
            and (still_converging(result) or joined_up(result)
                 or result._continuation_stopped)):
        # a run with its intervals joined up walked with short steps (PEtab's
        # Armistead from uniform 0, seed 0: steps of 0.0025-0.08 for 1000
        # iterations, the gradient still 0.8; continued, it converged in 581
        # iterations, 7.7 s, where shooting from p0 failed after 125 s)
        why = ("reached its iteration limit while still converging" if still_converging(result)
               else "reached its iteration limit with its intervals joined up"
               if joined_up(result) else "stopped in its continuation on a new mesh")
        if path.growth > GROWTH_LIMIT:
            # the model is unstable along the data: the condensed step chains
            # the intervals' sensitivities (7e8 on a closed-loop cart-pendulum,
            # 4 s), its steps lose their precision and it creeps (1382
            # iterations, 65 s); IPOPT keeps every interval start an unknown
            # and converged from there, where single shooting integrates the
            # model from x0 (the default path took 273 s through it)
            held = _run_from_last_iterate(rerun, result, t_start, why, "ipopt", path.guess)
            if held is not None:
                return held
        # single shooting from its last iterate first: Levenberg-Marquardt in
        # the parameters alone takes the steps the collocation's trust region
        # keeps short (PEtab's Bruno from uniform 13, seed 0: picard-gn stopped
        # at 1105 iterations, 53 s; single shooting from there converged to the
        # best optimum in 25 iterations, 1.4 s, picard-gn continued in 916,
        # 36 s; Elowitz from uniform 19: 0.7 s, where the continuation
        # failed after 40 s)
        shot = _run_from_last_iterate(rerun, result, t_start, why, "single-shooting",
                                      path.guess)
        if shot is not None:
            return shot
        if not result._continuation_stopped:
            # (a continuation the default path stopped creeping would creep
            # again: PEtab's Borghans from uniform 10, seed 0, continued after
            # single shooting failed there, failed its step on five refined
            # meshes, 38 s, before single shooting from p0 converged in 0.2 s)
            continued = _run_from_last_iterate(rerun, result, t_start, why)
            if continued is not None:
                return continued
    if path.method == "picard-gn" and not path.method_chosen and result.status in STALLED:
        # a run that stalled carries its trust radius, damping and penalty to
        # the end; a fresh solve from its last iterate starts them anew: PEtab's
        # Boehm from uniform start 5 (seed 0) crept out of a plateau for 778
        # iterations (steps of 0.03-0.5) and stalled, then shooting from p0
        # failed after 125 s; continued, it converged in 188 iterations, 2.2 s
        continued = _run_from_last_iterate(rerun, result, t_start, "stalled")
        if continued is not None:
            return continued
    # (a stopped continuation's trajectory joined up on the coarser mesh: its
    # states' start is not the trouble)
    open_gaps = (path.guess == "auto" and path.method == "picard-gn"
                 and not result._continuation_stopped
                 and (result.history.get("gap_scaled") or [0.0])[-1] > OPEN_GAP_ADVICE)
    if open_gaps and result.status in UNFINISHED and not path.every_state_measured:
        # the trajectory from the simulated start never joined up: a user's 200 s
        # pendulum drifted to w2 = 80, an SIR fit with S starting at 0 stopped;
        # both converged from the states propagated from the data
        retry = _another_start(rerun, result, path, "anchored", (
            f"the first run, from the states simulated with p0, ended ({result.status})",
            "states propagated from the data"), t_start)
        if retry is not None:
            return retry
        result.message = result.message.replace(
            f"try {ANCHORED_ADVICE} or {SHOOTING_ADVICE}", f"try {SHOOTING_ADVICE}")
    if open_gaps and path.some_state_measured and result.status in UNFINISHED + ("step_failed",):
        # the measured states' start from sparse or noisy data never joined up
        # with the model: PEtab's Crauste from its own optimum, 4 to 8 noisy
        # counts per state, opened gaps of 23 (scaled), and the linearisation
        # along them exploded; from the states simulated with p0 (continuous)
        # it converged in 0.3 s
        retry = _another_start(rerun, result, path, "shooting", (
            "the first run, its measured states' trajectories started at the data (not at "
            f"their simulation from x0), ended ({result.status})",
            "every state simulated with p0"), t_start)
        if retry is not None:
            return retry
        # tried: not advised again (the message then said "try guess='shooting'"
        # and, a clause later, that the run from it did not converge either)
        for advice in (f"try {ANCHORED_ADVICE} or {SHOOTING_ADVICE}; or ",
                       f"try {SHOOTING_ADVICE}; or "):
            result.message = result.message.replace(
                "so the states' start may be the trouble: " + advice,
                "so the states' start may be the trouble (the second runs from other "
                "starts, at the end of this message, did not converge either); ")
    if path.method_chosen:
        return result
    single = _single_shooting(f"picard-gn stopped: its step failed ({clipped(result.message)})",
                              "where its step fails")
    step_failed = path.method == "picard-gn" and result.status == "step_failed"
    if step_failed and not path.unstable:
        # far from the data the collocation's fixed points at the trial steps are
        # often not found (PEtab's Crauste from random rates: a pathogen growing
        # by e^130 over one interval; picard-gn failed at its second iteration,
        # IPOPT's and shooting's fallbacks after 124 s); CVODES follows any
        # trajectory with its own steps: single shooting converged there in 7 to
        # 20 s (docs/performance.md, "Single shooting where the step fails")
        retry = _another_method_run(rerun, result, path.guess, single)
        if retry is not None:
            return retry
    if path.unstable or (path.method == "picard-gn" and result.status == "step_failed"):
        # IPOPT on the same collocation before shooting: where picard-gn's step
        # fails (an unstable model, or stiff kinetics at the first mesh's
        # optimum), the same discretised problem by another method often
        # converges, and at a fraction of shooting's cost
        why = (_unstable_why(result) if path.unstable
               else f"its step failed ({clipped(result.message)})")
        retry = _another_method_run(rerun, result, path.guess, _AnotherMethod(
            "ipopt", f"picard-gn stopped: {why}", "method='ipopt' on the same collocation",
            "the default method falls back to it there; pass method= to choose",
            "method='ipopt' from the same start", "IPOPT's"))
        if retry is not None:
            return retry
    if step_failed and path.unstable:
        # after IPOPT, which keeps every interval start an unknown, where the
        # model is unstable along the iterate (single shooting integrates it
        # from the start); Crauste from uniform starts 3 and 4: IPOPT failed
        # in 9 and 13 s, shooting at once
        retry = _another_method_run(rerun, result, path.guess, single)
        if retry is not None:
            return retry
    if path.max_iter_given and result.status in ITERATION_LIMITS:
        result.wall_time = time.perf_counter() - t_start
        return result
    if path.method == "picard-gn" and not step_failed:  # (a failed step had it above)
        # single shooting before multiple shooting for the other failures too:
        # PEtab's Elowitz from uniform start 9 stopped at max_iter, continued,
        # and multiple shooting failed after 547 s; single shooting from p0
        # converged in 7 iterations, 5.2 s
        retry = _another_method_run(rerun, result, path.guess, _single_shooting(
            f"{path.method} on the collocation mesh did not reach a certified answer "
            f"({result.status}: {clipped(result.message)})"))
        if retry is not None:
            return retry
    retry = _another_method_run(rerun, result, path.guess, _AnotherMethod(
        "shooting", f"{path.method} on the collocation mesh did not reach a certified answer "
        f"({result.status}: {clipped(result.message)})", "method='shooting' from p0",
        "CVODES integrates each interval with error control; the default method falls back "
        "to it; pass method= to choose", "method='shooting' from p0", "shooting's"))
    if retry is not None:
        return retry
    result.wall_time = time.perf_counter() - t_start
    return result
