"""The command line, driven in subprocesses."""

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import picard_casadi as pc

from conftest import OSCILLATOR_MODEL_FILE

CLI = [sys.executable, "-m", "picard_casadi"]

MODEL_FILE = OSCILLATOR_MODEL_FILE


def run(args, cwd, env_extra=None):
    env = dict(os.environ)
    env.update(env_extra or {})
    return subprocess.run(CLI + args, cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=600)


@pytest.fixture
def cache_env(tmp_path):
    return {"PICARD_CASADI_CACHE": str(tmp_path / "cache")}


def test_help_for_every_command(tmp_path):
    for args in ([], ["problems"], ["run"], ["fit"], ["compare"]):
        out = run(args + ["--help"], tmp_path)
        assert out.returncode == 0, out.stderr
        assert "usage: picard-casadi" in out.stdout
    out = run(["--help"], tmp_path)
    for status in ("0 done", "1 not converged", "2 bad arguments", "3 converged but flagged",
                   "130 interrupted", "143"):
        assert status in " ".join(out.stdout.split()), status
    out = run(["run", "--help"], tmp_path)
    for option in ("--method", "--seed", "--noise-std", "--T", "--n", "--lam", "--out"):
        assert option in out.stdout


def test_problems_lists_the_registry(tmp_path):
    out = run(["problems"], tmp_path)
    assert out.returncode == 0
    from picard_casadi.studies.registry import _BUILTIN

    for name in _BUILTIN:  # not pc.problems(): other tests register problems in-process
        assert name in out.stdout


def test_run_vdp_writes_the_three_files_and_matches_the_library(tmp_path, cache_env):
    out = run(["run", "vdp", "--out", "res", "--codegen", "off"], tmp_path, cache_env)
    assert out.returncode == 0, out.stderr + out.stdout
    folder = tmp_path / "res"
    for name in ("result.json", "fit.png", "convergence.png"):
        assert (folder / name).is_file() and (folder / name).stat().st_size > 0
    saved = json.loads((folder / "result.json").read_text())
    prob = pc.problem("vdp", seed=0)
    lib = pc.estimate(prob.model, prob.experiments, prob.p0, "picard-gn",
                      p_bounds=prob.p_bounds, codegen=False, **prob.options)
    assert np.allclose(saved["p"], lib.p, rtol=1e-10, atol=0)
    loaded = pc.EstimationResult.from_json(folder / "result.json")
    assert np.array_equal(loaded.p, np.asarray(saved["p"]))
    assert loaded.success and loaded.iterations == lib.iterations
    assert "iter" in out.stdout and "std. error" in out.stdout


def _write_csv(path, rows, header="experiment,time,pos,force"):
    lines = [header] + [",".join(str(v) for v in r) for r in rows]
    path.write_text("\n".join(lines) + "\n")


def test_fit_recovers_the_parameters_from_a_csv(tmp_path, cache_env):
    (tmp_path / "model.py").write_text(MODEL_FILE)
    spec = {}
    exec(MODEL_FILE, spec)
    model = spec["build_model"]()
    rows = []
    for name, x0 in (("a", [1.0, 0.0]), ("b", [-0.5, 1.0])):
        t = np.linspace(0, 6, 61)
        force = lambda s: [np.sin(2 * s)]  # noqa: E731
        X = pc.simulate(model, x0, [2.0, 0.4], t, force)
        y = X[:, 0] + np.random.default_rng(1).normal(0, 0.002, t.size)
        for k in range(t.size):
            cell = "" if k % 7 == 3 else f"{y[k]:.10g}"  # some missing values
            rows.append((name, f"{t[k]:.10g}", cell, f"{np.sin(2 * t[k]):.10g}"))
    _write_csv(tmp_path / "data.csv", rows)
    out = run(["fit", "model.py", "data.csv", "--x0", "0.5,0.5", "--T", "0.5", "--out", "fit",
               "--codegen", "off"], tmp_path, cache_env)
    assert out.returncode == 0, out.stderr + out.stdout
    saved = json.loads((tmp_path / "fit" / "result.json").read_text())
    assert np.allclose(saved["p"], [2.0, 0.4], rtol=0.02)
    for name in ("fit.png", "convergence.png"):
        assert (tmp_path / "fit" / name).is_file()


