"""An estimated parameter as real data sets state it: name, start, bounds, scale.

``estimate(model, experiments, p0=[pc.Parameter(...), ...])`` takes a
parameter table instead of flat arrays (PEtab's parameter table, pyPESTO's
problem)::

    pc.Parameter("k1", start=0.1, bounds=(1e-5, 1e3), scale="log10")
    pc.Parameter("bias_p[run 2]", start=0.0)        # a parameter of one experiment
    pc.Parameter("V", start=2.0, estimate=False)    # fixed at its start
    pc.Parameter("KD", 2.0, scale="log10",           # a normal prior on log10(KD)
                 prior=("parameterScaleNormal", 0.3, 0.2))

Values (start, bounds, results) are on the parameter's own (linear) scale;
the estimation works on ``scale``: ``"log"`` and ``"log10"`` estimate the
logarithm (the trust region, multistart sampling, standard errors and
profiles are then on that scale; results report both).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .errors import with_closest

__all__ = ["Parameter", "SCALES", "PRIORS", "on_scale", "from_scale", "scale_slopes",
           "with_starts",
           "values_by_name", "number_mapping", "is_table"]

#: the parameter scales (PEtab's parameterScale)
SCALES = ("lin", "log", "log10")
#: the priors a parameter can have (PEtab's objectivePriorType): a normal
#: density on the linear scale, or on the parameter's scale
PRIORS = ("normal", "parameterScaleNormal")


def on_scale(value: float, scale: str) -> float:
    """``value`` (linear) on ``scale``: itself, ``log`` or ``log10`` (``-inf`` for
    a value <= 0 on a log scale: no lower bound there)."""
    if scale == "lin":
        return float(value)
    if value <= 0:
        return -math.inf
    return math.log(value) if scale == "log" else math.log10(value)


def scale_slopes(values: Any, scales: Sequence[str]) -> np.ndarray:
    """``d value / d (value on its scale)`` of each linear ``value``: 1 on the
    linear scale, the value on ``log``, the value times ``ln 10`` on
    ``log10`` (a covariance on the estimation scale times their outer
    product is the linear scale's, by the delta method)."""
    return np.array([1.0 if sc == "lin" else float(v) * (1.0 if sc == "log" else math.log(10.0))
                     for v, sc in zip(np.asarray(values, float).ravel(), scales)])


def from_scale(value: float, scale: str) -> float:
    """The inverse of :func:`on_scale` (``inf`` beyond the largest float: an
    interval's end thousands of decades wide, without numpy's overflow warning)."""
    if scale == "lin":
        return float(value)
    value = float(value)  # Python's power: numpy's rounds 10**-5 to 9.999999999999999e-06
    try:
        return math.exp(value) if scale == "log" else 10.0 ** value
    except OverflowError:
        return math.inf


@dataclass(frozen=True)
class Parameter:
    """One estimated parameter.

    Parameters
    ----------
    name : str
        A parameter of the model (``Model.p_names``), or a name an experiment
        maps one to (``Experiment(parameters={...})``).
    start : float
        Starting value (linear scale).
    bounds : (float, float)
        Lower and upper bound (linear scale; ``None`` or ``inf`` for none).
        On a log scale the upper bound must be positive (or ``None``) and
        the lower bound positive, ``None`` or 0: the last two mean none (the
        log is unbounded below), stored as 0, so a parameter's own
        ``bounds`` make it again (``dataclasses.replace``).
    scale : {"lin", "log", "log10"}
        The scale of the estimation.
    estimate : bool
        ``False``: fixed at ``start``.
    prior : (str, float, float), optional
        A normal prior density, ``(kind, mean, standard deviation)``, PEtab's
        ``objectivePriorType``: ``"normal"`` on the parameter's linear value,
        ``"parameterScaleNormal"`` on its value on ``scale``.  The estimate
        then maximises the posterior: the prior's ``-log`` density,
        ``0.5 ((v - mean) / sd)^2 + 0.5 log(2 pi sd^2)``, is added to
        ``nllh`` (a measurement of ``v``, so the standard errors, profiles
        and certificate include it).  Ignored for a fixed parameter.

    Raises
    ------
    ValueError
        Naming the parameter: an unknown scale, a start that is not finite or
        outside the bounds, bounds out of order, a log scale with a negative
        lower bound, an upper bound that is not positive or a start that is
        not positive, a prior of another kind or
        with a standard deviation that is not positive.
    """

    name: str
    start: float
    bounds: tuple[float | None, float | None] = (None, None)
    scale: str = "lin"
    estimate: bool = True
    prior: tuple[str, float, float] | None = None

    def __post_init__(self) -> None:
        where = f"Parameter {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Parameter: `name` must be a non-empty string, got {self.name!r}")
        if self.scale not in SCALES:
            raise ValueError(f"{where}: scale {self.scale!r} is not one of {', '.join(SCALES)}")
        try:
            start = float(self.start)
            lo, hi = (-math.inf if self.bounds[0] is None else float(self.bounds[0]),
                      math.inf if self.bounds[1] is None else float(self.bounds[1]))
        except (TypeError, ValueError, IndexError):
            raise ValueError(f"{where}: `start` must be a number and `bounds` two numbers "
                             "(or None)") from None
        if not math.isfinite(start):
            raise ValueError(f"{where}: `start` must be finite, got {self.start!r}")
        if math.isnan(lo) or math.isnan(hi) or not lo <= hi:
            raise ValueError(f"{where}: `bounds` must be lower <= upper, got {self.bounds!r}")
        if self.scale != "lin":
            # (first: an upper bound of 0 is the scale's error, not the start's)
            if lo == -math.inf or lo == 0.0:
                lo = 0.0  # no lower bound: unbounded on the log scale
            if lo < 0 or hi <= 0:
                raise ValueError(f"{where}: on the {self.scale} scale the bounds must be "
                                 f"positive (or None), got [{lo:g}, {hi:g}]; give a positive "
                                 "bound, or None (or 0) for no lower bound")
        if not lo <= start <= hi:
            raise ValueError(f"{where}: `start` {start:g} is outside its bounds [{lo:g}, {hi:g}]")
        if self.scale != "lin" and not start > 0:
            raise ValueError(f"{where}: on the {self.scale} scale the start must be "
                             f"positive, got {start:g}")
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "bounds", (lo, hi))
        if self.prior is not None:
            try:
                kind, mean, sd = self.prior
                mean, sd = float(mean), float(sd)
            except (TypeError, ValueError):
                raise ValueError(f"{where}: `prior` must be (kind, mean, standard deviation), "
                                 f"got {self.prior!r}") from None
            if kind not in PRIORS:
                raise ValueError(f"{where}: prior {kind!r} is not supported; the priors are "
                                 f"{', '.join(PRIORS)} (normal densities: a measurement of "
                                 "the parameter)")
            if not math.isfinite(mean) or not (math.isfinite(sd) and sd > 0):
                raise ValueError(f"{where}: the prior's mean must be finite and its standard "
                                 f"deviation positive, got {self.prior!r}")
            object.__setattr__(self, "prior", (kind, mean, sd))

    def to_scale(self, value: float) -> float:
        """``value`` on the estimation scale (:func:`on_scale`)."""
        return on_scale(value, self.scale)

    def prior_nllh(self, value: float | None = None) -> float:
        """The prior's ``-log`` density at ``value`` (the start where None), on
        the scale its kind says; 0 without a prior (PEtab's log-posterior
        term)."""
        if self.prior is None:
            return 0.0
        kind, mean, sd = self.prior
        v = self.start if value is None else float(value)
        if kind == "parameterScaleNormal":
            v = self.to_scale(v)
        return 0.5 * ((v - mean) / sd) ** 2 + 0.5 * math.log(2 * math.pi * sd ** 2)


