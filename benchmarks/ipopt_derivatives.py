"""IPOPT's compiled NLP: its derivatives from the NLP's structure against CasADi's own.

Run::

    python benchmarks/ipopt_derivatives.py [--problems cmg,fa18-roll-rud] [--seed 11]

For each problem (``refine=False``, the registry's weights, so every form
solves the same NLP from the same start), IPOPT is run on four forms of the
collocation NLP: compiled with the Hessian of the Lagrangian and the
constraints' Jacobian written interval by interval
(``methods/collocation_derivatives.py``, the default), compiled with
CasADi's own derivatives of the mapped graph (what the package did before),
and on CasADi's virtual machine: the same per-interval NLP and derivatives
(the default without a compiler) and the whole NLP expanded to SX with
CasADi's derivatives (``expand=True``; the default before).  Each form is
called once to build (and compile, into the usual code cache) and then
timed.  Prints, per form, IPOPT's iterations and objective, the solve and
build times of the timed call, the wall time IPOPT spent in the Hessian and
the Jacobian per evaluation, and the structured form's solve time over the
others, all measured in this one run.

``--agreement`` instead solves every registered problem but cmg (whose
expanded NLP takes about two minutes per call) with IPOPT compiled (the
structured derivatives), on the virtual machine per interval (the same
derivatives) and expanded (CasADi's derivatives of the expanded graph),
seed 1, ``refine=False``, and prints the iteration counts, the build and
solve times on the virtual machine, and the largest relative difference of
the estimates from the expanded form's::

    python benchmarks/ipopt_derivatives.py --agreement
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import argparse
import time
import warnings

import numpy as np

import picard_casadi as pc
from picard_casadi.methods import ipopt

STATS: list[dict] = []
_solve = ipopt.CollocationNLP.solve


def _recorded(self):
    out = _solve(self)
    STATS.append(self.solver.stats())
    return out


ipopt.CollocationNLP.solve = _recorded


def run(prob, form: str):
    """One timed call of IPOPT on ``form``; returns the result, wall time and
    IPOPT's statistics summed over the call's solves."""
    ipopt.STRUCTURED_DERIVATIVES = form != "casadi"
    codegen = not form.startswith("VM")
    kwargs = dict(refine=False, uncertainty=False, codegen=codegen, expand=form == "VM expanded")
    prob.estimate("ipopt", **kwargs)  # builds (and compiles) this form
    STATS.clear()
    t = time.perf_counter()
    res = prob.estimate("ipopt", **kwargs)
    wall = time.perf_counter() - t
    total: dict[str, float] = {}
    for st in STATS:
        for k in ("t_wall_nlp_hess_l", "t_wall_nlp_jac_g", "n_call_nlp_hess_l",
                  "n_call_nlp_jac_g"):
            total[k] = total.get(k, 0.0) + float(st.get(k, 0.0) or 0.0)
    return res, wall, total


def agreement(seed: int = 1) -> None:
    """Compiled (structured derivatives) and the virtual machine's per-interval
    form against the expanded form (CasADi's derivatives), every registered
    problem but cmg."""
    print(f"seed {seed}, refine=False: IPOPT compiled (structured derivatives), on the "
          "virtual machine per interval (same derivatives) and expanded (CasADi's); "
          "first calls, build and solve [s]")
    for name in pc.problems():
        if name == "cmg":
            continue
        prob = pc.problem(name, seed=seed)
        kwargs = dict(uncertainty=False, refine=False)
        a = prob.estimate("ipopt", codegen=True, **kwargs)
        b = prob.estimate("ipopt", codegen=False, **kwargs)
        c = prob.estimate("ipopt", codegen=False, expand=True, **kwargs)

        def rel(x):
            return float(np.max(np.abs(x.p - c.p) / np.maximum(np.abs(c.p), 1e-12)))

        print(f"{name:16s} compiled {str(a.success)[0]} {a.iterations:3d} it | VM per interval "
              f"{str(b.success)[0]} {b.iterations:3d} it {b.timings['build']:5.2f} "
              f"{b.timings['solve']:5.2f} | VM expanded {str(c.success)[0]} {c.iterations:3d} it "
              f"{c.timings['build']:5.2f} {c.timings['solve']:5.2f} | largest relative "
              f"difference of p from expanded: compiled {rel(a):.1e}, per interval "
              f"{rel(b):.1e}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", default="cmg,fa18-roll-rud")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--agreement", action="store_true",
                    help="every registered problem but cmg: compiled against the virtual machine")
    args = ap.parse_args()
    # refine=False on purpose (one NLP for every form): no certificate warnings
    warnings.filterwarnings("ignore", category=pc.DiscretisationWarning)
    if args.agreement:
        agreement(1 if args.seed == 11 else args.seed)
        return
    print(f"seed {args.seed}, refine=False, one BLAS thread; build once, then timed")
    print(f"{'problem':15s} {'form':16s} {'it':>4s} {'objective':>18s} {'solve [s]':>9s} "
          f"{'build [s]':>9s} {'Hessian [ms/eval]':>17s} {'Jacobian [ms/eval]':>18s}")
    for name in args.problems.split(","):
        prob = pc.problem(name, seed=args.seed)
        solves = {}
        for form in ("structured", "casadi", "VM per interval", "VM expanded"):
            res, wall, st = run(prob, form)
            solves[form] = res.timings.get("solve", 0.0)
            hess = 1e3 * st["t_wall_nlp_hess_l"] / max(st["n_call_nlp_hess_l"], 1)
            jac = 1e3 * st["t_wall_nlp_jac_g"] / max(st["n_call_nlp_jac_g"], 1)
            print(f"{name:15s} {form:16s} {res.iterations:4d} {res.objective:18.12g} "
                  f"{solves[form]:9.2f} {res.timings.get('build', 0.0):9.2f} {hess:17.2f} "
                  f"{jac:18.2f}", flush=True)
        print(f"{'':15s} structured solve / CasADi's derivatives = "
              f"{solves['structured'] / solves['casadi']:.3f}; / VM per interval = "
              f"{solves['structured'] / solves['VM per interval']:.3f}; / VM expanded = "
              f"{solves['structured'] / solves['VM expanded']:.3f}", flush=True)
    ipopt.STRUCTURED_DERIVATIVES = True


if __name__ == "__main__":
    main()
