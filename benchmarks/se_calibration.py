"""Are the standard errors right?  The spread of the estimates over data sets
against the standard errors each fit reports.

Run::

    python benchmarks/se_calibration.py                       # fa18-roll-ail, 20 seeds
    python benchmarks/se_calibration.py fa18-roll-rud --seeds 12
    python benchmarks/se_calibration.py fa18-roll-ail --noise additive
    python benchmarks/se_calibration.py --T 0.05          # a finer mesh
    python benchmarks/se_calibration.py --method ipopt    # another solver, same mesh

For each seed the registered problem is fitted with every default; printed
per parameter: the standard deviation of the estimates over the seeds, the
mean reported ``p_std``, their ratio (1 when the standard errors are right),
the mean error in standard errors of the mean (bias), and the RMS of ``z =
(p - p_true) / p_std`` (1 when they are right).

``--noise`` chooses the data's noise on the same true trajectories:
``registry`` (the registered data: ``(1 + n_i) g + m_i``, one ``n_i`` per
sample shared by the outputs, so a variance that follows the signal),
``additive`` (``g + m_ik``, independent, one variance per output: what the
standard errors assume).  ``docs/uncertainty.md`` holds a run.
"""

from __future__ import annotations

import argparse
import dataclasses
import warnings

import numpy as np

import picard_casadi as pc
from picard_casadi.experiment import Experiment

NOISE_STD = 0.05


def data_set(name: str, seed: int, noise: str) -> pc.registry.Problem:
    """The registered problem of ``seed``, its noise redrawn where asked."""
    prob = pc.problem(name, seed=seed)
    if noise == "registry":
        return prob
    rng = np.random.default_rng(1000 + seed)
    exps = []
    for e, x0 in zip(prob.experiments, prob.x0_true):
        G = np.asarray(pc.simulate(prob.model, x0, prob.p_true, e.t, e.u,
                                   breakpoints=e.breakpoints))
        Y = G + rng.normal(0.0, NOISE_STD, G.shape)
        exps.append(Experiment(e.t, Y, u=e.u, x0=e.x0, name=e.name, breakpoints=e.breakpoints))
    return dataclasses.replace(prob, experiments=exps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problem", nargs="?", default="fa18-roll-ail")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--noise", choices=("registry", "additive"), default="registry")
    ap.add_argument("--method", default=None, help="estimate's method (default: its default)")
    ap.add_argument("--T", type=float, default=None, help="interval length (default: the problem's)")
    args = ap.parse_args()
    options = {k: v for k, v in (("T", args.T),) if v is not None}
    method = () if args.method is None else (args.method,)
    warnings.simplefilter("ignore")
    P, S = [], []
    p_true = None
    for seed in range(args.seeds):
        prob = data_set(args.problem, seed, args.noise)
        res = prob.estimate(*method, **options)
        p_true = prob.p_true
        if not res.success or res.p_std is None or not np.all(np.isfinite(res.p_std)):
            print(f"seed {seed}: left out (success {res.success}, p_std {res.p_std})")
            continue
        P.append(res.p)
        S.append(res.p_std)
    P, S = np.array(P), np.array(S)
    n = len(P)
    spread = P.std(axis=0, ddof=1)
    mean_se = S.mean(axis=0)
    bias_t = (P.mean(axis=0) - p_true) / (spread / np.sqrt(n))
    rms_z = np.sqrt(np.mean(((P - p_true) / S) ** 2, axis=0))
    given = ", ".join([f"method {args.method}"] * bool(method)
                      + [f"{k}={v:g}" for k, v in options.items()]) or "every default"
    print(f"{args.problem}, noise {args.noise}, {n} of {args.seeds} seeds, {given}")
    print(f"{'parameter':>10} {'spread':>10} {'mean p_std':>11} {'ratio':>6} {'bias t':>7} "
          f"{'RMS z':>6}")
    for k in range(P.shape[1]):
        print(f"{k:>10d} {spread[k]:10.4g} {mean_se[k]:11.4g} {spread[k] / mean_se[k]:6.2f} "
              f"{bias_t[k]:7.2f} {rms_z[k]:6.2f}")


if __name__ == "__main__":
    main()
