"""Products with an interval's fixed-point derivatives, without a factorisation.

At a fixed point ``U = P(x, p, U)`` of one interval the node derivatives in
a direction ``(dx, dp)`` solve the linearised fixed-point equation

    dU = 1 dx^T + h (f_x(U) dU + f_p(U) dp) A^T,

whose matrix ``I - dP/dU`` :mod:`picard_casadi.transcription.interval_linearisation`
factorises.  The same ``dU`` is the limit of the *linear Picard sweep*
``dU <- 1 dx^T + h (f_x dU + f_p dp) A^T`` from ``dU = 1 dx^T``: the sweep
contracts as ``dP/dU`` does, which is the premise of the Picard method (on
the ring of ``benchmarks/state_scaling.py``, a factor of about 10 per sweep).
Each sweep costs one directional derivative of ``f`` at the nodes, so a
product costs what ``f``'s coupling costs, never ``(K nx)^3`` and never the
``nx`` right-hand sides of a full sensitivity.  The transpose runs the same
sweeps backwards with vector-Jacobian products.

Two functions of one interval (MX graphs calling small SX pieces mapped over
the nodes, so the generated code stays small; ``SWEEPS`` sweeps each):

* ``interval_forward(x, U, p, t0, h, Wn, S, ts, Ws, dx, dp) -> (dxend, dG,
  dU, change)``: the derivatives of the end state and of the outputs at the
  samples in the direction ``(dx, dp)``, the node derivatives, and the
  last sweep's relative change (how far the sweeps are from their limit);
* ``interval_transpose(x, U, p, t0, h, Wn, S, ts, Ws, w_end, w_G) -> (bar_dx,
  bar_dp)``: the transposed product.

:class:`IntervalProducts` chains them along each experiment (the continuity
conditions ``dx_{j+1} = dx_end_j + c_j``), which is the condensed Jacobian
of the constrained Gauss-Newton step as an operator
(:mod:`picard_casadi.methods.matrix_free`).
"""

from __future__ import annotations

from typing import Any

import casadi as ca
import numpy as np

from .discretisation import Discretisation, from_map_layout, to_map_layout

__all__ = ["SWEEPS", "interval_expressions", "point_derivative_functions",
           "interval_product_functions", "IntervalProducts", "CARRY_IN", "CARRY_OUT"]

#: linear Picard sweeps per product.  For an interval of length h and a
#: Lipschitz constant L their error falls like (h L)^k / k! (a Taylor series)
#: until the collocation's own fixed point is reached: with h L = 2, 3e-9
#: after 16 sweeps and 4e-13 after 20 (on the ring of docs/performance.md the
#: last sweep of 16 still changed the derivatives by 2e-9 at the solution).
#: The last sweep's change is returned so that a step can refuse a product
#: that has not converged.
SWEEPS = 20


def interval_expressions(disc: Discretisation) -> tuple[list[ca.SX], ca.SX, ca.SX, ca.SX]:
    """One interval's symbols ``[x, U, p, t0, h, Wn, S, ts, Ws]`` and in them the
    right-hand side at the nodes ``F (nx, K)``, the outputs at the samples ``G
    (ny, M)`` and the end state, all after one Picard application from ``U``."""
    m = disc.model
    K, M = disc.K, disc.M
    A = np.asarray(disc.quad.integration, float)
    tau = np.asarray(disc.quad.tau, float)
    x, U, p = ca.SX.sym("x", m.nx), ca.SX.sym("U", m.nx, K), ca.SX.sym("p", m.np)
    t0, h = ca.SX.sym("t0"), ca.SX.sym("h")
    Wn, S = ca.SX.sym("Wn", m.nu, K), ca.SX.sym("S", M, K)
    ts, Ws = ca.SX.sym("ts", 1, M), ca.SX.sym("Ws", m.nu, M)
    f = ca.Function("f", [m.t, m.x, m.p, m.u], [m.rhs])
    g = ca.Function("g", [m.t, m.x, m.p, m.u], [m.y])
    F = ca.horzcat(*[f(t0 + h * tau[k], U[:, k], p, Wn[:, k]) for k in range(K)])
    Xs = ca.repmat(x, 1, M) + h * ca.mtimes(F, S.T)
    G = ca.horzcat(*[g(ts[0, s], Xs[:, s], p, Ws[:, s]) for s in range(M)])
    xend = x + h * ca.mtimes(F, ca.DM(A[K - 1, :]))
    return [x, U, p, t0, h, Wn, S, ts, Ws], F, G, xend


