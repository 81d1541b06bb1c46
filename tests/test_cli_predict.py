"""``picard-casadi predict`` (a fit's outputs for new runs) and ``fit`` of several CSV files.

A one-state model driven by an input, fitted on one CSV by the command line
(code generation off); the new runs are other input records, with and
without their outputs measured.
"""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest

import picard_casadi as pc

from conftest import cli_main as _main

DRIVEN = '''
import casadi as ca
import picard_casadi as pc

P0 = [0.5, 0.5]
{extra}

def build_model():
    x, u = ca.SX.sym("x"), ca.SX.sym("u")
    k, b = ca.SX.sym("k"), ca.SX.sym("b")
    return pc.Model(x=x, p=ca.vertcat(k, b), u=u, rhs=-k * x + b * u, name="driven",
                    x_names=["x"], p_names=["k", "b"], u_names=["u"], y_names=["x"])
'''
TRUTH = [1.5, 2.0]
NOISE = 0.01


def _model(extra: str = ""):
    ns: dict = {}
    exec(DRIVEN.format(extra=extra), ns)
    return ns["build_model"]()


def _record(path, name, x0, u_of_t, seed, t_end=6.0, n=61, measured=True, column=True):
    """A CSV of one run: time, the output (noisy; left out where not ``measured``),
    the input; with a column 'experiment' where ``column``."""
    model = _model()
    t = np.linspace(0.0, t_end, n)
    u = u_of_t(t)
    X = pc.simulate(model, [x0], TRUTH, t, u=u[:, None], u_interpolation="linear")
    y = X[:, 0] + NOISE * np.random.default_rng(seed).standard_normal(n)
    head = (["experiment"] if column else []) + ["time"] + (["x"] if measured else []) + ["u"]
    rows = [",".join(head)]
    for i in range(n):
        cells = ([name] if column else []) + [f"{t[i]:.6g}"]
        cells += ([f"{y[i]:.10g}"] if measured else []) + [f"{u[i]:.10g}"]
        rows.append(",".join(cells))
    path.write_text("\n".join(rows) + "\n")
    return t, u, X[:, 0]


@pytest.fixture
def fitted(here, capsys):
    """The model file and a fit of it on two runs (result in ``fit/``)."""
    (here / "model.py").write_text(DRIVEN.format(extra=""))
    _record(here / "a.csv", "a", 0.0, lambda t: np.sin(t), seed=1, column=False)
    _record(here / "b.csv", "b", 1.0, lambda t: (t > 2).astype(float), seed=2, column=False)
    code, out, err = _main(capsys, "fit", "model.py", "a.csv", "b.csv", "--out", "fit",
                           "--codegen", "off", "--quiet")
    assert code == 0, err
    return here


