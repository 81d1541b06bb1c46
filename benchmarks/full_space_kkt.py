"""The full-space Gauss-Newton step on the ring: a sparse KKT solve instead of condensing.

Run::

    python benchmarks/full_space_kkt.py [--sizes 40,160] [--products-only]

``picard-gn``'s step condenses: it eliminates the node values and interval
starts through each interval's sensitivities ``E_j`` (dense ``N x N``), so
its cost per iteration is at least ``N^2`` (``benchmarks/state_scaling.py``).
The alternative that never forms ``E_j`` keeps every node value as an
unknown and solves the step's KKT system with a sparse factorisation (the
way IPOPT's collocation does).  This script builds that system at the first
iterate of the ring (20 intervals x 9 nodes; unknowns: ``dp``, every
interval's ``dx_j`` and node values ``dU_j``, the residuals ``e``, and the
multipliers of the fixed-point and continuity conditions, in the augmented
form ``[D Jr' C'; Jr -I 0; C 0 0]``), checks that its solution equals the
condensed step, and times its factorisation:

* with SciPy's SuperLU (``scipy.sparse.linalg.splu``, COLAMD ordering),
  when SciPy is installed (it is not a dependency of the package);
* with CasADi's ``"mumps"`` linear solver.

It also counts the iterations of Jacobi-preconditioned conjugate gradients
on the condensed normal equations (the unknowns ``theta = (dp, dx0)``), the
iterative alternative that needs only products with the sensitivities, not
the sensitivities themselves, and times what one such iteration would cost
with factorisations kept between calls the way CasADi offers from Python
(one ``casadi.Linsol`` with the ``"qr"`` plugin per interval: a forward and
a backward sweep, 40 solves with one right-hand side each).

Last, the products that a conjugate-gradient step needs, without any
factorisation: the node derivatives of each interval from linear Picard
sweeps (``dU <- 1 dx^T + h (f_U dU + f_p dp) A^T``, converging at the
contraction of ``dP/dU``), chained through the intervals in one generated
``mapaccum`` call each way (the transpose is the exact transpose of the
truncated sweeps: a dot-product test checks it).  It prints their error
against the exact sensitivities, their time, the time of a CG step with the
iteration counts above, and the time of today's linearisation at the same
iterate for comparison.  ``--products-only`` skips the KKT solves and the
kept factors (SciPy is then not needed).

The result is in ``docs/performance.md`` ("Large, sparsely coupled models").
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import argparse
import time
import warnings

import casadi as ca
import numpy as np

import picard_casadi as pc
from picard_casadi.methods import condensed
from state_scaling import ring_experiment, ring_model


def first_iterate(N: int) -> dict:
    """The setup and the first iterate of picard-gn on the ring of N states."""
    seen: dict = {}
    step = condensed.ConstrainedGaussNewtonStep._step

    def spy(self, Xs, U, ps, V, lam):
        if not seen:
            seen.update(rule=self, Xs=Xs.copy(), U=self.setup.tr.nodes_np(U).copy(),
                        ps=ps.copy())
        return step(self, Xs, U, ps, V, lam)

    condensed.ConstrainedGaussNewtonStep._step = spy
    try:
        model = ring_model(N)
        pc.estimate(model, [ring_experiment(model)], [0.5, 0.3], "picard-gn", T=0.5,
                    refine=False, uncertainty=False, p_bounds=([0, 0], [10, 10]), max_iter=1)
    finally:
        condensed.ConstrainedGaussNewtonStep._step = step
    return seen


def interval_jacobian(disc) -> tuple[ca.Function, tuple[ca.Sparsity, ...]]:
    """Fixed-point residual, outputs at the samples, end state and their sparse Jacobians
    in ``(x_j, vec U_j, p)``, for one interval."""
    data, F, G, xend = interval_expressions(disc)
    x, U, p, _, h = data[:5]
    A = np.asarray(disc.quad.integration, float)
    R = ca.repmat(x, 1, disc.K) + h * ca.mtimes(F, ca.DM(A.T)) - U
    z = ca.vertcat(x, ca.vec(U), p)
    jacs = [ca.jacobian(ca.vec(v), z) for v in (R, G, xend)]
    fn = ca.Function("interval_jacobian", data,
                     [ca.vec(R), ca.vec(G), xend] + [jac.nz[:] for jac in jacs])
    return fn, tuple(jac.sparsity() for jac in jacs)


def interval_expressions(disc) -> tuple[list[ca.SX], ca.SX, ca.SX, ca.SX]:
    """One interval's symbols ``[x, U, p, t0, h, Wn, S, ts, Ws]`` and, in them, the
    right-hand side at the nodes ``F (nx, K)``, the outputs at the samples ``G
    (ny, M)`` and the end state."""
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


def kkt_system(seen: dict, mu: float = 1e-12):
    """Triplets and right-hand side of the full-space step's augmented KKT system."""
    s = seen["rule"].setup
    d, tr = s.disc, s.tr
    m = d.model
    J, K, M = d.n_intervals, d.K, d.M
    nx, np_, ny = m.nx, m.np, m.ny
    X, p = s.from_scaled(seen["Xs"], seen["ps"])
    fn, (spR, spG, spE) = interval_jacobian(d)
    c = tr._common()
    R, G, xend, vR, vG, vE = (np.asarray(o) for o in fn.map(J)(
        X.T, seen["U"].transpose(1, 0, 2).reshape(nx, J * K), p, c["t0"], c["h"], c["Wn"],
        c["S"], c["ts"], c["Ws"]))
    R, G, xend = R.reshape(K * nx, J).T, G.reshape(M * ny, J).T, xend.reshape(nx, J).T
    vR, vG, vE = (v.reshape(-1, J).T for v in (vR, vG, vE))
    xs, psc = s.x_scale, s.p_scale
    nxu = nx + K * nx  # one interval's (dx_j, dU_j)
    nz = np_ + J * nxu
    colscale = np.concatenate([xs, np.tile(xs, K), psc])

    def column(j, local):  # local column of (x_j, vec U_j, p) -> unknown's index
        return np.where(local < nxu, np_ + j * nxu + local, local - nxu)

    w = tr._Wt.transpose(0, 2, 1).reshape(J, M * ny)
    r = w * (d.y.transpose(0, 2, 1).reshape(J, M * ny) - G)
    nxt = np.flatnonzero(d.has_next)
    ne = J * M * ny
    e0, l0 = nz, nz + ne
    n = nz + ne + J * K * nx + nxt.size * nx
    rows, cols, vals = [], [], []

    def put(a, b, v):  # a block and its transpose
        rows.extend([a, b]), cols.extend([b, a]), vals.extend([v, v])

    (rR, cR), (rG, cG), (rE, cE) = (map(np.asarray, sp.get_triplet()) for sp in (spR, spG, spE))
    for j in range(J):
        put(e0 + j * M * ny + rG, column(j, cG), -w[j, rG] * vG[j] * colscale[cG])
        put(l0 + j * K * nx + rR, column(j, cR), vR[j] * colscale[cR] / xs[rR % nx])
    for q, j in enumerate(nxt):
        row = l0 + J * K * nx + q * nx
        put(row + rE, column(j, cE), vE[j] * colscale[cE] / xs[rE])
        put(row + np.arange(nx), np_ + (j + 1) * nxu + np.arange(nx), -np.ones(nx))
    rows.append(e0 + np.arange(ne)), cols.append(e0 + np.arange(ne)), vals.append(-np.ones(ne))
    theta = np.concatenate([np.arange(np_), np_ + np.arange(nx)])  # (dp, dx0) damped
    rows.append(theta), cols.append(theta), vals.append(np.full(theta.size, mu))
    rhs = np.zeros(n)
    rhs[e0:l0] = -r.ravel()
    rhs[l0:] = -np.concatenate([(R / np.tile(xs, K)).ravel(),
                                ((xend[nxt] - X[nxt + 1]) / xs).ravel()])
    return (np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), rhs, n,
            np_ + nx)


