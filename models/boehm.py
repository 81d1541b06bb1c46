"""Boehm et al. (2014): STAT5A/STAT5B dimerisation and nuclear transport, PEtab benchmark.

The problem ``Boehm_JProteomeRes2014`` of the PEtab benchmark collection
(github.com/Benchmarking-Initiative/Benchmark-Models-PEtab, BSD-3 licence,
``Benchmark-Models/Boehm_JProteomeRes2014``; Boehm et al., J. Proteome Res.
13 (2014) 5685), stated with this package's API::

    from picard_casadi.models.boehm import boehm_problem
    model, experiments, p0, p_bounds = boehm_problem()
    res = pc.estimate(model, experiments, p0=p0, p_bounds=p_bounds, estimate_x0=False)
    res.nllh           # 138.2220, the collection's optimum (PEtab's definition)

The SBML model, in concentrations (species ``/ compartment``, ``cyt = 1.4``,
``nuc = 0.45``; time in minutes), with ``Epo(t) = 1.25e-7 exp(-Epo_degradation_BaF3 t)``
and the nine mass-action reactions::

    v1 = cyt Epo k_phos STAT5A^2        2 STAT5A        -> pApA
    v2 = cyt Epo k_phos STAT5A STAT5B   STAT5A + STAT5B -> pApB
    v3 = cyt Epo k_phos STAT5B^2        2 STAT5B        -> pBpB
    v4 = cyt k_imp_homo pApA            pApA  -> nucpApA
    v5 = cyt k_imp_hetero pApB          pApB  -> nucpApB
    v6 = cyt k_imp_homo pBpB            pBpB  -> nucpBpB
    v7 = nuc k_exp_homo nucpApA         nucpApA -> 2 STAT5A
    v8 = nuc k_exp_hetero nucpApB       nucpApB -> STAT5A + STAT5B
    v9 = nuc k_exp_homo nucpBpB         nucpBpB -> 2 STAT5B

Initial state (the SBML initial assignments, ``ratio = 0.693`` fixed):
``STAT5A = 207.6 ratio``, ``STAT5B = 207.6 (1 - ratio)``, the six complexes
zero; it is known (``estimate_x0=False``).  The three outputs are the PEtab
observables ``pSTAT5A_rel``, ``pSTAT5B_rel``, ``rSTAT5A_rel`` (relative
phosphorylation and abundance, percent, with the fixed ``specC17 = 0.107``),
all ``lin`` with ``normal`` noise of one unknown standard deviation per
observable (``noiseParameter1_<obs>``): the package's default likelihood for
several outputs (``weights=None``), whose ``noise_sigma`` are the
collection's ``sd_*`` parameters, estimated in closed form rather than as
parameters.

Parameters: the six estimated rate constants, each as ``theta = log10 k``
(PEtab's ``parameterScale = log10``), so ``p``, its nominal values and the
bounds ``[-5, 5]`` are those of the parameter table; the expressions use
``10**theta``.  One experiment, 16 sample times on ``[0, 240]`` min, every
observable measured at each (48 values).
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from picard_casadi.experiment import Experiment
from picard_casadi.model import Model

__all__ = ["boehm_problem", "build_model", "P_NAMES", "P_NOMINAL", "P_BOUNDS", "SD_NOMINAL",
           "X0", "NLLH_NOMINAL", "T", "Y", "SOURCE_COMMIT"]

#: the collection's commit the numbers below were read from
SOURCE_COMMIT = "4d2085084b289f6215a95475b1ee639fd7d42283"

#: the estimated parameters, in the parameter table's order (all log10)
P_NAMES = ("Epo_degradation_BaF3", "k_exp_hetero", "k_exp_homo", "k_imp_hetero",
           "k_imp_homo", "k_phos")
#: their nominal values (the table's ``nominalValue``), on the log10 scale
P_NOMINAL = np.log10([0.026982514033029, 1.00067973851508e-05, 0.006170228086381,
                      0.0163679184468, 97749.3794024716, 15766.5070195731])
#: the table's bounds, ``1e-5`` and ``1e5``, on the log10 scale
P_BOUNDS = (np.full(6, -5.0), np.full(6, 5.0))
#: nominal noise standard deviations ``sd_pSTAT5A_rel, sd_pSTAT5B_rel, sd_rSTAT5A_rel``
#: (linear scale; not parameters here: the likelihood estimates them)
SD_NOMINAL = np.array([3.85261197844677, 6.59147818673419, 3.15271275648527])
#: PEtab's negative log-likelihood (with the ``log(2 pi sigma^2) / 2`` constants)
#: at the nominal parameters and noise levels
NLLH_NOMINAL = 138.22199693517703

RATIO = 0.693     # fixed: share of STAT5A in the total STAT5
SPEC_C17 = 0.107  # fixed: specificity of the antibody
CYT, NUC = 1.4, 0.45  # compartment volumes
EPO0 = 1.25e-7

X_NAMES = ("STAT5A", "STAT5B", "pApB", "pApA", "pBpB", "nucpApA", "nucpApB", "nucpBpB")
Y_NAMES = ("pSTAT5A_rel", "pSTAT5B_rel", "rSTAT5A_rel")
#: the known initial state
X0 = np.array([207.6 * RATIO, 207.6 - 207.6 * RATIO, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])

#: sample times (min) and measurements, columns ``Y_NAMES`` (the measurement table)
T = np.array([0.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 80.0, 100.0, 120.0,
              160.0, 200.0, 240.0])
Y = np.array([
    [7.90107299873911, 4.59653334288927, 14.7231682180584],
    [66.3634939682528, 29.6345459874189, 33.762342293107],
    [81.1713239165337, 46.0438064695701, 36.7998512942493],
    [94.7303080627876, 81.9747336191685, 49.7176022859654],
    [95.1164830493244, 80.5716092952489, 46.9281200952955],
    [91.44171655392, 79.0357196371442, 47.8365745550135],
    [91.2570992263545, 75.6723803658298, 46.9287272497385],
    [93.672297840992, 71.6247198618303, 40.5977529351181],
    [88.754232823019, 69.0628632755742, 43.783663885071],
    [85.2697032178279, 67.1473843168934, 44.4573876523855],
    [81.1323953369608, 60.8994762938824, 41.3271592618297],
    [76.135928475796, 54.8092577721492, 41.0627332148332],
    [65.2480591250229, 43.9812899778025, 39.2358300289377],
    [42.5996587097166, 29.7714581636675, 36.6194605442418],
    [25.1577975445976, 20.089016562771, 34.8937144010561],
    [15.4301823994994, 10.961845166698, 32.2110771608676],
])


def build_model() -> Model:
    """The SBML model as an ODE in concentrations, parameters ``log10`` of the rates.

    Returns
    -------
    Model
        8 states (``X_NAMES``), 6 parameters (``P_NAMES``, log10 scale), 3
        outputs (``Y_NAMES``), explicit time (the decaying Epo stimulus).
    """
    t = ca.SX.sym("t")
    x = ca.SX.sym("x", 8)
    theta = ca.SX.sym("theta", 6)
    epo_deg, k_exp_hetero, k_exp_homo, k_imp_hetero, k_imp_homo, k_phos = (
        10 ** theta[i] for i in range(6))
    A, B, pAB, pAA, pBB, nAA, nAB, nBB = (x[i] for i in range(8))
    epo = EPO0 * ca.exp(-epo_deg * t)
    v1 = CYT * epo * A ** 2 * k_phos
    v2 = CYT * epo * A * B * k_phos
    v3 = CYT * epo * B ** 2 * k_phos
    v4 = CYT * k_imp_homo * pAA
    v5 = CYT * k_imp_hetero * pAB
    v6 = CYT * k_imp_homo * pBB
    v7 = NUC * k_exp_homo * nAA
    v8 = NUC * k_exp_hetero * nAB
    v9 = NUC * k_exp_homo * nBB
    rhs = ca.vertcat(
        (-2 * v1 - v2 + 2 * v7 + v8) / CYT,
        (-v2 - 2 * v3 + v8 + 2 * v9) / CYT,
        (v2 - v5) / CYT,
        (v1 - v4) / CYT,
        (v3 - v6) / CYT,
        (v4 - v7) / NUC,
        (v5 - v8) / NUC,
        (v6 - v9) / NUC,
    )
    s = SPEC_C17
    y = ca.vertcat(
        (100 * pAB + 200 * pAA * s) / (pAB + A * s + 2 * pAA * s),
        -(100 * pAB - 200 * pBB * (s - 1)) / ((B * (s - 1) - pAB) + 2 * pBB * (s - 1)),
        (100 * pAB + 100 * A * s + 200 * pAA * s)
        / (2 * pAB + A * s + 2 * pAA * s - B * (s - 1) - 2 * pBB * (s - 1)),
    )
    return Model(t=t, x=x, p=theta, rhs=rhs, y=y, name="boehm", x_names=X_NAMES,
                 p_names=["log10_" + n for n in P_NAMES], y_names=Y_NAMES, t_unit="min",
                 y_units=["%"] * 3)


def boehm_problem() -> tuple[Model, list[Experiment], np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """The benchmark problem: model, data, nominal parameters and their box.

    Returns
    -------
    model : Model
        :func:`build_model`.
    experiments : list of Experiment
        The one experiment (condition ``model1_data1``), ``y`` shaped
        ``(16, 3)``; its ``x0`` is the known initial state :data:`X0`.
    p_nominal : ndarray (6,)
        The parameter table's nominal values, log10 scale.
    p_bounds : (ndarray, ndarray)
        ``[-5, 5]`` for every parameter (the table's ``[1e-5, 1e5]``).

    Examples
    --------
    >>> model, experiments, p0, p_bounds = boehm_problem()
    >>> (model.nx, model.np, model.ny, experiments[0].y.shape)
    (8, 6, 3, (16, 3))
    """
    exp = Experiment(T.copy(), Y.copy(), x0=X0.copy(), name="model1_data1")
    return build_model(), [exp], P_NOMINAL.copy(), (P_BOUNDS[0].copy(), P_BOUNDS[1].copy())
