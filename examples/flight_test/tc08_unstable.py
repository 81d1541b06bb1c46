"""Test cases TC08/TC09 of the flight-test textbook: an unstable aircraft's short period.

R. V. Jategaonkar, *Flight Vehicle System Identification*, 2nd ed., ch. 4:
simulated responses ``unStabAC_sim.asc`` (12.5 s at 0.05 s) of an aircraft
whose short period is unstable (Mw > 0); states w, q; outputs az, w, q;
input the elevator; Zq fixed at -1.4768, five parameters free; x0 = 0 fixed
(``mDefCase08.m``, ``xdot_TC08_uAC.m``, ``obs_TC08_uAC.m``).  The book's
plain output-error method (TC08) stops at a wrong point (det R 3.1e-5); its
TC09 stabilises the integration artificially with the measured states.
Every default here: the likelihood with each output's noise estimated,
integrated as it is.

Run::

    python examples/flight_test/tc08_unstable.py [--data DIR]
"""

from __future__ import annotations

from pathlib import Path

import casadi as ca
import numpy as np

import picard_casadi as pc
from book_case import run_case


NAMES = ["Zw", "Zq", "Zeta", "Mw", "Mq", "Meta"]
#: the book's starting values; Zq is held at its value
P0 = [-1.22871, -1.47680, -4.20491, 0.116197, -2.70670, -18.7718]
U0 = 44.5695  # trim airspeed, m/s


def unstable_model() -> pc.Model:
    """The book's short-period model (no feedback in the model: fak = 0)."""
    x, p, u = ca.SX.sym("x", 2), ca.SX.sym("p", 6), ca.SX.sym("u", 1)
    w, q, eta = x[0], x[1], u[0]
    Zw, Zq, Zeta, Mw, Mq, Meta = (p[i] for i in range(6))
    az = Zw * w + Zq * q + Zeta * eta
    rhs = ca.vertcat(az + U0 * q, Mw * w + Mq * q + Meta * eta)
    return pc.Model(x=x, p=p, u=u, rhs=rhs, y=ca.vertcat(az, w, q), name="unstable-TC08",
                    p_names=NAMES, x_names=["w", "q"], y_names=["az", "w", "q"],
                    u_names=["elevator"], y_units=["m/s^2", "m/s", "rad/s"], t_unit="s")


def unstable_experiment(data: Path) -> pc.Experiment:
    """``unStabAC_sim_header.asc``, its channels by the header's names (az, w, q;
    the elevator in rad); the book's time axis, 0.05 s."""
    d = pc.read_columns(data / "unStabAC_sim_header.asc",
                        {"az": "AZ", "w": "W", "q": "Q", "elevator": "DE"})
    t = 0.05 * np.arange(d["w"].size)
    return pc.Experiment(t=t, y=d.stack("az", "w", "q"), u=d.stack("elevator"), x0=[0.0, 0.0],
                         name="unStabAC_sim")


def bounds() -> tuple[list[float], list[float]]:
    """Zq held at the book's value, the others free."""
    lower = [-np.inf] * 6
    upper = [np.inf] * 6
    lower[1] = upper[1] = P0[1]
    return lower, upper


if __name__ == "__main__":
    run_case(__doc__, unstable_model(), unstable_experiment, P0, p_bounds=bounds())
