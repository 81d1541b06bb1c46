"""Van der Pol oscillator (the authors' longer paper, arXiv:2412.20216).

    x1' = th1 x2
    x2' = -th1 x1 + th2 (1 - x1^2) x2

Truth ``th = (1, 1)``; ``t`` in ``[0, 10]``, 101 samples, both states
measured.  The paper does not state ``x0``; this problem uses ``(2, 0)``.
Protocol settings: ``T = 0.25`` (40 intervals), ``n = 2``, ``lambda = 5``,
start ``p0 = (0.5, 0.5)``, noise standard deviation 0.01.
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from picard_casadi.model import Model
from picard_casadi.studies.registry import Problem
from picard_casadi.simulate import simulate_experiment

P_TRUE = np.array([1.0, 1.0])
X0_TRUE = np.array([2.0, 0.0])


def build_model() -> Model:
    """The Van der Pol model, parameters ``(th1, th2)``."""
    x = ca.SX.sym("x", 2)
    p = ca.SX.sym("th", 2)
    rhs = ca.vertcat(p[0] * x[1], -p[0] * x[0] + p[1] * (1 - x[0] ** 2) * x[1])
    return Model(x=x, p=p, rhs=rhs, name="vdp", x_names=["x1", "x2"],
                 p_names=["th1", "th2"])


def make_problem(seed: int = 0, noise_std: float = 0.01, n_samples: int = 101) -> Problem:
    """Synthetic data from the truth with the paper's noise model."""
    model = build_model()
    t = np.linspace(0.0, 10.0, n_samples)
    exp = simulate_experiment(model, X0_TRUE, P_TRUE, t, noise_std=noise_std, seed=seed,
                              name="vdp")
    return Problem(
        name="vdp", model=model, experiments=[exp], p_true=P_TRUE.copy(),
        p0=np.array([0.5, 0.5]), p_bounds=(np.array([0.01, 0.01]), np.array([10.0, 10.0])),
        options={"T": 0.25, "n": 2, "lam": 5.0},
        x0_true=[X0_TRUE.copy()],
        description="Van der Pol, both states measured, noise std %g" % noise_std,
    )
