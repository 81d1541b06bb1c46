"""Noise models: per-measurement sigma, log-normal noise, shared noise
parameters and noise formulas (``pc.Noise``; docs/likelihood.md).

Each likelihood is checked against PEtab's definition evaluated directly on
a CVODES solution at the estimate, and its optimum by finite differences of
that direct evaluation.
"""

from __future__ import annotations

import math
import warnings

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc

P_TRUE = [0.5, 0.2]
X0 = [10.0, 0.1]


def _chain():
    """A -> B -> (out), both measured: positive, decaying and rising outputs."""
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(-p[0] * x[0], p[0] * x[0] - p[1] * x[1]),
                     x_names=["A", "B"], p_names=["k1", "k2"])
    t = np.linspace(0.0, 10.0, 61)
    return model, t, pc.simulate(model, X0, P_TRUE, t)


def _nllh(model, exp, p, sigma_of, transform=None):
    """PEtab's nllh at ``p`` (x0 known) from CVODES: ``sigma_of(G)`` gives each
    value's sigma; ``transform`` the log scale ("log", "log10") or None."""
    G = pc.simulate(model, X0, p, exp.t)
    Y = np.asarray(exp.y, float)
    jac = 0.0
    if transform == "log":
        jac = float(np.sum(np.log(Y)))
        Y, G = np.log(Y), np.log(G)
    elif transform == "log10":
        jac = float(np.sum(np.log(Y * math.log(10.0))))
        Y, G = np.log10(Y), np.log10(G)
    S = sigma_of(G)
    return float(np.sum(0.5 * np.log(2 * math.pi * S ** 2) + 0.5 * ((Y - G) / S) ** 2)) + jac


def _gradient(f, z, h):
    z = np.asarray(z, float)
    return np.array([(f(z + h * e) - f(z - h * e)) / (2 * h) for e in np.eye(z.size)])


def test_each_measurements_own_sigma_is_known_noise():
    model, t, X = _chain()
    rng = np.random.default_rng(0)
    S = 0.02 + 0.05 * X  # each value its own sigma
    exp = pc.Experiment(t, X + S * rng.standard_normal(X.shape), x0=X0, sigma=S)
    res = pc.estimate(model, [exp], [0.3, 0.3], estimate_x0=False)  # the data's sigma by default
    assert res.success and res.settings["noise"] == "given", res.summary()
    direct = _nllh(model, exp, res.p, lambda G: S)
    assert res.nllh == pytest.approx(direct, abs=1e-5)
    grad = _gradient(lambda q: _nllh(model, exp, q, lambda G: S), res.p, 1e-5)
    curvature = 1.0 / np.asarray(res.p_std) ** 2  # the Fisher information's diagonal
    assert np.all(np.abs(grad) < 1e-3 * np.sqrt(curvature)), grad
    # the same with the per-measurement sigma named explicitly
    again = pc.estimate(model, [exp], [0.3, 0.3], estimate_x0=False,
                        noise=pc.Noise(sigma="data"))
    assert again.p == pytest.approx(res.p, rel=1e-9)
    # treated as relative: one scale for both outputs estimated, the same estimate
    rel = pc.estimate(model, [exp], [0.3, 0.3], estimate_x0=False, noise=pc.Noise(sigma="c"))
    assert rel.p == pytest.approx(res.p, rel=1e-6)
    assert rel.settings["noise"] == "estimated"
    assert rel.settings["noise_parameter_values"]["c"] == pytest.approx(1.0, rel=0.2)
    # a noise parameter is estimated apart from the model's: not under one's name
    with pytest.raises(ValueError, match=r"noise parameter\(s\) 'k1' have the name of a "
                                         r"model parameter"):
        pc.estimate(model, [exp], [0.3, 0.3], estimate_x0=False, noise=pc.Noise(sigma="k1"))


def test_log_normal_noise_is_petabs_likelihood_on_either_log_scale():
    model, t, X = _chain()
    rng = np.random.default_rng(1)
    exp = pc.Experiment(t, X * np.exp(0.1 * rng.standard_normal(X.shape)), x0=X0)
    res = pc.estimate(model, [exp], [0.3, 0.3], estimate_x0=False, noise="log-normal")
    assert res.success and list(res.y_names) == ["log(A)", "log(B)"]
    sig = np.asarray(res.noise_sigma)
    assert sig == pytest.approx([0.1, 0.1], rel=0.25)
    assert res.nllh == pytest.approx(_nllh(model, exp, res.p, lambda G: sig, "log"), abs=1e-5)
    ten = pc.estimate(model, [exp], [0.3, 0.3], estimate_x0=False, noise="log10-normal")
    # the same estimate, sigma scaled by ln 10, and (PEtab's Jacobian term) the same nllh
    assert ten.p == pytest.approx(res.p, rel=1e-6)
    assert np.asarray(ten.noise_sigma) * math.log(10.0) == pytest.approx(sig, rel=1e-6)
    assert ten.nllh == pytest.approx(res.nllh, abs=1e-6)
    assert ten.nllh == pytest.approx(
        _nllh(model, exp, ten.p, lambda G: np.asarray(ten.noise_sigma), "log10"), abs=1e-5)


