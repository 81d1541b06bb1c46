"""Second derivatives of the Picard fixed point against finite differences."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.estimate import build_setup
from picard_casadi.methods.least_squares import reach_cosine
from picard_casadi.transcription.second_order import FixedPointHessian


def _pendulum_setup():
    x = ca.SX.sym("x", 2)
    p = ca.SX.sym("p", 2)
    rhs = ca.vertcat(x[1], -p[0] * ca.sin(x[0]) - p[1] * x[1] * x[1])
    y = ca.vertcat(p[0] * ca.sin(x[0]), x[1] ** 3)  # nonlinear outputs, p in them
    model = pc.Model(x=x, p=p, rhs=rhs, y=y, name="pendulum")
    t = np.linspace(0.0, 2.0, 21)
    rng = np.random.default_rng(3)
    exp = pc.Experiment(t=t, y=rng.normal(size=(t.size, 2)), x0=np.array([1.0, 0.3]), name="e")
    big = np.array([1e3, 1e3])
    return build_setup(model, [exp], np.array([2.0, 0.4]), T=0.25, n=2, nodes=7,
                       scheme="chebyshev", weights=np.ones(2), p_bounds=(-big, big),
                       x_bounds=(-big, big), estimate_x0=True, codegen=False)


def test_contracted_hessian_matches_finite_differences_of_the_gradient():
    """grad^2 (w^T G + lambda^T x_end) of the fixed point, every interval at once."""
    setup = _pendulum_setup()
    tr, disc = setup.tr, setup.disc
    J, M, nx, ny = disc.n_intervals, disc.M, disc.model.nx, disc.model.ny
    X, p = setup.X0.copy(), setup.p0.copy()
    U, res, _ = tr.settle(X, tr.nodes_np(setup.U0), p, tol=1e-14)
    assert res < 1e-12
    rng = np.random.default_rng(0)
    w = rng.normal(size=(J, M, ny))
    lam = rng.normal(size=(J, nx))

    def gradient(X, U, p):
        U, _, _ = tr.settle(X, U, p, tol=1e-14)
        sens = tr.interval_sensitivities(X, U, p, full=True)
        return (np.einsum("jmoz,jmo->jz", sens["dG"], w)
                + np.einsum("jaz,ja->jz", sens["dend"], lam))

    sens = tr.interval_sensitivities(X, U, p, full=True)
    H = FixedPointHessian(disc).contracted(U, p, sens, tr.last_fixed_point_inverse, w, lam)
    eps = 1e-5
    for col in range(nx + 2):
        Xp, Xm, pp, pm = X.copy(), X.copy(), p.copy(), p.copy()
        if col < nx:
            Xp[:, col] += eps  # every interval's own start: intervals are independent
            Xm[:, col] -= eps
        else:
            pp[col - nx] += eps
            pm[col - nx] -= eps
        fd = (gradient(Xp, U, pp) - gradient(Xm, U, pm)) / (2 * eps)
        np.testing.assert_allclose(H[:, :, col], fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())


def _growth_problem(y3: float):
    """Dennis and Schnabel's large-residual example (Example 10.2.4) as an ODE.

    ``x' = p x``, ``x(0) = 1``, data ``(1, 2, 4, y3)`` at ``t = 0..3``: with
    ``y3 = 8`` the residual is zero; far from 8 it is large and curved, and
    Gauss-Newton converges only linearly.
    """
    x = ca.SX.sym("x", 1)
    p = ca.SX.sym("p", 1)
    model = pc.Model(x=x, p=p, rhs=p[0] * x, y=x, name="growth")
    t = np.array([0.0, 1.0, 2.0, 3.0])
    exp = pc.Experiment(t=t, y=np.array([[1.0], [2.0], [4.0], [y3]]), x0=np.array([1.0]),
                        name="e")
    return model, exp


def test_newton_steps_converge_fast_where_gauss_newton_is_linear():
    """hessian='exact' and 'auto' reach IPOPT's optimum; GN needs several times more steps."""
    model, exp = _growth_problem(-4.0)
    common = dict(p0=[0.5], estimate_x0=False, T=0.25, p_bounds=([-5.0], [5.0]),
                  uncertainty=False)
    ref = pc.estimate(model, [exp], method="ipopt", **common)
    assert ref.success
    runs = {h: pc.estimate(model, [exp], method="picard-gn", hessian=h, max_iter=500, **common)
            for h in ("gauss-newton", "auto", "exact")}
    for h, res in runs.items():
        print(f"{h}: {res.iterations} iterations, p = {res.p[0]:.10f} (IPOPT {ref.p[0]:.10f})")
        assert res.success, (h, res.message)
        # Gauss-Newton's last steps gain less than the merit's precision: it
        # stops on that rule 2.5e-6 short of the optimum
        assert abs(res.p[0] - ref.p[0]) < (1e-5 if h == "gauss-newton" else 1e-7), h
    assert runs["exact"].iterations <= 12
    assert runs["gauss-newton"].iterations >= 2 * runs["exact"].iterations
    # (steps fitted to the trust radius walk Gauss-Newton's last stretch in 24
    # iterations where cut steps took 33; "auto" switches no later)
    assert runs["auto"].iterations <= runs["gauss-newton"].iterations


