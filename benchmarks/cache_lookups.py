"""What finding the compiled functions in a warm code cache costs per call.

Run::

    python benchmarks/cache_lookups.py [problem ...]

Every call of ``estimate`` builds its transcription and finds its compiled
functions in the code cache (one library per function: its cache key from
the function's serialisation, the compiler's version and the flags; the
library's checksum; loading it).  For each problem (default ``cmg`` and
``fa18-roll-rud``; seed 11, the registry's mesh) this times, on a warm cache,
the transcription's build with every function it compiles found and loaded
(``prefetch`` of all of them, then ``native`` of each), best of five, two
ways: as the first call in a process goes, and as every call went before
stop 32 (the compiler asked for its version and every library hashed at each
lookup: the process's memory of both cleared), and as every later call goes
now (the compiler's version and the verified checksums remembered).  Measured in
this one run; ``benchmarks/results/cache_lookups.txt`` holds a run.
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import sys
import time
import warnings

import numpy as np

import picard_casadi as pc
from picard_casadi.runtime import codegen, compiled_functions, compiler
from picard_casadi.transcription.discretisation import Discretisation
from picard_casadi.estimation.setup import interval_functions
from picard_casadi.transcription.functions import Transcription


def lookups(disc: Discretisation, n: int, forget: bool) -> float:
    """Seconds to build the transcription and find all its compiled functions."""
    if forget:
        compiler._IDENTITIES.clear()
        codegen._VERIFIED.clear()
    t = time.perf_counter()
    backend, _ = compiled_functions.backend_for(True)
    tr = Transcription(disc, n, np.ones(disc.model.ny), np.ones(disc.model.nx),
                       backend=backend, interval_functions=interval_functions(disc, n))
    tr.functions.prefetch(list(tr.functions))
    for name in tr.functions:
        tr.functions.native(name)
    return time.perf_counter() - t


def main() -> None:
    names = sys.argv[1:] or ["cmg", "fa18-roll-rud"]
    print("warm code cache; transcription build with every compiled function found and "
          "loaded, best of 5 [ms]")
    print(f"{'problem':16s} {'functions':>9s} {'first call in a process':>23s} "
          f"{'later calls':>11s}")
    for name in names:
        prob = pc.problem(name, seed=11)
        res = prob.estimate("picard-gn", refine=False, uncertainty=False)  # fills the cache
        o = prob.options
        disc = Discretisation(prob.model, prob.experiments, res.settings["T"],
                              res.settings["nodes"], res.settings["scheme"])
        n = int(o.get("n", res.settings["n"]))
        lookups(disc, n, False)
        best = {}
        for _ in range(5):
            for way in ("first", "later"):
                dt = lookups(disc, n, way == "first")
                best[way] = min(best.get(way, np.inf), dt)
        count = len(list(Transcription(disc, n, np.ones(prob.model.ny), np.ones(prob.model.nx),
                                       backend=compiled_functions.backend_for(True)[0],
                                       interval_functions=interval_functions(disc, n)).functions))
        print(f"{name:16s} {count:9d} {1e3 * best['first']:23.1f} {1e3 * best['later']:11.1f}",
              flush=True)


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    main()
