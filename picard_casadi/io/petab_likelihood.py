"""PEtab's likelihood at given values, without a fit (:meth:`PetabProblem.nllh_at`).

Each experiment is simulated once by CVODES from its initial state
(``method="single-shooting"`` with every entry of the table fixed), the
noise parameters held at their nominal values or at the values given: the
value is PEtab's at those values, where a fit would estimate the noise
parameters (their closed form) and solve the states.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import casadi as ca
import numpy as np

from ..errors import with_closest
from ..estimation.fallbacks import OUTPUT_NOT_POSITIVE
from ..estimation.noise_plan import ZeroAtStartError, floored_where
from ..parameters import with_starts

__all__ = ["nllh_at"]


def nllh_at(problem: Any, values: Mapping[str, float] | Sequence[float] | None = None,
            noise: Mapping[str, float] | None = None) -> float:
    """:meth:`~picard_casadi.io.petab.PetabProblem.nllh_at` of ``problem`` (see there)."""
    from ..estimate import estimate

    if isinstance(values, Mapping) and any(k in problem.noise_nominal for k in values):
        # the parameter table's noise rows, given with the others (a user's
        # nllh_at({"sd_Rp": 0.1}) was told the table lacks sd_Rp)
        noise = {**{k: v for k, v in values.items() if k in problem.noise_nominal},
                 **(noise or {})}
        values = {k: v for k, v in values.items() if k not in problem.noise_nominal} or None
    table = with_starts(problem.parameters, values) if values is not None else problem.parameters
    unknown = [k for k in (noise or {}) if k not in problem.noise_nominal]
    if unknown:
        named = ", ".join(with_closest(k, problem.noise_nominal) for k in unknown)
        raise ValueError(f"`noise` names {named}, which are not noise parameters of this "
                         f"problem (they are {', '.join(problem.noise_nominal) or 'none'})")
    held = {**problem.noise_nominal, **{k: float(v) for k, v in (noise or {}).items()}}
    bad = [k for k, v in held.items() if not (np.isfinite(v) and v > 0)]
    if bad:
        raise ValueError(f"`noise`: the noise parameter(s) {bad} must be positive and finite")
    outputs = {}
    for out, n in problem.noise.items():
        if n.is_formula:
            syms = [v for v in ca.symvar(n.sigma) if v.name() in n.parameters]
            formula = ca.substitute(n.sigma, ca.vertcat(*syms),
                                    ca.vertcat(*[held[v.name()] for v in syms]))
            outputs[out] = replace(n, sigma=formula, parameters={})
        elif isinstance(n.sigma, str) and n.sigma != "data":
            outputs[out] = replace(n, sigma=held[n.sigma])
        else:
            outputs[out] = n
    experiments = [e.replaced(noise_parameters={
        k: held[v] if isinstance(v, str) else v for k, v in e.noise_parameters.items()})
        if e.noise_parameters else e for e in problem.experiments]
    fixed = [replace(q, estimate=False) for q in table]
    # one interval per experiment: single shooting integrates each
    # experiment in one CVODES run whatever the mesh, and a finer mesh only
    # builds the collocation's set-up (docs/petab.md)
    span = max(e.t_end - e.t0 for e in experiments)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fit check's notes on a fit nobody made
        try:
            res = estimate(problem.model, experiments, fixed, noise=outputs,
                           method="single-shooting", uncertainty=False,
                           T=span if span > 0 else None)
        except ZeroAtStartError as err:  # a log observable measured where it starts at 0
            res, at_start = None, err.where
    if res is None:
        warnings.warn(f"PEtab's likelihood is not finite at these values: {at_start} measured "
                      "at t = 0, where its known initial states make it 0, and its noise is "
                      "log-normal: nllh_at returns inf", UserWarning, stacklevel=3)
        return float("inf")
    where = floored_where([res.message]) if res.status == OUTPUT_NOT_POSITIVE else ""
    if not where and not np.isfinite(res.nllh):
        raise ValueError(f"the model cannot be simulated at these values: {res.message}")
    if where:
        # the logarithm of a simulated 0 or negative value: the fit's floor
        # keeps the objective finite, PEtab's likelihood is not
        where = where.replace("at the estimate", "in the simulation")
        warnings.warn(f"PEtab's likelihood is not finite at these values: {where}, and its "
                      "noise is log-normal: nllh_at returns inf",
                      UserWarning, stacklevel=3)
        return float("inf")
    return float(res.nllh) + sum(q.prior_nllh() for q in table if q.estimate)
