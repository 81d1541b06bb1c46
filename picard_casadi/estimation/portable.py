"""Results that cross a process boundary (:mod:`picard_casadi.runtime.executors`).

A result's ``_predictor`` and discretisation close over CasADi functions and
do not pickle: :func:`portable` leaves them out and keeps the mesh;
:func:`restore` re-attaches the caller's own model and experiments on the
same mesh, so a result from a worker predicts, warm-starts and profiles like
one computed here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..analysis.prediction_band import sensitivity_source
from ..transcription.discretisation import Discretisation
from ..transcription.predict import simulation_predictor

__all__ = ["Portable", "portable", "restore"]


@dataclass
class Portable:
    """A result without its attached model, and the mesh to re-attach it on.

    Attributes
    ----------
    result : EstimationResult
        With ``_predictor`` and ``_disc`` removed (``_X``, ``_U`` kept).
    mesh : tuple or None
        ``(T, nodes, scheme, boundaries)`` of the result's final mesh.
    model : Model or None
        What the methods solved on that mesh, which need not be the caller's:
        a log-normal output's model is its logarithm (the caller's raw one
        re-attached made a profile re-fit another problem: an SEIR's
        log10(rho) -1.64 for -0.71, no warning).  None (a result without a
        mesh): the caller's.
    data : list of (y, sigma) or None
        Each experiment's data as the methods solved them (on a log-normal
        output's scale); the caller's experiments carry everything else
        (inputs that only cloudpickle sends, such as lambdas).
    """

    result: Any
    mesh: tuple[float, int, str, list[np.ndarray]] | None
    model: Any = None
    data: list[tuple[np.ndarray, np.ndarray | None]] | None = None


def portable(result: Any) -> Portable:
    """What of ``result`` can cross a process boundary (see :func:`restore`)."""
    disc = result._disc
    mesh = None if disc is None else (float(disc.T), int(disc.nodes), str(disc.scheme),
                                      [np.asarray(b, float).copy() for b in disc.boundaries])
    return Portable(replace(result, _predictor=None, _disc=None, _sensitivities=None,
                            _model=None), mesh,
                    None if disc is None else disc.model,
                    None if disc is None else [(e.y, e.sigma) for e in disc.experiments])


def restore(item: Portable, model: Any, experiments: list[Any]) -> Any:
    """The result of ``item`` with the caller's model and experiments attached
    (the model and data it was solved with, :attr:`Portable.model` and
    :attr:`Portable.data`, where it carries them).

    Its discretisation is rebuilt on the same mesh, so :meth:`predict`
    (both sources), ``warm_start`` and :func:`~picard_casadi.profile` work.
    """
    res = item.result
    res._model = model
    if item.model is not None and item.data is not None and len(item.data) == len(experiments):
        model = item.model
        experiments = [e.replaced(y=y, sigma=sigma) for e, (y, sigma) in
                       zip(experiments, item.data)]
    if res._statement is None:  # (a restated fit's inner vectors are not kept)
        res._sensitivities = sensitivity_source(model, list(experiments))
    if item.mesh is None or res._X is None:
        res._predictor = simulation_predictor(model, list(experiments))
        return res
    T, nodes, scheme, boundaries = item.mesh
    disc = Discretisation(model, list(experiments), T, nodes, scheme, boundaries)
    res._disc = disc
    res._predictor = simulation_predictor(model, list(experiments), disc, res._X, res._U)
    return res