def point_derivative_functions(model) -> dict[str, ca.Function]:
    """Directional derivatives of ``f`` and ``g`` at one point, forward and reverse.

    ``f(t, x, p, u)``, ``f_jvp(t, x, p, u, dx, dp) -> f_x dx + f_p dp``,
    ``f_vjp(t, x, p, u, w) -> (f_x^T w, f_p^T w)`` and the same ``g_jvp``,
    ``g_vjp`` for the outputs.  The products map them over the
    nodes and samples, so the generated code holds ``f``'s derivatives once,
    not once per node.
    """
    t, x, p, u = model.t, model.x, model.p, model.u
    z = ca.vertcat(x, p)
    dx, dp = ca.SX.sym("dx", model.nx), ca.SX.sym("dp", model.np)
    out = {"f": ca.Function("f", [t, x, p, u], [model.rhs])}
    for name, expr in (("f", model.rhs), ("g", model.y)):
        w = ca.SX.sym("w", expr.numel())
        jvp = ca.jtimes(expr, z, ca.vertcat(dx, dp))
        vjp = ca.jtimes(expr, z, w, True)
        out[name + "_jvp"] = ca.Function(name + "_jvp", [t, x, p, u, dx, dp], [jvp])
        out[name + "_vjp"] = ca.Function(name + "_vjp", [t, x, p, u, w],
                                         [vjp[:model.nx], vjp[model.nx:]])
    return out


def interval_product_functions(disc: Discretisation, sweeps: int = SWEEPS
                               ) -> dict[str, ca.Function]:
    """``interval_forward`` and ``interval_transpose`` of one interval, each with
    the continuity chain's link built in (module doc).

    ``interval_forward(x, U, p, t0, h, Wn, S, ts, Ws, carry, z, restart, offset,
    dp) -> (next, start, dG, dU, change)``: the interval starts from ``start =
    z`` where ``restart`` is 1 (an experiment's first interval, or a given
    start) and from ``carry`` (the previous interval's ``next``) where it is
    0; ``next = dxend + offset``.

    ``interval_transpose(x, U, p, t0, h, Wn, S, ts, Ws, carry, w_G, w_start,
    cont) -> (bar, bar_dp)``: the transposed product with ``w_end = cont
    carry`` (``cont``: 1 where the next interval continues this one's
    experiment, ``carry``: the next interval's ``bar``) and ``bar = bar_dx +
    w_start``.

    Both are MX graphs over :func:`point_derivative_functions` mapped over the
    ``K`` nodes and ``M`` samples, and over the integration of one state's
    node values mapped over the states: the generated code holds the model's
    derivatives once, not once per node (docs/performance.md, "The
    products-only step").
    """
    m = disc.model
    K, M, nx, ny = disc.K, disc.M, m.nx, m.ny
    A = ca.DM(np.asarray(disc.quad.integration, float))
    a_end = ca.DM(np.asarray(disc.quad.integration, float)[K - 1, :]).T  # (1, K)
    tau = ca.DM(np.asarray(disc.quad.tau, float)).T  # (1, K)
    point = point_derivative_functions(m)
    f, f_jvp, f_vjp = point["f"].map(K), point["f_jvp"].map(K), point["f_vjp"].map(K)
    g_jvp, g_vjp = point["g_jvp"].map(M), point["g_vjp"].map(M)

    names = ["x", "U", "p", "t0", "h", "Wn", "S", "ts", "Ws"]
    shapes = [(nx, 1), (nx, K), (m.np, 1), (1, 1), (1, 1), (m.nu, K), (M, K), (1, M),
              (m.nu, M)]
    sym = [ca.MX.sym(n, *shape) for n, shape in zip(names, shapes)]
    x, U, p, t0, h, Wn, S, ts, Ws = sym
    tn = t0 + h * tau
    F = f(tn, U, p, Wn)
    Xs = ca.repmat(x, 1, M) + h * ca.mtimes(F, S.T)  # the states at the samples

    # the integration over the nodes, one state at a time (mapped over the
    # states: the same product as an MX mtimes, CasADi's generic sparse loop,
    # took most of a product's time)
    row, start, hs = ca.SX.sym("row", K), ca.SX.sym("start"), ca.SX.sym("h")
    integrate = ca.Function("integrate_nodes", [row, start, hs],
                            [start + hs * ca.mtimes(A, row)]).map(nx)
    integrate_T = ca.Function("integrate_nodes_T", [row, hs],
                              [hs * ca.mtimes(A.T, row)]).map(nx)

    def sweep(node, dp, dx):
        """One linear Picard sweep: ``1 dx^T + h (f_x dU + f_p dp) A^T``."""
        return integrate(f_jvp(tn, U, p, Wn, node, dp).T, dx.T, h).T

    def sweep_T(bar):
        """The transposed sweep: derivatives of ``<bar, sweep>`` in ``dU``, ``dp``, ``dx``."""
        bU, bp = f_vjp(tn, U, p, Wn, integrate_T(bar.T, h).T)
        return bU, ca.sum2(bp), ca.sum2(bar)

    carry, zs, restart = ca.MX.sym("carry", nx), ca.MX.sym("z", nx), ca.MX.sym("restart")
    offset, mdp = ca.MX.sym("offset", nx), ca.MX.sym("dp", m.np)
    mdx = restart * zs + (1 - restart) * carry
    node = ca.repmat(mdx, 1, K)
    previous = node
    for _ in range(sweeps):
        previous, node = node, sweep(node, mdp, mdx)
    change = ca.mmax(ca.fabs(node - previous)) / ca.fmax(ca.mmax(ca.fabs(node)), 1e-300)
    # the end state and the outputs at the samples, moved by the node moves
    lin = h * f_jvp(tn, U, p, Wn, node, mdp)
    d_end = mdx + ca.mtimes(lin, a_end.T)
    d_Xs = ca.repmat(mdx, 1, M) + ca.mtimes(lin, S.T)
    d_G = g_jvp(ts, Xs, p, Ws, d_Xs, mdp)
    dense = ca.densify
    forward = ca.Function(
        "interval_forward", sym + [carry, zs, restart, offset, mdp],
        [dense(d_end + offset), dense(mdx), dense(d_G), dense(node), dense(change)],
        names + ["carry", "z", "restart", "offset", "dp"],
        ["next", "start", "dG", "dU", "change"])

    w_G, w_start, cont = ca.MX.sym("w_G", ny, M), ca.MX.sym("w_start", nx), ca.MX.sym("cont")
    w_end = cont * carry
    # the outputs' and end state's weights back to the node moves
    bar_Xs, bar_p_G = g_vjp(ts, Xs, p, Ws, w_G)
    bar_lin = h * (ca.mtimes(bar_Xs, S) + ca.mtimes(w_end, a_end))  # (nx, K)
    bnode, bar_p_F = f_vjp(tn, U, p, Wn, bar_lin)
    bdx = w_end + ca.sum2(bar_Xs)
    bdp = ca.sum2(bar_p_G) + ca.sum2(bar_p_F)
    for _ in range(sweeps):
        bprev, bp, bsum = sweep_T(bnode)
        bdx, bdp, bnode = bdx + bsum, bdp + bp, bprev
    transpose = ca.Function(
        "interval_transpose", sym + [carry, w_G, w_start, cont],
        [dense(bdx + ca.sum2(bnode) + w_start), dense(bdp)],
        names + ["carry", "w_G", "w_start", "cont"], ["bar", "bar_dp"])
    return {"interval_forward": forward, "interval_transpose": transpose}


