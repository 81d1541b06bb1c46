"""Residuals that follow an input's rate of change.

An input recorded early or late against the outputs (a sensor's delay, two
loggers' clocks apart) leaves residuals that follow its rate of change: the
outputs respond to ``u(t - d) ~ u(t) - d u'(t)``.  The estimates absorb part
of it and the rest looks like noise a little too large: a Windkessel's flow
recorded three samples (12 ms) early moved R, C and Zc by 12 to 32 standard
errors, and the only note said the errors were "too narrow by 1.3 times".
Regressed on the input's rate, such residuals show it: R^2 0.12 over 1042
samples there (0.000 with the flow on time); white residuals of a right
model give about ``1 / N``.  A model that lacks a term in that rate (an
inertance) leaves the same.  So does an output measured late: its residuals
follow its own rate, ``y(t - d) ~ y(t) - d y'(t)`` (a motor's current read
2 ms late by its sensor: L 55 standard errors off, unflagged; the fitted
current's rate explains 21 % of the residuals there, none on time).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..inputs import sampled_input_names
from .fit_check import LACK_OF_FIT, noise_variance

__all__ = ["input_rate_notes", "own_input_rate_notes", "RATE_R2", "RATE_EVIDENCE",
           "RATE_SIZE", "RATE_NOTE"]

#: the share of an output's residual variance the input's rate explains ...
RATE_R2 = 0.05
#: ... and its evidence, N R^2 (a chi-square with one degree of freedom under
#: white residuals: 30 is a p-value of 4e-8)
RATE_EVIDENCE = 30.0
#: ... and the part it explains at least this many of the data's own noise
#: levels (:func:`~picard_casadi.analysis.fit_check.noise_variance`): the
#: book's noise-free simulation of an unstable aircraft left residuals of
#: 1e-10 that follow its elevator's rate (R^2 0.13 to 0.37), a numerical
#: trace of its own input reading, not a misfit
RATE_SIZE = 0.25
#: how the note goes on after the output and experiment
RATE_NOTE = ": the residuals follow the rate of change of"


def input_rate_notes(data: Sequence[np.ndarray], fitted: Sequence[np.ndarray],
                     times: Sequence[np.ndarray], inputs: Sequence[np.ndarray | None],
                     experiment_names: Sequence[str], output_names: Sequence[str],
                     input_names: Sequence[str]) -> list[str]:
    """A lack-of-fit note per output and experiment whose residuals the rate
    of change of one of its inputs, or of the fitted output itself, explains
    (:data:`RATE_R2` of their variance, with :data:`RATE_EVIDENCE`, a part
    :data:`RATE_SIZE` of the data's noise level or more).

    Parameters
    ----------
    data, fitted : (N, ny) arrays per experiment
    times : (N,) sample times per experiment
    inputs : (N, nu) inputs at the samples per experiment (the user's own
        inputs; None where it has none)
    experiment_names, output_names, input_names : names
    """
    notes = []
    for e, (Y, G, t, U) in enumerate(zip(data, fitted, times, inputs)):
        t = np.asarray(t, float)
        if t.size < 3 or np.any(np.diff(t) <= 0):
            continue
        Y, G = np.asarray(Y, float), np.asarray(G, float)
        U = np.zeros((t.size, 0)) if U is None else np.asarray(U, float).reshape(t.size, -1)
        rates = np.gradient(U, t, axis=0) if U.shape[1] else U
        for k, output in enumerate(output_names):
            r = Y[:, k] - G[:, k]
            # each input's rate, then the output's own (measured late or early)
            columns = [rates[:, j] for j in range(min(rates.shape[1], len(input_names)))]
            columns.append(np.gradient(G[:, k], t) if np.all(np.isfinite(G[:, k]))
                           else np.full(t.size, np.nan))
            best = (0.0, -1)
            for j, rate in enumerate(columns):
                r2 = _explained(r, rate)
                if r2 >= RATE_R2 and np.count_nonzero(np.isfinite(r)) * r2 >= RATE_EVIDENCE \
                        and r2 > best[0]:
                    best = (r2, j)
            if best[1] >= 0:
                level = noise_variance(Y[np.isfinite(r), k])
                explained = np.sqrt(best[0]) * float(np.std(r[np.isfinite(r)]))
                if not explained >= RATE_SIZE * np.sqrt(max(level, 0.0)):
                    best = (0.0, -1)
            r2, j = best
            if j < 0:
                continue
            head = (f"{LACK_OF_FIT} of output {output!r} in experiment {experiment_names[e]!r}"
                    f"{RATE_NOTE} ")
            share = (f" (it explains {r2:.0%} of their variance over "
                     f"{int(np.count_nonzero(np.isfinite(r)))} samples; white residuals would "
                     "give about none): ")
            if j < len(columns) - 1:
                notes.append(
                    f"{head}input {input_names[j]!r}{share}as where that input is recorded "
                    "early or late against the outputs (a sensor's delay, clocks apart), or "
                    "where the model lacks a term in its rate; Model(input_delays=...) "
                    "estimates a delay (docs/problem_statement.md, 'Time delays')")
            else:
                notes.append(
                    f"{head}{output!r} itself{share}as where that output is measured late or "
                    "early against the inputs and the other outputs (a sensor's delay, "
                    "clocks apart), or where the model responds too fast or too slow there; "
                    "Model(output_delays=...) estimates a delay (docs/problem_statement.md, "
                    "'Time delays')")
    return notes


def _explained(r: np.ndarray, rate: np.ndarray) -> float:
    """The share of the variance of ``r`` a regression on ``rate`` explains
    (both centred; 0 where either is constant)."""
    ok = np.isfinite(r) & np.isfinite(rate)
    if np.count_nonzero(ok) < 3:
        return 0.0
    rr, du = r[ok] - np.mean(r[ok]), rate[ok] - np.mean(rate[ok])
    denom = float(np.sum(rr * rr) * np.sum(du * du))
    return float(np.sum(rr * du) ** 2 / denom) if denom > 0 else 0.0


def own_input_rate_notes(notes: Sequence[str], y_names: Sequence[str],
                         experiments: Sequence[Any], fitted: Sequence[np.ndarray],
                         model: Any) -> list[str]:
    """:func:`input_rate_notes` of the user's own inputs (not a restated
    problem's constants, ``NAME@...``), for the outputs and experiments
    ``notes`` do not name already."""
    if model is None:
        return []
    names = list(getattr(model, "u_names", ()) or ())
    own = [names.index(n) for n in sampled_input_names(names)]
    found = input_rate_notes(
        [e.y for e in experiments], fitted, [e.t for e in experiments],
        [np.asarray(e.inputs(e.t, model.nu), float)[:, own] if own else None
         for e in experiments],
        [e.name for e in experiments], y_names, [model.u_names[j] for j in own])
    return [n for n in found if not any(n.split(RATE_NOTE)[0] in m for m in notes)]
