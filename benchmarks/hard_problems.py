"""Hard problems with every default, against scipy least_squares + solve_ivp.

Run::

    python benchmarks/hard_problems.py [problem ...]

Problems of the kinds a chemist, a pharmacometrician or a process engineer
brings (the issue "Hard problems with every default"), each on synthetic
data made here with CVODES (NumPy seed 0), from the starts a user would try:

- ``robertson``: Robertson's stiff kinetics, rates 0.04, 3e7, 1e4 as
  ``log10 k``, ``x0`` known, A, B, C measured (additive noise, 1 % of each
  output's range), from ``log10 k = 0``; ``robertson_relative`` the same
  with 1 % noise proportional to each value (the issue's data: B's early
  values known to 1e-7), ``robertson_unbounded`` that without bounds (the
  issue's call), ``robertson_swamped`` with the paper's noise on top (B, at
  most 3.6e-5, lost in 0.05 additive noise), ``robertson_raw`` the rates
  themselves from ones, ``robertson_long`` to t = 1e6 (log-spaced samples);
- ``sir``: an epidemic's infected counted with Poisson noise, from ones;
- ``tank``: a tank drained through an orifice, its inflow a staircase held
  between the samples, the level measured, from ones;
- ``pk``: two-compartment oral pharmacokinetics, two subjects (doses 100 and
  300 mg), the log concentration measured (noise 0.1), from ones, ``p >= 0``;
- ``vdp``: a Van der Pol relaxation oscillator (``mu = 8``), both states
  measured, from ``mu = 1``;
- ``scales``: a production chain whose states sit near 1e6 and 1e-6, rates as
  ``log10 k`` from 0.

The package: ``pc.estimate`` with every default but ``estimate_x0=False``
(the initial states are known) and the bounds the problem states.  The peer:
``scipy.optimize.least_squares`` (trust-region reflective, finite-difference
Jacobian) on the residuals of ``scipy.integrate.solve_ivp`` (``Radau`` with
the model's exact Jacobian from CasADi, rtol 1e-8), weighted by the true
noise levels, same starts and bounds.  Each answer is scored by one
independent CVODES solution: the Gaussian ``nllh`` with each output's noise
level profiled (``sum_k n_k / 2 (log(2 pi SSR_k / n_k) + 1)``, the package's
default criterion; the peer's weighted least squares has nearly the same
optimum).  ``reached`` is within 0.01 of the better of the two.  CPU seconds,
one process, one BLAS thread; scipy is not a dependency of the package
(``pip install scipy`` for the peer's column; without it the column says so).
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import _single_thread  # noqa: F401  (one BLAS thread, as the package's solves)
import casadi as ca
import numpy as np

import picard_casadi as pc


@dataclass
class Problem:
    """A model, its experiments (with known x0), the truth, starts and bounds."""

    name: str
    model: pc.Model
    experiments: list[pc.Experiment]
    truth: list[float]
    starts: list[list[float]]  # the starts a user would try
    bounds: tuple[list, list]
    sigma: np.ndarray  # the true noise level of each output


def _data(model: pc.Model, truth: list[float], t: np.ndarray, x0s: list[list[float]],
          sigma_of: Callable[[np.ndarray], np.ndarray], rng: np.random.Generator,
          names: list[str]) -> tuple[list[pc.Experiment], np.ndarray]:
    clean = [_outputs(model, x0, truth, t) for x0 in x0s]
    sigma = sigma_of(np.vstack(clean))
    exps = [pc.Experiment(t, c + sigma * rng.standard_normal(c.shape), x0=x0, name=n, t0=0.0)
            for c, x0, n in zip(clean, x0s, names)]
    return exps, sigma


def _outputs(model: pc.Model, x0: list[float], p: Any, t: np.ndarray,
             exp: pc.Experiment | None = None) -> np.ndarray:
    """The outputs of CVODES's solution from ``x0`` at time 0 (with ``exp``'s
    inputs, as it reads them)."""
    X = pc.simulate(model, x0, p, t, exp, t0=0.0)
    u = exp.inputs(t, model.nu) if exp is not None else np.zeros((t.size, 0))
    return np.array([model.output_value(s, X[i], p, u[i]) for i, s in enumerate(t)])


def _robertson_model(log10: bool) -> pc.Model:
    x, q = ca.SX.sym("x", 3), ca.SX.sym("q", 3)
    k = 10 ** q if log10 else q
    a, b, c = x[0], x[1], x[2]
    rhs = ca.vertcat(-k[0] * a + k[2] * b * c, k[0] * a - k[2] * b * c - k[1] * b ** 2,
                     k[1] * b ** 2)
    names = ["log10_k1", "log10_k2", "log10_k3"] if log10 else ["k1", "k2", "k3"]
    return pc.Model(x=x, p=q, rhs=rhs, name="robertson", x_names=["A", "B", "C"],
                    p_names=names)


def robertson(rng: np.random.Generator) -> Problem:
    model = _robertson_model(log10=True)
    truth = list(np.log10([0.04, 3e7, 1e4]))
    exps, sigma = _data(model, truth, np.linspace(0.0, 40.0, 41), [[1.0, 0.0, 0.0]],
                        lambda Y: 0.01 * np.ptp(Y, axis=0), rng, ["robertson"])
    return Problem("robertson", model, exps, truth, [[0.0] * 3, [1.0] * 3],
                   ([-10.0] * 3, [10.0] * 3), sigma)


def _relative(problem: Problem, rng: np.random.Generator, name: str) -> Problem:
    """``problem`` with 1 % noise proportional to each value (the issue's
    Robertson data) instead of additive noise; the peer weighs each output
    by its noise's root mean square."""
    exps = []
    for e in problem.experiments:
        clean = _outputs(problem.model, list(e.x0), problem.truth, e.t)
        exps.append(e.replaced(y=clean * (1.0 + 0.01 * rng.standard_normal(clean.shape))))
    clean = np.vstack([_outputs(problem.model, list(e.x0), problem.truth, e.t)
                       for e in problem.experiments])
    sigma = 0.01 * np.sqrt(np.mean(clean ** 2, axis=0))
    return Problem(name, problem.model, exps, problem.truth, problem.starts, problem.bounds,
                   sigma)


