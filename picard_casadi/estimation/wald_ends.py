"""Whether the likelihood is as curved as the standard errors say.

A Wald interval ``theta_i +- 1.96 se_i`` is the likelihood's own where the
likelihood is quadratic in the estimated quantities.  Along the line a
profile of ``theta_i`` follows to first order (every quantity moved by
``C[:, i] / C[i, i]`` per unit of ``theta_i``), the weighted sum of squares
at the interval's ends then lies ``1.96^2 = 3.84`` above its optimum (in
units of the noise variance the covariance ``C`` assumed).  Measured there
by simulating the model, it can lie far below: the data allow that end (and
beyond) nearly as well as the estimate, and the interval understates the
uncertainty.  A surveillance model fitted to reported cases alone (the
reporting fraction and the initial number exposed seen nearly as their
product, correlated -0.985) reported the fraction's interval 6 standard errors
from the truth, with 2 log-likelihood at the truth only 1.9 above the
optimum, and no warning.  The profile (``pc.profile``), which re-fits the
others, lies lower still, so a low value at a Wald end is conclusive; a high
one is not (the re-fit lowers it).
"""

from __future__ import annotations

import contextvars
from typing import Any

import numpy as np

from ..analysis.prediction_band import band_sensitivities
from ..errors import SimulationError
from ..runtime.user_warnings import warn_user
from .setup import simulated_ssr

__all__ = ["flat_wald_ends", "wald_ends_note", "note_flat_wald_ends", "IN_START", "FLAT_END",
           "MAX_CHECKED"]

#: inside one start of a multistart: its intervals are not checked (the best
#: start's are, once, by the multistart)
IN_START: contextvars.ContextVar[bool] = contextvars.ContextVar("in_start", default=False)

#: a Wald interval's end is called flat where the weighted sum of squares
#: there, the others re-fitted, rose by less than this (in noise variances):
#: half the 3.84 of a quadratic likelihood, the end inside the likelihood's
#: own 83 % interval
FLAT_END = 1.92
#: Gauss-Newton steps of the others at a Wald interval's end (a profile's
#: re-fit, approximated: an upper bound of the profile there) ...
REFIT_STEPS = 2
#: ... where the line rose by more than this (twice a quadratic's 3.84: the
#: line leaves a curved valley the re-fit follows; nearer 3.84 it stays in it)
CURVED_RISE = 7.68
#: the most estimated parameters whose intervals are checked (two
#: simulations each) ...
MAX_CHECKED = 30
#: ... among those correlated with another by at least this much
CORRELATED = 0.95
#: the simulated sum of squares at the estimate reproduces the fit's to this
#: share of a noise variance, or nothing is checked
REPRODUCED = 0.1
#: the normal quantile of the 95 % interval
Z95 = 1.959963984540054


def _misfit(model: Any, experiments: list[Any], x0s: list[np.ndarray], p: np.ndarray,
            weights: np.ndarray) -> float:
    """The weighted sum of squares of the model simulated from ``x0s`` with
    ``p`` (NaN where a simulation fails)."""
    simulated = simulated_ssr(model, experiments, x0s, p)
    return float("nan") if simulated is None else float(simulated[0] @ weights)


def _refit_step(model: Any, experiments: list[Any], x0s: list[np.ndarray], p: np.ndarray,
                weights: np.ndarray, columns: list[tuple[str, int, int]],
                held: int) -> np.ndarray | None:
    """A Gauss-Newton step of the estimated quantities ``columns`` but
    ``held`` on the weighted residuals at ``(x0s, p)``, by the exact output
    sensitivities; None where they fail."""
    rs, Js = [], []
    for e, exp in enumerate(experiments):
        own = tuple(i for kind, ex, i in columns if kind == "x0" and ex == e)
        try:
            with np.errstate(all="ignore"):
                Y, dY = band_sensitivities(model, exp, x0s[e], p, np.asarray(exp.t, float), own)
        except (SimulationError, RuntimeError, ValueError):
            return None
        y = np.asarray(exp.y, float)
        root = np.sqrt(exp.value_weights() * weights[None, :y.shape[1]])
        r = (y - Y[:, :y.shape[1]]) * root
        J = np.zeros(r.shape + (len(columns),))
        for c, (kind, ex, i) in enumerate(columns):
            if kind == "p":
                J[:, :, c] = dY[:, :y.shape[1], i]
            elif kind == "x0" and ex == e:
                J[:, :, c] = dY[:, :y.shape[1], model.np + own.index(i)]
        measured = np.isfinite(r)
        rs.append(r[measured])
        Js.append(J[measured] * root[measured][:, None])
    r, J = np.concatenate(rs), np.concatenate(Js)
    J[:, held] = 0.0
    if not (np.all(np.isfinite(r)) and np.all(np.isfinite(J))):
        return None
    return np.linalg.lstsq(J, r, rcond=None)[0]


