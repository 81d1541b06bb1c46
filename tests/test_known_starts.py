"""Initial states held at their first measurements, which carry the noise."""

import warnings

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.analysis.fit_check import NOISY_START
from picard_casadi.estimation.known_starts import chi2_upper, held_first_samples


def _decay():
    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    return pc.Model(x=x, p=k, rhs=-k * x, y=x, name="decay", x_names=["level"],
                    p_names=["k"])


def _runs(first_exact: bool):
    rng = np.random.default_rng(4)
    t = np.linspace(0.0, 10.0, 200)
    runs = []
    for name, start in (("a", 1.0), ("b", 2.0)):
        y = start * np.exp(-0.1 * t) + 0.05 * rng.standard_normal(t.size)
        if first_exact:
            y[0] = start
        runs.append(pc.Experiment(t, y[:, None], name=name, x0=[y[0]]))
    return runs


def test_the_chi_square_points_are_the_tables():
    # 10.83, 18.47, 29.59 (k = 1, 4, 10): Wilson and Hilferty's, a little above
    for k, table in ((1, 10.828), (4, 18.467), (10, 29.588)):
        assert table <= chi2_upper(k) <= 1.035 * table


def test_a_state_held_at_its_noisy_first_sample_is_named_and_the_fit_flagged():
    model = _decay()
    runs = _runs(first_exact=False)
    assert held_first_samples(model, runs, np.array([True])) == [0]
    with pytest.warns(pc.FitWarning, match=NOISY_START):
        res = pc.estimate(model, runs, [0.3], estimate_x0=False)
    assert res.success and res.fit_flagged
    [note] = [w for w in res.warnings if w.startswith(NOISY_START)]
    assert "(level, in each experiment" in note and "k by " in note
    # the same with the initial states estimated: no such note
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        free = pc.estimate(model, runs, [0.3])
    assert not any(w.startswith(NOISY_START) for w in free.warnings)


def test_a_first_sample_the_data_do_not_reject_is_left_alone():
    model = _decay()
    runs = _runs(first_exact=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = pc.estimate(model, runs, [0.3], estimate_x0=False)
    assert res.success and not any(w.startswith(NOISY_START) for w in res.warnings)
    # values that are not the first samples are not tested at all
    other = [pc.Experiment(e.t, e.y, name=e.name, x0=[e.y[0, 0] + 0.3]) for e in runs]
    assert held_first_samples(model, other, np.array([True])) == []


def test_an_experiment_with_no_more_measurements_than_its_own_unknowns_is_named():
    """A mouse with 2 readings for its growth rate and initial volume: its
    first reading came back as the initial volume, and no word."""
    model = _decay()
    runs = _runs(first_exact=False)
    short = pc.Experiment(runs[0].t[:2], runs[0].y[:2], name="few")
    with pytest.warns(UserWarning, match=r"no more measurements than unknowns of their own: "
                                         r"'few' \(2 for k\[few\], x0\[level\]\)"):
        res = pc.estimate(model, [*runs, short], [0.3], per_experiment="k")
    assert res.success
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = pc.estimate(model, runs, [0.3], per_experiment="k")
    assert not any("unknowns of their own" in w for w in res.warnings)
