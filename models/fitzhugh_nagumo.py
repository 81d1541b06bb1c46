"""FitzHugh-Nagumo neuron model (Ramsay, Hooker, Campbell and Cao 2007).

    V' = c (V - V^3 / 3 + R)
    R' = -(V - a + b R) / c

Truth ``(a, b, c) = (0.2, 0.2, 3)``, ``x0 = (-1, 1)``, ``t`` in ``[0, 20]``.
Known for a multimodal least-squares surface.  This problem observes ``V``
only, at 80 times drawn uniformly at random in ``(0, 20]`` (seeded with the
noise seed), noise standard deviation 0.01.  The experiment's ``x0`` guess
holds ``R(0) = 0`` (``R`` is never measured); ``V(0)`` is taken from data.
Settings: ``T = 0.5``, ``n = 2``, ``lambda = 10``, 11 Chebyshev nodes,
``p0 = 1.5 x truth``.
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from picard_casadi.model import Model
from picard_casadi.studies.registry import Problem
from picard_casadi.simulate import simulate_experiment

P_TRUE = np.array([0.2, 0.2, 3.0])
X0_TRUE = np.array([-1.0, 1.0])


def build_model(observe_R: bool = False) -> Model:
    """The FitzHugh-Nagumo model; output ``V`` (and ``R`` if ``observe_R``)."""
    s = ca.SX.sym("s", 2)
    p = ca.SX.sym("p", 3)
    V, R = s[0], s[1]
    a, b, c = p[0], p[1], p[2]
    rhs = ca.vertcat(c * (V - V ** 3 / 3 + R), -(V - a + b * R) / c)
    return Model(x=s, p=p, rhs=rhs, y=s if observe_R else s[0], name="fitzhugh-nagumo",
                 x_names=["V", "R"], p_names=["a", "b", "c"], t_unit="ms")


def make_problem(seed: int = 0, noise_std: float = 0.01, n_samples: int = 80,
                 observe_R: bool = False) -> Problem:
    """Synthetic data: ``n_samples`` random times, V (and optionally R) measured."""
    model = build_model(observe_R)
    rng = np.random.default_rng(10_000 + seed)
    t = np.sort(rng.uniform(0.0, 20.0, n_samples))
    exp = simulate_experiment(model, X0_TRUE, P_TRUE, t, noise_std=noise_std, seed=seed,
                              name="fitzhugh-nagumo", x0_guess=[X0_TRUE[0], 0.0])
    exp = type(exp)(exp.t, exp.y, x0=exp.x0, name=exp.name, t0=0.0)
    return Problem(
        name="fitzhugh-nagumo", model=model, experiments=[exp], p_true=P_TRUE.copy(),
        p0=1.5 * P_TRUE, p_bounds=(np.array([-2.0, 1e-3, 0.1]), np.array([2.0, 5.0, 20.0])),
        options={"T": 0.5, "n": 2, "lam": 10.0, "nodes": 11,
                 "x0_bounds": (np.array([-5.0, -5.0]), np.array([5.0, 5.0]))},
        x0_true=[X0_TRUE.copy()],
        description="FitzHugh-Nagumo, V only at %d random times, noise std %g"
        % (n_samples, noise_std),
    )
