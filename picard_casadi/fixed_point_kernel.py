"""The fixed-point solve of every interval as generated C (one compiled call).

:meth:`FixedPointSystem.solve <picard_casadi.fixed_point_system.FixedPointSystem.solve>`
solves ``(I - dP/dU) v = b`` for all intervals with NumPy: batched products
form each interval's (Schur-complement) matrix and LAPACK factorises it.
With a C compiler at hand the same solve is written here as C specialised
to the problem (the quadrature's matrix ``A``, the numbers of nodes and
states, the states eliminated), compiled once and cached with the other
generated code (:func:`picard_casadi.codegen.compile_c_source`), and called
on the NumPy buffers through :mod:`ctypes`:

* per interval, the fold of the first node, the Schur complement on the
  kept states (formed in place, no temporaries), the elimination of the
  explicit states from the right-hand side, a blocked LU with partial
  pivoting applied to ``[S | b]`` at once, the back substitution and the
  explicit states' values, all in one pass over the interval's data;
* the sizes are compile-time constants, so that the compiler unrolls and
  vectorises the inner loops (``-O3`` and the processor's own instructions,
  :data:`picard_casadi.codegen.DEFAULT_OPT_FLAGS` ``"kernel"``).

The arithmetic is that of the NumPy path up to the order of summation
(results agree to round-off, ``tests/test_fixed_point_kernel.py``); a
singular interval raises :class:`numpy.linalg.LinAlgError` as LAPACK's does.
Without a compiler, or where a matrix would be too large for the unblocked
cache use of this LU (:data:`MAX_ORDER`), the NumPy path runs.  Why this
exists and what it gains: docs/performance.md, "The fixed-point solve in
generated C".
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from . import codegen
from .errors import CodegenError
from .fixed_point_system import FixedPointSystem
from .interrupts import interrupted
from .user_warnings import warn_user

__all__ = ["FixedPointKernel", "kernel_source", "kernel_loader", "MAX_ORDER"]

#: largest order of the factorised matrix (kept states times nodes) solved
#: by the kernel; above it LAPACK's cache-blocked LU is the faster
MAX_ORDER = 256
#: columns eliminated together in the LU's trailing updates
PANEL = 6

_DOUBLE_P = ctypes.POINTER(ctypes.c_double)


def _array(name: str, values: np.ndarray, ctype: str) -> str:
    flat = np.asarray(values).ravel()
    if flat.size == 0:
        return f"static const {ctype} {name}[1] = {{0}};\n"
    body = ", ".join(repr(float(v)) if ctype == "double" else str(int(v)) for v in flat)
    return f"static const {ctype} {name}[{flat.size}] = {{{body}}};\n"


def kernel_source(A: np.ndarray, nx: int, explicit: np.ndarray, sinks: bool,
                  max_rhs: int, pattern: np.ndarray | None = None) -> str:
    """C source of ``pc_fixed_point_solve`` for one quadrature and model structure.

    Parameters
    ----------
    A : ndarray (K, K)
        Node integration matrix.
    nx : int
        Number of states.
    explicit : ndarray of int
        States eliminated (empty: none), as in
        :class:`~picard_casadi.fixed_point_system.FixedPointSystem`.
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
        The C file.  Its function ``int pc_fixed_point_solve(int J, int c,
        const double* h, const double* Fx, const double* rhs, double* out,
        double* work)`` takes C-ordered ``h (J,)``, ``Fx (J, K, nx, nx)``,
        ``rhs`` and ``out (J, K nx, c)`` and a work array of
        ``pc_fixed_point_work(c)`` doubles; it returns 0, or ``j + 1`` for
        the first singular interval ``j``.
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
#include <stdlib.h>

#define LD (N + CMAX)
/* doubles of work: the matrix [S | b], the folded right-hand side, the
   gathered blocks of f_x, the Schur products and two small products */
#define WORK_SIZE (N * LD + K * NX * CMAX + K * NR * NR + K * NR * NE + K * NER \
                   + K * K * NR * NE + K * NX * CMAX + NX * CMAX + 8)

int pc_fixed_point_work(void) { return WORK_SIZE; }
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

/* One interval: h, f_x at its nodes (K, NX, NX), the right-hand side and the
   solution (K NX, c), all C-ordered. */
