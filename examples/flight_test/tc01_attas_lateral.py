"""Test case TC01 of the flight-test textbook: ATTAS, lateral-directional motion.

R. V. Jategaonkar, *Flight Vehicle System Identification*, 2nd ed., ch. 4:
the aileron-then-rudder maneuver ``fAttasAilRud1`` (60 s at 0.04 s), a
linear model in the roll and yaw rates with lumped bias parameters (states
p, r; outputs pdot, rdot, ay, p, r; inputs aileron, rudder and the measured
sideslip; 15 derivatives, 2 state and 5 output biases; x0 = 0 fixed, the
book's eq. 3.29) as ``mDefCase01.m``, ``xdot_TC01_attas_lat.m`` and
``obs_TC01_attas_lat.m`` state it.  Every default: the likelihood with each
output's noise variance estimated, the output-error method's criterion.

Run::

    python examples/flight_test/tc01_attas_lateral.py [--data DIR]

The data are the book's (``../shared/data/flight/`` beside the repository,
read from the ASCII twin ``fAttasAilRud1.asc`` of the book's ``.mat``; not
part of the repository).
"""

from __future__ import annotations

from pathlib import Path

import casadi as ca
import numpy as np

import picard_casadi as pc
from book_case import run_case

D2R = np.pi / 180.0

NAMES = ["Lp", "Lr", "Lda", "Ldr", "Lbeta", "Np", "Nr", "Nda", "Ndr", "Nbeta",
         "Yp", "Yr", "Yda", "Ydr", "Ybeta", "BX1", "BX2", "BY1", "BY2", "BY3", "BY4", "BY5"]
#: the book's starting values (mDefCase01.m)
P0 = [-3.53744, 0.475534, -4.93279, 0.73334, -4.34076,
      -0.086939, -0.169526, -0.192049, -0.74855, 1.55155,
      0.0364, 2.130, 0.740, 2.279, -5.193,
      0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02]


def attas_lateral_model(extra: int = 0, **model_options: object) -> pc.Model:
    """The book's linear lateral-directional model with lumped biases; ``extra``
    more parameters after the 22 (a delay, TC31), ``model_options`` to
    ``pc.Model`` (their names, the delays)."""
    x, p, u = ca.SX.sym("x", 2), ca.SX.sym("p", 22 + extra), ca.SX.sym("u", 3)
    roll, yaw = x[0], x[1]
    da, dr, beta = u[0], u[1], u[2]
    L = p[0] * roll + p[1] * yaw + p[2] * da + p[3] * dr + p[4] * beta
    N = p[5] * roll + p[6] * yaw + p[7] * da + p[8] * dr + p[9] * beta
    Y = p[10] * roll + p[11] * yaw + p[12] * da + p[13] * dr + p[14] * beta
    rhs = ca.vertcat(L + p[15], N + p[16])
    y = ca.vertcat(L + p[17], N + p[18], Y + p[19], roll + p[20], yaw + p[21])
    options = dict(name="attas-TC01", p_names=NAMES)
    options.update(model_options)
    return pc.Model(x=x, p=p, u=u, rhs=rhs, y=y, x_names=["p", "r"],
                    y_names=["pdot", "rdot", "ay", "p", "r"],
                    u_names=["aileron", "rudder", "beta"],
                    y_units=["rad/s^2", "rad/s^2", "m/s^2", "rad/s", "rad/s"], t_unit="s",
                    **options)


def attas_experiment(data: Path) -> pc.Experiment:
    """``fAttasAilRud1``: outputs columns 17, 19 (deg/s^2), 3 (m/s^2), 7, 9 (deg/s);
    inputs half the difference of columns 29 and 28 (aileron, deg), 30 (rudder,
    deg), 14 (sideslip, deg), as mDefCase01.m; degrees to radians; the book's
    time axis, 0.04 s."""
    deg = ("pdot", "rdot", "p", "r", "ail_left", "ail_right", "rudder", "beta")
    d = pc.read_columns(data / "fAttasAilRud1.asc", {  # no header: the book's numbers
        "pdot": 17, "rdot": 19, "ay": 3, "p": 7, "r": 9, "ail_left": 28, "ail_right": 29,
        "rudder": 30, "beta": 14}, scale={name: D2R for name in deg})
    y = d.stack("pdot", "rdot", "ay", "p", "r")
    u = np.column_stack([(d["ail_right"] - d["ail_left"]) * 0.5, d["rudder"], d["beta"]])
    t = 0.04 * np.arange(y.shape[0])
    return pc.Experiment(t=t, y=y, u=u, x0=[0.0, 0.0], name="fAttasAilRud1")


if __name__ == "__main__":
    run_case(__doc__, attas_lateral_model(), attas_experiment, P0)
