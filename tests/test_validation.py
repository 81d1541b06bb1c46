"""Every bad input listed in docs/api.md raises ValueError (or TypeError) naming the field."""

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc


def _vdp():
    x = ca.SX.sym("x", 2)
    p = ca.SX.sym("p", 2)
    rhs = ca.vertcat(p[0] * x[1], -p[0] * x[0] + p[1] * (1 - x[0] ** 2) * x[1])
    return x, p, rhs


def _good_experiment(ny=2, n=11):
    t = np.linspace(0, 1, n)
    return pc.Experiment(t, np.ones((n, ny)), x0=[1.0, 0.0], name="run-1")


# ---------------------------------------------------------------------- Model
def test_model_undeclared_symbol_in_rhs_is_named():
    x, p, rhs = _vdp()
    k = ca.SX.sym("k_spring")
    with pytest.raises(ValueError, match="k_spring"):
        pc.Model(x=x, p=p, rhs=rhs * k)


def test_model_undeclared_symbol_in_output_is_named():
    x, p, rhs = _vdp()
    c = ca.SX.sym("gain")
    with pytest.raises(ValueError, match=r"`y`.*gain"):
        pc.Model(x=x, p=p, rhs=rhs, y=c * x[0])


def test_model_rhs_length_must_match_states():
    x, p, rhs = _vdp()
    with pytest.raises(ValueError, match=r"rhs.*nx = 2"):
        pc.Model(x=x, p=p, rhs=rhs[0])


def test_model_names_length_must_match():
    x, p, rhs = _vdp()
    with pytest.raises(ValueError, match="x_names"):
        pc.Model(x=x, p=p, rhs=rhs, x_names=["a"])


def test_model_symbols_must_be_pure_symbols():
    x, p, rhs = _vdp()
    with pytest.raises(ValueError, match="`p`"):
        pc.Model(x=x, p=2 * p, rhs=rhs)


def test_model_rejects_mx():
    x = ca.MX.sym("x")
    p = ca.MX.sym("p")
    with pytest.raises(TypeError, match="SX"):
        pc.Model(x=x, p=p, rhs=p * x)


def test_model_keeps_attributes_read_only():
    x, p, rhs = _vdp()
    m = pc.Model(x=x, p=p, rhs=rhs, name="vdp")
    assert m.nx == 2 and m.np == 2 and m.nu == 0 and m.ny == 2
    with pytest.raises(AttributeError):
        m.x = x  # type: ignore[misc]
    f = ca.Function("f", [m.x, m.p], [m.rhs])  # users can build their own functions
    assert np.allclose(np.asarray(f([1, 2], [1, 1])).ravel(), [2, -1])


# ---------------------------------------------------------------------- Experiment
def test_experiment_non_increasing_times_named():
    with pytest.raises(ValueError, match=r"'bad'.*`t` must be increasing.*t\[2\] = 0.5 comes "
                                         r"before t\[1\] = 1"):
        pc.Experiment([0, 1, 0.5, 2], np.ones((4, 1)), name="bad")
    with pytest.raises(ValueError, match=r"'one'.*at least 2 distinct sample times"):
        pc.Experiment([1, 1], np.ones((2, 1)), name="one")
    with pytest.raises(ValueError, match=r"`u` differs between the replicates at t = 1"):
        pc.Experiment([0, 1, 1], np.ones((3, 1)), u=[[0.0], [1.0], [2.0]])


def test_experiment_non_finite_times_named():
    with pytest.raises(ValueError, match=r"`t` must be finite"):
        pc.Experiment([0, 1, np.nan, 3], np.ones((4, 1)))


def test_an_unknown_entry_of_x0_says_how_to_state_it():
    # a forgotten state's NaN in Experiment(x0=...): the message named no way out
    with pytest.raises(ValueError, match=r"`x0` must be finite, got \[ 0. nan\] \(a state "
                                         r"whose start is unknown takes a guess here, "
                                         r"estimated unless estimate_x0=\[...\] holds it\)"):
        pc.Experiment([0, 1, 2], np.ones((3, 1)), x0=[0.0, np.nan])


