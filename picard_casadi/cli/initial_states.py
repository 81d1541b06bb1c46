"""``--x0``, ``--x0-known`` and ``--t0``: each experiment's initial state
from the flags, the model file and the data, and the time it holds at
(docs/cli.md)."""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np

from .errors import CliError
from .parser_types import assignment, finite

__all__ = ["clock_started", "initial_states", "known_states", "vector_arg"]


def vector_arg(text: str | None, n: int, field: str) -> np.ndarray | None:
    """A flag's comma-separated list of ``n`` finite numbers (None when not given)."""
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


def _scoped_x0(items: list[str] | None, model: Any, experiments: list
               ) -> tuple[list[str], dict[tuple[str, int], float]]:
    """``--x0 EXPERIMENT:NAME=VALUE`` (one experiment's state, over anything else)
    apart from the other ``--x0`` items."""
    rest, scoped = [], {}
    names = {e.name for e in experiments}
    for text in items or []:
        head, eq, value = text.partition("=")
        exp, colon, state = head.rpartition(":")
        if not (eq and colon):
            rest.append(text)
            continue
        if exp not in names:
            raise CliError(f"--x0 {text}: no experiment {exp!r} in the data (experiments: "
                           f"{', '.join(sorted(names))})")
        if state not in model.x_names:
            raise CliError(f"--x0 {text}: unknown state {state!r}; the model's states are "
                           f"{', '.join(model.x_names)}")
        try:
            scoped[(exp, list(model.x_names).index(state))] = finite(value, text)
        except argparse.ArgumentTypeError as err:
            raise CliError(f"--x0: {err}") from None
    return rest, scoped


def _x0_flags(items: list[str] | None, model: Any
              ) -> tuple[dict[int, float], np.ndarray | None]:
    """``--x0``: named states (``NAME=VALUE``, repeatable) or one list of all states."""
    if not items:
        return {}, None
    named = [t for t in items if "=" in t]
    if named and len(named) != len(items) or (not named and len(items) > 1):
        raise CliError("--x0: give NAME=VALUE (repeatable) or one list v1,v2,... of all "
                       f"{model.nx} states, not both and not two lists")
    if not named:
        return {}, vector_arg(items[0], model.nx, "--x0")
    values: dict[int, float] = {}
    for text in items:
        try:
            name, value = assignment(text, "NAME=VALUE")
            number = finite(value, text)
        except argparse.ArgumentTypeError as err:
            raise CliError(f"--x0: {err}") from None
        if name not in model.x_names:
            raise CliError(f"--x0: unknown state {name!r}; the model's states are "
                           f"{', '.join(model.x_names)}")
        i = list(model.x_names).index(name)
        if i in values:
            raise CliError(f"--x0: state {name!r} is given twice")
        values[i] = number
    return values, None


def clock_started(experiments: list, t0: float | None) -> list:
    """The experiments with their clocks started at ``--t0`` (unchanged where
    it is not given): the initial states are the states there."""
    if t0 is None:
        return experiments
    if not math.isfinite(t0):
        raise CliError(f"--t0: expected a finite time, got {t0}")
    late = [e for e in experiments if e.t[0] < t0]
    if late:
        raise CliError(f"--t0 {t0:g} is after the first sample of experiment {late[0].name!r} "
                       f"(time {late[0].t[0]:g}): the clock starts at or before every "
                       "experiment's first sample")
    return [e.replaced(t0=t0) for e in experiments]


def known_states(args: argparse.Namespace, model: Any) -> np.ndarray | bool:
    """``--x0-known`` (every state: True) or ``--x0-known-states NAME,...`` (one
    bool per state); False where neither is given."""
    names = getattr(args, "x0_known_states", None)
    if not names:
        return bool(getattr(args, "x0_known", False))
    if getattr(args, "x0_known", False):
        raise CliError("--x0-known-states: give it or --x0-known (every state), not both")
    listed = [n.strip() for item in names for n in item.split(",") if n.strip()]
    unknown = [n for n in listed if n not in model.x_names]
    if unknown:
        raise CliError(f"--x0-known-states: {', '.join(map(repr, unknown))} is not a state of "
                       f"the model (its states: {', '.join(model.x_names)})")
    return np.array([n in listed for n in model.x_names])


