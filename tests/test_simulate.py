"""CVODES simulation, input handling and the paper's noise model."""

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc


@pytest.fixture(scope="module")
def forced():
    x = ca.SX.sym("x", 2)
    p = ca.SX.sym("w2")
    u = ca.SX.sym("u")
    return pc.Model(x=x, p=p, u=u, rhs=ca.vertcat(x[1], -p * x[0] + u), name="forced")


def test_matches_closed_form_with_smooth_input(forced):
    t = np.linspace(0, 2, 21)
    X = pc.simulate(forced, [1, 0], [4.0], t, lambda s: [np.cos(3 * s)])
    exact = 1.2 * np.cos(2 * t) - np.cos(3 * t) / 5
    assert np.max(np.abs(X[:, 0] - exact)) < 1e-7


def test_step_input_on_a_breakpoint_is_exact(forced):
    t = np.linspace(0, 2, 21)
    X = pc.simulate(forced, [1, 0], [4.0], t, lambda s: [1.0 if s < 1 else 0.0], breakpoints=[1.0])
    early = t <= 1.0
    assert np.max(np.abs(X[early, 0] - (0.25 + 0.75 * np.cos(2 * t[early])))) < 1e-7


def test_blow_up_is_a_simulation_error():
    x = ca.SX.sym("x")
    q = ca.SX.sym("q")
    m = pc.Model(x=x, p=q, rhs=q * x ** 2, name="blowup")
    with pytest.raises(pc.SimulationError, match="CVODES reported CV_"):
        pc.simulate(m, [1.0], [1.0], np.linspace(0, 2, 5))


def test_leaving_the_domain_is_a_simulation_error():
    x = ca.SX.sym("x")
    q = ca.SX.sym("q")
    m = pc.Model(x=x, p=q, rhs=-q * ca.SX.ones(1), x_domain=([0.0], [np.inf]), x_names=["V"])
    with pytest.raises(pc.SimulationError, match=r"left the model's domain at t = .*V = .* "
                                                 r"is outside \(0, inf\)$"):
        pc.simulate(m, [1.0], [1.0], np.linspace(0, 2, 5))
    # a start on the open box's bound is said so (an SEIR's E(0) = 0 with x >= 0)
    with pytest.raises(pc.SimulationError, match=r"at t = 0: V = 0 is outside \(0, inf\) "
                                                 r"\(its initial value on the bound of the "
                                                 r"open x_domain"):
        pc.simulate(m, [0.0], [0.0], np.linspace(0, 2, 5))


def test_noise_model_is_seeded_and_scales_with_std(forced):
    t = np.linspace(0, 2, 201)
    e1 = pc.simulate_experiment(forced, [1, 0], [4.0], t, lambda s: [0.0], noise_std=0.05, seed=7)
    e2 = pc.simulate_experiment(forced, [1, 0], [4.0], t, lambda s: [0.0], noise_std=0.05, seed=7)
    e3 = pc.simulate_experiment(forced, [1, 0], [4.0], t, lambda s: [0.0], noise_std=0.0, seed=7)
    assert np.array_equal(e1.y, e2.y)
    resid = e1.y - e3.y
    # additive part has std 0.05; multiplicative part adds 0.05 |g|
    assert 0.04 < np.std(resid[:, 1] - 0.0) < 0.15
    assert np.all(np.isfinite(e1.y))


def test_bad_arguments_named(forced):
    with pytest.raises(ValueError, match="`u` was not given"):
        pc.simulate(forced, [1, 0], [4.0], [0, 1])
    with pytest.raises(ValueError, match="`x0`"):
        pc.simulate(forced, [1], [4.0], [0, 1], lambda s: [0.0])
    with pytest.raises(ValueError, match="`t` must be increasing"):
        pc.simulate(forced, [1, 0], [4.0], [0, 1, 0.5], lambda s: [0.0])