def test_experiment_dates_as_times_are_named_with_the_conversion():
    # a pandas date column became microseconds since 1970 (1.58e15): the fit
    # ran on that clock and ended step_failed with nothing pointing at it
    dates = np.array(["2020-03-08", "2020-03-15", "2020-03-22"], dtype="datetime64[us]")
    with pytest.raises(ValueError, match=r"`t` holds dates \(datetime64\[us\]\), not numbers "
                                         r"in the model's time unit; convert them, for example "
                                         r"the time since the first in the model's unit: "
                                         r"\(t - t\[0\]\) / np.timedelta64\(1, 's'\) for "
                                         r"seconds .*dt.total_seconds\(\)"):
        pc.Experiment(dates, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"`t` holds time spans"):
        pc.Experiment(dates - dates[0], [1.0, 2.0, 3.0])
    days = (dates - dates[0]) / np.timedelta64(1, "D")
    assert pc.Experiment(days, [1.0, 2.0, 3.0]).t.tolist() == [0.0, 7.0, 14.0]
    # as strings or date objects ("must be an array of numbers" before)
    import datetime

    for given in (["2020-03-08", "2020-03-15"], [datetime.date(2020, 3, 8),
                                                 datetime.date(2020, 3, 15)]):
        with pytest.raises(ValueError, match=r"`t` holds dates .* as strings or date objects, "
                                             r"np.asarray\(t, dtype='datetime64'\) makes them"):
            pc.Experiment(given, [1.0, 2.0])


def test_experiment_missing_inputs_named_with_their_times():
    # "`u` must be finite" named neither the column nor the gap (t = 10.0-10.9)
    u = np.zeros((6, 2))
    u[2:4, 1] = np.nan
    with pytest.raises(ValueError, match=r"Experiment 'gap': `u` must be finite; its column\(s\) "
                                         r"\[1\] \(counted from 0\) are not finite at 2 "
                                         r"time\(s\): t = 1, 1.5 \(an input cannot be missing"):
        pc.Experiment(np.arange(6) * 0.5, np.ones((6, 1)), u=u, name="gap")


def test_experiment_y_shape_named():
    with pytest.raises(ValueError, match=r"`y` must have shape \(len\(t\), ny\)"):
        pc.Experiment([0, 1, 2], np.ones((4, 1)), name="e")
    # signals at two rates (a flow at 500 Hz, its pressure at 250 Hz): the way
    with pytest.raises(ValueError, match=r"got \(5, 1\); one row per time of t: signals "
                                         r"sampled at other rates go on the union"):
        pc.Experiment(np.arange(3.0), np.ones((3, 1)), u=np.ones((5, 1)), name="e")


def test_experiment_inf_in_y_named():
    y = np.ones((3, 2))
    y[1, 1] = np.inf
    with pytest.raises(ValueError, match=r"`y` contains inf at row 1, column 1"):
        pc.Experiment([0, 1, 2], y)


def test_experiment_nan_marks_missing_and_is_accepted():
    y = np.ones((3, 2))
    y[1, 1] = np.nan
    e = pc.Experiment([0, 1, 2], y)
    assert np.isnan(e.y[1, 1])


def test_experiment_y_columns_must_match_model_outputs():
    x, p, rhs = _vdp()
    m = pc.Model(x=x, p=p, rhs=rhs)
    e = pc.Experiment(np.linspace(0, 1, 5), np.ones((5, 3)), x0=[1, 0], name="three")
    with pytest.raises(ValueError, match=r"'three'.*`y` has 3 column\(s\).*ny = 2"):
        pc.estimate(m, [e], p0=[1, 1])


def test_a_bound_that_is_not_a_number_is_quoted(vdp_model):
    with pytest.raises(ValueError, match=r"`p_bounds\[0\]` must be 2 numbers, got \['a', 'b'\]"):
        pc.estimate(vdp_model, [_good_experiment()], p0=[1, 1], p_bounds=(["a", "b"], [9, 9]))


class _Table:
    """A table with column labels, as a pandas DataFrame has (numpy reads its values)."""

    def __init__(self, values, columns):
        self.values, self.columns = np.asarray(values, float), list(columns)

    def __array__(self, dtype=None, copy=None):
        return self.values if dtype is None else self.values.astype(dtype)


