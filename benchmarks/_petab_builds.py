"""What ``pc.estimate`` builds for a vendored PEtab problem, kept for a
benchmark to time (the derivative benchmarks' shared setup)."""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import picard_casadi as pc

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "petab"
PROBLEMS = ["Boehm_JProteomeRes2014", "Bruno_JExpBot2016", "Crauste_CellSystems2017",
            "Elowitz_Nature2000", "Borghans_BiophysChem1997"]
REPEATS = 5


def cpu_ms(fn) -> float:
    """CPU milliseconds per call of ``fn`` (one call first, untimed; then
    :data:`REPEATS` calls)."""
    fn()
    t0 = time.process_time()
    for _ in range(REPEATS):
        fn()
    return 1e3 * (time.process_time() - t0) / REPEATS


def built(cls: type, name: str, method: str) -> tuple[Any, Any]:
    """The instance of ``cls`` (built as ``cls(setup, opts)``) and its options
    that ``pc.estimate`` builds for problem ``name`` from its nominal vector
    with ``method`` (one iteration, no standard errors)."""
    prob = pc.read_petab(DATA / name / f"{name}.yaml")
    kept = {}
    build = cls.__init__

    def keep(self, setup, opts):
        build(self, setup, opts)
        kept["object"], kept["opts"] = self, opts

    cls.__init__ = keep
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pc.estimate(prob.model, prob.experiments, prob.parameters, noise=prob.noise,
                        method=method, max_iter=1, uncertainty=False)
    finally:
        cls.__init__ = build
    return kept["object"], kept["opts"]
