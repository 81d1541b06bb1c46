"""The PEtab test suite (v1.0.0, SBML cases) against the PEtab importer.

The cases are vendored in ``tests/data/petab_suite`` (github.com/PEtab-dev/
petab_test_suite, BSD-3, see its README and LICENSE).  Each case either

- imports, and the imported problem simulated with CVODES at the nominal
  parameters gives the case's expected log-likelihood (``llh``, within
  ``tol_llh``) and its expected simulation table (within
  ``tol_simulations``), the likelihood computed by hand from the imported
  noise models, independently of ``estimate``; or
- is refused by ``read_petab`` with a ``NotImplementedError`` naming the
  construct the package cannot state (``REFUSED``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc

pytest.importorskip("libsbml")
pytest.importorskip("petab")
# the petab library's own pandas deprecations
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:petab")

import pandas as pd  # noqa: E402  (petab's dependencies)
import yaml as pyyaml  # noqa: E402

from picard_casadi.io.petab import PetabProblem, read_petab  # noqa: E402

SUITE = Path(__file__).parent / "data" / "petab_suite"
CASES = sorted(p.name for p in SUITE.iterdir() if p.is_dir())

#: the cases the package cannot state: the error names the construct
REFUSED = {
}


def _sigma(prob: PetabProblem, e: pc.Experiment, name: str, g: np.ndarray,
           data: np.ndarray) -> np.ndarray:
    """Each measurement's noise standard deviation at the nominal parameters."""
    noise = prob.noise[name]
    if noise.is_formula:
        syms = [s for s in ca.symvar(noise.sigma) if s.name() in noise.parameters]
        args = [noise.output] if noise.output is not None else []
        f = ca.Function("sigma", [*args, *syms], [noise.sigma])
        values = [prob.noise_nominal[s.name()] for s in syms]
        if noise.output is None:
            return np.full(g.size, float(f(*values)))
        return np.array([float(f(gi, *values)) for gi in g])
    if noise.sigma == "data":
        return data
    if isinstance(noise.sigma, str):
        v = e.noise_parameters.get(noise.sigma, noise.sigma)
        return np.full(g.size, v if not isinstance(v, str) else prob.noise_nominal[v])
    return np.full(g.size, float(noise.sigma))


def simulate_nominal(prob: PetabProblem, values: dict[str, float] | None = None,
                     rtol: float = 1e-10) -> tuple[float, pd.DataFrame]:
    """PEtab's log-likelihood at the nominal values (or at ``values``), by hand,
    and the simulated observables (condition, observable, time, simulation),
    one row per measurement row of each experiment; a preequilibration
    simulated until t = 1e4, then the reset states set.  CVODES' ``rtol``
    (its ``atol`` a hundredth of it)."""
    model = prob.model
    start = {q.name: q.start for q in prob.parameters} | dict(values or {})
    x0_of = ca.Function("x0_of", [model.p], [model.x0_expression])
    llh = 0.0
    rows = []
    for e in prob.experiments:
        p = np.array([start[v] if isinstance(v, str) else v
                      for v in (e.parameters.get(n, n) for n in model.p_names)])
        x0 = np.asarray(x0_of(p), float).ravel()
        settle = e.preequilibration
        if settle is not None:  # by hand: long enough to settle, then the resets
            p_pre = np.array([settle.parameters.get(n, v) for n, v in zip(model.p_names, p)])
            p_pre = np.array([start[v] if isinstance(v, str) else v for v in p_pre], float)
            steady = pc.simulate(model, np.asarray(x0_of(p_pre), float).ravel(), p_pre,
                                 [1e4], t0=0.0, rtol=rtol, atol=rtol * 1e-2)[-1]
            kept = [k for k, n in enumerate(model.x_names) if n not in settle.reset]
            x0[kept] = steady[kept]
        X = pc.simulate(model, x0, p, e.t, t0=e.t0, rtol=rtol, atol=rtol * 1e-2)
        G = np.array([np.asarray(model.output_value(t, x, p), float).ravel()
                      for t, x in zip(e.t, X)])
        for k, name in enumerate(model.y_names):
            ok = ~np.isnan(e.y[:, k])
            y, g = e.y[ok, k], G[ok, k]
            data = e.sigma[ok, k] if e.sigma is not None else None
            sigma = _sigma(prob, e, name, g, data)
            distribution = prob.noise[name].distribution
            if distribution == "normal":
                r, c = y - g, 0.0
            elif distribution == "log-normal":
                r, c = np.log(y) - np.log(g), np.log(y)
            else:
                r, c = np.log10(y) - np.log10(g), np.log(y * np.log(10))
            llh -= float(np.sum(0.5 * np.log(2 * np.pi * sigma ** 2)
                                + 0.5 * (r / sigma) ** 2 + c))
            # (measurements at the steady state: PEtab's time = inf)
            steady = e.name.endswith(" (steady state)")
            rows += [(e.name.removesuffix(" (steady state)").split(":")[-1],
                      prob.observable_ids[name], np.inf if steady else t, gi)
                     for t, gi in zip(e.t[ok], g)]
    sim = pd.DataFrame(rows, columns=["simulationConditionId", "observableId", "time",
                                      "simulation"])
    return llh, sim


