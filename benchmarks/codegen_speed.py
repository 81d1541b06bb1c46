"""Code generation: per-iteration time, generated C versus CasADi's virtual machine.

Run::

    python benchmarks/codegen_speed.py

For "cmg" and "fa18-roll-ail" (weighted), and for the paper's algorithm
(``picard``, 300 iterations) and ``picard-gn``: the one-off build time on an
empty cache (``timings["build"]``, wall time: building the functions and
compiling them, the compilers side by side), the solve time per iteration with generated code and with
the virtual machine (the fastest of three runs of each, alternating), and the
time per iteration spent inside the iteration's CasADi functions only.  All
measured in this one run.  Generated code includes the fixed-point kernel
(``picard_casadi/transcription/kernels.py``), which runs only where the
functions are compiled; its time is not in the "eval" columns.
"""

from __future__ import annotations

import os

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import tempfile
import time
from collections import defaultdict

import picard_casadi as pc
import picard_casadi.transcription.functions as transcription
from picard_casadi.runtime import codegen

CALL_TIME: dict[str, float] = defaultdict(float)
#: runs of each backend, alternating; the fastest of each is printed
ROUNDS = 3


def _timed(f):
    def call(*args, **kwargs):
        t = time.perf_counter()
        out = f(*args, **kwargs)
        CALL_TIME["total"] += time.perf_counter() - t
        return out
    return call


class _Timed:
    """The transcription's functions, each call timed (DM or NumPy-buffer calls)."""

    def __init__(self, functions):
        self._f = functions
        if hasattr(functions, "native"):
            self.native = self._native

    def __getitem__(self, name):
        return _timed(self._f[name])

    def __contains__(self, name):
        return name in self._f

    def __iter__(self):
        return iter(self._f)

    def _native(self, name):
        f = self._f.native(name)
        return None if f is None else _timed(f)


_init = transcription.Transcription.__init__


def _timed_init(self, *a, **k):
    _init(self, *a, **k)
    self.functions = _Timed(self.functions)
    self._native_of = getattr(self.functions, "native", None)
    self._fixed_point._functions = self.functions


def measure(name, method, cg, **kw):
    prob = pc.problem(name, seed=0)
    CALL_TIME.clear()
    res = prob.estimate(method, codegen=cg, uncertainty=False, **kw)
    its = max(res.iterations, 1)
    return res, res.timings["solve"] / its, CALL_TIME["total"] / its


def main() -> None:
    if codegen.find_compiler() is None:
        print("no C compiler: nothing to compare")
        return
    transcription.Transcription.__init__ = _timed_init
    os.environ["PICARD_CASADI_CACHE"] = tempfile.mkdtemp(prefix="picard_bench_cache_")
    cases = [("cmg", "picard", {"max_iter": 300}), ("cmg", "picard-gn", {}),
             ("fa18-roll-ail", "picard", {"max_iter": 300, "weights": "auto"}),
             ("fa18-roll-ail", "picard-gn", {"weights": "auto"})]
    print(f"{'problem':14s} {'method':10s} {'build [s]':>11s} {'iter VM [ms]':>12s} "
          f"{'iter C [ms]':>11s} {'ratio':>6s} {'eval VM':>8s} {'eval C':>7s} {'ratio':>6s}")
    for name, method, kw in cases:
        cold, _, _ = measure(name, method, True, **kw)            # cold cache: compiles
        compile_s = cold.timings["build"]  # wall time (the compilers run side by side)
        # then generated code (cached) and the virtual machine in turn, ROUNDS
        # times: the fastest of each (this machine is shared; both sides alike)
        rounds = [(measure(name, method, True, **kw), measure(name, method, False, **kw))
                  for _ in range(ROUNDS)]
        _, it_c, ev_c = min((c for c, _ in rounds), key=lambda r: r[1])
        _, it_vm, ev_vm = min((v for _, v in rounds), key=lambda r: r[1])
        print(f"{name:14s} {method:10s} {compile_s:11.1f} {1e3 * it_vm:12.2f} {1e3 * it_c:11.2f} "
              f"{it_vm / it_c:6.1f} {1e3 * ev_vm:8.2f} {1e3 * ev_c:7.2f} {ev_vm / ev_c:6.1f}",
              flush=True)


if __name__ == "__main__":
    main()