def test_a_table_s_columns_in_another_order_than_the_outputs_are_refused():
    # Experiment(t, df[["pred", "prey"]]) was fitted column by column as
    # (prey, pred): negative rates, success=True, no warning (a user's trial)
    x, p, rhs = _vdp()
    m = pc.Model(x=x, p=p, rhs=rhs, y_names=["pos", "vel"])
    t = np.linspace(0, 1, 5)
    swapped = pc.Experiment(t, _Table(np.ones((5, 2)), ["vel", "pos"]), x0=[1, 0], name="df")
    with pytest.raises(ValueError, match=r"'df'.*columns \['vel', 'pos'\].*"
                                         r"y=table\[\['pos', 'vel'\]\]"):
        pc.estimate(m, [swapped], p0=[1, 1])
    with pytest.raises(ValueError, match="columns"):  # a copy keeps its labels
        pc.estimate(m, [swapped.with_x0([1.0, 0.1])], p0=[1, 1])
    # in the outputs' order, or a table's default labels: taken as given
    for labels in (["pos", "vel"], ["0", "1"]):
        e = pc.Experiment(t, _Table(np.ones((5, 2)), labels), x0=[1, 0])
        e.check(m)
    # other names: refused (a column 'log10V' was fitted as the output 'V', no word)
    other = pc.Experiment(t, _Table(np.ones((5, 2)), ["pos", "speed"]), x0=[1, 0], name="o")
    with pytest.raises(ValueError, match=r"'o'.*columns \['pos', 'speed'\], which are not "
                                         r"model .*'s outputs \['pos', 'vel'\].*to_numpy"):
        other.check(m)


def test_experiment_input_callable_wrong_length_named():
    t = ca.SX.sym("t")
    x = ca.SX.sym("x")
    p = ca.SX.sym("p")
    u = ca.SX.sym("u", 2)
    m = pc.Model(t=t, x=x, p=p, u=u, rhs=-p * x + u[0] + u[1])
    e = pc.Experiment(np.linspace(0, 1, 5), np.ones((5, 1)), u=lambda s: [1.0], x0=[0.0],
                      name="forced")
    with pytest.raises(ValueError, match=r"'forced'.*`u` must return 2 value"):
        pc.estimate(m, [e], p0=[1.0])


def test_experiment_input_callable_own_error_kept_with_where_it_arose():
    x = ca.SX.sym("x")
    p = ca.SX.sym("p")
    u = ca.SX.sym("u")
    m = pc.Model(x=x, p=p, u=u, rhs=-p * x + u)

    def broken(s):
        return 1.0 / 0.0

    e = pc.Experiment(np.linspace(0, 1, 5), np.ones((5, 1)), u=broken, x0=[0.0], name="run-7")
    with pytest.raises(ZeroDivisionError) as info:
        pc.estimate(m, [e], p0=[1.0])
    if hasattr(info.value, "add_note"):  # Python 3.11 and newer
        assert any("'run-7'" in n and "input function `u` at t =" in n
                   for n in info.value.__notes__)


def test_experiment_missing_input_named():
    x = ca.SX.sym("x")
    p = ca.SX.sym("p")
    u = ca.SX.sym("u")
    m = pc.Model(x=x, p=p, u=u, rhs=-p * x + u)
    e = pc.Experiment(np.linspace(0, 1, 5), np.ones((5, 1)), x0=[0.0], name="free")
    with pytest.raises(ValueError, match=r"'free'.*`u` was not given"):
        pc.estimate(m, [e], p0=[1.0])


def test_experiment_x0_length_named():
    x, p, rhs = _vdp()
    m = pc.Model(x=x, p=p, rhs=rhs)
    e = pc.Experiment(np.linspace(0, 1, 5), np.ones((5, 2)), x0=[1.0, 2.0, 3.0], name="x0bad")
    with pytest.raises(ValueError, match=r"'x0bad'.*`x0` has 3 entries"):
        pc.estimate(m, [e], p0=[1, 1])


