"""Stiff models: Radau collocation, and ``scheme="auto"`` moving to it where the mesh is stiff."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.transcription.discretisation import Discretisation
from picard_casadi.transcription.mesh import (data_time_scale, default_T, polish_boundaries,
                                              search_time_scale)
from picard_casadi.transcription.stiffness import STIFF_STEP, stiffness


def fast_binding() -> tuple[pc.Model, pc.Experiment]:
    """A -> B at k1, B <-> D at 1e4 per unit time (equilibrium D = 3 B), B
    degraded at k2; B starts off its equilibrium, so the fast mode (rate
    4e4) is excited at t = 0; A and B measured."""
    x, p = ca.SX.sym("x", 3), ca.SX.sym("p", 2)
    A, B, D = x[0], x[1], x[2]
    bind = 1e4 * (3 * B - D)
    rhs = ca.vertcat(-p[0] * A, p[0] * A - bind - p[1] * B, bind)
    model = pc.Model(x=x, p=p, rhs=rhs, y=ca.vertcat(A, B), p_names=["k1", "k2"],
                     x_names=["A", "B", "D"])
    exp = pc.simulate_experiment(model, x0=[1.0, 0.4, 0.0], p=[0.5, 0.2],
                                 t=np.linspace(0, 10, 41), noise_std=0.005, seed=1)
    return model, exp


def test_stiffness_is_the_largest_decay_rate_times_the_interval():
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 1)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(-p[0] * x[0], -2.0 * x[1] + x[0]))
    exp = pc.Experiment(t=np.linspace(0, 2, 5), y=np.ones((5, 2)), x0=[1.0, 1.0])
    disc = Discretisation(model, [exp], 0.5, 9, "chebyshev")
    Fx = np.zeros((disc.n_intervals, disc.K, 2, 2))
    Fx[..., 0, 0], Fx[..., 1, 1], Fx[..., 1, 0] = -700.0, -2.0, 1.0
    Fx[2, 3, 0, 0] = -900.0  # the stiffest node
    found = stiffness(disc, Fx)
    assert found.step == pytest.approx(0.5 * 900.0)
    assert found.interval == 2 and found.time == pytest.approx(disc.node_times[2, 3])
    assert found.stiff and STIFF_STEP < found.step
    Fx[..., 0, 0] = 700.0  # growth is not stiffness
    assert stiffness(disc, Fx).step == pytest.approx(0.5 * 2.0)


def test_the_default_moves_to_radau_where_the_start_is_stiff():
    model, exp = fast_binding()
    res = pc.estimate(model, [exp], p0=[1.0, 1.0], estimate_x0=False)
    assert res.success and res.settings["scheme"] == "radau" and res.settings["n"] == 1
    assert any("stiff on the mesh at the start" in w for w in res.warnings)
    # the truth (0.5, 0.2) within four standard errors
    assert np.all(np.abs(res.p - [0.5, 0.2]) < 4 * res.p_std)


def test_a_stiff_start_is_searched_on_the_data_time_scale_and_answered_on_the_first_mesh():
    """T unset and stiff at the start on its floor (10 / 64; the data's time
    scale is 10 / 8): the search runs on 8 intervals, its solution continues
    on the first mesh, and the answer is the one on that mesh from p0."""
    model, exp = fast_binding()
    res = pc.estimate(model, [exp], p0=[1.0, 1.0], estimate_x0=False)
    T_first = default_T(model, [exp], np.array([1.0, 1.0]))
    assert T_first == pytest.approx(10 / 64)
    assert res.success and res.settings["T"] == pytest.approx(T_first)
    assert res.settings["initial_intervals"] == 8 and res.settings["intervals"] >= 64
    assert any("searched on the data's time scale (8 intervals)" in w for w in res.warnings)
    given = pc.estimate(model, [exp], p0=[1.0, 1.0], estimate_x0=False, T=T_first)
    assert not any("searched on the data's time scale" in w for w in given.warnings)
    assert given.settings["initial_intervals"] == 64
    assert np.all(np.abs(res.p - given.p) < 1e-2 * given.p_std)
    assert res.nllh == pytest.approx(given.nllh, abs=1e-6)


def test_a_search_stopped_by_its_limit_says_where_it_stopped():
    model, exp = fast_binding()
    res = pc.estimate(model, [exp], p0=[1.0, 1.0], estimate_x0=False, max_iter=1,
                      uncertainty=False)
    assert not res.success and res.status == "max_iter"
    assert res.settings["T"] == pytest.approx(10 / 8) and res.settings["intervals"] == 8
    assert any("searched on the data's time scale (8 intervals, T = 1.25) and stopped there "
               "(max_iter)" in w for w in res.warnings + [res.message])


def test_the_search_mesh_is_only_taken_where_it_is_coarser():
    model, exp = fast_binding()
    t_data = data_time_scale([exp])
    assert search_time_scale([exp], t_data / 8) == pytest.approx(t_data)
    assert search_time_scale([exp], t_data) is None


def test_the_polished_mesh_holds_the_first_mesh_and_the_search_mesh_boundaries():
    model, exp = fast_binding()
    coarse = Discretisation(model, [exp], 1.25, 9, "radau",
                            [np.r_[0.0, 0.3, np.arange(1.25, 10.01, 1.25)]])
    (b,) = polish_boundaries(coarse, 10 / 64)
    assert b[0] == 0.0 and b[-1] == 10.0 and np.all(np.diff(b) > 0)
    assert np.all(np.isin(np.round(np.arange(65) * 10 / 64, 12), np.round(b, 12)))
    assert np.any(np.isclose(b, 0.3)) and b.size == 66


def test_a_scheme_given_is_kept():
    model, exp = fast_binding()
    res = pc.estimate(model, [exp], p0=[0.5, 0.2], estimate_x0=False, scheme="chebyshev",
                      refine=False, uncertainty=False, max_iter=5)
    assert res.settings["scheme"] == "chebyshev" and res.settings["n"] == 2
    assert not any("stiff on the mesh" in w for w in res.warnings)


def test_radau_by_hand_takes_the_picard_order_one():
    model, exp = fast_binding()
    res = pc.estimate(model, [exp], p0=[1.0, 1.0], estimate_x0=False, scheme="radau")
    assert res.success and res.settings["n"] == 1
    assert np.all(np.abs(res.p - [0.5, 0.2]) < 4 * res.p_std)


def test_the_default_moves_to_radau_where_the_solution_is_stiff():
    """x0 follows cos(t) at a rate k the data see only as "fast" (truth 1e6,
    bounded by 1e5): from k = 10 the Chebyshev solution ends at a rate that
    is stiff on its mesh, and the fit continues from it on Radau's nodes."""
    x, p, t = ca.SX.sym("x", 2), ca.SX.sym("p", 2), ca.SX.sym("t")
    model = pc.Model(t=t, x=x, p=p, rhs=ca.vertcat(-p[0] * (x[0] - ca.cos(t)),
                                                   -p[1] * x[1] + x[0]), p_names=["k", "a"])
    exp = pc.simulate_experiment(model, x0=[1.0, 1.0], p=[1e6, 0.5], t=np.linspace(0, 10, 101),
                                 noise_std=0.01, seed=0)
    res = pc.estimate(model, [exp], p0=[10.0, 0.3], p_bounds=([1.0, 0.0], [1e5, 10.0]))
    assert res.success and res.settings["scheme"] == "radau"
    assert any("stiff on the mesh at picard-gn's solution" in w for w in res.warnings)
    assert abs(res.p[1] - 0.5) < 4 * res.p_std[1]


