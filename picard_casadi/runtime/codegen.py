"""Code generation: compile the iteration's CasADi functions to C, cached on disk.

Every ``casadi.Function`` evaluated inside the iteration (the mapped Picard
map, residuals, Jacobians, gradients, trajectories and point derivatives) is
generated to C with :class:`casadi.CodeGenerator`, compiled by the system C
compiler into a shared library, and loaded back with :func:`casadi.external`
and, for the calls inside the iteration, with :mod:`ctypes` as a
:class:`~picard_casadi.runtime.native.NativeFunction` that reads and writes NumPy
buffers (no DM conversion, measured 3.7 -> 0.2 ms for the F/A-18's
vector-field Jacobians).  A method never knows whether it calls generated
code or CasADi's virtual machine.  The IPOPT comparison compiles its NLP the same way
(:func:`compile_nlpsol`), so the comparison is fair.

Compiler and flags
------------------
Which compiler, which flags and how it runs: :mod:`picard_casadi.runtime.compiler`.
The functions of one estimate are compiled when first called
(:mod:`picard_casadi.runtime.compiled_functions`).

Cache
-----
One shared library per function set, in ``$PICARD_CASADI_CACHE`` or, by
default, ``$XDG_CACHE_HOME/picard_casadi`` (``~/.cache/picard_casadi``);
inside :func:`cache_at` (a study's fresh cache per problem), in the folder it
names, for the calling thread only.  The
key hashes the serialised functions, the compiler's identity and version,
the flags and the CasADi version, so a second run with the same model and
settings compiles nothing.  A library is written under a temporary name and
moved into place (``os.replace``), so two processes building the same entry
both end with a valid library; its SHA-256 is recorded beside it, and an
entry whose file is missing, truncated or altered is rebuilt, never loaded.

Announcing a compilation
------------------------
A cold cache means seconds to minutes of compiling before the first
iteration.  :func:`compilation_notice` installs a function that is called
once, with a one-line message, when a library is about to be compiled (the
cache was looked up and missed); the command line prints it.  Nothing is
called on a cache hit.

An unusable cache or compiler
-----------------------------
Before the first compilation of a process, :func:`probe` compiles a
one-line C file into the cache and loads it: that tests at once that the
cache folder can be created and written (``PICARD_CASADI_CACHE`` on a
read-only folder or on a regular file), that the compiler works (``CC=/bin/false``)
and that its libraries can be loaded.  Under ``codegen="auto"`` a failure
means CasADi's virtual machine, with a note in the result; under
``codegen=True`` it is a :class:`CodegenError` saying what failed and how to
fix it.  A compilation that fails later (a full disk, a compiler that gives
up on a large file) is handled the same way, function by function.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import casadi as ca

from ..errors import CodegenError
from .compiler import (build_folder, command_words, compile_flags, compiler_failed,
                       compiler_identity, file_identity, find_compiler, finish_compiler,
                       missing_compiler_message, processor_identity, run_compiler,
                       start_compiler, stop_compiler)
from .interrupts import deferred_interrupt, interrupted
from .mapped_source import chain_source, map_source, wrapped_unit

__all__ = [
    "cache_dir", "compile_functions", "compile_nlpsol", "compile_library",
    "CodegenStats", "STATS", "clear_cache", "NlpTooLarge",
    "MAX_NLP_SOURCE_BYTES", "probe", "compilation_notice", "COMPILE_NOTICE", "cache_at",
    "compile_c_source",
]

#: What :func:`compilation_notice` reports before the first compilation.
COMPILE_NOTICE = "compiling the model's functions to C (first run only; cached) ..."

# CasADi writes an NLP with all its derivative functions into one C file.
# What costs the compiler is code, not data: the sparsity patterns of a large
# Jacobian are tens of MB of constant arrays that gcc reads in seconds (CMG:
# 59 MB of C, 21 s at -O2), while an NLP expanded to SX is straight-line code
# (CMG: 265 MB) that gcc does not finish.  Above this much code (lines other
# than the constant arrays) the NLP is not compiled.
MAX_NLP_SOURCE_BYTES = 8_000_000


class NlpTooLarge(CodegenError):
    """The generated NLP source is too large to compile (see MAX_NLP_SOURCE_BYTES)."""

# Part of every cache key: bump when the generated code's layout changes.
CODEGEN_VERSION = "5"
_LOCK = threading.Lock()
_ENTRY_LOCKS: dict[str, threading.Lock] = {}


def _entry_lock(key: str) -> threading.Lock:
    """The lock of one cache entry: threads compile different entries at once."""
    with _LOCK:
        return _ENTRY_LOCKS.setdefault(key, threading.Lock())


@dataclass
class CodegenStats:
    """Counters of this process (for tests and benchmarks).

    Attributes
    ----------
    compiled : int
        Libraries compiled.
    cache_hits : int
        Libraries loaded from the cache without compiling.
    rebuilt : int
        Cache entries found corrupt or stale and compiled again.
    compile_seconds : float
        Time spent generating and compiling.
    prepare_seconds : float
        Time spent making functions callable: compiling, or on a cache hit
        serialising them for the key and loading the library (about 35 ms
        for a mapped CMG function).  Methods count it as build time.
    """

    compiled: int = 0
    cache_hits: int = 0
    rebuilt: int = 0
    compile_seconds: float = 0.0
    prepare_seconds: float = 0.0

    def snapshot(self) -> dict[str, float]:
        """The counters as a dict."""
        return dict(compiled=self.compiled, cache_hits=self.cache_hits,
                    rebuilt=self.rebuilt, compile_seconds=self.compile_seconds,
                    prepare_seconds=self.prepare_seconds)


STATS = CodegenStats()

# The function compilation_notice installed, and whether it was called yet.
_NOTICE: list[Any] = [None, False]


@contextlib.contextmanager
def compilation_notice(notify: Callable[[str], Any] | None) -> Iterator[None]:
    """Call ``notify(COMPILE_NOTICE)`` before the first compilation inside the block.

    Parameters
    ----------
    notify : callable or None
        Called at most once, in this process, when a library is not in the
        cache and is about to be compiled (not on a cache hit).  It runs with
        the real stdout/stderr even inside a call whose native output is
        captured.
    """
    saved = list(_NOTICE)
    _NOTICE[:] = [notify, False]
    try:
        yield
    finally:
        _NOTICE[:] = saved


def _announce() -> None:
    """Before a compilation: the installed notice, once."""
    notify, done = _NOTICE
    if notify is None or done:
        return
    _NOTICE[1] = True
    from .native_output import released_output

    with released_output():
        notify(COMPILE_NOTICE)


# the folder cache_at() set in this thread (context), over the environment's
_CACHE_OVERRIDE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "picard_casadi_cache", default=None)


@contextlib.contextmanager
def cache_at(path: str | os.PathLike[str]) -> Iterator[None]:
    """Use the folder ``path`` as the code cache inside the block.

    Only the calling thread (its context) sees it; ``$PICARD_CASADI_CACHE``
    is left alone.  So a study on a thread pool can give each problem its own
    fresh cache without one row's setting leaking into another's, or into the
    process after the study (as setting the environment variable did).
    """
    token = _CACHE_OVERRIDE.set(os.fspath(path))
    try:
        yield
    finally:
        _CACHE_OVERRIDE.reset(token)


def cache_path() -> Path:
    override = _CACHE_OVERRIDE.get()
    if override:
        return Path(override)
    env = os.environ.get("PICARD_CASADI_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "picard_casadi"


def cache_dir() -> Path:
    """The cache directory (created if needed).

    Raises
    ------
    CodegenError
        When it cannot be created or is not a folder, naming it and the fix.
    """
    path = cache_path()
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not path.is_dir():
            raise NotADirectoryError(f"{str(path)!r} is not a folder")
    except OSError as err:
        raise CodegenError(_cache_problem(path, err)) from None
    return path


def _cache_problem(path: Path, err: OSError) -> str:
    why = err.strerror or str(err)
    if isinstance(err, (FileExistsError, NotADirectoryError)):
        why = "a file is in the way, it is not a folder"
    return (f"the code cache {str(path)!r} cannot be used ({why}); set PICARD_CASADI_CACHE "
            "to a writable folder, or use codegen=False")


_PROBED: dict[tuple[str, str, str], tuple[str, bool]] = {}


def probe() -> tuple[str, bool]:
    """Check that code generation can work in this process (see the module doc).

    Returns
    -------
    problem : str
        ``''`` when the compiler works and the cache folder can be used,
        else why not (with the fix).
    read_only : bool
        The cache folder exists and can be read but not written: its
        libraries can be loaded, nothing new can be compiled into it.

    The answer is remembered per compiler, flags and cache folder.
    """
    cc = find_compiler()
    if cc is None:
        return missing_compiler_message(), False
    key = (cc, " ".join(compile_flags()), str(cache_path()))
    if key not in _PROBED:
        _PROBED[key] = _probe(cc)
    return _PROBED[key]


def _probe(cc: str) -> tuple[str, bool]:
    try:
        directory = cache_dir()
    except CodegenError as err:
        return str(err), False
    try:
        fd, name = tempfile.mkstemp(prefix="pc_probe_", suffix=".tmp", dir=directory)
        os.close(fd)
        os.unlink(name)
        writable = True
    except OSError:
        writable = False
    try:
        with tempfile.TemporaryDirectory(prefix="picard_probe_") as tmp:
            src = Path(tmp) / "pc_probe.c"
            src.write_text("int pc_probe(void) { return 42; }\n")
            # built where the real libraries go, so that loading is tested there too
            fd, lib_name = tempfile.mkstemp(prefix="pc_probe_", suffix=".so",
                                            dir=directory if writable else tmp)
            os.close(fd)
            lib = Path(lib_name)
            try:
                out = subprocess.run([*command_words(cc), *compile_flags(), str(src), "-o", str(lib)],
                                     capture_output=True, text=True, cwd=tmp, timeout=120)
                if out.returncode != 0:
                    detail = (out.stderr or out.stdout).strip().splitlines()
                    flags = os.environ.get("PICARD_CASADI_CFLAGS")
                    fix = (f"check $PICARD_CASADI_CFLAGS ({flags!r}, which replaces the "
                           "optimisation flags) or unset it" if flags else
                           "set $CC to a working compiler")
                    return (f"the C compiler {cc!r} does not work (exit status "
                            f"{out.returncode}{': ' + detail[-1][:200] if detail else ''}); "
                            f"{fix}, or use codegen=False"), False
                if lib.stat().st_size == 0:
                    return (f"the C compiler {cc!r} produced no library from a one-line "
                            "file; set $CC to a working compiler, or use codegen=False"), False
                import ctypes

                try:
                    if ctypes.CDLL(str(lib)).pc_probe() != 42:
                        raise OSError("wrong result")
                except (OSError, AttributeError) as err:
                    if "++" in Path(cc).name and "undefined symbol" in str(err):
                        return (f"$CC is {cc!r}, a C++ compiler (it renames the symbols "
                                "the package looks up); set $CC to a C compiler (gcc, clang, "
                                "cc), or use codegen=False"), False
                    return (f"libraries compiled into {str(lib.parent)!r} cannot be loaded "
                            f"({err}); set PICARD_CASADI_CACHE to another folder, or use "
                            "codegen=False"), False
            finally:
                lib.unlink(missing_ok=True)
    except OSError as err:
        if err.filename in (cc, command_words(cc)[0]):
            return f"the C compiler {cc!r} cannot be run ({err.strerror}); set $CC", False
        return _cache_problem(directory, err), False
    except subprocess.TimeoutExpired:
        return f"the C compiler {cc!r} did not finish a one-line file within 120 s", False
    return "", not writable


def clear_cache() -> int:
    """Delete every cached library; returns the number of files removed."""
    n = 0
    for f in cache_dir().glob("pc_*"):
        f.unlink(missing_ok=True)
        n += 1
    return n


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# libraries whose checksum this process verified, with their files' identity
# then: an unchanged file is not hashed again (a warm estimate loads three to
# eight libraries, cmg's up to megabytes)
_VERIFIED: dict[str, tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]] = {}
_VERIFIED_LOCK = threading.Lock()


def _valid_entry(lib: Path, meta: Path) -> bool:
    if not (lib.is_file() and meta.is_file()):
        return False
    idents = (file_identity(lib), file_identity(meta))
    with _VERIFIED_LOCK:
        if None not in idents and _VERIFIED.get(str(lib)) == idents:
            return True
    try:
        info = json.loads(meta.read_text())
        valid = info.get("sha256") == _sha256(lib) and info.get("size") == lib.stat().st_size
    except (OSError, ValueError):
        return False
    if valid and None not in idents:
        with _VERIFIED_LOCK:
            _VERIFIED[str(lib)] = idents
    return valid


def _umask() -> int:
    """The process's file-creation mask (read without changing it where the
    system tells it; else set and restored under the module lock)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _publish(path: Path | str, executable: bool = False) -> None:
    """Give a finished cache file the permissions a new file gets here
    (``0666`` or ``0777`` less the umask): ``mkstemp`` makes it private to
    its owner, and a cache shared between users (a lab's, a CI's) could not
    be read by the others."""
    os.chmod(path, (0o777 if executable else 0o666) & ~_umask())


