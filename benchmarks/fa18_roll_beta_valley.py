"""The valley of ``fa18-roll-beta`` seed 1 on the unweighted loss: where it leads.

Run::

    python benchmarks/fa18_roll_beta_valley.py        # ~4 min

The one unweighted F/A-18 run on which ``picard-gn`` started from ``p0``
does not converge (README, Known limitations).  Four paths along its valley,
each finished by IPOPT (exact Hessian) warm-started on the same
discretisation:

1. ``picard-gn`` (the default constrained step) from ``p0``, 1000 iterations; IPOPT from
   its last point; ``picard-gn`` again from IPOPT's answer (does it accept
   that optimum?);
2. ``picard-gn`` with ``continuity="multiplier"`` (augmented Lagrangian on
   the gaps), 800 iterations; the constrained ``picard-gn`` from there; IPOPT
   from that answer;
3. ``picard-gn`` on the unweighted loss started from the weighted answer
   (``weights="auto"``) with Gauss-Newton steps only
   (``hessian="gauss-newton"``), 2000 iterations; IPOPT from there.  This
   path ends next to an optimum, so it shows Gauss-Newton's own local
   behaviour on this large-residual loss;
4. the same start with the default ``hessian="auto"`` (exact-Hessian steps
   once Gauss-Newton stalls), as ``examples/fa18_coefficients.py`` runs it;
   IPOPT from there.

Each line prints the status, iterations, objective (the data misfit of its
loss), continuity gap and ``p``.
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import time
import warnings

import numpy as np

import picard_casadi as pc


def line(label: str, res: pc.EstimationResult, t0: float) -> None:
    """One row: status, iterations, objective, gap, parameters, time since ``t0``."""
    status = "converged" if res.success else "NOT converged"
    print(f"{label:46s} {status:13s} {res.iterations:5d} it  objective {res.objective:.6f}  "
          f"gap {res.continuity_gap:.1e}  p = {np.array2string(res.p, precision=3)}  "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)


def main() -> None:
    warnings.filterwarnings("ignore")
    prob = pc.problem("fa18-roll-beta", seed=1)
    common = {"weights": "none", "uncertainty": False}
    t0 = time.perf_counter()
    print(f"truth p = {np.array2string(prob.p_true, precision=3)}")
    gn = prob.estimate("picard-gn", max_iter=1000, **common)
    line("1. picard-gn, 1000 iterations", gn, t0)
    ip = prob.estimate("ipopt", warm_start=gn, **common)
    line("   IPOPT from there", ip, t0)
    back = prob.estimate("picard-gn", warm_start=ip, max_iter=100, **common)
    line("   picard-gn from IPOPT's answer", back, t0)
    mult = prob.estimate("picard-gn", continuity="multiplier", max_iter=800, **common)
    line("2. picard-gn, continuity='multiplier', 800 it", mult, t0)
    gn2 = prob.estimate("picard-gn", warm_start=mult, max_iter=1000, **common)
    line("   picard-gn from there", gn2, t0)
    ip2 = prob.estimate("ipopt", warm_start=gn2, **common)
    line("   IPOPT from there", ip2, t0)
    weighted = prob.estimate("picard-gn", weights="auto", uncertainty=False)
    line("3. picard-gn, weights='auto'", weighted, t0)
    gn3 = prob.estimate("picard-gn", warm_start=weighted, max_iter=2000,
                        hessian="gauss-newton", **common)
    line("   unweighted from there, Gauss-Newton only", gn3, t0)
    ip3 = prob.estimate("ipopt", warm_start=gn3, **common)
    line("   IPOPT from there", ip3, t0)
    gn4 = prob.estimate("picard-gn", warm_start=weighted, max_iter=2000, **common)
    line("4. unweighted from the weighted answer (auto)", gn4, t0)
    ip4 = prob.estimate("ipopt", warm_start=gn4, **common)
    line("   IPOPT from there", ip4, t0)


if __name__ == "__main__":
    main()
