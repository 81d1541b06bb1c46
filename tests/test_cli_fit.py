"""``picard-casadi fit`` and ``compare --model``: the flags, the model-file hooks, the figures.

Small user models written into ``tmp_path`` (a one-state decay, a two-state
spring with only the position measured), about 20 samples per experiment,
code generation off except where the compilation notice is tested.  Most
cases call ``cli.main`` in this process; the progress of IPOPT (printed from
inside a call whose native output is captured) and the compilation notice
run in a subprocess, where stdout is the real file descriptor.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc

from conftest import cli_main as _main
from conftest import prey_only_lotka_volterra

DECAY = '''
import casadi as ca
import picard_casadi as pc

P0 = [0.5, 0.5]
{extra}

def build_model():
    x = ca.SX.sym("x")
    k, s = ca.SX.sym("k"), ca.SX.sym("s")
    return pc.Model(x=x, p=ca.vertcat(k, s), rhs=-k * x + s, name="decay",
                    x_names=["x"], p_names=["k", "s"], y_names=["x"])
'''

SPRING = '''
import casadi as ca
import picard_casadi as pc

P0 = [3.0, 0.2]
{extra}

def build_model():
    pos, vel = ca.SX.sym("pos"), ca.SX.sym("vel")
    k, c = ca.SX.sym("k"), ca.SX.sym("c")
    return pc.Model(x=ca.vertcat(pos, vel), p=ca.vertcat(k, c),
                    rhs=ca.vertcat(vel, -k * pos - c * vel), y=pos, name="spring",
                    x_names=["pos", "vel"], p_names=["k", "c"], y_names=["pos"])
'''

DECAY_TRUE = [1.0, 2.0]
SPRING_TRUE = [4.0, 0.3]


def _build(source: str):
    ns: dict = {}
    exec(source.format(extra=""), ns)
    return ns["build_model"]()


def _write(tmp_path, source, truth, x0s, extra="", n=20, t_end=4.0, noise=0.01,
           missing=()):
    """The model file and a CSV of ``len(x0s)`` experiments; returns their names."""
    (tmp_path / "model.py").write_text(source.format(extra=extra))
    model = _build(source)
    rng = np.random.default_rng(0)
    t = np.linspace(0.0, t_end, n)
    lines = ["experiment,time," + ",".join(model.y_names)]
    for e, x0 in enumerate(x0s):
        X = pc.simulate(model, x0, truth, t)
        y = X[:, 0] + noise * rng.standard_normal(t.size)
        for i in range(t.size):
            cell = "" if (e, i) in missing else f"{y[i]:.8g}"
            lines.append(f"e{e},{t[i]:.6g},{cell}")
    (tmp_path / "data.csv").write_text("\n".join(lines) + "\n")
    return "model.py", "data.csv"




def _fit(capsys, *argv, out="res"):
    """``fit model.py data.csv`` (codegen off, --overwrite); status, stdout, stderr and the
    result.json it wrote (None if none)."""
    path = os.path.join(out, "result.json")
    if os.path.exists(path):
        os.unlink(path)  # an earlier run's must not pass for this one's
    code, stdout, err = _main(capsys, "fit", "model.py", "data.csv", "--out", out,
                              "--codegen", "off", "--overwrite", *argv)
    saved = json.loads(open(path).read()) if os.path.exists(path) else None
    return code, stdout, err, saved


def _one_error_line(err, command="fit"):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"picard-casadi {command}: error: "), err
    return lines[0]


@pytest.fixture
def figures(monkeypatch):
    """What plot_fit drew during a command: the panels' gids, the title and its colour."""
    import matplotlib.colors as mcolors

    import picard_casadi.io.plotting as plotting

    seen: list[dict] = []
    real = plotting.plot_fit

    def recording(*args, **kwargs):
        fig = real(*args, **kwargs)
        fig.canvas.draw()
        legend = fig.legends[0].get_window_extent()
        box = fig.bbox
        seen.append({
            "gids": [ax.get_gid() for ax in fig.axes],
            "title": fig._suptitle.get_text(),
            "colour": mcolors.to_hex(fig._suptitle.get_color()),
            "legend_inside": (legend.x0 >= box.x0 - 1 and legend.x1 <= box.x1 + 1
                              and legend.y0 >= box.y0 - 1 and legend.y1 <= box.y1 + 1),
        })
        return fig

    monkeypatch.setattr(plotting, "plot_fit", recording)
    return seen


# ---------------------------------------------------------------------- parameters
def test_bounds_and_fix_override_the_model_file(here, capsys):
    _write(here, DECAY, DECAY_TRUE, [[0.2], [3.0]],
           extra="P_BOUNDS = ([0.1, 0.1], [10.0, 10.0])")
    # --bounds replaces k's bounds from P_BOUNDS (empty HI: unbounded); --fix holds s
    code, out, err, saved = _fit(capsys, "--bounds", "k=0:", "--fix", "s=1.8", "--quiet")
    # s held 10 % off: converged, the fit flagged as systematically off (exit 3)
    assert code == 3 and "converged but is flagged" in err, err
    lb, ub = saved["settings"]["p_bounds"]
    assert lb == [0.0, 1.8] and ub == ["inf", 1.8]
    assert saved["p"][1] == 1.8                      # the fixed value, used as its start
    assert abs(saved["p"][0] - DECAY_TRUE[0]) < 0.15  # k re-fitted around the fixed s
    assert re.search(r"\n  s\s+1.8\s+fixed\n", out), out
    # without flags the model file's box holds
    code, _, err, saved = _fit(capsys, "--quiet")
    assert code == 0, err
    assert saved["settings"]["p_bounds"] == [[0.1, 0.1], [10.0, 10.0]]
    assert np.allclose(saved["p"], DECAY_TRUE, rtol=0.05)


def test_a_bound_from_the_model_file_is_named_as_its(here, capsys):
    # s's upper bound below the truth: the note names P_BOUNDS, not --bounds alone
    _write(here, DECAY, DECAY_TRUE, [[0.2]], extra="P_BOUNDS = ([0.1, 0.1], [10.0, 1.5])")
    code, out, err, saved = _fit(capsys, "--quiet")
    assert saved["p"][1] == pytest.approx(1.5), out
    assert "(P_BOUNDS in model.py or --bounds)" in err + out, err
    assert "(--bounds)" not in err + out


def test_run_takes_the_parameter_flags(here, capsys):
    code, out, err = _main(capsys, "run", "vdp", "--fix", "th2=1", "--bounds", "th1=0.1:5",
                           "--weights", "auto", "--codegen", "off", "--quiet", "--out", "r")
    assert code == 0, err
    saved = json.loads((here / "r" / "result.json").read_text())
    assert saved["p"][1] == 1.0 and saved["settings"]["weights"] == "auto"
    assert saved["settings"]["p_bounds"] == [[0.1, 1.0], [5.0, 1.0]]


def test_a_start_outside_the_flags_bounds_is_named(here, capsys):
    _write(here, DECAY, DECAY_TRUE, [[0.2]])
    code, out, err, _ = _fit(capsys, "--bounds", "k=2:3")
    assert code == 2 and "iter" not in out
    line = _one_error_line(err)
    assert "P0 in model.py: the start k = 0.5 is outside its bounds [2, 3] (--bounds)" in line


