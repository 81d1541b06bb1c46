"""Spacecraft with four single-gimbal, variable-speed control-moment gyros.

Paper, Sec. IV (Talitckii and Peet), with the equations of Valk, Berry and
Vallery, "Directional singularity escape and avoidance for single-gimbal
control moment gyroscopes", JGCD 2018, and Schaub, Vadali and Junkins 1998;
every number and sign as fixed in ``docs/models.md``.

States (15): ``x = [omega (3), gamma (4), gamma_dot (4), Omega (4)]``: body
rates (rad/s), gimbal angles (rad), gimbal rates (rad/s), wheel speeds (rad/s).
Outputs (7): ``y = [omega; gamma]``.  Inputs (8): ``u = [M_g (4); M_h (4)]``,
gimbal and wheel motor torques (N m).  Parameters (3):
``theta = [J_Bx, J_By, J_Bz]``, the diagonal body inertia (kg m^2).

Geometry: standard pyramid, skew angle ``beta = arccos(1/sqrt(3))`` from the
body z axis::

    G    = [[ sb, 0, -sb, 0], [0, sb, 0, -sb], [cb, cb, cb, cb]]   gimbal axes
    H(0) = [[ 0, -1, 0, 1], [1, 0, -1, 0], [0, 0, 0, 0]]            spin axes
    F(0) = g_i x h_i(0)                                              torque axes
    h_i = h_i(0) cos(gamma_i) + f_i(0) sin(gamma_i)
    f_i = -h_i(0) sin(gamma_i) + f_i(0) cos(gamma_i)

Inertias: wheel ``J_W = diag(1, 1, 2)``, gimbal frame ``J_G = 0.01 I``;
``J_T = J_G + J_W``.  Equations::

    J_S = diag(theta) + J_Tx F F^T + J_Ty G G^T + J_Tz H H^T
    Phi [omega_dot; gamma_ddot; Omega_dot] = [0; M_g; M_h]
            + [-M_omega - omega x (J_S omega); M_gamma; M_Omega]
    Phi = [[J_S, J_Ty G, J_Wz H], [J_Ty G^T, J_Ty I, 0], [J_Wz H^T, 0, J_Wz I]]
    M_omega = J_Wz F diag(Omega) (gamma_dot + G^T omega) - J_Wz G diag(Omega) F^T omega
              + (J_Tz - J_Tx + J_Ty) H diag(F^T omega) gamma_dot
              + (J_Tz - J_Tx - J_Ty) F diag(H^T omega) gamma_dot
    M_gamma = diag(F^T omega) ((J_Tz - J_Tx) H^T omega + J_Wz Omega)
    M_Omega = -J_Wz diag(F^T omega) gamma_dot

Departure from the paper's text: the paper writes ``(gamma + G^T omega)`` in
``M_omega``; Valk's eq. 8 and code have ``gamma_dot``, used here.

Implementation: ``gamma_ddot`` and ``Omega_dot`` are eliminated with the
(diagonal) lower block rows, leaving a 3x3 solve for ``omega_dot``::

    (J_S - J_Ty G G^T - J_Wz H H^T) omega_dot = r_omega - G r_gamma - H r_Omega

which keeps the SX graph small.

Experiments (paper): truth ``theta = [214, 201, 500]``; ``x0``: omega 0.1,
gamma 0.1, gamma_dot 0.1, Omega 10 (all components); samples ``0:0.01:3``;
four inputs, each torque the same on all four gyros:
1. ``M_g = 0, M_h = 0``;  2. ``M_g = 40 cos(10 t)``;  3. ``M_h = 100 cos(10 t)``;
4. ``M_g = -4`` for ``t < 1.5``, else 0 (declared as a breakpoint).
Paper settings: Alg. 4 with ``lambda = 10``, ``n = 3``, ``T = 0.2``; its
estimate ``[215, 207, 527]``.  Noise: standard deviation 0.05 (docs/models.md:
the paper's "variance 0.05" is a standard deviation).
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from picard_casadi.model import Model
from picard_casadi.studies.registry import Problem
from picard_casadi.simulate import simulate_experiment

P_TRUE = np.array([214.0, 201.0, 500.0])
P_PAPER = np.array([215.0, 207.0, 527.0])
X0_TRUE = np.concatenate([np.full(3, 0.1), np.full(4, 0.1), np.full(4, 0.1), np.full(4, 10.0)])

SKEW = float(np.arccos(1.0 / np.sqrt(3.0)))
J_WX, J_WY, J_WZ = 1.0, 1.0, 2.0
J_GX, J_GY, J_GZ = 0.01, 0.01, 0.01
J_TX, J_TY, J_TZ = J_GX + J_WX, J_GY + J_WY, J_GZ + J_WZ


def geometry() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``G``, ``H(0)``, ``F(0)`` (3 x 4 each) of the pyramid."""
    sb, cb = np.sin(SKEW), np.cos(SKEW)
    G = np.array([[sb, 0.0, -sb, 0.0], [0.0, sb, 0.0, -sb], [cb, cb, cb, cb]])
    H0 = np.array([[0.0, -1.0, 0.0, 1.0], [1.0, 0.0, -1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    F0 = np.cross(G.T, H0.T).T
    return G, H0, F0


def _frames(gamma):
    """Rotated spin and torque axes ``H(gamma)``, ``F(gamma)``."""
    G, H0, F0 = geometry()
    c, s = ca.cos(gamma), ca.sin(gamma)
    H = ca.horzcat(*[H0[:, i] * c[i] + F0[:, i] * s[i] for i in range(4)])
    F = ca.horzcat(*[-H0[:, i] * s[i] + F0[:, i] * c[i] for i in range(4)])
    return ca.DM(G), H, F


def right_hand_sides(x, u, theta):
    """The blocks of the full equations: ``Phi``, ``r = [r_omega; r_gamma; r_Omega]``.

    Used by :func:`build_model` (through the Schur solve) and by the tests
    (through a direct 11 x 11 solve).
    """
    w, gam, gdot, Om = x[0:3], x[3:7], x[7:11], x[11:15]
    Mg, Mh = u[0:4], u[4:8]
    G, H, F = _frames(gam)
    JS = ca.diag(theta) + J_TX * ca.mtimes(F, F.T) + J_TY * ca.mtimes(G, G.T) \
        + J_TZ * ca.mtimes(H, H.T)
    Ftw = ca.mtimes(F.T, w)
    Htw = ca.mtimes(H.T, w)
    M_omega = (J_WZ * ca.mtimes(F, Om * (gdot + ca.mtimes(G.T, w)))
               - J_WZ * ca.mtimes(G, Om * Ftw)
               + (J_TZ - J_TX + J_TY) * ca.mtimes(H, Ftw * gdot)
               + (J_TZ - J_TX - J_TY) * ca.mtimes(F, Htw * gdot))
    M_gamma = Ftw * ((J_TZ - J_TX) * Htw + J_WZ * Om)
    M_Omega = -J_WZ * Ftw * gdot
    r_omega = -M_omega - ca.cross(w, ca.mtimes(JS, w))
    r_gamma = Mg + M_gamma
    r_Omega = Mh + M_Omega
    Phi = ca.blockcat([
        [JS, J_TY * G, J_WZ * H],
        [J_TY * G.T, J_TY * ca.DM.eye(4), ca.DM.zeros(4, 4)],
        [J_WZ * H.T, ca.DM.zeros(4, 4), J_WZ * ca.DM.eye(4)],
    ])
    return Phi, ca.vertcat(r_omega, r_gamma, r_Omega), JS, G, H


def build_model() -> Model:
    """The 15-state CMG spacecraft model with ``theta = [J_Bx, J_By, J_Bz]``."""
    x = ca.SX.sym("x", 15)
    u = ca.SX.sym("u", 8)
    theta = ca.SX.sym("J_B", 3)
    _, r, JS, G, H = right_hand_sides(x, u, theta)
    r_omega, r_gamma, r_Omega = r[0:3], r[3:7], r[7:11]
    M = JS - J_TY * ca.mtimes(G, G.T) - J_WZ * ca.mtimes(H, H.T)
    w_dot = ca.solve(M, r_omega - ca.mtimes(G, r_gamma) - ca.mtimes(H, r_Omega))
    g_ddot = (r_gamma - J_TY * ca.mtimes(G.T, w_dot)) / J_TY
    Om_dot = (r_Omega - J_WZ * ca.mtimes(H.T, w_dot)) / J_WZ
    rhs = ca.vertcat(w_dot, x[7:11], g_ddot, Om_dot)
    x_names = ([f"omega_{a}" for a in "xyz"] + [f"gamma_{i}" for i in range(1, 5)]
               + [f"gamma_dot_{i}" for i in range(1, 5)] + [f"Omega_{i}" for i in range(1, 5)])
    return Model(
        x=x, p=theta, u=u, rhs=rhs, y=x[0:7], name="cmg",
        x_names=x_names, p_names=["J_Bx", "J_By", "J_Bz"],
        u_names=[f"M_g{i}" for i in range(1, 5)] + [f"M_h{i}" for i in range(1, 5)],
        x_units=["rad/s"] * 3 + ["rad"] * 4 + ["rad/s"] * 8,
        p_units=["kg m^2"] * 3, u_units=["N m"] * 8,
        y_units=["rad/s"] * 3 + ["rad"] * 4,
    )


def angular_momentum(x: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Total angular momentum ``J_S omega + J_Ty G gamma_dot + J_Wz H Omega`` (body frame)."""
    xs = ca.SX.sym("x", 15)
    th = ca.SX.sym("th", 3)
    _, _, JS, G, H = right_hand_sides(xs, ca.SX.zeros(8), th)
    h = ca.mtimes(JS, xs[0:3]) + J_TY * ca.mtimes(G, xs[7:11]) + J_WZ * ca.mtimes(H, xs[11:15])
    f = ca.Function("h", [xs, th], [h])
    return np.asarray(f(x, theta)).ravel()


def _zero(t):
    return np.zeros(8)


def _gimbal_cos(t):
    return np.concatenate([np.full(4, 40.0 * np.cos(10.0 * t)), np.zeros(4)])


def _wheel_cos(t):
    return np.concatenate([np.zeros(4), np.full(4, 100.0 * np.cos(10.0 * t))])


def _gimbal_step(t):
    return np.concatenate([np.full(4, -4.0 if t < 1.5 else 0.0), np.zeros(4)])


def paper_inputs():
    """The four input functions of the paper, ``u(t) -> (8,)``, and their breakpoints.

    Module-level functions, so the experiments pickle (another process,
    :mod:`picard_casadi.runtime.executors`).
    """
    return [(_zero, None), (_gimbal_cos, None), (_wheel_cos, None), (_gimbal_step, [1.5])]


def make_problem(seed: int = 0, noise_std: float = 0.05, n_samples: int = 301) -> Problem:
    """The paper's four experiments with synthetic data (docs/models.md protocol)."""
    model = build_model()
    t = np.linspace(0.0, 3.0, n_samples)
    rng = np.random.default_rng(seed)
    exps = []
    for k, (u, bp) in enumerate(paper_inputs(), start=1):
        exps.append(simulate_experiment(model, X0_TRUE, P_TRUE, t, u, noise_std=noise_std,
                                        seed=rng, name=f"input-{k}", breakpoints=bp))
    lb = np.concatenate([np.full(3, -5.0), np.full(4, -20.0), np.full(4, -100.0), np.full(4, -200.0)])
    return Problem(
        name="cmg", model=model, experiments=exps, p_true=P_TRUE.copy(),
        p0=np.array([300.0, 300.0, 300.0]),
        p_bounds=(np.full(3, 1.0), np.full(3, 1e5)),
        options={"T": 0.2, "n": 3, "lam": 10.0, "nodes": 9, "x0_bounds": (lb, -lb)},
        x0_true=[X0_TRUE.copy() for _ in exps],
        description="spacecraft with 4 CMGs, inertia J_B, 4 experiments, noise std %g" % noise_std,
        reference={"paper_estimate": P_PAPER.copy(), "paper_relative_error":
                   float(np.linalg.norm(P_PAPER - P_TRUE) / np.linalg.norm(P_TRUE))},
    )
