"""The problem as data sets state it: log-scale parameters, experiment
constants and parameters, initial states from parameters
(``picard_casadi/estimation/statement.py``).

Each restated fit is checked against the same problem written out by hand
(``10**theta`` in the expressions, one model per experiment's constants, a
state shifted by its initial value), which the package solved before.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc

T = np.linspace(0.0, 10.0, 41)


def _chain(a0_from_p: bool = False):
    """A -> B, B measured with an offset: p = k1, k2, A0, bias; ``a0_from_p``:
    the model gives ``x0 = [A0, 0]``."""
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 4)
    return pc.Model(x=x, p=p, rhs=ca.vertcat(-p[0] * x[0], p[0] * x[0] - p[1] * x[1]),
                    y=ca.vertcat(x[0], x[1] + p[3]), x_names=["A", "B"],
                    p_names=["k1", "k2", "A0", "bias"], x0=[p[2], 0.0] if a0_from_p else None)


def _chain_table():
    """``_chain``'s parameters: both rates on log10 scales, ``A0`` fixed at 10."""
    return [pc.Parameter("k1", 0.3, (1e-3, 1e3), "log10"),
            pc.Parameter("k2", 0.3, (1e-3, 1e3), "log10"),
            pc.Parameter("A0", 10.0, estimate=False),
            pc.Parameter("bias", 0.0, (-5, 5))]


def _data(biases=(0.5, -0.3), A0=10.0, seed=0):
    model = _chain()
    rng = np.random.default_rng(seed)
    exps = []
    for e, bias in enumerate(biases):
        X = pc.simulate(model, [A0, 0.0], [0.5, 0.2, A0, bias], T)
        Y = np.column_stack([X[:, 0], X[:, 1] + bias]) + 0.05 * rng.standard_normal((T.size, 2))
        exps.append(pc.Experiment(T, Y, name=f"run{e + 1}"))
    return exps


def test_log10_parameters_reach_the_same_optimum_with_both_scales_reported():
    model = _chain()
    exps = [e.replaced(x0=[10.0, 0.0]) for e in _data(biases=(0.5,))[:1]]
    kw = dict(p_bounds=([1e-3, 1e-3, 10.0, -5.0], [1e3, 1e3, 10.0, 5.0]), estimate_x0=False)
    lin = pc.estimate(model, exps, [0.3, 0.3, 10.0, 0.0], **kw)
    log = pc.estimate(model, exps, [0.3, 0.3, 10.0, 0.0],
                      parameter_scale=["log10", "log", "lin", "lin"], **kw)
    assert lin.success and log.success
    assert log.p == pytest.approx(lin.p, rel=1e-6)
    assert log.p_scaled_names == ["log10(k1)", "log(k2)", "A0", "bias"]
    assert log.p_scaled[:2] == pytest.approx([math.log10(lin.p[0]), math.log(lin.p[1])],
                                             rel=1e-6)
    # the delta method: the same standard errors to first order
    assert log.p_std[[0, 1, 3]] == pytest.approx(lin.p_std[[0, 1, 3]], rel=2e-3)
    assert log.p_scaled_std[0] == pytest.approx(lin.p_std[0] / (lin.p[0] * math.log(10)),
                                                rel=2e-3)
    # the interval is the log-scale one's ends: asymmetric about p
    lo, hi = log.p_ci[0]
    assert lo < log.p[0] < hi and (hi - log.p[0]) > (log.p[0] - lo)
    assert log.settings["parameter_scale"] == ["log10", "log", "lin", "lin"]
    back = pc.EstimationResult.from_json(log.to_json())
    assert back.p_scaled == pytest.approx(log.p_scaled) and back.p_scales == log.p_scales
    # the summary says which parameters the fit moved on a log scale, and where
    line = next(x for x in log.summary().splitlines() if "estimated on their log scales" in x)
    assert "log10(k1) = " in line and "log(k2) = " in line and "A0" not in line
    # a linear standard error beyond the value itself is not shown: the log one is
    assert "(log: below)" not in next(x for x in log.summary().splitlines()
                                      if x.strip().startswith("k1 "))
    vague = dataclasses.replace(log, p_std=np.r_[2.0 * log.p[0], log.p_std[1:]])
    assert "(log: below)" in next(x for x in vague.summary().splitlines()
                                  if x.strip().startswith("k1 "))


def test_a_parameter_table_gives_starts_bounds_scales_and_fixed_values():
    model = _chain()
    exps = [e.replaced(x0=[10.0, 0.0]) for e in _data(biases=(0.5,))[:1]]
    table = _chain_table()
    res = pc.estimate(model, exps, table, estimate_x0=False)
    assert res.success and res.p[2] == 10.0
    assert res.p == pytest.approx([0.5, 0.2, 10.0, 0.5], abs=0.05)


def test_numbers_for_a_problem_s_table_keep_its_bounds_and_scales():
    # a new user restarted a PEtab problem from a fit's res.p: "p0 must have 17
    # entries, got 13" (the model's parameters, not the table's), and a vector
    # of the model's length dropped the table's log scales silently
    model = _chain()
    exps = [e.replaced(x0=[10.0, 0.0]) for e in _data(biases=(0.5,))[:1]]
    table = _chain_table()
    prob = pc.Problem(name="chain", model=model, experiments=exps, p_true=None, p0=table,
                      p_bounds=None, options={"estimate_x0": False}, x0_true=[])
    first = prob.estimate()
    again = prob.estimate(p0=first.p)
    assert again.success and again.settings["parameter_scale"] == ["log10", "log10", "lin",
                                                                    "lin"]
    assert again.p == pytest.approx(first.p, rel=1e-6) and again.iterations < first.iterations
    moved = pc.parameters.with_starts(table, {"k2": 0.1})
    assert [q.start for q in moved] == [0.3, 0.1, 10.0, 0.0] and moved[1].scale == "log10"
    assert prob.estimate(p0={"k2": 0.1}).p == pytest.approx(first.p, rel=1e-5)
    with pytest.raises(ValueError, match=r"has 2 value\(s\).*4 entries \(k1, k2, A0, bias\)"):
        prob.estimate(p0=[0.3, 0.3])
    with pytest.raises(ValueError, match=r"'kk1' \(did you mean 'k1'\?\).*k1, k2, A0, bias"):
        prob.estimate(p0={"kk1": 0.3})
    with pytest.raises(ValueError, match=r"Parameter 'k1': `start` -1 is outside its bounds"):
        prob.estimate(p0={"k1": -1.0})


