"""Nodes and integration matrices of the discretised Picard operator.

On the reference interval ``[0, 1]`` a function is held by its values on
``K`` nodes ``tau_0 = 0 < ... < tau_{K-1} = 1``.  The Picard operator needs
the integral of the interpolant of those values from ``0`` to any point
``tau``; this module provides it as a row of weights:

    int_0^tau  I[f](s) ds  =  sum_l  row(tau)[l] * f(tau_l)

Three schemes:

``"chebyshev"``
    Chebyshev-Lobatto nodes ``tau_k = (1 - cos(pi k / (K-1))) / 2`` and the exact
    integral of the interpolating polynomial of degree ``K - 1``.  Exact for
    integrands that are polynomials of degree up to ``K - 1``; the error on
    smooth (analytic) integrands falls geometrically with ``K``.
``"radau"``
    The interval start and the ``K - 1`` Radau IIA points (the zeros of
    ``P_{K-1}(x) - P_{K-2}(x)`` on ``x = 2 tau - 1``, the last one ``tau = 1``);
    the integrand is interpolated on the Radau points only (degree ``K - 2``,
    the start's value carries no weight), so that the fixed point is Radau
    IIA collocation: L-stable, for stiff models (a fast mode decays within
    one interval however long; the Chebyshev and trapezoid rules, only
    A-stable, carry it on with the sign flipping from interval to interval),
    of order ``2K - 3`` at the interval ends.  The states between the nodes
    are the polynomial of degree ``K - 1`` through all ``K`` nodes, whose
    derivative is that interpolant (so sample values by integration and by
    interpolation agree at the fixed point).
``"trapezoid"``
    Uniform nodes and the integral of the piecewise-linear interpolant.  Exact
    for integrands of degree up to 1; second-order accurate.

All include the end points, so the last row of the node integration matrix is
the quadrature rule of the whole interval and ``U[:, -1]`` is ``u(T)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.polynomial import chebyshev as _cheb
from numpy.polynomial import legendre as _leg

Scheme = Literal["chebyshev", "radau", "trapezoid"]
SCHEMES: tuple[str, ...] = ("chebyshev", "radau", "trapezoid")


def radau_points(s: int) -> np.ndarray:
    """The ``s`` Radau IIA collocation points on ``(0, 1]``, increasing.

    Parameters
    ----------
    s : int
        Number of stages (at least 1).

    Returns
    -------
    ndarray, shape (s,)
        The zeros of ``P_s(x) - P_{s-1}(x)`` (Legendre polynomials) mapped by
        ``tau = (x + 1) / 2``; the last is 1.
    """
    if s == 1:
        return np.ones(1)
    c = np.zeros(s + 1)
    c[s], c[s - 1] = 1.0, -1.0
    x = np.sort(np.real(_leg.legroots(c)))
    tau = 0.5 * (x + 1.0)
    tau[-1] = 1.0
    return tau


@dataclass(frozen=True)
class Quadrature:
    """Nodes on ``[0, 1]`` and the integration and interpolation rules on them.

    Parameters
    ----------
    scheme : {"chebyshev", "radau", "trapezoid"}
        The node family and the interpolant that is integrated.
    n_nodes : int
        Number of nodes ``K`` including both end points (at least 2).

    Attributes
    ----------
    tau : ndarray, shape (K,)
        The nodes, increasing, ``tau[0] = 0`` and ``tau[-1] = 1``.
    integration : ndarray, shape (K, K)
        ``integration[k, l]`` is the weight of ``f(tau_l)`` in
        ``int_0^{tau_k} f``; row 0 is zero.
    exact_degree : int
        Highest polynomial degree of the integrand integrated exactly.
    """

    scheme: str
    n_nodes: int
    tau: np.ndarray = field(init=False, repr=False)
    integration: np.ndarray = field(init=False, repr=False)
    _cheb_inv: np.ndarray | None = field(init=False, repr=False, default=None)
    # radau: the inverse Vandermonde of the integrand's interpolant (Radau
    # points only); _cheb_inv is then that of the states' (all nodes)
    _f_inv: np.ndarray | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise ValueError(
                f"scheme must be one of {SCHEMES}, got {self.scheme!r}"
            )
        if int(self.n_nodes) != self.n_nodes or self.n_nodes < 2:
            raise ValueError(
                f"nodes must be an integer of at least 2, got {self.n_nodes!r}"
            )
        if self.scheme in ("chebyshev", "radau") and self.n_nodes > 64:
            raise ValueError(
                f"nodes={self.n_nodes} is more than 64 {self.scheme} nodes per "
                "interval; shorten the interval T instead"
            )
        K = int(self.n_nodes)
        object.__setattr__(self, "n_nodes", K)
        if self.scheme == "chebyshev":
            tau = 0.5 * (1.0 - np.cos(np.pi * np.arange(K) / (K - 1)))
            # Vandermonde of Chebyshev polynomials at the nodes (x = 2 tau - 1);
            # well conditioned at Chebyshev points, so its inverse is safe.
            vander = _cheb.chebvander(2.0 * tau - 1.0, K - 1)
            object.__setattr__(self, "_cheb_inv", np.linalg.inv(vander))
        elif self.scheme == "radau":
            tau = np.concatenate([[0.0], radau_points(K - 1)])
            object.__setattr__(self, "_cheb_inv", np.linalg.inv(
                _cheb.chebvander(2.0 * tau - 1.0, K - 1)))
            object.__setattr__(self, "_f_inv", np.linalg.inv(
                _cheb.chebvander(2.0 * tau[1:] - 1.0, K - 2)))
        else:
            tau = np.linspace(0.0, 1.0, K)
        tau[0], tau[-1] = 0.0, 1.0
        object.__setattr__(self, "tau", tau)
        object.__setattr__(self, "integration", self.integration_rows(tau))

    @property
    def exact_degree(self) -> int:
        """Highest degree of a polynomial integrand that is integrated exactly."""
        return {"chebyshev": self.n_nodes - 1, "radau": self.n_nodes - 2}.get(self.scheme, 1)

    def integration_rows(self, tau: np.ndarray) -> np.ndarray:
        """Weights of ``int_0^tau`` of the interpolant, one row per point.

        Parameters
        ----------
        tau : array_like, shape (M,)
            Points in ``[0, 1]``.

        Returns
        -------
        ndarray, shape (M, K)
        """
        tau = self._check_points(tau)
        if self.scheme == "chebyshev":
            # Lagrange basis l_j = sum_m C[m, j] T_m(x); integrate each exactly.
            coef = _cheb.chebint(self._cheb_inv, m=1, lbnd=-1.0, axis=0)
            vals = _cheb.chebval(2.0 * tau - 1.0, coef, tensor=True)  # (K, M)
            rows = 0.5 * vals.T
            rows[tau == 0.0] = 0.0  # an empty integral, not round-off (~1e-17)
            return rows
        if self.scheme == "radau":
            # the Lagrange basis of the Radau points; the start's column is 0
            coef = _cheb.chebint(self._f_inv, m=1, lbnd=-1.0, axis=0)
            vals = _cheb.chebval(2.0 * tau - 1.0, coef, tensor=True)  # (K-1, M)
            rows = np.zeros((tau.size, self.n_nodes))
            rows[:, 1:] = 0.5 * vals.T
            rows[tau == 0.0] = 0.0
            return rows
        K = self.n_nodes
        width = 1.0 / (K - 1)
        rows = np.zeros((tau.size, K))
        for i, s in enumerate(tau):
            m = self._segment(s)
            rows[i, :m] += width / 2.0
            rows[i, 1 : m + 1] += width / 2.0
            d = s - m * width
            rows[i, m] += d - d * d / (2.0 * width)
            rows[i, m + 1] += d * d / (2.0 * width)
        return rows

    def interpolation_rows(self, tau: np.ndarray) -> np.ndarray:
        """Weights of the interpolant's value at each point.

        Parameters
        ----------
        tau : array_like, shape (M,)
            Points in ``[0, 1]``.

        Returns
        -------
        ndarray, shape (M, K)
        """
        tau = self._check_points(tau)
        if self.scheme in ("chebyshev", "radau"):
            vals = _cheb.chebval(2.0 * tau - 1.0, self._cheb_inv, tensor=True)
            return vals.T
        K = self.n_nodes
        width = 1.0 / (K - 1)
        rows = np.zeros((tau.size, K))
        for i, s in enumerate(tau):
            m = self._segment(s)
            w = (s - m * width) / width
            rows[i, m] = 1.0 - w
            rows[i, m + 1] = w
        return rows

    def _segment(self, s: float) -> int:
        """Index of the uniform-node segment holding ``s`` (trapezoid scheme)."""
        width = 1.0 / (self.n_nodes - 1)
        return min(int(np.floor(s / width + 1e-12)), self.n_nodes - 2)

    @staticmethod
    def _check_points(tau: np.ndarray) -> np.ndarray:
        tau = np.atleast_1d(np.asarray(tau, dtype=float))
        if tau.ndim != 1:
            raise ValueError(f"tau must be 1-D, got shape {tau.shape}")
        if np.any(tau < -1e-12) or np.any(tau > 1.0 + 1e-12):
            raise ValueError("tau must lie in [0, 1] (the reference interval)")
        return np.clip(tau, 0.0, 1.0)
