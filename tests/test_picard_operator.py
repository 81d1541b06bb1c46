"""The discretised Picard operator and its derivatives."""

import math

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.transcription.discretisation import Discretisation
from picard_casadi.transcription.functions import Transcription
from picard_casadi.transcription.interval_functions import build_interval_functions

from conftest import DUFFING_P


def _linear_problem(a: float, T: float):
    x = ca.SX.sym("x")
    p = ca.SX.sym("a")
    model = pc.Model(x=x, p=p, rhs=p * x)
    t = np.linspace(0.0, T, 5)
    exp = pc.Experiment(t, np.exp(a * t), x0=[1.0])
    return Discretisation(model, [exp], T, 13, "chebyshev")


@pytest.mark.parametrize("a,T", [(-1.3, 0.25), (2.0, 0.3), (0.7, 1.0)])
def test_picard_iterates_converge_at_factorial_rate(a, T):
    """||P^k u0 - x0 e^{a t}|| <= C (|a| T)^k / k!  (u0 = x0 constant)."""
    disc = _linear_problem(a, T)
    fns = build_interval_functions(disc, 1)
    K = disc.K
    U = np.ones((1, K))
    exact = np.exp(a * T * disc.quad.tau)
    err0 = np.max(np.abs(U[0] - exact))
    for k in range(1, 12):
        U = np.asarray(fns.picard(1.0, U, a, 0.0, T, np.zeros((0, K))))
        err = np.max(np.abs(U[0] - exact))
        bound = err0 * (abs(a) * T) ** k / math.factorial(k) * math.exp(abs(a) * T) + 1e-13
        assert err <= bound, (k, err, bound)


def test_fixed_point_is_the_collocation_solution(duffing, duffing_experiment):
    disc = Discretisation(duffing, [duffing_experiment], 0.5, 11, "chebyshev")
    tr = Transcription(disc, 2, np.ones(1), np.ones(2))
    X = np.zeros((disc.n_intervals, 2))
    X[0] = [0.5, 0.0]
    U = np.repeat(X[:, :, None], disc.K, axis=2)
    # march: settle each interval, carry its end to the next start
    for j in range(disc.n_intervals):
        U, res, _ = tr.settle(X, U, DUFFING_P, tol=1e-13)
        if j + 1 < disc.n_intervals:
            X[j + 1] = U[j, :, -1]
    assert res <= 1e-13
    sim = pc.simulate(duffing, [0.5, 0.0], DUFFING_P, disc.t0, duffing_experiment)
    assert np.max(np.abs(X - sim)) < 1e-6


def test_inputs_are_function_arguments_not_constants(duffing, duffing_experiment):
    """One compiled Picard function serves experiments with different inputs."""
    disc = Discretisation(duffing, [duffing_experiment], 0.5, 7, "chebyshev")
    fns = build_interval_functions(disc, 2)
    names = fns.picard.name_in()
    assert "Wn" in names and fns.picard.size_in("Wn") == (1, 7)
    x, U = np.array([0.5, 0.0]), np.full((2, 7), 0.5)
    a = np.asarray(fns.picard(x, U, DUFFING_P, 0.0, 0.5, np.zeros((1, 7))))
    b = np.asarray(fns.picard(x, U, DUFFING_P, 0.0, 0.5, np.ones((1, 7))))
    assert np.max(np.abs(a - b)) > 1e-3


def _setup(duffing, exp, n=2):
    disc = Discretisation(duffing, [exp], 0.5, 9, "chebyshev")
    tr = Transcription(disc, n, np.array([3.0]), np.array([0.8, 1.1]))
    rng = np.random.default_rng(1)
    J = disc.n_intervals
    X = rng.normal(0.0, 0.5, (J, 2))
    U = X[:, :, None] + rng.normal(0.0, 0.1, (J, 2, disc.K))
    V = rng.normal(0.0, 0.05, (J, 2))
    return disc, tr, X, U, V


