"""Fuzz: every argument of ``estimate`` and every method option, misused.

Each case must raise ValueError or TypeError naming the argument (checked
before anything is built), or be accepted when it is a NumPy scalar standing
for a Python number.
"""

from __future__ import annotations

import time

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc


def _vdp():
    x = ca.SX.sym("x", 2)
    p = ca.SX.sym("p", 2)
    rhs = ca.vertcat(p[0] * x[1], -p[0] * x[0] + p[1] * (1 - x[0] ** 2) * x[1])
    return pc.Model(x=x, p=p, rhs=rhs, name="vdp")


@pytest.fixture(scope="module")
def vdp():
    model = _vdp()
    exp = pc.simulate_experiment(model, [2, 0], [1, 1], np.linspace(0, 4, 41),
                                 noise_std=0.01, seed=0)
    return model, exp


def _call(vdp, method="picard-gn", **kw):
    model, exp = vdp
    args = dict(p0=[0.8, 0.8], codegen=False, T=0.5, uncertainty=False)
    args.update(kw)
    return pc.estimate(model, [exp], method=method, **args)


# (keyword arguments, exception, pattern naming the argument)
ESTIMATE_CASES = [
    (dict(n=[2]), TypeError, r"`n` must be an integer >= 1, got \[2\]"),
    (dict(n="abc"), TypeError, r"`n` must be an integer >= 1, got 'abc'"),
    (dict(n=2.5), ValueError, r"`n` must be an integer >= 1, got 2.5"),
    (dict(n=0), ValueError, r"`n` must be an integer >= 1"),
    (dict(n=True), TypeError, r"`n` must be an integer"),
    (dict(n=float("nan")), ValueError, r"`n` must be an integer"),
    (dict(nodes=1), ValueError, r"`nodes` must be an integer >= 2"),
    (dict(nodes="9"), TypeError, r"`nodes` must be an integer >= 2"),
    (dict(nodes=[9]), TypeError, r"`nodes` must be an integer >= 2"),
    (dict(T="0.5"), TypeError, r"`T` must be a positive number"),
    (dict(T=0.0), ValueError, r"`T` must be a positive"),
    (dict(T=float("inf")), ValueError, r"`T` must be a positive"),
    (dict(T=float("nan")), ValueError, r"`T` must be a positive"),
    (dict(T=np.array([0.5, 0.5])), TypeError, r"`T` must be a positive number"),
    (dict(T=True), TypeError, r"`T` must be a positive number"),
    (dict(lam=-1), ValueError, r"`lam` must be a positive"),
    (dict(lam=None), TypeError, r"`lam` must be a positive number"),
    (dict(lam="10"), TypeError, r"`lam` must be a positive number"),
    (dict(max_iter=None), TypeError, r"max_iter must be a positive integer, got None"),
    (dict(max_iter="5"), TypeError, r"max_iter must be a positive integer"),
    (dict(max_iter=0), ValueError, r"max_iter must be a positive integer"),
    (dict(max_iter=2.5), ValueError, r"max_iter must be a positive integer"),
    (dict(max_iter=float("inf")), ValueError, r"max_iter must be a positive integer"),
    (dict(p_bounds=([np.nan, 0], [2, 2])), ValueError,
     r"`p_bounds`: the lower bound\[0\] is NaN; use None or -inf"),
    (dict(p_bounds=([0, 0], [2, np.nan])), ValueError,
     r"`p_bounds`: the upper bound\[1\] is NaN; use None or inf"),
    (dict(x0_bounds=(np.nan, None)), ValueError, r"`x0_bounds`: the lower bound is NaN"),
    (dict(uncertainty="no"), TypeError, r"`uncertainty` must be True or False, got 'no'"),
    (dict(uncertainty=None), TypeError, r"`uncertainty` must be True or False"),
    (dict(uncertainty=1), TypeError, r"`uncertainty` must be True or False"),
    (dict(raise_on_failure="yes"), TypeError, r"`raise_on_failure` must be True or False"),
    (dict(seed="0", multistart=2), TypeError, r"`seed` must be None, an integer >= 0"),
    (dict(seed=1.5), TypeError, r"`seed` must be None, an integer >= 0"),
    (dict(seed=-1), ValueError, r"`seed` must be an integer >= 0"),
    (dict(multistart=0), ValueError, r"`multistart` must be an integer >= 1"),
    (dict(multistart="3"), TypeError, r"`multistart` must be an integer >= 1"),
    (dict(multistart=True), TypeError, r"`multistart` must be an integer"),
    (dict(callback=5), TypeError, r"`callback` must be a callable or None"),
    (dict(guess="data"), ValueError, r"`guess` must be one of \('auto', 'simulation', 'anchored', 'shooting'\)"),
    (dict(codegen="yes"), ValueError, r"codegen must be True, False or 'auto'"),
    (dict(codegen=None), ValueError, r"codegen must be True, False or 'auto'"),
    (dict(max_intervals=0), ValueError, r"`max_intervals` must be an integer >= 1"),
    (dict(scheme=["chebyshev"]), ValueError,
     r"`scheme` must be one of \('auto', 'chebyshev', 'radau', 'trapezoid'\)"),
    (dict(scheme="gauss"), ValueError, r"`scheme` must be one of"),
    (dict(max_intervals="many"), TypeError, r"`max_intervals` must be an integer"),
]


