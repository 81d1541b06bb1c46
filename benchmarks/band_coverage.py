"""Coverage of the delta method's output bands (``pc.prediction_band``).

First-order decay ``x' = -k x``, ``x(0) = A`` (``k`` on a log10 scale, ``A``
estimated through ``Model(x0=...)``), 10 samples on ``[0, 4]`` with noise
0.05 (known), truth ``k = 0.7``, ``A = 2``.  Per data set (NumPy seed 11,
one generator for all): the 95 % confidence band at ``t = 0.5, 2, 5`` (5
beyond the data) against the true output, and the 95 % prediction band
(``noise=True``) against a new measurement there.

    python benchmarks/band_coverage.py [n_sets]     # default 400
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread, before NumPy loads)

import sys
import warnings

import casadi as ca
import numpy as np

import picard_casadi as pc


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    x, k, A = ca.SX.sym("x"), ca.SX.sym("k"), ca.SX.sym("A")
    model = pc.Model(x=x, p=ca.vertcat(k, A), rhs=-k * x, y=x, x0=[A], x_names=["x"],
                     p_names=["k", "A"])
    table = [pc.Parameter("k", 1.0, (1e-3, 1e2), "log10"), pc.Parameter("A", 1.0, (0, 10))]
    t, at = np.linspace(0, 4, 10), np.array([0.5, 2.0, 5.0])
    truth = 2.0 * np.exp(-0.7 * at)
    rng = np.random.default_rng(11)
    mean_in, new_in = [], []
    warnings.simplefilter("ignore")
    for _ in range(n):
        y = 2.0 * np.exp(-0.7 * t) + 0.05 * rng.standard_normal(t.size)
        res = pc.estimate(model, [pc.Experiment(t, y)], table, noise=pc.Noise(sigma=0.05),
                          codegen=False)
        band = pc.prediction_band(res, 0, at)
        mean_in.append((band.lower[:, 0] <= truth) & (truth <= band.upper[:, 0]))
        new = pc.prediction_band(res, 0, at, noise=True)
        y_new = truth + 0.05 * rng.standard_normal(at.size)
        new_in.append((new.lower[:, 0] <= y_new) & (y_new <= new.upper[:, 0]))
    print(f"{n} data sets; at t = {', '.join(f'{s:g}' for s in at)}")
    print("confidence band holds the true output: "
          + ", ".join(f"{100 * c:.1f} %" for c in np.mean(mean_in, axis=0)))
    print("prediction band holds a new measurement: "
          + ", ".join(f"{100 * c:.1f} %" for c in np.mean(new_in, axis=0)))


if __name__ == "__main__":
    main()
