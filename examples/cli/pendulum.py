"""A damped pendulum: theta'' = -w2 sin(theta) - c theta'.

The angle theta is measured (the CSV column "theta"); the angular velocity
omega is not.  ``picard-casadi fit`` calls build_model() and reads the
optional names P0, P_BOUNDS, X0 and OPTIONS; command-line flags override
them (docs/cli.md).
"""
import casadi as ca

import picard_casadi as pc

P0 = [5.0, 0.1]                        # starting values of w2 and c (--p0 overrides)
P_BOUNDS = ([0.0, 0.0], [None, None])  # w2 >= 0 and c >= 0 (--bounds, --fix override)
# X0 = [0.5, 0.0]                      # initial-state guess for every experiment (--x0)
# OPTIONS = {"max_iter": 100}          # estimate() keyword arguments (flags override)


def build_model():
    theta, omega = ca.SX.sym("theta"), ca.SX.sym("omega")
    w2, c = ca.SX.sym("w2"), ca.SX.sym("c")
    rhs = ca.vertcat(omega, -w2 * ca.sin(theta) - c * omega)
    return pc.Model(x=ca.vertcat(theta, omega), p=ca.vertcat(w2, c), rhs=rhs, y=theta,
                    name="pendulum", x_names=["theta", "omega"], p_names=["w2", "c"],
                    y_names=["theta"], x_units=["rad", "rad/s"], p_units=["1/s^2", "1/s"],
                    y_units=["rad"])
