"""Profile-likelihood confidence intervals.

The profile of parameter ``i`` is the best fit with ``p_i`` held at ``c``::

    PL_i(c) = min over the other parameters and every experiment's x0 of WSSR,

``WSSR`` the weighted sum of squared residuals with the estimate's weights
held fixed (``weights="auto"``: the final noise variances).  The interval is
where ``(PL_i(c) - WSSR(estimate)) / s^2`` stays below a threshold ``q``:

- ``noise="estimated"`` (default): the noise scale is estimated from the
  residuals, ``s^2 = WSSR / (m - n_theta)`` (``m`` measurements, ``n_theta``
  free parameters and initial states), the same ``s^2`` as the Wald
  intervals (``p_std``); ``q`` is the F quantile with ``(1, m - n_theta)``
  degrees of freedom.  This is the profile-t interval of Bates and Watts
  (*Nonlinear Regression Analysis*, 1988, ch. 6): exact for a model linear
  in its parameters with Gaussian noise (there it is ``estimate +-
  t_{m - n_theta} std``), and for few measurements it accounts for the
  estimated noise level, which a chi-square threshold with a plug-in
  ``s^2`` does not (``m - n_theta = 5``: F 6.61 against chi-square 3.84).
  ``weights="auto"`` estimates the noise variances from the same residuals
  (``s^2`` is then close to 1), so it is treated the same way; given
  weights are treated as relative, as the Wald intervals treat them.
- ``noise="known"``: the weights are exact inverse noise variances;
  ``s^2 = 1`` and ``q`` is the chi-square quantile with one degree of
  freedom (the likelihood-ratio test).
- ``noise="likelihood"`` (default for a fit of the likelihood, its noise
  estimated or given by noise models): each point re-fits the noise as the
  estimate did (noise levels, noise parameters and formulas re-estimated
  with the other parameters), and the statistic is ``2 (nllh(c) -
  nllh(estimate))`` against the chi-square quantile: the likelihood-ratio
  interval that pyPESTO and PEtab's tools compute.

Each profile point re-optimises the other parameters and every ``x0`` with
the estimate's method and settings (``estimate`` with ``p_bounds`` fixing
``p_i = c``), warm-started from the previous point, so a point costs a few
iterations.  Steps adapt to the profile-t scale ``zeta = sqrt(delta / (s^2
q))`` (1 at the threshold, linear in ``c`` for a quadratic profile): the
first is a quarter of the Wald half-width, later ones aim at ``zeta``
rising by 0.25 (at most 3 times longer or half as long as the last), and no
step moves the value by more than half of it (a warm start is only as good
as the last point is near; a positive parameter approaches 0
geometrically).  A re-optimisation that fails is retried with half the
step, three times.  A side stops at the threshold (the crossing found by
regula falsi on ``zeta`` with at most four more points), at the box
``p_bounds``, after ``max_steps`` points, or ``max_range`` magnitudes from
the estimate; a side that does not cross is open (``-inf`` or ``inf``) and
gets a warning naming the parameter (practical
non-identifiability).  Warm starts follow the estimate's branch of the
profile: where the best fit at ``c`` lies in another basin of the
objective, that basin is not seen (a point that fits better than the
estimate is reported in a warning: the estimate was not the best fit).
Parameters and sides run in parallel on an executor
(:mod:`picard_casadi.runtime.executors`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..analysis.quantiles import chi2_1, f_1, normal
from ..analysis.significant_digits import digits_beside, shown
from ..errors import FitWarning, StartNotFiniteError, with_closest
from ..estimation.diagnosis import clipped_intervals
from ..estimation.portable import portable, restore
from ..estimation.setup import estimated_quantities
from ..parameters import from_scale
from ..runtime.executors import (Encoded, decoded, encode, executor_for, run_tasks,
                                 stop_in_a_starting_worker)
from ..runtime.user_warnings import warn_user
from .profile_sides import ProfilePath, Side, assemble_path, held_by_a_bound

__all__ = ["profile", "Profile", "ProfilePath", "NOISE_MODES"]

NOISE_MODES = ("estimated", "known", "likelihood")
_ZETA_STEP = 0.25  # aimed rise of zeta per step (about 4 points to the threshold)
_CROSSING_TOL = 0.02  # |zeta - 1| at which a crossing needs no refinement
_RETRIES = 3  # halvings of a step whose re-optimisation failed
_MAX_RELATIVE = 0.5  # a step changes the value by at most this fraction (of 1e-3 |estimate| near 0)
_CROSSING_FITS = 4  # points that refine a crossing
_FAR_ZETA, _BISECTIONS = 2.0, 12  # an outer point beyond this zeta: halve, at most this often


@dataclass
class Profile:
    """What :func:`profile` returns.

    Attributes
    ----------
    intervals : ndarray (np, 2)
        ``[lower, upper]`` per parameter; ``-inf``/``inf`` where the profile
        does not cross the threshold on that side; NaN rows for parameters
        not profiled (fixed by equal bounds, or not asked for).
    estimate : ndarray (np,)
    wald : ndarray (np, 2) or None
        The estimate's Wald intervals (``p_ci``, at 95 %), for comparison.
    std : ndarray (np,) or None
        The estimate's standard errors.
    names : list of str
    confidence : float
    noise : {"estimated", "known", "likelihood"}
    threshold : float
        ``q``: the F(1, dof) quantile (``noise="estimated"``) or the
        chi-square(1) quantile (``"known"``, ``"likelihood"``) at ``confidence``.
    dof : int or None
        ``m - n_theta`` (``noise="estimated"``).
    s2 : float
        The noise scale dividing the objective difference.
    wssr : float
        The criterion at the (re-fitted) estimate: the weighted sum of
        squares, or ``2 nllh`` (``noise="likelihood"``).
    paths : dict of int -> ProfilePath
    evaluations : int
        Re-optimisations run (the profile points and the re-fitted estimate).
    wall_time : float
    warnings : list of str
    scales : list of str
        Each parameter's scale (``"lin"``, ``"log"``, ``"log10"``): a fit
        with a parameter table is profiled on its estimation scale, which
        ``names`` and ``intervals`` are on (``log10(k)``).
    own_names : list of str
        The parameters' own names (``k``), where ``scales`` are given.
    """

    intervals: np.ndarray
    estimate: np.ndarray
    wald: np.ndarray | None
    std: np.ndarray | None
    names: list[str]
    confidence: float
    noise: str
    threshold: float
    dof: int | None
    s2: float
    wssr: float
    paths: dict[int, ProfilePath] = field(default_factory=dict)
    evaluations: int = 0
    wall_time: float = 0.0
    warnings: list[str] = field(default_factory=list)
    scales: list[str] = field(default_factory=list)
    own_names: list[str] = field(default_factory=list)

    @property
    def linear_intervals(self) -> np.ndarray:
        """``intervals`` on each parameter's own scale (``10**`` of a log10
        interval: a profile interval is invariant under the transformation,
        so this is the profile interval of ``k`` itself)."""
        out = np.array(self.intervals, float).copy()
        for i, scale in enumerate(self.scales):
            out[i] = [from_scale(v, scale) if np.isfinite(v) else
                      (0.0 if v < 0 and scale != "lin" else v) for v in out[i]]
        return out

    @property
    def statistic_name(self) -> str:
        """The distribution of the threshold, e.g. ``"F(1, 5)"``."""
        return f"F(1, {self.dof})" if self.noise == "estimated" else "chi2(1)"

    def summary(self) -> str:
        """A table of the estimate, the Wald and the profile intervals."""
        pct = f"{100 * self.confidence:g} %"
        width = max([14] + [len(str(n)) + 1 for n in self.names])  # long names stay aligned
        lines = [f"profile likelihood, {pct} intervals: threshold {self.threshold:.4g} "
                 f"({self.statistic_name}), s^2 = {self.s2:.4g}, {self.evaluations} "
                 f"re-optimisations, {self.wall_time:.1f} s",
                 f"  {'parameter':<{width}}{'estimate':>13}{'Wald 95 %':>29}"
                 f"{'profile ' + pct:>29}"]
        for i, name in enumerate(self.names):
            lo, hi = self.intervals[i]
            if np.isnan(lo):
                continue
            # (to the standard error's second digit: w2 20.0000 +- 0.0001 read
            # [20, 20] beside the fit's [19.9996, 20.0003])
            d = digits_beside(self.estimate[i], None if self.std is None else self.std[i])
            wald = ("" if self.wald is None else
                    f"[{shown(self.wald[i, 0], d - 1):>11}, {shown(self.wald[i, 1], d - 1):>11}]")
            lines.append(f"  {name:<{width}}{shown(self.estimate[i], d):>13}{wald:>29}"
                         f"   [{shown(lo, d - 1):>11}, {shown(hi, d - 1):>11}]")
        logs = [i for i, sc in enumerate(self.scales) if sc != "lin"
                and i < len(self.own_names) and not np.isnan(self.intervals[i, 0])]
        if logs:
            own = self.linear_intervals
            lines.append("  on their own scale: " + ", ".join(
                f"{self.own_names[i]} [{own[i, 0]:.5g}, {own[i, 1]:.5g}]" for i in logs))
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (infinities as the strings ``"inf"``, ``"-inf"``)."""
        from ..result import _jsonable

        return _jsonable({
            "intervals": self.intervals, "estimate": self.estimate, "wald": self.wald,
            "std": self.std, "names": self.names, "confidence": self.confidence,
            "noise": self.noise, "threshold": self.threshold, "dof": self.dof,
            "s2": self.s2, "wssr": self.wssr, "evaluations": self.evaluations,
            "wall_time": self.wall_time, "warnings": self.warnings,
            **({"scales": self.scales, "own_names": self.own_names,
                "linear_intervals": self.linear_intervals} if self.scales else {}),
            "paths": {self.names[i]: {"values": pth.values, "statistic": pth.statistic,
                                      "p": pth.p, "ends": list(pth.ends)}
                      for i, pth in self.paths.items()},
        })

    def plot(self, path: str | Path | None = None, parameters: Sequence[Any] | None = None
             ) -> Any:
        """Each profile with the threshold and the Wald interval; returns the figure.

        Parameters
        ----------
        path : str or Path, optional
            Save as PNG here.
        parameters : sequence of str or int, optional
            Which profiles to draw (default: all computed).
        """
        from ..io.plotting import plot_profile

        chosen = (sorted(self.paths) if parameters is None
                  else [_index(self.names, q) for q in parameters])
        return plot_profile(self, chosen, path=path)