def _case(case: str) -> tuple[Path, dict, pd.DataFrame]:
    folder = SUITE / case
    solution = pyyaml.safe_load((folder / f"_{case}_solution.yaml").read_text())
    expected = pd.concat([pd.read_csv(folder / f, sep="\t")
                          for f in solution["simulation_files"]], ignore_index=True)
    return folder / f"_{case}.yaml", solution, expected


@pytest.mark.parametrize("case", CASES)
def test_petab_suite_case(case):
    yaml, solution, expected = _case(case)
    if case in REFUSED:
        with pytest.raises(NotImplementedError, match=REFUSED[case]):
            read_petab(yaml)
        return
    prob = read_petab(yaml)
    llh, sim = simulate_nominal(prob)
    assert llh == pytest.approx(solution["llh"], abs=solution["tol_llh"])
    # every expected simulated value, matched by condition, observable and time
    # (replicates: the same simulated value each)
    tol = solution["tol_simulations"]
    key = ["simulationConditionId", "observableId", "time"]
    ours = sim.drop_duplicates(key).set_index(key)["simulation"]
    for _, row in expected.iterrows():
        k = (str(row["simulationConditionId"]), str(row["observableId"]), float(row["time"]))
        assert k in ours.index, f"case {case}: no simulation of {k}"
        assert ours[k] == pytest.approx(float(row["simulation"]), abs=tol), (case, k)


def test_every_case_is_checked():
    assert len(CASES) == 20 and set(REFUSED) <= set(CASES)


@pytest.mark.parametrize("case", ["0009", "0010", "0017", "0018"])
def test_a_preequilibrated_case_is_estimated_at_the_likelihood_s_optimum(case):
    """The restated problem (the settling simulated before t = 0 as a part of
    the experiment, reset states doubled) against the likelihood by hand (the
    steady state simulated apart, the resets set): the same value at the
    estimate, and nothing lower a tenth of a standard error either side."""
    yaml, _, _ = _case(case)
    prob = read_petab(yaml)
    free = [q.name for q in prob.parameters if q.estimate]
    if case == "0009":  # two measurements for three parameters: k2 alone
        prob.parameters = [q if q.name == "k2" else replace(q, estimate=False)
                           for q in prob.parameters]
        free = ["k2"]
    res = pc.estimate(prob.model, prob.experiments, prob.parameters, noise=prob.noise)
    assert res.success, res.message
    at = dict(zip(res.p_names, res.p))
    assert -simulate_nominal(prob, at)[0] == pytest.approx(res.nllh, abs=1e-6)
    for name in free:
        k = list(res.p_names).index(name)
        for side in (-0.1, 0.1):
            moved = at | {name: at[name] + side * res.p_std[k]}
            assert -simulate_nominal(prob, moved)[0] > res.nllh - 1e-9


def test_a_condition_measured_at_the_start_only(tmp_path):
    """Case 0001 with its two measurements in two (equal) conditions, one
    measured at t = 0 only (the initial state, as Schwen's and Lucarelli's):
    it imports with an unmeasured time after 0, and the likelihood is the
    case's."""
    import shutil

    yaml, solution, _ = _case("0001")
    folder = tmp_path / "0001"
    shutil.copytree(yaml.parent, folder)
    (folder / "_conditions.tsv").write_text("conditionId\nc0\nc1\n")
    (folder / "_measurements.tsv").write_text(
        "observableId\tsimulationConditionId\ttime\tmeasurement\n"
        "obs_a\tc0\t0\t0.7\nobs_a\tc1\t10\t0.1\n")
    prob = read_petab(folder / yaml.name)
    start = next(e for e in prob.experiments if e.name == "c0")
    assert start.t.tolist() == [0.0, 10.0] and np.isnan(start.y[1, 0])
    llh, _ = simulate_nominal(prob)
    assert llh == pytest.approx(solution["llh"], abs=solution["tol_llh"])
