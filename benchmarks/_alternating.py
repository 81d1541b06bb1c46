"""Helpers of the benchmarks that time ``picard-gn`` with a change off and on.

Each case is solved once each way to build, then twice each way taken in
turn; the faster call of each way is kept (a shared machine's noise).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

import picard_casadi as pc

#: cmg and the six F/A-18 runs with every default at seeds 11-13, three small
#: problems and three F/A-18 runs unweighted (``problem:seed:weights``)
DEFAULT_CASES = [f"{name}:{seed}:auto" for seed in (11, 12, 13)
                 for name in ("cmg", "fa18-drag", "fa18-drag-stab", "fa18-roll-beta",
                              "fa18-roll-rates", "fa18-roll-ail", "fa18-roll-rud")]
DEFAULT_CASES += ["vdp:0:none", "lotka-volterra:0:none", "fitzhugh-nagumo:0:none",
                  "fa18-drag:0:none", "fa18-drag-stab:0:none", "fa18-roll-ail:2:none"]


def case_problem(case: str) -> tuple[pc.Problem, dict[str, Any]]:
    """The problem of a case ``problem:seed:weights`` and its ``estimate`` options
    (``weights`` ``auto``: every default; ``none``: unweighted, no uncertainty)."""
    name, seed, weights = case.split(":")
    kw = {} if weights == "auto" else {"weights": "none", "uncertainty": False}
    return pc.problem(name, seed=int(seed)), kw


def best_of_two(prob: pc.Problem, kw: dict[str, Any], use: Callable[[bool], None]
                ) -> tuple[tuple[Any, float], tuple[Any, float]]:
    """``(result, wall time)`` of the faster of two calls with ``use(False)`` and
    with ``use(True)``, alternating after one call each to build; ``use(True)``
    is left in force."""
    best: dict[bool, tuple[Any, float]] = {}
    for on in (False, True):
        use(on)
        prob.estimate("picard-gn", **kw)  # builds
    for _ in range(2):
        for on in (False, True):
            use(on)
            t = time.perf_counter()
            res = prob.estimate("picard-gn", **kw)
            wall = time.perf_counter() - t
            if on not in best or wall < best[on][1]:
                best[on] = (res, wall)
    use(True)
    return best[False], best[True]


def comparison(off: tuple[Any, float], on: tuple[Any, float]) -> str:
    """Iterations and whole calls both ways, and the largest relative difference
    of the estimates, as one line's end."""
    (a, ta), (b, tb) = off, on
    rel = float(np.max(np.abs(a.p - b.p) / np.maximum(np.abs(a.p), 1e-12)))
    return (f"{a.iterations:3d} {b.iterations:3d}  {ta:6.3f} {tb:6.3f}  {rel:8.1e}"
            f"{'' if a.success and b.success else '  FAILED'}")


def summed(cases: list[str], run: Callable[[str], tuple[float, float]]) -> tuple[float, float]:
    """``run`` on every case (each printing its line), its two times summed."""
    total = [0.0, 0.0]
    for case in cases:
        off, on = run(case)
        total[0] += off
        total[1] += on
    return total[0], total[1]


def compare_cases(run: Callable[[str], tuple[float, float]], title: str, columns: str,
                  off_label: str, on_label: str) -> None:
    """The benchmark's table: the cases of the command line (or
    :data:`DEFAULT_CASES`), one line each from ``run``, and the summed whole calls."""
    import sys

    print(title)
    print(columns)
    off, on = summed(sys.argv[1:] or DEFAULT_CASES, run)
    print(f"total whole calls: {off_label} {off:.2f} s, {on_label} {on:.2f} s ({on / off:.3f})")
