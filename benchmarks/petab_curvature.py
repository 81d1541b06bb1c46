"""How far a quadratic model of PEtab's nllh reaches around a problem's nominal vector.

Run::

    python benchmarks/petab_curvature.py <problem> [parameter ...]

For each named parameter (default: every estimated one) of a problem
vendored in ``tests/data/petab`` (or read from ``PETAB_COLLECTION``, as
``benchmarks/petab_collection.py``), the forward difference quotients

    (nllh(v + h e_k) - nllh(v)) / h,   h = 1e-2, 1e-3, 1e-4, 1e-5,

at the collection's nominal vector ``v``, on the parameter's own scale (a
step of 1e-3 in ``log10 k`` is 0.23 % in ``k``), the nllh computed by the
by-hand simulation of ``tests/test_petab_suite.py`` (CVODES) at ``rtol``
1e-10 and again at 1e-12: quotients that agree at both tolerances are the
likelihood's, not the integration's error.  Where the nllh is smooth on the
scale of the steps, the quotients approach the gradient linearly in ``h``
(at an optimum ``h`` times half the curvature); where they jump between
steps, no quadratic model, and so no Gauss-Newton or trust-region step,
reaches further than the smallest step at which they settle.
"""

from __future__ import annotations

import sys
from pathlib import Path

import _single_thread  # noqa: F401  (one BLAS thread, as the package's solves)

from petab_collection import problem
from picard_casadi.parameters import from_scale, on_scale

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_petab_suite import simulate_nominal  # noqa: E402  (the by-hand simulation)

#: the steps on each parameter's scale
STEPS = (1e-2, 1e-3, 1e-4, 1e-5)
#: CVODES' relative tolerances of the by-hand simulation
TOLERANCES = (1e-10, 1e-12)


def main(name: str, chosen: list[str]) -> None:
    prob, _ = problem(name)
    nominal = {q.name: q.start for q in prob.parameters}
    table = {q.name: q for q in prob.parameters}
    names = chosen or [q.name for q in prob.parameters if q.estimate]
    unknown = [n for n in names if n not in table]
    if unknown:
        sys.exit(f"{name} has no parameter {unknown}; its parameters: {sorted(table)}")
    print(f"{name}: forward difference quotients of the nllh at the nominal vector, "
          f"steps {', '.join(f'{h:g}' for h in STEPS)} on each parameter's scale")
    print(f"{'parameter':<28}{'rtol':>7}{'nllh':>12}" + "".join(f"{h:>12g}" for h in STEPS))
    for rtol in TOLERANCES:
        base = -simulate_nominal(prob, rtol=rtol)[0]
        for n in names:
            q = table[n]
            row = []
            for h in STEPS:
                moved = dict(nominal)
                moved[n] = from_scale(on_scale(nominal[n], q.scale) + h, q.scale)
                row.append((-simulate_nominal(prob, moved, rtol=rtol)[0] - base) / h)
            print(f"{q.scale + '(' + n + ')':<28}{rtol:>7.0e}{base:>12.4f}"
                  + "".join(f"{v:>12.4g}" for v in row), flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
