"""The default estimate against a direct minimisation of the likelihood with unknown noise.

Run::

    python benchmarks/likelihood_optimum.py

For problems with several outputs of different noise levels, the default
call (no weights: the likelihood with each output's noise variance
estimated, reached by the output-error relaxation,
``picard_casadi/analysis/likelihood.py``) against IPOPT minimising the
profiled negative log-likelihood directly::

    nllh(theta) = sum_k N_k / 2 (log(2 pi SSR_k(theta) / N_k) + 1)

over ``theta = (p, x0)``, with the outputs from CVODES at the sample times
(single shooting, CasADi's own derivatives), started from the default
estimate moved by 20 % and from ``p0``.  Printed per problem: both ``nllh``,
their difference, the largest relative difference of ``p``, the plain
least squares' ``nllh`` (``weights="none"``), and the times of both.  All
measured in this one run.

A second table does the same for noise models (``pc.Noise``): a noise
formula ``sigma = a + b g`` of the model's output with ``a`` and ``b``
estimated (the relaxation with its data shift,
``picard_casadi/estimation/noise_formula.py``), log-normal noise with one
noise parameter shared by both outputs, and each measurement's own known
sigma; the direct minimisation is IPOPT over ``(p, noise parameters)`` of
PEtab's ``nllh`` on the CVODES solution (the initial states known).
"""

from __future__ import annotations

import math
import time

import _single_thread  # noqa: F401  (one BLAS thread, as the package's solves)
import casadi as ca
import numpy as np

import picard_casadi as pc


def oscillator():
    """A damped oscillator: position (noise 0.01) and 100 x velocity (noise 20)."""
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 3)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(x[1], -p[0] * x[0] - p[1] * x[1] + p[2]),
                     y=ca.vertcat(x[0], 100 * x[1]), p_names=["k", "c", "f"])
    t = np.linspace(0, 10, 80)
    X = pc.simulate(model, [1.0, 0.0], [2.0, 0.3, 0.5], t)
    rng = np.random.default_rng(0)
    Y = np.column_stack([X[:, 0] + 0.01 * rng.standard_normal(t.size),
                         100 * X[:, 1] + 20 * rng.standard_normal(t.size)])
    return model, [pc.Experiment(t=t, y=Y)], np.array([1.5, 0.5, 0.3])


def lotka_volterra():
    """Prey (noise 0.02) and predators (noise 0.3), 40 samples."""
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 4)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(p[0] * x[0] - p[1] * x[0] * x[1],
                                              -p[2] * x[1] + p[3] * x[0] * x[1]),
                     y=x, p_names=list("abcd"))
    t = np.linspace(0, 15, 40)
    X = pc.simulate(model, [2.0, 1.0], [1.0, 0.5, 0.8, 0.3], t)
    rng = np.random.default_rng(3)
    Y = X + rng.standard_normal(X.shape) * np.array([0.02, 0.3])
    return model, [pc.Experiment(t=t, y=Y)], np.array([0.8, 0.4, 1.0, 0.4])


def two_compartments():
    """Two compartments, both measured (noise 0.05 and 0.5), two experiments."""
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 3)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(-(p[0] + p[1]) * x[0] + p[2] * x[1],
                                              p[1] * x[0] - p[2] * x[1]),
                     y=ca.vertcat(x[0], 10 * x[1]), p_names=["ke", "k12", "k21"])
    rng = np.random.default_rng(5)
    exps = []
    for dose in (1.0, 3.0):
        t = np.linspace(0, 12, 30)
        X = pc.simulate(model, [dose, 0.0], [0.3, 0.5, 0.2], t)
        Y = np.column_stack([X[:, 0], 10 * X[:, 1]]) + rng.standard_normal((t.size, 2)) * [0.05,
                                                                                          0.5]
        exps.append(pc.Experiment(t=t, y=Y, name=f"dose {dose:g}"))
    return model, exps, np.array([0.5, 0.3, 0.3])


