"""The dense linear algebra of a ``picard-gn`` iteration as generated C.

Three kernels, each one compiled call over all intervals:

* the fixed-point solve ``(I - dP/dU) v = b`` (:meth:`IterationKernels.solve`);
* the fixed-point sensitivities with respect to ``(x_j, p)`` and ``f``'s
  derivatives at the nodes (:meth:`IterationKernels.sensitivities`);
* the compression of each interval's data rows to the triangular factor of
  ``[Jx Jp r]`` (:meth:`IterationKernels.compress_rows`, a Householder QR;
  :func:`picard_casadi.methods.least_squares.compress_rows` by NumPy).

:meth:`FixedPointSystem.solve <picard_casadi.transcription.fixed_point_system.FixedPointSystem.solve>`
solves ``(I - dP/dU) v = b`` for all intervals with NumPy: batched products
form each interval's (Schur-complement) matrix and LAPACK factorises it.
With a C compiler at hand the same solve is written here as C specialised
to the problem (the quadrature's matrix ``A``, the numbers of nodes and
states, the states eliminated), compiled once and cached with the other
generated code (:func:`picard_casadi.runtime.codegen.compile_c_source`), and called
on the NumPy buffers through :mod:`ctypes`:

* per interval, the fold of the first node, the Schur complement on the
  kept states (formed in place, no temporaries), the elimination of the
  explicit states from the right-hand side, a blocked LU with partial
  pivoting applied to ``[S | b]`` at once, the back substitution and the
  explicit states' values, all in one pass over the interval's data;
* the sizes are compile-time constants, so that the compiler unrolls and
  vectorises the inner loops (``-O3`` and the processor's own instructions,
  :data:`picard_casadi.runtime.compiler.DEFAULT_OPT_FLAGS` ``"kernel"``).

The arithmetic is that of the NumPy path up to the order of summation
(results agree to round-off, ``tests/test_kernels.py``); a
singular interval raises :class:`numpy.linalg.LinAlgError` as LAPACK's does.
Without a compiler, or where the matrix is larger than :data:`MAX_ORDER`
(LAPACK's blocked LU is then as fast), the NumPy path runs.  Why this
exists and what it gains: docs/performance.md, "The iteration's linear
algebra in generated C".
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CodegenError
from ..runtime import codegen
from ..runtime.interrupts import interrupted
from ..runtime.user_warnings import warn_user
from .fixed_point_system import FixedPointSystem

__all__ = ["IterationKernels", "kernel_source", "kernel_loader", "MAX_ORDER"]

#: largest order of the factorised matrix (kept states times nodes) solved
#: by the kernel; above it LAPACK's cache-blocked LU is about as fast
#: (kernel over NumPy: 0.51 at order 88, 0.65 at 256, 0.86 at 384, 0.95 at 512)
MAX_ORDER = 384
#: columns eliminated together in the LU's trailing updates
PANEL = 6


def _array(name: str, values: np.ndarray, ctype: str) -> str:
    flat = np.asarray(values).ravel()
    if flat.size == 0:
        return f"static const {ctype} {name}[1] = {{0}};\n"
    body = ", ".join(repr(float(v)) if ctype == "double" else str(int(v)) for v in flat)
    return f"static const {ctype} {name}[{flat.size}] = {{{body}}};\n"


def kernel_source(A: np.ndarray, nx: int, explicit: np.ndarray, sinks: bool,
                  max_rhs: int, pattern: np.ndarray | None = None) -> str:
    """C source of the kernels for one quadrature and model structure.

    Parameters
    ----------
    A : ndarray (K, K)
        Node integration matrix.
    nx : int
        Number of states.
    explicit : ndarray of int
        States eliminated (empty: none), as in
        :class:`~picard_casadi.transcription.fixed_point_system.FixedPointSystem`.
    sinks : bool
        The eliminated states drive no other state.
    max_rhs : int
        Most right-hand sides per call (the matrix rows are laid out for them).
    pattern : ndarray of bool (nx, nx), optional
        Structural nonzeros of ``df/dx`` (dense if not given): the products
        with ``f_x[E, R]`` visit only its nonzeros (a kinematic state's
        derivative is one rate: cmg's Schur term has 4 of 44).

    Returns
    -------
    str
        The C file: ``pc_fixed_point_solve`` (the solve for 1 or ``max_rhs``
        right-hand sides), ``pc_fixed_point_sensitivities`` (the
        sensitivities with respect to ``(x_j, p)`` and ``f``'s derivatives
        at the nodes, ``max_rhs = nx + np``), both reading ``f_x`` through
        strides with a work array of ``pc_fixed_point_work()`` doubles and
        returning 0, or ``j + 1`` for the first singular interval ``j``; and
        ``pc_compress_rows`` (the triangular factor of each interval's
        ``[Jx Jp r]``, ``nx + np + 1`` columns).
    """
    A = np.asarray(A, dtype=float)
    K = A.shape[0]
    k0 = 0 if np.any(A[0]) else 1
    E = np.asarray(explicit, dtype=int)
    R = np.setdiff1d(np.arange(nx), E)
    nE, nR = E.size, R.size
    schur = nE > 0 and not sinks
    Kp = K - k0
    n = Kp * nR
    AA = np.einsum("kl,lm->kml", A, A)  # AA[k, m, l] = A[k, l] A[l, m]
    P = np.ones((nx, nx), bool) if pattern is None else np.asarray(pattern, bool)
    er_e, er_b = np.nonzero(P[np.ix_(E, R)]) if nE else (np.zeros(0, int), np.zeros(0, int))
    parts = [
        "#include <math.h>\n#include <string.h>\n",
        f"#define K {K}\n#define K0 {k0}\n#define NX {nx}\n#define NE {max(nE, 1)}\n",
        f"#define NR {nR}\n#define N {n}\n#define NB {PANEL}\n#define CMAX {int(max_rhs)}\n",
        f"#define HAS_E {int(nE > 0)}\n#define SCHUR {int(schur)}\n",
        _array("A", A, "double"), _array("AA", AA, "double"),
        _array("E", E, "int"), _array("R", R, "int"),
        f"#define NER {max(er_e.size, 1)}\n#define HAS_ER {int(er_e.size > 0)}\n",
        _array("ER_E", er_e, "int"), _array("ER_B", er_b, "int"),
        _KERNEL_BODY,
    ]
    return "".join(parts)


# The kernel.  Index conventions: node k in [K0, K) is row block k - K0 of the
# factorised matrix M (N rows, W = N + c columns: [S | b], row-major).
_KERNEL_BODY = r"""
#define LD (N + CMAX)
/* doubles of work: the matrix [S | b], the folded right-hand side, the
   gathered blocks of f_x, the Schur products and two small products */
#define WORK_SIZE (N * LD + K * NX * CMAX + K * NR * NR + K * NR * NE + K * NER \
                   + NR * NE + K * NX * CMAX + NX * CMAX + 8)

