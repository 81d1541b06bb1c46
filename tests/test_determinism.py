"""The same call gives the same result whatever ran before it in the process.

A default call once ended ``converged`` in one process and ``max_iter`` in
another on the same machine, after other test files had run first.  Here a
few default calls (each on the default path, its fallbacks included) run in
one order, then in the reverse order, then in the first again, each time on
freshly built models, and every result must agree bit for bit.  No machine
may see another: nothing here depends on a timing."""

from __future__ import annotations

import hashlib

import casadi as ca
import numpy as np

import picard_casadi as pc

from conftest import sir_infected_only


def _sir(guess: str = "auto", method: str | None = None) -> pc.EstimationResult:
    model, exp = sir_infected_only()
    return pc.estimate(model, [exp], [0.3, 0.1], method=method, guess=guess, uncertainty=False)


def _decay() -> pc.EstimationResult:
    x, k = ca.SX.sym("x"), ca.SX.sym("k", 2)
    model = pc.Model(x=x, p=k, rhs=-k[0] * x + k[1], y=x, p_names=["a", "b"])
    exp = pc.simulate_experiment(model, x0=[0.5], p=[0.7, 1.4], t=np.linspace(0, 10, 40),
                                 noise_std=0.01, seed=3)
    return pc.estimate(model, [exp], p0=[1.0, 1.0])


def _van_der_pol() -> pc.EstimationResult:
    x, p = ca.SX.sym("x", 2), ca.SX.sym("mu")
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(x[1], p * (1 - x[0] ** 2) * x[1] - x[0]),
                     y=x[0])
    exp = pc.simulate_experiment(model, x0=[2.0, 0.0], p=[1.0], t=np.linspace(0, 10, 50),
                                 noise_std=0.05, seed=2)
    return pc.estimate(model, [exp], p0=[0.5])


def _blow_up(method: str | None = None) -> pc.EstimationResult:
    """x' = p x^2 from p = 50, where x blows up at t = 0.02: picard-gn's step
    overflows, and the default goes on to IPOPT on the same collocation."""
    x, p = ca.SX.sym("x"), ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=p * x ** 2, name="blowup")
    t = np.linspace(0.0, 10.0, 101)
    exp = pc.Experiment(t, (1.0 / (1.0 - 0.05 * t))[:, None], x0=[1.0], name="run")
    return pc.estimate(model, [exp], [50.0], method, uncertainty=False)


CALLS = {
    "sir": _sir,
    "sir from the simulated start": lambda: _sir(guess="simulation"),
    "sir, picard-gn only": lambda: _sir(guess="simulation", method="picard-gn"),
    "decay": _decay,
    "van der pol": _van_der_pol,
    "blow-up": _blow_up,
    "blow-up, picard-gn only": lambda: _blow_up("picard-gn"),
}


def _fingerprint(res: pc.EstimationResult) -> tuple:
    numbers = np.concatenate([np.ravel(res.p), *[np.ravel(x) for x in res.x0],
                              [res.objective, res.continuity_gap],
                              np.ravel(res.p_std if res.p_std is not None else [])])
    return (res.status, res.method, res.iterations, res.success, tuple(res.warnings),
            hashlib.sha256(numbers.tobytes()).hexdigest())


def test_default_calls_agree_bit_for_bit_in_any_order():
    names = list(CALLS)
    seen: dict[str, tuple] = {}
    for order in (names, names[::-1], names):
        for name in order:
            got = _fingerprint(CALLS[name]())
            assert seen.setdefault(name, got) == got, (name, order)
    # the calls are not all alike: the fallbacks ran where they should
    assert seen["blow-up, picard-gn only"][0] == "step_failed"
    assert seen["blow-up"][:2] == ("converged", "ipopt")
    assert seen["sir"][0] == "converged" and seen["decay"][0] == "converged"
