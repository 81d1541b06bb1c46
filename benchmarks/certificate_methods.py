"""The certificate's accurate integration: CVODES' Adams method against BDF.

Run::

    python benchmarks/certificate_methods.py [problem ...] [--seed N]

For each problem (every registered one by default; seed 11, every default,
``picard-gn``) the whole call is made with the certificate integrating by
Adams where the model is not stiff on the mesh (the default:
``certificate.stiffness_bound`` at most ``ADAMS_MAX_STIFFNESS``, on the
dense path) and by BDF
always (``ADAMS_MAX_STIFFNESS = -1``), alternating, best of two after one call
to build.  Printed: the stiffness bound at the solution, the certificate's
time (``timings["certificate"]``, every certification of the call), its
``discretisation_error`` and ``parameter_shift`` both ways, the mesh
refinements both ways, measured in this one run.
``benchmarks/results/certificate_methods.txt`` holds a run.
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import argparse
import importlib
import warnings

import numpy as np

import picard_casadi as pc
from _alternating import summed
from picard_casadi.analysis import certificate
from picard_casadi.studies.registry import problems

_ADAMS = certificate.ADAMS_MAX_STIFFNESS
_estimate = importlib.import_module("picard_casadi.estimate")


def run(name: str, seed: int) -> tuple[float, float]:
    prob = pc.problem(name, seed=seed)
    bounds: list[float] = []  # inf on the sparse path (BDF there)
    certify = _estimate.certify

    def recorded(setup, X, p, info, **kwargs):
        Fx = info.sens.get("Fx")
        bounds.append(np.inf if Fx is None else certificate.stiffness_bound(setup, Fx))
        return certify(setup, X, p, info, **kwargs)

    _estimate.certify = recorded
    try:
        best: dict[bool, object] = {}
        for adams in (True, False):
            certificate.ADAMS_MAX_STIFFNESS = _ADAMS if adams else -1.0
            prob.estimate("picard-gn")  # builds
        for _ in range(2):
            for adams in (True, False):
                certificate.ADAMS_MAX_STIFFNESS = _ADAMS if adams else -1.0
                res = prob.estimate("picard-gn")
                if adams not in best or (res.timings["certificate"]
                                         < best[adams].timings["certificate"]):
                    best[adams] = res
    finally:
        _estimate.certify = certify
        certificate.ADAMS_MAX_STIFFNESS = _ADAMS
    a, b = best[True], best[False]
    ca_, cb = a.certificate, b.certificate
    print(f"{name:16s} {max(bounds):8.2f} {'adams' if max(bounds) <= _ADAMS else 'bdf':>6s}  "
          f"{1e3 * a.timings['certificate']:7.1f} {1e3 * b.timings['certificate']:7.1f}  "
          f"{ca_['discretisation_error']:10.4g} {cb['discretisation_error']:10.4g}  "
          f"{ca_['parameter_shift']:10.4g} {cb['parameter_shift']:10.4g}  "
          f"{a.settings['refinements']:3d} {b.settings['refinements']:3d}", flush=True)
    return a.timings["certificate"], b.timings["certificate"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="*")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    names = args.problems or problems()
    print(f"picard-gn, seed {args.seed}; certificate with Adams where not stiff (default) "
          f"and with BDF always; ADAMS_MAX_STIFFNESS = {_ADAMS}")
    print(f"{'problem':16s} {'bound':>8s} {'method':>6s}  {'default':>7s} {'BDF':>7s}  "
          f"{'disc. error (default, BDF)':>21s}  {'parameter shift':>21s}  {'refined':>7s}")
    total = summed(names, lambda name: run(name, args.seed))
    print(f"certificate time in all: default {1e3 * total[0]:.1f} ms, BDF {1e3 * total[1]:.1f} ms "
          f"({total[0] / total[1]:.3f})")


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    main()
