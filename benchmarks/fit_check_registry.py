"""False alarms of the lack-of-fit check on every registered problem.

Run::

    python benchmarks/fit_check_registry.py [--seeds 0,1,2] [--problems vdp,cmg]

Each problem is estimated with its registry settings (``picard-gn``, the
defaults) for each seed; for every experiment and output of a converged fit
the two measures of :mod:`picard_casadi.analysis.fit_check` are computed (the runs
test's z-score of the residual signs and the residuals' mean square over the
noise variance from the data's second differences).  Prints, per fit, the
most negative z, the largest ratio and how many outputs met both conditions
(a false alarm: these fits are right), then the extremes over all fits.
The thresholds are chosen against these numbers (``docs/reliability.md``).
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import argparse
import warnings

import numpy as np

import picard_casadi as pc
from picard_casadi.analysis.fit_check import (LAG1_R, LAG1_Z, NOISE_RATIO, RUNS_Z, lag1_z,
                                              noise_variance, runs_z)
from picard_casadi.analysis.serial_correlation import SERIAL_HEAD


def measures(res, experiments) -> list[tuple[float, float, float, float]]:
    """``(z, ratio, phi, phi_z)`` of every experiment's outputs (``phi``: the
    residuals' lag-1 autocorrelation, ``phi_z`` its z-score)."""
    out = []
    for i, e in enumerate(experiments):
        Y, G = np.asarray(e.y, float), res.predict(i, source="collocation")
        for k in range(Y.shape[1]):
            ok = np.isfinite(Y[:, k])
            r = Y[ok, k] - G[ok, k]
            out.append((runs_z(r), float(np.mean(r * r)) / noise_variance(Y[ok, k]),
                        *lag1_z(r)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--problems", default=",".join(pc.problems()))
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    worst_z, worst_ratio, alarms, fits, serial_notes = np.inf, 0.0, 0, 0, 0
    worst_lag1 = -np.inf
    print(f"thresholds: (z < {RUNS_Z} or lag-1 z >= {LAG1_Z} with phi >= {LAG1_R}) and "
          f"ratio > {NOISE_RATIO}")
    print(f"{'problem':16s} {'seed':>4s} {'ok':>3s} {'outputs':>7s} {'min z':>7s} "
          f"{'max ratio':>9s} {'lag-1 z':>7s} {'flagged':>7s} {'serial':>6s}")
    for name in args.problems.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            prob = pc.problem(name, seed=seed)
            res = prob.estimate(uncertainty=False)
            m = measures(res, prob.experiments)
            z = min(v[0] for v in m)
            ratio = max(v[1] for v in m)
            lag1 = max(v[3] for v in m)
            flagged = sum(1 for a, b, phi, phi_z in m
                          if (a < RUNS_Z or phi >= LAG1_R and phi_z >= LAG1_Z)
                          and b > NOISE_RATIO)
            # the note on residuals correlated in time (analysis/serial_correlation.py)
            serial = sum(w.startswith(SERIAL_HEAD) for w in res.warnings)
            print(f"{name:16s} {seed:4d} {'yes' if res.success else 'no':>3s} {len(m):7d} "
                  f"{z:7.2f} {ratio:9.2f} {lag1:7.2f} {flagged:7d} {serial:6d}", flush=True)
            if res.success:
                fits += 1
                worst_z, worst_ratio = min(worst_z, z), max(worst_ratio, ratio)
                worst_lag1 = max(worst_lag1, lag1)
                alarms += flagged
                serial_notes += serial
    print(f"{fits} converged fits: most negative z {worst_z:.2f}, largest ratio "
          f"{worst_ratio:.2f}, largest lag-1 z {worst_lag1:.2f}, outputs flagged {alarms}, "
          f"notes of residuals correlated in time {serial_notes}")


if __name__ == "__main__":
    main()
