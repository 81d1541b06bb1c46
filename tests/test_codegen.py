"""Code generation: agreement with the virtual machine, the cache, and C export."""

import os
import subprocess

import casadi as ca
import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.runtime import codegen, compiled_functions
from picard_casadi.transcription.discretisation import Discretisation
from picard_casadi.io.export import export_c, exported_functions
from picard_casadi.transcription.interval_functions import build_interval_functions

needs_cc = pytest.mark.skipif(codegen.find_compiler() is None,
                              reason="no C compiler found ($CC, cc, gcc or clang)")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path / "cache"))


def _random_args(f, rng):
    return [rng.uniform(0.2, 1.2, f.size_in(i)) for i in range(f.n_in())]


def _compare(f, rng):
    """Outputs of generated vs virtual-machine code at random arguments."""
    compiled = codegen.compile_functions({"fun": f}, tag="test")["fun"]
    args = _random_args(f, rng)
    for a, b in zip(f.call(args), compiled.call(args)):
        a, b = np.asarray(a), np.asarray(b)
        assert np.max(np.abs(a - b)) <= 1e-12 * max(1.0, np.max(np.abs(a)))


def _compare_with_derivatives(f, rng):
    """The function and a forward directional derivative of it, both ways."""
    _compare(f, rng)
    _compare(f.forward(1), rng)


@needs_cc
@pytest.mark.parametrize("name", ["cmg", "fa18-roll-ail"])
def test_generated_functions_agree_with_the_virtual_machine(name):
    prob = pc.problem(name, seed=0)
    disc = Discretisation(prob.model, prob.experiments[:1], prob.options["T"],
                          prob.options["nodes"], "chebyshev")
    fns = build_interval_functions(disc, 2)
    rng = np.random.default_rng(0)
    for f in (fns.picard, fns.trajectory):
        _compare_with_derivatives(f, rng)
    # the model's first derivatives, as the iteration compiles them
    from picard_casadi.transcription.sensitivity import PointDerivatives

    for f in PointDerivatives(prob.model, 5, 5).functions.values():
        _compare(f, rng)


@needs_cc
@needs_cc
def test_numpy_buffer_calls_equal_the_dm_calls():
    """NativeFunction: same numbers as casadi.external, sparse outputs scattered,
    inputs of one mapped call repeated, a wrong shape named."""
    from picard_casadi.runtime.native import NativeFunction
    from picard_casadi.transcription.sensitivity import PointDerivatives

    prob = pc.problem("fa18-roll-ail", seed=0)
    f = PointDerivatives(prob.model, 7, 1).functions["f_derivatives"]  # sparse Jacobians
    loaded, lib = codegen.compile_library({"fder": f}, tag="test")
    native = NativeFunction(lib, "fder", f)
    rng = np.random.default_rng(1)
    args = _random_args(f, rng)
    assert any(not f.sparsity_out(i).is_dense() for i in range(f.n_out()))
    for a, b in zip(loaded["fder"].call([ca.DM(x) for x in args]), native(*args)):
        assert b.shape == a.shape and np.array_equal(a.full(), b)
    # p given once for all 7 mapped calls, as CasADi's map allows
    p_once = args[2][:, :1]
    repeated = native(args[0], args[1], p_once, args[3])
    direct = loaded["fder"](ca.DM(args[0]), ca.DM(args[1]), ca.DM(p_once), ca.DM(args[3]))
    for a, b in zip(direct, repeated):
        assert np.array_equal(a.full(), b)
    with pytest.raises(ValueError, match="input 1 of fder"):
        native(args[0], args[1][:, :3], args[2], args[3])


