"""Published estimation benchmarks: measured data with a known optimum.

Four classical chemical-kinetics problems, each with its published data, the
published optimum, and the source.  Unlike the registry's problems (synthetic
data from a known truth) these are real data sets whose least-squares
optimum is known, so an estimate can be checked against it::

    from picard_casadi.models.published import BENCHMARKS
    bench = BENCHMARKS["cops-gasoil"]()
    res = pc.estimate(bench.model, bench.experiments, p0=[0, 0, 0],
                      p_bounds=bench.p_bounds, estimate_x0=False)
    res.ssr            # 5.2366e-3, the published optimum

The COPS values are those of the COPS 3.0 report (Dolan, More and Munson,
"Benchmarking Optimization Software with COPS 3.0", Argonne National
Laboratory, ANL/MCS-TM-273, 2004), as quoted by the test suite of
COPSBenchmark.jl (github.com/MadNLP/COPSBenchmark.jl, test/runtests.jl) next
to the data (ext/COPSBenchmarkJuMP/{gasoil,pinene,methanol}.jl); the same
data appear in TOMLAB/PROPT's examples.  COPS solves a collocation
discretisation of the ODE; the exact ODE's optimum agrees with its published
value to every published digit (measured with CVODES at ``rtol = 1e-12`` and a
single-shooting re-optimisation: 5.2365958e-3, 19.8721669, 9.0222899e-3).

The Floudas gas-oil problem (the same model as COPS's with other
measurements) is from Floudas et al., "Handbook of Test Problems in Local
and Global Optimization", Kluwer 1999 (after Tjoa and Biegler, Ind. Eng.
Chem. Res. 30 (1991) 376), as transcribed in github.com/atgmello/DEParamEst
(src/calc/problem_set.jl, "ccgo"); its published optimum is the parameters
(12.214, 7.9798, 2.2216), where the sum of squares is 2.65567e-3.

In every problem the initial state is known (``estimate_x0=False``), all
states are measured, the rate constants are non-negative, and the objective
is the plain sum of squared residuals over all measurements.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import casadi as ca
import numpy as np

from picard_casadi.experiment import Experiment
from picard_casadi.model import Model

__all__ = ["Benchmark", "BENCHMARKS", "cops_gasoil", "cops_pinene", "cops_methanol",
           "floudas_gasoil"]


@dataclass
class Benchmark:
    """A published data set and its known optimum.

    Attributes
    ----------
    name : str
    model : Model
    experiments : list of Experiment
        One experiment; its ``x0`` is the known initial state.
    p_bounds : (ndarray, ndarray or None)
        The published problem's box (rate constants >= 0).
    ssr : float
        The published optimal sum of squared residuals.
    ssr_digits : int
        Significant digits of the published value.
    p_opt : ndarray or None
        The published optimal parameters, where published.
    source : str
    """

    name: str
    model: Model
    experiments: list[Experiment]
    p_bounds: tuple[np.ndarray, np.ndarray | None]
    ssr: float
    ssr_digits: int
    p_opt: np.ndarray | None = None
    source: str = ""
    notes: list[str] = field(default_factory=list)


def _model(name: str, nx: int, np_: int, rhs: Callable, x_names: list[str],
           p_names: list[str], t_unit: str) -> Model:
    x = ca.SX.sym("x", nx)
    p = ca.SX.sym("k", np_)
    return Model(x=x, p=p, rhs=ca.vertcat(*rhs(x, p)), name=name, x_names=x_names,
                 p_names=p_names, t_unit=t_unit)


def _gasoil_rhs(x, p):
    """Catalytic cracking of gas oil: y1' = -(k1 + k3) y1^2, y2' = k1 y1^2 - k2 y2."""
    return [-(p[0] + p[2]) * x[0] ** 2, p[0] * x[0] ** 2 - p[1] * x[1]]


_GASOIL_T = [0.0, 0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.175, 0.2, 0.225, 0.25, 0.3, 0.35,
             0.4, 0.45, 0.5, 0.55, 0.65, 0.75, 0.85, 0.95]


def cops_gasoil() -> Benchmark:
    """COPS problem 12, catalytic cracking of gas oil: 2 states, 3 rates, 21 samples."""
    model = _model("gasoil", 2, 3, _gasoil_rhs, ["gas_oil", "gasoline"], ["k1", "k2", "k3"], "")
    y = [[1.0, 0.0], [0.8105, 0.2], [0.6208, 0.2886], [0.5258, 0.301], [0.4345, 0.3215],
         [0.3903, 0.3123], [0.3342, 0.2716], [0.3034, 0.2551], [0.2735, 0.2258],
         [0.2405, 0.1959], [0.2283, 0.1789], [0.2071, 0.1457], [0.1669, 0.1198],
         [0.153, 0.0909], [0.1339, 0.0719], [0.1265, 0.0561], [0.12, 0.046], [0.099, 0.028],
         [0.087, 0.019], [0.077, 0.014], [0.069, 0.01]]
    exp = Experiment(_GASOIL_T, y, x0=[1.0, 0.0], name="gasoil")
    return Benchmark("cops-gasoil", model, [exp], (np.zeros(3), None), ssr=5.2366e-3,
                     ssr_digits=5, source="COPS 3.0, problem 12 (Tjoa and Biegler 1991)")


def floudas_gasoil() -> Benchmark:
    """Floudas et al. (1999), catalytic cracking of gas oil: other data, same model."""
    model = _model("gasoil", 2, 3, _gasoil_rhs, ["gas_oil", "gasoline"], ["k1", "k2", "k3"], "")
    y = [[1.0, 0.0], [0.7307, 0.1954], [0.5982, 0.2808], [0.4678, 0.3175], [0.4267, 0.3047],
         [0.3436, 0.2991], [0.3126, 0.2619], [0.2808, 0.2391], [0.2692, 0.221],
         [0.221, 0.1898], [0.2122, 0.1801], [0.1903, 0.1503], [0.1735, 0.103],
         [0.1615, 0.0964], [0.124, 0.0581], [0.119, 0.0471], [0.1109, 0.0413],
         [0.089, 0.0367], [0.082, 0.0219], [0.0745, 0.0124], [0.0639, 0.0089]]
    exp = Experiment(_GASOIL_T, y, x0=[1.0, 0.0], name="gasoil")
    return Benchmark("floudas-gasoil", model, [exp], (np.zeros(3), None), ssr=2.65567e-3,
                     ssr_digits=6, p_opt=np.array([12.214, 7.9798, 2.2216]),
                     source="Floudas et al. 1999, catalytic cracking of gas oil",
                     notes=["the published optimum is the parameters; ssr is the sum of "
                            "squares there (CVODES, rtol 1e-12)"])


def cops_pinene() -> Benchmark:
    """COPS problem 5, isomerisation of alpha-pinene: 5 states, 5 rates, 8 samples (minutes)."""
    def rhs(x, p):
        return [-(p[0] + p[1]) * x[0],
                p[0] * x[0],
                p[1] * x[0] - (p[2] + p[3]) * x[2] + p[4] * x[4],
                p[2] * x[2],
                p[3] * x[2] - p[4] * x[4]]

    model = _model("pinene", 5, 5, rhs,
                   ["alpha_pinene", "dipentene", "allo_ocimene", "pyronene", "dimer"],
                   ["k1", "k2", "k3", "k4", "k5"], "min")
    t = [1230.0, 3060.0, 4920.0, 7800.0, 10680.0, 15030.0, 22620.0, 36420.0]
    y = [[88.35, 7.3, 2.3, 0.4, 1.75], [76.4, 15.6, 4.5, 0.7, 2.8], [65.1, 23.1, 5.3, 1.1, 5.8],
         [50.4, 32.9, 6.0, 1.5, 9.3], [37.5, 42.7, 6.0, 1.9, 12.0], [25.9, 49.1, 5.9, 2.2, 17.0],
         [14.0, 57.4, 5.1, 2.6, 21.0], [4.5, 63.1, 3.8, 2.9, 25.7]]
    exp = Experiment(t, y, x0=[100.0, 0.0, 0.0, 0.0, 0.0], t0=0.0, name="pinene")
    return Benchmark("cops-pinene", model, [exp], (np.zeros(5), None), ssr=19.8721,
                     ssr_digits=6,
                     p_opt=np.array([5.92585e-05, 2.9634e-05, 2.0471e-05, 2.74465e-04, 3.99821e-05]),
                     source="COPS 3.0, problem 5 (Box, Hunter, MacGregor and Erjavec 1973; "
                            "data of Fuguitt and Hawkins 1947)")


def cops_methanol() -> Benchmark:
    """COPS problem 13, methanol to hydrocarbons: 3 states, 5 parameters, 17 samples."""
    def rhs(x, p):
        d = (p[1] + p[4]) * x[0] + x[1]
        return [-(2 * p[1] - (p[0] * x[1]) / d + p[2] + p[3]) * x[0],
                (p[0] * x[0] * (p[1] * x[0] - x[1])) / d + p[2] * x[0],
                (p[0] * x[0] * (x[1] + p[4] * x[0])) / d + p[3] * x[0]]

    model = _model("methanol", 3, 5, rhs, ["methanol", "oxygenates", "hydrocarbons"],
                   ["k1", "k2", "k3", "k4", "k5"], "")
    t = [0.0, 0.05, 0.065, 0.08, 0.123, 0.233, 0.273, 0.354, 0.397, 0.418, 0.502, 0.553, 0.681,
         0.75, 0.916, 0.937, 1.122]
    y = [[1.0, 0.0, 0.0], [0.7085, 0.1621, 0.0811], [0.5971, 0.1855, 0.0965],
         [0.5537, 0.1989, 0.1198], [0.3684, 0.2845, 0.1535], [0.1712, 0.3491, 0.2097],
         [0.1198, 0.3098, 0.2628], [0.0747, 0.3576, 0.2467], [0.0529, 0.3347, 0.2884],
         [0.0415, 0.3388, 0.2757], [0.0261, 0.3557, 0.3167], [0.0208, 0.3483, 0.2954],
         [0.0085, 0.3836, 0.295], [0.0053, 0.3611, 0.2937], [0.0019, 0.3609, 0.2831],
         [0.0018, 0.3485, 0.2846], [0.0006, 0.3698, 0.2899]]
    exp = Experiment(t, y, x0=[1.0, 0.0, 0.0], name="methanol")
    return Benchmark("cops-methanol", model, [exp], (np.zeros(5), None), ssr=9.02229e-3,
                     ssr_digits=6, source="COPS 3.0, problem 13",
                     notes=["k5 is on its bound 0 at the optimum; the model divides by "
                            "(k2 + k5) y1 + y2, so start with k2 > 0"])


BENCHMARKS: dict[str, Callable[[], Benchmark]] = {
    "cops-gasoil": cops_gasoil,
    "floudas-gasoil": floudas_gasoil,
    "cops-pinene": cops_pinene,
    "cops-methanol": cops_methanol,
}
