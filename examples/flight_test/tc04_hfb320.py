"""Test case TC04 of the flight-test textbook: HFB-320, nonlinear longitudinal motion.

R. V. Jategaonkar, *Flight Vehicle System Identification*, 2nd ed., ch. 4:
the elevator 3-2-1-1 and pulse maneuver ``hfb320_1_10.asc`` (60 s at 0.1 s),
states V, alpha, theta, q; outputs V, alpha, theta, q, qdot, ax, az; inputs
elevator and thrust; 11 aerodynamic parameters; the initial state fixed at
the book's values (``mDefCase04.m``, ``xdot_TC04_hfb_lon.m``,
``obs_TC04_hfb_lon.m``).  Every default: the likelihood with each output's
noise variance estimated, the output-error method's ``det R`` criterion.

Run::

    python examples/flight_test/tc04_hfb320.py [--data DIR]

The data are the book's (``../shared/data/flight/`` beside the repository;
not part of it).
"""

from __future__ import annotations

from pathlib import Path

import casadi as ca
import numpy as np

import picard_casadi as pc
from book_case import run_case


#: the book's names of the 11 parameters, and its starting values
NAMES = ["CD0", "CDV", "CDAL", "CL0", "CLV", "CLAL", "CM0", "CMV", "CMAL", "CMQ", "CMDE"]
P0 = [5.67516e-03, 7.72612e-03, 6.74256e-01, -3.18267e-01, 2.60317e-01, 5.37576e+00,
      4.98218e-02, 1.89182e-02, -4.98586e-01, -2.58439e+01, -9.90687e-01]
X0 = [1.06023e+02, 1.11685e-01, 1.04887e-01, -3.32659e-03]


def hfb320_model() -> pc.Model:
    """The book's state and observation equations (5.86)-(5.89)."""
    x, p, u = ca.SX.sym("x", 4), ca.SX.sym("p", 11), ca.SX.sym("u", 2)
    V, alpha, theta, q = x[0], x[1], x[2], x[3]
    de, thrust = u[0], u[1]
    CD0, CDV, CDAL, CL0, CLV, CLAL, CM0, CMV, CMAL, CMQ, CMDE = (p[i] for i in range(11))
    g0, s_by_m, sc_by_iy, fe_iy_lt = 9.80665, 4.028e-3, 8.0027e-4, -7.0153e-6
    V0, m, sigma_t, rho, cbar = 104.67, 7472.0, 0.0524, 0.792, 1.215
    qbar = 0.5 * rho * V ** 2
    CD = CD0 + CDV * V / V0 + CDAL * alpha
    CL = CL0 + CLV * V / V0 + CLAL * alpha
    Cm = CM0 + CMV * V / V0 + CMAL * alpha + cbar * CMQ * q / V0 + CMDE * de
    qdot = sc_by_iy * qbar * Cm + fe_iy_lt * thrust
    rhs = ca.vertcat(
        -s_by_m * qbar * CD + thrust * ca.cos(alpha + sigma_t) / m + g0 * ca.sin(alpha - theta),
        -s_by_m * qbar / V * CL - thrust * ca.sin(alpha + sigma_t) / (m * V) + q
        + g0 * ca.cos(alpha - theta) / V,
        q,
        qdot)
    CX = CL * ca.sin(alpha) - CD * ca.cos(alpha)
    CZ = -CL * ca.cos(alpha) - CD * ca.sin(alpha)
    y = ca.vertcat(V, alpha, theta, q, qdot,
                   qbar * s_by_m * CX + thrust * np.cos(sigma_t) / m,
                   qbar * s_by_m * CZ - thrust * np.sin(sigma_t) / m)
    return pc.Model(x=x, p=p, u=u, rhs=rhs, y=y, name="hfb320-TC04", p_names=NAMES,
                    x_names=["V", "alpha", "theta", "q"],
                    y_names=["V", "alpha", "theta", "q", "qdot", "ax", "az"],
                    u_names=["de", "thrust"],
                    y_units=["m/s", "rad", "rad", "rad/s", "rad/s^2", "m/s^2", "m/s^2"],
                    t_unit="s")


def hfb320_experiment(data: Path) -> pc.Experiment:
    """``hfb320_1_10_withHeader.asc``, its channels by the header's names (SI
    units, angles in rad; the book's ``mDefCase04.m`` reads the same columns
    of ``hfb320_1_10.asc`` by number); the book's time axis, 0.1 s."""
    d = pc.read_columns(data / "hfb320_1_10_withHeader.asc", {
        "de": "DELV", "thrust": "THRUST", "V": "TASCG", "alpha": "ALFCG", "theta": "THE",
        "q": "Q", "qdot": "QDOT", "ax": "AXCG", "az": "AZCG"})
    t = 0.1 * np.arange(d["V"].size)
    return pc.Experiment(t=t, y=d.stack("V", "alpha", "theta", "q", "qdot", "ax", "az"),
                         u=d.stack("de", "thrust"), x0=X0, name="hfb320_1_10")


if __name__ == "__main__":
    run_case(__doc__, hfb320_model(), hfb320_experiment, P0)