# ---------------------------------------------------------------------- estimate
@pytest.fixture
def vdp_model():
    x, p, rhs = _vdp()
    return pc.Model(x=x, p=p, rhs=rhs)


def test_estimate_p0_length_named(vdp_model):
    with pytest.raises(ValueError, match=r"`p0` must have 2 entries"):
        pc.estimate(vdp_model, [_good_experiment()], p0=[1, 1, 1])
    # None is no start (it was read as NaN: "`p0` must be finite, got [nan nan]")
    with pytest.raises(ValueError, match=r"`p0` is missing: give 2 number"):
        pc.estimate(vdp_model, [_good_experiment()], p0=None)



@pytest.mark.parametrize("kw, field", [
    (dict(p0=[1.0]), "p0"),                                   # a one-entry list is no shorthand
    (dict(p0=[1.0, 1.0], p_bounds=([0.0], [5.0])), r"p_bounds\[0\]"),
    (dict(p0=[1.0, 1.0], x0_bounds=([0.0, 0.0], [5.0])), r"x0_bounds\[1\]"),
])
def test_estimate_one_entry_lists_are_not_spread(vdp_model, kw, field):
    with pytest.raises(ValueError, match=field + r"` must have 2 entries, got 1 \(a single number"):
        pc.estimate(vdp_model, [_good_experiment()], **kw)


@pytest.mark.parametrize("field", ["p0", "p_bounds", "weights"])
def test_estimate_nested_lists_are_not_flattened(vdp_model, field):
    kw = {"p0": [[1.0, 1.0]]} if field == "p0" else {"p0": [1.0, 1.0]}
    if field == "p_bounds":
        kw["p_bounds"] = ([[0.0, 0.0]], [5.0, 5.0])
    if field == "weights":
        kw["weights"] = [[1.0, 1.0]]
    with pytest.raises(ValueError, match=field + r".*` must be a flat list or 1-D array of 2 "
                                               r"numbers, got an array of shape \(1, 2\)"):
        pc.estimate(vdp_model, [_good_experiment()], **kw)


def test_estimate_single_numbers_apply_to_every_entry(vdp_model):
    from picard_casadi.estimation.setup import as_vector

    assert as_vector(0.5, 3, "p0").tolist() == [0.5, 0.5, 0.5]
    assert as_vector(np.float64(2.0), 2, "p0").tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match=r"`p0`\[0\].*outside p_bounds"):
        pc.estimate(vdp_model, [_good_experiment()], p0=3.0, p_bounds=(0, 2))


def test_estimate_given_x0_outside_the_state_box_named(vdp_model):
    # x0 = (1, 0) given; the box asks for x[0] in [2, 3]: refused before any work,
    # as p0 outside p_bounds is (it used to run into "trust region collapsed")
    for estimate_x0 in (True, False):
        with pytest.raises(ValueError, match=r"'run-1'.*state 'x0' \(index 0\) at 1.0, "
                                             r"outside x0_bounds \[2.0, 3.0\]"):
            pc.estimate(vdp_model, [_good_experiment()], p0=[1, 1], estimate_x0=estimate_x0,
                        x0_bounds=([2, -5], [3, 5]))

def test_estimate_p0_outside_bounds_named(vdp_model):
    with pytest.raises(ValueError, match=r"`p0`\[1\].*outside p_bounds"):
        pc.estimate(vdp_model, [_good_experiment()], p0=[1, 5], p_bounds=([0, 0], [2, 2]))


def test_estimate_bounds_reversed_named(vdp_model):
    with pytest.raises(ValueError, match=r"`p_bounds`"):
        pc.estimate(vdp_model, [_good_experiment()], p0=[1, 1], p_bounds=([2, 2], [0, 0]))


def test_estimate_unknown_method_lists_choices(vdp_model):
    with pytest.raises(ValueError, match=r"unknown method 'newton'.*picard-gn"):
        pc.estimate(vdp_model, [_good_experiment()], p0=[1, 1], method="newton")


def test_estimate_unknown_option_lists_valid_ones(vdp_model):
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['max_iters'\].*max_iter"):
        pc.estimate(vdp_model, [_good_experiment()], p0=[1, 1], method="picard", max_iters=3)