# ---------------------------------------------------------------------- the walk
@dataclass
class _Context:
    """Everything one side of one profile needs (sent to workers as one blob)."""

    model: Any
    experiments: list[Any]
    method: str
    kwargs: dict[str, Any]
    p_lb: np.ndarray
    p_ub: np.ndarray
    wssr: float  # the criterion at the estimate: WSSR, or 2 nllh (noise="likelihood")
    scale: float  # s^2 * q: the objective difference at the threshold
    first_step: np.ndarray
    magnitude: np.ndarray  # max(|estimate|, Wald half-width) per parameter (1 if both 0)
    # below this |value| steps are not relative: 1e-3 |estimate| (inf on log scales)
    near_zero: np.ndarray
    max_range: float
    max_steps: int
    base: Any = None  # the re-fitted estimate (a result, or Portable on the way)
    likelihood: bool = False  # the criterion is 2 nllh (the noise re-fitted at each point)


def _fit(ctx: _Context, i: int, c: float, warm: Any) -> Any:
    from ..estimate import estimate

    lb, ub = ctx.p_lb.copy(), ctx.p_ub.copy()
    lb[i] = ub[i] = c
    p0 = np.clip(np.asarray(warm.p, float), ctx.p_lb, ctx.p_ub)
    p0[i] = c
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a point's notes are not the user's warnings
        try:
            return estimate(ctx.model, ctx.experiments, p0, ctx.method, p_bounds=(lb, ub),
                            warm_start=warm, uncertainty=False, **ctx.kwargs)
        except StartNotFiniteError:  # (a heat capacity the model divides by, at 0)
            return SimpleNamespace(success=False, message="the model is not finite there")


