"""``method="single-shooting"``: CVODES single shooting by a bounded Levenberg-Marquardt loop."""

from __future__ import annotations

import warnings

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.transcription.discretisation import Discretisation
from picard_casadi.transcription.interval_integration import chained_interval_states


def _decay_with_input(hold: str = "previous") -> tuple[pc.Model, list[pc.Experiment]]:
    """x' = -k x + b u with a staircase input (``hold="previous"``: a step at
    t = 2, an interval boundary) or a sampled one interpolated linearly (a
    kink at every sample, inside the intervals: integrated in segments), two
    experiments of their own x0."""
    x, p, u = ca.SX.sym("x"), ca.SX.sym("p", 2), ca.SX.sym("u")
    model = pc.Model(x=x, p=p, u=u, rhs=-p[0] * x + p[1] * u, y=x, p_names=["k", "b"])
    t = np.linspace(0.0, 4.0, 17)
    steps = (np.where(t < 2.0, 1.0, 0.0) if hold == "previous"
             else np.random.default_rng(3).uniform(0.0, 1.0, t.size))
    exps = [pc.simulate_experiment(model, x0=[x0], p=[0.7, 1.5], t=t, u=steps, noise_std=0.01,
                                   seed=s, name=f"e{s}", u_interpolation=hold)
            for s, x0 in ((0, 0.5), (1, 2.0))]
    return model, exps


@pytest.mark.parametrize("hold", ["previous", "linear"])
def test_the_chained_intervals_are_the_simulation(hold):
    model, exps = _decay_with_input(hold)
    disc = Discretisation(model, exps, 0.5, 9, "chebyshev")
    chain = chained_interval_states(disc, 1e-10, 1e-10, 20000)
    Xs, xend, X = (np.asarray(v) for v in chain(np.array([[0.5, 2.0]]), [0.7, 1.5]))
    for e, (exp, x0) in enumerate(zip(exps, (0.5, 2.0))):
        sl = disc.intervals_of[e]
        # each interval starts where the last ended
        assert np.allclose(X[0, sl.start + 1:sl.stop], xend[0, sl.start:sl.stop - 1], rtol=0,
                           atol=1e-14)
        assert X[0, sl.start] == x0
        starts = disc.t0[sl]
        sim = pc.simulate(model, [x0], [0.7, 1.5], np.append(starts, disc.t0[sl.stop - 1]
                                                               + disc.h[sl.stop - 1]), exp)
        assert np.allclose(X[0, sl], sim[:-1, 0], rtol=1e-7, atol=1e-9)
        assert np.allclose(xend[0, sl.stop - 1], sim[-1, 0], rtol=1e-7, atol=1e-9)


def test_it_reaches_the_optimum_picard_gn_reaches():
    model, exps = _decay_with_input()
    kw = dict(p_bounds=([0.01, 0.01], [10.0, 10.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pc.FitWarning)
        ref = pc.estimate(model, exps, [0.2, 0.5], "picard-gn", **kw)
        res = pc.estimate(model, exps, [0.2, 0.5], "single-shooting", **kw)
    assert ref.success and res.success and res.method == "single-shooting"
    assert res.nllh == pytest.approx(ref.nllh, abs=1e-6)
    assert np.all(np.abs(res.p - ref.p) < 1e-3 * ref.p_std)
    assert np.all(np.abs(np.subtract(res.x0, ref.x0)) < 1e-3 * np.asarray(ref.x0_std))
    # the standard errors from its own model's sensitivities
    assert np.allclose(res.p_std, ref.p_std, rtol=1e-3)


def test_a_bound_holds_and_is_where_picard_gn_ends_too():
    model, exps = _decay_with_input()
    kw = dict(p_bounds=([0.01, 0.01], [10.0, 1.2]), uncertainty=False)  # b's truth is 1.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pc.FitWarning)
        ref = pc.estimate(model, exps, [0.2, 0.5], "picard-gn", **kw)
        res = pc.estimate(model, exps, [0.2, 0.5], "single-shooting", **kw)
    assert res.success and res.p[1] == pytest.approx(1.2, abs=1e-12) and res.p[1] <= 1.2
    assert res.nllh == pytest.approx(ref.nllh, abs=1e-6)


def test_a_start_cvodes_cannot_integrate_is_a_failure_that_says_so():
    # x' = p x^2 from x = 1 blows up at t = 1/p: at p = 10 before the first sample
    x, p = ca.SX.sym("x"), ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=p * x ** 2, y=x)
    exp = pc.Experiment(t=np.linspace(0.0, 1.0, 11), y=1.0 / (1.0 - 0.5 * np.linspace(0, 1, 11)),
                        x0=[1.0])
    res = pc.estimate(model, [exp], [10.0], "single-shooting", estimate_x0=False,
                      p_bounds=([0.0], [20.0]))
    assert not res.success and res.status == "step_failed"
    assert "CVODES failed at the start" in res.message


def test_bad_options_are_named():
    model, exps = _decay_with_input()
    with pytest.raises(ValueError, match="gtol"):
        pc.estimate(model, exps, [0.2, 0.5], "single-shooting", gtol=-1.0)
    with pytest.raises(TypeError, match="max_iter"):
        pc.estimate(model, exps, [0.2, 0.5], "single-shooting", max_iter="ten")


def test_the_callback_sees_every_iteration_and_can_stop_it():
    model, exps = _decay_with_input()
    seen = []

    def stop_at_3(rec):
        seen.append(rec.iteration)
        return rec.iteration == 2

    res = pc.estimate(model, exps, [0.2, 0.5], "single-shooting", callback=stop_at_3,
                      p_bounds=([0.01, 0.01], [10.0, 10.0]), uncertainty=False)
    assert res.status == "stopped" and not res.success and seen == [0, 1, 2]


def test_a_reweighting_round_starts_where_the_last_ended():
    # the start was read once per setup: each round of weights="auto" began
    # again from p0 (Van der Pol: 14, 11 and 11 iterations; now 14, 4, 2)
    vdp = pc.problem("vdp", seed=0)
    rounds: list[int] = []

    def count(rec):
        if rec.iteration == 0:
            rounds.append(0)
        rounds[-1] += 1

    res = pc.estimate(vdp.model, vdp.experiments, vdp.p0, "single-shooting",
                      p_bounds=vdp.p_bounds, weights="auto", callback=count, uncertainty=False)
    assert res.success and len(rounds) >= 2
    assert all(n < rounds[0] / 2 for n in rounds[1:]), rounds
