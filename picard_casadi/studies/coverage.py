"""Monte Carlo coverage of confidence intervals: how often they hold the truth.

For each seed a problem with fresh synthetic data is estimated and its
intervals are checked against the parameters the data were made with:

- ``wald``: ``estimate +- z std`` (the package's ``p_ci`` at 95 %);
- ``wald_t``: ``estimate +- t_{m - n_theta} std`` (the same with Student's
  quantile: what is left of Wald's error once the small-sample correction is
  made is its linearisation);
- ``profile``: profile likelihood (:func:`~picard_casadi.profile`).

Coverage is counted over (seed, parameter) pairs of the runs that converged.
The seeds are independent tasks: ``executor=`` or ``n_jobs=`` runs them in
parallel (:mod:`picard_casadi.runtime.executors`), each seed's estimate and profile in
one worker.  ``pytest -m slow tests/test_profile.py -s`` runs the study on
the Michaelis-Menten problem (``picard_casadi.models.michaelis_menten``);
``benchmarks/profile_coverage.py`` prints it.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..analysis.quantiles import normal, student_t
from ..estimation.setup import estimated_quantities
from ..runtime.executors import Encoded, decoded, encode, executor_for, run_tasks

__all__ = ["coverage_study", "CoverageStudy", "KINDS"]

KINDS = ("wald", "wald_t", "profile")


@dataclass
class CoverageStudy:
    """What :func:`coverage_study` returns.

    Attributes
    ----------
    rows : list of dict
        Per seed: ``seed``, ``success``, ``p``, ``p_true``, the intervals of
        each kind (``(np, 2)`` lists) and ``inside`` (per kind, per
        parameter), ``open`` (profile sides that did not cross),
        ``evaluations`` and ``seconds``.
    coverage : dict
        Per kind, the fraction of (seed, parameter) pairs whose interval
        holds the truth (converged seeds only).
    per_parameter : dict
        Per kind, the coverage of each parameter.
    confidence : float
    failed : int
        Seeds whose estimate did not converge (not counted).
    wall_time : float
    """

    rows: list[dict[str, Any]]
    coverage: dict[str, float]
    per_parameter: dict[str, list[float]]
    names: list[str]
    confidence: float
    failed: int
    wall_time: float = 0.0
    kinds: tuple[str, ...] = field(default=KINDS)

    def summary(self) -> str:
        """The coverages, overall and per parameter, as text."""
        n = sum(r["success"] for r in self.rows)
        pct = f"{100 * self.confidence:g} %"
        lines = [f"coverage of the truth by {pct} intervals over {n} converged seeds "
                 f"({self.failed} failed), {self.wall_time:.0f} s"]
        width = max(len(k) for k in self.kinds)
        head = f"  {'':<{width}}  {'all':>7}" + "".join(f"{nm:>9}" for nm in self.names)
        lines.append(head)
        for kind in self.kinds:
            if kind not in self.coverage:
                continue
            lines.append(f"  {kind:<{width}}  {self.coverage[kind]:>7.1%}"
                         + "".join(f"{c:>9.1%}" for c in self.per_parameter[kind]))
        opened = sum(int(np.sum(r.get("open", 0))) for r in self.rows if r["success"])
        lines.append(f"  open profile sides (did not cross the threshold): {opened}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _seed_row(make_problem: Callable[..., Any], seed: int, confidence: float,
              with_profile: bool, estimate_options: dict[str, Any],
              profile_options: dict[str, Any]) -> dict[str, Any]:
    """One seed: data, estimate, intervals, and which hold the truth."""
    from .profile import profile

    t0 = time.perf_counter()
    prob = make_problem(seed=seed)
    truth = np.asarray(prob.p_true, float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # per-seed notes (open profiles, ...) are the data
        res = prob.estimate(**estimate_options)
        row: dict[str, Any] = {"seed": int(seed), "success": bool(res.success),
                               "p": res.p.tolist(), "p_true": truth.tolist()}
        if not res.success or res.p_std is None:
            row["success"] = False
            row["seconds"] = time.perf_counter() - t0
            return row
        lb, ub = res.settings["p_bounds"]
        dof = res.n_measurements - sum(estimated_quantities(
            lb, ub, len(res.x_names), len(res.x0), res.settings["estimate_x0"]))
        std = np.asarray(res.p_std, float)
        z = normal(0.5 + 0.5 * confidence)
        t = student_t(0.5 + 0.5 * confidence, max(dof, 1))
        with np.errstate(invalid="ignore"):
            intervals = {"wald": np.column_stack([res.p - z * std, res.p + z * std]),
                         "wald_t": np.column_stack([res.p - t * std, res.p + t * std])}
        row["evaluations"] = 0
        if with_profile:
            prof = profile(res, confidence=confidence, **profile_options)
            intervals["profile"] = prof.intervals
            row["evaluations"] = prof.evaluations
            row["open"] = int(np.sum(np.isinf(prof.intervals)))
    for kind, iv in intervals.items():
        iv = np.where(np.isnan(iv), np.array([-np.inf, np.inf]), iv)
        row[kind] = iv.tolist()
        row.setdefault("inside", {})[kind] = ((iv[:, 0] <= truth) & (truth <= iv[:, 1])).tolist()
    row["seconds"] = time.perf_counter() - t0
    return row


def _seed_row_in_worker(data: Encoded, seed: int) -> dict[str, Any]:
    args = decoded(data)
    return _seed_row(args["make_problem"], seed, args["confidence"], args["profile"],
                     args["estimate_options"], args["profile_options"])


def coverage_study(
    make_problem: Callable[..., Any],
    seeds: Iterable[int],
    *,
    confidence: float = 0.95,
    profile: bool = True,
    executor: Any = None,
    n_jobs: int | None = None,
    estimate_options: dict[str, Any] | None = None,
    profile_options: dict[str, Any] | None = None,
) -> CoverageStudy:
    """Estimate every seed's data and count how often each interval holds the truth.

    Parameters
    ----------
    make_problem : callable
        ``make_problem(seed=...) -> Problem`` (with ``p_true``), e.g. a
        model module's ``make_problem`` or ``functools.partial(pc.problem,
        "vdp")``.  On an executor it must pickle (a module-level function).
    seeds : iterable of int
    confidence : float
        Coverage probability of every interval.
    profile : bool
        Also compute profile-likelihood intervals (the costly part).
    executor : concurrent.futures.Executor, optional
        Run the seeds on it, one task each.
    n_jobs : int, optional
        A local pool of this many processes instead.
    estimate_options, profile_options : dict, optional
        Keyword arguments of ``Problem.estimate`` and of
        :func:`~picard_casadi.profile` (not ``executor``: the seeds are the
        parallel tasks).

    Returns
    -------
    CoverageStudy
    """
    t0 = time.perf_counter()
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("`seeds` is empty")
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"`confidence` must be between 0 and 1, got {confidence!r}")
    estimate_options = dict(estimate_options or {})
    profile_options = dict(profile_options or {})
    args = (float(confidence), bool(profile), estimate_options, profile_options)
    with executor_for(executor, n_jobs, len(seeds)) as ex:
        if ex is None:
            rows = [_seed_row(make_problem, s, *args) for s in seeds]
        else:
            data = encode({"make_problem": make_problem, "confidence": args[0],
                           "profile": args[1], "estimate_options": estimate_options,
                           "profile_options": profile_options})
            rows = run_tasks(_seed_row_in_worker, [(data, s) for s in seeds], ex)
    ok = [r for r in rows if r["success"]]
    kinds = tuple(k for k in KINDS if k != "profile" or profile)
    names = list(make_problem(seed=seeds[0]).model.p_names)
    coverage, per_parameter = {}, {}
    for kind in kinds:
        inside = np.array([r["inside"][kind] for r in ok], bool).reshape(len(ok), -1)
        coverage[kind] = float(inside.mean()) if inside.size else float("nan")
        per_parameter[kind] = (inside.mean(axis=0).tolist() if inside.size
                               else [float("nan")] * len(names))
    return CoverageStudy(rows=rows, coverage=coverage, per_parameter=per_parameter,
                         names=names, confidence=float(confidence),
                         failed=len(rows) - len(ok), wall_time=time.perf_counter() - t0,
                         kinds=kinds)
