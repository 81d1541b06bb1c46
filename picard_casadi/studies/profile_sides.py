"""A profile's two sides, walked from the estimate, joined into its path.

:func:`~picard_casadi.studies.profile.profile` walks each side of a
parameter's estimate (a :class:`Side`), then :func:`assemble_path` joins
them into the :class:`ProfilePath`, the interval and the notes on why a side
stopped where it did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ProfilePath", "Side", "assemble_path", "held_by_a_bound"]


@dataclass
class ProfilePath:
    """One parameter's profile: the points, in increasing parameter value.

    Attributes
    ----------
    values : ndarray (k,)
        The values ``c`` of the parameter, the estimate's included.
    statistic : ndarray (k,)
        ``(PL(c) - WSSR(estimate)) / s^2`` at each value.
    p : ndarray (k, np)
        The re-optimised parameters at each value.
    ends : (str, str)
        Why each side stopped: ``"threshold"``, ``"bound"``, ``"range"``
        (flat over ``max_range``), ``"max_steps"`` or ``"failed"``.
    """

    values: np.ndarray
    statistic: np.ndarray
    p: np.ndarray
    ends: tuple[str, str]


@dataclass
class Side:
    values: list[float]
    delta: list[float]
    p: list[np.ndarray]
    end: str
    crossing: float | None
    message: str = ""
    failed_at: float = float("nan")  # where the re-optimisation failed
    better: tuple[float, float] | None = None  # (value, wssr) of a better fit seen


def held_by_a_bound(prof: Any, i: int, side: Side, word: str, lb: np.ndarray,
                     ub: np.ndarray) -> str:
    """Where a side crosses the threshold with another parameter on its bound
    at the point beyond it, a note: the interval ends there because that
    parameter cannot follow (a fast equilibrium's kf, profiled up, crossed
    where kr = 2 kf reached its bound 1e8, and nothing said so)."""
    if side.end != "threshold" or not side.p or side.crossing is None:
        return ""
    sign = 1.0 if word == "above" else -1.0
    beyond = [q for v, q in zip(side.values, side.p) if sign * (v - side.crossing) >= 0]
    held: list[int] = []
    for q in beyond:
        tol = 1e-9 * np.maximum(1.0, np.abs(q))
        held += [j for j in range(q.size) if j != i and j not in held and lb[j] < ub[j]
                 and (abs(q[j] - lb[j]) <= tol[j] or abs(q[j] - ub[j]) <= tol[j])]
    if not held:
        return ""
    p = beyond[-1]
    listed = ", ".join(f"{prof.names[j]} = {p[j]:.6g}" for j in held)
    return (f"the profile of {prof.names[i]} crosses the threshold {word} the estimate where "
            f"{listed} {'is' if len(held) == 1 else 'are'} on a bound (p_bounds): the "
            "interval ends there because that parameter cannot follow, not by the data alone")


def assemble_path(prof: Any, i: int, lower: Side, upper: Side, base: Any) -> None:
    name = prof.names[i]
    values = lower.values[::-1] + [float(base.p[i])] + upper.values
    delta = lower.delta[::-1] + [0.0] + upper.delta
    ps = lower.p[::-1] + [np.asarray(base.p, float)] + upper.p
    order = np.argsort(values, kind="stable")
    prof.paths[i] = ProfilePath(values=np.asarray(values)[order],
                                statistic=np.asarray(delta)[order] / prof.s2,
                                p=np.asarray(ps)[order], ends=(lower.end, upper.end))
    # an estimate on its bound: that side of the interval stops at the bound (the
    # data would move it further; a user's k2 on its bound 0.25 got [0.249, inf]
    # and "practically non-identifiable" next to the estimate's bound warning)
    on_bound = [side.end == "bound" and not side.values for side in (lower, upper)]
    lo = (lower.crossing if lower.end == "threshold"
          else float(base.p[i]) if on_bound[0] else -np.inf)
    hi = (upper.crossing if upper.end == "threshold"
          else float(base.p[i]) if on_bound[1] else np.inf)
    prof.intervals[i] = [lo, hi]
    for side, word, end, at_bound in ((lower, "below", "-inf", on_bound[0]),
                                      (upper, "above", "inf", on_bound[1])):
        if side.end == "threshold":
            continue
        v = side.values[-1] if side.values else float(base.p[i])
        if at_bound:
            prof.warnings.append(
                f"{name} is on its bound {v:.6g} (p_bounds): its interval stops there, "
                f"{word} the estimate (the data would move it beyond the bound)")
            continue
        head = (f"the profile of {name} does not cross the {100 * prof.confidence:g} % "
                f"threshold {word} the estimate")
        if side.end == "failed":
            risen = max(side.delta[-1], 0.0) / (prof.s2 * prof.threshold) if side.values else 0
            # (named: "at 335.593 ... at 304.846" read as values of the nllh)
            reached = (f"; at {name} = {side.values[-1]:.6g}, the last point fitted, the "
                       f"likelihood had risen {risen:.0%} of the way to the threshold"
                       if side.values else "")
            prof.warnings.append(
                f"{head}: the re-optimisation failed at {name} = {side.failed_at:.6g} "
                f"{side.message}{reached}; the interval "
                f"is left open ({end}): a fit with {name} fixed beyond that point (equal "
                "bounds) shows whether the data allow it there")
            continue
        how = {"bound": f"it reaches its bound {v:.6g}",
               "range": f"it stays below the threshold out to {v:.6g}",
               "max_steps": f"it has not crossed after {len(side.values)} points, the most "
                            f"max_steps allows (at {v:.6g}; pc.profile(..., max_steps=...) "
                            "takes more)"}[side.end]
        prof.warnings.append(f"{head} ({how}): the interval is open ({end}); {name} is "
                             "practically non-identifiable from these data")
    for side in (lower, upper):
        if side.better is not None and -side.better[1] > 1e-3 * prof.s2 * prof.threshold:
            prof.warnings.append(
                f"the profile of {name} found a better fit (weighted SSR lower by "
                f"{-side.better[1]:.4g}) at {name} = {side.better[0]:.6g}: the estimate is not "
                "the best fit; estimate again from there (warm_start)")
