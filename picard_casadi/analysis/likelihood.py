"""The likelihood of an estimate: noise levels, ``nllh``, ``det R``, AIC and BIC.

Each output ``k`` has Gaussian noise of standard deviation ``sigma_k``.  The
negative log-likelihood, with its constants as PEtab defines it (so numbers
compare across tools)::

    nllh = sum_k sum_i  0.5 log(2 pi sigma_k^2) + 0.5 ((y_ki - g_ki) / sigma_k)^2

Where the noise is unknown (every output's variance estimated with the
parameters, the output-error method's criterion with a diagonal ``R``), the
likelihood's optimum over ``sigma`` for given residuals is ``sigma_k^2 =
SSR_k / N_k`` (:func:`ml_variances`), and then ``nllh = sum_k N_k / 2 (log(2
pi SSR_k / N_k) + 1)``: minimising it over the parameters minimises ``det R
= prod_k sigma_k^2``.  :func:`picard_casadi.estimation.refinement.solve_with_weights`
reaches that optimum by the relaxation of the output-error method: weights
``1 / sigma_k^2`` held fixed for a Gauss-Newton solve, ``sigma_k`` re-estimated
from its residuals, repeated until they settle.  Where the weights are given
they are the known inverse variances.

AIC and BIC count every estimated quantity: the parameters, the initial
states, and the noise levels where they are estimated (as pyPESTO does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["ml_variances", "NoiseGroups", "NoiseFit", "noise_fit", "VARIANCE_FLOOR"]

#: a noise variance is at least this fraction of the output's mean square (an
#: exact fit has SSR = 0, whose likelihood is unbounded)
VARIANCE_FLOOR = 1e-12


def ml_variances(ssr: np.ndarray, counts: np.ndarray, mean_square: np.ndarray) -> np.ndarray:
    """Each output's maximum-likelihood noise variance ``SSR_k / N_k``.

    Floored at :data:`VARIANCE_FLOOR` times the output's mean square (or at
    ``VARIANCE_FLOOR`` where that is 0); NaN for an output without data.
    """
    ssr = np.asarray(ssr, float)
    counts = np.asarray(counts, float)
    floor = VARIANCE_FLOOR * np.where(np.asarray(mean_square, float) > 0, mean_square, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        var = np.where(counts > 0, ssr / counts, np.nan)
    return np.where(np.isnan(var), np.nan, np.maximum(var, floor))


@dataclass(frozen=True)
class NoiseFit:
    """What the likelihood says of a fit.

    Attributes
    ----------
    sigma : ndarray (ny,)
        Each output's noise standard deviation (estimated or given).
    estimated : bool
        Whether ``sigma`` was estimated with the parameters.
    nllh : float
        Negative log-likelihood with its constants (PEtab's definition).
    det_R : float
        ``prod sigma_k^2`` over the measured outputs (NaN where the noise was given).
    aic, bic : float
        ``2 nllh + 2 k`` and ``2 nllh + k log(m)``, ``k`` the estimated
        quantities (the noise levels included where estimated), ``m`` the
        measurements.
    n_estimated : int
        ``k``.
    """

    sigma: np.ndarray
    estimated: bool
    nllh: float
    det_R: float
    aic: float
    bic: float
    n_estimated: int


@dataclass(frozen=True)
class NoiseGroups:
    """Which outputs' noise levels are estimated, and together with which.

    Attributes
    ----------
    group : ndarray of int (ny,)
        Each output's noise parameter (an index into ``names``), or -1 where
        its noise is known.
    known_weights : ndarray (ny,)
        ``1 / sigma_k^2`` of a known output (1 where each value's sigma is
        its own, given with the data); ignored for estimated ones.
    names : tuple of str
        The noise parameters.
    lower, upper : ndarray (n_groups,)
        Bounds of each noise parameter (a standard deviation).
    constant : float
        The log-normal outputs' Jacobian terms of the likelihood (``sum log
        y_i``, or ``sum log(y_i ln 10)`` on the log10 scale), which no
        parameter changes.
    n_formula : int
        Noise parameters of noise formulas (their outputs count as known
        here: each value's ``sigma_i`` is held in the data's own weights).
    formula_outputs : tuple of int
        The outputs whose noise is a formula.
    """

    group: np.ndarray
    known_weights: np.ndarray
    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    constant: float = 0.0
    n_formula: int = 0
    formula_outputs: tuple[int, ...] = ()

    @classmethod
    def each_output(cls, y_names: tuple[str, ...] | list[str]) -> NoiseGroups:
        """Every output's noise level estimated on its own (``weights="auto"``)."""
        ny = len(y_names)
        return cls(group=np.arange(ny), known_weights=np.ones(ny),
                   names=tuple(f"sigma_{n}" for n in y_names),
                   lower=np.zeros(ny), upper=np.full(ny, np.inf))

    @property
    def estimated(self) -> np.ndarray:
        """Per output: whether its noise level is estimated."""
        return self.group >= 0

    def variances(self, ssr: np.ndarray, counts: np.ndarray,
                  mean_square: np.ndarray) -> np.ndarray:
        """Each output's noise variance: known, or the likelihood's optimum for
        these residuals, ``sum SSR_k / sum N_k`` over the outputs sharing a noise
        parameter (:func:`ml_variances`), clipped to the parameter's bounds."""
        ssr = np.asarray(ssr, float)
        counts = np.asarray(counts, float)
        with np.errstate(divide="ignore"):
            var = np.where(self.known_weights > 0, 1.0 / self.known_weights, np.inf)
        for g in range(len(self.names)):
            members = self.group == g
            if not members.any():
                continue
            v = ml_variances(np.array([ssr[members].sum()]), np.array([counts[members].sum()]),
                             np.array([np.mean(np.asarray(mean_square, float)[members])]))[0]
            if np.isfinite(v):
                v = float(np.clip(v, self.lower[g] ** 2, self.upper[g] ** 2))
            var[members] = v
        return var


