"""Measured data of one experiment: sample times, outputs, inputs, x0 guess.

Several experiments share the model's parameters ``p``; each has its own
initial state and its own inputs.  An :class:`Experiment` checks what it can
on its own at construction, and what needs the model in :meth:`Experiment.check`,
which :func:`~picard_casadi.estimate` calls for every experiment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import numpy as np

from .errors import dated_times
from .inputs import (HELD_SHARE, InputSpec, callable_jumps, check_input_interpolation,
                     evaluate_inputs, held_input_columns, held_jumps, is_linear)
from .model import Model

__all__ = ["Experiment", "Preequilibration", "check_input_interpolation", "is_linear",
           "evaluate_inputs",
           "held_input_columns", "per_experiment_labels", "HELD_SHARE"]


def _checked_parameters(parameters: Any, where: str,
                        field: str = "parameters") -> dict[str, float | str]:
    """``parameters`` as a dict of names to finite numbers or non-empty names."""
    if parameters is None:
        return {}
    if not isinstance(parameters, Mapping):
        raise ValueError(f"{where}: `{field}` must map parameter names to numbers "
                         f"or parameter names, got {type(parameters).__name__}")
    out: dict[str, float | str] = {}
    for key, value in parameters.items():
        if isinstance(value, str):
            if not value.strip():
                raise ValueError(f"{where}: `{field}[{key!r}]` is an empty name")
            try:  # "2.0" (read from a file) is the number, not a parameter named "2.0"
                value = float(value)
            except ValueError:
                out[str(key)] = value.strip()
                continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: `{field}[{key!r}]` must be a number or a parameter "
                             f"name, got {value!r}") from None
        if not np.isfinite(number):
            raise ValueError(f"{where}: `{field}[{key!r}]` must be finite, got {value!r}")
        out[str(key)] = number
    return out


#: what a time of ``inf`` (PEtab's steady-state measurement) is said as
_STEADY_STATE_HINT = ("; measurements at the steady state are an experiment of their own, "
                      "measured at its t0 after settling: Experiment(t=[t0, ...], t0=t0, "
                      "preequilibration=pc.Preequilibration())")


@dataclass(frozen=True)
class Preequilibration:
    """An experiment that starts from a steady state (PEtab's preequilibration).

    Before its ``t0`` the experiment's system runs, from the model's initial
    states, with the model parameters set as ``parameters`` says, until it
    settles; its data are then taken from that steady state on (the
    parameters as the experiment's own ``parameters`` say), the states in
    ``reset`` restarting at their initial values.  The steady state is
    reached by simulation (the model run for ``duration`` before ``t0``, as
    a part of the experiment whose derivatives every method has), so a
    conserved quantity (``A <-> B``) keeps the total it starts with.  A
    model of time settles with its time held at ``t0``, a model's inputs
    at their value at ``t0``.  An experiment
    measured at its steady state only (PEtab's ``time = inf``) has its data
    at ``t0`` and ``Preequilibration()`` (it settles as it is measured).

    Parameters
    ----------
    parameters : mapping of str to float or str, optional
        The model parameters' values while it settles, as
        ``Experiment(parameters=...)``: a number (a constant), a name (an
        estimated parameter of that name).  Unlisted parameters keep the
        experiment's own values (its ``parameters``, else the shared ones).
    reset : sequence of str, optional
        States that restart at their initial value (the model's ``x0``, with
        the experiment's parameters) at ``t0``; the others continue from the
        steady state.
    duration : float, optional
        How long it runs before ``t0``.  Default: ten times the time the
        model takes to settle (every state within 1e-8 of its size of where
        it ends) at the start of the estimate, simulated, and at least ten
        times the experiment's span.  An estimate says where the steady
        state had not been reached at its end.
    """

    parameters: Mapping[str, float | str] = field(default_factory=dict)
    reset: Sequence[str] = ()
    duration: float | None = None

    def __post_init__(self) -> None:
        where = "Preequilibration"
        object.__setattr__(self, "parameters",
                           MappingProxyType(_checked_parameters(self.parameters, where)))
        if isinstance(self.reset, str):
            object.__setattr__(self, "reset", (self.reset,))
        object.__setattr__(self, "reset", tuple(str(r) for r in self.reset))
        if self.duration is not None:
            try:
                d = float(self.duration)
            except (TypeError, ValueError):
                raise ValueError(f"{where}: `duration` must be a positive number, got "
                                 f"{self.duration!r}") from None
            if not np.isfinite(d) or d <= 0:
                raise ValueError(f"{where}: `duration` must be positive and finite, got "
                                 f"{self.duration!r}")
            object.__setattr__(self, "duration", d)

    def __reduce__(self) -> Any:  # the mapping proxy does not pickle
        return (Preequilibration, (dict(self.parameters), self.reset, self.duration))


def _checked_sigma(sigma: Any, y: np.ndarray, where: str) -> np.ndarray:
    """``sigma`` shaped like ``y``: positive and finite where ``y`` is measured,
    NaN where it is not (a ValueError naming the row and column otherwise)."""
    try:
        s = np.array(sigma, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: `sigma` must be an array of numbers shaped like `y`") from None
    if s.ndim == 1 and y.shape[1] == 1:
        s = s[:, None]
    if s.shape != y.shape:
        raise ValueError(f"{where}: `sigma` must have the shape of `y`, {y.shape}, got {s.shape}")
    measured = np.isfinite(y)
    given = np.any(np.isfinite(s), axis=0)[None, :]  # a column all NaN: none for that output
    with np.errstate(invalid="ignore"):
        bad = measured & given & ~(np.isfinite(s) & (s > 0))
    if np.any(bad):
        i, k = np.argwhere(bad)[0]
        raise ValueError(
            f"{where}: `sigma` must be positive and finite where `y` is measured; "
            f"sigma[{i}, {k}] = {s[i, k]} (sample {i}, output column {k}, y = {y[i, k]:g}); "
            f"{int(bad.sum())} such value(s)")
    s[~measured] = np.nan
    s.setflags(write=False)
    return s


def per_experiment_labels(experiments: Sequence[Experiment]) -> list[str]:
    """Each experiment's label in the names ``per_experiment`` makes,
    ``NAME[label]``: its name; where a name repeats (two experiments must not
    share their parameter), ``"name i"`` with its position ``i``, as
    ``estimate`` renames them, or the position alone for the default name
    (a subject ID given twice made every subject's label its position)."""
    names = [e.name for e in experiments]
    return [n if names.count(n) == 1 else str(i) if n == DEFAULT_NAME else f"{n} {i}"
            for i, n in enumerate(names)]


#: what a shape error of ``y`` or ``u`` adds (a flow at 500 Hz beside a
#: pressure at 250 Hz was told the shapes, not the way)
_RATES_HINT = ("; one row per time of t: signals sampled at other rates go on the union of "
               "their times, NaN where an output was not sampled, the inputs there too (or "
               "as a callable), docs/problem_statement.md 'Logs at several rates'")

#: the name of an experiment not given one
DEFAULT_NAME = "experiment"


class Experiment:
    """Measurements of the model's outputs in one experiment.

    Parameters
    ----------
    t : array_like, shape (N,)
        Sample times, increasing and finite; any spacing.  A time repeated
        holds replicates (several measurements at one time, a row each).
        With a ``preequilibration``, samples at ``t0`` alone are measurements
        of the steady state (PEtab's ``time = inf``).
    y : array_like, shape (N, ny), or None
        Measured outputs, one row per sample time.  ``NaN`` marks a missing
        value; ``inf`` is an error.  A 1-D array is one output.  None: a run
        with no data, to predict (``pc.prediction_band(res, experiment)``).
        A table (a pandas DataFrame) is checked by its column labels: named
        as the model's outputs, in their order (other names are refused,
        where not a table's default labels 0, 1, ...).
    u : callable or array_like, optional
        Inputs.  A callable ``u(t) -> array (nu,)`` of time, or an array of
        shape ``(N, nu)`` of values at the sample times, held between them
        as ``u_interpolation`` says.  Omit when the model has no inputs.  A
        callable with an attribute ``vectorized = True`` is called once with
        an array of times and returns shape ``(len(times), nu)`` (as
        ``scipy.integrate.solve_ivp``'s ``vectorized``).
    x0 : array_like, shape (nx,), optional
        Initial guess of the state at ``t0`` (or its known value when
        estimating with ``estimate_x0=False``).  When omitted, states that are
        outputs take the first measurement and the rest start at zero.
    name : str, optional
        Used in messages, files and plots.
    t0 : float, optional
        Start time of the experiment (where ``x0`` holds); default ``t[0]``.
        Must not be later than the first sample.
    u_interpolation : {"linear", "previous"} or sequence of them, optional
        How sampled inputs (an array ``u``) go between samples: interpolated
        linearly (the default, as ``numpy.interp``; right for samples of a
        smooth signal, with an error of second order in the sample spacing)
        or held (``"previous"``, zero-order hold: right for a staircase, such
        as a digital controller's output: where every input is held and
        ``breakpoints`` are not given, they are the samples at which an input
        changes value, so that no interval straddles a jump).  Holding samples of a smooth
        signal delays it by half a sample on average, which the parameters
        absorb without a visible misfit: choose ``"previous"`` only for a
        true staircase.  A list gives one per input column, for a staircase
        beside smooth signals (a feed held by a pump controller and a
        temperature ramp: ``["previous", "linear"]``).  Ignored for a
        callable.  Left unset on samples that look like a staircase
        (:func:`held_input_columns`), a fit says so.
    breakpoints : array_like, optional
        Times at which the inputs jump.  Picard intervals and simulation
        segments start at them, so no interval straddles a jump (a jump
        inside an interval is smeared by the interpolating polynomial).
        Default: none, or where every sampled input is held
        (``u_interpolation="previous"``), the samples at which one changes
        value (a thruster record of 15 000 samples with 29 jumps: 150
        intervals and 24 s, where ``breakpoints=t`` made 15 000 and 378 s).
    sigma : array_like, shape (N, ny), optional
        Each measurement's noise standard deviation (PEtab's numeric
        ``noiseParameters``): positive and finite wherever ``y`` is measured,
        anything (``NaN``) where it is missing; a column all ``NaN`` gives
        none for that output.  Used by
        ``estimate(noise=pc.Noise(sigma="data"))``, the default for outputs
        that have them; with an estimated sigma they are relative (their scale
        estimated).  A 1-D array is one output.
    parameters : mapping of str to float or str, optional
        This experiment's values of model parameters (PEtab's condition
        table): a number makes the parameter a constant of this experiment;
        a name makes it an estimated parameter of that name (``"bias"`` ->
        ``"bias_run2"``: a bias per maneuver; one name in several
        experiments is one parameter).  Unlisted parameters are the shared
        ones.
    noise_parameters : mapping of str to float or str, optional
        This experiment's values of noise parameters (PEtab's per-measurement
        ``noiseParameters``): a noise parameter's name (``pc.Noise(sigma=
        "s")``, a formula's parameter, or ``"sigma_<output>"`` of an output
        whose sigma is estimated) mapped to another parameter's name (a noise
        level of this experiment's own) or to a number (known here).
    preequilibration : Preequilibration, optional
        The experiment starts from the steady state its system settles to
        before ``t0`` (PEtab's preequilibration condition): the parameters
        while it settles, the states that restart at ``t0``.

    Raises
    ------
    ValueError
        On wrong shapes, non-increasing or non-finite times, ``inf`` in the
        data, naming the experiment and the field.
    """

    # the fields added after the first release, for an Experiment pickled by an
    # older version (a process pool's, a Dask worker's)
    _sigma: np.ndarray | None = None
    _parameters: Mapping[str, float | str] = MappingProxyType({})
    _noise_parameters: Mapping[str, float | str] = MappingProxyType({})
    _preequilibration: Preequilibration | None = None

    def __init__(
        self,
        t: Any,
        y: Any,
        u: InputSpec = None,
        x0: Any = None,
        name: str | None = None,
        *,
        t0: float | None = None,
        u_interpolation: Literal["previous", "linear"] | Sequence[str] | None = None,
        breakpoints: Any = None,
        sigma: Any = None,
        parameters: Mapping[str, float | str] | None = None,
        noise_parameters: Mapping[str, float | str] | None = None,
        preequilibration: Preequilibration | None = None,
    ) -> None:
        self._name = DEFAULT_NAME if name is None else str(name)
        where = f"Experiment {self._name!r}"
        if np.asarray(t).dtype.kind in ("M", "m"):  # dates: 1.6e15 us since 1970
            raise ValueError(dated_times(where, np.asarray(t).dtype))
        try:
            t_arr = np.asarray(t, dtype=float)
        except (TypeError, ValueError):
            try:  # date strings, datetime.date objects: as dates
                dated = np.asarray(t, dtype="datetime64")
            except (TypeError, ValueError):
                raise ValueError(f"{where}: `t` must be an array of numbers") from None
            raise ValueError(dated_times(where, dated.dtype) + "; as strings or date objects, "
                             "np.asarray(t, dtype='datetime64') makes them dates first") from None
        if t_arr.ndim != 1:
            raise ValueError(f"{where}: `t` must be 1-dimensional, got shape {t_arr.shape}")
        # one time (replicates at it, too) is enough after an earlier t0 (a PEtab
        # condition measured only at t = 10, from t = 0)
        later_t0 = (t0 is not None and t_arr.size > 0 and np.isfinite(float(t0))
                    and np.all(np.isfinite(t_arr)) and float(t0) < float(np.min(t_arr)))
        # measured at t0 only after a preequilibration: at the steady state
        later_t0 = later_t0 or (preequilibration is not None and t_arr.size > 0)
        if t_arr.size < 2 and not later_t0:
            raise ValueError(f"{where}: `t` needs at least 2 sample times (or one after an "
                             f"earlier `t0`), got {t_arr.size}")
        if not np.all(np.isfinite(t_arr)):
            bad = int(np.flatnonzero(~np.isfinite(t_arr))[0])
            raise ValueError(f"{where}: `t` must be finite; t[{bad}] = {t_arr[bad]}"
                             + _STEADY_STATE_HINT * bool(np.isposinf(t_arr[bad])))
        steps = np.diff(t_arr)
        if np.any(steps < 0):
            bad = int(np.flatnonzero(steps < 0)[0])
            raise ValueError(
                f"{where}: `t` must be increasing (a time repeated for replicates); "
                f"t[{bad + 1}] = {t_arr[bad + 1]} comes before t[{bad}] = {t_arr[bad]}")
        if np.unique(t_arr).size < 2 and not later_t0:
            raise ValueError(f"{where}: `t` needs at least 2 distinct sample times (or one "
                             "after an earlier `t0`)")
        # a table's column labels (a pandas DataFrame's), checked against the
        # model's output names by check(): its columns are taken in order
        labels = getattr(y, "columns", None)
        self._y_columns: tuple[str, ...] | None = (
            tuple(str(c) for c in labels) if labels is not None else None)
        try:
            y_arr = np.empty((t_arr.size, 0)) if y is None else np.asarray(y, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: `y` must be an array of numbers (NaN for missing)") from None
        if y_arr.ndim == 1:
            y_arr = y_arr[:, None]
        if y_arr.ndim != 2 or y_arr.shape[0] != t_arr.size:
            raise ValueError(f"{where}: `y` must have shape (len(t), ny) = ({t_arr.size}, "
                             f"ny), got {y_arr.shape}" + _RATES_HINT * (y_arr.ndim == 2))
        if np.any(np.isinf(y_arr)):
            i, k = np.argwhere(np.isinf(y_arr))[0]
            raise ValueError(f"{where}: `y` contains inf at row {i}, column {k}; use NaN "
                             "for a missing value")
        #: a run with no data (y None), to predict: pc.prediction_band's new run
        self._predict_only = y_arr.shape[1] == 0
        if not np.any(np.isfinite(y_arr)) and not self._predict_only:
            raise ValueError(f"{where}: `y` has no finite measurement")
        #: whether t0 was given (the clock otherwise starts at the first sample)
        self._t0_given = t0 is not None
        if t0 is None:
            t0_val = float(t_arr[0])
        else:
            t0_val = float(t0)
            if not np.isfinite(t0_val) or t0_val > t_arr[0]:
                raise ValueError(f"{where}: `t0` = {t0} must be finite and not later than "
                                 f"the first sample time {t_arr[0]}")
        if x0 is not None:
            x0_arr = np.asarray(x0, dtype=float).ravel()
            if not np.all(np.isfinite(x0_arr)):
                raise ValueError(f"{where}: `x0` must be finite, got {x0_arr} (a state whose "
                                 "start is unknown takes a guess here, estimated unless "
                                 "estimate_x0=[...] holds it)")
        else:
            x0_arr = None
        #: whether the hold was chosen (a fit notes a staircase read linearly by default)
        self._u_interpolation_given = u_interpolation is not None
        u_interpolation = check_input_interpolation(
            "linear" if u_interpolation is None else u_interpolation, where)
        if u is not None and not callable(u):
            try:
                u_arr = np.asarray(u, dtype=float)
            except (TypeError, ValueError):
                raise ValueError(
                    f"{where}: `u` must be a callable of time or an array of shape "
                    "(len(t), nu)"
                ) from None
            if u_arr.ndim == 1:
                u_arr = u_arr[:, None]
            if u_arr.ndim != 2 or u_arr.shape[0] != t_arr.size:
                raise ValueError(
                    f"{where}: `u` as an array must have shape (len(t), nu) = "
                    f"({t_arr.size}, nu), got {u_arr.shape}" + _RATES_HINT * (u_arr.ndim == 2)
                )
            if not np.all(np.isfinite(u_arr)):
                rows, cols = np.nonzero(~np.isfinite(u_arr))
                times = t_arr[np.unique(rows)]
                shown = ", ".join(f"{v:g}" for v in times[:5]) + (", ..." if times.size > 5
                                                                  else "")
                raise ValueError(
                    f"{where}: `u` must be finite; its column(s) "
                    f"{sorted(set(cols.tolist()))} (counted from 0) are not finite at "
                    f"{times.size} time(s): t = {shown} (an input "
                    "cannot be missing: fill the gap, or cut the record there)")
            same_time = np.flatnonzero(np.diff(t_arr) == 0)
            differ = same_time[np.any(u_arr[same_time] != u_arr[same_time + 1], axis=1)]
            if differ.size:
                i = int(differ[0])
                # (a cycler logs two rows at a step: before and after it)
                raise ValueError(f"{where}: `u` differs between the replicates at t = "
                                 f"{t_arr[i]:g} (rows {i} and {i + 1}); one time has one input: "
                                 "where the input steps there (a logger's rows before and "
                                 "after the step), keep the later row, or give the input as a "
                                 "function of time with the step time in breakpoints=")
            u = u_arr
        if breakpoints is None:
            bp = np.zeros(0)
        else:
            try:
                bp = np.unique(np.asarray(breakpoints, dtype=float).ravel())
            except (TypeError, ValueError):
                raise ValueError(f"{where}: `breakpoints` must be an array of times") from None
            if not np.all(np.isfinite(bp)):
                raise ValueError(f"{where}: `breakpoints` must be finite")
        #: no breakpoints given and every sampled input held: they are its jumps
        self._breakpoints_held = (breakpoints is None and isinstance(u, np.ndarray)
                                  and self._u_interpolation_given
                                  and not any(is_linear(u_interpolation, k)
                                              for k in range(u.shape[1])))
        if self._breakpoints_held:
            bp = held_jumps(t_arr, u)
        self._breakpoints = bp[(bp > t0_val) & (bp < t_arr[-1])]
        self._t = t_arr
        self._t.setflags(write=False)
        self._y = y_arr
        self._y.setflags(write=False)
        self._u = u
        self._x0 = x0_arr
        self._t0 = t0_val
        self._u_interpolation = u_interpolation
        self._sigma = None if sigma is None else _checked_sigma(sigma, y_arr, where)
        self._parameters = _checked_parameters(parameters, where)
        self._noise_parameters = _checked_parameters(noise_parameters, where,
                                                     "noise_parameters")
        if preequilibration is not None and not isinstance(preequilibration, Preequilibration):
            raise ValueError(f"{where}: `preequilibration` must be a pc.Preequilibration, got "
                             f"{type(preequilibration).__name__}")
        self._preequilibration = preequilibration

    # ------------------------------------------------------------------ attributes
    @property
    def name(self) -> str:
        """Name of the experiment."""
        return self._name

    @property
    def t(self) -> np.ndarray:
        """Sample times (read-only array)."""
        return self._t

    @property
    def y(self) -> np.ndarray:
        """Measured outputs, shape (N, ny), NaN where missing (read-only)."""
        return self._y

    @property
    def u(self) -> InputSpec:
        """The inputs as given: a callable, an array (N, nu), or None."""
        return self._u

    @property
    def u_interpolation(self) -> str | tuple[str, ...]:
        """Hold of an array ``u`` between sample times: ``"linear"`` or
        ``"previous"`` for every input, or one per input."""
        return self._u_interpolation

    @property
    def x0(self) -> np.ndarray | None:
        """Initial-state guess (or known value), or None."""
        return None if self._x0 is None else self._x0.copy()

    @property
    def sigma(self) -> np.ndarray | None:
        """Each measurement's noise standard deviation (``NaN`` where ``y`` is
        missing), or ``None`` where not given."""
        return self._sigma

    def value_weights(self) -> np.ndarray:
        """Each value's own weight ``1 / sigma_i^2``, shaped like ``y``: 1 where no
        ``sigma`` is given (none at all, or a column all NaN), and where ``y``
        is missing."""
        if self._sigma is None:
            return np.ones_like(self._y)
        with np.errstate(divide="ignore", invalid="ignore"):
            w = 1.0 / self._sigma ** 2
        return np.where(np.isfinite(w), w, 1.0)

    @property
    def parameters(self) -> dict[str, float | str]:
        """This experiment's values of model parameters (numbers or names)."""
        return dict(self._parameters)

    @property
    def noise_parameters(self) -> dict[str, float | str]:
        """This experiment's values of noise parameters (numbers or names)."""
        return dict(self._noise_parameters)

    @property
    def preequilibration(self) -> Preequilibration | None:
        """How the experiment settles before ``t0``, or None (it starts at ``x0``)."""
        return self._preequilibration

    @property
    def t0(self) -> float:
        """Start time of the experiment."""
        return self._t0

    @property
    def t_end(self) -> float:
        """Last sample time."""
        return float(self._t[-1])

    @property
    def breakpoints(self) -> np.ndarray:
        """Times inside (t0, t_end) at which the inputs jump."""
        return self._breakpoints.copy()

    @property
    def n_samples(self) -> int:
        """Number of sample times."""
        return self._t.size

    # ------------------------------------------------------------------ inputs
    def inputs(self, times: Any, nu: int) -> np.ndarray:
        """Input values at the given times.

        Parameters
        ----------
        times : array_like, shape (M,)
        nu : int
            Number of inputs the model expects.

        Returns
        -------
        ndarray, shape (M, nu)

        Raises
        ------
        ValueError
            If the input callable returns the wrong length or non-finite values.
        """
        return evaluate_inputs(self._u, times, nu, f"Experiment {self._name!r}",
                               self._t, self._u_interpolation)

    # ------------------------------------------------------------------ checks
    def check(self, model: Model, *, predicting: bool = False) -> None:
        """Check this experiment against a model's sizes (``predicting``: a run
        to predict, whose data are not used).

        Raises
        ------
        ValueError
            Naming the experiment and the field that does not fit.
        """
        where = f"Experiment {self._name!r}"
        if self._predict_only and not predicting and model.ny:
            raise ValueError(f"{where}: `y` is None, a run to predict (pc.prediction_band"
                             "(res, experiment)); to fit it, give its measurements")
        if self._y.shape[1] != model.ny and not predicting:
            raise ValueError(
                f"{where}: `y` has {self._y.shape[1]} column(s) but model "
                f"{model.name!r} has ny = {model.ny} output(s) {list(model.y_names)}"
            )
        columns = getattr(self, "_y_columns", None)
        if columns is not None and len(columns) == model.ny:
            misplaced = [c for k, c in enumerate(columns)
                         if c in model.y_names and model.y_names[k] != c]
            if misplaced:
                raise ValueError(
                    f"{where}: `y` is a table with columns {list(columns)}, taken in that "
                    f"order as model {model.name!r}'s outputs {list(model.y_names)}: "
                    f"{misplaced} would be fitted as other outputs; pass "
                    f"y=table[{list(model.y_names)}]")
            # labels of other names (not a table's default 0, 1, ...): a column
            # 'log10V' was fitted as the model's 'V' in copies/mL, with no word
            foreign = [c for c in columns if c not in model.y_names and not c.isdigit()]
            if foreign and not predicting:
                raise ValueError(
                    f"{where}: `y` is a table with columns {list(columns)}, which are not "
                    f"model {model.name!r}'s outputs {list(model.y_names)}: name its columns "
                    "as the outputs (table.rename(columns={...})), or pass y=table.to_numpy() "
                    "to take them in order")
        if self._x0 is not None and self._x0.size != model.nx:
            raise ValueError(f"{where}: `x0` has {self._x0.size} entries but model "
                             f"{model.name!r} has nx = {model.nx} states")
        if model.nu == 0 and self._u is not None:
            raise ValueError(f"{where}: `u` was given but model {model.name!r} has no inputs")
        self.inputs([self._t0, self.t_end], model.nu)

    @classmethod
    def from_measurements(cls, times: Any, outputs: Any, values: Any,
                          y_names: Any, *, sigma: Any = None, **kwargs: Any) -> Experiment:
        """An experiment from a measurement table in long form (PEtab's): one
        row per measured value, each with its time, output name and value
        (and ``sigma``), in any order; replicates (one output measured
        several times at one time) and outputs at their own times need no
        padding.

        Parameters
        ----------
        times, outputs, values : array_like, shape (M,)
            Each measurement's time, output name (one of ``y_names``) and value.
        y_names : sequence of str
            The model's output names, in its order (``model.y_names``).
        sigma : array_like, shape (M,), optional
            Each measurement's noise standard deviation.
        **kwargs
            The other arguments of :class:`Experiment` (``u`` as a callable:
            sampled inputs belong to the wide form).

        Raises
        ------
        ValueError
            An output name that is not in ``y_names`` (naming the row), arrays of
            different lengths, a sampled ``u``.
        """
        where = f"Experiment {kwargs.get('name') or 'experiment'!r}"
        names = [str(n) for n in y_names]
        t = np.asarray(times, float).ravel()
        out = [str(o) for o in np.asarray(outputs, object).ravel()]
        v = np.asarray(values, float).ravel()
        s = None if sigma is None else np.asarray(sigma, float).ravel()
        if not (t.size == len(out) == v.size) or (s is not None and s.size != t.size):
            raise ValueError(f"{where}: `times`, `outputs`, `values` (and `sigma`) must have "
                             f"one entry per measurement, got {t.size}, {len(out)}, {v.size}"
                             + ("" if s is None else f", {s.size}"))
        not_finite = np.flatnonzero(~np.isfinite(t))
        if not_finite.size:  # named by its row here, before the rows are sorted by time
            raise ValueError(f"{where}: `times` must be finite; measurement "
                             f"{int(not_finite[0])} ({out[not_finite[0]]!r}) is at t = "
                             f"{t[not_finite[0]]}" + _STEADY_STATE_HINT * bool(
                                 np.isposinf(t[not_finite[0]])))
        unknown = [(i, o) for i, o in enumerate(out) if o not in names]
        if unknown:
            i, o = unknown[0]
            raise ValueError(f"{where}: measurement {i} is of output {o!r}, which is not one of "
                             f"{names}")
        if kwargs.get("u") is not None and not callable(kwargs["u"]):
            raise ValueError(f"{where}: with a measurement table, give `u` as a callable of "
                             "time (sampled inputs need the wide form, Experiment(t, y, u))")
        # one row per (time, replicate): the r-th measurement of an output at a
        # time goes to that time's r-th row (in the table's order)
        column = np.array([names.index(o) for o in out], dtype=int)
        times_u, group = np.unique(t, return_inverse=True)
        order = np.lexsort((np.arange(t.size), column, group))
        key = group[order] * len(names) + column[order]
        first = np.r_[0, np.flatnonzero(np.diff(key)) + 1]
        rank = np.empty(t.size, dtype=int)
        rank[order] = np.arange(t.size) - np.repeat(first, np.diff(np.r_[first, t.size]))
        per_time = np.zeros(times_u.size, dtype=int)
        np.maximum.at(per_time, group, rank + 1)
        start = np.r_[0, np.cumsum(per_time)[:-1]]
        row = start[group] + rank
        n_rows = int(per_time.sum())
        rows_y = np.full((n_rows, len(names)), np.nan)
        rows_y[row, column] = v
        rows_s = None
        if s is not None:
            rows_s = np.full((n_rows, len(names)), np.nan)
            rows_s[row, column] = s
        return cls(np.repeat(times_u, per_time), rows_y, sigma=rows_s, **kwargs)

    def with_x0(self, x0: Any) -> Experiment:
        """The same experiment with ``x0`` as its initial state (known, or the
        start of an estimate): for example a fit's estimated ``res.x0[i]``."""
        return self.replaced(x0=x0)

    def replaced(self, **changes: Any) -> Experiment:
        """The same experiment with some of its constructor's arguments
        changed (``y``, ``sigma``, ``x0``, ...)."""
        hold = self._u_interpolation if self._u_interpolation_given else None
        args: dict[str, Any] = dict(t=self._t, y=self._y, u=self._u, x0=self._x0,
                                    name=self._name, t0=self._t0, u_interpolation=hold,
                                    breakpoints=(None if self._breakpoints_held
                                                 else self._breakpoints), sigma=self._sigma,
                                    parameters=self._parameters,
                                    noise_parameters=self._noise_parameters,
                                    preequilibration=self._preequilibration)
        args.update(changes)
        out = Experiment(**args)
        if "y" not in changes:  # the same columns: the same labels
            out._y_columns = getattr(self, "_y_columns", None)
        if "t0" not in changes:  # the same start, given or not
            out._t0_given = getattr(self, "_t0_given", True)
        return out

    def staircase_inputs(self) -> list[int]:
        """Columns of a sampled ``u`` read linearly by default although they look
        like a staircase (:func:`held_input_columns`); empty where the hold was
        chosen, or ``u`` is a callable."""
        if self._u_interpolation_given or not isinstance(self._u, np.ndarray):
            return []
        _, first = np.unique(self._t, return_index=True)  # replicates: one row per time
        return held_input_columns(self._u[first])

    def held_jumps_off_breakpoints(self) -> list[int]:
        """Columns of a sampled ``u`` held between samples (``"previous"``)
        whose value changes at a sample time that is no breakpoint: the held
        input jumps there, inside an interval (a fit notes it)."""
        if not isinstance(self._u, np.ndarray) or self._u.shape[0] < 2:
            return []
        _, first = np.unique(self._t, return_index=True)
        t, u = self._t[first], self._u[first]
        span = max(1.0, float(np.abs(t).max()))
        given = self._breakpoints
        out = []
        for k in range(u.shape[1]):
            if is_linear(self._u_interpolation, k):
                continue
            jumps = held_jumps(t, u[:, k:k + 1])
            jumps = jumps[(jumps > self._t0) & (jumps < t[-1])]  # inside the record
            if jumps.size == 0:
                continue
            if given.size == 0:
                out.append(k)
                continue
            # the nearest breakpoint of each jump (sorted: no N x N table on a
            # 20 000-sample record)
            at = np.clip(np.searchsorted(given, jumps), 1, given.size) - 1
            nearest = np.minimum(np.abs(jumps - given[at]),
                                 np.abs(jumps - given[np.minimum(at + 1, given.size - 1)]))
            if not np.all(nearest <= 1e-9 * span):
                out.append(k)
        return out

    def kinks_between_breakpoints(self) -> bool:
        """Whether ``u`` is samples read linearly with no breakpoints: the
        interpolant kinks at every sample, inside the Picard intervals (an
        uncertified fit names these experiments)."""
        if not (isinstance(self._u, np.ndarray) and self._breakpoints.size == 0
                and self._u.shape[0] > 2):
            return False
        step = np.diff(self._t) > 0  # (replicates share a time)
        for k in range(self._u.shape[1]):
            if not is_linear(self._u_interpolation, k):
                continue
            # a constant or a ramp does not kink (a PEtab condition's constants,
            # columns of one value, were named as kinking)
            col = self._u[:, k]
            slope = np.diff(col)[step] / np.diff(self._t)[step]
            if slope.size > 1 and np.ptp(slope) > 1e-12 * (np.max(np.abs(slope)) + 1e-300):
                return True
        return False

    def input_jumps(self, nu: int) -> list[float]:
        """Times where a callable ``u`` jumps away from the breakpoints
        (:func:`~picard_casadi.inputs.callable_jumps`); empty for sampled
        inputs."""
        if nu == 0 or not callable(self._u):
            return []
        return callable_jumps(lambda times: self.inputs(times, nu), self.t0, self.t_end,
                              self.n_samples, self._breakpoints)

    def x0_guess(self, model: Model, p: Any = None) -> np.ndarray:
        """The x0 given, or one built from the first measurements.

        States that are outputs take the first finite measurement; with the
        parameters ``p``, a state an output is affine in
        (:attr:`Model.affine_output_states`: ``y = T + bias``) takes the
        value that output has there at ``p``; the others take 0 (a
        temperature read through a sensor's bias started at 0 K, where its
        Arrhenius term had no finite derivative).
        """
        if self._x0 is not None:
            return self._x0.copy()
        x0 = np.zeros(model.nx)
        first = {}
        for k in range(min(model.ny, self._y.shape[1])):  # (a run to predict has none)
            ok = np.flatnonzero(np.isfinite(self._y[:, k]))
            if ok.size:
                first[k] = ok[0]
        for k, i in enumerate(model.output_state_index):
            if i is not None and k in first:
                x0[i] = model.output_as_state(k, self._y[first[k], k])
        if p is None:
            return x0
        taken = {i for k, i in enumerate(model.output_state_index) if k in first}
        for k, i in enumerate(model.affine_output_states):
            if i is None or i in taken or k not in first:
                continue
            t = self._t[first[k]]
            u = self.inputs([t], model.nu)[0]
            with np.errstate(all="ignore"):  # (on the linear scale: exp of a log output)
                x0[i] = 0.0
                d = float(model.output_as_state(k, model.output_value(t, x0, p, u)[k]))
                x0[i] = 1.0
                c = float(model.output_as_state(k, model.output_value(t, x0, p, u)[k])) - d
                value = ((float(model.output_as_state(k, self._y[first[k], k])) - d) / c
                         if c != 0.0 else np.nan)
            x0[i] = value if np.isfinite(value) else 0.0
            taken.add(i)
        return x0

    def __repr__(self) -> str:
        return (
            f"Experiment(name={self._name!r}, samples={self.n_samples}, "
            f"t=[{self._t0:g}, {self.t_end:g}], ny={self._y.shape[1]})"
        )