def condensed_system(seen: dict) -> tuple[np.ndarray, np.ndarray]:
    """The condensed data rows ``A theta + b`` (dense, every interval stacked)."""
    rule = seen["rule"]
    s = rule.setup
    d, tr = s.disc, s.tr
    J, M = d.n_intervals, d.M
    nx, ny = d.model.nx, d.model.ny
    xs, psc = s.x_scale, s.p_scale
    X, p = s.from_scaled(seen["Xs"], seen["ps"])
    sens = tr.interval_sensitivities(X, seen["U"], p)
    r = (tr._Wt * (d.y - sens["G"])).transpose(0, 2, 1).reshape(J, M * ny)
    dG = -(tr._Wt.transpose(0, 2, 1)[..., None] * sens["dG"]).reshape(J, M * ny, -1)
    E = sens["dend"][:, :, :nx] * xs[None, None, :] / xs[None, :, None]
    F = sens["dend"][:, :, nx:] * psc[None, None, :] / xs[None, :, None]
    gaps = np.zeros((J, nx))
    gaps[d.has_next] = (sens["xend"][d.has_next] - X[1:][d.has_next[:-1]]) / xs
    A, b, _, _, _ = rule._condense(dG[:, :, :nx] * xs, dG[:, :, nx:] * psc, r, E, F, gaps,
                                   s.free_p.copy())
    return A.reshape(-1, rule.n_theta), b.ravel()