@pytest.mark.parametrize("case,expect", [
    ("text", r"line 3: column 'pos' holds 'abc', not a number"),
    ("column", r"line 1: unknown column\(s\) \['exp'\]"),
    ("missing", r"line 3: column 'pos' holds 'NA', not a number; a missing value is an empty "
                r"cell \(or NaN\)"),
    ("t", r"unknown column\(s\) \['t'\].*\(the times' column is named 'time': 't' -> "
          r"'time'\)"),
    ("times", r"line 5: time 0.1 of experiment 'a' comes before 0.2 \(line 4\)"),
    ("input", r"line 3: column 'force' holds 'NaN'; it cannot be missing"),
    # (the experiment's rows, counted from 0, named as the file's lines)
    ("step", r"`u` differs between the replicates at t = 0.2 \(lines 4 and 5\)"),
    ("output", r"line 1: missing column\(s\) \['pos'\] \(an output not measured is a "
               r"column of empty cells: add 'pos' to the header and leave it empty\)"),
])
def test_malformed_csv_names_the_line(tmp_path, case, expect):
    import re

    (tmp_path / "model.py").write_text(MODEL_FILE)
    header = "experiment,time,pos,force"
    rows = [("a", 0.0, 1.0, 0.0), ("a", 0.1, 0.9, 0.1), ("a", 0.2, 0.8, 0.2)]
    if case == "text":
        rows[1] = ("a", 0.1, "abc", 0.1)
    elif case == "column":
        header = "exp,time,pos,force"
    elif case == "missing":
        rows[1] = ("a", 0.1, "NA", 0.1)
    elif case == "t":
        header = "experiment,t,pos,force"
    elif case == "times":
        rows.append(("a", 0.1, 0.7, 0.3))
    elif case == "input":
        rows[1] = ("a", 0.1, 0.9, "NaN")
    elif case == "step":
        rows.append(("a", 0.2, 0.8, 0.5))
    elif case == "output":
        header = "experiment,time,force"
        rows = [(e, t, u) for e, t, _, u in rows]
    _write_csv(tmp_path / "bad.csv", rows, header)
    out = run(["fit", "model.py", "bad.csv", "--p0", "1,1"], tmp_path)
    assert out.returncode != 0
    assert re.search(expect, out.stderr), out.stderr


def test_bad_arguments_are_named(tmp_path):
    out = run(["run", "no-such-problem"], tmp_path)
    assert out.returncode != 0 and "unknown problem 'no-such-problem'" in out.stderr
    out = run(["run", "vdp", "--method", "newton"], tmp_path)
    assert out.returncode != 0 and "invalid choice: 'newton'" in out.stderr
    (tmp_path / "model.py").write_text(MODEL_FILE)
    (tmp_path / "d.csv").write_text("experiment,time,pos,force\na,0,1,0\na,1,1,0\n")
    out = run(["fit", "model.py", "d.csv", "--p0", "1,2,3"], tmp_path)
    assert out.returncode != 0 and "--p0: expected 2 numbers, got 3" in out.stderr


