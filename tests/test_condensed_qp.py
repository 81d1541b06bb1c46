"""The small bound-constrained least-squares problem inside the condensed step."""

from __future__ import annotations

import numpy as np
import pytest

from picard_casadi.methods import least_squares
from picard_casadi.methods.least_squares import (bounded_least_squares, least_squares_solution,
                                                 least_violation, nearest_feasible,
                                                 triangular_factor, working_set_step)


def _ill_conditioned(m: int, n: int, cond: float, rng: np.random.Generator) -> np.ndarray:
    U, _ = np.linalg.qr(rng.standard_normal((m, n)))
    V, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return U @ np.diag(np.logspace(0.0, -np.log10(cond), n)) @ V.T


def test_working_set_step_keeps_its_bounds_on_an_ill_conditioned_problem():
    """A^T A with condition 1e18: the working bounds still hold and the KKT conditions too."""
    rng = np.random.default_rng(0)
    A = 1e4 * _ill_conditioned(200, 8, 1e9, rng)
    b = rng.standard_normal(200)
    damp = np.full(8, 1e-12)
    active = np.ones(8, dtype=bool)
    theta = rng.standard_normal(8)
    Cw = rng.standard_normal((2, 8))
    step, nu = working_set_step(A, b, damp, active, theta, Cw)
    assert np.max(np.abs(Cw @ step)) <= 1e-12 * np.max(np.abs(step))
    new = theta + step
    grad = A.T @ (A @ new + b) + damp * new
    # stationary on the working set: the gradient is a combination of the working rows
    assert np.linalg.norm(grad + Cw.T @ nu) <= 1e-6 * np.linalg.norm(A.T @ b)


def test_working_set_step_without_bounds_is_the_damped_least_squares_step():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((30, 5))
    b = rng.standard_normal(30)
    damp = np.full(5, 0.3)
    step, nu = working_set_step(A, b, damp, np.ones(5, dtype=bool), np.zeros(5), np.zeros((0, 5)))
    expected = np.linalg.solve(A.T @ A + np.diag(damp), -A.T @ b)
    np.testing.assert_allclose(step, expected, rtol=1e-10)
    assert nu.size == 0


def test_working_set_step_leaves_inactive_entries_alone():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((30, 5))
    b = rng.standard_normal(30)
    active = np.array([True, False, True, True, False])
    step, _ = working_set_step(A, b, np.zeros(5), active, np.zeros(5), rng.standard_normal((1, 5)))
    assert step[1] == 0.0 and step[4] == 0.0
    assert np.any(step != 0.0)


def test_least_violation_finds_a_feasible_start_when_zero_is_not():
    rng = np.random.default_rng(3)
    C = rng.standard_normal((40, 6))
    d = rng.standard_normal(40)
    target = rng.standard_normal(6)
    v = C @ target + d
    lo, hi = v - 0.05, v + 0.05  # a small box around a point far from theta = 0
    assert np.any((d < lo) | (d > hi))
    theta = least_violation(C, d, lo, hi, np.ones(6))
    w = C @ theta + d
    assert np.all(w >= lo - 1e-9) and np.all(w <= hi + 1e-9)


def test_bounded_least_squares_has_one_minimiser_whatever_the_feasible_start():
    """The condensed step keeps one feasible start for all its solves on the same
    boxes (other dampings): a strictly convex QP ends at the same point."""
    rng = np.random.default_rng(5)
    n = 6
    C = rng.standard_normal((40, n))
    d = rng.standard_normal(40)
    v = C @ rng.standard_normal(n) + d
    lo, hi = v - 0.3, v + 0.3  # zero is outside: a start must be found
    assert np.any((d < lo) | (d > hi))
    A, b = rng.standard_normal((30, n)), rng.standard_normal(30)
    active = np.ones(n, bool)
    first = least_violation(C, d, lo, hi, np.full(n, 1e-3))
    for damp in (np.full(n, 1e-3), np.full(n, 0.5)):
        own = bounded_least_squares(A, b, damp, active, C, d, lo, hi)
        kept = bounded_least_squares(A, b, damp, active, C, d, lo, hi, start=first)
        np.testing.assert_allclose(kept, own, rtol=1e-9, atol=1e-12)
        w = C @ kept + d
        assert np.all(w >= lo - 1e-9) and np.all(w <= hi + 1e-9)
    # the start is not changed by the solve
    np.testing.assert_array_equal(first, least_violation(C, d, lo, hi, np.full(n, 1e-3)))