def test_a_dict_start_names_each_parameter_of_the_model():
    model = _chain()
    exps = [e.replaced(x0=[10.0, 0.0]) for e in _data(biases=(0.5,))[:1]]
    kw = dict(p_bounds=([1e-3, 1e-3, 10.0, -5.0], [1e3, 1e3, 10.0, 5.0]), estimate_x0=False)
    flat = pc.estimate(model, exps, [0.3, 0.3, 10.0, 0.0], **kw)
    named = pc.estimate(model, exps, {"bias": 0.0, "A0": 10.0, "k2": 0.3, "k1": 0.3}, **kw)
    assert named.p == pytest.approx(flat.p, rel=1e-12)
    with pytest.raises(ValueError, match=r"missing: A0, bias"):
        pc.estimate(model, exps, {"k1": 0.3, "k2": 0.3}, **kw)
    with pytest.raises(ValueError, match=r"'kk2' \(did you mean 'k2'\?\), which the model"):
        pc.estimate(model, exps, {"k1": 0.3, "kk2": 0.3, "A0": 10.0, "bias": 0.0}, **kw)


def test_multistart_starts_are_on_the_scale_of_the_estimate():
    # a new user's result.json held each start's p0 and p in log10 beside a
    # linear p
    model = _chain()
    exps = [e.replaced(x0=[10.0, 0.0]) for e in _data(biases=(0.5,))[:1]]
    table = [pc.Parameter("k1", 0.3, (1e-2, 1e1), "log10"),
             pc.Parameter("k2", 0.3, (1e-2, 1e1), "log10"),
             pc.Parameter("A0", 10.0, estimate=False),
             pc.Parameter("bias", 0.0, (-5, 5))]
    res = pc.estimate(model, exps, table, estimate_x0=False, multistart=3, seed=2)
    assert len(res.starts) == 3 and res.starts[0]["p0"] == pytest.approx([0.3, 0.3, 10.0, 0.0])
    for start in res.starts:
        assert all(1e-2 <= v <= 1e1 for v in start["p0"][:2])
        assert start["p0_scaled"][:2] == pytest.approx(np.log10(start["p0"][:2]))
        if start["success"]:
            assert start["p"] == pytest.approx(res.p, rel=1e-4)
            assert start["p_scaled"][0] == pytest.approx(math.log10(start["p"][0]))


def test_a_bound_reached_is_named_as_the_table_s_not_as_p_bounds():
    # a parameter table refuses p_bounds, and the note told its user to widen
    # "(p_bounds)": the bound is the table's entry, in the warning shown and
    # in the result's
    model = _chain()
    exps = [e.replaced(x0=[10.0, 0.0]) for e in _data(biases=(0.5,))[:1]]
    table = [pc.Parameter("k1", 0.3, (1e-3, 0.3), "log10"),  # the data's k1 = 0.5
             pc.Parameter("k2", 0.3, (1e-3, 1e3), "log10"),
             pc.Parameter("A0", 10.0, estimate=False),
             pc.Parameter("bias", 0.0, (-5, 5))]
    with pytest.warns(pc.FitWarning, match=r"log10\(k1\) ended on its upper bound") as shown:
        res = pc.estimate(model, exps, table, estimate_x0=False)
    note = next(w for w in res.warnings if "ended on its upper bound" in w)
    assert "(its Parameter's bounds in the table p0)" in note and "p_bounds" not in note
    assert all("p_bounds" not in str(w.message) for w in shown)


def test_a_bias_per_experiment_and_an_initial_state_from_a_parameter():
    exps = _data()
    model = _chain(a0_from_p=True)
    res = pc.estimate(model, exps, [0.3, 0.3, 8.0, 0.0], per_experiment="bias")
    assert res.success, res.summary()
    assert res.p_names == ["k1", "k2", "A0", "bias[run1]", "bias[run2]"]
    assert res.settings["x0_from_parameters"] == ["A"]
    assert [x0[0] for x0 in res.x0] == pytest.approx([res.p[2]] * 2)
    assert [x0[1] for x0 in res.x0] == [0.0, 0.0]
    # x0 = (A0, 0): A0's standard error and a known state's 0, in each experiment
    assert [s[0] for s in res.x0_std] == pytest.approx([res.p_std[2]] * 2, rel=1e-9)
    assert [s[1] for s in res.x0_std] == [0.0, 0.0]
    # the same problem by hand: the two biases as parameters chosen by an
    # input, and A shifted by its initial value A0
    xh, ph = ca.SX.sym("x", 2), ca.SX.sym("p", 5)  # k1, k2, A0, b1, b2
    u = ca.SX.sym("u")  # 1 in run 2, 0 in run 1
    A = xh[0] + ph[2]
    hand = pc.Model(x=xh, p=ph, u=u, rhs=ca.vertcat(-ph[0] * A, ph[0] * A - ph[1] * xh[1]),
                    y=ca.vertcat(A, xh[1] + (1 - u) * ph[3] + u * ph[4]))
    hand_exps = [e.replaced(u=np.full((T.size, 1), float(i)), x0=[0.0, 0.0])
                 for i, e in enumerate(exps)]
    ref = pc.estimate(hand, hand_exps, [0.3, 0.3, 8.0, 0.0, 0.0], estimate_x0=False)
    assert res.p == pytest.approx(ref.p, rel=1e-6, abs=1e-8)
    assert res.p_std == pytest.approx(ref.p_std, rel=1e-4)
    assert res.nllh == pytest.approx(ref.nllh, abs=1e-6)


def test_experiment_constants_and_a_parameter_mapped_by_name():
    exps = _data(biases=(0.5, -0.3, 0.2))
    model = _chain()
    known = [e.replaced(x0=[10.0, 0.0], parameters={"bias": b})
             for e, b in zip(exps, (0.5, -0.3, 0.2))]
    known[2] = known[2].replaced(parameters={"bias": "bias_3"})  # estimated there
    res = pc.estimate(model, known, [0.3, 0.3, 10.0, 0.0], estimate_x0=False,
                      p_bounds=([0, 0, 10.0, -5], [5, 5, 10.0, 5]))
    assert res.success
    assert res.p_names == ["k1", "k2", "A0", "bias_3"]
    assert res.p[3] == pytest.approx(0.2, abs=0.05)


def test_a_log_scale_parameter_is_made_again_from_its_own_bounds():
    """A missing lower bound on a log scale is stored as 0; 0 is then taken as
    none again, so a parameter's own fields remake it (PEtab's recipe of
    ``replace(q, estimate=False)``); a negative bound is refused."""
    q = pc.Parameter("k", 1.0, scale="log10")
    assert q.bounds == (0.0, np.inf)
    assert dataclasses.replace(q, estimate=False).bounds == q.bounds
    assert pc.Parameter("k", 1.0, bounds=(0, np.inf), scale="log10") == q
    with pytest.raises(ValueError, match=r"Parameter 'k': on the log10 scale the bounds must "
                                         r"be positive \(or None\), got \[-1, 10\]; give a "
                                         r"positive bound, or None \(or 0\)"):
        pc.Parameter("k", 1.0, bounds=(-1, 10), scale="log10")
    # an upper bound of 0 is the scale's error (it was "start 0.5 is outside its bounds")
    with pytest.raises(ValueError, match=r"on the log10 scale the bounds must be positive "
                                         r"\(or None\), got \[0, 0\]"):
        pc.Parameter("k", 0.5, bounds=(0, 0), scale="log10")


