"""The settles' later Newton steps, evaluated on the intervals they move only.

Run::

    python benchmarks/settle_subsets.py                       # the default cases
    python benchmarks/settle_subsets.py fa18-drag:12:auto cmg:0:none

Each case is ``problem:seed:weights`` (``weights`` ``auto`` -- every default --
or ``none``).  A trial point's settle takes dense Newton steps on the
intervals not yet settled (often a third to a tenth of them); with generated
code, ``f`` and ``f_x`` are evaluated at those intervals' nodes only
(``sensitivity.newton_fixed_point_step``) and each halving of a damped step
applies the Picard map to the intervals it moves only
(``Transcription.picard_of``), where before both were evaluated on every
interval and the rows picked.  Every case is solved with ``picard-gn`` both
ways, alternating, best of two: iterations, whole calls and the largest
relative difference of the estimates (the same numbers are computed, so 0),
measured in this one run.  ``benchmarks/results/settle_subsets.txt`` holds a
run.
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import warnings

from _alternating import best_of_two, case_problem, compare_cases, comparison
from picard_casadi.transcription.functions import sensitivity
from picard_casadi.transcription import functions as transcription

_native = sensitivity.NativeFunction
_picard_of = transcription.Transcription.picard_of


class _NotCompiled:
    """Stands for the compiled function class: no ``f_der`` is one (before)."""


def _whole_picard_of(self, X, U, p, idx, rows):
    """``picard_of`` as before: the Picard map on every interval, rows picked."""
    U = U.copy()
    U[idx] = rows
    return self.picard(X, U, p)[idx]


def _use(subsets: bool) -> None:
    sensitivity.NativeFunction = _native if subsets else _NotCompiled
    transcription.Transcription.picard_of = _picard_of if subsets else _whole_picard_of


def run(case: str) -> tuple[float, float]:
    prob, kw = case_problem(case)
    off, on = best_of_two(prob, kw, _use)
    print(f"{case:24s} {comparison(off, on)}", flush=True)
    return off[1], on[1]


def main() -> None:
    compare_cases(
        run, "picard-gn; settles' Newton steps on every interval (before) / on the "
        "intervals they move: iterations and whole call [s]; largest relative difference of p",
        f"{'case':24s} {'it':>7s}  {'call [s]':>13s}  {'p':>8s}", "every interval",
        "the intervals moved")


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    main()
