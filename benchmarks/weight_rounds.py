"""How loosely the intermediate rounds of ``weights="auto"`` may be solved.

Run::

    python benchmarks/weight_rounds.py                    # cmg and the F/A-18 runs, seeds 11-13
    python benchmarks/weight_rounds.py --problems fa18-drag --seeds 12

``weights="auto"`` re-estimates the noise variances from the residuals and
solves again until the weights change by less than 1 %; every round but the
last is solved to the looser tolerances ``picard_casadi.estimation.refinement._ROUND_TOLERANCES``.  For
each problem and seed this calls ``picard-gn`` with every default (the first
mesh chosen, certified and refined where needed) with the rounds' ``gtol``
at 1e-5 (the setting before) and at the current value, each once to warm up
and then twice, alternating, keeping the faster; prints the iterations
(all rounds, all meshes), the weight rounds on the final mesh
(``settings["weight_rounds"]``) and the whole call's time both ways, and
the largest relative differences of the final weights and of the
estimates, measured in this one run.  ``benchmarks/results/weight_rounds.txt`` holds a run.
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import argparse
import sys
import time
import warnings

import numpy as np

import picard_casadi as pc

estimate_module = sys.modules["picard_casadi.estimation.refinement"]
BEFORE = 1e-5
PROBLEMS = ("cmg", "fa18-drag", "fa18-drag-stab", "fa18-roll-beta", "fa18-roll-rates",
            "fa18-roll-ail", "fa18-roll-rud")


def timed(prob, gtol: float):
    """One default ``picard-gn`` call with the rounds' ``gtol``; (result, seconds)."""
    estimate_module._ROUND_TOLERANCES["gtol"] = gtol
    t = time.perf_counter()
    res = prob.estimate("picard-gn")
    return res, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", default=",".join(PROBLEMS))
    ap.add_argument("--seeds", default="11,12,13")
    args = ap.parse_args()
    now = estimate_module._ROUND_TOLERANCES["gtol"]
    print(f"picard-gn, every default; intermediate rounds' gtol {BEFORE:g} against {now:g}")
    print(f"{'problem':16s} {'seed':>4s} {'it':>8s} {'rounds':>7s} {'call [s]':>13s} "
          f"{'weights':>8s} {'p':>8s}")
    totals = {BEFORE: [0, 0.0], now: [0, 0.0]}
    for seed in (int(s) for s in args.seeds.split(",")):
        for name in args.problems.split(","):
            prob = pc.problem(name, seed=seed)
            best: dict[float, tuple] = {}
            for gtol in (BEFORE, now):
                timed(prob, gtol)  # builds and compiles
            for _ in range(2):
                for gtol in (BEFORE, now):
                    res, wall = timed(prob, gtol)
                    if gtol not in best or wall < best[gtol][1]:
                        best[gtol] = (res, wall)
            (a, ta), (b, tb) = best[BEFORE], best[now]
            for gtol, (res, wall) in best.items():
                totals[gtol][0] += res.iterations
                totals[gtol][1] += wall
            wa, wb = np.asarray(a.weights, float), np.asarray(b.weights, float)
            dw = float(np.max(np.abs(wa - wb) / np.maximum(np.abs(wa), 1e-300)))
            dp = float(np.max(np.abs(a.p - b.p) / np.maximum(np.abs(a.p), 1e-12)))
            print(f"{name:16s} {seed:4d} {a.iterations:3d} {b.iterations:3d}  "
                  f"{a.settings['weight_rounds']:3d} {b.settings['weight_rounds']:3d} "
                  f"{ta:6.3f} {tb:6.3f} "
                  f"{dw:8.1e} {dp:8.1e}  {'ok' if a.success and b.success else 'FAILED'}",
                  flush=True)
    (ia, ta), (ib, tb) = totals[BEFORE], totals[now]
    print(f"total: iterations {ia} -> {ib}, whole calls {ta:.2f} s -> {tb:.2f} s "
          f"({tb / ta:.3f})")
    estimate_module._ROUND_TOLERANCES["gtol"] = now


if __name__ == "__main__":
    warnings.filterwarnings("ignore", category=pc.DiscretisationWarning)
    main()