def test_bad_statements_name_what_and_where():
    exps = _data()
    model = _chain()
    with pytest.raises(ValueError, match=r"Parameter 'k1': on the log10 scale the bounds must "
                                         r"be positive"):
        pc.estimate(model, exps, [0.3, 0.3, 10, 0], p_bounds=([-1, 0, 0, -5], [5, 5, 20, 5]),
                    parameter_scale=["log10", "lin", "lin", "lin"])
    with pytest.raises(ValueError, match=r"experiment 'run1' sets parameter\(s\) 'dose', "):
        pc.estimate(model, [exps[0].replaced(parameters={"dose": 2.0})], [0.3, 0.3, 10, 0])
    with pytest.raises(ValueError, match=r"sets parameter\(s\) 'bais' \(did you mean 'bias'\?\)"):
        pc.estimate(model, [exps[0].replaced(parameters={"bais": 2.0})], [0.3, 0.3, 10, 0])
    with pytest.raises(ValueError, match=r"`noise` names output\(s\) 'y_1' \(did you mean 'y1'\?\)"):
        pc.estimate(model, exps, [0.3, 0.3, 10, 0], noise={"y_1": pc.Noise()})
    with pytest.raises(ValueError, match=r"\['run2'\] do not set 'bias', which experiment\(s\) "
                                         r"\['run1'\] set to a number"):
        pc.estimate(model, [exps[0].replaced(parameters={"bias": 0.5}), exps[1]],
                    [0.3, 0.3, 10, 0])
    table = [pc.Parameter(n, v) for n, v in zip(model.p_names, (0.3, 0.3, 10.0, 0.0))]
    with pytest.raises(ValueError, match=r"maps 'bias' to parameter 'b1', which is not in the "
                                         r"parameter table"):
        pc.estimate(model, [exps[0].replaced(parameters={"bias": "b1"}), exps[1]], table)
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 4)
    with pytest.raises(ValueError, match=r"`x0` of state 'x0' uses symbol 'zz'"):
        pc.Model(x=x, p=p, rhs=-p[0] * x, x0=[ca.SX.sym("zz"), 0.0])
    with pytest.raises(ValueError, match="scale 'ln' is not one of lin, log, log10"):
        pc.Parameter("k", 1.0, scale="ln")
    with pytest.raises(ValueError, match=r"`per_experiment` names \['gain'\]"):
        pc.estimate(model, exps, [0.3, 0.3, 10, 0], per_experiment="gain")


def test_predictions_of_a_restated_fit_are_the_model_s():
    exps = _data()
    model = _chain(a0_from_p=True)
    res = pc.estimate(model, exps, [0.3, 0.3, 8.0, 0.0], per_experiment="bias",
                      parameter_scale=["log10", "log10", "lin", "lin"])
    plain = model.replaced(x0=None)
    for e in range(2):
        q = np.array([res.p[0], res.p[1], res.p[2], res.p[3 + e]])
        X = pc.simulate(plain, res.x0[e], q, T)
        G = np.array([plain.output_value(t, xx, q) for t, xx in zip(T, X)])
        assert res.predict(e) == pytest.approx(G, rel=1e-6, abs=1e-8)


def test_replicates_fit_as_their_mean_and_a_long_table_needs_no_padding():
    x, p = ca.SX.sym("x"), ca.SX.sym("p", 1)
    model = pc.Model(x=x, p=p, rhs=-p[0] * x, y_names=["c"])
    t = np.linspace(0.0, 4.0, 9)
    rng = np.random.default_rng(7)
    truth = pc.simulate(model, [2.0], [0.7], t)[:, 0]
    ya, yb = truth + 0.05 * rng.standard_normal(t.size), truth + 0.05 * rng.standard_normal(t.size)
    # each time twice: the least-squares estimate is the fit to the replicates' mean
    rep = pc.Experiment(np.repeat(t, 2), np.column_stack([ya, yb]).ravel(), x0=[2.0])
    mean = pc.Experiment(t, 0.5 * (ya + yb), x0=[2.0])
    r_rep = pc.estimate(model, [rep], [0.3], estimate_x0=False)
    r_mean = pc.estimate(model, [mean], [0.3], estimate_x0=False)
    assert r_rep.success and r_rep.p == pytest.approx(r_mean.p, rel=1e-7)
    assert r_rep.n_measurements == 2 * t.size
    # the same table in long form, shuffled
    order = rng.permutation(2 * t.size)
    times = np.repeat(t, 2)[order]
    values = np.column_stack([ya, yb]).ravel()[order]
    long = pc.Experiment.from_measurements(times, ["c"] * times.size, values, model.y_names,
                                           x0=[2.0])
    assert long.y.shape == (2 * t.size, 1) and np.array_equal(long.t, np.repeat(t, 2))
    r_long = pc.estimate(model, [long], [0.3], estimate_x0=False)
    assert r_long.p == pytest.approx(r_rep.p, rel=1e-7)
    with pytest.raises(ValueError, match="measurement 0 is of output 'd'"):
        pc.Experiment.from_measurements([0, 1], ["d", "c"], [1, 2], model.y_names)


def test_replicate_rows_pasted_twice_are_said():
    """A CSV with every row twice: the copies counted as replicates made the
    standard errors 1/sqrt(2) of the clean file's, with no word; replicates
    of rounded readings that agree at a few times get no note."""
    x, p = ca.SX.sym("x"), ca.SX.sym("p", 1)
    model = pc.Model(x=x, p=p, rhs=-p[0] * x, y_names=["c"])
    t = np.linspace(0.0, 4.0, 9)
    truth = pc.simulate(model, [2.0], [0.7], t)[:, 0]
    y = np.round(truth + 0.05 * np.random.default_rng(7).standard_normal((3, t.size)), 2)
    y[1, 2], y[1, 6] = y[0, 2], y[0, 6]  # rounded readings agree at two times
    clean = pc.Experiment(np.repeat(t, 3), y.T.ravel(), x0=[2.0], name="clean")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no note
        res = pc.estimate(model, [clean], [0.3], estimate_x0=False)
    assert not any("repeat a row" in w for w in res.warnings), res.warnings
    pasted = pc.Experiment(np.repeat(t, 2), np.repeat(y[0], 2), x0=[2.0], name="pasted")
    with pytest.warns(UserWarning, match=r"experiment 'pasted': 9 replicate row\(s\) repeat "
                                         r"a row of their time in every measured value \(at 9 "
                                         r"of the 9 times with replicates: t = 0, 0.5, 1, ...\)"):
        res = pc.estimate(model, [pasted], [0.3], estimate_x0=False)
    assert res.success
    # duplicates pasted below the file and sorted by time: a1 a2 a1 a2 at each
    stacked = pc.Experiment(np.repeat(t, 4), np.tile(y[:2].T, 2).ravel(), x0=[2.0], name="s")
    with pytest.warns(UserWarning, match=r"experiment 's': 21 replicate row\(s\) repeat"):
        pc.estimate(model, [stacked], [0.3], estimate_x0=False)
    # a run given twice (the names made unique): flagged, its standard errors too
    # small (a quarter car's copied run exited 0, ks's 5.43 standard error 3.98)
    with pytest.warns(pc.FitWarning, match=r"experiments 'clean' and 'again' hold the same "
                                           r"times and measurements"):
        twice = pc.estimate(model, [clean, clean.replaced(name="again")], [0.3],
                            estimate_x0=False)
    assert twice.success and twice.fit_flagged


