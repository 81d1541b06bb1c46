"""Integration matrices: exactness on polynomials and spectral accuracy."""

import numpy as np
import pytest

from picard_casadi.transcription.quadrature import Quadrature


@pytest.mark.parametrize("nodes", [2, 3, 5, 9, 13, 21])
def test_chebyshev_exact_on_polynomials_up_to_its_degree(nodes):
    q = Quadrature("chebyshev", nodes)
    tau = np.linspace(0.0, 1.0, 17)
    rows = q.integration_rows(tau)
    assert q.exact_degree == nodes - 1
    for d in range(q.exact_degree + 1):
        exact = tau ** (d + 1) / (d + 1)
        assert np.max(np.abs(rows @ q.tau ** d - exact)) < 1e-12
        # the node matrix is the same rule at the nodes
        assert np.max(np.abs(q.integration @ q.tau ** d - q.tau ** (d + 1) / (d + 1))) < 1e-12


@pytest.mark.parametrize("nodes", [2, 3, 6, 11])
def test_trapezoid_exact_on_linear_functions(nodes):
    q = Quadrature("trapezoid", nodes)
    tau = np.linspace(0.0, 1.0, 23)
    rows = q.integration_rows(tau)
    assert q.exact_degree == 1
    for d in (0, 1):
        assert np.max(np.abs(rows @ q.tau ** d - tau ** (d + 1) / (d + 1))) < 1e-12
    # and not exact beyond (it claims degree 1 only)
    assert np.max(np.abs(rows @ q.tau ** 2 - tau ** 3 / 3)) > 1e-6


def test_chebyshev_error_on_exp_falls_geometrically():
    tau = np.linspace(0.0, 1.0, 31)
    exact = np.exp(tau) - 1.0
    errors = []
    for nodes in (3, 5, 7, 9, 11):
        q = Quadrature("chebyshev", nodes)
        errors.append(np.max(np.abs(q.integration_rows(tau) @ np.exp(q.tau) - exact)))
    ratios = [errors[i + 1] / errors[i] for i in range(len(errors) - 1)]
    # each two extra nodes gain at least two orders of magnitude
    assert all(r < 1e-2 for r in ratios[:-1]), (errors, ratios)
    assert errors[-1] < 1e-13


def test_trapezoid_is_second_order():
    tau = np.linspace(0.0, 1.0, 7)
    exact = np.exp(tau) - 1.0
    e1 = np.max(np.abs(Quadrature("trapezoid", 11).integration_rows(tau) @ np.exp(np.linspace(0, 1, 11)) - exact))
    e2 = np.max(np.abs(Quadrature("trapezoid", 21).integration_rows(tau) @ np.exp(np.linspace(0, 1, 21)) - exact))
    assert 3.5 < e1 / e2 < 4.5


@pytest.mark.parametrize("nodes", [2, 3, 4, 9, 13])
def test_radau_is_radau_iia_collocation(nodes):
    """Nodes 0 and the Radau points; the integrand's interpolant on the
    Radau points only (degree K - 2, the start's column zero)."""
    q = Quadrature("radau", nodes)
    assert q.tau[0] == 0.0 and q.tau[-1] == 1.0 and np.all(np.diff(q.tau) > 0)
    assert q.exact_degree == nodes - 2
    assert np.all(q.integration[:, 0] == 0.0) and np.all(q.integration[0] == 0.0)
    tau = np.linspace(0.0, 1.0, 17)
    rows = q.integration_rows(tau)
    for d in range(q.exact_degree + 1):
        assert np.max(np.abs(rows @ q.tau ** d - tau ** (d + 1) / (d + 1))) < 1e-12
    if nodes > 2:  # and not beyond
        d = q.exact_degree + 1
        assert np.max(np.abs(rows @ q.tau ** d - tau ** (d + 1) / (d + 1))) > 1e-10


def test_radau_three_stages_are_the_textbook_tableau():
    # Hairer and Wanner, Solving ODEs II, Table IV.5.6 (s = 3)
    r6 = np.sqrt(6.0)
    c = [(4 - r6) / 10, (4 + r6) / 10, 1.0]
    A = [[(88 - 7 * r6) / 360, (296 - 169 * r6) / 1800, (-2 + 3 * r6) / 225],
         [(296 + 169 * r6) / 1800, (88 + 7 * r6) / 360, (-2 - 3 * r6) / 225],
         [(16 - r6) / 36, (16 + r6) / 36, 1 / 9]]
    q = Quadrature("radau", 4)
    np.testing.assert_allclose(q.tau[1:], c, atol=1e-14)
    np.testing.assert_allclose(q.integration[1:, 1:], A, atol=1e-14)


def _stability(q: Quadrature, z: float) -> float:
    """``u(1)`` of the collocation of ``u' = z u``, ``u(0) = 1`` on one interval."""
    K = q.n_nodes
    return float(np.linalg.solve(np.eye(K) - z * q.integration, np.ones(K))[-1])


def test_radau_is_l_stable_where_chebyshev_is_not():
    cheb, radau = Quadrature("chebyshev", 9), Quadrature("radau", 9)
    for z in (-1.0, -5.0):  # both accurate on a resolved mode
        assert _stability(cheb, z) == pytest.approx(np.exp(z), rel=1e-4)
        assert _stability(radau, z) == pytest.approx(np.exp(z), rel=1e-4)
    for z in (-300.0, -1e3, -1e5):  # a stiff one: Radau damps it, Chebyshev carries it on
        assert abs(_stability(radau, z)) < 0.03
        assert abs(_stability(cheb, z)) > 0.5


@pytest.mark.parametrize("scheme", ["chebyshev", "radau", "trapezoid"])
def test_interpolation_rows_reproduce_node_values_and_lines(scheme):
    q = Quadrature(scheme, 7)
    assert np.allclose(q.interpolation_rows(q.tau), np.eye(7), atol=1e-12)
    tau = np.linspace(0, 1, 13)
    assert np.allclose(q.interpolation_rows(tau) @ (2 + 3 * q.tau), 2 + 3 * tau, atol=1e-12)


def test_bad_arguments_name_the_field():
    with pytest.raises(ValueError, match="scheme"):
        Quadrature("simpson", 5)
    with pytest.raises(ValueError, match="nodes"):
        Quadrature("chebyshev", 1)
    with pytest.raises(ValueError, match="tau"):
        Quadrature("chebyshev", 5).integration_rows([1.5])
