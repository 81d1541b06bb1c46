"""Fuzz: an unusable code cache or compiler.

Under ``codegen="auto"`` the run goes on on CasADi's virtual machine and the
result says why; under ``codegen=True`` it is one clear ``CodegenError``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.runtime import codegen, compiled_functions

needs_cc = pytest.mark.skipif(codegen.find_compiler() is None,
                              reason="no C compiler (set $CC or install gcc)")


@pytest.fixture
def fresh_probe(monkeypatch):
    """Forget what earlier tests found about compilers and caches."""
    monkeypatch.setattr(codegen, "_PROBED", {})
    monkeypatch.setattr(compiled_functions, "_WARNED", set())


def _cache_cases(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    return {
        "cache is a file": ({"PICARD_CASADI_CACHE": str(afile)}, r"a file is in the way"),
        "cache under a file": ({"PICARD_CASADI_CACHE": str(afile / "sub")},
                               r"a file is in the way"),
        "compiler fails": ({"CC": "/bin/false", "PICARD_CASADI_CACHE": str(tmp_path / "c")},
                           r"the C compiler '/bin/false' does not work"),
        "compiler not runnable": ({"CC": str(afile), "PICARD_CASADI_CACHE": str(tmp_path / "c")},
                                  r"the C compiler .* (cannot be run|does not work)"),
        "compiler makes nothing": ({"CC": "true", "PICARD_CASADI_CACHE": str(tmp_path / "c")},
                                   r"the C compiler .*true' produced no library"),
        "bad flags": ({"PICARD_CASADI_CFLAGS": "-O2 --no-such-flag-x",
                       "PICARD_CASADI_CACHE": str(tmp_path / "c")},
                      r"the C compiler .* does not work \(exit status \d+: .*no-such-flag"),
    }


CASES = ["cache is a file", "cache under a file", "compiler fails", "compiler not runnable",
         "compiler makes nothing", "bad flags"]


@needs_cc
@pytest.mark.parametrize("case", CASES)
def test_auto_falls_back_with_a_note(tmp_path, monkeypatch, fresh_probe, case):
    env, pattern = _cache_cases(tmp_path)[case]
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.warns(RuntimeWarning, match=pattern):
        res = pc.problem("vdp").estimate("picard-gn", codegen="auto", uncertainty=False)
    assert res.success
    notes = [w for w in res.warnings if "virtual machine" in w]
    assert notes and any(__import__("re").search(pattern, n) for n in notes), res.warnings


@needs_cc
@pytest.mark.parametrize("case", CASES)
def test_codegen_true_is_a_clear_error(tmp_path, monkeypatch, fresh_probe, case):
    env, pattern = _cache_cases(tmp_path)[case]
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(pc.CodegenError, match=r"codegen=True: .*" + pattern):
        pc.problem("vdp").estimate("picard-gn", codegen=True, uncertainty=False)


@needs_cc
def test_read_only_cache_is_used_for_hits_under_auto(tmp_path, monkeypatch, fresh_probe):
    """Simulated: writes into the cache fail with EACCES (tests run as root ignore modes)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("PICARD_CASADI_CACHE", str(cache))
    prob = pc.problem("vdp")
    ref = prob.estimate("picard-gn", codegen=True, uncertainty=False)  # fills the cache
    real_mkstemp = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kw):
        if dir is not None and os.path.realpath(dir) == os.path.realpath(cache):
            raise PermissionError(13, "Permission denied", str(dir))
        return real_mkstemp(*args, dir=dir, **kw)

    monkeypatch.setattr(codegen.tempfile, "mkstemp", mkstemp)
    monkeypatch.setattr(codegen, "_PROBED", {})
    before = codegen.STATS.snapshot()
    res = prob.estimate("picard-gn", codegen="auto", uncertainty=False)
    after = codegen.STATS.snapshot()
    assert res.success and np.array_equal(res.p, ref.p)
    assert after["cache_hits"] > before["cache_hits"] and after["compiled"] == before["compiled"]
    assert any("read-only" in w for w in res.warnings)
    # a function not in the cache falls back, with a note; under True it is an error
    with pytest.warns(RuntimeWarning, match=r"runs on CasADi's virtual machine"):
        res2 = prob.estimate("picard-gn", codegen="auto", uncertainty=False,
                             continuity="multiplier", jacobian="picard", hessian="gauss-newton",
                             max_iter=5)
    assert any("runs on CasADi's virtual machine" in w and "Permission denied" in w
               for w in res2.warnings), res2.warnings
    # IPOPT's NLP, not in the cache: its library cannot be written either (this
    # was an OSError traceback from the temporary file); a note, the VM's NLP
    res3 = prob.estimate("ipopt", codegen="auto", uncertainty=False, refine=False)
    assert res3.success
    assert any("IPOPT NLP runs on CasADi's virtual machine" in w and "Permission denied" in w
               for w in res3.warnings), res3.warnings
    monkeypatch.setattr(codegen, "_PROBED", {})
    with pytest.raises(pc.CodegenError, match=r"codegen=True: the code cache .* is not writable"):
        prob.estimate("picard-gn", codegen=True, uncertainty=False)


