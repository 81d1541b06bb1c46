"""Whole call, warm code cache: ``picard-gn`` against IPOPT on the paper problems.

Run::

    python benchmarks/whole_call.py [--problems cmg,fa18-drag,...] [--empty-cache] [--threads]

For each problem (seed 11, the registry's settings, every default otherwise:
the first mesh chosen, certified and refined where needed), each method is
called once to build and compile, then timed: the wall time of the whole
``estimate`` call (build, guess, solve, uncertainty, certificate), with the
breakdown from ``result.timings``, and the first call's build time (``first
build``: cold with ``--empty-cache``, which points the code cache at a new
temporary folder).  Prints ``picard-gn``'s whole call over IPOPT's, measured
in this one run.

``--threads`` instead compares, on ``cmg`` (or the ``--problems`` given),
``picard-gn`` with the default BLAS threads against one thread forced from
outside (``threadpoolctl``) and against the package's own limit switched off
(``PICARD_CASADI_BLAS_THREADS=0``), in one process, alternating, best of two
each; ``--unweighted`` fits with ``weights="none"``, ``--hessian`` sets
``picard-gn``'s ``hessian`` option (``exact``: the Newton model, which forms
the batched inverses) and ``--seed`` picks the data set, e.g. the case that
made the package limit the threads; ``--busy`` keeps one core busy with another
process meanwhile (a shared machine, or a second worker of a multistart)::

    python benchmarks/whole_call.py --threads --problems fa18-drag-stab --unweighted --seed 0
    python benchmarks/whole_call.py --threads --busy
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np

import picard_casadi as pc

PROBLEMS = ("cmg", "fa18-drag", "fa18-drag-stab", "fa18-roll-beta", "fa18-roll-rates",
            "fa18-roll-ail", "fa18-roll-rud")


def timed(prob, method, **kwargs):
    t = time.perf_counter()
    res = prob.estimate(method, **kwargs)
    return res, time.perf_counter() - t


def whole_call(names, seed: int = 11):
    print(f"{'problem':16s} {'method':10s} {'ok':>3s} {'it':>5s} {'int':>4s} {'call [s]':>8s} "
          f"{'build':>6s} {'guess':>6s} {'solve':>7s} {'unc':>6s} {'cert':>6s} {'first build':>11s}")
    ratios = {}
    for name in names:
        prob = pc.problem(name, seed=seed)
        calls = {}
        for method in ("picard-gn", "ipopt"):
            first, _ = timed(prob, method)  # builds, compiles, fills the cache
            res, wall = timed(prob, method)
            calls[method] = (res, wall)
            tm = res.timings
            print(f"{name:16s} {method:10s} {str(res.success)[0]:>3s} {res.iterations:5d} "
                  f"{res.settings['intervals']:4d} {wall:8.2f} {tm.get('build', 0):6.2f} "
                  f"{tm.get('guess', 0):6.2f} {tm.get('solve', 0):7.2f} "
                  f"{tm.get('sensitivity', 0):6.2f} {tm.get('certificate', 0):6.2f} "
                  f"{first.timings.get('build', 0):11.2f}", flush=True)
        (a, ta), (b, tb) = calls["picard-gn"], calls["ipopt"]
        rel = float(np.max(np.abs(a.p - b.p) / np.maximum(np.abs(b.p), 1e-12)))
        ratios[name] = ta / tb
        print(f"{'':16s} picard-gn / IPOPT whole call = {ta / tb:.3f}; "
              f"largest relative difference of p {rel:.1e}", flush=True)
    print("ratios: " + ", ".join(f"{k} {v:.3f}" for k, v in ratios.items()))


def threads(name: str = "cmg", seed: int = 11, unweighted: bool = False,
            hessian: str | None = None):
    from threadpoolctl import threadpool_info, threadpool_limits

    prob = pc.problem(name, seed=seed)
    kwargs = {"weights": "none"} if unweighted else {}
    if hessian is not None:
        kwargs["hessian"] = hessian
    prob.estimate("picard-gn", **kwargs)  # warm cache
    blas = [i for i in threadpool_info() if i["user_api"] == "blas"]
    print(f"{name}, seed {seed}, {'unweighted' if unweighted else 'default weights'}, "
          f"hessian={hessian or 'default'}; BLAS:",
          ", ".join(f"{i['internal_api']} {i['num_threads']} threads" for i in blas))
    times = {"default": [], "one": [], "unlimited": []}
    for _ in range(2):
        for mode in times:
            if mode == "one":
                with threadpool_limits(limits=1, user_api="blas"):
                    _, wall = timed(prob, "picard-gn", **kwargs)
            elif mode == "unlimited":  # the package's limit switched off
                os.environ["PICARD_CASADI_BLAS_THREADS"] = "0"
                try:
                    _, wall = timed(prob, "picard-gn", **kwargs)
                finally:
                    del os.environ["PICARD_CASADI_BLAS_THREADS"]
            else:
                _, wall = timed(prob, "picard-gn", **kwargs)
            times[mode].append(wall)
            print(f"  {mode:8s} threads: {wall:.2f} s", flush=True)
    print(f"default / one thread (best of 2 each) = "
          f"{min(times['default']) / min(times['one']):.2f}; without the package's limit "
          f"(PICARD_CASADI_BLAS_THREADS=0) / one thread = "
          f"{min(times['unlimited']) / min(times['one']):.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default=",".join(PROBLEMS))
    ap.add_argument("--threads", action="store_true")
    ap.add_argument("--unweighted", action="store_true", help="with --threads: weights='none'")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--hessian", default=None, help="with --threads: picard-gn's hessian option")
    ap.add_argument("--busy", action="store_true",
                    help="with --threads: another process keeps one core busy meanwhile")
    ap.add_argument("--empty-cache", action="store_true",
                    help="a new, empty code cache: the first call's build is cold")
    args = ap.parse_args()
    if args.empty_cache:
        import tempfile

        os.environ["PICARD_CASADI_CACHE"] = tempfile.mkdtemp(prefix="picard_whole_call_")
    warnings.simplefilter("ignore")
    cache = "an empty code cache first" if args.empty_cache else "warm code cache"
    print(f"machine: {platform.machine()}, python {platform.python_version()}, seed {args.seed}, "
          f"{cache}, every default")
    if args.threads:
        names = args.problems.split(",") if args.problems != ",".join(PROBLEMS) else ["cmg"]
        busy = None
        if args.busy:
            import subprocess
            import sys

            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            print("another process keeps one core busy")
        try:
            for name in names:
                threads(name, args.seed, args.unweighted, args.hessian)
        finally:
            if busy is not None:
                busy.kill()
    else:
        whole_call(args.problems.split(","), args.seed)


if __name__ == "__main__":
    main()