def robertson_relative(rng: np.random.Generator) -> Problem:
    """The issue's Robertson: log10 rates from 0, noise proportional to the values."""
    return _relative(robertson(rng), rng, "robertson_relative")


def robertson_unbounded(rng: np.random.Generator) -> Problem:
    """``robertson_relative`` without bounds (the issue's call: none given)."""
    p = robertson_relative(rng)
    return Problem("robertson_unbounded", p.model, p.experiments, p.truth, p.starts,
                   ([None] * 3, [None] * 3), p.sigma)


def robertson_swamped(rng: np.random.Generator) -> Problem:
    """``robertson_unbounded``'s data with the paper's noise as well
    (``simulate_experiment``'s default: 5 % proportional and 0.05 additive,
    which swamps B, at most 3.6e-5)."""
    p = robertson_unbounded(rng)
    e = p.experiments[0]
    noisy = pc.simulate_experiment(p.model, e.x0, p.truth, e.t, noise_std=0.05, seed=rng)
    y = noisy.y * (1.0 + 0.01 * rng.standard_normal(noisy.y.shape))
    sigma = np.sqrt(np.mean((y - _outputs(p.model, list(e.x0), p.truth, e.t)) ** 2, axis=0))
    return Problem("robertson_swamped", p.model, [e.replaced(y=y)], p.truth, p.starts,
                   p.bounds, sigma)


def robertson_raw(rng: np.random.Generator) -> Problem:
    """The issue's other Robertson: the rates themselves from ones, k >= 0."""
    model = _robertson_model(log10=False)
    truth = [0.04, 3e7, 1e4]
    exps, sigma = _data(model, truth, np.linspace(0.0, 40.0, 41), [[1.0, 0.0, 0.0]],
                        lambda Y: 0.01 * np.ptp(Y, axis=0), rng, ["robertson"])
    return Problem("robertson_raw", model, exps, truth, [[1.0] * 3],
                   ([0.0] * 3, [None] * 3), sigma)


