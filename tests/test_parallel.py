"""Executors: pickling rules, parallel multistart equal to serial, Dask, worker caches."""

from __future__ import annotations

import pickle

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc


# ---------------------------------------------------------------------- pickling
@pytest.mark.parametrize("name", ["vdp", "cmg", "fa18-roll-ail"])
def test_models_and_experiments_of_the_registry_pickle(name):
    """A model travels as one casadi.Function: the copy's functions serialise
    exactly as the original's (same code-cache entries, same numbers)."""
    prob = pc.problem(name)
    model, exps = pickle.loads(pickle.dumps((prob.model, prob.experiments)))
    assert model.f.serialize() == prob.model.f.serialize()
    assert model.g.serialize() == prob.model.g.serialize()
    assert model.p_names == prob.model.p_names
    assert model.output_state_index == prob.model.output_state_index
    for a, b in zip(exps, prob.experiments):
        assert np.array_equal(a.inputs(a.t, model.nu), b.inputs(b.t, model.nu))
        assert np.array_equal(a.y, b.y, equal_nan=True)