def test_a_noise_parameter_named_by_two_outputs_is_one_sigma():
    model, t, X = _chain()
    rng = np.random.default_rng(2)
    exp = pc.Experiment(t, X + 0.05 * rng.standard_normal(X.shape), x0=X0)
    res = pc.estimate(model, [exp], [0.3, 0.3], estimate_x0=False,
                      noise=pc.Noise(sigma="s"))
    s = res.settings["noise_parameter_values"]["s"]
    assert res.noise_sigma[0] == res.noise_sigma[1] == pytest.approx(s)
    G = pc.simulate(model, X0, res.p, t)
    assert s == pytest.approx(np.sqrt(np.mean((exp.y - G) ** 2)), rel=1e-5)
    assert res.nllh == pytest.approx(_nllh(model, exp, res.p, lambda G: s), abs=1e-5)
    # one noise level fewer than each output its own
    own = pc.estimate(model, [exp], [0.3, 0.3], estimate_x0=False)
    assert res.aic - 2 * res.nllh == pytest.approx(own.aic - 2 * own.nllh - 2)


@pytest.mark.parametrize("method", ["picard-gn", "ipopt", "shooting"])
def test_a_noise_formula_of_the_output_reaches_the_likelihoods_optimum(method):
    model, t, X = _chain()
    rng = np.random.default_rng(3)
    exp = pc.Experiment(t, X + (0.05 + 0.1 * X) * rng.standard_normal(X.shape), x0=X0)
    a, b, g = ca.SX.sym("a"), ca.SX.sym("b"), ca.SX.sym("g")
    noise = pc.Noise(sigma=a + b * g, output=g, parameters={"a": 0.1, "b": 0.1})
    res = pc.estimate(model, [exp], [0.3, 0.3], method, estimate_x0=False, noise=noise)
    assert res.success, res.summary()
    theta = np.array([res.settings["noise_parameter_values"][k] for k in ("a", "b")])

    def nllh(z):
        return _nllh(model, exp, z[:2], lambda G: z[2] + z[3] * G)

    z = np.concatenate([res.p, theta])
    assert res.nllh == pytest.approx(nllh(z), abs=1e-5)
    # stationary in the parameters and the noise parameters (the reweighted
    # least squares without the data shift stops elsewhere)
    grad = _gradient(nllh, z, 1e-6)
    assert np.all(np.abs(grad) < 0.05), grad
    for dz in np.eye(4) * 1e-3 * np.maximum(np.abs(z), 1e-2):
        assert nllh(z + dz) > nllh(z) - 1e-9 and nllh(z - dz) > nllh(z) - 1e-9
    # standard errors from the expected Fisher information over (p, a, b):
    # dg^T dg / s^2 + 2 ds^T ds / s^2, s = a + b g (central differences of CVODES)
    def outputs(q):
        return pc.simulate(model, X0, q, t, rtol=1e-12, atol=1e-12).ravel()
    G = outputs(res.p)
    dg = np.stack([(outputs(res.p + h) - outputs(res.p - h)) / 2e-6
                   for h in np.eye(2) * 1e-6], axis=1)  # (values, 2)
    sig = theta[0] + theta[1] * G
    ds = np.column_stack([theta[1] * dg, np.ones_like(G), G])
    D = np.column_stack([dg, np.zeros((G.size, 2))])
    fisher = (D / sig[:, None] ** 2).T @ D + 2 * (ds / sig[:, None] ** 2).T @ ds
    std = np.sqrt(np.diag(np.linalg.inv(fisher)))
    np.testing.assert_allclose(res.p_std, std[:2], rtol=1e-3)
    got = res.settings["noise_parameter_std"]
    np.testing.assert_allclose([got["a"], got["b"]], std[2:], rtol=1e-3)


def test_bad_noise_input_names_what_and_where():
    model, t, X = _chain()
    Y = X.copy()
    with pytest.raises(ValueError, match=r"sigma\[3, 1\].*sample 3, output column 1"):
        S = np.full(Y.shape, 0.1)
        S[3, 1] = 0.0
        pc.Experiment(t, Y, sigma=S, name="run1")
    with pytest.raises(ValueError, match="positive and finite where `y` is measured"):
        S = np.full(Y.shape, 0.1)
        S[0, 0] = np.nan
        pc.Experiment(t, Y, sigma=S)
    Ymiss = Y.copy()
    Ymiss[0, 0] = np.nan
    S = np.full(Y.shape, 0.1)
    S[0, 0] = np.nan  # no sigma where nothing is measured: fine
    pc.Experiment(t, Ymiss, sigma=S)
    with pytest.raises(ValueError, match="'normal', 'log-normal', 'log10-normal'"):
        pc.Noise("laplace")
    with pytest.raises(ValueError, match="positive and finite"):
        pc.Noise(sigma=0.0)
    Yneg = Y.copy()
    Yneg[5, 1] = -0.01
    exp = pc.Experiment(t, Yneg, x0=X0, name="shifted")
    # (a pharmacologist's values below the limit of quantification entered as
    # 0: told to use normal noise, not to leave them out)
    with pytest.raises(ValueError, match=r"output 'B' has log-normal noise.*experiment "
                                         r"'shifted', sample 5 .*leave such values out \(NaN"):
        pc.estimate(model, [exp], [0.3, 0.3], noise="log-normal")
    a, g = ca.SX.sym("a"), ca.SX.sym("g")
    with pytest.raises(ValueError, match=r"output 'A' is not positive at its start.*"
                                         r"experiment 'ok', sample 0"):
        pc.estimate(model, [pc.Experiment(t, Y, x0=X0, name="ok")], [0.3, 0.3],
                    noise=pc.Noise(sigma=a - g, output=g, parameters={"a": 1.0}))
    with pytest.raises(ValueError, match="not both"):
        pc.estimate(model, [pc.Experiment(t, Y)], [0.3, 0.3], noise=pc.Noise(),
                    weights="auto")
    with pytest.raises(ValueError, match=r"output\(s\) 'C'"):
        pc.estimate(model, [pc.Experiment(t, Y)], [0.3, 0.3], noise={"C": pc.Noise()})
    with pytest.raises(ValueError, match="experiment 'plain' has no `sigma`"):
        pc.estimate(model, [pc.Experiment(t, Y, name="plain")], [0.3, 0.3],
                    noise=pc.Noise(sigma="data"))


