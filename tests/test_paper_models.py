"""The paper's two models on their own, independent of any estimation.

Each test checks the equations against a property they must have (a
conservation law, a symmetry, the full linear system the model solves in
reduced form, the published coefficient tables) or checks that the paper's
experiments can be simulated over their whole horizon.
"""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.models import cmg, fa18
from picard_casadi.simulate import simulate


def _rhs_function(model: pc.Model) -> ca.Function:
    return ca.Function("f", [model.x, model.p, model.u], [model.rhs])


# --------------------------------------------------------------------- CMG
def test_cmg_free_motion_conserves_total_angular_momentum():
    """No motor torque and no external torque: |h| is constant (the body frame rotates h)."""
    model = cmg.build_model()
    rng = np.random.default_rng(3)
    x0 = cmg.X0_TRUE + 0.05 * rng.standard_normal(15)
    t = np.linspace(0.0, 3.0, 61)
    X = simulate(model, x0, cmg.P_TRUE, t, lambda _t: np.zeros(8), rtol=1e-12, atol=1e-12)
    h = np.array([np.linalg.norm(cmg.angular_momentum(x, cmg.P_TRUE)) for x in X])
    assert np.all(np.isfinite(h))
    assert np.max(np.abs(h / h[0] - 1.0)) < 1e-8
    # the state did move: the check is not that of a resting spacecraft
    assert np.max(np.abs(X[-1, :3] - X[0, :3])) > 1e-3


def test_cmg_reduced_solve_matches_the_full_eleven_by_eleven_system():
    """The model's 3x3 Schur solve equals a direct solve of Phi [...] = r."""
    model = cmg.build_model()
    f = _rhs_function(model)
    xs, us, ths = ca.SX.sym("x", 15), ca.SX.sym("u", 8), ca.SX.sym("th", 3)
    Phi, r, *_ = cmg.right_hand_sides(xs, us, ths)
    full = ca.Function("full", [xs, us, ths], [Phi, r])
    rng = np.random.default_rng(7)
    for _ in range(5):
        x = rng.standard_normal(15) * np.r_[np.full(3, 0.3), np.full(4, 1.0),
                                            np.full(4, 0.5), np.full(4, 20.0)]
        u = 10.0 * rng.standard_normal(8)
        theta = rng.uniform(100.0, 600.0, 3)
        Phi_v, r_v = (np.asarray(a) for a in full(x, u, theta))
        acc = np.linalg.solve(Phi_v, r_v.ravel())  # [omega_dot, gamma_ddot, Omega_dot]
        expected = np.concatenate([acc[:3], x[7:11], acc[3:7], acc[7:11]])
        got = np.asarray(f(x, theta, u)).ravel()
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------- F/A-18
def test_fa18_symmetric_flight_has_no_lateral_motion():
    """beta = p = r = phi = 0 with no aileron or rudder: beta, p, r, phi, psi stay put."""
    model = fa18.build_model()
    f = _rhs_function(model)
    p = fa18.true_parameters(fa18.PAPER_ORDER)
    rng = np.random.default_rng(11)
    for _ in range(5):
        V, alpha, q, theta, psi = (rng.uniform(200, 450), rng.uniform(-0.4, 1.4),
                                   rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-3, 3))
        x = np.array([V, 0.0, alpha, 0.0, q, 0.0, 0.0, theta, psi])
        u = np.array([fa18.THRUST, rng.uniform(-0.3, 0.3), 0.0, 0.0])
        xdot = np.asarray(f(x, p, u)).ravel()
        lateral = xdot[[1, 3, 5, 6, 8]]
        np.testing.assert_allclose(lateral, 0.0, atol=1e-12)
        # while the longitudinal motion is not at rest
        assert np.max(np.abs(xdot[[0, 2, 4]])) > 1e-3


