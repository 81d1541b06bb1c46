"""Paper, Sec. IV: inertia of a spacecraft with four control-moment gyros.

Run (85 s on a 2-core machine with an empty code cache, a third of it the
paper's algorithm's 5000 iterations)::

    python examples/cmg_inertia.py                 # seeds 0-4, noise std 0.05
    python examples/cmg_inertia.py --seeds 0 --noise-std 0.05 --out results/cmg

For each seed: the paper's four experiments with its noise model, then

* ``method="picard"``: the paper's Algorithm 4 with its settings (``lambda =
  10``, ``n = 3``, ``T = 0.2``, ``sigma = 0.5``, fixed penalty), first seed only;
* ``method="picard-gn"``: the Gauss-Newton Picard iteration;
* a long, tight IPOPT run on the same collocation NLP (exact Hessian,
  ``tol = 1e-10``, no early exit at IPOPT's "acceptable" level, exact
  continuity) started at
  ``picard-gn``'s solution: it stays there only if that is an exactly
  continuous least-squares optimum of the same data;
* (first seed, or every seed with ``--ipopt-from-start``) IPOPT from the
  same start as ``picard-gn``, for comparison (on seed 3 it stops in a
  different local optimum with a higher misfit).

Prints truth, the paper's estimate and ours with relative errors (the
paper's 3.0 % is the mean of the per-component errors of [215, 207, 527]),
the continuity gap, iterations and wall time, the median over seeds, and
saves ``cmg_fit.png`` in the style of the paper's Fig. 1 (measurements as
dots, predicted outputs as lines, one panel per output, input 2).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import picard_casadi as pc
from picard_casadi.models import cmg
from picard_casadi.io.plotting import plot_fit


def component_error(p: np.ndarray) -> float:
    """Mean relative error of the components (the paper's 3.0 % measure)."""
    return float(np.mean(np.abs(p / cmg.P_TRUE - 1.0)))


def norm_error(p: np.ndarray) -> float:
    """2-norm of the error over the 2-norm of the truth."""
    return float(np.linalg.norm(p - cmg.P_TRUE) / np.linalg.norm(cmg.P_TRUE))


def line(label: str, p: np.ndarray, extra: str = "") -> str:
    return (f"  {label:<26s} [{p[0]:8.2f}, {p[1]:8.2f}, {p[2]:8.2f}]  "
            f"mean err {component_error(p):6.2%}  norm err {norm_error(p):6.2%}  {extra}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--noise-std", type=float, default=0.05)
    ap.add_argument("--out", default="results/cmg")
    ap.add_argument("--ipopt-from-start", action="store_true",
                    help="also run IPOPT from the common start on every seed")
    ap.add_argument("--no-paper-algorithm", action="store_true",
                    help="skip the (slow, first-order) paper's algorithm")
    args = ap.parse_args()
    start = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"truth {cmg.P_TRUE}, paper's estimate {cmg.P_PAPER} "
          f"(mean err {component_error(cmg.P_PAPER):.1%}, norm err {norm_error(cmg.P_PAPER):.1%})")
    gn_errors, agreement = [], []
    for i, seed in enumerate(args.seeds):
        prob = pc.problem("cmg", seed=seed, noise_std=args.noise_std)
        print(f"\nseed {seed}: {prob.description}")
        if i == 0 and not args.no_paper_algorithm:
            res = prob.estimate("picard", continuity="penalty", sigma=0.5, uncertainty=False)
            print(line("picard (paper's Alg. 4)", res.p,
                       f"gap {res.continuity_gap:.1e}, {res.iterations} it, "
                       f"{res.wall_time:.1f} s, {'converged' if res.success else res.status}"))
        gn = prob.estimate("picard-gn")
        print(line("picard-gn", gn.p, f"gap {gn.continuity_gap:.1e}, {gn.iterations} it, "
                                      f"{gn.wall_time:.1f} s, {'converged' if gn.success else gn.status}"))
        # the reference: IPOPT with the exact Hessian from picard-gn's answer.
        # With the Gauss-Newton Hessian IPOPT left it on seed 3 for another
        # local optimum with a larger misfit (0.035944 against 0.035654); the
        # misfits are printed so either way the better point is visible
        tight = dict(hessian="exact", tol=1e-10, max_iter=3000,
                     ipopt_options={"acceptable_iter": 0}, uncertainty=False)
        ref = prob.estimate("ipopt", warm_start=gn, **tight)
        diff = float(np.max(np.abs(gn.p / ref.p - 1.0)))
        print(line("IPOPT from picard-gn's", ref.p,
                   f"gap {ref.continuity_gap:.1e}, {ref.iterations} it, {ref.message}; "
                   f"misfit {ref.objective:.8e} (picard-gn {gn.objective:.8e})"))
        print(f"  picard-gn vs the exactly continuous optimum: max relative difference {diff:.2e}")
        if i == 0 or args.ipopt_from_start:
            own = prob.estimate("ipopt", **tight)
            print(line("IPOPT from the same start", own.p,
                       f"{own.iterations} it, {own.wall_time:.0f} s; misfit {own.objective:.8e} "
                       f"(picard-gn {gn.objective:.8e})"))
        gn_errors.append(component_error(gn.p))
        agreement.append(diff)
        if i == 0:
            plot_fit(gn, prob.model, prob.experiments, experiment=1, path=out / "cmg_fit.png",
                     title="4-CMG spacecraft, input 2 (paper Fig. 1)")
            print(gn.summary())
    print(f"\nmedian mean-component error of picard-gn over seeds {args.seeds}: "
          f"{np.median(gn_errors):.2%} (paper, one seed: {component_error(cmg.P_PAPER):.1%})")
    print(f"largest difference picard-gn vs IPOPT over the seeds: {max(agreement):.2e}")
    print(f"figure: {out / 'cmg_fit.png'}; total time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