int pc_fixed_point_work(void) { return WORK_SIZE + K * NX * CMAX; }
int pc_compress_work(int m) { return m * (CMAX + 1); }
int pc_fixed_point_max_rhs(void) { return CMAX; }

/* Gaussian elimination with partial pivoting on the N x W row-major [S | b]
   (W = N + c, rows LD apart): a blocked right-looking LU, NB columns at a
   time, its trailing update two rows at a time; then back substitution.
   The solution replaces b.  Returns 0, 1 where the matrix is singular (a
   zero pivot column) and 2 where a pivot column is all NaN. */
static inline __attribute__((always_inline)) int lu_solve(const int W, double* restrict Mflat) {
  double (*restrict M)[LD] = (double (*)[LD]) Mflat;
  /* the pivot of the next column is looked for while its rows are updated
     (they are in the cache then): column 0 first */
  int p = 0;
  double best = -1.0;
  for (int i = 0; i < N; ++i) {
    double v = fabs(M[i][0]);
    if (v > best) { best = v; p = i; }
  }
  for (int k0 = 0; k0 < N; k0 += NB) {
    const int k1 = k0 + NB < N ? k0 + NB : N;
    for (int k = k0; k < k1; ++k) {
      if (best == 0.0) return 1;   /* singular */
      if (!(best > 0.0)) return 2; /* the column is all NaN */
      if (p != k)
        for (int q = 0; q < W; ++q) { double s = M[k][q]; M[k][q] = M[p][q]; M[p][q] = s; }
      const double inv = 1.0 / M[k][k];
      const int next = k + 1 < k1;
      p = k + 1;
      best = -1.0;
      for (int i = k + 1; i < N; ++i) {
        double l = (M[i][k] *= inv);
        for (int q = k + 1; q < k1; ++q) M[i][q] -= l * M[k][q];
        if (next) {
          double v = fabs(M[i][k + 1]);
          if (v > best) { best = v; p = i; }
        }
      }
    }
    for (int r = k0 + 1; r < k1; ++r)
      for (int s = k0; s < r; ++s) {
        double l = M[r][s];
        for (int q = k1; q < W; ++q) M[r][q] -= l * M[s][q];
      }
    /* the trailing update, two rows at a time; column k1's pivot on the way */
    p = k1;
    best = -1.0;
    int i = k1;
    if (k1 - k0 == NB)
      for (; i + 1 < N; i += 2) {
        double l1[NB], l2[NB];
        for (int s = 0; s < NB; ++s) { l1[s] = M[i][k0 + s]; l2[s] = M[i + 1][k0 + s]; }
        for (int q = k1; q < W; ++q) {
          double a1 = M[i][q], a2 = M[i + 1][q];
          for (int s = 0; s < NB; ++s) {
            double u = M[k0 + s][q];
            a1 -= l1[s] * u;
            a2 -= l2[s] * u;
          }
          M[i][q] = a1;
          M[i + 1][q] = a2;
        }
        double v1 = fabs(M[i][k1]), v2 = fabs(M[i + 1][k1]);
        if (v1 > best) { best = v1; p = i; }
        if (v2 > best) { best = v2; p = i + 1; }
      }
    for (; i < N; ++i) {
      for (int s = 0; s < k1 - k0; ++s) {
        double l = M[i][k0 + s];
        for (int q = k1; q < W; ++q) M[i][q] -= l * M[k0 + s][q];
      }
      double v = fabs(M[i][k1]);
      if (v > best) { best = v; p = i; }
    }
  }
  for (int k = N - 1; k >= 0; --k) {
    double inv = 1.0 / M[k][k];
    for (int q = N; q < W; ++q) M[k][q] *= inv;
    for (int i = 0; i < k; ++i) {
      double l = M[i][k];
      for (int q = N; q < W; ++q) M[i][q] -= l * M[k][q];
    }
  }
  return 0;
}

