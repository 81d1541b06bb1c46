"""The residual Jacobian held block by block gives the dense matrix's products."""

from __future__ import annotations

import numpy as np

from picard_casadi.transcription.block_jacobian import BlockJacobian


def _random_blocks(rng):
    # 2 parameters, 3 experiments with 2, 0 and 3 initial states, 7 intervals
    columns = [np.array([0, 1, 2, 3]), np.array([0, 1]), np.array([0, 1, 4, 5, 6])]
    exp_of = np.array([0, 0, 1, 2, 2, 2, 0])
    blocks = [rng.standard_normal((rng.integers(0, 6), columns[e].size)) for e in exp_of]
    return BlockJacobian(blocks=blocks, columns=columns, exp_of=exp_of, n=7)


def test_products_equal_the_dense_matrix_s():
    rng = np.random.default_rng(4)
    J = _random_blocks(rng)
    D = J.dense()
    assert D.shape == J.shape
    assert np.allclose(J.gram(), D.T @ D)
    R = J.triangular()
    assert R.shape[0] <= J.n and np.allclose(R.T @ R, D.T @ D)
    start = 0
    for j, b in enumerate(J.blocks):
        v = rng.standard_normal((b.shape[0], 2))
        assert np.allclose(J.rows_transposed(j, v), D[start:start + b.shape[0]].T @ v)
        start += b.shape[0]

