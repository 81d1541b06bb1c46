"""AMICI + pyPESTO + fides on the starts of ``petab_collection.py``.

Run with a Python that has AMICI, pyPESTO and fides besides this package
(they are not its dependencies), its environment's ``bin`` first on ``PATH``
(AMICI builds each model with the SWIG it was built with)::

    PETAB_COLLECTION=.../Benchmark-Models python benchmarks/petab_peer.py \
        [n_starts [problem ...]]

The reference tool of the field on the problems of ``petab_collection.py``,
from the same points: the nominal vector and the ``n_starts`` (default 5)
tables of ``petab_collection.starts`` (NumPy seed 0 for each problem).  The
noise parameters, which the package estimates in closed form without a
start, start at their nominal values from the nominal vector and, from each
uniform start, uniform in their bounds on their scale (NumPy seed 1 for each
problem), as pyPESTO samples.  Every default of pyPESTO's ``PetabImporter``
(AMICI's solver: CVODES BDF with KLU, relative tolerance 1e-8, absolute 1e-16,
forward sensitivities, at most 1e4 steps; the noise parameters estimated with
the others) and of its ``FidesOptimizer`` (hybrid Hessian ``HybridFixed``: the
FIM, BFGS after 20 iterations without a trust-region update; fides' own
tolerances, at most 1000 iterations); fides' logging only set to warnings.
The model is compiled to ``AMICI_MODELS/<name>`` (environment variable,
default ``/tmp/am/models``), anew in each run.

Printed per start: fides' exit (``no_start`` where the model is not finite at
the start, as in ``petab_collection.py``), pyPESTO's final ``nllh``, the same
vector's ``nllh`` re-scored by the by-hand CVODES simulation of
``tests/test_petab_suite.py`` (plus the priors, as ``petab_collection.py``
scores its nominal vector; NaN where that simulation fails), the function
evaluations and the CPU seconds (``time.process_time``, one BLAS thread);
then per problem the line of ``petab_collection.summary`` over the uniform
starts, counting as converged fides' exits FTOL, XTOL and GTOL (and again
with every exit), and AMICI's one-off import: SBML to C++ code, its
compilation (a child process) and the objective's set-up, in CPU seconds of
this process and its children, and wall seconds.
"""

from __future__ import annotations

import logging
import math
import os
import resource
import sys
import time
from dataclasses import replace
from pathlib import Path

import _single_thread  # noqa: F401  (one BLAS thread, as the package's solves)
import fides
import numpy as np
import pypesto
import pypesto.optimize
import pypesto.petab
from petab_collection import NOMINAL, negative_log_posterior, problem, starts, summary

import picard_casadi as pc
from picard_casadi.io.petab import PetabProblem
from picard_casadi.parameters import from_scale, on_scale

MODELS = Path(os.environ.get("AMICI_MODELS", "/tmp/am/models"))
#: fides' exits that are convergence by its own tests
CONVERGED = {fides.ExitFlag.FTOL, fides.ExitFlag.XTOL, fides.ExitFlag.GTOL}


def import_amici(name: str, yaml: str) -> tuple[pypesto.Problem, dict[str, float], float, float]:
    """pyPESTO's problem of ``yaml`` with every default, its model compiled
    anew; PEtab's nominal vector (on each parameter's scale, by id); and the
    import's CPU seconds (this process and its children) and wall seconds."""
    importer = pypesto.petab.PetabImporter.from_yaml(
        yaml, output_folder=str(MODELS / name), model_name=name)
    cpu0, wall0 = _cpu_with_children(), time.perf_counter()
    peer = importer.create_problem(force_compile=True, verbose=False)
    cpu, wall = _cpu_with_children() - cpu0, time.perf_counter() - wall0
    petab_problem = importer.petab_problem
    return peer, dict(zip(petab_problem.x_ids, petab_problem.x_nominal_scaled)), cpu, wall


def _cpu_with_children() -> float:
    """CPU seconds of this process and of its finished children."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def start_vector(peer: pypesto.Problem, table: list[pc.Parameter],
                 others: dict[str, float]) -> np.ndarray:
    """pyPESTO's full vector (its order and scales) of ``table``'s starts; the
    parameters not in ``table`` (noise parameters) from ``others`` (on their
    scale), the fixed ones at pyPESTO's values."""
    ours = {q.name: q for q in table}
    fixed = dict(zip(peer.x_fixed_indices, peer.x_fixed_vals))
    x = np.empty(peer.dim_full)
    for i, (name, scale) in enumerate(zip(peer.x_names, peer.x_scales)):
        if i in fixed:
            x[i] = fixed[i]
        elif name in ours:
            if ours[name].scale != scale:
                raise ValueError(f"{name}: scale {ours[name].scale} here, {scale} in pyPESTO")
            x[i] = on_scale(ours[name].start, scale)
        else:
            x[i] = others[name]
    return x


