"""The starting point of every method: interval starts ``x_j`` and node values.

PROBLEMS.md measured that the start matters as much as the step: started from
constant ``x_j``, collocation stopped in a local optimum with 2,000 times the
misfit of the one found from a data-based start.  So:

* states that are outputs (``y[k]`` is ``x[i]``) take, at each interval
  start, the measured value (linear interpolation between finite samples);
* the other states are propagated interval by interval with ``p0``: the
  interval's fixed point ``U = P U`` is solved from the data-anchored start
  (Picard sweeps, and Newton steps where the sweeps do not contract: a
  collocation simulation of the interval), and the end value starts the next
  interval.  This keeps the unmeasured states consistent with the measured
  ones instead of letting a long simulation drift away;
* where neither settles (the model leaves its domain), that interval's nodes
  are held constant at its start and the unmeasured states carry over.

Every ``x_j`` is clipped into the state box.
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from .discretisation import Discretisation
from .sensitivity import PointDerivatives, newton_fixed_point_step
from .transcription import IntervalFunctions

__all__ = ["initial_guess", "measured_state_series"]


def measured_state_series(disc: Discretisation, e: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """For experiment ``e``: state index -> (times, values) of its measurements."""
    model = disc.model
    exp = disc.experiments[e]
    series: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for k, i in enumerate(model.output_state_index):
        if i is None or i in series:
            continue
        col = exp.y[:, k]
        ok = np.isfinite(col)
        if ok.sum() >= 1:
            series[i] = (exp.t[ok], col[ok])
    return series


def initial_guess(
    disc: Discretisation,
    fns: IntervalFunctions,
    p0: np.ndarray,
    x0s: list[np.ndarray],
    estimate_x0: bool,
    x_lb: np.ndarray,
    x_ub: np.ndarray,
    max_sweeps: int = 40,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Build ``X`` (J, nx) and ``U`` (J, nx, K) as described in the module doc.

    Parameters
    ----------
    disc : Discretisation
    fns : IntervalFunctions
        Supplies the single-interval Picard map.
    p0 : ndarray (np,)
    x0s : list of ndarray (nx,)
        Initial-state guess (or known value) per experiment.
    estimate_x0 : bool
        When False the ``x0s`` are kept exactly.
    x_lb, x_ub : ndarray (nx,)
        State box for the ``x_j``.
    max_sweeps : int
        Picard iterations per interval.

    Returns
    -------
    X, U : ndarray
    notes : list of str
        What fell back to constants, for the result's log.
    """
    nx, K = disc.model.nx, disc.K
    J = disc.n_intervals
    X = np.zeros((J, nx))
    U = np.zeros((J, nx, K))
    notes: list[str] = []
    span = np.where(np.isfinite(x_ub - x_lb), x_ub - x_lb, np.inf)
    margin = np.where(np.isfinite(span), 1e-6 * span, 0.0)
    lo, hi = x_lb + margin, x_ub - margin
    picard = fns.picard
    p_dm = ca.DM(p0)
    f_der = PointDerivatives(disc.model, K, 1).functions["f_derivatives"]
    A = disc.quad.integration
    failed = 0
    for e, sl in enumerate(disc.intervals_of):
        series = measured_state_series(disc, e)
        carry = np.asarray(x0s[e], float).copy()
        for j in range(sl.start, sl.stop):
            x = carry.copy()
            fixed_start = j == sl.start and not estimate_x0
            if not fixed_start:
                for i, (ts, vs) in series.items():
                    x[i] = np.interp(disc.t0[j], ts, vs)
                x = np.clip(x, lo, hi)
            X[j] = x
            Uj = np.repeat(x[:, None], K, axis=1)
            scale = np.maximum(np.abs(Uj).max(axis=1), 1e-8)[:, None]
            settled = False
            prev = np.inf
            newton = False
            with np.errstate(all="ignore"):
                for k in range(max_sweeps):
                    try:
                        if newton:
                            new, _ = newton_fixed_point_step(
                                f_der, ca.DM(disc.node_times[j][None, :]),
                                ca.DM(disc.node_inputs[j]), A, disc.h[j:j + 1],
                                x[None, :], Uj[None], p0)
                            new = new[0]
                        else:
                            new = np.asarray(picard(x, Uj, p_dm, disc.t0[j], disc.h[j],
                                                    disc.node_inputs[j]))
                    except RuntimeError:
                        break
                    change = float(np.max(np.abs(new - Uj) / scale))
                    if not np.isfinite(change) or change > 1e6:
                        if newton:
                            break
                        newton, Uj = True, np.repeat(x[:, None], K, axis=1)
                        continue
                    if not newton and k >= 2 and change > 0.5 * prev:
                        newton = True
                    Uj, prev = new, change
                    if change < 1e-10:
                        settled = True
                        break
            if not settled or not np.all(np.isfinite(Uj)):
                Uj = np.repeat(x[:, None], K, axis=1)
                failed += 1
            U[j] = Uj
            carry = Uj[:, -1].copy()
    if failed:
        notes.append(
            f"initial guess: the Picard iteration with p0 did not settle on {failed} of "
            f"{J} intervals; their nodes start constant"
        )
    return X, U, notes
