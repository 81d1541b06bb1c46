"""The collocation NLP's layout: its unknowns, and its data as NLP parameters.

The unknowns are ``w = [p / ps, vec(U_j / xs) for each interval j]``; the
data are NLP parameters (not constants of the graph), so that the generated
code does not depend on them: one column block per interval for each entry
of :func:`data_layout`, then the scales ``xs`` and ``ps``.  One interval's
functions (:func:`~picard_casadi.methods.ipopt.collocation_interval`, and its
derivatives in :mod:`~picard_casadi.methods.collocation_derivatives`) take
the arguments :func:`interval_symbols` names.
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from ..transcription.discretisation import Discretisation, to_map_layout

__all__ = ["data_layout", "collocation_parameters", "interval_data", "interval_symbols",
           "unscaled_unknowns"]


def data_layout(disc: Discretisation) -> list[tuple[str, int, int]]:
    """``(name, rows, columns per interval)`` of each piece of the data."""
    m = disc.model
    K, M = disc.K, disc.M
    return [("t0", 1, 1), ("h", 1, 1), ("Wn", m.nu, K), ("S", M, K), ("ts", 1, M),
            ("Ws", m.nu, M), ("Y", m.ny, M), ("Wt", m.ny, M)]


def collocation_parameters(disc: Discretisation, Wt: np.ndarray) -> np.ndarray:
    """The NLP's parameter vector: the data in :func:`data_layout`'s order.

    Parameters
    ----------
    Wt : ndarray (J, ny, M)
        Square-root data weights (zero where missing).
    """
    J = disc.n_intervals
    arrays = {"t0": disc.t0[None, :], "h": disc.h[None, :],
              "Wn": to_map_layout(disc.node_inputs), "S": to_map_layout(disc.sample_rows),
              "ts": to_map_layout(disc.sample_times[:, None, :]),
              "Ws": to_map_layout(disc.sample_inputs), "Y": to_map_layout(disc.y),
              "Wt": to_map_layout(Wt)}
    parts = []
    for name, rows, cols in data_layout(disc):
        a = np.asarray(arrays[name], float).reshape(rows, cols * J)
        parts.append(a.ravel(order="F"))
    return np.concatenate(parts)


def interval_data(disc: Discretisation, data: ca.MX) -> dict[str, ca.MX]:
    """Every interval's data, read from the NLP's parameter vector
    (:func:`collocation_parameters`): one column block per interval, named
    as in :func:`interval_symbols`."""
    pieces, start = {}, 0
    for name, rows, cols in data_layout(disc):
        n = rows * cols * disc.n_intervals
        pieces[name] = ca.reshape(data[start:start + n], rows, cols * disc.n_intervals)
        start += n
    return pieces


def interval_symbols(disc: Discretisation) -> dict[str, ca.MX]:
    """One interval's arguments, by name: node values ``U`` (``nx x K``,
    unscaled), ``p``, the interval's data (:func:`data_layout`) and the
    states' scales ``xs``."""
    m = disc.model
    K, M = disc.K, disc.M
    return {"U": ca.MX.sym("U", m.nx, K), "p": ca.MX.sym("p", m.np),
            "t0": ca.MX.sym("t0"), "h": ca.MX.sym("h"),
            "Wn": ca.MX.sym("Wn", m.nu, K), "S": ca.MX.sym("S", M, K),
            "ts": ca.MX.sym("ts", 1, M), "Ws": ca.MX.sym("Ws", m.nu, M),
            "Y": ca.MX.sym("Y", m.ny, M), "Wt": ca.MX.sym("Wt", m.ny, M),
            "xs": ca.MX.sym("xs", m.nx)}


def unscaled_unknowns(disc: Discretisation, w: ca.MX, xs: ca.MX | ca.DM, ps: ca.MX | ca.DM
                      ) -> tuple[ca.MX, ca.MX]:
    """``(U, p)`` of the unknowns ``w``: every interval's node values side by
    side (``nx x J K``) and the parameters, unscaled."""
    J, K, nx, np_ = disc.n_intervals, disc.K, disc.model.nx, disc.model.np
    return (ca.reshape(w[np_:], nx, J * K) * ca.repmat(xs, 1, J * K), w[:np_] * ps)
