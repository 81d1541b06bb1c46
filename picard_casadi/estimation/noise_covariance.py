"""Correlated noise: the outputs' full covariance ``R`` estimated with the parameters.

``estimate(..., noise="correlated")``: every output normal, the noise of one
sample time a vector with an unknown full covariance ``R`` (the output-error
method's criterion with off-diagonal terms; its optimum over ``R`` is ``R =
(1/N) sum_i r_i r_i^T``).  The likelihood is::

    nllh = N/2 (ny log 2 pi + log det R) + 1/2 sum_i r_i^T R^-1 r_i

For fixed ``R`` (``W = R^-1``) its gradient in the parameters is that of the
weighted least squares with diagonal weights ``W_kk`` and data held at::

    y*_k = y_k + c_k,    c_k = sum_{l != k} (W_kl / W_kk) r_l

(``sum_k W_kk (r_k + c_k)^2`` has the gradient of ``r^T W r`` when ``c`` is
held at the current residuals).  So the relaxation of the noise formulas
(:mod:`.noise_formula`) carries over: hold the weights and the shift for a
Gauss-Newton solve of any method, re-estimate ``R`` from the new residuals,
recompute them, until they settle; at the fixed point the gradient of
``nllh`` is zero.  Every sample time must measure every output (a
ValueError names the first that does not).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..analysis.fit_check import noise_variance
from ..experiment import Experiment
from .noise_formula import NoiseFormula

__all__ = ["NoiseCovariance"]


class NoiseCovariance:
    """The full noise covariance of a fit, and the round state (the interface of
    :class:`~.noise_formula.NoiseFormula` the relaxation uses).

    Parameters
    ----------
    y_names : sequence of str
    experiments : sequence of Experiment
        The data (each measured row must measure every output).
    """

    def __init__(self, y_names: Sequence[str], experiments: Sequence[Experiment]) -> None:
        self.y_names = tuple(y_names)
        ny = len(self.y_names)
        for exp in experiments:
            finite = np.isfinite(exp.y)
            rows = np.any(finite, axis=1)
            partial = np.flatnonzero(rows & ~np.all(finite, axis=1))
            if partial.size:
                i = int(partial[0])
                missing = [self.y_names[k] for k in np.flatnonzero(~finite[i])]
                raise ValueError(
                    f"noise='correlated' needs every output at every sample time; experiment "
                    f"{exp.name!r}, sample {i} (t = {exp.t[i]:g}) lacks {missing}; use "
                    "independent noise (the default) for such data")
        self.outputs = list(range(ny))
        self._index = [(a, b) for a in range(ny) for b in range(a, ny)]
        self.names = tuple(f"R[{self.y_names[a]},{self.y_names[b]}]" for a, b in self._index)
        # the start: each output's white noise from its data's second differences
        var = []
        for k in range(ny):
            series = [np.asarray(e.y[np.isfinite(e.y[:, k]), k], float) for e in experiments]
            v = [noise_variance(s) for s in series if s.size >= 3]
            v = [x for x in v if np.isfinite(x) and x > 0]
            scale = float(np.mean(np.concatenate(series) ** 2)) if series else 1.0
            var.append(float(np.mean(v)) if v else max(scale, 1e-300) * 1e-2)
        self.R = np.diag(var)
        self.theta = self._vech(self.R)
        self.start = self.theta.copy()
        self.lower = np.array([0.0 if a == b else -math.inf for a, b in self._index])
        self.upper = np.full(len(self._index), math.inf)

    def __bool__(self) -> bool:
        return True

    def _vech(self, R: np.ndarray) -> np.ndarray:
        return np.array([R[a, b] for a, b in self._index])

    @staticmethod
    def _residuals(data: Sequence[Experiment], fitted: Sequence[np.ndarray]) -> np.ndarray:
        rows = []
        for exp, G in zip(data, fitted):
            ok = np.all(np.isfinite(exp.y), axis=1)
            rows.append(np.asarray(exp.y, float)[ok] - np.asarray(G, float)[ok])
        return np.vstack(rows) if rows else np.zeros((0, 0))

    def fit_theta(self, data: Sequence[Experiment], fitted: Sequence[np.ndarray]) -> np.ndarray:
        """``R = (1/N) sum r r^T`` of the residuals of ``fitted`` (each diagonal
        entry floored at 1e-12 of its output's mean square), as its entries."""
        r = self._residuals(data, fitted)
        R = r.T @ r / max(r.shape[0], 1)
        mean_square = np.mean(np.vstack([np.asarray(e.y, float)[np.all(np.isfinite(e.y), 1)]
                                         for e in data]) ** 2, axis=0)
        floor = 1e-12 * np.where(mean_square > 0, mean_square, 1.0)
        R[np.diag_indices_from(R)] = np.maximum(np.diag(R), floor)
        self.R = R
        return self._vech(R)

    def not_positive(self, data: Sequence[Experiment], fitted: Sequence[np.ndarray]) -> str:
        """``""``: the covariance's noise levels do not depend on the outputs
        (:meth:`NoiseFormula.not_positive <picard_casadi.estimation.noise_formula.NoiseFormula.not_positive>`'s counterpart)."""
        return ""

    def held(self, data: Sequence[Experiment], fitted: Sequence[np.ndarray] | None
             ) -> list[Experiment]:
        """The experiments a method solves with: each output weighted by
        ``W_kk`` (as ``sigma = W_kk^-1/2``), its data moved by ``c_k`` (none
        where ``fitted`` is None)."""
        W = np.linalg.inv(self.R)
        d = np.diag(W)
        sigma_k = 1.0 / np.sqrt(d)
        out = []
        for e, exp in enumerate(data):
            y = np.array(exp.y, float)
            ok = np.all(np.isfinite(y), axis=1)
            sigma = np.where(np.isfinite(y), sigma_k[None, :], np.nan)
            if fitted is not None:
                r = y[ok] - np.asarray(fitted[e], float)[ok]
                off = W - np.diag(d)
                y[ok] = y[ok] + (r @ off.T) / d[None, :]
            out.append(exp.replaced(y=y, sigma=sigma))
        return out

    def likelihood(self, data: Sequence[Experiment], fitted: Sequence[np.ndarray]
                   ) -> tuple[float, float, np.ndarray]:
        """``nllh`` at the likelihood's ``R`` for these outputs, ``det R``, and each
        output's ``sigma = sqrt(R_kk)``."""
        r = self._residuals(data, fitted)
        n, ny = r.shape
        R = r.T @ r / max(n, 1)
        sign, logdet = np.linalg.slogdet(R)
        if sign <= 0:
            return float("nan"), float("nan"), np.sqrt(np.diag(R))
        nllh = 0.5 * n * (ny * math.log(2 * math.pi) + logdet + ny)
        return float(nllh), float(math.exp(logdet)), np.sqrt(np.diag(R))

    change = staticmethod(NoiseFormula.change)
    unshifted = staticmethod(NoiseFormula.unshifted)
