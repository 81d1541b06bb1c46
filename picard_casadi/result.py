"""The result of :func:`~picard_casadi.estimate`, and its JSON form.

The JSON is strict (RFC 8259): a non-finite float is written as the string
``"inf"``, ``"-inf"`` or ``"nan"`` and read back as a float in every numeric
field (estimate, history, timings, settings, starts).  Reading names the
file and what is wrong with it (not JSON, truncated, a missing or malformed
field).  Writing to a path is atomic (a temporary file, then a rename).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .analysis.fit_check import is_fit_note
from .analysis.significant_digits import digits_beside, shown
from .analysis.prediction_band import new_run_sensitivities
from .experiment import Experiment

__all__ = ["EstimationResult"]

FORMAT_VERSION = 1

_NONFINITE = {"inf": math.inf, "+inf": math.inf, "infinity": math.inf, "+infinity": math.inf,
              "-inf": -math.inf, "-infinity": -math.inf, "nan": math.nan}
REQUIRED = ("p", "x0", "success", "status", "message", "iterations", "objective",
            "weighted_objective", "continuity_gap", "fixed_point_residual", "wall_time")


def _check_lengths(d: dict[str, Any], source: str) -> None:
    """ValueError where a loaded result's arrays disagree in size with ``p``,
    ``x_names`` or ``y_names`` (a short ``p_std`` made ``summary()`` raise
    IndexError; an ``x0`` of the wrong length loaded silently)."""
    n = int(d["p"].size)
    shapes = {"p_std": (n,), "p_true": (n,), "p_ci": (n, 2), "p_cov": (n, n),
              "p_corr": (n, n), "p_scaled": (n,), "p_scaled_std": (n,)}
    for k, shape in shapes.items():
        v = d.get(k)
        if v is not None and np.shape(v) != shape:
            raise ValueError(f"{source}: field {k!r} has shape {np.shape(v)}, the estimate "
                             f"'p' needs {shape}")
    for k in ("p_names", "p_scaled_names"):
        names = d.get(k)
        if names and len(names) != n:
            raise ValueError(f"{source}: field {k!r} names {len(names)} parameters, 'p' has {n}")
    nx = len(d["x_names"]) if d.get("x_names") else (d["x0"][0].size if d["x0"] else 0)
    for k in ("x0", "x0_std"):
        for i, v in enumerate(d.get(k) or []):
            if np.shape(v) != (nx,):
                raise ValueError(f"{source}: field {k!r}[{i}] has {np.size(v)} entries, the "
                                 f"model has {nx} states")
    if d.get("experiment_names") and len(d["experiment_names"]) != len(d["x0"]):
        raise ValueError(f"{source}: {len(d['experiment_names'])} experiment names for "
                         f"{len(d['x0'])} initial states ('x0')")
    ny = len(d["y_names"]) if d.get("y_names") else None
    for k in ("noise_sigma", "weights"):
        v = d.get(k)
        if ny is not None and v is not None and np.size(v) not in (0, ny):
            raise ValueError(f"{source}: field {k!r} has {np.size(v)} entries, the model has "
                             f"{ny} outputs")


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return v if math.isfinite(v) else str(v)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _float(value: Any) -> float:
    """A JSON number, or one of the strings ``_jsonable`` writes for inf and NaN."""
    if isinstance(value, str):
        if value.strip().lower() in _NONFINITE:
            return _NONFINITE[value.strip().lower()]
        raise ValueError(f"{value!r} is not a number")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{value!r} is not a number")
    return float(value)


def _restore(value: Any) -> Any:
    """Non-finite floats written as strings back to floats, in nested lists and dicts."""
    if isinstance(value, str) and value.strip().lower() in _NONFINITE:
        return _NONFINITE[value.strip().lower()]
    if isinstance(value, list):
        return [_restore(v) for v in value]
    if isinstance(value, dict):
        return {k: _restore(v) for k, v in value.items()}
    return value


def _array(value: Any) -> np.ndarray:
    arr = np.asarray(_restore(value), dtype=float)
    return arr


@dataclass
class EstimationResult:
    """What :func:`~picard_casadi.estimate` returns.

    Attributes
    ----------
    p : ndarray (np,)
        The estimate.
    x0 : list of ndarray (nx,)
        Estimated (or known) initial state of each experiment.
    success : bool
        Whether the method met its convergence test.  ``message`` says why not.
    status : str
        ``"converged"``, ``"max_iter"``, ``"step_failed"``, ``"diverged"``,
        ``"stopped"`` (by the callback), ``"stalled"`` (IPOPT's infeasible
        iterate stopped moving, or ``picard-gn``'s objective stopped falling
        with the continuity gaps open), ``"not_certified"``, ``"breakdown"``,
        ``"plateau"`` (no parameter moves the fit there),
        ``"noise_not_positive"`` (a noise formula's sigma is 0 at a measured
        value), ``"output_not_positive"`` (a log-normal output is 0 or
        negative at a measured value) or the solver's own status (IPOPT's
        ``return_status``).
    message : str
    iterations : int
    objective : float
        ``ssr / (2 N)``: the unweighted data misfit
        ``1/(2N) sum_i |y_i - g(t_i, x(t_i), p)|^2`` (``N`` sample times over
        all experiments, missing values skipped), the paper's loss.
    weighted_objective : float
        ``weighted_ssr / (2 N)``.
    ssr : float
        The plain sum of squared residuals ``sum_i |y_i - g_i|^2`` over every
        measured value (what papers and benchmark suites quote).  Of the
        model's own solution from the estimated ``x0`` and ``p`` (an accurate
        integration) when the discretisation certificate holds, else of the
        trajectory the method fitted (``certificate["ssr_fitted"]`` is that
        one's always).
    weighted_ssr : float
        ``sum_i sum_k w_k (y_ik - g_ik)^2`` with the weights used.
    n_samples, n_measurements : int
        Sample times ``N`` where at least one output is measured (the objective's
        ``N``), and measured values.
    discretisation_error : float
        Largest difference between the fitted outputs and the model's own
        (accurately integrated from the estimated ``x0`` with the estimated
        ``p``) over the samples, in units of each output's noise level; NaN
        where not certified (a run that did not converge).
    certificate : dict or None
        The discretisation certificate (:mod:`picard_casadi.analysis.certificate`):
        ``passed``, ``discretisation_error``, ``parameter_shift`` (estimated
        distance to the ODE's optimum in standard errors), ``p_shift``,
        ``p_shift_se``, ``noise_level``, ``ssr_model``, ``weighted_ssr_model``,
        ``ssr_fitted``, ``worst``, ``stopped_short`` (distance from the
        method's answer to the optimum of what it fitted, in standard errors),
        ``thresholds``, ``message``.
    nllh : float
        Negative log-likelihood of Gaussian noise with its constants, as
        PEtab defines it (``sum 0.5 log(2 pi sigma_k^2) + 0.5 ((y - g) /
        sigma_k)^2`` over the measured values), of the ODE's own solution at
        the estimate (:mod:`picard_casadi.analysis.likelihood`); NaN where the
        run failed (with ``det_R``, ``aic``, ``bic``: no optimum, no likelihood
        to compare).
    noise_sigma : ndarray (ny,) or None
        Each output's noise standard deviation: estimated with the parameters
        (``SSR_k / N_k``, ``settings["noise"] == "estimated"``) or, with given
        weights, ``1 / sqrt(w_k)`` (``"given"``); ``"mixed"`` where some are
        known and some estimated (``settings["noise_model"]`` says which).
        Where values have their own sigma (``Experiment(sigma=...)``), the
        root mean square of theirs (times the estimated scale).  For a
        log-normal output, on the log scale.
    det_R : float
        ``prod_k sigma_k^2``, the output-error method's criterion, where the noise
        was estimated (NaN with given weights).
    aic, bic : float
        ``2 nllh + 2 k`` and ``2 nllh + k log(m)``: ``k`` estimated quantities
        (parameters, initial states, estimated noise levels), ``m`` measured values.
    p_scaled, p_scaled_std : ndarray or None
        Where parameters were estimated on a log scale (or the problem was
        restated: experiment parameters, initial states from parameters),
        the estimate and its standard errors on the estimation scale
        (``log10(k)``); ``p``, ``p_std`` (delta method) and ``p_ci`` (the
        scaled interval's ends transformed) are then on the parameters' own
        scale.  ``None`` otherwise.
    p_scaled_names, p_scales : list of str or None
        Their names (``"log10(k)"``) and scales (``"lin"``, ``"log"``, ``"log10"``).
    continuity_gap : float
        ``max_j |u_j(T) - x_{j+1}|`` in state units (0 for a single interval);
        for shooting, with ``u_j`` its CVODES solution (as its sum of squares).
    fixed_point_residual : float
        Scaled ``max |P u_j - u_j|`` at the end (0 for shooting).
    wall_time : float
        Seconds spent in ``estimate``.
    timings : dict
        Seconds per phase: ``build`` (symbolic graphs and code generation),
        ``guess``, ``solve`` (every mesh's), ``sensitivity`` (the solution's
        exact sensitivities, shared by the certificate and the uncertainty),
        ``certificate`` (the accurate integration), ``uncertainty``.
    history : dict of lists
        Per iteration: objective, misfit, grad_norm, step_norm, gap, ...
    method : str
    settings : dict
        The options the run used (T, n, lam, nodes, scheme, weights, ...) and the
        final mesh: ``intervals``, ``shortest_interval``, ``longest_interval``,
        ``initial_intervals``, ``refinements``.
    weights : ndarray (ny,)
    p_names, x_names, y_names, experiment_names : list of str
    p_true : ndarray or None
        The truth, where a caller knows it (the problem registry).
    p_cov, p_std, p_ci, p_corr : ndarray or None
        Covariance, standard errors, 95 % confidence intervals ``(np, 2)``
        and correlation matrix of ``p`` (see :mod:`picard_casadi.analysis.uncertainty`).
    x0_std : list of ndarray or None
        Standard errors of the estimated initial states.
    warnings : list of str
        What the user should know (near-singular information, fallbacks).
    starts : list of dict
        For ``multistart``: per start, its ``p0`` and estimate ``p`` (as
        ``p``: in the order of ``p_names``, on the parameters' own scale;
        with a parameter table also ``p0_scaled`` and ``p_scaled``, on each
        parameter's ``scale``), ``objective``, ``weighted_objective``,
        ``nllh``, ``success``, ``iterations``, ``message``, ``wall_time``.
    """

    p: np.ndarray
    x0: list[np.ndarray]
    success: bool
    status: str
    message: str
    iterations: int
    objective: float
    weighted_objective: float
    continuity_gap: float
    fixed_point_residual: float
    wall_time: float
    timings: dict[str, float] = field(default_factory=dict)
    history: dict[str, list[float]] = field(default_factory=dict)
    method: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    weights: np.ndarray = field(default_factory=lambda: np.zeros(0))
    p_names: list[str] = field(default_factory=list)
    x_names: list[str] = field(default_factory=list)
    y_names: list[str] = field(default_factory=list)
    experiment_names: list[str] = field(default_factory=list)
    p_true: np.ndarray | None = None
    p_cov: np.ndarray | None = None
    p_std: np.ndarray | None = None
    p_ci: np.ndarray | None = None
    p_corr: np.ndarray | None = None
    x0_std: list[np.ndarray] | None = None
    warnings: list[str] = field(default_factory=list)
    starts: list[dict[str, Any]] = field(default_factory=list)
    ssr: float = float("nan")
    weighted_ssr: float = float("nan")
    n_samples: int = 0
    n_measurements: int = 0
    discretisation_error: float = float("nan")
    certificate: dict[str, Any] | None = None
    nllh: float = float("nan")
    noise_sigma: np.ndarray | None = None
    det_R: float = float("nan")
    aic: float = float("nan")
    bic: float = float("nan")
    p_scaled: np.ndarray | None = None
    p_scaled_std: np.ndarray | None = None
    p_scaled_names: list[str] | None = None
    p_scales: list[str] | None = None
    _predictor: Any = field(default=None, repr=False, compare=False)
    _X: Any = field(default=None, repr=False, compare=False)  # interval starts (J, nx)
    _U: Any = field(default=None, repr=False, compare=False)  # node values (J, nx, K)
    _disc: Any = field(default=None, repr=False, compare=False)  # the final Discretisation
    # (model, experiments) attached by from_json, for predict and profile
    _attached: Any = field(default=None, repr=False, compare=False)
    #: the run's noise models (pc.Noise per output), for a profile that re-fits them
    _noise: Any = field(default=None, repr=False, compare=False)
    #: how the problem was restated (log scales, experiment parameters, x0 expressions)
    _statement: Any = field(default=None, repr=False, compare=False)
    #: (columns, covariance, undetermined directions) of the estimated quantities,
    #: and the output sensitivities' source, for pc.prediction_band
    _covariance: Any = field(default=None, repr=False, compare=False)
    _sensitivities: Any = field(default=None, repr=False, compare=False)
    _model: Any = field(default=None, repr=False, compare=False)  # the user's, unrestated
    #: the model's delays (estimation/delays.py), where it has them
    _delays: Any = field(default=None, repr=False, compare=False)
    #: the run converged where its parameters ran along a flat valley the data
    #: do not bound (estimation/valleys.py): no other run follows it
    _ran_off: bool = field(default=False, repr=False, compare=False)
    #: the run ended in a solve continuing a converged one on a new mesh, stopped
    #: at the default path's limits (estimation/solve_limits.py, continued_solve)
    _continuation_stopped: bool = field(default=False, repr=False, compare=False)

    # ------------------------------------------------------------------ use
    def predict(self, exp_index: int = 0, t: Any = None, *,
                source: str = "simulate", u: Any = None) -> np.ndarray:
        """Model outputs of one experiment with the estimated ``p`` and ``x0``.

        Parameters
        ----------
        exp_index : int, str or Experiment
            Which experiment: its index, or its name; or a run not fitted,
            ``Experiment(t, None, ...)``, as :func:`~picard_casadi.prediction_band`.
        t : array_like, optional
            Times; default the experiment's sample times.
        source : {"simulate", "collocation"}
            ``"simulate"`` integrates the model with CVODES from the estimated
            ``x0``; ``"collocation"`` evaluates the fitted interval solutions
            ``P^n u_j`` (what the estimator fitted; identical up to the
            discretisation error when the continuity gap is zero).
        u : array_like (len(t), nu) or callable, optional
            The inputs past the experiment's data (a forecast), as
            :func:`~picard_casadi.prediction_band` takes them; else held there.

        Returns
        -------
        ndarray (len(t), ny)
        """
        if isinstance(exp_index, Experiment):  # a run not fitted: simulated
            return new_run_sensitivities(self, exp_index, t, derivatives=False)[1]
        if self._predictor is None:
            raise RuntimeError("this result has no model attached (loaded from JSON or a "
                               "pickle); use EstimationResult.from_json(path, model=..., "
                               "experiments=...)")
        if u is not None and self._delays is not None:
            raise ValueError("predict: `u` (inputs past the data) is not available for a "
                             "model with delays; simulate the delayed model instead")
        return self._predictor(self, self._experiment_index(exp_index), t, source,
                               *(() if u is None else (u,)))

    def model_parameters(self, model: Any, constants: dict[str, Any] | None = None,
                         experiment: str | None = None) -> np.ndarray:
        """The model's own parameter vector (``model.p_names``' order) from this
        estimate, for ``pc.simulate`` of a new run: a restated fit's ``p`` has
        its own entries (``per_experiment``'s ``bias[day1]``, experiment
        constants left out), not the model's.

        Parameters
        ----------
        model : Model
        constants : dict, optional
            Values of the run's constants (``{"CAf": 1.0, "bias": 0.0}``): a
            number, or the name of an entry of ``p_names``.
        experiment : str, optional
            A fitted experiment whose own entries (``NAME[experiment]``) to use.

        Raises
        ------
        ValueError
            Naming a model parameter nothing gives a value, and where to give it.
        """
        from .transcription.predict import model_parameter_values

        return model_parameter_values(list(self.p_names), np.asarray(self.p, float), model,
                                      constants, experiment, list(self.experiment_names or []))

    def _experiment_index(self, which: Any) -> int:
        """``predict``'s ``exp_index``: an index, or an experiment's name."""
        names = list(self.experiment_names or [])
        if isinstance(which, str):
            if which not in names:
                raise ValueError(f"exp_index: no experiment is named {which!r}; the "
                                 f"experiments are {names}")
            return names.index(which)
        if isinstance(which, (bool, np.bool_)) or not isinstance(which, (int, np.integer)):
            hint = " (the times go in t=: res.predict(0, t=...))" * (np.ndim(which) > 0)
            raise TypeError(f"exp_index must be an experiment's index (an int) or name, "
                            f"got {type(which).__name__}{hint}")
        if names and not -len(names) <= int(which) < len(names):
            raise ValueError(f"exp_index: {int(which)} is no experiment's index; the fit has "
                             f"{len(names)}, 0 to {len(names) - 1}: {names}")
        return int(which)

    @property
    def relative_error(self) -> float | None:
        """``|p - p_true| / |p_true|`` when the truth is known."""
        if self.p_true is None:
            return None
        return float(np.linalg.norm(self.p - self.p_true) / np.linalg.norm(self.p_true))

    def _solves_note(self) -> str:
        """`` in all (k meshes; w weight rounds)`` where the iterations were spent
        in more than one solve (``max_iter`` in a message is per solve), else ``''``."""
        parts = []
        refinements = int(self.settings.get("refinements", 0) or 0)
        rounds = int(self.settings.get("weight_rounds", 1) or 1)
        if refinements:
            parts.append(f"{refinements + 1} meshes")
        if rounds > 1:
            parts.append(f"{rounds} weight rounds")
        if not parts:
            return ""
        if self.status == "max_iter":
            parts.append("max_iter applies to each solve")
        return f" in all ({'; '.join(parts)})"

    @property
    def fit_flagged(self) -> bool:
        """Whether a converged fit carries a :class:`~picard_casadi.FitWarning`
        (systematically off the data, or a parameter held by its bound): the
        optimiser converged, and the warnings say why the answer may still be
        wrong."""
        return bool(self.success and any(is_fit_note(w) for w in self.warnings))

    def summary(self) -> str:
        """A table of the estimate, with standard errors and truth when known."""
        lines = [
            f"method {self.method}: {'success' if self.success else 'FAILED'} "
            f"({self.status}) after {self.iterations} iterations{self._solves_note()}, "
            f"{self.wall_time:.2f} s"
            + ("; but the fit is flagged: see the warnings below" if self.fit_flagged else ""),
            f"  {self.message}",
            f"  sum of squared residuals SSR = sum (y - g)^2 = {self.ssr:.6g} over "
            f"{self.n_measurements} measurements"
            + (f"; weighted sum w (y - g)^2 = {self.weighted_ssr:.6g}"
               if self.settings.get("weights", "none") != "none" else ""),
            f"  objective SSR / (2 N) = {self.objective:.6g} (N = {self.n_samples} sample "
            f"times); continuity gap {self.continuity_gap:.3g}",
        ]
        lines += self._likelihood_lines()
        mesh = self.settings
        if "intervals" in mesh and "shortest_interval" in mesh:
            lines.append(
                f"  mesh: {mesh['intervals']} intervals of {mesh['shortest_interval']:.3g} to "
                f"{mesh['longest_interval']:.3g}, {mesh.get('nodes', '?')} nodes each, "
                f"{mesh.get('refinements', 0)} refinement(s)")
        if self.certificate is not None:
            c = self.certificate
            lines.append(
                f"  discretisation certificate: {'passed' if c['passed'] else 'FAILED'}; "
                f"error {c['discretisation_error']:.2g} noise levels, shift to the ODE's "
                f"optimum {c['parameter_shift']:.2g} standard errors (thresholds "
                f"{c['thresholds']['discretisation_error']:g}, "
                f"{c['thresholds']['parameter_shift']:g})"
                + (f"; {c['stopped_short']:.2g} standard errors short of the method's own "
                   f"optimum (threshold {c['thresholds']['stopped_short']:g})"
                   if "stopped_short" in c.get("thresholds", {}) else "")
                + (f"; the model's own solution from x0 {c['model_error']:.2g} noise levels "
                   f"off the fit, its objective falling {c['model_short']:.2g} standard "
                   f"errors along its own Gauss-Newton step"
                   if np.isfinite(c.get("model_error", np.nan))
                   and np.isfinite(c.get("model_short", np.nan)) else ""))
        names = self.p_names or [f"p{i}" for i in range(self.p.size)]
        # the name column as wide as the longest name (Epo_degradation_BaF3's)
        width = max([14] + [len(n) + 1 for n in names])
        head = f"  {'parameter':<{width}}{'estimate':>14}"
        if self.p_std is not None:
            head += f"{'std. error':>13}{'95% CI':>28}"
        if self.p_true is not None:
            head += f"{'truth':>12}{'rel. err':>10}"
        lines.append(head)
        fixed = self._fixed()
        row_scales = list(self.p_scales or [])
        for i, name in enumerate(names):
            d = digits_beside(self.p[i], None if self.p_std is None else self.p_std[i])
            row = f"  {name:<{width}}{shown(self.p[i], d):>14}"
            if fixed[i]:
                row += f"{'fixed':>13}"
            elif self.p_std is not None and self.p_ci is not None:
                # a log-scale parameter known to worse than its own size: its linear
                # error says nothing (Boehm's k_exp_hetero, 1e-05 +- 0.00075 beside a
                # CI over ten decades); its error on the log scale is below
                vague = (i < len(row_scales) and row_scales[i] != "lin"
                         and not abs(self.p_std[i]) < abs(self.p[i]))
                std = f"{'(log: below)':>13}" if vague else f"{self.p_std[i]:>13.3g}"
                lo, hi = self.p_ci[i]
                row += f"{std}   [{shown(lo, d - 1):>11}, {shown(hi, d - 1):>11}]"
            if self.p_true is not None:
                tr = self.p_true[i]
                rel = abs(self.p[i] - tr) / abs(tr) if tr != 0 else float("nan")
                row += f"{tr:>12.6g}{100 * rel:>9.2f}%"
            lines.append(row)
        scales = list(self.p_scales or [])
        if self.p_scaled_names and len(scales) == len(self.p_scaled_names) and any(
                sc != "lin" for sc in scales):
            # the rows above are on the linear scale; the fit was not
            on_log = [(n, j) for j, (n, sc) in enumerate(zip(self.p_scaled_names, scales))
                      if sc != "lin"]
            std = self.p_scaled_std
            lines.append("  estimated on their log scales: " + ", ".join(
                f"{n} = {self.p_scaled[j]:.6g}"
                + (f" +- {std[j]:.3g}" if std is not None and np.isfinite(std[j])
                   and std[j] > 0 else " (fixed)" if std is not None and std[j] == 0 else "")
                for n, j in on_log)
                + (" (the intervals above are these, transformed)" if self.p_ci is not None
                   else ""))
        lines += self._x0_lines()
        if self.settings.get("multistart_summary"):
            lines.append(f"  {self.settings['multistart_summary']}")
        for w in self.warnings:
            lines.append(f"  warning: {w}")
        return "\n".join(lines)

    def _fixed(self) -> list[bool]:
        """Which parameters were held fixed (equal bounds in ``settings``)."""
        bounds = self.settings.get("p_bounds")
        try:
            lb, ub = (np.asarray(_restore(b), float) for b in bounds)
            return [bool(v) for v in (lb == ub)] if lb.size == self.p.size else [False] * self.p.size
        except (TypeError, ValueError):
            return [False] * self.p.size

    def _x0_lines(self, per_block: int = 5) -> list[str]:
        """The initial states per experiment (with standard errors when known), in
        blocks of ``per_block`` states."""
        if not self.x0:
            return []
        nx = len(self.x0[0])
        names = self.x_names or [f"x{i}" for i in range(nx)]
        exps = self.experiment_names or [f"experiment {j}" for j in range(len(self.x0))]
        setting = self.settings.get("estimate_x0", True)
        mask = ([bool(v) for v in setting] if isinstance(setting, (list, tuple))
                else [bool(setting)] * nx)
        estimated = any(mask)
        derived = list(self.settings.get("x0_from_parameters", []))
        known = [names[i] for i in range(nx) if not mask[i] and names[i] not in derived]
        what = ("estimated" if all(mask) else "known, not estimated" if not estimated
                and not derived else f"estimated, {', '.join(known)} known" if not derived
                else ", ".join(part for part in (
                    "estimated" if estimated else "", f"{', '.join(known)} known" if known
                    else "", f"{', '.join(derived)} from the parameters") if part))
        lines = [f"  initial states ({what}"
                 + (", std. error in brackets" if estimated and self.x0_std else "") + "):"]
        width = max(12, *(len(n) + 2 for n in exps))
        with_std = estimated and self.x0_std is not None and len(self.x0_std) == len(self.x0)
        cell = 24 if with_std else 13
        for start in range(0, nx, per_block):
            block = range(start, min(nx, start + per_block))
            lines.append(f"  {'experiment':<{width}}" + "".join(f"{names[i]:>{cell}}" for i in block))
            for j, name in enumerate(exps[:len(self.x0)]):
                row = f"  {name:<{width}}"
                for i in block:
                    value = f"{float(self.x0[j][i]):.6g}"
                    if with_std:
                        value += f" ({float(self.x0_std[j][i]):.2g})"
                    row += f"{value:>{cell}}"
                lines.append(row)
        settled = self.settings.get("preequilibrated") or []
        if settled:  # (a user read the table as the state its data start from)
            lines.append(f"  ({', '.join(settled)}: the states before the preequilibration; "
                         "the data start from its steady state)")
        return lines

    def __str__(self) -> str:
        return self.summary()

    # ------------------------------------------------------------------ JSON
    def _likelihood_lines(self) -> list[str]:
        """The summary's lines on the noise and the likelihood (none for an old result)."""
        if self.noise_sigma is None or not np.isfinite(self.nllh):
            return []
        how = self.settings.get("noise", "given")
        estimated = how in ("estimated", "mixed")
        names = self.y_names or [f"y{k}" for k in range(self.noise_sigma.size)]
        models = self.settings.get("noise_model")
        # a formula's sigma differs by value: no one number (it printed their RMS)
        formula = [bool(models) and k < len(models) and "(a formula)" in str(models[k])
                   for k in range(len(names))]
        sigmas = ", ".join(f"{n} by its formula" if f else f"{n} {s:.4g}"
                           for n, s, f in zip(names, self.noise_sigma, formula))
        theta = self.settings.get("noise_parameter_values") or {}
        theta_std = self.settings.get("noise_parameter_std") or {}
        if (any(formula) or theta_std) and theta:
            sigmas += "; noise parameters " + ", ".join(
                f"{k} = {v:.4g}" + (f" +- {theta_std[k]:.2g}" if k in theta_std else "")
                for k, v in theta.items())
        auto = ("the likelihood, each output's noise estimated (as weights='auto' does)"
                if not models or how == "estimated" and all(m.endswith(": normal, sigma estimated")
                                                            for m in models)
                else "the likelihood of the noise models: " + "; ".join(models))
        criterion = {"auto": auto,
                     "none": "the plain sum of squares (weights='none'); the noise "
                             "estimated afterwards, for the report",
                     "given": "the likelihood with known noise (the given weights)"}.get(
                         self.settings.get("weights", ""), "")
        return [
            *([f"  criterion: {criterion}"] if criterion else []),
            f"  noise sigma ({how}): {sigmas}",
            f"  -log likelihood {self.nllh:.6g}"
            + (f"; det R {self.det_R:.6g}" if estimated and self.noise_sigma.size > 1 else "")
            + f"; AIC {self.aic:.6g}, BIC {self.bic:.6g}",
        ]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary of everything but the attached model."""
        d = {k: v for k, v in asdict(self).items() if not k.startswith("_")}
        return _jsonable({**d, "format_version": FORMAT_VERSION})

    def __getstate__(self) -> dict[str, Any]:
        """For ``pickle``: without the closures over the model (as from JSON)."""
        return {**self.__dict__, "_predictor": None, "_sensitivities": None, "_disc": None,
                "_model": None}

    def to_json(self, path: str | Path | None = None, indent: int = 2) -> str:
        """Serialise to JSON; write it to ``path`` when given.

        Returns
        -------
        str
            The JSON text.
        """
        text = json.dumps(self.to_dict(), indent=indent, allow_nan=False)
        if path is not None:
            from .runtime.output_files import atomic_write_text

            folder = Path(path).resolve().parent
            if not folder.is_dir():
                raise FileNotFoundError(f"to_json: the folder {str(folder)!r} of {str(path)!r} "
                                        "does not exist; create it first")
            atomic_write_text(path, text + "\n")
        return text

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "result") -> EstimationResult:
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        ValueError
            Naming ``source`` and the field that is missing or malformed.
        """
        if not isinstance(d, dict):
            raise ValueError(f"{source}: expected a JSON object of result fields, got "
                             f"{type(d).__name__}")
        d = dict(d)
        missing = [k for k in REQUIRED if k not in d]
        if missing:
            raise ValueError(f"{source}: missing field(s) {missing}; it is not a complete "
                             "result written by EstimationResult.to_json")
        version = d.pop("format_version", FORMAT_VERSION)
        if isinstance(version, bool) or not isinstance(version, int):
            raise ValueError(f"{source}: 'format_version' must be an integer, got {version!r}")
        if version > FORMAT_VERSION:
            raise ValueError(f"{source}: result format version {version} is newer than this "
                             f"package reads ({FORMAT_VERSION}); upgrade picard_casadi")

        def field(key: str, convert: Any) -> Any:
            try:
                return convert(d[key])
            except (TypeError, ValueError) as err:
                raise ValueError(f"{source}: field {key!r} is malformed ({err})") from None

        def vector_list(value: Any) -> list[np.ndarray]:
            if not isinstance(value, list):
                raise ValueError("expected a list of arrays")
            return [_array(v) for v in value]

        for k in ("p", "weights", "p_true", "p_cov", "p_std", "p_ci", "p_corr", "noise_sigma",
                  "p_scaled", "p_scaled_std"):
            if d.get(k) is not None:
                d[k] = field(k, _array)
        if d["p"].ndim != 1:
            raise ValueError(f"{source}: field 'p' must be a list of numbers")
        d["x0"] = field("x0", vector_list)
        if d.get("x0_std") is not None:
            d["x0_std"] = field("x0_std", vector_list)
        for k in ("objective", "weighted_objective", "continuity_gap", "fixed_point_residual",
                  "wall_time", "ssr", "weighted_ssr", "discretisation_error", "nllh", "det_R",
                  "aic", "bic"):
            if k in d:
                d[k] = field(k, _float)
        if not isinstance(d["success"], bool):
            raise ValueError(f"{source}: field 'success' must be true or false, got "
                             f"{d['success']!r}")
        if isinstance(d["iterations"], bool) or not isinstance(d["iterations"], int):
            raise ValueError(f"{source}: field 'iterations' must be an integer, got "
                             f"{d['iterations']!r}")
        for k in ("status", "message"):
            if not isinstance(d[k], str):
                raise ValueError(f"{source}: field {k!r} must be a string, got {d[k]!r}")
        for k in ("timings", "history", "settings"):
            if k in d:
                if not isinstance(d[k], dict):
                    raise ValueError(f"{source}: field {k!r} must be an object")
                d[k] = _restore(d[k])
        if d.get("certificate") is not None:
            if not isinstance(d["certificate"], dict):
                raise ValueError(f"{source}: field 'certificate' must be an object or null")
            d["certificate"] = _restore(d["certificate"])
            for k in ("p_shift", "p_shift_se", "noise_level"):  # arrays, as written
                if isinstance(d["certificate"].get(k), list):
                    try:
                        d["certificate"][k] = _array(d["certificate"][k])
                    except (TypeError, ValueError) as err:
                        raise ValueError(f"{source}: field 'certificate.{k}' is malformed "
                                         f"({err})") from None
        _check_lengths(d, source)
        if "starts" in d:
            d["starts"] = field("starts", lambda v: [_restore(dict(s)) for s in v])
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known and not k.startswith("_")})

    @classmethod
    def from_json(cls, source: str | Path, *, model: Any = None,
                  experiments: Any = None) -> EstimationResult:
        """Load a result written by :meth:`to_json`.

        Parameters
        ----------
        source : str or Path
            A file path or the JSON text itself.
        model, experiments : optional
            Attach them to make :meth:`predict` (simulation only) and
            :func:`~picard_casadi.profile` work again; the model alone makes a
            new run's predict and band work.

        Raises
        ------
        ValueError
            Where the file is not a result, or ``model`` (its names) or
            ``experiments`` (their count and measured values) are not those
            the result was fitted with.
        """
        text = str(source)
        if isinstance(source, Path) or not text.lstrip().startswith("{"):
            where = f"result file {str(source)!r}"
            try:
                text = Path(source).read_text(encoding="utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(f"{where} is not UTF-8 text ({err.reason} at byte "
                                 f"{err.start}); it is not a result written by to_json") from None
        else:
            where = "result JSON text"
        if not text.strip():
            raise ValueError(f"{where} is empty (was it written completely?)")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(
                f"{where} is not valid JSON: {err.msg} at line {err.lineno}, column "
                f"{err.colno} (the file may be truncated, or not a result written by to_json)"
            ) from None
        res = cls.from_dict(data, where)
        scaled, res._model = False, model  # (a new run's predict: the user's model)
        if model is not None and res.y_names:
            # a log-normal output was solved (and is predicted) as its logarithm,
            # "log(C)": the same model on that scale (it was refused, "refit")
            from .noise import log_scaled_model, output_scales

            scales = output_scales(res.y_names, model.y_names)
            if any(sc != "lin" for sc in scales):
                model, scaled = log_scaled_model(model, scales), True
        if model is None:
            return res
        # a restated problem's parameters are its own (constants, names they map
        # to): the model's come from them and the experiments'
        restated = bool(res._restated() and res.p_names and res.p_names != list(model.p_names))
        from .transcription.predict import (check_attached, restated_predictor,
                                             simulation_predictor)

        experiments = None if experiments is None else list(experiments)
        check_attached(res, model, experiments, where, parameters=not restated)
        if experiments is None:  # (a new run's predict: the names checked)
            return res
        if restated:  # (profile still needs the session's)
            res._predictor = restated_predictor(model, experiments, res.p_names, where)
            return res
        res._predictor = simulation_predictor(model, experiments)
        if model.has_delays:  # outputs measured late, inputs acting late
            from .transcription.delayed import simulated_predictor

            res._predictor = simulated_predictor(model, experiments, res.p)
        if not scaled:  # (a profile re-fits the data, which are not on the log scale)
            res._attached = (model, experiments)
        return res

    def _restated(self) -> bool:
        """Whether the methods solved a restated problem (docs/problem_statement.md,
        or an output on the scale of its log-normal noise), as the settings say."""
        return (self.settings.get("p_names") is not None or any(
            "log" in str(m).split(":", 1)[-1] for m in self.settings.get("noise_model") or []))
