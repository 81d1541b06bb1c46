"""PEtab's Boehm_JProteomeRes2014 with every default, against the collection's optimum.

Run::

    python benchmarks/petab_boehm.py [n_starts]

The problem as the collection states it (``picard_casadi/models`` ``boehm``:
six rate constants on the log10 scale in ``[-5, 5]``, one noise level per
observable estimated: the package's default likelihood for several outputs),
fitted with every default of ``pc.estimate`` (``estimate_x0=False``: the
initial state is known) from the collection's nominal vector and from
``n_starts`` (default 5) points uniform in the bounds (NumPy seed 0).  Each
answer is re-scored by CVODES at ``rtol = 1e-10`` at the estimate
(``nllh ODE``), beside the package's report and the collection's nominal
value 138.2220 (PEtab's definition, its noise levels at their optimum for
that vector: 138.2220 too).  All measured in this one run.
"""

from __future__ import annotations

import math
import sys
import time
import warnings

import _single_thread  # noqa: F401  (one BLAS thread, as the package's solves)
import numpy as np

import picard_casadi as pc
from picard_casadi.models.boehm import NLLH_NOMINAL, X0, boehm_problem


def ode_nllh(model: pc.Model, exp: pc.Experiment, p: np.ndarray) -> float:
    """PEtab's nllh with each output's noise at its optimum, from CVODES."""
    X = pc.simulate(model, X0, p, exp.t, rtol=1e-10, atol=1e-10)
    G = np.array([model.output_value(t, x, p) for t, x in zip(exp.t, X)])
    r2 = (exp.y - G) ** 2
    n = np.isfinite(exp.y).sum(axis=0)
    return float(np.sum(0.5 * n * (np.log(2 * math.pi * np.nansum(r2, axis=0) / n) + 1)))


def main(n_starts: int = 5) -> None:
    model, exps, p0, (lb, ub) = boehm_problem()
    rng = np.random.default_rng(0)
    starts = [("nominal", p0)] + [(f"uniform {i}", rng.uniform(lb, ub)) for i in range(n_starts)]
    print(f"collection's nominal nllh {NLLH_NOMINAL:.4f}; ODE nllh at nominal "
          f"{ode_nllh(model, exps[0], p0):.4f}")
    print(f"{'start':<12}{'status':<12}{'method':<11}{'nllh report':>13}{'nllh ODE':>11}"
          f"{'- nominal':>11}{'CPU s':>8}  log10 k_imp_homo")
    for label, start in starts:
        t0 = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = pc.estimate(model, exps, start, p_bounds=(lb, ub), estimate_x0=False)
        cpu = time.process_time() - t0
        exact = ode_nllh(model, exps[0], res.p)
        print(f"{label:<12}{res.status:<12}{res.method:<11}{res.nllh:>13.4f}{exact:>11.4f}"
              f"{exact - NLLH_NOMINAL:>11.4f}{cpu:>8.1f}  {res.p[4]:.3f}", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
