"""Condensing: the interval starts as affine functions of (dp, dx0) per experiment."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from picard_casadi.methods.condensing import condense, parameter_columns


def test_condense_follows_the_continuity_chain_of_each_experiment():
    """Experiments of 4, 1 and 3 intervals, one with a fixed first-state entry:
    S_j, s_j and the rows A_j, b_j are those of the chain
    dx_{j+1} = E_j dx_j + F_j dp + c_j, started at each experiment's own dx0."""
    rng = np.random.default_rng(7)
    nx, n_p, m = 3, 2, 5
    sizes = [4, 1, 3]
    bounds = np.cumsum([0] + sizes)
    disc = SimpleNamespace(intervals_of=[slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])])
    p_cols = np.arange(n_p)
    free = [np.arange(nx), np.array([0, 2]), np.arange(nx)]
    x0_cols, k = [], n_p
    for comps in free:
        x0_cols.append((comps, np.arange(k, k + comps.size)))
        k += comps.size
    P = parameter_columns(n_p, p_cols, k, np.ones(n_p, dtype=bool))
    J = bounds[-1]
    E = rng.standard_normal((J, nx, nx))
    F = rng.standard_normal((J, nx, n_p))
    c = rng.standard_normal((J, nx))
    Jx = rng.standard_normal((J, m, nx))
    Jp = rng.standard_normal((J, m, n_p))
    r = rng.standard_normal((J, m))
    rows = condense(disc, x0_cols, P, Jx, Jp, r, E, F, c)
    # each interval on its experiment's own columns: the parameters' 2 and 3 slots
    assert rows.A.shape == (J, m, n_p + nx) and rows.S.shape == (J, nx, n_p + nx)
    A, S_all = rows.dense()
    b, s_all = rows.b, rows.s
    theta = rng.standard_normal(k)
    dp = P @ theta
    starts = rows.starts(theta)
    for e, sl in enumerate(disc.intervals_of):
        comps, cols = x0_cols[e]
        dx = np.zeros(nx)
        dx[comps] = theta[cols]
        for j in range(sl.start, sl.stop):
            assert np.allclose(S_all[j] @ theta + s_all[j], dx)
            assert np.allclose(starts[j], dx)
            assert np.allclose(A[j] @ theta + b[j], r[j] + Jx[j] @ dx + Jp[j] @ dp)
            dx = E[j] @ dx + F[j] @ dp + c[j]
    # the sums into theta's columns: A^T b, per-interval quadratic forms, rows
    assert np.allclose(rows.gradient(), np.einsum("jmt,jm->t", A, b))
    H = rng.standard_normal((J, n_p + nx, n_p + nx))
    assert np.allclose(rows.quadratic_form(H), sum(
        S.T @ Hj @ S for S, Hj in zip(dense_columns(rows, H), H)))
    intervals = np.array([0, 4, 6])
    assert np.allclose(rows.global_rows(rows.S[intervals, 1], intervals), S_all[intervals, 1])


def dense_columns(rows, H):
    """Per interval, the local-to-theta column map as a (w, n_theta) 0/1 matrix."""
    out = []
    for e, sl in enumerate(rows.intervals_of):
        M = np.zeros((rows.columns.shape[1], rows.n_theta + 1))
        M[np.arange(rows.columns.shape[1]), rows.columns[e]] = 1.0
        out += [M[:, :rows.n_theta]] * (sl.stop - sl.start)
    return out
