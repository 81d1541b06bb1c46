"""The products-only step (tr_solver="cg"): its products are the factorised
linearisation's, and it reaches the factorised step's estimates."""

from __future__ import annotations

import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.methods import matrix_free
from picard_casadi.methods.matrix_free import MatrixFreeGaussNewtonStep, cg_pays
from picard_casadi.models import ring
from picard_casadi.estimation.setup import build_setup


ring_model, ring_experiment = ring.build_model, ring.make_experiment


def _setup(name: str, codegen: bool, T: float | None = None):
    prob = pc.problem(name, seed=0)
    m, o = prob.model, prob.options
    inf = np.full(m.nx, np.inf)
    return build_setup(m, prob.experiments, prob.p0, T=T or o["T"], n=2, nodes=o.get("nodes", 9),
                       scheme="chebyshev", weights=np.ones(m.ny),
                       p_bounds=(np.full(m.np, -np.inf), np.full(m.np, np.inf)),
                       x_bounds=(-inf, inf), estimate_x0=True, codegen=codegen)


@pytest.mark.parametrize("name, codegen, T", [("vdp", False, None), ("fa18-roll-ail", True, 0.05),
                                             ("fa18-roll-ail", True, None)])
def test_products_are_the_factorised_linearisation(name, codegen, T):
    # fa18-roll-ail at its own T = 0.1: the sweeps stop short of their limit
    # (last change 9e-8) and the products are as accurate as that says
    setup = _setup(name, codegen, T)
    tr, d = setup.tr, setup.disc
    X, p = setup.X0, setup.p0
    U, _, _ = tr.settle(X, setup.U0, p, tol=1e-12)
    sens = tr.interval_sensitivities(X, U, p)
    ops = tr.interval_products(X, U, p)
    J, nx, np_, ny, M = d.n_intervals, d.model.nx, d.model.np, d.model.ny, d.M
    rng = np.random.default_rng(1)
    dX, dp = rng.standard_normal((J, nx)), rng.standard_normal(np_)
    offsets = rng.standard_normal((J, nx))
    # given starts: each interval's own derivatives, as accurate as the
    # sweeps' last change says
    used, dxend, dG = ops.forward(None, dp, dX=dX)
    assert (ops.change < matrix_free.SWEEP_CHANGE_TOL) == (T is not None or name == "vdp")
    tol = max(10.0 * ops.change, 1e-12)
    z = np.concatenate([dX, np.tile(dp, (J, 1))], axis=1)
    exact_end = np.einsum("jab,jb->ja", sens["dend"], z)
    exact_G = np.einsum("jmyb,jb->jym", sens["dG"], z)
    assert np.array_equal(used, dX)
    assert np.max(np.abs(dxend - exact_end)) <= tol * np.abs(exact_end).max()
    assert np.max(np.abs(dG - exact_G)) <= tol * np.abs(exact_G).max()
    # node moves: the node sensitivities S = dU/dz
    exact_U = np.einsum("jkab,jb->jak", sens["S"], z)
    assert np.max(np.abs(ops.last_nodes - exact_U)) <= tol * np.abs(exact_U).max()
    # chained along each experiment, with offsets: dx_{j+1} = dxend_j + offset_j
    E = len(d.intervals_of)
    dx0 = rng.standard_normal((E, nx))
    used, dxend, dG = ops.forward(dx0, dp, offsets=offsets)
    for e, sl in enumerate(d.intervals_of):
        x = dx0[e]
        for j in range(sl.start, sl.stop):
            assert np.allclose(used[j], x, rtol=0, atol=100 * tol * np.abs(x).max())
            x = sens["dend"][j] @ np.concatenate([x, dp]) + offsets[j]
    # the transpose is the exact transpose of the chained product (no offsets)
    used, _, dG = ops.forward(dx0, dp)
    w_G, w_start = rng.standard_normal(dG.shape), rng.standard_normal((J, nx))
    bar_x0, bar_p = ops.transpose(w_G, w_start)
    lhs = float(np.sum(w_G * dG) + np.sum(w_start * used))
    rhs = float(np.sum(bar_x0 * dx0) + bar_p @ dp)
    assert abs(lhs - rhs) <= 1e-12 * abs(lhs)
    assert dG.shape == (J, ny, M)


def test_compiled_and_virtual_machine_products_agree():
    results = []
    for codegen in (True, False):
        setup = _setup("vdp", codegen)
        tr = setup.tr
        U, _, _ = tr.settle(setup.X0, setup.U0, setup.p0, tol=1e-12)
        ops = tr.interval_products(setup.X0, U, setup.p0)
        nx = setup.disc.model.nx
        used, dxend, dG = ops.forward(np.ones((1, nx)), np.array([0.3, -0.2]),
                                      offsets=np.full((setup.disc.n_intervals, nx), 0.1))
        bar = ops.transpose(dG)
        results.append((used, dxend, dG, *bar))
    for a, b in zip(*results):
        assert np.allclose(a, b, rtol=1e-12, atol=1e-13)


# the unweighted loss: one solve per call (the likelihood re-weights in rounds)
RING = dict(T=0.5, refine=False, uncertainty=False, p_bounds=([0, 0], [10, 10]), weights="none")