def test_experiments_with_one_name_keep_their_own_parameters():
    exps = [e.replaced(name="experiment", x0=[10.0, 0.0]) for e in _data()]
    res = pc.estimate(_chain(), exps, [0.3, 0.3, 10.0, 0.0], per_experiment="bias",
                      estimate_x0=False)
    assert res.p_names == ["k1", "k2", "A0", "bias[0]", "bias[1]"]
    assert res.p[3:] == pytest.approx([0.5, -0.3], abs=0.05)
    # named alike by the user: told apart by position too, and a warning says
    # so (a subject ID given twice made every subject's label its position)
    exps = [e.replaced(name="maneuver") for e in exps] + [exps[0].replaced(name="other")]
    with pytest.warns(UserWarning, match=r"experiments share a name \('maneuver' as "
                                         r"'maneuver 0', 'maneuver 1'\): each is fitted"):
        res = pc.estimate(_chain(), exps, [0.3, 0.3, 10.0, 0.0], per_experiment="bias",
                          estimate_x0=False)
    assert res.p_names == ["k1", "k2", "A0", "bias[maneuver 0]", "bias[maneuver 1]",
                           "bias[other]"]
    assert res.experiment_names == ["maneuver 0", "maneuver 1", "other"]


def test_an_initial_state_of_fixed_parameters_is_a_known_number():
    # Boehm's STAT5A(0) = 207.6 ratio with ratio fixed: known in each
    # experiment, not a state shifted by an expression
    exps = _data()
    model = _chain(a0_from_p=True)
    table = [pc.Parameter("k1", 0.3, (1e-3, 10), "log10"), pc.Parameter("k2", 0.3, (1e-3, 10)),
             pc.Parameter("A0", 10.0, estimate=False), pc.Parameter("bias", 0.0, (-5, 5))]
    res = pc.estimate(model, exps, table, per_experiment="bias")
    assert res.success and "x0_from_parameters" not in res.settings
    assert [list(x0) for x0 in res.x0] == [[10.0, 0.0], [10.0, 0.0]]


def test_replicates_of_a_measured_state_start_the_guess():
    # three replicates per time of a measured state, x0 estimated: the guess
    # from the data raised "Singular matrix" (its local fits saw repeated times)
    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    model = pc.Model(x=x, p=k, rhs=-k * x)
    t = np.array([0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0])  # graded: short windows
    truth = pc.simulate(model, [2.0], [0.3], t)[:, 0]
    rng = np.random.default_rng(3)
    y = np.repeat(truth, 3) + 0.02 * rng.standard_normal(3 * t.size)
    res = pc.estimate(model, [pc.Experiment(np.repeat(t, 3), y)], [0.5])
    assert res.success and res.p[0] == pytest.approx(0.3, rel=0.05)
    assert res.x0[0][0] == pytest.approx(2.0, rel=0.05)


def test_one_sample_time_after_an_earlier_start():
    # a PEtab condition measured only at t = 10, simulated from t = 0
    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    model = pc.Model(x=x, p=k, rhs=-k * x)
    one = pc.Experiment([10.0], [[np.exp(-2.0)]], x0=[1.0], t0=0.0)
    twice = pc.Experiment([5.0, 5.0], [[np.exp(-1.0) * 0.99], [np.exp(-1.0) * 1.01]],
                          x0=[1.0], t0=0.0)
    res = pc.estimate(model, [one, twice], [0.5], estimate_x0=False)
    assert res.success and res.p[0] == pytest.approx(0.2, rel=1e-2)
    with pytest.raises(ValueError, match="at least 2 sample times"):
        pc.Experiment([10.0], [[1.0]])


def test_per_experiment_that_cannot_take_effect_is_refused():
    # every experiment set the parameter itself: per_experiment was ignored;
    # a fixed table entry: it was estimated per experiment anyway
    exps = [e.replaced(parameters={"bias": b}) for e, b in zip(_data(), (0.5, -0.3))]
    model = _chain()
    with pytest.raises(ValueError, match=r"`per_experiment` names \['bias'\], which every "
                                         r"experiment sets itself"):
        pc.estimate(model, exps, [0.3, 0.3, 10, 0], per_experiment="bias")
    table = [pc.Parameter("k1", 0.3), pc.Parameter("k2", 0.3), pc.Parameter("A0", 10.0),
             pc.Parameter("bias", 0.0, estimate=False)]
    with pytest.raises(ValueError, match=r"`per_experiment` names \['bias'\], which the "
                                         r"parameter table `p0` fixes"):
        pc.estimate(model, _data(), table, per_experiment="bias")
    # one experiment holding its own value and the others their own parameter: allowed
    some = [exps[0].replaced(x0=[10.0, 0.0]), _data()[1].replaced(x0=[10.0, 0.0])]
    res = pc.estimate(model, some, [0.3, 0.3, 10, 0], per_experiment="bias",
                      estimate_x0=False, p_bounds=([0, 0, 10, -5], [5, 5, 10, 5]))
    assert res.success and res.p_names == ["k1", "k2", "A0", "bias[run2]"]
    assert res.p[3] == pytest.approx(-0.3, abs=0.05)


def test_a_number_written_as_a_string_is_the_number():
    # parameters={"dose": "2.0"} (read from a file) became a parameter named "2.0"
    e = pc.Experiment(T, np.ones((T.size, 2)), parameters={"bias": "2.0", "k1": "k_run"})
    assert e.parameters == {"bias": 2.0, "k1": "k_run"}


