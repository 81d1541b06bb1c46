"""Experiments that start from a steady state (``pc.Preequilibration``), restated.

:func:`~picard_casadi.estimation.statement.state_problem` makes the settling
a part of the experiment: it begins before its ``t0``, the settling
parameters entering as constants that switch at ``t0``
(:class:`PhasedConstants`), on a stretched clock (:func:`settling_time`);
this module holds the checks, the clock, how long the settling takes
(:func:`settled_after`) and the inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..experiment import Experiment
from ..model import Model

__all__ = ["check_preequilibration", "settled_after", "settling_time", "settles",
           "forgotten_states",
           "in_settling", "settling_intervals", "stiff_in_settling_only",
           "PhasedConstants", "SETTLED", "SETTLING_MARGIN", "SETTLING_HORIZON",
           "SETTLING_RESOLUTION"]


def check_preequilibration(model: Model, exps: Sequence[Experiment]) -> list[int]:
    """The states some experiment resets after its preequilibration (sorted
    indices); a ValueError naming what cannot be preequilibrated."""
    reset: set[int] = set()
    for e in exps:
        q = e.preequilibration
        if q is None:
            continue
        where = f"experiment {e.name!r}"
        if model.has_delays:
            raise ValueError(f"{where}: preequilibration with delays is not supported")
        unknown = [r for r in q.reset if r not in model.x_names]
        if unknown:
            raise ValueError(f"{where}: Preequilibration(reset=...) names {unknown}, which are "
                             f"not states of the model ({', '.join(model.x_names)})")
        reset.update(model.x_names.index(r) for r in q.reset)
    return sorted(reset)


#: a state has settled when it stays within this share of its size of where
#: it ends (Preequilibration's default duration)
SETTLED = 1e-8
#: the default duration: this many times the time taken to settle, and at
#: least this many times the experiment's own span
SETTLING_MARGIN = 10.0
#: how long the settling is followed to find where it ends
SETTLING_HORIZON = 1e8


def settled_after(model: Model, exp: Experiment, phi: np.ndarray, t0: float) -> float:
    """When the restated model settles from its ``x0`` at ``phi`` with the
    inputs it has before ``t0`` (the time from its start; ``inf`` where it
    does not within :data:`SETTLING_HORIZON`)."""
    from ..simulate import simulate  # a lower layer, imported where used

    u_settle = np.asarray(exp.inputs([t0 - 1.0], model.nu), float)[0]  # before t0
    u_settle[-1] = 1.0  # the clock's rate: the model's own time
    x0 = np.asarray(exp.x0 if exp.x0 is not None else exp.x0_guess(model), float)
    times = np.r_[np.geomspace(1e-6, SETTLING_HORIZON, 141)]
    X = simulate(model, x0, phi, times, lambda _t: u_settle, t0=0.0, rtol=1e-10, atol=1e-14)
    end = X[-1]
    size = SETTLED * (np.abs(end) + 1e-6 * np.max(np.abs(end)) + 1e-300)
    # still moving over the last decade (not the rates there: their round-off
    # times the horizon is more than the states' size)
    decade = int(np.searchsorted(times, times[-1] / 10.0))
    if np.any(np.abs(X[decade] - end) > size):
        return np.inf
    away = np.any(np.abs(X - end) > size, axis=1)
    last = np.flatnonzero(away)
    return float(times[last[-1] + 1]) if last.size else float(times[0])


#: the settling's clock resolves times from its duration times this on
SETTLING_RESOLUTION = 1e-9
#: an initial state moved by this share of its size (or of the states') ...
FORGET_PROBE = 1e-2
#: ... that moves no state at the data's start by more than this share of its
#: size is forgotten by the settling
FORGOTTEN = 1e-6


def forgotten_states(model: Model, exps: Sequence[Experiment], phi: np.ndarray, nx: int
                     ) -> np.ndarray:
    """Which of the first ``nx`` initial states of the restated ``exps`` (each
    settling before its data, :func:`settling_time`) no settling remembers at
    ``phi``: moved by :data:`FORGET_PROBE`, they move no state at the data's
    start (its steady state, conserved totals aside) by :data:`FORGOTTEN`
    of its size.  Simulated; False where a simulation fails."""
    from ..simulate import simulate  # a lower layer, imported where used

    forgotten = np.ones(nx, bool)
    for exp in exps:
        x0 = np.asarray(exp.x0 if exp.x0 is not None else exp.x0_guess(model), float)
        try:
            def at_data(start: np.ndarray) -> np.ndarray:
                return simulate(model, start, phi, [exp.u.t0], exp, t0=exp.t0)[-1]

            end = at_data(x0)
            size = FORGOTTEN * (np.abs(end) + 1e-6 * np.max(np.abs(end)) + 1e-300)
            for i in np.flatnonzero(forgotten):
                moved = x0.copy()
                moved[i] += FORGET_PROBE * max(abs(x0[i]), 1e-2 * np.max(np.abs(x0)), 1e-8)
                forgotten[i] = np.all(np.abs(at_data(moved) - end) <= size)
        except Exception:  # noqa: BLE001  (the fit's own failure says more)
            return np.zeros(nx, bool)
    return forgotten


def settling_time(model: Model, exp: Experiment, pre: Any, phi: np.ndarray
                   ) -> tuple[Experiment, float]:
    """``exp`` (restated, ``t0`` where it stops settling) started earlier, and
    how long it settles: its preequilibration's duration, or
    :data:`SETTLING_MARGIN` times the time the restated model takes to
    settle at ``phi`` (simulated) and the experiment's span.

    The settling is not laid out on the experiment's own clock (a duration
    of 10^4 spans would need 10^4 times the data's intervals): it runs over
    the span of the data before ``t0`` on a stretched clock, the model's
    time ``tau = tau_0 (exp(a (s - s_0)) - 1)``, the rates times ``d tau / d
    s`` (an input), so equal intervals cover equal ratios of time, from
    ``tau_0`` (:data:`SETTLING_RESOLUTION` of the duration) to the duration."""
    t0 = exp.t0
    duration = pre.duration
    where = f"experiment {exp.name!r}"
    if duration is None:
        try:
            settled = settled_after(model, exp, phi, t0)
        except Exception as err:  # the CVODES failure, said in the user's terms
            raise ValueError(
                f"{where}: its preequilibration could not be simulated at the start "
                f"({err}); give Preequilibration(duration=...) or another start") from None
        if not np.isfinite(settled):
            raise ValueError(f"{where}: its preequilibration does not settle within "
                             f"{SETTLING_HORIZON:g} time units at the start; give "
                             "Preequilibration(duration=...) or another start")
        duration = SETTLING_MARGIN * max(settled, exp.t_end - t0)
    span = (exp.t_end - t0) or 1.0  # measured at its steady state only: a unit of clock
    tau0 = SETTLING_RESOLUTION * duration
    a = float(np.log(duration / tau0 + 1.0)) / span
    u = exp.u
    stretched = PhasedConstants(u.before, u.after, t0, clock=(t0 - span, a, tau0),
                                head=u.head, nu=u.nu)
    return exp.replaced(t0=t0 - span, u=stretched, breakpoints=np.r_[exp.breakpoints, t0],
                        preequilibration=None), float(duration)


def stiff_in_settling_only(setup: Any, found: Any, threshold: float | None = None) -> bool:
    """Whether the start of ``setup`` (its node values and parameters), whose
    stiffest node is ``found`` (a
    :class:`~picard_casadi.transcription.stiffness.Stiffness`), is stiff
    (``h |Re lambda|`` above ``threshold``, by default
    :data:`~picard_casadi.transcription.stiffness.STIFF_STEP`) in
    preequilibrations' settlings only, not where data are: a settling's end
    is stiff by construction (its clock runs fast), and a search on the
    data's coarser mesh (a MAPK cascade's, ``T = 3``) went astray where the
    cascade itself needed a finer one; where the data part is stiff too
    (Zheng's uniform 14), the search found its better optimum."""
    from ..transcription.stiffness import STIFF_STEP, stiffness

    disc = setup.disc
    data = ~settling_intervals(disc)
    if data.all() or data[found.interval]:  # no settling, or the stiffest where data are
        return False
    jacobians = setup.tr.node_jacobians(setup.U0, setup.p0)
    return stiffness(disc, jacobians, among=data).step <= (
        STIFF_STEP if threshold is None else threshold)


def settles(exp: Experiment) -> bool:
    """Whether ``exp`` is restated with a settling before its data
    (:func:`settling_time`)."""
    return isinstance(exp.u, PhasedConstants) and exp.u.clock is not None


def in_settling(exp: Experiment, t: float) -> bool:
    """Whether time ``t`` of ``exp`` is in its settling, before its data."""
    return settles(exp) and exp.t0 <= t < exp.u.t0


def settling_intervals(disc: Any) -> np.ndarray:
    """Which intervals of the mesh ``disc`` (a
    :class:`~picard_casadi.transcription.discretisation.Discretisation`) lie
    in a settling, before their experiment's data (by where they start: the
    last one's end node is the data's ``t0``)."""
    inside = np.zeros(disc.n_intervals, bool)
    for e, (exp, sl) in enumerate(zip(disc.experiments, disc.intervals_of)):
        if settles(exp):
            inside[sl] = [in_settling(exp, t) for t in disc.boundaries[e][:-1]]
    return inside


class PhasedConstants:
    """Constant inputs that switch at ``t0`` (picklable, vectorised); with a
    ``clock`` ``(s_0, a, tau_0)`` the last is the settling clock's rate
    ``a tau_0 exp(a (t - s_0))`` before ``t0`` (:func:`settling_time`).
    With ``head`` (an experiment: the model's own ``nu`` inputs) its inputs
    come first, held at their value at ``t0`` before it: the system settles
    under the inputs the data start with."""

    vectorized = True

    def __init__(self, before: np.ndarray, after: np.ndarray, t0: float,
                 clock: tuple[float, float, float] | None = None,
                 head: Experiment | None = None, nu: int = 0) -> None:
        self.before, self.after, self.t0, self.clock = before, after, float(t0), clock
        self.head, self.nu = head, int(nu)

    def __call__(self, t: Any) -> np.ndarray:
        t = np.asarray(t, float)
        times = np.atleast_1d(t)
        out = np.where(times[:, None] >= self.t0, self.after[None, :], self.before[None, :])
        if self.clock is not None:
            s0, a, tau0 = self.clock
            early = times < self.t0
            out[early, -1] = a * tau0 * np.exp(a * (times[early] - s0))
        if self.head is not None:
            own = np.asarray(self.head.inputs(np.maximum(times, self.t0), self.nu), float)
            out = np.hstack([own.reshape(times.size, self.nu), out])
        return out[0].copy() if t.ndim == 0 else out