/* One interval: h; f_x at its nodes, entry (k, a, b) at Fx[k sk + a sa + b];
   the right-hand side and the solution (K NX, c), C-ordered. */
static inline __attribute__((always_inline)) int solve_one(
    const int c, const double h, const double* restrict Fx, const long sk, const long sa,
    const double* restrict rhs, double* restrict out, double* restrict work) {
  const int W = N + c;
  double (*restrict M)[LD] = (double (*)[LD]) work;
  double* restrict b = work + N * LD;                 /* (K, NX, c) */
  double* restrict FRR = b + K * NX * CMAX;           /* (K, NR, NR) */
  double* restrict FRE = FRR + K * NR * NR;           /* (K, NR, NE) */
  double* restrict FER = FRE + K * NR * NE;           /* (K, NER): f_x[E, R]'s nonzeros */
  double* restrict Q = FER + K * NER;                 /* (NR, NE), one block pair's */
  double* restrict T = Q + NR * NE;                   /* (K, NR or NE, c) */
  double* restrict t0 = T + K * NX * CMAX;            /* (NX, c) */
  (void) Q;
  for (int k = 0; k < K; ++k) {
    const double* Fk = Fx + k * sk;
    for (int a = 0; a < NR; ++a) {
      for (int bb = 0; bb < NR; ++bb) FRR[(k * NR + a) * NR + bb] = Fk[R[a] * sa + R[bb]];
#if HAS_E
      for (int e = 0; e < NE; ++e) FRE[(k * NR + a) * NE + e] = Fk[R[a] * sa + E[e]];
#endif
    }
#if HAS_ER
    for (int t = 0; t < NER; ++t) FER[k * NER + t] = Fk[E[ER_E[t]] * sa + R[ER_B[t]]];
#endif
  }
  /* b: the right-hand side, with the first node's column folded in */
  memcpy(b, rhs, sizeof(double) * K * NX * c);
#if K0
  for (int a = 0; a < NX; ++a) {
    for (int q = 0; q < c; ++q) t0[a * c + q] = 0.0;
    for (int e = 0; e < NX; ++e) {
      const double f = Fx[a * sa + e];
      for (int q = 0; q < c; ++q) t0[a * c + q] += f * rhs[e * c + q];
    }
  }
  for (int k = 1; k < K; ++k) {
    const double w = h * A[k * K];
    for (int i = 0; i < NX * c; ++i) b[k * NX * c + i] += w * t0[i];
  }
  memcpy(out, rhs, sizeof(double) * NX * c);
#else
  (void) t0;
#endif
  /* [I - h (A kron I) F_RR | b_R] */
  for (int k = K0; k < K; ++k)
    for (int a = 0; a < NR; ++a) {
      double* restrict row = M[(k - K0) * NR + a];
      for (int m = K0; m < K; ++m) {
        const double w = -h * A[k * K + m];
        const double* Fm = FRR + (m * NR + a) * NR;
        for (int bb = 0; bb < NR; ++bb) row[(m - K0) * NR + bb] = w * Fm[bb];
      }
      row[(k - K0) * NR + a] += 1.0;
      const double* bk = b + (k * NX + R[a]) * c;
      for (int q = 0; q < c; ++q) row[N + q] = bk[q];
    }
#if HAS_E
  /* b_R[k] += h sum_l A[k, l] F_l[R, E] b_E[l] */
  for (int l = K0; l < K; ++l)
    for (int a = 0; a < NR; ++a) {
      double* restrict Ta = T + (l * NR + a) * c;
      for (int q = 0; q < c; ++q) Ta[q] = 0.0;
      for (int e = 0; e < NE; ++e) {
        const double f = FRE[(l * NR + a) * NE + e];
        const double* be = b + (l * NX + E[e]) * c;
        for (int q = 0; q < c; ++q) Ta[q] += f * be[q];
      }
    }
  for (int k = K0; k < K; ++k)
    for (int l = K0; l < K; ++l) {
      const double w = h * A[k * K + l];
      for (int a = 0; a < NR; ++a) {
        double* restrict dst = M[(k - K0) * NR + a] + N;
        const double* Ta = T + (l * NR + a) * c;
        for (int q = 0; q < c; ++q) dst[q] += w * Ta[q];
      }
    }
#if SCHUR
  /* - h^2 (A kron I) F_RE (A kron I) F_ER: block (k, m) is
     -h^2 Q F_m[E, R] with Q = sum_l A[k, l] A[l, m] F_l[R, E] */
  const double h2 = h * h;
  for (int k = K0; k < K; ++k)
    for (int m = K0; m < K; ++m) {
      for (int i = 0; i < NR * NE; ++i) Q[i] = 0.0;
      for (int l = K0; l < K; ++l) {
        const double w = AA[(k * K + m) * K + l];
        const double* Fl = FRE + l * NR * NE;
        for (int i = 0; i < NR * NE; ++i) Q[i] += w * Fl[i];
      }
#if HAS_ER
      for (int t = 0; t < NER; ++t) {
        const double f = h2 * FER[m * NER + t];
        const int e = ER_E[t], col = (m - K0) * NR + ER_B[t];
        for (int a = 0; a < NR; ++a) M[(k - K0) * NR + a][col] -= f * Q[a * NE + e];
      }
#endif
    }
#endif
#endif
  {
    const int status = lu_solve(W, work);
    if (status == 1) return 1;
    if (status == 2) {  /* not finite: NaN out, as LAPACK's solve gives */
      for (int i = 0; i < K * NX * c; ++i) out[i] = NAN;
      return 0;
    }
  }
  /* v_R from M's last columns; v_E = b_E + h sum_l A[k, l] F_l[E, R] v_R[l] */
  for (int k = K0; k < K; ++k)
    for (int a = 0; a < NR; ++a)
      memcpy(out + (k * NX + R[a]) * c, M[(k - K0) * NR + a] + N, sizeof(double) * c);
#if HAS_E
  for (int i = 0; i < K * NE * c; ++i) T[i] = 0.0;
#if HAS_ER
  for (int l = K0; l < K; ++l)
    for (int t = 0; t < NER; ++t) {
      double* restrict Te = T + (l * NE + ER_E[t]) * c;
      const double f = FER[l * NER + t];
      const double* v = M[(l - K0) * NR + ER_B[t]] + N;
      for (int q = 0; q < c; ++q) Te[q] += f * v[q];
    }
#endif
  for (int k = K0; k < K; ++k)
    for (int e = 0; e < NE; ++e) {
      double* restrict dst = out + (k * NX + E[e]) * c;
      memcpy(dst, b + (k * NX + E[e]) * c, sizeof(double) * c);
      for (int l = K0; l < K; ++l) {
        const double w = h * A[k * K + l];
        const double* Te = T + (l * NE + e) * c;
        for (int q = 0; q < c; ++q) dst[q] += w * Te[q];
      }
    }
#endif
  return 0;
}

