"""Fuzz: the command line misused, and its outputs in a hostile file system.

Most cases call ``cli.main`` in this process (fast); a closed pipe and an
end-to-end run use a subprocess.  Every error is one line
``picard-casadi <cmd>: error: ...`` with status 2 (input) or 1 (failure),
checked before any work where it can be, and nothing is left half-written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.cli import commands as cli

from conftest import OSCILLATOR_MODEL_FILE, cli_main as _main

# the shared oscillator model file, its name a placeholder NAME replaced per test
MODEL = OSCILLATOR_MODEL_FILE.replace('name="oscillator"', "name=NAME")


def _model_file(tmp_path, name="oscillator", extra="", body=None):
    path = tmp_path / "model.py"
    path.write_text((body or MODEL).replace("NAME", repr(name)) + extra)
    return path


def _data_rows():
    model_ns: dict = {}
    exec(MODEL.replace("NAME", "'o'"), model_ns)
    model = model_ns["build_model"]()
    t = np.linspace(0, 6, 31)
    X = pc.simulate(model, [1.0, 0.0], [2.0, 0.4], t, lambda s: [np.sin(2 * s)])
    return [("a", f"{t[k]:.10g}", f"{X[k, 0]:.10g}", f"{np.sin(2 * t[k]):.10g}")
            for k in range(t.size)]


def _csv(tmp_path, rows=None, header="experiment,time,pos,force", encoding="utf-8",
         name="data.csv", sep=","):
    rows = _data_rows() if rows is None else rows
    text = "\n".join([header.replace(",", sep)] + [sep.join(r) for r in rows]) + "\n"
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path




def _one_error_line(err, command="run"):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"picard-casadi {command}: error: "), err
    return lines[0]


# ---------------------------------------------------------------------- outputs
def test_out_is_a_file_is_refused_before_the_work(here, capsys):
    (here / "taken").write_text("x")
    code, out, err = _main(capsys, "run", "vdp", "--out", "taken", "--codegen", "off")
    assert code == 2 and "iter" not in out
    assert "'taken' is a file, not a folder" in _one_error_line(err)
    assert (here / "taken").read_text() == "x"


def test_out_under_a_file_is_refused(here, capsys):
    (here / "taken").write_text("x")
    code, _, err = _main(capsys, "run", "vdp", "--out", "taken/sub/dir")
    assert code == 2 and "'taken' is a file, so the folder cannot be created" in err


def test_unwritable_out_is_refused_before_the_work(here, capsys, monkeypatch):
    (here / "locked").mkdir()
    real = os.access

    def access(path, mode, **kw):
        if os.path.realpath(path) == os.path.realpath(here / "locked") and mode & os.W_OK:
            return False
        return real(path, mode, **kw)

    monkeypatch.setattr(os, "access", access)
    code, out, err = _main(capsys, "run", "vdp", "--out", "locked/res")
    assert code == 2 and "iter" not in out
    assert "parent folder 'locked' is not writable" in _one_error_line(err)
    code, out, err = _main(capsys, "compare", "vdp", "--out", "locked")
    assert code == 2 and "is not writable" in _one_error_line(err, "compare")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_out_where_nothing_can_be_created_is_refused_before_the_work(here, capsys):
    # os.access says /proc is writable (to root); a first-time user's run
    # fitted for its whole length, then could not save
    code, out, err = _main(capsys, "run", "vdp", "--out", "/proc/picard_results",
                           "--codegen", "off")
    assert code == 2 and "iter" not in out
    assert "nothing can be created in the parent folder '/proc'" in _one_error_line(err)
    assert not list(here.iterdir())  # the probe left nothing behind

@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="file modes do not bind root")
def test_read_only_out_really_refused(here, capsys):
    (here / "ro").mkdir()
    os.chmod(here / "ro", 0o555)
    try:
        code, _, err = _main(capsys, "run", "vdp", "--out", "ro")
        assert code == 2 and "not writable" in err
    finally:
        os.chmod(here / "ro", 0o755)


def test_earlier_results_are_kept_without_overwrite(here, capsys):
    code, out, _ = _main(capsys, "run", "vdp", "--out", "res", "--codegen", "off", "--quiet")
    assert code == 0
    before = {p.name: p.read_bytes() for p in (here / "res").iterdir()}
    assert sorted(before) == ["convergence.png", "fit.png", "result.json"]
    code, out, err = _main(capsys, "run", "vdp", "--out", "res", "--codegen", "off", "--seed", "3")
    assert code == 2 and "iter" not in out
    assert "already holds result.json, fit.png, convergence.png" in _one_error_line(err)
    assert "--overwrite" in err
    assert {p.name: p.read_bytes() for p in (here / "res").iterdir()} == before
    code, out, err = _main(capsys, "run", "vdp", "--out", "res", "--codegen", "off", "--seed", "3",
                           "--overwrite", "--quiet")
    assert code == 0, err
    after = json.loads((here / "res" / "result.json").read_text())
    assert after["p"] != json.loads(before["result.json"])["p"]
    assert sorted(p.name for p in (here / "res").iterdir()) == sorted(before)  # no temp files


def test_a_folder_named_like_an_output_file_is_refused(here, capsys):
    (here / "res" / "fit.png").mkdir(parents=True)
    code, _, err = _main(capsys, "run", "vdp", "--out", "res", "--overwrite")
    assert code == 2 and "fit.png exist(s) there as a folder" in err


def test_model_name_cannot_escape_results(here, capsys):
    (here / "work").mkdir()
    os.chdir(here / "work")
    _model_file(here / "work", name="../../x")
    _csv(here / "work")
    code, out, err = _main(capsys, "fit", "model.py", "data.csv", "--codegen", "off", "--quiet")
    assert code == 0, err
    assert (here / "work" / "results" / "x" / "result.json").is_file()
    assert not (here / "x").exists() and not (here / "results").exists()


def test_write_failure_prints_the_summary_and_leaves_nothing(here, capsys, monkeypatch):
    import picard_casadi.runtime.output_files as outputs

    real = outputs.os.replace
    calls = []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(outputs.os, "replace", replace)
    code, out, err = _main(capsys, "run", "vdp", "--out", "res", "--codegen", "off", "--quiet")
    assert code == 1
    assert "std. error" in out  # the summary came first
    line = _one_error_line(err)
    assert "could not write the results to 'res' (No space left on device); nothing was saved" in line
    leftovers = sorted(p.name for p in (here / "res").iterdir()) if (here / "res").exists() else []
    assert all(not n.startswith(".") for n in leftovers)  # no temporary files


def test_interrupt_while_writing_keeps_the_old_set(here, capsys, monkeypatch):
    """Ctrl-C while the figures are drawn: the earlier result stays whole, no temp files."""
    code, _, _ = _main(capsys, "run", "vdp", "--out", "res", "--codegen", "off", "--quiet")
    assert code == 0
    before = {p.name: p.read_bytes() for p in (here / "res").iterdir()}
    import picard_casadi.io.plotting as plotting

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(plotting, "plot_convergence", interrupted)
    code, out, err = _main(capsys, "run", "vdp", "--out", "res", "--codegen", "off", "--quiet",
                           "--seed", "2", "--overwrite")
    assert code == 130 and err.strip() == "picard-casadi run: interrupted"
    assert {p.name: p.read_bytes() for p in (here / "res").iterdir()} == before


# ---------------------------------------------------------------------- arguments
@pytest.mark.parametrize("argv,pattern", [
    (["run", "vdp", "--noise-std", "-1"], r"argument --noise-std: expected a number >= 0, got '-1'"),
    (["run", "vdp", "--noise-std", "nan"], r"argument --noise-std: expected a number >= 0"),
    (["run", "vdp", "--seed", "-1"], r"argument --seed: expected an integer >= 0, got '-1'"),
    (["run", "vdp", "--seed", "1.5"], r"argument --seed: expected an integer >= 0"),
    (["run", "vdp", "--T", "0"], r"argument --T: expected a positive number"),
    (["run", "vdp", "--T", "inf"], r"argument --T: expected a positive number"),
    (["run", "vdp", "--n", "0"], r"argument --n: expected an integer >= 1"),
    (["run", "vdp", "--lam", "-5"], r"argument --lam: expected a positive number"),
    (["run", "vdp", "--nodes", "1"], r"argument --nodes: expected an integer >= 2"),
    (["run", "vdp", "--max-iter", "-3"], r"argument --max-iter: expected an integer >= 1"),
    (["run", "vdp", "--max-intervals", "0"], r"argument --max-intervals: expected an integer >= 1"),
    (["run", "vdp", "--method", "newton"], r"argument --method: invalid choice: 'newton'"),
    (["compare", "vdp", "--seeds", "-1"], r"argument --seeds: expected an integer >= 0"),
    (["compare", "vdp", "--repeats", "0"], r"argument --repeats: expected an integer >= 1"),
    # a mistyped flag: reported by its command, with the closest of its flags
    # (was "picard-casadi: error: unrecognized arguments: --petabb", the
    # top-level help named)
    (["fit", "--petabb", "problem.yaml"],
     r"^picard-casadi fit: error: unrecognized arguments: --petabb \(did you mean --petab\?\) "
     r".*\(see picard-casadi fit --help\)$"),
    (["run", "vdp", "--seedd", "1"],
     r"^picard-casadi run: error: unrecognized arguments: --seedd \(did you mean --seed\?\)"),
])
def test_argparse_rejects_with_one_line(here, capsys, argv, pattern):
    import re

    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    _, err = capsys.readouterr()
    line = _one_error_line(err, argv[0])
    assert re.search(pattern, line), line


@pytest.mark.parametrize("argv,pattern", [
    (["run", "../../etc"], r"NAME: unknown problem '../../etc'"),
    (["compare", "vdp", "--methods", "newton"], r"--methods: unknown method\(s\) \['newton'\]"),
    (["run", "vdp", "--T", "1e-7"], r"`T` = 1e-07 makes about 100,000,000 intervals"),
    (["run", "vdp", "--T", "0.001", "--max-intervals", "50"], r"the limit is --max-intervals 50.*or pass --max-intervals \d+ to go ahead"),
])
def test_bad_value_is_one_line(here, capsys, argv, pattern):
    import re

    code, out, err = _main(capsys, *argv)
    assert code == 2
    assert re.search(pattern, _one_error_line(err, argv[0]))
    assert not (here / "results").exists()


# ---------------------------------------------------------------------- input files
@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "latin-1", "utf-16"])
def test_csv_encodings_are_read(here, capsys, encoding):
    _model_file(here)
    rows = _data_rows()
    rows = [("é-run",) + r[1:] for r in rows]  # a non-ASCII experiment name
    _csv(here, rows, encoding=encoding)
    code, out, err = _main(capsys, "fit", "model.py", "data.csv", "--codegen", "off", "--quiet",
                           "--out", "res")
    assert code == 0, err
    saved = json.loads((here / "res" / "result.json").read_text(encoding="utf-8"))
    assert saved["experiment_names"] == ["é-run"]
    assert np.allclose(saved["p"], [2.0, 0.4], rtol=0.03)
    if encoding == "latin-1":
        assert "is not UTF-8 (byte 0xe9 on line 2); read as Latin-1" in err
    else:
        assert err == ""


@pytest.mark.parametrize("case,pattern", [
    ("bom-header", None),
    ("semicolons", r"unknown column\(s\) \['experiment;time;pos;force'\].*separated by semicolons"),
    ("tabs", r"separated by tabs"),
    ("decimal-commas", r"separated by semicolons, and the numbers written with decimal "
                       r"commas.*write decimal points and separate the columns with commas"),
    ("duplicate", r"column\(s\) \['pos'\] appear more than once"),
    ("empty", r"the file is empty"),
    ("header-only", r"no data rows"),
    ("nul", r"line 2: column 'time' holds"),
    ("nan-time", r"line 5: column 'time' holds 'nan'; it cannot be missing"),
    ("inf-output", r"line 3: column 'pos' is infinite"),
    ("directory", r"DATA: no such file"),
    ("crlf-bom", None),
    ("case", r"unknown column\(s\) \['Time'\].*case-sensitive: 'Time' -> 'time'"),
    ("extra-cell", r"line 2: 5 cells, the header has 4"),
    ("typo", r"unknown column\(s\) \['poss'\].*a typo\? 'poss' -> 'pos'"),
    # rows of no experiment among named ones: an experiment "experiment" of
    # their own was fitted (a student's logger left the cells empty)
    ("empty-experiment", r"line 4: the column 'experiment' is empty \(\d+ such row\(s\)\), "
                         r"where other rows name theirs"),
])
def test_csv_problems_are_named(here, capsys, case, pattern):
    _model_file(here)
    rows = _data_rows()
    name = "data.csv"
    if case == "bom-header":
        _csv(here, rows, encoding="utf-8-sig")
    elif case == "semicolons":
        _csv(here, rows, sep=";")
    elif case == "tabs":
        _csv(here, rows, sep="\t")
    elif case == "decimal-commas":  # a European spreadsheet's export
        _csv(here, [tuple(c.replace(".", ",") for c in r) for r in rows], sep=";")
    elif case == "duplicate":
        _csv(here, [r + (r[2],) for r in rows], header="experiment,time,pos,force,pos")
    elif case == "empty":
        (here / name).write_bytes(b"")
    elif case == "header-only":
        _csv(here, [])
    elif case == "nul":
        rows[0] = (rows[0][0], "\x00", rows[0][2], rows[0][3])
        _csv(here, rows)
    elif case == "nan-time":
        rows[3] = (rows[3][0], "nan", rows[3][2], rows[3][3])
        _csv(here, rows)
    elif case == "inf-output":
        rows[1] = (rows[1][0], rows[1][1], "inf", rows[1][3])
        _csv(here, rows)
    elif case == "directory":
        (here / name).mkdir()
    elif case == "crlf-bom":  # what Excel on Windows writes
        text = "\r\n".join(["experiment,time,pos,force"] + [",".join(r) for r in rows]) + "\r\n"
        (here / name).write_bytes(text.encode("utf-8-sig"))
    elif case == "case":
        _csv(here, rows, header="experiment,Time,pos,force")
    elif case == "extra-cell":
        _csv(here, [r + ("",) for r in rows])
    elif case == "typo":
        _csv(here, rows, header="experiment,time,poss,force")
    elif case == "empty-experiment":
        _csv(here, rows[:2] + [("",) + r[1:] for r in rows[2:]])
    code, out, err = _main(capsys, "fit", "model.py", name, "--codegen", "off", "--quiet",
                           "--out", "res")
    if pattern is None:
        assert code == 0, err
        return
    import re

    assert code == 2
    assert re.search(pattern, _one_error_line(err, "fit")), err
    assert not (here / "res").exists()


@pytest.mark.parametrize("case,pattern,frame", [
    ("runtime", r"MODEL: build_model\(\) in '.*model.py' failed: RuntimeError: no licence",
     r"model.py, line \d+, in build_model\n +raise RuntimeError\(\"no licence\"\)"),
    ("zero", r"MODEL: build_model\(\) in '.*model.py' failed: ZeroDivisionError",
     r"model.py, line \d+, in helper\n +return 1 / 0"),
    ("import", r"MODEL: importing '.*model.py' failed: ModuleNotFoundError: No module named "
               r"'no_such_module'", r"model.py, line \d+, in <module>"),
    ("syntax", r"MODEL: importing '.*model.py' failed: SyntaxError", r"model.py, line \d+\n +def oops\("),
    ("casadi", r"MODEL: build_model\(\) in '.*model.py' failed: (RuntimeError|TypeError|NotImplementedError)",
     r"model.py, line \d+, in build_model"),
    ("not-a-model", r"build_model\(\) must return a picard_casadi.Model, got dict", None),
    ("no-build", r"must define build_model\(\)", None),
    ("p0-length", r"MODEL '.*model.py': P0 has 1 value\(s\), the model has 2 parameters", None),
    ("p0-text", r"MODEL '.*model.py': P0 must be 2 numbers", None),
    ("x0-length", r"MODEL '.*model.py': X0 has 3 value\(s\), the model has 2 states", None),
    ("options", r"MODEL '.*model.py': OPTIONS must be a dict", None),
    ("bad-option", r"OPTIONS has unknown key\(s\) \['maxiter'\] \('maxiter': did you mean "
                   r"'max_iter'\?\)", None),
    ("exit", r"MODEL: importing '.*model.py' failed: SystemExit: 3", r"model.py, line 2"),
])
def test_model_file_problems_are_short(here, capsys, case, pattern, frame):
    import re

    body = MODEL
    extra = ""
    if case == "runtime":
        body = MODEL.replace("    x = ca.SX.sym(\"x\", 2)", "    raise RuntimeError(\"no licence\")")
    elif case == "zero":
        extra = "\ndef helper():\n    return 1 / 0\n\n_old = build_model\ndef build_model():\n    helper()\n"
    elif case == "import":
        body = "import no_such_module\n" + MODEL
    elif case == "syntax":
        extra = "\ndef oops(:\n    pass\n"
    elif case == "casadi":
        body = MODEL.replace("rhs = ca.vertcat(", "rhs = ca.SX.sym('q', 'bad') + ca.vertcat(")
    elif case == "not-a-model":
        extra = "\ndef build_model():\n    return {}\n"
    elif case == "no-build":
        body = "P0 = [1, 2]\n"
    elif case == "p0-length":
        extra = "\nP0 = [0.5]\n"
    elif case == "p0-text":
        extra = "\nP0 = ['a', 'b']\n"
    elif case == "x0-length":
        extra = "\nX0 = [1, 2, 3]\n"
    elif case == "options":
        extra = "\nOPTIONS = ['T', 1]\n"
    elif case == "bad-option":
        extra = "\nOPTIONS = {'maxiter': 3}\n"
    elif case == "exit":
        body = "import sys\nsys.exit(3)\n"
    _model_file(here, extra=extra, body=body)
    _csv(here)
    code, out, err = _main(capsys, "fit", "model.py", "data.csv", "--codegen", "off", "--quiet")
    assert code == 2
    assert re.search(pattern, err), err
    assert err.startswith("picard-casadi fit: error: MODEL") or "option" in err
    assert "picard_casadi/cli/commands.py" not in err and "Traceback" not in err
    if frame:
        assert re.search(frame, err), err


def test_an_out_name_too_long_is_refused_before_the_work(here, capsys):
    code, out, err = _main(capsys, "run", "vdp", "--out", "x" * 300)
    assert code == 2 and "iter" not in out
    assert "longer than the file system allows" in _one_error_line(err)


def test_x0_and_p0_arguments_are_checked(here, capsys):
    _model_file(here)
    _csv(here)
    for args, pattern in ((["--x0", "1,2,3"], "--x0: expected 2 numbers, got 3"),
                          (["--p0", "1,nan"], "--p0: expected 2 finite numbers"),
                          (["--p0", "a,b"], "--p0: expected 2 numbers separated by commas")):
        code, _, err = _main(capsys, "fit", "model.py", "data.csv", *args)
        assert code == 2 and pattern in _one_error_line(err, "fit")


def test_unreadable_data_is_named(here, capsys, monkeypatch):
    _model_file(here)
    _csv(here)
    real = type(here).read_bytes

    def read_bytes(self):
        if self.name == "data.csv":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(type(here), "read_bytes", read_bytes)
    code, _, err = _main(capsys, "fit", "model.py", "data.csv")
    assert code == 2 and "DATA data.csv: cannot read the file (Permission denied)" in err


# ---------------------------------------------------------------------- pipes
def _subprocess(args, cwd, **kw):
    env = dict(os.environ, PICARD_CASADI_CACHE=str(cwd / "cache"))
    return subprocess.run([sys.executable, "-m", "picard_casadi", *args], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=300, **kw)


@pytest.mark.parametrize("args", [["problems"], ["run", "vdp", "--codegen", "off", "--out", "r"],
                                  ["run", "--help"]])
def test_a_closed_pipe_ends_quietly(tmp_path, args):
    env = dict(os.environ, PICARD_CASADI_CACHE=str(tmp_path / "cache"))
    proc = subprocess.Popen([sys.executable, "-m", "picard_casadi", *args], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=300)
    proc.stderr.close()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert code in (0, 141)
    if args[0] == "run" and args[1] == "vdp":
        assert code == 141 and not (tmp_path / "r").exists()


def test_end_to_end_input_error_in_a_subprocess(tmp_path):
    out = _subprocess(["run", "vdp", "--seed", "-1"], tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == ("picard-casadi run: error: argument --seed: expected an "
                                  "integer >= 0, got '-1' (see picard-casadi run --help)")


def test_codegen_advice_is_given_as_flags(here, capsys, monkeypatch):
    """``--codegen on`` without a C compiler: one line whose advice is the
    program's flags, not the library's keywords (codegen=True/False)."""
    from picard_casadi.runtime import codegen

    monkeypatch.setattr(codegen, "find_compiler", lambda: None)
    code, out, err = _main(capsys, "run", "vdp", "--codegen", "on", "--quiet")
    line = _one_error_line(err)
    assert code == 1
    assert "--codegen on needs a C compiler" in line
    assert "use --codegen off or auto" in line
    assert "codegen=" not in line


def test_in_cli_terms_rewrites_keywords_only():
    from picard_casadi.cli.parser_types import in_cli_terms

    assert (in_cli_terms("or pass max_intervals=1,234 to estimate() to go ahead")
            == "or pass --max-intervals 1234 to go ahead")
    assert (in_cli_terms("refinement stopped (pass max_intervals to estimate() to raise it)")
            == "refinement stopped (pass --max-intervals to raise it)")
    assert in_cli_terms("p = 3, T = 0.1") == "p = 3, T = 0.1"
