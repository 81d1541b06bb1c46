"""``--scale``, ``--per-experiment`` and ``--conditions`` into ``estimate``'s
arguments: the problem as a data set states it (docs/problem_statement.md)."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from ..experiment import Experiment
from ..parameters import SCALES
from .errors import CliError

__all__ = ["statement_options", "read_conditions"]


def statement_options(scales: list[str] | None, per_experiment: list[str] | None,
                      conditions: str | None, model: Any, experiments: list[Experiment],
                      options: dict[str, Any]) -> list[Experiment]:
    """Set ``parameter_scale`` and ``per_experiment`` in ``options`` (a flag wins
    over OPTIONS) and return the experiments with the condition table's
    parameter values."""
    if scales:
        current = options.get("parameter_scale", "lin")
        out = ([current] * model.np if isinstance(current, str) else list(current))
        word = current if isinstance(current, str) else None  # one scale for all, as a word
        for item in scales:
            name, _, scale = item.rpartition("=")
            scale = scale.strip()
            if scale not in SCALES:
                raise CliError(f"--scale: {item!r}: the scale must be one of "
                               f"{', '.join(SCALES)}")
            if not name:
                out, word = [scale] * model.np, scale
            elif name not in model.p_names:
                raise CliError(f"--scale: the model has no parameter {name!r}; its parameters "
                               f"are {', '.join(model.p_names)}")
            else:
                out[model.p_names.index(name)] = scale
                word = None
        # the word itself where no parameter is named: estimate keeps delays on
        # the linear scale under parameter_scale="log10" (a list would not)
        options["parameter_scale"] = word if word is not None else out
    if per_experiment:
        unknown = [n for n in per_experiment if n not in model.p_names]
        if unknown:
            raise CliError(f"--per-experiment: the model has no parameter(s) {unknown}; its "
                           f"parameters are {', '.join(model.p_names)}")
        options["per_experiment"] = list(dict.fromkeys(per_experiment))
    if conditions:
        experiments = read_conditions(conditions, model, experiments)
    return experiments


def read_conditions(path: str | Path, model: Any, experiments: list[Experiment]
                    ) -> list[Experiment]:
    """The experiments with the parameter values of a condition table: a CSV
    with a column ``experiment`` and one per model parameter it sets; a cell
    is a number (a constant of that experiment), a name (an estimated
    parameter of that name) or empty (the shared parameter)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as err:
        raise CliError(f"--conditions {path}: cannot read the file ({err.strerror})") from None
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows:
        raise CliError(f"--conditions {path}: the file is empty")
    header = [h.strip() for h in rows[0]]
    if "experiment" not in header:
        raise CliError(f"--conditions {path}, line 1: no column 'experiment'")
    unknown = [h for h in header if h != "experiment" and h not in model.p_names]
    if unknown:
        raise CliError(f"--conditions {path}, line 1: column(s) {unknown} are not parameters "
                       f"of the model ({', '.join(model.p_names)})")
    by_name = {e.name: e for e in experiments}
    settings: dict[str, dict[str, float | str]] = {}
    first_line: dict[str, int] = {}
    for line, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise CliError(f"--conditions {path}, line {line}: {len(row)} cells, the header "
                           f"has {len(header)}")
        cells = dict(zip(header, (c.strip() for c in row)))
        name = cells.pop("experiment")
        if name not in by_name:
            raise CliError(f"--conditions {path}, line {line}: no experiment {name!r} in the "
                           f"data (experiments: {', '.join(by_name)})")
        if name in first_line:  # the last row had won, silently
            raise CliError(f"--conditions {path}, line {line}: experiment {name!r} is given "
                           f"again (first on line {first_line[name]}); one row per experiment")
        first_line[name] = line
        values: dict[str, float | str] = {}
        for key, cell in cells.items():
            if not cell:
                continue
            try:
                number = float(cell)
            except ValueError:
                values[key] = cell
            else:
                if not math.isfinite(number):
                    raise CliError(f"--conditions {path}, line {line}: column {key!r} is "
                                   f"not finite")
                values[key] = number
        settings[name] = values
    return [e.replaced(parameters={**e.parameters, **settings.get(e.name, {})})
            for e in experiments]
