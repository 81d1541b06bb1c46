"""Which second-order corrections the size guard skips, and what that saves.

Run::

    python benchmarks/soc_guard.py                       # the default cases below
    python benchmarks/soc_guard.py fa18-roll-rud:12:auto cmg:0:none

Each case is ``problem:seed:weights`` (``weights`` ``auto`` -- every default,
the first mesh certified and refined where needed -- or ``none``).  The
constrained step corrects a trial whose merit ratio is poor by closing its
new gaps along the old linearisation (``condensed.SOC_RATIO``); the guard
skips the correction where it would move an interval start by more than
``SOC_MAX_SHIFT_RADII`` trust-region radii or ``SOC_MAX_SHIFT`` of the
state's scale.  Every case is solved with ``picard-gn`` with the guard off
and on, alternating, best of two (after one call each to build): printed
are the corrections tried with the guard off, how many of them were kept
(lowered the merit below the plain trial's), how many the guard skips and
how many of those were kept, iterations and whole-call times both ways,
and the largest relative difference of the estimates, measured in this one
run.  ``benchmarks/results/soc_guard.txt`` holds a run.
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import warnings

import numpy as np

from _alternating import best_of_two, case_problem, compare_cases, comparison
from picard_casadi.methods import condensed

_ON = (condensed.SOC_MAX_SHIFT_RADII, condensed.SOC_MAX_SHIFT)
_log: list[tuple[bool, bool]] = []  # per correction tried: (skipped by the guard, kept)
_correction = condensed.ConstrainedGaussNewtonStep._second_order_correction
_tried = condensed.ConstrainedGaussNewtonStep._tried


_marks: list[bool] = []  # the corrections of the current trial: skipped by the guard?


def _marked_correction(self, Xn, pn, U_new, c_new, E, S_nodes):
    d = condensed.gap_closing_shift(self.setup.disc, E, c_new)
    _marks.append(not float(np.max(np.abs(d), initial=0.0)) <= min(_ON[0] * self.radius,
                                                                     _ON[1]))
    return _correction(self, Xn, pn, U_new, c_new, E, S_nodes)


def _logged_tried(self, Xn, pn, U_start, merit, predicted, correct):
    _marks.clear()
    out = _tried(self, Xn, pn, U_start, merit, predicted, correct)
    if _marks:
        # kept: the point returned is the corrected one (its starts moved)
        _log.append((_marks[0], not np.array_equal(out[0], Xn)))
    return out


def _guard(on: bool) -> None:
    condensed.SOC_MAX_SHIFT_RADII, condensed.SOC_MAX_SHIFT = _ON if on else (np.inf, np.inf)


def run(case: str) -> tuple[float, float]:
    prob, kw = case_problem(case)
    # corrections with the guard off, each marked with what the guard would do
    _guard(False)
    _log.clear()
    condensed.ConstrainedGaussNewtonStep._second_order_correction = _marked_correction
    condensed.ConstrainedGaussNewtonStep._tried = _logged_tried
    try:
        prob.estimate("picard-gn", **kw)
    finally:
        condensed.ConstrainedGaussNewtonStep._tried = _tried
        condensed.ConstrainedGaussNewtonStep._second_order_correction = _correction
    tried = len(_log)
    kept = sum(k for _, k in _log)
    skipped = sum(s for s, _ in _log)
    skipped_kept = sum(s and k for s, k in _log)
    off, on = best_of_two(prob, kw, _guard)
    print(f"{case:24s} {tried:4d} {kept:4d} {skipped:4d} {skipped_kept:4d}  "
          f"{comparison(off, on)}", flush=True)
    return off[1], on[1]


def main() -> None:
    compare_cases(
        run, "picard-gn; second-order corrections tried (guard off), kept, skipped by the "
        "guard, skipped though kept; iterations and whole call [s] off/on; largest relative "
        "difference of p",
        f"{'case':24s} {'try':>4s} {'kept':>4s} {'skip':>4s} {'s&k':>4s}  {'it':>7s}  "
        f"{'call [s]':>13s}  {'p':>8s}", "guard off", "on")


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    main()