def test_several_inputs_each_reach_their_own_state():
    """x_i' = u_i(t): each state integrates its own input (catches input mix-ups)."""
    x = ca.SX.sym("x", 3)
    p = ca.SX.sym("k")
    u = ca.SX.sym("u", 3)
    m = pc.Model(x=x, p=p, u=u, rhs=p * u)
    t = np.linspace(0, 2, 41)

    def inputs(s):
        return [np.cos(3 * s), 2.0 + s, -1.0 if s < 1.0 else 4.0]

    X = pc.simulate(m, [0, 0, 0], [1.0], t, inputs, breakpoints=[1.0])
    exact = np.column_stack([np.sin(3 * t) / 3, 2 * t + t ** 2 / 2,
                             np.where(t < 1.0, -t, -1.0 + 4.0 * (t - 1.0))])
    assert np.max(np.abs(X - exact)) < 1e-7  # CVODES tolerance; a mixed-up input is O(1)


def test_simulate_experiment_takes_input_values_at_the_samples():
    # simulate() took an array of input values; the noise step then called it
    # ("'numpy.ndarray' object is not callable")
    x, p, u = ca.SX.sym("x", 2), ca.SX.sym("p", 2), ca.SX.sym("u")
    m = pc.Model(x=x, p=p, u=u, rhs=ca.vertcat(x[1], -p[0] * x[1] - p[1] * x[0] + u), y=x[0])
    t = np.linspace(0, 10, 41)
    values = np.sin(t)[:, None]

    def held(tt):  # the same zero-order hold as a callable
        return values[np.searchsorted(t, tt, side="right") - 1]

    from_array = pc.simulate_experiment(m, [1, 0], [0.3, 2.0], t, values, seed=0)
    from_callable = pc.simulate_experiment(m, [1, 0], [0.3, 2.0], t, held, seed=0)
    assert np.array_equal(from_array.y, from_callable.y)
    assert np.array_equal(from_array.u, values)
    # the staircase jumps at the samples: they are the experiment's breakpoints, so
    # no interval straddles a jump and the estimate is certified
    assert np.array_equal(from_array.breakpoints, t[1:-1])
    res = pc.estimate(m, [from_array], p0=[0.5, 1.5], uncertainty=False)
    assert res.success, res.message
    assert np.allclose(res.p, [0.3, 2.0], rtol=0.05)
    with pytest.raises(TypeError, match="not an Experiment"):
        pc.simulate_experiment(m, [1, 0], [0.3, 2.0], t, from_array)


def test_segments_are_refined_only_where_the_input_needs_it():
    from picard_casadi.simulate import _fitted_inputs, _segments

    def u_of_t(t):
        t = np.asarray(t, float)
        # smooth, then an undeclared jump at t = 1.234
        return np.stack([np.cos(t), np.where(t >= 1.234, 1.0, 0.0)], axis=1)

    bounds = _segments(0.0, np.linspace(0.0, 4.0, 5), np.zeros(0))
    refined, coef = _fitted_inputs(u_of_t, bounds, 2, 1e-10)
    assert set(bounds) <= set(refined)
    lengths = np.diff(refined)
    # the shortest segments hold the jump; away from it the unit segments stay
    jump = int(np.searchsorted(refined, 1.234)) - 1
    assert lengths[jump] <= 4.0 / 4096 * 2.0 + 1e-12
    assert np.all(lengths[refined[:-1] >= 2.0] == 1.0)
    assert lengths.size < 40
    # on each segment the interpolant reproduces the smooth input to the tolerance
    d = 8
    s = np.linspace(-1.0, 1.0, 7)
    T = np.polynomial.chebyshev.chebvander(s, d)
    a, b = refined[:-1], refined[1:]
    fit = np.einsum("ck,skn->scn", T, coef.T.reshape(a.size, d + 1, 2))
    times = 0.5 * (a + b)[:, None] + 0.5 * (b - a)[:, None] * s[None, :]
    assert np.max(np.abs(fit[..., 0] - np.cos(times))) < 1e-9


def test_an_undeclared_jump_is_smeared_only_on_a_short_segment():
    x = ca.SX.sym("x")
    u = ca.SX.sym("u")
    p = ca.SX.sym("p")
    lag = pc.Model(x=x, p=p, u=u, rhs=-p * x + u, name="lag")
    t = np.linspace(0.0, 5.0, 11)
    X = pc.simulate(lag, [0.0], [1.0], t, lambda s: 1.0 * (s >= 1.234))
    exact = np.where(t >= 1.234, 1.0 - np.exp(-(t - 1.234)), 0.0)
    # 1.0e-3 with segments of a fixed horizon / 200; 8.4e-5 refined
    assert np.max(np.abs(X[:, 0] - exact)) < 2e-4