@pytest.mark.parametrize("wrong, right", [("weight", "weights"), ("p_bound", "p_bounds"),
                                          ("maxiter", "max_iter")])
def test_estimate_misspelled_keyword_suggests_estimates_and_the_methods_names(
        vdp_model, wrong, right):
    # estimate's own keywords used to be missing from the list of valid names
    with pytest.raises(TypeError, match=rf"\['{wrong}'\] \('{wrong}': did you mean '{right}'\?\)"
                                        r".*own arguments are: .*weights.*also takes: .*max_iter"):
        pc.estimate(vdp_model, [_good_experiment()], p0=[1, 1], **{wrong: 1})


def test_estimate_bad_interval_length_named(vdp_model):
    with pytest.raises(ValueError, match=r"`T` must be a positive"):
        pc.estimate(vdp_model, [_good_experiment()], p0=[1, 1], T=-0.1)


def test_estimate_bad_weights_named(vdp_model):
    with pytest.raises(ValueError, match=r"`weights`"):
        pc.estimate(vdp_model, [_good_experiment()], p0=[1, 1], weights="equal")


def test_estimate_bad_option_value_named(vdp_model):
    with pytest.raises(ValueError, match=r"sigma must be in \(0, 1\]"):
        pc.estimate(vdp_model, [_good_experiment()], p0=[1, 1], method="picard", sigma=2.0)


def test_estimate_known_x0_requires_x0(vdp_model):
    e = pc.Experiment(np.linspace(0, 1, 5), np.ones((5, 2)), name="nox0")
    with pytest.raises(ValueError, match=r"'nox0'.*estimate_x0=False holds the initial value "
                                         r"of x0, x1 at the experiment's `x0`, which it does "
                                         r"not have"):
        pc.estimate(vdp_model, [e], p0=[1, 1], estimate_x0=False)


def test_estimate_fewer_measurements_than_unknowns_named(vdp_model):
    # 2 parameters and 2 initial states from 3 measured values: no data determine
    # them (the fit used to run to max_iter and advise more iterations)
    y = np.array([[1.0, 0.0], [0.5, np.nan]])
    e = pc.Experiment([0.0, 1.0], y, x0=[1.0, 0.0], name="short")
    with pytest.raises(ValueError, match=r"`experiments`: 3 measurement\(s\) for 4 estimated "
                                         r"quantities .*estimate_x0=False"):
        pc.estimate(vdp_model, [e], p0=[1, 1])
    # the same data determine the two parameters once x0 is known ...
    fixed = dict(p0=[1, 1], estimate_x0=False, uncertainty=False, refine=False, max_iter=2)
    assert pc.estimate(vdp_model, [e], **fixed).p.shape == (2,)
    # ... or one parameter held (equal bounds) with x0 estimated: 3 for 3, no error
    held = pc.estimate(vdp_model, [e], p0=[1, 1], p_bounds=([1, 0], [1, 5]),
                       uncertainty=False, refine=False, max_iter=2)
    assert held.p[0] == 1.0


def test_estimate_not_a_model():
    with pytest.raises(TypeError, match="model must be"):
        pc.estimate("vdp", [_good_experiment()], p0=[1, 1])


