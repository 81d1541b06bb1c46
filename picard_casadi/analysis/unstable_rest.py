"""An experiment that starts at rest at an unstable equilibrium of the model.

A fit flagged as off the data may have started its model where it balances
on a knife's edge: a swing equation's rotor angle written ``pi - asin(...)``
for ``asin``, the other root, left the data by 8e4 degrees and the fit was
called "a local minimum".  The system rested at a stable equilibrium; any
input moves the model off an unstable one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..experiment import Experiment
from ..model import Model
from ..transcription.stiffness import MAX_EIGEN_STATES

__all__ = ["unstable_rest_note", "REST_MOVE", "UNSTABLE_REST"]

#: a start at rest: its rate of change moves no state by more than this share
#: of the largest initial state (or 1) over the experiment
REST_MOVE = 1e-6
#: ... and at an unstable equilibrium where ``f_x`` has an eigenvalue growing
#: by this much over the experiment, ``e^0.1`` (a pendulum started upside
#: down: its fit made it slow, 0.02 over 6 time units, not stable)
UNSTABLE_REST = 0.1


def unstable_rest_note(model: Model, experiments: Sequence[Experiment],
                       x0s: Sequence[np.ndarray], p: np.ndarray) -> str:
    """A note naming the experiments that start at rest at an unstable
    equilibrium of the model (``f(t0, x0) = 0`` to :data:`REST_MOVE`, an
    eigenvalue of ``f_x`` there growing by :data:`UNSTABLE_REST` over the
    experiment); empty where none does.  The system rested at a stable one:
    a swing equation's rotor angle written ``pi - asin(...)`` for ``asin``,
    the other root, left the data by 8e4 degrees and the fit was called "a
    local minimum"."""
    if model.nx == 0 or model.nx > MAX_EIGEN_STATES:
        return ""
    named = []
    for exp, x0 in zip(experiments, x0s):
        x0 = np.asarray(x0, float)
        span = float(np.max(exp.t)) - float(exp.t0)
        if exp.preequilibration is not None or not span > 0 or not np.all(np.isfinite(x0)):
            continue
        u0 = np.asarray(exp.inputs([exp.t0], model.nu), float)[0]
        rate = np.asarray(model.f(exp.t0, x0, p, u0), float).ravel()
        size = max(float(np.max(np.abs(x0))), 1.0)  # (a restated start's shifted 0s)
        if not (np.all(np.isfinite(rate)) and np.max(np.abs(rate)) * span <= REST_MOVE * size):
            continue
        Fx = np.asarray(model.f_jacobian(exp.t0, x0, p, u0), float)[:, :model.nx]
        if not np.all(np.isfinite(Fx)):
            continue
        growth = float(np.max(np.linalg.eigvals(Fx).real))
        if growth * span > UNSTABLE_REST:
            named.append(f"{exp.name!r} (an eigenvalue {growth:.3g} of the Jacobian: an "
                         f"e-fold every {1.0 / growth:.3g} time units)")
    if not named:
        return ""
    return (f"experiment(s) {', '.join(named)} start at rest at an unstable equilibrium of "
            "the model: any input moves the model away from it, while data that rest before "
            "moving rested at a stable one; check the initial states (Experiment(x0=...), "
            "Model(x0=...)): another root of the equation they solve (asin's other, "
            "pi - asin)?")
