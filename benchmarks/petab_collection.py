"""PEtab problems of the benchmark collection with every default, from several starts.

Run::

    python benchmarks/petab_collection.py [n_starts [problem ...]] [--method NAME] [--uniform-only]
        [--starts A-B] [--solves FILE]

Each problem vendored in ``tests/data/petab`` (Boehm, Bruno, Armistead,
Crauste, Elowitz, Borghans;
github.com/Benchmarking-Initiative/Benchmark-Models-PEtab, BSD-3) is read by
``pc.read_petab`` and fitted with every default of ``pc.estimate`` from the
nominal vector and from ``n_starts`` (default 5) points uniform in the
bounds on each parameter's scale (NumPy seed 0 for each problem), as pyPESTO
samples them.
Other problems of the collection are read from a checkout of it, named by
the environment variable ``PETAB_COLLECTION`` (its ``Benchmark-Models``
folder); their nominal ``nllh`` is computed here (the by-hand simulation of
``tests/test_petab_suite.py``, plus each normal prior's ``-log`` density:
PEtab's negative log-posterior), where it is not one of the six below.
Printed per start: status (``no_start`` where the model cannot be evaluated at
the start: ``pc.StartNotFiniteError``), the reported ``nllh`` (the ODE's own solution's),
its distance to the collection's nominal ``nllh`` (the nominal vector's,
PEtab's definition), the CPU seconds, and ``stiff`` where the returned
result warns that the model was stiff on the first mesh at the start
(Radau's nodes from the outset; a second run from a last iterate does not
repeat the first run's warning); then per problem, over its uniform
starts: the best converged ``nllh``, how many starts came within 0.1 of it,
the median CPU seconds per start and all the starts' CPU seconds per start
that came within 0.1.  All measured in this one run; the field's reference
tool (AMICI + pyPESTO + fides) runs from the same starts in
``benchmarks/petab_peer.py``.  ``--method NAME`` passes ``method=NAME``
(one method, no second runs) instead of every default; ``--uniform-only``
leaves out the nominal start (the summary is over the uniform starts either
way); ``--starts A-B`` runs only the uniform starts A to B (the same draws:
one problem's starts split over processes); ``--solves FILE`` writes a
tab-separated line per solve of every start (problem, start, method,
intervals, whether it continued a converged solution, iterations, status,
CPU s, the message's start): which of a start's runs its time went to
(docs/petab.md).
"""

from __future__ import annotations

import math
import os
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import _single_thread  # noqa: F401  (one BLAS thread, as the package's solves)
import numpy as np

import picard_casadi as pc
from picard_casadi.parameters import from_scale, on_scale

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "petab"
#: how the warning begins that the model is stiff on the first mesh at the start
STIFF_AT_START = "the model is stiff on the mesh at the start"
#: PEtab's nllh at each problem's nominal vector (docs/petab.md)
NOMINAL = {"Boehm_JProteomeRes2014": 138.2220, "Bruno_JExpBot2016": -46.6882,
           "Armistead_CellDeathDis2024": -301.9162, "Crauste_CellSystems2017": 190.9640,
           "Elowitz_Nature2000": -63.2028, "Borghans_BiophysChem1997": -83.3237}


def starts(table: list[pc.Parameter], n: int, rng: np.random.Generator) -> list:
    """The nominal table and ``n`` tables with starts uniform in the bounds on
    each parameter's scale (a missing lower bound of a log scale: 1e-5)."""
    out = [("nominal", table)]
    for i in range(n):
        moved = []
        for q in table:
            if not q.estimate:
                moved.append(q)
                continue
            lo = q.bounds[0] if q.bounds[0] > 0 or q.scale == "lin" else 1e-5
            a, b = on_scale(lo, q.scale), on_scale(q.bounds[1], q.scale)
            if not (math.isfinite(a) and math.isfinite(b)):
                moved.append(q)
                continue
            moved.append(replace(q, start=from_scale(float(rng.uniform(a, b)), q.scale)))
        out.append((f"uniform {i}", moved))
    return out


def problem(name: str) -> tuple[pc.PetabProblem, float]:
    """The problem (vendored, or from ``PETAB_COLLECTION``) and its nominal nllh."""
    yaml = DATA / name / f"{name}.yaml"
    if not yaml.exists():
        folder = os.environ.get("PETAB_COLLECTION")
        if not folder:
            sys.exit(f"{name} is not vendored here: set PETAB_COLLECTION to the collection's "
                     "Benchmark-Models folder")
        yaml = Path(folder) / name / f"{name}.yaml"
    prob = pc.read_petab(yaml)
    if name in NOMINAL:
        return prob, NOMINAL[name]
    return prob, negative_log_posterior(prob)


