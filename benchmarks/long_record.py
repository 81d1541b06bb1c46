"""One long, densely sampled record: where a default fit spends its time.

Run::

    python benchmarks/long_record.py                    # 50,000 samples over 5,000 s
    python benchmarks/long_record.py --samples 5000 --horizon 100

A forced Duffing oscillator (``x'' = -k x - c x' - a x^3 + u``, ``u = sin
1.1t + 0.5 cos 0.37t`` as a function of time), its position measured with
noise 0.05 at evenly spaced times; one ``pc.estimate`` with the defaults
from ``p0 = (1, 0.5, 0.1)``.  Prints the wall time, its phases (the initial
guess's local regressions were the bottleneck: docs/performance.md,
"Initial guess"), the peak memory and the estimate in standard errors from
the truth.
"""

from __future__ import annotations

import argparse
import resource
import time

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import casadi as ca
import numpy as np

import picard_casadi as pc

P_TRUE = np.array([2.0, 0.15, 0.5])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=50_000)
    ap.add_argument("--horizon", type=float, default=5000.0)
    args = ap.parse_args()
    x, p, u = ca.SX.sym("x", 2), ca.SX.sym("p", 3), ca.SX.sym("u")
    model = pc.Model(x=x, p=p, u=u, y=x[0], p_names=["k", "c", "a"],
                     rhs=ca.vertcat(x[1], -p[0] * x[0] - p[1] * x[1] - p[2] * x[0] ** 3 + u))

    def force(s: float) -> np.ndarray:
        return np.array([np.sin(1.1 * s) + 0.5 * np.cos(0.37 * s)])

    t = np.linspace(0.0, args.horizon, args.samples)
    X = pc.simulate(model, [1.0, 0.0], P_TRUE, t, u=force)
    y = X[:, :1] + 0.05 * np.random.default_rng(0).standard_normal((t.size, 1))
    exp = pc.Experiment(t, y, u=force, x0=[0.8, 0.2])
    start = time.perf_counter()
    res = pc.estimate(model, [exp], p0=[1.0, 0.5, 0.1])
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    z = (res.p - P_TRUE) / res.p_std if res.p_std is not None else np.full(3, np.nan)
    print(f"{args.samples} samples over {args.horizon:g} s ({res.settings['intervals']} "
          f"intervals): {res.status}, {wall:.1f} s, peak memory {peak:.0f} MB; p - truth "
          f"in standard errors {np.array2string(z, precision=2)}")
    print("phases [s]:", {k: round(v, 1) for k, v in res.timings.items()})


if __name__ == "__main__":
    main()