def test_noise_models_survive_json(tmp_path):
    model, t, X = _chain()
    rng = np.random.default_rng(4)
    exp = pc.Experiment(t, X + 0.05 * rng.standard_normal(X.shape), x0=X0)
    res = pc.estimate(model, [exp], [0.3, 0.3], estimate_x0=False,
                      noise={"A": pc.Noise(sigma=0.05), "B": pc.Noise(sigma="sB")})
    assert res.settings["noise"] == "mixed"
    back = pc.EstimationResult.from_json(res.to_json(tmp_path / "r.json"))
    assert back.nllh == pytest.approx(res.nllh)
    assert back.settings["noise_model"] == res.settings["noise_model"]
    assert back.settings["noise_parameter_values"] == pytest.approx(
        res.settings["noise_parameter_values"])
    assert "A: normal, sigma = 0.05 (known)" in res.summary()


def test_a_log_normal_result_read_back_predicts_on_its_scale(tmp_path):
    """from_json with the model refused a log-normal fit ("holds a restated
    problem ... refit"), the CLI's result.json too: it predicts log(B) again,
    as in its session; a profile still needs the session's result."""
    model, t, X = _chain()
    exp = pc.Experiment(t[1:], X[1:] * np.exp(0.05 * np.random.default_rng(5).standard_normal(
        X[1:].shape)), x0=X0)
    for scale in (None, "log10"):
        res = pc.estimate(model, [exp], [0.3, 0.3], estimate_x0=False, noise="log-normal",
                          parameter_scale=scale)
        back = pc.EstimationResult.from_json(res.to_json(tmp_path / "r.json"), model=model,
                                             experiments=[exp])
        assert back.y_names == ["log(A)", "log(B)"]
        assert np.allclose(back.predict(0), res.predict(0), rtol=1e-7, atol=1e-9)
        with pytest.raises(ValueError, match="refit (from its estimate )?in this session"):
            pc.profile(back)


def test_the_profile_of_a_likelihood_fit_re_fits_its_noise():
    model, t, X = _chain()
    rng = np.random.default_rng(3)
    exp = pc.Experiment(t, X * np.exp(0.1 * rng.standard_normal(X.shape)), x0=X0)
    kw = dict(estimate_x0=False, noise="log-normal", p_bounds=([0, 0], [5, 5]))
    res = pc.estimate(model, [exp], [0.3, 0.3], **kw)
    prof = pc.profile(res, parameters=["k1"])
    assert prof.noise == "likelihood" and prof.threshold == pytest.approx(3.8415, abs=1e-3)
    for c in prof.intervals[0]:
        # at each end the likelihood-ratio statistic with k2 and sigma re-fitted
        at = pc.estimate(model, [exp], [c, res.p[1]], **{**kw, "p_bounds": ([c, 0], [c, 5])})
        assert 2 * (at.nllh - res.nllh) == pytest.approx(prof.threshold, abs=0.02)
    with pytest.raises(ValueError, match="noise='likelihood' profiles a fit of the likelihood"):
        plain = pc.estimate(model, [exp], [0.3, 0.3], estimate_x0=False, weights="none")
        pc.profile(plain, noise="likelihood")


def test_a_noise_parameter_on_its_bound_is_named():
    model, t, X = _chain()
    rng = np.random.default_rng(2)
    exp = pc.Experiment(t, X + 0.05 * rng.standard_normal(X.shape), x0=X0)
    res = pc.estimate(model, [exp], [0.3, 0.3], estimate_x0=False,
                      noise=pc.Noise(sigma="s", bounds=(0.5, 10.0)))
    assert res.settings["noise_parameter_values"]["s"] == pytest.approx(0.5)
    assert any(w.startswith("noise parameter(s) s = 0.5 ended on a bound") for w in res.warnings)
    assert res.nllh == pytest.approx(_nllh(model, exp, res.p, lambda G: 0.5), abs=1e-5)


def test_noise_parameters_of_one_experiment():
    # PEtab's per-measurement noiseParameters: one observable, another noise
    # level in each condition (a sigma of each experiment's own, or known)
    model, t, X = _chain()
    rng = np.random.default_rng(5)
    levels = (0.02, 0.2)
    exps = [pc.Experiment(t, X + s * rng.standard_normal(X.shape), x0=X0, name=f"run{i}",
                          noise_parameters={"sigma_A": f"sA_{i}", "sigma_B": f"sB_{i}"})
            for i, s in enumerate(levels)]
    res = pc.estimate(model, exps, [0.3, 0.3], estimate_x0=False)
    values = res.settings["noise_parameter_values"]
    assert res.success
    assert [values["sA_0"], values["sA_1"]] == pytest.approx(levels, rel=0.3)
    G = pc.simulate(model, X0, res.p, t)
    for i, e in enumerate(exps):
        r = e.y - G
        assert [values[f"sA_{i}"], values[f"sB_{i}"]] == pytest.approx(
            np.sqrt(np.mean(r ** 2, axis=0)), rel=1e-4)
    direct = sum(_nllh(model, e, res.p, lambda G, i=i: np.array(
        [values[f"sA_{i}"], values[f"sB_{i}"]])) for i, e in enumerate(exps))
    assert res.nllh == pytest.approx(direct, abs=1e-4)
    # a known value in one experiment
    known = [exps[0], exps[1].replaced(noise_parameters={"sigma_A": 0.2, "sigma_B": 0.2})]
    res2 = pc.estimate(model, known, [0.3, 0.3], estimate_x0=False)
    assert set(res2.settings["noise_parameter_values"]) >= {"sA_0", "sB_0"}
    with pytest.raises(ValueError, match=r"sets noise parameter\(s\) \['s_x'\], which no "
                                         r"output's noise names"):
        pc.estimate(model, [exps[0].replaced(noise_parameters={"s_x": "s1"})], [0.3, 0.3])