def direct_nllh(model, exps, p_start, x0_start):
    """IPOPT on the profiled nllh over (p, x0 of every experiment), CVODES shooting."""
    nx, np_ = model.nx, model.np
    p = ca.MX.sym("p", np_)
    x0s = [ca.MX.sym(f"x0_{e}", nx) for e in range(len(exps))]
    xs, ps = ca.SX.sym("x", nx), ca.SX.sym("p", np_)
    f = ca.Function("f", [model.x, model.p], [model.rhs])
    g = ca.Function("g", [model.x, model.p], [model.y])
    ssr = [0] * model.ny
    counts = np.zeros(model.ny)
    for e, exp in enumerate(exps):
        t = np.asarray(exp.t, float)
        dae = {"x": xs, "p": ps, "ode": f(xs, ps)}
        F = ca.integrator(f"F{e}", "cvodes", dae, float(t[0]), list(t[1:]),
                          {"abstol": 1e-12, "reltol": 1e-10, "max_num_steps": 100000,
                           "show_eval_warnings": False})
        Xs = ca.horzcat(x0s[e], F(x0=x0s[e], p=p)["xf"])  # nx x N
        for i in range(t.size):
            yi = g(Xs[:, i], p)
            for k in range(model.ny):
                if np.isfinite(exp.y[i, k]):
                    ssr[k] = ssr[k] + (float(exp.y[i, k]) - yi[k]) ** 2
                    counts[k] += 1
    nllh = sum(0.5 * counts[k] * (ca.log(2 * math.pi * ssr[k] / counts[k]) + 1)
               for k in range(model.ny))
    z = ca.vertcat(p, *x0s)
    solver = ca.nlpsol("direct", "ipopt", {"x": z, "f": nllh},
                       {"print_time": False, "show_eval_warnings": False, "ipopt.print_level": 0,
                        "ipopt.tol": 1e-12,
                        "ipopt.max_iter": 500})
    start = np.concatenate([p_start, *x0_start])
    t0 = time.perf_counter()
    sol = solver(x0=start)
    return (float(sol["f"]), np.asarray(sol["x"]).ravel()[:np_], solver.stats()["return_status"],
            time.perf_counter() - t0)


def chain():
    """A -> B -> (out), both measured (initial states known)."""
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 2)
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(-p[0] * x[0], p[0] * x[0] - p[1] * x[1]),
                     x_names=["A", "B"], p_names=["k1", "k2"])
    t = np.linspace(0.0, 10.0, 61)
    return model, t, pc.simulate(model, [10.0, 0.1], [0.5, 0.2], t)


def noise_cases():
    """(name, model, experiment, noise, sigma(theta, G) as CasADi, theta start, scale)."""
    model, t, X = chain()
    rng = np.random.default_rng(3)
    a, b, g = ca.SX.sym("a"), ca.SX.sym("b"), ca.SX.sym("g")
    formula = pc.Noise(sigma=a + b * g, output=g, parameters={"a": 0.1, "b": 0.1})
    y_formula = X + (0.05 + 0.1 * X) * rng.standard_normal(X.shape)
    y_log = X * np.exp(0.1 * rng.standard_normal(X.shape))
    S = 0.02 + 0.05 * X
    y_own = X + S * rng.standard_normal(X.shape)
    x0 = [10.0, 0.1]
    return [
        ("formula a + b g", model, pc.Experiment(t, y_formula, x0=x0), formula,
         lambda th, G, i, k: th[0] + th[1] * G, [0.1, 0.1], "lin"),
        ("log-normal, shared", model, pc.Experiment(t, y_log, x0=x0), pc.Noise(
            "log-normal", sigma="s"), lambda th, G, i, k: th[0], [0.3], "log"),
        ("own sigma per value", model, pc.Experiment(t, y_own, x0=x0, sigma=S), None,
         lambda th, G, i, k: float(S[i, k]), [], "lin"),
    ]