def test_nearest_feasible_is_the_smallest_feasible_point():
    """The dual active-set point against the primal active-set QP ``min |sqrt(s)
    theta|^2 / 2`` over the same bounds, started from Newton's feasible point:
    one strictly convex problem, one minimiser; the bounds hold."""
    rng = np.random.default_rng(7)
    n = 8
    C = rng.standard_normal((300, n))
    d = rng.standard_normal(300)
    v = C @ rng.standard_normal(n) + d
    lo, hi = v - rng.uniform(0.1, 2.0, 300), v + rng.uniform(0.1, 2.0, 300)
    lo[::7] = -np.inf  # one-sided rows too
    scale = rng.uniform(0.5, 4.0, n)
    assert np.any((d < lo) | (d > hi))
    theta = nearest_feasible(C, d, lo, hi, scale)
    w = C @ theta + d
    assert np.all(w >= lo - 1e-9) and np.all(w <= hi + 1e-9)
    saved = least_squares.nearest_feasible
    least_squares.nearest_feasible = lambda *a, **k: None  # Newton's start only
    try:
        start = least_violation(C, d, lo, hi, scale)
    finally:
        least_squares.nearest_feasible = saved
    qp = bounded_least_squares(np.diag(np.sqrt(scale)), np.zeros(n), np.zeros(n),
                               np.ones(n, bool), C, d, lo, hi, start=start)
    assert np.sqrt(scale) @ np.abs(theta) > 0.1  # a real move
    np.testing.assert_allclose(theta, qp, rtol=1e-8, atol=1e-10)


def test_nearest_feasible_reports_contradictory_bounds():
    """No theta meets x >= 1 and x <= -1 on one row: None (least_violation then
    falls back to the least violation, below)."""
    C = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    d = np.array([5.0, 5.0, 0.0])
    lo = np.array([1.0, -np.inf, -1.0])
    hi = np.array([np.inf, -1.0, 1.0])
    assert nearest_feasible(C, d, lo, hi, np.ones(2)) is None
    # a violated row that no entry of theta moves
    assert nearest_feasible(np.zeros((1, 2)), np.array([3.0]), np.array([0.0]),
                            np.array([1.0]), np.ones(2)) is None


def test_least_violation_keeps_zero_when_it_is_feasible():
    rng = np.random.default_rng(4)
    C = rng.standard_normal((10, 3))
    d = rng.standard_normal(10)
    theta = least_violation(C, d, d - 1.0, d + 1.0, np.ones(3))
    assert np.all(theta == 0.0)


def test_least_violation_reduces_an_infeasible_violation():
    """Contradictory bounds (x >= 1 and x <= -1 on the same row): the least violation, 0."""
    C = np.array([[1.0], [1.0]])
    d = np.array([5.0, 5.0])
    theta = least_violation(C, d, np.array([1.0, -np.inf]), np.array([np.inf, -1.0]), np.ones(1))
    # the violations (1 - x)_+ and (x + 1)_+ balance at x = 0
    assert abs(float(C[0] @ theta + d[0])) < 1e-6


