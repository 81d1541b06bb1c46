"""The C a compiled library adds around CasADi's generated code.

Each function of a transcription is generated once, for one interval or
point, and called over all of them: :func:`map_source` writes the loop over
the count that the library exports (so libraries do not depend on the
number of intervals), :func:`chain_source` a variant that passes buffers on
to the next call (``NativeFunction.chain``); :func:`wrapped_unit` names the
unit the loops call.
"""

from __future__ import annotations

import casadi as ca

__all__ = ["wrapped_unit", "map_source", "chain_source"]


def wrapped_unit(name: str, f: ca.Function) -> ca.Function:
    """A copy of ``f`` under the C symbol ``name`` (mapped functions get long names)."""
    args = f.mx_in()
    return ca.Function(name, args, f.call(args), f.name_in(), f.name_out())


def map_source(name: str, f: ca.Function) -> str:
    """C of ``{name}_map``: ``f`` (C symbol ``name``) called ``n`` times in a loop.

    ``{name}_map(arg, res, iw, w, mem, n, stride)`` evaluates call ``k`` on
    ``arg[i] + k stride[i]`` (``stride[i] = 0`` repeats an input for every
    call) and writes ``res[o] + k nnz_out(o)``: the layout of
    ``casadi.Function.map(n)``, with ``n`` chosen at run time, so one library
    serves every number of intervals (a refined mesh compiles nothing).
    """
    nnz_out = ", ".join(str(f.nnz_out(o)) for o in range(f.n_out())) or "0"
    sz_arg, sz_res = max(f.sz_arg(), 1), max(f.sz_res(), 1)
    return f"""
static const casadi_int {name}_map_nnz_out[] = {{{nnz_out}}};
CASADI_SYMBOL_EXPORT int {name}_map(const casadi_real** arg, casadi_real** res,
    casadi_int* iw, casadi_real* w, int mem, casadi_int n, const casadi_int* stride) {{
  const casadi_real* a[{sz_arg}];
  casadi_real* r[{sz_res}];
  casadi_int k, i;
  for (i = 0; i < {sz_arg}; ++i) a[i] = 0;
  for (i = 0; i < {sz_res}; ++i) r[i] = 0;
  for (k = 0; k < n; ++k) {{
    for (i = 0; i < {f.n_in()}; ++i) a[i] = arg[i] ? arg[i] + k * stride[i] : 0;
    for (i = 0; i < {f.n_out()}; ++i) r[i] = res[i] ? res[i] + k * {name}_map_nnz_out[i] : 0;
    if ({name}(a, r, iw, w, mem)) return 1;
  }}
  return 0;
}}
"""


def chain_source(name: str, f: ca.Function) -> str:
    """C of ``{name}_chain``: ``{name}_map``'s loop with one output fed to the next call.

    ``{name}_chain(arg, res, iw, w, mem, n, stride, carry_in, carry_out,
    reverse)`` evaluates the calls in order (``reverse``: from the last to the
    first) like ``{name}_map``, except that from the second call on, input
    ``carry_in`` is output ``carry_out`` of the call before (of the same
    size): a recursion along the intervals, such as the continuity chain of
    :mod:`picard_casadi.transcription.interval_products`, in one compiled call.
    """
    sz_arg, sz_res = max(f.sz_arg(), 1), max(f.sz_res(), 1)
    return f"""
CASADI_SYMBOL_EXPORT int {name}_chain(const casadi_real** arg, casadi_real** res,
    casadi_int* iw, casadi_real* w, int mem, casadi_int n, const casadi_int* stride,
    casadi_int carry_in, casadi_int carry_out, int reverse) {{
  const casadi_real* a[{sz_arg}];
  casadi_real* r[{sz_res}];
  casadi_int step, k, i;
  for (i = 0; i < {sz_arg}; ++i) a[i] = 0;
  for (i = 0; i < {sz_res}; ++i) r[i] = 0;
  for (step = 0; step < n; ++step) {{
    k = reverse ? n - 1 - step : step;
    for (i = 0; i < {f.n_in()}; ++i) a[i] = arg[i] ? arg[i] + k * stride[i] : 0;
    for (i = 0; i < {f.n_out()}; ++i) r[i] = res[i] ? res[i] + k * {name}_map_nnz_out[i] : 0;
    if (step > 0) a[carry_in] = res[carry_out]
        + (reverse ? k + 1 : k - 1) * {name}_map_nnz_out[carry_out];
    if ({name}(a, r, iw, w, mem)) return 1;
  }}
  return 0;
}}
"""