def test_correlated_noise_reaches_the_full_covariance_likelihood():
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(x[1], -p[0] * x[0] - p[1] * x[1]), y=x)
    t = np.linspace(0.0, 10.0, 201)
    X = pc.simulate(model, [1.0, 0.0], [2.0, 0.3], t)
    R = np.array([[0.02 ** 2, 0.8 * 0.02 * 0.05], [0.8 * 0.02 * 0.05, 0.05 ** 2]])
    E = np.random.default_rng(0).standard_normal((t.size, 2)) @ np.linalg.cholesky(R).T
    exp = pc.Experiment(t, X + E, x0=[1.0, 0.0])
    res = pc.estimate(model, [exp], [1.5, 0.5], estimate_x0=False, noise="correlated")

    def nllh(q):  # profiled over R, from CVODES
        r = exp.y - pc.simulate(model, [1.0, 0.0], q, t)
        return 0.5 * t.size * (2 * math.log(2 * math.pi)
                               + np.linalg.slogdet(r.T @ r / t.size)[1] + 2)

    assert res.success and res.nllh == pytest.approx(nllh(res.p), abs=1e-6)
    assert res.det_R == pytest.approx(np.linalg.det(R), rel=0.3)
    grad = _gradient(nllh, res.p, 1e-6)
    assert np.all(np.abs(grad) < 0.05), grad
    # the independent-noise estimate is another point, worse for this likelihood
    independent = pc.estimate(model, [exp], [1.5, 0.5], estimate_x0=False)
    assert nllh(independent.p) > res.nllh + 0.1
    assert "R[x0,x1]" in res.settings["noise_parameter_values"]
    # standard errors from the Fisher information with the full R (central
    # differences of CVODES' outputs), not from its diagonal alone
    v = res.settings["noise_parameter_values"]
    R_hat = np.array([[v["R[x0,x0]"], v["R[x0,x1]"]], [v["R[x0,x1]"], v["R[x1,x1]"]]])
    dg = np.stack([(pc.simulate(model, [1.0, 0.0], res.p + h, t, rtol=1e-12, atol=1e-12)
                    - pc.simulate(model, [1.0, 0.0], res.p - h, t, rtol=1e-12, atol=1e-12))
                   / (2 * h[k]) for k, h in enumerate(np.eye(2) * 1e-5)], axis=2)  # (N, 2, 2)
    fisher = np.einsum("iak,ab,ibl->kl", dg, np.linalg.inv(R_hat), dg)
    np.testing.assert_allclose(res.p_std, np.sqrt(np.diag(np.linalg.inv(fisher))), rtol=1e-3)
    diagonal = np.einsum("iak,a,ial->kl", dg, 1 / np.diag(R_hat), dg)
    assert np.max(np.abs(np.sqrt(np.diag(np.linalg.inv(diagonal))) / res.p_std - 1)) > 0.1
    gap = exp.y.copy()
    gap[5, 1] = np.nan
    with pytest.raises(ValueError, match=r"every output at every sample time; experiment "
                                         r"'experiment', sample 5"):
        pc.estimate(model, [pc.Experiment(t, gap)], [1.5, 0.5], noise="correlated")


def test_a_log_normal_output_that_is_zero_where_it_is_not_measured():
    """B = 1 - exp(-k t) is 0 at t = 0, where only A is measured: its
    logarithm there is no part of the likelihood (it made the start not
    finite: Schwen's insulin receptors)."""
    a, b, k = ca.SX.sym("a"), ca.SX.sym("b"), ca.SX.sym("k")
    model = pc.Model(x=ca.vertcat(a, b), p=k, rhs=ca.vertcat(-k * a, k * a), y=ca.vertcat(a, b),
                     x0=[1.0, 0.0], y_names=["A", "B"], p_names=["k"])
    t = np.linspace(0.0, 3.0, 13)
    rng = np.random.default_rng(4)
    y = np.column_stack([np.exp(-0.7 * t) + 0.01 * rng.standard_normal(t.size),
                         (1 - np.exp(-0.7 * t)) * np.exp(0.05 * rng.standard_normal(t.size))])
    y[0, 1] = np.nan
    noise = {"A": pc.Noise(sigma=0.01), "B": pc.Noise("log-normal", sigma=0.05)}
    res = pc.estimate(model, [pc.Experiment(t, y)], [pc.Parameter("k", 1.0, (0.01, 10.0))],
                      noise=noise)
    assert res.success, res.message

    def nllh(kv: float) -> float:
        ra = (y[:, 0] - np.exp(-kv * t)) / 0.01
        rb = (np.log(y[1:, 1]) - np.log(1 - np.exp(-kv * t[1:]))) / 0.05
        return float(0.5 * np.sum(ra ** 2) + 0.5 * np.sum(rb ** 2)
                     + 0.5 * t.size * np.log(2 * np.pi * 0.01 ** 2)
                     + 0.5 * (t.size - 1) * np.log(2 * np.pi * 0.05 ** 2)
                     + np.sum(np.log(y[1:, 1])))

    kv, se = float(res.p[0]), float(res.p_std[0])
    assert nllh(kv) == pytest.approx(res.nllh, abs=1e-2)
    slope = (nllh(kv + 1e-4 * se) - nllh(kv - 1e-4 * se)) / (2e-4 * se)
    assert abs(slope * se) < 0.05


