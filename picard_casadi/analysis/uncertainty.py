"""Uncertainty of an estimate: covariance, standard errors, confidence intervals.

At the solution the continuity gaps are zero, so the fitted trajectory of
experiment ``e`` depends only on ``theta = (p, x0_e)``.  Its exact output
sensitivities follow by chaining the fixed-point sensitivities of the
intervals (:mod:`picard_casadi.transcription.sensitivity`)::

    S_0 = d x_0 / d theta,     S_{j+1} = (d x_end,j / d x_j) S_j + d x_end,j / d p

and the outputs on interval ``j`` have ``dy/dtheta = (dy/dx_j) S_j + dy/dp``.
With weighted residuals ``r = sqrt(w) (y - g)`` and their Jacobian ``J``, the
Gauss-Newton information matrix is ``F = J^T J`` and

    Cov(theta) = s^2 F^{-1},     s^2 = |r|^2 / (m - n_theta)

(``m`` measurements).  For unweighted data ``s^2`` estimates the noise
variance; with the likelihood's weights (``weights="auto"``, the default for
several outputs: ``1 / sigma_k^2``, estimated) ``s^2 = 1``: ``F`` is the Fisher
information and ``F^{-1}`` the Cramer-Rao bound.  Intervals are ``estimate +-
1.96 std`` (asymptotic), for independent noise of one variance per output.

Identifiability: in ``F`` scaled to unit diagonal, an eigenvalue below
:data:`IDENTIFIABILITY_THRESHOLD` of the largest is a direction the data do
not determine: its quantities are named, their standard errors infinite.
Below :data:`WEAK_DIRECTION` a combination is named as weakly determined where
a quantity in it has a standard error above :data:`WEAK_RELATIVE_ERROR` of
its size; so is a single parameter whose standard error exceeds its estimate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..runtime.interrupts import interruptible, reraise_if_interrupted
from ..runtime.native_output import captured_native_output
from ..transcription.block_jacobian import BlockJacobian
from ..transcription.forward_sensitivity import (chained_output_sensitivities,
                                                 initial_sensitivities)
from ..transcription.problem import Setup
from .interval_information import GROWTH_LIMIT, chain_growth, interval_information
from .poorly_determined import note_poorly_determined
from .reach import (INERT_REACH, inert_note, parameter_reach, parameter_reaches,
                    round_off_reach)

__all__ = ["solution_sensitivity", "SolutionSensitivity", "chain_sensitivities",
           "integrated_residuals", "measured_rows",
           "attach_uncertainty", "correlated_information", "undetermined_parameters",
           "parameter_reach", "parameter_reaches", "inert_note", "INERT_REACH",
           "noise_variance_factor", "IDENTIFIABILITY_THRESHOLD"]

#: relative eigenvalue of the scaled information matrix below which a direction
#: is not determined at all.  An exact non-identifiability (only a product a b
#: enters) gives round-off, -2e-16; the F/A-18's rudder run, whose parameters
#: the data do determine (their spread over 12 data sets matches the full
#: inverse's standard errors), has 5e-9 to 9e-9: with 1e-8 two of its
#: parameters got infinite standard errors on 10 of 12 seeds, and dropping
#: that direction shrank the others' (docs/uncertainty.md)
IDENTIFIABILITY_THRESHOLD = 1e-12
#: ... and below which (above the threshold) a direction is named as weakly
#: determined, its standard errors kept (finite, from the full inverse)
WEAK_DIRECTION = 1e-8
#: ... where one of the quantities in that direction has a standard error above
#: this fraction of its size (else the combination is well known in absolute terms)
WEAK_RELATIVE_ERROR = 0.1
#: a quantity whose weight in such a direction's (unit) eigenvector exceeds this
#: is one of the combination's
INVOLVED = 0.1
#: ... or which such a direction moves by more than this fraction of its
#: standard error off it, the direction's leading quantity moved by its size
#: (:func:`_undetermined_along`)
UNDETERMINED_MOVE = 0.1
# a sensitivity column below this fraction of the largest (both scaled by the
# quantities' nominal sizes) is round-off: the data do not depend on it
SILENT_COLUMN = 1e-10
Z95 = 1.959963984540054
#: what an undetermined quantity's warning adds of the others' standard errors
HELD_AT_ESTIMATE = ("; the other standard errors (and intervals, and output bands) hold {} "
                    "at the estimate: where moving it changes the fit elsewhere (a threshold "
                    "this estimate does not reach) they can be too small")


@dataclass
class SolutionSensitivity:
    """The fitted trajectory's residuals and their exact derivatives at a solution.

    Shared by the uncertainty (:func:`attach_uncertainty`) and the
    discretisation certificate (:mod:`picard_casadi.analysis.certificate`).

    Attributes
    ----------
    U : ndarray (J, nx, K)
        Node values settled on the fixed point (``|P U - U|`` ~ 1e-13).
    sens : dict
        :meth:`~picard_casadi.transcription.functions.Transcription.interval_sensitivities` at ``U``.
    r : ndarray (m,)
        Weighted residuals ``sqrt(w) (y - g)`` over the measured values.
    Jt : BlockJacobian
        ``d r / d theta``, ``theta`` the free parameters and initial states,
        ``(m, n_theta)`` held block by block (:mod:`picard_casadi.transcription.block_jacobian`).
    columns : list of (kind, experiment, index)
        What each column of ``Jt`` is: ``("p", -1, i)`` or ``("x0", e, i)``.
    rows : list of slice
        The rows of ``r`` and ``Jt`` that belong to each interval; within
        one, the measured entries of ``(sample, output)`` in row-major order.
    """

    U: np.ndarray
    sens: dict[str, np.ndarray]
    r: np.ndarray
    Jt: BlockJacobian
    columns: list[tuple[str, int, int]]
    rows: list[slice]


def solution_sensitivity(setup: Setup, X: np.ndarray, U: np.ndarray, p: np.ndarray
                         ) -> SolutionSensitivity:
    """Settle ``U`` on the fixed point and chain the interval sensitivities.

    Parameters
    ----------
    setup : Setup
    X, U, p : ndarray
        The solution (interval starts, node values, p).
    """
    U, _, _ = setup.tr.settle(X, U, p, tol=1e-13, max_sweeps=30)
    r, Jt, columns, rows, sens = _sensitivity_jacobian(setup, X, U, p)
    return SolutionSensitivity(U=U, sens=sens, r=r, Jt=Jt, columns=columns, rows=rows)


def _sensitivity_jacobian(setup: Setup, X: np.ndarray, U: np.ndarray, p: np.ndarray):
    return chain_sensitivities(setup, setup.tr.interval_sensitivities(X, U, p))


def chain_sensitivities(setup: Setup, sens: dict[str, np.ndarray]):
    """Weighted residuals and ``d r / d theta`` from the intervals' outputs and
    end states with their derivatives in ``(x_j, p)`` (``sens``: ``G`` (J, ny,
    M), ``dG`` (J, M, ny, nx + np), ``dend`` (J, nx, nx + np)), chained along
    each experiment's intervals.  Returns ``(r, Jt, columns, rows, sens)`` as
    :class:`SolutionSensitivity` holds them."""
    disc = setup.disc
    m = disc.model
    nx, np_ = m.nx, m.np
    columns: list[tuple[str, int, int]] = [("p", -1, i) for i in range(np_) if setup.free_p[i]]
    p_free = [i for i in range(np_) if setup.free_p[i]]
    n_p = len(columns)
    # each experiment's rows touch the free parameters and its own initial states
    owns = _estimated_initial_states(setup)
    block_cols: list[np.ndarray] = []
    for e, own in enumerate(owns):
        block_cols.append(np.concatenate([np.arange(n_p), len(columns) + np.arange(len(own))]
                                         ).astype(int))
        columns.extend(("x0", e, i) for i in own)
    rows_r: list[np.ndarray] = [np.zeros(0)] * disc.n_intervals
    blocks: list[np.ndarray] = [np.zeros((0, 0))] * disc.n_intervals
    for e, sl in enumerate(disc.intervals_of):
        ne = block_cols[e].size
        own = owns[e]
        S = np.zeros((nx, ne))  # d x_j / d (p, x0_e) on the block's columns
        for k, i in enumerate(own):
            S[i, n_p + k] = 1.0
        Ep = np.zeros((np_, ne))
        for k, i in enumerate(p_free):
            Ep[i, k] = 1.0
        for j in range(sl.start, sl.stop):
            dG = sens["dG"][j]  # (M, ny, nx + np)
            dy = (np.einsum("moa,az->moz", dG[..., :nx], S)
                  + np.einsum("mok,kz->moz", dG[..., nx:], Ep))
            rows_r[j] = measured_rows(setup, j, (disc.y[j] - sens["G"][j]).T)
            blocks[j] = -measured_rows(setup, j, dy)
            dend = sens["dend"][j]
            S = dend[:, :nx] @ S + dend[:, nx:] @ Ep
    bounds = np.cumsum([0] + [r.size for r in rows_r])
    rows = [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
    Jt = BlockJacobian(blocks=blocks, columns=block_cols, exp_of=np.asarray(disc.exp_of, int),
                       n=len(columns))
    return np.concatenate(rows_r), Jt, columns, rows, sens


def integrated_residuals(setup: Setup, x0: np.ndarray, p: np.ndarray, like: BlockJacobian,
                         rtol: float, atol: float, max_steps: int, method: str = "bdf"
                         ) -> tuple[np.ndarray, np.ndarray, BlockJacobian]:
    """The model's own outputs, weighted residuals and ``d r / d theta`` (``like``'s rows and columns).

    Each experiment integrated by CVODES from its initial state ``x0[e]``
    through the mesh's intervals, with the forward sensitivities of its
    states in the free parameters and its free initial states
    (:func:`~picard_casadi.transcription.forward_sensitivity.chained_output_sensitivities`):
    what single shooting would fit, to hold the collocation solution
    (:func:`chain_sensitivities`, ``like``) against.

    Parameters
    ----------
    setup : Setup
    x0 : ndarray (E, nx)
        Each experiment's initial states.
    p : ndarray (np,)
    like : BlockJacobian
        The collocation's, whose rows and columns the result has.
    rtol, atol, max_steps, method
        CVODES' settings.

    Returns
    -------
    G : ndarray (J, ny, M)
        The outputs at the samples, as ``disc.y``.
    r : ndarray
        The weighted residuals, in :func:`chain_sensitivities`' rows.
    J : BlockJacobian

    Raises
    ------
    RuntimeError
        Where CVODES fails.
    ValueError
        For a model with delays (no sensitivity ODE).
    """
    disc = setup.disc
    m = disc.model
    np_, ny, M, J = m.np, m.ny, disc.M, disc.n_intervals
    owns = _estimated_initial_states(setup)
    x0_columns = tuple(sorted({i for own in owns for i in own}))
    c = setup.tr._data_common
    outputs = chained_output_sensitivities(disc, c["ts"], c["Ws"], rtol, atol, max_steps,
                                           x0_columns, method)
    S0 = initial_sensitivities(m, x0_columns)
    Z0 = np.column_stack([np.r_[np.asarray(x, float), S0] for x in x0])
    printed: list[str] = []
    try:
        with interruptible(), captured_native_output() as printed:
            G, dG = (np.asarray(v) for v in outputs(Z0, np.asarray(p, float)))
    except RuntimeError as err:
        reraise_if_interrupted(err, printed[0] if printed else "")
        raise
    nc = np_ + len(x0_columns)
    G = G.reshape(ny, J, M).transpose(1, 0, 2)  # (J, ny, M) as disc.y
    dG = dG.reshape(ny, J * M, nc).transpose(1, 0, 2).reshape(J, M, ny, nc)
    p_free = [i for i in range(np_) if setup.free_p[i]]
    rows: list[np.ndarray] = []
    blocks: list[np.ndarray] = []
    for e, sl in enumerate(disc.intervals_of):
        cols = p_free + [np_ + x0_columns.index(i) for i in owns[e]]
        for j in range(sl.start, sl.stop):
            rows.append(measured_rows(setup, j, (disc.y[j] - G[j]).T))
            blocks.append(-measured_rows(setup, j, dG[j][:, :, cols]))
    return (G, np.concatenate(rows),
            BlockJacobian(blocks=blocks, columns=like.columns, exp_of=like.exp_of, n=like.n))


def _estimated_initial_states(setup: Setup) -> list[list[int]]:
    """Per experiment, the states whose initial values are estimated: after
    the free parameters, the columns of its rows (:func:`chain_sensitivities`)."""
    nx = setup.disc.model.nx
    return [[i for i in range(nx) if setup.free_x[sl.start, i]]
            for sl in setup.disc.intervals_of]


def measured_rows(setup: Setup, j: int, values: np.ndarray) -> np.ndarray:
    """Interval ``j``'s ``values`` (``(M, ny)`` or ``(M, ny, n)``) at its
    measured samples, each times the square root of its weight: the rows of
    :func:`chain_sensitivities`, in their order (the certificate's adjoint
    sweep takes its residuals and derivatives the same way).

    Parameters
    ----------
    setup : Setup
        The run's problem (its weights and discretisation).
    j : int
        The interval.
    values : ndarray (M, ny) or (M, ny, n)

    Returns
    -------
    ndarray (rows,) or (rows, n)
        One row per measured sample and output, sample-major.
    """
    sw_j = _root_weights(setup, j)  # (M, ny)
    if values.ndim == 3:
        sw_j = sw_j[:, :, None]
    return (sw_j * values)[setup.disc.mask[j].T > 0]


def _root_weights(setup: Setup, j: int) -> np.ndarray:
    """The square roots of interval ``j``'s weights, ``(M, ny)``: each output's
    times each value's own (``Discretisation.sample_weights``)."""
    disc = setup.disc
    return np.sqrt(setup.tr.weights)[None, :] * np.sqrt(disc.sample_weights[j].T)


