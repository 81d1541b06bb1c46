"""Sampled inputs: interpolated linearly unless the experiment declares a hold.

Holding samples of a smooth input delays it by about half a sample; the
parameters absorb the delay with residuals at the noise level, so the default
must be the interpolation that is right for a smooth signal.
"""
from __future__ import annotations

import re
import warnings

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc


def _forced_oscillator() -> pc.Model:
    x = ca.SX.sym("x", 2)
    p = ca.SX.sym("p", 2)
    u = ca.SX.sym("u", 1)
    return pc.Model(x=x, p=p, u=u, y=x[0:1],
                    rhs=ca.vertcat(x[1], -p[0] * x[0] - p[1] * x[1] + u[0]))


def _smooth_input(s: float) -> np.ndarray:
    return np.array([np.sin(1.3 * s) + 0.5 * np.cos(0.4 * s)])


P_TRUE = np.array([4.0, 0.5])


@pytest.fixture(scope="module")
def sampled_problem():
    model = _forced_oscillator()
    t = np.linspace(0.0, 10.0, 61)
    made = pc.simulate_experiment(model, [0.2, 0.0], P_TRUE, t, _smooth_input,
                                  noise_std=0.02, seed=3)
    samples = np.array([_smooth_input(s) for s in t])
    return model, t, made.y, samples


def test_default_interpolates_and_recovers_the_truth(sampled_problem):
    model, t, y, samples = sampled_problem
    exp = pc.Experiment(t, y, u=samples, x0=[0.2, 0.0])
    assert exp.u_interpolation == "linear"
    res = pc.estimate(model, [exp], p0=[2.0, 1.0])
    assert res.success
    assert np.all(np.abs(res.p - P_TRUE) < 3.0 * res.p_std), (res.p, res.p_std)


def test_holding_a_smooth_input_biases_the_fit(sampled_problem):
    # The case the default guards against: were the default a hold, the test
    # above would see this bias.  It stays invisible to the residuals.
    model, t, y, samples = sampled_problem
    exp = pc.Experiment(t, y, u=samples, x0=[0.2, 0.0], u_interpolation="previous")
    res = pc.estimate(model, [exp], p0=[2.0, 1.0])
    assert res.success
    assert np.max(np.abs(res.p - P_TRUE) / res.p_std) > 4.0


def test_simulate_experiment_keeps_its_held_input():
    model = _forced_oscillator()
    t = np.linspace(0.0, 4.0, 21)
    samples = np.array([_smooth_input(s) for s in t])
    exp = pc.simulate_experiment(model, [0.2, 0.0], P_TRUE, t, samples, noise_std=0.0)
    assert exp.u_interpolation == "previous"
    np.testing.assert_allclose(exp.breakpoints, t[1:-1])  # the interior samples
    again = pc.simulate(model, [0.2, 0.0], P_TRUE, t, exp)
    np.testing.assert_allclose(again[:, 0], exp.y[:, 0], rtol=1e-6, atol=1e-8)


def test_simulate_reads_an_array_as_the_experiment_does():
    """``simulate`` holds an array by default and interpolates it when asked:
    the same states as the callable that interpolates the samples."""
    model = _forced_oscillator()
    t = np.linspace(0.0, 4.0, 21)
    samples = np.array([_smooth_input(s) for s in t])

    def linear(s):
        return np.array([np.interp(s, t, samples[:, 0])])

    held = pc.simulate(model, [0.2, 0.0], P_TRUE, t, samples)
    interpolated = pc.simulate(model, [0.2, 0.0], P_TRUE, t, samples, u_interpolation="linear")
    reference = pc.simulate(model, [0.2, 0.0], P_TRUE, t, linear, breakpoints=t)
    np.testing.assert_allclose(interpolated, reference, rtol=1e-7, atol=1e-9)
    assert np.max(np.abs(held - reference)) > 1e-3  # the hold is a different input
    exp = pc.Experiment(t, np.zeros((21, 1)), u=samples)
    np.testing.assert_allclose(pc.simulate(model, [0.2, 0.0], P_TRUE, t, exp), interpolated,
                               rtol=1e-7, atol=1e-9)
    made = pc.simulate_experiment(model, [0.2, 0.0], P_TRUE, t, samples, noise_std=0.0,
                                  u_interpolation="linear")
    assert made.u_interpolation == "linear" and made.breakpoints.size == 0
    np.testing.assert_allclose(made.y[:, 0], interpolated[:, 0], rtol=1e-7, atol=1e-9)
    with pytest.raises(ValueError, match="u_interpolation"):
        pc.simulate(model, [0.2, 0.0], P_TRUE, t, samples, u_interpolation="cubic")


