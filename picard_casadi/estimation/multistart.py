"""``estimate(..., multistart=N)``: several starts, the best result returned.

The starts are ``p0`` and ``N - 1`` Latin-hypercube samples of the parameter
box (each parameter's range cut into ``N - 1`` equal strata, one sample per
stratum, strata paired at random).  Where a bound is infinite the box is
taken as ``p0 / 4 .. 4 p0`` (or ``p0 +- 3`` for ``p0 = 0``) on that side; on
a log scale, the value's ``p0 / 4 .. 4 p0`` too.
A range of one sign spanning at least :data:`LOG_SPAN` (two decades, such
as ``1 .. 1e5``) is sampled uniformly in the logarithm, as pyPESTO samples a
parameter on a log scale: uniformly in the value, all but one per cent of
the starts of ``1 .. 1e5`` would lie above ``1e3``.
Every start runs the full estimate; the successful run with the smallest
weighted objective is returned (or the smallest objective if none
succeeded; ties go to the earlier start), and every start's ``p0``,
estimate, objective, status and wall time are kept in ``result.starts``.

The starts are drawn here, from ``seed``, before any runs, and each start is
a deterministic computation, so the same seed gives the same result
whether the starts run one after another or on an executor
(``executor=``, ``n_jobs=``; :mod:`picard_casadi.runtime.executors`).  In one
process the starts share the model's interval functions and compiled code
(built once); on an executor each worker builds them once.
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

import numpy as np

from ..analysis.fit_check import NOT_UNIQUE, is_fit_note
from ..errors import FitWarning, StartNotFiniteError
from ..runtime.executors import Encoded, decoded, encode, executor_for, run_tasks
from ..runtime.user_warnings import held_warnings, raised_again, warn_user
from .portable import portable, restore
from .wald_ends import IN_START, note_flat_wald_ends

__all__ = ["latin_hypercube", "run_multistart", "multistart_points", "LOG_BASES"]

#: a range ``lo .. hi`` of one sign with ``hi / lo`` at least this is sampled
#: uniformly in ``log |p|``
LOG_SPAN = 100.0


def latin_hypercube(lb: np.ndarray, ub: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` Latin-hypercube points in the box ``[lb, ub]`` (finite), shape (n, d)."""
    d = lb.size
    u = (rng.permuted(np.tile(np.arange(n), (d, 1)), axis=1).T + rng.random((n, d))) / n
    return lb + u * (ub - lb)


#: per entry of ``p``, the base of its logarithm where the restated problem
#: estimates a parameter on a log scale (``e`` or 10), else 0: set by
#: ``estimate`` around a restated problem's solve
LOG_BASES: contextvars.ContextVar[np.ndarray | None] = contextvars.ContextVar(
    "picard_casadi_log_bases", default=None)