@pytest.mark.parametrize("argv,pattern", [
    (["--bounds", "kk=0:1"],
     r"--bounds: unknown parameter 'kk' \(did you mean 'k'\?\); the model's parameters are k, s"),
    (["--fix", "q=1"], r"--fix: unknown parameter 'q'; the model's parameters are k, s"),
    (["--bounds", "k=3:1"], r"argument --bounds: k=3:1: the lower bound 3 exceeds the upper bound 1"),
    (["--bounds", "k=0"], r"argument --bounds: expected NAME=LO:HI"),
    (["--bounds", "k"], r"argument --bounds: expected NAME=LO:HI"),
    (["--bounds", "k=0:1:2"], r"argument --bounds: expected NAME=LO:HI"),
    (["--bounds", "k=a:1"], r"argument --bounds: k=a:1: 'a' is not a number"),
    (["--bounds", "k=nan:1"], r"argument --bounds: k=nan:1: expected a finite number"),
    (["--bounds", "k=0:1", "--bounds", "k=0:2"], r"--bounds: parameter 'k' is given twice"),
    (["--bounds", "k=0:1", "--fix", "k=0.5"], r"--fix: parameter 'k' is also given by --bounds"),
    (["--fix", "s"], r"argument --fix: expected NAME=VALUE"),
    (["--fix", "s=abc"], r"argument --fix: s=abc: 'abc' is not a number"),
    (["--fix", "s=inf"], r"argument --fix: s=inf: expected a finite number"),
    (["--fix", "s=1,k=2"], r"argument --fix: s=1,k=2: '1,k=2' is not a number \(one NAME=VALUE "
                           r"per flag: give the flag again for 'k=2'\)"),
    (["--weights", "1,2"], r"--weights: expected 1 number\(s\), one per output \(x\), got 2"),
    (["--weights", "-1"], r"argument --weights: the weights must be finite numbers >= 0"),
    (["--weights", "heavy"], r"argument --weights: expected auto, none or one number per output"),
    (["--x0", "y=1"], r"--x0: unknown state 'y'; the model's states are x"),
    (["--x0", "x=1", "--x0", "x=2"], r"--x0: state 'x' is given twice"),
    (["--x0", "x=1", "--x0", "1"], r"--x0: give NAME=VALUE \(repeatable\) or one list"),
    (["--multistart", "0"], r"argument --multistart: expected an integer >= 1"),
    (["--seed", "3"], r"unrecognized arguments: --seed \(did you mean --multistart-seed\?\) 3"),
    (["--jobs", "0"], r"argument --jobs: expected an integer >= 1, or -1 for one per core"),
    (["--noise", "x=laplace"], r"argument --noise: expected \[OUTPUT=\]DIST\[:SIGMA\] with DIST "
                               r"one of normal, log-normal, log10-normal"),
    (["--noise", "x=normal:-1"], r"argument --noise: a known sigma must be positive"),
])
def test_bad_flag_values_are_one_line_naming_the_flag(here, capsys, argv, pattern):
    _write(here, DECAY, DECAY_TRUE, [[0.2]])
    try:
        code, out, err = _main(capsys, "fit", "model.py", "data.csv", "--codegen", "off", *argv)
    except SystemExit as stop:  # argparse's own errors
        code, (out, err) = stop.code, capsys.readouterr()
    assert code == 2 and "iter" not in out
    assert re.search(pattern, _one_error_line(err)), err
    assert not (here / "results").exists()


@pytest.mark.parametrize("extra,pattern", [
    ("P_BOUNDS = ([0, 0], [1, 2, 3])", r"MODEL .model.py.: P_BOUNDS\[1\] must have 2 entries, got 3"),
    ("P_BOUNDS = 5", r"MODEL .model.py.: P_BOUNDS must be a pair \(lower, upper\) or None"),
    ("OPTIONS = {'callback': print}", r"OPTIONS cannot set 'callback'"),
    ("OPTIONS = {'method': 'newton'}", r"OPTIONS: unknown method 'newton'"),
    ("P_BOUNDS = (None, None)\nOPTIONS = {'p_bounds': (None, None)}",
     r"the parameter box is given twice"),
    # Python names, not flags, and not the command's own (model, p0)
    ("OPTIONS = {'p_bound': 1, 'experiment': 2}",
     r"OPTIONS has unknown key\(s\) \['p_bound', 'experiment'\] \('p_bound': did you mean "
     r"'p_bounds'\?; 'experiment': 'experiments' comes from the command line or P0, not "
     r"OPTIONS\)"),
])
def test_bad_model_file_hooks_are_named(here, capsys, extra, pattern):
    _write(here, DECAY, DECAY_TRUE, [[0.2]], extra=extra)
    code, out, err = _main(capsys, "fit", "model.py", "data.csv", "--codegen", "off")
    assert code == 2
    assert re.search(pattern, _one_error_line(err)), err


def test_method_from_options_and_the_flag_wins(here, capsys):
    _write(here, DECAY, DECAY_TRUE, [[0.2]], extra="OPTIONS = {'method': 'shooting'}")
    code, _, err, saved = _fit(capsys, "--quiet")
    assert code == 0, err
    assert saved["method"] == "shooting"
    code, _, err, saved = _fit(capsys, "--quiet", "--method", "picard-gn")
    assert code == 0, err
    assert saved["method"] == "picard-gn"


# ---------------------------------------------------------------------- initial states
def test_x0_known_takes_the_first_row(here, capsys):
    _write(here, DECAY, DECAY_TRUE, [[0.2], [3.0]])
    code, out, err, saved = _fit(capsys, "--x0-known", "--quiet")
    assert code == 0, err
    assert saved["settings"]["estimate_x0"] is False
    first = {}
    for line in (here / "data.csv").read_text().splitlines()[1:]:
        name, _, value = line.split(",")
        first.setdefault(name, float(value))
    assert np.allclose([x[0] for x in saved["x0"]], [first["e0"], first["e1"]], rtol=0, atol=0)
    assert "initial states known (not estimated):" in out
    assert re.search(r"e0: x=\S+ \(data\)", out)
    assert "initial states (known, not estimated):" in out


def test_t0_starts_the_clocks_of_known_initial_states(here, capsys):
    """A known x0 at t = 0 with samples from later (a dose at time 0): without
    --t0 each clock started at its first sample with no word (the fit of a
    pharmacometrician's oral dose: ka 24 for 1.2); --t0 0 states it."""
    _write(here, DECAY, DECAY_TRUE, [[0.2], [3.0]])
    rows = (here / "data.csv").read_text().splitlines()
    late = [r for r in rows[1:] if float(r.split(",")[1]) > 0.5]  # from t = 0.63 on
    (here / "data.csv").write_text("\n".join(rows[:1] + late) + "\n")
    code, out, err, saved = _fit(capsys, "--x0-known", "--x0", "e0:x=0.2", "--x0", "e1:x=3")
    assert code in (0, 3), err
    assert "the known initial states (x) are the states at each experiment's t0" in out
    assert "pass --t0 0" in out and "t0=0.0" not in out
    code, out, err, saved = _fit(capsys, "--x0-known", "--x0", "e0:x=0.2", "--x0", "e1:x=3",
                                 "--t0", "0", "--quiet")
    assert code == 0, err
    assert "--t0" not in out and np.allclose(saved["p"], DECAY_TRUE, rtol=0.05), saved["p"]
    # the first row's values are the states there: no note, and its clock
    code, out, err, saved = _fit(capsys, "--x0-known", "--quiet")
    assert code == 0 and "the known initial states" not in out, (out, err)
    code, _, err, _ = _fit(capsys, "--x0-known", "--t0", "0")
    assert code == 2 and ("--x0-known takes initial states of experiment 'e0' from its first "
                          "row (time 0.631579), but --t0 0 starts its clock earlier"
                          ) in _one_error_line(err)
    code, _, err, _ = _fit(capsys, "--t0", "1")
    assert code == 2 and ("--t0 1 is after the first sample of experiment 'e0' (time "
                          "0.631579)") in _one_error_line(err)


def test_x0_known_takes_what_the_model_s_x0_gives(here, capsys):
    """A state the model file's Model(x0=...) gives needs no --x0: a
    kineticist was asked for D's value (the model said 0), and shown A, B,
    C "from the data" where the fit followed the model's x0."""
    _write(here, SPRING.replace('y_names=["pos"])', 'y_names=["pos"], x0=[None, 0.0])'),
           SPRING_TRUE, [[1.0, 0.0], [-0.5, 0.0]])
    code, out, err, saved = _fit(capsys, "--x0-known", "--x0", "vel=0")
    assert code == 0, err
    assert re.search(r"e0: pos=\S+ \(data\), vel=0 \(model\)", out), out
    assert "(--x0 of vel not used: the model's x0 gives it)" in out
    assert np.allclose(saved["p"], SPRING_TRUE, rtol=0.05)