def test_an_uncertified_fit_with_kinked_inputs_names_the_breakpoints_fix():
    """A user's forced Duffing, its input given at the 201 sample times and read
    linearly (the default): never certified (285 intervals after 5 bisections),
    and the advice was only "a smaller T".  With the samples as breakpoints it
    certifies on 206 intervals.  Refinement now splits a marked interval at
    the input's samples inside it, so the default certifies too; a budget of
    one refinement still ends uncertified, and names the fix."""
    import casadi as ca

    x, p, u = ca.SX.sym("x", 2), ca.SX.sym("p", 4), ca.SX.sym("u", 1)
    model = pc.Model(x=x, p=p, u=u, y=x[0],
                     rhs=ca.vertcat(x[1], -p[0] * x[1] - p[1] * x[0] - p[2] * x[0] ** 3
                                    + p[3] * u[0]))
    t = np.linspace(0, 40, 201)
    X = pc.simulate(model, [1.0, 0.0], [0.3, -1.0, 1.0, 0.5], t,
                    u=lambda tt: np.array([np.cos(1.2 * tt)]))
    y = X[:, :1] + 0.02 * np.random.default_rng(0).standard_normal((t.size, 1))
    U = np.cos(1.2 * t)[:, None]
    res = pc.estimate(model, [pc.Experiment(t=t, y=y, u=U)], [0.1, -0.5, 0.5, 0.3],
                      "picard-gn", uncertainty=False, refine=1)
    assert res.status == "not_certified"
    assert "give their sample times as breakpoints" in res.message, res.message
    fixed = pc.estimate(model, [pc.Experiment(t=t, y=y, u=U, breakpoints=t)],
                        [0.1, -0.5, 0.5, 0.3], uncertainty=False)
    assert fixed.success and fixed.certificate["passed"]
    # every default: the collocation itself, its marked intervals split at the
    # input's samples, answers as the collocation with breakpoints does (it
    # went to shooting's fallback before)
    default = pc.estimate(model, [pc.Experiment(t=t, y=y, u=U)], [0.1, -0.5, 0.5, 0.3],
                          uncertainty=False)
    assert default.success and default.method == "picard-gn", default.message
    assert default.certificate["passed"]
    assert np.allclose(default.p, fixed.p, rtol=1e-2, atol=1e-3), (default.p, fixed.p)


