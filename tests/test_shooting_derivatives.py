"""The multiple-shooting NLP's derivatives against finite differences.

CasADi 3.7.2 and 3.8.1 returned a wrong constraint Jacobian for this NLP
(``nlp_jac_g`` at Van der Pol's start, two intervals of 5: the first row 0
where finite differences give -3.94, 0.72, 3.62, 1.79; the second row half
its size), and shooting then converged on the certificate's test case by
luck; 3.8.2 agrees with finite differences, which is why the package asks
for it.  This test fails on a CasADi that gets them wrong.  The functions
read here are the package's own (``methods.shared_derivatives``: one
sensitivity integration per iterate serves the gradient, the Jacobian and the
Gauss-Newton Hessian), so the test checks those as well.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.methods import shooting
from picard_casadi.transcription.discretisation import to_map_layout
from picard_casadi.transcription.interval_integration import interval_integrator


def _built_nlp(monkeypatch, model, experiments, p0, **options):
    """The shooting NLP ``estimate`` builds (one iteration) and its data vector
    (the weights, then the samples)."""
    built = []
    init = shooting.ShootingNLP.__init__

    def keep(self, setup, opts):
        init(self, setup, opts)
        built.append(self)

    with monkeypatch.context() as mp:
        mp.setattr(shooting.ShootingNLP, "__init__", keep)
        pc.estimate(model, experiments, p0, "shooting", max_iter=1, uncertainty=False,
                    **options)
    nlp = built[0]
    data = np.concatenate([to_map_layout(nlp.setup.tr._Wt).ravel(order="F"),
                           to_map_layout(nlp.setup.disc.y).ravel(order="F")])
    return nlp, data


def _shooting_nlp(monkeypatch, T: float):
    """The shooting NLP built for Van der Pol's start (one iteration, mesh ``T``)
    and its data vector."""
    vdp = pc.problem("vdp", seed=0)
    return _built_nlp(monkeypatch, vdp.model, vdp.experiments, vdp.p0, p_bounds=vdp.p_bounds,
                      T=T, refine=0)


@pytest.mark.parametrize("T", [5.0, 2.5])
def test_the_constraint_jacobian_and_gradient_are_the_derivatives(monkeypatch, T):
    nlp, data = _shooting_nlp(monkeypatch, T)
    w0 = nlp.start()
    for value, derivative in (("nlp_g", "nlp_jac_g"), ("nlp_f", "nlp_grad_f")):
        fn = nlp.solver.get_function(value)
        exact = np.array(nlp.solver.get_function(derivative)(w0, data)[1])
        exact = exact.reshape(-1, w0.size)
        step = 1e-6
        fd = np.column_stack([
            (np.array(fn(w0 + step * e, data)) - np.array(fn(w0 - step * e, data))).ravel()
            / (2 * step) for e in np.eye(w0.size)])
        assert np.allclose(exact, fd, rtol=1e-4, atol=1e-5 * np.abs(fd).max()), (derivative,
                                                                               exact, fd)


def test_the_sensitivities_are_integrated_once_per_iterate(monkeypatch):
    # IPOPT asks for the gradient, the constraint Jacobian and the Hessian at
    # each iterate; CasADi's own functions integrated the sensitivities for
    # each of them (an adjoint sweep for the gradient): three times the work
    from picard_casadi.methods import shared_derivatives

    runs, points = [], set()
    evaluate = shared_derivatives._OnePointCache.__call__

    def counted(self, x, p):
        key = self._key
        out = evaluate(self, x, p)
        if self._key != key:
            runs.append(self._key)
        points.add(self._key)
        return out

    monkeypatch.setattr(shared_derivatives._OnePointCache, "__call__", counted)
    vdp = pc.problem("vdp", seed=0)
    res = pc.estimate(vdp.model, vdp.experiments, vdp.p0, "shooting", p_bounds=vdp.p_bounds,
                      T=2.5, refine=0, uncertainty=False)
    assert res.success, res.message
    assert len(points) > 5
    assert len(runs) == len(points), (len(runs), len(points))


def test_a_sparse_gradient_is_refused():
    from picard_casadi.methods.shared_derivatives import nlpsol_derivatives

    x, p = ca.MX.sym("x", 2), ca.MX.sym("p", 0)
    grad = ca.vertcat(x[0], ca.MX(1, 1))
    f = ca.Function("f", [x, p], [ca.sumsqr(x), grad, ca.MX(0, 1), ca.MX(0, 2),
                                  ca.MX.eye(2)])
    with pytest.raises(ValueError, match="dense"):
        nlpsol_derivatives(f, 0)


def test_no_adjoint_sweep_follows_the_solve(monkeypatch):
    # CasADi's nlpsol computes the multipliers of the NLP's parameters (here the
    # weights and the data) after IPOPT returns, by an adjoint sweep through
    # CVODES, unless told not to: nothing uses them, and on Robertson's kinetics
    # from log10 k = 1 that sweep failed (CVodeB: CV_TOO_MUCH_WORK) after IPOPT had
    # converged, turning the solve into Evaluation_Failed (now converged, 74
    # iterations).  Not computed, they come back NaN
    nlp, data = _shooting_nlp(monkeypatch, 2.5)
    sol = nlp.solver(x0=nlp.start(), p=data, lbx=nlp.lbw, ubx=nlp.ubw, lbg=0, ubg=0)
    assert np.all(np.isnan(np.array(sol["lam_p"])))


def test_the_sensitivity_states_give_casadis_derivatives_on_a_petab_problem(monkeypatch):
    # the derivatives IPOPT is given come from the model's sensitivities
    # integrated as states and gathered into the Jacobian's sparsity; on a
    # problem with scaled states, 48 intervals over several experiments, they
    # must be CasADi's own derivatives of the interval integrators (both at
    # the package's CVODES tolerances)
    name = "Bruno_JExpBot2016"
    prob = pc.read_petab(Path(__file__).parent / "data" / "petab" / name / f"{name}.yaml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nlp, data = _built_nlp(monkeypatch, prob.model, prob.experiments, prob.parameters,
                               noise=prob.noise)
    rtol, atol, max_steps = nlp._cvodes
    setup = nlp.setup
    disc, m = setup.disc, setup.disc.model
    J, M, nx, np_ = disc.n_intervals, disc.M, m.nx, m.np
    assert np.ptp(setup.x_scale) > 0 and J > 10
    states = interval_integrator(disc, rtol, atol, max_steps).function
    xs, ps = ca.DM(setup.x_scale), ca.DM(setup.p_scale)
    w = ca.MX.sym("w", np_ + J * nx)
    X = ca.reshape(w[np_:], nx, J) * ca.repmat(xs, 1, J)
    Xs, xend = states(X, w[:np_] * ps)
    reference = ca.Function("reference", [w], [ca.jacobian(ca.vec(Xs), w),
                                               ca.jacobian(ca.vec(xend), w)])
    w0 = nlp.start()
    a_S, a_E = (np.asarray(ca.densify(v)) for v in reference(w0))
    # the package's derivatives of the sampled and end states at the same
    # point: the sensitivity model's interval states, gathered
    X0 = w0[np_:].reshape(J, nx).T * setup.x_scale[:, None]
    Z0 = np.vstack([X0, np.tile(shooting.initial_sensitivities(m)[:, None], (1, J))])
    aug = interval_integrator(disc, rtol, atol, max_steps,
                              model=shooting.sensitivity_model(m)).function
    Zs, zend = aug(Z0, w0[:np_] * setup.p_scale)
    b_S, b_E = (np.asarray(ca.densify(ca.evalf(v))) for v in shooting._sensitivity_matrices(
        ca.vertcat(ca.vec(Zs), ca.vec(zend)), J, M, nx, np_, (xs, ps)))
    for a, b in ((a_S, b_S), (a_E, b_E)):
        assert a.shape == b.shape
        assert np.abs(a - b).max() <= 1e-6 * np.abs(a).max()
    # and the constraints' Jacobian IPOPT is given is the chain rule through them
    jac_g = np.asarray(ca.densify(nlp.solver.get_function("nlp_jac_g")(w0, data)[1]))
    nxt = [j for j in range(J) if disc.has_next[j]]
    # the gap (x_end,j - X_j+1) / x_scale in w, whose X_j+1 block is X_j+1 / x_scale
    eye = np.eye(np_ + J * nx)
    expected = np.vstack([a_E[j * nx:(j + 1) * nx] / setup.x_scale[:, None]
                          - eye[np_ + (j + 1) * nx:np_ + (j + 2) * nx] for j in nxt])
    assert np.abs(jac_g - expected).max() <= 1e-6 * np.abs(expected).max()
