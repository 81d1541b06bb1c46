"""``--bounds`` and ``--fix``: the start and the box of the parameters after
the flags, the model's and the experiments' own (those ``--conditions`` and
``--per-experiment`` make)."""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np

from ..errors import with_closest
from .errors import CliError
from .model_files import parameter_box

__all__ = ["flagged_parameters", "own_parameters"]


def _parameter_index(model: Any, name: str, flag: str) -> int:
    if name not in model.p_names:
        raise CliError(f"{flag}: unknown parameter {with_closest(name, model.p_names)}; "
                       "the model's parameters are "
                       f"{', '.join(model.p_names)}")
    return list(model.p_names).index(name)


def flagged_parameters(model: Any, p0: np.ndarray, p0_origin: str, box: Any, box_origin: str,
                args: argparse.Namespace) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """The start and the box after ``--bounds`` and ``--fix`` (flags win over the file).

    ``--bounds NAME=LO:HI`` replaces that parameter's bounds; ``--fix
    NAME=VALUE`` sets both bounds and the start to the value.
    """
    lb, ub, _ = parameter_box(model, box, box_origin)
    origin = [box_origin or "unbounded"] * model.np
    p0 = np.asarray(p0, float).copy()
    seen: dict[str, str] = {}
    for name, lo, hi in getattr(args, "bounds", None) or []:
        i = _parameter_index(model, name, "--bounds")
        if name in seen:
            raise CliError(f"--bounds: parameter {name!r} is given twice")
        seen[name] = "--bounds"
        lb[i], ub[i], origin[i] = lo, hi, "--bounds"
    for name, value in getattr(args, "fix", None) or []:
        i = _parameter_index(model, name, "--fix")
        if name in seen:
            raise CliError(f"--fix: parameter {name!r} is also given by {seen[name]}; "
                           "give it once")
        seen[name] = "--fix"
        lb[i] = ub[i] = p0[i] = value
        origin[i] = "--fix"
    for i in range(model.np):
        if not lb[i] <= p0[i] <= ub[i]:
            raise CliError(
                f"{p0_origin}: the start {model.p_names[i]} = {p0[i]:g} is outside its bounds "
                f"[{lb[i]:g}, {ub[i]:g}] ({origin[i]}); give a start inside them "
                f"(--p0) or wider bounds (--bounds {model.p_names[i]}=LO:HI)")
    return p0, (lb, ub)


def own_parameters(model: Any, experiments: list, p0: np.ndarray,
                    p_bounds: tuple[np.ndarray, np.ndarray], own: dict[str, list],
                    options: dict[str, Any], notes: list[str]) -> tuple[list, None]:
    """The parameter table of the flat start and box with entries for the
    experiments' own parameters that ``--bounds`` or ``--fix`` name (each
    otherwise as the model parameter it stands for; a start moved into its
    bounds is said in ``notes``)."""
    from dataclasses import replace as replaced

    from ..estimation.statement import flat_table
    from ..parameters import Parameter

    stands_for: dict[str, str] = {}  # own name -> the model parameter it is
    for e in experiments:
        for k, v in e.parameters.items():
            if isinstance(v, str) and v not in model.p_names:
                stands_for.setdefault(v, k)
    for n in options.get("per_experiment") or []:
        for e in experiments:
            stands_for.setdefault(f"{n}[{e.name}]", n)
    table = {q.name: q for q in flat_table(model, experiments, p0, p_bounds,
                                            options.pop("parameter_scale", None))}
    for e in experiments:  # a table names every parameter the conditions make
        for v in e.parameters.values():
            if isinstance(v, str) and v not in table:
                table[v] = replaced(table[stands_for[v]], name=v)
    seen: dict[str, str] = {}
    for flag, items in own.items():
        for item in items:
            name = item[0]
            if name not in stands_for:
                raise CliError(
                    f"--{flag}: unknown parameter {with_closest(name, [*model.p_names, *stands_for])}"
                    f"; the model's parameters are {', '.join(model.p_names)}"
                    + (f", the experiments' own {', '.join(stands_for)}" if stands_for else ""))
            if name in seen:
                raise CliError(f"--{flag}: parameter {name!r} is also given by --{seen[name]}; "
                               "give it once")
            seen[name] = flag
            base = table.get(name) or replaced(table[stands_for[name]], name=name)
            if flag == "fix":
                table[name] = Parameter(name, item[1], estimate=False)
                continue
            lo, hi = item[1], item[2]
            start = base.start
            if not lo <= start <= hi and math.isfinite(lo) and math.isfinite(hi):
                # no flag gives this parameter a start of its own: the middle
                # of its bounds on its scale, said in a note
                start = (math.sqrt(lo * hi) if base.scale != "lin" and lo > 0
                         else 0.5 * (lo + hi))
                notes.append(f"{name} starts at {start:g}, the middle of its --bounds "
                             f"({stands_for[name]}'s start {base.start:g} is outside them)")
            elif not lo <= start <= hi:
                raise CliError(
                    f"--bounds: the start {name} = {start:g} (that of {stands_for[name]}) "
                    f"is outside [{lo:g}, {hi:g}]; give finite bounds (it then starts in "
                    f"their middle), or the start of {stands_for[name]} inside them")
            try:
                table[name] = Parameter(name, start, (lo, hi), base.scale, estimate=lo < hi)
            except ValueError as err:
                raise CliError(f"--bounds: {err}") from None
    return list(table.values()), None
