"""Many experiments of a larger model: wall time and peak memory of one default fit.

Run::

    python benchmarks/many_experiments.py                # 40 states, 30 experiments
    python benchmarks/many_experiments.py --states 20 --experiments 60

A chain of ``N`` compartments (saturating flows ``k x / (1 + x)`` between
neighbours, a source ``s`` into the first, decay ``d`` everywhere; three
parameters), every state measured at 121 times over 30 time units with noise
0.01, ``E`` experiments from random initial states, each with its own ``x0``
to estimate.  One ``pc.estimate`` with the defaults; prints the wall time,
its phases, the peak resident memory of the process, and the estimate's
distance from the truth in standard errors.  The fit estimates ``3 + N E``
quantities; each experiment's residuals depend on the parameters and its
own ``x0`` only (:mod:`picard_casadi.transcription.block_jacobian`).
"""

from __future__ import annotations

import argparse
import resource
import time

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import casadi as ca
import numpy as np

import picard_casadi as pc

P_TRUE = np.array([1.2, 0.1, 0.6])


def chain(n: int) -> pc.Model:
    """The compartment chain of the module doc."""
    x, p = ca.SX.sym("x", n), ca.SX.sym("p", 3)
    k, d, s = p[0], p[1], p[2]
    rhs = []
    for i in range(n):
        inflow = s if i == 0 else k * x[i - 1] / (1 + x[i - 1])
        outflow = k * x[i] / (1 + x[i]) if i < n - 1 else 0
        rhs.append(inflow - outflow - d * x[i])
    return pc.Model(x=x, p=p, rhs=ca.vertcat(*rhs), y=x, name=f"chain{n}",
                    p_names=["k", "d", "s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", type=int, default=40)
    ap.add_argument("--experiments", type=int, default=30)
    args = ap.parse_args()
    model = chain(args.states)
    rng = np.random.default_rng(0)
    t = np.linspace(0, 30, 121)
    exps = []
    for e in range(args.experiments):
        x0 = rng.uniform(0.0, 1.0, args.states)
        X = pc.simulate(model, x0, P_TRUE, t)
        y = X + 0.01 * rng.standard_normal(X.shape)
        guess = np.clip(x0 + 0.1 * rng.standard_normal(args.states), 0, None)
        exps.append(pc.Experiment(t=t, y=y, x0=guess, name=f"e{e}"))
    start = time.perf_counter()
    res = pc.estimate(model, exps, p0=[0.5, 0.3, 0.3])
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    z = (res.p - P_TRUE) / res.p_std if res.p_std is not None else np.full(3, np.nan)
    print(f"{args.states} states x {args.experiments} experiments "
          f"({3 + args.states * args.experiments} estimated quantities, "
          f"{res.n_measurements} measurements, {res.settings['intervals']} intervals): "
          f"{res.status}, {wall:.1f} s, peak memory {peak:.0f} MB; "
          f"p - truth in standard errors {np.array2string(z, precision=2)}")
    print("phases [s]:", {k: round(v, 1) for k, v in res.timings.items()})


if __name__ == "__main__":
    main()
