"""The comparison study: every method on every problem, same data and start.

Protocol (docs/problems.md): same data, same starting point, same bounds, same
discretisation (``T``, nodes, scheme: the problem's options; no mesh
refinement, so every method solves the same discretised problem) and each
solver's own equivalent of the stopping rule "relative objective change below
1e-10 over 5 iterations".  Reported per problem, method and seed: estimate,
relative error to the truth, data misfit, continuity gap, iterations, build
time on a cold cache and on a warm one, and solve time, as medians over
``repeats`` runs.  Times are only comparable within one study on one machine.

A user's own problem joins the study after
:func:`picard_casadi.register_problem`, or directly as a
:class:`~picard_casadi.Problem` (``Problem.from_data(model, experiments,
p0)`` for measured data): its data are fixed, so it runs once (no seeds),
and without a truth its rows have no relative error (the table shows
``-``; the figure shows each method's data misfit instead).  The rows run on an executor with
``executor=`` or ``n_jobs=`` (:mod:`picard_casadi.runtime.executors`).
"""

from __future__ import annotations

import contextlib
import csv
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.fit_check import is_fit_note
from ..runtime.codegen import cache_at
from ..runtime.executors import Encoded, decoded, encode, executor_for, run_tasks
from ..runtime.output_files import check_output_folder
from ..runtime.user_warnings import held_warnings, raised_again
from .registry import _entry as make_problem_entry
from .registry import problem as make_problem

__all__ = ["compare", "format_markdown", "COLUMNS"]

COLUMNS = ("problem", "seed", "method", "success", "certified", "rel_error", "misfit", "nllh",
           "gap", "iterations", "build_first", "build_cached", "solve_time", "estimate", "message",
           "fit_warnings", "cpu_time")
#: the files ``out`` receives
OUTPUT_FILES = ("table.csv", "table.md", "comparison.png")


def _median(values: list[float]) -> float:
    vals = [v for v in values if v is not None and np.isfinite(v)]
    return float(statistics.median(vals)) if vals else float("nan")