def correlated_information(setup: Setup, Jt: BlockJacobian, R: np.ndarray) -> BlockJacobian:
    """``d r / d theta`` whitened by the outputs' full noise covariance ``R``.

    The rows of ``Jt`` are the weighted ``-sqrt(w_k) dg_k`` of each sample
    (every output measured at every sample, in output order): each sample's
    ``ny`` rows become ``-L^T dg`` with ``L L^T = R^-1``, so that the Gram
    matrix is the Fisher information ``sum_i dg_i^T R^-1 dg_i`` of the
    likelihood with correlated noise (the weights ``w_k = (R^-1)_kk`` alone
    leave out the off-diagonal terms).

    Parameters
    ----------
    setup : Setup
    Jt : BlockJacobian
        From :func:`chain_sensitivities`.
    R : ndarray (ny, ny)
        The noise covariance, symmetric positive definite.
    """
    ny = setup.disc.model.ny
    L = np.linalg.cholesky(np.linalg.inv(R))
    blocks = []
    for j, block in enumerate(Jt.blocks):
        if block.shape[0] == 0:
            blocks.append(block)
            continue
        mask = setup.disc.mask[j].T > 0
        sw = _root_weights(setup, j)[mask]
        if block.shape[0] % ny or not np.all(mask[mask.any(axis=1)]):
            raise ValueError("the correlated noise needs every output at every sample time")
        dg = (block / sw[:, None]).reshape(-1, ny, block.shape[1])  # -dg per sample
        blocks.append(np.einsum("lk,skc->slc", L.T, dg).reshape(block.shape))
    return BlockJacobian(blocks=blocks, columns=Jt.columns, exp_of=Jt.exp_of, n=Jt.n)