@pytest.mark.parametrize("n", [1, 2, 3])
def test_gradient_of_L_lambda_n_matches_central_differences(duffing, duffing_experiment, n):
    disc, tr, X, U, V = _setup(duffing, duffing_experiment, n)
    lam = 7.0
    p = DUFFING_P * 1.1

    def L(Xv, pv):
        r = tr.residuals(Xv, U, pv, V, lam)
        return 0.5 * float(np.sum(r * r))

    phi, gX, gp = tr.gradient(X, U, p, V, lam)
    assert abs(phi - L(X, p)) < 1e-12 * max(1.0, phi)
    eps = 1e-6
    for i in range(p.size):
        e = np.zeros_like(p)
        e[i] = eps * max(1.0, abs(p[i]))
        fd = (L(X, p + e) - L(X, p - e)) / (2 * e[i])
        assert abs(fd - gp[i]) <= 1e-6 * max(1.0, abs(fd)) * 10, (i, fd, gp[i])
    for j, i in [(0, 0), (3, 1), (7, 0), (disc.n_intervals - 1, 1)]:
        E = np.zeros_like(X)
        E[j, i] = eps
        fd = (L(X + E, p) - L(X - E, p)) / (2 * eps)
        assert abs(fd - gX[j, i]) <= 1e-6 * max(1.0, abs(fd)) * 10, (j, i, fd, gX[j, i])


def test_residual_jacobian_through_Pn_matches_central_differences(duffing, duffing_experiment):
    disc, tr, X, U, V = _setup(duffing, duffing_experiment, 2)
    lam = 3.0
    p = DUFFING_P.copy()
    r, Jx, Jp = tr.jacobian(X, U, p, V, lam)
    eps = 1e-6
    for i in range(p.size):
        e = np.zeros_like(p)
        e[i] = eps
        fd = (tr.residuals(X, U, p + e, V, lam) - tr.residuals(X, U, p - e, V, lam)) / (2 * eps)
        assert np.max(np.abs(fd - Jp[:, :, i])) <= 1e-6 * max(1.0, np.max(np.abs(fd)))


def test_fixed_point_jacobian_matches_differences_of_the_settled_residuals(duffing, duffing_experiment):
    """The n -> infinity limit of grad P^n, by the implicit function theorem."""
    disc, tr, X, U, V = _setup(duffing, duffing_experiment, 2)
    lam = 3.0
    p = DUFFING_P.copy()

    def settled(Xv, pv):
        Us, res, _ = tr.settle(Xv, U, pv, tol=1e-14, max_sweeps=200)
        assert res <= 1e-12
        return Us

    Us = settled(X, p)
    r, Jx, Jp = tr.fixed_point_jacobian(X, Us, p, V, lam)
    assert np.max(np.abs(r - tr.residuals(X, Us, p, V, lam))) < 1e-12
    eps = 1e-6
    for i in range(p.size):
        e = np.zeros_like(p)
        e[i] = eps
        fd = (tr.residuals(X, settled(X, p + e), p + e, V, lam)
              - tr.residuals(X, settled(X, p - e), p - e, V, lam)) / (2 * eps)
        assert np.max(np.abs(fd - Jp[:, :, i])) <= 1e-6 * max(1.0, np.max(np.abs(fd)))
    j = 4
    for i in range(2):
        E = np.zeros_like(X)
        E[j, i] = eps
        fd = (tr.residuals(X + E, settled(X + E, p), p, V, lam)
              - tr.residuals(X - E, settled(X - E, p), p, V, lam)) / (2 * eps)
        assert np.max(np.abs(fd[j] - Jx[j, :, i])) <= 1e-6 * max(1.0, np.max(np.abs(fd[j])))


def test_a_settle_stops_at_the_round_off_of_a_stiff_mesh():
    """PEtab's Boehm on 48 intervals of Radau's 6 nodes: Newton reaches the
    fixed point to ~1e-11 (scaled) in two steps, where the Picard map's own
    round-off lies; a settle asked for 1e-12 then stops at the first step
    that does not lower the residual tenfold, with no halvings (it went on
    for 20 Picard applications, each further step halved to 1/64 in vain:
    38 % of a Boehm start's solves were settles, docs/performance.md)."""
    from picard_casadi.estimation.setup import build_setup
    from picard_casadi.models.boehm import boehm_problem
    from picard_casadi.transcription.functions import ROUND_OFF_ZONE

    model, exps, p0, (lb, ub) = boehm_problem()
    setup = build_setup(model, list(exps), np.asarray(p0), T=5.0, n=1, nodes=6,
                        scheme="radau", weights=np.ones(model.ny), p_bounds=(lb, ub),
                        x_bounds=(np.full(model.nx, -np.inf), np.full(model.nx, np.inf)),
                        estimate_x0=False)
    U = setup.U0 * (1 + 1e-3 * np.random.default_rng(0).standard_normal(setup.U0.shape))
    _, res, evaluations = setup.tr.settle(setup.X0, U, np.asarray(p0), tol=1e-12)
    assert res < ROUND_OFF_ZONE
    assert evaluations <= 10
