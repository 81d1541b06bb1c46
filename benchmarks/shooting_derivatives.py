"""Multiple shooting's derivatives: sensitivities integrated as states against
CasADi's forward derivative of the interval integrators.

Run::

    python benchmarks/shooting_derivatives.py [--tight] [problem ...]

For each PEtab problem vendored in ``tests/data/petab`` (default: Boehm,
Bruno, Crauste, Elowitz, Borghans), from its nominal vector, the
multiple-shooting NLP of ``method="shooting"`` (its setup on the default
first mesh) is built, and the function that gives IPOPT the objective, its
gradient, the constraints, their Jacobian and the Gauss-Newton Hessian at
one point (``methods.shooting._derivatives``) is evaluated at the NLP's
start two ways, each timed over 5 calls after one call to build:

- ``CasADi's``: ``casadi.jacobian`` of the interval integrators' sampled and
  end states (CasADi's forward sensitivities of each integrator; what the
  package did before);
- ``sensitivity states``: the states' sensitivities integrated as states
  beside them (:mod:`picard_casadi.transcription.forward_sensitivity`; the
  default).

Printed: the CPU milliseconds per call, the ratio, and the largest difference
of the constraints' Jacobians and of the gradients, relative to the largest
entry (both integrated at the package's tolerances; ``--tight`` also prints
each one's difference from the sensitivity states at ``rtol = 1e-13``).  All
measured in this one run.
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import sys
from dataclasses import replace

import casadi as ca
import numpy as np
from _petab_builds import PROBLEMS, built, cpu_ms

from picard_casadi.methods import shooting
from picard_casadi.runtime.native_output import captured_native_output
from picard_casadi.transcription.discretisation import to_map_layout
from picard_casadi.transcription.interval_integration import interval_integrator


def derivative_functions(nlp: shooting.ShootingNLP, opts: shooting.ShootingOptions
                         ) -> tuple[ca.Function, ca.Function]:
    """The package's derivative function and the same outputs from
    ``casadi.jacobian`` of the interval integrators (the route before)."""
    setup = nlp.setup
    disc, m = setup.disc, setup.disc.model
    J, M, nx, np_ = disc.n_intervals, disc.M, m.nx, m.np
    states = interval_integrator(disc, opts.rtol, opts.atol, opts.max_steps).function
    xs, ps = ca.DM(setup.x_scale), ca.DM(setup.p_scale)
    w = ca.MX.sym("w", np_ + J * nx)
    Wt, Y = ca.MX.sym("Wt", m.ny, M * J), ca.MX.sym("Y", m.ny, M * J)
    p = w[:np_] * ps
    X = ca.reshape(w[np_:], nx, J) * ca.repmat(xs, 1, J)
    Xs, xend = states(X, p)
    c = setup.tr._data_common
    r = ca.vec(Wt * (Y - m.g.map(M * J)(c["ts"], Xs, ca.repmat(p, 1, M * J), c["Ws"])))
    nxt = [j for j in range(J) if disc.has_next[j]]
    gap = ca.vec(ca.horzcat(*[(xend[:, j] - X[:, j + 1]) / xs for j in nxt]))
    Jr, Jg = ca.jacobian(r, w), ca.jacobian(gap, w)
    old = ca.Function("casadi_derivatives", [w, ca.vertcat(ca.vec(Wt), ca.vec(Y))],
                      [0.5 * ca.sumsqr(r), ca.densify(ca.mtimes(Jr.T, r)), gap, Jg,
                       ca.triu(ca.mtimes(Jr.T, Jr))])
    return nlp._derivatives["grad_f"]._cache.function, old


def main(names: list[str], tight: bool = False) -> None:
    print(f"{'problem':<26}{'intervals':>10}{'CasADi':>9}{'states':>9}{'ratio':>7}"
          f"{'jac_g diff':>12}{'grad diff':>11}   (CPU ms per call)")
    for name in names:
        nlp, opts = built(shooting.ShootingNLP, name, "shooting")
        new, old = derivative_functions(nlp, opts)
        w = nlp.start()
        data = np.concatenate([to_map_layout(nlp.setup.tr._Wt).ravel(order="F"),
                               to_map_layout(nlp.setup.disc.y).ravel(order="F")])
        times, values = [], []
        for fn in (old, new):
            try:
                with captured_native_output():
                    times.append(cpu_ms(lambda: fn(w, data)))
                    values.append(fn(w, data))
            except RuntimeError as err:  # CVODES fails at the start
                flag = str(err).rsplit("CVode returned", 1)[-1].split(".")[0].strip()
                times.append(float("nan"))
                values.append(flag or "failed")
        if any(isinstance(v, str) for v in values):
            print(f"{name:<26}{nlp.J:>10}   at the start: CasADi's "
                  f"{values[0] if isinstance(values[0], str) else 'evaluates'}, the states' "
                  f"{values[1] if isinstance(values[1], str) else 'evaluate'}", flush=True)
            continue
        a, b = values

        def rel(x, y):
            x, y = np.asarray(ca.densify(x)), np.asarray(ca.densify(y))
            return float(np.abs(x - y).max() / max(np.abs(x).max(), 1e-300))

        print(f"{name:<26}{nlp.J:>10}{times[0]:>9.1f}{times[1]:>9.1f}{times[0] / times[1]:>7.1f}"
              f"{rel(a[3], b[3]):>12.1e}{rel(a[1], b[1]):>11.1e}", flush=True)
        if tight:
            exact_nlp = shooting.ShootingNLP(nlp.setup, replace(opts, rtol=1e-13, atol=1e-14))
            e = exact_nlp._derivatives["grad_f"]._cache.function(w, data)
            print(f"{'':<26}jac_g against rtol 1e-13: CasADi's {rel(e[3], a[3]):.1e}, "
                  f"sensitivity states' {rel(e[3], b[3]):.1e}", flush=True)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--tight"]
    main(args or PROBLEMS, "--tight" in sys.argv[1:])