def test_negative_starting_values_and_advice_in_the_programs_own_flags():
    # "--p0 -1,-5,-2" ended in argparse's "expected one argument" (an aircraft's
    # damping derivatives are negative); the advice came as Python keywords
    from picard_casadi.cli.commands import GUESS_CHOICES, build_parser
    from picard_casadi.cli.parser_types import in_cli_terms, joined_negative_values
    from picard_casadi.transcription.guess import GUESSES

    argv = joined_negative_values(["fit", "m.py", "d.csv", "--p0", "-1,-5,-2", "--x0",
                                    "-.1,0", "--guess", "anchored"])
    args = build_parser().parse_args(argv)
    assert args.p0 == "-1,-5,-2" and args.x0 == ["-.1,0"] and args.guess == "anchored"
    assert GUESS_CHOICES == GUESSES
    advice = ("pass Experiment(..., u_interpolation='previous', breakpoints=t); try "
              "multistart=8, weights='auto', guess='shooting' or method='ipopt'; increase "
              "max_iter; bound p (p_bounds), or use a shorter T; pc.profile(res) shows it; "
              "give Experiment(..., x0=[...]) (estimated from there unless estimate_x0=False)")
    assert in_cli_terms(advice) == (
        "pass --input-hold previous; try --multistart 8, --weights auto, --guess shooting or "
        "--method ipopt; increase --max-iter; bound p (--bounds), or use a shorter --T; "
        "--profile shows it; give --x0 (estimated from there unless --x0-known)")
    # compare keeps its mesh: the certificate's advice names the command that refines
    assert in_cli_terms("refine=True refines the mesh until it is, or pass a smaller T or "
                        "more nodes") == ("`picard-casadi fit` refines the mesh until it is, "
                                          "or pass a smaller --T or more --nodes")
    # the noise growing with the output: the flag (a hydrologist read noise='log-normal')
    assert in_cli_terms("constant noise. noise='log-normal' (a relative error) or "
                        "pc.Noise(sigma=a + b*g, output=g, ...) (docs/likelihood.md) models") == (
        "constant noise. --noise log-normal (a relative error; a noise formula such as a + "
        "b*g needs the Python API, docs/likelihood.md) models")


def test_a_held_input_from_a_csv_starts_an_interval_at_every_sample(tmp_path):
    # --input-hold previous jumps at every sample; without breakpoints the
    # intervals straddled the jumps
    import casadi as ca

    from picard_casadi.cli.data_files import read_csv_experiments

    x, p, u = ca.SX.sym("x"), ca.SX.sym("p"), ca.SX.sym("u")
    model = pc.Model(x=x, p=p, u=u, rhs=-p * x + u, y_names=["y"], u_names=["u"])
    csv_file = tmp_path / "d.csv"
    csv_file.write_text("experiment,time,y,u\n" + "".join(
        f"a,{k * 0.5},{1.0 + 0.1 * k},{k % 2}\n" for k in range(6)))
    held, = read_csv_experiments(csv_file, model, "previous")
    assert np.allclose(held.breakpoints, [0.5, 1.0, 1.5, 2.0])
    linear, = read_csv_experiments(csv_file, model)
    assert linear.breakpoints.size == 0 and linear.u_interpolation == "linear"


def test_a_held_inputs_empty_cells_hold_the_value_above(tmp_path):
    # a historian logs a set point where it changes: the empty cells between
    # were "column 'F' is empty" even under --input-hold previous
    import casadi as ca

    x, p, u = ca.SX.sym("x"), ca.SX.sym("p"), ca.SX.sym("u")
    model = pc.Model(x=x, p=p, u=u, rhs=-p * x + u, y_names=["y"], u_names=["F"])
    csv_file = tmp_path / "d.csv"
    cells = ["2", "", "", "5", "", "1"]
    csv_file.write_text("experiment,time,y,F\n" + "".join(
        f"a,{k * 0.5},{1.0 + 0.1 * k},{c}\n" for k, c in enumerate(cells)))
    held, = pc.read_csv_experiments(csv_file, model, "previous")
    assert held.u[:, 0].tolist() == [2, 2, 2, 5, 5, 1]
    assert np.allclose(held.breakpoints, [1.5])  # (the jump at the last sample ends it)
    with pytest.raises(ValueError, match=r"line 3: column 'F' is empty; an input logged only "
                                         r"where it changes is held .*--input-hold previous"):
        pc.read_csv_experiments(csv_file, model)
    csv_file.write_text("experiment,time,y,F\na,0,1,\na,1,1,2\n")
    with pytest.raises(ValueError, match=r"line 2: column 'F' is empty on the first row of "
                                         r"experiment 'a'"):
        pc.read_csv_experiments(csv_file, model, "previous")
    # a run that receives none (a vehicle group's dose): said as such
    csv_file.write_text("experiment,time,y,F\na,0,1,\na,1,1,\nb,0,1,2\nb,1,1,2\n")
    for hold in ("previous", None):
        with pytest.raises(ValueError, match=r"line 2: column 'F' is empty on every row of "
                                             r"experiment 'a': an input it does not receive"):
            pc.read_csv_experiments(csv_file, model, hold)


