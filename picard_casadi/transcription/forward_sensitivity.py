"""A model's forward sensitivities written as states of one larger ODE.

Single shooting needs the Jacobian of every sampled state with respect to
the parameters and the free initial states.  CasADi's derivative of a chain
of CVODES calls builds that Jacobian by forward sensitivities it derives
from each integrator, one set of directions at a time.  Written out instead
as states, ``S = dx/d(p, x0[columns])`` with

    S' = f_x S + [f_p, 0],        S(t0) = [0, I[:, columns]],

the states and their sensitivities are one ODE of ``nx (1 + np + len(columns))``
states whose right-hand side is a single SX expression, integrated by the
same CVODES chain as the states themselves
(:func:`~picard_casadi.transcription.interval_integration.chained_interval_states`
with ``model=``), each sensitivity under the same error control, as AMICI
integrates them.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import casadi as ca
import numpy as np

from ..model import Model
from .discretisation import Discretisation
from .interval_integration import chained_interval_states

__all__ = ["sensitivity_model", "initial_sensitivities", "output_sensitivities",
           "chained_output_sensitivities"]

_MODELS: weakref.WeakKeyDictionary[Model, dict[tuple[int, ...], Model]] = \
    weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def sensitivity_model(model: Model, x0_columns: tuple[int, ...] | None = None) -> Model:
    """The model whose states are ``x`` and ``vec(S)``, ``S = dx/d(p, x0[x0_columns])``.

    ``S`` is ``nx x (np + len(x0_columns))``, stacked column by column after
    ``x``: first the parameters' columns, then the initial states'
    (``x0_columns``, every state by default).  Start it at
    :func:`initial_sensitivities`.  Built once per model and columns in this
    process (the integrators are cached by model object).

    Parameters
    ----------
    model : Model
        A model without delays.
    x0_columns : tuple of int, optional
        The initial states whose sensitivities are wanted (the free ones).
    """
    columns = tuple(range(model.nx)) if x0_columns is None else tuple(int(i) for i in x0_columns)
    with _LOCK:
        found = _MODELS.get(model, {}).get(columns)
    if found is not None:
        return found
    if model.has_delays:
        raise ValueError("sensitivity_model: a model with delays has no sensitivity ODE here")
    nx, np_ = model.nx, model.np
    S = ca.SX.sym("S", nx, np_ + len(columns))
    rhs = model.rhs
    f_x = ca.jacobian(rhs, model.x)
    f_p = ca.jacobian(rhs, model.p)
    dS = ca.mtimes(f_x, S) + ca.horzcat(f_p, ca.SX(nx, len(columns)))
    augmented = Model(x=ca.vertcat(model.x, ca.vec(S)), p=model.p, u=model.u, t=model.t,
                      rhs=ca.vertcat(rhs, ca.vec(dS)), name=f"{model.name}_sensitivities")
    with _LOCK:
        return _MODELS.setdefault(model, {}).setdefault(columns, augmented)


def initial_sensitivities(model: Model, x0_columns: tuple[int, ...] | None = None) -> np.ndarray:
    """``vec([0, I[:, x0_columns]])``: the sensitivities at the initial time."""
    columns = list(range(model.nx)) if x0_columns is None else list(x0_columns)
    S0 = np.zeros((model.nx, model.np + len(columns)))
    S0[columns, model.np + np.arange(len(columns))] = 1.0
    return S0.ravel(order="F")


def output_sensitivities(model: Model, x0_columns: tuple[int, ...] | None = None
                         ) -> ca.Function:
    """``(t, z, p, u) -> (y, dy)``: the outputs at the sensitivity model's state
    ``z = (x, vec(S))`` and their derivatives ``g_x S + [g_p, 0]``
    (``ny x (np + len(x0_columns))``)."""
    columns = tuple(range(model.nx)) if x0_columns is None else tuple(x0_columns)
    nx, np_ = model.nx, model.np
    z = ca.SX.sym("z", nx * (1 + np_ + len(columns)))
    x, S = z[:nx], ca.reshape(z[nx:], nx, np_ + len(columns))
    y = model.g(model.t, x, model.p, model.u)
    derivatives = ca.Function("g_derivatives", [model.t, model.x, model.p, model.u],
                              [ca.jacobian(model.y, model.x), ca.jacobian(model.y, model.p)])
    g_x, g_p = derivatives(model.t, x, model.p, model.u)
    dy = ca.mtimes(g_x, S) + ca.horzcat(g_p, ca.SX(model.ny, len(columns)))
    return ca.Function("output_sensitivities", [model.t, z, model.p, model.u], [y, dy],
                       ["t", "z", "p", "u"], ["y", "dy"])


def chained_output_sensitivities(disc: Discretisation, ts: Any, Ws: Any, rtol: float,
                                 atol: float, max_steps: int, x0_columns: tuple[int, ...],
                                 method: str = "bdf") -> ca.Function:
    """Single shooting on the mesh with the outputs' sensitivities.

    ``(Z0 (nz, E), p) -> (G (ny, M J), dG (ny, M J nc))``: every experiment
    integrated from its initial state ``Z0`` (the states, then
    :func:`initial_sensitivities`) through its intervals by CVODES
    (:func:`~picard_casadi.transcription.interval_integration.chained_interval_states`
    with :func:`sensitivity_model`), and the outputs at every sample slot
    (slot ``c`` in interval ``c // M``) with their derivatives in ``(p,
    x0[x0_columns])``, ``nc = np + len(x0_columns)`` columns per slot.
    ``ts``, ``Ws``: the slots' times and inputs (the transcription's
    ``_data_common``).  An MX function.
    """
    m = disc.model
    aug = sensitivity_model(m, x0_columns)
    chain = chained_interval_states(disc, rtol, atol, max_steps, method, model=aug)
    Z0 = ca.MX.sym("Z0", aug.nx, len(disc.intervals_of))
    p = ca.MX.sym("p", m.np)
    slots = disc.M * disc.n_intervals
    G, dG = output_sensitivities(m, x0_columns).map(slots)(
        ts, chain(Z0, p)[0], ca.repmat(p, 1, slots), Ws)
    return ca.Function("chained_output_sensitivities", [Z0, p], [G, dG],
                       ["Z0", "p"], ["G", "dG"])
