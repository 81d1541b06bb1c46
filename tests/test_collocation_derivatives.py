"""The collocation NLP's Hessian written from its structure equals CasADi's."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.estimate import build_setup
from picard_casadi.methods.collocation_derivatives import constraint_jacobian, lagrangian_hessian
from picard_casadi.methods.collocation_layout import collocation_parameters, interval_data
from picard_casadi.methods.ipopt import collocation_expressions


def _setup(model, experiments, p0, T, nodes):
    inf = np.full(model.nx, np.inf)
    return build_setup(model, experiments, np.asarray(p0, float), T=T, n=2, nodes=nodes,
                       scheme="chebyshev", weights=np.ones(model.ny),
                       p_bounds=(np.full(model.np, -np.inf), np.full(model.np, np.inf)),
                       x_bounds=(-inf, inf), estimate_x0=True, codegen=False)


class _Nlp:
    """The generated form's NLP of ``setup`` in symbols, and a perturbed start."""

    def __init__(self, setup, seed: int) -> None:
        disc = self.disc = setup.disc
        m = disc.model
        J, K, nx, np_ = disc.n_intervals, disc.K, m.nx, m.np
        n_data = collocation_parameters(disc, setup.tr._Wt).size
        self.w = ca.MX.sym("w", np_ + J * nx * K)
        self.data = ca.MX.sym("data", n_data + nx + np_)
        self.scales = (self.data[n_data:n_data + nx], self.data[n_data + nx:])
        self.pieces = interval_data(disc, self.data[:n_data])
        defects, cont, self.r = collocation_expressions(setup, self.w, self.data[:n_data],
                                                        self.scales)
        self.g = ca.vertcat(ca.vec(defects), ca.vec(cont))
        self.rng = np.random.default_rng(seed)
        self.params = np.concatenate([collocation_parameters(disc, setup.tr._Wt),
                                      setup.x_scale, setup.p_scale])
        w0 = np.concatenate([setup.p0 / setup.p_scale, (setup.U0 / setup.x_scale[None, :, None])
                             .transpose(0, 2, 1).ravel()])
        self.w0 = w0 * (1.0 + 0.05 * self.rng.standard_normal(w0.size))


def _both_hessians(setup, seed=0):
    """CasADi's Hessian of the NLP's Lagrangian and :func:`lagrangian_hessian`,
    at a perturbed start with random multipliers."""
    nlp = _Nlp(setup, seed)
    sigma, lam = ca.MX.sym("sigma"), ca.MX.sym("lam", nlp.g.numel())
    lagrangian = sigma * 0.5 * ca.sumsqr(nlp.r) + ca.dot(lam, nlp.g)
    reference = ca.Function("ref", [nlp.w, nlp.data, sigma, lam],
                            [ca.triu(ca.hessian(lagrangian, nlp.w)[0])])
    structured = lagrangian_hessian(nlp.disc, nlp.w, nlp.data, nlp.pieces, nlp.scales)
    lam0 = nlp.rng.standard_normal(nlp.g.numel())
    return (reference(nlp.w0, nlp.params, 0.7, lam0),
            structured(nlp.w0, nlp.params, 0.7, lam0))


def _assert_same(a, b):
    assert a.sparsity() == b.sparsity()
    a, b = np.asarray(ca.densify(a)), np.asarray(ca.densify(b))
    assert np.max(np.abs(a - b)) <= 1e-12 * np.max(np.abs(a))


@pytest.mark.parametrize("name", ["lotka-volterra", "fa18-roll-ail"])
def test_equals_casadis_hessian_on_registered_problems(name):
    prob = pc.problem(name, seed=0)
    o = prob.options
    # long intervals: few of them, so that CasADi's own Hessian builds fast
    _assert_same(*_both_hessians(_setup(prob.model, prob.experiments, prob.p0, 1.0,
                                        o.get("nodes", 7))))