def compare(
    problem_names: Sequence[str | Any],
    methods: Sequence[str] = ("picard-gn", "ipopt", "picard"),
    *,
    seeds: Sequence[int] = (0,),
    repeats: int = 1,
    out: str | Path | None = None,
    codegen: bool | str = "auto",
    options: dict[str, dict[str, Any]] | None = None,
    method_options: dict[str, dict[str, Any]] | None = None,
    verbose: bool = False,
    executor: Any = None,
    n_jobs: int | None = None,
) -> list[dict[str, Any]]:
    """Run the study and (optionally) write ``table.csv``, ``table.md``, ``comparison.png``.

    Parameters
    ----------
    problem_names : sequence of str or Problem
        Registered problems (:func:`picard_casadi.problems`), or
        :class:`~picard_casadi.Problem` objects (your model and data:
        ``Problem.from_data``), run once each with their own data.
    methods : sequence of str
    seeds : sequence of int
        Noise seeds; each is a separate row.
    repeats : int
        Runs per (problem, method, seed); times are medians.  The first run
        of each problem uses a fresh code-generation cache (its build time is
        ``build_first``); later runs reuse it (``build_cached``).
    out : str or Path, optional
        Folder for the table and the figure.
    codegen : bool or "auto"
    options : dict, optional
        Per problem, ``estimate`` keyword arguments overriding the problem's.
    method_options : dict, optional
        Per method, extra keyword arguments (e.g. ``{"ipopt": {"hessian":
        "gauss-newton"}}``).
    verbose : bool
        Print a line per run (on an executor: when all are done).
    executor : concurrent.futures.Executor, optional
        Run the (problem, seed, method) rows on it, each with its repeats
        (:mod:`picard_casadi.runtime.executors`).  Rows of one problem then share its
        fresh cache concurrently, so more than one may compile (their
        ``build_first``), and the times include the contention of the
        machine's cores: compare times from one setting only.  Problems
        added with :func:`~picard_casadi.register_problem` must have a
        module-level factory.
    n_jobs : int, optional
        A local pool of this many processes instead.

    Returns
    -------
    list of dict
        One row per (problem, seed, method) with the keys of ``COLUMNS``,
        in the order problem, seed, method.  A ``Problem`` object's rows
        have ``seed`` None, and ``rel_error`` None when it has no ``p_true``.
    """
    from ..methods import get_method
    from .registry import _BUILTIN, _REGISTRY, Problem

    # one name where a sequence belongs: compare("vdp", "ipopt") read "v" and "i"
    if isinstance(problem_names, (str, Problem)):
        problem_names = [problem_names]
    if isinstance(methods, str):
        methods = [methods]
    if isinstance(seeds, (int, np.integer)) and not isinstance(seeds, bool):
        seeds = [int(seeds)]
    # what the command line refuses before any run, refused here too (a
    # negative seed stopped the study after its first rows, a folder under a
    # file after all of them, an empty list returned nothing)
    for what, entries in (("problem_names", problem_names), ("methods", methods),
                          ("seeds", seeds)):
        if len(list(entries)) == 0:
            raise ValueError(f"`{what}` is empty: give at least one")
    seeds = list(seeds)
    bad = [s for s in seeds if isinstance(s, bool)
           or not isinstance(s, (int, np.integer)) or s < 0]
    if bad:
        raise ValueError(f"`seeds` must be integers >= 0 (noise seeds), got {bad}")
    if out is not None:
        check_output_folder(out, OUTPUT_FILES, overwrite=True, option="`out`")
    for m in methods:
        get_method(m)  # unknown names: ValueError listing the valid ones
    if int(repeats) != repeats or repeats < 1:
        raise ValueError(f"repeats must be a positive integer, got {repeats!r}")
    given: dict[str, Problem] = {}
    labels = []
    for entry in problem_names:
        if isinstance(entry, Problem):
            if entry.name in given or entry.name in problem_names:
                raise ValueError(f"two problems are named {entry.name!r}; give each a "
                                 "different name")
            given[entry.name] = entry
            labels.append(entry.name)
        elif isinstance(entry, str):
            make_problem_entry(entry)  # unknown names: ValueError listing the known ones
            labels.append(entry)
        else:
            raise TypeError(f"problems are names or Problem objects, got {type(entry).__name__}")
    options = options or {}
    method_options = method_options or {}
    _check_study_options(labels, given, list(methods), options, method_options)
    with contextlib.ExitStack() as stack:
        caches = {name: stack.enter_context(
            tempfile.TemporaryDirectory(prefix="picard_study_cache_"))
            for name in dict.fromkeys(labels)}
        tasks = []
        for name in labels:
            for seed in ([None] if name in given else seeds):
                for method in methods:
                    kw = dict(options.get(name, {}))
                    kw.update(method_options.get(method, {}))
                    tasks.append((name, seed, method, kw, int(repeats), codegen, caches[name]))
        with executor_for(executor, n_jobs, len(tasks)) as ex:
            if ex is None:
                rows = []
                for task in tasks:
                    rows.append(_row(*task, given=given.get(task[0])))
                    if verbose:
                        _print_row(rows[-1])
            else:
                added = {n: _REGISTRY[n].factory for n in dict.fromkeys(labels)
                         if n in _REGISTRY and n not in _BUILTIN and n not in given}
                data = encode({"factories": added, "given": given})
                rows = run_tasks(_row_in_worker, [(data, *task) for task in tasks], ex)
                if verbose:
                    for row in rows:
                        _print_row(row)
    if out is not None:
        write_outputs(rows, Path(out))
    return rows


def _check_study_options(labels: list[str], given: dict[str, Any], methods: list[str],
                         options: dict[str, Any], method_options: dict[str, Any]) -> None:
    """Refuse, before the first run, options the study cannot apply: keys that
    name no problem or method of the study (they were ignored: the study ran on
    the defaults), and names or values a method does not take (they failed at
    the first row that met them, after the rows before were run)."""
    from ..estimate import ESTIMATE_ARGUMENTS
    from ..methods import get_method
    from ..methods import method_options as build_options

    for what, mapping, valid in (("options", options, labels),
                                 ("method_options", method_options, methods)):
        if not isinstance(mapping, dict):
            raise TypeError(f"`{what}` must be a dict, got {type(mapping).__name__}")
        for key, value in mapping.items():
            if key not in valid:
                flat = " (estimate's arguments go one level down)" if (
                    key in ESTIMATE_ARGUMENTS or not isinstance(value, dict)) else ""
                raise ValueError(
                    f"`{what}`: {key!r} is not one of the study's "
                    f"{'problems' if what == 'options' else 'methods'} ({', '.join(valid)}); "
                    f"`{what}` maps each to its own keyword arguments, e.g. "
                    f"{what}={{{valid[0]!r}: {{'max_iter': 50}}}}{flat}")
            if not isinstance(value, dict):
                raise TypeError(f"`{what}[{key!r}]` must be a dict of keyword arguments, "
                                f"got {type(value).__name__}")
    for name in dict.fromkeys(labels):
        own = dict(given[name].options) if name in given else {}
        for method in methods:
            kw = {**own, **options.get(name, {}), **method_options.get(method, {})}
            kw.pop("method", None)
            extra = {k: v for k, v in kw.items() if k not in ESTIMATE_ARGUMENTS}
            try:
                build_options(get_method(method), extra, "estimate", ESTIMATE_ARGUMENTS)
            except (TypeError, ValueError) as err:
                raise type(err)(
                    f"compare: problem {name!r} with method {method!r} (nothing was run): "
                    f"{err}; options of one method go in method_options={{'<method>': "
                    "{...}}, not in a problem's options") from None


