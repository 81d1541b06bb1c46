"""Read a PEtab (v1) problem into the package's model, experiments, parameters and noise.

::

    from picard_casadi.io.petab import read_petab
    prob = read_petab("Boehm_JProteomeRes2014.yaml")
    res = pc.estimate(prob.model, prob.experiments, prob.parameters, noise=prob.noise)

PEtab (petab.readthedocs.io) states a problem as an SBML model and four
tables; they map onto the package as follows.

- The SBML model becomes a :class:`~picard_casadi.model.Model` in CasADi:
  species are states (concentrations, or amounts where
  ``hasOnlySubstanceUnits``), ``d[S]/dt = sum_r stoichiometry * rate_r /
  compartment size`` for constant compartments, rate rules add states,
  assignment rules and function definitions are substituted, initial
  assignments and initial values become ``Model(x0=...)`` expressions of
  the parameters, ``time`` is the model's time.  Boundary-condition and
  constant species are states with zero derivative.  Constant SBML
  parameters and compartment sizes become model parameters ``p`` where the
  parameter table lists them or the condition table sets them, numbers
  otherwise (a species' initial concentration stays as the SBML model
  gives it when the condition table sets its compartment's size).
- The condition table: one :class:`~picard_casadi.experiment.Experiment`
  per simulation condition that has measurements (per pair of
  preequilibration and simulation condition, named ``pre:sim``, with a
  :class:`~picard_casadi.experiment.Preequilibration`: the preequilibration
  condition's values while it settles, the species the simulation
  condition sets restarting), its ``parameters`` the
  condition's values (a number: a constant of that condition; a name: that
  parameter).  A species set by the condition table gets its initial value
  from a parameter of its own (``<species>_0``) that each experiment sets.
- The measurement table: each condition's measurements in long form
  (:meth:`Experiment.from_measurements`), simulated from ``t = 0``; a
  condition measured at one time ``t > 0`` only gets an unmeasured row at
  ``t = 0``, one measured at ``t = 0`` only an unmeasured row at the
  problem's first positive measurement time (an experiment has two sample
  times at least).  Measurements at ``time = inf`` (the steady state) are
  an experiment of their own, ``<condition> (steady state)``: the
  condition settles from its initial states before ``t = 0``
  (``Preequilibration()``), where they are taken.
- The observable table: the model's outputs (``observableFormula`` with its
  ``observableParameter`` placeholders substituted: an observable whose
  measurements give different ones, per condition or per time point, is
  one output per set, ``obs[values]``) and one
  :class:`~picard_casadi.noise.Noise` per output
  (``observableTransformation`` lin/log/log10 -> normal/log-normal/
  log10-normal; ``noiseFormula``: a noise parameter, the measurements' own
  numbers, or a formula of noise parameters and the observable).
- The parameter table: one :class:`~picard_casadi.parameters.Parameter` per
  row the model or the conditions use (``nominalValue`` as start, bounds
  and scale as given, ``estimate = 0`` fixed).  Noise parameters are not
  among them: the package estimates a noise level in closed form (on the
  linear scale, within the row's bounds); their nominal values are in
  :attr:`PetabProblem.noise_nominal`.

What the package cannot state is refused, naming the construct and the
file: steady-state (``time = inf``) measurements after a preequilibration,
events, delays, algebraic rules, non-constant compartments, objective
priors other than normal ones (``normal``, ``parameterScaleNormal``:
``Parameter(prior=...)``), the Laplace distribution, mapping tables,
several models.
Noise parameters: numbers in every row are each measurement's own sigma;
a noise parameter per condition is each experiment's own
(``Experiment(noise_parameters=...)``); noise parameters that differ
otherwise make one output per set, as observable parameters do.

Needs ``python-libsbml`` and ``petab`` (``pip install picard_casadi[petab]``);
they are imported when :func:`read_petab` is called.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import casadi as ca
import numpy as np

from ..experiment import Experiment, Preequilibration
from ..model import Model
from ..noise import Noise
from ..parameters import Parameter
from ..errors import with_closest
from .petab_checks import TableChecks
from .petab_noise import NoiseTables, _DISTRIBUTION, _empty, _number, one_per_condition
from .sbml import _MathConverter, _Sbml, _parse_formula, _translate_sbml

__all__ = ["PetabProblem", "read_petab"]

_INSTALL = "pip install picard_casadi[petab]"



@dataclass
class PetabProblem:
    """A PEtab problem in the package's terms: the arguments of ``estimate``.

    ``pc.estimate(prob.model, prob.experiments, prob.parameters, noise=prob.noise)``

    Attributes
    ----------
    model : Model
        The SBML model with the observables as outputs (``y_names`` the
        observable ids, those with measurements; see ``observable_ids``).
    experiments : list of Experiment
        One per simulation condition with measurements (its id as name),
        ``parameters`` the condition table's values.
    parameters : list of Parameter
        The parameter table's rows that the model or the conditions use
        (noise parameters excluded).
    noise : dict of str to Noise
        One per output (observable id).
    nominal_nllh : float, optional
        PEtab's negative log-likelihood at the nominal parameters, where the
        caller knows it (``read_petab(..., nominal_nllh=...)``); ``None``
        otherwise.
    source : str
        The YAML file read.
    noise_nominal : dict of str to float
        The nominal values of the noise parameters (the parameter table's
        ``nominalValue``, linear scale), by name.
    observable_ids : dict of str to str
        Each output's PEtab observable id: the output's name itself, or, for
        an observable whose measurements give different
        ``observableParameters`` (a scaling per condition, an offset per time
        point), ``"obs[values]"`` for each set of them (values joined by
        commas; ``"obs[values;noise values]"``, or ``"obs[noise values]"``
        without observable parameters, where the noiseParameters differ
        within a condition too).
    """

    model: Model
    experiments: list[Experiment]
    parameters: list[Parameter]
    noise: dict[str, Noise]
    nominal_nllh: float | None = None
    source: str = ""
    noise_nominal: dict[str, float] = field(default_factory=dict)
    observable_ids: dict[str, str] = field(default_factory=dict)

    def nllh_at(self, values: Mapping[str, float] | Sequence[float] | None = None,
                noise: Mapping[str, float] | None = None) -> float:
        """PEtab's negative log-likelihood (log-posterior, with the table's
        priors) at given values, without a fit: each experiment simulated
        once by CVODES from its initial state (``method="single-shooting"``
        with every entry fixed), as pyPESTO's ``problem.objective(x)``.

        Parameters
        ----------
        values : mapping or array_like, optional
            The table's parameters on the linear scale: ``{name: value}`` for
            some of them (noise parameters too, as in ``noise``), or one
            value per entry in the table's order (as ``res.p``); the others
            at their nominal values (the table's starts).
        noise : mapping, optional
            Noise parameters' values by name (linear scale); the others at
            their nominal values, :attr:`noise_nominal`.  A fit estimates
            them; here they are held, so the value is PEtab's at these
            values.

        Returns
        -------
        float
            The negative log-likelihood, plus each estimated entry's normal
            prior's ``-log`` density where the table gives priors; ``inf``,
            with a ``UserWarning`` naming the output and the time, where an
            output on a log scale is simulated 0 or negative where it is
            measured (a fit floors such a value and says so in its warnings).

        Raises
        ------
        ValueError
            For an unknown name or a vector of another length (naming the
            table's entries or the noise parameters), and where the model
            cannot be simulated at these values (with CVODES' reason).
        """
        from .petab_likelihood import nllh_at

        return nllh_at(self, values, noise)


def _require() -> tuple[Any, Any]:
    """libsbml and petab.v1, or an ImportError saying how to install them."""
    try:
        import libsbml
        import petab.v1 as petab_v1
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(f"reading a PEtab problem needs python-libsbml and petab ({exc}); "
                          f"install them with: {_INSTALL}") from exc
    return libsbml, petab_v1


# --------------------------------------------------------------------------- tables

def _replacements(petab_v1: Any, v: Any) -> list[float | str]:
    """A ``;``-separated list of PEtab's measurement table (numbers or names)."""
    if _empty(v):
        return []
    return [x if isinstance(x, str) and _number(x) is None else float(x)
            for x in petab_v1.split_parameter_replacement_list(v)]


def _files(config: Mapping[str, Any], base: Path) -> dict[str, str]:
    """Each table's file name(s) for error messages."""
    prob = config["problems"][0]

    def names(key: str) -> str:
        return ", ".join(str(base / f) for f in prob.get(key, []) or [])
    return {"parameters": str(base / str(config.get("parameter_file"))),
            "conditions": names("condition_files"), "measurements": names("measurement_files"),
            "observables": names("observable_files"), "sbml": names("sbml_files")}


def _problem_yaml(path: Path, load_yaml: Any) -> Mapping[str, Any]:
    """The problem's YAML as a mapping, or a ValueError naming ``path`` and
    the fix: a folder (the YAML files in it named), a file that is not YAML,
    or YAML that is not a PEtab problem (no mapping with ``problems``)."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file; pass a PEtab problem's YAML file")
    if path.is_dir():
        inside = sorted(p.name for p in path.glob("*.y*ml"))
        raise ValueError(f"{path} is a folder; pass the problem's YAML file in it"
                         + (f" ({', '.join(inside)})" if inside else
                            " (it holds no .yaml file)"))
    import yaml  # PyYAML, the petab library's own dependency

    try:
        config = load_yaml(str(path))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{path} is not a readable YAML file ({first}); pass a PEtab "
                         "problem's YAML file (format_version, parameter_file, "
                         "problems)") from None
    if not isinstance(config, Mapping) or "problems" not in config:
        raise ValueError(f"{path} is not a PEtab problem's YAML file: it has no 'problems' "
                         "entry (a PEtab v1 problem names its parameter_file and, under "
                         "problems, its sbml_files, condition_files, measurement_files and "
                         "observable_files)")
    return config


def read_petab(yaml_path: str | Path, *, fixed: str = "parameters",
               nominal_nllh: float | None = None) -> PetabProblem:
    """Read a PEtab (v1) problem.

    Parameters
    ----------
    yaml_path : str or Path
        The problem's YAML file (one problem, one SBML model).
    fixed : {"parameters", "numbers"}
        The parameter table's fixed rows (``estimate = 0``): ``"parameters"``
        (default) keeps them as model parameters with
        ``Parameter(estimate=False)`` (so they can be freed later);
        ``"numbers"`` writes their values into the model (those the
        condition table sets excepted), so that initial states that depend
        on fixed parameters only are known numbers rather than expressions
        (on Boehm_JProteomeRes2014 picard-gn converges this way and not the
        other, ``tests/test_petab_import.py``).
    nominal_nllh : float, optional
        PEtab's negative log-likelihood at the nominal parameters, where known
        (kept in the result for comparisons).

    Returns
    -------
    PetabProblem
        ``model``, ``experiments``, ``parameters`` and ``noise`` for
        ``pc.estimate(prob.model, prob.experiments, prob.parameters,
        noise=prob.noise)``.

    Raises
    ------
    ImportError
        Without python-libsbml or petab (``pip install picard_casadi[petab]``).
    NotImplementedError
        For a construct the package cannot state (steady-state measurements
        after a preequilibration, events, delays, algebraic rules, priors
        that are not normal, ...), naming it and the file.
    ValueError
        For inconsistent tables (a name no table defines, a Laplace
        distribution, ...), naming the file and the entry; for a path that
        is not a PEtab problem's YAML file (a folder, a file that is not
        YAML, YAML without ``problems``), naming the path and the fix.
    """
    if fixed not in ("parameters", "numbers"):
        raise ValueError(f"read_petab: `fixed` must be 'parameters' or 'numbers', got {fixed!r}")
    libsbml, petab_v1 = _require()
    from petab.v1.yaml import load_yaml

    path = Path(yaml_path)
    config = _problem_yaml(path, load_yaml)
    if len(config.get("problems", [])) != 1:
        raise NotImplementedError(f"{path}: a YAML file with {len(config.get('problems', []))} "
                                  "problems; exactly one is supported")
    entry = config["problems"][0]
    if len(entry.get("sbml_files", [])) != 1:
        raise NotImplementedError(f"{path}: exactly one SBML model is supported, got "
                                  f"{entry.get('sbml_files')}")
    if entry.get("mapping_files"):
        raise NotImplementedError(f"{path}: mapping tables (mapping_files) are not supported")
    files = _files(config, path.parent)
    tables = [config.get("parameter_file")] + [
        name for key in ("condition_files", "measurement_files", "observable_files")
        for name in entry.get(key, []) or []]
    for name in tables:  # (pandas said "No columns to parse from file", naming none)
        table = path.parent / str(name)
        if name and table.is_file() and not table.read_text(errors="replace").strip():
            raise ValueError(f"{table}: the file is empty; a PEtab table holds a header row "
                             "and a row per entry")
    with warnings.catch_warnings():
        # the petab library's own use of pandas (float_precision, inplace=)
        # says nothing to the user of a problem: not passed on
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"petab\.")
        problem = petab_v1.Problem.from_yaml(str(path))
    builder = _Builder(libsbml, petab_v1, problem, files, fixed)
    model, experiments, parameters, noise, noise_nominal = builder.build(name=path.stem)
    return PetabProblem(model=model, experiments=experiments, parameters=parameters, noise=noise,
                        nominal_nllh=nominal_nllh, source=str(path), noise_nominal=noise_nominal,
                        observable_ids=dict(builder.observable_ids))


class _Builder(NoiseTables, TableChecks):
    """The tables of one PEtab problem, mapped onto the package (``read_petab``)."""

    def __init__(self, libsbml: Any, petab_v1: Any, problem: Any, files: dict[str, str],
                 fixed: str) -> None:
        self.fixed = fixed
        self.sbml = libsbml
        self.pv = petab_v1
        self.problem = problem
        self.files = files
        self.par = problem.parameter_df
        self.obs = problem.observable_df
        self.meas = problem.measurement_df.reset_index(drop=True)
        #: per condition: the noise parameters it sets (placeholder -> name or value)
        self.noise_overrides: dict[str, dict[str, float | str]] = {}
        #: each output's observable id (an observable whose observableParameters
        #: differ between its measurements is one output per set of them)
        self.observable_ids: dict[str, str] = {}
        #: the output each measurement row is of
        self.output_of_row: dict[int, str] = {}
        self.cond = problem.condition_df if problem.condition_df is not None else None

    # ---------------------------------------------------------------- checks
    def _column(self, rows: Any, column: str) -> list[tuple[float | str, ...]]:
        """Each row's replacements in ``column`` (empty where the column is absent)."""
        values = rows[column] if column in rows.columns else [None] * len(rows)
        return [tuple(_replacements(self.pv, v)) for v in values]

    def _variants(self, oid: str) -> list[tuple[str, tuple[float | str, ...], Any]]:
        """The outputs observable ``oid`` becomes: (name, observableParameters,
        measurement rows).  One (named ``oid``) where its measurements agree on
        their observableParameters; otherwise one per set of them (a scaling
        per condition, an offset per time point), named ``oid[values]``.  A
        set is split again by noiseParameters where these differ within a
        condition (beyond what one noise parameter per condition states)."""
        rows = self.meas[self.meas["observableId"] == oid]
        groups: dict[tuple, list[int]] = {}
        for i, key in zip(rows.index, self._column(rows, "observableParameters")):
            groups.setdefault((key, ()), []).append(i)
        split: dict[tuple, list[int]] = {}
        for (key, _), idx in groups.items():
            part = rows.loc[idx]
            if not self._noise_splits(oid, part):
                split[(key, ())] = idx
                continue
            for i, noise in zip(idx, self._column(part, "noiseParameters")):
                split.setdefault((key, noise), []).append(i)
        if len(split) == 1:
            (key, _), idx = next(iter(split.items()))
            return [(oid, key, rows.loc[idx])]

        def label(values: tuple) -> str:
            return ",".join(v if isinstance(v, str) else f"{v:g}" for v in values)

        names = [f"{oid}[{';'.join(label(v) for v in (k, n) if v)}]" for k, n in split]
        if len(set(names)) < len(names):  # numbers equal to 6 digits
            names = [f"{oid}[{k}]" for k in range(1, len(split) + 1)]
        return [(nm, key, rows.loc[idx]) for nm, ((key, _), idx) in zip(names, split.items())]

    def _noise_splits(self, oid: str, rows: Any) -> bool:
        """Whether the noiseParameters of ``rows`` (of one output) differ in a
        way one noise model per output cannot state."""
        formula = self.obs.loc[oid].get("noiseFormula", "")
        formula = "" if _empty(formula) else str(formula).strip()
        per = self._column(rows, "noiseParameters")
        kinds = set(per)
        if len(kinds) <= 1:
            return False
        if formula != f"noiseParameter1_{oid}":
            return True  # a formula's parameters: one set per output
        if all(len(q) == 1 and isinstance(q[0], float) for q in per):
            return False  # each measurement's own sigma
        # one noise parameter per condition: each experiment's own
        return one_per_condition(rows["simulationConditionId"], per) is None

    def _table_row(self, name: str) -> Any:
        return self.par.loc[name] if name in self.par.index else None

    # ---------------------------------------------------------------- build
    def build(self, name: str) -> tuple[Model, list[Experiment], list[Parameter],
                                        dict[str, Noise], dict[str, float]]:
        self._check()
        f = self.files
        sbml_model = self.problem.model.sbml_model
        doc = sbml_model.getSBMLDocument()
        # constants the tables may set or estimate: parameters and compartment sizes
        sbml_ids = {q.getId() for q in sbml_model.getListOfParameters()} | {
            c.getId() for c in sbml_model.getListOfCompartments()}
        species_ids = {s.getId() for s in sbml_model.getListOfSpecies()}
        table = set(self.par.index)

        # the condition table's targets; an experiment per (preequilibration,
        # simulation) pair of conditions
        pre_ids = (self.meas["preequilibrationConditionId"].map(
            lambda v: "" if _empty(v) else str(v).strip())
            if "preequilibrationConditionId" in self.meas.columns else [""] * len(self.meas))
        self.meas["_pre"] = list(pre_ids)
        # measurements at the steady state (time = inf): an experiment of their own
        self.meas["_steady"] = np.isinf(self.meas["time"].astype(float)).to_numpy()
        pairs = list(dict.fromkeys(zip(self.meas["_pre"],
                                       self.meas["simulationConditionId"].astype(str),
                                       self.meas["_steady"])))
        conditions = list(dict.fromkeys([c for pair in pairs for c in pair[:2] if c]))
        cond = self.cond
        targets = [c for c in (cond.columns if cond is not None else [])
                   if c not in ("conditionName",)]
        for c in conditions:
            if cond is None or c not in cond.index:
                raise ValueError(f"{f['measurements']}: condition {c!r} is not in "
                                 f"the condition table {f['conditions']}")
        # a parameter a rate rule drives is a state: a condition sets its
        # initial value, as a species'
        rate_ruled = {r.getVariable() for r in sbml_model.getListOfRules() if r.isRate()}
        species_set = {c for c in targets if c in species_ids or c in rate_ruled}
        param_targets = [c for c in targets if c in sbml_ids and c not in rate_ruled]
        for c in targets:
            if c not in species_ids and c not in sbml_ids:
                raise ValueError(f"{f['conditions']}: column "
                                 f"{with_closest(c, [*species_ids, *sbml_ids])} is not a "
                                 "parameter, species or compartment of the SBML model")

        # the SBML model
        as_parameters = (table & sbml_ids) | set(param_targets)
        sb = _translate_sbml(self.sbml, doc, f["sbml"], as_parameters, species_set)
        p_syms: dict[str, ca.SX] = {}   # model parameter name -> symbol
        for key, sym in sb.p.items():
            p_syms[sym.name()] = sym
        species_parameter = {sid: sb.p[sid].name() for sid in species_set}

        def symbol(nm: str) -> ca.SX:
            """A model parameter's symbol (a new one for a table parameter only the
            observables use)."""
            if nm not in p_syms:
                p_syms[nm] = ca.SX.sym(nm)
            return p_syms[nm]

        # observables, outputs and noise
        observed = list(dict.fromkeys(self.meas["observableId"]))
        unknown = [o for o in observed if o not in self.obs.index]
        if unknown:
            raise ValueError(f"{f['measurements']}: observable(s) {unknown} are not in the "
                             f"observable table {f['observables']}")
        observed = [o for o in self.obs.index if o in observed]
        ys: list[ca.SX] = []
        noises: dict[str, Noise] = {}
        data_sigma: set[str] = set()
        noise_nominal: dict[str, float] = {}
        noise_names: set[str] = set()
        outputs: list[str] = []
        for oid in observed:
            for out, placeholders, rows in self._variants(oid):
                y, lookup = self._observable(oid, placeholders, sb, symbol)
                ys.append(y)
                noise, is_data, nominal = self._noise(oid, out, rows, lookup, sb)
                noises[out] = noise
                if is_data:
                    data_sigma.add(out)
                noise_nominal.update(nominal)
                noise_names.update(nominal)
                outputs.append(out)
                self.observable_ids[out] = oid
                self.output_of_row.update({i: out for i in rows.index})

        # the model's parameters: those the model uses
        rhs, y_all = sb.rhs, ca.vertcat(*ys)
        x0 = ca.vertcat(*sb.x0)
        if self.fixed == "numbers":  # the fixed rows' values, the model's own numbers
            values = {}
            for n, sym in p_syms.items():
                row = self._table_row(n)
                if row is not None and int(row["estimate"]) == 0 and n not in param_targets \
                        and n not in species_parameter.values():
                    values[n] = float(row["nominalValue"])
            if values:
                old_syms = ca.vertcat(*[p_syms[n] for n in values])
                new_vals = ca.vertcat(*[ca.SX(v) for v in values.values()])
                rhs, y_all, x0 = (ca.substitute(e, old_syms, new_vals) for e in (rhs, y_all, x0))
                for n in values:
                    del p_syms[n]
        x0_list = [x0[i] if ca.symvar(x0[i]) else ca.SX(float(ca.evalf(x0[i])))
                   for i in range(x0.numel())]
        everything = ca.vertcat(rhs, y_all, x0)
        p_names = [n for n, sym in p_syms.items() if ca.depends_on(everything, sym)]
        if "objectivePriorType" in self.par.columns:
            with_prior = sorted(n for n in noise_names if n in self.par.index
                                and not _empty(self.par.loc[n, "objectivePriorType"])
                                and int(self.par.loc[n, "estimate"]) == 1)
            if with_prior:
                raise NotImplementedError(f"{f['parameters']}: noise parameters with a prior "
                                          f"({with_prior}) are not supported")
        clash = sorted(set(p_names) & noise_names)
        if clash:
            raise NotImplementedError(f"{f['parameters']}: {clash} are both noise parameters "
                                      "and parameters of the model or observables; a noise "
                                      "parameter is estimated from the residuals in closed form "
                                      "(docs/likelihood.md), which holds only where the model's "
                                      "outputs do not depend on it")
        model = Model(x=sb.x, p=ca.vertcat(*[p_syms[n] for n in p_names]), rhs=rhs, t=sb.t,
                      y=y_all, name=name, x_names=sb.x_names, p_names=p_names,
                      y_names=outputs, x0=x0_list, t_unit=sb.t_unit)

        # experiments: one per simulation condition
        set_by_conditions: dict[str, dict[str, float | str]] = {c: {} for c in conditions}
        #: per condition: the species it leaves empty (NaN: after a
        #: preequilibration, continued from its steady state)
        kept: dict[str, set[str]] = {c: set() for c in conditions}
        referenced: list[str] = []
        for c in conditions:
            for col in targets:
                pname = species_parameter.get(col, col)
                if pname not in p_names:
                    continue  # a target the model does not use
                v = cond.loc[c, col]
                key = col if col in species_set else pname
                if _empty(v):
                    if col in species_set:
                        kept[c].add(col)
                    default = sb.default[key]
                    if default.is_constant():
                        set_by_conditions[c][pname] = float(default)
                        continue
                    if not default.is_symbolic():
                        raise NotImplementedError(
                            f"{f['conditions']}: condition {c!r} leaves {col!r} empty, and its "
                            f"SBML value is the expression {default}; give a number or a "
                            "parameter there")
                    # its SBML value is a parameter (an initial assignment R = R0):
                    # as if the cell named it
                    v = default.name()
                num = _number(v)
                if num is not None:
                    set_by_conditions[c][pname] = num
                    continue
                v = str(v).strip()
                row = self._table_row(v)
                if row is None:
                    raise ValueError(f"{f['conditions']}: condition {c!r} sets {col!r} to "
                                     f"{v!r}, which is not in the parameter table "
                                     f"{f['parameters']}")
                if int(row["estimate"]) == 0:
                    set_by_conditions[c][pname] = float(row["nominalValue"])
                else:
                    set_by_conditions[c][pname] = v
                    referenced.append(v)
        experiments = []
        for pre, sim, steady in pairs:
            settle = None
            if steady:
                if pre:
                    raise NotImplementedError(
                        f"{f['measurements']}: steady-state measurements (time = inf) after "
                        f"a preequilibration (condition {pre!r}, then {sim!r}) are not "
                        "supported: two settlings in a row")
                # the condition's own steady state, from its initial states
                settle = Preequilibration()
            elif pre:
                # a species the simulation condition sets restarts there
                settle = Preequilibration(
                    parameters=set_by_conditions[pre],
                    reset=[c for c in targets if c in species_set and c not in kept[sim]
                           and c in sb.x_names])
            experiments.append(self._experiment(pre, sim, outputs, data_sigma,
                                                set_by_conditions[sim], settle, steady))

        # the parameter table's rows the model and the conditions use
        always_set = {n for n in p_names if all(n in set_by_conditions[c] for c in conditions)}
        parameters: list[Parameter] = []
        for n in list(dict.fromkeys([q for q in p_names if q not in always_set] + referenced)):
            row = self._table_row(n)
            if row is None:
                raise ValueError(f"{f['parameters']}: no row for {n!r}, a parameter of the "
                                 "model that no condition sets")
            parameters.append(self._parameter(n, row))
        return model, experiments, parameters, noises, noise_nominal

    def _parameter(self, name: str, row: Any) -> Parameter:
        where = f"{self.files['parameters']}: parameter {name!r}"
        start = float(row["nominalValue"])
        if int(row["estimate"]) == 0:
            return Parameter(name, start, scale="lin", estimate=False)
        scale = str(row.get("parameterScale", "lin")).strip() or "lin"
        if scale not in _DISTRIBUTION:
            raise ValueError(f"{where}: parameterScale {scale!r} is not lin, log or log10")
        lo, hi = float(row["lowerBound"]), float(row["upperBound"])
        if scale != "lin" and (lo <= 0 or hi <= 0):
            # (as petablint: a lower bound of 0 is -inf on the log scale, where a
            # user's start ran a rate to 1e-24595 and was counted as converged)
            raise ValueError(f"{where}: the bounds [{lo:g}, {hi:g}] of a {scale}-scaled "
                             "parameter must be positive (PEtab's bounds are on the linear "
                             "scale, and log(0) is -inf); give positive bounds (lowerBound "
                             "the smallest value it may take, such as 1e-6 times "
                             "nominalValue) or parameterScale lin")
        prior = None
        kind = row.get("objectivePriorType", "")
        if not _empty(kind):
            values = str(row.get("objectivePriorParameters", "")).split(";")
            try:
                prior = (str(kind).strip(), *(float(v) for v in values))
            except ValueError:
                raise ValueError(f"{where}: objectivePriorParameters {values} are not two "
                                 "numbers (mean;standard deviation)") from None
        try:
            return Parameter(name, start, bounds=(lo, hi), scale=scale, estimate=True,
                             prior=prior)
        except ValueError as exc:
            # Parameter's own message names the parameter: the file adds where
            text = (str(exc).removeprefix(f"Parameter {name!r}: ")
                    .replace("`start`", "nominalValue")  # (in the table's words)
                    .replace("`bounds`", "[lowerBound, upperBound]"))
            fix = ("; move nominalValue inside them, or widen them" if "is outside its bounds"
                   in text else "")
            raise ValueError(f"{where}: {text}{fix}") from None

    def _observable(self, oid: str, placeholders: Sequence[float | str], sb: _Sbml,
                    symbol: Callable[[str], ca.SX]) -> tuple[ca.SX, Callable[[str], ca.SX]]:
        """The output of observable ``oid`` with its observableParameters
        ``placeholders``, and the lookup its formulas use."""
        f = self.files["observables"]
        formula = self.obs.loc[oid, "observableFormula"]
        values: dict[str, ca.SX] = {}
        for i, v in enumerate(placeholders, start=1):
            if isinstance(v, float):
                values[f"observableParameter{i}_{oid}"] = ca.SX(v)
            else:
                values[f"observableParameter{i}_{oid}"] = self._model_parameter(v, sb, symbol)

        def lookup(nm: str) -> ca.SX:
            if nm in values:
                return values[nm]
            if nm.startswith("observableParameter") and nm.endswith(f"_{oid}"):
                raise ValueError(f"{self.files['measurements']}: observable {oid!r} uses {nm!r}, "
                                 "but its measurements' observableParameters do not give it")
            try:
                return sb.value(nm)
            except ValueError:
                pass
            if nm == "time":
                return sb.t
            return self._model_parameter(nm, sb, symbol)

        conv = _MathConverter(self.sbml, lookup, sb.convert.functions, sb.t,
                              f"{f}: observable {oid!r}")
        ast = _parse_formula(self.sbml, formula, f"{f}: observable {oid!r}")
        return conv(ast, context="observableFormula"), lookup

    def _model_parameter(self, nm: str, sb: _Sbml, symbol: Callable[[str], ca.SX]) -> ca.SX:
        """A name in an observable formula: an SBML id, or a parameter table row."""
        if nm in sb.p:
            return sb.p[nm]
        row = self._table_row(nm)
        if row is None:
            raise ValueError(f"{self.files['observables']}: {nm!r} is neither in the SBML model "
                             f"nor in the parameter table {self.files['parameters']}")
        return symbol(nm)

    def _experiment(self, pre: str, cid: str, observed: list[str], data_sigma: set[str],
                    parameters: dict[str, float | str],
                    settle: Preequilibration | None, steady: bool = False) -> Experiment:
        rows = self.meas[(self.meas["simulationConditionId"].astype(str) == cid)
                         & (self.meas["_pre"] == pre) & (self.meas["_steady"] == steady)]
        sigma = None
        if data_sigma:
            sigma = np.array([float(_replacements(self.pv, v)[0])
                              if self.output_of_row[i] in data_sigma else np.nan
                              for i, v in zip(rows.index, rows["noiseParameters"])])
        t = rows["time"].astype(float).to_numpy()
        outputs = [self.output_of_row[i] for i in rows.index]
        values = rows["measurement"].astype(float).to_numpy()
        if steady:  # measured at the steady state its settling reaches before t = 0
            t = np.zeros_like(t)
        elif np.unique(t).size < 2:
            # an Experiment needs two sample times: PEtab's start, t = 0, unmeasured;
            # measured at t = 0 only (the initial states), an unmeasured time after
            # it (the problem's first positive measurement time, a time it knows)
            later = self.meas["time"].astype(float)
            later = float(later[later > 0].min()) if (later > 0).any() else 1.0
            extra = 0.0 if t[0] > 0.0 else later
            t, outputs = np.r_[t, extra], [*outputs, outputs[0]]
            values = np.r_[values, np.nan]
            sigma = None if sigma is None else np.r_[sigma, np.nan]
        return Experiment.from_measurements(
            t, outputs, values, observed, sigma=sigma,
            name=(f"{pre}:{cid}" if pre else str(cid)) + (" (steady state)" if steady else ""),
            t0=0.0, parameters=parameters or None,
            noise_parameters=self.noise_overrides.get(str(cid)) or None,
            preequilibration=settle)
