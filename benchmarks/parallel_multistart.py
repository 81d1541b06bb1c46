"""Multistart on CMG: serial against a local pool (n_jobs) and a Dask LocalCluster.

Eight starts (``p0`` and seven Latin-hypercube samples of the box, seed 0),
``picard-gn`` with the problem's protocol settings, in one run:

1. serially in this process;
2. ``n_jobs=2`` (a local pool of two processes, started and stopped inside
   the call, so its start-up is in the time);
3. on a Dask ``LocalCluster`` of two worker processes of one thread each
   (its start-up is not in the time: a cluster outlives calls).

Prints each wall time with the CPU time other processes used meanwhile
(the machine is shared: a ratio is only meaningful where that is near 0),
the ratio serial / parallel, the best ratio the starts' imbalance allows,
and whether the best estimate is identical (bit for bit) to the serial one.
``--pairs 2`` alternates serial and pooled runs (s, p, p, s).  The code cache is
warmed first, so no variant compiles.  The ratio, not the times, is the
number to compare across machines; on a 2-core machine the ideal is 2 less
the imbalance of the starts (their iteration counts differ: 12 to 134).

    python benchmarks/parallel_multistart.py [--starts 8] [--jobs 2] [--pairs 1] [--no-dask]
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread, before NumPy loads)

import argparse
import os
import platform
import time
from typing import Any

import numpy as np

import picard_casadi as pc


def _makespan(durations: list[float], workers: int) -> float:
    """Finish time of tasks handed in order to the first free of ``workers`` (a pool's rule)."""
    free = [0.0] * workers
    for d in durations:
        k = free.index(min(free))
        free[k] += d
    return max(free)


def _machine_busy() -> float:
    """CPU seconds the whole machine has been busy (``/proc/stat``)."""
    with open("/proc/stat") as fh:
        fields = [int(v) for v in fh.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    """CPU seconds of this process, its finished children and its live descendants."""
    try:
        import psutil  # comes with the dask extra
    except ImportError:  # this process and its finished children only
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system
    me = psutil.Process()
    t = me.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in me.children(recursive=True):
        try:
            c = child.cpu_times()
            total += c.user + c.system
        except psutil.Error:
            pass
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="cmg")
    ap.add_argument("--starts", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pairs", type=int, default=1, help="serial/pooled pairs (alternating)")
    ap.add_argument("--no-dask", action="store_true")
    args = ap.parse_args()

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python "
          f"{platform.python_version()}; {args.problem}, {args.starts} starts, seed {args.seed}")
    prob = pc.problem(args.problem, seed=0)
    t0 = time.perf_counter()
    prob.estimate(uncertainty=False)  # warm the code cache (and the interpreter)
    print(f"warm-up (one start, code cache filled): {time.perf_counter() - t0:.1f} s", flush=True)

    def run(label: str, **kw: Any):
        busy, own = _machine_busy(), _own_cpu()
        t = time.perf_counter()
        res = prob.estimate(multistart=args.starts, seed=args.seed, **kw)
        dt = time.perf_counter() - t
        others = (_machine_busy() - busy) - (_own_cpu() - own)
        print(f"{label:30s} {dt:7.1f} s  best p = {np.array2string(res.p, precision=6)}; other "
              f"processes used {max(others, 0.0):.1f} CPU-s meanwhile "
              f"({max(others, 0.0) / dt:.2f} cores)", flush=True)
        return res, dt

    times_s, times_p, results = [], [], []
    for k in range(args.pairs):
        order = (("serial", {}), (f"n_jobs={args.jobs}", {"n_jobs": args.jobs}))
        for label, kw in (order if k % 2 == 0 else order[::-1]):
            res, dt = run(label, **kw)
            (times_p if kw else times_s).append(dt)
            results.append(res)
    serial = results[0]
    same = all(np.array_equal(serial.p, r.p) for r in results)
    starts = [s["wall_time"] for s in serial.starts]
    ideal = sum(starts) / _makespan(starts, args.jobs)
    print(f"  iterations per start {[s['iterations'] for s in serial.starts]}, start times "
          f"(serial run) {np.round(starts, 1).tolist()} s: handed out in order to "
          f"{args.jobs} workers they allow at most {ideal:.2f}x")
    ratios = ", ".join(f"{a / b:.2f}" for a, b in zip(times_s, times_p))
    print(f"  ratio serial / n_jobs={args.jobs}: {ratios}; best estimate identical: {same}",
          flush=True)
    if not args.no_dask:
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=args.jobs, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            dasked, t_dask = run(f"Dask LocalCluster ({args.jobs} workers)",
                                 executor=client.get_executor())
        print(f"  ratio serial / Dask: {np.mean(times_s) / t_dask:.2f}; best estimate "
              f"identical: {np.array_equal(serial.p, dasked.p)}", flush=True)


if __name__ == "__main__":
    main()