def test_a_staircase_read_linearly_by_default_is_noted_and_its_fix_is_right(sampled_problem):
    # a user's CSTR coolant staircase, given as samples and read linearly (the
    # default): every estimate 2-3 standard errors off with no word
    model, t, _, samples = sampled_problem
    level = np.where(t < 2.5, 1.0, np.where(t < 5.0, -1.0, np.where(t < 7.5, 0.5, 0.0)))
    made = pc.simulate_experiment(model, [0.2, 0.0], P_TRUE, t, level[:, None],
                                  noise_std=0.02, seed=3)
    with pytest.warns(UserWarning, match="look piecewise constant"):
        default = pc.estimate(model, [pc.Experiment(t, made.y, u=level[:, None], x0=[0.2, 0.0])],
                              p0=[2.0, 1.0], uncertainty=False)
    assert "Experiment(..., u_interpolation='previous')" in default.warnings[-1]
    held = pc.Experiment(t, made.y, u=level[:, None], x0=[0.2, 0.0],
                         u_interpolation="previous")
    res = pc.estimate(model, [held], p0=[2.0, 1.0])
    assert not any("piecewise constant" in w for w in res.warnings)
    assert np.all(np.abs(res.p - P_TRUE) < 3.0 * res.p_std), (res.p, res.p_std)
    # a failed fit's message ends with it: the likelier cause (a bolus column read
    # linearly failed on a noise formula's sigma, the note the last of 5 warnings)
    from types import SimpleNamespace

    from picard_casadi.estimation.input_notes import note_staircase_inputs

    failed = SimpleNamespace(success=False, message="stalled", warnings=[])
    with pytest.warns(UserWarning, match="look piecewise constant"):
        note_staircase_inputs(failed, model, [pc.Experiment(t, made.y, u=level[:, None],
                                                            x0=[0.2, 0.0])])
    assert failed.message.startswith("stalled. Note: input(s) 'u0' of experiment"), failed.message
    # its breakpoints are the staircase's three jumps (breakpoints=t, the old
    # advice, put an interval at every sample: the same estimate)
    assert held.breakpoints.size == 3
    every = pc.estimate(model, [held.replaced(breakpoints=t)], p0=[2.0, 1.0])
    assert np.allclose(res.p, every.p, rtol=0, atol=0.01 * res.p_std.min()), (res.p, every.p)
    assert res.settings["intervals"] < every.settings["intervals"]
    # smooth samples, and a hold chosen either way, carry no note
    assert pc.Experiment(t, made.y, u=samples).staircase_inputs() == []
    assert pc.Experiment(t, made.y, u=level[:, None],
                         u_interpolation="linear").staircase_inputs() == []


def test_predicting_beyond_the_input_samples_says_the_inputs_are_held(sampled_problem):
    model, t, y, samples = sampled_problem
    res = pc.estimate(model, [pc.Experiment(t, y, u=samples, x0=[0.2, 0.0])], p0=[2.0, 1.0],
                      uncertainty=False)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res.predict(0, np.linspace(0, 10, 7))  # within the samples: no word
    with pytest.warns(UserWarning, match=r"beyond the last input sample .* held at their last"):
        res.predict(0, np.linspace(0, 12, 7))


def test_an_uncertified_fit_with_jumping_callable_inputs_names_the_jump_times():
    """Doses given as 0.1 h pulses by a callable, without breakpoints (a user's
    PK model): never certified, and the advice named only T.  With the jump
    times as breakpoints it converges."""
    import casadi as ca

    from picard_casadi.estimation.input_notes import jumping_inputs

    x, p, u = ca.SX.sym("x"), ca.SX.sym("p", 2), ca.SX.sym("u")
    model = pc.Model(x=x, p=p, u=u, rhs=-p[0] * x + u / p[1], y=x)

    def dose(tt):
        return np.where(np.asarray(tt, float) % 12.0 < 0.1, 100.0, 0.0)

    t = np.arange(0.5, 24.01, 1.0)
    jumps = [0.0, 0.1, 12.0, 12.1]
    X = pc.simulate(model, [0.0], [0.3, 5.0], t, u=dose, t0=0.0, breakpoints=jumps)
    y = X[:, 0] + 0.05 * np.random.default_rng(0).standard_normal(t.size)
    res = pc.estimate(model, [pc.Experiment(t=t, y=y, u=dose, t0=0.0, x0=[0.0])], [0.5, 3.0],
                      "picard-gn", estimate_x0=False, uncertainty=False)
    assert res.status == "not_certified"
    where = re.search(r"'experiment' \(t ~ ([0-9., ]+)\) jump inside the intervals", res.message)
    assert where, res.message
    named = [float(v) for v in where.group(1).split(", ")]
    # to the clock's round-off: a grid step's midpoint named 0.10084 for a
    # pulse that ended at 0.01 h (a pharmacologist's doses)
    assert len(named) == 3 and np.allclose(named, [0.1, 12.0, 12.1], atol=1e-6), named
    fixed = pc.estimate(model, [pc.Experiment(t=t, y=y, u=dose, t0=0.0, x0=[0.0],
                                              breakpoints=jumps)], [0.5, 3.0], "picard-gn",
                        estimate_x0=False, uncertainty=False)
    assert fixed.success and fixed.certificate["passed"]
    # a fast smooth input has no jumps; one given at its jumps has none left
    fast = pc.Experiment(t=t, y=y, u=lambda tt: np.sin(3.0 * np.asarray(tt, float)), t0=0.0)
    assert jumping_inputs(model, [fast]) == []
    assert jumping_inputs(model, [pc.Experiment(t=t, y=y, u=dose, t0=0.0,
                                                 breakpoints=jumps)]) == []


