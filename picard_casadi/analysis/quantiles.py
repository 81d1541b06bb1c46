"""Quantiles of the distributions that confidence intervals use, without SciPy.

``chi2_1`` (a chi-square with one degree of freedom: the square of a normal
quantile, :class:`statistics.NormalDist`), and ``student_t`` and ``f_1``
(Student's t and the F distribution with one numerator degree of freedom,
``F(1, nu) = t(nu)^2``) from the regularised incomplete beta function
(continued fraction, Numerical Recipes' ``betacf``, to 1e-15) inverted by
bisection.  Checked against tabulated values in the tests.
"""

from __future__ import annotations

import math
from statistics import NormalDist

__all__ = ["normal", "chi2_1", "student_t", "f_1"]


def _check_level(q: float) -> float:
    q = float(q)
    if not 0.0 < q < 1.0:
        raise ValueError(f"a probability strictly between 0 and 1 is needed, got {q!r}")
    return q


def normal(q: float) -> float:
    """The ``q`` quantile of the standard normal distribution."""
    return NormalDist().inv_cdf(_check_level(q))


def chi2_1(q: float) -> float:
    """The ``q`` quantile of the chi-square distribution with one degree of freedom."""
    return normal(0.5 + 0.5 * _check_level(q)) ** 2


def _beta_fraction(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def beta_cdf(x: float, a: float, b: float) -> float:
    """The regularised incomplete beta function ``I_x(a, b)``."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def f_1(q: float, dof: float) -> float:
    """The ``q`` quantile of the F distribution with ``(1, dof)`` degrees of freedom.

    ``P(F <= f) = I_{f / (f + dof)}(1/2, dof/2)``, inverted by bisection in
    ``x = f / (f + dof)``.
    """
    q = _check_level(q)
    if not dof > 0:
        raise ValueError(f"the F distribution needs dof > 0, got {dof!r}")
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if beta_cdf(mid, 0.5, 0.5 * dof) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-16:
            break
    x = 0.5 * (lo + hi)
    return dof * x / (1.0 - x)


def student_t(q: float, dof: float) -> float:
    """The ``q`` quantile of Student's t distribution with ``dof`` degrees of freedom."""
    q = _check_level(q)
    if q == 0.5:
        return 0.0
    t = math.sqrt(f_1(2.0 * abs(q - 0.5), dof))
    return t if q > 0.5 else -t