def test_x0_known_needs_the_unmeasured_states(here, capsys):
    _write(here, SPRING, SPRING_TRUE, [[1.0, 0.0], [-0.5, 0.0]])
    code, out, err, _ = _fit(capsys, "--x0-known")
    assert code == 2 and "iter" not in out
    line = _one_error_line(err)
    assert ("--x0-known: the initial value of state 'vel' in experiment 'e0' is not in the "
            "data (vel is not an output of the model); give it with --x0 vel=VALUE") in line
    code, out, err, saved = _fit(capsys, "--x0-known", "--x0", "vel=0", "--quiet")
    assert code == 0, err
    assert [x[1] for x in saved["x0"]] == [0.0, 0.0]
    assert "(data)" in out and "vel=0 (--x0)" in out
    assert np.allclose(saved["p"], SPRING_TRUE, rtol=0.05)
    # a list fills in what the first row does not measure; the data keep theirs
    code, out, err, saved = _fit(capsys, "--x0-known", "--x0", "7,0", "--quiet")
    assert code == 0, err
    assert [x[1] for x in saved["x0"]] == [0.0, 0.0] and saved["x0"][0][0] != 7.0
    assert "(--x0 of pos not used: the first row of every experiment measures it)" in out
    # X0 in the model file fills what the data do not give
    _write(here, SPRING, SPRING_TRUE, [[1.0, 0.0], [-0.5, 0.0]], extra="X0 = [9.0, 0.0]")
    code, out, err, saved = _fit(capsys, "--x0-known", "--quiet")
    assert code == 0, err
    assert [x[1] for x in saved["x0"]] == [0.0, 0.0] and saved["x0"][0][0] != 9.0
    assert "vel=0 (X0)" in out


def test_x0_known_with_an_empty_first_cell(here, capsys):
    _write(here, DECAY, DECAY_TRUE, [[0.2], [3.0]], missing={(1, 0)})
    code, _, err, _ = _fit(capsys, "--x0-known")
    assert code == 2
    assert ("state 'x' in experiment 'e1' is not in the data (its cell in the first row "
            "(time 0) is empty)") in _one_error_line(err)
    code, _, err, saved = _fit(capsys, "--x0-known", "--x0", "x=3", "--quiet")
    assert code == 0, err
    assert saved["x0"][1] == [3.0] and saved["x0"][0] != [3.0]  # e0 keeps its first row


def test_x0_guess_by_name_and_estimated_x0_in_the_summary(here, capsys):
    _write(here, SPRING, SPRING_TRUE, [[1.0, 0.0], [-0.5, 0.0]])
    code, out, err, saved = _fit(capsys, "--x0", "vel=0.1", "--quiet")
    assert code == 0, err
    assert saved["settings"]["estimate_x0"] is True
    assert "initial states (estimated, std. error in brackets):" in out
    assert re.search(r"\n\s+e0\s+[-\d.e]+ \([\d.e-]+\)\s+[-\d.e]+ \(", out)
    assert np.allclose(saved["x0"][0], [1.0, 0.0], atol=0.05)


# ---------------------------------------------------------------------- weights, methods
def test_weights_flag(here, capsys):
    _write(here, DECAY, DECAY_TRUE, [[0.2]])
    code, _, err, saved = _fit(capsys, "--weights", "4", "--quiet")
    assert code == 0, err
    assert saved["weights"] == [4.0] and saved["settings"]["weights"] == "given"
    code, _, err, saved = _fit(capsys, "--weights", "auto", "--quiet")
    assert code == 0, err
    assert saved["settings"]["weights"] == "auto"
    _write(here, DECAY, DECAY_TRUE, [[0.2]], extra="OPTIONS = {'weights': 'auto'}")
    code, _, err, saved = _fit(capsys, "--weights", "none", "--quiet")
    assert code == 0, err
    assert saved["settings"]["weights"] == "none"  # the flag wins over OPTIONS


def test_multistart_on_two_processes(here, capsys):
    _write(here, DECAY, DECAY_TRUE, [[0.2]], extra="P_BOUNDS = ([0.1, 0.1], [5, 5])")
    code, out, err, saved = _fit(capsys, "--multistart", "3", "--jobs", "2", "--quiet")
    assert code == 0, err
    assert len(saved["starts"]) == 3 and saved["settings"]["multistart"] == 3
    assert "multistart: 3 of 3 starts converged" in out


def test_multistart_seed_chooses_the_samples(here, capsys):
    _write(here, DECAY, DECAY_TRUE, [[0.2]], extra="P_BOUNDS = ([0.1, 0.1], [5, 5])")
    runs = {}
    for seed in ("0", "0", "7"):
        code, _, err, saved = _fit(capsys, "--multistart", "2", "--multistart-seed", seed,
                                   "--quiet")
        assert code == 0, err
        runs.setdefault(seed, []).append(saved["starts"][1]["p0"])
    assert runs["0"][0] == runs["0"][1] and runs["7"][0] != runs["0"][0]


@pytest.mark.parametrize("method", ["ipopt", "shooting"])
def test_ipopt_and_shooting_print_progress(tmp_path, method):
    """In a subprocess: the lines come from inside IPOPT, whose native output is captured."""
    _write(tmp_path, DECAY, DECAY_TRUE, [[0.2]])
    out = subprocess.run(
        [sys.executable, "-m", "picard_casadi", "fit", "model.py", "data.csv", "--method",
         method, "--codegen", "off", "--out", "res"], cwd=tmp_path, capture_output=True,
        text=True, timeout=300, env={**os.environ, "PICARD_CASADI_CACHE": str(tmp_path / "c")})
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("iter")]
    assert re.match(r"iter\s+0\s+objective\s+\S+\s+\|grad\|\s+-\s+gap\s+\S+", lines[0])
    saved = json.loads((tmp_path / "res" / "result.json").read_text())
    assert len(lines) >= saved["iterations"]  # every IPOPT iteration, from 0


def test_compilation_notice_on_a_cold_cache_only(tmp_path):
    _write(tmp_path, DECAY, DECAY_TRUE, [[0.2]])
    env = {**os.environ, "PICARD_CASADI_CACHE": str(tmp_path / "cache")}
    runs = []
    for _ in range(2):
        runs.append(subprocess.run(
            [sys.executable, "-m", "picard_casadi", "fit", "model.py", "data.csv", "--codegen",
             "on", "--out", "res", "--overwrite"], cwd=tmp_path, capture_output=True,
            text=True, timeout=600, env=env))
        assert runs[-1].returncode == 0, runs[-1].stderr
    notice = "compiling the model's functions to C (first run only; cached) ..."
    first = runs[0].stdout.splitlines()
    assert first.count(notice) == 1
    assert first.index(notice) < min(i for i, ln in enumerate(first) if ln.startswith("iter"))
    assert notice not in runs[1].stdout


# ---------------------------------------------------------------------- profile
def test_profile_writes_its_files_and_overwrite_removes_them(here, capsys):
    _write(here, DECAY, DECAY_TRUE, [[0.2], [3.0]])
    code, out, err, saved = _fit(capsys, "--profile", "--quiet")
    assert code == 0, err
    for name in ("profile.png", "profile.json", "result.json", "fit.png"):
        assert (here / "res" / name).is_file()
    assert re.search(r"Wald 95 %\s+profile 95 %", out)
    assert re.search(r"\n\s+k\s+\S+\s+\[\s*\S+,\s*\S+\]\s+\[\s*\S+,\s*\S+\]", out)
    prof = json.loads((here / "res" / "profile.json").read_text())
    lo, hi = prof["intervals"][0]
    assert lo < saved["p"][0] < hi
    # a run without --profile into the same folder leaves no stale profile behind
    code, _, err, _ = _fit(capsys, "--quiet")
    assert code == 0, err
    assert sorted(p.name for p in (here / "res").iterdir()) == [
        "convergence.png", "fit.png", "result.json"]