def test_bounds_in_scipy_minimize_layout_are_not_read_as_fixing_every_parameter():
    # [(0, 5), (0, 5)] for two parameters read as (lower, upper) = ([0, 5], [0, 5]):
    # both held fixed, and a "successful" fit that never moved them (a user's report)
    import casadi as ca

    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(x[1], -p[0] * x[0] - p[1] * x[1]), y=x[0])
    exp = pc.simulate_experiment(model, [1, 0], [2.0, 0.3], np.linspace(0, 10, 51))
    with pytest.raises(ValueError, match=r"fix every entry.*p_bounds`=\(\[0, 0\], \[5, 5\]\)"):
        pc.estimate(model, [exp], [0, 5], p_bounds=[(0, 5), (0, 5)])
    with pytest.raises(ValueError, match=r"exceeds upper bound 3.0 at index 1.*\[0, 0.1\], \[5, 3\]"):
        pc.estimate(model, [exp], [1, 1], p_bounds=[(0, 5), (0.1, 3)])
    # [(0, 1), (0, 2)]: (lower, upper) = ([0, 1], [0, 2]) fixed the first at 0
    with pytest.raises(ValueError, match=r"fix entry 0.*p_bounds`=\(\[0, 0\], \[1, 2\]\)"):
        pc.estimate(model, [exp], [0, 1.5], p_bounds=[(0, 1), (0, 2)])
    res = pc.estimate(model, [exp], [0, 1.5], p_bounds=([0, 1], [0, 2]), uncertainty=False)
    assert res.p[0] == 0.0
    # two lists that fix both parameters are what they say
    res = pc.estimate(model, [exp], [2.0, 0.3], p_bounds=([2.0, 0.3], [2.0, 0.3]),
                      uncertainty=False)
    assert res.success and np.array_equal(res.p, [2.0, 0.3])
    res = pc.estimate(model, [exp], [1, 2], p_bounds=([1, 2], [1, 2]), uncertainty=False)
    assert np.array_equal(res.p, [1, 2])


def test_predict_before_the_experiment_start_names_t_and_t0():
    # it raised "simulate: `t0` = 0.0 is after the first output time -1.0", naming
    # the internal call's arguments (a user's report)
    import casadi as ca

    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    model = pc.Model(x=x, p=k, rhs=-k * x)
    exp = pc.simulate_experiment(model, [1.0], [0.5], np.linspace(0, 5, 21), noise_std=0.01)
    res = pc.estimate(model, [exp], [0.3], uncertainty=False)
    with pytest.raises(ValueError, match=r"`t`: -1 is before experiment .* starts \(t0 = 0"):
        res.predict(0, t=[-1.0, 2.0])
    assert res.predict(0, t=[0.0, 2.0]).shape == (2, 1)


def test_a_start_guessed_zero_where_the_model_divides_names_the_state_and_the_fix():
    # a fed-batch volume V is not measured: guessed 0, and F / V is not finite;
    # the error named neither the state nor Experiment(x0=...)
    x, p, u = ca.SX.sym("x", 3), ca.SX.sym("p", 3), ca.SX.sym("u")
    growth = p[0] * x[1] / (p[1] + x[1]) * x[0]
    model = pc.Model(x=x, p=p, u=u, y=x[:2], x_names=["X", "S", "V"],
                     rhs=ca.vertcat(growth - u / x[2] * x[0],
                                    -growth / p[2] + u / x[2] * (200.0 - x[1]), u))
    t = np.linspace(0, 24, 25)
    feed = (0.01 * np.exp(0.12 * t))[:, None]
    sim = pc.simulate_experiment(model, [0.5, 10.0, 1.0], [0.4, 0.5, 0.5], t, u=feed,
                                 noise_std=0.0)
    exp = pc.Experiment(t, sim.y, u=feed)
    with pytest.raises(ValueError, match=r"V not measured, so guessed 0.*x0=\[\.\.\.\]"):
        pc.estimate(model, [exp], [0.4, 0.5, 0.5])


def test_a_parameter_started_at_zero_where_the_model_divides_names_it():
    # a quadrotor's q' = (l dT - c q) / Iyy started at Iyy = 0 was told to
    # guess the unmeasured states
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(x[1], (1 - p[1] * x[1]) / p[0]), y=x[0],
                     p_names=["Iyy", "c"])
    t = np.linspace(0, 5, 51)
    exp = pc.simulate_experiment(model, [0.0, 0.0], [1.0, 0.5], t, noise_std=0.01, seed=0)
    with pytest.raises(ValueError, match=r"with Iyy = 0 in p0, and finite with it moved off 0"):
        pc.estimate(model, [exp], [0.0, 0.5])


def test_a_noise_level_per_output_is_refused_with_the_fix():
    # a user passed noise_std=[0.5, 0.1] and got "truth value of an array is ambiguous"
    x = ca.SX.sym("x", 2)
    model = pc.Model(x=x, p=ca.SX.sym("k"), rhs=-x, y=x)
    with pytest.raises(ValueError, match=r"noise_std must be one number.*noise_std=0"):
        pc.simulate_experiment(model, [1.0, 2.0], [1.0], np.linspace(0, 1, 5),
                               noise_std=[0.5, 0.1])
    with pytest.raises(ValueError, match="non-negative number"):
        pc.simulate_experiment(model, [1.0, 2.0], [1.0], np.linspace(0, 1, 5), noise_std=-1)