static inline __attribute__((always_inline)) int solve_one(const int c, const double h, const double* restrict Fx,
                     const double* restrict rhs, double* restrict out, double* restrict work) {
  const int W = N + c;
  double (*restrict M)[LD] = (double (*)[LD]) work;
  double* restrict b = work + N * LD;                 /* (K, NX, c) */
  double* restrict FRR = b + K * NX * CMAX;           /* (K, NR, NR) */
  double* restrict FRE = FRR + K * NR * NR;           /* (K, NR, NE) */
  double* restrict FER = FRE + K * NR * NE;           /* (K, NER): f_x[E, R]'s nonzeros */
  double* restrict Q = FER + K * NER;                 /* (K, K, NR, NE) */
  double* restrict T = Q + K * K * NR * NE;           /* (K, NR or NE, c) */
  double* restrict t0 = T + K * NX * CMAX;            /* (NX, c) */
  (void) Q;
  for (int k = 0; k < K; ++k) {
    const double* Fk = Fx + k * NX * NX;
    for (int a = 0; a < NR; ++a) {
      for (int bb = 0; bb < NR; ++bb) FRR[(k * NR + a) * NR + bb] = Fk[R[a] * NX + R[bb]];
#if HAS_E
      for (int e = 0; e < NE; ++e) FRE[(k * NR + a) * NE + e] = Fk[R[a] * NX + E[e]];
#endif
    }
#if HAS_ER
    for (int t = 0; t < NER; ++t) FER[k * NER + t] = Fk[E[ER_E[t]] * NX + R[ER_B[t]]];
#endif
  }
  /* b: the right-hand side, with the first node's column folded in */
  memcpy(b, rhs, sizeof(double) * K * NX * c);
#if K0
  for (int a = 0; a < NX; ++a) {
    for (int q = 0; q < c; ++q) t0[a * c + q] = 0.0;
    for (int e = 0; e < NX; ++e) {
      const double f = Fx[a * NX + e];
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
     -h^2 Q[k, m] F_m[E, R] with Q[k, m] = sum_l A[k, l] A[l, m] F_l[R, E] */
  const double h2 = h * h;
  for (int k = K0; k < K; ++k)
    for (int m = K0; m < K; ++m) {
      double* restrict Qkm = Q + (k * K + m) * NR * NE;
      for (int i = 0; i < NR * NE; ++i) Qkm[i] = 0.0;
      for (int l = K0; l < K; ++l) {
        const double w = AA[(k * K + m) * K + l];
        const double* Fl = FRE + l * NR * NE;
        for (int i = 0; i < NR * NE; ++i) Qkm[i] += w * Fl[i];
      }
#if HAS_ER
      for (int t = 0; t < NER; ++t) {
        const double f = h2 * FER[m * NER + t];
        const int e = ER_E[t], col = (m - K0) * NR + ER_B[t];
        for (int a = 0; a < NR; ++a) M[(k - K0) * NR + a][col] -= f * Qkm[a * NE + e];
      }
#endif
    }
#endif
#endif
#ifndef SKIP_LU
  {
    const int status = lu_solve(W, work);
    if (status == 1) return 1;
    if (status == 2) {  /* not finite: NaN out, as LAPACK's solve gives */
      for (int i = 0; i < K * NX * c; ++i) out[i] = NAN;
      return 0;
    }
  }
#endif
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

int pc_fixed_point_solve(int J, int c, const double* h, const double* Fx, const double* rhs,
                         double* out, double* work) {
  if (c < 1 || c > CMAX) return -1;
  /* the loops specialised (inlined with c constant) for the two usual widths:
     the sensitivities' CMAX columns and a Newton step's one */
#define SOLVE_ALL(cc) \
  for (int j = 0; j < J; ++j) \
    if (solve_one(cc, h[j], Fx + (long) j * K * NX * NX, rhs + (long) j * K * NX * (cc), \
                  out + (long) j * K * NX * (cc), work)) \
      return j + 1;
  if (c == CMAX) { SOLVE_ALL(CMAX) }
  else if (c == 1) { SOLVE_ALL(1) }
  else { SOLVE_ALL(c) }
  return 0;
}
"""


class FixedPointKernel:
    """The compiled solve of :func:`kernel_source`, called on NumPy arrays.

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
        self._solve = self._lib.pc_fixed_point_solve
        self._solve.restype = ctypes.c_int
        self._solve.argtypes = [ctypes.c_int, ctypes.c_int] + [ctypes.c_void_p] * 5
        for name in ("pc_fixed_point_work", "pc_fixed_point_max_rhs"):
            getattr(self._lib, name).restype = ctypes.c_int
        #: most right-hand sides per call
        self.max_rhs = int(self._lib.pc_fixed_point_max_rhs())
        self._work = np.empty(int(self._lib.pc_fixed_point_work()))

    def solve(self, h: np.ndarray, Fx: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        """``(I - dP/dU)^-1 rhs`` for every interval (shapes as
        :meth:`FixedPointSystem.solve <picard_casadi.fixed_point_system.FixedPointSystem.solve>`,
        at most :attr:`max_rhs` columns).

        Raises
        ------
        numpy.linalg.LinAlgError
            When an interval's matrix is singular.
        ValueError
            For shapes the kernel was not generated for.
        """
        J, K, nx, _ = Fx.shape
        c = rhs.shape[-1]
        if (K, nx) != (self.K, self.nx) or not 1 <= c <= self.max_rhs:
            raise ValueError(f"kernel generated for K={self.K}, nx={self.nx}, at most "
                             f"{self.max_rhs} right-hand sides; called with K={K}, nx={nx}, c={c}")
        h = np.ascontiguousarray(h, dtype=float)
        Fx = np.ascontiguousarray(Fx, dtype=float)
        rhs = np.ascontiguousarray(rhs, dtype=float)
        out = np.empty(rhs.shape)
        status = self._solve(J, c, h.ctypes.data, Fx.ctypes.data, rhs.ctypes.data,
                             out.ctypes.data, self._work.ctypes.data)
        if status:
            raise np.linalg.LinAlgError(f"Singular matrix (interval {status - 1})")
        return out


def kernel_loader(system: FixedPointSystem, nx: int, max_rhs: int, functions: Any,
                  pattern: np.ndarray | None = None) -> Callable[[], FixedPointKernel | None]:
    """What :meth:`FixedPointSystem.use_kernel
    <picard_casadi.fixed_point_system.FixedPointSystem.use_kernel>` calls on
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
    def load() -> FixedPointKernel | None:
        K = system.A.shape[0]
        if system.order(K, nx) > MAX_ORDER:
            return None
        try:
            source = kernel_source(system.A, nx, system.explicit, system.sinks, max_rhs,
                                   pattern)
            return FixedPointKernel(codegen.compile_c_source(source, "fixed_point"), K, nx)
        except (CodegenError, OSError) as err:
            if interrupted():
                raise KeyboardInterrupt from None
            if getattr(functions, "strict", False):
                raise
            note = f"codegen='auto': the fixed-point solves run on NumPy: {err}"
            notes = getattr(functions, "notes", None)
            if notes is not None:
                notes.append(note)
            warn_user(note, RuntimeWarning)
            return None
    return load
