"""A ring of N sparsely coupled states: the scaling model of the benchmarks.

    x_i' = p0 (x_{i-1} + x_{i+1} - 2 x_i) - p1 x_i^3 + 0.5 sin(0.5 t + 2 pi i / N)

(indices modulo N: each state driven by its two neighbours and itself).
Truth ``p = (0.8, 0.5)``, ``x_i(0) = cos(2 pi i / N)``, every state measured
at 51 times on ``[0, 10]`` with noise 0.01.  ``benchmarks/state_scaling.py``
fits it for N = 20 to 160 states (``T = 0.5``, ``p0 = (0.5, 0.3)``, ``p`` in
``[0, 10]``); ``tr_solver="cg"`` was built for models like it
(``docs/performance.md``, "Large, sparsely coupled models").
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from picard_casadi.experiment import Experiment
from picard_casadi.model import Model
from picard_casadi.simulate import simulate_experiment

P_TRUE = np.array([0.8, 0.5])


def build_model(N: int) -> Model:
    """The ring of ``N`` states, parameters ``(p0, p1)``."""
    t = ca.SX.sym("t")
    x = ca.SX.sym("x", N)
    p = ca.SX.sym("p", 2)
    rhs = [p[0] * (x[(i - 1) % N] + x[(i + 1) % N] - 2 * x[i]) - p[1] * x[i] ** 3
           + 0.5 * ca.sin(0.5 * t + 2 * np.pi * i / N) for i in range(N)]
    return Model(t=t, x=x, p=p, rhs=ca.vertcat(*rhs), name=f"ring{N}")


def make_experiment(model: Model, seed: int = 0) -> Experiment:
    """Synthetic data of every state from the truth (51 samples on ``[0, 10]``)."""
    N = model.nx
    x0 = np.cos(2 * np.pi * np.arange(N) / N)
    return simulate_experiment(model, x0, P_TRUE, np.linspace(0, 10, 51), noise_std=0.01,
                               seed=seed)
