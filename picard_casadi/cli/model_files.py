"""Reading a user's model file (``--model FILE.py``): a Python file that builds a ``Model``."""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from ..estimation.arguments import as_bounds
from ..errors import closest
from .errors import CliError


def load_model_file(path: str | Path) -> tuple[Any, dict[str, Any]]:
    """Import a user's model file; it must define ``build_model()`` returning a Model.

    Optional names in the file: ``P0`` (starting parameters), ``P_BOUNDS``
    (``(lower, upper)``), ``X0`` (initial-state guess for every experiment),
    ``OPTIONS`` (a dict of ``estimate`` keyword arguments).
    """
    from ..model import Model

    path = Path(path)
    if not path.is_file():
        raise CliError(f"MODEL: no such file {str(path)!r}")
    spec = importlib.util.spec_from_file_location(f"picard_user_model_{abs(hash(path))}", path)
    if spec is None or spec.loader is None:
        raise CliError(f"MODEL: {str(path)!r} is not a Python file (name it *.py)")
    module = importlib.util.module_from_spec(spec)
    # the file's folder first on sys.path, as `python model.py` would have it: a
    # model file importing a module next to it failed ("No module named 'reactor'")
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
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
    if "P_BOUNDS" in extras:
        parameter_box(model, extras["P_BOUNDS"], where)
    if "OPTIONS" in extras and not isinstance(extras["OPTIONS"], dict):
        raise CliError(f"{where}: OPTIONS must be a dict of estimate() keyword arguments, "
                       f"got {type(extras['OPTIONS']).__name__}")
    if "OPTIONS" in extras:
        _check_option_names(extras["OPTIONS"], where)


def _check_option_names(options: dict, where: str) -> None:
    """CliError for an ``OPTIONS`` key that is neither a keyword of ``estimate``
    (other than what the command line and the file's hooks give: the model,
    the data, p0) nor an option of a method, with the nearest valid name."""
    import inspect
    from dataclasses import fields

    from ..estimate import estimate
    from ..methods import METHODS

    given_by_the_command = {"model", "experiments", "p0"}
    own = [n for n in inspect.signature(estimate).parameters if n not in given_by_the_command]
    of_methods = sorted({f.name for spec in METHODS.values() for f in fields(spec.options)})
    valid = own + [n for n in of_methods if n not in own]
    unknown = [str(k) for k in options if k not in valid]
    if not unknown:
        return
    hints = []
    for name in unknown:
        near = closest(name, valid + sorted(given_by_the_command))
        if near in given_by_the_command:
            hints.append(f"{name!r}: {near!r} comes from the command line or P0, "
                         "not OPTIONS")
        elif near:
            hints.append(f"{name!r}: did you mean {near!r}?")
    raise CliError(f"{where}: OPTIONS has unknown key(s) {unknown}"
                   + (f" ({'; '.join(hints)})" if hints else "")
                   + "; its keys are estimate()'s keyword arguments and the methods' "
                     "options (docs/api.md)")


def parameter_box(model: Any, value: Any, where: str) -> tuple[np.ndarray, np.ndarray, str]:
    """``(lower, upper, origin)`` of a box given as ``(lower, upper)`` or None."""
    if value is None:
        return np.full(model.np, -np.inf), np.full(model.np, np.inf), ""
    try:
        lb, ub = as_bounds(value, model.np, "P_BOUNDS")
    except (TypeError, ValueError) as err:
        raise CliError(f"{where}: {str(err).replace('`', '')}; P_BOUNDS is (lower, upper), "
                       f"each {model.np} numbers (None for unbounded)") from None
    return lb.astype(float), ub.astype(float), where