def condensed_step(A: np.ndarray, b: np.ndarray, mu: float = 1e-12) -> np.ndarray:
    """The condensed step ``theta = (dp, dx0)`` with the same damping."""
    return np.linalg.solve(A.T @ A + mu * np.eye(A.shape[1]), -A.T @ b)


def cg_iterations(A: np.ndarray, b: np.ndarray, tols: tuple[float, ...],
                  mu: float = 1e-12) -> list[int]:
    """Jacobi-preconditioned conjugate-gradient iterations on the condensed normal
    equations ``(A^T A + mu I) theta = -A^T b`` until the relative error of
    ``theta`` is below each tolerance (a matrix-free step would need only the
    products ``A v`` and ``A^T w``)."""
    exact = condensed_step(A, b, mu)
    d = np.einsum("mt,mt->t", A, A) + mu
    x = np.zeros(A.shape[1])
    r = -A.T @ b
    z = r / d
    q = z.copy()
    rz = r @ z
    found: list[int] = []
    scale = np.abs(exact).max()
    for it in range(1, 10 * A.shape[1] + 1):
        Aq = A.T @ (A @ q) + mu * q
        alpha = rz / (q @ Aq)
        x += alpha * q
        r -= alpha * Aq
        err = np.abs(x - exact).max() / scale
        while len(found) < len(tols) and err <= tols[len(found)]:
            found.append(it)
        if len(found) == len(tols):
            break
        z = r / d
        rz, rz_old = r @ z, rz
        q = z + (rz / rz_old) * q
    return found + [-1] * (len(tols) - len(found))


