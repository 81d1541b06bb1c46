"""What the discretisation certificate adds to a call of ``estimate``.

Run::

    python benchmarks/certificate_cost.py            # seeds 0 1 2
    python benchmarks/certificate_cost.py --seeds 0

For ``cmg`` and the six F/A-18 runs with the registry's settings
(``prob.estimate()``: ``picard-gn``, the paper's ``T``, F/A-18 with
``weights="auto"``), each problem first runs once to fill the code cache;
then, per seed, one call is timed.  Printed per call: how many refinement
rounds the certificate asked for, the whole call's time, and the
certificate's own time (the accurate CVODES integration of every interval
and the propagation of its defects) over the rest of the call.  The
solution's exact sensitivities, which the certificate needs, are the ones the
uncertainty (on by default) computes anyway; the second ratio counts them
too (what certification costs with ``uncertainty=False``).  Where the first
mesh already certifies (0 refinements) the issue's target is a ratio of at
most 0.30.  All ratios are measured in this one run; the library limits
BLAS to one thread itself (``picard_casadi/runtime/threads.py``).
"""

from __future__ import annotations

import argparse
import platform
import time

import picard_casadi as pc

PROBLEMS = ["cmg", "fa18-drag", "fa18-drag-stab", "fa18-roll-beta", "fa18-roll-rates",
            "fa18-roll-ail", "fa18-roll-rud"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, python {platform.python_version()}")
    print(f"{'problem':16s} seed refinements intervals   call [s]  certificate [s]  "
          f"cert/rest  (cert+sens)/rest")
    first_mesh = []
    t_start = time.perf_counter()
    for name in PROBLEMS:
        pc.problem(name, seed=99).estimate()  # fill the code cache
        for seed in args.seeds:
            res = pc.problem(name, seed=seed).estimate()
            t = res.timings
            cert, sens = t.get("certificate", 0.0), t.get("sensitivity", 0.0)
            rest = res.wall_time - cert
            ratio, ratio_all = cert / rest, (cert + sens) / (res.wall_time - cert - sens)
            refinements = res.settings["refinements"]
            if refinements == 0:
                first_mesh.append((name, seed, ratio, ratio_all))
            print(f"{name:16s} {seed:4d} {refinements:11d} {res.settings['intervals']:9d} "
                  f"{res.wall_time:10.2f} {cert:16.3f} {ratio:10.3f} {ratio_all:17.3f}"
                  f"{'' if res.success else '  FAILED: ' + res.message[:60]}", flush=True)
    if first_mesh:
        worst = max(first_mesh, key=lambda r: r[2])
        worst_all = max(first_mesh, key=lambda r: r[3])
        print(f"\nfirst mesh certified in {len(first_mesh)} calls: certificate/rest at most "
              f"{worst[2]:.3f} ({worst[0]} seed {worst[1]}), with the sensitivities at most "
              f"{worst_all[3]:.3f} ({worst_all[0]} seed {worst_all[1]}); target <= 0.30")
    print(f"total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
