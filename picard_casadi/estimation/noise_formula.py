"""Noise formulas: ``sigma`` a function of noise parameters and the model's output.

For outputs whose noise is a formula ``sigma_i = s(theta, g_i)``
(``pc.Noise(sigma=a + b * g, output=g, parameters={...})``, PEtab's
``noiseFormula``) the negative log-likelihood is::

    nllh = sum_i log sigma_i + 0.5 (r_i / sigma_i)^2 + const,   r_i = y_i - g_i

It is not a least-squares problem in the parameters ``p`` (``sigma_i`` moves
with ``g_i``), but its gradient in ``p`` is that of the weighted least
squares ``0.5 sum ((y_i - c_i - g_i) / sigma_i)^2`` with weights and data
shift held at::

    sigma_i = s(theta, g_i),   c_i = (sigma_i - r_i^2 / sigma_i) ds/dg(theta, g_i)

So the relaxation of the output-error method extends to formulas: hold
``sigma_i`` and ``c_i`` for a Gauss-Newton solve of any method, re-estimate
``theta`` for the new ``g`` (a small bounded problem, IPOPT), recompute
``sigma_i`` and ``c_i``, repeat until they settle.  At the fixed point the
gradient of ``nllh`` in ``p``, ``x0`` and ``theta`` is zero: the likelihood's
optimum, not the iteratively reweighted least squares' (which drops ``c``
and stops elsewhere when ``sigma`` depends on ``g``).  Where the formula does
not involve ``g``, ``c = 0``.

The held data and weights live in the experiments the method sees
(``Experiment(y - c, sigma=sigma_i)``); the result is assembled on the
unshifted data (:func:`NoiseFormula.unshifted`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import casadi as ca
import numpy as np

from ..experiment import Experiment
from ..noise import Noise

__all__ = ["NoiseFormula", "NOISE_LEVELS_OFF"]

#: a measured value this many noise levels off its fit is no noise: the
#: formula's sigma is as good as 0 there (sigma = b*g at a model output of
#: 1e-125, a temperature in degC for K: "converged" at the start, the sum of
#: squares inf)
NOISE_LEVELS_OFF = 1e30


class NoiseFormula:
    """The formula outputs of a fit, their noise parameters, and the round state.

    Parameters
    ----------
    noise : sequence of Noise
        One per output.  The formula outputs are those with ``is_formula``,
        those naming a formula's parameter as ``sigma``, and those whose
        noise parameter an experiment sets (``Experiment(noise_parameters=
        ...)``).
    y_names : sequence of str
    experiments : sequence of Experiment
        Their ``noise_parameters`` map a noise parameter to one of the
        experiment's own (a name) or to a known value (a number).
    typical : sequence of float
        Each output's data RMS: the start of an estimated sigma that becomes
        a parameter here.
    """

    def __init__(self, noise: Sequence[Noise], y_names: Sequence[str],
                 experiments: Sequence[Experiment] = (), typical: Sequence[float] = ()) -> None:
        starts: dict[str, float] = {}
        bounds: dict[str, tuple[float, float]] = {}
        symbols: dict[str, ca.SX] = {}
        for n in noise:
            if not n.is_formula:
                continue
            for sym in ca.symvar(n.sigma):
                if sym.name() in n.parameters:
                    symbols.setdefault(sym.name(), sym)
            for name, value in n.parameters.items():
                if name in starts and bounds[name] != n.bounds:
                    raise ValueError(f"`noise`: noise parameter {name!r} is given bounds "
                                     f"{bounds[name]} and {n.bounds} by different outputs")
                starts.setdefault(name, value)
                bounds.setdefault(name, n.bounds)
        overridden = {k for e in experiments for k in e.noise_parameters}
        #: per output: its expression in its placeholder symbols, and their names
        base: dict[int, tuple[ca.SX, list[str], ca.SX | None]] = {}
        for k, n in enumerate(noise):
            if n.is_formula:
                base[k] = (n.sigma, list(n.parameters), n.output)
                continue
            name = (n.sigma if isinstance(n.sigma, str) and n.sigma != "data"
                    else f"sigma_{y_names[k]}" if n.sigma is None else None)
            if name is None or (name not in starts and name not in overridden):
                continue
            if name not in starts:  # an estimated sigma that experiments set: a parameter
                starts[name] = float(typical[k]) if len(typical) > k and typical[k] > 0 else 1.0
                bounds[name] = n.bounds
            sym = symbols.setdefault(name, ca.SX.sym(name))
            base[k] = (sym, [name], None)
        unknown = sorted(overridden - set(starts))
        if unknown:
            bad = next(e for e in experiments if set(e.noise_parameters) & set(unknown))
            raise ValueError(
                f"experiment {bad.name!r} sets noise parameter(s) {unknown}, which no output's "
                f"noise names (the noise parameters are {sorted(starts) or 'none'}; an output "
                "with an estimated sigma has 'sigma_<output>')")
        # each experiment's own names: the placeholders' starts and bounds
        names = list(starts)
        for e in experiments:
            for key, value in e.noise_parameters.items():
                if isinstance(value, str) and value not in starts:
                    starts[value], bounds[value] = starts[key], bounds[key]
                    names.append(value)
        self.names: tuple[str, ...] = tuple(dict.fromkeys(names))
        self.y_names = tuple(y_names)
        theta = ca.SX.sym("theta", len(self.names))
        g = ca.SX.sym("g")
        n_exp = max(1, len(experiments))
        #: per (formula output, experiment): Function (theta, g) -> (sigma, d sigma / d g)
        self.functions: dict[tuple[int, int], ca.Function] = {}
        #: ... and (theta, g) -> d sigma / d theta (the Fisher information's)
        self.theta_gradients: dict[tuple[int, int], ca.Function] = {}
        for k, (expr, placeholders, out) in base.items():
            for e in range(n_exp):
                mapping = experiments[e].noise_parameters if experiments else {}
                olds = [symbols[name] for name in placeholders]
                news = []
                for name in placeholders:
                    value = mapping.get(name, name)
                    news.append(ca.SX(float(value)) if not isinstance(value, str)
                                else theta[self.names.index(value)])
                if out is not None:
                    olds.append(out)
                    news.append(g)
                sub = ca.substitute([expr], olds, news)[0]
                self.functions[(k, e)] = ca.Function(f"sigma_{k}_{e}", [theta, g],
                                                     [sub, ca.jacobian(sub, g)])
                self.theta_gradients[(k, e)] = ca.Function(
                    f"sigma_theta_{k}_{e}", [theta, g], [ca.jacobian(sub, theta)])
        self.outputs = sorted(base)
        self.start = np.array([starts[name] for name in self.names], float)
        self.lower = np.array([bounds[name][0] for name in self.names], float)
        self.upper = np.array([bounds[name][1] for name in self.names], float)
        for i, name in enumerate(self.names):
            if not self.lower[i] <= self.start[i] <= self.upper[i]:
                raise ValueError(f"`noise`: the start {self.start[i]:g} of noise parameter "
                                 f"{name!r} is outside its bounds {(self.lower[i], self.upper[i])}")
        self.theta = self.start.copy()
        self._nlp: tuple[Any, tuple[int, ...]] | None = None

    def __bool__(self) -> bool:
        return bool(self.outputs)

    # ------------------------------------------------------------------ values
    def sigma_slope(self, k: int, e: int, theta: np.ndarray, g: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        """``sigma`` and ``d sigma / d g`` of output ``k`` in experiment ``e`` at
        outputs ``g``."""
        g = np.asarray(g, float).ravel()
        if g.size == 0:
            return np.zeros(0), np.zeros(0)
        f = self.functions[(k, e)].map(g.size)
        s, ds = f(ca.DM(theta), ca.DM(g[None, :]))
        return np.asarray(s, float).ravel(), np.asarray(ds, float).ravel()

    def sigma_gradient(self, k: int, e: int, theta: np.ndarray, g: np.ndarray) -> np.ndarray:
        """``d sigma / d theta`` of output ``k`` in experiment ``e`` at outputs
        ``g``, ``(len(g), len(theta))``."""
        g = np.asarray(g, float).ravel()
        if g.size == 0:
            return np.zeros((0, len(self.names)))
        f = self.theta_gradients[(k, e)].map(g.size)  # one (1, n_theta) row per value
        out = np.asarray(f(ca.DM(theta), ca.DM(g[None, :])), float)
        return out.reshape(g.size, len(self.names))

    def check_start(self, experiments: Sequence[Experiment]) -> None:
        """ValueError where a formula is not positive at its start, evaluated at
        the data (naming the output, experiment and sample)."""
        for k in self.outputs:
            for e, exp in enumerate(experiments):
                y = exp.y[:, k]
                measured = np.flatnonzero(np.isfinite(y))
                s, _ = self.sigma_slope(k, e, self.start, y[measured])
                bad = ~(np.isfinite(s) & (s > 0))
                if np.any(bad):
                    i = int(measured[np.flatnonzero(bad)[0]])
                    raise ValueError(
                        f"`noise`: the noise formula of output {self.y_names[k]!r} is not "
                        f"positive at its start: sigma = {s[bad][0]:g} at experiment "
                        f"{exp.name!r}, sample {i} (t = {exp.t[i]:g}, y = {y[i]:g}) with "
                        f"{ {n: float(v) for n, v in zip(self.names, self.start)} }; choose "
                        "other starting values (parameters={...}) or a formula that stays "
                        "positive")

    # ------------------------------------------------------------------ rounds
    def fit_theta(self, data: Sequence[Experiment], fitted: Sequence[np.ndarray]) -> np.ndarray:
        """The noise parameters that minimise ``nllh`` for the outputs ``fitted``
        (per experiment, sample order); starts from the current ``theta``."""
        pairs, gs, rs = self._values(data, fitted)
        sizes = tuple(v.size for v in gs)
        if self._nlp is None or self._nlp[1] != sizes:
            theta = ca.SX.sym("theta", len(self.names))
            G = [ca.SX.sym(f"g{k}_{e}", n) for (k, e), n in zip(pairs, sizes)]
            R = [ca.SX.sym(f"r{k}_{e}", n) for (k, e), n in zip(pairs, sizes)]
            f = 0
            for pair, Gk, Rk, n in zip(pairs, G, R, sizes):
                if n == 0:
                    continue
                S = self.functions[pair].map(n)(theta, Gk.T)[0].T
                f += ca.sum1(ca.log(S)) + 0.5 * ca.sumsqr(Rk / S)
            solver = ca.nlpsol("noise_parameters", "ipopt",
                               {"x": theta, "p": ca.vertcat(*G, *R), "f": f},
                               {"print_time": False, "error_on_fail": False,
                                "ipopt": {"print_level": 0, "sb": "yes", "tol": 1e-12,
                                          "max_iter": 200}})
            self._nlp = (solver, sizes)
        solver = self._nlp[0]
        lo = np.where(np.isfinite(self.lower), self.lower, -1e20)
        hi = np.where(np.isfinite(self.upper), self.upper, 1e20)
        x0 = np.clip(self.theta, lo, hi)
        sol = solver(x0=x0, p=np.concatenate([*gs, *rs]), lbx=lo, ubx=hi)
        theta = np.asarray(sol["x"], float).ravel()
        if not np.all(np.isfinite(theta)):
            return self.theta.copy()
        # (IPOPT relaxes its bounds by 1e-8: a combined error's a came back -1e-8)
        return np.clip(theta, self.lower, self.upper)

    def _values(self, data: Sequence[Experiment], fitted: Sequence[np.ndarray]
                ) -> tuple[list[tuple[int, int]], list[np.ndarray], list[np.ndarray]]:
        """Per (formula output, experiment): the fitted outputs and residuals."""
        pairs, gs, rs = [], [], []
        for k in self.outputs:
            for e, (exp, G) in enumerate(zip(data, fitted)):
                measured = np.isfinite(exp.y[:, k])
                pairs.append((k, e))
                gs.append(G[measured, k])
                rs.append(exp.y[measured, k] - G[measured, k])
        return pairs, gs, rs

    def not_positive(self, data: Sequence[Experiment], fitted: Sequence[np.ndarray]) -> str:
        """Where a formula's ``sigma`` at ``theta`` and the outputs ``fitted``
        (per experiment, sample order) is 0, negative or not finite at a
        measured value, in words with the remedy; ``""`` where nowhere.

        Where the noise parameters move ``sigma`` there (``a + b*g`` at
        ``g = 0`` started at ``a = 0``), the remedy is their start, which
        the rounds cannot leave (the likelihood is not finite there); where
        they do not (``b*g``), the formula or the measurement."""
        for k in self.outputs:
            for e, (exp, G) in enumerate(zip(data, fitted)):
                measured = np.flatnonzero(np.isfinite(exp.y[:, k]))
                g = np.asarray(G, float)[measured, k]
                s, _ = self.sigma_slope(k, e, self.theta, g)
                with np.errstate(all="ignore"):  # (or so small no misfit is noise)
                    off = np.abs(exp.y[measured, k] - g) > NOISE_LEVELS_OFF * s
                bad = np.flatnonzero(~(np.isfinite(s) & (s > 0)) | off)
                if not bad.size:
                    continue
                i, j = int(measured[bad[0]]), int(bad[0])
                where = (f"the noise formula of output {self.y_names[k]!r} is "
                         f"sigma = {s[j]:g} at the fit where a value is measured "
                         f"(experiment {exp.name!r}, t = {exp.t[i]:g}, y = {exp.y[i, k]:g}, "
                         f"the model's output {G[i, k]:g})")
                flat = (f" (the model's output is {G[i, k]:.3g} where {exp.y[i, k]:g} is "
                        "measured: nearly nothing moves it there; check the experiments' "
                        "constants, inputs and units)" if 0 < abs(G[i, k]) < 1e-6 * abs(exp.y[i, k]) else "")
                if flat:  # (not 0: a state that starts at 0 is measured at its start)
                    return f"{where}{flat}"
                moved = np.any(self.sigma_gradient(k, e, self.theta, g[j:j + 1]) != 0)
                if moved:
                    theta = ", ".join(f"{n} = {v:g}" for n, v in zip(self.names, self.theta))
                    return (f"{where}, at the noise parameters {theta}: start them where it "
                            "is positive (Noise(parameters={...}))")
                return (f"{where}: a formula that stays positive there (a + b*g, a combined "
                        "error model), or the measurement left out, fits")
        return ""

    def held(self, data: Sequence[Experiment], fitted: Sequence[np.ndarray] | None
             ) -> list[Experiment]:
        """The experiments a method solves with: each formula output's ``sigma_i``
        at ``theta`` and the fit, its data moved by ``c_i`` (none where
        ``fitted`` is None: the start, ``sigma_i`` at the data)."""
        out = []
        for e, exp in enumerate(data):
            y = np.array(exp.y, float)
            sigma = (np.array(exp.sigma, float) if exp.sigma is not None
                     else np.full(y.shape, np.nan))
            for k in self.outputs:
                measured = np.isfinite(exp.y[:, k])
                yk = exp.y[measured, k]
                g = yk if fitted is None else fitted[e][measured, k]
                s, ds = self.sigma_slope(k, e, self.theta, g)
                s = np.where(np.isfinite(s) & (s > 0), s, np.nan)
                if np.any(np.isnan(s)):
                    raise FloatingPointError(
                        f"the noise formula of output {self.y_names[k]!r} is not positive "
                        f"at the fit (experiment {exp.name!r})")
                r = yk - g
                shift = np.zeros_like(s) if fitted is None else (s - r * r / s) * ds
                y[measured, k] = yk - shift
                sigma[measured, k] = s
            out.append(exp.replaced(y=y, sigma=sigma))
        return out

    @staticmethod
    def unshifted(held: Sequence[Experiment], data: Sequence[Experiment]) -> list[Experiment]:
        """The held experiments' ``sigma`` with the data's own values."""
        return [h.replaced(y=d.y) for h, d in zip(held, data)]

    @staticmethod
    def change(old: Sequence[Experiment], new: Sequence[Experiment]) -> float:
        """How far the held weights and data moved: the largest relative change
        of a ``sigma_i`` and of a data shift in units of ``sigma_i``."""
        worst = 0.0
        for a, b in zip(old, new):
            if a.sigma is None or b.sigma is None:
                continue
            ok = np.isfinite(b.y)
            with np.errstate(all="ignore"):
                ds = np.abs(b.sigma[ok] / a.sigma[ok] - 1.0)
                dy = np.abs(b.y[ok] - a.y[ok]) / b.sigma[ok]
            worst = max(worst, float(np.max(ds, initial=0.0)), float(np.max(dy, initial=0.0)))
        return worst