def _moved(p: np.ndarray, x0s: list[np.ndarray], columns: list[tuple[str, int, int]],
           move: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """``(p, x0s)`` with each estimated quantity of ``columns`` moved."""
    p_end, x0_end = p.copy(), [x.copy() for x in x0s]
    for (kind, e, j), step in zip(columns, move):
        if kind == "p":
            p_end[j] += step
        elif kind == "x0":
            x0_end[e][j] += step
    return p_end, x0_end


def flat_wald_ends(result: Any) -> list[tuple[str, str, float]]:
    """``(name, "upper" or "lower", rise)`` of each estimated parameter whose
    95 % Wald interval ends where the weighted sum of squares (in the noise
    variances the covariance assumed) rose by less than :data:`FLAT_END`,
    along the line a profile follows to first order; empty where the check
    does not apply (no covariance, noise formulas or correlated noise, a
    failed simulation at the estimate)."""
    disc, covariance = getattr(result, "_disc", None), getattr(result, "_covariance", None)
    if disc is None or covariance is None or not result.success:
        return []
    models = [str(m) for m in result.settings.get("noise_model") or []]
    if any(m.endswith("(a formula)") or "correlated" in m for m in models):
        return []
    columns, cov, _ = covariance
    cov = np.asarray(cov, float)
    weights = np.asarray(result.weights, float).ravel()
    if result.settings.get("weights") == "auto":
        s2 = 1.0  # (the likelihood's weights: 1 / sigma_k^2)
    else:
        m, n = int(result.n_measurements), len(columns)
        s2 = float(result.weighted_ssr) / (m - n) if m > n else float("nan")
    with np.errstate(all="ignore"):
        sd = np.sqrt(np.diag(cov))
        corr = np.abs(cov / np.outer(sd, sd))
    np.fill_diagonal(corr, 0.0)
    # (a flat end comes from the others compensating: a parameter no other
    # correlates with strongly is not checked, which keeps the cost away from
    # well-determined fits)
    checked = [(k, i) for k, (kind, _, i) in enumerate(columns)
               if kind == "p" and np.nanmax(corr[k], initial=0.0) >= CORRELATED]
    if not (np.isfinite(s2) and s2 > 0) or not checked or len(checked) > MAX_CHECKED:
        return []
    model, experiments = disc.model, list(disc.experiments)
    p = np.asarray(result.p, float)
    x0s = [np.asarray(x, float)[:model.nx] for x in result.x0]
    base = _misfit(model, experiments, x0s, p, weights)
    if not abs(base - float(result.weighted_ssr)) <= REPRODUCED * s2:
        # the simulations cannot tell a noise variance (data near noise-free
        # beside the integration's tolerance: rises of -1 read as flat)
        return []
    bounds = result.settings.get("p_bounds")
    lower, upper = ((np.asarray(bounds[0], float), np.asarray(bounds[1], float))
                    if bounds is not None else (np.full(p.size, -np.inf), np.full(p.size, np.inf)))
    flat = []
    reported = np.asarray(result.p_std if result.p_std is not None else np.full(p.size, np.nan),
                          float)
    for k, i in checked:
        # (an infinite standard error in the table has no Wald end to test: a
        # tumour model's ke, inf there, had its "lower end 0.48" named)
        if not (np.isfinite(cov[k, k]) and cov[k, k] > 0) or (
                i < reported.size and not np.isfinite(reported[i])):
            continue
        line = cov[:, k] / cov[k, k] * Z95 * np.sqrt(cov[k, k])
        if not np.all(np.isfinite(line)):
            continue
        for sign, side in ((1.0, "upper"), (-1.0, "lower")):
            p_end, x0_end = _moved(p, x0s, columns, sign * line)
            if np.any(p_end < lower) or np.any(p_end > upper):
                continue  # (a bound clips that end: said where it is)
            rise = (_misfit(model, experiments, x0_end, p_end, weights) - base) / s2
            for _ in range(REFIT_STEPS if rise > CURVED_RISE else 0):  # (as a profile's)
                step = _refit_step(model, experiments, x0_end, p_end, weights, columns, k)
                if step is None:
                    break
                p_try, x0_try = _moved(p_end, x0_end, columns, step)
                if np.any(p_try < lower) or np.any(p_try > upper):
                    break
                tried = (_misfit(model, experiments, x0_try, p_try, weights) - base) / s2
                if not tried < rise:
                    break
                p_end, x0_end, rise = p_try, x0_try, tried
            if -REPRODUCED <= rise < FLAT_END:  # (NaN: the model fails there)
                flat.append((str(result.p_names[i]), side, float(rise)))
    return flat


def wald_ends_note(result: Any) -> str:
    """A warning naming :func:`flat_wald_ends`' parameters; empty where none."""
    flat = flat_wald_ends(result)
    if not flat:
        return ""
    named = ", ".join(f"{name} ({side} end: {rise:.2g})" for name, side, rise in flat)
    return (f"the likelihood is far flatter than the standard errors assume along {named}: "
            "at that end of the 95 % Wald interval, the others re-fitted, 2 x the negative "
            f"log-likelihood rose by the number given, not the {Z95 ** 2:.2f} the interval "
            "assumes, so the data allow values beyond it (a combination the data see better "
            "than each part, such as a product); the intervals and standard errors understate "
            "the uncertainty there: pc.profile gives the likelihood's own intervals")


def note_flat_wald_ends(result: Any, *, in_multistart: bool = False) -> None:
    """Append and warn :func:`wald_ends_note` (not inside a multistart's start,
    :data:`IN_START`, unless ``in_multistart``: the multistart's best)."""
    if IN_START.get() and not in_multistart:
        return
    note = wald_ends_note(result)
    if note:
        result.warnings.append(note)
        warn_user(note)
