"""Confidence and prediction bands of a fit's outputs, by the delta method.

The outputs ``y(t; theta)`` of one experiment, ``theta`` the estimated
parameters (on their estimation scale) and the experiment's estimated
initial states, have the linearised covariance ``J C J^T``: ``C`` the
estimate's covariance (the inverse information the standard errors come
from) and ``J = dy/dtheta`` the output sensitivities, integrated exactly
with the states by CVODES (``S' = f_x S + f_p``,
:func:`~picard_casadi.transcription.forward_sensitivity.sensitivity_model`).
The band of the mean output is ``y +- z sqrt(diag(J C J^T))``; with the
noise, ``y +- z sqrt(diag(J C J^T) + sigma^2)``, where a new measurement
falls.  Like the standard errors it is a linearisation: where the
likelihood is far from quadratic (a curved valley, a parameter near a
bound), profiles say more (``pc.profile``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import casadi as ca
import numpy as np

from ..experiment import Experiment
from ..model import Model
from ..parameters import scale_slopes
from ..simulate import simulate
from ..transcription.forecast import ForecastInputs, prediction_inputs
from ..transcription.forward_sensitivity import (initial_sensitivities, output_sensitivities,
                                                  sensitivity_model)
from .quantiles import normal

__all__ = ["PredictionBand", "prediction_band", "band_sensitivities", "sensitivity_source",
           "new_run_sensitivities"]


@dataclass(frozen=True)
class PredictionBand:
    """The band of one experiment's outputs (:func:`prediction_band`).

    Attributes
    ----------
    t : ndarray (N,)
        The times.
    y : ndarray (N, ny)
        The outputs at the estimate (as ``res.predict``: a log-normal
        output's logarithm).
    std : ndarray (N, ny)
        Each output's standard deviation: the estimate's alone (``noise`` False),
        or with the noise's added.
    lower, upper : ndarray (N, ny)
        ``y -+ z std``, ``z`` the normal quantile of ``(1 + level) / 2``.
    level : float
        The band's probability (0.95 by default).
    noise : bool
        Whether the noise is in it: a band where a new measurement falls
        (prediction band), not only the mean output (confidence band).
    y_names : list of str
    """

    t: np.ndarray
    y: np.ndarray
    std: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    level: float
    noise: bool
    y_names: list[str]


#: an output that moves by more than this share of its noise level along a
#: direction the data do not determine (a move of each quantity by at most
#: its scale) has no bounded band
UNBOUNDED_MOVE = 1e-6


def band_sensitivities(model: Model, exp: Experiment, x0: np.ndarray, p: np.ndarray,
                       times: np.ndarray, x0_columns: tuple[int, ...],
                       ahead: ForecastInputs | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The outputs ``(N, ny)`` of ``exp`` at ``times`` from ``x0`` and ``p``,
    and their derivatives ``(N, ny, np + len(x0_columns))`` in ``p`` and the
    initial states ``x0_columns``, integrated with the states by CVODES
    (with the inputs ``ahead`` past the data where given)."""
    aug = sensitivity_model(model, x0_columns)
    z0 = np.r_[np.asarray(x0, float), initial_sensitivities(model, x0_columns)]
    if ahead is None:
        Z = simulate(aug, z0, p, times, exp, t0=exp.t0)
        U = exp.inputs(times, model.nu)
    else:
        Z = simulate(aug, z0, p, times, ahead, t0=exp.t0, breakpoints=ahead.breakpoints)
        U = ahead.inputs(times, model.nu)
    f = output_sensitivities(model, x0_columns).map(times.size)
    Y, dY = f(times[None, :], Z.T, ca.repmat(ca.DM(p), 1, times.size), U.T)
    n = model.np + len(x0_columns)
    return (np.asarray(Y, float).T,
            np.asarray(dY, float).reshape(model.ny, times.size, n).transpose(1, 0, 2))


def sensitivity_source(model: Model, experiments: list[Experiment]) -> Any:
    """``(res, e, t, x0_columns) -> (times, Y, dY)``: :func:`band_sensitivities`
    of experiment ``e`` at ``t`` (its samples where None) at a result's ``p``
    and ``x0`` (the model's own: a restated fit wraps it with its inner
    vectors)."""

    def source(res: Any, e: int, t: Any, x0_columns: tuple[int, ...], u: Any = None,
               given: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        exp = experiments[e]
        times, ahead = prediction_inputs(exp, model.nu, t, u, given)
        Y, dY = band_sensitivities(model, exp, np.asarray(res.x0[e], float),
                                   np.asarray(res.p, float), times, x0_columns, ahead)
        return times, Y, dY

    return source


def parameter_covariance(result: Any) -> tuple[list[tuple[str, int, int]], np.ndarray,
                                                np.ndarray] | None:
    """The covariance of the estimated parameters on their estimation scale,
    as ``result._covariance`` holds it (quantities, covariance, undetermined
    directions), from ``p_cov`` alone: a new run's band with known initial
    states needs no more, where a result read from JSON keeps no other (a
    CLI user's Duffing fit, its band for a new force record refused).  The
    parameters whose standard error is not finite are the undetermined
    directions.  None where ``p_cov`` is missing or not finite elsewhere."""
    cov = getattr(result, "p_cov", None)
    if cov is None or getattr(result, "_model", None) is None:
        return None
    cov = np.array(cov, float)
    p = np.asarray(result.p, float)
    n = p.size
    if cov.shape != (n, n):
        return None
    scales = list(getattr(result, "p_scales", None) or ["lin"] * n)
    # p_cov is the estimation scale's times d theta / d phi on each side
    slope = scale_slopes(p, scales) if len(scales) == n else np.ones(n)
    weak = ~np.isfinite(np.diag(cov)) | (slope == 0)
    if not np.all(np.isfinite(cov[np.ix_(~weak, ~weak)])):
        return None
    inner = np.zeros((n, n))
    kept = np.flatnonzero(~weak)
    inner[np.ix_(kept, kept)] = cov[np.ix_(kept, kept)] / np.outer(slope[kept], slope[kept])
    return ([("p", -1, i) for i in range(n)], inner, np.eye(n)[:, weak])


def new_run_sensitivities(result: Any, exp: Experiment, t: Any, derivatives: bool = True
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The times, outputs ``(N, ny)`` of a run not fitted, ``exp``, at the
    estimate (on the fit's output scales: a log-normal output's logarithm),
    and their derivatives ``(N, ny, n)`` in the estimated parameters on
    their estimation scale (the fit's covariance's ``("p", -1, i)``).

    The model's parameters are the estimate's entries and ``exp``'s constants
    (:meth:`~picard_casadi.EstimationResult.model_parameters`), an affine
    selection ``p = c + A theta``; ``theta`` the estimate on its linear scale
    (``d theta / d phi``: 1, ``theta`` or ``theta ln 10``); the initial states
    ``exp.x0``, or the model's expressions of ``p`` where it gives none.  A
    model with delays: the derivatives by central differences of its
    simulated outputs (:func:`_delayed_sensitivities`); ``derivatives``
    False (``res.predict``) leaves them out (None).
    """
    from ..noise import log_scaled_model, output_scales
    from ..transcription.predict import model_parameter_values

    model = getattr(result, "_model", None)
    who = "prediction_band" if derivatives else "predict"
    if model is None:
        raise ValueError(f"{who}: this result has no model attached (a result read from JSON "
                         "or a pickle): attach it with EstimationResult.from_json(path, "
                         "model=..., experiments=...), the fitted experiments given as in "
                         "the fit")
    where = f"{who}: the new run {exp.name!r}"
    exp.check(model, predicting=True)
    if exp.preequilibration is not None:
        raise ValueError(f"{where} settles first (a Preequilibration): its band is not "
                         "available; give its initial states as Experiment(x0=...)")
    names = list(result.p_names)
    theta = np.asarray(result.p, float)
    labels = list(result.experiment_names or [])

    def model_p(values: np.ndarray) -> np.ndarray:
        try:
            return model_parameter_values(names, values, model, exp.parameters, None, labels)
        except ValueError as err:
            raise ValueError(f"{where}: {err}".replace("constants={...}",
                                                       "Experiment(parameters={...})")) from None

    p = model_p(theta)
    A = np.zeros((p.size, theta.size))
    for j in range(theta.size):  # (each model parameter is a number or one entry)
        step = max(1.0, abs(theta[j]))
        A[:, j] = np.rint((model_p(theta + step * np.eye(theta.size)[j]) - p) / step)
    scales = list(result.p_scales or ["lin"] * theta.size)
    A = A * scale_slopes(theta, scales)[None, :]
    x0 = np.full(model.nx, np.nan) if exp.x0 is None else np.asarray(exp.x0, float)
    expr = ca.Function("x0_of_p", [model.p], [model.x0_expression, ca.jacobian(
        model.x0_expression, model.p)])
    h, dh = (np.asarray(v, float) for v in expr(p))
    # the states the model's x0 gives follow it, as in a fit, whatever exp.x0
    # holds there (the command line's placeholder 0: a kineticist's A(0) = A0
    # from --conditions predicted as 0 at every time)
    from_p = np.flatnonzero(np.isnan(x0) | np.asarray(model.x0_given, bool))
    x0[from_p] = h.ravel()[from_p]
    if np.isnan(x0).any():
        raise ValueError(f"{where}: the initial states "
                         f"{[model.x_names[i] for i in np.flatnonzero(np.isnan(x0))]} are "
                         "not known (the model gives no expression): give them in "
                         "Experiment(x0=[...])")
    scaled = output_scales(list(result.y_names), list(model.y_names))
    if model.has_delays:
        times, _ = prediction_inputs(exp, model.nu, t, None)
        Y, dp = _delayed_sensitivities(model, exp, x0, from_p, expr, p, times, scaled,
                                       derivatives)
        return times, Y, None if dp is None else dp @ A
    if any(sc != "lin" for sc in scaled):  # (the fit's outputs: a log-normal's log)
        model = log_scaled_model(model, scaled)
    times, _ = prediction_inputs(exp, model.nu, t, None)
    Y, dY = band_sensitivities(model, exp, x0, p, times, tuple(int(i) for i in from_p))
    dp = dY[:, :, :p.size] + dY[:, :, p.size:] @ dh[from_p, :]
    return times, Y, dp @ A


#: the central differences of a delayed model's outputs step each parameter
#: by this fraction of its size (CVODES at rtol 1e-10: derivatives to ~1e-5)
DELAYED_STEP = 1e-5


def _delayed_sensitivities(model: Model, exp: Experiment, x0: np.ndarray, from_p: np.ndarray,
                           x0_of_p: ca.Function, p: np.ndarray, times: np.ndarray,
                           scales: list[str], derivatives: bool
                           ) -> tuple[np.ndarray, np.ndarray | None]:
    """The outputs ``(N, ny)`` of a model with delays over a new run ``exp``
    at ``times`` (on the fit's scales), and their total derivatives ``(N, ny,
    np)`` in the model's parameters (the states ``from_p`` follow their
    expressions ``x0_of_p``) by central differences of the simulated delayed
    model (one-sided at a delay of 0, which cannot go below)."""
    from ..noise import LOG_FLOOR
    from ..simulate import simulate_experiment
    from ..transcription.delayed import DelayPlan

    def inputs(s: Any) -> np.ndarray:
        return exp.inputs(np.atleast_1d(np.asarray(s, float)), model.nu)
    inputs.vectorized = True  # type: ignore[attr-defined]
    grid = np.unique(np.r_[exp.t0, times])
    rows = np.searchsorted(grid, times)

    def outputs(q: np.ndarray) -> np.ndarray:
        start = x0.copy()
        start[from_p] = np.asarray(x0_of_p(q)[0], float).ravel()[from_p]
        made = simulate_experiment(model, start, q, grid, inputs if model.nu else None,
                                   noise_std=0.0, breakpoints=exp.breakpoints)
        Y = np.asarray(made.y, float)[rows]
        for k, sc in enumerate(scales):
            if sc != "lin":
                Y[:, k] = (np.log if sc == "log" else np.log10)(np.maximum(Y[:, k], LOG_FLOOR))
        return Y

    Y = outputs(p)
    if not derivatives:
        return Y, None
    delays = set(DelayPlan.of(model).estimated)
    dY = np.zeros(Y.shape + (p.size,))
    for j in range(p.size):
        h = DELAYED_STEP * (abs(p[j]) if p[j] != 0 else 1.0)
        lo = p[j] - h if not (j in delays and p[j] - h < 0) else p[j]
        up, down = p.copy(), p.copy()
        up[j], down[j] = p[j] + h, lo
        dY[:, :, j] = (outputs(up) - outputs(down)) / (p[j] + h - lo)
    return Y, dY


def prediction_band(result: Any, exp_index: int | str = 0, t: Any = None, *,
                    level: float = 0.95, noise: bool = False, u: Any = None) -> PredictionBand:
    """The confidence band of a fit's outputs (or, with ``noise``, the
    prediction band of new measurements), by the delta method.

    Parameters
    ----------
    result : EstimationResult
        A fit with standard errors (``estimate(..., uncertainty=True)``, the
        default) and its model attached.
    exp_index : int, str or Experiment
        Which experiment: its index, or its name; or a run not fitted, an
        ``Experiment(t, None, u=..., x0=..., parameters=...)`` (its inputs,
        initial states, and constants as numbers or names of ``res.p_names``;
        states not in its ``x0`` from the model's ``x0`` expressions): its
        band from the parameters' covariance.
    t : array_like, optional
        Times (default: the experiment's sample times), not before its
        ``t0``.
    u : array_like (len(t), nu) or callable, optional
        The model's inputs past the experiment's last input sample (a
        forecast's rain, the next manoeuvre's controls): their values at
        ``t`` (rows before the last input sample are the experiment's own
        and not used; a row at it holds from there), read between samples
        as the experiment reads its own (held where its inputs are a
        callable), or a callable ``u(t)``.  Without it they are held at
        their last values there, and a warning says so.
    level : float
        The band's probability, in (0, 1).
    noise : bool
        Add each output's noise variance (the fit's ``noise_sigma``): where a
        new measurement falls.  Needs one noise level per output.

    Returns
    -------
    PredictionBand

    Raises
    ------
    ValueError
        Where the fit has no covariance (``uncertainty=False``, a failed
        fit, a result loaded from JSON), for a model with delays or one
        unstable along the data, or for ``noise=True`` without one noise
        level per output.

    Notes
    -----
    Where the data do not determine some quantities (``res.warnings``
    names them), an output that moves along such a direction has the band
    ``inf`` (unbounded: ``pc.profile`` follows the likelihood instead); one
    that does not (a preequilibrated start the settling forgets, a
    parameter the output does not use) keeps its band.
    """
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"`level` must be a probability in (0, 1), got {level!r}")
    covariance = getattr(result, "_covariance", None)
    source = getattr(result, "_sensitivities", None)
    new_run = isinstance(exp_index, Experiment)
    if covariance is None and new_run:
        covariance = parameter_covariance(result)
    if covariance is None or (source is None and not new_run):
        why = ("its model has delays: a fitted run's band is not available; state the run "
               "as a new one, pc.Experiment(t, None, u=..., x0=...) (its initial states "
               "then known)" if getattr(result, "_delays", None) is not None
               and covariance is not None
               else "it has no standard errors (estimate(..., uncertainty=True), the "
               "default)" if getattr(result, "p_std", None) is None else
               # (a biochemist attached the model to a result read from JSON and
               # was told either cause)
               "it was read from JSON (or is a multistart's best of a restated problem "
               "run on a process pool or Dask), which keeps the parameters' covariance "
               "but not that of every estimated quantity with the sensitivities a fitted "
               "run's band needs, even with the model attached (a new run's, "
               "pc.Experiment(t, None, u=..., x0=...), needs the parameters' alone: its "
               "band is given, with the model attached); refit in this session (pc.estimate "
               "from its p converges in a few iterations) and take the band of that")
        raise ValueError(f"prediction_band: no band for this result: {why}")
    columns, cov, weak = covariance
    if str(result.settings.get("information", "")).startswith("from the intervals"):
        # (J grows like the unstable mode, C shrinks along it: J C J^T is
        # their cancellation, below round-off)
        raise ValueError("prediction_band: the model is unstable along the data (its "
                         "information is the intervals', res.settings['information']): "
                         "outputs integrated from x0 lose their precision; no band")
    if new_run and u is not None:
        raise ValueError("prediction_band: `u` is a fitted experiment's forecast; a new "
                         "run's inputs are its own: Experiment(t, None, u=...)")
    e = -1 if new_run else result._experiment_index(exp_index)
    names = list(result.y_names)
    sigma = None
    if noise:
        sigma = (None if result.noise_sigma is None
                 else np.asarray(result.noise_sigma, float).ravel())
        models = [str(m) for m in result.settings.get("noise_model") or []]
        varies = any(m.endswith(("(the data's)", "(a formula)")) for m in models)
        if (varies or sigma is None or sigma.size < len(names)
                or not np.all(np.isfinite(sigma))):
            raise ValueError("prediction_band: noise=True needs one noise level per output "
                             "(res.noise_sigma); this fit's noise differs by measurement "
                             "(given per sample, or a formula)")
    x0_columns = tuple(sorted(i for kind, ex, i in columns if kind == "x0" and ex == e))
    if new_run:
        times, Y, dY = new_run_sensitivities(result, exp_index, t)
    else:
        times, Y, dY = (source(result, e, t, x0_columns) if u is None
                        else source(result, e, t, x0_columns, u))
    # the covariance's rows of this experiment: the parameters, then its initial states
    n_p = dY.shape[2] - len(x0_columns)
    rows = np.full(dY.shape[2], -1)
    for k, (kind, ex, i) in enumerate(columns):
        if kind == "p":
            rows[i] = k
        elif kind == "x0" and ex == e:
            rows[n_p + x0_columns.index(i)] = k
    kept = rows >= 0
    C = cov[np.ix_(rows[kept], rows[kept])]
    J = dY[:, :, kept]
    var = np.maximum(np.einsum("tya,ab,tyb->ty", J, C, J), 0.0)
    if weak.shape[1]:
        # along a direction the data do not determine the quantities move
        # freely: where the output moves with them, its band is unbounded (a
        # start the settling forgets, a parameter unseen here: it does not)
        moved = np.abs(np.einsum("tya,aw->tyw", J, weak[rows[kept]])).max(axis=2)
        noise_level = (np.asarray(result.noise_sigma, float).ravel()[:var.shape[1]]
                       if result.noise_sigma is not None else np.full(var.shape[1], np.nan))
        noise_level = np.where(np.isfinite(noise_level) & (noise_level > 0), noise_level,
                               np.sqrt(var.max(axis=0, initial=0.0)) + 1e-300)
        var = np.where(moved > UNBOUNDED_MOVE * noise_level[None, :], np.inf, var)
    if sigma is not None:
        var = var + sigma[None, :var.shape[1]] ** 2
    std = np.sqrt(var)
    z = normal(0.5 + 0.5 * float(level))
    Y = Y[:, :len(names)]  # (a prior's output, the restated fit's own, left out)
    std = std[:, :len(names)]
    return PredictionBand(t=times, y=Y, std=std, lower=Y - z * std, upper=Y + z * std,
                          level=float(level), noise=bool(noise), y_names=names)
