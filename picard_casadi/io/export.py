"""Export a model's functions as standalone C for embedding.

:func:`export_c` writes, into a folder:

* ``<name>.c`` and ``<name>.h``: CasADi-generated C (no CasADi needed to
  compile or run it) for

  - ``<name>_rhs(t, x, p, u) -> f``: the vector field;
  - ``<name>_rhs_jac(t, x, p, u) -> (df/dx, df/dp)``;
  - ``<name>_picard(x, U, p, t0, h, W) -> PU``: one Picard application on an
    interval, node values ``U`` (nx x K, column-major) and input values at
    the nodes ``W`` (nu x K);
  - ``<name>_picard_n(x, U, p, t0, h, W) -> (PnU, dPnU/dx, dPnU/dp)``: ``P^n``
    at the nodes and its exact derivatives with ``U`` held fixed (what the
    gradient steps of the paper's algorithm use);

* ``nodes.txt``: the reference nodes ``tau_k`` on ``[0, 1]``;
* ``example.c``: a program that evaluates the vector field and the Picard
  map at fixed values and prints the results, and ``Makefile`` building it
  with the system C compiler (``make && ./example``).

All arrays are dense, column-major ``double``; see the generated header for
the calling convention (``<fun>_work`` gives the work-array sizes).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import casadi as ca
import numpy as np

from ..model import Model
from ..transcription.quadrature import Quadrature

__all__ = ["export_c", "exported_functions"]


def _c_identifier(name: str) -> str:
    ident = re.sub(r"[^0-9A-Za-z_]", "_", name)
    return ident if ident and not ident[0].isdigit() else f"m_{ident}"


def exported_functions(model: Model, *, nodes: int = 9, scheme: str = "chebyshev",
                       n: int = 2, prefix: str | None = None) -> dict[str, ca.Function]:
    """The functions :func:`export_c` writes, as CasADi functions.

    Parameters
    ----------
    model : Model
    nodes, scheme : int, str
        Quadrature of the interval (see :class:`~picard_casadi.transcription.quadrature.Quadrature`).
    n : int
        Picard order of ``<name>_picard_n``.
    prefix : str, optional
        C name prefix (default: the model's name).
    """
    if int(n) != n or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    quad = Quadrature(scheme, nodes)
    K = quad.n_nodes
    base = _c_identifier(prefix or model.name)
    t, x, p, u = model.t, model.x, model.p, model.u
    rhs = ca.Function(f"{base}_rhs", [t, x, p, u], [model.rhs], ["t", "x", "p", "u"], ["f"])
    rhs_jac = ca.Function(
        f"{base}_rhs_jac", [t, x, p, u],
        [ca.jacobian(model.rhs, x), ca.jacobian(model.rhs, p)],
        ["t", "x", "p", "u"], ["f_x", "f_p"],
    )
    xs = ca.SX.sym("x", model.nx)
    U = ca.SX.sym("U", model.nx, K)
    ps = ca.SX.sym("p", model.np)
    t0 = ca.SX.sym("t0")
    h = ca.SX.sym("h")
    W = ca.SX.sym("W", model.nu, K)
    A = ca.DM(quad.integration)
    f_nodes = model.f.map(K)
    node_t = t0 + h * ca.DM(quad.tau).T

    def P(Uc):
        F = f_nodes(node_t, Uc, ca.repmat(ps, 1, K), W)
        return ca.repmat(xs, 1, K) + h * ca.mtimes(F, A.T)

    PU = P(U)
    PnU = U
    for _ in range(int(n)):
        PnU = P(PnU)
    flat = ca.vec(PnU)
    picard = ca.Function(f"{base}_picard", [xs, U, ps, t0, h, W], [PU],
                         ["x", "U", "p", "t0", "h", "W"], ["PU"])
    picard_n = ca.Function(
        f"{base}_picard_n", [xs, U, ps, t0, h, W],
        [PnU, ca.jacobian(flat, xs), ca.jacobian(flat, ps)],
        ["x", "U", "p", "t0", "h", "W"], ["PnU", "dPnU_dx", "dPnU_dp"],
    )
    return {f.name(): f for f in (rhs, rhs_jac, picard, picard_n)}


def _c_array(name: str, values: np.ndarray) -> str:
    body = ", ".join(f"{v:.17g}" for v in np.asarray(values, float).ravel(order="F"))
    return f"static const casadi_real {name}[{max(values.size, 1)}] = {{{body or '0'}}};"


def export_c(model: Model, directory: str | Path, *, nodes: int = 9,
             scheme: str = "chebyshev", n: int = 2, T: float = 0.1,
             prefix: str | None = None, example_point: dict[str, Any] | None = None) -> Path:
    """Write standalone C sources, a header and a runnable example for a model.

    Parameters
    ----------
    model : Model
    directory : str or Path
        Created if needed; existing files of the same names are replaced.
    nodes, scheme, n : int, str, int
        Quadrature and Picard order of the exported interval functions.
    T : float
        Interval length used by the example program (positive).
    prefix : str, optional
        C name prefix (default: the model's name).
    example_point : dict, optional
        ``t``, ``x``, ``p``, ``u`` at which the example evaluates (default:
        ``t = 0``, ``x = 0.1``, ``p = 1``, ``u = 0``).

    Returns
    -------
    Path
        The folder.

    Raises
    ------
    ValueError
        A ``T`` that is not a positive number, a folder that cannot be created.
    """
    try:
        positive = math.isfinite(float(T)) and float(T) > 0
    except (TypeError, ValueError):
        positive = False
    if not positive:
        raise ValueError(f"`T` must be a positive number (the example's interval length), "
                         f"got {T!r}")
    T = float(T)
    out = Path(directory)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"`directory` {str(directory)!r} cannot be created "
                         f"({err.strerror or err}); give another folder") from None
    funcs = exported_functions(model, nodes=nodes, scheme=scheme, n=n, prefix=prefix)
    base = _c_identifier(prefix or model.name)
    gen = ca.CodeGenerator(f"{base}.c", {"with_header": True})
    for f in funcs.values():
        gen.add(f)
    gen.generate(str(out) + "/")
    quad = Quadrature(scheme, nodes)
    np.savetxt(out / "nodes.txt", quad.tau, fmt="%.17g")

    pt = {"t": 0.0, "x": np.full(model.nx, 0.1), "p": np.ones(model.np),
          "u": np.zeros(model.nu)}
    pt.update({k: np.asarray(v, float) for k, v in (example_point or {}).items()})
    K = quad.n_nodes
    x = np.asarray(pt["x"], float).ravel()
    u = np.asarray(pt["u"], float).ravel()
    U = np.repeat(x[:, None], K, axis=1)
    W = np.repeat(u[:, None], K, axis=1)
    example = f"""/* Example: evaluate the exported functions of model '{model.name}'.
   Build and run:  make && ./example
   Prints the vector field at (t, x, p, u) and one Picard application on
   [t, t + T] with constant node values U = x and inputs W = u. */
#include <stdio.h>
#include <stdlib.h>
#include "{base}.h"

{_c_array("T_ARG", np.array([float(pt["t"])]))}
{_c_array("X_ARG", x)}
{_c_array("P_ARG", np.asarray(pt["p"], float))}
{_c_array("U_ARG", u)}
{_c_array("UNODES_ARG", U)}
{_c_array("W_ARG", W)}
static const casadi_real H_ARG[1] = {{{float(T):.17g}}};

static int eval(int (*fun)(const casadi_real**, casadi_real**, casadi_int*, casadi_real*, int),
                int (*work)(casadi_int*, casadi_int*, casadi_int*, casadi_int*),
                const casadi_real** arg_in, int n_in, casadi_real* out) {{
  casadi_int sz_arg, sz_res, sz_iw, sz_w;
  work(&sz_arg, &sz_res, &sz_iw, &sz_w);
  const casadi_real** arg = malloc(sizeof(casadi_real*) * (sz_arg > n_in ? sz_arg : n_in));
  casadi_real** res = malloc(sizeof(casadi_real*) * (sz_res > 1 ? sz_res : 1));
  casadi_int* iw = malloc(sizeof(casadi_int) * (sz_iw > 0 ? sz_iw : 1));
  casadi_real* w = malloc(sizeof(casadi_real) * (sz_w > 0 ? sz_w : 1));
  for (int i = 0; i < n_in; ++i) arg[i] = arg_in[i];
  for (casadi_int i = 1; i < sz_res; ++i) res[i] = 0;
  res[0] = out;
  int flag = fun(arg, res, iw, w, 0);
  free(arg); free(res); free(iw); free(w);
  return flag;
}}

int main(void) {{
  casadi_real f[{model.nx}];
  casadi_real PU[{model.nx * K}];
  const casadi_real* rhs_args[4] = {{T_ARG, X_ARG, P_ARG, U_ARG}};
  const casadi_real* picard_args[6] = {{X_ARG, UNODES_ARG, P_ARG, T_ARG, H_ARG, W_ARG}};
  if (eval({base}_rhs, {base}_rhs_work, rhs_args, 4, f)) return 1;
  if (eval({base}_picard, {base}_picard_work, picard_args, 6, PU)) return 1;
  printf("rhs");
  for (int i = 0; i < {model.nx}; ++i) printf(" %.17g", f[i]);
  printf("\\npicard");
  for (int i = 0; i < {model.nx * K}; ++i) printf(" %.17g", PU[i]);
  printf("\\n");
  return 0;
}}
"""
    (out / "example.c").write_text(example)
    # -O1, as the package compiles these functions: cmg's export compiles in
    # 12 s at -O1 and 76 s at -O2 (docs/performance.md, "Generated code")
    (out / "Makefile").write_text(
        "CC ?= cc\nCFLAGS ?= -O1\n\n"
        f"example: example.c {base}.c {base}.h\n"
        f"\t$(CC) $(CFLAGS) -o example example.c {base}.c -lm\n\n"
        "clean:\n\trm -f example\n"
    )
    return out