def test_a_pulse_one_grid_point_wide_is_a_jump_and_a_certified_fit_names_it():
    """A bioprocess engineer's bolus as 0.005 h at 33 L/h, hourly
    breakpoints: single shooting's CVODES stepped over it (Yxs 3.7 standard
    errors off, "a local minimum") and nothing named the pulse, which the
    jump check's grid saw as one point (its edges back to back)."""
    import casadi as ca

    from picard_casadi.estimation.input_notes import jumping_inputs

    x, k, u = ca.SX.sym("x"), ca.SX.sym("k"), ca.SX.sym("u")
    model = pc.Model(x=x, p=k, u=u, rhs=-k * x + u, y=x)
    t = np.linspace(0.0, 30.0, 351)

    def bolus(s):
        return [33.3 if 12.0 <= s < 12.005 else 0.0]

    hourly = np.arange(1.0, 30.0)
    exp = pc.Experiment(t=t, y=np.zeros(t.size), u=bolus, t0=0.0, breakpoints=hourly)
    named = jumping_inputs(model, [exp])
    assert len(named) == 1 and named[0].endswith("(t ~ 12.005)"), named
    assert jumping_inputs(model, [exp.replaced(breakpoints=[12.0, 12.005])]) == []
    X = pc.simulate(model, [1.0], [0.2], t, bolus, breakpoints=[12.0, 12.005])
    y = X + 0.01 * np.random.default_rng(0).standard_normal(X.shape)
    res = pc.estimate(model, exp.replaced(y=y), [0.3], "single-shooting")
    assert any("jump at times that are no breakpoints" in w and "12.00" in w
               for w in res.warnings), res.warnings


def test_a_callable_s_step_certified_by_refinement_names_the_breakpoints_that_save_it():
    """A step given as a callable without breakpoints (a user's CSTR coolant):
    certified after the mesh was refined around it, and the note says that
    the step's time as a breakpoint gives the same fit on fewer intervals."""
    x, p, u = ca.SX.sym("x"), ca.SX.sym("p"), ca.SX.sym("u")
    model = pc.Model(x=x, p=p, u=u, rhs=-p * x + u, y=x)

    def step(tt):
        return np.where(np.asarray(tt, float) < 2.37, 0.0, 1.0)

    t = np.linspace(0.0, 10.0, 41)
    X = pc.simulate(model, [1.0], [0.7], t, u=step, breakpoints=[2.37])
    y = X[:, 0] + 0.01 * np.random.default_rng(1).standard_normal(t.size)
    res = pc.estimate(model, [pc.Experiment(t, y, u=step, x0=[1.0])], [0.3])
    assert res.success and res.settings["refinements"] > 0
    note = [w for w in res.warnings if "jump inside the mesh's intervals" in w]
    assert len(note) == 1 and "(t ~ 2.37" in note[0] and "breakpoints=" in note[0], res.warnings
    at_step = pc.estimate(model, [pc.Experiment(t, y, u=step, x0=[1.0], breakpoints=[2.37])],
                          [0.3])
    assert at_step.success and not any("jump inside" in w for w in at_step.warnings)
    assert at_step.settings["intervals"] < res.settings["intervals"]
    assert abs(at_step.p[0] - res.p[0]) < 0.5 * res.p_std[0]  # each certified within 0.1


