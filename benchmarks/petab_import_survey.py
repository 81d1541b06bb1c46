"""Which problems of the PEtab benchmark collection import, and how close their
simulation at the nominal vector comes to the collection's own.

Run::

    python benchmarks/petab_import_survey.py <Benchmark-Models folder>

with a checkout of github.com/Benchmarking-Initiative/Benchmark-Models-PEtab
(BSD-3; only six problems are vendored here, in ``tests/data/petab``).  Per
problem: ``OK`` and its sizes, or the error ``pc.read_petab`` gives (the
construct it names); where the problem has the collection's simulated data
(``simulatedData_<name>.tsv``, at the nominal vector), the largest relative
difference of the simulation by hand (CVODES, ``rtol`` 1e-10; a
preequilibration simulated to t = 1e4, then the resets:
``tests/test_petab_suite.py::simulate_nominal``) from it, and PEtab's nllh
there.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import _single_thread  # noqa: F401  (one BLAS thread, as the package's solves)
import numpy as np
import pandas as pd

import picard_casadi as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_petab_suite import simulate_nominal  # noqa: E402  (the by-hand simulation)


def survey(folder: Path) -> None:
    warnings.simplefilter("ignore")
    for d in sorted(p for p in folder.iterdir() if p.is_dir()):
        start = time.process_time()
        try:
            prob = pc.read_petab(d / f"{d.name}.yaml")
        except Exception as err:  # noqa: BLE001  (the message is the result)
            print(f"{d.name}: {type(err).__name__}: {str(err)[:200]}", flush=True)
            continue
        line = (f"{d.name}: OK nx={prob.model.nx} np={prob.model.np} "
                f"ny={len(prob.model.y_names)} experiments={len(prob.experiments)} "
                f"preequilibrated={sum(e.preequilibration is not None for e in prob.experiments)}")
        ref_file = d / f"simulatedData_{d.name}.tsv"
        if ref_file.exists():
            try:
                llh, sim = simulate_nominal(prob)
            except Exception as err:  # noqa: BLE001
                print(f"{line}; simulation failed: {str(err)[:150]}", flush=True)
                continue
            ref = pd.read_csv(ref_file, sep="\t").rename(columns={
                "simulationCondition": "simulationConditionId"})  # older files
            if "simulationConditionId" not in ref.columns:
                print(f"{line}; simulated data without simulationConditionId", flush=True)
                continue
            # by condition and observable, the nearest time (the files round them)
            ours = {k: g for k, g in sim.groupby(["simulationConditionId", "observableId"])}
            worst, matched = 0.0, 0
            for _, r in ref.iterrows():
                g = ours.get((str(r["simulationConditionId"]), str(r["observableId"])))
                if g is None:
                    continue
                near = np.argmin(np.abs(g["time"].to_numpy() - float(r["time"])))
                if abs(g["time"].iloc[near] - float(r["time"])) > 1e-6 * max(
                        1.0, abs(float(r["time"]))):
                    continue
                matched += 1
                worst = max(worst, abs(g["simulation"].iloc[near] - r["simulation"])
                            / max(abs(r["simulation"]), 1e-3))
            line += (f"; nllh {-llh:.6f}; {matched} of {len(ref)} simulated values matched, "
                     f"largest relative difference {worst:.2g}")
        print(f"{line} [{time.process_time() - start:.1f} s CPU]", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    survey(Path(sys.argv[1]))
