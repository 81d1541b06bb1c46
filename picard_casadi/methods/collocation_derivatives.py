"""The collocation NLP's derivatives for IPOPT, written interval by interval.

The NLP of generated code and, by default, of the virtual machine
(:func:`~picard_casadi.methods.ipopt.collocation_expressions`) maps one
interval's function over the intervals.  CasADi's own derivatives
of that graph colour the whole matrix and evaluate one sweep of every
interval per colour: the parameters couple all intervals, so there are
about as many colours as one interval has unknowns, and each sweep works on
dense directions (what that cost on cmg: docs/performance.md, "IPOPT's NLP").

This module writes both from the NLP's structure.  For one interval with
unknowns ``z = (u_0 .. u_{K-1}, p)`` (``x = u_0``), node values of the vector
field ``F_k = f(t_k, u_k, p)``, states at the samples
``X_s = x + h sum_k S_sk F_k`` and weighted residuals
``r_s = Wt_s * (y_s - g(t_s, X_s, p))``:

* the fixed-point defects ``d_k = (x + h sum_i A_ki F_i - u_k) / xs`` have the
  Jacobian ``(e_0 - e_k) kron I + h (A kron I) blockdiag(f_x) | h (A kron I) f_p``,
  from ``f``'s Jacobian at each node; the continuity rows are constant;
* the Lagrangian ``sigma/2 |r|^2 + sum_k lam_k . d_k`` has the Hessian

      sigma J_r^T J_r  +  sum_k  [u_k; p]-block of  hess(mu_k . f)(t_k, u_k, p)
                       +  sum_s  G_s^T hess(nu_s . g)(t_s, X_s, p) G_s

  with ``nu_s = -sigma Wt_s * r_s``, ``mu_k = h (sum_i A_ik lam_i / xs +
  sum_s S_sk g_x(X_s)^T nu_s)`` and ``G_s = d(X_s, p)/dz``: the Gauss-Newton
  part is one dense product per interval, and the curvature of ``f`` and
  ``g`` enters through one small Hessian per node and per sample (the last
  term vanishes where the outputs are linear in the states, as in both
  paper models).  The continuity constraints are linear and add nothing.

:func:`interval_hessian` and :func:`interval_defect_jacobian` are one
interval's functions; :func:`lagrangian_hessian` and
:func:`constraint_jacobian` map them over the intervals and assemble the
matrices ``nlpsol`` asks for (its ``hess_lag`` and ``jac_g`` options).  The
values and sparsity equal CasADi's own derivatives of the same NLP to
round-off (``tests/test_collocation_derivatives.py``).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import sys
from collections.abc import Callable

import casadi as ca
import numpy as np

from ..transcription.discretisation import Discretisation
from .collocation_layout import interval_symbols, unscaled_unknowns

__all__ = ["interval_hessian", "lagrangian_hessian", "interval_defect_jacobian",
           "constraint_jacobian", "derivatives_version", "source_version"]


@functools.cache
def source_version(obj: object) -> str:
    """A hash of the source of ``obj`` (a module or a function): what
    identifies a construction of derivative functions in a compiled NLP's
    cache key, instead of their serialisation."""
    return hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()[:16]


def derivatives_version() -> str:
    """What identifies this construction: a hash of this module's source.

    The functions follow from the NLP, so a compiled NLP's cache key holds
    this instead of their serialisation (about a second on cmg, at every
    call); any change to the construction changes the key.
    """
    return source_version(sys.modules[__name__])


def _gathered(a: ca.MX, arrange: Callable[[ca.DM], ca.DM]) -> ca.MX:
    """``arrange(a)`` as one gather of ``a``'s nonzeros.

    ``arrange`` (a rearrangement of whole entries: splits, stacks, block
    diagonals) is applied to the numbers 1, 2, ... in ``a``'s nonzeros, which
    says where each nonzero goes.  Written with ``J`` splits, an NLP's block
    diagonal was ``J`` copy loops in one C function, which gcc -O2 compiled in
    27 s for 1000 intervals and not in 9 minutes for 10 000; one gather is one
    loop over a constant index table.
    """
    probe = arrange(ca.DM(a.sparsity(), ca.DM(np.arange(1.0, a.nnz() + 1.0))))
    where = np.asarray(probe.nonzeros(), dtype=int) - 1
    if where.size == 0:
        return ca.MX(probe.sparsity())
    return ca.MX(probe.sparsity(), ca.vec(a.nz[where.tolist()]))


def _stacked(a: ca.MX, width: int, count: int) -> ca.MX:
    """The ``count`` column blocks of ``a``, ``width`` wide each, one under the
    other (``width`` may be 0: a model without parameters)."""
    if width == 0:
        return ca.MX(a.size1() * count, 0)
    return _gathered(a, lambda m: ca.vertcat(*ca.horzsplit(m, width)))


def _block_diagonal(a: ca.MX, width: int) -> ca.MX:
    """The column blocks of ``a``, ``width`` wide each, on a block diagonal."""
    return _gathered(a, lambda m: ca.diagcat(*ca.horzsplit(m, width)))


def _vector_field_jacobian(disc: Discretisation) -> ca.Function:
    """``(t, x, p, u) -> (f_x, f_p)`` at one node."""
    m = disc.model
    return ca.Function("f_jac", [m.t, m.x, m.p, m.u],
                       [ca.jacobian(m.rhs, m.x), ca.jacobian(m.rhs, m.p)])


def _vector_field_curvature(disc: Discretisation) -> ca.Function:
    """``(t, x, p, u, mu) -> (H_xx, H_xp, H_pp)``, the Hessian of ``mu . f`` at
    one node."""
    m = disc.model
    mu = ca.SX.sym("mu", m.nx)
    H = ca.hessian(ca.dot(mu, m.rhs), ca.vertcat(m.x, m.p))[0]
    nx = m.nx
    return ca.Function("f_hess", [m.t, m.x, m.p, m.u, mu],
                       [H[:nx, :nx], H[:nx, nx:], H[nx:, nx:]])


def _output_jacobian(disc: Discretisation) -> ca.Function:
    """``(t, x, p, u) -> (g_x, g_p)`` at one sample."""
    m = disc.model
    return ca.Function("g_jac", [m.t, m.x, m.p, m.u],
                       [ca.jacobian(m.y, m.x), ca.jacobian(m.y, m.p)])


def _output_curvature(disc: Discretisation) -> ca.Function | None:
    """The Hessian of ``nu . g`` at one sample, or None where ``g`` is linear
    in ``(x, p)``."""
    m = disc.model
    z = ca.vertcat(m.x, m.p)
    nu = ca.SX.sym("nu", m.ny)
    H = ca.hessian(ca.dot(nu, m.y), z)[0]
    if H.nnz() == 0:
        return None
    nx = m.nx
    return ca.Function("g_hess", [m.t, m.x, m.p, m.u, nu],
                       [H[:nx, :nx], H[:nx, nx:], H[nx:, nx:]])


def interval_hessian(disc: Discretisation) -> ca.Function:
    """The Hessian of one interval's part of the Lagrangian, in scaled unknowns.

    ``(U, p, t0, h, Wn, S, ts, Ws, Y, Wt, xs, ps, lam, sigma) -> (Huu, Hpu, Hpp)``
    with the arguments of :func:`~picard_casadi.methods.ipopt.collocation_interval`
    (``U`` and ``p`` unscaled), the parameters' scales ``ps``, the defects'
    multipliers ``lam`` (``nx x (K - 1)``) and the objective's factor
    ``sigma``.  The unknowns are ``(vec(U / xs), p / ps)``; ``Huu`` is the upper
    triangle of their node block, ``Hpu`` the parameter rows against the
    nodes, ``Hpp`` the upper triangle of the parameter block.
    """
    m = disc.model
    K, M = disc.K, disc.M
    nx, np_, ny = m.nx, m.np, m.ny
    nU = nx * K
    A = ca.DM(np.asarray(disc.quad.integration, float))
    tau = ca.DM(disc.quad.tau).T
    args = interval_symbols(disc)
    U, p, t0, h, Wn, S, ts, Ws, Y, Wt, xs = args.values()
    args["ps"] = ps = ca.MX.sym("ps", np_)
    args["lam"] = lam = ca.MX.sym("lam", nx, K - 1)
    args["sigma"] = sigma = ca.MX.sym("sigma")
    f = ca.Function("f", [m.t, m.x, m.p, m.u], [m.rhs])
    g = ca.Function("g", [m.t, m.x, m.p, m.u], [m.y])
    f_jac, f_hess, g_jac = (_vector_field_jacobian(disc), _vector_field_curvature(disc),
                            _output_jacobian(disc))
    g_hess = _output_curvature(disc)

    tk = t0 + h * tau
    pK, pM = ca.repmat(p, 1, K), ca.repmat(p, 1, M)
    F = f.map(K)(tk, U, pK, Wn)
    fx, fp = f_jac.map(K)(tk, U, pK, Wn)            # nx x nx K, nx x np K
    Xs = ca.repmat(U[:, 0], 1, M) + h * ca.mtimes(F, S.T)
    gx, gp = g_jac.map(M)(ts, Xs, pM, Ws)            # ny x nx M, ny x np M
    r = Wt * (Y - g.map(M)(ts, Xs, pM, Ws))

    # G = d X_s / d z for every sample, stacked: (nx M) x (nx K + np)
    nodes = ca.horzcat(_block_diagonal(fx, nx), _stacked(fp, np_, K))
    start = ca.sparsify(ca.DM(np.kron(np.ones((M, 1)),
                                      np.hstack([np.eye(nx), np.zeros((nx, nU - nx + np_))]))))
    D = start + h * ca.mtimes(ca.kron(S, ca.DM.eye(nx)), nodes)
    # the residuals' Jacobian and the Gauss-Newton part
    Gx = _block_diagonal(gx, nx)
    Gp = ca.horzcat(ca.DM(ny * M, nU), _stacked(gp, np_, M))
    w = ca.vec(Wt)
    Jr = -ca.repmat(w, 1, nU + np_) * (ca.mtimes(Gx, D) + Gp)
    H = sigma * ca.mtimes(Jr.T, Jr)

    # the vector field's curvature, node by node
    nu_s = -sigma * ca.vec(Wt * r)
    Wg = ca.reshape(ca.mtimes(Gx.T, nu_s), nx, M)    # g_x^T nu, per sample
    mu = h * (ca.mtimes(lam / ca.repmat(xs, 1, K - 1), A[1:, :]) + ca.mtimes(Wg, S))
    hxx, hxp, hpp = f_hess.map(K)(tk, U, pK, Wn, mu)
    Hf = ca.blockcat([[_block_diagonal(hxx, nx), _stacked(hxp, np_, K)],
                      [_stacked(hxp, np_, K).T, ca.mtimes(hpp, ca.repmat(ca.DM.eye(np_), K, 1))]])
    H = H + Hf
    if g_hess is not None:
        # the outputs' curvature, sample by sample
        qxx, qxp, qpp = g_hess.map(M)(ts, Xs, pM, Ws, ca.reshape(nu_s, ny, M))
        Qxx = _block_diagonal(qxx, nx)
        Qxp = _stacked(qxp, np_, M)
        Ep = ca.horzcat(ca.DM(np_, nU), ca.DM.eye(np_))
        cross = ca.mtimes(ca.mtimes(D.T, Qxp), Ep)
        H = H + ca.mtimes(D.T, ca.mtimes(Qxx, D)) + cross + cross.T \
            + ca.mtimes(Ep.T, ca.mtimes(ca.mtimes(qpp, ca.repmat(ca.DM.eye(np_), M, 1)), Ep))
    sc = ca.vertcat(ca.repmat(xs, K, 1), ps)
    H = H * ca.mtimes(sc, sc.T)
    return ca.Function("collocation_interval_hessian", list(args.values()),
                       [ca.triu(H[:nU, :nU]), H[nU:, :nU], ca.triu(H[nU:, nU:])],
                       list(args), ["Huu", "Hpu", "Hpp"])


def lagrangian_hessian(disc: Discretisation, w: ca.MX, data: ca.MX, pieces: dict[str, ca.MX],
                       scales: tuple[ca.MX, ca.MX]) -> ca.Function:
    """``hess_lag`` for ``nlpsol``: the upper triangle of the Lagrangian's Hessian.

    Parameters
    ----------
    disc : Discretisation
    w : casadi.MX
        The NLP's unknowns ``[p / ps, vec(U_j / xs) for each j]``.
    data : casadi.MX
        The NLP's parameter vector.
    pieces : dict of casadi.MX
        The data of every interval, read from ``data`` (``t0``, ``h``, ``Wn``,
        ``S``, ``ts``, ``Ws``, ``Y``, ``Wt``, one column block per interval).
    scales : (casadi.MX, casadi.MX)
        ``xs`` and ``ps``, read from ``data``.

    Returns
    -------
    casadi.Function
        ``(x, p, lam_f, lam_g) -> hess_gamma_x_x``, the constraints ordered as
        the NLP's ``g``: every interval's defects, then the continuity rows.
    """
    m = disc.model
    J, K, nx, np_ = disc.n_intervals, disc.K, m.nx, m.np
    nU = nx * K
    xs, ps = scales
    U, p = unscaled_unknowns(disc, w, xs, ps)
    n_g = J * nx * (K - 1) + nx * int(np.sum(disc.has_next))
    sigma = ca.MX.sym("lam_f")
    lam_g = ca.MX.sym("lam_g", n_g)
    lam = ca.reshape(lam_g[:J * nx * (K - 1)], nx, (K - 1) * J)
    Huu, Hpu, Hpp = interval_hessian(disc).map(J)(
        U, p, pieces["t0"], pieces["h"], pieces["Wn"], pieces["S"], pieces["ts"],
        pieces["Ws"], pieces["Y"], pieces["Wt"], xs, ps, lam, sigma)
    top = ca.horzcat(ca.mtimes(Hpp, ca.repmat(ca.DM.eye(np_), J, 1)), Hpu)
    bottom = ca.horzcat(ca.MX(J * nU, np_), _block_diagonal(Huu, nU))
    return ca.Function("nlp_hess_l", [w, data, sigma, lam_g],
                       [ca.vertcat(top, bottom)],
                       ["x", "p", "lam_f", "lam_g"], ["hess_gamma_x_x"])


def interval_defect_jacobian(disc: Discretisation) -> ca.Function:
    """The Jacobian of one interval's scaled fixed-point defects, in scaled unknowns.

    ``(U, p, t0, h, Wn, xs, ps) -> (Ju, Jp)``: ``Ju`` the rows of
    ``vec(defects)`` (``nx (K - 1)``) against ``vec(U / xs)``, ``Jp`` against
    ``p / ps`` (arguments as :func:`interval_hessian`).
    """
    m = disc.model
    K = disc.K
    nx, np_ = m.nx, m.np
    nU = nx * K
    A = np.asarray(disc.quad.integration, float)
    tau = ca.DM(disc.quad.tau).T
    sym = interval_symbols(disc)
    U, p, t0, h, Wn, xs = (sym[k] for k in ("U", "p", "t0", "h", "Wn", "xs"))
    ps = ca.MX.sym("ps", np_)
    f_jac = _vector_field_jacobian(disc)
    fx, fp = f_jac.map(K)(t0 + h * tau, U, ca.repmat(p, 1, K), Wn)
    nodes = ca.horzcat(_block_diagonal(fx, nx), _stacked(fp, np_, K))
    # (e_0 - e_k) kron I for the rows k = 1 .. K-1
    shift = np.zeros((K - 1, K))
    shift[:, 0] = 1.0
    shift[np.arange(K - 1), np.arange(1, K)] -= 1.0
    linear = ca.sparsify(ca.DM(np.hstack([np.kron(shift, np.eye(nx)),
                                          np.zeros((nx * (K - 1), np_))])))
    Jd = linear + h * ca.mtimes(ca.sparsify(ca.DM(np.kron(A[1:, :], np.eye(nx)))), nodes)
    rows = ca.repmat(1.0 / xs, K - 1, 1)
    cols = ca.vertcat(ca.repmat(xs, K, 1), ps)
    Jd = Jd * ca.mtimes(rows, cols.T)
    return ca.Function("collocation_interval_defect_jacobian", [U, p, t0, h, Wn, xs, ps],
                       [Jd[:, :nU], Jd[:, nU:]],
                       ["U", "p", "t0", "h", "Wn", "xs", "ps"], ["Ju", "Jp"])


def constraint_jacobian(disc: Discretisation, w: ca.MX, data: ca.MX, g: ca.MX,
                        pieces: dict[str, ca.MX], scales: tuple[ca.MX, ca.MX]) -> ca.Function:
    """``jac_g`` for ``nlpsol``: the constraints and their Jacobian.

    Parameters
    ----------
    g : casadi.MX
        The NLP's constraints (every interval's defects, then the continuity
        rows), an expression of ``w`` and ``data``.
    (the others as :func:`lagrangian_hessian`)

    Returns
    -------
    casadi.Function
        ``(x, p) -> (g, jac_g_x)``.
    """
    m = disc.model
    J, K, nx, np_ = disc.n_intervals, disc.K, m.nx, m.np
    nU = nx * K
    xs, ps = scales
    U, p = unscaled_unknowns(disc, w, xs, ps)
    Ju, Jp = interval_defect_jacobian(disc).map(J)(
        U, p, pieces["t0"], pieces["h"], pieces["Wn"], xs, ps)
    defects = ca.horzcat(_stacked(Jp, np_, J), _block_diagonal(Ju, nU))
    # continuity, in scaled unknowns: the last node of j minus the first of j + 1
    nxt = [j for j in range(J) if disc.has_next[j]]
    rows, cols, vals = [], [], []
    for i, j in enumerate(nxt):
        for s in range(nx):
            rows += [i * nx + s] * 2
            cols += [np_ + j * nU + (K - 1) * nx + s, np_ + (j + 1) * nU + s]
            vals += [1.0, -1.0]
    cont = ca.DM.triplet(rows, cols, ca.DM(vals), len(nxt) * nx, np_ + J * nU)
    return ca.Function("nlp_jac_g", [w, data], [g, ca.vertcat(defects, cont)],
                       ["x", "p"], ["g", "jac_g_x"])
