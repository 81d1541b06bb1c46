"""What every flight-test example shares: where the book's data are, and the run.

``run_case(doc, model, make_experiment, p0, **estimate_options)`` reads
``--data DIR`` from the command line (default ``$PICARD_CASADI_FLIGHT_DATA``,
else ``../shared/data/flight/`` beside the repository), fits with every default but the case's own
options (its fixed initial state, its fixed parameters), and prints the
summary, ``det R`` and the CPU time of the fit.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import picard_casadi as pc

#: the book's flight data (not part of this repository): the folder
#: ``$PICARD_CASADI_FLIGHT_DATA`` names, else ``../shared/data/flight`` beside it
DATA = Path(os.environ.get("PICARD_CASADI_FLIGHT_DATA")
            or Path(__file__).resolve().parents[3] / "shared" / "data" / "flight")


def run_case(doc: str, model: pc.Model, make_experiment: Callable[[Path], pc.Experiment],
             p0: Any, **options: Any) -> pc.EstimationResult:
    """Fit one test case from the command line's data folder and report it."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA, help="folder of the book's data")
    args = ap.parse_args()
    if not args.data.is_dir():
        ap.error(f"the book's flight data are not at {args.data}: pass --data DIR, the folder "
                 "of the files of its flt_data.zip (or set PICARD_CASADI_FLIGHT_DATA)")
    exp = make_experiment(args.data)
    t0, c0 = time.perf_counter(), time.process_time()
    res = pc.estimate(model, [exp], p0, estimate_x0=False, **options)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(res.summary())
    print(f"det R {res.det_R:.6e}; wall {wall:.2f} s, CPU {cpu:.2f} s")
    return res