def is_table(value: Any) -> bool:
    """Whether ``value`` is a parameter table: a non-empty list or tuple of
    :class:`Parameter`."""
    return (isinstance(value, (list, tuple)) and bool(value)
            and all(isinstance(q, Parameter) for q in value))


def number_mapping(value: Any) -> bool:
    """Whether ``value`` is a mapping of names to numbers (a start given by name)."""
    return (isinstance(value, Mapping) and bool(value)
            and all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                    for v in value.values()))


def _unknown_names(given: Sequence[str], names: Sequence[str], where: str) -> str:
    """The message for names not in ``names``, with the closest spelling of each."""
    hints = [with_closest(name, names) for name in given]
    return (f"`p0` names {', '.join(hints)}, which {where} does not have; its parameters "
            f"are {', '.join(names)}")


def values_by_name(names: Sequence[str], values: Mapping[str, Any],
                   optional: Collection[str] = ()) -> np.ndarray:
    """The vector of ``values`` (a mapping name -> number) in the order of
    ``names``, every name given once but the ``optional`` ones (0 where left
    out: experiment constants that every experiment sets, whose entry is
    not used).

    Raises
    ------
    ValueError
        Naming the names ``names`` does not have (with the closest spelling)
        and the names ``values`` leaves out.
    """
    unknown = [k for k in values if k not in names]
    own = [k for k in unknown if "[" in k and k.split("[", 1)[0] in names]
    if own and len(own) == len(unknown):
        # a restated fit's entries (per_experiment's NAME[experiment]), given
        # back by name to restart: its p in its order is the way
        shared = ", ".join(sorted({k.split("[", 1)[0] for k in own}))
        raise ValueError(f"`p0` names {', '.join(own)}: a fit's own entries (per_experiment), "
                         "not the model's; restart from that fit with p0=res.p (its entries "
                         f"in res.p_names' order), or give {shared} one start by name")
    if unknown:
        raise ValueError(_unknown_names(unknown, names, "the model"))
    missing = [n for n in names if n not in values and n not in optional]
    if missing:
        raise ValueError(f"`p0` as a dict must give every parameter of the model a start; "
                         f"missing: {', '.join(missing)}")
    return np.array([float(values.get(n, 0.0)) for n in names])


