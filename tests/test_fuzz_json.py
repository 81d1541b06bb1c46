"""Fuzz: result files that are damaged, truncated, edited or full of non-finite numbers."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import picard_casadi as pc


@pytest.fixture(scope="module")
def result():
    prob = pc.problem("vdp", seed=0)
    res = prob.estimate("picard-gn", codegen=False)
    res.p_true = prob.p_true
    return res


def test_nonfinite_floats_round_trip_as_floats(result, tmp_path):
    res = pc.EstimationResult.from_dict(result.to_dict())
    res.history["objective"][0] = math.inf
    res.history["gap"][1] = -math.inf
    res.history["misfit"][2] = math.nan
    res.history["p"][0] = [math.nan, 1.0]
    res.p_std = np.array([np.inf, 0.1])
    res.continuity_gap = math.inf
    res.timings["extra"] = math.nan
    res.settings["options"]["lam_max"] = math.inf
    res.starts = [{"p0": [1.0, np.inf], "objective": math.nan, "success": False}]
    path = tmp_path / "r.json"
    res.to_json(path)
    text = path.read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON token {c}"))
    back = pc.EstimationResult.from_json(path)
    assert back.history["objective"][0] == math.inf and isinstance(back.history["objective"][0], float)
    assert back.history["gap"][1] == -math.inf
    assert math.isnan(back.history["misfit"][2]) and math.isnan(back.history["p"][0][0])
    assert back.p_std[0] == np.inf and back.continuity_gap == math.inf
    assert math.isnan(back.timings["extra"]) and back.settings["options"]["lam_max"] == math.inf
    assert back.starts[0]["p0"][1] == math.inf and math.isnan(back.starts[0]["objective"])
    assert back.settings["weights"] == res.settings["weights"]  # strings stay strings
    assert back.message == res.message


def test_round_trip_is_exact(result, tmp_path):
    result.to_json(tmp_path / "r.json")
    back = pc.EstimationResult.from_json(tmp_path / "r.json")
    assert np.array_equal(back.p, result.p) and back.history == result.history
    # the settings as JSON holds them, with non-finite numbers restored (the
    # bounds are infinite where a box is open)
    from picard_casadi.result import _restore

    assert np.array_equal(back.p_cov, result.p_cov) and back.settings == _restore(json.loads(
        json.dumps(result.to_dict()["settings"])))


def _damaged(result, tmp_path, how):
    text = result.to_json()
    d = json.loads(text)
    if how == "empty":
        text = ""
    elif how == "blank":
        text = "  \n"
    elif how == "truncated":
        text = text[: len(text) // 2]
    elif how == "garbage":
        text = "\x89PNG\r\n"
    elif how == "list":
        text = "[1, 2]"
    elif how.startswith("missing:"):
        del d[how.split(":")[1]]
        text = json.dumps(d)
    elif how.startswith("bad:"):
        key, value = how.split(":", 2)[1:]
        d[key] = json.loads(value)
        text = json.dumps(d)
    path = tmp_path / "r.json"
    path.write_text(text)
    return path


@pytest.mark.parametrize("how,pattern", [
    ("empty", r"result file '.*r.json' is empty"),
    ("blank", r"is empty"),
    ("truncated", r"result file '.*r.json' is not valid JSON: .* at line \d+, column \d+ "
                  r"\(the file may be truncated"),
    ("garbage", r"is not valid JSON"),
    ("list", r"expected a JSON object"),
    ("missing:p", r"missing field\(s\) \['p'\]"),
    ("missing:objective", r"missing field\(s\) \['objective'\]"),
    ("bad:p:\"abc\"", r"field 'p' is malformed"),
    ("bad:p:[[1, 2], [3]]", r"field 'p' is malformed"),
    ("bad:p:{\"a\": 1}", r"field 'p'"),
    ("bad:objective:\"much\"", r"field 'objective' is malformed"),
    ("bad:objective:null", r"field 'objective' is malformed"),
    ("bad:x0:5", r"field 'x0' is malformed"),
    ("bad:success:\"yes\"", r"field 'success' must be true or false"),
    ("bad:iterations:1.5", r"field 'iterations' must be an integer"),
    ("bad:history:[1]", r"field 'history' must be an object"),
    ("bad:format_version:99", r"format version 99 is newer"),
    ("bad:format_version:\"1\"", r"'format_version' must be an integer"),
])
def test_damaged_file_names_the_file_and_the_problem(result, tmp_path, how, pattern):
    path = _damaged(result, tmp_path, how)
    with pytest.raises(ValueError, match=pattern) as info:
        pc.EstimationResult.from_json(path)
    assert "r.json" in str(info.value)


def test_binary_file_is_named(tmp_path):
    path = tmp_path / "r.json"
    path.write_bytes(b"\xff\xfe\x00{")
    with pytest.raises(ValueError, match=r"result file '.*r.json' is not UTF-8"):
        pc.EstimationResult.from_json(path)


def test_json_text_problems_are_named_too():
    with pytest.raises(ValueError, match=r"result JSON text is not valid JSON"):
        pc.EstimationResult.from_json('{"p": [1, 2],')


def test_missing_file_is_an_oserror_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        pc.EstimationResult.from_json(tmp_path / "nope.json")


def test_to_json_is_atomic(result, tmp_path, monkeypatch):
    """A failure while writing leaves the old file and no temporary file."""
    path = tmp_path / "r.json"
    path.write_text("old")
    import picard_casadi.runtime.output_files as outputs

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outputs.os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="No space"):
        result.to_json(path)
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_another_models_result_is_refused_where_it_is_attached(result, tmp_path):
    # a tester loaded a vdp result with the Lotka-Volterra model: the loader
    # accepted it and predict() failed later ("'p' must be 4 finite numbers")
    path = tmp_path / "r.json"
    result.to_json(path)
    lv = pc.problem("lotka-volterra")
    with pytest.raises(ValueError, match=r"fitted with the parameters .*the model given has"):
        pc.EstimationResult.from_json(path, model=lv.model, experiments=lv.experiments)
    with pytest.raises(ValueError, match=r"`warm_start` is a result of another model"):
        pc.estimate(lv.model, lv.experiments, p0=[1, 1, 1, 1], warm_start=result)


def test_other_data_are_refused_where_the_result_is_attached(result, tmp_path):
    # a user attached the first 300 of 601 samples: the profile re-fitted them
    # beside the file's standard errors, silently
    path = tmp_path / "r.json"
    result.to_json(path)
    prob = pc.problem("vdp", seed=0)
    exp = prob.experiments[0]
    half = pc.Experiment(exp.t[: exp.t.size // 2], exp.y[: exp.t.size // 2], x0=exp.x0,
                         name=exp.name)
    with pytest.raises(ValueError, match=rf"fitted to {result.n_measurements} measured values; "
                                         rf"the experiments given hold \d+: pass the data"):
        pc.EstimationResult.from_json(path, model=prob.model, experiments=[half])
    back = pc.EstimationResult.from_json(path, model=prob.model, experiments=prob.experiments)
    assert back.predict(0).shape == exp.y.shape