def sweep_time(seen: dict, repeats: int = 5) -> tuple[float, float]:
    """Seconds to factorise every interval's fixed-point matrix with one kept
    ``casadi.Linsol("qr")`` each, and for a forward and a backward sweep (one
    solve per interval each way) with those factors."""
    from picard_casadi.interval_linearisation import fixed_point_matrix_pattern

    s = seen["rule"].setup
    d = s.disc
    m = d.model
    J, K, nx = d.n_intervals, d.K, m.nx
    X, p = s.from_scaled(seen["Xs"], seen["ps"])
    fx = ca.Function("f_x", [m.t, m.x, m.p, m.u], [ca.jacobian(m.rhs, m.x)])
    pattern, eye, T = fixed_point_matrix_pattern(np.asarray(d.quad.integration, float),
                                                 fx.sparsity_out(0), nx)
    matrices = []
    for j in range(J):
        t = d.t0[j] + d.h[j] * np.asarray(d.quad.tau, float)
        nz = np.concatenate([np.asarray(fx(t[k], seen["U"][j, :, k], p, d.node_inputs[j][:, k])
                                        .nonzeros()) for k in range(K)])
        matrices.append(ca.DM(pattern, np.asarray(eye).ravel()
                              - d.h[j] * np.asarray(ca.mtimes(T, ca.DM(nz))).ravel()))
    solvers = [ca.Linsol(f"interval{j}", "qr", pattern) for j in range(J)]
    t = time.perf_counter()
    for solver, matrix in zip(solvers, matrices):
        solver.sfact(matrix)
        solver.nfact(matrix)
    factor = time.perf_counter() - t
    rhs = ca.DM(np.ones(pattern.size1()))
    t = time.perf_counter()
    for _ in range(repeats):
        for transposed in (False, True):
            for solver, matrix in zip(solvers, matrices):
                solver.solve(matrix, rhs, transposed)
    return factor, (time.perf_counter() - t) / repeats


def interval_products(d, sweeps: int) -> tuple[ca.Function, ca.Function]:
    """One interval's linearised map ``(dx_j, dp) -> (dx_end, dG)`` with the node
    derivatives from ``sweeps`` linear Picard sweeps (no factorisation), and its
    exact transpose ``(w_end, w_G) -> (bar dx_j, bar dp)``, as MX functions whose
    per-sweep pieces are SX functions (small generated code, linear in N).

    A sweep is ``dU <- 1 dx^T + h (f_U dU + f_p dp) A^T``: the fixed point is
    the sensitivity, and the error shrinks by the contraction of ``dP/dU``.
    """
    m = d.model
    K, nx = d.K, d.model.nx
    A = ca.DM(np.asarray(d.quad.integration, float))
    data, F, G, xend = interval_expressions(d)
    x, U, p, _, h = data[:5]
    out = ca.vertcat(xend, ca.vec(G))
    dx, dU, dp = ca.SX.sym("dx", nx), ca.SX.sym("dU", nx, K), ca.SX.sym("dp", m.np)
    Up, z = ca.vertcat(ca.vec(U), p), ca.vertcat(x, ca.vec(U), p)
    lin = ca.reshape(ca.jtimes(ca.vec(F), Up, ca.vertcat(ca.vec(dU), dp)), nx, K)
    sweep = ca.Function("sweep", data + [dU, dp, dx],
                        [ca.repmat(dx, 1, K) + h * ca.mtimes(lin, A.T)])
    jout = ca.jtimes(out, z, ca.vertcat(dx, ca.vec(dU), dp))
    tail = ca.Function("tail", data + [dU, dp, dx], [jout[:nx], jout[nx:]])
    seed = ca.SX.sym("w", out.numel())
    bar = ca.jtimes(out, z, seed, True)
    tail_T = ca.Function("tail_T", data + [seed],
                         [bar[:nx], ca.reshape(bar[nx:nx + nx * K], nx, K), bar[nx + nx * K:]])
    bar_sweep = ca.SX.sym("bar_sweep", nx, K)
    b = ca.jtimes(ca.vec(F), Up, ca.vec(h * ca.mtimes(bar_sweep, A)), True)
    sweep_T = ca.Function("sweep_T", data + [bar_sweep],
                          [ca.reshape(b[:nx * K], nx, K), b[nx * K:], ca.sum2(bar_sweep)])
    sym = [ca.MX.sym(f"data{i}", *v.shape) for i, v in enumerate(data)]
    mdx, mdp = ca.MX.sym("dx", nx), ca.MX.sym("dp", m.np)
    node = ca.repmat(mdx, 1, K)
    for _ in range(sweeps):
        node = sweep(*sym, node, mdp, mdx)
    forward = ca.Function("forward", [mdx] + sym + [mdp], list(tail(*sym, node, mdp, mdx)))
    w_end, w_G = ca.MX.sym("w_end", nx), ca.MX.sym("w_G", out.numel() - nx)
    bdx, bnode, bdp = tail_T(*sym, ca.vertcat(w_end, w_G))
    for _ in range(sweeps):
        bprev, bp, bsum = sweep_T(*sym, bnode)
        bdx, bdp, bnode = bdx + bsum, bdp + bp, bprev
    transpose = ca.Function("transpose", [w_end] + sym + [w_G], [bdx + ca.sum2(bnode), bdp])
    return forward, transpose


