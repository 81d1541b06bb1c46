"""Where one ``picard-gn`` iteration spends its time, phase by phase.

Run::

    python benchmarks/picard_gn_phases.py                 # cmg and fa18-roll-ail
    python benchmarks/picard_gn_phases.py fa18-drag
    python benchmarks/picard_gn_phases.py --group-bytes 4194304 cmg   # larger groups

Each problem (seed 0, ``refine=False``, ``uncertainty=False``; the F/A-18 runs
with ``weights="auto"``) is solved once to fill the code cache, then five
times with the step's phases wrapped in timers; the run with the fastest
step is printed, per iteration.  Phases nest as indented: ``linearise``
holds ``sensitivities``, which holds the compiled kernel's share
(``picard_casadi/transcription/kernels.py``; absent on the virtual machine, where NumPy
and LAPACK do that work); the settles' Newton steps are ``fixed-point
solves``; ``generated calls`` are the compiled functions the transcription
calls (Picard maps, merits), wherever they are called from.
The library limits BLAS to one thread itself.
``benchmarks/results/picard_gn_phases.txt`` holds a run; what it says:
``docs/performance.md``, "What limits it".
"""

from __future__ import annotations

import functools
import sys
import time
import warnings

import numpy as np

import picard_casadi as pc
from picard_casadi.transcription.functions import fixed_point_system
from picard_casadi.transcription.functions import kernels
from picard_casadi.transcription.functions import sensitivity
from picard_casadi.transcription import functions as transcription
from picard_casadi.methods import condensed

_elapsed: dict[str, float] = {}


def _timed(owner: object, name: str, label: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            _elapsed[label] = _elapsed.get(label, 0.0) + time.perf_counter() - t0

    setattr(owner, name, timed)


PHASES = [
    (condensed.ConstrainedGaussNewtonStep, "step", "whole step"),
    (condensed.ConstrainedGaussNewtonStep, "_linearise", "linearise"),
    (sensitivity.FixedPointLinearisation, "_interval_sensitivities", "  sensitivities"),
    (kernels.IterationKernels, "sensitivities", "    kernel: sensitivities"),
    (condensed.ConstrainedGaussNewtonStep, "_tried", "trial points (settle + merit)"),
    (transcription.Transcription, "settle", "  settle"),
    (fixed_point_system.FixedPointSystem, "solve", "    Newton steps' solves"),
    (kernels.IterationKernels, "solve", "      kernel: solve"),
    (kernels.IterationKernels, "compress_rows", "row compression (kernel)"),
    (condensed.ConstrainedGaussNewtonStep, "_bounded_step", "active-set QP"),
    (condensed.ConstrainedGaussNewtonStep, "_condense", "condensing"),
    (condensed.ConstrainedGaussNewtonStep, "_residuals", "residuals"),
    (condensed.PatternMove, "after", "pattern move"),
    (np.linalg, "solve", "LAPACK solve (anywhere)"),
    (transcription.Transcription, "_call", "generated calls (anywhere)"),
]


def run(name: str, repeats: int = 5) -> None:
    prob = pc.problem(name, seed=0)
    kw = {"uncertainty": False, "refine": False}
    if name.startswith("fa18"):
        kw["weights"] = "auto"
    prob.estimate("picard-gn", **kw)
    best = None
    for _ in range(repeats):
        _elapsed.clear()
        res = prob.estimate("picard-gn", **kw)
        if best is None or _elapsed["whole step"] < best[0]["whole step"]:
            best = (dict(_elapsed), res.iterations, res.timings["solve"])
    elapsed, iterations, solve = best
    print(f"{name}: {iterations} iterations, solve {solve / iterations * 1e3:.1f} ms per "
          f"iteration (fastest of {repeats} runs)")
    for _, _, label in PHASES:
        if label in elapsed:
            print(f"  {label:32s} {elapsed[label] / iterations * 1e3:6.2f} ms")


def main() -> None:
    warnings.simplefilter("ignore")
    args = sys.argv[1:]
    if args[:1] == ["--group-bytes"]:
        # the memory of each group of intervals the fixed-point solves take at once
        fixed_point_system.GROUP_BYTES = int(args[1])
        args = args[2:]
    for owner, name, label in PHASES:
        _timed(owner, name, label)
    for name in args or ["cmg", "fa18-roll-ail"]:
        run(name)


if __name__ == "__main__":
    main()