def negative_log_posterior(prob: pc.PetabProblem) -> float:
    """PEtab's negative log-posterior at the starts of ``prob``'s table (and
    its nominal noise parameters): the by-hand simulation of
    ``tests/test_petab_suite.py`` plus each normal prior's ``-log`` density."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_petab_suite import simulate_nominal  # the by-hand simulation

    return -simulate_nominal(prob)[0] + sum(q.prior_nllh() for q in prob.parameters
                                            if q.estimate)


def log_solves(path: str) -> dict[str, str]:
    """Write a line per solve to ``path`` (see the module doc); returns the
    dictionary whose ``"start"`` entry the caller keeps as the current
    problem and start."""
    from picard_casadi.estimation import refinement

    out = open(path, "w", buffering=1)
    out.write("problem\tstart\tmethod\tintervals\tcontinuing\titerations\tstatus\t"
              "CPU s\tmessage\n")
    current = {"start": "\t"}
    timed = refinement._timed_solve

    def logged(prob, setup, w, continuing=False):
        t0 = time.process_time()
        solved = timed(prob, setup, w, continuing)
        outcome = solved.outcome
        out.write(f"{current['start']}\t{prob.spec.name}\t{setup.disc.n_intervals}\t"
                  f"{continuing}\t{solved.iterations}\t{outcome.status}\t"
                  f"{time.process_time() - t0:.1f}\t{outcome.message[:120]!r}\n")
        return solved

    refinement._timed_solve = logged
    return current


def main(n_starts: int = 5, names: list[str] | None = None, method: str | None = None,
         uniform_only: bool = False, chosen_starts: range | None = None,
         solves: str | None = None) -> None:
    current = log_solves(solves) if solves else {}
    print(f"{'problem':<28}{'start':<12}{'status':<12}{'method':<11}{'nllh':>12}"
          f"{'- nominal':>11}{'CPU s':>8}  stiff at the start")
    summaries = []
    for name in names or list(NOMINAL):
        prob, nominal = problem(name)
        # each problem's own draws (seed 0), whichever others run
        rng = np.random.default_rng(0)
        uniform: list[tuple[float, float]] = []  # (nllh, CPU s) of the uniform starts
        for label, table in starts(prob.parameters, n_starts, rng):
            if uniform_only and label == "nominal":
                continue
            if (chosen_starts is not None and label != "nominal"
                    and int(label.split()[1]) not in chosen_starts):
                continue
            current["start"] = f"{name}\t{label}"
            t0 = time.process_time()
            stiff = False
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    res = pc.estimate(prob.model, prob.experiments, table, noise=prob.noise,
                                      **({} if method is None else {"method": method}))
                    status, used, nllh = res.status, res.method, res.nllh
                    stiff = any(STIFF_AT_START in w for w in res.warnings)
                except pc.StartNotFiniteError:
                    # the model itself is not finite there (a reference tool's
                    # simulation fails at such a start too): a failed start
                    status, used, nllh = "no_start", "-", float("nan")
                except (ValueError, RuntimeError) as err:
                    status, used, nllh = "error", str(err)[:10], float("nan")
            cpu = time.process_time() - t0
            print(f"{name:<28}{label:<12}{status:<12}{used:<11}{nllh:>12.4f}"
                  f"{nllh - nominal:>11.4f}{cpu:>8.1f}{'  stiff' if stiff else ''}", flush=True)
            if label != "nominal":
                uniform.append((nllh if status == "converged" else math.nan, cpu))
        if uniform:
            summaries.append(summary(name, nominal, uniform))
    if summaries:
        print("\nuniform starts: the best converged nllh, starts within 0.1 of it, median CPU s "
              "per start, all their CPU s per start within 0.1")
        for line in summaries:
            print(line)


def summary(name: str, nominal: float, runs: list[tuple[float, float]]) -> str:
    """One problem's line over its uniform starts (``runs``: converged nllh or
    NaN, CPU s): the best, how many came within 0.1 of it, the median CPU s,
    and the CPU s of all starts divided by those that came within 0.1 (the
    issue's "CPU s per start that reached the best")."""
    nllh = np.array([r[0] for r in runs])
    cpu = np.array([r[1] for r in runs])
    if not np.any(np.isfinite(nllh)):
        return f"{name:<28}no start converged; median CPU s {np.median(cpu):.1f}"
    best = float(np.nanmin(nllh))
    reached = int(np.sum(nllh <= best + 0.1))
    return (f"{name:<28}best {best:.4f} ({best - nominal:+.4f} against the nominal), "
            f"{reached}/{len(runs)} within 0.1, median {np.median(cpu):.1f} s, "
            f"{cpu.sum() / reached:.1f} s per start within 0.1")


if __name__ == "__main__":
    args = sys.argv[1:]
    chosen = None
    if "--method" in args:
        k = args.index("--method")
        chosen = args[k + 1]
        del args[k:k + 2]
    uniform_only = "--uniform-only" in args
    if uniform_only:
        args.remove("--uniform-only")
    chosen_starts = None
    if "--starts" in args:
        k = args.index("--starts")
        first, last = (int(v) for v in args[k + 1].split("-"))
        chosen_starts = range(first, last + 1)
        del args[k:k + 2]
    solves = None
    if "--solves" in args:
        k = args.index("--solves")
        solves = args[k + 1]
        del args[k:k + 2]
    main(int(args[0]) if args else 5, args[1:] or None, chosen, uniform_only, chosen_starts,
         solves)