/* (I - dP/dU) v = rhs for J intervals: f_x's entry (j, k, a, b) at
   Fx[j sj + k sk + a sa + b]; rhs and out (J, K NX, c) C-ordered. */
/* solve_one with its width a constant (compiled once each): the
   sensitivities' CMAX columns and a Newton step's one */
static __attribute__((noinline)) int solve_wide(const double h, const double* Fx, const long sk,
    const long sa, const double* rhs, double* out, double* work) {
  return solve_one(CMAX, h, Fx, sk, sa, rhs, out, work);
}
static __attribute__((noinline)) int solve_narrow(const double h, const double* Fx,
    const long sk, const long sa, const double* rhs, double* out, double* work) {
  return solve_one(1, h, Fx, sk, sa, rhs, out, work);
}

/* (I - dP/dU) v = rhs for J intervals, c = 1 or CMAX columns: f_x's entry
   (j, k, a, b) at Fx[j sj + k sk + a sa + b]; rhs and out (J, K NX, c)
   C-ordered.  -1 for another c. */
int pc_fixed_point_solve(int J, int c, const double* h, const double* Fx, long sj, long sk,
                         long sa, const double* rhs, double* out, double* work) {
  if (c != 1 && c != CMAX) return -1;
  for (int j = 0; j < J; ++j) {
    const long at = (long) j * K * NX * c;
    if ((c == 1 ? solve_narrow : solve_wide)(h[j], Fx + j * sj, sk, sa, rhs + at, out + at,
                                             work))
      return j + 1;
  }
  return 0;
}