def with_starts(table: Sequence[Parameter], values: Any) -> list[Parameter]:
    """``table`` with its starts (and fixed values) replaced by ``values``.

    Parameters
    ----------
    table : sequence of Parameter
    values : mapping or array_like
        Either a mapping ``{name: value}`` (any of the table's names), or one
        value per entry in the table's order, as a fit of the table reports
        them (``res.p`` in the order of ``res.p_names``); values on the
        linear scale.

    Returns
    -------
    list of Parameter
        The entries with the new starts; their bounds, scales, priors and
        whether they are estimated are the table's.

    Raises
    ------
    ValueError
        Naming the problem: an unknown name (with the closest spelling), a
        vector of another length than the table, a start outside an entry's
        bounds or not positive on a log scale.
    """
    entries = list(table)
    names = [q.name for q in entries]
    if isinstance(values, Mapping):
        unknown = [k for k in values if k not in names]
        if unknown:
            raise ValueError(_unknown_names(unknown, names, "the parameter table"))
        if not number_mapping(values):
            raise ValueError("`p0` as a dict must map parameter names to numbers "
                             "(or give a table of pc.Parameter)")
        new = {str(k): float(v) for k, v in values.items()}
    else:
        try:
            arr = np.asarray(values, float)
        except (TypeError, ValueError):
            raise ValueError("`p0` must be numbers, a dict {name: value} or a table of "
                             "pc.Parameter") from None
        arr = arr.ravel()
        if arr.size != len(entries):
            raise ValueError(
                f"`p0` has {arr.size} value(s), but the problem's parameter table has "
                f"{len(entries)} entries ({', '.join(names)}): give one value per entry in "
                "this order (a fit's res.p, in the order of res.p_names), a dict "
                "{name: value} for some of them, or a table of pc.Parameter")
        new = dict(zip(names, (float(v) for v in arr)))
    return [replace(q, start=new[q.name]) if q.name in new else q for q in entries]