#: the chained input and output of both functions (``carry`` and its source)
CARRY_IN, CARRY_OUT = 9, 0


class IntervalProducts:
    """The linearisation of every interval at one point, as products.

    Chains :func:`interval_product_functions` along each experiment (one
    compiled call per product, ``NativeFunction.chain``; on CasADi's
    virtual machine a loop over the intervals): the condensed Jacobian of
    the constrained step without ever forming the interval sensitivities.
    All quantities are unscaled.

    Parameters
    ----------
    disc : Discretisation
    functions : mapping
        ``name -> (native, unit)`` for ``interval_forward`` and
        ``interval_transpose``: the compiled function mapped over the
        intervals (:class:`~picard_casadi.runtime.native.NativeFunction`, or
        ``None`` on the virtual machine) and the CasADi function of one
        interval.
    X : ndarray (J, nx), U : ndarray (J, nx, K), p : ndarray (np,)
        The point.
    common : dict
        The problem's constant data in the mapped layout (``t0``, ``h``,
        ``Wn``, ``S``, ``ts``, ``Ws``).
    """

    def __init__(self, disc: Discretisation, functions: dict[str, tuple[Any, ca.Function]],
                 X: np.ndarray, U: np.ndarray, p: np.ndarray, common: dict) -> None:
        self.disc = disc
        self._functions = functions
        J, K = disc.n_intervals, disc.K
        nx = disc.model.nx

        def dense(a):
            return np.asarray(a.full() if isinstance(a, ca.DM) else a, float)

        self._data = [np.asfortranarray(X.T), np.asfortranarray(
            U.transpose(1, 0, 2).reshape(nx, J * K)), np.asarray(p, float),
            *(dense(common[k]) for k in ("t0", "h", "Wn", "S", "ts", "Ws"))]
        first = np.zeros(J)
        for sl in disc.intervals_of:
            first[sl.start] = 1.0
        self._first = first[None, :]
        self._cont = disc.has_next.astype(float)[None, :]
        self.nx, self.np = nx, disc.model.np
        self.change = 0.0  # largest last-sweep change of the forward products so far
        self.last_nodes: np.ndarray | None = None

    def _chain(self, name: str, args: list, reverse: bool) -> list[np.ndarray]:
        """Outputs, in the mapped layout, of the chained calls of ``name``."""
        native, unit = self._functions[name]
        if native is not None:
            return native.chain(*args, carry_in=CARRY_IN, carry_out=CARRY_OUT, reverse=reverse)
        J = self.disc.n_intervals
        widths = [unit.size2_in(i) for i in range(unit.n_in())]
        per_call = [np.atleast_2d(np.asarray(a, float).T).T if np.ndim(a) < 2 else np.asarray(a)
                    for a in args]
        outs: list[list[np.ndarray]] = [[] for _ in range(unit.n_out())]
        results: dict[int, list[np.ndarray]] = {}
        order = range(J - 1, -1, -1) if reverse else range(J)
        previous = None
        for k in order:
            call = []
            for i, (a, w) in enumerate(zip(per_call, widths)):
                repeated = a.shape[1] == w and J > 1
                call.append(a if repeated else a[:, k * w:(k + 1) * w])
            if previous is not None:
                call[CARRY_IN] = results[previous][CARRY_OUT]
            res = unit(*call)
            res = [np.asarray(ca.DM(o).full()) for o in (res if isinstance(res, (list, tuple))
                                                           else [res])]
            results[k] = res
            previous = k
        for k in range(J):
            for o, v in enumerate(results[k]):
                outs[o].append(v)
        return [np.hstack(o) for o in outs]

    def forward(self, dx0: np.ndarray, dp: np.ndarray, offsets: np.ndarray | None = None,
                dX: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Derivatives along the experiments, or of given interval starts.

        Parameters
        ----------
        dx0 : ndarray (E, nx)
            Moves of each experiment's first state (ignored with ``dX``).
        dp : ndarray (np,)
        offsets : ndarray (J, nx), optional
            Added to each interval's end-state move before it becomes the
            next interval's start move (the continuity gaps).
        dX : ndarray (J, nx), optional
            Every interval start's move, taken as given (no chaining).

        Returns
        -------
        dX : (J, nx)  moves of the interval starts used
        dxend : (J, nx)  moves of the end states
        dG : (J, ny, M)  moves of the outputs at the samples
        (the node moves ``(J, nx, K)`` are then in :attr:`last_nodes`)
        """
        d = self.disc
        J = d.n_intervals
        if dX is not None:
            z, restart = np.asarray(dX, float).T, np.ones((1, J))
        else:
            z = np.zeros((self.nx, J))
            for e, sl in enumerate(d.intervals_of):
                z[:, sl.start] = dx0[e]
            restart = self._first
        off = np.zeros((self.nx, J)) if offsets is None else np.asarray(offsets, float).T
        nxt, start, dG, dU, change = self._chain(
            "interval_forward", self._data + [np.zeros(self.nx), z, restart, off,
                                              np.asarray(dp, float)], reverse=False)
        worst = float(np.max(change))
        self.change = max(self.change, worst) if np.isfinite(worst) else np.inf
        self.last_nodes = from_map_layout(dU, J)
        return start.T, (nxt - off).T, from_map_layout(dG, J)

    def transpose(self, w_G: np.ndarray, w_start: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray]:
        """The transposed chained product.

        Parameters
        ----------
        w_G : ndarray (J, ny, M)
            Weights of the output moves.
        w_start : ndarray (J, nx), optional
            Weights of the interval starts' moves.

        Returns
        -------
        bar_x0 : (E, nx)  derivative with respect to each experiment's first-state move
        bar_p : (np,)
        """
        d = self.disc
        J = d.n_intervals
        ws = np.zeros((self.nx, J)) if w_start is None else np.asarray(w_start, float).T
        bar, bar_dp = self._chain(
            "interval_transpose", self._data + [np.zeros(self.nx), to_map_layout(w_G), ws,
                                                self._cont], reverse=True)
        bar_x0 = np.array([bar[:, sl.start] for sl in d.intervals_of])
        return bar_x0, bar_dp.sum(axis=1)