def test_none_for_single_bounds_means_no_bound():
    # p_bounds=([0, 0], [None, None]) was "the upper bound[0] is NaN; use None or
    # inf", although None was used (a user's report); a NaN is still refused

    x, k = ca.SX.sym("x"), ca.SX.sym("k", 2)
    model = pc.Model(x=x, p=k, rhs=-k[0] * x + k[1], y=x)
    exp = pc.simulate_experiment(model, [0.5], [0.7, 1.4], np.linspace(0, 10, 40),
                                 noise_std=0.01, seed=3)
    res = pc.estimate(model, [exp], [1, 1], p_bounds=([0, None], [None, 5]), uncertainty=False)
    assert res.success and res.settings["p_bounds"] == [[0.0, -np.inf], [np.inf, 5.0]]
    with pytest.raises(ValueError, match=r"the lower bound\[1\] is NaN"):
        pc.estimate(model, [exp], [1, 1], p_bounds=([0, np.nan], None))


def test_an_x0_entry_that_is_a_name_or_a_namesake_symbol_is_explained():
    x, k, a0 = ca.SX.sym("x", 2), ca.SX.sym("k"), ca.SX.sym("A0")
    p = ca.vertcat(k, a0)
    with pytest.raises(ValueError, match=r"`x0\[0\]` \(state 'A'\) is 'A0'.*not its name"):
        pc.Model(x=x, p=p, rhs=-k * x, x0=["A0", 0.0], x_names=["A", "B"])
    with pytest.raises(ValueError, match=r"another symbol of the same name as one in p"):
        pc.Model(x=x, p=p, rhs=-k * x, x0=[ca.SX.sym("A0"), 0.0], x_names=["A", "B"])


def test_a_start_outside_the_model_s_domain_names_the_initial_state():
    """x' = -a x^b from x0 = -1: the message blamed only the parameters (a
    user's report); it now gives the initial state and the domain."""
    x, p = ca.SX.sym("x"), ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=-p[0] * x ** p[1], y=x, x_names=["c"])
    exp = pc.Experiment(t=np.linspace(0, 1, 11), y=-np.ones(11), x0=[-1.0])
    with pytest.raises(pc.StartNotFiniteError,
                       match=r"the right-hand side for c is not finite at the start of "
                             r"experiment 'experiment' \(t = 0\), at its initial state "
                             r"\(c = -1\).*outside the model's domain"):
        pc.estimate(model, [exp], p0=[1.0, 1.5], estimate_x0=False)


def test_a_start_the_parameters_make_infinite_says_so_with_the_user_s_x0():
    """An activation energy in J/mol beside R in kJ/mol/K: exp overflows
    whatever the state.  The message showed x0 = [0 0] (the restated
    problem's deviation from Model(x0=...)) and offered the state's domain
    first."""
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 3)  # k_ref, Ea, A0
    k = p[0] * ca.exp(-p[1] / 8.314e-3 * (1 / 360.0 - 1 / 340.0))
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(-k * x[0], k * x[0]), y=x[1],
                     x_names=["A", "B"], p_names=["kref", "Ea", "A0"], x0=[p[2], 0.0])
    exp = pc.Experiment(t=np.linspace(0, 1, 11), y=np.linspace(0, 0.5, 11))
    with pytest.raises(pc.StartNotFiniteError,
                       match=r"at its initial state \(A from Model\(x0=\.\.\.\), B = 0\), and "
                             r"a simulation fails there too: it is not finite at other states "
                             r"either, so the parameter values make it so .*check p0's units"):
        pc.estimate(model, [exp], p0=[0.1, 50000.0, 1.0])


