"""Coverage of the truth by Wald and profile-likelihood intervals (Michaelis-Menten).

100 seeds of the few-sample Michaelis-Menten problem
(``picard_casadi.models.michaelis_menten``: 7 samples, additive noise 0.3,
``V`` and ``K`` and ``S(0)`` estimated, 4 degrees of freedom left), each
estimated with ``picard-gn`` and profiled; coverage over (seed, parameter)
pairs of the 95 % intervals: Wald (normal quantile, the package's ``p_ci``),
Wald with Student's quantile, and the profile likelihood (F threshold).
The seeds run on a local pool (``--jobs``) or a Dask LocalCluster
(``--dask``).

    python benchmarks/profile_coverage.py [--seeds 100] [--jobs 2] [--dask]
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread, before NumPy loads)

import argparse
import os
import platform

import numpy as np

from picard_casadi.studies.coverage import coverage_study
from picard_casadi.models import michaelis_menten


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--dask", action="store_true", help="run the seeds on a Dask LocalCluster")
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python "
          f"{platform.python_version()}; michaelis-menten, {args.seeds} seeds")
    if args.dask:
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=args.jobs, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            study = coverage_study(michaelis_menten.make_problem, range(args.seeds),
                                   executor=client.get_executor())
    else:
        study = coverage_study(michaelis_menten.make_problem, range(args.seeds),
                               n_jobs=args.jobs)
    print(study.summary())
    ok = [r for r in study.rows if r["success"]]
    evals = [r["evaluations"] for r in ok]
    secs = [r["seconds"] for r in ok]
    print(f"  per seed: {np.median(evals):.0f} re-optimisations (median; max {max(evals)}), "
          f"{np.median(secs):.2f} s (median) for the estimate and its profiles")
    widths = {k: np.array([np.subtract(*np.array(r[k])[:, ::-1].T) for r in ok])
              for k in ("wald", "profile")}
    for i, name in enumerate(study.names):
        w = widths["wald"][:, i]
        pr = np.array([r["profile"][i] for r in ok])
        closed = np.all(np.isfinite(pr), axis=1)
        lower_neg = np.mean(np.array([r["wald"][i][0] for r in ok]) < 0)
        print(f"  {name}: Wald intervals reach below 0 in {lower_neg:.0%} of seeds; profile "
              f"intervals closed on both sides in {closed.mean():.0%} (median width "
              f"{np.median(pr[closed, 1] - pr[closed, 0]) if closed.any() else np.nan:.3g}, "
              f"Wald's median width {np.median(w):.3g})")


if __name__ == "__main__":
    main()
