"""Model outputs from an estimate: by simulation or from the fitted intervals."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import casadi as ca
import numpy as np

from ..errors import SimulationError
from ..experiment import Experiment, per_experiment_labels
from ..model import Model
from ..simulate import simulate
from .discretisation import Discretisation
from .forecast import ForecastInputs, prediction_inputs

__all__ = ["check_attached", "outputs_along", "simulated_outputs", "sample_outputs",
           "simulation_predictor", "collocation_states", "restated_predictor",
           "model_parameter_values", "parameter_source"]


def outputs_along(model: Model, t: np.ndarray, X: np.ndarray, p: np.ndarray,
                  exp: Experiment | ForecastInputs) -> np.ndarray:
    """Outputs ``g(t_i, x_i, p, u(t_i))`` for states ``X`` (N, nx) -> (N, ny)."""
    t = np.asarray(t, float)
    U = exp.inputs(t, model.nu)
    G = model.g.map(t.size)(t[None, :], X.T, ca.repmat(ca.DM(p), 1, t.size), U.T)
    return np.asarray(G).T


def simulated_outputs(model: Model, experiments: Sequence[Experiment],
                      x0s: Sequence[np.ndarray], p: np.ndarray) -> list[np.ndarray] | None:
    """Each experiment's outputs ``(N_e, ny)`` at its sample times, the model
    simulated by CVODES from ``x0s[e]`` with ``p``; None where a simulation
    fails."""
    out = []
    for exp, x0 in zip(experiments, x0s):
        try:
            with np.errstate(all="ignore"):
                X = simulate(model, x0, p, exp.t, exp, t0=exp.t0, locate=False)
                out.append(outputs_along(model, exp.t, X, p, exp))
        except (SimulationError, RuntimeError, ValueError):
            return None
    return out


def sample_outputs(disc: Discretisation, Xs: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``g`` at every sample slot of ``disc`` for states ``Xs`` ``(J, nx, M)``:
    ``(J, ny, M)``."""
    model = disc.model
    J, M = disc.n_intervals, disc.M
    g = model.g.map(J * M)
    G = g(disc.sample_times.reshape(1, J * M), Xs.transpose(1, 0, 2).reshape(model.nx, J * M),
          ca.repmat(ca.DM(p), 1, J * M),
          disc.sample_inputs.transpose(1, 0, 2).reshape(model.nu, J * M))
    return np.asarray(G).reshape(model.ny, J, M).transpose(1, 0, 2)


def collocation_states(disc: Discretisation, X: np.ndarray, U: np.ndarray,
                       e: int, t: np.ndarray) -> np.ndarray:
    """States of experiment ``e`` at times ``t`` from the interpolant of the node values."""
    t = np.asarray(t, float)
    j, tau = disc.interval_of_time(e, t)
    out = np.empty((t.size, disc.model.nx))
    for k in range(t.size):
        row = disc.quad.interpolation_rows(tau[k:k + 1])[0]
        out[k] = U[j[k]] @ row
    return out


def simulation_predictor(model: Model, experiments: list[Experiment],
                         disc: Discretisation | None = None,
                         X: np.ndarray | None = None,
                         U: np.ndarray | None = None) -> Callable[..., np.ndarray]:
    """A ``predict`` implementation for :class:`EstimationResult`.

    ``source="collocation"`` needs the discretisation and the final node
    values; results loaded from JSON only simulate.
    """

    def predict(res: Any, exp_index: int, t: Any, source: str, u: Any = None,
                given: int | None = None) -> np.ndarray:
        if not 0 <= exp_index < len(experiments):
            raise ValueError(
                f"exp_index must be in [0, {len(experiments) - 1}], got {exp_index}"
            )
        exp = experiments[exp_index]
        times, ahead = prediction_inputs(exp, model.nu, t, u, given)
        if ahead is not None:
            if source != "simulate":
                raise ValueError("`u` (inputs past the data) needs source='simulate'")
            Xs = simulate(model, res.x0[exp_index], res.p, times, ahead, t0=exp.t0,
                          breakpoints=ahead.breakpoints)
            return outputs_along(model, times, Xs, res.p, ahead)
        if source == "simulate":
            Xs = simulate(model, res.x0[exp_index], res.p, times, exp, t0=exp.t0)
        elif source == "collocation":
            if disc is None or U is None:
                raise ValueError("source='collocation' needs the run's intervals; "
                                 "this result has none (use source='simulate')")
            if np.any(times < exp.t0) or np.any(times > exp.t_end):
                raise ValueError(
                    f"source='collocation' covers [{exp.t0}, {exp.t_end}] only"
                )
            Xs = collocation_states(disc, X, U, exp_index, times)
        else:
            raise ValueError(
                f"source must be 'simulate' or 'collocation', got {source!r}"
            )
        return outputs_along(model, times, Xs, res.p, exp)

    return predict


def parameter_source(name: str, constants: Any, label: str | None,
                     entries: Any) -> float | str:
    """Where model parameter ``name`` takes its value in an experiment: its
    constant (a number, or the name of an entry), else the experiment's own
    entry ``name[label]`` (``per_experiment``'s) where ``entries`` has it,
    else the entry ``name``."""
    own = f"{name}[{label}]"
    return constants.get(name, own if label is not None and own in entries else name)


