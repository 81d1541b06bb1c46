"""Cost against the number of states: a sparsely coupled ring of N states.

Run::

    python benchmarks/state_scaling.py [--sizes 20,40,80,160]

The model: ``x_i' = p0 (x_{i-1} + x_{i+1} - 2 x_i) - p1 x_i^3 + 0.5 sin(0.5 t +
2 pi i / N)`` (each state driven by its two neighbours and itself), ``x_i(0)
= cos(2 pi i / N)``, truth ``p = (0.8, 0.5)``, every state measured at 51
times on ``[0, 10]`` with noise 0.01, ``x0`` estimated; ``T = 0.5`` (20
intervals of 9 nodes), ``refine=False`` so every size solves the same mesh.
For each N, ``picard-gn`` with each ``tr_solver`` (``"exact"``, the
factorised step; ``"cg"``, products only) and ``ipopt`` (all compiled) are
run once to build and compile, then timed on a warm cache.  Prints the solve
time, the time per iteration, ``picard-gn``'s solve over IPOPT's, and the
growth exponent of ``picard-gn``'s time per iteration between successive
sizes (``log2`` of the ratio; 1.5 is the issue's bound, 3 a dense
factorisation), for each ``tr_solver`` and for the default's choice.

``--paths`` instead times ``picard-gn`` on both of its fixed-point paths
(the batched dense LU and the generated sparse QR) at each size, the
measurement behind ``interval_linearisation.SPARSE_MIN_STATES``, with the
size of the sparse path's QR factors of one interval::

    python benchmarks/state_scaling.py --paths --sizes 10,14,20,26,32,40

``--profile N`` times one ``picard-gn`` solve at N states by generated
function (calls, seconds), where an iteration's time goes; with
``--empty-cache`` it first points the code cache at a new, empty folder and
prints the first call's build (the C compiled for this model) by library::

    python benchmarks/state_scaling.py --profile 160 [--empty-cache]
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import argparse
import math
import platform
import time
import warnings

import casadi as ca
import numpy as np

import picard_casadi as pc
from picard_casadi.methods.matrix_free import cg_pays
from picard_casadi.models import ring


ring_model, ring_experiment = ring.build_model, ring.make_experiment


RUN_OPTIONS = dict(T=0.5, refine=False, uncertainty=False, p_bounds=([0, 0], [10, 10]),
                   codegen=True)


def run(model, exp, method, **options):
    kw = dict(RUN_OPTIONS, **options)
    pc.estimate(model, [exp], [0.5, 0.3], method, **kw)  # builds and compiles
    t = time.perf_counter()
    res = pc.estimate(model, [exp], [0.5, 0.3], method, **kw)
    return res, time.perf_counter() - t


def qr_fill(model: pc.Model, nodes: int = 9) -> int:
    """Entries of CasADi's sparse QR factors (V and R) of one interval's fixed-point matrix."""
    from picard_casadi.transcription.interval_linearisation import fixed_point_matrix_pattern
    from picard_casadi.transcription.quadrature import Quadrature

    A = np.asarray(Quadrature("chebyshev", nodes).integration, float)
    fx = ca.jacobian(model.rhs, model.x).sparsity()
    V, R, _, _ = fixed_point_matrix_pattern(A, fx, model.nx)[0].qr_sparse(True)
    return V.nnz() + R.nnz()


def compare_paths(sizes: list[int]) -> None:
    """picard-gn per iteration on the dense and the sparse path, size by size."""
    from picard_casadi.transcription.functions import interval_linearisation
    print(f"machine: {platform.machine()}, python {platform.python_version()}; ring, "
          "20 intervals x 9 nodes, one BLAS thread, warm cache; picard-gn only")
    print(f"{'N':>4s} {'path':7s} {'it':>4s} {'solve [s]':>9s} {'per it [ms]':>11s}")
    default = interval_linearisation.SPARSE_MIN_STATES
    try:
        for N in sizes:
            model = ring_model(N)
            exp = ring_experiment(model)
            per_it = {}
            for path, threshold in (("dense", 10 ** 9), ("sparse", 1)):
                interval_linearisation.SPARSE_MIN_STATES = threshold
                res, _ = run(model, exp, "picard-gn")
                per_it[path] = res.timings["solve"] / max(res.iterations, 1)
                print(f"{N:4d} {path:7s} {res.iterations:4d} {res.timings['solve']:9.3f} "
                      f"{1e3 * per_it[path]:11.1f}", flush=True)
            print(f"     dense / sparse per iteration = {per_it['dense'] / per_it['sparse']:.2f}; "
                  f"sparse QR factors of one interval: {qr_fill(model)} entries", flush=True)
    finally:
        interval_linearisation.SPARSE_MIN_STATES = default


def profile(N: int, empty_cache: bool = False) -> None:
    """Seconds per generated function in one picard-gn solve (warm cache);
    with ``empty_cache``, the first call's build by compiled library."""
    import os
    import tempfile
    from collections import Counter, defaultdict

    from picard_casadi.runtime import codegen
    from picard_casadi.runtime.native import NativeFunction

    model = ring_model(N)
    exp = ring_experiment(model)
    compiled: list[tuple[str, float, float]] = []
    compile_c = codegen._compile_c
    if empty_cache:
        os.environ["PICARD_CASADI_CACHE"] = tempfile.mkdtemp(prefix="picard_state_scaling_")

        def timed_compile(cc, sources, lib, *args, **kwargs):
            t = time.perf_counter()
            try:
                return compile_c(cc, sources, lib, *args, **kwargs)
            finally:
                size = sum(os.path.getsize(src) for src in sources) / 1e6
                # pc_{tag}_{key}.so: the tag names the library
                compiled.append((lib.stem[3:].rsplit("_", 1)[0], size,
                                 time.perf_counter() - t))

        codegen._compile_c = timed_compile
    t = time.perf_counter()
    try:
        first = pc.estimate(model, [exp], [0.5, 0.3], "picard-gn", **RUN_OPTIONS)
    finally:
        codegen._compile_c = compile_c
    first_wall = time.perf_counter() - t
    if empty_cache:
        print(f"ring of {N} states, first call on an empty code cache: whole call "
              f"{first_wall:.2f} s (build {first.timings['build']:.2f} s, solve "
              f"{first.timings['solve']:.2f} s); C compiled by library (side by side "
              "where prefetched):")
        for name, size, seconds in compiled:
            print(f"  {name:30s} {size:6.2f} MB of C {seconds:7.2f} s")
    seconds: defaultdict[str, float] = defaultdict(float)
    calls: Counter[str] = Counter()
    call, chain = NativeFunction.__call__, NativeFunction.chain

    def timed(self, *args, **kwargs):
        t = time.perf_counter()
        try:
            return call(self, *args, **kwargs)
        finally:
            seconds[self.name] += time.perf_counter() - t
            calls[self.name] += 1

    def timed_chain(self, *args, **kwargs):
        t = time.perf_counter()
        try:
            return chain(self, *args, **kwargs)
        finally:
            seconds[self.name + " (chain)"] += time.perf_counter() - t
            calls[self.name + " (chain)"] += 1

    NativeFunction.__call__, NativeFunction.chain = timed, timed_chain
    try:
        t = time.perf_counter()
        res = pc.estimate(model, [exp], [0.5, 0.3], "picard-gn", **RUN_OPTIONS)
        wall = time.perf_counter() - t
    finally:
        NativeFunction.__call__, NativeFunction.chain = call, chain
    solve = res.timings["solve"]
    print(f"ring of {N} states: {res.iterations} iterations, solve {solve:.3f} s "
          f"({1e3 * solve / max(res.iterations, 1):.1f} ms per iteration), whole call "
          f"{wall:.3f} s; generated functions in the whole call:")
    for name in sorted(seconds, key=seconds.get, reverse=True):
        print(f"  {name:30s} {calls[name]:4d} calls {seconds[name]:7.3f} s "
              f"{1e3 * seconds[name] / calls[name]:8.1f} ms per call")
    print(f"  {'the rest (NumPy, Python)':30s} {'':10s} {wall - sum(seconds.values()):7.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20,40,80,160")
    ap.add_argument("--profile", type=int, default=None, metavar="N",
                    help="seconds per generated function in one picard-gn solve at N states")
    ap.add_argument("--empty-cache", action="store_true",
                    help="with --profile: start from an empty code cache (cold build)")
    ap.add_argument("--paths", action="store_true",
                    help="time picard-gn's dense and sparse fixed-point paths at each size")
    args = ap.parse_args()
    sizes = [int(v) for v in args.sizes.split(",")]
    warnings.simplefilter("ignore")
    if args.paths:
        compare_paths(sizes)
        return
    if args.profile is not None:
        profile(args.profile, args.empty_cache)
        return
    print(f"machine: {platform.machine()}, python {platform.python_version()}; "
          "ring of N states, 20 intervals x 9 nodes, one BLAS thread, warm cache")
    print("picard-gn with each tr_solver ('exact': the factorised step, 'cg': products "
          "only); '*' marks the one tr_solver='auto' (the default) takes")
    print(f"{'N':>4s} {'method':14s} {'ok':>3s} {'it':>4s} {'solve [s]':>9s} "
          f"{'per it [ms]':>11s} {'call [s]':>8s}  p")
    runs = (("picard-gn", "exact"), ("picard-gn", "cg"), ("ipopt", None))
    per_it: dict[str, dict[int, float]] = {"exact": {}, "cg": {}, "auto": {}}
    for N in sizes:
        model = ring_model(N)
        exp = ring_experiment(model)
        auto = "cg" if cg_pays(model) else "exact"
        solves = {}
        for method, solver in runs:
            options = {} if solver is None else {"tr_solver": solver}
            res, wall = run(model, exp, method, **options)
            it = max(res.iterations, 1)
            label = method if solver is None else f"{method} {solver}"
            solves[label] = res.timings["solve"]
            if solver is not None:
                per_it[solver][N] = res.timings["solve"] / it
                if solver == auto:
                    per_it["auto"][N] = per_it[solver][N]
                    label += " *"
            print(f"{N:4d} {label:14s} {str(res.success)[0]:>3s} {res.iterations:4d} "
                  f"{res.timings['solve']:9.3f} {1e3 * res.timings['solve'] / it:11.1f} "
                  f"{wall:8.2f}  {np.round(res.p, 5)}", flush=True)
        print("     solve / IPOPT's solve: " + ", ".join(
            f"{solver} {solves[f'picard-gn {solver}'] / solves['ipopt']:.2f}"
            for solver in ("exact", "cg")), flush=True)
    print("growth of picard-gn's time per iteration (exponent of N):")
    for solver in ("exact", "cg", "auto"):
        print(f"  {solver:6s}" + "".join(
            f"  N {a} -> {b}: {math.log(per_it[solver][b] / per_it[solver][a]) / math.log(b / a):.2f}"
            for a, b in zip(sizes, sizes[1:])))


if __name__ == "__main__":
    main()