def formula_information(setup: Setup, info: SolutionSensitivity, formula: Any
                        ) -> tuple[BlockJacobian, list[tuple[str, int, int]]]:
    """``d r / d theta`` extended so that its Gram matrix is the Fisher information
    of noise formulas ``sigma_i = s(eta, g_i)`` over ``theta`` and the noise
    parameters ``eta``.

    For a value ``y_i ~ N(g_i, sigma_i^2)`` whose ``sigma_i`` moves with the
    parameters the expected information is ``dg^T dg / sigma^2 + 2 dsigma^T
    dsigma / sigma^2``: ``Jt``'s rows (the weighted ``-dg / sigma_i`` at the
    final ``sigma_i``) give the first term; one row ``sqrt(2) / sigma_i (ds/dg
    dg_i/dtheta, ds/deta)`` per formula value adds the second, on the new
    columns ``("noise", -1, i)`` of ``formula.names[i]``.  Inverting it over
    ``(theta, eta)`` gives the marginal covariance of ``theta`` with the noise
    parameters estimated alongside.

    Returns
    -------
    (Jt, columns) : the extended Jacobian and its columns.
    """
    disc = setup.disc
    ny = disc.model.ny
    Jt, columns = info.Jt, list(info.columns)
    n_eta = len(formula.names)
    eta_cols = Jt.n + np.arange(n_eta)
    columns.extend(("noise", -1, i) for i in range(n_eta))
    blocks = []
    for j, block in enumerate(Jt.blocks):
        e = int(disc.exp_of[j])
        zeros = np.zeros((block.shape[0], n_eta))
        if block.shape[0] == 0:
            blocks.append(np.concatenate([block, zeros], axis=1))
            continue
        mask = disc.mask[j].T > 0  # (M, ny), rows in this order
        outputs = np.broadcast_to(np.arange(ny), mask.shape)[mask]
        g = info.sens["G"][j].T[mask]
        dg = -block / _root_weights(setup, j)[mask][:, None]  # d g_i / d theta
        extra = []
        for k in formula.outputs:
            rows = np.flatnonzero(outputs == k)
            if rows.size == 0:
                continue
            sigma, slope = formula.sigma_slope(k, e, formula.theta, g[rows])
            d_eta = formula.sigma_gradient(k, e, formula.theta, g[rows])
            scale = np.sqrt(2.0) / sigma
            extra.append(np.concatenate([scale[:, None] * slope[:, None] * dg[rows],
                                         scale[:, None] * d_eta], axis=1))
        blocks.append(np.concatenate([np.concatenate([block, zeros], axis=1), *extra]))
    block_cols = [np.concatenate([c, eta_cols]).astype(int) for c in Jt.columns]
    return (BlockJacobian(blocks=blocks, columns=block_cols, exp_of=Jt.exp_of,
                          n=Jt.n + n_eta), columns)


