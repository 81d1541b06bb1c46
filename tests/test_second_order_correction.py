"""The constrained step's second-order correction: tried only where it is small."""
from __future__ import annotations

import numpy as np

import picard_casadi as pc
from picard_casadi.transcription import functions as transcription
from picard_casadi.methods import condensed

GUARD = (condensed.SOC_MAX_SHIFT_RADII, condensed.SOC_MAX_SHIFT)


def _solve(prob, monkeypatch, guard: bool):
    """A picard-gn solve; the settles of its trial points counted."""
    radii, shift = GUARD if guard else (np.inf, np.inf)
    monkeypatch.setattr(condensed, "SOC_MAX_SHIFT_RADII", radii)
    monkeypatch.setattr(condensed, "SOC_MAX_SHIFT", shift)
    settles = []
    settle = transcription.Transcription.settle

    def counted(self, *args, **kwargs):
        settles.append(1)
        return settle(self, *args, **kwargs)

    monkeypatch.setattr(transcription.Transcription, "settle", counted)
    res = prob.estimate("picard-gn", refine=False, uncertainty=False)
    monkeypatch.setattr(transcription.Transcription, "settle", settle)
    return res, len(settles)


def test_large_corrections_are_skipped_without_changing_the_solve(monkeypatch):
    """From ``fa18-roll-rud`` seed 12's start the correction's chain shifts
    interval starts by up to 72 state scales for steps below one, and none
    of those points was ever kept: skipping them leaves every iteration and
    the estimate as they were and saves their settles."""
    prob = pc.problem("fa18-roll-rud", seed=12)
    unguarded, settles_unguarded = _solve(prob, monkeypatch, guard=False)
    guarded, settles_guarded = _solve(prob, monkeypatch, guard=True)
    assert unguarded.success and guarded.success
    assert guarded.iterations == unguarded.iterations
    np.testing.assert_array_equal(guarded.p, unguarded.p)
    assert settles_guarded < settles_unguarded


class _Setup:
    @staticmethod
    def from_scaled(X, p):
        return X, p


def _step_with_trial(merit: float, gaps: np.ndarray) -> condensed.ConstrainedGaussNewtonStep:
    """A constrained step whose trial point has ``merit`` and scaled ``gaps``."""
    step = object.__new__(condensed.ConstrainedGaussNewtonStep)
    step.setup = _Setup()
    step._trial = lambda Xp, U, pp: (U, merit, gaps, 1)
    return step


def _corrections(shrink: float) -> tuple[int, float]:
    """How many corrections ``_tried`` asks for where each halves the merit
    (2 at the trial) and leaves the gaps ``shrink`` times what they were; and
    the merit ratio of the point it keeps."""
    step = _step_with_trial(2.0, np.array([0.3, -0.1]))
    calls = []

    def correct(Xn, pn, U, c):
        calls.append(1)
        merit = 2.0 * 0.5 ** len(calls)
        return Xn + 1.0, U, merit, c * shrink, 1

    # merit 1 before the step, a gain of 10 predicted: the ratio stays below 0.75
    X, U, merit, ratio, evals = step._tried(np.zeros(2), np.zeros(1), np.zeros(3), 1.0, 10.0,
                                            correct)
    return len(calls), ratio


def test_a_correction_that_barely_shrinks_the_gaps_gets_no_second_round():
    """A second-order correction leaves the gaps a small fraction of what they
    were where the linearisation describes them (``SOC_CONTRACTION``, a
    quarter); one that leaves 30 % gets no further round, which would close
    the gaps shooting-like at the trial's parameters (the README's pendulum,
    below)."""
    rounds, ratio = _corrections(shrink=0.3)
    assert rounds == 1
    assert ratio == 0.0  # the corrected point is kept: merit 1, as before the step
    rounds, _ = _corrections(shrink=0.01)
    assert rounds == condensed.SOC_ROUNDS  # the ratio stays low: every round


def test_the_readme_pendulum_from_zero_reaches_the_truth():
    """The README's first fit, from ``p0 = 0`` (and two other noise draws):
    with three corrections leaving 0.39, 0.55 and 0.26 of the gaps, a step
    that had raised the merit was accepted at c = 1.14, and the fit ended in
    the inverted pendulum's minimum (k = -1.29) with a FitWarning."""
    import casadi as ca

    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(x[1], -p[0] * x[1] - p[1] * ca.sin(x[0])),
                     y=x[0], name="pendulum", x_names=["angle", "rate"], p_names=["c", "k"])
    for seed in (0, 2, 6):
        exp = pc.simulate_experiment(model, x0=[1.0, 0.0], p=[0.25, 1.2],
                                     t=np.linspace(0, 10, 41), noise_std=0.02, seed=seed)
        res = pc.estimate(model, [exp], p0=[0.0, 0.0])
        assert res.success, (seed, res.message)
        assert not res.warnings, (seed, res.warnings)
        assert np.all(np.abs(res.p - [0.25, 1.2]) < 5 * res.p_std), (seed, res.p, res.p_std)