def test_an_input_that_makes_the_start_not_finite_is_named():
    # a car's log from standstill: the slip angles divide by the speed V = 0
    # at t = 0; the message blamed the guessed x0, and given x0, the parameters
    v, r = ca.SX.sym("v"), ca.SX.sym("r")
    delta, V, c = ca.SX.sym("delta"), ca.SX.sym("V"), ca.SX.sym("c")
    model = pc.Model(x=ca.vertcat(v, r), p=c, u=ca.vertcat(delta, V),
                     rhs=ca.vertcat(c * (delta - v / V) - V * r, -c * r / V), y=r,
                     u_names=["delta", "V"])
    t = np.linspace(0, 5, 51)
    exp = pc.Experiment(t=t, y=np.full(51, 0.1), u=np.column_stack([0.01 * t, 2.0 * t]))
    from picard_casadi.estimation.assembly import unfinite_start

    for given in (exp, exp.with_x0([0.0, 0.1])):  # (what StartNotFiniteError says)
        assert "where its input V = 0, and finite with that input at its later values" in (
            unfinite_start(model, [given], np.array([1.0])))


def test_a_given_start_on_the_domain_edge_is_told_to_move_not_to_be_bounded():
    # a receptor's occupancy starting at 0 by Model(x0=...) under occ**nH: the
    # message said to bound it with x0_bounds, which then refused the given start
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 3)
    Kd, nH, L = p[0], p[1], p[2]
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(L * (1 - x[0]) - Kd * x[0], x[0] ** nH - x[1]),
                     y=x[1], x0=[0.0, 0.0], x_names=["occ", "E"], p_names=["Kd", "nH", "L"])
    t = np.linspace(0, 5, 20)
    exp = pc.Experiment(t=t, y=0.5 * (1 - np.exp(-t)) + 0.01, parameters={"L": 1.0})
    res = pc.estimate(model, exp, {"Kd": 1.0, "nH": 1.5}, method="picard-gn")
    assert not res.success
    assert ("occ starts exactly on the edge of the model's domain (for example 0), a given "
            "initial value" in res.message and "small positive initial value" in res.message)


def test_a_model_oscillating_between_the_samples_at_the_start_is_said_at_once():
    """A Duffing oscillator's times in milliseconds for seconds: at the start
    it oscillated 15 times between samples, and the fit had not returned
    after 15 minutes, with no word; the same data in seconds get no note."""
    import warnings

    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(x[1], -p[0] * x[0] - p[1] * x[1]), y=x[0])
    t = np.linspace(0.0, 2.0, 201)
    y = pc.simulate(model, [1.0, 0.0], [2500.0, 1.0], t)[:, 0]
    with pytest.warns(UserWarning, match=r"at the start the model oscillates 78 times between "
                                         r"consecutive samples.*\(ms for s\?\)"):
        pc.estimate(model, pc.Experiment(t=t * 1000.0, y=y, x0=[1.0, 0.0]), [2400.0, 1.2],
                    estimate_x0=False, method="picard-gn", max_iter=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = pc.estimate(model, pc.Experiment(t=t, y=y, x0=[1.0, 0.0]), [2400.0, 1.2],
                          estimate_x0=False)
    assert res.success and not [w for w in caught if "oscillates" in str(w.message)]


def test_parameters_the_model_does_not_use_are_named_before_the_fit():
    """A lag and an initial amount declared, Model(x0=...) forgotten: told
    after the fit only that they "do not move the fit", with advice on units."""
    x, p = ca.SX.sym("x"), ca.SX.sym("p", 3)
    model = pc.Model(x=x, p=p, rhs=-p[0] * x, y=x, p_names=["k", "q0", "N0"])
    assert model.unused_parameters == ["q0", "N0"]
    t = np.linspace(0.0, 3.0, 12)
    exp = pc.Experiment(t, np.exp(-0.5 * t), x0=[1.0])
    with pytest.warns(UserWarning, match=r"parameter\(s\) N0, q0 appear in none of the model's "
                                         r"rhs, y, initial states"):
        pc.estimate(model, [exp], [0.3, 0.1, 1.0], estimate_x0=False)
    used = pc.Model(x=x, p=p, rhs=-p[0] * x, y=x, x0=[p[2]], p_names=["k", "q0", "N0"],
                    output_delays={"x0": p[1]})
    assert used.unused_parameters == []
