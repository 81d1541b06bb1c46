"""The ``picard-casadi`` command line.

::

    picard-casadi problems
    picard-casadi run NAME [--method M] [--seed S] [--noise-std E] [--T T] [--n N]
                           [--lam L] [--out DIR] ...
    picard-casadi fit MODEL.py DATA.csv --p0 ... [--out DIR] ...
    picard-casadi compare NAMES... [--methods ...] [--seeds ...] [--out DIR]

``run`` and ``fit`` print a progress line (updated in place on a terminal,
plain lines when piped), the estimate with standard errors and confidence
intervals (and the truth when known), and write ``result.json``,
``fit.png`` and ``convergence.png`` into the output folder.

Exit status and outputs (docs/reliability.md):

* 0: done (for ``run``/``fit``: the fit converged); 1: the fit did not
  converge, or the package failed at run time (one line, e.g. a compiler
  that fails under ``--codegen on``, results that could not be written);
  2: bad arguments or input files (one line ``picard-casadi <cmd>: error:
  ...``); 130: interrupted (Ctrl-C; one line); 141: the output pipe was
  closed (``| head``; quietly).
* The output folder is checked before any work (a file where a folder is
  expected, permissions); results of an earlier run there are not replaced
  without ``--overwrite``.  Files are written to temporary names and moved
  into place together once all are written, so the folder never holds a
  partial or mixed set, and nothing is written outside it (a model named
  ``../../x`` writes to ``results/x``).
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import math
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from .outputs import AtomicOutputs, check_output_folder, safe_name

__all__ = ["main", "read_csv_experiments", "load_model_file"]

METHOD_CHOICES = ("picard", "picard-gn", "ipopt", "shooting")
RESULT_FILES = ("result.json", "fit.png", "convergence.png")
COMPARE_FILES = ("table.csv", "table.md", "comparison.png")


class CliError(Exception):
    """An error in the arguments or the input files (exit status 2)."""


class CliFailure(Exception):
    """The work could not be completed (exit status 1), e.g. results not written."""


# ---------------------------------------------------------------------- input files
def load_model_file(path: str | Path) -> tuple[Any, dict[str, Any]]:
    """Import a user's model file; it must define ``build_model()`` returning a Model.

    Optional names in the file: ``P0`` (starting parameters), ``P_BOUNDS``
    (``(lower, upper)``), ``X0`` (initial-state guess for every experiment),
    ``OPTIONS`` (a dict of ``estimate`` keyword arguments).
    """
    from .model import Model

    path = Path(path)
    if not path.is_file():
        raise CliError(f"MODEL: no such file {str(path)!r}")
    spec = importlib.util.spec_from_file_location(f"picard_user_model_{abs(hash(path))}", path)
    if spec is None or spec.loader is None:
        raise CliError(f"MODEL: {str(path)!r} is not a Python file (name it *.py)")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as err:  # the user's code: report whatever it raised, where
        raise CliError(_user_code_error(f"importing {str(path)!r} failed", err, path)) from None
    if not callable(getattr(module, "build_model", None)):
        raise CliError(f"MODEL: {str(path)!r} must define build_model() returning a picard_casadi.Model")
    try:
        model = module.build_model()
    except (Exception, SystemExit) as err:  # Model validation names the symbol; user code anything
        raise CliError(_user_code_error(f"build_model() in {str(path)!r} failed", err, path)) from None
    if not isinstance(model, Model):
        raise CliError(f"MODEL: build_model() must return a picard_casadi.Model, got {type(model).__name__}")
    extras = {k: getattr(module, k) for k in ("P0", "P_BOUNDS", "X0", "OPTIONS") if hasattr(module, k)}
    _check_extras(extras, model, path)
    return model, extras


def _user_code_error(what: str, err: BaseException, path: Path) -> str:
    """``MODEL: <what>: <Error>: <message>`` and the model file's own traceback lines.

    Only the frames in the model file are shown (not the package's import
    machinery); a syntax error shows its line and a caret.
    """
    head = f"MODEL: {what}: {type(err).__name__}: {err}"
    target = os.path.realpath(path)
    lines = []
    if isinstance(err, SyntaxError) and err.filename and os.path.realpath(err.filename) == target:
        lines.append(f"  {path}, line {err.lineno}")
        if err.text:
            lines.append(f"    {err.text.rstrip()}")
    else:
        for frame in traceback.extract_tb(err.__traceback__):
            if os.path.realpath(frame.filename) == target:
                lines.append(f"  {path}, line {frame.lineno}, in {frame.name}")
                if frame.line:
                    lines.append(f"    {frame.line}")
    return head + ("\n" + "\n".join(lines) if lines else "")


def _check_extras(extras: dict[str, Any], model: Any, path: Path) -> None:
    """The optional names of a model file, checked as strictly as their options."""
    where = f"MODEL {str(path)!r}"
    for name, n, what in (("P0", model.np, "parameters"), ("X0", model.nx, "states")):
        if name not in extras:
            continue
        try:
            vals = np.asarray(extras[name], dtype=float).ravel()
        except (TypeError, ValueError):
            raise CliError(f"{where}: {name} must be {n} numbers, got {extras[name]!r}") from None
        if vals.size != n:
            raise CliError(f"{where}: {name} has {vals.size} value(s), the model has {n} {what}")
        if not np.all(np.isfinite(vals)):
            raise CliError(f"{where}: {name} must be finite, got {vals.tolist()}")
    if "OPTIONS" in extras and not isinstance(extras["OPTIONS"], dict):
        raise CliError(f"{where}: OPTIONS must be a dict of estimate() keyword arguments, "
                       f"got {type(extras['OPTIONS']).__name__}")


def read_csv_experiments(path: str | Path, model: Any, input_hold: str = "linear") -> list[Any]:
    """Experiments from a CSV file: one row per sample.

    Columns: ``experiment`` (a name), ``time``, one column per output (named
    as the model's ``y_names``) and, when the model has inputs, one per input
    (``u_names``).  Empty output cells are missing values.  Inputs between
    samples are interpolated linearly (``input_hold="linear"``, right for
    measured smooth signals) or held (``"previous"``, for step inputs).

    The file is read as UTF-8, with or without the byte-order mark that
    Excel writes; a file that is not UTF-8 is read as Latin-1 (every byte is
    a character there) with a note on stderr naming the first line that is
    not UTF-8.

    Raises
    ------
    CliError
        Naming the file, the line and the column of the first problem.
    """
    from .experiment import Experiment

    path = Path(path)
    if not path.is_file():
        raise CliError(f"DATA: no such file {str(path)!r}")
    text = _read_text(path)
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise CliError(f"DATA {path}: the file is empty") from None
        rows = list(enumerate(reader, start=2))
    except csv.Error as err:
        raise CliError(f"DATA {path}, line {reader.line_num}: not readable as CSV ({err})") from None
    expected = ["experiment", "time", *model.y_names, *model.u_names]
    unknown = [h for h in header if h not in expected]
    if unknown:
        hint = ""
        near = {h.lower(): h for h in expected}
        close = [f"{u!r} -> {near[u.lower()]!r}" for u in unknown if u.lower() in near]
        if close:
            hint = f" (names are case-sensitive: {', '.join(close)})"
        if len(header) == 1:
            for sep, name in ((";", "semicolons"), ("\t", "tabs")):
                if sep in header[0]:
                    hint = f" (the columns seem separated by {name}; use commas)"
        raise CliError(
            f"DATA {path}, line 1: unknown column(s) {unknown}; expected 'experiment', "
            f"'time', outputs {list(model.y_names)}"
            + (f" and inputs {list(model.u_names)}" if model.nu else "") + hint
        )
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise CliError(f"DATA {path}, line 1: column(s) {twice} appear more than once")
    missing = [h for h in expected if h not in header]
    if missing:
        raise CliError(f"DATA {path}, line 1: missing column(s) {missing}")
    col = {h: i for i, h in enumerate(header)}
    groups: dict[str, list[tuple[int, float, list[float], list[float]]]] = {}
    for line, row in rows:
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise CliError(f"DATA {path}, line {line}: {len(row)} cells, the header has {len(header)}")

        def number(name: str, allow_empty: bool) -> float:
            cell = row[col[name]].strip()
            if cell == "":
                if allow_empty:
                    return math.nan
                raise CliError(f"DATA {path}, line {line}: column {name!r} is empty")
            try:
                value = float(cell)
            except ValueError:
                raise CliError(
                    f"DATA {path}, line {line}: column {name!r} holds {cell!r}, not a number"
                ) from None
            if math.isinf(value):
                raise CliError(f"DATA {path}, line {line}: column {name!r} is infinite")
            return value

        name = row[col["experiment"]].strip() or "experiment"
        t = number("time", False)
        y = [number(k, True) for k in model.y_names]
        u = [number(k, False) for k in model.u_names]
        groups.setdefault(name, []).append((line, t, y, u))
    if not groups:
        raise CliError(f"DATA {path}: no data rows")
    experiments = []
    for name, samples in groups.items():
        for (l0, t0, _, _), (l1, t1, _, _) in zip(samples[:-1], samples[1:]):
            if t1 <= t0:
                raise CliError(
                    f"DATA {path}, line {l1}: time {t1} of experiment {name!r} does not "
                    f"come after {t0} (line {l0}); times must increase within an experiment"
                )
        t = np.array([s[1] for s in samples])
        y = np.array([s[2] for s in samples])
        u = np.array([s[3] for s in samples]) if model.nu else None
        try:
            experiments.append(Experiment(t, y, u=u, name=name, u_interpolation=input_hold))
        except ValueError as err:
            raise CliError(f"DATA {path}: {err}") from None
    return experiments


def _read_text(path: Path) -> str:
    """The file's text: UTF-8 (a byte-order mark dropped), else Latin-1 with a note."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise CliError(f"DATA {path}: cannot read the file ({err.strerror})") from None
    if b"\x00" in data[:4096] and (data.startswith((b"\xff\xfe", b"\xfe\xff"))):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            pass
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        print(f"picard-casadi: note: DATA {path} is not UTF-8 (byte 0x{data[err.start]:02x} "
              f"on line {line}); read as Latin-1", file=sys.stderr)
        return data.decode("latin-1")


# ---------------------------------------------------------------------- progress
class Progress:
    """Prints one line per iteration: in place on a terminal, plain when piped."""

    def __init__(self, stream=None, quiet: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.quiet = quiet
        self.last = 0.0

    def __call__(self, rec: Any) -> None:
        if self.quiet:
            return
        line = (f"iter {rec.iteration:5d}  objective {rec.objective:11.5e}  "
                f"|grad| {rec.grad_norm:9.2e}  gap {rec.gap:9.2e}")
        if self.tty:
            self.stream.write("\r" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty and not self.quiet:
            self.stream.write("\n")
            self.stream.flush()


# ---------------------------------------------------------------------- argument types
def _number(text: str, kind: type, minimum: float, strict: bool, what: str) -> Any:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    if value < minimum or (strict and value == minimum):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def nonnegative_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    return _number(text, float, 0.0, False, "a number >= 0")


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    return _number(text, float, 0.0, True, "a positive number")


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _number(text, int, 0, False, "an integer >= 0")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _number(text, int, 1, False, "an integer >= 1")


def node_count(text: str) -> int:
    """argparse type: an integer >= 2."""
    return _number(text, int, 2, False, "an integer >= 2")


# ---------------------------------------------------------------------- commands
def _common_estimate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", default="picard-gn", choices=METHOD_CHOICES,
                   help="estimation method (default: picard-gn)")
    p.add_argument("--T", type=positive_float, default=None, help="Picard interval length T")
    p.add_argument("--n", type=positive_int, default=None, help="Picard order n of the loss")
    p.add_argument("--lam", type=positive_float, default=None,
                   help="continuity penalty lambda")
    p.add_argument("--nodes", type=node_count, default=None,
                   help="quadrature nodes per interval")
    p.add_argument("--weights", choices=("none", "auto"), default=None,
                   help="output weights: none (the paper's unweighted loss) or auto "
                        "(inverse noise variance)")
    p.add_argument("--max-iter", type=positive_int, default=None,
                   help="iteration limit of the method")
    p.add_argument("--max-intervals", type=positive_int, default=None,
                   help="largest number of Picard intervals accepted (default: 100,000, "
                        "or what fits in 4 GB)")
    p.add_argument("--codegen", choices=("auto", "on", "off"), default="auto",
                   help="compile the iteration's functions to C (default: auto)")
    p.add_argument("--out", default=None, help="folder for result.json, fit.png and "
                   "convergence.png (default: results/<name>); checked before the run")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the results of an earlier run in the output folder "
                        "(without it the command refuses to start)")
    p.add_argument("--quiet", action="store_true", help="no progress line")


def _estimate_kwargs(args: argparse.Namespace, base: dict[str, Any]) -> dict[str, Any]:
    kw = dict(base)
    for name in ("T", "n", "lam", "nodes"):
        value = getattr(args, name)
        if value is not None:
            kw[name] = value
    if args.weights is not None:
        kw["weights"] = None if args.weights == "none" else "auto"
    if args.max_iter is not None:
        kw["max_iter"] = args.max_iter
    if args.max_intervals is not None:
        kw["max_intervals"] = args.max_intervals
    kw["codegen"] = {"auto": "auto", "on": True, "off": False}[args.codegen]
    return kw


def _output_folder(args: argparse.Namespace, default_name: str, names: tuple[str, ...]) -> Path:
    """The checked output folder (nothing is created yet)."""
    out = Path(args.out) if args.out else Path("results") / safe_name(default_name)
    try:
        return check_output_folder(out, names, overwrite=args.overwrite)
    except ValueError as err:
        raise CliError(str(err)) from None


def _write_results(res: Any, model: Any, experiments: list, out: Path) -> None:
    """result.json and the two figures, written together (see the module doc)."""
    import matplotlib.pyplot as plt

    from .plotting import plot_convergence, plot_fit

    try:
        with AtomicOutputs(out) as files:
            files.write_text("result.json", res.to_json() + "\n")
            for name, fig in (("fit.png", lambda: plot_fit(res, model, experiments)),
                              ("convergence.png", lambda: plot_convergence(res))):
                figure = fig()
                try:
                    figure.savefig(files.path(name), format="png", dpi=130)
                finally:
                    plt.close(figure)
            files.commit()
    except OSError as err:
        raise CliFailure(f"could not write the results to {str(out)!r} ({err.strerror or err}); "
                         "nothing was saved") from None
    print(f"wrote {out / 'result.json'}, {out / 'fit.png'}, {out / 'convergence.png'}")


def _estimate(model: Any, experiments: list, p0: Any, args: argparse.Namespace,
              **kw: Any) -> Any:
    from .estimate import estimate

    progress = Progress(quiet=args.quiet)
    try:
        return estimate(model, experiments, p0, args.method, callback=progress, **kw)
    except (ValueError, TypeError) as err:
        raise CliError(str(err)) from None
    finally:
        progress.done()


def cmd_problems(args: argparse.Namespace) -> int:
    from .registry import describe_problems

    for name, summary in describe_problems():
        print(f"{name:18s} {summary}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .registry import problems, problem

    if args.name not in problems():
        raise CliError(f"NAME: unknown problem {args.name!r}; known: {', '.join(problems())}")
    out = _output_folder(args, args.name, RESULT_FILES)
    kw_problem = {} if args.noise_std is None else {"noise_std": args.noise_std}
    prob = problem(args.name, seed=args.seed, **kw_problem)
    kw = _estimate_kwargs(args, prob.options)
    print(f"{prob.description}; method {args.method}")
    t0 = time.perf_counter()
    res = _estimate(prob.model, prob.experiments, prob.p0, args, p_bounds=prob.p_bounds, **kw)
    res.p_true = np.asarray(prob.p_true, float)
    if "paper_estimate" in prob.reference:
        paper = prob.reference["paper_estimate"]
        print(f"paper's estimate: {np.array2string(np.asarray(paper), precision=4)} "
              f"(relative error {prob.reference['paper_relative_error']:.1%})")
    print(res.summary())
    _write_results(res, prob.model, prob.experiments, out)
    print(f"relative error to the truth: {res.relative_error:.2%}; total "
          f"{time.perf_counter() - t0:.1f} s")
    return 0 if res.success else 1


def _vector_arg(text: str | None, n: int, field: str) -> np.ndarray | None:
    if text is None:
        return None
    try:
        vals = np.array([float(v) for v in text.replace(",", " ").split()])
    except ValueError:
        raise CliError(f"{field}: expected {n} numbers separated by commas, got {text!r}") from None
    if vals.size != n:
        raise CliError(f"{field}: expected {n} numbers, got {vals.size}")
    if not np.all(np.isfinite(vals)):
        raise CliError(f"{field}: expected {n} finite numbers, got {text!r}")
    return vals


def cmd_fit(args: argparse.Namespace) -> int:
    model, extras = load_model_file(args.model)
    out = _output_folder(args, model.name, RESULT_FILES)
    experiments = read_csv_experiments(args.data, model, args.input_hold)
    p0 = _vector_arg(args.p0, model.np, "--p0")
    if p0 is None:
        if "P0" not in extras:
            raise CliError(f"--p0: give {model.np} starting values (or define P0 in the model file)")
        p0 = np.asarray(extras["P0"], float)
    x0 = _vector_arg(args.x0, model.nx, "--x0")
    if x0 is None and "X0" in extras:
        x0 = np.asarray(extras["X0"], float)
    if x0 is not None:
        from .experiment import Experiment

        experiments = [Experiment(e.t, e.y, u=e.u, x0=x0, name=e.name,
                                  u_interpolation=e.u_interpolation) for e in experiments]
    kw = _estimate_kwargs(args, dict(extras.get("OPTIONS", {})))
    res = _estimate(model, experiments, p0, args, p_bounds=extras.get("P_BOUNDS"), **kw)
    print(res.summary())
    _write_results(res, model, experiments, out)
    return 0 if res.success else 1


def cmd_compare(args: argparse.Namespace) -> int:
    from .compare import compare, write_outputs
    from .registry import problems

    unknown = [n for n in args.names if n not in problems()]
    if unknown:
        raise CliError(f"NAMES: unknown problem(s) {unknown}; known: {', '.join(problems())}")
    bad = [m for m in args.methods if m not in METHOD_CHOICES]
    if bad:
        raise CliError(f"--methods: unknown method(s) {bad}; valid: {', '.join(METHOD_CHOICES)}")
    try:
        out = check_output_folder(args.out, COMPARE_FILES, overwrite=args.overwrite)
    except ValueError as err:
        raise CliError(str(err)) from None
    rows = compare(args.names, args.methods, seeds=args.seeds, repeats=args.repeats, out=None,
                   codegen={"auto": "auto", "on": True, "off": False}[args.codegen],
                   verbose=True)
    try:
        write_outputs(rows, out)
    except OSError as err:
        raise CliFailure(f"could not write the tables to {str(out)!r} ({err.strerror or err}); "
                         "nothing was saved") from None
    print(f"wrote {', '.join(str(out / n) for n in COMPARE_FILES)}")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, with errors on one line (``picard-casadi run: error: ...``) and status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``picard-casadi``."""
    parser = _Parser(
        prog="picard-casadi",
        description="Parameter estimation for nonlinear ODE models by Picard iteration "
                    "(CasADi).",
        epilog="Exit status: 0 done, 1 not converged or failed, 2 bad arguments or input, "
               "130 interrupted.",
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
                                   "else as Latin-1.")
    p.add_argument("model", help="Python file defining build_model() -> picard_casadi.Model")
    p.add_argument("data", help="CSV file of measurements")
    p.add_argument("--p0", default=None, help="starting parameters, comma separated "
                   "(default: P0 in the model file)")
    p.add_argument("--x0", default=None, help="initial-state guess, comma separated "
                   "(default: X0 in the model file, or from the data)")
    p.add_argument("--input-hold", choices=("linear", "previous"), default="linear",
                   help="inputs between samples: linear interpolation (default) or "
                        "zero-order hold")
    _common_estimate_args(p)
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser("compare", help="compare methods on problems",
                       description="Run every method on every problem from the same start "
                                   "and write a table (CSV and Markdown) and a figure.")
    p.add_argument("names", nargs="+", help="problem names")
    p.add_argument("--methods", nargs="+", default=["picard-gn", "ipopt", "picard"],
                   help=f"methods to compare (from {', '.join(METHOD_CHOICES)})")
    p.add_argument("--seeds", nargs="+", type=nonnegative_int, default=[0], help="noise seeds")
    p.add_argument("--repeats", type=positive_int, default=1, help="timing repeats (medians)")
    p.add_argument("--codegen", choices=("auto", "on", "off"), default="auto",
                   help="compile functions to C (default: auto)")
    p.add_argument("--out", default="results/compare", help="output folder (checked before "
                   "the runs)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the tables of an earlier comparison in the output folder")
    p.set_defaults(func=cmd_compare)
    return parser


def _quiet_broken_pipe() -> int:
    """stdout was closed (``| head``): stop quietly, as ``yes | head`` does."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return 141  # 128 + SIGPIPE, what a shell reports for a process killed by it


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``picard-casadi`` console script."""
    from .errors import PicardError
    from .interrupts import interruptible, is_interrupt

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except BrokenPipeError:  # --help piped into head
        return _quiet_broken_pipe()
    command = f"picard-casadi {args.command}"
    try:
        with interruptible():
            status = int(args.func(args))
            sys.stdout.flush()  # a closed pipe shows here, not at exit
            return status
    except CliError as err:
        print(f"{command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return _interrupted(command, argv is None)
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except (CliFailure, PicardError) as err:
        print(f"{command}: error: {err}", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"{command}: error: out of memory (use a longer --T or fewer nodes)",
              file=sys.stderr)
        return 1
    except SystemError as err:  # a C extension saw Ctrl-C and returned anyway
        if is_interrupt(err):
            return _interrupted(command, argv is None)
        raise


def _interrupted(command: str, as_program: bool) -> int:
    """One line for Ctrl-C; as a program, a second Ctrl-C while exiting is ignored
    (it would print a traceback from the interpreter's shutdown)."""
    if as_program:
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
    print(f"{command}: interrupted", file=sys.stderr)
    return 130


if __name__ == "__main__":
    sys.exit(main())