def _compile_c(cc: str, sources: list[Path], lib: Path, workdir: Path,
               kind: str = "functions") -> None:
    """Compile C sources into ``lib`` atomically (temporary name, then replace).

    Several sources are compiled to objects side by side (one compiler per
    core, the largest first) and then linked: IPOPT's NLP comes as one file
    per function (:func:`compile_nlpsol`).
    """
    fd, tmp_name = tempfile.mkstemp(prefix=lib.name + ".", suffix=".tmp", dir=lib.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        if len(sources) == 1:
            run_compiler([*command_words(cc), *compile_flags(kind), str(sources[0]), "-o", str(tmp),
                           "-lm"], workdir)
        else:
            objects = _compile_objects(cc, sources, workdir, kind)
            run_compiler([*command_words(cc), *compile_flags(kind), *map(str, objects), "-o", str(tmp),
                           "-lm"],
                          workdir)
        _publish(tmp, executable=True)
        os.replace(tmp, lib)
    finally:
        with deferred_interrupt():  # a second Ctrl-C must not leave the temporary file
            tmp.unlink(missing_ok=True)


def _compile_objects(cc: str, sources: list[Path], workdir: Path, kind: str) -> list[Path]:
    """Each source compiled to an object file, ``os.cpu_count()`` compilers at a time."""
    flags = [f for f in compile_flags(kind) if f != "-shared"] + ["-c"]
    queue = sorted(sources, key=lambda src: src.stat().st_size, reverse=True)
    jobs = max(1, min(os.cpu_count() or 1, len(queue)))
    running: list[tuple[subprocess.Popen, list[str]]] = []
    objects = []
    try:
        while queue or running:
            while queue and len(running) < jobs:
                src = queue.pop(0)
                obj = src.with_suffix(".o")
                cmd = [*command_words(cc), *flags, str(src), "-o", str(obj)]
                running.append((start_compiler(cmd, workdir), cmd))
                objects.append(obj)
            proc, cmd = running[0]  # listed until it is done: a Ctrl-C stops it too
            err = finish_compiler(proc)
            running.pop(0)
            if proc.returncode != 0:
                raise compiler_failed(cmd, err)
    finally:
        for proc, _ in running:  # an error or Ctrl-C: no compiler is left running
            stop_compiler(proc)
    return objects


def _write_meta(lib: Path, meta: Path, extra: dict[str, Any]) -> None:
    fd, tmp_name = tempfile.mkstemp(prefix=meta.name + ".", suffix=".tmp", dir=meta.parent)
    with os.fdopen(fd, "w") as fh:
        json.dump({"sha256": _sha256(lib), "size": lib.stat().st_size, **extra}, fh)
    _publish(tmp_name)
    os.replace(tmp_name, meta)


def _key(parts: list[str | bytes], cc: str, kind: str = "functions") -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    for extra in (compiler_identity(cc), " ".join(compile_flags(kind)), ca.__version__,
                  CODEGEN_VERSION):
        h.update(extra.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def require_compiler() -> str:
    cc = find_compiler()
    if cc is None:
        raise CodegenError(
            f"codegen=True needs a C compiler: {missing_compiler_message()}; use codegen=False or "
            "'auto' to run on CasADi's virtual machine"
        )
    return cc


def compile_functions(funcs: Mapping[str, ca.Function], tag: str = "fn") -> dict[str, ca.Function]:
    """Compile functions into one cached shared library and load them.

    Parameters
    ----------
    funcs : mapping of name -> casadi.Function
        The names become C symbols (letters, digits, underscores).
    tag : str
        A short label in the library's file name.

    Returns
    -------
    dict of name -> casadi.Function (``casadi.external``)

    Raises
    ------
    CodegenError
        Without a compiler, or when compilation fails.
    """
    return compile_library(funcs, tag)[0]


def compile_library(funcs: Mapping[str, ca.Function], tag: str = "fn", *,
                    mapped: bool = False) -> tuple[dict[str, ca.Function], Path]:
    """As :func:`compile_functions`, also returning the shared library's path.

    With ``mapped=True`` every function ``name`` also gets a C symbol
    ``{name}_map`` that calls it a run-time number of times
    (:func:`map_source`; :class:`~picard_casadi.runtime.native.NativeFunction` with
    ``count``), and ``{name}_chain``, the same loop with an output fed to
    the next call (:func:`chain_source`; ``NativeFunction.chain``).
    """
    t_start = time.perf_counter()
    try:
        return _compile_functions(funcs, tag, mapped)
    except OSError as err:  # the cache folder (writes, renames), not the compiler
        raise CodegenError(_cache_problem(cache_path(), err)) from None
    finally:
        STATS.prepare_seconds += time.perf_counter() - t_start


def _compile_functions(funcs: Mapping[str, ca.Function], tag: str, mapped: bool = False
                       ) -> tuple[dict[str, ca.Function], Path]:
    cc = require_compiler()
    names = sorted(funcs)
    parts: list[str | bytes] = ["mapped-2" if mapped else "plain"]  # 2: with _chain
    for n in names:
        parts.append(n)
        parts.append(funcs[n].serialize())
    key = _key(parts, cc)
    directory = cache_dir()
    lib = directory / f"pc_{tag}_{key}.so"
    meta = directory / f"pc_{tag}_{key}.json"
    with _entry_lock(key):
        loaded = _load_if_valid(lib, meta, names)
        if loaded is not None:
            STATS.cache_hits += 1
            return loaded, lib
        stale = lib.exists() or meta.exists()
        _announce()
        t0 = time.perf_counter()
        with build_folder() as tmp:
            cname = f"pc_{tag}_{key}"
            gen = ca.CodeGenerator(cname + ".c", {"with_header": False, "mex": False})
            wrapped = {n: wrapped_unit(n, funcs[n]) for n in names}
            for n in names:
                gen.add(wrapped[n])
            gen.generate(tmp + os.sep)
            source = Path(tmp) / (cname + ".c")
            if mapped:
                with open(source, "a") as fh:
                    for n in names:
                        fh.write(map_source(n, wrapped[n]))
                        fh.write(chain_source(n, wrapped[n]))
            _compile_c(cc, [source], lib, Path(tmp))
        _write_meta(lib, meta, {"functions": names, "casadi": ca.__version__})
        STATS.compile_seconds += time.perf_counter() - t0
        STATS.compiled += 1
        STATS.rebuilt += int(stale)
        loaded = _load_if_valid(lib, meta, names)
        if loaded is None:
            raise CodegenError(f"the freshly compiled library {lib} could not be loaded")
        return loaded, lib


def compile_c_source(source: str, tag: str) -> Path:
    """Compile a hand-written C file into a cached shared library for this processor.

    The numeric kernels (:mod:`picard_casadi.transcription.kernels`) are compiled
    with the ``"kernel"`` flags (``-O3 -march=native``), or the portable
    ``-O3`` where the compiler refuses those; the cache key holds the source,
    the compiler, the flags and the processor's identity.

    Parameters
    ----------
    source : str
        The C file.
    tag : str
        A short label in the library's file name.

    Returns
    -------
    Path
        The shared library (load it with :mod:`ctypes`).

    Raises
    ------
    CodegenError
        Without a compiler, when compilation fails or the cache cannot be written.
    """
    t_start = time.perf_counter()
    try:
        return _compile_c_source(source, tag)
    except OSError as err:
        raise CodegenError(_cache_problem(cache_path(), err)) from None
    finally:
        STATS.prepare_seconds += time.perf_counter() - t_start


def _compile_c_source(source: str, tag: str) -> Path:
    cc = require_compiler()
    key = _key(["c-source", source, processor_identity()], cc, "kernel")
    directory = cache_dir()
    lib = directory / f"pc_{tag}_{key}.so"
    meta = directory / f"pc_{tag}_{key}.json"
    with _entry_lock(key):
        if _valid_entry(lib, meta):
            STATS.cache_hits += 1
            return lib
        stale = lib.exists() or meta.exists()
        _announce()
        t0 = time.perf_counter()
        with build_folder() as tmp:
            path = Path(tmp) / f"pc_{tag}.c"
            path.write_text(source)
            try:
                _compile_c(cc, [path], lib, Path(tmp), kind="kernel")
            except CodegenError:
                if interrupted():
                    raise
                _compile_c(cc, [path], lib, Path(tmp), kind="kernel-portable")
        _write_meta(lib, meta, {"source": tag})
        STATS.compile_seconds += time.perf_counter() - t0
        STATS.compiled += 1
        STATS.rebuilt += int(stale)
        return lib


def _load_if_valid(lib: Path, meta: Path, names: list[str]) -> dict[str, ca.Function] | None:
    if not _valid_entry(lib, meta):
        return None
    try:
        return {n: ca.external(n, str(lib)) for n in names}
    except RuntimeError:
        return None


def _code_bytes(source: Path) -> int:
    """Bytes of a generated C file outside its constant arrays and comments."""
    total = 0
    in_array = False
    with open(source, "rb") as fh:
        for line in fh:
            if line.startswith(b"static const casadi_"):
                in_array = True
            if in_array:
                in_array = not line.rstrip().endswith(b";")
            elif not line.lstrip().startswith(b"/*"):
                total += len(line)
    return total


def _nlp_sources(sym: ca.Function, key: str, folder: str,
                 user_hessian: bool = False) -> list[Path]:
    """The NLP functions of the symbolic solver ``sym``, one C file each.

    What ``generate_dependencies`` writes as one file (the oracle ``nlp`` and
    ``nlp_f``, ``nlp_g``, ``nlp_grad``, ``nlp_grad_f``, ``nlp_jac_g``,
    ``nlp_hess_l``), written per function so that they compile side by side
    (:func:`_compile_objects`) and link into the same library.  With
    ``user_hessian`` (``hess_lag`` given) ``nlp_hess_l`` is left out: the
    caller writes it from the user's function, and a second definition would
    not link.
    """
    sources = []
    for fname in ["nlp", *sym.get_function()]:
        if user_hessian and fname == "nlp_hess_l":
            continue
        f = sym.oracle() if fname == "nlp" else sym.get_function(fname)
        gen = ca.CodeGenerator(f"pc_nlp_{key}_{fname}.c", {"with_header": False})
        gen.add(f)
        gen.generate(folder + os.sep)
        sources.append(Path(folder) / f"pc_nlp_{key}_{fname}.c")
    return sources


def compile_nlpsol(name: str, solver: str, nlp: dict[str, Any], opts: dict[str, Any],
                   derived: Mapping[str, Callable[[], ca.Function]] | None = None,
                   derived_key: str = "") -> ca.Function:
    """An ``nlpsol`` whose NLP functions are generated, compiled and cached.

    The cache key comes from what determines the NLP (its functions ``f``
    and ``g`` serialised, and the options), before anything else is built: a
    cache hit loads the library and runs (cmg: the symbolic solver with its
    exact Hessian took 26 s to build, on every call, before the key was
    known).  On a miss the solver is built symbolically, its NLP functions
    are written one C file each (:func:`_nlp_sources`) and compiled side by
    side into one library, and the solver is built from the library.

    ``derived`` holds options of ``nlpsol`` that are derivative functions of
    the NLP (``jac_g``, ``hess_lag``), built only on a miss: they follow
    from the NLP, so the key holds ``derived_key`` (what identifies their
    construction) instead of their serialisation.
    """
    try:
        return _compile_nlpsol(name, solver, nlp, opts, derived or {}, derived_key)
    except OSError as err:  # the cache folder (writes, renames), not the compiler
        raise CodegenError(_cache_problem(cache_path(), err)) from None


def _compile_nlpsol(name: str, solver: str, nlp: dict[str, Any], opts: dict[str, Any],
                    derived: Mapping[str, Callable[[], ca.Function]],
                    derived_key: str) -> ca.Function:
    """:func:`compile_nlpsol` (see there); an ``OSError`` is the cache's."""
    cc = require_compiler()
    # run-time only: the iteration callback (its repr names a memory address)
    symbolic = {k: v for k, v in opts.items() if k not in ("ipopt", "iteration_callback")}
    oracle = ca.Function("nlp_oracle", [nlp["x"], nlp["p"]], [nlp["f"], nlp["g"]])
    extra = json.dumps({k: str(v) for k, v in symbolic.items()}, sort_keys=True)
    # the user's derivative functions, by content (their str is only a signature)
    given = [opts[k].serialize() for k in ("hess_lag", "jac_g") if k in opts]
    key = _key([oracle.serialize(), extra, *given, " ".join(sorted(derived)), derived_key],
               cc, "nlp")
    directory = cache_dir()
    lib = directory / f"pc_nlp_{key}.so"
    meta = directory / f"pc_nlp_{key}.json"
    too_large = directory / f"pc_nlp_{key}.too-large"
    with _entry_lock(key):
        if too_large.exists():
            raise NlpTooLarge(too_large.read_text())
        if _valid_entry(lib, meta):
            STATS.cache_hits += 1
        else:
            stale = lib.exists() or meta.exists()
            _announce()
            t0 = time.perf_counter()
            built = {k: build() for k, build in derived.items()}
            opts = opts | built
            sym = ca.nlpsol(name, solver, nlp,
                            symbolic | built | {"ipopt": {"print_level": 0, "sb": "yes"}})
            with build_folder() as tmp:
                sources = _nlp_sources(sym, key, tmp, user_hessian="hess_lag" in opts)
                size = sum(_code_bytes(src) for src in sources)
                if size > MAX_NLP_SOURCE_BYTES:
                    why = (f"the generated NLP has {size / 1e6:.0f} MB of C code (limit "
                           f"{MAX_NLP_SOURCE_BYTES / 1e6:.0f} MB); it is not compiled")
                    too_large.write_text(why)
                    raise NlpTooLarge(why)
                if "hess_lag" in opts:
                    # the user's Hessian: the solver looks it up in the library
                    # under the name nlp_hess_l
                    h = opts["hess_lag"]
                    args = h.mx_in()
                    hess = ca.Function("nlp_hess_l", args, h.call(args),
                                       ["x", "p", "lam_f", "lam_g"], ["triu_hess_gamma_x_x"])
                    gen = ca.CodeGenerator(f"pc_nlp_hess_{key}.c", {"with_header": False})
                    gen.add(hess)
                    gen.generate(tmp + os.sep)
                    sources.append(Path(tmp) / f"pc_nlp_hess_{key}.c")
                _compile_c(cc, sources, lib, Path(tmp), "nlp")
            _write_meta(lib, meta, {"nlp": name})
            STATS.compile_seconds += time.perf_counter() - t0
            STATS.compiled += 1
            STATS.rebuilt += int(stale)
    run_opts = {k: v for k, v in opts.items() if k not in ("expand", "hess_lag", "jac_g")}
    return ca.nlpsol(name, solver, str(lib), run_opts)