def test_a_replicate_at_a_sampled_input_s_kink_refines_without_a_repeated_boundary():
    """Two measurements at one time, where a sampled input (read linearly)
    kinks: the mesh's refinement split there twice and stopped with
    "boundaries must increase" (a user's CSTR lab duplicates at a coolant
    step)."""
    from picard_casadi.transcription.discretisation import Discretisation
    from picard_casadi.transcription.mesh import refined_boundaries

    model = _forced_oscillator()
    t = np.array([0.0, 1.0, 2.0, 2.0, 3.0, 4.0])
    u = np.array([[0.0], [0.0], [1.0], [1.0], [1.0], [0.0]])
    exp = pc.Experiment(t, np.zeros((6, 1)), u=u, x0=[0.0, 0.0])
    disc = Discretisation(model, [exp], 4.0, 5, "chebyshev")
    b = refined_boundaries(disc, np.ones(disc.n_intervals, bool))[0]
    assert np.all(np.diff(b) > 0) and {1.0, 2.0, 3.0} <= set(b.tolist()), b


def test_a_staircase_beside_a_smooth_input_is_held_alone():
    """A feed held by its pump's controller beside a temperature ramp: the
    note advised holding every input of the experiment, which held the ramp
    too (kref 3.4 standard errors off, with no word); a list gives each
    input its own hold, and the note names it."""
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 2)
    u = ca.SX.sym("u", 2)  # a staircase feed and a smooth drive
    model = pc.Model(x=x, p=p, u=u, y=x[0:1], u_names=["feed", "drive"],
                     rhs=ca.vertcat(x[1], -p[0] * x[0] - p[1] * x[1] + u[0] + u[1]))
    t = np.linspace(0.0, 10.0, 61)
    level = np.where(t < 2.5, 1.0, np.where(t < 5.0, -1.0, np.where(t < 7.5, 0.5, 0.0)))
    drive = np.array([_smooth_input(s)[0] for s in t])
    samples = np.column_stack([level, drive])

    def exact(s):
        return np.array([level[np.searchsorted(t, s + 1e-12, side="right") - 1],
                         _smooth_input(s)[0]])

    made = pc.simulate_experiment(model, [0.2, 0.0], P_TRUE, t, exact, noise_std=0.02, seed=3,
                                  breakpoints=[2.5, 5.0, 7.5])
    with pytest.warns(UserWarning, match="look piecewise constant"):
        default = pc.estimate(model, [pc.Experiment(t, made.y, u=samples, x0=[0.2, 0.0])],
                              p0=[2.0, 1.0], uncertainty=False)
    assert ("u_interpolation=['previous', 'linear'], breakpoints=t) (one per input; feed held)"
            in default.warnings[-1]), default.warnings[-1]
    held = pc.Experiment(t, made.y, u=samples, x0=[0.2, 0.0],
                         u_interpolation=["previous", "linear"], breakpoints=t)
    assert held.u_interpolation == ("previous", "linear")
    # each column as its own hold says: the feed's level at the sample before,
    # the drive interpolated between samples
    mid = held.inputs(np.array([2.6]), 2)[0]
    assert mid[0] == -1.0 and mid[1] == pytest.approx(
        np.interp(2.6, t, drive), abs=1e-12)
    res = pc.estimate(model, [held], p0=[2.0, 1.0])
    assert np.all(np.abs(res.p - P_TRUE) < 3.0 * res.p_std), (res.p, res.p_std)
    with pytest.raises(ValueError, match=r"`u_interpolation` has 3 entries but the model has "
                                         r"nu = 2"):
        pc.estimate(model, [held.replaced(u_interpolation=["previous"] * 3)], p0=[2.0, 1.0])
    with pytest.raises(ValueError, match=r"`u_interpolation` must be 'previous' or 'linear', "
                                         r"or a list"):
        pc.Experiment(t, made.y, u=samples, u_interpolation=["held", "linear"])


