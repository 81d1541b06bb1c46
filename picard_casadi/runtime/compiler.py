"""The system C compiler: which one, with which flags, run so that Ctrl-C stops it.

The compiler is ``$CC`` if set (a program, or words as make reads them:
``ccache gcc``, ``gcc -m64``), else the first of ``cc``, ``gcc``, ``clang``
on the ``PATH``; ``$PICARD_CASADI_CFLAGS`` is split as a shell would.
Flags: ``-O1 -fPIC -shared`` for the Picard methods' functions, ``-O2`` for
IPOPT's NLP, ``-O3 -march=native`` for the numeric kernels written as C
here (``-O3`` alone where the compiler refuses ``-march=native``)
(:data:`DEFAULT_OPT_FLAGS`; ``$PICARD_CASADI_CFLAGS`` replaces the
optimisation flags of CasADi's code, not the kernels', which are fast only
vectorised).  Not ``-O3`` for CasADi's code: it is long straight-line
arithmetic where ``-O3`` compiles much longer for little gain.  No
``-ffast-math`` and no contraction into FMA anywhere
(``-ffp-contract=off``), so generated code, the virtual machine and other
processors agree to round-off.

Every compiler runs in its own process group, registered while it runs, so
that a Ctrl-C stops them all (:func:`stop_compilers`).  So does a SIGTERM
(``timeout``, a batch scheduler, ``kill``) to a process that left SIGTERM's
action at its default, while it builds (:func:`build_folder`): the build
folder is removed and the process exits with status 143, as it would have.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from ..errors import CodegenError
from .interrupts import interrupted

#: optimisation flags by what is compiled: the Picard methods' per-interval
#: functions compile a third faster at -O1 and run as fast (cmg, the paper's
#: algorithm: 32.2 s -> 21.8 s, 3.6 vs 3.8 ms per iteration); IPOPT's NLP runs
#: 30 % slower at -O1 (cmg: 1.24 s against 0.95 s per iteration), so it keeps -O2
#: hand-written numeric kernels (:mod:`picard_casadi.transcription.kernels`) are
#: short loops that only pay when unrolled and vectorised for this processor
#: (the cmg fixed-point solve: 7.5 ms at -O2, 2.1 ms at -O3 -march=native);
#: a compiler that refuses -march=native compiles them with "kernel-portable".
#: Every set has -ffp-contract=off: a compiler may otherwise fuse a * b + c
#: into one rounding where the processor has FMA (x86-64 with -march=native,
#: every aarch64), so the same call gave results that differed in the last
#: bits between machines, enough to change the path of an ill-conditioned
#: fit; without contraction (and without -ffast-math) vector width does not
#: change a result, so the compiled code computes the same on any machine
DEFAULT_OPT_FLAGS = {"functions": ("-O1", "-ffp-contract=off"),
                     "nlp": ("-O2", "-ffp-contract=off"),
                     "kernel": ("-O3", "-march=native", "-ffp-contract=off"),
                     "kernel-portable": ("-O3", "-ffp-contract=off")}


def find_compiler() -> str | None:
    """Path of the C compiler to use, or None when there is none.

    ``$CC`` may carry words before or after the program, as make's does
    (``ccache gcc``, ``gcc -m64``): the first word must be a program, and the
    returned command keeps the rest (:func:`command_words` splits it again).
    """
    cc = os.environ.get("CC")
    if cc:
        found = shutil.which(cc) or (cc if Path(cc).exists() else None)
        if found:
            return found
        try:
            words = shlex.split(cc)
        except ValueError:
            return None
        program = shutil.which(words[0]) if len(words) > 1 else None
        return shlex.join([program, *words[1:]]) if program else None
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            return path
    return None


def command_words(cc: str) -> list[str]:
    """The compiler's command words: ``cc`` itself where it is a program's
    path, else its words (a ``$CC`` such as ``ccache gcc``)."""
    return [cc] if Path(cc).exists() else shlex.split(cc)


# compiler -> (its file's identity, what --version said): every cache key
# holds the compiler's version, and running it took 1.7 ms per key, three to
# eight keys per estimate (a warm call)
_IDENTITIES: dict[str, tuple[tuple[int, int, int], str]] = {}


def file_identity(path: str | os.PathLike[str]) -> tuple[int, int, int] | None:
    """``(inode, size, mtime_ns)`` of a file, or None if it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def compiler_identity(cc: str) -> str:
    """``cc`` and the first line of its ``--version``, asked once per process
    and compiler file (again if the file changes)."""
    ident = file_identity(cc)
    known = _IDENTITIES.get(cc)
    if ident is not None and known is not None and known[0] == ident:
        return known[1]
    try:
        out = subprocess.run([*command_words(cc), "--version"], capture_output=True, text=True,
                             timeout=30)
        text = f"{cc}|{out.stdout.splitlines()[0] if out.stdout else ''}"
    except (OSError, subprocess.SubprocessError):
        return cc
    if ident is not None:
        _IDENTITIES[cc] = (ident, text)
    return text