@needs_cc
def test_a_compile_failing_mid_run_falls_back_per_function(tmp_path, monkeypatch, fresh_probe):
    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path / "cache"))
    real = codegen._compile_c

    def failing(cc, sources, lib, workdir, kind="functions"):
        if "jacobian" in lib.name or "interval_linearisation" in lib.name:
            raise pc.CodegenError("the C compiler failed (cc -O2 ...):\nvirtual memory exhausted")
        return real(cc, sources, lib, workdir, kind)

    monkeypatch.setattr(codegen, "_compile_c", failing)
    import picard_casadi.transcription.functions as transcription
    monkeypatch.setattr(transcription, "sparse_pays", lambda model: True)  # build both
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = pc.problem("vdp").estimate("picard-gn", codegen="auto", uncertainty=False)
    assert res.success
    assert any("interval_linearisation runs on CasADi's virtual machine" in w
               for w in res.warnings)
    with pytest.raises(pc.CodegenError, match="virtual memory exhausted"):
        pc.problem("vdp").estimate("picard-gn", codegen=True, uncertainty=False)


@needs_cc
def test_every_function_that_fell_back_is_in_the_result(tmp_path, monkeypatch, fresh_probe):
    """A compiler that passes the probe but fails on every real file: the
    functions the setup and the guess compile side by side fall back too, and
    are warned from the caller's line (they were missing from res.warnings,
    and warned from concurrent/futures/thread.py)."""
    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path / "cache"))

    def failing(cc, sources, lib, workdir, kind="functions"):
        raise pc.CodegenError("the C compiler failed (cc -O1 ...):\nout of memory")

    monkeypatch.setattr(codegen, "_compile_c", failing)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = pc.problem("vdp").estimate(uncertainty=False)
    assert res.success
    fell_back = {w.split(":")[1].split()[0] for w in res.warnings
                 if "runs on CasADi's virtual machine" in w}
    assert {"picard", "f_derivatives", "trajectory"} <= fell_back, res.warnings
    warned = [w for w in caught if "runs on CasADi's virtual machine" in str(w.message)]
    assert {str(w.message).split(":")[1].split()[0] for w in warned} == fell_back
    assert not [w.filename for w in warned if "concurrent" in w.filename]