def _walk(ctx: _Context, i: int, direction: int) -> Side:
    """One side of parameter ``i``'s profile (``direction`` -1 or +1)."""
    base = ctx.base
    theta = float(base.p[i])
    bound = ctx.p_ub[i] if direction > 0 else ctx.p_lb[i]
    side = Side([], [], [], "max_steps", None)
    c_prev, z_prev, warm = theta, 0.0, base
    step = float(ctx.first_step[i])
    for _ in range(ctx.max_steps):
        if c_prev == bound:
            side.end = "bound"
            return side
        if abs(c_prev - theta) > ctx.max_range * ctx.magnitude[i]:
            side.end = "range"
            return side
        # a warm start is only as good as the last point is near: at most half
        # the value (a positive parameter approaches 0 geometrically)
        step = min(step, _MAX_RELATIVE * max(abs(c_prev), ctx.near_zero[i]))
        res, c = None, c_prev
        for _ in range(_RETRIES + 1):
            c = c_prev + direction * step
            c = min(c, bound) if direction > 0 else max(c, bound)
            step = abs(c - c_prev)  # a retry halves the step actually taken
            res = _fit(ctx, i, c, warm)
            if res.success:
                break
            step *= 0.5
        if not res.success:
            # the fit's own reason, without its advice for an estimate (a
            # profile point's start is the last point's estimate already)
            reason = res.message.split(" (")[0].split("; ")[0]
            side.end = "failed"
            side.failed_at = float(c)
            side.message = f"({reason}; its step halved {_RETRIES} times)"
            return side
        z = _zeta(ctx, side, c, res)
        if z >= 1.0:
            side.end = "threshold"
            side.crossing = _crossing(ctx, side, i, (c_prev, z_prev, warm), (c, z))
            return side
        dz = z - z_prev
        step *= float(np.clip(_ZETA_STEP / dz, 0.5, 3.0)) if dz > 0 else 3.0
        c_prev, z_prev, warm = c, z, res
    return side