def test_a_held_input_on_epoch_times_is_read_at_its_own_sample():
    """A logger's Unix-epoch times (1.7e9 s) sampled every 1 ms: the hold's
    tolerance, 1e-12 |t| = 1.7 ms, read each value a sample or more early
    (a simulation 31.7 rad/s off for noise 0.5, the fit flagged as a local
    minimum)."""
    t = 1.7e9 + 1e-3 * np.arange(200)
    u = (np.arange(200) % 7)[:, None].astype(float)  # a level per sample
    exp = pc.Experiment(t, np.zeros(200), u=u, u_interpolation="previous", breakpoints=t)
    inside = t[:-1] + 0.5e-3
    assert np.array_equal(exp.inputs(inside, 1), u[:-1])
    assert np.array_equal(exp.inputs(t, 1), u)
    # an interval's end node, 1e-7 of its length before the next sample (the
    # discretisation's shift inside), reads the value before the jump: on a
    # clock at 1000 s the tolerance (1e-12 |t| = 1e-9 s) had passed it, and a
    # motor certified at t0 = 0 to 300 was not at 1000
    late = pc.Experiment(1000.0 + t - t[0], np.zeros(200), u=u, u_interpolation="previous",
                         breakpoints=1000.0 + t - t[0])
    ends = 1000.0 + (t - t[0])[1:] - 1e-7 * 1e-3
    assert np.array_equal(late.inputs(ends, 1), u[:-1])
    # the same record on an epoch clock simulates as on its own
    model = _forced_oscillator()
    here = pc.simulate(model, [0.2, 0.0], P_TRUE, t - t[0], u=u, u_interpolation="previous",
                       breakpoints=t - t[0])
    epoch = pc.simulate(model, [0.2, 0.0], P_TRUE, t, u=u, u_interpolation="previous",
                        breakpoints=t)
    assert np.max(np.abs(epoch - here)) < 1e-3 * np.max(np.abs(here)), np.max(np.abs(epoch - here))


def test_a_held_input_without_breakpoints_is_noted(sampled_problem):
    """A held input jumps at its samples; without breakpoints the jumps fall
    inside the intervals (a controls engineer's motor: picard-gn not
    certified, single shooting's answer in 13 s for 4.5 s, no word)."""
    model, t, _, samples = sampled_problem
    level = np.where(t < 2.5, 1.0, np.where(t < 5.0, -1.0, np.where(t < 7.5, 0.5, 0.0)))
    made = pc.simulate_experiment(model, [0.2, 0.0], P_TRUE, t, level[:, None],
                                  noise_std=0.02, seed=3)
    # without breakpoints given, a held input's jumps are its breakpoints
    bare = pc.Experiment(t, made.y, u=level[:, None], x0=[0.2, 0.0], u_interpolation="previous")
    assert bare.held_jumps_off_breakpoints() == []
    # breakpoints given that miss some: noted
    partial = bare.replaced(breakpoints=[bare.breakpoints[0]])
    assert partial.held_jumps_off_breakpoints() == [0]
    with pytest.warns(UserWarning, match=r"input\(s\) 'u0' of experiment 'experiment' are held "
                                         r"between samples .*pass Experiment\(\.\.\., "
                                         r"breakpoints=t\)"):
        pc.estimate(model, [partial], p0=[2.0, 1.0], uncertainty=False)
    # the jumps as breakpoints (all samples, or the three changes): no note
    assert bare.replaced(breakpoints=t).held_jumps_off_breakpoints() == []
    assert bare.replaced(breakpoints=bare.breakpoints).held_jumps_off_breakpoints() == []
    assert made.held_jumps_off_breakpoints() == []  # simulate_experiment sets them


def test_only_samples_that_change_slope_kink():
    # a PEtab condition's constants, restated as columns of one value, were
    # named in the advice "the inputs of experiment(s) 'c0', ... kink at every
    # sample: give breakpoints"; the problem has no inputs
    t = np.linspace(0.0, 4.0, 9)
    y = np.zeros((t.size, 1))
    constant = pc.Experiment(t, y, u=np.tile([2.0, -1.0], (t.size, 1)))
    ramp = pc.Experiment(t, y, u=(1.0 + 0.5 * t)[:, None])
    wiggle = pc.Experiment(t, y, u=np.sin(t)[:, None])
    assert not constant.kinks_between_breakpoints()
    assert not ramp.kinks_between_breakpoints()
    assert wiggle.kinks_between_breakpoints()


