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
    A, b, S_all, s_all = condense(disc, x0_cols, P, Jx, Jp, r, E, F, c)
    theta = rng.standard_normal(k)
    dp = P @ theta
    for e, sl in enumerate(disc.intervals_of):
        comps, cols = x0_cols[e]
        dx = np.zeros(nx)
        dx[comps] = theta[cols]
        for j in range(sl.start, sl.stop):
            assert np.allclose(S_all[j] @ theta + s_all[j], dx)
            assert np.allclose(A[j] @ theta + b[j], r[j] + Jx[j] @ dx + Jp[j] @ dp)
            dx = E[j] @ dx + F[j] @ dp + c[j]
