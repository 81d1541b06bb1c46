"""``picard-casadi predict``: a fitted model's outputs, with their band, for
runs it was not fitted to (docs/cli.md, "Predicting new runs").

::

    picard-casadi predict RESULT MODEL.py DATA.csv [DATA2.csv ...] [--x0 ...]
                          [--noise] [--level L] [--out DIR]

``RESULT`` is a fit's ``result.json`` (or its folder); the CSV files hold the
new runs' times and inputs, and, where they were measured, outputs to compare
with.  The initial states are known, as ``fit --x0-known`` takes them, or
(``--estimate-x0``) fitted to each run's measurements with the parameters held.
Writes ``prediction.csv`` and ``prediction.png``.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.wrapped_angles import wrapped_angle_note
from ..runtime.output_files import check_output_folder, safe_name
from .data_files import input_holds, read_data_files
from .errors import CliError
from .initial_states import clock_started, initial_states
from .model_files import load_model_file
from .parser_types import in_cli_terms, input_hold_arg
from .result_files import write_together

__all__ = ["add_predict_parser", "cmd_predict", "PREDICTION_FILES"]

PREDICTION_FILES = ("prediction.csv", "prediction.png")


@dataclass
class RunPrediction:
    """One run's predicted outputs on the model's own scale (a log-normal
    output's values, not its logarithm)."""

    name: str
    t: np.ndarray
    y: np.ndarray  # (N, ny)
    lower: np.ndarray | None  # (N, ny); None where no band is available
    upper: np.ndarray | None
    measured: np.ndarray | None  # (N, ny) NaN where not measured; None: no data


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a probability in (0, 1), got {text!r}")
    return value


def add_predict_parser(sub: Any) -> None:
    """The ``predict`` command and its arguments."""
    p = sub.add_parser(
        "predict", help="a fitted model's outputs for new runs (their inputs in CSV files)",
        description="Predict the outputs of new runs from a fit's result.json: the model "
                    "file it was fitted with, and CSV files with the runs' times and "
                    "inputs (columns as for fit; output columns optional, compared where "
                    "given).  The initial states are known: each run's first row where it "
                    "measures a state, else --x0, else X0 in the model file (or, with "
                    "--estimate-x0, fitted to the run's measurements).  Writes "
                    "prediction.csv and prediction.png.")
    p.add_argument("result", help="the fit's result.json, or the folder holding it")
    p.add_argument("model", help="the model file the fit was made with")
    p.add_argument("data", nargs="+", help="CSV file(s) of the runs to predict")
    p.add_argument("--x0", action="append", default=None,
                   metavar="[EXPERIMENT:]NAME=VALUE|v1,v2,...",
                   help="the runs' initial states (NAME=VALUE, repeatable, or a list of "
                        "all), where a run's first row does not measure them; "
                        "EXPERIMENT:NAME=VALUE sets one run's over everything else")
    p.add_argument("--estimate-x0", action="store_true",
                   help="estimate each run's initial states from its measured outputs, the "
                        "parameters held at the fit's (--x0 and the first row then give "
                        "the start); the band takes them as known")
    p.add_argument("--estimate", default=None, metavar="NAME[,NAME...]",
                   help="estimate these model parameters for each run from its measured "
                        "outputs, the others held at the fit's (a bias per maneuver, a "
                        "subject's own rate: what the fit estimated per experiment); the "
                        "start is the run's --conditions value, else the median of the "
                        "fit's; the band takes them as known")
    p.add_argument("--t0", type=float, default=None, metavar="TIME",
                   help="where every run's clock starts (default: its first sample time)")
    p.add_argument("--input-hold", type=input_hold_arg, default=None,
                   metavar="{linear,previous,NAME=previous[,...]}",
                   help="inputs between samples, as for fit (give what the fit used)")
    p.add_argument("--conditions", default=None, metavar="C.csv",
                   help="the runs' constants and parameters, as fit's --conditions")
    p.add_argument("--ignore-columns", default=None, metavar="NAME[,NAME...]",
                   help="columns of the CSV files not read (a logger's other channels)")
    p.add_argument("--noise", action="store_true",
                   help="the band of new measurements (the fit's noise level added), not "
                        "only of the model's output")
    p.add_argument("--level", type=_probability, default=0.95,
                   help="the band's probability (default 0.95)")
    p.add_argument("--out", default=None,
                   help="folder for prediction.csv and prediction.png (default: "
                        "results/<model>-prediction); checked before the run")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the files of an earlier prediction in the output folder")
    p.set_defaults(func=cmd_predict)


def _load_result(text: str, model: Any) -> Any:
    """The fit in ``RESULT`` (a file, or a folder holding result.json), with ``model``."""
    from ..result import EstimationResult

    path = Path(text)
    if path.is_dir():
        path = path / "result.json"
    if not path.is_file():
        raise CliError(f"RESULT: no such file {str(path)!r} (give a fit's result.json, or "
                       "the folder it was written to)")
    try:  # (the model's names checked against the result's)
        return EstimationResult.from_json(path, model=model)
    except ValueError as err:
        raise CliError(f"RESULT: {err}") from None


def _check_parameters(res: Any, model: Any, exp: Any) -> None:
    """A :class:`CliError` where the fit and the run's ``--conditions`` leave a
    model parameter without a value (a fit with parameters per experiment)."""
    try:
        res.model_parameters(model, exp.parameters)
    except ValueError as err:
        missing = re.search(r"no value for the model parameter\(s\) ([^:]+):", str(err))
        if missing is None:
            raise CliError(f"RESULT: run {exp.name!r}: {err}") from None
        raise CliError(
            f"run {exp.name!r} needs a value of {missing.group(1)}, which the fit estimated "
            f"per experiment or took from its conditions: give it with --conditions C.csv "
            f"(a column 'experiment', one column per such parameter: a number, or the name "
            f"of one of the fit's parameters {list(res.p_names)})") from None


def _estimated_parameters(res: Any, model: Any, text: str | None) -> dict[str, float]:
    """``--estimate NAME,...``: each named model parameter with its start (the
    median of the fit's values of it, one per experiment or one shared)."""
    if text is None:
        return {}
    starts = {}
    names, values = list(res.p_names), np.asarray(res.p, float)
    for name in (n.strip() for n in text.split(",") if n.strip()):
        if name not in model.p_names:
            raise CliError(f"--estimate: {name!r} is not a parameter of the model "
                           f"({list(model.p_names)})")
        fitted = [v for n, v in zip(names, values) if n == name or n.startswith(name + "[")]
        starts[name] = float(np.median(fitted)) if fitted else 0.0
    if not starts:
        raise CliError("--estimate: give one or more of the model's parameters, NAME[,NAME...]")
    return starts


def _estimated_starts(res: Any, model: Any, experiments: list, own: dict[str, float],
                      x0_too: bool) -> tuple[list, list[str]]:
    """``--estimate-x0`` and ``--estimate NAME``: each run with its initial
    states (``x0_too``) and the parameters ``own`` (name: start) estimated
    from its own measurements, the others held at the fit's (a flight-test
    validation run's first sample is noisy: q 8 noise levels off; a ship's
    new maneuver has its own rudder bias), and the lines saying them."""
    from ..estimate import estimate
    from ..noise import DISTRIBUTIONS, Noise, output_scales

    of_scale = {scale: name for name, scale in DISTRIBUTIONS.items()}
    noise = [Noise(of_scale[sc]) for sc in output_scales(res.y_names, model.y_names)]
    flag = "--estimate-x0" if x0_too else "--estimate"
    out, lines = [], []
    for exp in experiments:
        if exp.y.shape[1] == 0 or not np.any(np.isfinite(exp.y)):
            raise CliError(f"{flag}: run {exp.name!r} measures no output to estimate from; "
                           f"give its values (--x0, --conditions) and leave {flag} out")
        given = dict(exp.parameters or {})
        p = res.model_parameters(model, {**given, **{n: given.get(n, v)
                                                      for n, v in own.items()}})
        free = np.isin(np.asarray(model.p_names), list(own))
        bounds = (np.where(free, -np.inf, p), np.where(free, np.inf, p))
        kept = {n: v for n, v in given.items() if n not in own} or None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = estimate(model, [exp.replaced(parameters=kept)], p, p_bounds=bounds,
                           noise=noise, uncertainty=False, estimate_x0=x0_too)
        if not fit.success:
            raise CliError(f"{flag}: run {exp.name!r} could not be fitted "
                           f"({in_cli_terms(fit.message)})")
        x0 = np.asarray(fit.x0[0], float)
        fitted = np.asarray(fit.model_parameters(model, kept), float)
        values = {n: float(fitted[list(model.p_names).index(n)]) for n in own}
        out.append(exp.with_x0(x0).replaced(parameters={**given, **values}))
        shown = [f"{n}={v:.6g}" for n, v in values.items()]
        if x0_too:
            shown += [f"{n}={v:.6g}" for n, v in zip(model.x_names, x0)]
        lines.append(f"  {exp.name}: " + ", ".join(shown))
    return out, lines


def _run_prediction(res: Any, model: Any, exp: Any, level: float, noise: bool
                    ) -> tuple[RunPrediction, str]:
    """One run's prediction, and why it has no band (empty where it has one)."""
    from ..analysis.prediction_band import prediction_band
    from ..noise import output_scales

    run = exp.replaced(y=None, sigma=None)
    why = ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            band = prediction_band(res, run, level=level, noise=noise)
            y, lower, upper = band.y, band.lower, band.upper
        except ValueError as err:
            try:
                y = np.asarray(res.predict(run), float)
            except ValueError as err2:
                raise CliError(f"DATA: {err2}") from None
            lower = upper = None
            why = str(err)
    # back to the model's scale: a log-normal output was fitted as its logarithm
    for k, scale in enumerate(output_scales(res.y_names, model.y_names)):
        if scale != "lin":
            back = np.exp if scale == "log" else (lambda v: np.power(10.0, v))
            for arr in (y, lower, upper):
                if arr is not None:
                    arr[:, k] = back(arr[:, k])
    measured = None if exp.y.shape[1] == 0 else np.asarray(exp.y, float)
    return RunPrediction(exp.name, np.asarray(exp.t, float), y, lower, upper, measured), why


def _table(runs: list[RunPrediction], names: list[str], compared: list[bool]) -> str:
    """prediction.csv: one row per sample of each run."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header = ["experiment", "time"]
    for k, name in enumerate(names):
        header += [name, f"{name}_lower", f"{name}_upper"]
        if compared[k]:
            header.append(f"{name}_measured")
    writer.writerow(header)

    def cell(v: float) -> str:
        return "" if math.isnan(v) else repr(float(v))

    for run in runs:
        for i, t in enumerate(run.t):
            row = [run.name, repr(float(t))]
            for k in range(len(names)):
                row.append(cell(run.y[i, k]))
                row += ([cell(run.lower[i, k]), cell(run.upper[i, k])]
                        if run.lower is not None else ["", ""])
                if compared[k]:
                    row.append(cell(run.measured[i, k]) if run.measured is not None else "")
            writer.writerow(row)
    return out.getvalue()


#: a run's rms error this many times the fit's noise level is noted: the run
#: is not like the fitted ones (a ship's turn predicted with its rudder bias
#: 0, or its compass heading wrapped: 38 and 2300 noise levels, exit 0, no word)
FAR_OFF = 5.0


def _comparison(run: RunPrediction, res: Any, model: Any, noise: bool, level: float
                ) -> tuple[list[str], list[str]]:
    """Lines comparing a run's measured outputs with the prediction, and the
    outputs :data:`FAR_OFF` times the fit's noise level off (``NAME (N
    times)``)."""
    from ..noise import output_scales

    if run.measured is None:
        return [], []
    far = []
    sigma = np.asarray(res.noise_sigma, float) if res.noise_sigma is not None else None
    scales = output_scales(res.y_names, model.y_names)
    lines = []
    for k, name in enumerate(model.y_names):
        seen = np.isfinite(run.measured[:, k])
        if not seen.any():
            continue
        data, pred = run.measured[seen, k], run.y[seen, k]
        scale = scales[k]
        on_log = scale != "lin"
        if on_log:
            log = np.log if scale == "log" else np.log10
            with np.errstate(divide="ignore", invalid="ignore"):
                data, pred = log(data), log(pred)
        rms = float(np.sqrt(np.nanmean((data - pred) ** 2)))
        text = (f"  {run.name}: {name}: {int(seen.sum())} measured, rms error {rms:.3g}"
                + (f" on the {scale} scale" if on_log else ""))
        if sigma is not None and sigma.size == model.ny and math.isfinite(sigma[k]):
            text += f" (the fit's noise level {sigma[k]:.3g})"
            if sigma[k] > 0 and rms > FAR_OFF * sigma[k]:
                far.append(f"{name} ({rms / sigma[k]:.3g} times)")
        if noise and run.lower is not None:
            inside = np.mean((run.measured[seen, k] >= run.lower[seen, k])
                             & (run.measured[seen, k] <= run.upper[seen, k]))
            text += f"; {inside:.1%} inside the {level:.0%} band"
        lines.append(text)
    return lines, far


def cmd_predict(args: argparse.Namespace) -> int:
    """``picard-casadi predict``: see the module's docstring."""
    from ..io.csv_experiments import apply_conditions
    from ..io.plotting import plot_prediction
    from ..noise import output_scales

    model, extras = load_model_file(args.model)
    default = Path("results") / safe_name(f"{model.name}-prediction")
    try:
        out = check_output_folder(Path(args.out) if args.out else default, PREDICTION_FILES,
                                  overwrite=args.overwrite)
    except ValueError as err:
        raise CliError(str(err)) from None
    res = _load_result(args.result, model)
    experiments = clock_started(
        read_data_files(args.data, model, input_holds(args.input_hold, model), measured=False,
                        ignore=args.ignore_columns),
        args.t0)
    if args.conditions:
        try:
            experiments = apply_conditions(args.conditions, model, experiments)
        except ValueError as err:
            raise CliError(f"--conditions {err}") from None
    # known initial states, or (--estimate-x0) the guesses of estimated ones
    experiments, lines = initial_states(model, experiments, args, extras,
                                        not args.estimate_x0, command="predict")
    own = _estimated_parameters(res, model, args.estimate)
    measured = [e for e in experiments if e.y is not None]
    wrapped = wrapped_angle_note(measured, model.y_names) if measured else ""
    if wrapped:
        print(f"picard-casadi predict: note: {wrapped}", file=sys.stderr)
    for exp in experiments:
        _check_parameters(res, model, exp.replaced(
            parameters={**own, **dict(exp.parameters or {})}))
    sigma = np.asarray(res.noise_sigma if res.noise_sigma is not None else [], float)
    if args.noise and not (sigma.size == model.ny and np.all(np.isfinite(sigma))):
        raise CliError("--noise: the fit in RESULT has no noise level for each output "
                       f"({list(model.y_names)}) to add; leave --noise out for the band of "
                       "the model's outputs")
    if args.estimate_x0 or own:
        if own:
            print("initial states (known):")
            for line in lines:
                print(line)
        experiments, lines = _estimated_starts(res, model, experiments, own, args.estimate_x0)
    estimated = " and ".join((["initial states"] if args.estimate_x0 else []) + list(own))
    print(f"{estimated} (estimated from each run's measurements, the others held at the "
          "fit's; the band takes them as known):" if estimated else "initial states (known):")
    for line in lines:
        print(line)
    from ..analysis.fit_check import is_fit_note

    flagged = ("the fit did not converge" if not res.success else
               "the fit is flagged" if res.fit_flagged else "")
    if flagged:  # why: the failure's message, or the first of the fit's flags
        why = res.message if not res.success else next(
            w for w in res.warnings if is_fit_note(w))
        print(f"picard-casadi predict: warning: {flagged}: {in_cli_terms(why)}",
              file=sys.stderr)
    runs, whys = [], []
    for exp in experiments:
        run, why = _run_prediction(res, model, exp, args.level, args.noise)
        runs.append(run)
        if why and why not in whys:
            whys.append(why)
    for why in whys:
        print(f"picard-casadi predict: note: no band: {in_cli_terms(why)}", file=sys.stderr)
    kind = "prediction" if args.noise else "confidence"
    print(f"predicted {len(runs)} run(s) from the fit in {args.result} "
          f"({args.level:.0%} {kind} band of the outputs)")
    for run in runs:
        lines, far = _comparison(run, res, model, args.noise, args.level)
        for line in lines:
            print(line)
        if far:
            print(f"picard-casadi predict: note: run {run.name!r} is off by more than "
                  f"{FAR_OFF:g} times the fit's noise level in {', '.join(far)}: it is not "
                  "like the fitted runs (a value of its own the fit estimated per "
                  "experiment: --estimate NAME; its initial states: --estimate-x0; its "
                  "inputs' or data's units; an angle recorded within one turn?)",
                  file=sys.stderr)
    compared = [any(r.measured is not None and np.isfinite(r.measured[:, k]).any()
                    for r in runs) for k in range(model.ny)]
    title = (f"{model.name}: predicted from the fit in {Path(args.result).name}"
             + (f" ({flagged})" if flagged else ""))
    write_together(out, [("prediction.csv", _table(runs, list(model.y_names), compared))],
                   [("prediction.png", lambda: plot_prediction(
                       runs, list(model.y_names), list(model.y_units), title,
                       f"{args.level:.0%} {kind} band", failed=bool(flagged),
                       t_unit=model.t_unit,
                       log_axes=[sc != "lin" for sc in output_scales(res.y_names,
                                                                     model.y_names)]))],
                   "the prediction")
    return 3 if flagged else 0