def test_a_timestamp_in_the_time_column_says_to_convert_it(tmp_path):
    import casadi as ca

    x, p = ca.SX.sym("x"), ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=-p * x, y_names=["y"])
    (tmp_path / "d.csv").write_text("time,y\n2024-03-04 06:00:00.000,1\n")
    with pytest.raises(ValueError, match=r"holds '2024-03-04 06:00:00.000', not a number; a "
                                         r"timestamp is converted first"):
        pc.read_csv_experiments(tmp_path / "d.csv", model)


def test_input_hold_names_the_inputs_it_holds():
    """--input-hold NAME=previous holds those inputs and reads the others
    linearly (a feed's staircase beside a temperature ramp), as the note's
    advice says on the command line."""
    import argparse

    import casadi as ca

    from picard_casadi.cli.data_files import input_holds
    from picard_casadi.cli.errors import CliError
    from picard_casadi.cli.parser_types import in_cli_terms, input_hold_arg

    x, p, u = ca.SX.sym("x"), ca.SX.sym("p"), ca.SX.sym("u", 2)
    model = pc.Model(x=x, p=p, u=u, rhs=-p * x + u[0] + u[1], u_names=["F", "T"])
    assert input_hold_arg("previous") == "previous"
    assert input_holds(input_hold_arg("F=previous"), model) == ["previous", "linear"]
    with pytest.raises(argparse.ArgumentTypeError, match="linear or previous"):
        input_hold_arg("F=held")
    with pytest.raises(CliError, match=r"--input-hold: 'Q' is not an input of the model "
                                       r"\(its inputs: F, T\)"):
        input_holds(input_hold_arg("Q=previous"), model)
    note = ("if they are a staircase, pass Experiment(..., u_interpolation=['previous', "
            "'linear'], breakpoints=t) (one per input; F held), or")
    assert "pass --input-hold F=previous, or" in in_cli_terms(note)


def test_the_data_file_reads_in_python_and_a_cli_result_predicts_from_it(tmp_path, cache_env):
    """A result.json written by the command line could not predict without
    experiments, and no reader of the CLI's DATA file was public (a user's
    report): pc.read_csv_experiments reads it, its errors ValueErrors."""
    from picard_casadi.cli.model_files import load_model_file

    (tmp_path / "model.py").write_text(MODEL_FILE)
    model, _ = load_model_file(tmp_path / "model.py")
    rows = []
    t = np.linspace(0.0, 4.0, 21)
    X = pc.simulate(model, [0.5, 0.5], [2.0, 0.4], t, lambda s: [np.sin(2 * s)])
    for k in range(t.size):
        rows.append(("a", f"{t[k]:.10g}", f"{X[k, 0]:.10g}", f"{np.sin(2 * t[k]):.10g}"))
    _write_csv(tmp_path / "data.csv", rows)
    out = run(["fit", "model.py", "data.csv", "--x0", "0.5,0.5", "--T", "0.5", "--out", "fit",
               "--codegen", "off"], tmp_path, cache_env)
    assert out.returncode == 0, out.stderr + out.stdout
    exps = pc.read_csv_experiments(tmp_path / "data.csv", model)
    assert [e.name for e in exps] == ["a"] and exps[0].x0 is None
    res = pc.EstimationResult.from_json(tmp_path / "fit" / "result.json", model=model,
                                        experiments=exps)
    # the loaded result's predictions: the model from its x0 and p, with the
    # file's inputs (interpolated as the fit read them), near the data
    own = pc.simulate(model, res.x0[0], res.p, exps[0].t, exps[0])[:, 0]
    assert np.allclose(res.predict(0)[:, 0], own, atol=1e-8)
    assert np.abs(own - X[:, 0]).max() < 0.01
    (tmp_path / "bad.csv").write_text("experiment,time,pos,force\na,0,1,0\na,0.1,NA,0\n")
    with pytest.raises(ValueError, match=r"bad.csv, line 3: column 'pos' holds 'NA', not a "
                                         r"number; a missing value is an empty cell"):
        pc.read_csv_experiments(tmp_path / "bad.csv", model)