def test_x0_from_parameters_with_data_from_a_later_time_says_where_its_clock_starts():
    # A0 meant at t = 0, data from t = 1: fitted as A(1), success and no note
    model = _chain(a0_from_p=True)
    late = [pc.Experiment(T[4:], e.y[4:], name=e.name) for e in _data(biases=(0.5,))]
    with pytest.warns(UserWarning, match="first sample time"):
        res = pc.estimate(model, late, [0.3, 0.3, 8.0, 0.0])
    # first: where the fit is flagged too, this is the likelier cause
    assert "first sample time" in res.warnings[0] and "t0=0.0" in res.warnings[0], res.warnings
    # the clock given: the note goes, and A0 is the state at t = 0 (the truth 10)
    at_zero = [e.replaced(t0=0.0) for e in late]
    res0 = pc.estimate(model, at_zero, [0.3, 0.3, 8.0, 0.0])
    assert res0.success and not any("first sample time" in w for w in res0.warnings)
    assert res0.p[2] == pytest.approx(10.0, abs=5 * res0.p_std[2])


def test_a_clock_that_reads_a_date_is_not_told_to_start_at_zero():
    """PMU frames stamped in UNIX seconds (1.7e9 over 10 s), the states known
    at the first frame: the note said "pass Experiment(..., t0=0.0)", which
    integrated the model from 0 to 1.7e9 (40 s, standard errors 300 times
    wider)."""
    from picard_casadi.estimation.diagnosis import late_clock_note

    stamped = pc.Experiment(1.7e9 + np.linspace(0.0, 10.0, 11), np.ones(11), name="pmu")
    note = late_clock_note([stamped], ["delta"], np.array([True]))
    assert "reads a date, a calendar year, a day number or a time of day (UNIX seconds?)" \
        in note, note
    assert "nothing to change" in note and "t0=0.0 would run the model from 0" in note
    dosed = pc.Experiment(np.array([0.5, 1.0, 2.0]), np.ones(3), name="subj1")
    assert "pass Experiment(..., t0=0.0)" in late_clock_note([dosed], ["Ad"], np.array([True]))
    # surveillance days numbered from 1970 (18323 over 59 days): no t0=0.0 either
    days = pc.Experiment(18323.0 + np.arange(60.0), np.ones(60), name="region")
    assert "a day number" in late_clock_note([days], ["S"], np.array([True]))
    # calendar years 1850-2020 (10.9 spans from 0): t0=0.0 ran a climate model
    # from year 0 at the first year's forcing, not certified
    years = pc.Experiment(np.arange(1850.0, 2021.0), np.ones(171), name="historical")
    assert "nothing to change" in late_clock_note([years], ["T"], np.array([True]))
    # ... and given t0 = 0 there, the model ran 18323 days to the data, then
    # failed after 60 s naming meaningless sensitivities: said at once
    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    decay = pc.Model(x=x, p=k, rhs=-k * x, y=x)
    with pytest.warns(UserWarning, match=r"experiment 'region' starts at t0 = 0, 18323 time "
                                         r"units before its first sample, its data spanning 59"):
        pc.estimate(decay, [days.replaced(t0=0.0, x0=[1.0])], [0.01], estimate_x0=False)


