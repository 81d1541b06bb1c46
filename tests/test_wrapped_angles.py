"""Angles recorded within one turn, named before the fit."""

import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.analysis.wrapped_angles import wrapped_angle_note


def _heading(wrap_to: float | None, degrees: bool = False):
    t = np.linspace(0.0, 300.0, 601)
    psi = np.deg2rad(170.0) + 0.4 * np.sin(2 * np.pi * t / 60.0)   # zig-zags about 170 deg
    psi = psi + 0.003 * np.random.default_rng(1).standard_normal(t.size)
    if degrees:
        psi = np.rad2deg(psi)
    rate = np.gradient(psi, t)
    if wrap_to is not None:
        psi = (psi + wrap_to) % (2 * wrap_to) - wrap_to
    return pc.Experiment(t, np.c_[psi, rate], name="zz20")


@pytest.mark.parametrize("degrees", [False, True])
def test_a_compass_heading_wrapped_within_a_turn_is_named(degrees):
    half = 180.0 if degrees else np.pi
    note = wrapped_angle_note([_heading(half, degrees)], ["psi", "r"])
    assert note.startswith("the data jump by a whole turn between samples ('psi' of 'zz20' by "
                           + ("360" if degrees else "2 pi")), note
    assert "'r'" not in note and "numpy.unwrap" in note


def test_an_angle_that_runs_on_and_other_signals_are_not_named():
    assert wrapped_angle_note([_heading(None)], ["psi", "r"]) == ""
    assert wrapped_angle_note([_heading(None, degrees=True)], ["psi", "r"]) == ""
    # a square wave of 2 pi steps is a signal's own, not smooth between them
    t = np.arange(40.0)
    steps = 2 * np.pi * (np.arange(40) % 2)
    assert wrapped_angle_note([pc.Experiment(t, steps[:, None], name="e")], ["y"]) == ""
