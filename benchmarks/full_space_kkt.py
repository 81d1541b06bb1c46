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
call each way (``picard_casadi.transcription.interval_products``, the products of
``tr_solver="cg"``; the transpose is the exact transpose of the truncated
sweeps: a dot-product test checks it).  It prints their error
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
from picard_casadi.transcription.interval_products import interval_expressions
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
                    tr_solver="exact",
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
    rows, _ = rule._condense(dG[:, :, :nx] * xs, dG[:, :, nx:] * psc, r, E, F, gaps,
                             s.free_p.copy())
    A, _ = rows.dense()
    return A.reshape(-1, rule.n_theta), rows.b.ravel()


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
    from picard_casadi.transcription.interval_linearisation import fixed_point_matrix_pattern

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


def matrix_free_products(seen: dict, sweeps: int, repeats: int = 20
                         ) -> tuple[float, float, float, float]:
    """The package's chained products (``picard_casadi.transcription.interval_products``) with
    ``sweeps`` linear Picard sweeps, generated to C: one call each way over all
    intervals.  Returns the relative error of the forward product against the
    exact sensitivities, the dot-product test of the transpose, and the
    milliseconds of each product."""
    from picard_casadi.runtime import compiled_functions
    from picard_casadi.transcription.interval_products import IntervalProducts, interval_product_functions

    s = seen["rule"].setup
    d, tr = s.disc, s.tr
    J, M, nx, ny, n_p = d.n_intervals, d.M, d.model.nx, d.model.ny, d.model.np
    X, p = s.from_scaled(seen["Xs"], seen["ps"])
    sens = tr.interval_sensitivities(X, seen["U"], p)
    rng = np.random.default_rng(0)
    dx0, dp = rng.standard_normal(nx), rng.standard_normal(n_p)
    dx, exact = dx0, []
    for j in range(J):  # the exact chained product from E_j, F_j and the output Jacobians
        exact.append(sens["dG"][j].reshape(M * ny, nx + n_p) @ np.concatenate([dx, dp]))
        dx = sens["dend"][j] @ np.concatenate([dx, dp])
    exact = np.array(exact).reshape(J, M, ny).transpose(0, 2, 1)
    units = {f"{name}{sweeps}": unit
             for name, unit in interval_product_functions(d, sweeps).items()}
    compiled = compiled_functions.CodegenBackend()({k: (u, J) for k, u in units.items()})
    functions = {name: (compiled.native(f"{name}{sweeps}"), units[f"{name}{sweeps}"])
                 for name in ("interval_forward", "interval_transpose")}
    ops = IntervalProducts(d, functions, X, seen["U"], p, tr._common())
    Av = ops.forward(dx0[None, :], dp)[2]
    error = np.abs(Av - exact).max() / np.abs(exact).max()
    w = rng.standard_normal(Av.shape)
    bar_x0, bar_p = ops.transpose(w)
    ATw = np.concatenate([bar_x0[0], bar_p])
    dot = abs(np.sum(Av * w) - ATw @ np.concatenate([dx0, dp])) / abs(np.sum(Av * w))
    times = []
    for call in (lambda: ops.forward(dx0[None, :], dp), lambda: ops.transpose(w)):
        call()
        t = time.perf_counter()
        for _ in range(repeats):
            call()
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