@pytest.mark.parametrize("interpolation", ["previous", "linear"])
def test_sampled_inputs_are_exact_between_sparse_output_times(forced, interpolation):
    # a staircase held (or interpolated) between its 301 samples, the states
    # asked for at 24 times only (as the initial guess asks): the segments
    # still end at every input sample
    t = np.linspace(0.0, 6.0, 301)
    values = np.repeat(np.random.default_rng(0).standard_normal(31), 10)[:301]
    exp = pc.Experiment(t, np.zeros((301, 1)), u=values, u_interpolation=interpolation)
    sparse = np.arange(0.0, 6.0, 0.25)
    X = pc.simulate(forced, [0.0, 0.0], [4.0], sparse, exp)
    # asked at every sample too, the segments end at the samples in any case
    both = np.union1d(t, sparse)
    dense = pc.simulate(forced, [0.0, 0.0], [4.0], both, exp)[np.searchsorted(both, sparse)]
    # (3.6e-3 held, 3.2e-4 linear with segments of horizon / 200)
    assert np.max(np.abs(X - dense)) < 1e-6


def test_a_single_time_without_t0_is_refused_and_with_t0_is_the_state_there(forced):
    """simulate(..., t=2.0) would start at 2.0 and return x0: refused, naming the
    argument and both fixes; with t0 it is the state at that time."""
    with pytest.raises(ValueError, match=r"`t` = 2.0 is a single time.*np.linspace\(0, 2.0, 101\)"):
        pc.simulate(forced, [1, 0], [4.0], 2.0, lambda s: [0.0])
    X = pc.simulate(forced, [1, 0], [4.0], 2.0, lambda s: [0.0], t0=0.0)
    assert X.shape == (1, 2)
    assert abs(X[0, 0] - np.cos(4.0)) < 1e-7


def test_a_failure_not_located_raises_at_once(monkeypatch):
    # the initial guess discards the message of a failed simulation with p0;
    # locating it segment by segment took 2.4 of a PEtab start's 5.8 s (Boehm)
    import importlib

    sim = importlib.import_module("picard_casadi.simulate")
    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    model = pc.Model(x=x, p=k, rhs=k * x ** 2)
    t = np.linspace(0.0, 2.0, 21)
    with pytest.raises(pc.SimulationError, match=r"failed at t"):
        pc.simulate(model, [1.0], [1.0], t)  # located: the time is named

    def not_called(*args, **kwargs):
        raise AssertionError("the failure was located")

    monkeypatch.setattr(sim, "locate_cvodes_failure", not_called)
    with pytest.raises(pc.SimulationError, match=r"failed: CVODES reported"):
        pc.simulate(model, [1.0], [1.0], t, locate=False)
    with pytest.raises(pc.SimulationError):  # replicated times take the same path
        pc.simulate(model, [1.0], [1.0], np.repeat(t, 2), locate=False)
    # the initial guess asks for no location: it falls back to the states
    # propagated from the data (x[0], unmeasured, blows up at t = 1 with p0)
    from picard_casadi.estimate import build_setup

    asked = []
    monkeypatch.setattr(sim, "simulate", lambda *a, **kw: asked.append(kw.get("locate"))
                        or pc.simulate(*a, **kw))
    z = ca.SX.sym("z", 2)
    model = pc.Model(x=z, p=k, rhs=ca.vertcat(k * z[0] ** 2, -z[1]), y=z[1])
    setup = build_setup(model, [pc.Experiment(t=t, y=np.exp(-t)[:, None], x0=[1.0, 1.0])],
                        np.array([1.0]), T=0.2, n=2, nodes=5, scheme="chebyshev",
                        weights=np.ones(1), p_bounds=(np.array([-10.0]), np.array([10.0])),
                        x_bounds=(np.full(2, -np.inf), np.full(2, np.inf)),
                        estimate_x0=False, codegen=False)
    assert asked == [False] and setup.X0.shape == (10, 2)