def direct_noise_nllh(model, exp, sigma, p_start, theta_start, scale):
    """IPOPT on PEtab's nllh over (p, theta), CVODES single shooting, x0 known."""
    np_ = model.np
    p = ca.MX.sym("p", np_)
    th = ca.MX.sym("theta", len(theta_start))
    xs, ps = ca.SX.sym("x", model.nx), ca.SX.sym("p", np_)
    f = ca.Function("f", [model.x, model.p], [model.rhs])
    t = np.asarray(exp.t, float)
    F = ca.integrator("F", "cvodes", {"x": xs, "p": ps, "ode": f(xs, ps)}, float(t[0]),
                      list(t[1:]), {"abstol": 1e-12, "reltol": 1e-10, "max_num_steps": 100000,
                                    "show_eval_warnings": False})
    x0 = np.asarray(exp.x0, float)
    Xs = ca.horzcat(ca.DM(x0), F(x0=x0, p=p)["xf"])
    nllh = 0
    for i in range(t.size):
        for k in range(model.ny):
            y, G = float(exp.y[i, k]), Xs[k, i]
            if scale == "log":
                nllh += math.log(y)
                y, G = math.log(y), ca.log(G)
            s = sigma(th, G, i, k)
            nllh += 0.5 * ca.log(2 * math.pi * s ** 2) + 0.5 * ((y - G) / s) ** 2
    solver = ca.nlpsol("direct", "ipopt", {"x": ca.vertcat(p, th), "f": nllh},
                       {"print_time": False, "show_eval_warnings": False,
                        "ipopt.print_level": 0, "ipopt.tol": 1e-12, "ipopt.max_iter": 500})
    t0 = time.perf_counter()
    sol = solver(x0=np.concatenate([p_start, theta_start]),
                 lbx=np.concatenate([np.full(np_, -np.inf), np.zeros(len(theta_start))]))
    return (float(sol["f"]), np.asarray(sol["x"]).ravel()[:np_], solver.stats()["return_status"],
            time.perf_counter() - t0)


def main_noise_models() -> None:
    print(f"\n{'noise model':<22}{'nllh default':>14}{'nllh direct':>14}{'difference':>12}"
          f"{'max |dp|/|p|':>14}{'default s':>11}{'direct s':>10}  direct's start")
    for name, model, exp, noise, sigma, theta0, scale in noise_cases():
        p0 = np.array([0.3, 0.3])
        t0 = time.perf_counter()
        res = pc.estimate(model, [exp], p0, estimate_x0=False, noise=noise, uncertainty=False)
        t_default = time.perf_counter() - t0
        values = res.settings.get("noise_parameter_values", {})
        theta_est = [values[k] for k in ("a", "b", "s") if k in values]
        for label, p_start, th_start in (("estimate x 1.2", 1.2 * res.p,
                                          1.2 * np.asarray(theta_est)),
                                         ("p0", p0, np.asarray(theta0, float))):
            nllh, p_direct, status, t_direct = direct_noise_nllh(model, exp, sigma, p_start,
                                                                 th_start, scale)
            dp = float(np.max(np.abs(p_direct - res.p) / np.abs(res.p)))
            print(f"{name:<22}{res.nllh:>14.8g}{nllh:>14.8g}{res.nllh - nllh:>12.2e}"
                  f"{dp:>14.2e}{t_default:>11.2f}{t_direct:>10.2f}  {label} ({status})")


def main() -> None:
    print(f"{'problem':<18}{'nllh default':>14}{'nllh direct':>14}{'difference':>12}"
          f"{'max |dp|/|p|':>14}{'nllh LS':>12}{'default s':>11}{'direct s':>10}  direct's start")
    for name, make in (("oscillator", oscillator), ("lotka-volterra", lotka_volterra),
                       ("two compartments", two_compartments)):
        model, exps, p0 = make()
        t0 = time.perf_counter()
        res = pc.estimate(model, exps, p0, uncertainty=False)
        t_default = time.perf_counter() - t0
        ls = pc.estimate(model, exps, p0, weights="none", uncertainty=False)
        for label, p_start, x0_start in (
                ("estimate x 1.2", 1.2 * res.p, [1.2 * x for x in res.x0]),
                ("p0", p0, [np.asarray(e.y[0], float) for e in exps])):
            nllh, p_direct, status, t_direct = direct_nllh(model, exps, p_start, x0_start)
            dp = float(np.max(np.abs(p_direct - res.p) / np.abs(res.p)))
            print(f"{name:<18}{res.nllh:>14.8g}{nllh:>14.8g}{res.nllh - nllh:>12.2e}"
                  f"{dp:>14.2e}{ls.nllh:>12.6g}{t_default:>11.2f}{t_direct:>10.2f}  "
                  f"{label} ({status})")


if __name__ == "__main__":
    main()
    main_noise_models()