@needs_cc
def test_a_cache_entry_replaced_by_a_folder(tmp_path, monkeypatch, fresh_probe):
    """A library path taken by a directory: rebuilt impossible, so the VM under auto."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("PICARD_CASADI_CACHE", str(cache))
    prob = pc.problem("vdp")
    ref = prob.estimate("picard-gn", codegen=True, uncertainty=False)
    for lib in cache.glob("pc_*.so"):
        lib.unlink()
        lib.mkdir()
    with pytest.warns(RuntimeWarning, match="virtual machine"):
        res = prob.estimate("picard-gn", codegen="auto", uncertainty=False)
    assert res.success and np.allclose(res.p, ref.p, rtol=1e-9)
    with pytest.raises(pc.CodegenError, match="cannot be used"):
        prob.estimate("picard-gn", codegen=True, uncertainty=False)


@needs_cc
def test_ipopt_nlp_compile_failure_falls_back_under_auto(tmp_path, monkeypatch, fresh_probe):
    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path / "cache"))

    def failing(*args, **kwargs):
        raise pc.CodegenError("the C compiler failed: internal compiler error")

    monkeypatch.setattr(codegen, "compile_nlpsol", failing)
    res = pc.problem("vdp").estimate("ipopt", codegen="auto", uncertainty=False)
    assert res.success and any("internal compiler error" in w for w in res.warnings)
    with pytest.raises(pc.CodegenError, match="internal compiler error"):
        pc.problem("vdp").estimate("ipopt", codegen=True, uncertainty=False)


@needs_cc
def test_cli_with_a_broken_compiler_is_one_line(tmp_path):
    env = dict(os.environ, CC="/bin/false", PICARD_CASADI_CACHE=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-m", "picard_casadi", "run", "vdp", "--codegen", "on",
                          "--out", "res"], cwd=tmp_path, capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "picard-casadi run: error: --codegen on: the C compiler '/bin/false' does not work "
        "(exit status 1); set $CC to a working compiler, or use --codegen off"]
    assert not (tmp_path / "res").exists()
    out = subprocess.run([sys.executable, "-m", "picard_casadi", "run", "vdp", "--codegen",
                          "auto", "--out", "res", "--quiet"], cwd=tmp_path, capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "virtual machine" in out.stdout + out.stderr
    assert (tmp_path / "res" / "result.json").is_file()


@needs_cc
def test_a_library_changed_after_it_was_verified_is_verified_again(tmp_path, monkeypatch):
    """A library whose checksum this process verified is not hashed again while
    its file is unchanged; rewritten (a new file, as the cache writes) or
    overwritten in place with other bytes, it is checked again, refused and
    compiled again."""
    import casadi as ca

    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path / "cache"))
    x = ca.SX.sym("x")
    funcs = {"sq": ca.Function("sq", [x], [x * x + 1.0])}
    _, lib = codegen.compile_library(funcs, tag="verify")
    meta = lib.with_suffix(".json")
    hashed = []
    sha256 = codegen._sha256
    monkeypatch.setattr(codegen, "_sha256", lambda path: hashed.append(path) or sha256(path))
    assert codegen._valid_entry(lib, meta) and codegen._valid_entry(lib, meta)
    assert len(hashed) <= 1  # verified before (at the compile) or once here
    data = bytearray(lib.read_bytes())
    data[-1] ^= 0xFF  # the same size, other bytes
    replacement = lib.with_name(lib.name + ".new")
    replacement.write_bytes(bytes(data))
    os.replace(replacement, lib)  # a new file in its place
    hashed.clear()
    assert not codegen._valid_entry(lib, meta)
    assert hashed  # hashed again
    with open(lib, "r+b") as fh:  # in place, longer
        fh.seek(0, os.SEEK_END)
        fh.write(b"\0")
    assert not codegen._valid_entry(lib, meta)
    # the cache compiles the entry again, and finds it intact afterwards
    compiled = codegen.STATS.compiled
    loaded, again = codegen.compile_library(funcs, tag="verify")
    assert again == lib and float(loaded["sq"](2.0)) == 5.0
    assert codegen.STATS.compiled == compiled + 1
    assert codegen._valid_entry(lib, meta)


@needs_cc
def test_compiler_and_flag_settings_are_read_as_make_reads_them(tmp_path, monkeypatch,
                                                              fresh_probe):
    # a $CC with words ("gcc -O0", "ccache gcc") was "not a program"; flags
    # were split on spaces whatever the quotes; a C++ compiler was blamed on
    # the cache folder; a bad flag named $CC, not the variable that held it
    import shutil

    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path / "cache"))
    cc = shutil.which("gcc") or shutil.which("cc")
    monkeypatch.setenv("CC", f"{cc} -O0")
    assert codegen.find_compiler() == f"{cc} -O0"
    assert codegen.probe() == ("", False)
    monkeypatch.setenv("PICARD_CASADI_CFLAGS", '-O1 -I"/no such dir"')
    assert codegen.compile_flags()[:2] == ["-O1", "-I/no such dir"]
    assert codegen.probe() == ("", False)
    monkeypatch.setenv("PICARD_CASADI_CFLAGS", "-march=no-such-cpu")
    problem, _ = codegen.probe()
    assert "$PICARD_CASADI_CFLAGS" in problem and "'-march=no-such-cpu'" in problem
    monkeypatch.delenv("PICARD_CASADI_CFLAGS")
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is not None:
        monkeypatch.setenv("CC", cxx)
        problem, _ = codegen.probe()
        assert "a C++ compiler" in problem and "set $CC to a C compiler" in problem