def test_ctrl_c_during_the_profile_keeps_the_fits_files(here, capsys, monkeypatch):
    # a fit of 40 s lost its files to a Ctrl-C in the profile that followed
    import picard_casadi.studies.profile as profile_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(profile_module, "profile", interrupted)
    _write(here, DECAY, DECAY_TRUE, [[0.2], [3.0]])
    code, out, err, saved = _fit(capsys, "--profile", "--quiet")
    assert code == 130 and "interrupted" in err, (code, err)
    assert saved is not None and saved["success"]
    assert sorted(p.name for p in (here / "res").iterdir()) == [
        "convergence.png", "fit.png", "result.json"]


def test_profile_parameters_profiles_those_alone(here, capsys):
    # an epidemiologist's nine-parameter fit profiled all nine (36 s) for R0
    _write(here, DECAY, DECAY_TRUE, [[0.2], [3.0]])
    code, out, err, _ = _fit(capsys, "--profile-parameters", "s", "--quiet")
    assert code == 0, err
    assert "profile likelihood of s (both sides of each)" in out
    prof = json.loads((here / "res" / "profile.json").read_text())
    assert list(prof["paths"]) == ["s"]
    assert prof["intervals"][0] == ["nan", "nan"], prof["intervals"]  # k not profiled
    code, _, err, _ = _fit(capsys, "--profile-parameters", "kk", "--quiet")
    assert code == 1 and "--profile: " in err and "'kk'" in err, err


def test_profile_of_a_failed_fit_is_skipped(here, capsys):
    _write(here, DECAY, DECAY_TRUE, [[0.2]])
    code, out, err, saved = _fit(capsys, "--profile", "--max-iter", "1", "--quiet")
    assert code == 1
    assert saved is not None and saved["success"] is False
    assert "--profile: skipped, the fit did not converge" in err
    assert not (here / "res" / "profile.png").exists()


def test_an_earlier_profile_blocks_without_overwrite(here, capsys):
    _write(here, DECAY, DECAY_TRUE, [[0.2]])
    (here / "res").mkdir()
    (here / "res" / "profile.png").write_bytes(b"old")
    code, out, err = _main(capsys, "fit", "model.py", "data.csv", "--out", "res",
                           "--codegen", "off")
    assert code == 2 and "already holds profile.png" in _one_error_line(err)
    assert (here / "res" / "profile.png").read_bytes() == b"old"


# ---------------------------------------------------------------------- figures
def test_fit_png_has_every_experiment_and_residuals(here, capsys, figures):
    _write(here, DECAY, DECAY_TRUE, [[0.2], [1.0], [3.0], [0.0], [2.5]])
    code, _, err, saved = _fit(capsys, "--quiet")
    assert code == 0, err
    assert (here / "res" / "fit.png").stat().st_size > 0
    drawn = figures[-1]
    assert sorted(drawn["gids"]) == sorted([f"fit:{e}:0" for e in range(5)]
                                           + [f"residual:{e}:0" for e in range(5)])
    assert drawn["legend_inside"]
    assert "converged" in drawn["title"] and "FAILED" not in drawn["title"]
    assert drawn["colour"] == "#000000"


def test_fit_png_draws_the_outputs_each_experiment_measures():
    # PEtab's Bruno measures one to three of its five outputs per condition:
    # 19 of its 30 panels had no data
    model = _build(SPRING)
    t = np.linspace(0, 4, 20)
    Y = pc.simulate(model, [1.0, 0.0], SPRING_TRUE, t)
    both = np.column_stack([Y[:, 0], Y[:, 0] ** 2])
    first = both.copy()
    first[:, 1] = np.nan
    second = both.copy()
    second[:, 0] = np.nan
    two = pc.Model(x=model.x, p=model.p, rhs=model.rhs,
                   y=ca.vertcat(model.x[0], model.x[0] ** 2), p_names=model.p_names)
    exps = [pc.Experiment(t, y, x0=[1.0, 0.0], name=n)
            for n, y in (("a", first), ("b", second), ("c", both))]
    res = pc.estimate(two, exps, SPRING_TRUE, codegen=False, uncertainty=False,
                      estimate_x0=False)
    from picard_casadi.io.plotting import plot_fit

    fig = plot_fit(res, two, exps, residuals=False)
    assert sorted(ax.get_gid() for ax in fig.axes) == ["fit:0:0", "fit:1:1", "fit:2:0",
                                                       "fit:2:1"]
    # each panel names its output where the experiments measure different ones
    assert {ax.get_gid(): ax.get_ylabel() for ax in fig.axes}["fit:1:1"] == "y1"


def test_fit_png_draws_the_inputs_that_drove_each_experiment():
    # flight tests and the CMG are read against their inputs: each experiment's
    # column ends in a panel of them, as the estimation read them
    x, u, a = ca.SX.sym("x"), ca.SX.sym("u", 2), ca.SX.sym("a")
    model = pc.Model(x=x, p=a, u=u, rhs=-a * x + u[0] - u[1], y=x, u_names=["de", "dr"],
                     u_units=["rad", "rad"])
    t = np.linspace(0.0, 4.0, 21)
    held = np.column_stack([np.where(t < 2.0, 1.0, -1.0), np.zeros_like(t)])
    def sine(s):
        return np.array([np.sin(s), 0.5 * np.cos(s)])

    exps = [pc.Experiment(t, pc.simulate(model, [0.0], [0.7], t, u=u, **kw), x0=[0.0], u=u,
                          name=name, **kw)
            for name, u, kw in (("step", held, {"u_interpolation": "previous",
                                                "breakpoints": [2.0]}),
                                ("sine", sine, {}))]
    res = pc.estimate(model, exps, [1.0], codegen=False, uncertainty=False,
                      estimate_x0=False)
    from picard_casadi.io.plotting import plot_fit

    fig = plot_fit(res, model, exps)
    panels = {ax.get_gid(): ax for ax in fig.axes}
    assert sorted(panels) == ["fit:0:0", "fit:1:0", "input:0:0", "input:1:0",
                              "residual:0:0", "residual:1:0"]
    step, sine = panels["input:0:0"], panels["input:1:0"]
    # the held elevator as held, the rudder (zero throughout) left out and named
    (line,) = step.get_lines()
    ts, vs = line.get_data()
    np.testing.assert_array_equal(vs, np.where(ts < 2.0, 1.0, -1.0))
    assert line.get_label() == "de [rad]"
    assert [text.get_text() for text in step.texts] == ["0 throughout: dr"]
    # a callable as it returns, both inputs in one panel (one unit, a like size)
    assert [ln.get_label() for ln in sine.get_lines()] == ["de [rad]", "dr [rad]"]
    ts, vs = sine.get_lines()[1].get_data()
    np.testing.assert_allclose(vs, 0.5 * np.cos(ts))
    assert step.get_xlabel() == "time [s]"  # the time axis under the inputs, not above them
    assert panels["residual:0:0"].get_xlabel() == ""
    # inputs of other units or sizes each get a panel (the HFB-320's elevator
    # beside its thrust drew as a flat line)
    thrust = pc.Model(x=x, p=a, u=u, rhs=-a * x + u[0] - 1e-4 * u[1], y=x,
                      u_names=["de", "thrust"], u_units=["rad", "N"])
    loud = [exps[0].replaced(u=np.column_stack([held[:, 0], np.full(t.size, 1.1e4)]))]
    fig = plot_fit(res, thrust, loud)
    assert sorted(ax.get_gid() for ax in fig.axes if ax.get_gid().startswith("input")) == [
        "input:0:0", "input:0:1"]
    assert [ax.get_ylabel() for ax in fig.axes if ax.get_gid().startswith("input")] == [
        "thrust [N]", "de [rad]"]
    assert len(plot_fit(res, model, exps, inputs=False).axes) == 4


