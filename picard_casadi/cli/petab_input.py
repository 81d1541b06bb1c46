"""``fit --petab problem.yaml``: a PEtab problem as the command line's fit (docs/petab.md)."""

from __future__ import annotations

import argparse
from typing import Any

from .errors import CliError

__all__ = ["petab_input", "PETAB_EXCLUSIVE"]

#: flags that a PEtab problem's tables already say (the tables are the statement)
PETAB_EXCLUSIVE = ("x0", "x0_known_states", "bounds", "fix", "weights", "noise", "scale",
                   "per_experiment", "conditions", "input_hold")

#: where a PEtab problem states what each refused flag would set
_WHERE = {
    "--x0": "the SBML model's initial values and initial assignments, or the condition table",
    "--x0-known-states": "the SBML model's initial values and initial assignments",
    "--x0-known": "the SBML model's initial values and initial assignments, or the condition "
                  "table",
    "--bounds": "the parameter table's lowerBound and upperBound",
    "--fix": "the parameter table's estimate column (0: fixed at nominalValue)",
    "--weights": "the observable table's noiseFormula and the measurement table's "
                 "noiseParameters",
    "--noise": "the observable table's noiseFormula, noiseDistribution and "
               "observableTransformation",
    "--scale": "the parameter table's parameterScale",
    "--per-experiment": "the condition table (a column naming a parameter per condition)",
    "--conditions": "the condition table",
    "--input-hold": "the SBML model (an input is its expression of time, a piecewise for a "
                    "staircase)",
}


def petab_input(args: argparse.Namespace) -> tuple[Any, list, list, dict[str, Any]]:
    """The PEtab problem of ``--petab``: model, experiments, the parameter table
    and ``estimate``'s noise models (a CliError for a flag the tables already
    set, or a problem the package cannot state)."""
    from ..io.petab import read_petab

    if getattr(args, "model", None) or getattr(args, "data", None):
        raise CliError("--petab reads the model and the data from the PEtab problem: give "
                       "either MODEL.py DATA.csv or --petab problem.yaml")
    given = [f"--{f.replace('_', '-')}" for f in PETAB_EXCLUSIVE
             if getattr(args, f, None) not in (None, False, [])]
    if getattr(args, "x0_known", False):
        given.append("--x0-known")
    if given:
        raise CliError(f"{', '.join(given)}: a PEtab problem states these in its tables; "
                       "edit them there: " + "; ".join(f"{g} in {_WHERE[g]}" for g in given))
    try:
        prob = read_petab(args.petab)
    except ImportError as err:
        raise CliError(str(err)) from None
    except (ValueError, NotImplementedError, OSError) as err:
        raise CliError(f"--petab: {err}") from None
    table = list(prob.parameters)
    if getattr(args, "p0", None):
        table = _restarted(table, args.p0)
    return prob.model, prob.experiments, table, {"noise": prob.noise}


def _restarted(table: list, text: str) -> list:
    """The table with the starts of ``--p0``: one number per entry in the
    table's order (a fit's ``p`` in ``result.json``), or ``NAME=VALUE`` pairs
    for some entries; values on the linear scale, bounds and scales kept."""
    from ..parameters import with_starts

    items = [item.strip() for item in text.split(",") if item.strip()]
    try:
        if items and all("=" in item for item in items):
            values: Any = {}
            for item in items:
                name, value = item.split("=", 1)
                values[name.strip()] = float(value)
        else:
            values = [float(item) for item in items]
    except ValueError:
        raise CliError(f"--p0: {text!r}: give one number per entry of the parameter table "
                       "(comma separated, in its order) or NAME=VALUE pairs") from None
    if isinstance(values, list) and len(values) != len(table):
        raise CliError(f"--p0: {len(values)} value(s), but the parameter table has "
                       f"{len(table)} entries ({', '.join(q.name for q in table)}): give one "
                       "per entry in this order (a fit's p in result.json), or NAME=VALUE "
                       "pairs for some of them")
    try:
        return with_starts(table, values)
    except ValueError as err:
        raise CliError(f"--p0: {str(err).replace('`p0` ', '')}") from None
