"""Shared fixtures: small models with known truth."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc


def duffing_model() -> pc.Model:
    """Forced Duffing oscillator: nonlinear, with an input and explicit time.

    x1' = x2
    x2' = -d x2 - a x1 - b x1^3 + g u(t) + 0.1 sin(t)
    """
    t = ca.SX.sym("t")
    x = ca.SX.sym("x", 2)
    p = ca.SX.sym("p", 4)
    u = ca.SX.sym("u")
    d, a, b, g = p[0], p[1], p[2], p[3]
    rhs = ca.vertcat(x[1], -d * x[1] - a * x[0] - b * x[0] ** 3 + g * u[0] + 0.1 * ca.sin(t))
    return pc.Model(t=t, x=x, p=p, u=u, rhs=rhs, y=x[0:1], name="duffing",
                    x_names=["pos", "vel"], p_names=["d", "a", "b", "g"],
                    u_names=["force"], y_names=["pos"])


DUFFING_P = np.array([0.3, 1.0, 0.5, 0.8])


def duffing_input(t: float) -> np.ndarray:
    return np.array([np.cos(1.3 * t)])


@pytest.fixture(scope="session")
def duffing() -> pc.Model:
    return duffing_model()


@pytest.fixture(scope="session")
def duffing_experiment(duffing) -> pc.Experiment:
    t = np.linspace(0.0, 6.0, 61)
    return pc.simulate_experiment(duffing, [0.5, 0.0], DUFFING_P, t, duffing_input,
                                  noise_std=0.01, seed=3, name="duffing")


def prey_only_lotka_volterra() -> tuple[pc.Model, pc.Experiment]:
    """A first-time user's case: Lotka-Volterra with only the prey measured, at
    25 random times on [0, 15] (truth a, b, c, d = 1, 0.5, 0.8, 0.3; x0 = (2, 1);
    noise 0.05, seed 3).  From p0 = 0.5 in the box [0, 5] picard-gn converges to
    a poor local minimum with a on its bound."""
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 4)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(p[0] * x[0] - p[1] * x[0] * x[1],
                                              -p[2] * x[1] + p[3] * x[0] * x[1]),
                     y=x[0], name="lv", p_names=list("abcd"))
    t = np.sort(np.random.default_rng(1).uniform(0, 15, 25))
    t[0] = 0.0
    exp = pc.simulate_experiment(model, [2.0, 1.0], [1.0, 0.5, 0.8, 0.3], t, noise_std=0.05,
                                 seed=3)
    return model, exp


def sir_infected_only() -> tuple[pc.Model, pc.Experiment]:
    """A user's SIR epidemic with only I measured (51 samples on [0, 100],
    noise 5 % + 20 people, seed 1; truth beta, gamma = 0.5, 0.2 from 10
    infected in 1e5) and no x0 guess: S starts at 0 in the simulated start,
    from which picard-gn never joins up (gaps of 191 at max_iter)."""
    N = 1e5
    x, p = ca.SX.sym("x", 3), ca.SX.sym("p", 2)
    force = p[0] * x[0] * x[1] / N
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(-force, force - p[1] * x[1], p[1] * x[1]),
                     y=x[1], p_names=["beta", "gamma"], x_names=["S", "I", "R"])
    t = np.arange(0, 101, 2.0)
    X = pc.simulate(model, [N - 10, 10, 0], [0.5, 0.2], t)
    y = X[:, 1] + np.random.default_rng(1).normal(size=t.size) * (0.05 * X[:, 1] + 20)
    return model, pc.Experiment(t=t, y=y[:, None])


def product_model_data() -> tuple[pc.Model, pc.Experiment]:
    """``x' = -a b x + c``: only the product ``a b`` is identifiable (truth a=0.5,
    b=2, c=0.3; 41 samples on [0, 4], noise 0.01, seed 0)."""
    x = ca.SX.sym("x")
    p = ca.SX.sym("p", 3)
    model = pc.Model(x=x, p=p, rhs=-p[0] * p[1] * x + p[2], p_names=["a", "b", "c"])
    t = np.linspace(0, 4, 41)
    exp = pc.simulate_experiment(model, [2.0], [0.5, 2.0, 0.3], t, noise_std=0.01, seed=0)
    return model, exp


@pytest.fixture
def singular_fixed_point_case() -> tuple[np.ndarray, ...]:
    """``(A, h, Fx, rhs)`` of three intervals, the second singular: there f_x
    is 2 on states 2, 3 and ``h A = 0.5 I``, so their rows of ``I - dP/dU``
    are exactly zero (states 0 and 1 are explicit: f_x[E, E] = 0)."""
    J, K, nx = 3, 4, 4
    Fx = np.zeros((J, K, nx, nx))
    Fx[:, :, 2:, 2:] = 2.0 * np.eye(2)
    return 0.5 * np.eye(K), np.array([0.1, 1.0, 0.1]), Fx, np.ones((J, K * nx, 2))


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A fresh working folder and code cache for a CLI test."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path / "cache"))
    return tmp_path


def cli_main(capsys, *argv):
    """Run the CLI in this process: (exit status, stdout, stderr)."""
    from picard_casadi.cli import commands as cli

    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


#: a model file for the CLI tests: a forced oscillator, position measured
OSCILLATOR_MODEL_FILE = '''
import casadi as ca
import picard_casadi as pc

P0 = [0.5, 0.5]

def build_model():
    x = ca.SX.sym("x", 2)
    p = ca.SX.sym("p", 2)
    u = ca.SX.sym("u")
    rhs = ca.vertcat(x[1], -p[0] * x[0] - p[1] * x[1] + u)
    return pc.Model(x=x, p=p, u=u, rhs=rhs, y=x[0:1], name="oscillator",
                    x_names=["pos", "vel"], p_names=["k", "c"], u_names=["force"],
                    y_names=["pos"])
'''