def test_fa18_coefficient_polynomials_reproduce_the_tables():
    """Every coefficient, read back from the model's force expressions at a few alpha."""
    x = ca.SX.sym("x", 9)
    u = ca.SX.sym("u", 4)
    forces = ca.Function("F", [x, u], list(fa18.coefficient_functions(fa18.COEFFICIENTS, x, u,
                                                                      fa18.RHO_SEA_LEVEL)))
    V = 300.0
    qS = 0.5 * fa18.RHO_SEA_LEVEL * V ** 2 * fa18.WING_AREA

    def table(name: str, alpha: float) -> float:
        return float(np.polynomial.polynomial.polyval(alpha, fa18.COEFFICIENTS[name]))

    for alpha in (-0.3, 0.0, 0.5, 1.2):
        base = np.array([V, 0.0, alpha, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        FD, FY, FL, L, M, N = (float(v) for v in forces(base, [fa18.THRUST, 0, 0, 0]))
        assert FD / qS == pytest.approx(fa18.COEFFICIENTS["D0"][0] + table("Da", alpha), rel=1e-12)
        assert FL / qS == pytest.approx(table("La", alpha), rel=1e-12, abs=1e-14)
        assert M / (qS * fa18.CHORD) == pytest.approx(table("ma", alpha), rel=1e-12)
        assert FY == 0.0 and L == 0.0 and N == 0.0
        # one unit of each input or rate isolates its polynomial
        probes = {
            "Dstab": (dict(u=1), 0), "Lstab": (dict(u=1), 2), "mstab": (dict(u=1), 4),
            "Yail": (dict(u=3), 1), "lail": (dict(u=3), 3), "nail": (dict(u=3), 5),
            "Yrud": (dict(u=2), 1), "lrud": (dict(u=2), 3), "nrud": (dict(u=2), 5),
        }
        F0 = np.array(forces(base, [fa18.THRUST, 0, 0, 0]), dtype=float).ravel()
        arms = np.array([1.0, 1.0, 1.0, fa18.SPAN, fa18.CHORD, fa18.SPAN]) * qS
        for name, (probe, k) in probes.items():
            uu = np.array([fa18.THRUST, 0.0, 0.0, 0.0])
            uu[probe["u"]] = 1.0
            F1 = np.array(forces(base, uu), dtype=float).ravel()
            assert (F1[k] - F0[k]) / arms[k] == pytest.approx(table(name, alpha), rel=1e-10,
                                                               abs=1e-12), name
        # roll/yaw damping: per unit of b p / (2V) and b r / (2V)
        for state, names in ((3, ("lp", "np")), (5, ("lr", "nr"))):
            xx = base.copy()
            xx[state] = 2.0 * V / fa18.SPAN
            F1 = np.array(forces(xx, [fa18.THRUST, 0, 0, 0]), dtype=float).ravel()
            assert (F1[3] - F0[3]) / arms[3] == pytest.approx(table(names[0], alpha), rel=1e-10)
            assert (F1[5] - F0[5]) / arms[5] == pytest.approx(table(names[1], alpha), rel=1e-10)
        # sideslip: C_Y, C_l, C_n are linear in beta through Yb, la, nb
        xx = base.copy()
        xx[1] = 1e-6
        F1 = np.array(forces(xx, [fa18.THRUST, 0, 0, 0]), dtype=float).ravel()
        for name, k in (("Yb", 1), ("la", 3), ("nb", 5)):
            assert (F1[k] - F0[k]) / (1e-6 * arms[k]) == pytest.approx(table(name, alpha),
                                                                       rel=1e-6), name


# --------------------------------------------------------------------- both
def test_every_paper_experiment_simulates_over_its_horizon():
    """The data of every paper experiment exist for the whole protocol and are finite."""
    prob = cmg.make_problem(seed=0)
    assert len(prob.experiments) == 4
    for e in prob.experiments:
        assert e.t.size == 301 and e.t[-1] == pytest.approx(3.0)
        assert np.all(np.isfinite(e.y))
    for run in fa18.RUNS:
        prob = pc.problem(f"fa18-{run}", seed=0)
        assert len(prob.experiments) == len(fa18.RUNS[run]["x0"])
        for x0, e in zip(prob.x0_true, prob.experiments):
            assert np.all(np.isfinite(e.y))
            # the full 0:0.1:5 protocol, except the tumbling rudder run from x01 (docstring)
            expected_end = 3.8 if (run == "roll-rud" and e.name == "x01") else 5.0
            assert e.t[-1] == pytest.approx(expected_end)
            # the true trajectory stays inside the estimation box (it is what bounds the x_j)
            lb, ub = fa18.STATE_BOX
            X = simulate(prob.model, x0, prob.p_true,
                         e.t, fa18.inputs(fa18.RUNS[run]["surface"], fa18.RUNS[run]["amplitude"]),
                         breakpoints=[2.0, 4.0] if fa18.RUNS[run]["surface"] else None)
            assert np.all((X >= lb) & (X <= ub))