def test_triangular_factor_by_experiment_is_the_whole_factor():
    """Per-experiment reduction on each block's own columns, then once more:
    the same least-squares problem as one QR of all rows (R^T R, R^T c and
    the solution), for blocks that touch only the shared and their own columns."""
    rng = np.random.default_rng(3)
    n_shared, n_own, m = 3, 4, 6
    sizes = [5, 1, 7]  # intervals per experiment
    n = n_shared + n_own * len(sizes)
    J = sum(sizes)
    A = np.zeros((J, m, n))
    blocks, start = [], 0
    for e, size in enumerate(sizes):
        cols = np.concatenate([np.arange(n_shared), n_shared + n_own * e + np.arange(n_own)])
        A[start:start + size][:, :, cols] = rng.standard_normal((size, m, cols.size))
        blocks.append((slice(start, start + size), cols, cols))
        start += size
    b = rng.standard_normal((J, m))
    R, c = triangular_factor(A, b, blocks)
    assert R.shape == (n, n) and np.allclose(np.tril(R, -1), 0.0)
    A2, b2 = A.reshape(-1, n), b.ravel()
    assert np.allclose(R.T @ R, A2.T @ A2, rtol=1e-12, atol=1e-12)
    assert np.allclose(R.T @ c, A2.T @ b2, rtol=1e-12, atol=1e-12)
    assert np.allclose(np.linalg.solve(R, -c), np.linalg.lstsq(A2, -b2, rcond=None)[0])


def test_triangular_factor_keeps_fewer_rows_than_unknowns():
    rng = np.random.default_rng(4)
    A = rng.standard_normal((2, 1, 5))
    b = rng.standard_normal((2, 1))
    R, c = triangular_factor(A, b, [(slice(0, 2), np.arange(5), np.arange(5))])
    assert R.shape == (2, 5)
    assert np.allclose(R.T @ R, A.reshape(-1, 5).T @ A.reshape(-1, 5))


def test_least_squares_solution_is_the_minimum_norm_one_when_rank_deficient():
    """A duplicated column: QR's triangular factor is singular, the SVD's
    minimum-norm solution is returned (as numpy.linalg.lstsq gives it)."""
    rng = np.random.default_rng(5)
    M = rng.standard_normal((20, 4))
    M[:, 3] = M[:, 1]
    rhs = rng.standard_normal(20)
    w = least_squares_solution(M, rhs)
    assert np.all(np.isfinite(w))
    assert np.allclose(w, np.linalg.lstsq(M, rhs, rcond=None)[0])
    full = rng.standard_normal((20, 4))
    assert np.allclose(least_squares_solution(full, rhs), np.linalg.lstsq(full, rhs, rcond=None)[0])


def test_a_problem_without_bounded_rows_is_solved_unbounded():
    # the condensed step leaves out interval starts with no finite bound: with
    # none at all, the bounded solve is the plain damped least-squares one
    rng = np.random.default_rng(6)
    A, b = rng.standard_normal((8, 3)), rng.standard_normal(8)
    damp = np.full(3, 1e-3)
    none = (np.zeros((0, 3)), np.zeros(0), np.zeros(0), np.zeros(0))
    theta = bounded_least_squares(A, b, damp, np.ones(3, dtype=bool), *none)
    assert np.allclose(theta, np.linalg.solve(A.T @ A + np.diag(damp), -A.T @ b))
    assert np.array_equal(least_violation(*none, np.ones(3)), np.zeros(3))


def test_a_least_squares_system_that_is_not_finite_raises_without_a_native_print(capfd):
    # an oscillator started at k = -1200: LAPACK, handed NaN, printed "On entry
    # to DLASCL parameter number 4 had an illegal value" to the terminal
    M = np.ones((6, 2))
    M[2, 1] = np.nan
    with pytest.raises(np.linalg.LinAlgError, match="not finite"):
        least_squares_solution(M, np.ones(6))
    rhs = np.ones(6)
    rhs[1] = np.nan  # numpy's answer, NaN, as before
    assert np.isnan(least_squares_solution(np.ones((6, 2)), rhs)).all()
    assert "DLASCL" not in capfd.readouterr().out
