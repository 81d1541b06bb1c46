"""``estimate``'s noise models as the problem a method solves.

:func:`noise_plan` reads ``noise`` (one :class:`~picard_casadi.noise.Noise`
per output) and the experiments' per-measurement ``sigma`` and gives:

- the model and experiments on the scale where each output's noise is
  normal (a log-normal output's expression and data replaced by their
  ``log`` or ``log10``), so every method, the certificate and the standard
  errors see a weighted least-squares problem;
- :class:`~picard_casadi.analysis.likelihood.NoiseGroups`: which noise
  levels are known, which estimated, which shared (a noise parameter named
  by several outputs), and the log-normal Jacobian terms of ``nllh``.

Each value's own ``sigma_i`` (``Experiment(sigma=...)``) enters the
objective as the relative weight ``1 / sigma_i^2``
(``Discretisation.sample_weights``); its output's weight is then 1 where the
noise is known, or ``1 / c^2`` with the scale ``c`` estimated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import casadi as ca
import numpy as np

from ..analysis.likelihood import NoiseGroups
from ..experiment import Experiment
from ..model import Model
from ..noise import LOG_FLOOR, Noise, log_scaled_model
from ..errors import with_closest
from .noise_covariance import NoiseCovariance
from .noise_formula import NoiseFormula

__all__ = ["NoisePlan", "noise_plan", "as_noise_list", "floored_measurement", "floored_where",
           "floored_at_start", "FLOORED_AT", "check_positive_at_start", "ZeroAtStartError"]


@dataclass(frozen=True)
class NoisePlan:
    """The noise models of a fit, resolved.

    Attributes
    ----------
    noise : tuple of Noise
        One per output.
    groups : NoiseGroups
        Known and estimated noise levels (the likelihood's bookkeeping).
    model : Model
        The model with each log-normal output on its log scale.
    experiments : list of Experiment
        The experiments likewise, as a method sees them (with the held
        ``sigma_i`` of noise formulas).
    data : list of Experiment
        The experiments on the noise's scale without the formulas' data shift.
    formula : NoiseFormula or None
        The outputs with a noise formula and their noise parameters.
    """

    noise: tuple[Noise, ...]
    groups: NoiseGroups
    model: Model
    experiments: list[Experiment]
    data: list[Experiment]
    formula: NoiseFormula | NoiseCovariance | None = None
    #: the outputs' full covariance is estimated (``noise="correlated"``)
    correlated: bool = False

    @property
    def transformed(self) -> bool:
        """Whether an output is compared on a log scale."""
        return any(n.scale != "lin" for n in self.noise)

    def describe(self, y_names: Sequence[str]) -> list[str]:
        """Per output, ``"name: distribution, where sigma comes from"``."""
        if self.correlated:
            return [f"{name}: normal, correlated with the others (full R estimated)"
                    for name in y_names]
        return [f"{name}: {n.describe()}" for name, n in zip(y_names, self.noise)]


def as_noise_list(noise: Any, y_names: Sequence[str]) -> tuple[Noise, ...]:
    """``noise`` (one Noise, a sequence of ``ny``, or a mapping by output name;
    a string is a distribution) as one Noise per output."""
    ny = len(y_names)

    def one(value: Any, where: str) -> Noise:
        if isinstance(value, Noise):
            return value
        if isinstance(value, str):
            return Noise(distribution=value)
        if isinstance(value, Mapping):
            return Noise(**value)
        raise ValueError(f"`noise`{where} must be a pc.Noise (or a distribution name), "
                         f"got {value!r}")

    if isinstance(noise, Mapping) and not set(noise) <= {"distribution", "sigma", "bounds"}:
        unknown = [k for k in noise if k not in y_names]
        if unknown:
            named = ", ".join(with_closest(k, y_names) for k in unknown)
            raise ValueError(f"`noise` names output(s) {named} that the model does not have; "
                             f"its outputs are {list(y_names)}")
        return tuple(one(noise[n], f"[{n!r}]") if n in noise else Noise() for n in y_names)
    if isinstance(noise, (list, tuple)):
        if len(noise) != ny:
            raise ValueError(f"`noise` as a sequence needs one entry per output ({ny}: "
                             f"{list(y_names)}), got {len(noise)}")
        return tuple(one(v, f"[{k}]") for k, v in enumerate(noise))
    single = one(noise, "")
    return (single,) * ny


def _sigma_given(experiments: Sequence[Experiment], ny: int) -> list[list[bool]]:
    """Per output, per experiment: whether it gives the output's measurements'
    own sigma (``Experiment(sigma=...)``)."""
    return [[exp.sigma is not None and bool(np.any(np.isfinite(exp.sigma[:, k])))
             for exp in experiments] for k in range(ny)]


def default_noise(experiments: Sequence[Experiment], ny: int) -> tuple[Noise, ...]:
    """``estimate(noise=None)``: each output's sigma the data's where an
    experiment gives it (``sigma="data"``), estimated otherwise."""
    return tuple(Noise(sigma="data") if any(given) else Noise()
                 for given in _sigma_given(experiments, ny))


#: the words of :func:`floored_measurement`'s note that say which output and where
FLOORED_AT = "is 0 or negative at the estimate where it is measured"


def floored_where(warnings: Sequence[str]) -> str:
    """From a result's ``warnings``, where :func:`floored_measurement`'s note
    puts a log-normal output at 0 or below: ``"output 'C' is 0 or negative at
    the estimate where it is measured (experiment 'A', t = 0.5)"``, or ``""``."""
    note = next((w for w in warnings if FLOORED_AT in w), "")
    return note[note.index("output "):note.index(", and its noise")] if note else ""


def floored_measurement(model: Model, experiments: list[Experiment],
                        fitted: list[np.ndarray], names: Sequence[str]) -> str:
    """Where a log-normal output's fitted value is at the floor (0 or negative:
    :data:`LOG_FLOOR`) at a measured value, in words ('' where nowhere):
    ``fitted`` the outputs (on the noise's scales) per experiment at its
    sample times, of ``model`` (:func:`_log_scaled`'s); ``names`` the user's
    names of the outputs.  The first such value is named, and how many
    there are."""
    scales = getattr(model, "_output_scales", None)
    if scales is None:
        return ""
    first, count = "", 0
    for k, scale in enumerate(scales):
        if scale == "lin":
            continue
        floor = math.log(LOG_FLOOR) if scale == "log" else math.log10(LOG_FLOOR)
        for exp, values in zip(experiments, fitted):
            hit = np.flatnonzero(np.isfinite(exp.y[:, k])
                                 & (np.asarray(values, float)[:, k] <= floor + 1e-6))
            if hit.size and not first:
                first = (f"output {names[k]!r} {FLOORED_AT} (experiment {exp.name!r}, "
                         f"t = {exp.t[hit[0]]:g}")
            count += hit.size
    if not first:
        return ""
    more = f", and {count - 1} more value(s)" if count > 1 else ""
    return (f"{first}{more}), and its noise is log-normal: the likelihood of a positive "
            f"value there is not finite (nllh counts it at the logarithm of {LOG_FLOOR:g}, a "
            f"residual of some {-math.log(LOG_FLOOR):.0f} that sets the output's noise "
            "level); the model cannot give the value measured there")


def floored_at_start(model: Model, experiments: list[Experiment], x0s: Sequence[np.ndarray],
                     p: np.ndarray, names: Sequence[str]) -> bool:
    """Whether :func:`floored_measurement` holds of ``model`` simulated from
    each experiment's ``x0s[e]`` with ``p`` (the run's start): the statement
    floors the output (a dose of 0), which no run changes; False where the
    output was positive there, so the run went where the model crosses 0 (a
    fed-batch's Monod substrate driven negative at a poor optimum, from a start
    that fitted it), and True where the simulation fails (not known)."""
    from ..transcription.predict import simulated_outputs

    fitted = simulated_outputs(model, experiments, x0s, p)
    return fitted is None or bool(floored_measurement(model, experiments, fitted, names))


class ZeroAtStartError(ValueError):
    """:func:`check_positive_at_start`'s error; ``where`` names the outputs and
    experiments (``"'obs_Rp' in 'c1'"``)."""

    def __init__(self, message: str, where: str) -> None:
        super().__init__(message)
        self.where = where


def check_positive_at_start(model: Model, experiments: Sequence[Experiment],
                            held: np.ndarray, noise: Sequence[Noise]) -> None:
    """A ``ValueError`` (:class:`ZeroAtStartError`) where a log-normal output is measured at an
    experiment's start ``t0`` and its known initial states make it 0 or
    negative there whatever the parameters (a product or species known to
    start at 0, measured there as half a detection limit): its likelihood is
    not finite at any estimate.

    ``held``: which initial states are known (not estimated), one per state.
    """
    scales = [n.scale for n in noise]
    if all(s == "lin" for s in scales):
        return
    hits: dict[int, list[str]] = {}
    count, clocked = 0, []
    for exp in experiments:
        at_start = np.flatnonzero(np.isclose(exp.t, exp.t0, rtol=0.0, atol=1e-12))
        if at_start.size == 0 or exp.x0 is None or not np.any(held):
            continue
        x = ca.vertcat(*[ca.SX(float(exp.x0[i])) if held[i] else model.x[i]
                         for i in range(model.nx)])
        start = ca.substitute(model.y, model.x, x)
        for k, s in enumerate(scales):
            g = start[k]
            if s == "lin" or not (g.is_zero() or (g.is_constant() and float(g) <= 0)):
                continue
            measured = [i for i in at_start if np.isfinite(exp.y[i, k])]
            if measured:
                hits.setdefault(k, []).append(repr(exp.name))
                count += len(measured)
                if not getattr(exp, "_t0_given", True) and exp.t0 > 0:
                    clocked.append(f"{exp.name!r} at its first sample {exp.t0:g}")
    if hits:
        where = "; ".join(f"{model.y_names[k]!r} in {', '.join(names)}"
                          for k, names in hits.items())
        raise ZeroAtStartError(
            "`noise`: log-normal output(s) measured at an experiment's start, where the known "
            f"initial states make them 0 whatever the parameters ({where}; {count} value(s)): "
            "a positive value there has no finite likelihood (reported at half a detection "
            "limit?); leave these values out (NaN), or give the output normal noise (or a "
            "formula a + b*g)" + (
                f"; the clock of {', '.join(dict.fromkeys(clocked))} starts there (t0 not "
                "given): where the known initial states are those of an earlier time (a dose "
                "at t = 0, the data from day 1), give it as Experiment(..., t0=0.0)"
                if clocked else ""), where)


def _log_scaled(model: Model, experiments: list[Experiment], noise: tuple[Noise, ...]
                ) -> tuple[Model, list[Experiment], float]:
    """The model and data with each log-normal output on its log scale, and
    the likelihood's Jacobian terms (a ValueError for data that are not positive)."""
    scales = [n.scale for n in noise]
    if all(s == "lin" for s in scales):
        return model, experiments, 0.0
    new_model = log_scaled_model(model, scales)
    new_exps, jacobian = [], 0.0
    for exp in experiments:
        Y = np.array(exp.y, float)
        for k, s in enumerate(scales):
            if s == "lin":
                continue
            col = Y[:, k]
            measured = np.isfinite(col)
            bad = measured & ~(col > 0)
            if np.any(bad):
                i = int(np.flatnonzero(bad)[0])
                # (every experiment's: the first's alone was counted, 1 of 4 zeros)
                where = [(e.name, int(np.sum(np.isfinite(c) & ~(c > 0))))
                         for e in experiments for c in [np.asarray(e.y, float)[:, k]]]
                where = [(n, c) for n, c in where if c]
                count = (f"{where[0][1]} such value(s)" if len(where) == 1 else
                         f"{sum(c for _, c in where)} such values in {len(where)} experiments: "
                         + ", ".join(f"{n!r} {c}" for n, c in where[:5])
                         + (", ..." if len(where) > 5 else ""))
                raise ValueError(
                    f"`noise`: output {model.y_names[k]!r} has {noise[k].distribution} noise, "
                    f"which needs positive data; experiment {exp.name!r}, sample {i} "
                    f"(counted from 0; t = {exp.t[i]:g}) has y = {col[i]:g} "
                    f"({count}); leave such values out (NaN: below a "
                    "limit of quantification, a reading of 0 says only that); a normal noise "
                    "model instead fits only where the noise does not grow with the value "
                    "(with noise that does, and zeros fitted as readings, a tumour study's "
                    "growth rates came 3 to 6 standard errors off)")
            v = col[measured]
            Y[:, k] = np.log(col) if s == "log" else np.log10(col)
            jacobian += float(np.sum(np.log(v))) + (v.size * math.log(math.log(10.0))
                                                    if s == "log10" else 0.0)
        new_exps.append(exp.replaced(y=Y))
    return new_model, new_exps, jacobian


def noise_plan(noise: Any, model: Model, experiments: list[Experiment]) -> NoisePlan:
    """The plan of ``estimate(..., noise=...)``; ``noise=None``: the experiments'
    ``sigma`` where they give them (known), every other output's estimated.

    Raises
    ------
    ValueError
        For an output whose noise is ``sigma="data"`` in an experiment without
        its ``sigma``, a noise parameter named by outputs with different
        bounds, log-normal noise on data that are not positive; naming the
        argument, experiment, output and sample.
    """
    names = model.y_names
    if isinstance(noise, str) and noise == "correlated":
        return _correlated_plan(model, experiments)
    has_sigma = _sigma_given(experiments, model.ny)
    noises = default_noise(experiments, model.ny) if noise is None else as_noise_list(noise, names)
    for k, n in enumerate(noises):
        if n.sigma != "data":
            continue
        for e, exp in enumerate(experiments):
            measured = bool(np.any(np.isfinite(exp.y[:, k])))
            if measured and not has_sigma[k][e]:
                raise ValueError(
                    f"output {names[k]!r} takes each measurement's sigma from the data "
                    f"(noise sigma='data'{'' if noise is not None else ', as other experiments give it'}), "
                    f"but experiment {exp.name!r} has no `sigma` for it; give "
                    "Experiment(..., sigma=...) there, or a noise model for the output "
                    "(noise={...: pc.Noise(sigma=...)})")
    typical = [float(np.sqrt(np.nanmean(np.concatenate([np.asarray(e.y[:, k], float)
                                                         for e in experiments]) ** 2)))
               if any(np.isfinite(e.y[:, k]).any() for e in experiments) else 1.0
               for k in range(model.ny)]
    formula = (NoiseFormula(noises, names, experiments, typical)
               if any(n.is_formula for n in noises)
               or any(e.noise_parameters for e in experiments) else None)
    in_formula = set(formula.outputs) if formula else set()
    group = np.full(model.ny, -1)
    group_names: list[str] = []
    bounds: dict[str, tuple[float, float]] = {}
    known = np.ones(model.ny)
    for k, n in enumerate(noises):
        if k in in_formula:
            continue  # sigma_i held in the data's weights (noise_formula)
        if n.estimated:
            gname = n.sigma if isinstance(n.sigma, str) else f"sigma_{names[k]}"
            if gname in bounds and bounds[gname] != n.bounds:
                raise ValueError(f"`noise`: noise parameter {gname!r} is given bounds "
                                 f"{bounds[gname]} and {n.bounds} by different outputs")
            if gname not in bounds:
                bounds[gname] = n.bounds
                group_names.append(gname)
            group[k] = group_names.index(gname)
        elif isinstance(n.sigma, float):
            known[k] = 1.0 / n.sigma ** 2
    _check_names_apart(group_names + list(formula.names if formula else ()), model,
                       experiments)
    new_model, new_exps, jacobian = _log_scaled(model, experiments, noises)
    numeric = [k for k, n in enumerate(noises) if isinstance(n.sigma, float)]
    if numeric and any(exp.sigma is not None for exp in new_exps):
        # a known sigma of the output's own replaces the data's
        replaced = []
        for exp in new_exps:
            if exp.sigma is None:
                replaced.append(exp)
                continue
            sig = np.array(exp.sigma, float)
            sig[:, numeric] = np.nan  # none of the data's: each value weighs 1
            replaced.append(exp.replaced(sigma=sig))
        new_exps = replaced
    groups = NoiseGroups(group=group, known_weights=known, names=tuple(group_names),
                         lower=np.array([bounds[g][0] for g in group_names], float),
                         upper=np.array([bounds[g][1] for g in group_names], float),
                         constant=jacobian, n_formula=len(formula.names) if formula else 0,
                         formula_outputs=tuple(formula.outputs) if formula else ())
    held = new_exps
    if formula:
        formula.check_start(new_exps)
        held = formula.held(new_exps, None)
    return NoisePlan(noise=noises, groups=groups, model=new_model, experiments=held,
                     data=new_exps, formula=formula)


def _check_names_apart(noise_names: list[str], model: Model,
                       experiments: list[Experiment]) -> None:
    """Raise where a noise parameter has the name of a model parameter or of
    one an experiment maps to: they would be two parameters of one name in
    the result (``p_names`` and ``noise_parameter_names``)."""
    taken = set(model.p_names) | {v for e in experiments for v in e.parameters.values()
                                  if isinstance(v, str)}
    clash = [n for n in dict.fromkeys(noise_names) if n in taken]
    if clash:
        raise ValueError(
            f"`noise`: noise parameter(s) {', '.join(repr(n) for n in clash)} have the name "
            "of a model parameter (or one an experiment maps to); a noise parameter is "
            "estimated apart from the model's, so give it a name of its own "
            "(pc.Noise(sigma='sigma_...'))")


def _correlated_plan(model: Model, experiments: list[Experiment]) -> NoisePlan:
    """``noise="correlated"``: every output normal, the full covariance ``R``
    estimated (:mod:`.noise_covariance`); each value's weight and data shift
    are held in the experiments a method sees."""
    if any(e.sigma is not None for e in experiments):
        raise ValueError("noise='correlated' estimates the whole covariance: the experiments' "
                         "own `sigma` cannot be used with it")
    covariance = NoiseCovariance(model.y_names, experiments)
    ny = model.ny
    groups = NoiseGroups(group=np.full(ny, -1), known_weights=np.ones(ny), names=(),
                         lower=np.zeros(0), upper=np.zeros(0),
                         n_formula=len(covariance.names), formula_outputs=tuple(range(ny)))
    return NoisePlan(noise=(Noise(),) * ny, groups=groups, model=model,
                     experiments=covariance.held(experiments, None), data=list(experiments),
                     formula=covariance, correlated=True)
