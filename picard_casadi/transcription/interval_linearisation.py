"""The Picard fixed point of one interval, its Newton step and exact sensitivities,
as CasADi functions with a sparse factorisation inside.

At a fixed point ``U = P(x, p, U)`` of one interval (``K`` nodes, ``nx``
states) the node values' derivatives follow from

    M dU/dz = dP/dz,      M = I - h (A kron I) blockdiag(f_x(t_l, u_l, p)),

``z = (x_j, p)`` (:mod:`picard_casadi.transcription.sensitivity` has the derivation).  ``M``
is ``K nx`` square; its node blocks are dense (``A`` couples every node with
every other), but each block has the sparsity of ``f_x``, so for a sparsely
coupled model (each state driven by a few others) ``M`` is mostly zeros and
its sparse factorisation costs what the coupling costs, not ``(K nx)^3``.
The functions here build ``M`` from the nonzeros of ``f_x`` (a constant
sparse matrix maps them to ``M``'s nonzeros) and solve with CasADi's sparse
QR (``"qr"``, which code generation supports), so the whole per-interval
linearisation is one generated C function, mapped over the intervals:

* ``interval_newton(x, U, p, t0, h, Wn, xs) -> (U_new, res)``: one Newton
  step ``U + M^-1 (P U - U)`` and the scaled residual ``max |P U - U| / xs``
  before it;
* ``interval_linearisation(x, U, p, t0, h, Wn, S, ts, Ws) -> (G, dG, xend,
  dend, dU)``: outputs at the samples and the end state of one Picard
  application, their exact derivatives in ``(x_j, p)`` through the fixed
  point, and the node sensitivities ``dU/dz`` (rows node-major).

On small or densely coupled models the batched dense linear algebra of
:mod:`picard_casadi.transcription.sensitivity` is faster; :func:`sparse_pays` chooses
(measurements: ``docs/performance.md``).
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from .discretisation import Discretisation

__all__ = ["sparse_interval_functions", "fixed_point_matrix_pattern", "sparse_pays",
           "SPARSE_MIN_STATES", "SPARSE_MAX_DENSITY"]

# The sparse factorisation pays where f_x is sparse and the matrix large; on
# small, densely coupled models the batched dense LU is faster (on the ring of
# benchmarks/state_scaling.py the two paths are level from 10 to 20 states and
# the sparse one is faster from 26; measurements: docs/performance.md, "Large,
# sparsely coupled models").
SPARSE_MIN_STATES = 20
SPARSE_MAX_DENSITY = 0.2


def sparse_pays(model) -> bool:
    """Whether the model is large and sparsely coupled enough for the sparse path."""
    nnz = int(np.count_nonzero(model.jacobian_pattern))
    return model.nx >= SPARSE_MIN_STATES and nnz <= SPARSE_MAX_DENSITY * model.nx ** 2


def fixed_point_matrix_pattern(A: np.ndarray, fx: ca.Sparsity, nx: int
                               ) -> tuple[ca.Sparsity, ca.DM, ca.DM]:
    """The sparsity of ``M = I - h (A kron I) blockdiag(f_x)`` and its assembly.

    Rows and columns are node-major (node ``k``, then state).  Returns the
    pattern, the nonzeros of the identity in it, and the constant matrix
    ``T`` with ``nz(M) = nz(I) - h T nz(f_x at all nodes)`` (the nonzeros of
    ``f_x`` node after node, each in its own column-major order).
    """
    K = A.shape[0]
    rows_fx, cols_fx = fx.get_triplet()
    nnz_fx = fx.nnz()
    keys: dict[tuple[int, int], int] = {}
    for k in range(K):
        for a in range(nx):
            keys.setdefault((k * nx + a, k * nx + a), len(keys))
    contrib = []  # (entry, column of f_x's nonzeros, A[k, l])
    for k in range(K):
        for l in range(K):
            if A[k, l] == 0.0:
                continue
            for e in range(nnz_fx):
                key = (k * nx + rows_fx[e], l * nx + cols_fx[e])
                contrib.append((keys.setdefault(key, len(keys)), l * nnz_fx + e, A[k, l]))
    n = K * nx
    entries = list(keys)
    rows = [r for r, _ in entries]
    cols = [c for _, c in entries]
    pattern = ca.Sparsity.triplet(n, n, rows, cols)
    # position of each entry among the pattern's (column-major) nonzeros
    order = np.empty(len(entries), dtype=np.int64)
    order[np.lexsort((rows, cols))] = np.arange(len(entries))
    eye = np.zeros(pattern.nnz())
    for k in range(K):
        for a in range(nx):
            eye[order[keys[(k * nx + a, k * nx + a)]]] = 1.0
    T = ca.DM.triplet([int(order[i]) for i, _, _ in contrib], [c for _, c, _ in contrib],
                      ca.DM([v for _, _, v in contrib]), pattern.nnz(), K * nnz_fx)
    return pattern, ca.DM(eye), T


def sparse_interval_functions(disc: Discretisation) -> dict[str, ca.Function]:
    """``interval_newton`` and ``interval_linearisation`` of one interval (see the module doc)."""
    m = disc.model
    K, M = disc.K, disc.M
    nx, np_, nu, ny = m.nx, m.np, m.nu, m.ny
    A = np.asarray(disc.quad.integration, float)
    tau = ca.DM(disc.quad.tau).T
    t, x_, p_, u_ = m.t, m.x, m.p, m.u
    fjac = ca.Function("f_jac", [t, x_, p_, u_],
                       [m.rhs, ca.jacobian(m.rhs, x_), ca.jacobian(m.rhs, p_)])
    gjac = ca.Function("g_jac", [t, x_, p_, u_],
                       [m.y, ca.jacobian(m.y, x_), ca.jacobian(m.y, p_)])
    pattern, eye, T = fixed_point_matrix_pattern(A, fjac.sparsity_out(1), nx)

    x = ca.MX.sym("x", nx)
    U = ca.MX.sym("U", nx, K)
    p = ca.MX.sym("p", np_)
    t0 = ca.MX.sym("t0")
    h = ca.MX.sym("h")
    Wn = ca.MX.sym("Wn", nu, K)
    xs = ca.MX.sym("xs", nx)
    F, Fx, Fp = fjac.map(K)(t0 + h * tau, U, ca.repmat(p, 1, K), Wn)
    matrix = ca.MX(pattern, eye - h * ca.mtimes(T, ca.vec(Fx.nz[:])))
    AT = ca.DM(A.T)
    PU = ca.repmat(x, 1, K) + h * ca.mtimes(F, AT)
    R = PU - U
    dU = ca.reshape(ca.solve(matrix, ca.vec(R), "qr"), nx, K)
    res = ca.mmax(ca.fabs(R) / ca.repmat(xs, 1, K))
    newton = ca.Function("interval_newton", [x, U, p, t0, h, Wn, xs], [U + dU, res],
                         ["x", "U", "p", "t0", "h", "Wn", "xs"], ["U_new", "res"])

    S = ca.MX.sym("S", M, K)
    ts = ca.MX.sym("ts", 1, M)
    Ws = ca.MX.sym("Ws", nu, M)
    eye_z = ca.horzcat(ca.DM.eye(nx), ca.DM.zeros(nx, np_))
    # right-hand sides dP/dz: x_j enters every node, p through h (A kron I) f_p
    Fp_nodes = [Fp[:, l * np_:(l + 1) * np_] for l in range(K)]
    zero_p = ca.MX.zeros(nx, np_)
    rhs = ca.vertcat(*[ca.horzcat(ca.DM.eye(nx),
                                  h * sum((A[k, l] * Fp_nodes[l] for l in range(K) if A[k, l]),
                                          zero_p))
                       for k in range(K)])
    dUdz = ca.solve(matrix, rhs, "qr")  # (K nx, nx + np)
    # dF_l/dz = f_x(u_l) dU_l/dz + [0 | f_p(u_l)]
    dF = [ca.mtimes(Fx[:, l * nx:(l + 1) * nx], dUdz[l * nx:(l + 1) * nx, :])
          + ca.horzcat(ca.DM.zeros(nx, nx), Fp_nodes[l]) for l in range(K)]
    Xs = ca.repmat(x, 1, M) + h * ca.mtimes(F, S.T)
    xend = x + h * ca.mtimes(F, ca.DM(A[K - 1, :]))
    dend = eye_z + h * sum((A[K - 1, l] * dF[l] for l in range(K) if A[K - 1, l]),
                           ca.MX.zeros(nx, nx + np_))
    G, Gx, Gp = gjac.map(M)(ts, Xs, ca.repmat(p, 1, M), Ws)
    dG = []
    for s in range(M):
        dXs = eye_z + h * sum(S[s, l] * dF[l] for l in range(K))
        dG.append(ca.mtimes(Gx[:, s * nx:(s + 1) * nx], dXs)
                  + ca.horzcat(ca.DM.zeros(ny, nx), Gp[:, s * np_:(s + 1) * np_]))
    linearisation = ca.Function(
        "interval_linearisation", [x, U, p, t0, h, Wn, S, ts, Ws],
        [G, ca.vertcat(*dG), xend, dend, dUdz],
        ["x", "U", "p", "t0", "h", "Wn", "S", "ts", "Ws"], ["G", "dG", "xend", "dend", "dU"])
    return {"interval_newton": newton, "interval_linearisation": linearisation}