def _table(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_fit_of_several_files_names_each_file_s_experiment(fitted):
    saved = json.loads((fitted / "fit" / "result.json").read_text())
    assert saved["experiment_names"] == ["a", "b"]
    assert np.allclose(saved["p"], TRUTH, rtol=0.05)


def test_two_files_with_an_experiment_of_one_name_are_refused(here, capsys):
    (here / "model.py").write_text(DRIVEN.format(extra=""))
    _record(here / "a.csv", "run1", 0.0, np.sin, seed=1)
    _record(here / "b.csv", "run1", 0.0, np.cos, seed=2)
    code, out, err = _main(capsys, "fit", "model.py", "a.csv", "b.csv", "--codegen", "off")
    assert code == 2
    assert "experiment 'run1' is in 'a.csv' and in 'b.csv'" in err
    code, out, err = _main(capsys, "fit", "model.py", "a.csv", "./a.csv", "--codegen", "off")
    assert code == 2 and "DATA: './a.csv' is given twice (as 'a.csv' too)" in err


def test_predict_a_new_input_record_with_its_band(fitted, capsys):
    t, u, truth = _record(fitted / "new.csv", "new", 0.5, lambda t: np.cos(2 * t), seed=3,
                          measured=False)
    code, out, err = _main(capsys, "predict", "fit", "model.py", "new.csv", "--x0", "x=0.5",
                           "--out", "pred")
    assert code == 0, err
    assert "new: x=0.5 (--x0)" in out
    rows = _table(fitted / "pred" / "prediction.csv")
    assert list(rows[0]) == ["experiment", "time", "x", "x_lower", "x_upper"]
    assert [r["experiment"] for r in rows] == ["new"] * t.size
    y = np.array([float(r["x"]) for r in rows])
    lo, hi = (np.array([float(r[c]) for r in rows]) for c in ("x_lower", "x_upper"))
    # the fitted model's simulation of this run, and the truth inside its band
    res = pc.EstimationResult.from_json(fitted / "fit" / "result.json")
    sim = pc.simulate(_model(), [0.5], res.p, t, u=u[:, None], u_interpolation="linear")
    assert np.allclose(y, sim[:, 0], atol=1e-6)
    assert np.all(lo <= y) and np.all(y <= hi) and np.all(hi[1:] > lo[1:])
    assert np.mean((truth >= lo) & (truth <= hi)) > 0.9
    assert (fitted / "pred" / "prediction.png").stat().st_size > 10_000


def test_predict_compares_with_the_run_s_measurements(fitted, capsys):
    _record(fitted / "new.csv", "new", 2.0, lambda t: 0.5 + 0 * t, seed=4)
    code, out, err = _main(capsys, "predict", "fit/result.json", "model.py", "new.csv",
                           "--noise", "--out", "pred")
    assert code == 0, err
    assert "new: x=" in out and "(data)" in out  # x0 from the first row
    line = next(ln for ln in out.splitlines() if ln.startswith("  new: x: 61 measured"))
    rms = float(line.split("rms error ")[1].split()[0])
    assert rms < 2 * NOISE
    inside = float(line.split("; ")[-1].split("%")[0])
    assert inside > 80
    rows = _table(fitted / "pred" / "prediction.csv")
    assert "x_measured" in rows[0]


def test_predict_errors_are_one_line_naming_what_to_give(fitted, capsys):
    _record(fitted / "new.csv", "new", 0.5, np.cos, seed=3, measured=False)
    code, out, err = _main(capsys, "predict", "fit", "model.py", "new.csv")
    assert code == 2
    assert "predict: the initial value of state 'x' in experiment 'new'" in err
    code, out, err = _main(capsys, "predict", "nofit", "model.py", "new.csv", "--x0", "x=0")
    assert code == 2 and "RESULT: no such file 'nofit'" in err
    (fitted / "other.py").write_text(DRIVEN.format(extra="").replace('"b"]', '"gain"]'))
    code, out, err = _main(capsys, "predict", "fit", "other.py", "new.csv", "--x0", "x=0")
    assert code == 2 and "was fitted with the parameters ['k', 'b']" in err
    with pytest.raises(SystemExit) as stop:  # argparse's own
        _main(capsys, "predict", "fit", "model.py", "new.csv", "--level", "95")
    assert stop.value.code == 2 and "probability in (0, 1), got '95'" in capsys.readouterr().err


def test_predict_from_a_fit_that_failed_says_so(fitted, capsys):
    saved = json.loads((fitted / "fit" / "result.json").read_text())
    saved["success"], saved["status"] = False, "max_iter"
    (fitted / "failed.json").write_text(json.dumps(saved))
    _record(fitted / "new.csv", "new", 0.5, np.cos, seed=3, measured=False)
    code, out, err = _main(capsys, "predict", "failed.json", "model.py", "new.csv",
                           "--x0", "x=0.5", "--out", "pred")
    assert code == 3
    assert "warning: the fit did not converge" in err
    assert (fitted / "pred" / "prediction.csv").exists()


@pytest.fixture
def fitted_per_run(here, capsys):
    """The model file and a fit of it on two runs with ``b`` per run (in ``fit/``)."""
    (here / "model.py").write_text(DRIVEN.format(extra=""))
    _record(here / "a.csv", "a", 0.0, np.sin, seed=1, column=False)
    _record(here / "b.csv", "b", 1.0, np.cos, seed=2, column=False)
    code, out, err = _main(capsys, "fit", "model.py", "a.csv", "b.csv", "--per-experiment", "b",
                           "--out", "fit", "--codegen", "off", "--quiet")
    assert code == 0, err
    return here


def test_a_parameter_fitted_per_experiment_is_asked_for_by_conditions(fitted_per_run, capsys):
    here = fitted_per_run
    t, u, _ = _record(here / "new.csv", "new", 0.5, np.cos, seed=3, measured=False)
    code, out, err = _main(capsys, "predict", "fit", "model.py", "new.csv", "--x0", "x=0.5")
    assert code == 2
    assert "run 'new' needs a value of b" in err and "'b[a]', 'b[b]'" in err
    (here / "c.csv").write_text("experiment,b\nnew,b[b]\n")
    code, out, err = _main(capsys, "predict", "fit", "model.py", "new.csv", "--x0", "x=0.5",
                           "--conditions", "c.csv", "--out", "pred")
    assert code == 0, err
    saved = json.loads((here / "fit" / "result.json").read_text())
    k, b_b = saved["p"][0], saved["p"][2]
    y = np.array([float(r["x"]) for r in _table(here / "pred" / "prediction.csv")])
    sim = pc.simulate(_model(), [0.5], [k, b_b], t, u=u[:, None], u_interpolation="linear")
    assert np.allclose(y, sim[:, 0], atol=1e-6)


def test_a_log_normal_output_is_predicted_on_its_own_scale_with_a_log_axis(here, capsys,
                                                                           monkeypatch):
    import picard_casadi.io.plotting as plotting

    drawn = []
    real = plotting.plot_prediction
    monkeypatch.setattr(plotting, "plot_prediction",
                        lambda *a, **k: drawn.append(real(*a, **k)) or drawn[-1])
    (here / "model.py").write_text(DRIVEN.format(extra=""))
    _record(here / "a.csv", "a", 1.0, lambda t: 1 + np.sin(t), seed=1, column=False)
    code, out, err = _main(capsys, "fit", "model.py", "a.csv", "--noise", "log-normal",
                           "--out", "fit", "--codegen", "off", "--quiet")
    assert code == 0, err
    t, u, _ = _record(here / "new.csv", "new", 0.5, lambda t: 2 + np.cos(t), seed=3,
                      measured=False)
    code, out, err = _main(capsys, "predict", "fit", "model.py", "new.csv", "--x0", "x=0.5",
                           "--out", "pred")
    assert code == 0, err
    y = np.array([float(r["x"]) for r in _table(here / "pred" / "prediction.csv")])
    res = pc.EstimationResult.from_json(here / "fit" / "result.json")
    sim = pc.simulate(_model(), [0.5], res.p, t, u=u[:, None], u_interpolation="linear")
    assert np.allclose(y, sim[:, 0], rtol=1e-6)  # the output itself, not its logarithm
    assert [ax.get_yscale() for ax in drawn[0].axes if ax.get_visible()] == ["log"]


def test_per_experiment_takes_a_comma_list(here, capsys):
    (here / "model.py").write_text(DRIVEN.format(extra=""))
    _record(here / "a.csv", "a", 0.0, np.sin, seed=1, column=False)
    _record(here / "b.csv", "b", 1.0, np.cos, seed=2, column=False)
    code, out, err = _main(capsys, "fit", "model.py", "a.csv", "b.csv", "--per-experiment",
                           "k,b", "--out", "fit", "--codegen", "off", "--quiet")
    assert code == 0, err
    saved = json.loads((here / "fit" / "result.json").read_text())
    assert sorted(saved["p_names"]) == ["b[a]", "b[b]", "k[a]", "k[b]"]


def test_a_parameter_per_experiment_is_estimated_for_the_new_run(fitted_per_run, capsys):
    """A ship's new maneuver has its own rudder bias: predict could only take
    it from --conditions (with 0, heading rms 0.131 rad against 0.0034)."""
    here = fitted_per_run
    _record(here / "new.csv", "new", 0.5, lambda t: 1.0 + np.sin(2 * t), seed=3)
    (here / "c.csv").write_text("experiment,b\nnew,0\n")
    code, out, err = _main(capsys, "predict", "fit", "model.py", "new.csv", "--conditions",
                           "c.csv", "--out", "zero")
    assert code == 0, err  # (a prediction, not a failure) but said:
    assert "note: run 'new' is off by more than 5 times the fit's noise level in x (" in err
    assert "--estimate NAME" in err
    code, out, err = _main(capsys, "predict", "fit", "model.py", "new.csv", "--estimate", "b",
                           "--out", "pred")
    assert code == 0, err
    assert "is off by more than" not in err
    assert "b (estimated from each run's measurements, the others held" in out
    b = float(out.split("new: b=")[1].split()[0])
    assert abs(b - TRUTH[1]) < 0.05 * TRUTH[1]
    rms = float(re.search(r"new: x: \d+ measured, rms error ([\d.e-]+)", out).group(1))
    assert rms < 2 * NOISE
    code, out, err = _main(capsys, "predict", "fit", "model.py", "new.csv", "--estimate", "c")
    assert code == 2 and "--estimate: 'c' is not a parameter of the model" in err


def test_estimate_x0_takes_each_run_s_start_from_its_measurements(fitted, capsys):
    """A validation run's first sample is noisy (a flight test's q 8 noise levels
    off): --estimate-x0 fits the run's initial states, the parameters held."""
    _record(fitted / "new.csv", "new", 2.0, lambda t: 0.5 + 0 * t, seed=4)
    rows = (fitted / "new.csv").read_text().splitlines()
    cells = rows[1].split(",")
    cells[2] = "2.1"  # the first reading 10 noise levels off
    rows[1] = ",".join(cells)
    (fitted / "new.csv").write_text("\n".join(rows) + "\n")
    code, out, err = _main(capsys, "predict", "fit", "model.py", "new.csv", "--out", "known")
    assert code == 0 and "new: x=2.1 (data)" in out
    code, out, err = _main(capsys, "predict", "fit", "model.py", "new.csv", "--estimate-x0",
                           "--out", "fitted")
    assert code == 0, err
    assert "initial states (estimated from each run's measurements" in out
    x0 = float(out.split("new: x=")[1].split()[0])
    assert abs(x0 - 2.0) < 0.3 * abs(2.1 - 2.0)
    y = np.array([float(r["x"]) for r in _table(fitted / "fitted" / "prediction.csv")])
    assert abs(y[0] - x0) < 1e-5  # (x0 as printed, 6 digits)
    _record(fitted / "bare.csv", "bare", 2.0, np.cos, seed=3, measured=False)
    code, out, err = _main(capsys, "predict", "fit", "model.py", "bare.csv", "--estimate-x0",
                           "--x0", "x=1")
    assert code == 2 and "--estimate-x0: run 'bare' measures no output" in err


def test_compare_takes_several_data_files(here, capsys):
    (here / "model.py").write_text(DRIVEN.format(extra=""))
    _record(here / "a.csv", "a", 0.0, np.sin, seed=1, column=False)
    _record(here / "b.csv", "b", 1.0, np.cos, seed=2, column=False)
    code, out, err = _main(capsys, "compare", "--model", "model.py", "--data", "a.csv",
                           "--data", "b.csv", "--methods", "picard-gn", "--codegen", "off",
                           "--out", "cmp")
    assert code == 0, err
    found = re.search(r"\| ([\d.]+), ([\d.]+) \|", (here / "cmp" / "table.md").read_text())
    assert np.allclose([float(found[1]), float(found[2])], TRUTH, rtol=0.05)  # both runs


def test_an_initial_state_from_a_parameter_of_the_conditions_is_predicted(here, capsys):
    """A kineticist's A(0) = A0, A0 per run from --conditions: predict held
    it at 0 (A = 0 at every time, band [0, 0], exit 0)."""
    (here / "model.py").write_text(
        "import casadi as ca\nimport picard_casadi as pc\nP0 = [0.5, 1.0]\n"
        "def build_model():\n    x, k, a0 = ca.SX.sym('x'), ca.SX.sym('k'), ca.SX.sym('A0')\n"
        "    return pc.Model(x=x, p=ca.vertcat(k, a0), rhs=-k * x, x0=[a0], y_names=['x'],\n"
        "                    x_names=['x'], p_names=['k', 'A0'])\n")
    t = np.linspace(0.0, 3.0, 16)
    rows = ["experiment,time,x"] + [f"{n},{ti:.6g},{a * np.exp(-0.7 * ti):.8g}"
                                    for n, a in (("r1", 1.0), ("r2", 2.0)) for ti in t]
    (here / "data.csv").write_text("\n".join(rows) + "\n")
    (here / "c.csv").write_text("experiment,A0\nr1,1.0\nr2,2.0\n")
    (here / "n.csv").write_text("experiment,A0\nnew,3.0\n")
    code, out, err = _main(capsys, "fit", "model.py", "data.csv", "--conditions", "c.csv",
                           "--out", "fit", "--codegen", "off", "--quiet")
    assert code in (0, 3), err
    (here / "new.csv").write_text("experiment,time\n" + "".join(f"new,{ti:.6g}\n" for ti in t))
    code, out, err = _main(capsys, "predict", "fit", "model.py", "new.csv", "--conditions",
                           "n.csv", "--out", "pred")
    assert code in (0, 3), err
    y = np.array([float(r["x"]) for r in _table(here / "pred" / "prediction.csv")])
    assert np.allclose(y, 3.0 * np.exp(-0.7 * t), rtol=1e-4)
