"""Paper, Sec. V and Table 1: the 28 aerodynamic coefficients of the F/A-18.

Run (285 s on a 2-core machine)::

    python examples/fa18_coefficients.py                  # seeds 0 1 2
    python examples/fa18_coefficients.py --seeds 0 --out results/fa18

The six runs of the paper (docs/models.md table), each estimating one coefficient
group with the others known, with ``method="picard-gn"`` on the paper's
discretisation (``T = 0.1``, ``n = 3``, 7 Chebyshev nodes) and two losses:

* ``weights="auto"``: inverse noise variance per output, estimated from the
  residuals and re-estimated (maximum likelihood for the paper's noise);
* the paper's unweighted sum of squares, where the airspeed (hundreds of
  ft/s, noise about 20 ft/s) swamps the angles and rates.  Its runs start
  from the weighted answer (``warm_start``; ``--unweighted-start p0`` starts
  them from ``p0 = 0`` like the weighted ones): the unweighted loss has long
  curved valleys, and from ``p0`` one of the 18 runs (``roll-beta``, seed 1)
  does not converge in 2000 iterations (README, Known limitations).

Prints Table 1 with a column for ours (seed 0, weighted), the per-group
relative error (2-norm of the error over 2-norm of the truth) as the median
over the seeds for both losses beside the paper's single-seed number, runs
the paper's own algorithm (``method="picard"``, unweighted, fixed penalty)
on the aileron group, and saves ``fa18_fit.png`` (measured vs predicted
states of the aileron run, first experiment).
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np

import picard_casadi as pc
from picard_casadi.models import fa18
from picard_casadi.io.plotting import plot_fit

GROUP_LABELS = {
    "drag": "mu_D0, mu_Da", "drag-stab": "mu_Dstab", "roll-beta": "mu_la",
    "roll-rates": "mu_lp, mu_lr", "roll-ail": "mu_lail", "roll-rud": "mu_lrud",
}


def rel(p: np.ndarray, truth: np.ndarray) -> float:
    return float(np.linalg.norm(p - truth) / np.linalg.norm(truth))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--noise-std", type=float, default=0.05)
    ap.add_argument("--out", default="results/fa18")
    ap.add_argument("--no-paper-algorithm", action="store_true")
    ap.add_argument("--unweighted-max-iter", type=int, default=2000,
                    help="iteration budget of the unweighted runs (default 2000)")
    ap.add_argument("--unweighted-start", choices=("weighted", "p0"), default="weighted",
                    help="start the unweighted runs from the weighted answer (default) "
                         "or from p0 like the weighted runs")
    args = ap.parse_args()
    start = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[tuple[str, int, str], pc.EstimationResult] = {}
    for run in fa18.RUNS:
        for seed in args.seeds:
            prob = pc.problem(f"fa18-{run}", seed=seed, noise_std=args.noise_std)
            for loss, weights in (("weighted", "auto"), ("unweighted", "none")):
                # the unweighted loss has long curved valleys of near-optimal
                # parameters (hundreds of iterations); non-convergence is
                # reported, not hidden
                extra = {} if weights == "auto" else {"max_iter": args.unweighted_max_iter}
                if weights == "none" and args.unweighted_start == "weighted":
                    extra["warm_start"] = results[(run, seed, "weighted")]
                with warnings.catch_warnings():
                    # the paper's unweighted loss neglects the small outputs, which
                    # every such fit's FitWarnings say at length: one word per line here
                    # (the notes stay in res.warnings)
                    warnings.simplefilter("ignore", pc.FitWarning)
                    res = prob.estimate("picard-gn", weights=weights, **extra,
                                        uncertainty=(seed == args.seeds[0]
                                                     and loss == "weighted"))
                results[(run, seed, loss)] = res
                origin = ("from weighted" if "warm_start" in extra else "from p0")
                print(f"{run:11s} seed {seed} {loss:10s} {origin:13s} "
                      f"{'converged' if res.success else 'NOT converged'}: "
                      f"rel. error {res.relative_error:7.2%}, gap {res.continuity_gap:.1e}, "
                      f"{res.iterations} it, {res.wall_time:.1f} s"
                      + (" (fit flagged: res.warnings)" if res.fit_flagged else ""), flush=True)
            if run == "roll-ail" and seed == args.seeds[0]:
                plot_fit(results[(run, seed, "weighted")], prob.model, prob.experiments,
                         experiment=0, path=out / "fa18_fit.png",
                         title="F/A-18 aileron run (x01), weighted picard-gn")

    seed0 = args.seeds[0]
    print("\nTable 1 (paper) with our estimate (picard-gn, weighted, seed %d)" % seed0)
    print(f"{'group':14s} {'true':>9s} {'paper':>9s} {'ours':>9s} {'std.err':>9s}")
    for run, label in GROUP_LABELS.items():
        res = results[(run, seed0, "weighted")]
        truth = fa18.true_parameters(fa18.RUNS[run]["groups"])
        paper = fa18.PAPER_ESTIMATES[run]
        for k in range(truth.size):
            std = res.p_std[k] if res.p_std is not None else np.nan
            print(f"{label if k == 0 else '':14s} {truth[k]:9.4f} {paper[k]:9.4f} "
                  f"{res.p[k]:9.4f} {std:9.4f}")
    print(f"\nrelative error per group, median over seeds {args.seeds} "
          "(2-norm of the error / 2-norm of the truth)")
    print(f"{'group':14s} {'weighted':>10s} {'unweighted':>11s} {'paper':>8s}  converged (w/u)")
    better = 0
    for run, label in GROUP_LABELS.items():
        truth = fa18.true_parameters(fa18.RUNS[run]["groups"])
        w = [results[(run, s, "weighted")] for s in args.seeds]
        u = [results[(run, s, "unweighted")] for s in args.seeds]
        mw = float(np.median([r.relative_error for r in w]))
        mu = float(np.median([r.relative_error for r in u]))
        better += mw <= mu
        print(f"{label:14s} {mw:10.1%} {mu:11.1%} {rel(fa18.PAPER_ESTIMATES[run], truth):8.1%}  "
              f"{sum(r.success for r in w)}/{len(w)} {sum(r.success for r in u)}/{len(u)}")
    print(f"weighted median no worse than unweighted in {better} of 6 groups")

    if not args.no_paper_algorithm:
        prob = pc.problem("fa18-roll-ail", seed=seed0, noise_std=args.noise_std)
        res = prob.estimate("picard", continuity="penalty", sigma=0.5, weights="none",
                            uncertainty=False)
        gn = results[("roll-ail", seed0, "unweighted")]
        print(f"\npaper's Alg. 4 (picard, unweighted, fixed penalty) on mu_lail, seed {seed0}: "
              f"{np.array2string(res.p, precision=4)}, rel. error {res.relative_error:.1%}, "
              f"gap {res.continuity_gap:.1e}, {res.iterations} it, "
              f"{'converged' if res.success else res.status}, {res.wall_time:.1f} s")
        print(f"picard-gn on the same data and loss ({args.unweighted_start} start): "
              f"{np.array2string(gn.p, precision=4)}, "
              f"rel. error {gn.relative_error:.1%}, gap {gn.continuity_gap:.1e}, "
              f"{gn.iterations} it, {'converged' if gn.success else gn.status}")
    print(f"\nfigure: {out / 'fa18_fit.png'}; total time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
