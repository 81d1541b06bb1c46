"""Michaelis-Menten substrate depletion: saturating kinetics from few samples.

    S' = -V S / (K + S),     y = S

Truth ``(V, K) = (1, 2)``, ``S(0) = 5`` (estimated, started from the first
measurement); 17 samples on ``[0, 10]`` (``S`` falls from 5 to about 0.2),
additive Gaussian noise of standard deviation 0.3.  ``V`` and ``K`` are
strongly correlated and ``K``'s likelihood is long towards large ``K``
(where the kinetics turn first-order with rate ``V / K``), so the Wald
intervals are symmetric where the truth is not: over 100 seeds they held
the truth for 80.5 % of (seed, parameter) pairs (84 % with Student's
quantile), the profile-likelihood intervals for 92.5 %
(:mod:`picard_casadi.studies.profile`; ``pytest -m slow tests/test_profile.py -s``,
``benchmarks/profile_coverage.py``).  Not in
the registry's list: a test and benchmark problem (``make_problem`` is
module level, so the study can run it on an executor).
"""

from __future__ import annotations

from typing import Any

import casadi as ca
import numpy as np

from picard_casadi.experiment import Experiment
from picard_casadi.model import Model
from picard_casadi.studies.registry import Problem
from picard_casadi.simulate import simulate

P_TRUE = np.array([1.0, 2.0])
X0_TRUE = np.array([5.0])


def build_model() -> Model:
    """The Michaelis-Menten depletion model, parameters ``(V, K)``."""
    s = ca.SX.sym("S")
    p = ca.SX.sym("p", 2)
    return Model(x=s, p=p, rhs=-p[0] * s / (p[1] + s), name="michaelis-menten",
                 x_names=["S"], p_names=["V", "K"])


def make_problem(seed: int = 0, noise_std: float = 0.3, n_samples: int = 16,
                 t_end: float = 10.0, p_true: Any = P_TRUE, s0: float = X0_TRUE[0]) -> Problem:
    """Synthetic data: ``S(0)`` and ``n_samples`` equally spaced samples on ``(0, t_end]``.

    The noise is additive, Gaussian, of standard deviation ``noise_std``:
    the noise model under which least-squares intervals are calibrated (the
    paper's ``(1 + n) g + m`` of :func:`~picard_casadi.measure` is
    heteroscedastic).
    """
    model = build_model()
    t = np.linspace(0.0, t_end, n_samples + 1)
    p_true, x0 = np.asarray(p_true, float), np.array([float(s0)])
    S = simulate(model, x0, p_true, t)
    y = S + np.random.default_rng(seed).normal(0.0, noise_std, size=S.shape)
    exp = Experiment(t, y, x0=y[0], name="depletion")
    return Problem(
        name="michaelis-menten", model=model, experiments=[exp], p_true=p_true.copy(),
        p0=np.array([0.5, 1.0]), p_bounds=(np.array([1e-3, 1e-3]), np.array([1e3, 1e3])),
        options={}, x0_true=[x0],
        description="Michaelis-Menten depletion, %d samples, noise std %g" % (
            n_samples + 1, noise_std),
    )