def test_equals_casadis_hessian_with_nonlinear_outputs_and_inputs():
    """Outputs curved in the states and the parameters (the per-sample term), an
    input, a parameter that enters only the outputs, two experiments."""
    x = ca.SX.sym("x", 2)
    p = ca.SX.sym("p", 3)
    u = ca.SX.sym("u")
    rhs = ca.vertcat(x[1], -p[0] * ca.sin(x[0]) - p[1] * x[1] + u)
    y = ca.vertcat(ca.sin(x[0]) * p[2], x[0] * x[1], ca.exp(0.1 * p[1] * x[1]))
    model = pc.Model(x=x, p=p, u=u, rhs=rhs, y=y, name="curved")
    p_true = np.array([2.0, 0.3, 1.5])
    outputs = ca.Function("y", [x, p, u], [y])
    experiments = []
    t = np.linspace(0.0, 2.0, 41)
    for e, x0 in enumerate(([0.5, 0.0], [-0.3, 0.4])):
        def inputs(s, e=e):
            return np.array([0.2 * np.sin(s + e)])
        states = pc.simulate(model, x0, p_true, t, inputs)
        Y = np.array([np.asarray(outputs(xs, p_true, inputs(s))).ravel()
                      for s, xs in zip(t, states)])
        experiments.append(pc.Experiment(t=t, y=Y, u=inputs, x0=np.array(x0), name=f"e{e}"))
    setup = _setup(model, experiments, [1.5, 0.5, 1.0], T=0.25, nodes=5)
    _assert_same(*_both_hessians(setup, seed=3))
    (g_ref, jac_ref), (g, jac) = _both_jacobians(setup)
    np.testing.assert_array_equal(np.asarray(g_ref), np.asarray(g))
    _assert_same(jac_ref, jac)


def _both_jacobians(setup):
    """CasADi's constraints and their Jacobian and :func:`constraint_jacobian`'s."""
    nlp = _Nlp(setup, 1)
    reference = ca.Function("ref", [nlp.w, nlp.data], [nlp.g, ca.jacobian(nlp.g, nlp.w)])
    structured = constraint_jacobian(nlp.disc, nlp.w, nlp.data, nlp.g, nlp.pieces, nlp.scales)
    return reference(nlp.w0, nlp.params), structured(nlp.w0, nlp.params)


@pytest.mark.parametrize("name", ["lotka-volterra", "fa18-roll-ail"])
def test_constraint_jacobian_equals_casadis(name):
    prob = pc.problem(name, seed=0)
    o = prob.options
    setup = _setup(prob.model, prob.experiments, prob.p0, 1.0, o.get("nodes", 7))
    (g_ref, jac_ref), (g, jac) = _both_jacobians(setup)
    np.testing.assert_array_equal(np.asarray(g_ref), np.asarray(g))
    _assert_same(jac_ref, jac)


def test_a_model_without_parameters():
    """Only the initial states are estimated: no parameter columns."""
    x = ca.SX.sym("x", 2)
    model = pc.Model(x=x, p=ca.SX.sym("p", 0), rhs=ca.vertcat(x[1], -x[0] - 0.1 * x[1] ** 3),
                     y=ca.vertcat(x[0], x[0] * x[1]), name="no-parameters")
    t = np.linspace(0.0, 3.0, 31)
    Y = np.column_stack([np.cos(t), -np.cos(t) * np.sin(t)])
    setup = _setup(model, [pc.Experiment(t=t, y=Y, name="e")], np.zeros(0), T=0.5, nodes=5)
    _assert_same(*_both_hessians(setup))
    (g_ref, jac_ref), (g, jac) = _both_jacobians(setup)
    np.testing.assert_array_equal(np.asarray(g_ref), np.asarray(g))
    _assert_same(jac_ref, jac)


@pytest.mark.parametrize("hessian", ["exact", "gauss-newton"])
def test_virtual_machine_forms_agree(hessian):
    """Without code generation IPOPT solves the per-interval NLP with these
    derivatives (the default) or, with ``expand=True``, the whole NLP expanded
    to SX with CasADi's: the same NLP, so the same path and optimum."""
    prob = pc.problem("lotka-volterra", seed=1)
    kw = dict(codegen=False, refine=False, uncertainty=False, hessian=hessian)
    per_interval = prob.estimate("ipopt", **kw)
    flat = prob.estimate("ipopt", expand=True, **kw)
    assert per_interval.success and flat.success
    assert per_interval.iterations == flat.iterations
    np.testing.assert_allclose(per_interval.p, flat.p, rtol=1e-9)


def test_generated_derivatives_do_not_grow_with_the_intervals():
    """The block diagonals are one gather each, not a split per interval: the
    functions' instructions (the C code, whose compile time grew faster than
    its length: 27 s at 1000 intervals, over 9 minutes at 10 000) are as many
    for 40 intervals as for 10; only the constant index tables grow."""
    prob = pc.problem("lotka-volterra", seed=0)
    counts = []
    for T in (1.0, 0.25):
        nlp = _Nlp(_setup(prob.model, prob.experiments, prob.p0, T, 5), 0)
        jac = constraint_jacobian(nlp.disc, nlp.w, nlp.data, nlp.g, nlp.pieces, nlp.scales)
        hess = lagrangian_hessian(nlp.disc, nlp.w, nlp.data, nlp.pieces, nlp.scales)
        counts.append((nlp.disc.n_intervals, jac.n_instructions(), hess.n_instructions()))
    (j1, *few), (j2, *many) = counts
    assert j2 >= 4 * j1
    assert many == few