def test_the_data_file_reads_with_its_condition_table(tmp_path):
    """A --conditions fit's result.json predicts from the experiments read
    with their table (a kineticist was told to refit: read_csv_experiments
    had no way to take the table)."""
    import casadi as ca

    x, k, c0 = ca.SX.sym("x"), ca.SX.sym("k"), ca.SX.sym("c0")
    model = pc.Model(x=x, p=ca.vertcat(k, c0), rhs=-k * x, x0=[c0], y_names=["y"],
                     p_names=["k", "c0"])
    (tmp_path / "d.csv").write_text("experiment,time,y\n" + "".join(
        f"{name},{s},{c * np.exp(-0.5 * s):.6f}\n" for name, c in (("a", 1.0), ("b", 2.0))
        for s in (0.0, 1.0, 2.0, 3.0)))
    (tmp_path / "c.csv").write_text("experiment,c0\na,1\nb,2\n")
    exps = pc.read_csv_experiments(tmp_path / "d.csv", model, conditions=tmp_path / "c.csv")
    assert [e.parameters for e in exps] == [{"c0": 1.0}, {"c0": 2.0}]
    res = pc.estimate(model, exps, {"k": 0.3}, uncertainty=False)
    res.to_json(tmp_path / "r.json")
    again = pc.EstimationResult.from_json(tmp_path / "r.json", model=model, experiments=exps)
    assert np.allclose(again.predict(1)[:, 0], 2.0 * np.exp(-res.p[0] * exps[1].t), rtol=1e-5)
    with pytest.raises(ValueError, match=r"no entry gives \['c0'\]\): pass the experiments "
                                         r"with the constants .*conditions=FILE"):
        pc.EstimationResult.from_json(tmp_path / "r.json", model=model,
                                      experiments=pc.read_csv_experiments(tmp_path / "d.csv",
                                                                          model))
    (tmp_path / "c.csv").write_text("experiment,c0\na,1\nz,2\n")
    with pytest.raises(ValueError, match=r"c.csv, line 3: no experiment 'z' in the data"):
        pc.read_csv_experiments(tmp_path / "d.csv", model, conditions=tmp_path / "c.csv")


def test_a_file_without_an_experiment_column_is_one_experiment(tmp_path):
    """A data logger writes one record with no 'experiment' column: it was
    refused as a missing column (a controls engineer's)."""
    import casadi as ca

    x, p = ca.SX.sym("x"), ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=-p * x, y_names=["y"])
    path = tmp_path / "run7.csv"
    path.write_text("time,y\n0,1\n0.5,0.6\n1,0.37\n")
    exp, = pc.read_csv_experiments(path, model)
    assert exp.name == "run7" and np.allclose(exp.t, [0, 0.5, 1])


def test_a_header_with_units_reads_and_a_unit_the_model_contradicts_is_named(tmp_path):
    """A data logger writes 'time [s]' and 'w [rad/s]': refused as unknown
    columns (a controls engineer's)."""
    import casadi as ca

    x, p = ca.SX.sym("x"), ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=-p * x, y_names=["w"], y_units=["rad/s"])
    path = tmp_path / "log.csv"
    path.write_text("time [s],w [rad/s]\n0,1\n1,0.5\n")
    exp, = pc.read_csv_experiments(path, model)
    assert np.allclose(exp.y.ravel(), [1.0, 0.5])
    path.write_text("time [s],w [rpm]\n0,1\n1,0.5\n")
    with pytest.raises(ValueError, match=r"column 'w \[rpm\]' is in 'rpm', and the model's 'w' "
                                         r"in 'rad/s'"):
        pc.read_csv_experiments(path, model)
    # a model that states no unit: the header's is read, and said to be unchecked
    bare = pc.Model(x=x, p=p, rhs=-p * x, y_names=["w"])
    path.write_text("time [s],w [deg/s]\n0,1\n1,0.5\n")
    with pytest.warns(UserWarning, match=r"the units of w \[deg/s\] in its header are not "
                                         r"checked, as the model states none"):
        exp, = pc.read_csv_experiments(path, bare)
    assert np.allclose(exp.y.ravel(), [1.0, 0.5])
    # a model that states one, a header that gives none: read in the model's,
    # and said (a ship's heading in degrees, a model in rad: K 57.3 times)
    path.write_text("time,w\n0,1\n1,0.5\n")
    with pytest.warns(UserWarning, match=r"its header gives no unit for w \(rad/s\); they are "
                                         r"read in the model's units \(in brackets\): write "
                                         r"the data's unit after each name \(w \[rad/s\], say\)"):
        exp, = pc.read_csv_experiments(path, model)
    assert np.allclose(exp.y.ravel(), [1.0, 0.5])


