"""Lotka-Volterra predator-prey model (docs/problems.md).

    x' = a x - b x y
    y' = c x y - d y

Truth ``(a, b, c, d) = (1.5, 1, 3, 1)``, ``x0 = (1, 1)``, ``t`` in ``[0, 10]``
with 101 samples, both states measured, noise standard deviation 0.05.
docs/problems.md gives no interval or start; this problem uses ``T = 0.25``,
``n = 2``, ``lambda = 10`` and ``p0 = (1, 0.7, 2, 0.7)``.
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from picard_casadi.model import Model
from picard_casadi.studies.registry import Problem
from picard_casadi.simulate import simulate_experiment

P_TRUE = np.array([1.5, 1.0, 3.0, 1.0])
X0_TRUE = np.array([1.0, 1.0])


def build_model() -> Model:
    """The Lotka-Volterra model, parameters ``(a, b, c, d)``."""
    s = ca.SX.sym("s", 2)
    p = ca.SX.sym("p", 4)
    x, y = s[0], s[1]
    a, b, c, d = p[0], p[1], p[2], p[3]
    rhs = ca.vertcat(a * x - b * x * y, c * x * y - d * y)
    return Model(x=s, p=p, rhs=rhs, name="lotka-volterra", x_names=["prey", "predator"],
                 p_names=["a", "b", "c", "d"], t_unit="")


def make_problem(seed: int = 0, noise_std: float = 0.05, n_samples: int = 101) -> Problem:
    """Synthetic data from the truth with the paper's noise model."""
    model = build_model()
    t = np.linspace(0.0, 10.0, n_samples)
    exp = simulate_experiment(model, X0_TRUE, P_TRUE, t, noise_std=noise_std, seed=seed,
                              name="lotka-volterra")
    return Problem(
        name="lotka-volterra", model=model, experiments=[exp], p_true=P_TRUE.copy(),
        p0=np.array([1.0, 0.7, 2.0, 0.7]),
        p_bounds=(np.full(4, 1e-3), np.full(4, 20.0)),
        options={"T": 0.25, "n": 2, "lam": 10.0, "x0_bounds": (np.zeros(2), np.full(2, 1e3))},
        x0_true=[X0_TRUE.copy()],
        description="Lotka-Volterra, both states measured, noise std %g" % noise_std,
    )