/* The fixed-point sensitivities S = (I - dP/dU)^-1 dP/dz, z = (x_j, p), and
   the vector field's derivatives dF_l = f_x(u_l) S_l + [0 | f_p(u_l)] at the
   nodes: dP/dz is the identity at every node in its x_j columns and
   h (A kron I) f_p in its p columns (NP = CMAX - NX of them), formed here.
   f_x as in pc_fixed_point_solve, f_p's entry (j, k, a, q) at
   Fp[j pj + k pk + a pa + q]; S (J, K NX, CMAX) C-ordered; dF's entry
   (j, k, a, z) at dF[j dj + k (NX CMAX) + a CMAX + z]. */
int pc_fixed_point_sensitivities(int J, const double* h, const double* Fx, long sj, long sk,
                                 long sa, const double* Fp, long pj, long pk, long pa,
                                 double* S, double* dF, long dj, double* work) {
  enum { NZ = CMAX, NP = CMAX - NX };
  double* rhs = work + WORK_SIZE;  /* (K NX, NZ) */
  for (int k = 0; k < K; ++k)
    for (int a = 0; a < NX; ++a)
      for (int z = 0; z < NX; ++z) rhs[(k * NX + a) * NZ + z] = (a == z);
  for (int j = 0; j < J; ++j) {
    const double* Fxj = Fx + j * sj;
    const double* Fpj = Fp + j * pj;
    for (int k = 0; k < K; ++k)
      for (int a = 0; a < NX; ++a) {
        double* r = rhs + (k * NX + a) * NZ + NX;
        for (int q = 0; q < NP; ++q) r[q] = 0.0;
        for (int l = 0; l < K; ++l) {
          const double w = h[j] * A[k * K + l];
          const double* f = Fpj + l * pk + a * pa;
          for (int q = 0; q < NP; ++q) r[q] += w * f[q];
        }
      }
    double* Sj = S + (long) j * K * NX * NZ;
    if (solve_wide(h[j], Fxj, sk, sa, rhs, Sj, work)) return j + 1;
    double* dFj = dF + j * dj;
    for (int l = 0; l < K; ++l)
      for (int a = 0; a < NX; ++a) {
        const double* fa = Fxj + l * sk + a * sa;
        const double* fp = Fpj + l * pk + a * pa;
        double acc[CMAX];  /* a row of dF_l, in registers */
        for (int z = 0; z < NX; ++z) acc[z] = 0.0;
        for (int q = 0; q < NP; ++q) acc[NX + q] = fp[q];
        for (int bb = 0; bb < NX; ++bb) {
          const double f = fa[bb];
          const double* src = Sj + (l * NX + bb) * NZ;
          for (int z = 0; z < NZ; ++z) acc[z] += f * src[z];
        }
        memcpy(dFj + (l * NX + a) * NZ, acc, sizeof acc);
      }
  }
  return 0;
}