def test_a_known_dose_with_samples_from_later_says_where_its_clock_starts():
    """The commonest PK layout: a dose at t = 0 (an experiment constant in
    the model's x0, or a known x0), the first sample at 0.5 h.  It was fitted
    as a dose at 0.5 h (ka 2.53 +- 1.3 for 1.2) with success and no note."""
    Ad, Ac = ca.SX.sym("Ad"), ca.SX.sym("Ac")
    ka, CL, V, dose = (ca.SX.sym(n) for n in ("ka", "CL", "V", "dose"))
    model = pc.Model(x=ca.vertcat(Ad, Ac), p=ca.vertcat(ka, CL, V, dose),
                     rhs=ca.vertcat(-ka * Ad, ka * Ad - CL / V * Ac), y=Ac / V,
                     x0=[dose, 0.0], p_names=["ka", "CL", "V", "dose"], x_names=["Ad", "Ac"])
    t = np.array([0.5, 1, 2, 4, 6, 8, 12, 24.0])
    rng = np.random.default_rng(0)
    exps = []
    for i, D in enumerate([100.0, 300.0]):
        X = pc.simulate(model, [D, 0.0], [1.2, 4.0, 30.0, D], t, t0=0.0)
        y = X[:, 1:] / 30.0 + 0.05 * rng.standard_normal((t.size, 1))
        exps.append(pc.Experiment(t=t, y=y, name=f"subj{i + 1}", parameters={"dose": D}))
    # (a constant every experiment sets needs no start: its entry is not used)
    start = {"ka": 0.5, "CL": 3.0, "V": 20.0}
    with pytest.warns(UserWarning, match="known initial states .Ad, Ac. .*first sample time"):
        res = pc.estimate(model, exps, p0=start)
    assert "t0=0.0" in res.warnings[0] and "'subj1' and 'subj2'" in res.warnings[0]
    # a known x0 of the experiment itself (no constants): the same note
    plain = pc.Model(x=ca.vertcat(Ad, Ac), p=ca.vertcat(ka, CL, V),
                     rhs=ca.vertcat(-ka * Ad, ka * Ad - CL / V * Ac), y=Ac / V)
    known = [pc.Experiment(t=e.t, y=e.y, name=e.name, x0=[D, 0.0])
             for e, D in zip(exps, [100.0, 300.0])]
    with pytest.warns(UserWarning, match="first sample time"):
        pc.estimate(plain, known, [0.5, 3.0, 20.0], estimate_x0=False, uncertainty=False)
    # simulated data state their clock (x0 at the first sample): no note
    made = pc.simulate_experiment(plain, [100.0, 0.0], [1.2, 4.0, 30.0], t, noise_std=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        pc.estimate(plain, [made], [0.5, 3.0, 20.0], estimate_x0=False, uncertainty=False)
    # the clock given: no note, and the estimates are the truth's
    at_zero = [e.replaced(t0=0.0) for e in exps]
    res0 = pc.estimate(model, at_zero, p0=start)
    assert res0.success and not any("first sample time" in w for w in res0.warnings)
    assert abs(res0.p[0] - 1.2) < 4 * res0.p_std[0] and abs(res0.p[2] - 30) < 4 * res0.p_std[2]


def test_a_restated_result_loaded_with_the_model_predicts_as_in_its_session():
    """A result whose parameters are the model's and its experiments' own
    (per_experiment's names, constants) predicts again when loaded with the
    model and experiments; it was refused ("refit in this session").  Where
    the experiments given do not make its names, the error names what is
    missing; a profile still needs the session's result."""
    model, exps = _chain(), _data()
    res = pc.estimate(model, exps, [0.3, 0.3, 10, 0], per_experiment="bias")
    loaded = pc.EstimationResult.from_json(res.to_json(), model=model, experiments=exps)
    for i in range(len(exps)):
        np.testing.assert_allclose(loaded.predict(i), res.predict(i), rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match=r"refit from its estimate in this session"):
        pc.profile(loaded)
    # the way out the message gives: a table of the loaded estimate
    again = pc.estimate(model, exps, [pc.Parameter(n, v) for n, v in zip(loaded.p_names,
                                                                          loaded.p)],
                        per_experiment="bias")
    assert again.success and again.p_names == res.p_names
    np.testing.assert_allclose(again.p, res.p, rtol=1e-6, atol=1e-9)
    with pytest.raises(ValueError, match=r"'bias' is estimated per experiment: name one of "
                                         r"bias\[.*\], bias\["):
        pc.profile(again, parameters=["bias"])
    known = [e.replaced(parameters={"bias": b}) for e, b in zip(exps, (0.5, -0.3))]
    fitted = pc.estimate(model, known, [0.3, 0.3, 10.0, 0.0])
    assert fitted.p_names == ["k1", "k2", "A0"]  # bias a constant of each experiment
    loaded = pc.EstimationResult.from_json(fitted.to_json(), model=model, experiments=known)
    np.testing.assert_allclose(loaded.predict(1), fitted.predict(1), rtol=1e-9, atol=1e-12)
    # without the constants, bias is nowhere
    with pytest.raises(ValueError, match=r"restated problem .*no entry gives \['bias'\].*refit "
                                         r"in this session"):
        pc.EstimationResult.from_json(fitted.to_json(), model=model, experiments=exps)


def test_predictions_beyond_the_data_of_an_experiment_s_constants_warn_of_nothing():
    # the constants are held beyond the data as they were within it; a user
    # was told "the inputs are held at their last values" of a model without inputs
    import warnings

    model = _chain()
    known = [e.replaced(parameters={"bias": b}) for e, b in zip(_data(), (0.5, -0.3))]
    res = pc.estimate(model, known, [0.3, 0.3, 10.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        far = res.predict(1, t=[0.0, 5.0, 30.0])
    assert far.shape == (3, 2) and np.all(np.isfinite(far))


def test_the_closest_spelling_sees_case_and_digits_that_look_like_letters():
    # '--p0 kbl=0.02' suggested 'kb2' (difflib's tie between kb1 and kb2)
    from picard_casadi.errors import closest

    assert closest("kbl", ["kb1", "kb2", "k5"]) == "kb1"
    assert closest("MQ", ["Mq", "Mw"]) == "Mq"
    assert closest("kO", ["k0", "k1"]) == "k0"
    assert closest("zz", ["k", "s"]) is None


def test_a_misspelt_or_missing_table_entry_is_named_with_the_fix():
    model, exps = _chain(), _data()
    table = [pc.Parameter("k1", 0.3), pc.Parameter("K2", 0.3), pc.Parameter("A0", 10.0),
             pc.Parameter("bias", 0.0)]
    with pytest.raises(ValueError, match=r"the table names 'K2' \(did you mean 'k2'\?\), which "
                                         r"no experiment estimates; it has no entry for \['k2'\]"):
        pc.estimate(model, exps, table)
    with pytest.raises(ValueError, match=r"no entry for the model parameter 'k2': add "
                                         r"pc.Parameter\('k2', start, ...\)"):
        pc.estimate(model, exps, [q for q in table if q.name != "K2"])
    # an entry of experiments not given (a subset of the conditions): drop it
    extra = [e.replaced(parameters={"bias": "bias_2"}) for e in exps]
    full = table[:1] + [pc.Parameter("k2", 0.3), pc.Parameter("A0", 10.0),
                        pc.Parameter("bias_2", 0.0), pc.Parameter("bias_9", 0.0)]
    with pytest.raises(ValueError, match=r"the table names 'bias_9', which no experiment "
                                         r"estimates; drop them from the table \(\[q for q in "
                                         r"table if q.name not in \['bias_9'\]\]"):
        pc.estimate(model, extra, full)


def test_a_log_scale_asked_for_a_constant_of_every_experiment_is_not_checked():
    # parameter_scale listed log10 for a parameter every experiment sets to a
    # number (never estimated): its bounds [0, 10] failed the log scale's check
    model = _chain()
    exps = [e.replaced(x0=[10.0, 0.0], parameters={"A0": 10.0}) for e in _data()]
    res = pc.estimate(model, exps, [0.3, 0.3, 10.0, 0.0], estimate_x0=False,
                      p_bounds=([1e-3, 1e-3, 0.0, -5], [1e3, 1e3, 20.0, 5]),
                      parameter_scale=["log10", "log10", "log10", "lin"])
    assert res.success and res.p_names == ["k1", "k2", "bias"]
    assert res.p_scales == ["log10", "log10", "lin"]


def test_a_log_scale_parameter_moves_in_its_own_units_whatever_its_value():
    # the trust region measured a step of log10(k1) in units of |log10 k1|: from
    # k1 = 1.07 (0.03 decades) a step of one decade counted 33 times; PEtab's
    # Bruno from uniform 19 took 1395 iterations (54 s), 275 (9 s) with 1
    from picard_casadi.estimation.setup import build_setup
    from picard_casadi.estimation.statement import state_problem

    model = _chain()
    exps = [e.replaced(x0=[10.0, 0.0]) for e in _data(biases=(0.5,))[:1]]
    p0 = [10 ** 0.03, math.e ** -4.0, 10.0, 0.04]
    statement = state_problem(model, exps, p0, ([1e-3, 1e-3, 10.0, -5.0], [1e3, 1e3, 10.0, 5.0]),
                              ["log10", "log", "lin", "lin"], None, False)
    setup = build_setup(statement.model, statement.experiments, statement.phi0, T=2.5, n=2,
                        nodes=9, scheme="chebyshev", weights=np.ones(2),
                        p_bounds=(statement.phi_lb, statement.phi_ub),
                        x_bounds=(np.full(2, -np.inf), np.full(2, np.inf)), estimate_x0=False)
    assert statement.phi0[:2] == pytest.approx([0.03, -4.0])
    # log scales: 1 (a decade, an e-fold); the linear bias keeps |p0|
    assert setup.p_scale[[0, 1, 3]] == pytest.approx([1.0, 1.0, 0.04])


def test_an_input_of_the_wrong_width_is_counted_against_the_user_s_model():
    """With a constant set by the experiment (carried as an extra input), a
    callable of the wrong width was told the restated model's count: "must
    return 2 value(s) (the model's nu)" of a model with one input."""
    x, p, u = ca.SX.sym("x"), ca.SX.sym("p", 2), ca.SX.sym("u")
    model = pc.Model(x=x, p=p, u=u, rhs=-p[0] * x + p[1] * u, y=x, p_names=["k", "gain"])
    exp = pc.Experiment(T, np.ones((T.size, 1)), u=lambda s: [1.0, 2.0], x0=[1.0],
                        parameters={"gain": 2.0})
    with pytest.raises(ValueError, match=r"`u` must return 1 value\(s\) \(the model's nu\), "
                                         r"returned 2"):
        pc.estimate(model, [exp], [0.3, 1.0])
    with pytest.raises(ValueError, match=r"got 1; the entries of gain, which every experiment "
                                         r"sets to a number, are not used"):
        pc.estimate(model, [exp.replaced(u=lambda s: [1.0])], [0.3])


def test_a_measurement_at_a_time_that_is_not_finite_is_named_by_its_row():
    with pytest.raises(ValueError, match=r"measurement 3 \('B'\) is at t = nan"):
        pc.Experiment.from_measurements([0.0, 1.0, 2.0, np.nan, 4.0], ["A", "A", "B", "B", "A"],
                                        np.ones(5), ["A", "B"], name="lab")


def test_a_failed_log_scale_fit_s_summary_claims_no_intervals():
    """A failed fit has no intervals; its summary said "(the intervals above
    are these, transformed)" below rows without any."""
    x, p = ca.SX.sym("N"), ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=p[0] * x * (1 - x / p[1]), y=x, p_names=["r", "K"])
    t = np.arange(0, 30.0)
    y = pc.simulate(model, [10.0], [0.5, 1000.0], t) * 1.01
    table = [pc.Parameter("r", 0.3, (1e-3, 10), scale="log10"),
             pc.Parameter("K", 500.0, (1.0, 1e5), scale="log10")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = pc.estimate(model, [pc.Experiment(t, y, x0=y[0])], table, max_iter=1)
    assert not res.success and res.p_ci is None, res.message
    summary = res.summary()
    assert "estimated on their log scales" in summary
    assert "the intervals above" not in summary


def test_the_models_parameters_for_a_new_run_come_from_the_result():
    """A process engineer's CSTR with a feed concentration per run and a
    thermocouple bias per run: res.p had 6 entries for the model's 5, and
    pc.simulate(model, x0, res.p, ...) was refused with no way named."""
    x, k, c, b = (ca.SX.sym(n) for n in ("x", "k", "c", "b"))
    model = pc.Model(x=x, p=ca.vertcat(k, c, b), rhs=-k * (x - c), y=x + b,
                     x_names=["x"], p_names=["k", "c", "b"], y_names=["y"])
    t = np.linspace(0.0, 5.0, 41)
    rng = np.random.default_rng(7)
    exps = []
    for name, cv, bv in (("day1", 1.0, 0.2), ("day2", 2.0, -0.1)):
        X = pc.simulate(model, [0.0], [0.8, cv, bv], t)
        y = X + bv + 0.01 * rng.standard_normal(X.shape)
        exps.append(pc.Experiment(t, y, x0=[0.0], name=name, parameters={"c": cv}))
    res = pc.estimate(model, exps, p0={"k": 0.5, "b": 0.0}, per_experiment="b",
                      estimate_x0=False)
    assert res.success and len(res.p) == 3, (res.p_names, res.message)  # k, b[day1], b[day2]
    at = dict(zip(res.p_names, res.p))
    new = res.model_parameters(model, {"c": 1.5, "b": 0.0})
    assert np.allclose(new, [at["k"], 1.5, 0.0])
    own = res.model_parameters(model, {"c": 1.0}, experiment="day1")
    assert np.allclose(own, [at["k"], 1.0, at["b[day1]"]])
    # the fitted run again, by simulation, is its fit
    y = pc.simulate(model, [0.0], own, t)[:, 0] + own[2]
    assert np.allclose(y, res.predict(0)[:, 0], atol=1e-5)
    with pytest.raises(ValueError, match=r"no value for the model parameter\(s\) c, b: give "
                                         r"them in constants=.*experiment= one of \['day1', "
                                         r"'day2'\] for its own b"):
        res.model_parameters(model)
    with pytest.raises(ValueError, match=r"constants: \['C'\] are not parameters"):
        res.model_parameters(model, {"C": 1.0})
    # a constant missing beside experiment= given: no word of experiment=
    with pytest.raises(ValueError, match=r"parameter\(s\) c: give them in constants=\{\.\.\.\} "
                                         r"\(a number, or the name of an entry of "
                                         r"res.p_names\)$"):
        res.model_parameters(model, experiment="day1")


def test_a_fits_own_entries_given_back_as_p0_say_how_to_restart():
    x, k, b = (ca.SX.sym(n) for n in ("x", "k", "b"))
    model = pc.Model(x=x, p=ca.vertcat(k, b), rhs=-k * x, y=x + b, p_names=["k", "b"])
    t = np.linspace(0.0, 5.0, 21)
    exps = [pc.Experiment(t, (np.exp(-0.8 * t) + 0.1 * i)[:, None], x0=[1.0], name=f"r{i}")
            for i in range(2)]
    with pytest.raises(ValueError, match=r"`p0` names b\[r0\], b\[r1\]: a fit's own entries "
                                         r"\(per_experiment\).*p0=res.p"):
        pc.estimate(model, exps, p0={"k": 0.5, "b[r0]": 0.0, "b[r1]": 0.1},
                    per_experiment="b", estimate_x0=False)


def test_a_log_scale_for_a_negative_parameter_says_how_to_scale_each():
    """A neuron's reversal potential EL = -54.4 under parameter_scale="log10"
    was told "`start` -54.4 is outside its bounds [0, inf]", bounds the user
    never gave."""
    x, p = ca.SX.sym("x"), ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=-p[0] * (x - p[1]), p_names=["g", "EL"])
    t = np.linspace(0, 1, 10)
    with pytest.raises(ValueError, match=r"EL start\(s\) at a value that is not positive.*"
                                         r"parameter_scale=\['log10', 'lin'\]"):
        pc.estimate(model, [pc.Experiment(t, np.exp(-t))], [1.0, -54.4],
                    parameter_scale="log10")


def test_an_experiment_constant_outside_its_bounds_is_said():
    """A model file bounding a temperature T to [250, 400] K and conditions
    giving T = 20 (degC): taken without a note (a process chemist's trial)."""
    x, k, T = ca.SX.sym("x"), ca.SX.sym("k"), ca.SX.sym("T")
    model = pc.Model(x=x, p=ca.vertcat(k, T), rhs=-k * T / 300.0 * x, y=x,
                     p_names=["k", "T"])
    t = np.linspace(0.0, 4.0, 9)
    exps = [pc.Experiment(t, np.exp(-0.5 * t * c / 300.0), x0=[1.0], name=f"r{c:g}",
                          parameters={"T": c}) for c in (293.15, 20.0)]
    with pytest.warns(UserWarning, match=r"experiment\(s\) 'r20' sets T = 20: outside the "
                                         r"bounds given for T \(\[250, 400\]; p_bounds\)"):
        pc.estimate(model, exps, [0.3, 300.0], p_bounds=([0.0, 250.0], [10.0, 400.0]),
                    estimate_x0=False)


def test_an_experiment_s_own_parameter_far_from_the_others_is_named():
    """A subject's data in ng/mL beside mg/L, its volume its own: fitted as
    0.06 L beside 40-45 L with success and no word.  One 1000 times the others'
    median is named; values within a factor of a few are not."""
    x = ca.SX.sym("x")
    p = ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=-p[0] / p[1] * x, y=x / p[1], p_names=["CL", "V"],
                     x0=[100.0])
    t = np.linspace(0.5, 12.0, 12)
    exps = []
    for name, V, factor in (("s1", 40.0, 1.0), ("s2", 45.0, 1000.0), ("s3", 50.0, 1.0)):
        y = factor * 100.0 / V * np.exp(-5.0 / V * t)
        noisy = y * (1 + 0.02 * np.random.default_rng(len(exps)).standard_normal(t.size))
        exps.append(pc.Experiment(t, noisy[:, None], name=name, t0=0.0))
    res = pc.estimate(model, exps, [4.0, 30.0], per_experiment="V", estimate_x0=False)
    assert res.success, res.message
    named = [w for w in res.warnings if "of the other experiments' V" in w]
    assert len(named) == 1 and named[0].startswith("V[s2] = ") and "another unit" in named[0]
    exps[1] = exps[1].replaced(y=exps[1].y / 1000.0 * 3.0)
    res = pc.estimate(model, exps, [4.0, 30.0], per_experiment="V", estimate_x0=False)
    assert not any("of the other experiments' V" in w for w in res.warnings)
    # beyond any unit's factor (a site's K run off to 1.7e274, "4.95e+271
    # times the other experiments' K ... another unit"): the valley's to name
    from types import SimpleNamespace

    from picard_casadi.estimation.experiment_spread import note_spread_between_experiments

    ran_off = SimpleNamespace(success=True, p_names=["r", "K[A]", "K[B]"],
                              p=np.array([1.2, 1.7e274, 351.2]), warnings=[])
    assert note_spread_between_experiments(ran_off, []).warnings == []
    ran_off.p[1] = 351.2e6  # mg beside kg
    assert len(note_spread_between_experiments(ran_off, []).warnings) == 1
    # values that span decades (initial viral loads per patient): no one is odd
    loads = SimpleNamespace(success=True, p_names=[f"V0[pt{i}]" for i in range(6)],
                            p=np.array([0.5, 0.00864, 2.0, 0.0088, 0.3, 1.2]), warnings=[])
    assert note_spread_between_experiments(loads, []).warnings == []
    loads.p[[0, 2, 3, 4, 5]] = [0.5, 0.6, 0.45, 0.8, 0.55]  # like values, one apart
    assert len(note_spread_between_experiments(loads, []).warnings) == 1
    # a factor near a unit's is named as it (a bias in degrees beside radians)
    bias = SimpleNamespace(success=True, p_names=["b[m1]", "b[m2]"], p=np.array([0.02, 1.13]),
                           warnings=[])
    note, = note_spread_between_experiments(bias, []).warnings
    assert "(degrees and radians?)" in note


def test_a_table_entry_every_experiment_sets_is_said_to_be_unused():
    """kcat and E0 both in the table, E0 also set in every well: E0's entry
    was dropped with no word, and kcat came out tight."""
    x = ca.SX.sym("x")
    p = ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=-p[0] * p[1] * x, p_names=["kcat", "E0"], x0=[1.0])
    t = np.linspace(0.0, 3.0, 12)
    exps = [pc.Experiment(t, np.exp(-0.5 * t)[:, None], name=f"w{k}", parameters={"E0": 0.01})
            for k in range(2)]
    table = [pc.Parameter("kcat", 10.0, (0.0, 1e3)), pc.Parameter("E0", 0.02, (0.0, 1.0))]
    with pytest.warns(UserWarning, match=r"the parameter table estimates E0, but every "
                                         r"experiment sets it to a number"):
        res = pc.estimate(model, exps, table, estimate_x0=False)
    assert res.success and abs(res.p[0] - 50.0) < 1e-3