def long_robertson() -> tuple[pc.Model, pc.Experiment, np.ndarray]:
    """Robertson's kinetics (log10 rates) to t = 1e6, samples log-spaced from
    1e-5 (and t = 0), noise 1 % of each value; the truth."""
    x, q = ca.SX.sym("x", 3), ca.SX.sym("q", 3)
    k = 10 ** q
    rhs = ca.vertcat(-k[0] * x[0] + k[2] * x[1] * x[2],
                     k[0] * x[0] - k[1] * x[1] ** 2 - k[2] * x[1] * x[2], k[1] * x[1] ** 2)
    model = pc.Model(x=x, p=q, rhs=rhs, x_names=["A", "B", "C"],
                     p_names=["log10_k1", "log10_k2", "log10_k3"])
    truth = np.log10([0.04, 3e7, 1e4])
    t = np.concatenate([[0.0], np.logspace(-5, 6, 40)])
    clean = pc.simulate(model, [1.0, 0.0, 0.0], truth, t, t0=0.0)
    y = clean * (1.0 + 0.01 * np.random.default_rng(0).standard_normal(clean.shape))
    return model, pc.Experiment(t, y, x0=[1.0, 0.0, 0.0], t0=0.0), truth


def test_samples_decades_shorter_than_the_intervals_sit_at_their_own_times():
    """The sample at t = 0 was placed at the next one's time (1e-5) where
    that was within 1e-9 of the interval length T of it."""
    model, exp, _ = long_robertson()
    disc = Discretisation(model, [exp], 15625.0, 9, "radau")
    at = disc.t0[:, None] + disc.sample_tau * disc.h[:, None]
    used = disc.mask[:, 0, :] > 0
    assert used.sum() == exp.t.size
    np.testing.assert_allclose(np.sort(at[used]), exp.t, rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(np.sort(disc.sample_times[used]), exp.t, rtol=0, atol=0)


def test_a_start_whose_fixed_points_do_not_settle_gets_a_finer_first_mesh():
    """From log10 k = 0 the fixed points of 12 long intervals (a transient of
    rate 1 from the data's states) did not settle, so no step of picard-gn
    could be evaluated and the default path ended with shooting, 0.13
    standard errors off (its objective had the t = 0 sample at t = 1e-5)."""
    model, exp, truth = long_robertson()
    res = pc.estimate(model, [exp], [0.0, 0.0, 0.0], estimate_x0=False)
    assert res.success and res.method == "picard-gn"
    assert any("first mesh was bisected" in w for w in res.warnings)
    assert not any("did not settle on" in w for w in res.warnings)
    # at the optimum of the ODE's likelihood (CVODES, each output's noise
    # profiled): its gradient there, in standard errors, is round-off (at the
    # old default path's answer it was 0.05 to 0.17)

    def nllh(p: np.ndarray) -> float:
        ssr = np.sum((exp.y - pc.simulate(model, exp.x0, p, exp.t, t0=0.0, rtol=1e-12,
                                          atol=1e-18)) ** 2, axis=0)
        return float(np.sum(0.5 * exp.t.size * (np.log(2 * np.pi * ssr / exp.t.size) + 1)))

    assert res.nllh == pytest.approx(nllh(res.p), abs=1e-6)
    step = 1e-5
    grad = [(nllh(res.p + step * e) - nllh(res.p - step * e)) / (2 * step) for e in np.eye(3)]
    assert np.all(np.abs(np.array(grad) * res.p_std) < 0.01)


def test_a_search_that_converges_on_a_plateau_stops_on_the_search_mesh():
    """The fast binding with its rates as log10 k from -40: nothing but the
    binding moves, so no parameter moves the fit.  The search (8 intervals)
    converges there and the run fails as a plateau on that mesh, rather than
    continuing on the first mesh (64 intervals) and the second runs."""
    model, exp = fast_binding()
    q = ca.SX.sym("q", 2)
    logged = pc.Model(x=model.x, p=q, rhs=ca.substitute(model.rhs, model.p, 10 ** q),
                      y=model.y, p_names=["log10_k1", "log10_k2"], x_names=model.x_names)
    res = pc.estimate(logged, [exp], p0=[-40.0, -40.0], estimate_x0=False)
    assert not res.success and res.status == "plateau"
    assert res.settings["intervals"] == 8 and res.settings["parameter_reach"] < 1e-2
    assert any("searched on the data's time scale (8 intervals) and converged where no "
               "parameter moves the fit" in w for w in res.warnings)
    assert res.method == "picard-gn"  # no second run follows a plateau
