"""Write pendulum.csv: two experiments of the damped pendulum in pendulum.py.

The pendulum is released at rest from 0.5 rad ("small") and from 1.2 rad
("large"), with w2 = 9.81 1/s^2 and c = 0.3 1/s; the angle is recorded every
0.2 s for 8 s with noise of standard deviation 0.01 rad.  Run it from this
folder: ``python make_pendulum_csv.py``.
"""
import importlib.util
from pathlib import Path

import numpy as np

import picard_casadi as pc

here = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("pendulum", here / "pendulum.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
model = module.build_model()

rng = np.random.default_rng(7)
t = np.linspace(0.0, 8.0, 41)
lines = ["experiment,time [s],theta [rad]"]  # units: checked against the model's
for name, x0 in (("small", [0.5, 0.0]), ("large", [1.2, 0.0])):
    X = pc.simulate(model, x0, [9.81, 0.3], t)
    y = X[:, 0] + rng.normal(0.0, 0.01, t.size)
    lines += [f"{name},{tk:.2f},{yk:.4f}" for tk, yk in zip(t, y)]
(here / "pendulum.csv").write_text("\n".join(lines) + "\n")
print(f"wrote {here / 'pendulum.csv'}")
