"""``pc.simulate``'s segments: what the simulation of the initial guess costs.

Run::

    python benchmarks/simulate_segments.py
    python benchmarks/simulate_segments.py --baseline /path/to/old/checkout/.venv/bin/python

CVODES restarts at every segment.  ``simulate`` cuts the horizon at the
output times and breakpoints and halves a segment only where the degree-8
interpolant of the input misses it (before, every segment was at most a
two-hundredth of the horizon long).  With
``--baseline`` the same cases run in a subprocess with another interpreter
(an older checkout) and both are printed from this one run.

Cases: cmg's four experiments with the states asked for at the 15 interval
starts (what the initial guess asks) and at all 301 samples, at the guess's
tolerances (1e-6 / 1e-8) and the default 1e-10; a first-order lag ``x' = -x
+ u`` with an undeclared step at 1.234 s and with ``u = sin(40 t)``.  Errors
are against one reference for both versions: cmg simulated here at 1e-12
with breakpoints every two-thousandth of the horizon, the lag's closed form.
Times are the best of three calls.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import casadi as ca
import numpy as np

import picard_casadi as pc

W = 40.0  # the fast input's angular frequency


def best_time(fn, repeats: int = 3):
    best, out = np.inf, None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def cases():
    """``(label, rtol, atol, call)`` for every case; ``call()`` simulates it."""
    prob = pc.problem("cmg", seed=0)
    m, p = prob.model, prob.p_true
    out = []
    for e, exp in enumerate(prob.experiments):
        for label, tq in (("15 interval starts", np.arange(0.0, 3.0, 0.2)),
                          ("301 samples", exp.t)):
            for rtol, atol in ((1e-6, 1e-8), (1e-10, 1e-10)):
                out.append((f"cmg {exp.name}, {label}", rtol, atol,
                            lambda e=e, exp=exp, tq=tq, rtol=rtol, atol=atol: pc.simulate(
                                m, prob.x0_true[e], p, tq, exp, t0=exp.t0, rtol=rtol, atol=atol)))
    x, u, a = ca.SX.sym("x"), ca.SX.sym("u"), ca.SX.sym("a")
    lag = pc.Model(x=x, p=a, u=u, rhs=-a * x + u, name="lag")
    t = np.linspace(0.0, 5.0, 11)
    out.append(("lag, undeclared step at 1.234 s", 1e-10, 1e-10,
                lambda: pc.simulate(lag, [0.0], [1.0], t, lambda s: 1.0 * (s >= 1.234))))
    out.append(("lag, u = sin(40 t)", 1e-10, 1e-10,
                lambda: pc.simulate(lag, [0.0], [1.0], t, lambda s: np.sin(W * s))))
    return out


def references() -> list[np.ndarray]:
    """The reference solution of every case, in the order of :func:`cases`."""
    prob = pc.problem("cmg", seed=0)
    refs = []
    for e, exp in enumerate(prob.experiments):
        for tq in (np.arange(0.0, 3.0, 0.2), exp.t):
            ref = pc.simulate(prob.model, prob.x0_true[e], prob.p_true, tq, exp, t0=exp.t0,
                              rtol=1e-12, atol=1e-12,
                              breakpoints=np.linspace(exp.t0, tq[-1], 2001)[1:-1])
            refs += [ref, ref]
    t = np.linspace(0.0, 5.0, 11)
    refs.append(np.where(t >= 1.234, 1.0 - np.exp(-(t - 1.234)), 0.0)[:, None])
    refs.append(((np.sin(W * t) - W * np.cos(W * t) + W * np.exp(-t)) / (1.0 + W * W))[:, None])
    return refs


def measure() -> list[list[float]]:
    """``[time, states...]`` per case."""
    rows = []
    for _, _, _, call in cases():
        dt, X = best_time(call)
        rows.append([dt] + np.asarray(X, float).ravel().tolist())
    return rows


def main() -> None:
    warnings.simplefilter("ignore")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="python of an older checkout, for comparison")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        print("JSON" + json.dumps(measure()))
        return
    now = measure()
    old = None
    if args.baseline:
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        out = subprocess.run([args.baseline, os.path.abspath(__file__), "--json"],
                             capture_output=True, text=True, env=env, check=True,
                             cwd=tempfile.gettempdir())
        old = json.loads([s for s in out.stdout.splitlines() if s.startswith("JSON")][-1][4:])
    print(f"{'case':34s} {'rtol':>6s} {'time [ms]':>9s} {'error':>8s}"
          + (f" {'old [ms]':>9s} {'old error':>9s}" if old else ""))
    for k, ((label, rtol, _, _), ref) in enumerate(zip(cases(), references())):
        ref = np.asarray(ref, float).ravel()
        line = (f"{label:34s} {rtol:6.0e} {1e3 * now[k][0]:9.1f} "
                f"{np.abs(np.asarray(now[k][1:]) - ref).max():8.1e}")
        if old:
            line += (f" {1e3 * old[k][0]:9.1f} "
                     f"{np.abs(np.asarray(old[k][1:]) - ref).max():9.1e}")
        print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