def _zeta(ctx: _Context, side: Side, c: float, res: Any) -> float:
    """Record a point; its ``zeta = sqrt(delta / (s^2 q))`` (1 at the threshold)."""
    delta = float((2.0 * res.nllh if ctx.likelihood else res.weighted_ssr) - ctx.wssr)
    side.values.append(float(c))
    side.delta.append(delta)
    side.p.append(np.asarray(res.p, float).copy())
    if delta < 0 and (side.better is None or delta < side.better[1]):
        side.better = (float(c), delta)
    return float(np.sqrt(max(delta, 0.0) / ctx.scale))


def _crossing(ctx: _Context, side: Side, i: int, inside: tuple[float, float, Any],
              outside: tuple[float, float]) -> float:
    """Where zeta = 1 between a point inside the interval and one outside:
    regula falsi on zeta (linear in ``c`` for a quadratic profile), after
    halving the bracket while its outer zeta exceeds ``_FAR_ZETA`` (an
    inhibition constant's secant points crept 0.14 of 4.6 decades to zeta 120,
    the interval a decade short), each point warm-started from the nearest
    inside; one that does not converge is replaced by the bracket's midpoint.
    At most ``_CROSSING_FITS`` secant points, then the last interpolation."""
    (c_in, z_in, warm), (c_out, z_out) = inside, outside
    fits = halved = 0
    while fits < _CROSSING_FITS:
        c = c_in + (1.0 - z_in) / (z_out - z_in) * (c_out - c_in)
        if z_out - 1.0 < _CROSSING_TOL or abs(c_out - c_in) <= 1e-9 * max(abs(c), 1e-300):
            return c
        if z_out > _FAR_ZETA and halved < _BISECTIONS:
            c, halved, fits = 0.5 * (c_in + c_out), halved + 1, fits - 1
        res = _fit(ctx, i, c, warm)
        if not res.success:
            c = 0.5 * (c_in + c_out)
            res = _fit(ctx, i, c, warm)
            if not res.success:
                break
        fits += 1
        z = _zeta(ctx, side, c, res)
        if abs(z - 1.0) < _CROSSING_TOL:
            return c
        if z < 1.0:
            c_in, z_in, warm = c, z, res
        else:
            c_out, z_out = c, z
    return c_in + (1.0 - z_in) / (z_out - z_in) * (c_out - c_in)


