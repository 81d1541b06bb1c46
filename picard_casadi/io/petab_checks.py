"""The PEtab tables checked as PEtab's linter checks them, each problem named
by its file, line and column (:class:`TableChecks`, a part of
:func:`~picard_casadi.io.petab.read_petab`'s builder)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..errors import with_closest
from ..parameters import PRIORS
from .petab_noise import _empty, _number

__all__ = ["TableChecks"]


class TableChecks:
    """The builder's checks of the tables before it maps them (its attributes:
    ``files``, ``meas``, ``par``, ``obs``, ``cond``, ``problem``, ``pv``)."""

    files: dict[str, str]
    meas: Any
    par: Any
    obs: Any
    cond: Any
    problem: Any
    pv: Any

    def _check(self) -> None:
        f = self.files
        meas = self.meas
        if len(meas) == 0:  # (its parameters were blamed on the parameter table)
            raise ValueError(f"{f['measurements']}: no measurements (the table holds its "
                             "header only); add a row per measurement")
        for col in ("time", "measurement"):
            for i, v in enumerate(meas[col]):
                try:
                    float(v)
                except (TypeError, ValueError):
                    raise ValueError(f"{f['measurements']}: row {i + 1} (line {i + 2}): column "
                                     f"{col!r} holds {v!r}, not a number") from None
        times = meas["time"].astype(float)
        for i, v in enumerate(times):
            if np.isnan(v):  # empty, or written NaN: a measurement needs its time
                raise ValueError(f"{f['measurements']}: row {i + 1} (line {i + 2}): column "
                                 "'time' is empty (or NaN); every measurement needs its time")
        if (times < 0).any():
            raise ValueError(f"{f['measurements']}: negative measurement times "
                             f"({times[times < 0].iloc[0]}); PEtab simulates from t = 0")
        for col in self.par.columns:
            low = col.lower()
            if (low == "priortype" or ("prior" in low and "objective" not in low
                                       and "initialization" not in low)) and not self.par[
                    col].map(_empty).all():
                raise NotImplementedError(f"{f['parameters']}: priors (column {col!r}) are "
                                          "not supported")
        if "estimate" not in self.par.columns:
            raise ValueError(f"{f['parameters']}: no column 'estimate' (1: estimated, 0: "
                             "fixed at its nominalValue)")
        for name, v in zip(self.par.index, self.par["estimate"]):
            if _number(v) not in (0.0, 1.0):
                raise ValueError(f"{f['parameters']}: parameter {name!r} has estimate {v!r}; "
                                 "the column 'estimate' holds 1 (estimated) or 0 (fixed at "
                                 "its nominalValue)")
        if "observableTransformation" in self.obs.columns:
            logged = {o for o, v in zip(self.obs.index, self.obs["observableTransformation"])
                      if str(v).strip() in ("log", "log10")}
            for i, (oid, v) in enumerate(zip(meas["observableId"], meas["measurement"])):
                if oid in logged and not float(v) > 0:  # (it was "`noise`: ... sample 8")
                    raise ValueError(
                        f"{f['measurements']}: line {i + 2}: measurement {v} of observable "
                        f"{oid!r}, whose observableTransformation in {f['observables']} is "
                        f"{self.obs.loc[oid, 'observableTransformation']}: its log needs a "
                        "positive measurement; leave the row out, or make the observable lin")
        self._check_noise_values()
        self._check_placeholder_counts()
        self._check_parameter_ids()
        if "objectivePriorType" in self.par.columns:
            for name, row in self.par.iterrows():
                kind = row["objectivePriorType"]
                if _empty(kind) or int(row["estimate"]) == 0:
                    continue
                if str(kind).strip() not in PRIORS:
                    raise NotImplementedError(
                        f"{f['parameters']}: parameter {name!r} has an objectivePriorType "
                        f"{str(kind).strip()!r}; the supported priors are {', '.join(PRIORS)}")
        for col in ("observableTransformation", "noiseDistribution"):
            if col in meas.columns:
                for oid, val in zip(meas["observableId"], meas[col]):
                    if not _empty(val) and str(val) != str(self.obs.loc[oid].get(col, "")):
                        raise NotImplementedError(
                            f"{f['measurements']}: a {col} {val!r} of its own for a measurement "
                            f"of {oid!r} is not supported (set it in the observable table)")

    def _named_where(self, name: str) -> str:
        """``name`` quoted with the closest of the model's ids and where the
        tables name it: ``'pAB' (did you mean 'pApB'?) in observables.tsv,
        observable 'pSTAT5A_rel' (observableFormula)``."""
        sbml = self.problem.model.sbml_model
        known = ([q.getId() for q in sbml.getListOfSpecies()]
                 + [q.getId() for q in sbml.getListOfParameters()]
                 + [q.getId() for q in sbml.getListOfCompartments()]
                 + [str(i) for i in self.par.index])
        word = re.compile(rf"(?<![\w.]){re.escape(name)}(?![\w.])")
        places = []
        for oid, row in self.obs.iterrows():
            for col in ("observableFormula", "noiseFormula"):
                if word.search(str(row.get(col, ""))):
                    places.append(f"{self.files['observables']}, observable {oid!r} ({col})")
        if self.cond is not None:
            for cid, row in self.cond.iterrows():
                for col, v in row.items():
                    if str(v).strip() == name:
                        places.append(f"{self.files['conditions']}, condition {cid!r}, "
                                      f"column {col!r}")
        for col in ("observableParameters", "noiseParameters"):
            if col in self.meas.columns:
                rows = [i for i, v in enumerate(self.meas[col]) if word.search(str(v))]
                if rows:
                    places.append(f"{self.files['measurements']}, column {col!r} (line "
                                  f"{rows[0] + 2}{' and others' if len(rows) > 1 else ''})")
        return with_closest(name, known) + (f" in {', '.join(places)}" if places else "")

    def _check_noise_values(self) -> None:
        """A noiseFormula that is a number, a measurement's own number where
        the formula is its noise parameter, and the nominalValue of a noise
        parameter (its start, or its value where fixed), are positive: a 0
        was told "`noise`: ... must be positive" or "Noise: ... use
        sigma=None", naming neither file nor row."""
        f = self.files
        names: set[str] = set()  # the parameters that are a sigma themselves
        plain: set[str] = set()  # observables whose sigma is their noiseParameters
        for oid, formula in zip(self.obs.index, self.obs.get("noiseFormula", [])):
            formula = str(formula).strip()
            num = _number(formula)
            if num is not None and not num > 0:
                raise ValueError(f"{f['observables']}: observable {oid!r} has noiseFormula "
                                 f"{formula!r}, its noise standard deviation; it must be "
                                 "positive")
            if formula == f"noiseParameter1_{oid}":
                plain.add(oid)
            elif re.fullmatch(r"[A-Za-z_]\w*", formula):
                names.add(formula)
        bad: list[int] = []  # measurements whose own number is their sigma, not positive
        if "noiseParameters" in self.meas.columns:
            for i, (oid, v) in enumerate(zip(self.meas["observableId"],
                                             self.meas["noiseParameters"])):
                if oid not in plain or _empty(v):
                    continue
                num = _number(v)
                if num is None:
                    names.add(str(v).strip())
                elif not 0 < num < np.inf:
                    bad.append(i)
        if bad:  # (it was "Experiment 'c0': `sigma` must be positive", no line)
            i = bad[0]
            raise ValueError(
                f"{f['measurements']}: line {i + 2} (observable "
                f"{self.meas['observableId'].iloc[i]!r}, condition "
                f"{str(self.meas['simulationConditionId'].iloc[i])!r}) has noiseParameters "
                f"{self.meas['noiseParameters'].iloc[i]!r}, the noise standard deviation "
                "there; it must be positive"
                + (f" ({len(bad) - 1} more such row(s))" if len(bad) > 1 else ""))
        for name in sorted(n for n in names if n in self.par.index):
            value = _number(self.par.loc[name, "nominalValue"])
            if value is not None and not value > 0:
                raise ValueError(f"{f['parameters']}: noise parameter {name!r} has nominalValue "
                                 f"{value:g}; a noise standard deviation must be positive (the "
                                 "start of an estimated one, the value of a fixed one): give a "
                                 "positive nominalValue")

    def _check_placeholder_counts(self) -> None:
        """Each measurement gives as many observableParameters as its
        observable's formula has placeholders, as PEtab's linter requires: a
        condition's rows without them were first reported as its parameter's
        row unused in the parameter table (deleting it, as advised, then gave
        a message naming no line)."""
        need = {}
        for oid, formula in zip(self.obs.index, self.obs["observableFormula"]):
            used = re.findall(rf"\bobservableParameter(\d+)_{re.escape(str(oid))}\b",
                              str(formula))
            need[oid] = max((int(k) for k in used), default=0)
        column = (self.meas["observableParameters"] if "observableParameters" in
                  self.meas.columns else [""] * len(self.meas))
        wrong: dict[tuple[str, str, int], list[int]] = {}
        for i, (oid, cond, v) in enumerate(zip(self.meas["observableId"],
                                               self.meas["simulationConditionId"], column)):
            n = 0 if _empty(v) else len(str(v).split(";"))
            if oid in need and n != need[oid]:  # (an unknown observable: named elsewhere)
                wrong.setdefault((oid, str(cond), n), []).append(i + 2)
        if wrong:
            (oid, cond, n), lines = next(iter(wrong.items()))
            more = f" and {len(lines) - 1} more" if len(lines) > 1 else ""
            others = (f" ({len(wrong) - 1} other group(s) of rows likewise)" if len(wrong) > 1
                      else "")
            raise ValueError(
                f"{self.files['measurements']}: line {lines[0]}{more} (observable {oid!r}, "
                f"condition {cond!r}) give(s) {n} observableParameters, where the formula of "
                f"{oid!r} in {self.files['observables']} has {need[oid]} placeholder(s) "
                f"(observableParameter1_{oid} ...); give {need[oid]}, separated by "
                f"';'{others}")

    def _check_parameter_ids(self) -> None:
        """Every row of the parameter table names something the problem has (a
        model parameter or compartment, a condition's or measurement's
        override, an observable's or noise formula's parameter), as PEtab's
        linter requires: a misspelt id otherwise left the model's own
        parameter at its SBML value and the row unused, silently."""
        pr = self.problem
        try:
            valid = self.pv.parameters.get_valid_parameters_for_parameter_table(
                pr.model, pr.condition_df, pr.observable_df, pr.measurement_df,
                getattr(pr, "mapping_df", None))
        except Exception:  # the tables' own errors are reported where they are read
            return
        try:
            required = self.pv.parameters.get_required_parameters_for_parameter_table(
                pr.model, pr.condition_df, pr.observable_df, pr.measurement_df,
                getattr(pr, "mapping_df", None))
        except Exception:
            required = set()
        missing = sorted(str(n) for n in required if n not in self.par.index)
        if missing:
            raise ValueError(
                f"{self.files['parameters']}: no row for "
                f"{'; '.join(self._named_where(n) for n in missing)}: where it is a misspelt "
                "name, correct it there; where it is a parameter, add a row for it "
                "(parameterId, parameterScale, lowerBound, upperBound, nominalValue, "
                "estimate)")
        extraneous = [str(n) for n in self.par.index if n not in valid]
        if extraneous:
            unused = sorted(str(n) for n in valid if n not in self.par.index)
            hints = [with_closest(n, unused) for n in extraneous]
            raise ValueError(
                f"{self.files['parameters']}: parameter id(s) {', '.join(hints)} are not "
                "parameters of the SBML model, nor named by the condition, measurement or "
                "observable tables; correct the id(s) (a misspelt model parameter would keep "
                "its SBML value) or delete the row(s)")

    # ---------------------------------------------------------------- per observable