def _boehm_model() -> pc.Model:
    """PEtab's Boehm_JProteomeRes2014 (STAT5 dimerisation), as its import writes
    it: eight states, log10 rates ``phi``, a stimulus decaying as exp(-k t)."""
    x, phi, t = ca.SX.sym("x", 8), ca.SX.sym("phi", 6), ca.SX.sym("t")
    k = 10 ** phi
    stim = 1.75e-7 * ca.exp(-k[0] * t) * k[5]
    r_aa, r_ab, r_bb = stim * x[0] ** 2, stim * x[0] * x[1], stim * x[1] ** 2
    exp_a, exp_b = 0.45 * k[1] * x[6], 0.45 * k[2] * x[7]
    imp_a, imp_ab = 1.4 * k[3] * x[2], 1.4 * k[4]
    rhs = ca.vertcat((2 * 0.45 * k[2] * x[5] - 2 * r_aa - r_ab + exp_a) / 1.4,
                     (exp_a - r_ab - 2 * r_bb + 2 * exp_b) / 1.4,
                     (r_ab - imp_a) / 1.4, (r_aa - imp_ab * x[3]) / 1.4,
                     (r_bb - imp_ab * x[4]) / 1.4, (imp_ab * x[3] - 0.45 * k[2] * x[5]) / 0.45,
                     (imp_a - exp_a) / 0.45, (imp_ab * x[4] - exp_b) / 0.45)
    return pc.Model(x=x, p=phi, rhs=rhs, t=t, name="boehm")


def test_a_stiff_model_restarted_at_many_output_times():
    # Boehm from one of PEtab's uniform starts: two states decay at rate 1000
    # from 1e-20; CVODES's Newton steps solved by CasADi's default QR ran
    # into NaN and 100,000 steps (CV_TOO_MUCH_WORK) in the segment after t =
    # 15, whenever output times restarted it there, and the initial guess lost
    # its simulation; with the sparse LU (csparse) it takes a few steps
    model = _boehm_model()
    x0 = [143.8668, 63.7332, 0, 0, 0, 0, 0, 0]
    p = [1.369616873214543, -2.302132862361297, -4.590264760638053, -4.834723644714709,
         3.1327023920027237, 4.127555772777217]
    X = pc.simulate(model, x0, p, np.linspace(0.0, 240.0, 241), rtol=1e-6, atol=1e-8)
    one = pc.simulate(model, x0, p, [0.0, 240.0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(X[-1], one[-1], rtol=1e-4, atol=1e-6)


def test_a_right_hand_side_that_is_0_over_0_at_the_start_is_named():
    """A textbook neuron's rate 0.1 (V + 40) / (1 - exp(-(V + 40) / 10)) at
    V = -40 was told "the solution blows up or leaves the model's domain"."""
    V, k = ca.SX.sym("V"), ca.SX.sym("k")
    model = pc.Model(x=V, p=k, rhs=-k * 0.1 * (V + 40) / (1 - ca.exp(-(V + 40) / 10)),
                     x_names=["V"], p_names=["k"])
    with pytest.raises(pc.SimulationError, match=r"the right-hand side of V is not finite at "
                                                 r"that state itself: 0/0 at a removable "
                                                 r"singularity"):
        pc.simulate(model, [-40.0], [1.0], np.linspace(0, 1, 5))
    # crossing the point on the way is fine
    assert np.all(np.isfinite(pc.simulate(model, [-39.0], [1.0], np.linspace(0, 1, 3))))


def test_initial_states_left_out_take_the_model_s_expressions():
    """``Model(x0=[N - E0, E0])``: a new region simulated with x0=None raised
    "`x0` must be 2 finite numbers, got [nan]" (an epidemiologist's trial)."""
    S, E, N, E0, b = (ca.SX.sym(n) for n in ("S", "E", "N", "E0", "b"))
    model = pc.Model(x=ca.vertcat(S, E), p=ca.vertcat(N, E0, b),
                     rhs=ca.vertcat(-b * S * E / N, b * S * E / N), x0=[N - E0, E0],
                     x_names=["S", "E"], p_names=["N", "E0", "b"])
    t = np.linspace(0.0, 5.0, 6)
    p = [1000.0, 10.0, 0.3]
    expected = pc.simulate(model, [990.0, 10.0], p, t)
    assert pc.simulate(model, None, p, t) == pytest.approx(expected, rel=1e-10)
    assert pc.simulate(model, [np.nan, 10.0], p, t) == pytest.approx(expected, rel=1e-10)
    plain = pc.Model(x=S, p=b, rhs=-b * S, x_names=["S"], p_names=["b"])
    with pytest.raises(ValueError, match=r"the states \['S'\] have no value"):
        pc.simulate(plain, None, [0.3], t)