def _decay_of_w(**kwargs) -> pc.Model:
    """``w' = -p w``, its output named ``w`` (``kwargs``: the Model's others)."""
    import casadi as ca

    x, p = ca.SX.sym("x"), ca.SX.sym("p")
    return pc.Model(x=x, p=p, rhs=-p * x, y_names=["w"], **kwargs)


def test_a_logger_s_other_channels_are_left_out_by_name(tmp_path, capsys):
    """A sea trial's log carries speed and wind beside the channels fitted:
    refused as unknown columns, with no way but trimming the file."""
    model = _decay_of_w()
    path = tmp_path / "log.csv"
    path.write_text("time,w,speed [kn],wind\n0,1,12,3\n1,0.5,12,3\n")
    with pytest.raises(ValueError, match=r"unknown column\(s\) \['speed \[kn\]', 'wind'\].*"
                                         r"left out with ignore=\['speed', 'wind'\]"):
        pc.read_csv_experiments(path, model)
    exp, = pc.read_csv_experiments(path, model, ignore=["speed", "wind"])
    assert np.allclose(exp.y.ravel(), [1.0, 0.5])
    with pytest.raises(ValueError, match=r"`ignore`: \['w'\] are columns the model reads"):
        pc.read_csv_experiments(path, model, ignore=["w"])
    (tmp_path / "model.py").write_text(
        "import casadi as ca\nimport picard_casadi as pc\nP0 = [0.5]\n"
        "def build_model():\n    x, p = ca.SX.sym('x'), ca.SX.sym('p')\n"
        "    return pc.Model(x=x, p=p, rhs=-p * x, y_names=['w'])\n")
    from picard_casadi.cli.commands import main

    args = ["fit", str(tmp_path / "model.py"), str(path), "--codegen", "off", "--quiet",
            "--out", str(tmp_path / "r")]
    assert main(args) == 2
    assert "left out with --ignore-columns speed,wind" in capsys.readouterr().err
    assert main(args + ["--ignore-columns", "speed,wnd"]) == 2
    assert "--ignore-columns: ['wnd'] are columns of none" in capsys.readouterr().err
    assert main(args + ["--ignore-columns", "speed,wind"]) == 0


def test_a_time_column_in_another_unit_than_the_model_s_is_said(tmp_path):
    """A cycler's 'time (h)' was read as seconds without a word, where 'I [mA]'
    against a model in A was refused."""
    model = _decay_of_w()
    path = tmp_path / "log.csv"
    path.write_text("time (h),w\n0,1\n1,0.5\n")
    with pytest.warns(UserWarning, match=r"column 'time \(h\)' is in 'h', and the model's time "
                                         r"in 's' .* state Model\(t_unit='h'\)"):
        exp, = pc.read_csv_experiments(path, model)
    assert np.allclose(exp.t, [0.0, 1.0])  # read as they are
    hours = _decay_of_w(t_unit="h")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pc.read_csv_experiments(path, hours)
    # a unit the model states is checked as the others are (a Duffing record's
    # "time (ms)" against t_unit="s" was a note, then a 72 s fit to nonsense)
    seconds = _decay_of_w(t_unit="s")
    with pytest.raises(ValueError, match=r"line 1: column 'time \(h\)' is in 'h', and the "
                                         r"model's time in 's': convert the times"):
        pc.read_csv_experiments(path, seconds)
    assert seconds.replaced(name="again")._t_unit_given  # kept when replaced
