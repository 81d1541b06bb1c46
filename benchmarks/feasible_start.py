"""The condensed QP's feasible start: the dual active-set method against Newton's.

Run::

    python benchmarks/feasible_start.py                       # the default cases below
    python benchmarks/feasible_start.py fa18-roll-rud:12:auto cmg:0:none

Each case is ``problem:seed:weights`` (``weights`` ``auto`` -- every default,
the first mesh certified and refined where needed -- or ``none``).  Where
closing the gaps moves later interval starts out of the state box, the
condensed step needs a feasible start for its QP
(``least_squares.least_violation``).  It is now the smallest feasible
``theta`` by a dual active-set method (``least_squares.nearest_feasible``);
before, Newton's method on the piecewise-quadratic violation.  Every case is
solved with ``picard-gn`` both ways, alternating, best of two (after one call
each to build): printed are the starts that needed finding (``theta = 0``
not feasible) and their time both ways, iterations and whole-call times both
ways, and the largest relative difference of the estimates, measured in this
one run.  ``benchmarks/results/feasible_start.txt`` holds a run.
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import time
import warnings

import numpy as np

from _alternating import best_of_two, case_problem, compare_cases, comparison
from picard_casadi.methods import condensed, least_squares

_dual = least_squares.least_violation
_nearest = least_squares.nearest_feasible
_found: list[float] = []  # seconds per start found (theta = 0 infeasible)


def _newton(C, d, lo, hi, scale, max_rounds=50):
    """``least_violation`` as before: Newton's method on the violation only."""
    least_squares.nearest_feasible = lambda *args, **kwargs: None
    try:
        return _dual(C, d, lo, hi, scale, max_rounds)
    finally:
        least_squares.nearest_feasible = _nearest


def _timed(method):
    def start(C, d, lo, hi, scale, max_rounds=50):
        t = time.perf_counter()
        theta = method(C, d, lo, hi, scale, max_rounds)
        if np.any((d < lo) | (d > hi)):
            _found.append(time.perf_counter() - t)
        return theta
    return start


def _use(dual: bool, timed: bool = False) -> None:
    method = _dual if dual else _newton
    condensed.least_violation = _timed(method) if timed else method


def run(case: str) -> tuple[float, float]:
    prob, kw = case_problem(case)
    found = {}
    for dual in (False, True):
        _use(dual, timed=True)
        _found.clear()
        prob.estimate("picard-gn", **kw)  # builds; the starts timed
        found[dual] = (len(_found), sum(_found))
    off, on = best_of_two(prob, kw, _use)
    print(f"{case:24s} {found[False][0]:4d} {1e3 * found[False][1]:8.1f} "
          f"{found[True][0]:4d} {1e3 * found[True][1]:8.1f}  {comparison(off, on)}", flush=True)
    return off[1], on[1]


def main() -> None:
    compare_cases(
        run, "picard-gn; feasible starts found (theta = 0 infeasible) and their time [ms], "
        "Newton / dual active set; iterations and whole call [s] Newton / dual; largest "
        "relative difference of p",
        f"{'case':24s} {'n':>4s} {'Newton':>8s} {'n':>4s} {'dual':>8s}  {'it':>7s}  "
        f"{'call [s]':>13s}  {'p':>8s}", "Newton", "dual active set")


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    main()
