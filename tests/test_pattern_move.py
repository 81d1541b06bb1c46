"""The pattern move: tried where accepted steps zigzag slowly, not where they shrink fast."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from picard_casadi.methods.base import StepInfo
from picard_casadi.methods.pattern_move import PATTERN_MIN_RATIO, PatternMove


def _setup(n: int) -> SimpleNamespace:
    big = np.full(n, 1e6)
    return SimpleNamespace(scaled_bounds=(-big[:, None], big[:, None], -big[:1], big[:1]),
                           free_x=np.ones((n, 1), bool), free_p=np.ones(1, bool))


def _walk(ratio_two_steps: float, alternate: bool) -> tuple[int, bool]:
    """Feed four accepted points whose steps shrink by ``ratio`` every two
    (neighbours alternating in direction or not); return the number of merit
    evaluations the move asked for and whether it replaced the step."""
    move = PatternMove(_setup(2))
    calls = []

    def settled_merit(Xs, ps, U_start):
        calls.append(1)
        return 0.0, U_start, 1  # always better: the move is accepted when tried

    rho = np.sqrt(ratio_two_steps)
    sign = -1.0 if alternate else 1.0
    z, step = np.zeros(3), np.array([1.0, 0.5, 0.25])
    out = None
    for k in range(4):
        z = z + step * (sign * rho) ** k
        info = StepInfo(z[:2, None].copy(), z[2:].copy(), 1.0, 0.5, 1.0, 1.0, True, 1, 0.0,
                        U=np.zeros(1))
        out = move.after(z[:2, None], z[2:], info, settled_merit)
    return len(calls), out is not info


def test_no_trial_where_steps_shrink_fast():
    # cmg's converged tail: alternating steps, a tenth as long two steps on
    for alternate in (True, False):
        evaluations, replaced = _walk(0.5 * PATTERN_MIN_RATIO, alternate)
        assert evaluations == 0 and not replaced


def test_trial_where_steps_shrink_slowly():
    for alternate in (True, False):
        evaluations, replaced = _walk(0.9, alternate)
        assert evaluations >= 1 and replaced