def restated_predictor(model: Model, experiments: list[Experiment], names: list[str],
                       where: str) -> Callable[..., np.ndarray]:
    """``predict`` by simulation for a loaded result of a restated problem whose
    parameters ``names`` (the result's ``p_names``, linear values) are the
    model's and the experiments' own: each experiment's model parameters are
    its constants, the entries its ``parameters`` map names to (or
    ``per_experiment``'s ``NAME[experiment]``), and the result's entries of
    the model's other names.

    Raises
    ------
    ValueError
        Naming the model parameters no entry of ``names`` gives (a restated
        problem of another kind: refit in this session).
    """
    at = {n: k for k, n in enumerate(names)}
    # per experiment, each model parameter: (the result's entry, None) or (None, constant)
    plans: list[list[tuple[int | None, float | None]]] = []
    missing: list[str] = []
    for e, label in zip(experiments, per_experiment_labels(experiments)):
        plan: list[tuple[int | None, float | None]] = []
        for q in model.p_names:
            value = parameter_source(q, e.parameters, label, at)
            if isinstance(value, str):
                if value not in at:
                    missing.append(value)
                plan.append((at.get(value), None))
            else:
                plan.append((None, float(value)))
        plans.append(plan)
    if missing and not model.has_delays:
        # a command line's --conditions fit was reloaded without its table
        raise ValueError(
            f"{where} holds a restated problem whose parameters {names} are not the given "
            f"model's own and its experiments' (no entry gives {sorted(set(missing))}): "
            "pass the experiments with the constants they were fitted with "
            "(Experiment(parameters={...}); a command line's --conditions file: "
            "pc.read_csv_experiments(DATA, model, conditions=FILE)), or refit in this "
            "session (pc.estimate)")
    if model.has_delays:
        raise ValueError(
            f"{where} holds a restated problem whose parameters {names} are not the given "
            f"model's own and its experiments' (the model has delays); from_json cannot "
            "attach your model to such a result: refit in this session (pc.estimate) to "
            "predict or profile")
    base = simulation_predictor(model, experiments)

    def predict(res: Any, exp_index: int, t: Any, source: str, u: Any = None,
                given: int | None = None) -> np.ndarray:
        if not 0 <= exp_index < len(experiments):
            raise ValueError(
                f"exp_index must be in [0, {len(experiments) - 1}], got {exp_index}")
        values = np.asarray(res.p, float)
        p = np.array([values[k] if k is not None else v for k, v in plans[exp_index]])
        return base(replace(res, p=p), exp_index, t, source, u, given)

    return predict


def model_parameter_values(names: list[str], values: np.ndarray, model: Model,
                           constants: dict[str, Any] | None, experiment: str | None,
                           labels: list[str]) -> np.ndarray:
    """The model's parameter vector from a result's entries ``names`` (linear
    ``values``), an experiment's ``constants`` (numbers, or names of entries)
    and a fitted experiment's own entries ``NAME[experiment]``
    (:meth:`~picard_casadi.EstimationResult.model_parameters`)."""
    at = dict(zip(names, np.asarray(values, float)))
    constants = dict(constants or {})
    unknown = [q for q in constants if q not in model.p_names]
    if unknown:
        raise ValueError(f"constants: {unknown} are not parameters of the model "
                         f"({', '.join(model.p_names)})")
    if experiment is not None and experiment not in labels:
        raise ValueError(f"experiment: {experiment!r} is not a fitted experiment "
                         f"({', '.join(labels) or 'none'})")
    out, missing = [], []
    for q in model.p_names:
        value = parameter_source(q, constants, experiment, at)
        if isinstance(value, str):
            if value not in at:
                missing.append(q if value == q else f"{q} (-> {value!r})")
                continue
            value = at[value]
        out.append(float(value))
    if missing:
        # experiment= gives a fitted run's own entries: named where it would
        # (a user given it already was pointed to it for a constant)
        own = sorted({n.split("[", 1)[0] for n in names if "[" in n} & set(missing))
        raise ValueError(
            f"no value for the model parameter(s) {', '.join(missing)}: give them in "
            "constants={...} (a number, or the name of an entry of res.p_names)"
            + (f", or experiment= one of {labels} for its own {', '.join(own)}"
               if own and experiment is None else ""))
    return np.array(out)


def check_attached(result: Any, model: Model, experiments: list[Experiment] | None,
                   where: str, parameters: bool = True) -> None:
    """ValueError where ``model`` or ``experiments`` (unless None) are not
    the ones ``result`` was fitted with (names and counts, as the result
    records them; the parameters' names unless ``parameters`` is False)."""
    names = (("parameters", result.p_names, list(model.p_names)),) if parameters else ()
    for what, mine, theirs in names + (("states", result.x_names, list(model.x_names)),
                                       ("outputs", result.y_names, list(model.y_names))):
        if mine and mine != theirs:
            if result._restated():
                raise ValueError(
                    f"{where} holds a restated problem (experiment constants or "
                    "parameters, log scales, initial states from parameters or a log-normal "
                    f"noise model: it was solved with the {what} {mine}, the model given has "
                    f"{theirs}); from_json cannot attach your model to such a result "
                    "without the experiments as fitted: pass them with their constants "
                    "(Experiment(parameters=...); a command line's --conditions file: "
                    "pc.read_csv_experiments(DATA, model, conditions=FILE)), or refit in "
                    "this session (pc.estimate) to predict or profile")
            raise ValueError(f"{where} was fitted with the {what} {mine}; the model given "
                             f"has {theirs}: pass the model it was fitted with")
    if experiments is None:
        return
    if result.experiment_names and len(experiments) != len(result.experiment_names):
        raise ValueError(f"{where} was fitted to {len(result.experiment_names)} "
                         f"experiment(s); {len(experiments)} were given")
    measured = sum(int(np.count_nonzero(np.isfinite(np.asarray(e.y, float))))
                   for e in experiments)
    if result.n_measurements and measured != result.n_measurements:
        # other data (a user passed the first 300 of 601 samples to a profile)
        raise ValueError(f"{where} was fitted to {result.n_measurements} measured values; "
                         f"the experiments given hold {measured}: pass the data it was "
                         "fitted to (or fit these data)")