def test_staircases_read_alike_in_several_experiments_are_one_note(sampled_problem):
    # a process engineer's three runs had three notes of one text
    model, t, _, _ = sampled_problem
    level = np.where(t < 2.5, 1.0, np.where(t < 5.0, -1.0, 0.5))
    exps = []
    for seed, name in ((3, "day1"), (4, "day2")):
        made = pc.simulate_experiment(model, [0.2, 0.0], P_TRUE, t, level[:, None],
                                      noise_std=0.02, seed=seed)
        exps.append(pc.Experiment(t, made.y, u=level[:, None], x0=[0.2, 0.0], name=name))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = pc.estimate(model, exps, p0=[2.0, 1.0], uncertainty=False)
    notes = [w for w in res.warnings if "look piecewise constant" in w]
    assert len(notes) == 1 and "of experiments 'day1', 'day2' look" in notes[0], notes


def test_amounts_per_period_from_a_baseline_read_as_a_staircase():
    # daily rain, 30 % of days wet: 49 % of consecutive days repeat (both
    # dry), under the staircase's share; at 70 % of the days on its floor it
    # is pulses per period, which a linear reading turns into ramps (a
    # hydrologist's reservoir constant 2.4 standard errors off, no note)
    from picard_casadi.inputs import held_input_columns

    rng = np.random.default_rng(0)
    rain = np.where(rng.random(1096) < 0.3, rng.uniform(5, 60, 1096), 0.0)
    smooth = np.sin(np.arange(1096) / 20.0)
    assert held_input_columns(np.column_stack([rain, smooth])) == [0]


