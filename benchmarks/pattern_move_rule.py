"""Which pattern moves the step-ratio rule skips, and what skipping them costs.

Run::

    python benchmarks/pattern_move_rule.py            # the default set below
    python benchmarks/pattern_move_rule.py cmg:0:none fa18-drag-stab:0:none
    python benchmarks/pattern_move_rule.py --per-iteration   # cmg's time per iteration

Each case is ``problem:seed:weights`` (``weights`` ``none`` or ``auto``).
Every case is solved twice with ``picard-gn`` (``uncertainty=False``): with
the rule off (``PATTERN_MIN_RATIO = 0``), logging each zigzag the pattern
move sees (ratio ``r`` of the last step's length to the one two before, the
cosine of neighbouring steps, whether a multiple was accepted), and with the
rule on.  Printed per case: iterations and solve time both ways, trials and
accepted moves with the rule off, the trials the rule skips, the smallest
``r`` of an accepted move, and the largest relative difference of the
estimates.  ``benchmarks/results/pattern_move_rule.txt`` holds a run.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

import picard_casadi as pc
from picard_casadi.methods import pattern_move

DEFAULT = ["cmg:0:none", "cmg:1:none", "cmg:2:none", "vdp:0:none",
           "fa18-drag:0:auto", "fa18-drag-stab:0:auto", "fa18-roll-beta:0:auto",
           "fa18-roll-rates:0:auto", "fa18-roll-ail:0:auto", "fa18-roll-rud:0:auto",
           "fa18-drag:0:none", "fa18-drag-stab:0:none", "fa18-roll-ail:2:none"]

_log: list[dict] = []
_original_after = pattern_move.PatternMove.after


def _logged_after(self, Xs, ps, info, settled_merit):
    trail = (self._trail + [(info.Xs.copy(), info.ps.copy())])[-4:]
    record: dict = {}
    if len(trail) == 4:
        z = [np.concatenate([X.ravel(), p]) for X, p in trail]
        s1, s2, s3 = z[1] - z[0], z[2] - z[1], z[3] - z[2]
        n1, n2, n3 = (float(np.linalg.norm(s)) for s in (s1, s2, s3))
        if n1 > 0 and n3 > 0 and float(s1 @ s3) >= pattern_move.ZIGZAG_COSINE * n1 * n3:
            record = {"r": n3 / n1, "cos_neighbours": float(s2 @ s3) / max(n2 * n3, 1e-300)}
    out = _original_after(self, Xs, ps, info, settled_merit)
    if record:
        record["accepted"] = out is not info
        _log.append(record)
    return out


def run(case: str) -> None:
    name, seed, weights = case.split(":")
    prob = pc.problem(name, seed=int(seed))
    kw = {"weights": "auto" if weights == "auto" else None, "uncertainty": False}
    rule = pattern_move.PATTERN_MIN_RATIO
    pattern_move.PatternMove.after = _logged_after
    pattern_move.PATTERN_MIN_RATIO = 0.0
    _log.clear()
    try:
        off = prob.estimate("picard-gn", **kw)
    finally:
        pattern_move.PatternMove.after = _original_after
        pattern_move.PATTERN_MIN_RATIO = rule
    on = prob.estimate("picard-gn", **kw)
    trials = [r for r in _log if r["r"] >= 0.0]
    accepted = [r for r in trials if r["accepted"]]
    skipped = [r for r in trials if r["r"] < rule]
    diff = float(np.max(np.abs(on.p - off.p) / np.maximum(np.abs(off.p), 1e-12)))
    print(f"{case:24s} it {off.iterations:4d}/{on.iterations:4d}  "
          f"solve {off.timings['solve']:6.2f}/{on.timings['solve']:6.2f} s  "
          f"trials {len(trials):3d} accepted {len(accepted):2d} skipped {len(skipped):3d} "
          f"(accepted among skipped {sum(r['accepted'] for r in skipped)})  "
          f"min r accepted {min((r['r'] for r in accepted), default=float('nan')):.3f}  "
          f"success {off.success}/{on.success}  max rel diff p {diff:.1e}", flush=True)


def per_iteration(name: str = "cmg", repeats: int = 5) -> None:
    """Time per iteration with the rule off and on, alternating in one process
    (``refine=False``: the same discretised problem every run)."""
    prob = pc.problem(name, seed=0)
    kw = {"uncertainty": False, "refine": False}
    prob.estimate("picard-gn", **kw)  # warm-up: fills the code cache
    rule = pattern_move.PATTERN_MIN_RATIO
    times: dict[float, list[float]] = {0.0: [], rule: []}
    try:
        for _ in range(repeats):
            for ratio in times:
                pattern_move.PATTERN_MIN_RATIO = ratio
                res = prob.estimate("picard-gn", **kw)
                times[ratio].append(res.timings["solve"] / res.iterations * 1e3)
    finally:
        pattern_move.PATTERN_MIN_RATIO = rule
    off, on = min(times[0.0]), min(times[rule])
    print(f"{name} per iteration, best of {repeats}: rule off {off:.1f} ms, on {on:.1f} ms, "
          f"on / off = {on / off:.2f} ({res.iterations} iterations)")


def main() -> None:
    warnings.simplefilter("ignore")
    if sys.argv[1:] == ["--per-iteration"]:
        per_iteration()
        return
    print(f"rule: no trial where the last step is below {pattern_move.PATTERN_MIN_RATIO} "
          "of the one two before; columns 'off/on'")
    for case in sys.argv[1:] or DEFAULT:
        run(case)


if __name__ == "__main__":
    main()
