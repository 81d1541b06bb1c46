"""picard-gn's time per iteration: generated code against the virtual machine,
and against an earlier version of the package.

Run::

    python benchmarks/picard_gn_speed.py
    python benchmarks/picard_gn_speed.py --baseline /path/to/old/checkout/.venv/bin/python
    python benchmarks/picard_gn_speed.py --baseline OLD_PYTHON --rounds 5
    python benchmarks/picard_gn_speed.py --sparse

``--sparse`` forces the per-interval generated functions with CasADi's sparse
QR inside (:mod:`picard_casadi.transcription.interval_linearisation`) on these small, densely
coupled models, where the library would choose the batched dense NumPy path:
what moving the linear algebra into generated code costs there.

For each problem (``cmg`` and ``fa18-roll-ail`` with the registry's settings,
``refine`` off where the version has it, so every run solves the same
discretised problem), one warm-up call fills the code cache, then the solve
time per iteration is measured with code generation on and off.  With
``--baseline`` the same measurement runs in a subprocess with another
interpreter (an older checkout installed in its own venv) and the ratios
come from this one run: the two versions are measured in turn, ``--rounds``
times each (3 by default), and each keeps its fastest, so that a busy spell
of the shared machine does not fall on one version only.  The library limits
BLAS to one thread itself; the baseline gets ``OMP_NUM_THREADS=1`` so that
both run single-threaded.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

MEASURE = r'''
import inspect, json, sys, warnings
warnings.simplefilter("ignore")
import picard_casadi as pc
if sys.argv[2] == "sparse":
    import picard_casadi.transcription.functions as transcription
    transcription.sparse_pays = lambda model: True
out = {}
for name in sys.argv[1].split(","):
    prob = pc.problem(name, seed=0)
    extra = {"weights": "auto"} if name.startswith("fa18") else {}
    if "refine" in inspect.signature(pc.estimate).parameters:
        extra["refine"] = False
    row = {}
    for cg in (True, False):
        prob.estimate("picard-gn", codegen=cg, uncertainty=False, **extra)
        best = None
        for _ in range(5):  # best of five: these machines are shared
            res = prob.estimate("picard-gn", codegen=cg, uncertainty=False, **extra)
            per = res.timings["solve"] / max(res.iterations, 1)
            best = per if best is None else min(best, per)
        row["C" if cg else "VM"] = best
        row["iterations"] = res.iterations
    out[name] = row
print("JSON" + json.dumps(out))
'''

PROBLEMS = "cmg,fa18-roll-ail"


def measure(python: str, path: str = "auto") -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    # run outside any checkout, so each interpreter imports its own installed package
    out = subprocess.run([python, "-c", MEASURE, PROBLEMS, path], capture_output=True, text=True,
                         env=env, check=True, cwd=tempfile.gettempdir())
    line = [s for s in out.stdout.splitlines() if s.startswith("JSON")][-1]
    return json.loads(line[4:])


def fastest(a: dict, b: dict) -> dict:
    """Per problem, the faster of two measurements of each kind."""
    return {name: {k: (min(v, b[name][k]) if k != "iterations" else v) for k, v in row.items()}
            for name, row in a.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="python of an older checkout, for the ratio")
    parser.add_argument("--sparse", action="store_true",
                        help="force the generated sparse per-interval functions")
    parser.add_argument("--rounds", type=int, default=3,
                        help="measurements of each version, taken in turn (with --baseline)")
    args = parser.parse_args()
    path = "sparse" if args.sparse else "auto"
    now = measure(sys.executable, path)
    old = None
    if args.baseline:
        old = measure(args.baseline)
        for _ in range(args.rounds - 1):
            now = fastest(now, measure(sys.executable, path))
            old = fastest(old, measure(args.baseline))
    print(f"{'problem':14s} {'it':>4s} {'C [ms/it]':>10s} {'VM [ms/it]':>11s} {'VM/C':>6s}"
          + (f" {'old C':>8s} {'old VM':>8s} {'new C / old C':>14s}" if old else ""))
    for name, row in now.items():
        line = (f"{name:14s} {row['iterations']:4d} {1e3 * row['C']:10.1f} "
                f"{1e3 * row['VM']:11.1f} {row['VM'] / row['C']:6.2f}")
        if old:
            o = old[name]
            line += (f" {1e3 * o['C']:8.1f} {1e3 * o['VM']:8.1f} {row['C'] / o['C']:14.3f}")
        print(line, flush=True)


if __name__ == "__main__":
    main()