def _finite_box(p0: np.ndarray, lb: np.ndarray, ub: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    width = np.where(p0 != 0, np.abs(p0), 1.0)
    lo = np.where(np.isfinite(lb), lb, np.where(p0 > 0, p0 / 4, p0 - 3 * width))
    hi = np.where(np.isfinite(ub), ub, np.where(p0 > 0, 4 * p0, p0 + 3 * width))
    lo = np.where((p0 < 0) & ~np.isfinite(lb), 4 * p0, lo)
    hi = np.where((p0 < 0) & ~np.isfinite(ub), p0 / 4, hi)
    bases = LOG_BASES.get()
    if bases is not None and bases.size == p0.size:
        # a log scale's side without a bound: the value from p0 / 4 to 4 p0, as
        # on the linear scale (it was log10(p0) / 4 .. 4 log10(p0): K from 6 to
        # 5e12 for a start of 1500, a rate of 1 from 1e-3 to 1e3)
        logs = bases > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(logs, np.log(4.0) / np.log(np.where(logs, bases, 2.0)), 0.0)
        lo = np.where(logs & ~np.isfinite(lb), p0 - step, lo)
        hi = np.where(logs & ~np.isfinite(ub), p0 + step, hi)
    return lo, hi


def log_scaled(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Which entries of the finite box ``lo .. hi`` are sampled in ``log |p|``:
    one sign (zero excluded) and a span of at least :data:`LOG_SPAN`."""
    with np.errstate(all="ignore"):
        span = np.where(lo > 0, hi / lo, np.where(hi < 0, lo / hi, 0.0))
    return span >= LOG_SPAN


def multistart_points(p0: np.ndarray, p_bounds: tuple[np.ndarray, np.ndarray], n_starts: int,
                      seed: int | None) -> list[np.ndarray]:
    """``p0`` and ``n_starts - 1`` Latin-hypercube samples of the (finite) box,
    in ``log |p|`` where the range spans two decades or more (:func:`log_scaled`)."""
    lb, ub = p_bounds
    lo, hi = _finite_box(p0, lb, ub)
    rng = np.random.default_rng(seed)
    starts = [p0.copy()]
    if n_starts > 1:
        free = lo < hi
        logs = log_scaled(lo, hi)
        sign = np.where(hi < 0, -1.0, 1.0)
        with np.errstate(all="ignore"):
            a = np.where(logs, np.log(np.abs(np.where(sign > 0, lo, hi))), lo)
            b = np.where(logs, np.log(np.abs(np.where(sign > 0, hi, lo))), hi)
        samples = latin_hypercube(a, b, n_starts - 1, rng)
        samples = np.where(logs, sign * np.exp(np.where(logs, samples, 0.0)), samples)
        # round-off of exp(log(bound)) must not leave the box
        samples = np.clip(samples, lo, hi)
        starts += [np.where(free, s, p0) for s in samples]
    return starts


@dataclass
class _NotEvaluable:
    """A sampled start where the model cannot be evaluated (its message)."""

    message: str
    result: None = None


def _one_start(estimate: Callable[..., Any], model: Any, experiments: list, p0: np.ndarray,
               method: str | None, kwargs: dict[str, Any], sampled: bool
               ) -> tuple[Any, list[tuple[str, type[Warning]]]]:
    """One start's result and the warnings it raised (held back: only the
    best start's are raised again); a sampled start where the model cannot
    be evaluated (0/0 in a Hill term whose powers underflow, a log of a
    negative state) is a failed start, not the end of the run.  The caller's own ``p0`` raises as in a single estimate: that
    start is the caller's input."""
    # (a start that found a poor local minimum is what multistart is for: a
    # user read a lost start's "the data do not determine k_phos" as the
    # result's; the best start's FitWarning is raised from its ``warnings``)
    token = IN_START.set(True)
    with held_warnings(ignore=(FitWarning,)) as caught:
        try:
            res = estimate(model, experiments, p0, method, multistart=None, **kwargs)
        except StartNotFiniteError as err:
            if not sampled:
                raise
            res = _NotEvaluable(str(err))
        finally:
            IN_START.reset(token)
    return res, caught


def _start_in_worker(data: Encoded, p0: np.ndarray, sampled: bool
                     ) -> tuple[Any, list[tuple[str, type[Warning]]]]:
    """One start on an executor: the problem decoded once per worker, the result portable."""
    prob = decoded(data)
    res, caught = _one_start(prob["estimate"], prob["model"], prob["experiments"], p0,
                             prob["method"], prob["kwargs"], sampled)
    return (res if isinstance(res, _NotEvaluable) else portable(res)), caught


#: converged starts whose weighted objectives differ by at most this (relative)
#: reach the same optimum value ...
EQUAL_OBJECTIVE = 1e-6
#: ... and are different optima where an estimate lies this many standard
#: errors from the best one (or, without standard errors, this far relative).
#: One is enough: in one quadratic basin a point a standard error away is
#: 0.5 s^2 higher, 1 / (m - n) of the objective, far above EQUAL_OBJECTIVE
#: for any data set under 1e6 values; with 3, an oral two-compartment
#: model's flip-flop twin (ka 0.594 and 1.110, standard error 0.23, objectives
#: equal to 2e-10) reached by 5 of 8 starts went unnamed
DISTINCT_SE = 1.0
DISTINCT_RELATIVE = 1e-3


def criterion(result: Any) -> float:
    """What a start minimised, comparable between starts: ``nllh`` where the
    noise levels were estimated with the parameters (each start's weighted
    objective is then its own ``1 / sigma^2``-weighted sum, ``sum n_k / 2N``
    at every likelihood optimum: no comparison), else the weighted objective."""
    if result.settings.get("weights") == "auto" and np.isfinite(result.nllh):
        return float(result.nllh)
    return float(result.weighted_objective)


def note_equal_optima(best: Any, results: list[Any], starts: np.ndarray) -> None:
    """Warn where another converged start reaches the best's objective at a
    different ``p``: the data cannot tell the two apart, and the one returned is
    an accident of the starts (a user's two-compartment model with oral doses:
    ka = 0.40 and ka = 1.46, sums of squares equal to 1e-10, a flip-flop; the
    summary only gave the largest distance)."""

    std = getattr(best, "p_std", None)
    scale = (np.where(np.isfinite(std) & (std > 0), DISTINCT_SE * np.asarray(std, float), np.inf)
             if std is not None else DISTINCT_RELATIVE * np.maximum(np.abs(best.p), 1e-300))
    # what "apart" means here, in the note
    apart_by = (f"beyond {DISTINCT_SE:g} standard errors of" if std is not None
                else f"more than {DISTINCT_RELATIVE:g} (relative) from")
    f_best = criterion(best)
    for k, r in enumerate(results):
        if r is best or r is None or not r.success:
            continue
        same = abs(criterion(r) - f_best) <= EQUAL_OBJECTIVE * max(abs(f_best), 1e-300)
        apart = np.abs(np.asarray(r.p) - best.p) > scale
        if not (same and np.any(apart)):
            continue
        names = [best.p_names[i] for i in np.flatnonzero(apart)]
        def named(values: Any) -> str:
            return ", ".join(f"{n} = {v:.4g}" for n, v in zip(best.p_names, values))

        note = (f"{NOT_UNIQUE}: the start from {named(starts[k])} reached the same objective "
                f"(relative difference "
                f"{abs(criterion(r) - f_best) / max(abs(f_best), 1e-300):.1g}) at "
                f"{named(np.asarray(r.p))}, where "
                f"{', '.join(names)} lie{'s' if len(names) == 1 else ''} {apart_by} "
                "this estimate: the data do not tell the "
                "two apart (a symmetry of the model, such as a flip-flop of two rates); "
                "bounds or a known value that exclude one decide between them")
        best.warnings.append(note)
        return  # one such note says it


#: another optimum whose nllh is within half the 95 % chi-square(1) threshold
#: of the best lies inside the likelihood's 95 % confidence region
RIVAL_NLLH = 0.5 * 3.841
#: ... and is another optimum where it lies this many standard errors away
RIVAL_SE = 3.0


def note_rival_optima(best: Any, results: list[Any], starts: np.ndarray) -> None:
    """A note where another converged start's optimum, far from the best,
    is within :data:`RIVAL_NLLH` of its nllh: the likelihood's 95 % region
    holds both, and the best's standard errors and intervals describe its own
    basin alone (an IVGTT's minimal model: two optima 0.59 apart in nllh,
    p1 0.014 and 0.032, the interval of the best [0.0116, 0.0208], no word)."""
    std = getattr(best, "p_std", None)
    if std is None or not np.isfinite(best.nllh):
        return
    std = np.asarray(std, float)
    rivals = []
    for k, r in enumerate(results):
        if r is best or r is None or not r.success or not np.isfinite(r.nllh):
            continue
        gap = float(r.nllh - best.nllh)
        apart = np.isfinite(std) & (np.abs(np.asarray(r.p) - best.p) > RIVAL_SE * std)
        if (abs(gap) > EQUAL_OBJECTIVE * max(abs(best.nllh), 1.0) and gap <= RIVAL_NLLH
                and np.any(apart)):
            rivals.append((gap, k, r))
    if not rivals:
        return
    gap, k, r = min(rivals, key=lambda item: item[0])
    values = ", ".join(f"{n} = {v:.4g}" for n, v in zip(best.p_names, np.asarray(r.p)))
    note = (f"another optimum, reached from start {k}, at {values}, has an nllh only "
            f"{gap:.3g} above this one (2 x {gap:.3g} = {2 * gap:.3g} < 3.84, the 95 % "
            "chi-square(1) threshold): the likelihood's 95 % confidence region holds both, "
            "and this estimate's standard errors and intervals (and a profile from it) "
            "describe its own optimum alone; res.starts lists both, and data that tell "
            "them apart (more samples where their fits differ) decide")
    best.warnings.append(note)
    warn_user(note)


def _start_record(p0: np.ndarray, result: Any, item: Any) -> dict[str, Any]:
    """One start's line of ``result.starts`` (``result`` None: ``item`` is the
    :class:`_NotEvaluable` start)."""
    if result is None:
        return {"p0": [float(v) for v in p0], "p": [float("nan")] * len(p0),
                "objective": float("nan"), "weighted_objective": float("nan"),
                "nllh": float("nan"), "success": False, "iterations": 0,
                "message": item.message, "wall_time": 0.0}
    return {"p0": [float(v) for v in p0], "p": [float(v) for v in result.p],
            "objective": result.objective, "weighted_objective": result.weighted_objective,
            "nllh": result.nllh, "success": result.success, "iterations": result.iterations,
            "message": result.message, "wall_time": result.wall_time}


def run_multistart(estimate: Callable[..., Any], model: Any, experiments: list, p0: np.ndarray,
                   method: str | None, n_starts: int, seed: int | None, kwargs: dict[str, Any],
                   executor: Any = None, n_jobs: int | None = None) -> Any:
    """Run ``estimate`` from ``n_starts`` starts and return the best result.

    Parameters
    ----------
    estimate : callable
        :func:`~picard_casadi.estimate` (passed in: it is a layer above; a worker receives it
        with the problem).
    model, experiments, p0, method
        As ``estimate``'s (``method`` None: each start takes the default path).
    n_starts : int
    seed : int or None
        Seed of the Latin-hypercube starts.
    kwargs : dict
        ``estimate``'s other keyword arguments (``p_bounds`` as a pair of arrays).
    executor : concurrent.futures.Executor, optional
    n_jobs : int, optional
        See :func:`picard_casadi.runtime.executors.executor_for`.
    """
    t_start = time.perf_counter()
    kwargs = dict(kwargs)
    starts = multistart_points(p0, kwargs["p_bounds"], n_starts, seed)
    raise_on_failure = kwargs.pop("raise_on_failure", False)
    with executor_for(executor, n_jobs, len(starts)) as ex:
        if ex is None:
            done = [_one_start(estimate, model, experiments, s, method, kwargs, k > 0)
                    for k, s in enumerate(starts)]
            items = [item for item, _ in done]
            results = [None if isinstance(item, _NotEvaluable) else item for item in items]
        else:
            data = encode({"estimate": estimate, "model": model,
                           "experiments": list(experiments),
                           "method": method, "kwargs": kwargs})
            done = run_tasks(_start_in_worker, [(data, s, k > 0) for k, s in enumerate(starts)],
                             ex)
            items = [item for item, _ in done]
            results = [item.result for item in items]
    # a start the model could not be evaluated at (never the caller's p0) ran
    # nothing (its result None): it is listed as failed, and the others compared
    ran = [k for k, r in enumerate(results) if r is not None]
    ok = [results[k] for k in ran if results[k].success]
    candidates = [k for k in ran if results[k].success] or ran
    k_best = min(candidates, key=lambda k: criterion(results[k]))
    f_best = criterion(results[k_best])
    if (0 in candidates and k_best != 0 and results[0].success
            and abs(criterion(results[0]) - f_best) <= EQUAL_OBJECTIVE * max(abs(f_best), 1e-300)):
        # a tie (a flip-flop's twin optima, equal to 4e-11): the caller's own
        # p0 decides, not the order of the samples (a pharmacometrician's ka
        # came back as the flip-flop twin 0.089 for 0.34 from p0)
        k_best = 0
    best = results[k_best] if ex is None else restore(items[k_best], model, experiments)
    if k_best:  # its "from p0" is its own start's (a user read the caller's p0)
        best.warnings = [w.replace(" from p0", f" from its start (start {k_best} of "
                                   "res.starts, not the caller's p0)", 1)
                         for w in best.warnings]
    best.starts = [_start_record(s, r, item) for s, r, item in zip(starts, results, items)]
    not_evaluable = len(starts) - len(ran)
    best.settings["multistart"] = n_starts
    # the call's time, not the best start's (each start's: best.starts)
    best.wall_time = time.perf_counter() - t_start
    n_ok = len(ok)
    spread = (np.max([np.max(np.abs(r.p / best.p - 1)) for r in ok]) if ok else np.nan)
    # a summary, not a warning: a clean multistart fit has no warnings (a user's report)
    best.settings["multistart_summary"] = (
        f"multistart: {n_ok} of {len(starts)} starts converged"
        + (f" ({not_evaluable} not evaluable: the model is not finite there)"
           if not_evaluable else "")
        + "; the best "
        + (f"nllh {best.nllh:.6g}" if criterion(best) != best.weighted_objective
           else f"(weighted) objective {best.weighted_objective:.6g}")
        + "; largest relative distance of a converged "
        f"estimate from the best: {spread:.2g}; "
        f"{sum(s['iterations'] for s in best.starts)} iterations over all starts (the best's: "
        f"{best.iterations})"
    )
    if best.success:
        note_equal_optima(best, results, starts)
        note_rival_optima(best, results, starts)
    raised_again(done[k_best][1])
    note_flat_wald_ends(best, in_multistart=True)
    for note in best.warnings:
        if is_fit_note(note):
            warn_user(note, FitWarning)
    if raise_on_failure and not best.success:
        from ..errors import ConvergenceError

        raise ConvergenceError(f"no start converged: {best.message}", best)
    return best
