"""The structured (block tridiagonal + arrow) normal equations."""

import numpy as np

from picard_casadi.transcription.blocksolve import NormalEquations, jacobian_times


def _random_problem(seed=0, J=9, m=7, nx=3, np_=2):
    rng = np.random.default_rng(seed)
    Jx = rng.normal(size=(J, m, nx))
    Jp = rng.normal(size=(J, m, np_))
    r = rng.normal(size=(J, m))
    has_next = np.ones(J, bool)
    has_next[[3, J - 1]] = False  # three experiments
    a = rng.uniform(0.5, 2.0, J) * has_next
    dense = np.zeros((J * m, np_ + J * nx))
    for j in range(J):
        rows = slice(j * m, (j + 1) * m)
        dense[rows, :np_] = Jp[j]
        dense[rows, np_ + j * nx:np_ + (j + 1) * nx] = Jx[j]
        if has_next[j]:
            dense[j * m + m - nx:(j + 1) * m, np_ + (j + 1) * nx:np_ + (j + 2) * nx] = -a[j] * np.eye(nx)
    return r, Jx, Jp, a, has_next, dense


def test_blocks_equal_the_dense_normal_matrix():
    r, Jx, Jp, a, hn, dense = _random_problem()
    ne = NormalEquations(r, Jx, Jp, a, hn)
    H, g = ne.dense()
    assert np.allclose(H, dense.T @ dense, atol=1e-12)
    assert np.allclose(g, dense.T @ r.ravel(), atol=1e-12)


def test_structured_solve_equals_dense_solve_with_fixed_variables():
    r, Jx, Jp, a, hn, dense = _random_problem(seed=4)
    ne = NormalEquations(r, Jx, Jp, a, hn)
    H, g = ne.dense()
    free_x = np.ones(Jx.shape[0:1] + Jx.shape[2:], bool)
    free_x[0] = False          # a known x0
    free_x[5, 1] = False       # an active bound
    free_p = np.array([True, False])
    mu = 0.37
    dX, dp = ne.solve(mu, free_x, free_p)
    free = np.concatenate([free_p, free_x.ravel()])
    d = np.zeros(free.size)
    Hf = H[np.ix_(free, free)] + mu * np.diag(np.diag(H)[free])
    d[free] = np.linalg.solve(Hf, -g[free])
    assert np.allclose(dp, d[:2], atol=1e-12)
    assert np.allclose(dX.ravel(), d[2:], atol=1e-12)


def test_jacobian_times_matches_dense_product():
    r, Jx, Jp, a, hn, dense = _random_problem(seed=2)
    rng = np.random.default_rng(5)
    dX = rng.normal(size=(Jx.shape[0], Jx.shape[2]))
    dp = rng.normal(size=Jp.shape[2])
    out = jacobian_times(Jx, Jp, a, hn, dX, dp)
    assert np.allclose(out.ravel(), dense @ np.concatenate([dp, dX.ravel()]), atol=1e-12)