def matrix_free_products(seen: dict, sweeps: int, repeats: int = 20
                         ) -> tuple[float, float, float, float]:
    """Products with the condensed Jacobian by linear Picard sweeps, generated to C.

    The forward product chains ``(dx_0, dp)`` through every interval (one
    ``mapaccum`` call); the transpose chains the multipliers back (the same
    ``mapaccum`` over the intervals in reverse order).  Returns the relative
    error of the forward product against the exact sensitivities, the
    dot-product test of the transpose, and the milliseconds of each product.
    """
    from picard_casadi import codegen

    s = seen["rule"].setup
    d, tr = s.disc, s.tr
    J, K, M, nx, ny, n_p = d.n_intervals, d.K, d.M, d.model.nx, d.model.ny, d.model.np
    X, p = s.from_scaled(seen["Xs"], seen["ps"])
    sens = tr.interval_sensitivities(X, seen["U"], p)
    rng = np.random.default_rng(0)
    dx0, dp = rng.standard_normal(nx), rng.standard_normal(n_p)
    dx, exact = dx0, []
    for j in range(J):  # the exact chained product from E_j, F_j and the output Jacobians
        exact.append(sens["dG"][j].reshape(M * ny, nx + n_p) @ np.concatenate([dx, dp]))
        dx = sens["dend"][j] @ np.concatenate([dx, dp])
    exact = np.array(exact)
    c = tr._common()
    data = [X.T, seen["U"].transpose(1, 0, 2).reshape(nx, J * K), np.tile(p[:, None], (1, J)),
            c["t0"], c["h"], c["Wn"], c["S"], c["ts"], c["Ws"]]
    widths = (1, K, 1, 1, 1, K, K, M, M)
    backwards = [np.asarray(a).reshape(np.shape(a)[0], J, w)[:, ::-1].reshape(-1, J * w)
                 if np.size(a) else np.asarray(a) for a, w in zip(data, widths)]
    forward, transpose = interval_products(d, sweeps)
    lib = codegen.compile_functions({f"forward{nx}_{sweeps}": forward.mapaccum(J),
                                     f"transpose{nx}_{sweeps}": transpose.mapaccum(J)},
                                    tag="matrixfree")
    fwd, rev = lib[f"forward{nx}_{sweeps}"], lib[f"transpose{nx}_{sweeps}"]
    fargs = [dx0, *data, np.tile(dp[:, None], (1, J))]
    Av = np.asarray(fwd(*fargs)[1]).T
    error = np.abs(Av - exact).max() / np.abs(exact).max()
    w = rng.standard_normal(Av.shape)
    rargs = [np.zeros(nx), *backwards, w[::-1].T]
    lam, bar_p = (np.asarray(o) for o in rev(*rargs))
    ATw = np.concatenate([lam[:, -1], bar_p.sum(axis=1)])
    dot = abs(np.sum(Av * w) - ATw @ np.concatenate([dx0, dp])) / abs(np.sum(Av * w))
    times = []
    for fn, args in ((fwd, fargs), (rev, rargs)):
        fn(*args)
        t = time.perf_counter()
        for _ in range(repeats):
            fn(*args)
        times.append((time.perf_counter() - t) / repeats)
    return error, dot, times[0], times[1]