def robertson_long(rng: np.random.Generator) -> Problem:
    """The issue's Robertson to t = 1e6: samples log-spaced from 1e-5, log10
    rates from 0, noise proportional to the values."""
    model = _robertson_model(log10=True)
    truth = list(np.log10([0.04, 3e7, 1e4]))
    t = np.concatenate([[0.0], np.logspace(-5, 6, 40)])
    exps, sigma = _data(model, truth, t, [[1.0, 0.0, 0.0]],
                        lambda Y: 0.01 * np.ptp(Y, axis=0), rng, ["robertson"])
    return _relative(Problem("robertson_long", model, exps, truth, [[0.0] * 3, [1.0] * 3],
                             ([None] * 3, [None] * 3), sigma), rng, "robertson_long")


def pk(rng: np.random.Generator) -> Problem:
    x, p = ca.SX.sym("x", 3), ca.SX.sym("p", 5)
    gut, central, peripheral = x[0], x[1], x[2]
    ka, cl, v1, q, v2 = (p[i] for i in range(5))
    rhs = ca.vertcat(-ka * gut, ka * gut - (cl + q) / v1 * central + q / v2 * peripheral,
                     q / v1 * central - q / v2 * peripheral)
    model = pc.Model(x=x, p=p, rhs=rhs, y=ca.log(central / v1), name="pk",
                     p_names=["ka", "CL", "V1", "Q", "V2"],
                     x_names=["gut", "central", "peripheral"], y_names=["logC"])
    t = np.array([0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16,
                  18, 20, 22, 24.0])
    exps, sigma = _data(model, [1.2, 5.0, 30.0, 8.0, 60.0], t,
                        [[100.0, 0.0, 0.0], [300.0, 0.0, 0.0]],
                        lambda Y: np.full(Y.shape[1], 0.1), rng, ["subject 1", "subject 2"])
    return Problem("pk", model, exps, [1.2, 5.0, 30.0, 8.0, 60.0], [[1.0] * 5],
                   ([0.0] * 5, [None] * 5), sigma)


def vdp(rng: np.random.Generator) -> Problem:
    x, p = ca.SX.sym("x", 2), ca.SX.sym("mu")
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(x[1], p * (1 - x[0] ** 2) * x[1] - x[0]),
                     name="van-der-pol", x_names=["x1", "x2"], p_names=["mu"])
    exps, sigma = _data(model, [8.0], np.linspace(0.0, 30.0, 301), [[2.0, 0.0]],
                        lambda Y: 0.02 * np.ptp(Y, axis=0), rng, ["vdp"])
    return Problem("vdp", model, exps, [8.0], [[1.0], [25.0]], ([0.0], [50.0]), sigma)


def scales(rng: np.random.Generator) -> Problem:
    x, q = ca.SX.sym("x", 2), ca.SX.sym("q", 4)
    k = 10 ** q
    rhs = ca.vertcat(k[0] - k[1] * x[0], k[2] * x[0] - k[3] * x[1])
    model = pc.Model(x=x, p=q, rhs=rhs, name="scales", x_names=["big", "small"],
                     p_names=["log10_k1", "log10_k2", "log10_k3", "log10_k4"])
    truth = list(np.log10([1e5, 0.1, 1e-13, 0.1]))
    exps, sigma = _data(model, truth, np.linspace(0.0, 60.0, 61), [[0.0, 0.0]],
                        lambda Y: 0.02 * np.ptp(Y, axis=0), rng, ["scales"])
    return Problem("scales", model, exps, truth, [[0.0] * 4, [-5.0] * 4],
                   ([-20.0] * 4, [10.0] * 4), sigma)