def _known(value: Any) -> bool:
    return value is not None and np.isfinite(value)


def _processor_time() -> float:
    """This process's processor time and its finished children's (the C
    compiler), user and system, in seconds."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _print_row(row: dict[str, Any]) -> None:
    seed = "-" if row["seed"] is None else row["seed"]
    err = (f"err {row['rel_error']:.3%}" if _known(row["rel_error"]) else
           f"misfit {row['misfit']:.4g}")
    if _known(row.get("nllh", float("nan"))):
        err += f" nllh {row['nllh']:.6g}"
    print(f"{row['problem']:16s} seed {seed} {row['method']:10s} "
          f"{'ok ' if row['success'] else 'FAIL'} "
          f"{'' if row['certified'] or not row['success'] else '(not certified) '}"
          f"{err} it {row['iterations']:5d} "
          f"solve {row['solve_time']:.2f}s build {row['build_first']:.2f}s "
          f"cpu {row.get('cpu_time', float('nan')):.2f}s"
          + (" (fit flagged: FitWarning)" if row.get("fit_warnings") else "")
          + ("" if row["success"] else f": {_first_clause(row['message'], 100)}"), flush=True)


def _row(name: str, seed: int | None, method: str, kw: dict[str, Any], repeats: int,
         codegen: bool | str, cache: str, given: Any = None) -> dict[str, Any]:
    """One (problem, seed, method) of the study: ``repeats`` runs, one row.

    ``given``: the Problem object itself (measured data, ``seed`` None), else
    the registered problem ``name`` is built with ``seed``.
    """
    prob = given if given is not None else make_problem(name, seed=seed)
    mkw = dict(prob.options)
    mkw.update(kw)
    # the protocol: every method on the same discretisation
    # (the certificate is still reported, not acted on)
    mkw.setdefault("refine", False)
    mkw.update(codegen=codegen, uncertainty=False)  # the study's, over the problem's options
    runs = []
    cpu: list[float] = []
    with cache_at(cache), held_warnings() as caught:
        for _ in range(repeats):
            t0, c0 = time.perf_counter(), _processor_time()
            res = prob.estimate(method, **mkw)
            runs.append((res, time.perf_counter() - t0))
            cpu.append(_processor_time() - c0)
    # each run's warnings once, saying whose (a user's study printed "the fit
    # is systematically off ..." without the method or the problem)
    raised_again(caught, f"{name}{'' if seed is None else f' seed {seed}'} {method}: ")
    res = runs[-1][0]
    builds = [r.timings.get("build", 0.0) for r, _ in runs]
    return {
        "problem": name, "seed": seed, "method": method,
        "success": all(r.success for r, _ in runs),
        # the protocol keeps the problem's mesh (no refinement): whether the
        # discretisation certificate holds there, i.e. the estimate is the ODE's
        "certified": bool((res.certificate or {}).get("passed", False)),
        "rel_error": res.relative_error,
        "misfit": res.objective, "nllh": res.nllh, "gap": res.continuity_gap,
        "iterations": res.iterations,
        "build_first": builds[0],
        "build_cached": _median(builds[1:]) if len(builds) > 1 else float("nan"),
        "solve_time": _median([r.timings.get("solve", np.nan) for r, _ in runs]),
        # the whole call's processor time, the build and its C compiler
        # included (the wall clock of a shared machine counts the other
        # processes' turns too)
        "cpu_time": _median(cpu),
        "estimate": [float(v) for v in res.p],
        "message": res.message,
        # a converged fit can still be flagged (a poor local minimum, a parameter
        # held by its bound): without this the row read "ok" (a user's report)
        "fit_warnings": " | ".join(w for w in res.warnings if is_fit_note(w)),
    }


def _row_in_worker(data: Encoded, *task: Any) -> dict[str, Any]:
    """:func:`_row` on an executor: the caller's registered problems registered here first."""
    from .registry import _REGISTRY, register_problem

    shared = decoded(data)
    for name, factory in shared["factories"].items():
        if name not in _REGISTRY or _REGISTRY[name].factory is not factory:
            register_problem(name, factory)
    return _row(*task, given=shared.get("given", {}).get(task[0]))


