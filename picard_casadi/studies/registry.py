"""The registry of built-in problems: name -> model, synthetic data, settings.

Each problem is built by a factory in the ``picard_casadi.models`` package
(the repository's top-level ``models/`` folder) and returns a
:class:`Problem`.  ``prob.options`` holds the ``estimate`` keyword arguments of
its protocol (``T``, ``n``, ``lam``, ``nodes``, ``x0_bounds``, ...), so::

    prob = pc.problem("vdp", seed=0)
    res = pc.estimate(prob.model, prob.experiments, p0=prob.p0,
                      p_bounds=prob.p_bounds, method="picard-gn", **prob.options)

Users can add their own with :func:`register_problem`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..experiment import Experiment
from ..model import Model
from ..parameters import is_table, with_starts

__all__ = ["Problem", "problem", "problems", "register_problem", "describe_problems"]


@dataclass
class Problem:
    """A model with synthetic data and the settings of its protocol.

    Attributes
    ----------
    name : str
    model : Model
    experiments : list of Experiment
    p_true : ndarray or None
        The parameters the data were generated with (None for measured data:
        :meth:`from_data`).
    p0 : ndarray or list of Parameter
        Default starting point (a parameter table, with its bounds and scales,
        for a PEtab problem: :meth:`from_petab`).
    p_bounds : (ndarray, ndarray) or None
    options : dict
        Keyword arguments of :func:`~picard_casadi.estimate` for this protocol.
    x0_true : list of ndarray
        True initial states of the experiments (empty when unknown).
    description : str
    reference : dict
        Published numbers to compare with (e.g. the paper's estimate).
    """

    name: str
    model: Model
    experiments: list[Experiment]
    p_true: np.ndarray | None
    p0: np.ndarray | list[Any]
    p_bounds: tuple[np.ndarray, np.ndarray] | None
    options: dict[str, Any]
    x0_true: list[np.ndarray]
    description: str = ""
    reference: dict[str, Any] = field(default_factory=dict)

    def estimate(self, method: str | None = None, **overrides: Any) -> Any:
        """Run :func:`~picard_casadi.estimate` with this problem's settings.

        Keyword arguments override ``p0``, ``p_bounds`` and ``options``.
        Where the problem's ``p0`` is a parameter table (:meth:`from_petab`),
        a ``p0`` of numbers gives its entries new starts and keeps their
        bounds and scales: one value per entry in the table's order (a fit's
        ``res.p``, whose ``res.p_names`` are the table's), or a dict
        ``{name: value}`` for some of them
        (:func:`~picard_casadi.parameters.with_starts`).  The
        result's ``p_true`` is filled in when known.  With ``warm_start`` and
        no ``T`` of the caller's, the protocol's ``T`` is not applied: the run
        starts on the warm start's final mesh, as :func:`~picard_casadi.estimate`
        does without ``T`` (a refined mesh is kept, so IPOPT warm-started from
        ``picard-gn``'s answer solves the same discretisation).
        """
        from ..estimate import estimate

        kwargs: dict[str, Any] = dict(self.options)
        kwargs["p_bounds"] = self.p_bounds
        if overrides.get("warm_start") is not None and "T" not in overrides:
            kwargs.pop("T", None)
        if is_table(self.p0) and (overrides.get("p_bounds") is not None
                                  or overrides.get("parameter_scale") is not None):
            raise ValueError(
                "this problem's parameters are a table (its p0: pc.Parameter entries, from "
                "the PEtab parameter table), which holds their bounds and scales: change an "
                "entry there, dataclasses.replace(q, bounds=(lo, hi)), and pass the table as "
                "p0= (not p_bounds= or parameter_scale=)")
        kwargs.update(overrides)
        p0 = kwargs.pop("p0", self.p0)
        if "p0" in overrides and is_table(self.p0) and not is_table(p0):
            # numbers for the problem's own table: its bounds and scales stay
            p0 = with_starts(self.p0, p0)
        res = estimate(self.model, self.experiments, p0, method, **kwargs)
        if self.p_true is not None:
            res.p_true = np.asarray(self.p_true, float).copy()
            for start in res.starts:
                start["p_true"] = res.p_true
        return res

    @classmethod
    def from_petab(cls, yaml_path: Any, *, name: str | None = None, fixed: str = "parameters",
                   nominal_nllh: float | None = None) -> Problem:
        """A PEtab (v1) problem as a Problem (for :meth:`estimate` and
        :func:`~picard_casadi.compare`): the SBML model, an experiment per
        condition, the parameter table as ``p0`` (starts at ``nominalValue``,
        its bounds and scales) and the noise models as ``options["noise"]``.

        Parameters
        ----------
        yaml_path : str or Path
            The problem's YAML file.
        name : str, optional
            The problem's name in tables (default: the YAML file's stem).
        fixed, nominal_nllh
            As :func:`~picard_casadi.read_petab`; ``nominal_nllh`` is kept in
            ``reference["nominal_nllh"]``.

        Returns
        -------
        Problem
            ``prob.estimate()`` fits it with every default.

        Raises
        ------
        ImportError, NotImplementedError, ValueError
            As :func:`~picard_casadi.read_petab`.
        """
        from ..io.petab import read_petab

        read = read_petab(yaml_path, fixed=fixed, nominal_nllh=nominal_nllh)
        label = read.model.name if name is None else str(name)
        reference = {} if read.nominal_nllh is None else {"nominal_nllh": read.nominal_nllh}
        return cls(name=label, model=read.model, experiments=list(read.experiments),
                   p_true=None, p0=list(read.parameters), p_bounds=None,
                   options={"noise": dict(read.noise)}, x0_true=[],
                   description=f"{label}: the PEtab problem {read.source}",
                   reference=reference)

    @classmethod
    def from_data(cls, model: Model, experiments: Any, p0: Any, *, name: str | None = None,
                  p_bounds: tuple[Any, Any] | None = None,
                  options: dict[str, Any] | None = None, description: str = "") -> Problem:
        """A problem of your own model and measured data (the truth unknown).

        For :func:`~picard_casadi.compare`, which takes such a problem beside
        the names of registered ones: every method runs on these data from
        ``p0`` with these settings.

        Parameters
        ----------
        model : Model
        experiments : Experiment or sequence of Experiment
        p0 : array_like (np,) or list of Parameter
            The start, or a parameter table (names, starts, bounds, scales,
            as :func:`~picard_casadi.estimate` takes it; then ``p_bounds``
            is not given: the table holds the bounds).
        name : str, optional
            The problem's name in tables (default: the model's).
        p_bounds : (array_like, array_like), optional
        options : dict, optional
            ``estimate`` keyword arguments (``T``, ``weights``, ``estimate_x0``, ...).
        description : str
        """
        if not isinstance(model, Model):
            raise TypeError(f"model must be a picard_casadi.Model, got {type(model).__name__}")
        exps = [experiments] if isinstance(experiments, Experiment) else list(experiments)
        if is_table(p0):
            if p_bounds is not None:
                raise ValueError("Problem.from_data: `p_bounds` with a parameter table as `p0`: "
                                 "give the bounds in the table's entries (Parameter(bounds=...))")
            p0 = list(p0)
        else:
            try:
                p0 = np.asarray(p0, float).ravel()
            except (TypeError, ValueError):
                raise ValueError("Problem.from_data: `p0` must be numbers, one per model "
                                 "parameter, or a parameter table (a list of pc.Parameter), "
                                 f"got {p0!r}") from None
            if p0.size != model.np:
                raise ValueError(f"p0 has {p0.size} value(s), the model has {model.np} "
                                 "parameters")
        label = model.name if name is None else str(name)
        return cls(name=label, model=model, experiments=exps, p_true=None, p0=p0,
                   p_bounds=p_bounds, options=dict(options or {}), x0_true=[],
                   description=description or f"{label}: measured data")


@dataclass(frozen=True)
class _Entry:
    factory: Callable[..., Problem]
    summary: str


_REGISTRY: dict[str, _Entry] = {}
_BUILTIN: dict[str, tuple[str, str, str]] = {
    "vdp": ("vdp", "make_problem", "Van der Pol oscillator, 2 parameters, both states measured"),
    "lotka-volterra": ("lotka_volterra", "make_problem",
                       "Lotka-Volterra predator-prey, 4 parameters, both states measured"),
    "fitzhugh-nagumo": ("fitzhugh_nagumo", "make_problem",
                        "FitzHugh-Nagumo neuron, 3 parameters, V only at 80 random times"),
    "cmg": ("cmg", "make_problem",
            "spacecraft with 4 control-moment gyros, inertia J_B (3), 4 experiments (paper Sec. IV)"),
    "fa18-drag": ("fa18", "make_drag", "F/A-18 drag coefficients mu_D0, mu_Da (6), run 1"),
    "fa18-drag-stab": ("fa18", "make_drag_stab", "F/A-18 stabilator drag mu_Dstab (4), run 2"),
    "fa18-roll-beta": ("fa18", "make_roll_beta", "F/A-18 roll moment in beta mu_la (5), run 3"),
    "fa18-roll-rates": ("fa18", "make_roll_rates", "F/A-18 roll damping mu_lp, mu_lr (5), run 4"),
    "fa18-roll-ail": ("fa18", "make_roll_ail", "F/A-18 aileron roll mu_lail (4), run 5"),
    "fa18-roll-rud": ("fa18", "make_roll_rud", "F/A-18 rudder roll mu_lrud (4), run 6"),
}


def register_problem(name: str, factory: Callable[..., Problem], summary: str = "") -> None:
    """Add a problem to the registry (for example to include it in ``compare``).

    Parameters
    ----------
    name : str
    factory : callable
        ``factory(seed=..., noise_std=...) -> Problem``.
    summary : str
        One line for ``problems()`` listings.
    """
    if not callable(factory):
        raise TypeError("factory must be callable: factory(seed=..., noise_std=...) -> Problem")
    _REGISTRY[str(name)] = _Entry(factory, summary)


def _entry(name: str) -> _Entry:
    if name in _REGISTRY:
        return _REGISTRY[name]
    if name in _BUILTIN:
        module, func, summary = _BUILTIN[name]
        mod = importlib.import_module(f"picard_casadi.models.{module}")
        return _Entry(getattr(mod, func), summary)
    raise ValueError(
        f"unknown problem {name!r}; known problems: {', '.join(problems())}"
    )


def problems() -> list[str]:
    """Names of all registered problems."""
    return list(_BUILTIN) + [n for n in _REGISTRY if n not in _BUILTIN]


def describe_problems() -> list[tuple[str, str]]:
    """``(name, one-line summary)`` of every problem."""
    out = []
    for name in problems():
        if name in _REGISTRY:
            out.append((name, _REGISTRY[name].summary))
        else:
            out.append((name, _BUILTIN[name][2]))
    return out


def problem(name: str, seed: int = 0, noise_std: float | None = None, **kwargs: Any) -> Problem:
    """Build a registered problem with fresh synthetic data.

    Parameters
    ----------
    name : str
        One of :func:`problems`.
    seed : int
        Seed of the measurement noise.
    noise_std : float, optional
        Noise standard deviation (default: the problem's protocol).
    **kwargs
        Passed to the problem's factory.

    Returns
    -------
    Problem
    """
    entry = _entry(name)
    if noise_std is not None:
        kwargs["noise_std"] = noise_std
    prob = entry.factory(seed=seed, **kwargs)
    if not isinstance(prob, Problem):
        raise TypeError(f"the factory of problem {name!r} did not return a Problem")
    return prob
