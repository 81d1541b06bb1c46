"""IPOPT's compiled NLP on a long record: the size of its C and its compile time.

Run::

    python benchmarks/ipopt_compile_size.py [--samples 1001,10001]

A pendulum-like joint (``q'' = (tau - b q' - mgl sin q) / J``) driven by a
torque held between 1 kHz samples, its angle measured at every sample: one
collocation interval per sample, as a drive's log makes it.  For each
record length, IPOPT (``method="ipopt"``, three iterations, from the truth)
on an empty code cache: prints each generated NLP file's size (all of it,
and its code outside the constant sparsity tables), the compile time of
the NLP library and the whole call's time, all measured in this run.  Where
the block diagonals were one split per interval, 1001 samples compiled in
37.5 s and 10 001 did not in 9 minutes (docs/performance.md, "IPOPT's NLP").
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from pathlib import Path

import casadi as ca
import numpy as np

import picard_casadi as pc
from picard_casadi.runtime import codegen


def _joint() -> pc.Model:
    q, qd, tau = ca.SX.sym("q"), ca.SX.sym("qd"), ca.SX.sym("tau")
    p = ca.SX.sym("p", 3)
    return pc.Model(x=ca.vertcat(q, qd), p=p, u=tau, y=q, p_names=["J", "b", "mgl"],
                    rhs=ca.vertcat(qd, (tau - p[1] * qd - p[2] * ca.sin(q)) / p[0]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", default="1001,10001")
    args = ap.parse_args()
    model, truth = _joint(), np.array([0.05, 0.08, 1.962])
    for n in (int(s) for s in args.samples.split(",")):
        t = np.arange(n) * 1e-3
        tau = 1.2 * np.sin(2 * np.pi * 0.7 * t) + 0.5 * np.sin(2 * np.pi * 2.3 * t)
        x = pc.simulate(model, [0.1, 0.0], truth, t, u=tau[:, None],
                        u_interpolation="previous")
        exp = pc.Experiment(t, x[:, :1], u=tau[:, None], u_interpolation="previous")
        sizes: list[str] = []
        compile_s = 0.0
        real = codegen._compile_c

        def measured(cc, sources, lib, workdir, kind="functions"):
            nonlocal compile_s
            t0 = time.perf_counter()
            real(cc, sources, lib, workdir, kind)
            if kind == "nlp":
                compile_s += time.perf_counter() - t0
                sizes.extend(f"{re.sub(r'_?[0-9a-f]{32}', '', Path(s).name)} "
                             f"{os.path.getsize(s) / 1e6:.1f} MB"
                             f" ({codegen._code_bytes(Path(s)) / 1e6:.3f} MB code)"
                             for s in sources)

        codegen._compile_c = measured
        try:
            with tempfile.TemporaryDirectory() as cache, codegen.cache_at(cache):
                t0 = time.perf_counter()
                res = pc.estimate(model, [exp], truth, method="ipopt", max_iter=3,
                                  refine=False, uncertainty=False)
                whole = time.perf_counter() - t0
        finally:
            codegen._compile_c = real
        print(f"{n} samples: {res.status}, NLP compiled in {compile_s:.1f} s, whole call "
              f"{whole:.1f} s")
        for line in sizes:
            print(f"  {line}")


if __name__ == "__main__":
    main()
