"""Calling a compiled function directly on NumPy buffers (``ctypes``).

A ``casadi.external`` function takes and returns ``casadi.DM``: converting a
NumPy array to a DM and back costs 30-60 ns per entry, which on the F/A-18
runs was a third of ``picard-gn``'s solve time (the node values go in and out
of the Picard map a few hundred times per solve, the vector-field
Jacobians once per iteration).  The generated C function itself reads and
writes plain arrays of doubles,

    int name(const double** arg, double** res, long long* iw, double* w, int mem)

so this module loads the same shared library with :mod:`ctypes` and passes
NumPy memory straight in: a dense input is its column-major (Fortran-order)
buffer, a sparse output is scattered into a dense array with indices computed
once.  Functions with a sparse input are not wrapped (every function of the
iteration has dense inputs).
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import casadi as ca
import numpy as np

__all__ = ["NativeFunction"]

_CASADI_INT = ctypes.c_longlong  # the generated code's casadi_int (CasADi's default)


class NativeFunction:
    """A compiled CasADi function called on NumPy arrays.

    Parameters
    ----------
    library : path
        The shared library built by :func:`picard_casadi.runtime.codegen.compile_library`.
    name : str
        The C symbol of the function in it.
    function : casadi.Function
        The same function (its input and output sparsity patterns).
    count : int, optional
        Call the library's ``{name}_map`` loop instead (built with
        ``mapped=True``): ``function`` is one call, evaluated ``count`` times
        in the layout of ``function.map(count)``.

    Raises
    ------
    ValueError
        When an input is not dense (callers then keep the DM interface).
    """

    def __init__(self, library: str | Path, name: str, function: ca.Function,
                 count: int | None = None) -> None:
        for i in range(function.n_in()):
            if not function.sparsity_in(i).is_dense():
                raise ValueError(f"input {function.name_in(i)!r} of {name!r} is sparse")
        self.name = name
        self.count = 1 if count is None else int(count)
        self._mapped = count is not None
        self._lib = ctypes.CDLL(str(library))
        self._fn = getattr(self._lib, name + "_map" if self._mapped else name)
        self._chain_fn = None  # {name}_chain, bound on first use
        self._fn.restype = ctypes.c_int
        self._fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.c_void_p, ctypes.c_int] + (
            [_CASADI_INT, ctypes.c_void_p] if self._mapped else [])
        work = getattr(self._lib, name + "_work")
        work.restype = ctypes.c_int
        sizes = [_CASADI_INT() for _ in range(4)]
        if work(*[ctypes.byref(s) for s in sizes]) != 0:
            raise RuntimeError(f"{name}_work failed")
        sz_arg, sz_res, sz_iw, sz_w = (int(s.value) for s in sizes)
        self._arg = (ctypes.c_void_p * max(sz_arg, function.n_in(), 1))()
        self._res = (ctypes.c_void_p * max(sz_res, function.n_out(), 1))()
        self._iw = np.zeros(max(sz_iw, 1), dtype=np.int64)
        self._w = np.zeros(max(sz_w, 1))
        self._stride = np.zeros(max(function.n_in(), 1), dtype=np.int64)
        # one call's shapes
        self.in_shapes = [(function.size1_in(i), function.size2_in(i))
                          for i in range(function.n_in())]
        self._out: list[tuple[int, int, int, np.ndarray | None]] = []
        for i in range(function.n_out()):
            sp = function.sparsity_out(i)
            r, c = sp.size1(), sp.size2()
            scatter = None
            if not sp.is_dense():
                rows, cols = sp.get_triplet()
                scatter = np.asarray(cols, dtype=np.int64) * r + np.asarray(rows, dtype=np.int64)
            self._out.append((r, c, sp.nnz(), scatter))

    def _buffer(self, i: int, value: Any, n: int) -> tuple[np.ndarray, int]:
        """Input ``i`` of ``n`` calls as a column-major buffer, and its stride
        between calls."""
        r, c = self.in_shapes[i]
        if isinstance(value, ca.DM):
            value = value.full()
        a = np.asarray(value, dtype=float)
        if a.ndim == 2 and a.shape == (r, c * n):
            return a.reshape(-1, order="F"), r * c  # a view when ``a`` is Fortran-ordered
        if a.ndim < 2 and a.size == r * c * n:
            return a.reshape(-1), r * c
        if self._mapped and ((a.ndim == 2 and a.shape == (r, c)) or (a.ndim < 2 and a.size == r * c)):
            return a.reshape(-1, order="F"), 0  # the same input for every call
        # as casadi.Function.map: an input given for fewer calls is repeated
        a2 = a.reshape(-1, 1) if a.ndim < 2 else a
        cols = c * n
        if a2.shape[0] == r and a2.shape[1] > 0 and cols % a2.shape[1] == 0:
            return np.tile(a2, (1, cols // a2.shape[1])).reshape(-1, order="F"), r * c
        raise ValueError(
            f"input {i} of {self.name}: expected shape {(r, cols)} (or {r} rows repeated), "
            f"got {a.shape}")

    def chain(self, *args: Any, carry_in: int, carry_out: int,
              reverse: bool = False) -> list[np.ndarray]:
        """As :meth:`__call__`, but from the second call on input ``carry_in``
        is output ``carry_out`` of the call before (the library's
        ``{name}_chain``; ``reverse``: the calls from the last to the first).
        Input ``carry_in`` as given is read by the first call only."""
        if not self._mapped:
            raise TypeError(f"{self.name} is not mapped: it has no chain")
        if self._chain_fn is None:
            fn = getattr(self._lib, self.name + "_chain")
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                           ctypes.c_int, _CASADI_INT, ctypes.c_void_p, _CASADI_INT, _CASADI_INT,
                           ctypes.c_int]
            self._chain_fn = fn
        return self._evaluate(self._chain_fn, args, [carry_in, carry_out, int(reverse)])

    def __call__(self, *args: Any, count: int | None = None) -> list[np.ndarray]:
        """Evaluate; each output is a dense ``(rows, columns x count)`` array.

        Parameters
        ----------
        *args : array_like or casadi.DM or float
            One per input, in the function's input order: the input's shape,
            or its number of entries as a 1-D array (column-major), or, as
            for a mapped CasADi function, the columns of one call (repeated).
        count : int, optional
            Evaluate this many calls instead of :attr:`count` (a mapped
            function only: its loop takes the number at run time), the
            inputs given for that many.
        """
        if count is not None and not self._mapped:
            raise TypeError(f"{self.name} is not mapped: it takes no count")
        return self._evaluate(self._fn, args, [], count)

    def _evaluate(self, fn: Any, args: tuple, extra: list,
                  count: int | None = None) -> list[np.ndarray]:
        """Call ``fn`` (the plain, mapped or chained symbol) on ``args``."""
        if len(args) != len(self.in_shapes):
            raise TypeError(f"{self.name} takes {len(self.in_shapes)} inputs, got {len(args)}")
        n = self.count if count is None else int(count)
        buffers = []
        for i, a in enumerate(args):
            b, stride = self._buffer(i, a, n)
            buffers.append(b)
            self._arg[i] = b.ctypes.data
            self._stride[i] = stride
        outputs = [np.empty(nnz * n) for (_, _, nnz, _) in self._out]
        for i, o in enumerate(outputs):
            self._res[i] = o.ctypes.data
        call = [ctypes.addressof(self._arg), ctypes.addressof(self._res),
                self._iw.ctypes.data, self._w.ctypes.data, 0]
        if self._mapped:
            call += [n, self._stride.ctypes.data] + extra
        status = fn(*call)
        if status != 0:
            raise RuntimeError(f"the compiled function {self.name} returned status {status}")
        result = []
        for (r, c, nnz, scatter), o in zip(self._out, outputs):
            if scatter is not None:
                dense = np.zeros((n, r * c))
                dense[:, scatter] = o.reshape(n, nnz)
                o = dense.ravel()
            result.append(o.reshape(c * n, r).T)
        return result
