"""The problem as a data set states it, restated as the methods solve it.

Real problems (PEtab's, the flight-test textbook's) say more than one model
and shared parameters:

- parameters estimated on a log scale (``pc.Parameter(scale="log10")``, or
  ``estimate(parameter_scale=...)``);
- experiment constants and experiment-specific parameters: an experiment
  sets a model parameter to a number or maps it to a parameter of its own
  (``Experiment(parameters={"bias": "bias_run2", "dose": 300})``,
  ``estimate(per_experiment=["bias"])``);
- initial states given by the parameters (``Model(x0=[A0, None])``).

:func:`state_problem` turns such a statement into one every method already
solves:

- the estimated vector ``phi`` is each parameter on its scale, and the
  model's ``p`` its expression (``10**phi``);
- a model parameter whose value differs by experiment becomes ``c + sum_q
  s_q theta_q`` with ``c`` and the indicators ``s_q`` inputs that are
  constant in each experiment (appended to the experiment's inputs), so a
  constant or a parameter of one experiment needs no new machinery;
- a state whose initial value is an expression ``h`` is replaced by its
  deviation ``xi = x - h`` (``xi(0) = 0``, known): ``xi' = f(xi + h)``,
  ``y = g(xi + h)``; ``h`` is constant in time (parameters and the
  experiment's constants).

:meth:`Statement.user_result` maps the answer back: the parameters on both
scales, standard errors by the delta method, interval ends transformed,
``x0 = xi(0) + h``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import casadi as ca
import numpy as np

from ..analysis.poorly_determined import note_poorly_determined
from ..experiment import Experiment, per_experiment_labels
from ..model import Model
from ..parameters import SCALES, Parameter, from_scale, on_scale, scale_slopes
from ..errors import with_closest
from ..runtime.user_warnings import warn_user
from .arguments import as_bounds, warn_constants_outside_bounds
from .preequilibration import (PhasedConstants, check_preequilibration, forgotten_states,
                               settled_after, settling_time)

__all__ = ["Statement", "state_problem", "in_table_terms"]


@dataclass
class Statement:
    """A problem restated for the methods (see the module docstring).

    Attributes
    ----------
    trivial : bool
        Nothing to restate: the user's model, experiments and vectors are used.
    model, experiments :
        The restated problem.
    table : list of Parameter
        The estimated parameters, in the order of ``phi``.
    phi0, phi_lb, phi_ub : ndarray
        Start and bounds on the estimation scale.
    estimate_x0 : ndarray of bool (nx,)
        Which initial states are estimated (the shifted ones are known).
    shifted : ndarray of bool (nx,)
        The states whose initial value is an expression of the parameters.
    reset : list of int
        The states restarted after a preequilibration (their second copies
        follow the model's states in the restated model).
    """

    trivial: bool
    model: Model | None = None
    experiments: list[Experiment] = field(default_factory=list)
    table: list[Parameter] = field(default_factory=list)
    phi0: np.ndarray = field(default_factory=lambda: np.zeros(0))
    phi_lb: np.ndarray = field(default_factory=lambda: np.zeros(0))
    phi_ub: np.ndarray = field(default_factory=lambda: np.zeros(0))
    estimate_x0: Any = True
    shifted: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    #: the states some experiment resets after preequilibrating (each a second
    #: state of the restated model, appended)
    reset: list[int] = field(default_factory=list)
    #: (phi, constant inputs of an experiment) -> the shifted states' x0
    _x0_of: ca.Function | None = None
    #: per experiment: the values of the appended constant inputs
    _constants: list[np.ndarray] = field(default_factory=list)
    #: the preequilibrated experiments: (index, the time their data start,
    #: how long they settle)
    _settling: list[tuple[int, float, float]] = field(default_factory=list)
    #: ``p0`` was a table of pc.Parameter: the bounds the notes name are its entries'
    bounds_in_table: bool = False
    #: the user's model's inputs (the restated model's first ones)
    user_nu: int = 0
    #: the preequilibrated experiments whose settling this package timed (no
    #: duration given)
    _timed: list[int] = field(default_factory=list)
    #: the priors' outputs: (name, standard deviation)
    priors: list[tuple[str, float]] = field(default_factory=list)
    #: the states held where the settling starts, as it forgets them
    held_forgotten: list[str] = field(default_factory=list)
    #: how long each settling takes at a (phi, x0) already simulated: the
    #: check after the solve and the result's note ask at the same estimate
    _settled_at: dict[tuple[int, bytes, bytes], float] = field(default_factory=dict)

    def noise_with_priors(self, noise: Any, model: Model,
                          experiments: Sequence[Experiment]) -> Any:
        """``estimate``'s ``noise`` for the restated model: the user's, one
        per output (the default where None), and each prior's known
        standard deviation."""
        if not self.priors:
            return noise
        from .noise_plan import as_noise_list, default_noise  # a sibling, imported where used
        from ..noise import Noise

        if isinstance(noise, str) and noise == "correlated":
            raise ValueError("`noise`='correlated' cannot be used with parameter priors")
        noises = (default_noise(experiments, model.ny) if noise is None
                  else as_noise_list(noise, model.y_names))
        return noises + tuple(Noise(sigma=sd) for _, sd in self.priors)

    @property
    def names(self) -> list[str]:
        """The estimated parameters' names (linear scale)."""
        return [q.name for q in self.table]

    @property
    def scales(self) -> list[str]:
        """Each estimated parameter's scale."""
        return [q.scale for q in self.table]

    def to_linear(self, phi: np.ndarray) -> np.ndarray:
        """The parameters on their own scale from ``phi``."""
        phi = np.asarray(phi, float)
        return np.array([from_scale(v, s) for v, s in zip(phi, self.scales)])

    def _x0_std(self, phi: np.ndarray, cov_phi: np.ndarray | None) -> list[np.ndarray]:
        """Standard errors of each experiment's initial states ``h(phi)`` from
        the covariance of ``phi`` (NaN without one)."""
        f = self._x0_of
        nx = f.size1_out(0)
        if cov_phi is None or cov_phi.shape != (phi.size, phi.size):
            return [np.full(nx, np.nan) for _ in self._constants]
        jac = f.factory("x0_jac", f.name_in(), [f"jac:{f.name_out(0)}:{f.name_in(0)}"])
        out = []
        unseen = ~np.isfinite(np.diag(cov_phi))  # (undetermined: inf, their row NaN)
        held = np.where(np.isfinite(cov_phi), cov_phi, 0.0)
        for constants in self._constants:
            J = np.asarray(jac(phi, constants), float).reshape(nx, phi.size)
            var = np.maximum(np.einsum("ij,jk,ik->i", J, held, J), 0.0)
            out.append(np.sqrt(np.where(np.any(J[:, unseen] != 0, axis=1), np.inf, var)))
        return out

    def unsettled(self, res: Any, timed_only: bool = False) -> list[tuple[int, float, float]]:
        """``(experiment, duration, time it takes)`` of each preequilibration
        that has not settled by its data's start at ``res`` (of the restated
        problem); ``timed_only``: those whose duration this package chose."""
        phi = np.asarray(res.p, float)
        out = []
        for e, t0, duration in self._settling:
            if timed_only and e not in self._timed:
                continue
            x0 = np.asarray(res.x0[e], float)
            key = (e, phi.tobytes(), x0.tobytes())
            if key not in self._settled_at:
                try:
                    self._settled_at[key] = settled_after(
                        self.model, self.experiments[e].replaced(x0=x0), phi, t0)
                except Exception:  # noqa: BLE001  (the fit's own failure says more)
                    self._settled_at[key] = np.inf
            settled = self._settled_at[key]
            if settled > duration:
                out.append((e, duration, settled))
        return out

    def user_result(self, res: Any) -> Any:
        """``res`` (of the restated problem) in the user's terms, in place."""
        phi = np.asarray(res.p, float).copy()
        theta = self.to_linear(phi)
        inner_x0 = [np.asarray(x, float).copy() for x in res.x0]
        if self.reset:  # the user's states (at the start of the settling)
            nx = self.shifted.size
            res.x0 = [np.asarray(x, float)[:nx] for x in res.x0]
            if res.x0_std is not None:
                res.x0_std = [np.asarray(s, float)[:nx] for s in res.x0_std]
        predictor = res._predictor
        if predictor is not None:
            def predict(r: Any, exp_index: int, t: Any, source: str,
                        u: Any = None) -> np.ndarray:
                # the restated model's parameters and initial states (its
                # inputs: the user's, then the constants, which u leaves out)
                args = (source,) if u is None else (source, u, self.user_nu)
                return predictor(replace(r, p=phi, x0=inner_x0), exp_index, t, *args)
            res._predictor = predict
        inner = res._sensitivities
        if inner is not None:  # (pc.prediction_band: the inner vectors, as predict)
            res._sensitivities = (lambda r, e, t, cols, u=None: inner(
                replace(r, p=phi, x0=inner_x0), e, t, cols, u, self.user_nu))
        # d theta / d phi: 1, theta (log), theta ln 10 (log10)
        slope = scale_slopes(theta, self.scales)
        res.p_scaled, res.p_scaled_names = phi, list(res.p_names)
        res.p_scales = self.scales
        res.p_scaled_std = None if res.p_std is None else np.asarray(res.p_std, float).copy()
        res.p = theta
        res.p_names = self.names
        for start in res.starts:  # multistart's starts, on the scales res.p is on
            for key in ("p0", "p"):
                start[f"{key}_scaled"] = [float(v) for v in start[key]]
                start[key] = [float(v) for v in self.to_linear(start[key])]
        cov_phi = None if res.p_cov is None else np.asarray(res.p_cov, float).copy()
        if res.p_std is not None:  # (an inf stays inf at 0: log10 at -90128 was a NaN)
            inf = np.isinf(res.p_std)
            res.p_std = np.where(inf, np.inf, np.abs(slope) * np.where(inf, 0.0, res.p_std))
        if res.p_cov is not None:  # (inf beyond the floats: K at 1.7e274 leaked an overflow)
            with np.errstate(over="ignore", invalid="ignore"):
                res.p_cov = np.asarray(res.p_cov, float) * np.outer(slope, slope)
        if res.p_ci is not None:
            ci = np.asarray(res.p_ci, float)
            res.p_ci = np.column_stack([self.to_linear(ci[:, 0]), self.to_linear(ci[:, 1])])
        if self.shifted.any() and self._x0_of is not None:
            x0_std = self._x0_std(phi, cov_phi) if res.x0_std is not None else None
            for e in range(len(res.x0)):
                h = np.asarray(self._x0_of(phi, self._constants[e]), float).ravel()
                x0 = np.asarray(res.x0[e], float).copy()
                x0[self.shifted] = x0[self.shifted] + h[self.shifted]
                res.x0[e] = x0
                if res.x0_std is not None and e < len(res.x0_std):
                    std = np.asarray(res.x0_std[e], float).copy()
                    # x0 = h(phi), the deviation known: the delta method (0 where h
                    # holds no estimated parameter, as a known x0's; NaN before)
                    std[self.shifted] = x0_std[e][self.shifted]
                    res.x0_std[e] = std
        # "the data determine log10(k) poorly ... spans zero" judged the log: there,
        # how many decades the standard error spans
        note_poorly_determined(res)
        for e, duration, settled in self.unsettled(replace(res, p=phi, x0=inner_x0)):
            note = (f"experiment {self.experiments[e].name!r}: at the estimate its "
                    f"preequilibration has not settled by its data's start ({duration:.3g} "
                    f"time units; it takes {settled:.3g}): give Preequilibration(duration=...) "
                    "longer")
            res.warnings.append(note)
            warn_user(note)
        if self.held_forgotten:
            res.warnings.append(f"the states {', '.join(self.held_forgotten)} are held where "
                                "the preequilibrations start (the experiments' x0): the "
                                "settling forgets them, so no data see them")
        if self.bounds_in_table:
            res.warnings = [in_table_terms(n) for n in res.warnings]
            res.message = in_table_terms(res.message)
        res.settings["parameter_scale"] = self.scales
        res.settings["p_names"] = self.names
        if self._settling:
            res.settings["preequilibrated"] = [self.experiments[e].name
                                               for e, _, _ in self._settling]
        if self.shifted.any():
            res.settings["x0_from_parameters"] = [
                n for n, s in zip(self.model.x_names, self.shifted) if s]
        res._statement = self
        return res


def _expression(sym: ca.SX, scale: str) -> ca.SX:
    return sym if scale == "lin" else ca.exp(sym) if scale == "log" else 10.0 ** sym


def _parameter_table(p0: Any) -> bool:
    """Whether ``p0`` is a table of :class:`~picard_casadi.Parameter` (a
    sequence or a mapping of them)."""
    items = (list(p0.values()) if isinstance(p0, Mapping)
             else list(p0) if isinstance(p0, (list, tuple)) else [])
    return bool(items) and all(isinstance(q, Parameter) for q in items)


#: the notes' advice on the bounds, spelt for a parameter table (``p0`` of
#: pc.Parameter, which refuses ``p_bounds``)
_TABLE_SPELLINGS = (
    ("fix parameters (equal lower and upper p_bounds)",
     "fix parameters (Parameter(estimate=False) in the table p0)"),
    ("(p_bounds)", "(its Parameter's bounds in the table p0)"),
    ("p_bounds", "the Parameter bounds in the table p0"),
)


def in_table_terms(text: str) -> str:
    """``text`` with its advice on ``p_bounds`` spelt as the parameter table's."""
    for old, new in _TABLE_SPELLINGS:
        text = text.replace(old, new)
    return text


def _table(model: Model, p0: Any, p_bounds: Any, parameter_scale: Any,
           constants: frozenset[str] = frozenset()) -> dict[str, Parameter] | None:
    """The parameter table of ``p0`` (Parameters) or of the flat vectors and
    ``parameter_scale``; None where the flat vectors need no table.
    ``constants``: parameters every experiment sets to a number, never
    estimated, so on the linear scale whatever ``parameter_scale`` says (a
    dose of 0 to 10 failed the log scale's positive bounds)."""
    if isinstance(p0, Mapping) or _parameter_table(p0):
        items = list(p0.values()) if isinstance(p0, Mapping) else list(p0)
        if not all(isinstance(q, Parameter) for q in items):
            raise ValueError("`p0` as a table must hold pc.Parameter entries (or, as a "
                             "dict, map each of the model's parameters to a number)")
        if p_bounds is not None or parameter_scale is not None:
            raise ValueError("`p0` is a parameter table (pc.Parameter): give the bounds and "
                             "scales there, not as `p_bounds` or `parameter_scale`")
        table: dict[str, Parameter] = {}
        for q in items:
            if q.name in table:
                raise ValueError(f"`p0`: parameter {q.name!r} is in the table twice")
            table[q.name] = q
        return table
    if parameter_scale is None:
        return None
    scales = ([parameter_scale] * model.np if isinstance(parameter_scale, str)
              else list(parameter_scale))
    if len(scales) != model.np or any(s not in SCALES for s in scales):
        raise ValueError(f"`parameter_scale` must be one of {', '.join(SCALES)}, or one per "
                         f"parameter ({model.np}), got {parameter_scale!r}")
    p = np.asarray(p0, float).ravel()
    if p.size != model.np:
        raise ValueError(f"`p0` must have {model.np} entries, got {p.size}")
    lb, ub = as_bounds(p_bounds, model.np, "p_bounds")
    # (a neuron's reversal potential EL = -54.4 under parameter_scale="log10"
    # was told "outside its bounds [0, inf]", bounds the user never gave)
    negative = [n for i, n in enumerate(model.p_names)
                if scales[i] != "lin" and n not in constants and p[i] <= 0]
    if negative:
        per = [("lin" if n in negative else s) for n, s in zip(model.p_names, scales)]
        raise ValueError(f"`parameter_scale`: {', '.join(negative)} start(s) at a value that is "
                         "not positive, which a log scale cannot take; give one scale per "
                         f"parameter, parameter_scale={per!r}")
    return {n: Parameter(n, float(p[i]), (float(lb[i]), float(ub[i])),
                         "lin" if n in constants else scales[i], estimate=bool(lb[i] < ub[i]))
            for i, n in enumerate(model.p_names)}


def flat_table(model: Model, experiments: Sequence[Experiment], p0: Any, p_bounds: Any,
               parameter_scale: Any) -> list[Parameter]:
    """The parameter table of flat ``p0``, ``p_bounds`` and ``parameter_scale``
    (a parameter whose bounds are equal fixed; one every experiment sets to a
    number on the linear scale), as :func:`state_problem` reads them."""
    constants = frozenset(n for n in model.p_names if experiments and all(
        isinstance(e.parameters.get(n), float) for e in experiments))
    table = _table(model, p0, p_bounds, "lin" if parameter_scale is None else parameter_scale,
                   constants)
    assert table is not None  # flat vectors with a scale always make one
    return list(table.values())


def state_problem(model: Model, experiments: Sequence[Experiment], p0: Any, p_bounds: Any,
                  parameter_scale: Any, per_experiment: Any, estimate_x0: Any,
                  settle_at: np.ndarray | None = None) -> Statement:
    """The problem as the methods solve it (module docstring); ``trivial`` where
    the user's statement is already that.  ``settle_at``: the restated
    parameters at which preequilibrations without a given duration are timed
    (default: the start).

    Raises
    ------
    ValueError
        Naming the parameter, experiment or state: an experiment setting a
        parameter the model does not have, a parameter table naming one that
        nothing uses, a log scale with bounds that are not positive, an
        ``x0`` expression with symbols the model does not have.
    """
    exps = list(experiments)
    for e in exps:
        # against the user's model, before constants join the inputs (a
        # callable of the wrong width was told "must return 3 value(s) (the
        # model's nu)" of a model with 2 inputs and a constant)
        e.check(model)
    generated: set[str] = set()  # the names per_experiment makes (their table entry optional)
    if per_experiment is not None:
        names = [per_experiment] if isinstance(per_experiment, str) else list(per_experiment)
        unknown = [n for n in names if n not in model.p_names]
        if unknown:
            raise ValueError(f"`per_experiment` names {unknown}, which are not parameters of "
                             f"the model ({', '.join(model.p_names)})")
        labels = per_experiment_labels(exps)
        generated = {f"{n}[{label}]" for n in names for label in labels}
        # where every experiment sets the parameter itself, per_experiment had
        # no effect at all, silently (a user's dose, a number in each condition)
        everywhere = [n for n in names if exps and all(n in e.parameters for e in exps)]
        if everywhere:
            raise ValueError(
                f"`per_experiment` names {everywhere}, which every experiment sets itself "
                "(Experiment(parameters={...}): a number or a parameter's name there): "
                "drop it from per_experiment, or from the experiments' parameters")
        exps = [e.replaced(parameters={**{n: f"{n}[{label}]" for n in names},
                                        **e.parameters}) for e, label in zip(exps, labels)]
    constants = frozenset(n for n in model.p_names if exps and all(
        isinstance(e.parameters.get(n), float) for e in exps))
    table = _table(model, p0, p_bounds, parameter_scale, constants)
    warn_constants_outside_bounds(model, exps, table, p_bounds, parameter_scale is None)
    if per_experiment is not None and table is not None:
        fixed = [n for n in names if n in table and not table[n].estimate]
        if fixed:
            raise ValueError(
                f"`per_experiment` names {fixed}, which the parameter table `p0` fixes "
                "(pc.Parameter(..., estimate=False)): estimate it there, or drop it from "
                "per_experiment")
    user_table = table is not None and parameter_scale is None  # pc.Parameter entries
    pre = [e.preequilibration for e in exps]
    reset = check_preequilibration(model, exps)
    any_pre = any(q is not None for q in pre)
    overrides = any(e.parameters for e in exps) or any_pre
    given = model.x0_given
    x0_expr = model.x0_expression
    # a number is a known initial value; an expression of p, a shifted state
    constant_x0 = np.array([bool(given[i]) and x0_expr[i].is_constant()
                            for i in range(model.nx)])
    shifted = (given & ~constant_x0).copy()
    if table is None and not overrides and not given.any():
        return Statement(trivial=True)
    if table is None:  # flat vectors, experiment parameters or x0 expressions
        p = np.asarray(p0, float).ravel()
        if p.size != model.np:
            raise ValueError(
                f"`p0` must have {model.np} entries (the model's parameters: "
                f"{', '.join(model.p_names)}), got {p.size}"
                + (f"; the entries of {', '.join(sorted(constants))}, which every experiment "
                   "sets to a number, are not used (any value)" if constants else "")
                + ("; where experiments map parameters to names of their own, give a "
                   "parameter table (a list of pc.Parameter, such as a PEtab problem's "
                   "read_petab(...).parameters; Problem.estimate(p0=res.p) restarts one "
                   "from a fit's estimate)" if overrides else ""))
        lb, ub = as_bounds(p_bounds, model.np, "p_bounds")
        table = {n: Parameter(n, float(p[i]), (float(lb[i]), float(ub[i])))
                 for i, n in enumerate(model.p_names)}
    for e in exps:
        bad = [k for k in e.parameters if k not in model.p_names]
        if bad:
            named = ", ".join(with_closest(k, model.p_names) for k in bad)
            raise ValueError(f"experiment {e.name!r} sets parameter(s) {named}, which the model "
                             f"does not have ({', '.join(model.p_names)})")
        bad = [k for k in (e.preequilibration.parameters if e.preequilibration else {})
               if k not in model.p_names]
        if bad:
            named = ", ".join(with_closest(k, model.p_names) for k in bad)
            raise ValueError(f"experiment {e.name!r}: its preequilibration sets parameter(s) "
                             f"{named}, which the model does not have "
                             f"({', '.join(model.p_names)})")

    # a constant (a number in some experiments) must be given in every one
    for n in model.p_names:
        numeric = [e.name for e in exps if isinstance(e.parameters.get(n), float)]
        unset = [e.name for e in exps if n not in e.parameters]
        if numeric and unset:
            raise ValueError(
                f"experiment(s) {unset} do not set {n!r}, which experiment(s) {numeric} set "
                "to a number (a constant of each experiment): set it in every experiment "
                "(Experiment(parameters={...})), or map it to a parameter's name there")
    if user_table:
        for e in exps:
            settings = list(e.parameters.items()) + list(
                e.preequilibration.parameters.items() if e.preequilibration else [])
            for k, v in settings:
                if (isinstance(v, str) and v not in table and v not in model.p_names
                        and v not in generated):
                    raise ValueError(
                        f"experiment {e.name!r} maps {k!r} to parameter {v!r}, which is not in "
                        f"the parameter table `p0` ({', '.join(table)}); add "
                        f"pc.Parameter({v!r}, ...) or fix the name")

    # which estimated parameter (or number) each model parameter is, per experiment
    order: list[str] = []
    origin: dict[str, int] = {}

    def use(name: str, j: int) -> None:
        if name not in origin:
            origin[name] = j
            order.append(name)

    values: list[list[str | float]] = []
    pre_values: list[list[str | float]] = []  # while it settles (as values without)
    for e, q in zip(exps, pre):
        row: list[str | float] = []
        for j, n in enumerate(model.p_names):
            v = e.parameters.get(n, n)
            row.append(v)
            if isinstance(v, str):
                use(v, j)
        values.append(row)
        settle = list(row)
        if q is not None:
            for j, n in enumerate(model.p_names):
                if n in q.parameters:
                    settle[j] = q.parameters[n]
                    if isinstance(settle[j], str):
                        use(settle[j], j)
        pre_values.append(settle)
    # model parameters first (model order), then the experiments' own names
    named = [n for n in model.p_names if n in origin] + [n for n in order
                                                         if n not in model.p_names]
    unused = [n for n in table if n not in origin and n not in model.p_names]
    if user_table and unused:
        missing = [n for n in named if n not in table
                   and table.get(model.p_names[origin[n]]) is None]
        # a spelling suggested only where an estimated parameter lacks its entry
        listed = ", ".join(with_closest(n, missing) for n in unused)
        raise ValueError(f"`p0`: the table names {listed}, which no experiment estimates"
                         + (f"; it has no entry for {missing}" if missing else
                            "; drop them from the table ([q for q in table if q.name not in "
                            f"{sorted(unused)!r}]: experiments not given here, a subset of the "
                            "conditions, may use them)")
                         + f" (the estimated parameters are {named})")
    rows: list[Parameter] = []
    for n in named:
        if n in table:
            rows.append(table[n])
        else:  # an experiment's own parameter: as the model parameter it stands for
            base = table.get(model.p_names[origin[n]])
            if base is None and n == model.p_names[origin[n]]:
                raise ValueError(f"`p0`: the table has no entry for the model parameter "
                                 f"{n!r}: add pc.Parameter({n!r}, start, ...) to it, or give "
                                 "its value in each experiment's parameters=")
            if base is None:
                raise ValueError(f"`p0`: no entry for {n!r} (nor for "
                                 f"{model.p_names[origin[n]]!r}, whose value it is)")
            rows.append(replace(base, name=n))
    index = {q.name: i for i, q in enumerate(rows)}
    phi = ca.SX.sym("phi", len(rows))
    theta = [_expression(phi[i], q.scale) for i, q in enumerate(rows)]

    # model parameters: one estimated parameter everywhere, or constant inputs
    p_expr: list[ca.SX] = []
    new_u: list[ca.SX] = []
    new_u_names: list[str] = []
    columns: list[list[float]] = [[] for _ in exps]
    pre_columns: list[list[float]] = [[] for _ in exps]
    for j, n in enumerate(model.p_names):
        col = [row[j] for row in values]
        pre_col = [row[j] for row in pre_values]
        if all(isinstance(v, str) for v in col + pre_col) and len(set(col + pre_col)) == 1:
            p_expr.append(theta[index[col[0]]])
            continue
        c = ca.SX.sym(f"{n}@constant")
        expr = c
        new_u.append(c)
        new_u_names.append(f"{n}@constant")
        for cols, vs in ((columns, col), (pre_columns, pre_col)):
            for e, v in enumerate(vs):
                cols[e].append(0.0 if isinstance(v, str) else float(v))
        for q in dict.fromkeys(v for v in col + pre_col if isinstance(v, str)):
            s = ca.SX.sym(f"{n}@is_{q}")
            expr = expr + s * theta[index[q]]
            new_u.append(s)
            new_u_names.append(f"{n}@is_{q}")
            for cols, vs in ((columns, col), (pre_columns, pre_col)):
                for e, v in enumerate(vs):
                    cols[e].append(1.0 if v == q else 0.0)
        p_expr.append(expr)
    P = ca.vertcat(*p_expr) if p_expr else ca.SX(0, 1)
    U_new = ca.vertcat(*new_u) if new_u else ca.SX(0, 1)
    # with preequilibration the constants switch at t0: the initial states
    # (from the start of the settling) read copies held over the experiment,
    # and an indicator says whether it is over (1) or not (0)
    U_start = (ca.vertcat(*[ca.SX.sym(f"{n}@start") for n in new_u_names]) if any_pre and new_u
               else ca.SX(0, 1))
    after = ca.SX.sym("preequilibration@over") if any_pre else None
    # the settling runs on a stretched clock (preequilibration.settling_time): the model's
    # rates times this input, 1 after t0
    rate = ca.SX.sym("preequilibration@rate") if any_pre else None
    # a model of time settles with its time held at the experiment's t0
    timed = any_pre and ca.depends_on(model.rhs, model.t)
    held_t = ca.SX.sym("preequilibration@t0") if timed else None

    def sub(expr: ca.SX) -> ca.SX:
        return ca.substitute([expr], [model.p], [P])[0]

    rhs, y = sub(model.rhs), sub(model.y)
    H = ca.SX.zeros(model.nx, 1)
    # an initial state of fixed parameters (and constants) only is known in
    # each experiment: a number there, not a shifted state (Boehm's
    # STAT5A(0) = 207.6 ratio with ratio fixed)
    free_phi = [phi[i] for i, q in enumerate(rows) if q.estimate]
    h_main = sub(model.x0_expression)  # a reset state restarts at it
    h_all = ca.substitute([h_main], [U_new], [U_start])[0] if U_start.numel() else h_main
    start = np.array([on_scale(q.start, q.scale) for q in rows])
    constants = [np.array(c, float) for c in columns]
    settling = [np.array(c, float) for c in pre_columns]
    known_by_exp = np.full((len(exps), model.nx), np.nan)
    known_reset = np.full((len(exps), len(reset)), np.nan)
    for i in np.flatnonzero(shifted):
        if free_phi and ca.depends_on(h_main[int(i)], ca.vertcat(*free_phi)):
            continue
        value = ca.Function("h", [phi, U_new], [h_main[int(i)]])
        for e in range(len(exps)):
            known_by_exp[e, i] = float(value(start, settling[e]))
            if int(i) in reset:
                known_reset[e, reset.index(int(i))] = float(value(start, constants[e]))
        shifted[int(i)] = False
        constant_x0[int(i)] = True
    if shifted.any():
        for i in np.flatnonzero(shifted):
            H[int(i)] = h_all[int(i)]
    x_domain = model.x_domain
    if shifted.any() and x_domain is not None:
        lo, hi = np.array(x_domain[0], float), np.array(x_domain[1], float)
        lo[shifted], hi[shifted] = -np.inf, np.inf  # x - h: no box of its own
        x_domain = (lo, hi)
    x_new, x_names = model.x, list(model.x_names)
    if any_pre:
        # a reset state is two: its value while settling, and after (from its
        # initial value again); the model sees the one of the phase
        Z = ca.SX.sym("reset", len(reset))
        state = model.x + H
        for k, i in enumerate(reset):
            z = Z[k] + (h_main[i] if shifted[i] else 0.0)
            state[i] = (1 - after) * state[i] + after * z
        f = ca.substitute([rhs], [model.x], [state])[0]
        if timed:
            f = ca.substitute([f], [model.t], [after * model.t + (1 - after) * held_t])[0]
        y = ca.substitute([y], [model.x], [state])[0]
        rhs_x = ca.SX(f)
        for i in reset:
            rhs_x[i] = (1 - after) * f[i]
        rhs = rate * ca.vertcat(rhs_x, *[after * f[i] for i in reset])
        x_new = ca.vertcat(model.x, Z)
        x_names += [f"{model.x_names[i]}@reset" for i in reset]
        if x_domain is not None:
            lo, hi = (np.asarray(b, float) for b in x_domain)
            lo_z, hi_z = lo[reset].copy(), hi[reset].copy()
            lo_z[shifted[reset]], hi_z[shifted[reset]] = -np.inf, np.inf
            x_domain = (np.r_[lo, lo_z], np.r_[hi, hi_z])
    elif shifted.any():
        rhs = ca.substitute([rhs], [model.x], [model.x + H])[0]
        y = ca.substitute([y], [model.x], [model.x + H])[0]
    extra = [U_new, U_start] + ([after] if after is not None else []) + (
        [held_t] if timed else []) + ([rate] if rate is not None else [])
    U_all = ca.vertcat(*extra)
    u_all = ca.vertcat(model.u, U_all) if model.nu else U_all
    extra_names = new_u_names + [f"{n}@start" for n in new_u_names if U_start.numel()] + (
        ["preequilibration@over"] if any_pre else []) + (
        ["preequilibration@t0"] if timed else []) + (
        ["preequilibration@rate"] if any_pre else [])
    scaled_names = [q.name if q.scale == "lin" else f"{q.scale}({q.name})" for q in rows]
    resized: dict[str, Any] = {}
    # a prior is a measurement of the parameter (on its own scale or the
    # estimation's): an output of its own, measured once
    priors = [(i, q) for i, q in enumerate(rows) if q.prior is not None and q.estimate]
    if priors:
        y = ca.vertcat(y, *[phi[i] if q.prior[0] == "parameterScaleNormal" else theta[i]
                            for i, q in priors])
        resized["y_names"] = list(model.y_names) + [f"prior({q.name})" for _, q in priors]
        resized["y_units"] = list(model.y_units) + [""] * len(priors)
    if any_pre and reset:  # the second copies' units and magnitudes: their states'
        resized["x_units"] = list(model.x_units) + [model.x_units[i] for i in reset]
        if model.x_nominal is not None:
            nominal = np.asarray(model.x_nominal, float)
            resized["x_nominal"] = np.r_[nominal, nominal[reset]]
    new_model = model.replaced(
        x=x_new, x_names=x_names, **resized,
        p=phi, p_names=scaled_names, rhs=rhs, y=y, u=u_all if u_all.numel() else None,
        u_names=list(model.u_names) + extra_names,
        u_units=list(model.u_units) + [""] * len(extra_names),
        p_units=[model.p_units[origin[q.name]] if q.scale == "lin" else "" for q in rows],
        x_domain=x_domain, x0=None)
    # each parameter's scale: a step on a log scale is measured in its own
    # units (build_setup's default p_scale, docs/design.md)
    new_model._parameter_scales = tuple(q.scale for q in rows)
    # ... and their starts on the linear scale (analysis/reach.round_off_reach)
    new_model._parameter_starts = tuple(float(q.start) for q in rows)
    # a shifted state's x0 is its deviation from Model(x0=...)'s value: 0
    new_model._shifted_states = tuple(bool(v) for v in shifted)
    known = known_by_exp.copy()
    for i in np.flatnonzero(constant_x0):
        if x0_expr[int(i)].is_constant():
            known[:, int(i)] = float(x0_expr[int(i)])
            if int(i) in reset:
                known_reset[:, reset.index(int(i))] = float(x0_expr[int(i)])
    # the constant inputs of each experiment: while it settles, and after
    phases = []
    for e in range(len(exps)):
        head = np.r_[constants[e], settling[e] if U_start.numel() else []]
        if not any_pre:
            phases.append((head, head))
            continue
        clock = [exps[e].t0] if timed else []
        after_t0 = np.r_[head, 1.0, clock, 1.0]
        phases.append((np.r_[settling[e], settling[e] if U_start.numel() else [], 0.0, clock,
                             1.0] if pre[e] is not None else after_t0, after_t0))
    new_exps = [_with_constant_inputs(e, model, phases[k], shifted, known[k], reset,
                                      known_reset[k])
                for k, e in enumerate(exps)]
    durations: dict[int, float] = {}
    at = start if settle_at is None else settle_at  # where the settlings are measured
    if any_pre:
        for k, q in enumerate(pre):
            if q is not None:
                new_exps[k], durations[k] = settling_time(new_model, new_exps[k], q, at)
    if priors:
        new_exps = [_with_prior_columns(e, [q.prior[1] for _, q in priors] if k == 0 else None,
                                        len(priors)) for k, e in enumerate(new_exps)]

    lo = np.array([on_scale(q.bounds[0], q.scale) for q in rows])
    hi = np.array([on_scale(q.bounds[1], q.scale) for q in rows])
    fixed = np.array([not q.estimate for q in rows])
    lo, hi = np.where(fixed, start, lo), np.where(fixed, start, hi)
    est = np.broadcast_to(np.asarray(estimate_x0, bool), (model.nx,)).copy()
    est[shifted | constant_x0] = False
    held = np.zeros(model.nx, bool)
    if any_pre and all(q is not None and e.x0 is not None for q, e in zip(pre, exps)) \
            and est.any():
        # states the settling forgets: unseen (a generator's, free, failed every method)
        held = forgotten_states(new_model, new_exps, at, model.nx) & est
        held[reset] = False
        est &= ~held
    if any_pre:
        est = np.r_[est, est[reset]]
    return Statement(
        trivial=False, model=new_model, experiments=new_exps, table=rows, phi0=start,
        phi_lb=lo, phi_ub=hi, estimate_x0=est, shifted=shifted, reset=reset,
        _x0_of=ca.Function("x0_of", [phi, U_all], [H]) if shifted.any() else None,
        _constants=[ph[1] for ph in phases],
        _settling=[(k, exps[k].t0, d) for k, d in durations.items()],
        _timed=[k for k, q in enumerate(pre) if q is not None and q.duration is None]
        if any_pre else [],
        priors=[(f"prior({q.name})", q.prior[2]) for _, q in priors],
        bounds_in_table=_parameter_table(p0), user_nu=model.nu,
        held_forgotten=[n for n, h in zip(model.x_names, held) if h])


def _with_constant_inputs(exp: Experiment, model: Model,
                          phases: tuple[np.ndarray, np.ndarray], shifted: np.ndarray,
                          known: np.ndarray, reset: Sequence[int] = (),
                          known_reset: np.ndarray | None = None) -> Experiment:
    """``exp`` with constants appended to its inputs (``phases``: before and
    after its ``t0``, the same where it is not preequilibrated), its parameter
    settings consumed, a shifted state's ``x0`` (the deviation) 0 and the
    model's known initial values (``known``, NaN elsewhere) in place; the
    ``reset`` states' second copies appended (``known_reset``)."""
    changes: dict[str, Any] = {"parameters": None}
    before, constants = phases
    if not np.array_equal(before, constants):
        # (the model's own inputs first, held at their t0 value while it settles)
        changes["u"] = PhasedConstants(before, constants, exp.t0,
                                       head=exp if model.nu else None, nu=model.nu)
        changes["breakpoints"] = exp.breakpoints
    elif constants.size:
        u = exp.u
        if u is None:
            changes["u"] = np.tile(constants, (exp.t.size, 1))
        elif callable(u):
            changes["u"] = _ConstantInputs(u, model.nu, constants)
        else:
            changes["u"] = np.hstack([np.asarray(u, float), np.tile(constants, (exp.t.size, 1))])
    if shifted.any() or np.isfinite(known).any() or len(reset):
        # the deviation x - h starts at 0 (known); the other states as before
        x0 = np.array(exp.x0 if exp.x0 is not None else exp.x0_guess(model), float)
        x0[shifted] = 0.0
        x0 = np.where(np.isfinite(known), known, x0)
        if len(reset):
            z0 = x0[list(reset)].copy()
            z0[shifted[list(reset)]] = 0.0
            if known_reset is not None:
                z0 = np.where(np.isfinite(known_reset), known_reset, z0)
            x0 = np.r_[x0, z0]
        changes["x0"] = x0
    return exp.replaced(**changes)


def _with_prior_columns(exp: Experiment, means: Sequence[float] | None, n: int) -> Experiment:
    """``exp`` with ``n`` output columns for the priors: their ``means``
    measured at its first sample (None: not measured here)."""
    extra = np.full((exp.t.size, n), np.nan)
    if means is not None:
        extra[0] = means
    changes: dict[str, Any] = {"y": np.hstack([np.asarray(exp.y, float), extra])}
    if exp.sigma is not None:
        changes["sigma"] = np.hstack([np.asarray(exp.sigma, float), np.full_like(extra, np.nan)])
    return exp.replaced(**changes)


class _ConstantInputs:
    """A callable input ``u(t)`` followed by constants (picklable); vectorized
    where ``u`` is (a delayed model's round inputs: called once per time
    instead, its simulations took 27 of a fit's 31 s)."""

    def __init__(self, u: Any, nu: int, constants: np.ndarray) -> None:
        self.u, self.nu, self.constants = u, nu, constants
        self.vectorized = bool(getattr(u, "vectorized", False))

    def __call__(self, t: Any) -> np.ndarray:
        if self.vectorized:
            head = np.asarray(self.u(t), float).reshape(np.size(t), -1)
            return np.hstack([head, np.broadcast_to(self.constants,
                                                    (head.shape[0], self.constants.size))])
        head = np.asarray(self.u(t), float).ravel()
        return np.concatenate([head, self.constants])