@pytest.fixture
def steps(monkeypatch) -> list:
    """Every products-only step object made while the test runs."""
    made = []
    init = MatrixFreeGaussNewtonStep.__init__

    def record(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(MatrixFreeGaussNewtonStep, "__init__", record)
    return made


@pytest.fixture(scope="module")
def ring20():
    model = ring_model(20)
    return model, ring_experiment(model)


def test_cg_step_reaches_the_factorised_estimates_on_a_ring(ring20, steps):
    model, exp = ring20
    exact = pc.estimate(model, [exp], [0.5, 0.3], "picard-gn", tr_solver="exact", **RING)
    cg = pc.estimate(model, [exp], [0.5, 0.3], "picard-gn", tr_solver="cg", **RING)
    assert exact.success and cg.success
    assert np.max(np.abs(cg.p - exact.p) / np.abs(exact.p)) < 1e-6
    assert np.max(np.abs(np.asarray(cg.x0) - np.asarray(exact.x0))) < 1e-6
    rule, = steps
    # every step from products: the preconditioner formed once, a few
    # conjugate-gradient iterations per step, no factorised step
    assert rule.factorised_steps == 0
    assert rule.preconditioner_builds == 1
    assert max(rule.cg_iterations) <= matrix_free.REFRESH_ITERATIONS


def test_cg_step_keeps_a_parameter_on_its_bound(ring20):
    # the truth p1 = 0.5 lies outside the box: both steps stop on the bound,
    # where the model cannot fit the data (the lack-of-fit check says so)
    model, exp = ring20
    kw = dict(RING, p_bounds=([0, 0], [10, 0.4]))
    with pytest.warns(pc.FitWarning):
        exact = pc.estimate(model, [exp], [0.5, 0.3], "picard-gn", tr_solver="exact", **kw)
    with pytest.warns(pc.FitWarning):
        cg = pc.estimate(model, [exp], [0.5, 0.3], "picard-gn", tr_solver="cg", **kw)
    assert cg.success and exact.success
    assert cg.p[1] == pytest.approx(0.4, abs=1e-12)
    assert cg.p[0] == pytest.approx(exact.p[0], rel=1e-6)


@pytest.mark.filterwarnings("ignore::picard_casadi.DiscretisationWarning")
def test_cg_step_takes_the_factorised_step_where_the_sweeps_do_not_converge(steps):
    # intervals so long that 20 linear Picard sweeps do not reach the fixed
    # point: the step notices (the last sweep's change) and falls back
    model = pc.problem("vdp", seed=0)
    res = model.estimate(tr_solver="cg", T=2.0, uncertainty=False, refine=False)
    ref = model.estimate(tr_solver="exact", T=2.0, uncertainty=False, refine=False)
    assert res.success
    assert np.allclose(res.p, ref.p, rtol=1e-6)
    assert steps[0].factorised_steps > 0
    assert "sweeps" in steps[0].factorised_reason
    assert any("tr_solver='cg'" in w and "factorised step" in w for w in res.warnings)
    assert not any("tr_solver" in w for w in ref.warnings)


def test_tr_solver_auto_takes_cg_for_large_sparsely_coupled_models():
    assert cg_pays(ring_model(matrix_free.CG_MIN_STATES))
    assert not cg_pays(ring_model(matrix_free.CG_MIN_STATES - 1))
    assert not cg_pays(pc.problem("cmg", seed=0).model)  # densely coupled


@pytest.mark.parametrize("kwargs, words", [
    (dict(tr_solver="lsmr"), ["tr_solver", "'exact'", "'cg'"]),
    (dict(tr_solver="cg", continuity="multiplier"), ["tr_solver='cg'", "continuity"]),
    (dict(tr_solver="cg", hessian="exact"), ["tr_solver='cg'", "hessian"]),
])
def test_tr_solver_refuses_what_it_cannot_do(kwargs, words):
    prob = pc.problem("vdp", seed=0)
    with pytest.raises(ValueError) as err:
        prob.estimate(**kwargs)
    for w in words:
        assert w in str(err.value)


@pytest.mark.parametrize("estimate_x0", [True, False])
def test_cg_step_with_two_experiments(ring20, estimate_x0):
    # each experiment's chain restarts at its own first interval; with x0
    # known the step's unknowns are the parameters alone
    model, exp = ring20
    N = model.nx
    x0_second = 0.5 * np.sin(2 * np.pi * np.arange(N) / N)
    second = pc.simulate_experiment(model, x0_second, [0.8, 0.5], np.linspace(0, 6, 31),
                                    noise_std=0.01, seed=5)
    kw = dict(RING, estimate_x0=estimate_x0)
    exact = pc.estimate(model, [exp, second], [0.5, 0.3], "picard-gn", tr_solver="exact", **kw)
    cg = pc.estimate(model, [exp, second], [0.5, 0.3], "picard-gn", tr_solver="cg", **kw)
    assert exact.success and cg.success
    assert np.max(np.abs(cg.p - exact.p) / np.abs(exact.p)) < 1e-6
    for a, b in zip(cg.x0, exact.x0):
        assert np.max(np.abs(np.asarray(a) - np.asarray(b))) < 1e-6


@pytest.mark.filterwarnings("ignore::picard_casadi.FitWarning")
def test_cg_step_hands_a_step_into_the_state_box_to_the_factorised_step(ring20, steps):
    # x0 in [-1, 1], which the truth touches: steps reach the box, which
    # the products-only step cannot keep (clipping its steps collapsed the
    # trust region on a Fisher-KPP model); the factorised step's active set does
    model, exp = ring20
    kw = dict(RING, x0_bounds=(-1.0, 1.0))
    exact = pc.estimate(model, [exp], [0.5, 0.3], "picard-gn", tr_solver="exact", **kw)
    cg = pc.estimate(model, [exp], [0.5, 0.3], "picard-gn", tr_solver="cg", **kw)
    assert exact.success and cg.success
    assert np.max(np.abs(cg.p - exact.p) / np.abs(exact.p)) < 1e-6
    assert np.max(np.abs(np.asarray(cg.x0[0]))) <= 1.0 + 1e-12
    assert "x0_bounds" in steps[0].factorised_reason
    assert any("x0_bounds or p_bounds" in w for w in cg.warnings)