def _walk_in_worker(data: Encoded, i: int, direction: int) -> Side:
    ctx: _Context = decoded(data)["context"]
    if not hasattr(ctx.base, "success"):  # still the Portable sent: attach the model once
        ctx.base = restore(ctx.base, ctx.model, ctx.experiments)
    return _walk(ctx, i, direction)


# ---------------------------------------------------------------------- profile
def _index(names: Sequence[str], which: Any, aliases: Sequence[str] = ()) -> int:
    """The index of parameter ``which`` (a name, or an index) among ``names``;
    ``aliases`` are the same parameters' other names, in the same order (a
    log-scale parameter's own name beside ``log10(name)``)."""
    if isinstance(which, (int, np.integer)) and not isinstance(which, bool):
        if not 0 <= which < len(names):
            raise ValueError(f"parameter index {which} is out of range 0..{len(names) - 1}")
        return int(which)
    if isinstance(which, str) and which in names:
        return list(names).index(which)
    if isinstance(which, str) and len(aliases) == len(names) and which in aliases:
        return list(aliases).index(which)
    per_experiment = [n for n in names if isinstance(which, str) and n.startswith(f"{which}[")]
    if per_experiment:  # estimated separately for each experiment: name one of them
        raise ValueError(f"parameter {which!r} is estimated per experiment: name one of "
                         f"{', '.join(per_experiment)}")
    raise ValueError(f"unknown parameter {with_closest(which, names)}; the parameters are "
                     f"{', '.join(names)}")


def _codegen(value: Any) -> bool | str:
    return {"True": True, "False": False}.get(str(value), "auto")


def _estimate_options(result: Any, overrides: dict[str, Any],
                      likelihood: bool = False) -> dict[str, Any]:
    """``estimate`` keyword arguments that repeat the result's run: its weights
    held fixed, or (``likelihood``) its noise re-fitted as the run did."""
    s = result.settings
    if "x0_bounds" not in s and "x0_bounds" not in overrides:
        raise ValueError("the result does not record its x0_bounds (a result from an older "
                         "version): pass x0_bounds=(lb, ub) (or None) to profile(...)")
    kw: dict[str, Any] = dict(s.get("options", {}))
    kw.update(
        x0_bounds=(None if "x0_bounds" not in s else
                   tuple(np.asarray(b, float) for b in s["x0_bounds"])),
        estimate_x0=s["estimate_x0"], n=None if s.get("n_auto") else int(s["n"]),
        lam=float(s["lam"]),
        nodes=int(s["nodes"]), refine=int(s["refine"]),
        # where the run chose the quadrature, a point may move to Radau's (a
        # fast rate profiled up grows stiff on the mesh)
        scheme="auto" if s.get("scheme_auto") else str(s["scheme"]),
        codegen=_codegen(s.get("codegen", "auto")),
        weights="none" if s.get("weights", "none") == "none" else np.asarray(result.weights, float),
    )
    if likelihood:
        # the run's model and data are on the noise's scale already (a
        # log-normal output's log): the same noise models, as normal noise
        kw.pop("weights")
        noise = getattr(result, "_noise", None)
        values = s.get("noise_parameter_values", {})
        kw["noise"] = (None if noise is None else [replace(
            n, distribution="normal",
            # a formula starts from the estimate's noise parameters
            **({"parameters": {k: values.get(k, v) for k, v in n.parameters.items()}}
               if n.is_formula else {})) for n in noise])
        if kw["noise"] is None:
            kw["weights"] = "auto"
    kw.update(_continuing_options(result.method, kw))
    kw.update(overrides)
    return kw


def _continuing_options(method: str, kw: dict[str, Any]) -> dict[str, Any]:
    """The method's options among ``kw`` as for a solve that continues from a
    converged one (``LoopOptions.continuing``): each profile point starts next to
    a neighbouring optimum of the same loss."""
    from dataclasses import fields

    from ..methods import get_method

    options = get_method(method).options
    if not hasattr(options, "continuing"):
        return {}
    names = [f.name for f in fields(options) if f.name in kw]
    continuing = options(**{n: kw[n] for n in names}).continuing()
    return {n: getattr(continuing, n) for n in names}