def test_a_log_normal_output_known_to_start_at_zero_and_measured_there_is_refused():
    """A product known to start at 0 (``Model(x0=...)`` or a held ``x0``),
    measured at t0 as half a detection limit: no estimate gives that value
    a finite likelihood.  Before, the floor's residual of some 690 set the
    output's noise level (207 for 0.05 in a kinetics study, Ea 131 for 80)
    and the fit returned success, its note saying the value was ignored."""
    a, b, k = ca.SX.sym("a"), ca.SX.sym("b"), ca.SX.sym("k")
    model = pc.Model(x=ca.vertcat(a, b), p=k, rhs=ca.vertcat(-k * a, k * a), y=b,
                     x0=[1.0, 0.0], y_names=["B"], p_names=["k"])
    t = np.linspace(0.0, 3.0, 13)
    y = 1 - np.exp(-0.7 * t)
    y[0] = 0.01  # B(0) = 0 in the model
    table = [pc.Parameter("k", 1.0, (0.01, 10.0))]
    with pytest.raises(ValueError, match=r"`noise`: log-normal .*'B' in 'run'; 1 value"):
        pc.estimate(model, [pc.Experiment(t, y, name="run")], table,
                    noise=pc.Noise("log-normal", sigma=0.05))
    # held numbers likewise; an estimated x0 may move, and is not refused
    free = pc.Model(x=ca.vertcat(a, b), p=k, rhs=ca.vertcat(-k * a, k * a), y=b,
                    y_names=["B"], p_names=["k"])
    with pytest.raises(ValueError, match=r"'B' in 'run'"):
        pc.estimate(free, [pc.Experiment(t, y, name="run", x0=[1.0, 0.0])], table,
                    estimate_x0=False, noise=pc.Noise("log-normal", sigma=0.05))
    # the data from day 1, the clock left there: the states at t = 0 are meant
    with pytest.raises(ValueError, match=r"the clock of 'late' at its first sample 0.25 starts "
                                         r"there \(t0 not given\).*Experiment\(\.\.\., t0=0"):
        pc.estimate(model, [pc.Experiment(t[1:], y[1:], name="late")], table,
                    noise=pc.Noise("log-normal", sigma=0.05))
    y[0] = np.nan  # left out, as the message says
    res = pc.estimate(model, [pc.Experiment(t, y, name="run")], table,
                      noise=pc.Noise("log-normal", sigma=0.05))
    assert res.success and abs(res.p[0] - 0.7) < 0.01, (res.message, res.p)


def _oral():
    """A one-compartment oral dose (depot -> central), the dose a constant of
    each experiment; C = Ac / V."""
    Ad, Ac = ca.SX.sym("Ad"), ca.SX.sym("Ac")
    ka, CL, V, dose = (ca.SX.sym(n) for n in ("ka", "CL", "V", "dose"))
    return pc.Model(x=ca.vertcat(Ad, Ac), p=ca.vertcat(ka, CL, V, dose),
                    rhs=ca.vertcat(-ka * Ad, ka * Ad - CL / V * Ac), y=Ac / V, x0=[dose, 0.0],
                    p_names=["ka", "CL", "V", "dose"], x_names=["Ad", "Ac"], y_names=["C"])


def _oral_data(t, doses, seed, relative=0.1):
    rng = np.random.default_rng(seed)
    model, exps = _oral(), []
    for i, D in enumerate(doses):
        X = pc.simulate(model, [max(D, 1.0), 0.0], [1.2, 4.0, 30.0, D], t, t0=0.0)
        y = X[:, 1:] / 30.0 * np.exp(relative * rng.standard_normal((t.size, 1)))
        exps.append(pc.Experiment(t=t, y=y, name=f"subj{i + 1}", t0=0.0,
                                  parameters={"dose": D}))
    return model, exps


def test_a_proportional_error_that_is_zero_at_a_measured_value_fails_and_says_why():
    """sigma = b*g at a pre-dose sample (the model's C(0) = 0, the assay reads
    0.01): the likelihood there is not finite.  It was success=True with b
    kept at its start, no standard errors, and IPOPT's NaN messages."""
    t = np.array([0.0, 0.5, 1, 2, 4, 6, 8, 12, 24.0])
    model, exps = _oral_data(t, [100.0, 300.0], seed=0)
    exps = [e.replaced(y=np.where(e.t[:, None] == 0.0, 0.01, e.y)) for e in exps]
    b, g = ca.SX.sym("b"), ca.SX.sym("g")
    res = pc.estimate(model, exps, p0={"ka": 0.5, "CL": 3.0, "V": 20.0},
                      noise=pc.Noise(sigma=b * g, output=g, parameters={"b": 0.3}))
    assert not res.success and res.status == "noise_not_positive", res.message
    assert "'subj1', t = 0, y = 0.01" in res.message and "a + b*g" in res.message
    # the combined error model fits the same data, but not from a = 0: there
    # sigma is 0 too, and the message names the start, not the formula
    a = ca.SX.sym("a")
    stuck = pc.estimate(model, exps, p0={"ka": 0.5, "CL": 3.0, "V": 20.0},
                        noise=pc.Noise(sigma=a + b * g, output=g,
                                       parameters={"a": 0.0, "b": 0.3}))
    assert stuck.status == "noise_not_positive" and "a + b*g" not in stuck.message
    assert "at the noise parameters a = 0, b = 0.3: start them where it is positive" in (
        stuck.message)
    ok = pc.estimate(model, exps, p0={"ka": 0.5, "CL": 3.0, "V": 20.0},
                     noise=pc.Noise(sigma=a + b * g, output=g,
                                    parameters={"a": 0.01, "b": 0.3}))
    assert ok.success and abs(ok.p[0] - 1.2) < 4 * ok.p_std[0], (ok.message, ok.p, ok.p_std)


