"""Quickstart: estimate the Van der Pol parameters with both Picard methods.

Run:  python examples/quickstart.py

Builds the model with CasADi SX expressions, generates noisy data with the
paper's noise model, and estimates ``(th1, th2)`` and the initial state with
the paper's algorithm (``method="picard"``) and with the Gauss-Newton variant
(``method="picard-gn"``).
"""

from __future__ import annotations

import time

import casadi as ca
import numpy as np

import picard_casadi as pc


def main() -> None:
    start = time.perf_counter()
    x = ca.SX.sym("x", 2)
    th = ca.SX.sym("th", 2)
    model = pc.Model(
        x=x, p=th,
        rhs=ca.vertcat(th[0] * x[1], -th[0] * x[0] + th[1] * (1 - x[0] ** 2) * x[1]),
        name="vdp", x_names=["x1", "x2"], p_names=["th1", "th2"],
    )
    t = np.linspace(0.0, 10.0, 101)
    exp = pc.simulate_experiment(model, x0=[2.0, 0.0], p=[1.0, 1.0], t=t,
                                 noise_std=0.01, seed=0, name="vdp")
    for method in ("picard-gn", "picard"):
        res = pc.estimate(model, [exp], p0=[0.5, 0.5], method=method, T=0.25, n=2, lam=5.0,
                          p_bounds=([0.01, 0.01], [10.0, 10.0]))
        res.p_true = np.array([1.0, 1.0])
        print(res.summary())
        print()
    print(f"total time {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
