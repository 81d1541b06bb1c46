"""The ``picard-casadi`` command line (user guide: docs/cli.md).

::

    picard-casadi problems
    picard-casadi run NAME [--method M] [--seed S] [--noise-std E] [--T T] [--n N]
                           [--lam L] [--out DIR] ...
    picard-casadi fit MODEL.py DATA.csv [--p0 ...] [--bounds NAME=LO:HI] [--fix NAME=VALUE]
                      [--x0 ...] [--x0-known] [--weights auto|none|w1,...]
                      [--noise [OUTPUT=]DIST[:SIGMA] ...]
                      [--multistart N] [--jobs K] [--profile] [--out DIR] ...
    picard-casadi compare NAMES... [--methods ...] [--seeds ...] [--out DIR]
    picard-casadi compare --model MODEL.py --data DATA.csv [--methods ...] [--p0 ...]
    picard-casadi predict RESULT MODEL.py DATA.csv [--x0 ...] [--noise] [--out DIR]

``run`` and ``fit`` print progress (a line per iteration of every method,
updated in place on a terminal, plain lines when piped; a line before the
model's functions are first compiled), the estimate with standard errors
and confidence intervals, the initial states per experiment (and the truth
when known), and write ``result.json``, ``fit.png`` and ``convergence.png``
(with ``--profile`` also ``profile.png`` and ``profile.json``, written when
the profile is done: a profile stopped by Ctrl-C leaves the fit's files) into
the output folder.

A model file's ``P0``, ``P_BOUNDS``, ``X0`` and ``OPTIONS`` combine with the
flags; a flag wins over the file for what it sets (``--bounds`` replaces one
parameter's bounds, ``--fix`` sets them equal and the start to the value).
With ``--x0-known`` a state's known initial value is the experiment's first
measurement where the first row has it, else ``--x0``, else ``X0``.

Exit status and outputs (docs/reliability.md):

* 0: done (for ``run``/``fit``: the fit converged); 1: the fit did not
  converge, or the package failed at run time (one line, e.g. a compiler
  that fails under ``--codegen on``, results that could not be written);
  2: bad arguments or input files (one line ``picard-casadi <cmd>: error:
  ...``); 3: the fit converged but is flagged (a FitWarning: systematically
  off the data, or a parameter held by its bound; the files are written);
  130: interrupted (Ctrl-C; one line); 143: terminated (SIGTERM; one line,
  no partial files left); 141: the output pipe was closed (``| head``;
  quietly).
* The output folder is checked before any work (a file where a folder is
  expected, permissions); results of an earlier run there are not replaced
  without ``--overwrite``.  Files are written to temporary names and moved
  into place together once all are written, so the folder never holds a
  partial or mixed set, and nothing is written outside it (a model named
  ``../../x`` writes to ``results/x``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..runtime.output_files import check_output_folder, safe_name
from ..errors import closest
from .data_files import input_holds, read_csv_experiments, read_data_files
from .errors import CliError, CliFailure
from .noise_options import noise_options
from .initial_states import clock_started, initial_states, known_states, vector_arg
from .petab_input import petab_input
from .predict_command import add_predict_parser
from .program_exit import Terminated, interrupted, quiet_broken_pipe, terminate_cleanly
from .result_files import PROFILE_FILES, write_profile, write_results
from .statement_options import statement_options
from .model_files import load_model_file
from .parameter_flags import flagged_parameters, own_parameters
from .parser_types import (BOX_ORIGIN, PETAB_TERMS, bounds_arg, fix_arg, in_cli_terms,
                           job_count, joined_negative_values, node_count, nonnegative_float,
                           nonnegative_int, input_hold_arg, noise_arg, positive_float,
                           positive_int, weights_arg)
from ..runtime.progress import Progress

__all__ = ["main", "read_csv_experiments", "load_model_file"]

METHOD_CHOICES = ("picard", "picard-gn", "ipopt", "shooting", "single-shooting")
#: estimate's guess= values (guess.GUESSES; not imported here: --help stays light)
GUESS_CHOICES = ("auto", "simulation", "anchored", "shooting")
RESULT_FILES = ("result.json", "fit.png", "convergence.png")
COMPARE_FILES = ("table.csv", "table.md", "comparison.png")


# ---------------------------------------------------------------------- input files


# ---------------------------------------------------------------------- progress


# ---------------------------------------------------------------------- argument types


# ---------------------------------------------------------------------- estimate settings
# Keys of a model file's OPTIONS that the command line sets itself (flags win)
# and what to use instead of the ones it cannot take.
_OPTIONS_NOT_ACCEPTED = {
    "callback": "the command line reports progress itself",
    "executor": "use --jobs K for a local process pool",
}


def _options_from_file(extras: dict[str, Any], where: str) -> dict[str, Any]:
    """A copy of OPTIONS, refused where it sets what the command line owns."""
    options = dict(extras.get("OPTIONS", {}))
    for key, why in _OPTIONS_NOT_ACCEPTED.items():
        if key in options:
            raise CliError(f"{where}: OPTIONS cannot set {key!r} ({why})")
    if "p_bounds" in options and "P_BOUNDS" in extras:
        raise CliError(f"{where}: the parameter box is given twice (P_BOUNDS and "
                       "OPTIONS['p_bounds']); keep one")
    return options


@dataclass
class _Fit:
    """Everything one estimation needs, assembled from the flags and the inputs."""

    model: Any
    experiments: list
    p0: np.ndarray
    p_bounds: tuple[np.ndarray, np.ndarray]
    method: str | None  # None: estimate's default
    options: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def _settings(args: argparse.Namespace, model: Any, experiments: list, p0: np.ndarray,
              p0_origin: str, box: Any, box_origin: str, options: dict[str, Any],
              extras: dict[str, Any] | None = None) -> _Fit:
    """Combine the problem's (or the model file's) settings with the flags; flags win."""
    options = dict(options)
    # unset stays None: estimate's default, with its fallbacks to IPOPT and shooting
    method = getattr(args, "method", None) or options.pop("method", None)
    options.pop("method", None)
    if method is not None and method not in METHOD_CHOICES:
        raise CliError(f"OPTIONS: unknown method {method!r}; valid: {', '.join(METHOD_CHOICES)}")
    # --bounds and --fix of an experiment's own parameter (a name in --conditions,
    # NAME[experiment] of --per-experiment): set after the experiments are known
    own = {flag: [item for item in getattr(args, flag, None) or []
                  if item[0] not in model.p_names]
           for flag in ("bounds", "fix")} if p0_origin != "--petab" else {}
    if p0_origin == "--petab":  # a parameter table: its own starts, bounds and scales
        p_bounds = None
    else:
        model_args = argparse.Namespace(**{
            **vars(args), **{flag: [item for item in getattr(args, flag, None) or []
                                    if item[0] in model.p_names] for flag in own}})
        p0, p_bounds = flagged_parameters(model, p0, p0_origin, box, box_origin, model_args)
    notes: list[str] = []
    if extras is not None:
        known = known_states(args, model)
        known = True if options.get("estimate_x0") is False else known
        experiments, lines = initial_states(model, experiments, args, extras, known)
        if np.all(known):
            options["estimate_x0"] = False
            notes = ["initial states known (not estimated):", *lines]
        elif np.any(known):  # --x0-known-states: the others estimated
            options["estimate_x0"] = [not k for k in known]
            notes = ["initial states (known where --x0-known-states names them, the others "
                     "estimated from these starts):", *lines]
    for name in ("T", "n", "lam", "nodes"):
        value = getattr(args, name, None)
        if value is not None:
            options[name] = value
    noise_options(getattr(args, "weights", None), getattr(args, "noise", None), model,
                  options)
    experiments = statement_options(getattr(args, "scale", None),
                                    getattr(args, "per_experiment", None),
                                    getattr(args, "conditions", None), model,
                                    list(experiments), options)
    for flag, key in (("max_iter", "max_iter"), ("progress_window", "progress_window"),
                      ("max_intervals", "max_intervals"),
                      ("multistart", "multistart"), ("multistart_seed", "seed"),
                      ("jobs", "n_jobs"), ("guess", "guess")):
        value = getattr(args, flag, None)
        if value is not None:
            options[key] = value
    codegen = getattr(args, "codegen", None)
    if codegen is not None:
        options["codegen"] = {"auto": "auto", "on": True, "off": False}[codegen]
    if any(own.values()):
        p0, p_bounds = own_parameters(model, list(experiments), p0, p_bounds, own, options,
                                      notes)
    return _Fit(model, list(experiments), p0, p_bounds, method, options, notes)


# ---------------------------------------------------------------------- commands
def _statement_args(p: argparse.ArgumentParser) -> None:
    """``--scale``, ``--per-experiment``, ``--conditions``, ``--noise`` (fit, and
    compare with --model): how the problem is stated."""
    p.add_argument("--scale", action="append", default=None, metavar="[NAME=]SCALE",
                   help="the scale a parameter is estimated on (every parameter without "
                        "NAME=): lin, log or log10; repeatable")
    p.add_argument("--per-experiment", action="append", default=None, metavar="NAME[,NAME...]",
                   help="estimate parameter NAME separately in each experiment "
                        "(NAME[experiment]); repeatable")
    p.add_argument("--conditions", default=None, metavar="C.csv",
                   help="a condition table: a column 'experiment' and one per parameter an "
                        "experiment sets (a number: a constant there; a name: a parameter "
                        "of its own)")
    p.add_argument("--noise", action="append", type=noise_arg, default=None,
                   metavar="[OUTPUT=]DIST[:SIGMA]",
                   help="an output's noise model (all outputs without OUTPUT=): DIST normal, "
                        "log-normal or log10-normal; SIGMA a number (known), data (the "
                        "CSV's sigma_<output> column) or a name (a noise parameter shared by "
                        "the outputs naming it); without SIGMA estimated.  Repeatable")


def _common_estimate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", default=None, choices=METHOD_CHOICES,
                   help="estimation method (default: picard-gn, or OPTIONS['method'] of "
                        "a model file)")
    p.add_argument("--bounds", action="append", type=bounds_arg, default=None,
                   metavar="NAME=LO:HI",
                   help="bounds of parameter NAME (repeatable); LO or HI empty for "
                        "unbounded (k=0: is k >= 0); replaces that parameter's bounds "
                        "from the model file or the problem")
    p.add_argument("--fix", action="append", type=fix_arg, default=None,
                   metavar="NAME=VALUE",
                   help="hold parameter NAME at VALUE (repeatable): equal bounds, and the "
                        "start set to VALUE")
    p.add_argument("--T", type=positive_float, default=None, help="Picard interval length T")
    p.add_argument("--n", type=positive_int, default=None, help="Picard order n of the loss")
    p.add_argument("--lam", type=positive_float, default=None,
                   help="continuity penalty lambda")
    p.add_argument("--nodes", type=node_count, default=None,
                   help="quadrature nodes per interval")
    p.add_argument("--weights", type=weights_arg, default=None, metavar="auto|none|w1,w2,...",
                   help="output weights: auto (the likelihood, each output's noise variance "
                        "estimated; the default for several outputs), none (the paper's "
                        "unweighted loss) or one inverse noise variance per output, "
                        "relative (known noise levels: --noise OUTPUT=normal:SIGMA)")
    _statement_args(p)
    p.add_argument("--guess", choices=GUESS_CHOICES, default=None,
                   help="the states' start: auto (default), simulation, anchored (propagated "
                        "from the data) or shooting (every state simulated with p0)")
    p.add_argument("--max-iter", type=positive_int, default=None,
                   help="iteration limit of the method")
    p.add_argument("--progress-window", type=nonnegative_int, default=None, metavar="N",
                   help="picard-gn: iterations over which a run with open gaps must make "
                        "progress (default 100; 0 iterates on to --max-iter)")
    p.add_argument("--max-intervals", type=positive_int, default=None,
                   help="largest number of Picard intervals accepted (default: 100,000, "
                        "or what fits in 4 GB)")
    p.add_argument("--multistart", type=positive_int, default=None, metavar="N",
                   help="run from N starts (the start and N-1 Latin-hypercube samples of "
                        "the bounds, log-uniform where a range spans two decades) and "
                        "keep the best")
    p.add_argument("--multistart-seed", type=nonnegative_int, default=None, metavar="S",
                   help="seed of --multistart's Latin-hypercube starts (default 0: the same "
                        "starts on every run)")
    p.add_argument("--jobs", type=job_count, default=None, metavar="K",
                   help="processes for --multistart and --profile (-1: one per core; "
                        "default: one after another in this process)")
    p.add_argument("--profile", action="store_true",
                   help="after the fit, profile-likelihood intervals of every free "
                        "parameter, printed beside the Wald intervals; writes profile.png "
                        "and profile.json")
    p.add_argument("--profile-parameters", default=None, metavar="NAME[,NAME...]",
                   help="--profile of these parameters only (implies --profile): names as "
                        "the summary gives them, a log-scale parameter by its own name too")
    p.add_argument("--codegen", choices=("auto", "on", "off"), default=None,
                   help="compile the iteration's functions to C (default: auto)")
    p.add_argument("--out", default=None, help="folder for result.json, fit.png and "
                   "convergence.png (default: results/<name>); checked before the run")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the results of an earlier run in the output folder "
                        "(without it the command refuses to start)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def _output_folder(args: argparse.Namespace, default_name: str, names: tuple[str, ...]) -> Path:
    """The checked output folder (nothing is created yet)."""
    out = Path(args.out) if args.out else Path("results") / safe_name(default_name)
    try:
        return check_output_folder(out, names, overwrite=args.overwrite)
    except ValueError as err:
        raise CliError(str(err)) from None


def _estimate(fit: _Fit, args: argparse.Namespace) -> Any:
    from ..analysis.nonsmooth import state_jump_note
    from ..estimate import estimate
    from ..runtime.codegen import compilation_notice

    progress = Progress(quiet=args.quiet)
    for line in fit.notes:
        print(line)
    jump = state_jump_note(fit.model)  # before the fit: a run that chatters is slow
    if jump:
        print(f"picard-casadi {args.command}: note: {jump}", file=sys.stderr, flush=True)
    early: list[str] = []
    caught: list[warnings.WarningMessage] = []
    show = warnings.showwarning

    def held(message, category, filename, lineno, file=None, line=None):
        # a warning before the first iteration (the start oscillates between the
        # samples: times in ms?) is said at once: the run it explains may take
        # many minutes (a quarter car's times in ms ran 15 minutes, no word)
        if progress.iterations == 0:
            progress.done()
            show(message, category, filename, lineno)
            early.append(str(message))
        else:
            caught.append(warnings.WarningMessage(message, category, filename, lineno))

    try:
        with compilation_notice(progress.note), warnings.catch_warnings():
            warnings.simplefilter("default")
            warnings.showwarning = held
            res = estimate(fit.model, fit.experiments, fit.p0, fit.method,
                           p_bounds=fit.p_bounds, callback=progress, **fit.options)
    except (ValueError, TypeError) as err:
        raise CliError(str(err)) from None
    finally:
        progress.done()
    # the result's own warnings are in its summary; others get one line each
    for w in caught:
        if str(w.message) not in res.warnings and str(w.message) not in early:
            show(w.message, w.category, w.filename, w.lineno)
    return res


def _profile(res: Any, fit: _Fit, args: argparse.Namespace) -> tuple[Any, str]:
    """``--profile``: the profile of a converged fit, or None and why not."""
    from ..studies.profile import profile

    chosen = [n.strip() for n in (getattr(args, "profile_parameters", None) or "").split(",")
              if n.strip()]
    if not (args.profile or chosen):
        return None, ""
    if not res.success:
        return None, "--profile: skipped, the fit did not converge"
    lo_b, hi_b = res.settings.get("p_bounds", fit.p_bounds)  # the estimated vector's box
    free = [n for n, lo, hi in zip(res.p_scaled_names or res.p_names, lo_b, hi_b)
            if lo is None or hi is None or lo < hi]
    if not free:
        return None, "--profile: skipped, every parameter is fixed"
    if chosen:  # (a nine-parameter fit's profiles took 36 s where one was asked for)
        free = chosen
    jobs = args.jobs
    where = (f" on {jobs} processes" if jobs and jobs > 1 else
             " on one process per core" if jobs == -1 else "")
    print(f"profile likelihood of {', '.join(free)} (both sides of each){where} ...",
          flush=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its warnings are in its summary
            prof = profile(res, parameters=chosen or None, n_jobs=jobs)
    except ValueError as err:
        return None, f"--profile: {err}"
    print(in_cli_terms(prof.summary()))
    return prof, ""


def _finish(res: Any, fit: _Fit, args: argparse.Namespace, out: Path) -> int:
    """Summary, profile, files; the exit status."""
    print(in_cli_terms(res.summary()))
    write_results(res, fit.model, fit.experiments, out)  # kept if Ctrl-C stops the profile
    prof, problem = _profile(res, fit, args)
    if prof is not None:
        write_profile(prof, out)
    if problem:
        print(f"picard-casadi {args.command}: {problem}", file=sys.stderr)
        return 1
    if res.fit_flagged:
        # converged, but a FitWarning says the answer may be wrong: a script
        # must not take it for a clean fit (a log10 rate of -226 exited 0)
        print(f"picard-casadi {args.command}: the fit converged but is flagged (see the "
              "warnings above); exit status 3", file=sys.stderr)
        return 3
    return 0 if res.success else 1


def cmd_problems(args: argparse.Namespace) -> int:
    from ..studies.registry import describe_problems

    for name, summary in describe_problems():
        print(f"{name:18s} {summary}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from ..studies.registry import problem, problems

    if args.name not in problems():
        raise CliError(f"NAME: unknown problem {args.name!r}; known: {', '.join(problems())}")
    out = _output_folder(args, args.name, RESULT_FILES + PROFILE_FILES)
    kw_problem = {} if args.noise_std is None else {"noise_std": args.noise_std}
    prob = problem(args.name, seed=args.seed, **kw_problem)
    fit = _settings(args, prob.model, prob.experiments, prob.p0, "the problem's p0",
                    prob.p_bounds, "the problem's box", prob.options)
    _note_idle_jobs(fit, args)
    print(f"{prob.description}; method {fit.method or 'picard-gn'}")
    t0 = time.perf_counter()
    res = _estimate(fit, args)
    res.p_true = np.asarray(prob.p_true, float)
    if "paper_estimate" in prob.reference:
        paper = prob.reference["paper_estimate"]
        print(f"paper's estimate: {np.array2string(np.asarray(paper), precision=4)} "
              f"(relative error {prob.reference['paper_relative_error']:.1%})")
    status = _finish(res, fit, args, out)
    print(f"relative error to the truth: {res.relative_error:.2%}; total "
          f"{time.perf_counter() - t0:.1f} s")
    return status


def _user_fit(args: argparse.Namespace, model: Any, extras: dict[str, Any], model_path: str,
              data_paths: list[str]) -> _Fit:
    """A model file (loaded), its CSV and the flags: what ``fit`` and ``compare --model``
    estimate."""
    where = f"MODEL {str(model_path)!r}"
    options = _options_from_file(extras, where)
    box = extras.get("P_BOUNDS", options.pop("p_bounds", None))
    box_origin = f"P_BOUNDS in {model_path}" if box is not None else ""
    BOX_ORIGIN.set(box_origin)
    experiments = clock_started(read_data_files(
        data_paths, model, input_holds(args.input_hold, model),
        ignore=getattr(args, "ignore_columns", None)), getattr(args, "t0", None))
    p0 = vector_arg(args.p0, model.np, "--p0")
    p0_origin = "--p0"
    if p0 is None:
        if "P0" in extras:
            p0, p0_origin = np.asarray(extras["P0"], float), f"P0 in {model_path}"
        elif args.fix and len({n for n, _ in args.fix}) == model.np:
            p0, p0_origin = np.zeros(model.np), "--fix"  # every parameter fixed
        else:
            raise CliError(f"--p0: give {model.np} starting values "
                           f"({', '.join(model.p_names)}), or define P0 in the model file")
    return _settings(args, model, experiments, p0, p0_origin, box, box_origin, options, extras)


def _refuse_profile_of_delays(fit: _Fit, args: argparse.Namespace) -> None:
    """``--profile`` of a fit whose delays are estimated: refused before the fit
    (it failed after it, a pharmacometrician's lag fit)."""
    if not (args.profile or getattr(args, "profile_parameters", None)):
        return
    from ..transcription.delayed import DelayPlan

    if not getattr(fit.model, "has_delays", False) or not isinstance(fit.p_bounds, tuple):
        return
    lb, ub = (np.asarray(b, float) for b in fit.p_bounds)
    free = [fit.model.p_names[j] for j in DelayPlan.of(fit.model).estimated
            if j < lb.size and lb[j] < ub[j]]
    if free:
        raise CliError(f"--profile: profiles of a fit with estimated delays ({', '.join(free)}) "
                       "are not available; fit first, then fit again with --fix "
                       f"{free[0]}=ESTIMATE --profile (the others are profiled with the "
                       "delay held)")


def _note_idle_jobs(fit: _Fit, args: argparse.Namespace) -> None:
    if args.jobs is not None and not (fit.options.get("multistart") or args.profile
                                      or getattr(args, "profile_parameters", None)):
        print(f"picard-casadi {args.command}: note: --jobs has no effect without "
              "--multistart or --profile", file=sys.stderr)


def cmd_fit(args: argparse.Namespace) -> int:
    if args.petab:
        model, experiments, table, options = petab_input(args)
        out = _output_folder(args, model.name, RESULT_FILES + PROFILE_FILES)
        fit = _settings(args, model, experiments, table, "--petab", None, "", options)
    else:
        if not (args.model and args.data):
            raise CliError("give MODEL.py DATA.csv (or --petab problem.yaml)")
        model, extras = load_model_file(args.model)
        out = _output_folder(args, model.name, RESULT_FILES + PROFILE_FILES)
        fit = _user_fit(args, model, extras, args.model, args.data)
    _note_idle_jobs(fit, args)
    _refuse_profile_of_delays(fit, args)
    res = _estimate(fit, args)
    return _finish(res, fit, args, out)


def cmd_compare(args: argparse.Namespace) -> int:
    from ..studies.compare import compare, write_outputs
    from ..studies.registry import Problem, problems

    unknown = [n for n in args.names if n not in problems()]
    if unknown:
        raise CliError(f"NAMES: unknown problem(s) {unknown}; known: {', '.join(problems())}")
    bad = [m for m in args.methods if m not in METHOD_CHOICES]
    if bad:
        raise CliError(f"--methods: unknown method(s) {bad}; valid: {', '.join(METHOD_CHOICES)}")
    if (args.model is None) != (args.data is None):
        raise CliError("--model and --data go together: your model file and its CSV")
    if args.model is None:
        if not args.names:
            raise CliError("give problem NAMES (see picard-casadi problems), or your own "
                           "model and data with --model M.py --data D.csv")
        for flag in ("p0", "x0", "bounds", "fix", "weights", "scale", "per_experiment",
                     "conditions", "noise"):
            if getattr(args, flag) not in (None, False):
                raise CliError(f"--{flag.replace('_', '-')} applies to --model M.py "
                               "--data D.csv only")
        if args.x0_known or args.x0_known_states:
            raise CliError("--x0-known and --x0-known-states apply to --model M.py --data D.csv "
                           "only")
    try:
        out = check_output_folder(args.out, COMPARE_FILES, overwrite=args.overwrite)
    except ValueError as err:
        raise CliError(str(err)) from None
    entries: list[Any] = list(args.names)
    if args.model is not None:
        model, extras = load_model_file(args.model)
        fit = _user_fit(args, model, extras, args.model, args.data)
        if fit.model.name in args.names:
            raise CliError(f"--model: the model is named {fit.model.name!r} like a problem in "
                           "NAMES; rename it (name= in build_model) or leave that one out")
        for line in fit.notes:
            print(line)
        options = {k: v for k, v in fit.options.items() if k not in ("codegen", "n_jobs")}
        entries.append(Problem.from_data(
            fit.model, fit.experiments, fit.p0, p_bounds=fit.p_bounds, options=options,
            description=f"{args.model} fitted to {', '.join(args.data)}"))
    from ..runtime.codegen import compilation_notice

    progress = Progress()
    try:
        with compilation_notice(progress.note):
            mesh = {k: v for k, v in (("T", args.T), ("nodes", args.nodes)) if v is not None}
            rows = compare(entries, args.methods, seeds=args.seeds, repeats=args.repeats,
                           out=None, verbose=True, n_jobs=args.jobs,
                           codegen={"auto": "auto", "on": True, "off": False}[args.codegen],
                           options={n: dict(mesh) for n in args.names} if mesh else None)
    except (ValueError, TypeError) as err:
        raise CliError(str(err)) from None
    try:
        write_outputs(rows, out)
    except OSError as err:
        raise CliFailure(f"could not write the tables to {str(out)!r} ({err.strerror or err}); "
                         "nothing was saved") from None
    print(f"wrote {', '.join(str(out / n) for n in COMPARE_FILES)}")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, with errors on one line (``picard-casadi run: error: ...``) and status 2;
    an unrecognised flag is reported by the command it was given to, with the
    closest of that command's flags (``--petabb``: did you mean ``--petab``?)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            chosen = self
            for action in self._actions:
                if isinstance(action, argparse._SubParsersAction):
                    chosen = action.choices.get(getattr(parsed, action.dest, None), self)
            flags = [o for a in chosen._actions for o in a.option_strings]
            hints = []
            for extra in extras:
                flag = extra.split("=", 1)[0]
                # a flag's last word first (--seed: --multistart-seed), then spelling
                near = (next((f for f in flags if f.endswith("-" + flag.lstrip("-"))), None)
                        or closest(flag, flags) if flag.startswith("--") else None)
                hints.append(f"{extra} (did you mean {near}?)" if near else extra)
            chosen.error(f"unrecognized arguments: {' '.join(hints)}")
        return parsed


def _user_input_args(p: argparse.ArgumentParser, for_compare: bool = False) -> None:
    """``--p0``, ``--x0``, ``--x0-known``, ``--input-hold`` (fit, compare --model)."""
    p.add_argument("--p0", default=None, help="starting parameters, comma separated "
                   "(default: P0 in the model file)")
    p.add_argument("--x0", action="append", default=None,
                   metavar="[EXPERIMENT:]NAME=VALUE|v1,v2,...",
                   help="initial states: NAME=VALUE for one state (repeatable) or a list of "
                        "all; a guess, or with --x0-known the known values (default: X0 in "
                        "the model file, or from the data); EXPERIMENT:NAME=VALUE sets one "
                        "experiment's state over everything else (a dose per subject)")
    p.add_argument("--x0-known", action="store_true",
                   help="the initial states are known, not estimated: each experiment's "
                        "first row gives the states that are outputs measured there, --x0 "
                        "(or X0 in the model file) the others")
    p.add_argument("--x0-known-states", action="append", default=None,
                   metavar="NAME[,NAME...]",
                   help="these states' initial values are known (as --x0-known takes them), "
                        "the others estimated")
    p.add_argument("--input-hold", type=input_hold_arg, default=None,
                   metavar="{linear,previous,NAME=previous[,...]}",
                   help="inputs between samples: linear interpolation (default; a fit "
                        "notes inputs that look like a staircase) or zero-order hold, for "
                        "every input or the inputs named (the others linear)")
    p.add_argument("--ignore-columns", default=None, metavar="NAME[,NAME...]",
                   help="columns of the CSV files not read (a logger's other channels)")
    p.add_argument("--t0", type=float, default=None, metavar="TIME",
                   help="where every experiment's clock starts: the initial states are the "
                        "states at TIME (default: each experiment's first sample time); "
                        "--t0 0 for a dose at time 0 with samples from later")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``picard-casadi``."""
    parser = _Parser(
        prog="picard-casadi",
        description="Parameter estimation for nonlinear ODE models by Picard iteration "
                    "(CasADi).",
        epilog="Exit status: 0 done, 1 not converged or failed, 2 bad arguments or input, "
               "3 converged but flagged (see the warnings; predict: its fit was), 130 "
               "interrupted, 143 terminated.  docs/cli.md has a worked example.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)

    p = sub.add_parser("problems", help="list the built-in problems",
                       description="List the built-in problems, one line each.")
    p.set_defaults(func=cmd_problems)

    p = sub.add_parser("run", help="estimate a built-in problem",
                       description="Generate a built-in problem's synthetic data and "
                                   "estimate its parameters.")
    p.add_argument("name", help="problem name (see `picard-casadi problems`)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="noise seed (default 0)")
    p.add_argument("--noise-std", type=nonnegative_float, default=None,
                   help="noise standard deviation (default: the problem's protocol)")
    _common_estimate_args(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("fit", help="fit your own model to your data",
                       description="Fit a model file (defining build_model()) to "
                                   "measurements in a CSV file with columns experiment, "
                                   "time, one per output (y_names) and one per input "
                                   "(u_names); empty cells are missing values.  The CSV "
                                   "is read as UTF-8 (with or without a byte-order mark), "
                                   "else as Latin-1.  The model file may define P0, "
                                   "P_BOUNDS, X0 and OPTIONS; flags override them.")
    p.add_argument("model", nargs="?", help="Python file defining build_model() -> "
                   "picard_casadi.Model")
    p.add_argument("data", nargs="*", help="CSV file(s) of measurements (several: their "
                   "experiments together; a file without a column 'experiment' is one, "
                   "named as the file)")
    p.add_argument("--petab", default=None, metavar="problem.yaml",
                   help="a PEtab problem instead of MODEL.py DATA.csv (its tables give the "
                        "parameters, conditions and noise; pip install -e '.[petab]')")
    _user_input_args(p)
    _common_estimate_args(p)
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser("compare", help="compare methods on problems, or on your model and data",
                       description="Run every method on every problem (or on your model "
                                   "file and CSV: --model, --data) from the same start and "
                                   "write a table (CSV and Markdown) and a figure.")
    p.add_argument("names", nargs="*", help="problem names (optional with --model)")
    p.add_argument("--model", default=None, metavar="M.py",
                   help="your model file (as for fit); with --data")
    p.add_argument("--data", action="append", default=None, metavar="D.csv",
                   help="its CSV file of measurements (repeatable: several files' "
                        "experiments together)")
    p.add_argument("--methods", nargs="+", default=["picard-gn", "ipopt", "picard"],
                   help=f"methods to compare (from {', '.join(METHOD_CHOICES)})")
    p.add_argument("--seeds", nargs="+", type=nonnegative_int, default=[0],
                   help="noise seeds of the built-in problems")
    p.add_argument("--repeats", type=positive_int, default=1, help="timing repeats (medians)")
    p.add_argument("--T", type=positive_float, default=None,
                   help="Picard interval length T of every problem (the mesh every method "
                        "solves; a shorter one where a row is not certified)")
    p.add_argument("--nodes", type=node_count, default=None,
                   help="quadrature nodes per interval of every problem")
    _user_input_args(p, for_compare=True)
    p.add_argument("--bounds", action="append", type=bounds_arg, default=None,
                   metavar="NAME=LO:HI", help="bounds of a parameter of --model (repeatable)")
    p.add_argument("--fix", action="append", type=fix_arg, default=None, metavar="NAME=VALUE",
                   help="hold a parameter of --model fixed (repeatable)")
    p.add_argument("--weights", type=weights_arg, default=None, metavar="auto|none|w1,w2,...",
                   help="output weights for --model")
    _statement_args(p)
    p.add_argument("--jobs", type=job_count, default=None, metavar="K",
                   help="run the rows on K processes (-1: one per core)")
    p.add_argument("--codegen", choices=("auto", "on", "off"), default="auto",
                   help="compile functions to C (default: auto)")
    p.add_argument("--out", default="results/compare", help="output folder (checked before "
                   "the runs)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the tables of an earlier comparison in the output folder")
    p.set_defaults(func=cmd_compare)

    add_predict_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``picard-casadi`` console script."""
    from ..errors import PicardError
    from ..runtime.interrupts import interruptible, is_interrupt

    parser = build_parser()
    try:
        args = parser.parse_args(joined_negative_values(sys.argv[1:] if argv is None
                                                         else list(argv)))
    except BrokenPipeError:  # --help piped into head
        return quiet_broken_pipe()
    command = f"picard-casadi {args.command}"
    if argv is None:
        terminate_cleanly()
    petab_terms, box_origin = PETAB_TERMS.set(bool(getattr(args, "petab", None))), \
        BOX_ORIGIN.set("")
    try:
        with interruptible(), _one_line_warnings(command):
            status = int(args.func(args))
            sys.stdout.flush()  # a closed pipe shows here, not at exit
            return status
    except CliError as err:
        print(f"{command}: error: {in_cli_terms(str(err))}", file=sys.stderr)
        return 2
    except Terminated:
        print(f"{command}: terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        if Terminated.seen:  # SIGTERM inside native code, unwound as an interrupt
            print(f"{command}: terminated", file=sys.stderr)
            return 143
        return interrupted(command, argv is None)
    except BrokenPipeError:
        return quiet_broken_pipe()
    except (CliFailure, PicardError) as err:
        print(f"{command}: error: {in_cli_terms(str(err))}", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"{command}: error: out of memory (use a longer --T or fewer nodes)",
              file=sys.stderr)
        return 1
    except SystemError as err:  # a C extension saw Ctrl-C and returned anyway
        if is_interrupt(err):
            return interrupted(command, argv is None)
        raise
    finally:
        PETAB_TERMS.reset(petab_terms)
        BOX_ORIGIN.reset(box_origin)


@contextlib.contextmanager
def _one_line_warnings(command: str) -> Iterator[None]:
    """Python warnings as one line each, ``<command>: warning: ...`` on stderr,
    without the package's source line that Python's format adds."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"{command}: warning: {in_cli_terms(str(message))}", file=sys.stderr)

    saved = warnings.showwarning
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = saved


if __name__ == "__main__":
    sys.exit(main())