def profile(
    result: Any,
    parameters: Sequence[Any] | None = None,
    confidence: float = 0.95,
    executor: Any = None,
    *,
    n_jobs: int | None = None,
    noise: str | None = None,
    max_steps: int = 30,
    max_range: float = 100.0,
    model: Any = None,
    experiments: Any = None,
    **estimate_options: Any,
) -> Profile:
    """Profile-likelihood confidence intervals of an estimate's parameters.

    Parameters
    ----------
    result : EstimationResult
        A converged estimate, from this session (or with ``model`` and
        ``experiments`` given).  Its method and settings are used for every
        profile point: with ``noise="likelihood"`` (the default for a fit of
        the likelihood) each point re-estimates the noise levels, otherwise
        the fit's weights are held fixed.
    parameters : sequence of str or int, optional
        Which parameters (default: every free one).
    confidence : float
        Coverage probability of the intervals.
    executor : concurrent.futures.Executor, optional
        Run the profiles (each side of each parameter a task) on it.
    n_jobs : int, optional
        A local pool of this many processes instead (:mod:`picard_casadi.runtime.executors`).
    noise : {"likelihood", "estimated", "known"}, optional
        How the threshold treats the noise level (module docstring): the
        likelihood with its noise re-fitted at every point (``2 delta nllh``
        against chi-square; the default for a fit of the likelihood,
        ``settings["weights"] == "auto"``), the weights held and the noise
        scale estimated from the residuals (F threshold; the default
        otherwise), or the weights exact inverse variances (chi-square).
    max_steps : int
        Points per side at most (before the crossing is refined).
    max_range : float
        A side that stays below the threshold for this many times the
        parameter's magnitude (``|estimate|``, or the Wald half-width if
        larger) from the estimate is open.
    model, experiments : optional
        The run's model and experiments, for a result loaded from JSON.
    **estimate_options
        Override the ``estimate`` settings taken from the result (e.g.
        ``p_bounds``, ``x0_bounds``, ``x_scale``, ``max_iter``).

    Returns
    -------
    Profile

    Raises
    ------
    ValueError
        On a result that did not converge, an unknown parameter, a bad
        option, or (``noise="estimated"``) no more measurements than
        estimated quantities.
    """
    stop_in_a_starting_worker("profile")
    t_start = time.perf_counter()
    from ..estimate import estimate
    from ..estimation.arguments import as_bounds
    from ..result import EstimationResult

    if not isinstance(result, EstimationResult):
        raise TypeError(f"`result` must be an EstimationResult, got {type(result).__name__}")
    if not result.success:
        raise ValueError(f"profile needs a converged estimate; this one did not converge "
                         f"({result.message})")
    if result._delays is not None and result._delays.estimated:
        bounds = result.settings.get("p_bounds")
        names = [result._delays.model.p_names[j] for j in result._delays.estimated]
        at = {n: i for i, n in enumerate(result.p_names)}  # a table's order is its own

        def held(name: str) -> bool:  # a delay fixed (equal bounds, estimate=False)
            return (bounds is not None and name in at and len(bounds[0]) == len(at)
                    and not float(bounds[0][at[name]]) < float(bounds[1][at[name]]))

        if not all(held(n) for n in names):
            raise ValueError(
                f"profiles of a fit with estimated delays ({', '.join(names)}) are not "
                "available: each point would need the delays' rounds "
                "(estimation/delays.py); fit again with the delays held at their estimates "
                "(p_bounds with equal bounds there, Parameter(estimate=False) in a table, or "
                "--fix NAME=VALUE) and profile that fit")
    # on a log scale the value 0 is a parameter of 1, not an edge: no steps
    # relative to the value there (a rate near 1 walked into 1e-6 steps at
    # log10 k = 0 and ran out of points, "non-identifiable")
    on_log_scale = np.zeros(np.size(result.p), dtype=bool)
    user_names: list[str] = []  # the parameters' own names, where profiled on a scale
    scales: list[str] = []
    if result.p_scaled is not None:
        # a restated problem (log scales, experiment parameters): profiled on
        # the estimation scale, with the model the methods solved
        scales = list(result.p_scales or [])
        on_log_scale = np.array([sc in ("log", "log10") for sc in scales], dtype=bool)
        if on_log_scale.size != np.size(result.p_scaled):
            on_log_scale = np.zeros(np.size(result.p_scaled), dtype=bool)
        if result._disc is None:
            raise ValueError("this result's parameters were estimated on another scale (or "
                             "restated by experiment parameters), and a result loaded from "
                             "JSON does not carry the restated model: refit from its estimate "
                             "in this session (pc.estimate with the same statement and p0 = "
                             "[pc.Parameter(name, value, ...) for name, value in "
                             "zip(res.p_names, res.p)], the first fit's scales and bounds "
                             "given again; it converges in a few iterations) and profile that "
                             "result")
        user_names = list(result.p_names)
        std = None if result.p_scaled_std is None else np.asarray(result.p_scaled_std, float)
        half = None if std is None else normal(0.975) * std
        result = replace(result, p=np.asarray(result.p_scaled, float),
                         p_names=list(result.p_scaled_names or []), p_std=std,
                         p_ci=None if half is None else np.column_stack(
                             [result.p_scaled - half, result.p_scaled + half]),
                         p_scaled=None)
    if noise is None:
        noise = "likelihood" if result.settings.get("weights") == "auto" else "estimated"
    if noise not in NOISE_MODES:
        raise ValueError(f"`noise` must be one of {NOISE_MODES}, got {noise!r}")
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"`confidence` must be between 0 and 1, got {confidence!r}")
    if isinstance(max_steps, bool) or int(max_steps) != max_steps or max_steps < 1:
        raise ValueError(f"`max_steps` must be a positive integer, got {max_steps!r}")
    if not float(max_range) > 0:
        raise ValueError(f"`max_range` must be positive, got {max_range!r}")
    if model is None or experiments is None:
        if result._disc is not None:
            model, experiments = result._disc.model, list(result._disc.experiments)
        elif result._attached is not None:  # EstimationResult.from_json(model=, experiments=)
            model, experiments = result._attached
        else:
            if result._restated():  # a log-normal output's: its data on the log scale
                raise ValueError(
                    "this result was loaded from JSON and solved a restated problem (a "
                    "log-normal output fitted as its logarithm): it predicts, but a profile "
                    "re-fits, which needs the run itself: refit in this session (pc.estimate "
                    "from its p converges in a few iterations) and profile that result")
            raise ValueError("this result carries no model (loaded from JSON?): pass "
                             "model=... and experiments=... of its run")
    experiments = list(experiments)
    if result._X is None:
        # no node values (from JSON): every fit starts from the estimated x0, not a
        # guess from the data (a tank's level guessed 0 put sqrt(0) in its outflow)
        experiments = [e.with_x0(x0) for e, x0 in zip(experiments, result.x0)]
    names = list(result.p_names) or [f"p{i}" for i in range(result.p.size)]
    overrides = dict(estimate_options)
    p_bounds = overrides.pop("p_bounds", result.settings.get("p_bounds"))
    if p_bounds is None:
        raise ValueError("pass p_bounds=(lb, ub): the result does not record its box")
    p_lb, p_ub = as_bounds(p_bounds, result.p.size, "p_bounds")
    if noise == "likelihood" and result.settings.get("weights") != "auto":
        raise ValueError("noise='likelihood' profiles a fit of the likelihood (weights='auto' "
                         "or noise models); this one used weights="
                         f"{result.settings.get('weights')!r}: use 'estimated' or 'known'")
    kwargs = _estimate_options(result, overrides, likelihood=noise == "likelihood")
    free = p_lb < p_ub
    if isinstance(parameters, (str, int, np.integer)):
        parameters = [parameters]  # one name (not its letters) or one index
    chosen = (list(np.flatnonzero(free)) if parameters is None
              else sorted({_index(names, q, user_names) for q in parameters}))
    for i in chosen:
        if not free[i]:
            raise ValueError(f"parameter {names[i]} is fixed (equal bounds): nothing to profile")

    # the estimate again with the profile's settings (weights fixed): the reference fit
    warm = result if result._X is not None and result._disc is not None else None
    with warnings.catch_warnings():  # the estimate's own FitWarnings were raised with it
        warnings.simplefilter("ignore", FitWarning)
        base = estimate(model, experiments, np.clip(result.p, p_lb, p_ub), result.method,
                        p_bounds=(p_lb, p_ub), warm_start=warm, uncertainty=False, **kwargs)
    if not base.success:
        raise ValueError(f"re-fitting the estimate with the profile's settings failed: "
                         f"{base.message}")
    n_theta = sum(estimated_quantities(p_lb, p_ub, model.nx, len(experiments),
                                       kwargs["estimate_x0"]))
    dof = None
    criterion = float(base.weighted_ssr)
    if noise == "likelihood":
        s2, q = 1.0, chi2_1(confidence)
        criterion = 2.0 * float(base.nllh)
    elif noise == "estimated":
        dof = int(base.n_measurements) - n_theta
        if dof < 1:
            raise ValueError(
                f"{base.n_measurements} measurements for {n_theta} estimated quantities: the "
                "noise level cannot be estimated; pass noise='known' with inverse-variance weights")
        s2 = base.weighted_ssr / dof
        q = f_1(confidence, dof)
    else:
        s2, q = 1.0, chi2_1(confidence)

    std = None if result.p_std is None else np.asarray(result.p_std, float)
    wald_half = np.full(result.p.size, np.nan)
    if std is not None:
        wald_half = std * np.sqrt(q)
    magnitude = np.maximum(np.abs(base.p), np.where(np.isfinite(wald_half), wald_half, 0.0))
    magnitude = np.where(magnitude > 0, magnitude, 1.0)
    first = np.where(np.isfinite(wald_half) & (wald_half > 0), _ZETA_STEP * wald_half,
                     0.05 * magnitude)
    ctx = _Context(model=model, experiments=experiments, method=result.method, kwargs=kwargs,
                   p_lb=p_lb, p_ub=p_ub, wssr=criterion, scale=s2 * q,
                   likelihood=noise == "likelihood",
                   first_step=first, magnitude=magnitude, max_range=float(max_range),
                   near_zero=np.where(on_log_scale, np.inf,
                                      np.where(base.p != 0, 1e-3 * np.abs(base.p), first)),
                   max_steps=int(max_steps), base=base)
    tasks = [(i, d) for i in chosen for d in (-1, 1)]
    with executor_for(executor, n_jobs, len(tasks)) as ex:
        if ex is None:
            sides = [_walk(ctx, i, d) for i, d in tasks]
        else:
            ctx.base = portable(base)
            try:
                data = encode({"context": ctx})
            finally:
                ctx.base = base
            sides = run_tasks(_walk_in_worker, [(data, i, d) for i, d in tasks], ex)

    # the Wald intervals within the bounds, as the result's summary has them
    # (a rho bounded to [-3, 0] in log10 was shown [-68.0, 68.0])
    prof = Profile(intervals=np.full((result.p.size, 2), np.nan), estimate=base.p.copy(),
                   wald=None if result.p_ci is None else clipped_intervals(
                       result.p_ci, p_lb, p_ub),
                   std=std, names=names, confidence=float(confidence), noise=noise,
                   threshold=float(q), dof=dof, s2=float(s2), wssr=criterion,
                   scales=list(scales) if user_names and len(scales) == np.size(result.p)
                   else [], own_names=user_names)
    prof.evaluations = 1 + sum(len(s.values) for s in sides)
    for i in chosen:
        lower, upper = sides[tasks.index((i, -1))], sides[tasks.index((i, 1))]
        assemble_path(prof, i, lower, upper, base)
        for side, word in ((lower, "below"), (upper, "above")):
            note = held_by_a_bound(prof, i, side, word, ctx.p_lb, ctx.p_ub)
            if note:
                prof.warnings.append(note)
    prof.wall_time = time.perf_counter() - t_start
    for note in prof.warnings:
        warn_user(note)
    return prof
