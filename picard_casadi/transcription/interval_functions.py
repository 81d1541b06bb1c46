"""The CasADi functions of one estimation problem.

On interval ``j`` (start ``t0``, length ``h``) the solution is held on the
quadrature nodes as ``U`` (``nx x K``) and the Picard operator is

    (P U)_k = x_j + h sum_l A[k, l] f(t0 + h tau_l, U_l, p, w_l)

with ``A`` the node integration matrix and ``w_l`` the input values at the
nodes (a function argument, so one function serves every experiment).
``P^n`` is composed symbolically; the state at a sample ``tau_s`` is
``x_j + h S[s, :] F(P^{n-1} U)`` with ``S`` the sample integration rows.

Every function here is built once per interval as an SX function and mapped
over all intervals of all experiments (``Function.map``): the graph does not
grow with the number of intervals, and each function can be code-generated.

Residuals of interval ``j`` (their squared norm halved is the paper's
``L_{lambda,n}`` restricted to the interval, plus a multiplier shift):

    r_data = sqrt(w / N) * mask * (y_i - g(t_i, (P^n U)(tau_i), p, u_i))
    r_cont = sqrt(2 lambda) * has_next * ((P^n U)(1) - x_{j+1}) / x_scale + v_j)

``v_j`` is the scaled multiplier shift of the continuity constraint (zero for
the paper's pure penalty).  Continuity is measured in units of the state scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import casadi as ca

from .discretisation import Discretisation

__all__ = ["IntervalFunctions", "build_interval_functions", "RESIDUAL_INPUTS",
           "PICARD_INPUTS", "TRAJECTORY_INPUTS", "RELAX_INPUTS"]

# Argument order of the residual family (names used for code generation too).
RESIDUAL_INPUTS = (
    "x", "U", "p", "xn", "v", "lam", "xs",
    "t0", "h", "Wn", "S", "ts", "Ws", "Y", "Wt", "c",
)


PICARD_INPUTS = ("x", "U", "p", "t0", "h", "Wn")


TRAJECTORY_INPUTS = ("x", "U", "p", "t0", "h", "Wn", "S", "ts", "Ws")


RELAX_INPUTS = TRAJECTORY_INPUTS + ("Y", "Ym", "sigma", "xs")


@dataclass(frozen=True)
class IntervalFunctions:
    """Per-interval CasADi functions (not yet mapped).

    Attributes
    ----------
    picard : casadi.Function
        ``(x, U, p, t0, h, Wn) -> (PU)``: one Picard application.
    residual : casadi.Function
        ``(x, U, p, xn, v, lam, xs, t0, h, Wn, S, ts, Ws, Y, Wt, c) -> r``.
    jacobian : casadi.Function
        Same inputs ``-> (r, Jx, Jp)``: derivatives of ``r`` with respect to
        ``x`` and ``p`` through ``P^n`` (``U`` held fixed).
    gradient : casadi.Function
        Same inputs ``-> (phi, gx, gp, gxn)``: ``phi = |r|^2 / 2`` and its
        gradients with respect to ``x``, ``p`` and ``xn`` (reverse mode).
    trajectory : casadi.Function
        ``(x, U, p, t0, h, Wn, S, ts, Ws) -> (Xs, Ys, xend)``: states and
        outputs at the samples, and the end state, all from ``P^n U``.
    objective : casadi.Function
        The residual family's inputs ``-> phi = |r|^2 / 2`` (a scalar per
        interval: what a line search needs, without moving ``r`` to Python).
    summary : casadi.Function
        ``(x, U, p, t0, h, Wn, S, ts, Ws, Y, Ym) -> (sse, xend)``: the
        unweighted sum of squared data errors and the end state.
    relax : casadi.Function
        ``(x, U, p, t0, h, Wn, S, ts, Ws, Y, Ym, sigma, xs) -> (U', fp,
        fp_sum, sse, xend)``: the relaxed update ``U' = U + sigma (P U - U)``,
        the largest and the summed scaled ``|P U - U|`` (the sum carries a NaN,
        which C's ``fmax`` drops), and the summary of ``U'``: the paper's
        iteration in one call.
    n_residuals : int
        Length of ``r`` per interval (``ny M + nx``).
    """

    picard: ca.Function
    residual: ca.Function
    jacobian: ca.Function
    gradient: ca.Function
    trajectory: ca.Function
    objective: ca.Function
    summary: ca.Function
    relax: ca.Function
    n_residuals: int


def _mapped_evaluations(disc: Discretisation, n: int
                        ) -> tuple[ca.Function, ca.Function, ca.Function]:
    """``picard``, ``trajectory`` and ``summary`` of :class:`IntervalFunctions` as
    MX graphs over ``f`` mapped over the nodes, ``g`` over the samples and the
    node integration over the states.

    The same functions as SX expressions write ``f`` out once per node and
    ``g`` once per sample: on a ring of 160 states their C was 1.1 to 2 MB each
    and took 5 to 8 s to compile (docs/performance.md).  These evaluate
    without derivatives, so nothing is lost by keeping them MX.
    """
    m = disc.model
    K, M = disc.K, disc.M
    nx, np_, nu, ny = m.nx, m.np, m.nu, m.ny
    A = ca.DM(disc.quad.integration)  # K x K
    tau = ca.DM(disc.quad.tau).T  # 1 x K
    row, start, hs = ca.SX.sym("row", K), ca.SX.sym("start"), ca.SX.sym("h")
    integrate = ca.Function("integrate_nodes", [row, start, hs],
                            [start + hs * ca.mtimes(A, row)]).map(nx)
    f_nodes, g_samples = m.f.map(K), m.g.map(M)

    x, U, p = ca.MX.sym("x", nx), ca.MX.sym("U", nx, K), ca.MX.sym("p", np_)
    t0, h = ca.MX.sym("t0"), ca.MX.sym("h")
    Wn, S = ca.MX.sym("Wn", nu, K), ca.MX.sym("S", M, K)
    ts, Ws = ca.MX.sym("ts", 1, M), ca.MX.sym("Ws", nu, M)
    Y, Ym = ca.MX.sym("Y", ny, M), ca.MX.sym("Ym", ny, M)
    node_t = t0 + h * tau

    def apply_picard(Uc: ca.MX) -> ca.MX:
        return integrate(f_nodes(node_t, Uc, p, Wn).T, x.T, h).T

    Uc = U
    for _ in range(n - 1):
        Uc = apply_picard(Uc)
    Fn = f_nodes(node_t, Uc, p, Wn)  # f along P^{n-1} U
    xend = x + h * ca.mtimes(Fn, A[K - 1, :].T)
    Xs = ca.repmat(x, 1, M) + h * ca.mtimes(Fn, S.T)
    Ys = g_samples(ts, Xs, p, Ws)
    dense = ca.densify
    picard = ca.Function("picard_step", [x, U, p, t0, h, Wn], [dense(apply_picard(U))],
                         list(PICARD_INPUTS), ["PU"])
    trajectory = ca.Function(
        "trajectory", [x, U, p, t0, h, Wn, S, ts, Ws], [dense(Xs), dense(Ys), dense(xend)],
        list(TRAJECTORY_INPUTS), ["Xs", "Ys", "xend"])
    summary = ca.Function(
        "summary", [x, U, p, t0, h, Wn, S, ts, Ws, Y, Ym],
        [dense(ca.sum1(ca.sum2(Ym * (Y - Ys) ** 2))), dense(xend)],
        list(TRAJECTORY_INPUTS) + ["Y", "Ym"], ["sse", "xend"])
    return picard, trajectory, summary


def build_interval_functions(disc: Discretisation, n: int) -> IntervalFunctions:
    """Build the per-interval SX functions of ``P``, ``P^n`` and the residuals.

    Parameters
    ----------
    disc : Discretisation
        Supplies the model, the quadrature and the padded sample count ``M``.
    n : int
        Order of the Picard composition in the loss (``n >= 1``).

    Returns
    -------
    IntervalFunctions
    """
    if int(n) != n or n < 1:
        raise ValueError(f"n (the Picard order) must be an integer >= 1, got {n!r}")
    n = int(n)
    m = disc.model
    K, M = disc.K, disc.M
    nx, np_, nu, ny = m.nx, m.np, m.nu, m.ny
    A = ca.DM(disc.quad.integration)  # K x K
    tau = ca.DM(disc.quad.tau).T  # 1 x K

    x = ca.SX.sym("x", nx)
    U = ca.SX.sym("U", nx, K)
    p = ca.SX.sym("p", np_)
    xn = ca.SX.sym("xn", nx)
    v = ca.SX.sym("v", nx)
    lam = ca.SX.sym("lam")
    xs = ca.SX.sym("xs", nx)
    t0 = ca.SX.sym("t0")
    h = ca.SX.sym("h")
    Wn = ca.SX.sym("Wn", nu, K)
    S = ca.SX.sym("S", M, K)
    ts = ca.SX.sym("ts", 1, M)
    Ws = ca.SX.sym("Ws", nu, M)
    Y = ca.SX.sym("Y", ny, M)
    Wt = ca.SX.sym("Wt", ny, M)
    c = ca.SX.sym("c")

    f_nodes = m.f.map(K)
    g_samples = m.g.map(M)
    node_t = t0 + h * tau
    P_rep = ca.repmat(p, 1, K)

    def vector_field(Uc: ca.SX) -> ca.SX:
        return f_nodes(node_t, Uc, P_rep, Wn)

    def apply_picard(Uc: ca.SX) -> ca.SX:
        return ca.repmat(x, 1, K) + h * ca.mtimes(vector_field(Uc), A.T)

    def samples(Uc: ca.SX) -> tuple[ca.SX, ca.SX, ca.SX]:
        """States and outputs at the samples, and the end state, of ``P^n Uc``."""
        for _ in range(n - 1):
            Uc = apply_picard(Uc)
        Fn = vector_field(Uc)  # f along P^{n-1} U
        x_end = x + h * ca.mtimes(Fn, A[K - 1, :].T)
        X_samples = ca.repmat(x, 1, M) + h * ca.mtimes(Fn, S.T)
        return X_samples, g_samples(ts, X_samples, ca.repmat(p, 1, M), Ws), x_end

    PU = apply_picard(U)
    Xs, Ys, xend = samples(U)

    r_data = ca.vec(Wt * (Y - Ys))
    r_cont = ca.sqrt(2 * lam) * c * ((xend - xn) / xs + v)
    r = ca.vertcat(r_data, r_cont)
    phi = 0.5 * ca.sumsqr(r)

    res_in = [x, U, p, xn, v, lam, xs, t0, h, Wn, S, ts, Ws, Y, Wt, c]
    residual = ca.Function("residual", res_in, [r], list(RESIDUAL_INPUTS), ["r"])
    jacobian = ca.Function(
        "residual_jacobian", res_in,
        [r, ca.jacobian(r, x), ca.jacobian(r, p)],
        list(RESIDUAL_INPUTS), ["r", "Jx", "Jp"],
    )
    gx, gp, gxn = ca.gradient(phi, x), ca.gradient(phi, p), ca.gradient(phi, xn)
    gradient = ca.Function(
        "objective_gradient", res_in, [phi, gx, gp, gxn],
        list(RESIDUAL_INPUTS), ["phi", "gx", "gp", "gxn"],
    )
    objective = ca.Function("objective", res_in, [phi], list(RESIDUAL_INPUTS), ["phi"])
    Ym = ca.SX.sym("Ym", ny, M)
    picard, trajectory, summary = _mapped_evaluations(disc, n)
    # the paper's relaxed update and the summary of its result in one call
    sigma = ca.SX.sym("sigma")
    step = PU - U
    U_new = U + sigma * step
    moved = ca.fabs(step) / ca.repmat(xs, 1, K)
    _, Ys_new, xend_new = samples(U_new)
    relax = ca.Function(
        "relax", [x, U, p, t0, h, Wn, S, ts, Ws, Y, Ym, sigma, xs],
        [U_new, ca.mmax(moved), ca.sum1(ca.sum2(moved)),
         ca.sum1(ca.sum2(Ym * (Y - Ys_new) ** 2)), xend_new],
        list(RELAX_INPUTS), ["U_new", "fp", "fp_sum", "sse", "xend"],
    )
    return IntervalFunctions(picard, residual, jacobian, gradient, trajectory, objective,
                             summary, relax, ny * M + nx)