def noise_fit(ssr: np.ndarray, counts: np.ndarray, mean_square: np.ndarray,
              n_quantities: int, weights: np.ndarray | None = None,
              groups: NoiseGroups | None = None, constant: float = 0.0) -> NoiseFit:
    """The likelihood of residuals with ``ssr[k]`` over ``counts[k]`` measurements per output.

    Parameters
    ----------
    ssr, counts, mean_square : ndarray (ny,)
        Per output: sum of squared residuals (each value weighted by its own
        ``1 / sigma_i^2`` where the data give one), number of measurements,
        mean square of the measurements.
    n_quantities : int
        Estimated parameters and initial states.
    weights : ndarray (ny,), optional
        Known inverse noise variances (all of them); ``None``: as ``groups``
        says, or every variance estimated (:func:`ml_variances`).
    groups : NoiseGroups, optional
        Which variances are estimated, and which are shared.
    constant : float
        Added to ``nllh``: ``-0.5 sum log s_i`` over the values with their own
        weight ``s_i = 1 / sigma_i^2`` (``Discretisation.log_sample_weights``).
    """
    ssr = np.asarray(ssr, float)
    counts = np.asarray(counts, float)
    measured = counts > 0
    if weights is not None:
        with np.errstate(divide="ignore"):
            var = np.where(np.asarray(weights, float) > 0, 1.0 / np.asarray(weights, float),
                           np.inf)
        n_noise, estimated = 0, np.zeros(ssr.size, bool)
    else:
        if groups is None:
            var = ml_variances(ssr, counts, mean_square)
            n_noise, estimated = int(np.count_nonzero(measured)), np.ones(ssr.size, bool)
        else:
            var = groups.variances(ssr, counts, mean_square)
            estimated = groups.estimated
            n_noise = len({int(g) for g, m in zip(groups.group, measured) if g >= 0 and m})
            n_noise += groups.n_formula
            constant += groups.constant
    with np.errstate(all="ignore"):
        terms = 0.5 * counts * np.log(2.0 * math.pi * var) + 0.5 * ssr / var
    # an output with weight 0 does not enter the likelihood
    used = measured & np.isfinite(var)
    nllh = float(np.sum(terms[used])) + constant
    k = int(n_quantities) + n_noise
    m = float(counts[used].sum())
    det_R = (float(np.prod(var[used & estimated])) if np.any(used & estimated)
             else float("nan"))
    return NoiseFit(sigma=np.sqrt(var), estimated=bool(np.any(estimated & used)), nllh=nllh,
                    det_R=det_R, aic=2.0 * nllh + 2.0 * k,
                    bic=2.0 * nllh + k * math.log(m) if m > 0 else float("nan"),
                    n_estimated=k)