def test_a_constant_far_beyond_every_other_experiment_s_is_named():
    """A subject's dose in µg among doses in mg (200000 beside 50 to 200):
    V1 1000 times the truth, success, no word.  Now the constant is named;
    a design that spans decades in steps is not."""
    from picard_casadi.estimation.experiment_spread import constants_apart_note

    model = _chain(a0_from_p=True)
    doses = (5.0, 10.0, 20.0, 20000.0)
    exps = []
    for i, A0 in enumerate(doses):
        X = pc.simulate(model, None, [0.5, 0.2, min(A0, 20.0), 0.0], T, t0=0.0)
        exps.append(pc.Experiment(T, X + [0.0, 0.0], name=f"S{i}", t0=0.0,
                                  parameters={"A0": A0}))
    with pytest.warns(UserWarning, match=r"an experiment constant lies a factor of 100 or more "
                                         r"beyond every other experiment's: A0 = 2e\+04 in 'S3' "
                                         r"\(the others 5 to 20\); if that is a unit"):
        res = pc.estimate(model, exps, [0.3, 0.3, 10.0, 0.0], estimate_x0=False)
    assert any(w.startswith("an experiment constant lies") for w in res.warnings)
    steps = [e.replaced(parameters={"A0": v}) for e, v in zip(exps, (0.01, 0.1, 1.0, 10.0))]
    assert constants_apart_note(steps) == ""
    assert constants_apart_note(exps[:3]) == ""
    # a placebo's dose of 0 beside them is no scale
    placebo = exps + [exps[0].replaced(name="P", parameters={"A0": 0.0})]
    assert "A0 = 2e+04 in 'S3'" in constants_apart_note(placebo)


def test_multistart_on_a_log_scale_samples_an_unbounded_side_as_the_linear_scale_does():
    """A side without a bound is sampled from p0 / 4 to 4 p0 (docs/cli.md);
    on a log10 scale it was log10(p0) / 4 .. 4 log10(p0): an ecologist's K
    from 6 to 5e12 for a start of 1500, rates from 3.5e-7 to 540 times p0."""
    exps = [e.replaced(x0=[10.0, 0.0]) for e in _data(biases=(0.5,))[:1]]
    p0 = [0.3, 2.0, 10.0, 0.0]
    res = pc.estimate(_chain(), exps, p0, p_bounds=([0, 0, 10, -5], [np.inf, np.inf, 10, 5]),
                      parameter_scale=["log10", "log", "lin", "lin"], estimate_x0=False,
                      multistart=6, seed=1, uncertainty=False)
    starts = np.array([s["p0"] for s in res.starts])
    ratio = starts[:, :2] / np.array(p0[:2])
    assert np.all(ratio >= 0.25 - 1e-9) and np.all(ratio <= 4 + 1e-9), ratio
    assert ratio.max() > 2 and ratio.min() < 0.5  # the range is used
