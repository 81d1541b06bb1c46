"""One evaluation per iterate for the derivatives ``nlpsol`` asks for separately.

IPOPT asks for the objective's gradient, the constraints' Jacobian and the
Lagrangian's Hessian in three calls at the same point.  Where all three come
from one expensive quantity (the shooting NLP's integrator sensitivities:
CasADi's own ``nlp_grad_f``, ``nlp_jac_g`` and ``nlp_hess_l`` each integrate
the sensitivities again, the gradient by an adjoint sweep), a single CasADi
Function computes them together, and :func:`nlpsol_derivatives` hands
``nlpsol`` three thin callbacks (its ``grad_f``, ``jac_g`` and ``hess_lag``
options) that evaluate that Function once per point and share its outputs.
"""

from __future__ import annotations

from typing import Any

import casadi as ca
import numpy as np

__all__ = ["nlpsol_derivatives"]


class _OnePointCache:
    """The outputs of ``function(x, p)`` at the last point asked for."""

    def __init__(self, function: ca.Function) -> None:
        self.function = function
        self._key: tuple[bytes, bytes] | None = None
        self._outputs: list[ca.DM] = []

    def __call__(self, x: ca.DM, p: ca.DM) -> list[ca.DM]:
        xv = np.asarray(ca.DM(x), float).ravel()
        pv = np.asarray(ca.DM(p), float).ravel()
        key = (xv.tobytes(), pv.tobytes())
        if key != self._key:
            self._key = None  # a failed evaluation leaves nothing behind
            self._outputs = self.function(xv, pv)
            self._key = key
        return self._outputs


class _SharedOutputs(ca.Callback):
    """A Function ``(x, p[, lam_f, lam_g]) -> outputs`` read from the cache.

    ``pick`` maps each output to the cached output's index.  With
    ``n_constraints`` given, the inputs are those of ``hess_lag`` and the
    single output is multiplied by ``lam_f`` (the Hessian of
    ``lam_f f + lam_g' g`` for a Gauss-Newton model that ignores ``g``).
    """

    def __init__(self, name: str, cache: _OnePointCache, pick: list[int],
                 names_out: list[str], n_constraints: int | None = None) -> None:
        ca.Callback.__init__(self)
        f = cache.function
        self._cache, self._pick = cache, pick
        self._by_lam_f = n_constraints is not None
        self._names_in = ["x", "p"] + (["lam_f", "lam_g"] if self._by_lam_f else [])
        self._sp_in = [f.sparsity_in(0), f.sparsity_in(1)]
        if n_constraints is not None:
            self._sp_in += [ca.Sparsity.dense(1, 1), ca.Sparsity.dense(n_constraints, 1)]
        self._sp_out = [f.sparsity_out(k) for k in pick]
        self._names_out = names_out
        self.construct(name, {})

    def get_n_in(self) -> int:
        return len(self._names_in)

    def get_n_out(self) -> int:
        return len(self._pick)

    def get_name_in(self, i: int) -> str:
        return self._names_in[i]

    def get_name_out(self, i: int) -> str:
        return self._names_out[i]

    def get_sparsity_in(self, i: int) -> ca.Sparsity:
        return self._sp_in[i]

    def get_sparsity_out(self, i: int) -> ca.Sparsity:
        return self._sp_out[i]

    def eval(self, args: list[Any]) -> list[ca.DM]:
        outputs = self._cache(args[0], args[1])
        picked = [outputs[k] for k in self._pick]
        if self._by_lam_f:
            picked = [float(args[2]) * picked[0]]
        return picked


def nlpsol_derivatives(function: ca.Function, n_constraints: int) -> dict[str, ca.Function]:
    """``nlpsol`` options ``grad_f``, ``jac_g`` and ``hess_lag`` from one Function.

    Parameters
    ----------
    function : casadi.Function
        ``(x, p) -> (f, grad_f, g, jac_g, triu(H))`` of the NLP: ``H`` the
        Hessian model of the objective (Gauss-Newton: the constraints'
        curvature is not in it).  ``grad_f`` must be dense (IPOPT's
        interface reads its nonzeros as the whole vector).
    n_constraints : int
        The length of ``g``.

    Returns
    -------
    dict
        The three options; together they evaluate ``function`` once per
        point (the cache holds the last point's outputs).
    """
    if not function.sparsity_out(1).is_dense():
        raise ValueError("nlpsol_derivatives: the gradient (output 1) must be dense; "
                         "wrap it in casadi.densify")
    cache = _OnePointCache(function)
    return {
        "grad_f": _SharedOutputs("nlp_grad_f", cache, [0, 1], ["f", "grad_f_x"]),
        "jac_g": _SharedOutputs("nlp_jac_g", cache, [2, 3], ["g", "jac_g_x"]),
        "hess_lag": _SharedOutputs("nlp_hess_l", cache, [4], ["hess_gamma_x_x"],
                                   n_constraints=n_constraints),
    }
