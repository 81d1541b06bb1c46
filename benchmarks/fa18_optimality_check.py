"""Are ``picard-gn``'s answers on the unweighted F/A-18 runs optima?  IPOPT checks.

Run::

    python benchmarks/fa18_optimality_check.py               # seeds 0 1 2, ~9 min
    python benchmarks/fa18_optimality_check.py --seeds 0 --runs roll-beta
    python benchmarks/fa18_optimality_check.py --start p0    # from p0 = 0, ~6 min

For every run and seed: ``picard-gn`` on the paper's unweighted loss as in
``examples/fa18_coefficients.py`` (started from the ``weights="auto"``
answer, or with ``--start p0`` from ``p0``; 2000 iterations), then IPOPT
with its exact Hessian warm-started at ``picard-gn``'s answer on the same
discretisation.  Where ``picard-gn`` stopped at an optimum IPOPT stays
(misfits equal to round-off); a lower IPOPT misfit means ``picard-gn``
stopped short of an optimum or that IPOPT, whose first steps may leave the
feasible set, moved on to another one.  Two processes run side by side.
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import argparse
import time
from multiprocessing import Pool

import numpy as np

RUNS = ("drag", "drag-stab", "roll-beta", "roll-rates", "roll-ail", "roll-rud")


def check(job: tuple[str, int, str]) -> str:
    """One run and seed: both methods, one line of numbers."""
    import warnings

    import picard_casadi as pc

    warnings.filterwarnings("ignore")
    run, seed, start = job
    prob = pc.problem(f"fa18-{run}", seed=seed)
    warm = (prob.estimate("picard-gn", weights="auto", uncertainty=False)
            if start == "weighted" else None)
    gn = prob.estimate("picard-gn", weights="none", uncertainty=False, max_iter=2000,
                       warm_start=warm)
    ip = prob.estimate("ipopt", weights="none", uncertainty=False, warm_start=gn)
    dp = float(np.max(np.abs(ip.p - gn.p) / np.maximum(np.abs(gn.p), 1e-3)))
    rel = (gn.objective - ip.objective) / ip.objective
    verdict = ("same optimum" if abs(rel) <= 1e-8 else
               "IPOPT finds a lower misfit" if rel > 0 else "IPOPT ends higher")
    return (f"{run:11s} seed {seed}  picard-gn {'converged' if gn.success else 'NOT converged'}"
            f" {gn.iterations:4d} it, misfit {gn.objective:.8f} | IPOPT {ip.iterations:4d} it, "
            f"misfit {ip.objective:.8f}  (picard-gn - IPOPT) / IPOPT {rel:+.1e}, "
            f"max rel. change of p {dp:.1e}: {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--runs", nargs="+", default=list(RUNS), choices=RUNS)
    parser.add_argument("--start", choices=("weighted", "p0"), default="weighted",
                        help="start picard-gn from the weighted answer (default) or from p0")
    args = parser.parse_args()
    jobs = [(run, seed, args.start) for run in args.runs for seed in args.seeds]
    t0 = time.perf_counter()
    with Pool(2) as pool:
        for line in pool.imap(check, jobs):
            print(line, flush=True)
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
