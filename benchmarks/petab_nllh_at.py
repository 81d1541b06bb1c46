"""PEtab's likelihood at each problem's nominal vector without a fit, and its CPU time.

Run::

    python benchmarks/petab_nllh_at.py problem [problem ...]

For each problem (vendored in ``tests/data/petab``, or read from a checkout
of the collection named by ``PETAB_COLLECTION``, as in
``benchmarks/petab_collection.py``): ``PetabProblem.nllh_at()`` at the
table's nominal values and its CPU seconds, beside the by-hand simulation
of ``tests/test_petab_suite.py`` plus each normal prior's ``-log`` density
(PEtab's negative log-posterior, computed independently of the package's
estimation).  The numbers of docs/petab.md, "The likelihood at given
values".
"""

from __future__ import annotations

import sys
import time

import _single_thread  # noqa: F401  (one BLAS thread, as the package's solves)
from petab_collection import negative_log_posterior, problem


def main(names: list[str]) -> None:
    print(f"{'problem':<28}{'nllh_at()':>20}{'CPU s':>9}{'by hand':>20}")
    for name in names:
        prob, _ = problem(name)
        t0 = time.process_time()
        value = prob.nllh_at()
        cpu = time.process_time() - t0
        print(f"{name:<28}{value:>20.7f}{cpu:>9.1f}{negative_log_posterior(prob):>20.7f}",
              flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