def sir(rng: np.random.Generator) -> Problem:
    """An epidemic (population 1e5, 10 infected at first), the infected counted
    with Poisson noise every 2 days; x0 known; beta, gamma >= 0 from (1, 1)."""
    x, p = ca.SX.sym("x", 3), ca.SX.sym("p", 2)
    force = p[0] * x[0] * x[1] / 1e5
    model = pc.Model(x=x, p=p, rhs=ca.vertcat(-force, force - p[1] * x[1], p[1] * x[1]),
                     y=x[1], name="sir", p_names=["beta", "gamma"], x_names=["S", "I", "R"],
                     y_names=["I"])
    t = np.arange(0.0, 101.0, 2.0)
    clean = _outputs(model, [1e5 - 10, 10, 0], [0.5, 0.2], t)
    counts = rng.poisson(np.maximum(clean, 0.0)).astype(float)
    exp = pc.Experiment(t, counts, x0=[1e5 - 10, 10, 0], name="sir", t0=0.0)
    sigma = np.sqrt(np.mean(np.maximum(clean, 1.0), axis=0))
    return Problem("sir", model, [exp], [0.5, 0.2], [[1.0, 1.0]], ([0.0] * 2, [None] * 2),
                   sigma)


def tank(rng: np.random.Generator) -> Problem:
    """A tank drained through an orifice, ``A h' = q(t) - k sqrt(h)``, its
    inflow a staircase (a new level every 20 s, held between the samples:
    ``u_interpolation="previous"``, as the data state it), the level measured
    every 2 s; ``A``, ``k >= 0`` from ones."""
    x, p, u = ca.SX.sym("h"), ca.SX.sym("p", 2), ca.SX.sym("q")
    model = pc.Model(x=x, p=p, u=u, rhs=(u - p[1] * ca.sqrt(x)) / p[0], name="tank",
                     p_names=["A", "k"], x_names=["h"], u_names=["q"])
    t = np.arange(0.0, 201.0, 2.0)
    levels = rng.uniform(0.3, 1.5, 10)
    q = levels[np.minimum((t // 20).astype(int), 9)][:, None]
    truth = [2.0, 0.8]
    shape = pc.Experiment(t, np.zeros((t.size, 1)), u=q, u_interpolation="previous",
                          x0=[1.0], name="tank", t0=0.0)
    clean = _outputs(model, [1.0], truth, t, shape)
    sigma = 0.01 * np.ptp(clean, axis=0)
    exp = shape.replaced(y=clean + sigma * rng.standard_normal(clean.shape))
    return Problem("tank", model, [exp], truth, [[1.0, 1.0]], ([0.0] * 2, [None] * 2), sigma)


PROBLEMS = {"sir": sir, "tank": tank, "robertson": robertson, "robertson_relative": robertson_relative,
            "robertson_unbounded": robertson_unbounded, "robertson_swamped": robertson_swamped,
            "robertson_raw": robertson_raw, "robertson_long": robertson_long, "pk": pk,
            "vdp": vdp, "scales": scales}


# ---------------------------------------------------------------------- scoring
def nllh(problem: Problem, p: np.ndarray) -> float:
    """The Gaussian nllh with each output's noise profiled, of CVODES's
    solution at ``p`` (NaN where it fails)."""
    m = problem.model
    ssr, n = np.zeros(m.ny), np.zeros(m.ny)
    try:
        for e in problem.experiments:
            r = e.y - _outputs(m, list(e.x0), p, e.t, e if m.nu else None)
            ok = np.isfinite(r)
            ssr += np.where(ok, r, 0.0).__pow__(2).sum(axis=0)
            n += ok.sum(axis=0)
    except (pc.SimulationError, ValueError, RuntimeError):
        return math.nan
    if not np.all(np.isfinite(ssr)) or np.any(ssr <= 0):
        return math.nan
    return float(np.sum(0.5 * n * (np.log(2.0 * math.pi * ssr / n) + 1.0)))


# ---------------------------------------------------------------------- the peer
def scipy_fit(problem: Problem, start: list[float]) -> tuple[np.ndarray | None, str, float]:
    """least_squares on solve_ivp's residuals; (p, status, CPU s)."""
    try:
        from scipy.integrate import solve_ivp
        from scipy.optimize import least_squares
    except ImportError:
        return None, "scipy not installed", math.nan
    m = problem.model
    f = ca.Function("f", [m.x, m.p, m.u], [m.rhs])
    jac = ca.Function("J", [m.x, m.p, m.u], [ca.jacobian(m.rhs, m.x)])
    g = ca.Function("g", [m.x, m.p, m.u], [m.y])
    lb = np.array([-np.inf if v is None else v for v in problem.bounds[0]], float)
    ub = np.array([np.inf if v is None else v for v in problem.bounds[1]], float)

    def solution(e: pc.Experiment, p: np.ndarray) -> np.ndarray | None:
        """The states at ``e.t``, integrated piece by piece between the jumps
        of a held input (one piece without inputs); None where it fails."""
        U = e.inputs(e.t, m.nu) if m.nu else np.zeros((e.t.size, 0))
        cuts = [0] + [k for k in range(1, e.t.size) if np.any(U[k] != U[k - 1])] + [e.t.size]
        x, states = np.asarray(e.x0, float), []
        atol = 1e-10 * max(1.0, float(np.max(np.abs(e.x0))))
        for a, b in zip(cuts[:-1], cuts[1:]):
            u = U[a]
            end = e.t[b] if b < e.t.size else e.t[-1]
            span = (e.t[a], end) if end > e.t[a] else (e.t[a], e.t[a] + 1e-12)
            sol = solve_ivp(lambda t, z: np.asarray(f(z, p, u)).ravel(), span, x,
                            method="Radau", t_eval=e.t[a:b], rtol=1e-8, atol=atol,
                            jac=lambda t, z: np.asarray(jac(z, p, u)), dense_output=True)
            if sol.status != 0 or sol.y.shape[1] != b - a:
                return None
            states.append(sol.y)
            x = sol.sol(span[1]) if b < e.t.size else x
        return np.hstack(states)

    def residuals(p: np.ndarray) -> np.ndarray:
        out = []
        for e in problem.experiments:
            Y = solution(e, p)
            if Y is None:
                return np.full(sum(x.y.size for x in problem.experiments), 1e6)
            U = e.inputs(e.t, m.nu).T if m.nu else np.zeros((0, e.t.size))
            G = np.asarray(g(Y, p, U)).T.reshape(e.t.size, m.ny)
            r = (e.y - G) / problem.sigma
            out.append(np.where(np.isfinite(r), r, 1e6).ravel())
        return np.concatenate(out)

    c0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            sol = least_squares(residuals, np.clip(start, lb, ub), bounds=(lb, ub))
        except (ValueError, FloatingPointError) as err:
            return None, f"error: {err}", time.process_time() - c0
    return sol.x, ("success" if sol.success else f"status {sol.status}"), \
        time.process_time() - c0


def package_fit(problem: Problem, start: list[float]) -> tuple[np.ndarray, str, float]:
    c0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = pc.estimate(problem.model, problem.experiments, start,
                          p_bounds=problem.bounds, estimate_x0=False)
    label = "success" if res.success else f"FAILED ({res.status})"
    if res.success and res.fit_flagged:
        label += ", flagged"
    return np.asarray(res.p, float), label + f" [{res.method}]", time.process_time() - c0


def main(names: list[str]) -> None:
    rows = []
    for name in names:
        problem = PROBLEMS[name](np.random.default_rng(0))
        runs = []
        for start in problem.starts:
            here = package_fit(problem, start)
            peer = scipy_fit(problem, start)
            runs.append((start, here, peer, nllh(problem, here[0]),
                         math.nan if peer[0] is None else nllh(problem, peer[0])))
        best = np.nanmin([nllh(problem, np.array(problem.truth))]
                         + [v for r in runs for v in r[3:]])
        for start, here, peer, s_here, s_peer in runs:
            for tool, (_, status, cpu), score in (("picard_casadi", here, s_here),
                                                 ("scipy", peer, s_peer)):
                reached = "yes" if np.isfinite(score) and score <= best + 0.01 else "no"
                rows.append(f"| {name} | {start} | {tool} | {status} | {score:.4f} | "
                            f"{reached} | {cpu:.1f} |")
            print(rows[-2], rows[-1], sep="\n", flush=True)
    print("\n| problem | start | tool | status | nllh (CVODES) | reached | CPU s |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main(sys.argv[1:] or list(PROBLEMS))