def linear(peer: pypesto.Problem, x: np.ndarray) -> dict[str, float]:
    """pyPESTO's full vector ``x`` on the linear scale, by parameter id."""
    return {n: from_scale(float(v), s) for n, v, s in zip(peer.x_names, x, peer.x_scales)}


def rescore(prob: PetabProblem, values: dict[str, float]) -> float:
    """PEtab's negative log-posterior at ``values`` (linear scale, by id), as
    ``petab_collection`` scores the nominal vector."""
    table = [replace(q, start=values.get(q.name, q.start)) for q in prob.parameters]
    noise = {k: values.get(k, v) for k, v in prob.noise_nominal.items()}
    return negative_log_posterior(replace(prob, parameters=table, noise_nominal=noise))


def run(name: str, n_starts: int) -> tuple[list[str], str]:
    """Fit ``name`` from each start, printing a line per start; the summary
    lines (converged exits, every exit) and the import's time."""
    prob, nominal = problem(name)
    try:
        peer, nominal_x, cpu, wall = import_amici(name, prob.source)
    except Exception as err:  # noqa: BLE001  (AMICI's import: any failure is recorded)
        print(f"{name:<28}AMICI import failed: {type(err).__name__}: {err}", flush=True)
        return [], f"{name:<28}import failed"
    compiled = f"{name:<28}AMICI import {cpu:.1f} CPU s, {wall:.1f} wall s"
    print(compiled, flush=True)
    table_ids = {q.name for q in prob.parameters}
    extra = [i for i in peer.x_free_indices if peer.x_names[i] not in table_ids]
    lb, ub = peer.lb_full, peer.ub_full
    optimizer = pypesto.optimize.FidesOptimizer(verbose=logging.WARNING)
    rng, rng_extra = np.random.default_rng(0), np.random.default_rng(1)
    converged, every = [], []
    for label, table in starts(prob.parameters, n_starts, rng):
        if label == "nominal":
            others = {peer.x_names[i]: nominal_x[peer.x_names[i]] for i in extra}
        else:
            others = {peer.x_names[i]: float(rng_extra.uniform(lb[i], ub[i])) for i in extra}
        peer.set_x_guesses([start_vector(peer, table, others)])
        t0 = time.process_time()
        res = pypesto.optimize.minimize(peer, optimizer, n_starts=1, progress_bar=False)
        cpu = time.process_time() - t0
        r = res.optimize_result.list[0]
        if label == "uniform 0":
            back = linear(peer, r.x0)
            gap = max(abs(back[q.name] - q.start) / abs(q.start) for q in table if q.estimate)
            print(f"{'':<28}start check: pyPESTO's x0 back on the linear scale, max relative "
                  f"difference to the table {gap:.1e}; drawn here (not in the table): "
                  f"{[peer.x_names[i] for i in extra]}", flush=True)
        if r.x is None:  # fides stopped before a step: not finite at the start, or an error
            fval, again = math.nan, math.nan
            exit_ = "no_start" if r.message.startswith("Encountered non-finite") else "error"
            if exit_ == "error":
                print(f"{'':<28}{label}: {r.message}", flush=True)
        else:
            exit_, fval = fides.ExitFlag(r.exitflag).name, float(r.fval)
            try:
                again = rescore(prob, linear(peer, r.x))
            except (RuntimeError, ValueError):
                again = math.nan
        print(f"{name:<28}{label:<12}{exit_:<18}{fval:>12.4f}{again:>12.4f}"
              f"{again - fval:>11.1e}{r.n_fval:>7d}{cpu:>8.1f}", flush=True)
        if label != "nominal":
            ok = r.x is not None and r.exitflag in {f.value for f in CONVERGED}
            converged.append((fval if ok else math.nan, cpu))
            every.append((fval if math.isfinite(fval) else math.nan, cpu))
    lines = [summary(name, nominal, converged) + "  [converged exits]",
             summary(name, nominal, every) + "  [every exit]"]
    return lines, compiled


def main(n_starts: int = 5, names: list[str] | None = None) -> None:
    print(f"{'problem':<28}{'start':<12}{'fides exit':<18}{'nllh':>12}{'re-scored':>12}"
          f"{'re - nllh':>11}{'n_fval':>7}{'CPU s':>8}")
    summaries, imports = [], []
    for name in names or list(NOMINAL):
        lines, compiled = run(name, n_starts)
        summaries += lines
        imports.append(compiled)
    print("\nuniform starts: the best nllh (pyPESTO's), starts within 0.1 of it, median CPU s "
          "per start, all their CPU s per start within 0.1")
    for line in summaries:
        print(line)
    print("\nAMICI's one-off import (code generation, compilation, objective), not in the above")
    for line in imports:
        print(line)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, sys.argv[2:] or None)