def test_fit_png_of_two_outputs(tmp_path):
    model = _build(SPRING)
    t = np.linspace(0, 4, 20)
    exps = [pc.Experiment(t, pc.simulate(model, x0, SPRING_TRUE, t)[:, :1], name=f"r{i}")
            for i, x0 in enumerate([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])]
    res = pc.estimate(model, exps, SPRING_TRUE, codegen=False, uncertainty=False)
    from picard_casadi.io.plotting import plot_fit

    fig = plot_fit(res, model, exps, path=tmp_path / "f.png")
    assert len(fig.axes) == 6
    fig = plot_fit(res, model, exps, experiment=1, residuals=False)
    assert [ax.get_gid() for ax in fig.axes] == ["fit:1:0"]
    for residuals in (True, False):  # one experiment, one output: the legend is not clipped
        fig = plot_fit(res, model, exps, experiment=0, residuals=residuals)
        fig.canvas.draw()
        legend, box = fig.legends[0].get_window_extent(), fig.bbox
        assert box.x0 <= legend.x0 and legend.x1 <= box.x1 and box.y0 <= legend.y0
        ax_low = min(ax.get_window_extent().y0 for ax in fig.axes)
        assert legend.y1 < ax_low  # below the panels, not over them


def test_failed_fit_is_titled_failed_in_red(here, capsys, figures):
    _write(here, DECAY, DECAY_TRUE, [[0.2], [3.0]], extra="OPTIONS = {'max_iter': 1}")
    code, out, err, saved = _fit(capsys, "--quiet")
    assert code == 1 and saved["success"] is False
    drawn = figures[-1]
    assert re.search(r"\nFAILED: iteration limit reached \(max_iter=1\) before convergence\n",
                     drawn["title"]), drawn["title"]
    assert drawn["colour"] == "#c00000"


# ---------------------------------------------------------------------- compare
def _estimates_of(table: Path) -> list[np.ndarray]:
    """Each row's estimate in a study's ``table.csv`` (by the column's name)."""
    import csv

    with open(table, newline="") as f:
        return [np.array(row["estimate"].split(), float) for row in csv.DictReader(f)]


def test_compare_on_a_model_file_and_csv(here, capsys):
    _write(here, DECAY, DECAY_TRUE, [[0.2], [3.0]])
    code, out, err = _main(capsys, "compare", "--model", "model.py", "--data", "data.csv",
                           "--methods", "picard-gn", "ipopt", "--codegen", "off",
                           "--out", "cmp", "--p0", "0.8,1.5")
    assert code == 0, err
    assert re.search(r"decay\s+seed - picard-gn\s+ok\s+misfit", out)
    rows = (here / "cmp" / "table.csv").read_text().splitlines()
    assert len(rows) == 3 and rows[1].startswith("decay,,picard-gn,True,True,,")
    md = (here / "cmp" / "table.md").read_text()
    assert "| decay | - | ipopt | yes | yes | - |" in md
    assert (here / "cmp" / "comparison.png").stat().st_size > 0
    p_gn, p_ip = _estimates_of(here / "cmp" / "table.csv")
    assert np.allclose(p_gn, p_ip, rtol=1e-5)


def test_compare_states_the_problem_as_fit_does(here, capsys):
    """``compare --model`` takes fit's statement flags: a log-scale parameter,
    one estimated per experiment, and the noise model (it refused them)."""
    _write(here, DECAY, DECAY_TRUE, [[0.2], [3.0]])
    code, out, err = _main(capsys, "compare", "--model", "model.py", "--data", "data.csv",
                           "--methods", "picard-gn", "ipopt", "--codegen", "off",
                           "--out", "cmp", "--p0", "0.8,1.5", "--scale", "k=log10",
                           "--per-experiment", "s", "--noise", "normal")
    assert code == 0, err
    estimates = _estimates_of(here / "cmp" / "table.csv")
    assert [len(e) for e in estimates] == [3, 3]  # k, s[e0], s[e1]
    assert np.allclose(estimates[0], estimates[1], rtol=1e-5)
    assert estimates[0] == pytest.approx([1.0, 2.0, 2.0], rel=0.05)


def test_compare_takes_the_mesh_its_not_certified_advice_names(here, capsys, monkeypatch):
    # "(not certified)" advised a shorter T, which compare did not accept
    # ("unrecognized arguments: --T"); it applies to every problem of the study
    seen = []
    real = pc.Problem.estimate

    def estimate(self, method=None, **kw):
        seen.append((self.name, kw.get("T"), kw.get("nodes")))
        return real(self, method, **kw)

    monkeypatch.setattr(pc.Problem, "estimate", estimate)
    _write(here, DECAY, DECAY_TRUE, [[0.2], [3.0]])
    code, out, err = _main(capsys, "compare", "vdp", "--model", "model.py", "--data", "data.csv",
                           "--methods", "picard-gn", "--codegen", "off", "--out", "cmp",
                           "--p0", "0.8,1.5", "--T", "0.5", "--nodes", "7")
    assert code == 0, err
    assert seen == [("vdp", 0.5, 7), ("decay", 0.5, 7)]


@pytest.mark.parametrize("argv,pattern", [
    (["--model", "model.py"], r"--model and --data go together"),
    ([], r"give problem NAMES .* or your own model and data with --model M.py --data D.csv"),
    (["vdp", "--p0", "1,2"], r"--p0 applies to --model M.py --data D.csv only"),
    (["vdp", "--x0-known"], r"--x0-known and --x0-known-states apply to --model"),
    (["vdp", "--per-experiment", "s"], r"--per-experiment applies to --model"),
    (["--model", "model.py", "--data", "data.csv", "--fix", "zz=1"],
     r"--fix: unknown parameter 'zz'"),
])
def test_compare_model_arguments_are_checked(here, capsys, argv, pattern):
    _write(here, DECAY, DECAY_TRUE, [[0.2]])
    code, out, err = _main(capsys, "compare", *argv, "--out", "cmp")
    assert code == 2
    assert re.search(pattern, _one_error_line(err, "compare")), err
    assert not (here / "cmp").exists()


def test_compare_accepts_a_problem_object(tmp_path):
    model = _build(DECAY)
    t = np.linspace(0, 4, 20)
    exp = pc.Experiment(t, pc.simulate(model, [0.2], DECAY_TRUE, t), name="only")
    prob = pc.Problem.from_data(model, [exp], [0.8, 1.5], name="mine",
                                options={"codegen": False})
    rows = pc.compare([prob], ["picard-gn"], seeds=[0, 1], codegen=False,
                      out=tmp_path / "cmp")
    assert len(rows) == 1 and rows[0]["seed"] is None and rows[0]["rel_error"] is None
    assert rows[0]["success"] and np.allclose(rows[0]["estimate"], DECAY_TRUE, rtol=1e-4)
    with pytest.raises(ValueError, match="two problems are named 'mine'"):
        pc.compare([prob, prob], ["picard-gn"])


def test_a_problem_of_ones_own_takes_a_parameter_table(tmp_path):
    """``Problem.from_data`` with a parameter table (scales and bounds), as
    ``estimate`` takes it; numbers that are not a start get an error naming
    ``p0``."""
    model = _build(DECAY)
    t = np.linspace(0, 4, 20)
    exp = pc.Experiment(t, pc.simulate(model, [0.2], DECAY_TRUE, t), name="only")
    table = [pc.Parameter("k", 0.8, bounds=(0.01, 10), scale="log10"),
             pc.Parameter("s", 1.5, bounds=(0, 10))]
    prob = pc.Problem.from_data(model, [exp], table, name="mine", options={"codegen": False})
    rows = pc.compare([prob], ["picard-gn"], codegen=False, out=tmp_path / "cmp")
    assert rows[0]["success"] and np.allclose(rows[0]["estimate"], DECAY_TRUE, rtol=1e-4)
    with pytest.raises(ValueError, match="`p_bounds` with a parameter table"):
        pc.Problem.from_data(model, [exp], table, p_bounds=([0, 0], [1, 1]))
    with pytest.raises(ValueError, match="`p0` must be numbers, one per model parameter, or a "
                                         "parameter table"):
        pc.Problem.from_data(model, [exp], ["k", "s"])


FORCED_DUFFING = '''
import casadi as ca
import picard_casadi as pc

P0 = [1.0, 1.0, 1.0]
P_BOUNDS = ([0, 0, None], [None, None, None])

def build_model():
    x, p, u = ca.SX.sym("x", 2), ca.SX.sym("p", 3), ca.SX.sym("u", 1)
    return pc.Model(x=x, p=p, u=u, rhs=ca.vertcat(
        x[1], -p[0] * x[0] - p[1] * x[1] + p[2] * u[0] - 0.5 * x[0] ** 3),
        y=x[0], name="duffing", p_names=["k", "c", "g"], x_names=["pos", "vel"],
        u_names=["force"], y_names=["pos"])
'''