def test_a_proportional_error_where_nothing_moves_the_model_fails_and_says_why():
    """A rate ``k exp(-E/R (1/T - 1/Tref))`` given T in degC for K: the model's
    output is 1e-120 where the data are 0.1 to 0.6, sigma = b*g as small;
    it "converged" at the start with the sum of squares inf, the likelihood
    5e246 and finite standard errors (a process chemist's trial)."""
    x, k, E, T = (ca.SX.sym(n) for n in ("x", "k", "E", "T"))
    rate = k * ca.exp(-E / 8.314e-3 * (1 / T - 1 / 308.15))
    model = pc.Model(x=x, p=ca.vertcat(k, E, T), rhs=rate * (1 - x), y=x, x_names=["x"],
                     p_names=["k", "E", "T"])
    t = np.linspace(0, 10, 11)
    y = pc.simulate(model, [0.0], [0.1, 60.0, 303.15], t)[:, 0]
    y = y * (1 + 0.03 * np.random.default_rng(0).standard_normal(t.size))
    exp = pc.Experiment(t[1:], y[1:, None], x0=[0.0], t0=0.0, parameters={"T": 30.0})
    b, g = ca.SX.sym("b"), ca.SX.sym("g")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = pc.estimate(model, [exp], {"k": 0.05, "E": 50.0}, estimate_x0=False,
                          noise=pc.Noise(sigma=b * g, output=g, parameters={"b": 0.05}))
    assert not res.success and res.status == "noise_not_positive", res.message
    assert "nearly nothing moves it there; check the experiments' constants" in res.message


def test_a_log_normal_output_held_at_zero_fails_naming_the_experiment():
    """One subject's dose typed as 0: the fit's message said 'plateau ...
    Start elsewhere (multistart=8)' and numpy's overflow warning leaked from
    the log10 intervals thousands of decades wide."""
    t = np.array([0.5, 1, 2, 4, 6, 8, 12, 24.0])
    model, exps = _oral_data(t, [0.0, 200.0], seed=5)
    good = _oral_data(t, [100.0], seed=5)[1][0]
    exps[0] = exps[0].replaced(y=good.y)  # measured as dosed, the dose written 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = pc.estimate(model, exps, p0={"ka": 0.5, "CL": 2.0, "V": 20.0},
                          parameter_scale="log10", noise="log-normal")
    # its residuals of some 690 on the log scale swamp the noise level: the
    # fit had said "plateau ... Start elsewhere"
    assert res.status == "output_not_positive" and not res.success, res.message
    assert res.message.startswith("the likelihood is not finite, so the estimate is no fit: "
                                  "the model's output 'C' is 0 or negative"), res.message
    assert "'subj1'" in res.message and "dose of 0" in res.message
    assert "and 7 more value(s)" in res.message  # its eight samples


def test_a_failed_runs_iterate_below_zero_is_no_output_held_at_zero():
    """A logistic from r = 40, K = 1e6 (an ecologist's poor start): picard-gn
    failed with its collocation states below zero where the model's own
    solution stays above 10, and the call ended "output_not_positive ...
    (a dose of 0?)" with no second run.  The floor is judged at a converged
    run's answer only; the failed run goes on to the second runs."""
    x, p = ca.SX.sym("N"), ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=p[0] * x * (1 - x / p[1]), y=x, p_names=["r", "K"])
    t = np.arange(0, 30.0)
    y = pc.simulate(model, [10.0], [0.5, 1000.0], t)
    y = y * np.exp(0.1 * np.random.default_rng(0).standard_normal(y.shape))
    res = pc.estimate(model, [pc.Experiment(t=t, y=y, x0=y[0])], p0=[40.0, 1e6],
                      noise="log-normal")
    assert res.status != "output_not_positive", res.message
    assert res.warnings[0].startswith("picard-gn stopped"), res.warnings[0]