def test_a_sampled_physical_step_is_no_staircase():
    # a car's step steer ramped over 0.15 s, sampled at 100 Hz: constant
    # before and after, so "piecewise constant" by the repeats, and held as
    # the note said its yaw inertia came out 2.75 standard errors off; a
    # staircase jumps in one sample, and a long pulse sampled on its way is
    # no amount per period either
    from picard_casadi.inputs import held_input_columns

    t = np.arange(0, 12.0, 0.01)
    step = 0.035 * np.clip((t - 1.0) / 0.15, 0.0, 1.0)
    pulse = np.clip(np.minimum(t - 2.0, 8.0 - t) / 0.3, 0.0, 1.0)
    stairs = np.repeat([0.0, 1.0, 0.5, 2.0], t.size // 4)
    # a binary sequence clocked at the samples flips in runs: held by its
    # floor's pulses
    prbs = np.where(np.random.default_rng(2).random(t.size) < 0.5, -1.0, 1.0)
    assert held_input_columns(np.column_stack([step, pulse, stairs, prbs])) == [2, 3]


def test_inputs_sampled_from_after_t0_are_said_to_be_held_before(sampled_problem):
    """Rows before a time dropped with ``t0`` kept: the inputs are held at
    their first sample over the gap (an IVGTT's insulin at its 8-minute value
    over [0, 8), no word); from t0 on, nothing is said."""
    model, t, y, samples = sampled_problem
    late = pc.Experiment(t[6:], y[6:], u=samples[6:], t0=0.0, x0=[0.2, 0.0], name="late")
    with pytest.warns(UserWarning, match=r"experiment 'late': its sampled input\(s\) start at "
                                         r"t = 1, after t0 = 0, and are held"):
        res = pc.estimate(model, [late], p0=[2.0, 1.0])
    assert any("held at their first sample" in w for w in res.warnings)
    # with an experiment constant (a column of a restated problem's inputs):
    # the user's inputs alone are named
    with pytest.warns(UserWarning, match=r"held at their first sample before it \(u0 = "
                                         r"[-0-9.e]+\); if"):
        pc.estimate(model, [late.replaced(parameters={model.p_names[1]: 0.5})], p0=[2.0, 1.0])
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        res = pc.estimate(model, [pc.Experiment(t, y, u=samples, x0=[0.2, 0.0])], p0=[2.0, 1.0])
    assert not [w for w in said if "held at their first sample" in str(w.message)]


def test_a_flagged_fit_of_a_dense_command_read_linearly_names_the_hold():
    """A drive's command held between dense samples, read linearly by default:
    half a sample early, which a precise fit sees (a robot joint's torque at
    1 kHz: 57 standard errors off, flagged as outliers or a local minimum).
    The flagged fit names u_interpolation='previous'; that fit says nothing."""
    model = _forced_oscillator()
    t = np.linspace(0.0, 10.0, 201)
    command = np.array([_smooth_input(s) for s in t])
    made = pc.simulate_experiment(model, [0.2, 0.0], P_TRUE, t, command, noise_std=2e-5,
                                  seed=3, u_interpolation="previous")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        linear = pc.estimate(model, [pc.Experiment(t, made.y, u=command, x0=[0.2, 0.0])],
                             p0=[2.0, 1.0])
        held = pc.estimate(model, [pc.Experiment(t, made.y, u=command, x0=[0.2, 0.0],
                                                 u_interpolation="previous")], p0=[2.0, 1.0])
    assert linear.fit_flagged
    assert any("u_interpolation='previous'" in w and "half a sample early" in w
               for w in linear.warnings), linear.warnings
    assert held.success and not held.fit_flagged
    assert not any("half a sample early" in w for w in held.warnings)
    # a restated problem (an experiment constant, which joins the inputs)
    # names the user's inputs the same way
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        restated = pc.estimate(model, [pc.Experiment(t, made.y, u=command, x0=[0.2, 0.0],
                                                     name="run",
                                                     parameters={model.p_names[1]: 0.5})],
                               p0=[2.0, 1.0])
    named = [w for w in restated.warnings if "half a sample early" in w]
    assert restated.fit_flagged and len(named) == 1, restated.warnings
    assert named[0].startswith(f"the input(s) {model.u_names[0]!r} of 'run' are samples")


def test_rows_left_out_over_a_stretch_are_named_as_a_gap_the_inputs_cross(sampled_problem):
    """Two days of a building's log absent: the inputs were read across the
    gap as if measured, and the flagged fit blamed correlated noise.  A gap
    20 times the median spacing is named; the whole record is not."""
    model, t, y, samples = sampled_problem
    keep = (t < 4.0) | (t > 8.5)
    with pytest.warns(UserWarning, match=r"experiment 'gap': its samples jump from t = 3\.83333 "
                                         r"to 8\.66667, 29 times their median spacing"):
        res = pc.estimate(model, [pc.Experiment(t[keep], y[keep], u=samples[keep],
                                                x0=[0.2, 0.0], name="gap")], p0=[2.0, 1.0])
    assert any("split the experiment at the gap" in w for w in res.warnings)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        pc.estimate(model, [pc.Experiment(t, y, u=samples, x0=[0.2, 0.0])], p0=[2.0, 1.0])
    assert not [w for w in said if "jump from" in str(w.message)]


def test_a_model_without_inputs_hears_nothing_of_sampled_inputs():
    """Experiment constants and a parameter per experiment join a restated
    problem's inputs; a model without inputs of its own, its doses as
    constants from ``t0=0`` before the first sample, has no sampled inputs
    to be held or read across a gap (a pharmacologist had 12 notes per fit
    naming ``CLpop@is_CLpop[S01] = 1``)."""
    k, dose = ca.SX.sym("k"), ca.SX.sym("dose")
    x = ca.SX.sym("x")
    model = pc.Model(x=x, p=ca.vertcat(k, dose), rhs=-k * x, x0=[dose], x_names=["x"],
                     p_names=["k", "dose"])
    exps = []
    for i, (d, kk) in enumerate(((50.0, 0.3), (100.0, 0.35), (200.0, 0.25))):
        t = np.r_[np.linspace(0.5, 4.0, 6), 40.0]  # a gap in the samples too
        y = d * np.exp(-kk * t) * (1 + 0.02 * np.cos(7 * t + i))
        exps.append(pc.Experiment(t, y, t0=0.0, name=f"S{i}", parameters={"dose": d}))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        res = pc.estimate(model, exps, p0=[0.2, 0.0], per_experiment="k", estimate_x0=False)
    assert res.success, res.message
    heard = [str(w.message) for w in said if "sampled input" in str(w.message)]
    assert not heard and not [w for w in res.warnings if "sampled input" in w], heard