def test_a_sample_time_rounded_differently_reaches_the_certificate(here, capsys):
    # found by a first-time user: from p0 = (5, 1, 1) the refined mesh put a
    # sample at tau = 0.99636671555725..., which the certificate's integrator
    # rounded to two different 13th digits (KeyError from interval_integration)
    (here / "model.py").write_text(FORCED_DUFFING)
    data = Path(__file__).parent / "data" / "forced_duffing.csv"
    code, out, err = _main(capsys, "fit", "model.py", str(data), "--p0", "5,1,1",
                           "--codegen", "off", "--quiet", "--out", "r")
    assert code == 0, err
    saved = json.loads((here / "r" / "result.json").read_text())
    assert saved["success"], saved["message"]
    assert np.allclose(saved["p"], [2.0, 0.3, 1.5], rtol=0.1), saved["p"]


PREY_ONLY_LV = '''
import casadi as ca
import picard_casadi as pc

P0 = [0.5, 0.5, 0.5, 0.5]
P_BOUNDS = ([0, 0, 0, 0], [5, 5, 5, 5])

def build_model():
    x, p = ca.SX.sym("x", 2), ca.SX.sym("p", 4)
    return pc.Model(x=x, p=p, rhs=ca.vertcat(p[0] * x[0] - p[1] * x[0] * x[1],
                                             -p[2] * x[1] + p[3] * x[0] * x[1]),
                    y=x[0], name="lv", p_names=list("abcd"), x_names=["prey", "pred"],
                    y_names=["prey"])
'''


def test_warnings_print_once_in_the_summary_not_as_python_warnings(here):
    # a tester saw each warning twice: Python's format with the package's
    # source line ("interrupts.py:142: FitWarning ... return func(...)"), then
    # the summary's line
    (here / "model.py").write_text(PREY_ONLY_LV)  # the same model, its state names given
    _, exp = prey_only_lotka_volterra()
    (here / "data.csv").write_text("experiment,time,prey\n" + "".join(
        f"e,{float(ti)!r},{float(yi)!r}\n" for ti, yi in zip(exp.t, exp.y[:, 0])))
    # a real process: pytest would capture the warnings an in-process call shows
    proc = subprocess.run([sys.executable, "-m", "picard_casadi", "fit", "model.py", "data.csv",
                           "--x0", "2,1", "--x0-known", "--codegen", "off", "--quiet",
                           "--out", "r"], cwd=here, capture_output=True, text=True, timeout=300)
    out, err = proc.stdout, proc.stderr
    assert proc.returncode == 3, err  # converged, flagged
    assert out.count("systematically off the data of output 'prey'") == 1
    assert out.count("information matrix is near-singular") == 1
    assert "Warning" not in err and ".py:" not in err
    assert err.strip() == ("picard-casadi fit: the fit converged but is flagged (see the "
                           "warnings above); exit status 3")