@needs_cc
def test_a_mapped_function_evaluates_a_run_time_count_and_newton_steps_a_subset():
    """A mapped NativeFunction called for fewer points gives those points'
    outputs; a Newton step on marked intervals evaluates f only there and
    moves them as the step on all intervals does, the others untouched."""
    from picard_casadi.runtime.native import NativeFunction
    from picard_casadi.transcription.sensitivity import (PointDerivatives, fixed_point_system,
                                           newton_fixed_point_step)

    prob = pc.problem("fa18-roll-ail", seed=0)
    m = prob.model
    disc = Discretisation(m, prob.experiments, 0.1, 7, "chebyshev")
    J, K, nx = disc.n_intervals, disc.K, m.nx
    unit = PointDerivatives(m, 1, 1).units["f_derivatives"]
    _, lib = codegen.compile_library({"f_derivatives": unit}, tag="test", mapped=True)
    f_all = NativeFunction(lib, "f_derivatives", unit, count=J * K)
    with pytest.raises(TypeError, match="not mapped"):
        NativeFunction(lib, "f_derivatives", unit)(*[np.zeros(unit.size_in(i))
                                                     for i in range(4)], count=2)
    rng = np.random.default_rng(3)
    X = np.tile([400.0, 0.05, 0.1, 0.0, 0.0, 0.0, 0.0, 0.1, 0.0], (J, 1))
    X += 0.01 * rng.standard_normal(X.shape) * np.maximum(np.abs(X), 1.0)
    U = np.repeat(X[:, :, None], K, axis=2) * (1.0 + 1e-3 * rng.standard_normal((J, nx, K)))
    node_t = disc.node_times.reshape(1, J * K)
    node_u = disc.node_inputs.transpose(1, 0, 2).reshape(m.nu, J * K)
    Uflat = U.transpose(1, 0, 2).reshape(nx, J * K)
    full = f_all(node_t, Uflat, prob.p0, node_u)
    part = f_all(node_t[:, 5:12], Uflat[:, 5:12], prob.p0, node_u[:, 5:12], count=7)
    for a, b in zip(full, part):
        np.testing.assert_array_equal(a[:, 5 * a.shape[1] // (J * K):12 * a.shape[1] // (J * K)], b)
    system = fixed_point_system(m, disc.quad.integration)
    only = np.zeros(J, dtype=bool)
    only[[1, 4, J - 1]] = True
    stepped, _ = newton_fixed_point_step(f_all, node_t, node_u, system, disc.h, X, U,
                                         prob.p0, only)
    every, _ = newton_fixed_point_step(f_all, node_t, node_u, system, disc.h, X, U, prob.p0)
    np.testing.assert_array_equal(stepped[~only], U[~only])
    np.testing.assert_allclose(stepped[only], every[only], rtol=1e-13, atol=0)
    assert np.any(stepped[only] != U[only])


@needs_cc
def test_picard_of_some_intervals_is_their_rows_of_the_whole_application():
    """The settle's damped trials evaluate only the intervals they move."""
    from picard_casadi.estimate import build_setup

    prob = pc.problem("fa18-roll-ail", seed=0)
    m, o = prob.model, prob.options
    setup = build_setup(m, prob.experiments, prob.p0, T=o["T"], n=o["n"], nodes=7,
                        scheme="chebyshev", weights=np.ones(m.ny),
                        p_bounds=(np.full(m.np, -np.inf), np.full(m.np, np.inf)),
                        x_bounds=(np.full(m.nx, -np.inf), np.full(m.nx, np.inf)),
                        estimate_x0=True, codegen=True)
    tr = setup.tr
    assert tr.native
    idx = np.array([0, 3, 4, setup.disc.n_intervals - 1])
    whole = tr.picard(setup.X0, setup.U0, prob.p0)
    np.testing.assert_array_equal(
        tr.picard_of(setup.X0, setup.U0, prob.p0, idx, setup.U0[idx]), whole[idx])


@needs_cc
def test_compiled_iteration_calls_numpy_buffers_with_the_same_result():
    """The iteration takes the NumPy-buffer path when compiled; the estimate is
    the one through casadi.external's DM interface, to round-off (the buffers'
    memory order can change which BLAS kernel NumPy picks: 1 ulp seen on vdp)."""
    from picard_casadi.transcription.functions import Transcription

    prob = pc.problem("vdp", seed=0)
    res_native = prob.estimate("picard-gn", codegen=True, uncertainty=False)
    original = Transcription.__init__

    def without_native(self, *a, **k):
        original(self, *a, **k)
        self._native_of = None
        self._fixed_point._functions = {n: self.functions[n]  # a dict: no .native
                                        for n in self.functions}
    try:
        Transcription.__init__ = without_native
        res_dm = prob.estimate("picard-gn", codegen=True, uncertainty=False)
    finally:
        Transcription.__init__ = original
    assert res_native.iterations == res_dm.iterations
    np.testing.assert_allclose(res_native.p, res_dm.p, rtol=1e-13, atol=0)


def test_estimate_is_the_same_with_and_without_codegen():
    prob = pc.problem("lotka-volterra", seed=0)
    a = prob.estimate("picard-gn", codegen=False, uncertainty=False)
    b = prob.estimate("picard-gn", codegen=True, uncertainty=False)
    assert a.success and b.success
    assert np.max(np.abs(a.p / b.p - 1.0)) < 1e-8


@needs_cc
def test_ipopt_nlp_is_compiled_and_agrees_with_the_virtual_machine():
    prob = pc.problem("lotka-volterra", seed=0)
    a = prob.estimate("ipopt", codegen=False, uncertainty=False)
    before = codegen.STATS.snapshot()
    b = prob.estimate("ipopt", codegen=True, uncertainty=False)
    after = codegen.STATS.snapshot()
    assert after["compiled"] > before["compiled"]  # the NLP itself, no fallback
    assert not any("virtual machine" in w for w in b.warnings), b.warnings
    assert a.success and b.success
    assert np.max(np.abs(a.p / b.p - 1.0)) < 1e-8


@needs_cc
def test_another_data_set_of_the_same_shape_reuses_the_compiled_nlp():
    """The unknowns' scales come from the data; as NLP parameters (not constants
    of the graph) they leave one compiled NLP for every data set of a shape."""
    a = pc.problem("lotka-volterra", seed=0).estimate("ipopt", codegen=True, uncertainty=False)
    before = codegen.STATS.snapshot()
    b = pc.problem("lotka-volterra", seed=1).estimate("ipopt", codegen=True, uncertainty=False)
    after = codegen.STATS.snapshot()
    assert a.success and b.success
    assert a.settings["intervals"] == b.settings["intervals"]
    assert not np.allclose(a.p, b.p)  # another data set, another estimate
    assert after["compiled"] == before["compiled"]
    assert after["cache_hits"] > before["cache_hits"]


@needs_cc
def test_second_identical_run_compiles_nothing():
    prob = pc.problem("vdp", seed=0)
    prob.estimate("picard-gn", codegen=True, uncertainty=False)
    before = codegen.STATS.snapshot()
    res = prob.estimate("picard-gn", codegen=True, uncertainty=False)
    after = codegen.STATS.snapshot()
    assert res.settings["compiled"] is True
    assert after["compiled"] == before["compiled"]
    assert after["cache_hits"] > before["cache_hits"]


@needs_cc
def test_truncated_library_is_detected_and_rebuilt():
    x = ca.SX.sym("x", 3)
    f = ca.Function("f", [x], [ca.sin(x) * 2])
    codegen.compile_functions({"f": f}, tag="trunc")
    libs = list(codegen.cache_dir().glob("pc_trunc_*.so"))
    assert len(libs) == 1
    data = libs[0].read_bytes()
    libs[0].write_bytes(data[: len(data) // 3])  # truncate
    before = codegen.STATS.snapshot()
    g = codegen.compile_functions({"f": f}, tag="trunc")["f"]
    after = codegen.STATS.snapshot()
    assert after["rebuilt"] == before["rebuilt"] + 1
    assert np.allclose(np.asarray(g([0.1, 0.2, 0.3])).ravel(), 2 * np.sin([0.1, 0.2, 0.3]))


def test_codegen_true_without_a_compiler_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/compiler")
    # the message names the $CC that does not exist, not "none found"
    with pytest.raises(pc.CodegenError, match=r"needs a C compiler: \$CC is "
                                               r"'/nonexistent/compiler', which is not a program"):
        pc.problem("vdp").estimate("picard-gn", codegen=True)
    monkeypatch.delenv("CC")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(pc.CodegenError, match=r"needs a C compiler: no C compiler found"):
        pc.problem("vdp").estimate("picard-gn", codegen=True)


def test_auto_without_a_compiler_falls_back_and_says_so(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/compiler")
    monkeypatch.setattr(compiled_functions, "_NO_COMPILER_WARNED", False)
    with pytest.warns(RuntimeWarning, match=r"\$CC is '/nonexistent/compiler'.*virtual machine"):
        res = pc.problem("vdp").estimate("picard-gn", codegen="auto", uncertainty=False)
    assert res.success
    assert any("virtual machine" in w for w in res.warnings)
    # the settings say it too ("codegen": "auto" was all they said)
    assert res.settings["codegen"] == "auto" and res.settings["compiled"] is False


@needs_cc
def test_exported_c_example_compiles_and_matches_python(tmp_path):
    from picard_casadi.models import cmg

    model = cmg.build_model()
    u = np.arange(8.0) * 0.5
    point = {"t": 0.3, "x": cmg.X0_TRUE, "p": cmg.P_TRUE, "u": u}
    out = export_c(model, tmp_path / "export", nodes=7, T=0.2, example_point=point)
    cc = codegen.find_compiler()
    assert "CFLAGS ?= -O1" in (out / "Makefile").read_text()
    subprocess.run([cc, "-O1", "-o", "example", "example.c", "cmg.c", "-lm"], cwd=out,
                   check=True, capture_output=True)
    text = subprocess.run([str(out / "example")], capture_output=True, text=True,
                          check=True).stdout
    lines = dict(line.split(" ", 1) for line in text.strip().splitlines())
    rhs_c = np.array(lines["rhs"].split(), float)
    pu_c = np.array(lines["picard"].split(), float)
    funcs = exported_functions(model, nodes=7)
    rhs_py = np.asarray(funcs["cmg_rhs"](0.3, cmg.X0_TRUE, cmg.P_TRUE, u)).ravel()
    U = np.repeat(cmg.X0_TRUE[:, None], 7, axis=1)
    W = np.repeat(u[:, None], 7, axis=1)
    pu_py = np.asarray(funcs["cmg_picard"](cmg.X0_TRUE, U, cmg.P_TRUE, 0.3, 0.2, W)).ravel(order="F")
    assert np.max(np.abs(rhs_c - rhs_py)) <= 1e-12 * max(1, np.max(np.abs(rhs_py)))
    assert np.max(np.abs(pu_c - pu_py)) <= 1e-12 * max(1, np.max(np.abs(pu_py)))


def test_export_c_refuses_a_bad_interval_length_and_folder(tmp_path):
    # T = -1 wrote an example that integrated backwards; a folder under a file
    # raised NotADirectoryError from pathlib
    x, p = ca.SX.sym("x"), ca.SX.sym("p")
    model = pc.Model(x=x, p=p, rhs=-p * x, name="decay")
    for T in (-1.0, 0.0, float("nan"), "long"):
        with pytest.raises(ValueError, match=r"`T` must be a positive number"):
            export_c(model, tmp_path / "out", T=T)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match=r"`directory` .*afile.* cannot be created"):
        export_c(model, tmp_path / "afile" / "sub")
    assert not (tmp_path / "out").exists()


@needs_cc
def test_several_sources_compile_side_by_side_into_one_library(tmp_path):
    """IPOPT's NLP comes as one C file per function: compiled to objects in
    parallel, linked into one library that exports each; a failing source is
    a CodegenError and leaves no library."""
    x = ca.SX.sym("x")
    sources = []
    for name, expr in (("twice", 2 * x), ("square", x * x), ("cube", x ** 3)):
        gen = ca.CodeGenerator(f"{name}.c", {"with_header": False})
        gen.add(ca.Function(name, [x], [expr]))
        gen.generate(str(tmp_path) + os.sep)
        sources.append(tmp_path / f"{name}.c")
    cc = codegen.find_compiler()
    lib = tmp_path / "lib.so"
    codegen._compile_c(cc, sources, lib, tmp_path, "nlp")
    for name, value in (("twice", 6.0), ("square", 9.0), ("cube", 27.0)):
        assert float(ca.external(name, str(lib))(3.0)) == value
    (tmp_path / "broken.c").write_text("this is not C\n")
    broken = tmp_path / "broken.so"
    with pytest.raises(pc.CodegenError, match="the C compiler failed"):
        codegen._compile_c(cc, [*sources, tmp_path / "broken.c"], broken, tmp_path, "nlp")
    assert not broken.exists()
    assert not list(tmp_path.glob("broken.so.*.tmp"))


@needs_cc
@pytest.mark.parametrize("hessian", ["exact", "gauss-newton"])
def test_ipopt_nlp_compiles_on_an_empty_cache(tmp_path, monkeypatch, hessian):
    """The NLP written one file per function links (a user Hessian, hess_lag, is
    written once: the solver's own nlp_hess_l is left out) and solves as on the
    virtual machine."""
    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(codegen, "_PROBED", {})
    prob = pc.problem("vdp", seed=0)
    compiled = prob.estimate("ipopt", hessian=hessian, codegen=True, uncertainty=False)
    assert any(p.name.startswith("pc_nlp_") for p in (tmp_path / "cache").rglob("*.so"))
    vm = prob.estimate("ipopt", hessian=hessian, codegen=False, uncertainty=False)
    assert compiled.success and vm.success
    np.testing.assert_allclose(compiled.p, vm.p, rtol=1e-8)


def test_cache_at_holds_for_the_calling_thread_only(tmp_path, monkeypatch):
    import threading

    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path / "users"))
    both_inside = threading.Barrier(3, timeout=30)
    seen = {}

    def worker(name):
        with codegen.cache_at(tmp_path / name):
            both_inside.wait()  # the three threads are all inside or all waiting here
            seen[name] = codegen.cache_dir()
            both_inside.wait()

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    both_inside.wait()
    seen["main"] = codegen.cache_dir()  # while both workers are inside cache_at
    both_inside.wait()
    for t in threads:
        t.join()
    assert seen == {"a": tmp_path / "a", "b": tmp_path / "b", "main": tmp_path / "users"}
    assert os.environ["PICARD_CASADI_CACHE"] == str(tmp_path / "users")


@needs_cc
def test_cache_files_are_readable_as_the_umask_allows(tmp_path, monkeypatch):
    # mkstemp made every entry private to its owner: a cache shared between
    # users (a lab's, a CI's) loaded nothing for the others
    import stat

    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path / "cache"))
    old = os.umask(0o022)
    try:
        x = ca.SX.sym("x")
        codegen.compile_functions({"umask_probe": ca.Function("f", [x], [2 * x])},
                                  tag="umask")
    finally:
        os.umask(old)
    files = list((tmp_path / "cache").glob("pc_umask_*"))
    assert {f.suffix for f in files} == {".so", ".json"}
    for f in files:
        mode = stat.S_IMODE(f.stat().st_mode)
        assert mode & 0o044 == 0o044, (f.name, oct(mode))
        assert mode & 0o022 == 0
