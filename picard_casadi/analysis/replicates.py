"""Lack of fit against the replicates' own scatter (the pure-error F test).

Where an output is measured several times at one time (replicates), their
scatter about their mean measures the noise without the model: the pure
error.  The means' distance from the fit measures the noise and any misfit.
Their mean squares' ratio is ``F``-distributed with (groups, pure-error
degrees of freedom) where the model fits (each group of ``n_j`` values
scaled by its noise level where the fit gives one per value); far above 1
the model misses something the replicates agree on.  A semi-batch reactor's
bolus stated 5 minutes late: both duplicates at t = 45 lay 8 to 9 noise
levels off the fit, agreeing with each other; the fit raised its noise
estimate 4.5 times, two of four parameters were 2.3 to 2.6 standard errors
off, and nothing was flagged.  The ratio counts every group's means as free
(no degrees of freedom taken for the parameters), so it errs towards no note.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .quantiles import beta_cdf

__all__ = ["replicate_misfit", "REPLICATE_HEAD", "REPLICATE_RATIO", "REPLICATE_P",
           "MIN_PURE_ERROR_DOF"]

#: how a replicate note begins (a FitWarning: analysis/fit_check.py's is_fit_note)
REPLICATE_HEAD = "the replicates agree better than the fit"
#: the pure error needs this many degrees of freedom (replicates beyond one per
#: group) ...
MIN_PURE_ERROR_DOF = 8
#: ... and a flagged output a ratio of mean squares this large ...
REPLICATE_RATIO = 4.0
#: ... at an F tail probability below this
REPLICATE_P = 1e-4


def _tail(f: float, d1: int, d2: int) -> float:
    """``P(F > f)`` for ``F`` with ``(d1, d2)`` degrees of freedom."""
    return 1.0 - beta_cdf(d1 * f / (d1 * f + d2), 0.5 * d1, 0.5 * d2)


def replicate_misfit(data: Sequence[np.ndarray], fitted: Sequence[np.ndarray],
                     times: Sequence[np.ndarray], sigma: Sequence[np.ndarray | None],
                     experiment_names: Sequence[str], output_names: Sequence[str],
                     skipped: Sequence[int] = ()) -> list[str]:
    """One note per output whose replicate means lie off the fit far beyond the
    replicates' own scatter (see the module docstring); empty where none do.

    Parameters
    ----------
    data, fitted : sequences of ndarray (N_e, ny)
        Per experiment, the measurements (NaN: missing) and the fitted
        outputs at the sample times.
    times : sequence of ndarray (N_e,)
    sigma : sequence of ndarray (N_e, ny) or None
        Each value's noise level where the fit has one per value (a noise
        formula's, or given), else None (one level per output).
    experiment_names, output_names : sequences of str
    skipped : sequence of int
        Outputs another note already flags.
    """
    notes = []
    for k, output in enumerate(output_names):
        if k in skipped:
            continue
        lof = pure = 0.0
        groups = dof = 0
        worst = (0.0, "", 0.0, 0)
        for e, (Y, G, t) in enumerate(zip(data, fitted, times)):
            y, g, t = np.asarray(Y, float)[:, k], np.asarray(G, float)[:, k], np.asarray(t, float)
            s = None if sigma[e] is None else np.asarray(sigma[e], float)[:, k]
            measured = np.isfinite(y) & np.isfinite(g)
            for when in np.unique(t[measured]):
                rows = np.flatnonzero(measured & (t == when))
                values = y[rows]
                if rows.size < 2 or np.all(values == values[0]):
                    continue  # (a copied row is no replicate: a note of its own says so)
                level2 = 1.0 if s is None else float(np.mean(s[rows] ** 2))
                if not (np.isfinite(level2) and level2 > 0):
                    continue
                mean = float(np.mean(values))
                pure += float(np.sum((values - mean) ** 2)) / level2
                off = rows.size * (mean - float(g[rows[0]])) ** 2 / level2
                lof += off
                groups += 1
                dof += rows.size - 1
                if off > worst[0]:
                    worst = (off, experiment_names[e], float(when), rows.size)
        if dof < MIN_PURE_ERROR_DOF or groups < 3 or not pure > 0:
            continue
        ratio = (lof / groups) / (pure / dof)
        if ratio < REPLICATE_RATIO or _tail(ratio, groups, dof) >= REPLICATE_P:
            continue
        spread = np.sqrt(pure / dof)  # the replicates' own noise level, in the levels used
        _, exp_name, when, n = worst
        notes.append(
            f"{REPLICATE_HEAD} at the replicated times of output {output!r}: the replicate "
            f"means lie off the fit {ratio:.3g} times as far (in mean square) as the "
            f"replicates scatter about them ({groups} times with replicates, {dof} degrees of "
            f"freedom of their scatter; an F test's tail probability "
            f"{max(_tail(ratio, groups, dof), 1e-16):.1g}), farthest in experiment "
            f"{exp_name!r} at t = {when:g} ({n} values, their mean "
            f"{np.sqrt(worst[0] / n) / max(spread, 1e-300):.3g} times the replicates' scatter "
            "off the fit): the model misses something the replicates agree on (an input's "
            "time or size, a dose, a process it lacks), or the replicates are not independent "
            "(one sample measured twice: then they show the assay's noise only)")
    return notes