@pytest.mark.parametrize("kw,exc,pattern", ESTIMATE_CASES,
                         ids=[",".join(f"{k}={v!r}" for k, v in c[0].items())[:40]
                              for c in ESTIMATE_CASES])
def test_estimate_argument_is_named(vdp, kw, exc, pattern):
    t0 = time.perf_counter()
    with pytest.raises(exc, match=pattern):
        _call(vdp, **kw)
    assert time.perf_counter() - t0 < 5.0  # refused before anything is built


# (method, option values, exception, pattern)
OPTION_CASES = [
    ("picard-gn", dict(mu0=-1), ValueError, r"mu0 must be a positive number, got -1"),
    ("picard-gn", dict(mu0=0.0), ValueError, r"mu0 must be a positive number"),
    ("picard-gn", dict(mu0="small"), TypeError, r"mu0 must be a positive number"),
    ("picard-gn", dict(max_tries=0), ValueError, r"max_tries must be a positive integer"),
    ("picard-gn", dict(max_tries=None), TypeError, r"max_tries must be a positive integer"),
    ("picard-gn", dict(ftol_window=0), ValueError, r"ftol_window must be a positive integer"),
    ("picard-gn", dict(ftol_window=-3), ValueError, r"ftol_window must be a positive integer"),
    ("picard-gn", dict(radius0=np.inf), ValueError, r"radius0 must be a positive number"),
    ("picard-gn", dict(sweeps=0), ValueError, r"sweeps must be a positive integer or 'auto'"),
    ("picard-gn", dict(sweeps="always"), TypeError, r"sweeps must be a positive integer or 'auto'"),
    ("picard-gn", dict(max_sweeps=0), ValueError, r"max_sweeps must be a positive integer"),
    ("picard-gn", dict(gtol=-1e-8), ValueError, r"gtol must be a non-negative number"),
    ("picard-gn", dict(gtol="1e-8"), TypeError, r"gtol must be a number"),
    ("picard-gn", dict(gap_tol=np.nan), ValueError, r"gap_tol must be a non-negative number"),
    ("picard-gn", dict(sigma=0.0), ValueError, r"sigma must be in \(0, 1\]"),
    ("picard-gn", dict(sigma=None), TypeError, r"sigma must be a number"),
    ("picard-gn", dict(hessian="newton"), ValueError, r"hessian must be one of"),
    ("picard-gn", dict(hessian=["exact"]), ValueError, r"hessian must be one of"),
    ("picard-gn", dict(continuity=None), ValueError, r"continuity must be one of"),
    ("picard", dict(lam_max=0.5), ValueError, r"lam_max must be a number >= 1"),
    ("picard", dict(armijo=0.0), ValueError, r"armijo must be a number in \(0, 1\)"),
    ("picard", dict(armijo=1.5), ValueError, r"armijo must be a number in \(0, 1\)"),
    ("picard", dict(max_backtracks=0), ValueError, r"max_backtracks must be a positive integer"),
    ("picard", dict(initial_step=None), ValueError, r"initial_step must be one of"),
    ("ipopt", dict(tol=0), ValueError, r"tol must be a positive number"),
    ("ipopt", dict(expand="yes"), TypeError, r"expand must be True or False"),
    ("ipopt", dict(print_level=-1), ValueError, r"print_level must be an integer >= 0"),
    ("ipopt", dict(max_iter=None), TypeError, r"max_iter must be a positive integer"),
    ("ipopt", dict(ipopt_options=[("tol", 1)]), TypeError, r"ipopt_options must be a dict"),
    ("shooting", dict(max_steps=0), ValueError, r"max_steps must be a positive integer"),
    ("shooting", dict(rtol=-1), ValueError, r"rtol must be a positive number"),
    ("shooting", dict(atol="tiny"), TypeError, r"atol must be a positive number"),
]


@pytest.mark.parametrize("method,kw,exc,pattern", OPTION_CASES,
                         ids=[f"{c[0]}-{','.join(c[1])}-{list(c[1].values())[0]!r}"[:40]
                              for c in OPTION_CASES])
def test_method_option_is_named(vdp, method, kw, exc, pattern):
    with pytest.raises(exc, match=pattern):
        _call(vdp, method=method, **kw)


def test_numpy_scalars_are_accepted_wherever_python_numbers_are(vdp):
    res = _call(vdp, T=np.float32(0.5), n=np.int64(2), lam=np.int64(5), nodes=np.int32(7),
                max_iter=np.int64(30), mu0=np.float64(1e-3), max_tries=np.int16(8),
                seed=np.int64(3), ftol_window=np.int64(5))
    ref = _call(vdp, T=0.5, n=2, lam=5.0, nodes=7, max_iter=30)
    assert res.success and ref.success
    assert np.allclose(res.p, ref.p, rtol=1e-10)
    res = _call(vdp, T=np.int64(1), uncertainty=np.bool_(False), max_iter=30)
    assert res.settings["T"] == 1.0


def test_max_tries_one_still_moves_p(vdp):
    """``max_tries=1`` is the smallest budget; p must still move from p0."""
    res = _call(vdp, max_tries=1, max_iter=50)
    assert np.max(np.abs(res.p - 0.8)) > 0.05
