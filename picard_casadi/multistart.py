"""``estimate(..., multistart=N)``: several starts, the best result returned.

The starts are ``p0`` and ``N - 1`` Latin-hypercube samples of the parameter
box (each parameter's range cut into ``N - 1`` equal strata, one sample per
stratum, strata paired at random).  Where a bound is infinite the box is
taken as ``p0 / 4 .. 4 p0`` (or ``p0 +- 1`` for ``p0 = 0``) on that side.
Every start runs the full estimate; the successful run with the smallest
weighted objective is returned (or the smallest objective if none
succeeded), and every start's ``p0``, estimate, objective and status are
kept in ``result.starts``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["latin_hypercube", "run_multistart"]


def latin_hypercube(lb: np.ndarray, ub: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` Latin-hypercube points in the box ``[lb, ub]`` (finite), shape (n, d)."""
    d = lb.size
    u = (rng.permuted(np.tile(np.arange(n), (d, 1)), axis=1).T + rng.random((n, d))) / n
    return lb + u * (ub - lb)


def _finite_box(p0: np.ndarray, lb: np.ndarray, ub: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    width = np.where(p0 != 0, np.abs(p0), 1.0)
    lo = np.where(np.isfinite(lb), lb, np.where(p0 > 0, p0 / 4, p0 - 3 * width))
    hi = np.where(np.isfinite(ub), ub, np.where(p0 > 0, 4 * p0, p0 + 3 * width))
    lo = np.where((p0 < 0) & ~np.isfinite(lb), 4 * p0, lo)
    hi = np.where((p0 < 0) & ~np.isfinite(ub), p0 / 4, hi)
    return lo, hi


def run_multistart(estimate: Callable[..., Any], model: Any, experiments: list, p0: np.ndarray,
                   method: str, n_starts: int, seed: int | None, kwargs: dict[str, Any]) -> Any:
    """Run ``estimate`` from ``n_starts`` starts and return the best result."""
    lb, ub = kwargs["p_bounds"]
    lo, hi = _finite_box(p0, lb, ub)
    rng = np.random.default_rng(seed)
    starts = [p0.copy()]
    if n_starts > 1:
        free = lo < hi
        samples = latin_hypercube(lo, hi, n_starts - 1, rng)
        starts += [np.where(free, s, p0) for s in samples]
    raise_on_failure = kwargs.pop("raise_on_failure", False)
    results = []
    for k, start in enumerate(starts):
        res = estimate(model, experiments, start, method, multistart=None, **kwargs)
        results.append(res)
    ok = [r for r in results if r.success]
    pool = ok or results
    best = min(pool, key=lambda r: r.weighted_objective)
    best.starts = [{
        "p0": [float(v) for v in s], "p": [float(v) for v in r.p],
        "objective": r.objective, "weighted_objective": r.weighted_objective,
        "success": r.success, "iterations": r.iterations, "message": r.message,
    } for s, r in zip(starts, results)]
    best.settings["multistart"] = n_starts
    n_ok = len(ok)
    spread = (np.max([np.max(np.abs(r.p / best.p - 1)) for r in ok]) if ok else np.nan)
    best.warnings.append(
        f"multistart: {n_ok} of {len(starts)} starts converged; the best objective "
        f"{best.weighted_objective:.6g}; largest relative distance of a converged "
        f"estimate from the best: {spread:.2g}"
    )
    if raise_on_failure and not best.success:
        from .errors import ConvergenceError

        raise ConvergenceError(f"no start converged: {best.message}", best)
    return best
