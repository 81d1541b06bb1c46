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
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["main", "read_csv_experiments", "load_model_file"]

METHOD_CHOICES = ("picard", "picard-gn", "ipopt", "shooting")


class CliError(Exception):
    """An error in the arguments or the input files (exit status 2)."""


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
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # the user's code: report whatever it raised
        raise CliError(f"MODEL: importing {str(path)!r} failed: {type(err).__name__}: {err}") from None
    if not hasattr(module, "build_model"):
        raise CliError(f"MODEL: {str(path)!r} must define build_model() returning a picard_casadi.Model")
    try:
        model = module.build_model()
    except ValueError as err:  # Model validation names the symbol or shape
        raise CliError(f"MODEL: build_model() in {str(path)!r} failed: {err}") from None
    if not isinstance(model, Model):
        raise CliError(f"MODEL: build_model() must return a picard_casadi.Model, got {type(model).__name__}")
    extras = {k: getattr(module, k) for k in ("P0", "P_BOUNDS", "X0", "OPTIONS") if hasattr(module, k)}
    return model, extras


def read_csv_experiments(path: str | Path, model: Any, input_hold: str = "linear") -> list[Any]:
    """Experiments from a CSV file: one row per sample.

    Columns: ``experiment`` (a name), ``time``, one column per output (named
    as the model's ``y_names``) and, when the model has inputs, one per input
    (``u_names``).  Empty output cells are missing values.  Inputs between
    samples are interpolated linearly (``input_hold="linear"``, right for
    measured smooth signals) or held (``"previous"``, for step inputs).

    Raises
    ------
    CliError
        Naming the file, the line and the column of the first problem.
    """
    from .experiment import Experiment

    path = Path(path)
    if not path.is_file():
        raise CliError(f"DATA: no such file {str(path)!r}")
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise CliError(f"DATA {path}: the file is empty") from None
        rows = list(enumerate(reader, start=2))
    expected = ["experiment", "time", *model.y_names, *model.u_names]
    unknown = [h for h in header if h not in expected]
    if unknown:
        raise CliError(
            f"DATA {path}, line 1: unknown column(s) {unknown}; expected 'experiment', "
            f"'time', outputs {list(model.y_names)}"
            + (f" and inputs {list(model.u_names)}" if model.nu else "")
        )
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


# ---------------------------------------------------------------------- commands
def _common_estimate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", default="picard-gn", choices=METHOD_CHOICES,
                   help="estimation method (default: picard-gn)")
    p.add_argument("--T", type=float, default=None, help="Picard interval length T")
    p.add_argument("--n", type=int, default=None, help="Picard order n of the loss")
    p.add_argument("--lam", type=float, default=None, help="continuity penalty lambda")
    p.add_argument("--nodes", type=int, default=None, help="quadrature nodes per interval")
    p.add_argument("--weights", choices=("none", "auto"), default=None,
                   help="output weights: none (the paper's unweighted loss) or auto "
                        "(inverse noise variance)")
    p.add_argument("--max-iter", type=int, default=None, help="iteration limit of the method")
    p.add_argument("--codegen", choices=("auto", "on", "off"), default="auto",
                   help="compile the iteration's functions to C (default: auto)")
    p.add_argument("--out", default=None, help="folder for result.json, fit.png and "
                   "convergence.png (default: results/<name>)")
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
    kw["codegen"] = {"auto": "auto", "on": True, "off": False}[args.codegen]
    return kw


def _finish(res: Any, model: Any, experiments: list, out: Path, args: argparse.Namespace) -> None:
    from .plotting import plot_convergence, plot_fit

    out.mkdir(parents=True, exist_ok=True)
    res.to_json(out / "result.json")
    plot_fit(res, model, experiments, path=out / "fit.png")
    plot_convergence(res, path=out / "convergence.png")
    print(res.summary())
    print(f"wrote {out / 'result.json'}, {out / 'fit.png'}, {out / 'convergence.png'}")