def _unstable_information(result: Any, setup: Setup, info: SolutionSensitivity,
                          F: np.ndarray) -> tuple[np.ndarray, bool]:
    """``(F, False)``, or where the chained sensitivities grow past
    :data:`~picard_casadi.analysis.interval_information.GROWTH_LIMIT` (a model
    unstable along the data), ``(the information from the intervals' own
    sensitivities and the continuity constraints, True)``;
    ``settings["information"]`` says so."""
    growth = chain_growth(setup, info.sens)
    if not growth > GROWTH_LIMIT:
        return F, False
    blocks = [measured_rows(setup, j, info.sens["dG"][j])
              for j in range(setup.disc.n_intervals)]
    held = interval_information(setup, info.sens, blocks, info.columns)
    if held is None:
        return F, False
    result.settings["information"] = (
        f"from the intervals held by continuity (the chained sensitivities grow by "
        f"{growth:.1e} along the data)")
    return held, True


def _undetermined_along(v: np.ndarray, d: np.ndarray, std: np.ndarray,
                        size: np.ndarray) -> np.ndarray:
    """The quantities a direction the data do not determine (``v``, a unit
    eigenvector of the scaled information ``Fs``, ``theta = z / d``) moves:
    its weight exceeds :data:`INVOLVED`, or, with the direction's leading
    quantity moved by its own ``size``, it moves by more than
    :data:`UNDETERMINED_MOVE` of its standard error ``std`` off the
    direction (the direction's length is unbounded: ten such moves are as
    good).

    An exact symmetry moves every quantity in it by the same relative amount,
    but a quantity the outputs hardly see has a small weight in the scaled
    eigenvector: in the rescaling of a DC motor's R, L, J, b, Fc and i(0)
    that leaves its speed unchanged, Fc (weight 0.01) and i(0) (2e-4) got
    finite standard errors, and on another estimate L too (0.0037 +- 0.0018,
    where 0.037 fits as well).  (b, weight 0.005, keeps its finite one: its
    standard error is 800 times its value, which the direction's move does
    not exceed, and a note calls it poorly determined.)"""
    lead = int(np.argmax(np.abs(v)))
    step = size[lead] * d[lead] / abs(float(v[lead]))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        moved = step * np.abs(v) / d
    return (np.abs(v) > INVOLVED) | (moved > UNDETERMINED_MOVE * std)