def compile_flags(kind: str = "functions") -> list[str]:
    # the numeric kernels are fast only vectorised: $PICARD_CASADI_CFLAGS is
    # for CasADi's code (-O1 made the cmg fixed-point kernel slower than NumPy)
    opt = None if kind.startswith("kernel") else os.environ.get("PICARD_CASADI_CFLAGS")
    # split as a shell would: -I"/a b" is one flag
    return (shlex.split(opt) if opt else list(DEFAULT_OPT_FLAGS[kind])) + ["-fPIC", "-shared"]


# the compilers running now, in any thread: a Ctrl-C stops them all
_RUNNING_LOCK = threading.Lock()
_COMPILERS: set[subprocess.Popen] = set()


#: seconds a stopped compiler gets to remove its temporary files before it is killed
STOP_GRACE = 2.0


def start_compiler(cmd: list[str], workdir: Path) -> subprocess.Popen:
    """The compiler ``cmd`` started in a process group of its own, so that
    stopping it stops the passes it runs (``cc1``, ``as``) too.  None starts
    after a Ctrl-C (a thread that was generating C when it came)."""
    if interrupted():
        raise KeyboardInterrupt
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=workdir, start_new_session=hasattr(os, "killpg"))
    with _RUNNING_LOCK:
        _COMPILERS.add(proc)
    return proc


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, sig)
        else:  # pragma: no cover - no process groups (Windows)
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass


def stop_compiler(proc: subprocess.Popen) -> None:
    """Stop a compiler and every pass it started: SIGTERM (the driver then
    removes its temporary files), SIGKILL after :data:`STOP_GRACE` seconds.
    (A killed driver alone left ``cc1`` running and a 30 MB ``/tmp/cc*.s``.)"""
    with _RUNNING_LOCK:
        _COMPILERS.discard(proc)
    _signal_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_GRACE)
    except subprocess.TimeoutExpired:
        _signal_group(proc, signal.SIGKILL)
        proc.wait()
    _signal_group(proc, signal.SIGKILL)  # a pass the driver left behind


def finish_compiler(proc: subprocess.Popen) -> str:
    """Wait for a compiler; its standard error.  Interrupted or failing, the
    compiler is stopped (:func:`stop_compiler`) before the exception goes on."""
    try:
        _, err = proc.communicate()
    except BaseException:
        stop_compiler(proc)
        raise
    with _RUNNING_LOCK:
        _COMPILERS.discard(proc)
    return err


def stop_compilers() -> None:
    """Stop every compiler this process runs (a Ctrl-C while threads compile)."""
    with _RUNNING_LOCK:
        procs = list(_COMPILERS)
    for proc in procs:
        stop_compiler(proc)


def run_compiler(cmd: list[str], workdir: Path) -> None:
    proc = start_compiler(cmd, workdir)
    err = finish_compiler(proc)
    if proc.returncode != 0:
        raise compiler_failed(cmd, err)


def missing_compiler_message() -> str:
    """Why there is no compiler: ``$CC`` names none, or none is installed."""
    cc = os.environ.get("CC")
    if cc:
        return (f"$CC is {cc!r}, which is not a program on this machine (set $CC to the "
                "compiler's name or path, or unset it to use cc, gcc or clang)")
    return "no C compiler found (install gcc or clang, or set $CC)"


@functools.lru_cache(maxsize=1)
def processor_identity() -> str:
    """What a library compiled for this processor (``-march=native``) depends
    on: the processor's model and instruction-set flags, so that a cache
    shared between machines never loads a library built for another one.
    Read once per process (every kernel lookup asks)."""
    try:
        with open("/proc/cpuinfo") as fh:
            lines = [line for line in fh if line.startswith(("model name", "flags", "Features"))]
        if lines:
            return "".join(dict.fromkeys(lines))
    except OSError:
        pass
    return f"{platform.machine()}|{platform.processor()}"


def compiler_failed(cmd: list[str], stderr: str) -> CodegenError:
    return CodegenError(f"the C compiler failed ({' '.join(cmd[:3])} ...):\n{stderr[-2000:]}")


@contextlib.contextmanager
def build_folder() -> Iterator[str]:
    """A temporary folder for generated C and its objects, removed on leaving.

    A SIGTERM while it is open, to a process that left SIGTERM's action at
    its default (which ends a process without clean-up), stops every
    compiler (:func:`stop_compilers`) and unwinds as ``SystemExit(143)``, so
    the folder is removed too.  Before, ``timeout`` stopping a script left a
    ``cc`` running for minutes after it, and 24-273 MB folders in ``/tmp``.
    Only the main thread can set the handler; an application's own handler,
    or one already set by an enclosing build, is left alone.
    """
    guard = (threading.current_thread() is threading.main_thread()
             and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)

    def terminated(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second one ends it at once
        stop_compilers()
        raise SystemExit(128 + signum)

    if guard:
        signal.signal(signal.SIGTERM, terminated)
    try:
        with tempfile.TemporaryDirectory(prefix="picard_cg_") as tmp:
            yield tmp
    finally:
        if guard and signal.getsignal(signal.SIGTERM) is terminated:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
