"""The functions of one estimate, compiled when first called.

:func:`backend_for` turns ``estimate(codegen=...)`` into a backend:
:class:`CodegenBackend` compiles (or loads from the cache,
:mod:`picard_casadi.runtime.codegen`) each function of a transcription the
first time it is called, as :class:`LazyCompiled`; under ``codegen="auto"``
a function that cannot be compiled runs on CasADi's virtual machine, with a
note in the result.
"""

from __future__ import annotations

import contextvars
import os
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import casadi as ca

from ..errors import CodegenError
from . import codegen as cache
from .arguments import as_codegen
from .codegen import STATS, compile_library
from .compiler import stop_compilers
from .interrupts import interrupted, reraise_if_interrupted
from .native import NativeFunction
from .user_warnings import warn_user

_NO_COMPILER_WARNED = False


class CodegenBackend:
    """Turns a set of mapped functions into compiled ones, one library per function.

    The backend receives each function as ``(unit, count)``: the function of
    one interval (or node, or sample) and how many times it is mapped.  Only
    the unit is compiled (with a C loop over a run-time count,
    :func:`map_source`), so the libraries do not depend on the number of
    intervals: a refined mesh, another data set or another experiment count
    of the same model loads them from the cache.  One library per function
    keeps a method from compiling functions it never calls (the Jacobian
    through ``P^n`` of the penalty variant, say): functions are compiled on
    first use.

    Parameters
    ----------
    strict : bool
        ``True`` (``codegen=True``): a compilation that fails is a
        :class:`CodegenError`.  ``False`` (``codegen="auto"``): that function
        runs on CasADi's virtual machine instead, with a note.
    """

    def __init__(self, strict: bool = True) -> None:
        cache.require_compiler()
        self.strict = strict

    def __call__(self, units: Mapping[str, tuple[ca.Function, int]]) -> Mapping[str, ca.Function]:
        return LazyCompiled(units, strict=self.strict)


class LazyCompiled(Mapping):
    """A mapping that compiles (or loads from the cache) each function on first use.

    Parameters
    ----------
    units : mapping of name -> (casadi.Function, int)
        Each function of one call and its map count.
    strict : bool
        See :class:`CodegenBackend`.

    Attributes
    ----------
    notes : list of str
        What fell back to the virtual machine, and why.
    """

    def __init__(self, units: Mapping[str, tuple[ca.Function, int]], strict: bool = True) -> None:
        self._source = dict(units)
        self._done: dict[str, ca.Function] = {}
        self._libraries: dict[str, Path | None] = {}
        self._native: dict[str, NativeFunction | None] = {}
        self.strict = strict
        self.notes: list[str] = []

    def _library(self, name: str, warn: bool = True) -> Path | None:
        """The compiled library of ``name``, or None where compiling failed under
        ``strict=False`` (then the function runs on the virtual machine, with a
        note, and a warning unless ``warn`` is False: :meth:`prefetch` warns
        for its threads from the caller's line)."""
        if name not in self._libraries:
            unit, _ = self._source[name]
            try:
                _, self._libraries[name] = compile_library({name: unit}, tag=name, mapped=True)
            except CodegenError as err:
                if interrupted():  # the compiler was stopped by a Ctrl-C, not failing
                    raise KeyboardInterrupt from None
                if self.strict:
                    raise
                note = f"codegen='auto': {name} runs on CasADi's virtual machine: {err}"
                self.notes.append(note)
                self._libraries[name] = None
                if warn:
                    warn_user(note, RuntimeWarning)
        return self._libraries[name]

    def __getitem__(self, name: str) -> ca.Function:
        """The compiled function mapped over its count (CasADi's ``map`` of the
        loaded unit), for calls with DMs."""
        if name not in self._done:
            unit, count = self._source[name]
            lib = self._library(name)
            self._done[name] = (unit if lib is None else ca.external(name, str(lib))).map(count)
        return self._done[name]

    def native(self, name: str) -> NativeFunction | None:
        """The compiled function ``name`` called on NumPy arrays over its count
        (:class:`~picard_casadi.runtime.native.NativeFunction`), or ``None`` if it
        cannot be (a sparse input, or it was not compiled)."""
        if name not in self._native:
            unit, count = self._source[name]
            lib = self._library(name)
            try:
                self._native[name] = (None if lib is None else
                                      NativeFunction(lib, name, unit, count=count))
            except (ValueError, AttributeError, OSError):
                self._native[name] = None
        return self._native[name]

    def __iter__(self):
        return iter(self._source)

    def __len__(self) -> int:
        return len(self._source)

    def compile_all(self) -> None:
        """Compile every function now (to time the build apart from the solve)."""
        self.prefetch(list(self._source))

    def prefetch(self, names: Iterable[str]) -> None:
        """Compile (or load) the functions ``names`` now, side by side.

        One compiler process per core: the paper's algorithm on cmg needs six
        libraries (0.2 to 1.9 MB of C each) that compiled one after another
        in 22 s.  The C is generated one function at a time (CasADi holds the
        GIL); the compilers run in parallel.  Names not in this mapping, or
        already compiled, are skipped.
        """
        todo = [n for n in dict.fromkeys(names) if n in self._source
                and n not in self._libraries]
        if len(todo) <= 1 or (os.cpu_count() or 1) == 1:
            for name in todo:
                self._library(name)
            return
        before = STATS.prepare_seconds
        t0 = time.perf_counter()
        errors: list[BaseException] = []
        noted = len(self.notes)
        with ThreadPoolExecutor(max_workers=min(len(todo), os.cpu_count() or 1),
                                thread_name_prefix="picard_cc") as pool:
            # each compile sees the caller's context (a cache_at() folder)
            futures = [pool.submit(contextvars.copy_context().run, self._library, n, False)
                       for n in todo]
            try:
                for future in futures:
                    try:
                        future.result()
                    except KeyboardInterrupt:
                        raise
                    except BaseException as err:  # noqa: BLE001 - re-raised below
                        errors.append(err)
            except KeyboardInterrupt:
                # a Ctrl-C: nothing more is started, the running compilers are
                # stopped (it used to wait for the whole queue: 5-9 s on cmg)
                for future in futures:
                    future.cancel()
                stop_compilers()
                raise
        # the threads' compile times overlap: the build took the wall time
        STATS.prepare_seconds = before + (time.perf_counter() - t0)
        reraise_if_interrupted()
        for note in self.notes[noted:]:
            warn_user(note, RuntimeWarning)
        if errors:
            raise errors[0]