def _unit_information(F: np.ndarray, reach: np.ndarray, silent: bool = True
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The information ``F`` (changed in place) scaled to a unit diagonal, and its
    eigen-decomposition: ``(d, Fs, evals, evecs)`` with ``F = D Fs D``,
    ``D = diag(d)``.

    ``reach`` is each column's reach (its sensitivity's norm times its scale);
    with ``silent``, a column below :data:`SILENT_COLUMN` of the largest is zeroed first (a
    sparse factorisation leaves ~1e-18 where the outputs do not depend on it,
    which the scaling would blow up into a well-determined direction).
    Raises ``numpy.linalg.LinAlgError`` where the decomposition fails.
    """
    if silent:
        zero = reach <= SILENT_COLUMN * float(reach.max(initial=0.0))
        F[zero, :] = 0.0
        F[:, zero] = 0.0
    d = np.sqrt(np.maximum(np.diag(F), 1e-300))
    Fs = F / d[:, None] / d[None, :]
    evals, evecs = np.linalg.eigh(Fs)
    return d, Fs, evals, evecs


def noise_variance_factor(r: np.ndarray, m: int, n: int, likelihood: bool) -> float:
    """``s^2``, the noise variance the weighted residuals ``r`` are in units of:
    1 with the likelihood's weights (``1 / sigma_k^2``: the information is
    Fisher's), else ``|r|^2 / (m - n)`` for ``m`` measurements and ``n``
    estimated quantities (NaN where ``m <= n``)."""
    if likelihood:
        return 1.0
    return float(r @ r) / (m - n) if m > n else float("nan")


def undetermined_parameters(setup: Setup, info: SolutionSensitivity) -> np.ndarray:
    """Which parameters a direction the data do not determine involves.

    The parameters (``(np,)`` booleans) with a component above
    :data:`INVOLVED` in an eigenvector of the scaled information matrix
    (parameters and estimated initial states, as :func:`attach_uncertainty`
    has it) whose relative eigenvalue is below
    :data:`IDENTIFIABILITY_THRESHOLD`: the direction's leading ones (whose
    standard errors :func:`attach_uncertainty` reports as inf, with any
    others the direction moves beyond their standard errors).  All False
    where the information is not finite or cannot be decomposed.
    """
    np_ = setup.disc.model.np
    out = np.zeros(np_, dtype=bool)
    with np.errstate(all="ignore"):
        F = info.Jt.gram()
    if F.size == 0 or not np.all(np.isfinite(F)):
        return out
    scale = np.array([setup.p_scale[i] if kind == "p" else setup.x_scale[i]
                      for kind, _, i in info.columns])
    try:
        _, _, evals, evecs = _unit_information(F, np.sqrt(np.maximum(np.diag(F), 0.0)) * scale)
    except np.linalg.LinAlgError:
        return out
    weak = evals < IDENTIFIABILITY_THRESHOLD * max(float(evals[-1]), 1e-300)
    involved = np.any(np.abs(evecs[:, weak]) > INVOLVED, axis=1)
    for k, (kind, _, i) in enumerate(info.columns):
        if kind == "p" and involved[k]:
            out[i] = True
    return out


def attach_uncertainty(result: Any, setup: Setup, info: SolutionSensitivity,
                       noise_covariance: np.ndarray | None = None,
                       noise_formula: Any = None) -> None:
    """Fill ``p_cov``, ``p_std``, ``p_ci``, ``p_corr`` and ``x0_std`` of a result.

    Adds a warning naming the parameters involved when the information
    matrix is near-singular.

    Parameters
    ----------
    result : EstimationResult
    setup : Setup
    info : SolutionSensitivity
        From :func:`solution_sensitivity` at the result's solution.
    noise_covariance : ndarray (ny, ny), optional
        The outputs' full noise covariance of a ``noise="correlated"`` fit:
        the information is then :func:`correlated_information`'s.
    noise_formula : NoiseFormula, optional
        The noise formulas of the fit (their parameters at the estimate): the
        information is then :func:`formula_information`'s, and the noise
        parameters' standard errors go to ``settings["noise_parameter_std"]``.
    """
    r, Jt, columns = info.r, info.Jt, info.columns
    if noise_covariance is not None:
        Jt = correlated_information(setup, Jt, noise_covariance)
    elif noise_formula:
        Jt, columns = formula_information(setup, info, noise_formula)
    m_meas, nth = Jt.shape
    model = setup.disc.model
    np_ = model.np
    if nth == 0 or m_meas <= nth:
        result.warnings.append(
            f"no uncertainty: {m_meas} measurements for {nth} estimated quantities"
        )
        return
    with np.errstate(all="ignore"):
        F = Jt.gram()
    from_intervals = False
    if noise_covariance is None and not noise_formula and "dend" in info.sens:
        F, from_intervals = _unstable_information(result, setup, info, F)
    with np.errstate(all="ignore"):
        # with the noise variances estimated by the likelihood the weights are
        # 1 / sigma_k^2: F is the Fisher information and its inverse the
        # Cramer-Rao bound (what the output-error method reports); otherwise
        # the weights are relative and the residuals give their scale
        s2 = noise_variance_factor(r, m_meas, nth, result.settings.get("weights") == "auto")
    if not (np.all(np.isfinite(F)) and np.isfinite(s2)):
        result.warnings.append(
            "no uncertainty: the output sensitivities at the estimate are not finite "
            "(the solution is violently unstable there)")
        return
    eta = noise_formula.theta if noise_formula else np.zeros(0)
    scale = np.array([setup.p_scale[i] if kind == "p" else setup.x_scale[i] if kind == "x0"
                      else max(abs(float(eta[i])), 1e-300) for kind, _, i in columns])
    reach = np.sqrt(np.maximum(np.diag(F), 0.0)) * scale
    reaches = parameter_reaches(setup, np.diag(F), columns, np.asarray(result.p, float), s2)
    if reaches.size:  # estimation/diagnosis.py's plateau
        result.settings["parameter_reach"] = float(reaches.max())
        inert = inert_note([model.p_names[i] for kind, _, i in columns if kind == "p"],
                           reaches)
        if inert:
            result.warnings.append(inert)
    try:
        # (the intervals' information has no round-off columns: a solve that
        # does not determine one fails; there the initial states along an
        # unstable mode are known 1e12 times better than the parameters)
        d, Fs, evals, evecs = _unit_information(
            F, round_off_reach(model, columns, np.asarray(result.p, float), np.diag(F), reach),
            silent=not from_intervals)
    except np.linalg.LinAlgError as err:
        result.warnings.append(f"no uncertainty: the information matrix could not be "
                               f"decomposed ({err})")
        return
    lam_max = max(float(evals[-1]), 1e-300)
    weak = evals < IDENTIFIABILITY_THRESHOLD * lam_max
    faint = ~weak & (evals < WEAK_DIRECTION * lam_max)
    names = []
    for kind, e, i in columns:
        names.append(model.p_names[i] if kind == "p" else noise_formula.names[i]
                     if kind == "noise" else
                     f"x0[{model.x_names[i]}] of {setup.disc.experiments[e].name!r}")
    if np.any(weak):
        keep = ~weak
        inv = (evecs[:, keep] / evals[keep]) @ evecs[:, keep].T
    else:
        inv = np.linalg.inv(Fs)
    cov = s2 * inv / d[:, None] / d[None, :]
    std = np.sqrt(np.maximum(np.diag(cov), 0.0))  # off the undetermined directions
    # each quantity's standard error against its size (an initial state's at
    # least its state's scale: a state starting at 0 is no poorly known one)
    size = np.array([abs(float(result.p[i])) if kind == "p" else abs(float(eta[i]))
                     if kind == "noise"
                     else max(abs(float(result.x0[e][i])), float(setup.x_scale[i]))
                     for kind, e, i in columns])
    involved_in = {int(k): _undetermined_along(evecs[:, k], d, std,
                                               np.where(size > 0, size, scale))
                   for k in np.flatnonzero(weak)}
    unidentifiable = np.zeros(nth, dtype=bool)
    for mask in involved_in.values():
        unidentifiable |= mask
    std[unidentifiable] = np.inf
    # (pc.prediction_band: the directions the data do not determine, each a
    # move of its quantities by at most their scale, say where a prediction
    # is not bounded either)
    with np.errstate(all="ignore"):  # (a noise formula's tiny scale leaked an overflow)
        along = evecs[:, weak] / d[:, None]
        along /= np.maximum(np.abs(along / scale[:, None]).max(axis=0, initial=0.0), 1e-300)
    result._covariance = (list(columns), cov, along)
    # each direction the data do not determine, in the quantities' own units,
    # its largest move (against the quantity's scale) 1: a robot arm's masses,
    # lengths and inertias, "each direction a combination of several of them"
    # with no way to see which (the base parameters are what is left)
    result.settings["undetermined_directions"] = [
        {names[c]: float(v) for c, v in enumerate(col)
         if abs(v) > 1e-9 * np.max(np.abs(col))} for col in along.T]
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(size > 0, std / size, np.inf)
    named = np.zeros(nth, dtype=bool)  # in a combination a warning names
    directions = np.flatnonzero(weak | faint)
    if np.count_nonzero(weak) > 1:
        # one warning for all such directions (PEtab's Armistead had four, each
        # a warning of eight or nine overlapping names)
        for k in np.flatnonzero(weak):
            named |= involved_in[int(k)]
        relative_eigenvalues = evals[weak] / lam_max
        sizes = [int(np.count_nonzero(involved_in[int(k)])) for k in np.flatnonzero(weak)]
        each = ("each direction one of them alone" if max(sizes) == 1 else
                "each direction a combination of several of them" if min(sizes) > 1 else
                "each direction one of them alone or a combination of several")
        states = [c for c in np.flatnonzero(named) if columns[c][0] == "x0"]
        known = ("; an initial state the data do not see can be held at a known value "
                 "(Experiment(x0=...) with estimate_x0=[...], one flag per state)"
                 if states else "")
        result.warnings.append(
            f"the information matrix is near-singular in {np.count_nonzero(weak)} directions "
            f"(relative eigenvalues {relative_eigenvalues.min():.1e} to "
            f"{relative_eigenvalues.max():.1e}): the data do not determine "
            f"{', '.join(names[c] for c in np.flatnonzero(named))} near this estimate, {each}, "
            "so their standard errors are inf; these quantities are practically "
            "unidentifiable here (pc.profile(res) follows the likelihood beyond the "
            "linearisation: some of them may still have a finite interval; the directions: "
            f"res.settings['undetermined_directions']){known}"
            + (HELD_AT_ESTIMATE.format("them") if not named.all() else ""))
        directions = np.flatnonzero(faint)
    for k in directions:
        involved = involved_in[int(k)] if weak[k] else np.abs(evecs[:, k]) > INVOLVED
        if faint[k] and not np.any(relative[involved] > WEAK_RELATIVE_ERROR):
            # a small relative eigenvalue, yet every quantity in the direction is
            # known to 10 %: the information is large, only its directions are
            # lopsided (a chaotic forced Duffing: relative eigenvalues 1e-9,
            # standard errors under 1 % of the estimates)
            continue
        named |= involved
        listed = ", ".join(names[c] for c in np.flatnonzero(involved))
        head = ("the information matrix is near-singular (relative eigenvalue "
                f"{evals[k] / lam_max:.1e}): ")
        if weak[k] and np.count_nonzero(involved) == 1:
            # one quantity alone (a parameter the model hardly uses) is no combination
            result.warnings.append(
                f"{head}the data do not determine {listed} near this estimate, so its "
                "standard error is inf; it is practically unidentifiable here "
                "(pc.profile(res) follows the likelihood beyond the linearisation)"
                + (HELD_AT_ESTIMATE.format("it") if not involved.all() else ""))
        elif weak[k]:
            # a relative eigenvalue this small is also where two parameters
            # written to compensate each other end (a user's CSTR with the
            # Arrhenius rate k0 exp(-E / T), T within 3 % of 350 K: 1.5e-13,
            # so inf; written kref exp(-E (1/T - 1/350)), E +- 9.59, and the
            # profile of E gave the same interval in both forms)
            scaling = _scaling(evecs[:, k] / d, involved, columns, result.p)
            result.warnings.append(
                f"{head}the data do not determine the combination of {listed} near this "
                "estimate, so their standard errors are inf; these parameters are "
                "practically unidentifiable here (pc.profile(res) follows the likelihood "
                "beyond the linearisation: one of them may still have a finite interval; "
                "the direction: res.settings['undetermined_directions']; " + (
                    "they scale together: only their ratios are determined, so fix one of "
                    "them (equal bounds) or write the model in the ratios)" if scaling else
                    "parameters that compensate each other, as an Arrhenius factor and its "
                    "activation energy over a narrow temperature range, are determined "
                    "where written centred: a rate at a reference temperature in place of "
                    "the factor)"))
        else:
            result.warnings.append(
                f"{head}the data determine the combination of {listed} only weakly; their "
                "standard errors are large and strongly correlated (res.p_corr, and the x0 "
                "standard errors in res.x0_std)")
    # one parameter the data hardly see is no near-singular combination (a
    # stiff rate k = 2000 came out 1183 +- 2302 without a word): noted, all
    # such parameters in one warning, once p_std is known
    # (the candidates: a standard error above the estimate's size, or above 1,
    # a decade of a parameter the restated problem estimates as its log10;
    # note_poorly_determined judges each on its own scale)
    result.settings["poorly_determined_candidates"] = [
        int(i) for k, (kind, _, i) in enumerate(columns)
        if kind == "p" and not named[k] and std[k] > min(abs(float(result.p[i])), 1.0)]

    p_cov = np.zeros((np_, np_))
    p_std = np.zeros(np_)
    idx_p = [(k, i) for k, (kind, _, i) in enumerate(columns) if kind == "p"]
    for a, i in idx_p:
        p_std[i] = std[a]
        for b, jj in idx_p:
            p_cov[i, jj] = cov[a, b]
    with np.errstate(invalid="ignore", divide="ignore"):
        dd = np.sqrt(np.diag(p_cov))
        corr = p_cov / dd[:, None] / dd[None, :]
    corr[~np.isfinite(corr)] = 0.0
    np.fill_diagonal(corr, [1.0 if s > 0 else 0.0 for s in dd])
    # an undetermined parameter has no correlation: its entries are the round-off
    # of the determined directions (a hydrologist's HBV read FC-LP 0.998 for an
    # LP that did not act at all)
    corr[~np.isfinite(p_std), :] = np.nan
    corr[:, ~np.isfinite(p_std)] = np.nan
    # so has its covariance (its variance inf): the entries of the directions
    # held at the estimate read as a variance of 1e-4 for a lag's q0 whose
    # standard error was inf, and a lag time by the delta method came out 46
    # of its standard errors off
    unseen = ~np.isfinite(p_std)
    p_cov[unseen, :] = np.nan
    p_cov[:, unseen] = np.nan
    p_cov[unseen, unseen] = np.inf
    result.p_cov = p_cov
    result.p_std = p_std
    note_poorly_determined(result)
    result.p_ci = np.column_stack([result.p - Z95 * p_std, result.p + Z95 * p_std])
    result.p_corr = corr
    x0_std = [np.zeros(model.nx) for _ in setup.disc.experiments]
    for k, (kind, e, i) in enumerate(columns):
        if kind == "x0":
            x0_std[e][i] = std[k]
    result.x0_std = x0_std
    result.settings["noise_variance_factor"] = s2
    if noise_formula:  # (beside the closed form's of the other noise parameters)
        result.settings["noise_parameter_std"] = {
            **(result.settings.get("noise_parameter_std") or {}),
            **{noise_formula.names[i]: float(std[k])
               for k, (kind, _, i) in enumerate(columns) if kind == "noise"}}


def _scaling(direction: np.ndarray, involved: np.ndarray, columns: list,
             p: np.ndarray) -> bool:
    """Whether an undetermined ``direction`` (in the quantities' units) moves
    its parameters in proportion to their values (or, on log scales, all by
    the same step): a scaling, whose ratios the data determine (a motor's
    torque constant, inertia, friction and Coulomb torque from its speed
    alone, told of an Arrhenius factor)."""
    at = np.flatnonzero(involved)
    if at.size < 2 or any(columns[c][0] != "p" for c in at):
        return False
    v = np.asarray(direction, float)[at]
    values = np.array([float(p[columns[c][2]]) for c in at])
    for w in (values, np.ones(at.size)):
        norm = float(np.linalg.norm(v) * np.linalg.norm(w))
        if norm > 0 and abs(float(v @ w)) / norm > 0.99:
            return True
    return False