def test_an_estimate_driving_a_positive_start_to_zero_goes_on_to_the_second_runs():
    """A fed-batch reactor (Monod substrate, log-normal assays): picard-gn
    converged where Ks and beta sat on their lower bounds and the substrate
    went negative; the call ended "output_not_positive ... (a dose of 0?)"
    with no second run, on 3 of a bioprocess engineer's 9 data sets.  The
    model simulated from the start was positive there: the statement does
    not floor it, so single shooting from p0 follows (the right estimate)."""
    X, S, P, V = (ca.SX.sym(n) for n in "XSPV")
    th, Sf, F = ca.SX.sym("th", 5), ca.SX.sym("Sf"), ca.SX.sym("F")
    mu = th[0] * S / (th[1] + S)
    model = pc.Model(x=ca.vertcat(X, S, P, V), p=ca.vertcat(th, Sf), u=F,
                     rhs=ca.vertcat(mu * X - F / V * X, -mu * X / th[2] + F / V * (Sf - S),
                                    (th[3] * mu + th[4]) * X - F / V * P, F),
                     y=ca.vertcat(X, S, P, V), x_names=list("XSPV"), y_names=list("XSPV"),
                     p_names=["mumax", "Ks", "Yxs", "alpha", "beta", "Sf"])
    levels = [0.0 if k < 8 else min(0.01 * np.exp(0.12 * (k - 8)), 0.12) for k in range(30)]

    def feed(t):
        return levels[int(np.clip(np.floor(t + 1e-12), 0, 29))]

    t_lab = np.array([0, 2, 4.5, 7, 9, 11.5, 14, 16, 18.5, 21, 23, 25.5, 28, 30.0])
    t = np.unique(np.r_[t_lab, np.arange(0, 30.25, 0.5)])
    hours = np.arange(1.0, 30.0)
    x = pc.simulate(model, [0.8, 20.0, 0.0, 2.0], [0.35, 0.3, 0.5, 0.8, 0.03, 400.0], t, feed,
                    breakpoints=hours)
    rng = np.random.default_rng(0)
    y = np.full_like(x, np.nan)
    lab = np.isin(t, t_lab)
    y[lab, :3] = x[lab, :3] * np.exp(0.07 * rng.standard_normal((lab.sum(), 3)))
    y[:, 3] = x[:, 3] + 0.005 * rng.standard_normal(t.size)
    y[y[:, 1] < 0.1, 1] = np.nan  # below the detection limit
    y[0, 2] = np.nan
    exp = pc.Experiment(t=t, y=y, x0=[1.0, 20.0, 0.0, 2.0], u=feed, breakpoints=hours,
                        parameters={"Sf": 400.0})
    table = [pc.Parameter(n, start=s, bounds=b, scale="log10") for n, s, b in (
        ("mumax", 0.5, (0.01, 5.0)), ("Ks", 1.0, (1e-3, 100.0)), ("Yxs", 0.4, (0.05, 2.0)),
        ("alpha", 1.0, (0.01, 10.0)), ("beta", 0.05, (1e-4, 1.0)))]
    res = pc.estimate(model, exp, table, estimate_x0=[True, False, False, False],
                      noise={"X": "log-normal", "S": "log-normal", "P": "log-normal",
                             "V": "normal"})
    assert res.success, res.message
    assert np.all(np.abs(res.p - [0.35, 0.3, 0.5, 0.8, 0.03]) < 4 * res.p_std), (res.p,
                                                                                 res.p_std)
    assert "output_not_positive" in res.warnings[0], res.warnings[0]


def test_the_fit_figure_of_a_log_normal_output_draws_the_data_on_its_scale():
    """The fitted line is log(C): the data were drawn in C, the residuals
    were C - log(C) (6.97 ... 2.49 for +-0.1) under a label in mg/L, and the
    line's log of the central compartment's 0 at t = 0 (-690) set the axis."""
    from picard_casadi.io.plotting import plot_fit

    t = np.array([0.5, 1, 2, 4, 6, 8, 12, 24.0])
    model, exps = _oral_data(t, [100.0, 300.0], seed=0)
    res = pc.estimate(model, exps, p0={"ka": 0.5, "CL": 3.0, "V": 20.0}, noise="log-normal")
    assert res.success and res.y_names == ["log(C)"], res.message
    fig = plot_fit(res, model, exps)
    axes = {ax.get_gid(): ax for ax in fig.axes}
    fit_ax, res_ax = axes["fit:0:0"], axes["residual:0:0"]
    dots = next(line for line in fit_ax.get_lines() if line.get_marker() == "o")
    assert np.allclose(dots.get_ydata(), np.log(exps[0].y[:, 0]))
    residuals = next(line for line in res_ax.get_lines() if line.get_marker() == "o")
    expected = np.log(exps[0].y[:, 0]) - res.predict(0)[:, 0]
    assert np.allclose(residuals.get_ydata(), expected, atol=1e-6)
    assert np.max(np.abs(expected)) < 0.5  # the noise is 0.1 on this scale
    assert fit_ax.get_ylabel() == "log(C)" and res_ax.get_ylabel().startswith("residual (log)")
    low, high = fit_ax.get_ylim()
    assert low > np.log(exps[0].y[:, 0]).min() - 1.0 and high < 3.0, (low, high)
    # without a band (uncertainty=False; a delayed output's fitted run has
    # none): the data set the axis too (a lag fit's reached -345)
    bare = pc.estimate(model, exps, p0={"ka": 0.5, "CL": 3.0, "V": 20.0}, noise="log-normal",
                       uncertainty=False)
    fit_ax = {ax.get_gid(): ax for ax in plot_fit(bare, model, exps).axes}["fit:0:0"]
    low, high = fit_ax.get_ylim()
    assert low > np.log(exps[0].y[:, 0]).min() - 1.0 and high < 3.0, (low, high)


def test_residuals_that_grow_with_a_positive_output_are_noted():
    """A concentration over four decades with a 10 % assay error, fitted with
    the default (one noise level): the 95 % intervals of such fits held the
    truth in half of 30 data sets, with no word.  Constant noise gets none."""
    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    model = pc.Model(x=x, p=k, rhs=-k * x, y_names=["C"])
    t = np.linspace(0.5, 9.0, 30)
    C = 100.0 * np.exp(-t)
    rng = np.random.default_rng(3)
    relative = C * (1 + 0.1 * rng.standard_normal(t.size))
    with pytest.warns(UserWarning, match="the residuals of output 'C' grow with its size"):
        res = pc.estimate(model, [pc.Experiment(t, relative, x0=[100.0], t0=0.0)], [0.5],
                          estimate_x0=False)
    assert any("noise='log-normal'" in w for w in res.warnings)
    # its large residuals where C is large are no outliers (they were named so,
    # and the note on the noise was dropped for them)
    assert not any(w.startswith("gross outliers?") for w in res.warnings), res.warnings
    constant = C + 0.5 * rng.standard_normal(t.size)
    res = pc.estimate(model, [pc.Experiment(t, constant, x0=[100.0], t0=0.0)], [0.5],
                      estimate_x0=False)
    assert not any("grow with its size" in w for w in res.warnings), res.warnings
    # log-normal noise models it: no note
    res = pc.estimate(model, [pc.Experiment(t, relative, x0=[100.0], t0=0.0)], [0.5],
                      estimate_x0=False, noise="log-normal")
    assert res.success and not any("grow with its size" in w for w in res.warnings)