def cmd_problems(args: argparse.Namespace) -> int:
    from .registry import describe_problems

    for name, summary in describe_problems():
        print(f"{name:18s} {summary}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from .estimate import estimate
    from .registry import problems, problem

    if args.name not in problems():
        raise CliError(f"NAME: unknown problem {args.name!r}; known: {', '.join(problems())}")
    kw_problem = {} if args.noise_std is None else {"noise_std": args.noise_std}
    prob = problem(args.name, seed=args.seed, **kw_problem)
    kw = _estimate_kwargs(args, prob.options)
    progress = Progress(quiet=args.quiet)
    print(f"{prob.description}; method {args.method}")
    t0 = time.perf_counter()
    try:
        res = estimate(prob.model, prob.experiments, prob.p0, args.method,
                       p_bounds=prob.p_bounds, callback=progress, **kw)
    except (ValueError, TypeError) as err:
        raise CliError(str(err)) from None
    finally:
        progress.done()
    res.p_true = np.asarray(prob.p_true, float)
    if "paper_estimate" in prob.reference:
        paper = prob.reference["paper_estimate"]
        print(f"paper's estimate: {np.array2string(np.asarray(paper), precision=4)} "
              f"(relative error {prob.reference['paper_relative_error']:.1%})")
    out = Path(args.out or f"results/{args.name}")
    _finish(res, prob.model, prob.experiments, out, args)
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
    return vals


def cmd_fit(args: argparse.Namespace) -> int:
    from .estimate import estimate

    model, extras = load_model_file(args.model)
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
    progress = Progress(quiet=args.quiet)
    try:
        res = estimate(model, experiments, p0, args.method, p_bounds=extras.get("P_BOUNDS"),
                       callback=progress, **kw)
    except (ValueError, TypeError) as err:
        raise CliError(str(err)) from None
    finally:
        progress.done()
    out = Path(args.out or f"results/{model.name}")
    _finish(res, model, experiments, out, args)
    return 0 if res.success else 1


def cmd_compare(args: argparse.Namespace) -> int:
    from .compare import compare
    from .registry import problems

    unknown = [n for n in args.names if n not in problems()]
    if unknown:
        raise CliError(f"NAMES: unknown problem(s) {unknown}; known: {', '.join(problems())}")
    bad = [m for m in args.methods if m not in METHOD_CHOICES]
    if bad:
        raise CliError(f"--methods: unknown method(s) {bad}; valid: {', '.join(METHOD_CHOICES)}")
    out = Path(args.out)
    compare(args.names, args.methods, seeds=args.seeds, repeats=args.repeats, out=out,
            codegen={"auto": "auto", "on": True, "off": False}[args.codegen], verbose=True)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``picard-casadi``."""
    parser = argparse.ArgumentParser(
        prog="picard-casadi",
        description="Parameter estimation for nonlinear ODE models by Picard iteration "
                    "(CasADi).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("problems", help="list the built-in problems",
                       description="List the built-in problems, one line each.")
    p.set_defaults(func=cmd_problems)

    p = sub.add_parser("run", help="estimate a built-in problem",
                       description="Generate a built-in problem's synthetic data and "
                                   "estimate its parameters.")
    p.add_argument("name", help="problem name (see `picard-casadi problems`)")
    p.add_argument("--seed", type=int, default=0, help="noise seed (default 0)")
    p.add_argument("--noise-std", type=float, default=None,
                   help="noise standard deviation (default: the problem's protocol)")
    _common_estimate_args(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("fit", help="fit your own model to your data",
                       description="Fit a model file (defining build_model()) to "
                                   "measurements in a CSV file with columns experiment, "
                                   "time, one per output (y_names) and one per input "
                                   "(u_names); empty cells are missing values.")
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
    p.add_argument("--seeds", nargs="+", type=int, default=[0], help="noise seeds")
    p.add_argument("--repeats", type=int, default=1, help="timing repeats (medians)")
    p.add_argument("--codegen", choices=("auto", "on", "off"), default="auto",
                   help="compile functions to C (default: auto)")
    p.add_argument("--out", default="results/compare", help="output folder")
    p.set_defaults(func=cmd_compare)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``picard-casadi`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except CliError as err:
        print(f"picard-casadi {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