/* Each interval's rows [Jx Jp r] (m rows, NC = CMAX + 1 columns; Jx's entry
   (j, i, a) at Jx[j xj + i xi + a], Jp's likewise, r's (j, i) at r[j rj + i])
   reduced to the upper triangular R (J, NC, NC) of [Jx Jp r] = Q R by
   Householder reflections (LAPACK's sign convention), row-major in work. */
#define NC (CMAX + 1)
int pc_compress_rows(int J, int m, const double* Jx, long xj, long xi, const double* Jp,
                     long pj, long pi, const double* r, long rj, long ri, double* R,
                     double* work) {
  enum { NP = CMAX - NX };
  double (*restrict W)[NC] = (double (*)[NC]) work;
  for (int j = 0; j < J; ++j) {
    for (int i = 0; i < m; ++i) {
      memcpy(W[i], Jx + j * xj + i * xi, sizeof(double) * NX);
      memcpy(W[i] + NX, Jp + j * pj + i * pi, sizeof(double) * NP);
      W[i][NC - 1] = r[j * rj + i * ri];
    }
    const int steps = m < NC ? m : NC;
    for (int k = 0; k < steps; ++k) {
      /* the column's norm scaled by its largest entry (as LAPACK's dnrm2):
         sensitivities of an unstable trajectory reach 1e148, whose squares
         overflow; a NaN entry makes the norm NaN */
      double amax = 0.0;
      for (int i = k + 1; i < m; ++i) {
        const double a = fabs(W[i][k]);
        if (!(a <= amax)) amax = a;
      }
      if (amax == 0.0) continue;  /* nothing below the diagonal: H = I */
      const double alpha = W[k][k];
      const double big = fabs(alpha) > amax ? fabs(alpha) : amax;
      double s = 0.0;
      for (int i = k + 1; i < m; ++i) {
        const double t = W[i][k] / big;
        s += t * t;
      }
      const double norm = big * sqrt((alpha / big) * (alpha / big) + s);
      const double beta = alpha > 0.0 ? -norm : norm;
      const double tau = (beta - alpha) / beta, scale = 1.0 / (alpha - beta);
      /* v = (1, W[k+1:, k] scale); w = tau v^T W[k:, :] */
      double w[NC];
      for (int c = 0; c < NC; ++c) w[c] = W[k][c];
      for (int i = k + 1; i < m; ++i) {
        const double vi = W[i][k] * scale;
        for (int c = 0; c < NC; ++c) w[c] += vi * W[i][c];
      }
      for (int c = 0; c < NC; ++c) w[c] *= tau;
      for (int c = k + 1; c < NC; ++c) W[k][c] -= w[c];
      for (int i = k + 1; i < m; ++i) {
        const double vi = W[i][k] * scale;
        for (int c = k + 1; c < NC; ++c) W[i][c] -= vi * w[c];
      }
      W[k][k] = beta;
    }
    double* Rj = R + (long) j * NC * NC;
    for (int i = 0; i < NC; ++i)
      for (int c = 0; c < NC; ++c) Rj[i * NC + c] = (c >= i && i < m) ? W[i][c] : 0.0;
  }
  return 0;
}
"""


def _strides(a: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """``a`` (float, last axis contiguous: copied if not) and its strides in elements."""
    if a.dtype != np.float64 or a.strides[-1] != 8 or any(st % 8 for st in a.strides):
        a = np.ascontiguousarray(a, dtype=float)
    return a, [st // 8 for st in a.strides]


class IterationKernels:
    """The compiled kernels of :func:`kernel_source`, called on NumPy arrays.

    One object per transcription (its work arrays are its own: not for
    concurrent calls from several threads).

    Parameters
    ----------
    library : path
        The shared library compiled from :func:`kernel_source`.
    K, nx : int
        Nodes per interval and states (the shapes it was generated for).
    """

    def __init__(self, library: str | Path, K: int, nx: int) -> None:
        self.K, self.nx = K, nx
        self._lib = ctypes.CDLL(str(library))
        long, ptr = ctypes.c_long, ctypes.c_void_p
        self._solve = self._lib.pc_fixed_point_solve
        self._solve.restype = ctypes.c_int
        self._solve.argtypes = [ctypes.c_int, ctypes.c_int, ptr, ptr, long, long, long,
                                ptr, ptr, ptr]
        self._sens = self._lib.pc_fixed_point_sensitivities
        self._sens.restype = ctypes.c_int
        self._sens.argtypes = [ctypes.c_int, ptr, ptr, long, long, long, ptr, long, long, long,
                               ptr, ptr, long, ptr]
        self._compress = self._lib.pc_compress_rows
        self._compress.restype = ctypes.c_int
        self._compress.argtypes = [ctypes.c_int, ctypes.c_int] + [ptr, long, long] * 3 + [ptr, ptr]
        for name in ("pc_fixed_point_work", "pc_fixed_point_max_rhs", "pc_compress_work"):
            getattr(self._lib, name).restype = ctypes.c_int
        self._lib.pc_compress_work.argtypes = [ctypes.c_int]
        #: the right-hand sides of a solve: 1 (a Newton step) or this many
        #: (the sensitivities' nx + np)
        self.max_rhs = int(self._lib.pc_fixed_point_max_rhs())
        self._work = np.empty(int(self._lib.pc_fixed_point_work()))
        self._compress_work: np.ndarray | None = None

    def handles(self, Fx: np.ndarray, c: int) -> bool:
        """Whether :meth:`solve` takes ``Fx``'s shape and ``c`` right-hand sides."""
        return Fx.shape[1:] == (self.K, self.nx, self.nx) and c in (1, self.max_rhs)

    def _check(self, Fx: np.ndarray, c: int) -> None:
        if not self.handles(Fx, c):
            raise ValueError(f"kernel generated for K={self.K}, nx={self.nx}, 1 or "
                             f"{self.max_rhs} right-hand sides; called with f_x of shape "
                             f"{Fx.shape[1:]} and {c} right-hand sides")

    def solve(self, h: np.ndarray, Fx: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        """``(I - dP/dU)^-1 rhs`` for every interval (shapes as
        :meth:`FixedPointSystem.solve <picard_casadi.transcription.fixed_point_system.FixedPointSystem.solve>`,
        1 or :attr:`max_rhs` columns; ``Fx`` may be a strided view).

        Raises
        ------
        numpy.linalg.LinAlgError
            When an interval's matrix is singular.
        ValueError
            For shapes the kernel was not generated for.
        """
        c = rhs.shape[-1]
        self._check(Fx, c)
        h = np.ascontiguousarray(h, dtype=float)
        Fx, (sj, sk, sa, _) = _strides(Fx)
        rhs = np.ascontiguousarray(rhs, dtype=float)
        out = np.empty(rhs.shape)
        status = self._solve(h.size, c, h.ctypes.data, Fx.ctypes.data, sj, sk, sa,
                             rhs.ctypes.data, out.ctypes.data, self._work.ctypes.data)
        if status:
            raise np.linalg.LinAlgError(f"Singular matrix (interval {status - 1})")
        return out

    def sensitivities(self, h: np.ndarray, Fx: np.ndarray, Fp: np.ndarray,
                      dF: np.ndarray) -> np.ndarray:
        """The fixed-point sensitivities ``S = (I - dP/dU)^-1 dP/dz``, ``z =
        (x_j, p)``, with ``dP/dz`` formed from ``Fp``, and ``dF = Fx S + [0 |
        Fp]`` at the nodes written into ``dF``.

        Parameters
        ----------
        h : (J,)
        Fx : (J, K, nx, nx), Fp : (J, K, nx, np)
            May be strided views (their last axis contiguous).
        dF : (J, K', nx, nx + np), K' >= K
            Written at its first ``K`` nodes; its last three axes contiguous.

        Returns
        -------
        S : ndarray (J, K nx, nx + np)

        Raises
        ------
        numpy.linalg.LinAlgError
            When an interval's matrix is singular.
        """
        nz = self.nx + Fp.shape[-1]
        self._check(Fx, nz)
        if nz != self.max_rhs or dF.shape[-1] != nz \
                or dF.strides[1:] != (8 * self.nx * nz, 8 * nz, 8):
            raise ValueError("sensitivities need nx + np == max_rhs columns and dF's last "
                             "three axes contiguous")
        h = np.ascontiguousarray(h, dtype=float)
        Fx, (sj, sk, sa, _) = _strides(Fx)
        Fp, (pj, pk, pa, _) = _strides(Fp)
        J = h.size
        S = np.empty((J, self.K * self.nx, nz))
        status = self._sens(J, h.ctypes.data, Fx.ctypes.data, sj, sk, sa, Fp.ctypes.data,
                            pj, pk, pa, S.ctypes.data, dF.ctypes.data, dF.strides[0] // 8,
                            self._work.ctypes.data)
        if status:
            raise np.linalg.LinAlgError(f"Singular matrix (interval {status - 1})")
        return S

    def compress_rows(self, r: np.ndarray, Jx: np.ndarray, Jp: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:func:`picard_casadi.methods.least_squares.compress_rows` compiled:
        each interval's rows as the triangular factor of ``[Jx Jp r]``.

        Parameters
        ----------
        r : (J, m), Jx : (J, m, nx), Jp : (J, m, np)
            May be strided views (``Jx``'s and ``Jp``'s last axis contiguous).

        Returns
        -------
        r, Jx, Jp : views of the factor ``(J, nx + np + 1, nx + np + 1)``
            Its last column, its first ``nx`` and its next ``np`` columns
            (the inputs unchanged where ``m <= nx + np + 1``).
        """
        J, m, nx = Jx.shape
        nc = self.max_rhs + 1
        if nx != self.nx or nx + Jp.shape[2] + 1 != nc:
            raise ValueError(f"kernel generated for nx={self.nx}, nx + np = {self.max_rhs}; "
                             f"called with nx={nx}, np={Jp.shape[2]}")
        if m <= nc:
            return r, Jx, Jp
        Jx, (xj, xi, _) = _strides(Jx)
        Jp, (pj, pi, _) = _strides(Jp)
        r = np.asarray(r, dtype=float)
        if r.strides[1] % 8 or r.strides[0] % 8:
            r = np.ascontiguousarray(r)
        rj, ri = (st // 8 for st in r.strides)
        if self._compress_work is None or self._compress_work.size < m * nc:
            self._compress_work = np.empty(int(self._lib.pc_compress_work(m)))
        R = np.empty((J, nc, nc))
        self._compress(J, m, Jx.ctypes.data, xj, xi, Jp.ctypes.data, pj, pi, r.ctypes.data,
                       rj, ri, R.ctypes.data, self._compress_work.ctypes.data)
        return R[:, :, -1], R[:, :, :nx], R[:, :, nx:-1]


def kernel_loader(system: FixedPointSystem, nx: int, max_rhs: int, functions: Any,
                  pattern: np.ndarray | None = None) -> Callable[[], IterationKernels | None]:
    """What :meth:`FixedPointSystem.use_kernel
    <picard_casadi.transcription.fixed_point_system.FixedPointSystem.use_kernel>` calls on
    the first solve: the kernel for ``system``'s structure, compiled or loaded
    from the cache, or None where the matrix is larger than :data:`MAX_ORDER`.

    Parameters
    ----------
    system : FixedPointSystem
    nx : int
        Number of states.
    max_rhs : int
        Most right-hand sides of a solve (the sensitivities' ``nx + np``).
    pattern : ndarray of bool (nx, nx), optional
        Structural nonzeros of ``df/dx`` (:func:`kernel_source`).
    functions : LazyCompiled
        The compiled functions of the same call: their ``strict`` decides
        whether a failed compilation raises (``codegen=True``) or leaves the
        NumPy solve with a note in their ``notes`` (``codegen="auto"``).
    """
    def load() -> IterationKernels | None:
        K = system.A.shape[0]
        if system.order(K, nx) > MAX_ORDER:
            return None
        try:
            source = kernel_source(system.A, nx, system.explicit, system.sinks, max_rhs,
                                   pattern)
            return IterationKernels(codegen.compile_c_source(source, "fixed_point"), K, nx)
        except (CodegenError, OSError) as err:
            if interrupted():
                raise KeyboardInterrupt from None
            if getattr(functions, "strict", False):
                raise
            note = (f"codegen='auto': the iteration's dense linear algebra (fixed-point solves, "
                    f"row compression) runs on NumPy: {err}")
            notes = getattr(functions, "notes", None)
            if notes is not None:
                notes.append(note)
            warn_user(note, RuntimeWarning)
            return None
    return load
