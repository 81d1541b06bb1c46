"""The resource guard: how large a problem's discretisation would be, before it is built.

:func:`check_problem_size` counts the intervals a discretisation would make,
and the memory they imply, from the experiments' time spans alone, and
refuses a problem above a limit before any array or CasADi function is
built (``T=1e-6`` on a horizon of 10 asks for ten million intervals: about
200 GB and hours of set-up before the first iteration).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..runtime.arguments import as_int
from .discretisation import interval_boundaries, locate_samples, mesh_breakpoints

__all__ = ["ProblemSize", "problem_size", "check_problem_size", "dense_fits", "interval_limit",
           "human_size", "DEFAULT_MAX_INTERVALS", "MEMORY_BUDGET_BYTES"]

# The resource guard's defaults (docs/reliability.md).  The built-in problems
# use 40-150 intervals; 100,000 intervals of a two-state model take about
# 2 GB and a minute of set-up before the first iteration.
DEFAULT_MAX_INTERVALS = 100_000
# Without an explicit max_intervals the limit is also lowered so that the
# estimated memory stays below this (per-interval matrices grow with K^2
# nnz(f_x): by the formula of _bytes_per_interval, 14,176 intervals of the
# 15-state CMG model need 4 GB).
MEMORY_BUDGET_BYTES = 4 * 1024 ** 3


@dataclass(frozen=True)
class ProblemSize:
    """What a discretisation of the problem would hold.

    Attributes
    ----------
    intervals : int
        Picard intervals over all experiments (exact, or a lower bound when
        ``exact`` is False: counting them exactly would itself be too big).
    nodes : int
        Nodes per interval ``K``.
    states : int
        ``nx``.
    samples_per_interval : int
        ``M``, the most samples in one interval (arrays are padded to it).
    bytes : float
        Estimated memory of the estimate (see :func:`problem_size`).
    exact : bool
    """

    intervals: int
    nodes: int
    states: int
    samples_per_interval: int
    bytes: float
    exact: bool = True


def _bytes_per_interval(K: int, nx: int, M: int, ny: int, nu: int, nnz_fx: int) -> float:
    """Memory per interval of ``picard-gn``'s default (sparse) linear algebra.

    It keeps, per interval, the node sensitivities ``dU/d(x_j, p)`` (``K nx``
    rows and about ``nx`` columns, the estimated initial states) in a few
    copies, node values, and padded sample arrays; the matrix ``I - dP/dU``
    has ``K^2`` blocks with the ``nnz_fx`` nonzeros of ``f_x`` each (its
    sparse factors about as many again).  Measured peak growth
    (docs/reliability.md, "Size limit"): 148 KB per interval on ``cmg``
    (formula: 303 KB), 1.8 MB on a ring of 80 states (formula: 1.6 MB).  The
    dense ``(K nx)^2`` matrices of the exact-Hessian steps are built only
    where they fit (:func:`dense_fits`).
    """
    kn = K * nx
    return 8.0 * (3.0 * kn * (nx + 8) + 8.0 * kn + 2.0 * K * K * nnz_fx
                  + M * (K + 3 * ny + nu + 4 * nx))


def _nnz_fx(model: Any) -> int:
    """Nonzeros of ``df/dx`` (structural; the model's cached pattern)."""
    return int(np.count_nonzero(model.jacobian_pattern))


def dense_fits(intervals: int, K: int, nx: int) -> bool:
    """Whether the dense ``(K nx)^2`` matrices of every interval fit in a quarter
    of ``MEMORY_BUDGET_BYTES`` (the exact-Hessian steps need them)."""
    kn = K * nx
    return 8.0 * 4.5 * kn * kn * intervals <= 0.25 * MEMORY_BUDGET_BYTES


def interval_limit(model: Any, nodes: int, samples_per_interval: int,
                   max_intervals: Any = None) -> int:
    """The most intervals accepted (see :func:`check_problem_size`)."""
    if max_intervals is not None:
        return as_int(max_intervals, "max_intervals")
    per = _bytes_per_interval(nodes, model.nx, samples_per_interval, model.ny, model.nu,
                              _nnz_fx(model))
    return int(min(DEFAULT_MAX_INTERVALS, max(1, MEMORY_BUDGET_BYTES // per)))


def problem_size(model: Any, experiments: Sequence[Any], T: float, nodes: int) -> ProblemSize:
    """Count intervals (with :func:`~picard_casadi.transcription.discretisation.interval_boundaries`)
    and estimate the memory, without building a discretisation.

    Parameters
    ----------
    model : Model
    experiments : sequence of Experiment
    T : float
        Interval length.
    nodes : int
        Nodes per interval.
    """

    # Each experiment has between floor(horizon / T) - #breakpoints and
    # floor(horizon / T) + #breakpoints + 1 intervals; where that is far
    # beyond any limit the boundaries are not materialised (T = 1e-9 over a
    # horizon of 10 would be an array of 1e10 floats).
    rough = sum(max(1.0, math.floor((e.t_end - e.t0) / T)) for e in experiments)
    if rough > 50 * DEFAULT_MAX_INTERVALS:
        per = _bytes_per_interval(nodes, model.nx, 1, model.ny, model.nu, _nnz_fx(model))
        return ProblemSize(int(rough), nodes, model.nx, 1, rough * per, exact=False)
    count = 0
    M = 1
    for e in experiments:
        b = interval_boundaries(e.t0, e.t_end, float(T), mesh_breakpoints(e, float(T)))
        J = b.size - 1
        count += J
        j, _ = locate_samples(b, e.t)
        M = max(M, int(np.bincount(j, minlength=J).max(initial=1)))
    M = 1 << (M - 1).bit_length()  # padded to a power of two, as Discretisation does
    per = _bytes_per_interval(nodes, model.nx, M, model.ny, model.nu, _nnz_fx(model))
    return ProblemSize(count, nodes, model.nx, M, count * per)


def human_size(nbytes: float) -> str:
    """``nbytes`` as a number of TB, GB, MB or KB (three digits)."""
    for unit, size in (("TB", 1024 ** 4), ("GB", 1024 ** 3), ("MB", 1024 ** 2)):
        if nbytes >= size:
            return f"{nbytes / size:.3g} {unit}"
    return f"{nbytes / 1024:.3g} KB"


def check_problem_size(model: Any, experiments: Sequence[Any], T: float, nodes: int,
                       max_intervals: Any = None, chosen: bool = False) -> ProblemSize:
    """Refuse a problem too large to set up, before anything is built.

    Parameters
    ----------
    model, experiments, T, nodes
        As :func:`problem_size`.
    max_intervals : int, optional
        The largest number of intervals accepted.  Default (``None``):
        ``DEFAULT_MAX_INTERVALS`` (100,000), lowered to what fits in
        ``MEMORY_BUDGET_BYTES`` (4 GB) of estimated memory.  Given
        explicitly, it is the only limit.
    chosen : bool
        ``T`` is the package's default, not the caller's (the message says so).

    Returns
    -------
    ProblemSize

    Raises
    ------
    ValueError
        Naming the number of intervals asked for, the memory they imply,
        the limit, the longest ``T`` that would fit, and the keyword that
        raises the limit.
    """
    size = problem_size(model, experiments, T, nodes)
    per = size.bytes / max(size.intervals, 1)
    limit = interval_limit(model, nodes, size.samples_per_interval, max_intervals)
    if max_intervals is None:
        why = f"the default limit is {limit:,} intervals"
        if limit < DEFAULT_MAX_INTERVALS:
            why += (f" for this model (what fits in {human_size(MEMORY_BUDGET_BYTES)}; at most "
                    f"{DEFAULT_MAX_INTERVALS:,} for any model)")
    else:
        why = f"the limit is max_intervals={limit:,}"
    if size.intervals <= limit:
        return size
    if max_intervals is None and per > MEMORY_BUDGET_BYTES:
        raise ValueError(
            f"`nodes` = {nodes}: one interval alone ({nodes} nodes x {model.nx} states) needs "
            f"about {human_size(per)}, more than the "
            f"{human_size(MEMORY_BUDGET_BYTES)} budget; use fewer nodes, or pass "
            f"max_intervals={size.intervals} to estimate() to go ahead"
        )
    horizon = sum(e.t_end - e.t0 for e in experiments)
    T_fit = horizon / max(limit - len(experiments), 1)
    count = f"{size.intervals:,}" if size.exact else f"about {size.intervals:,}"
    fewer_nodes = (f" or fewer nodes (each interval needs about {human_size(per)})"
                   if per * 1000 > MEMORY_BUDGET_BYTES else "")
    named = (f"the default `T` (chosen from the data and the model's rates) = {T:g}"
             if chosen else f"`T` = {T:g}")
    raise ValueError(
        f"{named} makes {count} intervals ({nodes} nodes x {model.nx} states each, "
        f"{size.samples_per_interval} sample(s) at most per interval): about "
        f"{human_size(size.bytes)} of memory and a long set-up before the first iteration; "
        f"{why}.  Use a longer T (T >= {T_fit:.3g} stays within the limit here){fewer_nodes}, "
        f"or pass max_intervals={size.intervals} to estimate() to go ahead"
        + ("; a model this large may fit better by method='single-shooting' with a long T "
           "(CVODES integrates each experiment whatever the mesh)" if chosen else "")
    )
