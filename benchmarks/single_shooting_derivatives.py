"""Single shooting's residuals and Jacobian: one CVODES run per experiment and
sensitivities as states, against a run per interval and CasADi's derivative.

Run::

    python benchmarks/single_shooting_derivatives.py [--tight] [problem ...]

For each PEtab problem vendored in ``tests/data/petab`` (default: Boehm,
Bruno, Crauste, Elowitz, Borghans), from its nominal vector, the
single-shooting residuals of ``method="single-shooting"`` (its setup on the
default first mesh) are evaluated four ways, each timed over 5 calls after
one call to build:

- ``residuals, a run per interval``: CVODES restarted at every interval of
  the mesh (what the package did before);
- ``residuals, one run``: consecutive intervals whose inputs are one
  constant integrated by one CVODES run (the default);
- ``Jacobian, CasADi's``: ``casadi.jacobian`` of the residuals through the
  chain of a run per interval (CasADi's forward sensitivities of each
  integrator; what the package did before);
- ``Jacobian, sensitivity states``: the states' sensitivities integrated
  as states beside them, one run (the default).

and the sensitivities of every interval from its own start (what the
standard errors of ``method="single-shooting"`` and ``"shooting"`` are
built from, ``methods.shooting.shooting_sensitivity``), at the
single-shooting trajectory's interval starts, two ways: CASADi's
forward derivatives of the interval integrators (``casadi.jtimes``, what the
package did before) and the sensitivity states (the default).

Printed: the CPU milliseconds per call, the ratios, and the largest
difference of the two Jacobians relative to the largest entry (both
integrated at the same tolerances; ``--tight`` also prints each one's
difference from the sensitivity states at ``rtol = 1e-13``).  All measured
in this one run.
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import sys
from dataclasses import replace

import casadi as ca
import numpy as np
from _petab_builds import PROBLEMS, built, cpu_ms

from picard_casadi.methods import single_shooting
from picard_casadi.transcription import interval_integration


def per_interval_residuals(model, opts) -> ca.Function:
    """The residuals through a chain restarted at every interval, and their
    Jacobian by CasADi (the package's route before)."""
    setup = model.setup
    disc, m = setup.disc, setup.disc.model
    pieces = interval_integration._constant_pieces
    interval_integration._constant_pieces = lambda d: [([j], None) for j in range(d.n_intervals)]
    try:
        chain = interval_integration.chained_interval_states(disc, opts.rtol, opts.atol,
                                                             opts.max_steps)
    finally:
        interval_integration._constant_pieces = pieces
    J, M, nx, np_, E = disc.n_intervals, disc.M, m.nx, m.np, model.E
    w = ca.MX.sym("w", np_ + E * nx)
    Wt, Y = ca.MX.sym("Wt", m.ny, M * J), ca.MX.sym("Y", m.ny, M * J)
    p = w[:np_] * ca.DM(setup.p_scale)
    X0 = ca.reshape(w[np_:], nx, E) * ca.repmat(ca.DM(setup.x_scale), 1, E)
    c = setup.tr._data_common
    G = m.g.map(M * J)(c["ts"], chain(X0, p)[0], ca.repmat(p, 1, M * J), c["Ws"])
    r = ca.vec(Wt * (Y - G))
    return (ca.Function("r", [w, Wt, Y], [r]),
            ca.Function("J", [w, Wt, Y], [r, ca.jacobian(r, w)]))


def jtimes_interval_sensitivities(setup, opts) -> ca.Function:
    """Every interval's outputs and their derivatives in its start and the
    parameters by ``casadi.jtimes`` through the interval integrators (the
    route ``shooting_sensitivity`` took before)."""
    disc = setup.disc
    m = disc.model
    J, M, nx, np_ = disc.n_intervals, disc.M, m.nx, m.np
    states = interval_integration.interval_integrator(disc, opts.rtol, opts.atol,
                                                      opts.max_steps).function
    Xm, pm = ca.MX.sym("X", nx, J), ca.MX.sym("p", np_)
    Xs, xend = states(Xm, pm)
    c = setup.tr._data_common
    G = m.g.map(M * J)(c["ts"], Xs, ca.repmat(pm, 1, M * J), c["Ws"])
    seeds = np.zeros((nx * J + np_, nx + np_))
    for a in range(nx):
        seeds[a:nx * J:nx, a] = 1.0
    seeds[nx * J:, nx:] = np.eye(np_)
    w = ca.vertcat(ca.vec(Xm), pm)
    return ca.Function("jtimes_sensitivities", [Xm, pm],
                       [G, ca.jtimes(ca.vec(G), w, ca.DM(seeds)), xend,
                        ca.jtimes(ca.vec(xend), w, ca.DM(seeds))])


def main(names: list[str], tight: bool = False) -> None:
    from picard_casadi.methods.shooting import shooting_sensitivity

    print(f"{'problem':<26}{'intervals':>10}{'run/interval':>14}{'one run':>9}{'ratio':>7}"
          f"{'CasADi J':>10}{'states J':>10}{'ratio':>7}{'J diff':>9}"
          f"{'jtimes SE':>11}{'states SE':>11}{'ratio':>7}   (CPU ms per call)")
    for name in names:
        model, opts = built(single_shooting.SingleShootingModel, name, "single-shooting")
        w = model.start()
        Wt, Y = model.data()
        r_old, J_old = per_interval_residuals(model, opts)
        old_r = cpu_ms(lambda: r_old(w, Wt, Y))
        new_r = cpu_ms(lambda: model.residuals(w, Wt, Y))
        old_J = cpu_ms(lambda: J_old(w, Wt, Y))
        new_J = cpu_ms(lambda: model.jacobian(w, Wt, Y))
        a = np.asarray(ca.densify(J_old(w, Wt, Y)[1]))[:, model.free]
        b = model.jacobian(w, Wt, Y)[1][:, model.free]
        diff = float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-300))
        setup = model.setup
        # the interval starts of the single-shooting trajectory (continuous)
        X, p = np.asarray(model.trajectory(w)[2]).T, w[:model.np] * setup.p_scale
        old_se_fn = jtimes_interval_sensitivities(setup, opts)
        old_se = cpu_ms(lambda: old_se_fn(X.T, p))
        new_se = cpu_ms(lambda: shooting_sensitivity(setup, opts, X, p))
        print(f"{name:<26}{setup.disc.n_intervals:>10}{old_r:>14.1f}{new_r:>9.1f}"
              f"{old_r / new_r:>7.1f}{old_J:>10.1f}{new_J:>10.1f}{old_J / new_J:>7.1f}"
              f"{diff:>9.1e}{old_se:>11.1f}{new_se:>11.1f}{old_se / new_se:>7.1f}", flush=True)
        if tight:
            exact = single_shooting.SingleShootingModel(
                setup, replace(opts, rtol=1e-13, atol=1e-14)).jacobian(w, Wt, Y)[1][:, model.free]
            size = np.abs(exact).max()
            print(f"{'':<26}against rtol 1e-13: CasADi's {np.abs(a - exact).max() / size:.1e}, "
                  f"sensitivity states' {np.abs(b - exact).max() / size:.1e}", flush=True)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--tight"]
    main(args or PROBLEMS, "--tight" in sys.argv[1:])
