"""The fixed-point solve in generated C agrees with the NumPy path it replaces."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import picard_casadi as pc
from picard_casadi.runtime import codegen
from picard_casadi.errors import CodegenError
from picard_casadi.transcription.kernels import (MAX_ORDER, IterationKernels, kernel_loader,
                                              kernel_source)
from picard_casadi.transcription.fixed_point_system import FixedPointSystem, fixed_point_matrix
from picard_casadi.methods.least_squares import compress_rows

pytestmark = pytest.mark.skipif(codegen.find_compiler() is None, reason="no C compiler")


def _kernel(A, nx, explicit=(), sinks=False, max_rhs=6, pattern=None):
    source = kernel_source(A, nx, np.array(explicit, dtype=int), sinks, max_rhs, pattern)
    return IterationKernels(codegen.compile_c_source(source, "test_fixed_point"),
                            A.shape[0], nx)


def _case(rng, J, K, nx, explicit, sinks, pattern=None, first_node_fixed=True):
    A = 0.3 * rng.standard_normal((K, K))
    if first_node_fixed:
        A[0] = 0.0
    h = rng.uniform(0.05, 0.3, J)
    Fx = rng.standard_normal((J, K, nx, nx))
    E = np.array(explicit, dtype=int)
    if pattern is not None:
        Fx *= pattern
    if E.size:
        Fx[np.ix_(range(J), range(K), E, E)] = 0.0
        if sinks:
            Fx[:, :, :, E] = 0.0
    return A, h, Fx


@pytest.mark.parametrize("first_node_fixed", [True, False])
@pytest.mark.parametrize("nx, explicit, sinks", [
    (15, [3, 4, 5, 6], False),   # cmg's gimbal angles
    (6, [0, 2, 4], False),
    (9, [8], True),              # the F/A-18's heading
    (5, [], False),              # nothing eliminated
])
def test_kernel_equals_the_numpy_solve(first_node_fixed, nx, explicit, sinks, tmp_path,
                                       monkeypatch):
    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path))
    rng = np.random.default_rng(nx)
    J, K, width = 7, 6, 6
    A, h, Fx = _case(rng, J, K, nx, explicit, sinks, first_node_fixed=first_node_fixed)
    kernel = _kernel(A, nx, explicit, sinks, max_rhs=width)
    numpy_path = FixedPointSystem(A, np.array(explicit, dtype=int), sinks)
    # one column (a Newton step) and the kernel's full width (the sensitivities)
    for c in (1, width):
        rhs = rng.standard_normal((J, K * nx, c))
        reference = np.linalg.solve(fixed_point_matrix(A, h, Fx), rhs)
        assert np.max(np.abs(numpy_path.solve(h, Fx, rhs) - reference)) <= 1e-12 * np.abs(
            reference).max()
        got = kernel.solve(h, Fx, rhs)
        assert np.max(np.abs(got - reference)) <= 1e-12 * np.abs(reference).max()
    assert not kernel.handles(Fx, width - 1)


def test_structural_zeros_are_skipped_without_changing_the_solution(tmp_path, monkeypatch):
    # cmg's pattern: each gimbal angle's derivative is one rate (4 of f_x[E, R]'s 44)
    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path))
    model = pc.problem("cmg", seed=0).model
    pattern = np.asarray(model.jacobian_pattern, dtype=bool)
    explicit = [3, 4, 5, 6]
    rng = np.random.default_rng(3)
    A, h, Fx = _case(rng, 5, 9, 15, explicit, False, pattern=pattern)
    rhs = rng.standard_normal((5, 9 * 15, 18))
    reference = np.linalg.solve(fixed_point_matrix(A, h, Fx), rhs)
    kernel = _kernel(A, 15, explicit, max_rhs=18, pattern=pattern)
    assert np.max(np.abs(kernel.solve(h, Fx, rhs) - reference)) <= 1e-12 * np.abs(
        reference).max()
    # a nonzero outside the pattern would be left out: the pattern is used, not ignored
    Fx[:, :, 3, 0] = 1.0
    reference = np.linalg.solve(fixed_point_matrix(A, h, Fx), rhs)
    assert np.max(np.abs(kernel.solve(h, Fx, rhs) - reference)) > 1e-6


def test_a_singular_interval_raises_and_nan_propagates(singular_fixed_point_case, tmp_path,
                                                        monkeypatch):
    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path))
    A, h, Fx, rhs = singular_fixed_point_case
    nx = Fx.shape[2]
    for explicit in ([0, 1], []):
        kernel = _kernel(A, nx, explicit, max_rhs=2)
        with pytest.raises(np.linalg.LinAlgError):
            kernel.solve(h, Fx, rhs)
        h_ok = np.array([0.1, 0.2, 0.1])
        Fx_nan = Fx.copy()
        Fx_nan[1] = np.nan
        out = kernel.solve(h_ok, Fx_nan, rhs)
        assert np.all(np.isnan(out[1, nx:])) and np.all(np.isfinite(out[[0, 2]]))


def test_shapes_it_was_not_generated_for_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path))
    rng = np.random.default_rng(0)
    A, h, Fx = _case(rng, 2, 4, 3, [], False)
    kernel = _kernel(A, 3, max_rhs=2)
    with pytest.raises(ValueError, match="right-hand sides"):
        kernel.solve(h, Fx, np.ones((2, 12, 3)))
    # the system falls back to NumPy for those
    system = FixedPointSystem(A)
    system.use_kernel(lambda: kernel)
    rhs = rng.standard_normal((2, 12, 3))
    assert np.allclose(system.solve(h, Fx, rhs),
                       np.linalg.solve(fixed_point_matrix(A, h, Fx), rhs), atol=1e-12)


def test_loader_leaves_large_matrices_to_lapack_and_notes_a_failed_compile(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path))
    rng = np.random.default_rng(1)
    K = 9
    A = rng.standard_normal((K, K))
    A[0] = 0.0
    big = FixedPointSystem(A)
    nx_big = MAX_ORDER // (K - 1) + 1
    assert kernel_loader(big, nx_big, 4, None)() is None

    class Functions:
        strict = False
        notes: list[str] = []

    def failing(source, tag):
        raise CodegenError("the C compiler failed (stand-in)")

    monkeypatch.setattr(codegen, "compile_c_source", failing)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert kernel_loader(FixedPointSystem(A), 3, 4, Functions)() is None
    assert "dense linear algebra (fixed-point solves, row compression) runs on NumPy" \
        in Functions.notes[0]
    assert any("stand-in" in str(w.message) for w in caught)
    Functions.strict = True
    with pytest.raises(CodegenError):
        kernel_loader(FixedPointSystem(A), 3, 4, Functions)()


def test_sensitivities_and_node_derivatives_equal_numpy(tmp_path, monkeypatch):
    # f_x and f_p as the compiled f_derivatives returns them: transposed views
    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path))
    rng = np.random.default_rng(5)
    J, K, nx, np_ = 6, 9, 15, 3
    explicit = [3, 4, 5, 6]
    A, h, Fx = _case(rng, J, K, nx, explicit, False)
    Fx_view = np.ascontiguousarray(Fx.transpose(2, 0, 1, 3)).transpose(1, 2, 0, 3)
    Fp = np.ascontiguousarray(rng.standard_normal((nx, J, K, np_))).transpose(1, 2, 0, 3)
    assert not Fx_view.flags.c_contiguous and not Fp.flags.c_contiguous
    nz = nx + np_
    rhs = np.zeros((J, K, nx, nz))
    rhs[..., :nx] = np.eye(nx)
    rhs[..., nx:] = (h[:, None, None] * np.matmul(A, Fp.reshape(J, K, nx * np_))).reshape(
        J, K, nx, np_)
    S_ref = np.linalg.solve(fixed_point_matrix(A, h, Fx), rhs.reshape(J, K * nx, nz))
    dF_ref = np.matmul(Fx, S_ref.reshape(J, K, nx, nz))
    dF_ref[..., nx:] += Fp
    kernel = _kernel(A, nx, explicit, max_rhs=nz)
    dF = np.full((J, K + 1, nx, nz), 7.0)
    S = kernel.sensitivities(h, Fx_view, Fp, dF)
    assert np.max(np.abs(S - S_ref)) <= 1e-12 * np.abs(S_ref).max()
    assert np.max(np.abs(dF[:, :K] - dF_ref)) <= 1e-12 * np.abs(dF_ref).max()
    assert np.all(dF[:, K] == 7.0)  # the node after the K written is left alone
    # the solve reads the strided f_x too
    assert np.max(np.abs(kernel.solve(h, Fx_view, rhs.reshape(J, K * nx, nz)) - S_ref)) \
        <= 1e-12 * np.abs(S_ref).max()
    with pytest.raises(ValueError, match="contiguous"):
        kernel.sensitivities(h, Fx, Fp, np.zeros((J, K, nz, nx)).transpose(0, 1, 3, 2))


def test_estimates_with_and_without_the_kernel_agree(monkeypatch):
    # the same run with generated code (the kernel's solves) and on the
    # virtual machine (NumPy's)
    calls = []
    for name in ("solve", "sensitivities"):
        original = getattr(IterationKernels, name)

        def counted(self, *args, _original=original, _name=name):
            calls.append(_name)
            return _original(self, *args)

        monkeypatch.setattr(IterationKernels, name, counted)
    prob = pc.problem("lotka-volterra", seed=0)
    compiled = prob.estimate("picard-gn", codegen=True, uncertainty=False)
    assert "sensitivities" in calls
    n_calls = len(calls)
    vm = prob.estimate("picard-gn", codegen=False, uncertainty=False)
    assert len(calls) == n_calls
    assert compiled.success and vm.success
    assert compiled.iterations == vm.iterations
    assert np.allclose(compiled.p, vm.p, rtol=1e-9, atol=0)


def _compression_case(seed: int, nx: int, np_: int):
    """A random generator and kernels for ``nx`` states and ``np_`` parameters."""
    rng = np.random.default_rng(seed)
    A = 0.3 * rng.standard_normal((4, 4))
    A[0] = 0.0
    return rng, _kernel(A, nx, max_rhs=nx + np_)


def _factor(compressed):
    """``[Jx Jp r]`` of :func:`compress_rows`'s ``(r, Jx, Jp)``."""
    r, Jx, Jp = compressed
    return np.concatenate([Jx, Jp, r[..., None]], axis=2)


