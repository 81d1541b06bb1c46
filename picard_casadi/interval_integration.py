"""Accurate integration of every Picard interval from its start (CVODES).

Two users: ``method="shooting"`` (the states at the samples and the interval
ends are its model) and the discretisation certificate (an accurate solution
to hold the collocation solution against).  Each interval is a chain of
segments from its start through its sample times to its end; on a segment
the inputs are their Chebyshev interpolant and CVODES restarts at every
segment boundary, as in :func:`picard_casadi.simulate`.  Intervals are
padded to the same number of segments with segments of zero length, so one
``mapaccum`` serves every interval and one ``map`` runs them all.
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from .discretisation import Discretisation, to_map_layout
from .simulate import _INPUT_DEGREE, _input_coefficients, _segment_integrator

__all__ = ["IntervalIntegrator"]


class IntervalIntegrator:
    """``(X, p) -> (states at the sample slots, end states)`` of every interval.

    Parameters
    ----------
    disc : Discretisation
    rtol, atol : float
        CVODES tolerances (``atol`` applies to the states as they are).
    max_steps : int
        CVODES step limit per segment.

    Attributes
    ----------
    function : casadi.Function
        ``(X (nx, J), p (np,)) -> (Xs (nx, J M), xend (nx, J))``, an MX
        function: call it with MX symbols (an NLP) or numbers.  Padding
        slots of ``Xs`` (no sample) hold the interval start.
    """

    def __init__(self, disc: Discretisation, rtol: float, atol: float, max_steps: int) -> None:
        m = disc.model
        J, M, nx, np_, nu = disc.n_intervals, disc.M, m.nx, m.np, m.nu
        self.disc = disc
        bounds = []
        for j in range(J):
            e = disc.exp_of[j]
            ts = disc.sample_times[j][disc.sample_exp[j] == e]
            bounds.append(np.unique(np.concatenate([[disc.t0[j]], ts, [disc.t0[j] + disc.h[j]]])))
        S = max(b.size - 1 for b in bounds)
        Q = np.zeros((J, 2 + nu * (_INPUT_DEGREE + 1), S))
        for j, b in enumerate(bounds):
            exp = disc.experiments[disc.exp_of[j]]
            ns = b.size - 1
            Q[j, 0, :ns] = b[:-1]
            Q[j, 1, :ns] = np.diff(b)
            if nu:
                Q[j, 2:, :ns] = _input_coefficients(lambda tt, exp=exp: exp.inputs(tt, nu), b, nu)
            Q[j, 0, ns:] = b[-1]  # zero-length padding segments
        # which chain output (or the start, -1) is each sample slot's state
        columns = []
        for j, b in enumerate(bounds):
            for s in range(M):
                tt = disc.sample_times[j, s]
                tol = 1e-12 * max(1.0, abs(tt))
                k = int(np.searchsorted(b, tt - tol))
                columns.append(-1 if k == 0 or abs(tt - b[0]) <= tol else j * S + k - 1)
        ends = [j * S + b.size - 2 for j, b in enumerate(bounds)]
        step = _segment_integrator(m, rtol, atol, max_steps)
        chain = step.mapaccum("interval", S, [0], [0]).map(J)
        X = ca.MX.sym("X", nx, J)
        p = ca.MX.sym("p", np_)
        traj = chain(X, ca.DM(to_map_layout(Q)), p)  # nx x (S J)
        slots = [X[:, j] if c < 0 else traj[:, c]
                 for j in range(J) for c in columns[j * M:(j + 1) * M]]
        self.function = ca.Function("interval_states", [X, p],
                                    [ca.horzcat(*slots), traj[:, ends]],
                                    ["X", "p"], ["Xs", "xend"])

    def __call__(self, X: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """States at the sample slots ``(J, nx, M)`` and end states ``(J, nx)``.

        Raises
        ------
        RuntimeError
            When CVODES fails on an interval (CasADi's error).
        """
        d = self.disc
        Xs, xend = self.function(np.asarray(X, float).T, np.asarray(p, float))
        Xs = np.asarray(Xs).reshape(d.model.nx, d.n_intervals, d.M).transpose(1, 0, 2)
        return Xs, np.asarray(xend).T