def test_the_fit_figure_of_a_log_normal_output_not_measured_at_t0_keeps_its_data_in_view():
    """A PEtab log-normal observable of a species starting at 0, measured from
    t = 2 on (another observable at t = 0): the line's log at t = 0 (-690)
    set the axis, and the data were a flat line at its top."""
    pytest.importorskip("libsbml")
    pytest.importorskip("petab")
    from pathlib import Path

    from picard_casadi.io.plotting import plot_fit

    prob = pc.Problem.from_petab(Path(__file__).parent / "data" / "preequilibrated_cascade"
                                 / "problem.yaml")
    res = prob.estimate()
    assert res.success, res.message
    fig = plot_fit(res, prob.model, prob.experiments)
    k = prob.model.y_names.index("obs_Rp")
    e = [exp.name for exp in prob.experiments].index("c5")
    data = prob.experiments[e].y[:, k]
    data = np.log(data[np.isfinite(data)])  # as drawn
    low, high = next(ax for ax in fig.axes if ax.get_gid() == f"fit:{e}:{k}").get_ylim()
    span = data.max() - data.min()
    assert data.min() - span <= low < data.min() and data.max() < high, (low, high, data)


def test_a_log_normal_output_below_zero_has_finite_derivatives():
    # a first guess whose storage dips below 0 in a dry spell: the floored
    # log's exact Hessian there was -1/m**2 * 0 = -inf * 0 = NaN, and IPOPT
    # stopped at its start (Invalid_Number_Detected) on a hydrologist's reservoir
    from picard_casadi.noise import log_scaled_model

    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    model = log_scaled_model(pc.Model(x=x, p=k, rhs=-k * x, y=x / k), ["log"])
    hess = ca.Function("h", [x, k], [ca.hessian(model.y, ca.vertcat(x, k))[0], model.y])
    for value in (-1.0, 0.0, 1e-200):
        h, y = (np.asarray(v, float) for v in hess(value, 5.0))
        assert np.all(np.isfinite(h)) and np.isfinite(y), (value, h, y)


def test_the_smallest_values_all_on_one_side_of_the_fit_flag_it():
    """A sparse PK design's default fit (one noise level over 2-3 decades):
    the large values set the fit, the tail fell 80-fold below the data, all
    23 of the smallest third above it, V2 16 standard errors off, and the
    residuals' RMS ratio (1.66) too small for the growing-noise note: no
    word.  Now a lack-of-fit note (a FitWarning) names the side; the same
    values scattered about the fit say nothing."""
    from types import SimpleNamespace

    from picard_casadi.analysis.fit_check import is_fit_note
    from picard_casadi.estimation.assembly import SMALL_VALUES_MISSED, growing_noise_notes

    g = np.geomspace(20.0, 0.001, 45)[:, None]
    rng = np.random.default_rng(0)
    scatter = 0.3 * rng.standard_normal(g.shape)
    tail = np.where(g < 0.5, 0.2 + 0.05 * rng.random(g.shape), 0.0)
    result = SimpleNamespace(settings={"noise_model": ["C: normal, sigma estimated"]},
                             y_names=["C"])
    missed = growing_noise_notes(result, [SimpleNamespace(y=g + scatter * (g > 0.5) + tail)],
                                 [g])
    assert len(missed) == 1 and SMALL_VALUES_MISSED in missed[0] and is_fit_note(missed[0])
    assert "15 of its 15 values" in missed[0] and "lie above it" in missed[0], missed
    assert "noise='log-normal'" in missed[0] and "under the data there" in missed[0]
    about = np.where(g < 0.5, 0.2 * np.sign(np.sin(np.arange(45.0)))[:, None], scatter)
    assert growing_noise_notes(result, [SimpleNamespace(y=g + about)], [g]) == []
    # an output that is known to be another noise model's is not judged
    lognormal = SimpleNamespace(settings={"noise_model": ["C: log-normal, sigma estimated"]},
                                y_names=["C"])
    assert growing_noise_notes(lognormal, [SimpleNamespace(y=g + scatter + tail)], [g]) == []


def test_data_not_positive_under_a_log_normal_noise_are_counted_in_every_experiment():
    """Zeros in three patients were reported as "(1 such value(s))": the first's alone."""
    x = ca.SX.sym("x")
    k = ca.SX.sym("k")
    model = pc.Model(x=x, p=k, rhs=-k * x, y_names=["V"], x0=[1.0])
    t = np.linspace(0, 2, 6)
    y = np.exp(-t)
    exps = [pc.Experiment(t, np.where(np.arange(6) >= 6 - n, 0.0, y)[:, None], name=f"pt{i}")
            for i, n in enumerate((0, 1, 2, 1))]
    with pytest.raises(ValueError, match=r"experiment 'pt1', sample 5 .* \(4 such values in 3 "
                                         r"experiments: 'pt1' 1, 'pt2' 2, 'pt3' 1\)"):
        pc.estimate(model, exps, [1.0], noise="log-normal", estimate_x0=False)
