"""The sparse per-interval functions agree with the dense linear algebra they replace."""

from __future__ import annotations

import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.estimation.setup import build_setup


def _setup(name: str, codegen: bool):
    prob = pc.problem(name, seed=0)
    m, o = prob.model, prob.options
    inf = np.full(m.nx, np.inf)
    return build_setup(m, prob.experiments, prob.p0, T=o["T"], n=2, nodes=o.get("nodes", 9),
                       scheme="chebyshev", weights=np.ones(m.ny),
                       p_bounds=(np.full(m.np, -np.inf), np.full(m.np, np.inf)),
                       x_bounds=(-inf, inf), estimate_x0=True, codegen=codegen)


@pytest.mark.parametrize("name, codegen", [("vdp", False), ("cmg", True), ("fa18-roll-ail", True)])
def test_sparse_sensitivities_and_newton_step_equal_the_dense_ones(name, codegen, monkeypatch):
    # these models are small or dense enough that the sparse path does not pay
    # (sparse_pays); forced here so the two paths can be compared
    import picard_casadi.transcription.functions as transcription
    monkeypatch.setattr(transcription, "sparse_pays", lambda model: True)
    setup = _setup(name, codegen)
    tr = setup.tr
    fp = tr._fixed_point
    assert fp.sparse
    X, p = setup.X0, setup.p0
    rng = np.random.default_rng(0)
    # away from the fixed point, so the Newton step is not zero
    U = setup.U0 * (1.0 + 1e-2 * rng.standard_normal(setup.U0.shape))
    dense = tr.interval_sensitivities(X, U, p, full=True)
    sparse = tr.interval_sensitivities(X, U, p)
    for key in ("G", "dG", "xend", "dend", "S"):
        scale = max(float(np.abs(dense[key]).max()), 1e-300)
        assert np.max(np.abs(dense[key] - sparse[key])) <= 1e-10 * scale, key
    U_sparse, res = fp.sparse_newton_step(X, U, p, tr.x_scale)
    U_dense, _ = fp.newton_step(X, U, p)
    assert res > 1e-6
    assert np.max(np.abs(U_sparse - U_dense)) <= 1e-9 * np.abs(U_dense).max()
    newton_calls = []
    newton = fp.sparse_newton_step
    monkeypatch.setattr(fp, "sparse_newton_step",
                        lambda *args: newton_calls.append(1) or newton(*args))
    settled, residual, calls = tr.settle(X, U, p, tol=1e-12)
    # quadratic convergence from a 1 % perturbation (fa18-roll-ail: 0.38, 0.078,
    # 2.7e-3, 6.5e-6, 2.4e-11, 1.6e-16), and no Newton call at the settled point:
    # its residual comes from one Picard application
    assert residual <= 1e-12 and len(newton_calls) <= 5
    assert calls == 2 * len(newton_calls) + 1