def write_outputs(rows: list[dict[str, Any]], out: Path) -> None:
    """Write ``table.csv``, ``table.md`` and ``comparison.png`` into ``out``.

    The three are written under temporary names and moved into place
    together (:class:`~picard_casadi.runtime.output_files.AtomicOutputs`).
    """
    import io

    import matplotlib.pyplot as plt

    from ..io.plotting import plot_comparison
    from ..runtime.output_files import AtomicOutputs

    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=list(COLUMNS))
    writer.writeheader()
    for r in rows:
        writer.writerow({k: (" ".join(f"{v:.8g}" for v in r[k]) if k == "estimate" else
                             "" if r[k] is None else r[k]) for k in COLUMNS})
    with AtomicOutputs(out) as files:
        files.write_text("table.csv", table.getvalue())
        files.write_text("table.md", format_markdown(rows))
        fig = plot_comparison(_per_problem_method(rows))
        try:
            fig.savefig(files.path("comparison.png"), format="png", dpi=130)
        finally:
            plt.close(fig)
        files.commit()


def _per_problem_method(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["problem"], r["method"]), []).append(r)
    return [{"problem": p, "method": m,
             "solve_time": _median([r["solve_time"] for r in rs]),
             "rel_error": _median([r["rel_error"] for r in rs]),
             "misfit": _median([r["misfit"] for r in rs]),
             "nllh": _median([r.get("nllh", float("nan")) for r in rs]),
             "success": all(r["success"] for r in rs)}
            for (p, m), rs in groups.items()]


def format_markdown(rows: list[dict[str, Any]]) -> str:
    """The study's table in Markdown."""
    head = ("| problem | seed | method | ok | certified | rel. error | misfit | nllh | gap | "
            "iterations | build (cold) [s] | build (cached) [s] | solve [s] | CPU [s] | "
            "estimate | fit flagged |")
    lines = [head, "|" + "---|" * 16]
    for r in rows:
        est = ", ".join(f"{v:.4g}" for v in r["estimate"][:6]) + (" ..." if len(r["estimate"]) > 6 else "")
        seed = "-" if r["seed"] is None else r["seed"]
        err = f"{r['rel_error']:.2%}" if _known(r["rel_error"]) else "-"
        cached = f"{r['build_cached']:.2f}" if _known(r["build_cached"]) else "-"
        lines.append(
            f"| {r['problem']} | {seed} | {r['method']} | {'yes' if r['success'] else 'no'} | "
            f"{'yes' if r.get('certified') else 'no'} | {err} | {r['misfit']:.5g} | "
            f"{r.get('nllh', float('nan')):.6g} | "
            f"{r['gap']:.1e} | {r['iterations']} | "
            f"{r['build_first']:.2f} | {cached} | {r['solve_time']:.3f} | "
            f"{r.get('cpu_time', float('nan')):.3f} | {est} | "
            f"{'yes' if r.get('fit_warnings') else 'no'} |"
        )
    failed = [r for r in rows if not r["success"]]
    if failed:
        # why each failed (the CSV's message column): a failed run's misfit and
        # error are those of where it stopped, not of an optimum
        lines.append("")
        lines.append("Not converged (their misfit and error are where they stopped, "
                     "not an optimum's):")
        lines.append("")
        for r in failed:
            seed = "" if r["seed"] is None else f" seed {r['seed']}"
            lines.append(f"- {r['problem']}{seed} {r['method']}: {_first_clause(r['message'])}")
    return "\n".join(lines) + "\n"


def _first_clause(message: str, limit: int = 160) -> str:
    """A message's first clause (up to its first ';'), at most ``limit`` characters."""
    head = str(message).split(";", 1)[0].strip()
    return head if len(head) <= limit else head[:limit - 3] + "..."
