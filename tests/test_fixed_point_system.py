"""The structured solves of ``I - dP/dU`` agree with a dense LU of the whole matrix."""

from __future__ import annotations

import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.transcription.fixed_point_system import (FixedPointSystem, explicit_states,
                                              fixed_point_matrix, sink_states)
from picard_casadi.estimation.setup import build_setup


def _jacobians(rng, J, K, nx, explicit):
    """Random ``f_x`` at the nodes with ``f_x[E, E] = 0``."""
    Fx = rng.standard_normal((J, K, nx, nx))
    Fx[np.ix_(range(J), range(K), explicit, explicit)] = 0.0
    return Fx


@pytest.mark.parametrize("first_node_fixed", [True, False])
@pytest.mark.parametrize("nx, explicit", [(15, [3, 4, 5, 6]), (6, [0, 2, 4]), (3, [1, 2])])
def test_solve_with_explicit_states_eliminated_equals_the_dense_solve(first_node_fixed, nx,
                                                                       explicit):
    rng = np.random.default_rng(nx)
    J, K = 5, 7
    A = 0.3 * rng.standard_normal((K, K))
    if first_node_fixed:
        A[0] = 0.0
    h = rng.uniform(0.05, 0.3, J)
    Fx = _jacobians(rng, J, K, nx, explicit)
    rhs = rng.standard_normal((J, K * nx, 4))
    reference = np.linalg.solve(fixed_point_matrix(A, h, Fx), rhs)
    for system in (FixedPointSystem(A, np.array(explicit)), FixedPointSystem(A)):
        assert system.first_node_fixed == first_node_fixed
        got = system.solve(h, Fx, rhs)
        assert np.max(np.abs(got - reference)) <= 1e-13 * np.abs(reference).max()
    inverse = FixedPointSystem(A, np.array(explicit)).inverse(h, Fx)
    assert np.allclose(inverse, np.linalg.inv(fixed_point_matrix(A, h, Fx)), rtol=0, atol=1e-12)


def test_a_singular_interval_raises_on_both_paths(singular_fixed_point_case):
    A, h, Fx, rhs = singular_fixed_point_case
    for system in (FixedPointSystem(A, np.array([0, 1])), FixedPointSystem(A)):
        with pytest.raises(np.linalg.LinAlgError):
            system.solve(h, Fx, rhs)


def test_explicit_states_are_chosen_where_they_pay():
    # cmg: gamma' = gamma_dot; the four gimbal angles drive everything else
    cmg = pc.problem("cmg", seed=0).model
    import casadi as ca
    pattern = np.array(ca.DM(ca.jacobian(cmg.rhs, cmg.x).sparsity(), 1), dtype=bool)
    chosen = explicit_states(pattern)
    assert [cmg.x_names[i] for i in chosen] == ["gamma_1", "gamma_2", "gamma_3", "gamma_4"]
    assert not pattern[np.ix_(chosen, chosen)].any()
    # one explicit state of nine (the F/A-18's pitch angle) does not pay
    one = np.ones((9, 9), bool)
    one[7, 7] = False
    assert explicit_states(one).size == 0
    # a chain q' = v: the positions, half the states
    n = 6
    chain = np.zeros((2 * n, 2 * n), bool)
    chain[:n, n:] = np.eye(n, dtype=bool)
    chain[n:, :] = True
    assert list(explicit_states(chain)) == list(range(n))
    # a state that depends on itself is never chosen
    assert explicit_states(np.eye(4, dtype=bool)).size == 0


def test_cmg_linearisation_and_newton_step_with_and_without_elimination():
    prob = pc.problem("cmg", seed=0)
    m, o = prob.model, prob.options
    inf = np.full(m.nx, np.inf)
    setup = build_setup(m, prob.experiments, prob.p0, T=o["T"], n=2, nodes=o["nodes"],
                        scheme="chebyshev", weights=np.ones(m.ny),
                        p_bounds=(np.full(m.np, -np.inf), np.full(m.np, np.inf)),
                        x_bounds=(-inf, inf), estimate_x0=True, codegen=False)
    tr = setup.tr
    fp = tr._fixed_point
    assert fp.system.explicit.size == 4
    X, p = setup.X0, setup.p0
    rng = np.random.default_rng(1)
    U = setup.U0 * (1.0 + 1e-2 * rng.standard_normal(setup.U0.shape))
    eliminated = tr.interval_sensitivities(X, U, p, full=True)
    U_eliminated, _ = fp.newton_step(X, U, p)
    inverse = fp.last_inverse
    fp.system = FixedPointSystem(fp.system.A)
    dense = tr.interval_sensitivities(X, U, p, full=True)
    U_dense, _ = fp.newton_step(X, U, p)
    for key in ("G", "dG", "xend", "dend", "S"):
        scale = float(np.abs(dense[key]).max())
        assert np.max(np.abs(dense[key] - eliminated[key])) <= 1e-11 * scale, key
    assert np.max(np.abs(U_dense - U_eliminated)) <= 1e-11 * np.abs(U_dense).max()
    assert np.allclose(inverse, fp.last_inverse, rtol=0, atol=1e-10)


