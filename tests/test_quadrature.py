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


@pytest.mark.parametrize("scheme", ["chebyshev", "trapezoid"])
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
