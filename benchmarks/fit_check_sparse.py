"""False alarms of the lack-of-fit check on sparse PK data, and its two notes.

Run::

    python benchmarks/fit_check_sparse.py [data sets]

A one-compartment oral dose (depot -> central, ``C = Ac / V``, the truth ka
= 1, CL = 3, V = 30), ten subjects of eight samples (0.5 to 24 h), doses
50 to 400, a 10 % log-normal assay error; each data set fitted with the
default noise (normal, sigma estimated) and with ``noise="log-normal"``,
``parameter_scale="log10"``; then the same design with an additive error
(normal, 0.03 mg/L, where a constant noise level is right) fitted by
default.  Prints per fit how many subjects the check named (the model is
right: every one would be a false alarm), whether the fit was flagged for
missing the output's smallest values from one side (right for the default
fit of relative noise, a false alarm elsewhere), and how many fits noted
residuals that grow with the output (right for the default fit of relative
noise, wrong for the others).  The numbers of docs/reliability.md ("A
converged fit that does not fit") and docs/likelihood.md ("Where the noise
grows with the output").
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread, as the package's solves)

import sys
import warnings

import casadi as ca
import numpy as np

import picard_casadi as pc
from picard_casadi.analysis.fit_check import LACK_OF_FIT
from picard_casadi.estimation.assembly import SMALL_VALUES_MISSED


def oral_model() -> pc.Model:
    Ad, Ac = ca.SX.sym("Ad"), ca.SX.sym("Ac")
    ka, CL, V, dose = (ca.SX.sym(n) for n in ("ka", "CL", "V", "dose"))
    return pc.Model(x=ca.vertcat(Ad, Ac), p=ca.vertcat(ka, CL, V, dose),
                    rhs=ca.vertcat(-ka * Ad, ka * Ad - CL / V * Ac), y=Ac / V, x0=[dose, 0.0],
                    p_names=["ka", "CL", "V", "dose"], y_names=["C"])


def main(n_sets: int) -> None:
    model = oral_model()
    t = np.array([0.5, 1, 2, 4, 6, 8, 12, 24.0])
    doses = np.linspace(50.0, 400.0, 10)
    arms = (("default", "relative", None), ("log-normal", "relative", "log-normal"),
            ("additive", "additive", None))
    totals = {label: [0, 0, 0, 0] for label, _, _ in arms}  # fits, named, small, growing
    for seed in range(n_sets):
        rng = np.random.default_rng(seed)
        relative, additive = [], []
        for i, D in enumerate(doses):
            X = pc.simulate(model, [D, 0.0], [1.0, 3.0, 30.0, D], t, t0=0.0)
            C = X[:, 1:] / 30.0
            for exps, y in ((relative, C * np.exp(0.1 * rng.standard_normal((t.size, 1)))),
                            (additive, C + 0.03 * rng.standard_normal((t.size, 1)))):
                exps.append(pc.Experiment(t=t, y=y, t0=0.0, name=f"s{i}",
                                          parameters={"dose": float(D)}))
        for label, data, noise in arms:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = pc.estimate(model, relative if data == "relative" else additive,
                                  p0={"ka": 0.5, "CL": 2.0, "V": 20.0},
                                  parameter_scale="log10", noise=noise)
            small = any(SMALL_VALUES_MISSED in w for w in res.warnings)
            named = sum(w.startswith(LACK_OF_FIT) and SMALL_VALUES_MISSED not in w
                        for w in res.warnings)
            growing = any("grow with its size" in w for w in res.warnings)
            for j, v in enumerate((1, named, small, growing)):
                totals[label][j] += v
            print(f"seed {seed:3d} {label:11s} success {res.success!s:5s} subjects named "
                  f"{named}  smallest values missed {small!s:5s}  growing-noise note "
                  f"{growing}", flush=True)
    for label, (fits, named, small, growing) in totals.items():
        print(f"{label}: {fits} fits, {fits * doses.size} subjects judged, {named} named; "
              f"{small} fits flagged for missing the smallest values; {growing} fits with the "
              "growing-noise note")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