def initial_states(model: Any, experiments: list, args: argparse.Namespace,
                    extras: dict[str, Any], known: bool | np.ndarray,
                    command: str = "--x0-known") -> tuple[list, list[str]]:
    """The experiments with their ``x0`` set, and lines saying where known values came from.

    Guess (default): ``--x0`` list, else ``X0`` of the model file, else the
    data's first measurements of the states that are outputs (0 for the
    others); ``--x0 NAME=VALUE`` replaces that state's guess.

    Known (``--x0-known``): state by state, ``--x0 EXPERIMENT:NAME=VALUE``,
    else the experiment's first row where the state is an output measured
    there, else ``--x0`` (either form), else ``X0`` of the model file; a state
    with none of these is an error.  ``--x0 EXPERIMENT:NAME=VALUE`` sets one
    experiment's state (its guess, or its known value) over everything else.  (The
    known values are measured ones where the data have them; ``--x0`` fills
    in, and a value it gives that no experiment uses is noted.)  ``command``
    names what asked for known values in the messages (``predict`` always
    does).
    """
    items, scoped = _scoped_x0(getattr(args, "x0", None), model, experiments)
    named, vector = _x0_flags(items, model)
    file_x0 = np.asarray(extras["X0"], float) if "X0" in extras else None
    mask = np.full(model.nx, bool(known)) if np.ndim(known) == 0 else np.asarray(known, bool)
    base = vector if vector is not None else file_x0

    def guess(e: Any) -> np.ndarray:
        """Experiment ``e``'s start of estimated initial states."""
        x0 = (base if base is not None else e.x0_guess(model)).copy()
        for i, v in named.items():
            x0[i] = v
        for (name, i), v in scoped.items():
            if name == e.name:
                x0[i] = v
        return x0

    if not mask.any():
        if base is None and not named and not scoped:
            return experiments, []
        return [e.with_x0(guess(e)) for e in experiments], []
    measured = {i: k for k, i in enumerate(model.output_state_index) if i is not None}
    given, expressions = model.x0_given, model.x0_expression
    out, lines, used = [], [], set()
    for e in experiments:
        x0, parts = np.empty(model.nx), []
        start = guess(e) if not np.all(mask | given) else None  # (--x0-known-states)
        for i, name in enumerate(model.x_names):
            k = measured.get(i)
            first = e.y[0, k] if k is not None and e.y.shape[1] else math.nan
            if not mask[i] and not given[i]:  # estimated from its guess
                x0[i] = start[i]
                used.update([i] if i in named or vector is not None else [])
                parts.append(f"{name}={x0[i]:.6g} (a start: estimated)")
                continue
            if given[i]:
                # the model's x0 gives it, which the fit follows (a kineticist
                # was asked for D's value, and shown A, B, C "from the data")
                constant = expressions[i].is_constant()
                x0[i] = float(expressions[i]) if constant else 0.0
                parts.append(f"{name}={x0[i]:.6g} (model)" if constant
                             else f"{name} (the model's x0)")
                continue
            if (e.name, i) in scoped:  # this experiment's own, over its data
                x0[i], src = scoped[(e.name, i)], f"--x0 {e.name}:{name}"
            elif math.isfinite(first):
                x0[i], src = first, "data"
            elif i in named:
                x0[i], src = named[i], "--x0"
                used.add(i)
            elif vector is not None:
                x0[i], src = vector[i], "--x0"
                used.add(i)
            elif file_x0 is not None:
                x0[i], src = file_x0[i], "X0"
            else:
                why = (f"{name} is not an output of the model" if k is None else
                       f"its cell in the first row (time {e.t[0]:g}) is empty")
                raise CliError(
                    f"{command}: the initial value of state {name!r} in experiment "
                    f"{e.name!r} is not in the data ({why}); give it with --x0 {name}=VALUE, "
                    f"or all {model.nx} states with --x0 v1,v2,..., or X0 in the model file")
            parts.append(f"{name}={x0[i]:.6g} ({src})")
        if any(p.endswith("(data)") for p in parts):
            # measured in the first row: the states there (a known x0 with
            # the clock left at a later first sample is noted by the fit)
            if getattr(e, "_t0_given", True) and e.t0 != e.t[0]:
                raise CliError(
                    f"{command} takes initial states of experiment {e.name!r} from its "
                    f"first row (time {e.t[0]:g}), but --t0 {e.t0:g} starts its clock "
                    "earlier: give those states with --x0 EXPERIMENT:NAME=VALUE, or leave "
                    "--t0 out")
            e = e.replaced(t0=e.t[0])
        out.append(e.with_x0(x0))
        lines.append(f"  {e.name}: {', '.join(parts)}")
    unused = [model.x_names[i] for i in (named if named else range(model.nx) if vector is
                                          not None else []) if i not in used]
    by_model = [n for n in unused if given[model.x_names.index(n)]]
    by_data = [n for n in unused if n not in by_model]
    if by_data:
        lines.append(f"  (--x0 of {', '.join(by_data)} not used: the first row of every "
                     "experiment measures it)")
    if by_model:
        lines.append(f"  (--x0 of {', '.join(by_model)} not used: the model's x0 gives it)")
    return out, lines
