"""``fit --petab problem.yaml``: a PEtab problem as the command line's fit (docs/petab.md)."""

from __future__ import annotations

import argparse
from typing import Any

from .errors import CliError

__all__ = ["petab_input", "PETAB_EXCLUSIVE"]

#: flags that a PEtab problem's tables already say (the tables are the statement)
PETAB_EXCLUSIVE = ("p0", "x0", "bounds", "fix", "weights", "noise", "scale", "per_experiment",
                   "conditions", "input_hold")


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
        raise CliError(f"{', '.join(given)}: a PEtab problem states these in its tables "
                       "(parameters, conditions, observables); edit them there")
    try:
        prob = read_petab(args.petab)
    except ImportError as err:
        raise CliError(str(err)) from None
    except (ValueError, NotImplementedError, OSError) as err:
        raise CliError(f"--petab: {err}") from None
    return prob.model, prob.experiments, prob.parameters, {"noise": prob.noise}