def backend_for(codegen: bool | str) -> tuple[CodegenBackend | None, str]:
    """The backend for an ``estimate(codegen=...)`` value, and a note for the result.

    ``True`` requires a working compiler and cache (:class:`CodegenError`
    otherwise, saying which and how to fix it); ``"auto"`` generates when
    :func:`probe` finds both usable and otherwise runs on CasADi's virtual
    machine, warning once per process and cause; ``False`` uses the virtual
    machine.
    """
    global _NO_COMPILER_WARNED
    codegen = as_codegen(codegen)
    if codegen is False:
        return None, ""
    if codegen is True:
        cache.require_compiler()
        problem, read_only = cache.probe()
        if problem:
            raise CodegenError(f"codegen=True: {problem}")
        if read_only:
            raise CodegenError(
                f"codegen=True: the code cache {str(cache.cache_path())!r} is not writable; set "
                "PICARD_CASADI_CACHE to a writable folder, or use codegen='auto' to load the "
                "libraries it holds and run the rest on CasADi's virtual machine")
        return CodegenBackend(strict=True), ""
    if cache.find_compiler() is None:
        note = (f"codegen='auto': {cache.missing_compiler_message()}; running on CasADi's virtual "
                "machine")
        if not _NO_COMPILER_WARNED:
            warn_user(note, RuntimeWarning)
            _NO_COMPILER_WARNED = True
        return None, note
    problem, read_only = cache.probe()
    if problem:
        note = f"codegen='auto': {problem}; running on CasADi's virtual machine"
        if problem not in _WARNED:
            warn_user(note, RuntimeWarning)
            _WARNED.add(problem)
        return None, note
    if read_only:
        return CodegenBackend(strict=False), (
            f"codegen='auto': the code cache {str(cache.cache_path())!r} is read-only: the "
            "libraries it holds are used, other functions run on CasADi's virtual machine")
    return CodegenBackend(strict=False), ""


_WARNED: set[str] = set()