def test_row_compression_keeps_every_least_squares_problem(tmp_path, monkeypatch):
    # the factor is unique up to row signs; what the step uses is R^T R
    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path))
    J, m, nx, np_ = 5, 40, 6, 2
    rng, kernels = _compression_case(7, nx, np_)
    rows = rng.standard_normal((J, m, nx + np_))
    rows[1, :, 2] = 0.0          # a zero column: its reflection is the identity
    rows[2, 5:, 0] = 0.0         # a column already reduced below the diagonal
    Jx, Jp = rows[:, :, :nx], rows[:, :, nx:]  # views with a row stride nx + np
    r = rng.standard_normal((J, m))
    for got, ref in zip(compress_rows(r, Jx, Jp, kernels), compress_rows(r, Jx, Jp)):
        assert got.shape == ref.shape
    Rk = _factor(compress_rows(r, Jx, Jp, kernels))
    gram = np.matmul(_factor((r, Jx, Jp)).transpose(0, 2, 1), _factor((r, Jx, Jp)))
    assert np.max(np.abs(np.matmul(Rk.transpose(0, 2, 1), Rk) - gram)) <= 1e-12 * np.abs(
        gram).max()
    assert np.allclose(np.tril(Rk, -1), 0.0)
    # fewer rows than columns: unchanged, as NumPy's
    short = compress_rows(r[:, :3], Jx[:, :3], Jp[:, :3], kernels)
    assert short[0] is not None and short[1].shape == (J, 3, nx)


def test_row_compression_does_not_overflow_where_numpy_does_not(tmp_path, monkeypatch):
    # an unstable trajectory's sensitivities reach 1e148: their squares overflow
    monkeypatch.setenv("PICARD_CASADI_CACHE", str(tmp_path))
    J, m, nx, np_ = 2, 30, 3, 1
    rng, kernels = _compression_case(8, nx, np_)
    for scale in (1e160, 1e-160):
        rows = scale * rng.standard_normal((J, m, nx + np_))
        r = scale * rng.standard_normal((J, m))
        Rk = _factor(compress_rows(r, rows[:, :, :nx], rows[:, :, nx:], kernels))
        Rn = _factor(compress_rows(r, rows[:, :, :nx], rows[:, :, nx:]))
        assert np.all(np.isfinite(Rk))
        assert np.allclose(np.abs(Rk), np.abs(Rn), rtol=1e-10, atol=0), scale
    rows[0, 3, 1] = np.nan
    got = compress_rows(r, rows[:, :, :nx], rows[:, :, nx:], kernels)
    assert np.isnan(got[1][0]).any() and np.all(np.isfinite(got[1][1]))
