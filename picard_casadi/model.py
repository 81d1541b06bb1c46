"""The ODE model: CasADi SX symbols and expressions, validated once.

A :class:`Model` is what the user knows about the physics::

    x'(t) = f(t, x, p, u(t)),     y(t) = g(t, x, p, u(t))

It knows nothing of how it is estimated; every method builds its functions
from the read-only attributes kept here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import casadi as ca
import numpy as np

__all__ = ["Model"]


def _as_symbol_vector(value: Any, field: str, required: bool) -> ca.SX:
    """Check that ``value`` is a column of distinct SX symbols."""
    if value is None:
        if required:
            raise ValueError(f"Model: `{field}` is required (a casadi.SX.sym column)")
        return ca.SX(0, 1)
    if isinstance(value, ca.MX):
        raise TypeError(
            f"Model: `{field}` is a casadi.MX symbol; declare it with "
            f"casadi.SX.sym (the package builds SX graphs it can expand and "
            f"code-generate)"
        )
    if not isinstance(value, ca.SX):
        raise TypeError(
            f"Model: `{field}` must be a casadi.SX symbol, got {type(value).__name__}"
        )
    if value.size2() != 1 and value.size1() == 1:
        value = value.T
    if value.size2() != 1:
        raise ValueError(
            f"Model: `{field}` must be a column vector, got shape {value.shape}"
        )
    if not value.is_valid_input():
        raise ValueError(
            f"Model: `{field}` must consist of distinct symbols created with "
            "casadi.SX.sym, not expressions"
        )
    return value


def _delays(spec: Any, names: Sequence[str], field: str, p: ca.SX,
            p_names: Sequence[str]) -> dict[int, tuple[int, float]]:
    """Check ``Model(output_delays=...)`` or ``input_delays``: a mapping of an
    output (input) name to one symbol of ``p`` (an estimated delay) or a
    number >= 0 (a known one); index -> (parameter index or -1, value)."""
    if spec is None:
        return {}
    if not isinstance(spec, Mapping):
        raise TypeError(f"Model: `{field}` must be a dict of name -> delay (a symbol of `p` "
                        f"or a number), got {type(spec).__name__}")
    hashes = {p[i].element_hash(): i for i in range(p.numel())}
    out: dict[int, tuple[int, float]] = {}
    for name, value in spec.items():
        if str(name) not in names:
            raise ValueError(f"Model: `{field}` names {name!r}, which is not one of "
                             f"{list(names)}")
        k = list(names).index(str(name))
        if isinstance(value, str) and value in p_names:
            out[k] = (list(p_names).index(value), math.nan)
            continue
        if isinstance(value, ca.SX):
            if value.numel() != 1 or not value.is_symbolic() or (
                    value.element_hash() not in hashes):
                raise ValueError(f"Model: `{field}[{name!r}]` must be one symbol of `p` (an "
                                 f"estimated delay) or a number, got {value}")
            out[k] = (hashes[value.element_hash()], math.nan)
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            if isinstance(value, str):  # a name the parameters do not have
                raise ValueError(f"Model: `{field}[{name!r}]` names {value!r}, which is not a "
                                 f"parameter ({', '.join(p_names)})") from None
            raise TypeError(f"Model: `{field}[{name!r}]` must be a symbol of `p`, a parameter "
                            f"name or a number, got {value!r}") from None
        if not math.isfinite(number) or number < 0:
            raise ValueError(f"Model: `{field}[{name!r}]` = {value!r}: a known delay must be "
                             "a finite number >= 0")
        out[k] = (-1, number)
    return out


def _delay_names(spec: Mapping[int, tuple[int, float]], names: Sequence[str],
                 p_names: Sequence[str]) -> dict[str, str | float]:
    return {names[k]: p_names[i] if i >= 0 else v for k, (i, v) in spec.items()}


def _as_expression(value: Any, field: str) -> ca.SX:
    """Turn an SX or a sequence of SX scalars into a dense SX column."""
    if isinstance(value, ca.MX):
        raise TypeError(
            f"Model: `{field}` is a casadi.MX expression; build it from SX symbols"
        )
    if isinstance(value, (list, tuple)):
        try:
            value = ca.vertcat(*value)
        except Exception as err:  # casadi raises NotImplementedError/RuntimeError
            raise TypeError(
                f"Model: `{field}` must be an SX expression or a list of SX "
                f"scalars ({err})"
            ) from None
    if isinstance(value, (int, float, np.ndarray, ca.DM)):
        value = ca.SX(ca.DM(value))
    if not isinstance(value, ca.SX):
        raise TypeError(
            f"Model: `{field}` must be a casadi.SX expression, got {type(value).__name__}"
        )
    if value.size2() != 1 and value.size1() == 1:
        value = value.T
    if value.size2() != 1:
        raise ValueError(f"Model: `{field}` must be a column, got shape {value.shape}")
    return ca.densify(value)


def _names(value: Sequence[str] | None, default_prefix: str, n: int, field: str) -> tuple[str, ...]:
    if value is None:
        return tuple(f"{default_prefix}{i}" for i in range(n))
    if isinstance(value, str):
        value = [value]
    names = tuple(str(v) for v in value)
    if len(names) != n:
        raise ValueError(
            f"Model: `{field}` has {len(names)} names but the vector has {n} entries"
        )
    if len(set(names)) != n:
        raise ValueError(f"Model: `{field}` has repeated names: {list(names)}")
    return names


def _units(value: Sequence[str] | None, n: int, field: str) -> tuple[str, ...]:
    if value is None:
        return ("",) * n
    units = tuple(str(v) for v in value)
    if len(units) != n:
        raise ValueError(f"Model: `{field}` has {len(units)} entries, expected {n}")
    return units


def _initial_state_expressions(x0: Any, nx: int, p: ca.SX, x_names: tuple[str, ...]
                                ) -> ca.SX | None:
    """``Model(x0=...)`` as an SX column of ``nx`` expressions of ``p`` (NaN: not given)."""
    if x0 is None:
        return None
    if isinstance(x0, (ca.SX, ca.MX, ca.DM)):
        if isinstance(x0, ca.MX):
            raise TypeError("Model: `x0` must be CasADi SX expressions (of p), not MX")
        entries = [ca.SX(x0[i]) for i in range(x0.numel())]
    else:
        entries = []
        for i, v in enumerate(x0):
            try:
                entries.append(ca.SX(np.nan) if v is None else v if isinstance(v, ca.SX)
                               else ca.SX(float(v)))
            except (TypeError, ValueError):
                state = x_names[i] if i < len(x_names) else str(i)
                raise ValueError(
                    f"Model: `x0[{i}]` (state {state!r}) is {v!r}: each entry must be an SX "
                    "expression of p (the symbol itself, not its name), a number or "
                    "NaN/None") from None
    if len(entries) != nx:
        raise ValueError(f"Model: `x0` must have nx = {nx} entries, got {len(entries)}")
    allowed = {p[i].element_hash() for i in range(p.numel())}
    p_symbol_names = {p[i].name() for i in range(p.numel())}
    for i, e in enumerate(entries):
        for s in ca.symvar(e):
            if s.element_hash() not in allowed:
                same_name = (" (another symbol of the same name as one in p: use p's own)"
                             if s.name() in p_symbol_names else "")
                raise ValueError(
                    f"Model: `x0` of state {x_names[i]!r} uses symbol {s.name()!r}, which is "
                    f"not one of the parameters p{same_name}; an initial state may depend "
                    "on p only")
    return ca.vertcat(*entries)


def _box(value: Any, n: int, field: str) -> tuple[np.ndarray, np.ndarray] | None:
    if value is None:
        return None
    try:
        lb, ub = value
    except (TypeError, ValueError):
        raise ValueError(f"Model: `{field}` must be a pair (lower, upper)") from None
    sides = []
    for side, missing in ((lb, -np.inf), (ub, np.inf)):
        try:
            v = np.broadcast_to(np.asarray(missing if side is None else side, float), (n,))
        except (TypeError, ValueError):
            raise ValueError(f"Model: `{field}` needs {n} numbers (or None) on each side, "
                             f"got {side!r}") from None
        # a None entry (NaN as a float) is unbounded, as in estimate's bounds
        sides.append(np.where(np.isnan(v), missing, v))
    lb, ub = sides
    if np.any(lb >= ub):
        i = int(np.flatnonzero(lb >= ub)[0])
        raise ValueError(f"Model: `{field}` needs lower < upper in every entry; entry {i} "
                         f"has lower {lb[i]} and upper {ub[i]}")
    return lb, ub


class Model:
    """An ODE model written with CasADi SX symbols.

    Parameters
    ----------
    x : casadi.SX
        State symbols, a column of ``nx`` distinct ``SX.sym`` entries.
    p : casadi.SX
        Parameter symbols (``np`` entries); these are what ``estimate`` fits.
    rhs : casadi.SX or sequence of SX
        The vector field ``f(t, x, p, u)``, ``nx`` entries.
    t : casadi.SX, optional
        Time symbol, for explicitly time-dependent models.
    u : casadi.SX, optional
        Input symbols (``nu`` entries); the values come from each
        :class:`~picard_casadi.Experiment`.
    y : casadi.SX or sequence of SX, optional
        Output expression ``g(t, x, p, u)``; default ``y = x``.
    name : str
        Short name used in files and plots.
    x_names, p_names, u_names, y_names : sequence of str, optional
        Names of the entries (defaults ``x0, x1, ...``); used in CSV columns,
        plots and messages.
    x_units, p_units, u_units, y_units : sequence of str, optional
        Units of the entries, for plot labels.
    t_unit : str, optional
        The time unit, for plot labels (``"s"`` where not given); a CSV's
        time column in another unit is an error where it is given, a
        warning where not.
    x_domain : (array_like, array_like), optional
        Open box outside which the model is not valid (for example ``V > 0``:
        ``sqrt(V)`` has no derivative at 0).  A simulation that leaves it (or
        starts on its bound) raises :class:`~picard_casadi.SimulationError`;
        estimation boxes are clipped to it.
    x_nominal : array_like, optional
        Typical magnitude of each state, used to scale the problem.  By
        default it is taken from the data and the initial guess.
    x0 : casadi.SX or sequence, optional
        The initial states as expressions of the parameters (SBML's initial
        assignments, ``x0 = [A0, total - A0]``), ``nx`` entries; ``NaN``
        (or ``None``) where a state's initial value is not given by the
        model (known from the experiment, or estimated).  A state with an
        expression is not estimated: its ``x0`` follows the parameters
        (``estimate`` fits the others, and the derivatives of the
        expressions reach every method).
    output_delays : dict of str to casadi.SX or float, optional
        Outputs measured late: output name -> its delay ``tau``, one symbol
        of ``p`` (estimated with the other parameters, ``tau >= 0``) or a
        number (known).  The output is observed as ``g(t - tau)`` (a
        sensor's lag: the whole output expression, inputs included); before
        ``t0 + tau`` it holds its value at ``t0``.
    input_delays : dict of str to casadi.SX or float, optional
        Inputs acting late: input name -> its delay, as for outputs.  The
        model sees ``u(t - tau)``, held at ``u(t0)`` before ``t0 + tau``.
        An estimated input delay needs an input that is continuous in time
        (sampled and read linearly, or a smooth callable): the data do not
        tell the delay of a staircase's jumps through its slope.  How delays
        are estimated: :mod:`picard_casadi.estimation.delays`.

    Raises
    ------
    ValueError
        If an expression depends on a symbol that is not declared, or the
        shapes or names disagree.
    TypeError
        If a symbol or expression is not CasADi SX.

    Examples
    --------
    >>> import casadi as ca
    >>> x = ca.SX.sym("x", 2); p = ca.SX.sym("p", 2)
    >>> m = Model(x=x, p=p, rhs=ca.vertcat(p[0] * x[1], -p[1] * x[0]))
    >>> (m.nx, m.np, m.nu, m.ny)
    (2, 2, 0, 2)
    """

    def __init__(
        self,
        *,
        x: ca.SX,
        p: ca.SX,
        rhs: ca.SX | Sequence[ca.SX],
        t: ca.SX | None = None,
        u: ca.SX | None = None,
        y: ca.SX | Sequence[ca.SX] | None = None,
        name: str = "model",
        x_names: Sequence[str] | None = None,
        p_names: Sequence[str] | None = None,
        u_names: Sequence[str] | None = None,
        y_names: Sequence[str] | None = None,
        x_units: Sequence[str] | None = None,
        p_units: Sequence[str] | None = None,
        u_units: Sequence[str] | None = None,
        y_units: Sequence[str] | None = None,
        t_unit: str | None = None,
        x_domain: tuple[Any, Any] | None = None,
        x_nominal: Any = None,
        x0: Any = None,
        output_delays: Mapping[str, Any] | None = None,
        input_delays: Mapping[str, Any] | None = None,
    ) -> None:
        x = _as_symbol_vector(x, "x", required=True)
        p = _as_symbol_vector(p, "p", required=True)
        u = _as_symbol_vector(u, "u", required=False)
        if t is None:
            t = ca.SX.sym("t")
            t_given = False
        else:
            t = _as_symbol_vector(t, "t", required=True)
            if t.numel() != 1:
                raise ValueError(f"Model: `t` must be a scalar symbol, got shape {t.shape}")
            t_given = True
        if x.numel() == 0:
            raise ValueError("Model: `x` must have at least one state")
        rhs = _as_expression(rhs, "rhs")
        if rhs.numel() != x.numel():
            raise ValueError(
                f"Model: `rhs` must have length nx = {x.numel()}, got {rhs.numel()}"
            )
        y = ca.SX(x) if y is None else _as_expression(y, "y")
        if y.numel() == 0:
            raise ValueError("Model: `y` must have at least one output")

        declared = {}
        for field, vec in (("t", t), ("x", x), ("p", p), ("u", u)):
            for i in range(vec.numel()):
                h = vec[i].element_hash()
                if h in declared:
                    raise ValueError(
                        f"Model: symbol {vec[i]} is declared twice "
                        f"(in `{declared[h]}` and `{field}`)"
                    )
                declared[h] = field
        for field, expr in (("rhs", rhs), ("y", y)):
            for s in ca.symvar(expr):
                if s.element_hash() not in declared:
                    raise ValueError(
                        f"Model: `{field}` depends on symbol {s.name()!r}, which is "
                        "not declared in t, x, p or u; add it to one of them (a "
                        "known constant should be a number, not a symbol)"
                    )

        self._t, self._x, self._p, self._u = t, x, p, u
        self._t_given = t_given
        self._rhs, self._y = rhs, y
        self._name = str(name)
        nx, np_, nu, ny = x.numel(), p.numel(), u.numel(), y.numel()
        self._x_names = _names(x_names, "x", nx, "x_names")
        self._p_names = _names(p_names, "p", np_, "p_names")
        self._u_names = _names(u_names, "u", nu, "u_names")
        state_of_output = self.output_state_index
        if y_names is None and all(i is not None for i in state_of_output):
            y_names = [self._x_names[i] for i in state_of_output]
        self._y_names = _names(y_names, "y", ny, "y_names")
        self._x_units = _units(x_units, nx, "x_units")
        self._p_units = _units(p_units, np_, "p_units")
        self._u_units = _units(u_units, nu, "u_units")
        self._y_units = _units(y_units, ny, "y_units")
        self._t_unit, self._t_unit_given = ("s", False) if t_unit is None else (str(t_unit), True)
        self._x_domain = _box(x_domain, nx, "x_domain")
        if x_nominal is not None:
            nom = np.broadcast_to(np.asarray(x_nominal, float), (nx,)).copy()
            if not np.all(np.isfinite(nom)) or np.any(nom <= 0):
                raise ValueError("Model: `x_nominal` must be positive and finite")
            self._x_nominal: np.ndarray | None = nom
        else:
            self._x_nominal = None
        self._functions: dict[str, ca.Function] = {}
        self._x0 = _initial_state_expressions(x0, nx, self._p, self._x_names)
        self._output_delays = _delays(output_delays, self._y_names, "output_delays", p,
                                      self._p_names)
        self._input_delays = _delays(input_delays, self._u_names, "input_delays", p,
                                     self._p_names)

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict[str, Any]:
        """Pickle support (another process, :mod:`picard_casadi.runtime.executors`).

        CasADi SX does not pickle on its own; the symbols and expressions
        travel as one ``casadi.Function`` (which serialises), so the
        unpickled model's functions serialise exactly as the original's
        (same code-cache entries, same numbers).
        """
        state = {k: v for k, v in self.__dict__.items()
                 if k not in ("_t", "_x", "_p", "_u", "_rhs", "_y", "_functions", "_x0")}
        state["_graph"] = ca.Function("model", [self._t, self._x, self._p, self._u],
                                      [self._rhs, self._y, self.x0_expression])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        graph = state.pop("_graph")
        t, x, p, u = graph.sx_in()
        rhs, y, x0 = graph.call([t, x, p, u])
        self.__dict__.update(state)
        self._t, self._x, self._p, self._u, self._rhs, self._y = t, x, p, u, rhs, y
        self._x0 = x0
        self._functions = {}

    def replaced(self, **changes: Any) -> Model:
        """A new model with some of the constructor's arguments changed (``p``,
        ``rhs``, ``y``, ``u``, names, ...); the others as this model's.  The
        estimation uses it to state a problem on other parameters (a log
        scale) or with experiment constants as inputs."""
        args: dict[str, Any] = dict(
            x=self._x, p=self._p, rhs=self._rhs, t=self._t if self._t_given else None,
            u=self._u if self.nu else None, y=self._y, name=self._name,
            x_names=self._x_names, p_names=self._p_names, u_names=self._u_names,
            y_names=self._y_names, x_units=self._x_units, p_units=self._p_units,
            u_units=self._u_units, y_units=self._y_units,
            t_unit=self._t_unit if getattr(self, "_t_unit_given", True) else None,
            x_domain=self._x_domain, x_nominal=self._x_nominal, x0=self._x0,
            output_delays=self.output_delays, input_delays=self.input_delays)
        if "p" in changes or "p_names" in changes:  # delays name parameters of this p
            args.pop("output_delays")
            args.pop("input_delays")
        args.update(changes)
        return Model(**args)

    def with_outputs(self, y: ca.SX, y_names: Sequence[str] | None = None,
                     y_units: Sequence[str] | None = None,
                     scales: Sequence[str] | None = None) -> Model:
        """The same model with other outputs (expressions of its ``t``, ``x``,
        ``p``, ``u``).  ``scales``: the new outputs are the old ones on these
        scales (``"lin"``, ``"log"``, ``"log10"``; for log-normal noise), so an
        output that was a state still tells the initial guess that state
        (:attr:`output_state_index`, :meth:`output_as_state`)."""
        new = Model.__new__(Model)
        new.__dict__.update(self.__dict__)
        new.__dict__.pop("_unused_parameters", None)  # (of the old outputs)
        y = _as_expression(y, "y")
        declared = {s.element_hash() for vec in (self._t, self._x, self._p, self._u)
                    for s in ca.symvar(vec)}
        for s in ca.symvar(y):
            if s.element_hash() not in declared:
                raise ValueError(f"Model.with_outputs: `y` depends on symbol {s.name()!r}, "
                                 f"which model {self._name!r} does not declare")
        new._y = y
        new._affine_states = None
        new._y_names = _names(y_names, "y", y.numel(), "y_names") if (
            y_names is not None or y.numel() != self.ny) else self._y_names
        new._y_units = _units(y_units, y.numel(), "y_units") if (
            y_units is not None or y.numel() != self.ny) else self._y_units
        new._functions = {}
        if scales is not None:
            scales = tuple(str(v) for v in scales)
            if len(scales) != y.numel() or y.numel() != self.ny or not set(scales) <= {
                    "lin", "log", "log10"}:
                raise ValueError("Model.with_outputs: `scales` needs one of 'lin', 'log', "
                                 "'log10' per output, as many as the model has")
            new._output_scales = scales
            new._output_states = self.output_state_index
            # (the old outputs, on the linear scale: x0_guess inverts them there)
            new._affine_states = self.affine_output_states
        return new

    @property
    def output_delays(self) -> dict[str, str | float]:
        """Delayed outputs: output name -> the delay's parameter name (estimated)
        or its value (known).  Output ``y_k`` is measured as ``g_k`` at ``t -
        tau``."""
        return _delay_names(getattr(self, "_output_delays", {}), self._y_names, self._p_names)

    @property
    def input_delays(self) -> dict[str, str | float]:
        """Delayed inputs: input name -> the delay's parameter name or value.
        The model sees input ``u_i`` as ``u_i(t - tau)``."""
        return _delay_names(getattr(self, "_input_delays", {}), self._u_names, self._p_names)

    @property
    def delay_spec(self) -> tuple[dict[int, tuple[int, float]], dict[int, tuple[int, float]]]:
        """``(outputs, inputs)``: index -> ``(parameter index, value)``; the
        parameter index is -1 for a known delay (its value), the value NaN for
        an estimated one."""
        return (dict(getattr(self, "_output_delays", {})),
                dict(getattr(self, "_input_delays", {})))

    def delay_values(self, p: Any) -> tuple[np.ndarray, np.ndarray]:
        """Each output's and each input's delay, ``(ny,)`` and ``(nu,)``, 0 where
        none; an estimated delay's value from ``p``.

        Raises
        ------
        ValueError
            If a delay is negative or not finite.
        """
        p = np.asarray(p, float).ravel()
        values = []
        for spec, n in zip(self.delay_spec, (self.ny, self.nu)):
            out = np.zeros(n)
            for k, (i, v) in spec.items():
                out[k] = p[i] if i >= 0 else v
            if np.any(out < 0) or not np.all(np.isfinite(out)):
                raise ValueError(f"a delay must be finite and >= 0, got {out.tolist()} "
                                 "(from `p`)")
            values.append(out)
        return values[0], values[1]

    @property
    def unused_parameters(self) -> list[str]:
        """The parameters that appear in none of ``rhs``, ``y``, the initial
        states' expressions and the delays: no data can determine them (a
        microbiologist's lag and initial amount declared, ``Model(x0=...)``
        forgotten, told after the fit that they "do not move the fit");
        computed once (``estimate`` asks at every call)."""
        unused = self.__dict__.get("_unused_parameters")
        if unused is None:
            used = ca.vertcat(ca.vec(self._rhs), ca.vec(self._y), ca.vec(self.x0_expression))
            delayed = set(self.output_delays.values()) | set(self.input_delays.values())
            unused = tuple(n for j, n in enumerate(self._p_names) if n not in delayed
                           and not ca.depends_on(used, self._p[j]))
            self._unused_parameters = unused
        return list(unused)

    @property
    def has_delays(self) -> bool:
        """Whether an output or an input is delayed."""
        return bool(getattr(self, "_output_delays", {}) or getattr(self, "_input_delays", {}))

    @property
    def x0_expression(self) -> ca.SX:
        """The initial states as expressions of ``p`` (NaN where not given)."""
        return ca.SX(np.full((self.nx, 1), np.nan)) if self._x0 is None else self._x0

    @property
    def x0_given(self) -> np.ndarray:
        """Per state: whether the model gives its initial value (``x0=``)."""
        if self._x0 is None:
            return np.zeros(self.nx, bool)
        return np.array([not (self._x0[i].is_constant() and np.isnan(float(self._x0[i])))
                         for i in range(self.nx)])

    # ------------------------------------------------------------------ symbols
    @property
    def t(self) -> ca.SX:
        """Time symbol (created internally when the model is autonomous)."""
        return self._t

    @property
    def x(self) -> ca.SX:
        """State symbols, shape (nx, 1)."""
        return self._x

    @property
    def p(self) -> ca.SX:
        """Parameter symbols, shape (np, 1)."""
        return self._p

    @property
    def u(self) -> ca.SX:
        """Input symbols, shape (nu, 1) (empty when there are no inputs)."""
        return self._u

    @property
    def rhs(self) -> ca.SX:
        """The vector field f(t, x, p, u), shape (nx, 1)."""
        return self._rhs

    @property
    def y(self) -> ca.SX:
        """The output expression g(t, x, p, u), shape (ny, 1)."""
        return self._y

    # ------------------------------------------------------------------ sizes
    @property
    def nx(self) -> int:
        """Number of states."""
        return self._x.numel()

    @property
    def np(self) -> int:
        """Number of parameters."""
        return self._p.numel()

    @property
    def nu(self) -> int:
        """Number of inputs."""
        return self._u.numel()

    @property
    def ny(self) -> int:
        """Number of outputs."""
        return self._y.numel()

    # ------------------------------------------------------------------ names
    @property
    def name(self) -> str:
        """Short name of the model."""
        return self._name

    @property
    def x_names(self) -> tuple[str, ...]:
        """State names."""
        return self._x_names

    @property
    def p_names(self) -> tuple[str, ...]:
        """Parameter names."""
        return self._p_names

    @property
    def u_names(self) -> tuple[str, ...]:
        """Input names."""
        return self._u_names

    @property
    def y_names(self) -> tuple[str, ...]:
        """Output names."""
        return self._y_names

    @property
    def x_units(self) -> tuple[str, ...]:
        """State units ('' where not given)."""
        return self._x_units

    @property
    def p_units(self) -> tuple[str, ...]:
        """Parameter units."""
        return self._p_units

    @property
    def u_units(self) -> tuple[str, ...]:
        """Input units."""
        return self._u_units

    @property
    def y_units(self) -> tuple[str, ...]:
        """Output units."""
        return self._y_units

    @property
    def t_unit(self) -> str:
        """Time unit."""
        return self._t_unit

    @property
    def x_domain(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Open box of validity of the model, or None."""
        return self._x_domain

    @property
    def x_nominal(self) -> np.ndarray | None:
        """User-given typical state magnitudes, or None."""
        return self._x_nominal

    @property
    def jacobian_pattern(self) -> np.ndarray:
        """Structural nonzeros of ``df/dx``, ``(nx, nx)`` bool (computed once):
        which states drive which (the fixed-point solves use the coupling)."""
        pattern = self.__dict__.get("_jacobian_pattern")
        if pattern is None:
            sp = ca.jacobian(self._rhs, self._x).sparsity()
            pattern = np.array(ca.DM(sp, 1), dtype=bool).reshape(self.nx, self.nx)
            pattern.setflags(write=False)
            self._jacobian_pattern = pattern
        return pattern

    @property
    def output_state_index(self) -> list[int | None]:
        """For each output, the index of the state it equals, or None.

        An output that is exactly one state symbol (``y[k] is x[i]``) is
        "measured state" ``i``; the initial guess takes such states from data.
        """
        if getattr(self, "_output_states", None) is not None:
            return list(self._output_states)  # outputs that are a state on a log scale
        hashes = {self._x[i].element_hash(): i for i in range(self.nx)}
        out: list[int | None] = []
        for k in range(self.ny):
            e = self._y[k]
            out.append(hashes.get(e.element_hash()) if e.is_symbolic() else None)
        return out

    @property
    def affine_output_states(self) -> list[int | None]:
        """For each output, the one state it depends on where it is affine in
        it on the linear scale (``y = c x_i + d``, ``c`` and ``d`` free of the
        states: a sensor with a bias, a scaled and offset reading; ``log(c
        x_i)`` of a log-normal output), or None; the initial guess inverts
        such outputs at ``p0``."""
        if getattr(self, "_affine_states", None) is None:
            scales = getattr(self, "_output_scales", None) or ("lin",) * self.ny
            out: list[int | None] = []
            for k in range(self.ny):
                which = [i for i in range(self.nx) if ca.depends_on(self._y[k], self._x[i])]
                affine = (len(which) == 1 and scales[k] == "lin" and not ca.depends_on(
                    ca.jacobian(self._y[k], self._x[which[0]]), self._x))
                out.append(which[0] if affine else None)
            self._affine_states = out
        return list(self._affine_states)

    def output_as_state(self, k: int, values: Any) -> np.ndarray:
        """Values of output ``k`` as the state it measures (``exp`` or ``10**``
        of an output on a log scale, :meth:`with_outputs`)."""
        values = np.asarray(values, float)
        scale = getattr(self, "_output_scales", None)
        scale = "lin" if scale is None else scale[k]
        return values if scale == "lin" else np.exp(values) if scale == "log" else 10.0 ** values

    # ------------------------------------------------------------------ functions
    @property
    def f(self) -> ca.Function:
        """``casadi.Function('f', [t, x, p, u], [rhs])``."""
        if "f" not in self._functions:
            self._functions["f"] = ca.Function(
                "f", [self._t, self._x, self._p, self._u], [self._rhs],
                ["t", "x", "p", "u"], ["rhs"],
            )
        return self._functions["f"]

    @property
    def f_jacobian(self) -> ca.Function:
        """``casadi.Function('f_jacobian', [t, x, p, u], [d rhs / d(x, p)])``."""
        if "f_jacobian" not in self._functions:
            self._functions["f_jacobian"] = ca.Function(
                "f_jacobian", [self._t, self._x, self._p, self._u],
                [ca.jacobian(self._rhs, ca.vertcat(self._x, self._p))])
        return self._functions["f_jacobian"]

    @property
    def g(self) -> ca.Function:
        """``casadi.Function('g', [t, x, p, u], [y])``."""
        if "g" not in self._functions:
            self._functions["g"] = ca.Function(
                "g", [self._t, self._x, self._p, self._u], [self._y],
                ["t", "x", "p", "u"], ["y"],
            )
        return self._functions["g"]

    def rhs_value(self, t: float, x: Any, p: Any, u: Any = None) -> np.ndarray:
        """Evaluate the vector field numerically.

        Parameters
        ----------
        t : float
        x : array_like, shape (nx,)
        p : array_like, shape (np,)
        u : array_like, shape (nu,), optional

        Returns
        -------
        ndarray, shape (nx,)
        """
        u = np.zeros(self.nu) if u is None else u
        return np.asarray(self.f(t, x, p, u)).ravel()

    def output_value(self, t: float, x: Any, p: Any, u: Any = None) -> np.ndarray:
        """Evaluate the output expression numerically (shape (ny,))."""
        u = np.zeros(self.nu) if u is None else u
        return np.asarray(self.g(t, x, p, u)).ravel()

    def __repr__(self) -> str:
        return (
            f"Model(name={self._name!r}, nx={self.nx}, np={self.np}, "
            f"nu={self.nu}, ny={self.ny})"
        )