def test_stationarity_sees_a_gain_that_single_columns_hide():
    """Two huge, nearly parallel columns: each alone is orthogonal to the residual
    to 1e-9, together they reach half of it (MINPACK's per-column test would
    call this point stationary)."""
    A = np.array([[1e9, 1e9], [0.0, 1.0], [0.0, 0.0]])
    b = np.array([0.0, 1.0, 1.0])
    per_column = np.abs(A.T @ b) / np.linalg.norm(A, axis=0) / np.linalg.norm(b)
    assert per_column.max() < 1e-9
    theta = np.linalg.lstsq(A, -b, rcond=None)[0]
    assert reach_cosine(A, b, theta) == pytest.approx(np.sqrt(0.5), rel=1e-9)
    # at a stationary point (residual orthogonal to the range) it is zero
    b_stat = np.array([0.0, 0.0, 1.0])
    theta = np.linalg.lstsq(A, -b_stat, rcond=None)[0]
    assert reach_cosine(A, b_stat, theta) == 0.0


def test_exact_hessian_needs_the_constrained_step():
    with pytest.raises(ValueError, match="hessian='exact' needs continuity='constrained'"):
        pc.problem("vdp").estimate("picard-gn", hessian="exact", continuity="multiplier")
    with pytest.raises(ValueError, match="hessian must be one of"):
        pc.problem("vdp").estimate("picard-gn", hessian="newton")


def test_a_solve_continuing_one_that_converged_with_newton_steps_starts_with_them(monkeypatch):
    """hessian="auto": once Gauss-Newton stalled and the solve converged with
    Newton steps, the solves that continue it (the weight rounds, the refined
    mesh's) start with them (``Setup.newton``) instead of stalling again;
    the fit's first solve starts with Gauss-Newton.  (The stall is made to
    come after three steps here.)"""
    import dataclasses

    from picard_casadi import methods
    from picard_casadi.methods import newton_switch

    monkeypatch.setattr(newton_switch, "STALL_GAIN", 1.0)
    monkeypatch.setattr(newton_switch, "STALL_STEPS", 3)
    events = []
    init = newton_switch.NewtonSwitch.__init__

    def recorded_init(self, setup, hessian):
        init(self, setup, hessian)
        events.append(("starts", id(setup), self.newton))

    monkeypatch.setattr(newton_switch.NewtonSwitch, "__init__", recorded_init)
    spec = methods.get_method("picard-gn")

    def recorded_solve(setup, opts, callback=None):
        outcome = spec.solve(setup, opts, callback)
        events.append(("ends", id(setup), outcome.success and setup.newton))
        return outcome

    monkeypatch.setitem(methods.METHODS, "picard-gn", dataclasses.replace(spec, solve=recorded_solve))
    res = pc.problem("vdp", seed=0).estimate("picard-gn", T=4.0)
    assert res.success, res.message
    assert res.settings["refinements"] >= 1 and res.settings["weight_rounds"] >= 2
    assert events[0] == ("starts", events[0][1], False)  # the fit's first solve
    setups = {e[1] for e in events}
    assert len(setups) >= 2  # a refined mesh's setup
    newton_seen = False
    for kind, _, newton in events:
        if kind == "starts":
            assert newton == newton_seen  # as the last solve ended
        else:
            newton_seen = newton_seen or newton
    assert newton_seen