def test_a_model_file_imports_a_module_next_to_it(tmp_path, monkeypatch, capsys):
    # "MODEL: importing 'wrapper.py' failed: ModuleNotFoundError: No module named
    # 'decay_model'" where `python wrapper.py` imports it (a user's report)
    sub = tmp_path / "models"
    sub.mkdir()
    _write(tmp_path, DECAY, DECAY_TRUE, [[0.2]])
    (sub / "decay_model.py").write_text((tmp_path / "model.py").read_text())
    (sub / "wrapper.py").write_text("from decay_model import build_model, P0\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the folder goes on it
    code, _, err = _main(capsys, "fit", "models/wrapper.py", "data.csv", "--out", "res",
                         "--codegen", "off", "--quiet")
    assert code == 0, err


def test_noise_flag_and_sigma_columns(here, capsys):
    _write(here, DECAY, DECAY_TRUE, [[0.2]])
    code, out, err, saved = _fit(capsys, "--noise", "log-normal", "--quiet")
    assert code == 0, err
    assert saved["settings"]["noise_model"] == ["x: log-normal, sigma estimated"]
    code, out, err, saved = _fit(capsys, "--noise", "x=normal:0.01", "--quiet")
    assert code == 0, err
    assert saved["settings"]["noise"] == "given" and saved["noise_sigma"] == [0.01]
    # each measurement's sigma from the CSV's sigma_x column: known by default
    lines = (here / "data.csv").read_text().splitlines()
    lines = [lines[0] + ",sigma_x"] + [line + ",0.02" for line in lines[1:]]
    (here / "data.csv").write_text("\n".join(lines) + "\n")
    code, out, err, saved = _fit(capsys, "--quiet")
    assert code == 0, err
    assert saved["settings"]["noise_model"] == ["x: normal, sigma per measurement (the data's)"]
    assert saved["noise_sigma"] == pytest.approx([0.02])
    code, out, err, _ = _fit(capsys, "--noise", "y=normal")
    assert code == 2 and "--noise: the model has no output 'y'" in err
    code, out, err, _ = _fit(capsys, "--noise", "normal", "--weights", "auto")
    assert code == 2 and "give one" in err


def test_scale_per_experiment_and_conditions_flags(here, capsys):
    _write(here, DECAY, DECAY_TRUE, [[0.2], [1.5]])
    code, out, err, saved = _fit(capsys, "--scale", "k=log10", "--per-experiment", "s",
                                 "--quiet")
    assert code == 0, err
    assert saved["p_names"] == ["k", "s[e0]", "s[e1]"]
    assert saved["p_scaled_names"] == ["log10(k)", "s[e0]", "s[e1]"]
    assert saved["p"] == pytest.approx([1.0, 2.0, 2.0], rel=0.05)
    (here / "cond.csv").write_text("experiment,s\ne0,2.0\ne1,2.0\n")
    code, out, err, saved = _fit(capsys, "--conditions", "cond.csv", "--quiet")
    assert code == 0, err
    assert saved["p_names"] == ["k"] and saved["p"] == pytest.approx([1.0], rel=0.05)
    (here / "cond.csv").write_text("experiment,s\ne9,2.0\n")
    code, out, err, _ = _fit(capsys, "--conditions", "cond.csv")
    assert code == 2 and "no experiment 'e9' in the data" in err
    # a row given twice: the last had won, silently
    (here / "cond.csv").write_text("experiment,s\ne0,2.0\ne1,2.0\ne1,5.0\n")
    code, out, err, _ = _fit(capsys, "--conditions", "cond.csv")
    assert code == 2 and "line 4: experiment 'e1' is given again (first on line 3)" in err
    # an empty cell beside a number: the advice is the table's, not Python's
    (here / "cond.csv").write_text("experiment,s\ne0,2.0\ne1,\n")
    code, out, err, _ = _fit(capsys, "--conditions", "cond.csv")
    assert code == 2 and "give it in every experiment's row of --conditions" in err, err
    assert "Experiment(parameters" not in err
    code, out, err, _ = _fit(capsys, "--scale", "k=ln")
    assert code == 2 and "--scale: 'k=ln': the scale must be one of lin, log, log10" in err


def test_bounds_and_fix_reach_the_experiments_own_parameters(here, capsys):
    """A name the condition table makes (or --per-experiment's s[e1]) can be
    bounded or fixed like a model parameter; it was "unknown parameter"."""
    _write(here, DECAY, DECAY_TRUE, [[0.2], [1.5]])
    (here / "cond.csv").write_text("experiment,s\ne0,2.0\ne1,s_e1\n")
    code, out, err, saved = _fit(capsys, "--conditions", "cond.csv", "--scale", "k=log10",
                                 "--bounds", "s_e1=1.8:2.2")
    assert code == 0, err
    assert saved["p_names"] == ["k", "s_e1"] and saved["p_scaled_names"][0] == "log10(k)"
    assert 1.8 <= saved["p"][1] <= 2.2
    assert "s_e1 starts at 2, the middle of its --bounds (s's start 0.5 is outside" in out
    code, out, err, saved = _fit(capsys, "--conditions", "cond.csv", "--fix", "s_e1=2.0",
                                 "--quiet")
    assert code == 0, err
    assert saved["p_names"] == ["k", "s_e1"] and saved["p"][1] == 2.0
    assert saved["settings"]["p_bounds"][0][1] == saved["settings"]["p_bounds"][1][1] == 2.0
    code, out, err, saved = _fit(capsys, "--per-experiment", "s", "--fix", "s[e0]=2.0",
                                 "--quiet")
    assert code == 0, err
    assert saved["p_names"] == ["k", "s[e0]", "s[e1]"] and saved["p"][1] == 2.0
    assert saved["settings"]["p_bounds"][0][1] == saved["settings"]["p_bounds"][1][1]
    code, out, err, _ = _fit(capsys, "--conditions", "cond.csv", "--bounds", "s_e2=0:3")
    assert code == 2 and "unknown parameter 's_e2' (did you mean 's_e1'?)" in err, err
    code, out, err, _ = _fit(capsys, "--conditions", "cond.csv", "--bounds", "s_e1=3:")
    assert code == 2 and "the start s_e1 = 0.5 (that of s) is outside [3, inf]" in err, err


PETAB_BOEHM = (Path(__file__).parent / "data" / "petab" / "Boehm_JProteomeRes2014"
               / "Boehm_JProteomeRes2014.yaml")


def test_fit_reads_a_petab_problem(here, capsys):
    code, out, err = _main(capsys, "fit", "--petab", str(PETAB_BOEHM), "--max-iter", "3",
                           "--codegen", "off", "--quiet", "--out", "petab", "--overwrite")
    saved = json.loads((here / "petab" / "result.json").read_text())
    assert code == 1 and "FAILED (max_iter) after 3 iterations" in out  # as asked
    # an import rate of 1e5 on the nominal vector: Radau from the start, and said
    assert "stiff on the mesh at the start" in out and saved["settings"]["scheme"] == "radau"
    assert "deprecated" not in err  # the petab library's pandas warnings are not the user's
    assert saved["p_names"][:2] == ["Epo_degradation_BaF3", "k_exp_hetero"]
    assert saved["p_scales"][:6] == ["log10"] * 6
    code, out, err = _main(capsys, "fit", "--petab", str(PETAB_BOEHM), "--bounds", "k_phos=1:2")
    assert code == 2 and "--bounds: a PEtab problem states these in its tables" in err
    assert "--bounds in the parameter table's lowerBound and upperBound" in err  # where to edit
    code, out, err = _main(capsys, "fit", "model.py", "data.csv", "--petab", str(PETAB_BOEHM))
    assert code == 2 and "give either MODEL.py DATA.csv or --petab" in err


def test_p0_gives_a_petab_problem_new_starts(here, capsys, monkeypatch):
    # a user could try another start only by editing the parameter table
    estimate_module = sys.modules["picard_casadi.estimate"]
    seen = []

    def estimate(model, exps, p0, *args, **kwargs):  # the start it was given, no fit
        seen.append(p0)
        raise ValueError("stopped here")

    monkeypatch.setattr(estimate_module, "estimate", estimate)
    code, _, err = _main(capsys, "fit", "--petab", str(PETAB_BOEHM), "--p0", "k_phos=20000")
    assert code == 2 and "stopped here" in err
    table = {q.name: q for q in seen[0]}
    assert table["k_phos"].start == 20000.0 and table["k_phos"].scale == "log10"
    assert table["k_phos"].bounds == pc.read_petab(PETAB_BOEHM).parameters[5].bounds
    values = ",".join(["0.5"] * 6 + ["0.693", "0.107"])
    _main(capsys, "fit", "--petab", str(PETAB_BOEHM), "--p0", values)
    assert [q.start for q in seen[1]][:6] == [0.5] * 6
    for bad, pattern in (("1,2", r"--p0: 2 value\(s\), but the parameter table has 8 entries"),
                         ("k_phoss=3", r"--p0: names 'k_phoss' \(did you mean 'k_phos'\?\)"),
                         ("k_phos=-3", r"--p0: Parameter 'k_phos': `start` -3 is outside its"),
                         ("k_phos=x", r"--p0: 'k_phos=x': give one number per entry")):
        code, _, err = _main(capsys, "fit", "--petab", str(PETAB_BOEHM), "--p0", bad)
        assert code == 2 and re.search(pattern, _one_error_line(err)), err
    assert len(seen) == 2


def test_fit_says_what_is_wrong_with_a_file_that_is_not_a_petab_problem(here, capsys):
    # each was a traceback (AttributeError from the YAML's content, the YAML
    # parser's own error) or an errno without the fix (a folder)
    (here / "notes.yaml").write_text("hello\n")
    (here / "empty.yaml").write_text("")
    (here / "broken.yaml").write_text("a: [1, 2\nb: }\n")
    for name, expected in [("notes.yaml", "is not a PEtab problem's YAML file"),
                           ("empty.yaml", "is not a PEtab problem's YAML file"),
                           ("broken.yaml", "is not a readable YAML file")]:
        code, out, err = _main(capsys, "fit", "--petab", str(here / name), "--out", "x")
        assert code == 2 and f"--petab: {here / name} {expected}" in err
        assert "Traceback" not in err
    code, out, err = _main(capsys, "fit", "--petab", str(PETAB_BOEHM.parent), "--out", "x")
    assert code == 2 and "is a folder; pass the problem's YAML file in it" in err
    assert "(Boehm_JProteomeRes2014.yaml)" in err


def test_a_petab_problem_s_advice_names_its_parameter_table(here, capsys):
    # the advice was "equal lower and upper --bounds", a flag --petab refuses
    case = Path(__file__).parent / "data" / "petab_suite" / "0001" / "_0001.yaml"
    code, out, err = _main(capsys, "fit", "--petab", str(case), "--codegen", "off", "--quiet",
                           "--out", "suite", "--overwrite")
    assert code == 2, err
    assert "fix parameters (estimate = 0 in the PEtab parameter table)" in err
    assert "--bounds" not in err
    # ... and only there: the same message of a model file and CSV names --bounds
    from picard_casadi.cli.parser_types import in_cli_terms

    assert "--bounds" in in_cli_terms("fix parameters (equal lower and upper p_bounds)")


def test_x0_of_one_experiment_overrides_its_data(here, capsys):
    # item 4 of "Hard problems": no per-experiment x0, and --x0 could not
    # override a measured state (a noisy first row taken as exact)
    _write(here, DECAY, DECAY_TRUE, [[0.2], [3.0]])
    code, out, err, saved = _fit(capsys, "--x0-known", "--x0", "e1:x=3", "--quiet")
    assert code == 0, err
    assert saved["x0"][1] == [3.0] and saved["x0"][0] != [3.0]
    assert "x=3 (--x0 e1:x)" in out
    code, out, err, saved = _fit(capsys, "--x0", "e0:x=0.25", "--quiet")  # a guess
    assert code == 0, err
    code, out, err, _ = _fit(capsys, "--x0", "e7:x=1")
    assert code == 2 and "no experiment 'e7' in the data" in err


def test_sigterm_ends_the_fit_with_one_line_and_no_partial_files(here):
    # item 16: a kill while the CLI wrote left .part files in --out
    import signal

    _write(here, SPRING, SPRING_TRUE, [[1.0, 0.0], [-0.5, 0.0]], n=400, t_end=40.0)
    proc = subprocess.Popen([sys.executable, "-m", "picard_casadi", "fit", "model.py",
                             "data.csv", "--codegen", "off", "--out", "killed",
                             "--method", "shooting"],
                            cwd=here, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:  # the fit is under way (no timing assumed)
        if line.lstrip().startswith("iter"):
            break
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert err.strip().endswith("picard-casadi fit: terminated")
    assert not (here / "killed").exists() or not list((here / "killed").glob("*.part"))


def test_sigterm_ends_the_program_inside_native_code_that_never_returns(here):
    """Days read as hours: an IPOPT iteration on a model grown to 1e52 ran on
    for minutes after a SIGTERM (Python's handler waits for native code to
    return), until a SIGKILL.  The program now ends STOP_GRACE seconds after
    the signal, status 143, with a line that says so."""
    import signal

    from picard_casadi.cli.program_exit import STOP_GRACE

    # a C call that retries its wait through signals and never returns to
    # Python before the child ends (libc's system(); the GIL released, as
    # CasADi's solves release it)
    # (the child says it started: the parent is inside system() by then)
    (here / "model.py").write_text(
        "import os\n"
        f"os.system('echo native; exec sleep {3 * STOP_GRACE:g} >/dev/null 2>&1')\n")
    (here / "data.csv").write_text("time,y\n0,1\n1,2\n")
    proc = subprocess.Popen([sys.executable, "-m", "picard_casadi", "fit", "model.py",
                             "data.csv", "--out", "stuck"], cwd=here, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:  # inside the native solve (minutes of it)
        if line.startswith("native"):
            break
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=20 * STOP_GRACE)
    assert proc.returncode == 143, err
    assert f"still running {STOP_GRACE:g} s after the signal (inside native code)" in err


def test_progress_window_flag_reaches_the_method_and_its_advice_names_it(here, capsys,
                                                                         monkeypatch):
    # a stalled run's message advises progress_window=0: the CLI has the flag
    import importlib

    from picard_casadi.cli.parser_types import in_cli_terms

    module = importlib.import_module("picard_casadi.estimate")
    seen = {}
    original = module.estimate

    def recording(*args, **kwargs):
        seen.update(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, "estimate", recording)
    _write(here, DECAY, DECAY_TRUE, [[0.2], [3.0]])
    code, _, err, saved = _fit(capsys, "--progress-window", "0", "--quiet")
    assert code in (0, 3) and saved is not None, err
    assert seen["progress_window"] == 0
    assert "try --guess shooting, or another p0 (--progress-window 0 iterates on)" in \
        in_cli_terms("try guess='shooting', or another p0 (progress_window=0 iterates on)")


def test_a_start_already_tried_is_not_advised(here, capsys):
    # --max-iter 3 on the pendulum of docs/cli.md: the message advised
    # "try --guess shooting" and then said the run from it had failed too
    cli = Path(__file__).parent.parent / "examples" / "cli"
    code, out, err = _main(capsys, "fit", str(cli / "pendulum.py"), str(cli / "pendulum.csv"),
                           "--max-iter", "3", "--codegen", "off", "--quiet", "--out", "failed")
    assert code == 1 and "FAILED (max_iter)" in out
    assert "a second run from --guess shooting did not converge either" in out
    assert "try --guess" not in out


def test_scale_for_every_parameter_stays_a_word():
    # --scale log10 became a list, one entry per parameter, and a model with an
    # estimated delay was refused (a delay is kept linear under the word)
    import casadi as ca

    from picard_casadi.cli.statement_options import statement_options

    x, k, tau = ca.SX.sym("x"), ca.SX.sym("k"), ca.SX.sym("tau")
    model = pc.Model(x=x, p=ca.vertcat(k, tau), rhs=-k * x, p_names=["k", "tau"])
    options: dict = {}
    statement_options(["log10"], None, None, model, [], options)
    assert options["parameter_scale"] == "log10"
    statement_options(["log10", "tau=lin"], None, None, model, [], options)
    assert options["parameter_scale"] == ["log10", "lin"]


def test_fit_png_says_why_a_simulation_failed(tmp_path):
    """A panel whose simulation failed said only "simulation failed" (an SEIR
    whose E(0) = 0 sat on its x_domain bound: no reason anywhere)."""
    from picard_casadi.io.plotting import plot_fit

    x, k = ca.SX.sym("x"), ca.SX.sym("k")
    t = np.linspace(0, 3, 15)
    exp = pc.Experiment(t, np.exp(-0.3 * t), x0=[1.0])
    res = pc.estimate(pc.Model(x=x, p=k, rhs=-k * x, x_names=["V"]), [exp], [0.5],
                      uncertainty=False)
    bounded = pc.Model(x=x, p=k, rhs=-k * x, x_names=["V"], x_domain=([0.5], [np.inf]))
    back = pc.EstimationResult.from_json(res.to_json(tmp_path / "r.json"), model=bounded,
                                         experiments=[exp])
    fig = plot_fit(back, bounded, [exp])
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any(s.startswith("simulation failed:\nleft the model's domain at t = ") and
               "is outside (0.5, inf)" in s.replace("\n", " ") for s in texts), texts


LATE = '''
import casadi as ca
import picard_casadi as pc

P0 = [1.5, 0.2]

def build_model():
    x, k, tau = ca.SX.sym("x"), ca.SX.sym("k"), ca.SX.sym("tau")
    return pc.Model(x=x, p=ca.vertcat(k, tau), rhs=-k * x, y=x, name="late",
                    x_names=["x"], p_names=["k", "tau"], y_names=["x"],
                    output_delays=dict(x=tau))
'''


def test_a_profile_of_an_estimated_delay_is_refused_before_the_fit(here, capsys):
    """``--profile`` with an estimated delay failed after the fit had run (a
    pharmacometrician's lag); it is refused at once, with the route that works."""
    _write(here, LATE, [1.0, 0.3], [[2.0]])
    code, out, err, saved = _fit(capsys, "--profile")
    assert code == 2 and saved is None and "method picard-gn" not in out
    assert "--fix tau=ESTIMATE --profile" in _one_error_line(err)


def test_a_jump_in_a_state_is_noted_before_the_fit(here, capsys):
    """Coulomb friction written c * sign(v) on a motion that sticks ran for more than
    15 minutes without a word (a student's pendulum)."""
    _write(here, SPRING.replace("-k * pos - c * vel", "-k * pos - c * ca.sign(vel)"),
           SPRING_TRUE, [[1.0, 0.0]])
    code, out, err, saved = _fit(capsys, "--quiet", "--x0-known", "--x0", "vel=0",
                                 "--max-iter", "3")
    assert err.startswith("picard-casadi fit: note: the model's right-hand side jumps where a "
                          "state crosses a threshold (sign() of vel)"), err
    assert "tanh(vel / eps) for sign(vel)" in err
    _write(here, SPRING, SPRING_TRUE, [[1.0, 0.0]])
    code, out, err, saved = _fit(capsys, "--quiet")
    assert "threshold" not in err


def test_a_warning_at_the_start_is_printed_before_the_iterations(tmp_path):
    """The start oscillating between the samples (a quarter car's times in ms) was
    said only after the run, 15 minutes later: it comes before the first iteration."""
    _write(tmp_path, SPRING, SPRING_TRUE, [[1.0, 0.0]], extra="P0 = [40000.0, 0.2]")
    env = dict(os.environ, PICARD_CASADI_CACHE=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, "-m", "picard_casadi", "fit", "model.py", "data.csv",
                          "--codegen", "off", "--max-iter", "5", "--out", "res"],
                         cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=600)
    lines = run.stdout.splitlines()
    first_iteration = next(i for i, ln in enumerate(lines) if ln.startswith("iter"))
    said = [i for i, ln in enumerate(lines) if "the model oscillates" in ln]
    assert said and said[0] < first_iteration, run.stdout


def test_x0_known_states_holds_those_and_estimates_the_others(here, capsys):
    """A virologist's T and I known at infection, V estimated: only a model file's
    OPTIONS could say so."""
    _write(here, SPRING, SPRING_TRUE, [[1.0, 0.0]])
    code, out, err, saved = _fit(capsys, "--quiet", "--x0-known-states", "pos")
    assert code in (0, 3), err
    assert saved["settings"]["estimate_x0"] == [False, True]
    first = float((here / "data.csv").read_text().splitlines()[1].split(",")[2])
    assert saved["x0"][0][0] == first  # the first row's, held
    assert re.search(r"e0: pos=\S+ \(data\), vel=\S+ \(a start: estimated\)", out)
    code, out, err, saved = _fit(capsys, "--x0-known-states", "speed")
    assert code == 2 and "--x0-known-states: 'speed' is not a state" in err
    code, out, err, saved = _fit(capsys, "--x0-known-states", "pos", "--x0-known")
    assert code == 2 and "not both" in err