def test_every_state_explicit_leaves_nothing_to_factorise():
    # x' = p: f_x = 0, so I - dP/dU = I and the solution is the right-hand side
    rng = np.random.default_rng(2)
    J, K, nx = 3, 5, 2
    A = rng.standard_normal((K, K))
    A[0] = 0.0
    assert list(explicit_states(np.zeros((nx, nx), bool))) == [0, 1]
    rhs = rng.standard_normal((J, K * nx, 3))
    got = FixedPointSystem(A, np.array([0, 1])).solve(np.full(J, 0.1),
                                                      np.zeros((J, K, nx, nx)), rhs)
    np.testing.assert_array_equal(got, rhs)


@pytest.mark.parametrize("explicit", [[], [3, 4, 5, 6]])
def test_solving_in_groups_of_intervals_changes_nothing(monkeypatch, explicit):
    import picard_casadi.transcription.fixed_point_system as fps

    rng = np.random.default_rng(7)
    J, K, nx = 23, 9, 15
    A = 0.3 * rng.standard_normal((K, K))
    A[0] = 0.0
    h = rng.uniform(0.05, 0.3, J)
    Fx = _jacobians(rng, J, K, nx, explicit)
    rhs = rng.standard_normal((J, K * nx, 5))
    system = FixedPointSystem(A, np.array(explicit, dtype=int))
    monkeypatch.setattr(fps, "GROUP_BYTES", 1 << 40)
    assert system.group_size(K, nx) >= J
    whole = system.solve(h, Fx, rhs)
    monkeypatch.setattr(fps, "GROUP_BYTES", 3 * 8 * ((K - 1) * (nx - len(explicit))) ** 2)
    assert system.group_size(K, nx) == 3
    assert np.array_equal(system.solve(h, Fx, rhs), whole)  # groups of 3, the last of 2


@pytest.mark.parametrize("first_node_fixed", [True, False])
@pytest.mark.parametrize("nx, sinks", [(9, [8]), (5, [0, 3]), (2, [1])])
def test_solve_with_sink_states_eliminated_equals_the_dense_solve(first_node_fixed, nx, sinks):
    """States no state depends on (f_x[:, E] = 0, as the F/A-18's heading):
    the kept states' own system, then the sinks from them."""
    rng = np.random.default_rng(10 + nx)
    J, K = 4, 6
    A = 0.3 * rng.standard_normal((K, K))
    if first_node_fixed:
        A[0] = 0.0
    h = rng.uniform(0.05, 0.3, J)
    Fx = rng.standard_normal((J, K, nx, nx))
    Fx[:, :, :, sinks] = 0.0
    rhs = rng.standard_normal((J, K * nx, 3))
    reference = np.linalg.solve(fixed_point_matrix(A, h, Fx), rhs)
    system = FixedPointSystem(A, np.array(sinks), sinks=True)
    got = system.solve(h, Fx, rhs)
    assert np.max(np.abs(got - reference)) <= 1e-13 * np.abs(reference).max()


def test_sink_states_are_the_states_nothing_depends_on():
    fa18 = pc.problem("fa18-roll-ail", seed=0).model
    chosen = sink_states(fa18.jacobian_pattern)
    assert [fa18.x_names[i] for i in chosen] == ["psi"]
    assert explicit_states(fa18.jacobian_pattern).size == 0  # so the sinks are taken
    from picard_casadi.transcription.sensitivity import fixed_point_system
    system = fixed_point_system(fa18, np.zeros((3, 3)))
    assert system.sinks and list(system.explicit) == list(chosen)
    # a state that depends on itself, or drives another, is no sink; all sinks: none taken
    assert sink_states(np.eye(3, dtype=bool)).size == 0
    D = np.zeros((3, 3), bool)
    D[0, 1] = True
    assert list(sink_states(D)) == [0, 2]
    assert sink_states(np.zeros((2, 2), bool)).size == 0
