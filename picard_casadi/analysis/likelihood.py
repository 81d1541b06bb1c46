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

__all__ = ["ml_variances", "NoiseFit", "noise_fit", "VARIANCE_FLOOR"]

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


def noise_fit(ssr: np.ndarray, counts: np.ndarray, mean_square: np.ndarray,
              n_quantities: int, weights: np.ndarray | None = None) -> NoiseFit:
    """The likelihood of residuals with ``ssr[k]`` over ``counts[k]`` measurements per output.

    Parameters
    ----------
    ssr, counts, mean_square : ndarray (ny,)
        Per output: sum of squared residuals, number of measurements, mean
        square of the measurements.
    n_quantities : int
        Estimated parameters and initial states.
    weights : ndarray (ny,), optional
        Known inverse noise variances; ``None``: the variances are estimated
        (:func:`ml_variances`).
    """
    ssr = np.asarray(ssr, float)
    counts = np.asarray(counts, float)
    measured = counts > 0
    if weights is None:
        var = ml_variances(ssr, counts, mean_square)
        n_noise = int(np.count_nonzero(measured))
    else:
        with np.errstate(divide="ignore"):
            var = np.where(np.asarray(weights, float) > 0, 1.0 / np.asarray(weights, float),
                           np.inf)
        n_noise = 0
    with np.errstate(all="ignore"):
        terms = 0.5 * counts * np.log(2.0 * math.pi * var) + 0.5 * ssr / var
    # an output with weight 0 does not enter the likelihood
    used = measured & np.isfinite(var)
    nllh = float(np.sum(terms[used]))
    k = int(n_quantities) + n_noise
    m = float(counts[used].sum())
    det_R = float(np.prod(var[used])) if weights is None else float("nan")
    return NoiseFit(sigma=np.sqrt(var), estimated=weights is None, nllh=nllh, det_R=det_R,
                    aic=2.0 * nllh + 2.0 * k,
                    bic=2.0 * nllh + k * math.log(m) if m > 0 else float("nan"),
                    n_estimated=k)
