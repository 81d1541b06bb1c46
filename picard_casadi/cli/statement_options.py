"""``--scale``, ``--per-experiment`` and ``--conditions`` into ``estimate``'s
arguments: the problem as a data set states it (docs/problem_statement.md)."""

from __future__ import annotations

from typing import Any

from ..experiment import Experiment
from ..io.csv_experiments import apply_conditions
from ..parameters import SCALES
from .errors import CliError

__all__ = ["statement_options"]


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
    if per_experiment:  # (repeated, or a comma list as --profile-parameters takes)
        per_experiment = [n.strip() for item in per_experiment for n in item.split(",")
                          if n.strip()]
        unknown = [n for n in per_experiment if n not in model.p_names]
        if unknown:
            raise CliError(f"--per-experiment: the model has no parameter(s) {unknown}; its "
                           f"parameters are {', '.join(model.p_names)}")
        options["per_experiment"] = list(dict.fromkeys(per_experiment))
    if conditions:
        try:
            experiments = apply_conditions(conditions, model, experiments)
        except ValueError as err:
            raise CliError(f"--conditions {err}") from None
    return experiments
