"""The comparison study and the speed ratios to IPOPT, measured in one run.

Run::

    python benchmarks/study.py                      # core: vdp, LV, CMG, one F/A-18 run
    python benchmarks/study.py --paper              # every paper problem (slow)

Every method solves the same problem (same data, start, bounds, discretisation;
docs/problems.md protocol) with code generation on ("auto": on when a C compiler is
found).  F/A-18 runs use ``weights="auto"`` for every method (the unweighted
loss is ill-conditioned for every solver; see the README).  Prints, per
problem, the ratios of ``picard-gn``'s and ``picard``'s median solve times to
IPOPT's, and writes ``table.csv``, ``table.md`` and ``comparison.png`` into
``benchmarks/results/<study>/``.
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import argparse
import platform
import time
from pathlib import Path

from picard_casadi.runtime.compiler import find_compiler
from picard_casadi.studies.compare import compare

CORE = ["vdp", "lotka-volterra", "cmg", "fa18-roll-ail"]
PAPER = ["cmg", "fa18-drag", "fa18-drag-stab", "fa18-roll-beta", "fa18-roll-rates",
         "fa18-roll-ail", "fa18-roll-rud"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--paper", action="store_true", help="every paper problem")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--methods", nargs="+", default=["picard-gn", "ipopt", "picard"])
    args = ap.parse_args()
    names = PAPER if args.paper else CORE
    out = Path(__file__).parent / "results" / ("study_paper" if args.paper else "study_core")
    options = {n: {"weights": "auto"} for n in names if n.startswith("fa18")}
    method_options = {"ipopt": {"hessian": "gauss-newton"}}
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}, "
          f"C compiler {find_compiler()}")
    start = time.perf_counter()
    rows = compare(names, args.methods, repeats=args.repeats, out=out, codegen="auto",
                   options=options, method_options=method_options, verbose=True)
    print("\nsolve-time ratios to IPOPT (median over repeats; < 1 is faster than IPOPT)")
    for name in names:
        by = {r["method"]: r for r in rows if r["problem"] == name}
        if "ipopt" not in by:
            continue
        ref = by["ipopt"]
        parts = []
        for m in args.methods:
            if m == "ipopt" or m not in by:
                continue
            parts.append(f"{m} {by[m]['solve_time'] / ref['solve_time']:.3f} "
                         f"(iterations {by[m]['iterations']} vs {ref['iterations']})")
        print(f"  {name:16s} " + "; ".join(parts))
    if "picard" in args.methods and "picard-gn" in args.methods:
        for name in names:
            by = {r["method"]: r for r in rows if r["problem"] == name}
            pic = by["picard"]
            if pic["success"]:
                how = "converged"
            elif "iteration limit" in str(pic.get("message", "")):
                how = "stopped at its limit"
            else:
                how = f"failed: {pic.get('message', '')}"
            print(f"  {name:16s} iterations picard / picard-gn: "
                  f"{pic['iterations'] / by['picard-gn']['iterations']:.0f}x (picard {how})")
    print(f"\ntable: {out / 'table.md'}; total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