def linearisation_time(seen: dict, repeats: int = 3) -> float:
    """Seconds of today's linearisation at the iterate (the generated per-interval
    sensitivities and output Jacobians of the condensed step), best of ``repeats``."""
    s = seen["rule"].setup
    X, p = s.from_scaled(seen["Xs"], seen["ps"])
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        s.tr.interval_sensitivities(X, seen["U"], p)
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="40,160")
    ap.add_argument("--products-only", action="store_true",
                    help="only the matrix-free products (and the CG counts they need)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    try:
        import scipy.sparse
        import scipy.sparse.linalg
    except ImportError:
        scipy = None
        if not args.products_only:
            print("SciPy is not installed: SuperLU is skipped (pip install scipy)")
    else:
        print(f"SciPy {scipy.__version__}, CasADi {ca.__version__}")
    print(f"{'N':>4s} {'unknowns':>8s} {'solver':14s} {'factor+solve [s]':>16s} "
          f"{'fill':>10s} {'|theta - condensed|':>19s}")
    for N in (int(v) for v in args.sizes.split(",")):
        seen = first_iterate(N)
        A, b = condensed_system(seen)
        if not args.products_only:
            rows, cols, vals, rhs, n, n_theta = kkt_system(seen)
            reference = condensed_step(A, b)
            scale = np.abs(reference).max()
            if scipy is not None:
                matrix = scipy.sparse.csc_matrix((vals, (rows, cols)), shape=(n, n))
                t = time.perf_counter()
                lu = scipy.sparse.linalg.splu(matrix, permc_spec="COLAMD")
                sol = lu.solve(rhs)
                elapsed = time.perf_counter() - t
                print(f"{N:4d} {n:8d} {'SuperLU COLAMD':14s} {elapsed:16.3f} "
                      f"{lu.L.nnz + lu.U.nnz:10d} "
                      f"{np.abs(sol[:n_theta] - reference).max() / scale:19.1e}", flush=True)
            matrix = ca.DM.triplet(rows.tolist(), cols.tolist(), ca.DM(vals), n, n)
            t = time.perf_counter()
            solver = ca.Linsol("kkt", "mumps", matrix.sparsity())
            solver.sfact(matrix)
            solver.nfact(matrix)
            sol = np.asarray(solver.solve(matrix, ca.DM(rhs))).ravel()
            elapsed = time.perf_counter() - t
            residual = np.abs(np.asarray(ca.mtimes(matrix, ca.DM(sol))).ravel() - rhs).max()
            print(f"{N:4d} {n:8d} {'CasADi mumps':14s} {elapsed:16.3f} {'':>10s} "
                  f"{np.abs(sol[:n_theta] - reference).max() / scale:19.1e}  "
                  f"(|K sol - rhs| = {residual:.1e})", flush=True)
        tols = (1e-3, 1e-6, 1e-10)
        counts = cg_iterations(A, b, tols)
        print(f"{N:4d} {A.shape[1]:8d} conjugate gradients on the condensed problem: iterations "
              "to " + ", ".join(f"{t:.0e}: {k}" for t, k in zip(tols, counts)), flush=True)
        if not args.products_only:
            factor, sweeps = sweep_time(seen)
            print(f"{N:4d} {'':8s} kept casadi.Linsol('qr') factors: factorising every "
                  f"interval {1e3 * factor:.1f} ms, a forward and a backward sweep "
                  f"{1e3 * sweeps:.1f} ms", flush=True)
        linearisation = linearisation_time(seen)
        coarse = matrix_free_products(seen, 8)[0]
        error, dot, forward, transpose = matrix_free_products(seen, 16)
        pair = forward + transpose
        print(f"{N:4d} {'':8s} matrix-free, 16 linear Picard sweeps per interval: "
              f"|A v - exact| / |A v| {error:.1e} (8 sweeps: {coarse:.1e}), dot test of A^T "
              f"{dot:.1e}; A v {1e3 * forward:.2f} ms, A^T w {1e3 * transpose:.2f} ms; "
              f"CG to 1e-6 / 1e-10: {counts[1] * pair:.3f} / {counts[2] * pair:.3f} s; "
              f"today's linearisation (E_j, F_j, output Jacobians): {linearisation:.3f} s",
              flush=True)

if __name__ == "__main__":
    main()
