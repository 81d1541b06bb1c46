"""Multistart on CMG: serial against a local pool (n_jobs) and a Dask LocalCluster.

Eight starts (``p0`` and seven Latin-hypercube samples of the box, seed 0),
``picard-gn`` with the problem's protocol settings, in one run:

1. serially in this process;
2. ``n_jobs=2`` (a local pool of two processes, started and stopped inside
   the call, so its start-up is in the time);
3. on a Dask ``LocalCluster`` of two worker processes of one thread each
   (its start-up is not in the time: a cluster outlives calls).

Serial and pooled runs alternate (serial, pool, pool, serial), each with
the machine's load before it; prints each wall time, the ratios
serial / parallel, the best ratio the starts' imbalance allows, and whether
the best estimate is identical (bit for bit) to the serial one.  The code cache is
warmed first, so no variant compiles.  The ratio, not the times, is the
number to compare across machines; on a 2-core machine the ideal is 2 less
the imbalance of the starts (their iteration counts differ: 12 to 134).

    python benchmarks/parallel_multistart.py [--starts 8] [--jobs 2] [--no-dask]
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread, before NumPy loads)

import argparse
import os
import platform
import time

import numpy as np

import picard_casadi as pc


def _makespan(durations: list[float], workers: int) -> float:
    """Finish time of tasks handed in order to the first free of ``workers`` (a pool's rule)."""
    free = [0.0] * workers
    for d in durations:
        k = free.index(min(free))
        free[k] += d
    return max(free)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="cmg")
    ap.add_argument("--starts", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-dask", action="store_true")
    args = ap.parse_args()

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python "
          f"{platform.python_version()}; {args.problem}, {args.starts} starts, seed {args.seed}")
    prob = pc.problem(args.problem, seed=0)
    t0 = time.perf_counter()
    prob.estimate(uncertainty=False)  # warm the code cache (and the interpreter)
    print(f"warm-up (one start, code cache filled): {time.perf_counter() - t0:.1f} s", flush=True)

    def run(label: str, **kw):
        load = os.getloadavg()[0]
        t = time.perf_counter()
        res = prob.estimate(multistart=args.starts, seed=args.seed, **kw)
        dt = time.perf_counter() - t
        its = [s["iterations"] for s in res.starts]
        print(f"{label:30s} {dt:7.1f} s  (1-min load before: {load:.2f})  best p = "
              f"{np.array2string(res.p, precision=6)}  iterations per start {its}", flush=True)
        return res, dt

    # serial and pooled twice, interleaved (s, p, p, s): the machine is shared,
    # and a drift of its load then shows as two different ratios
    serial, t_s1 = run("serial")
    pooled, t_p1 = run(f"n_jobs={args.jobs}", n_jobs=args.jobs)
    pooled2, t_p2 = run(f"n_jobs={args.jobs} (again)", n_jobs=args.jobs)
    serial2, t_s2 = run("serial (again)")
    same = all(np.array_equal(serial.p, r.p) for r in (pooled, pooled2, serial2))
    starts = [s["wall_time"] for s in serial.starts]
    ideal = sum(starts) / _makespan(starts, args.jobs)
    print(f"  start times (serial run): {np.round(starts, 1).tolist()} s; handed out in order to "
          f"{args.jobs} workers they allow at most {ideal:.2f}x")
    print(f"  ratio serial / n_jobs={args.jobs}: {t_s1 / t_p1:.2f} (first pair), "
          f"{t_s2 / t_p2:.2f} (second pair), {(t_s1 + t_s2) / (t_p1 + t_p2):.2f} (both); "
          f"best estimate identical in all four: {same}", flush=True)
    if not args.no_dask:
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=args.jobs, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            dasked, t_dask = run(f"Dask LocalCluster ({args.jobs} workers)",
                                 executor=client.get_executor())
        print(f"  ratio serial (mean of both) / Dask: {0.5 * (t_s1 + t_s2) / t_dask:.2f}; best "
              f"estimate identical: {np.array_equal(serial.p, dasked.p)}", flush=True)


if __name__ == "__main__":
    main()
