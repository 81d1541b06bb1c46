"""PEtab's noise columns as the package's noise models (``read_petab``).

A PEtab observable's ``noiseFormula`` and its measurements'
``noiseParameters`` become a :class:`~picard_casadi.noise.Noise` per output:
a noise parameter, each measurement's own number (``sigma="data"``), a
noise parameter per condition (``Experiment(noise_parameters=...)``), or a
formula of noise parameters and the observable.  :class:`NoiseTables` holds
this part of :class:`~picard_casadi.io.petab._Builder`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import casadi as ca
import numpy as np

from ..noise import Noise
from .sbml import _MathConverter, _parse_formula, _Sbml

__all__ = ["NoiseTables"]

#: PEtab's observableTransformation -> the package's noise distribution
_DISTRIBUTION = {"lin": "normal", "log": "log-normal", "log10": "log10-normal"}


def _empty(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (
        isinstance(v, str) and not v.strip())


def _number(v: Any) -> float | None:
    """``v`` as a number, or None where it is a name."""
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    try:
        return float(str(v).strip())
    except ValueError:
        return None


def one_per_condition(conditions: Sequence[Any], per: Sequence[Sequence[Any]]
                      ) -> dict[str, float | str] | None:
    """Each condition's noise parameter where every row (condition
    ``conditions[i]``, noiseParameters ``per[i]``) gives one and the rows of a
    condition agree (``Experiment(noise_parameters=...)`` states that);
    None otherwise."""
    if any(len(q) != 1 for q in per):
        return None
    by_condition: dict[str, set] = {}
    for c, q in zip(conditions, per):
        by_condition.setdefault(str(c), set()).add(q[0])
    if any(len(v) != 1 for v in by_condition.values()):
        return None
    return {c: next(iter(v)) for c, v in by_condition.items()}


class NoiseTables:
    """The noise part of the PEtab builder (its tables as attributes: ``obs``,
    ``par``, ``files``, ``sbml``, ``noise_overrides``; ``_column`` and
    ``_table_row`` from the builder)."""

    obs: Any
    par: Any
    files: dict[str, str]
    sbml: Any
    noise_overrides: dict[str, dict[str, float | str]]
    _column: Callable[..., list[tuple[float | str, ...]]]
    _table_row: Callable[[str], Any]

    def _noise(self, oid: str, out: str, rows: Any, lookup: Callable[[str], ca.SX], sb: _Sbml
               ) -> tuple[Noise, bool, dict[str, float]]:
        """The noise of output ``out`` (observable ``oid``, measurement rows
        ``rows``); whether its sigma is the data's; the nominal values of its
        noise parameters."""
        fo, fp = self.files["observables"], self.files["parameters"]
        row = self.obs.loc[oid]
        where = f"{fo}: observable {oid!r}"
        dist = row.get("noiseDistribution", "normal")
        dist = "normal" if _empty(dist) else str(dist).strip()
        if dist != "normal":
            raise ValueError(f"{where}: noiseDistribution {dist!r} is not supported (the "
                             "package's noise is normal on the lin, log or log10 scale)")
        trans = row.get("observableTransformation", "lin")
        trans = "lin" if _empty(trans) else str(trans).strip()
        if trans not in _DISTRIBUTION:
            raise ValueError(f"{where}: observableTransformation {trans!r} is not lin, log or "
                             "log10")
        distribution = _DISTRIBUTION[trans]
        formula = row.get("noiseFormula", "")
        if _empty(formula):
            raise ValueError(f"{where}: no noiseFormula")
        formula = str(formula).strip()
        placeholder = f"noiseParameter1_{oid}"
        per = self._column(rows, "noiseParameters")

        # the common case: sigma is the measurements' noise parameter
        if formula == placeholder:
            if per and all(len(q) == 1 and isinstance(q[0], float) for q in per):
                return Noise(distribution, sigma="data"), True, {}
            conditions = [str(c) for c in rows["simulationConditionId"]]
            return self._named_sigma(oid, out, distribution, per, conditions)
        num = _number(formula)
        if num is not None:
            return Noise(distribution, sigma=num), False, {}
        if formula in self.par.index:
            return self._named_sigma(oid, out, distribution, [(formula,)] * max(len(per), 1))

        # a formula: placeholders substituted, the observable as `g`
        given = per[0] if per else ()  # one set per output (_variants)
        g = ca.SX.sym(f"{oid}_model")
        obs_formula = str(self.obs.loc[oid, "observableFormula"]).strip()
        noise_syms: dict[str, ca.SX] = {}
        starts: dict[str, float] = {}
        bounds: list[tuple[float, float]] = []

        def noise_parameter(nm: str) -> ca.SX:
            r = self._table_row(nm)
            if r is None:
                raise ValueError(f"{where}: noise parameter {nm!r} is not in the parameter "
                                 f"table {fp}")
            if int(r["estimate"]) == 0:
                return ca.SX(float(r["nominalValue"]))
            if nm not in noise_syms:
                noise_syms[nm] = ca.SX.sym(nm)
                starts[nm] = float(r["nominalValue"])
                bounds.append((float(r["lowerBound"]), float(r["upperBound"])))
            return noise_syms[nm]

        values: dict[str, ca.SX] = {oid: g}
        for i, v in enumerate(given, start=1):
            values[f"noiseParameter{i}_{oid}"] = (ca.SX(v) if isinstance(v, float)
                                                  else noise_parameter(v))
        text = formula
        obs_ast = _parse_formula(self.sbml, obs_formula, where)
        if obs_ast.getType() == self.sbml.AST_NAME:  # the observable is one model quantity
            values[obs_ast.getName()] = g
        elif obs_formula in text:  # the observable's own expression, written out
            text = text.replace(obs_formula, oid)

        def nlookup(nm: str) -> ca.SX:
            if nm in values:
                return values[nm]
            if nm.startswith("noiseParameter"):
                raise ValueError(f"{self.files['measurements']}: the noiseFormula of {oid!r} "
                                 f"uses {nm!r}, but its measurements' noiseParameters do not "
                                 "give it")
            if nm in self.par.index:
                return noise_parameter(nm)
            raise NotImplementedError(
                f"{where}: the noiseFormula {formula!r} depends on {nm!r}, a model quantity "
                "other than the observable; only noise parameters and the observable itself "
                "are supported")

        conv = _MathConverter(self.sbml, nlookup, sb.convert.functions, sb.t, where)
        sigma = conv(_parse_formula(self.sbml, text, where), context="noiseFormula")
        depends_on_g = ca.depends_on(sigma, g)
        if depends_on_g and trans != "lin":
            raise NotImplementedError(f"{where}: a noiseFormula of the observable with "
                                      f"observableTransformation {trans!r} is not supported")
        if not depends_on_g and not noise_syms:
            return Noise(distribution, sigma=float(ca.evalf(sigma))), False, {}
        if not depends_on_g and sigma.is_symbolic() and len(noise_syms) == 1:
            nm = next(iter(noise_syms))
            lo, hi = bounds[0]
            return Noise(distribution, sigma=nm, bounds=(max(lo, 0.0), hi)), False, dict(starts)
        lo = max(min(b[0] for b in bounds), 0.0) if bounds else 0.0
        hi = max(b[1] for b in bounds) if bounds else math.inf
        return (Noise(distribution, sigma=sigma, output=g if depends_on_g else None,
                      parameters=starts, bounds=(lo, hi)), False, dict(starts))

    def _named_sigma(self, oid: str, out: str, distribution: str, per: Sequence[Sequence[Any]],
                     conditions: Sequence[str] | None = None
                     ) -> tuple[Noise, bool, dict[str, float]]:
        """``noiseFormula = noiseParameter1_<oid>`` mapped to one parameter, or to
        one per condition (``Experiment(noise_parameters=...)``) for output ``out``."""
        fm, fp = self.files["measurements"], self.files["parameters"]
        kinds = {tuple(q) for q in per}
        values = (one_per_condition(conditions, per) if len(kinds) > 1 and conditions is not None
                  else None)
        if values is not None:
            return self._sigma_per_condition(oid, out, distribution, values)
        if len(kinds) != 1 or len(next(iter(kinds))) != 1:  # _variants split the rest
            raise ValueError(
                f"{fm}: the measurements of observable {oid!r} give noiseParameters "
                f"{sorted(kinds, key=str)[:3]}, but its noiseFormula "
                f"noiseParameter1_{oid} takes one")
        nm = next(iter(kinds))[0]
        if isinstance(nm, float):
            return Noise(distribution, sigma=nm), False, {}
        row = self._table_row(nm)
        if row is None:
            raise ValueError(f"{fm}: noise parameter {nm!r} of observable {oid!r} is not in "
                             f"the parameter table {fp}")
        nominal = float(row["nominalValue"])
        if int(row["estimate"]) == 0:
            return Noise(distribution, sigma=nominal), False, {nm: nominal}
        lo, hi = max(float(row["lowerBound"]), 0.0), float(row["upperBound"])
        return Noise(distribution, sigma=nm, bounds=(lo, hi)), False, {nm: nominal}

    def _sigma_per_condition(self, oid: str, out: str, distribution: str,
                             values: dict[str, float | str]
                             ) -> tuple[Noise, bool, dict[str, float]]:
        """One noise parameter (or known value) per condition: the observable's
        placeholder (of output ``out``), set by each experiment (``noise_parameters``)."""
        fm, fp = self.files["measurements"], self.files["parameters"]
        placeholder = f"noiseParameter1_{out}"
        nominal: dict[str, float] = {}
        lows, highs = [], []
        for c, v in values.items():
            if isinstance(v, float):
                self.noise_overrides.setdefault(c, {})[placeholder] = v
                continue
            row = self._table_row(v)
            if row is None:
                raise ValueError(f"{fm}: noise parameter {v!r} of observable {oid!r} is not in "
                                 f"the parameter table {fp}")
            nominal[v] = float(row["nominalValue"])
            if int(row["estimate"]) == 0:
                self.noise_overrides.setdefault(c, {})[placeholder] = nominal[v]
                continue
            lows.append(max(float(row["lowerBound"]), 0.0))
            highs.append(float(row["upperBound"]))
            self.noise_overrides.setdefault(c, {})[placeholder] = v
        bounds = (min(lows), max(highs)) if lows else (0.0, math.inf)
        return Noise(distribution, sigma=placeholder, bounds=bounds), False, nominal
