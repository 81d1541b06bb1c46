"""Executors: independent estimates in other processes, or on a cluster.

Multistart (``estimate(..., multistart=N)``), :func:`~picard_casadi.compare`,
the coverage study and the profile likelihood are lists of independent
tasks.  Each accepts ``executor=``, any :class:`concurrent.futures.Executor`
(a :class:`~concurrent.futures.ProcessPoolExecutor`, a Dask client's
``client.get_executor()``; Ray's ``concurrent.futures`` executor has the same
interface, untested here), or ``n_jobs=k`` for a local pool of ``k``
processes that is created for the call and shut down after it.  Without
either the tasks run one after another in this process, through the same
code.

What crosses the process boundary
---------------------------------
The problem (model, experiments, options) is serialised once per call
(:func:`encode`) and sent with every task as bytes; a worker decodes it once
and keeps it (:func:`decoded`), so the starts it runs share one model object
and the functions built from it (:func:`picard_casadi.estimation.setup.interval_functions`
builds them once per model and shape; compiled code is loaded from the code
cache, ``$PICARD_CASADI_CACHE``).  Rules for a problem to run elsewhere:

- a :class:`~picard_casadi.Model` always pickles (its SX graph travels as a
  ``casadi.Function``);
- an experiment's inputs ``u`` must pickle: an array, a module-level
  function, a :func:`functools.partial` of one, or an instance of a
  module-level class.  Lambdas and functions defined inside functions pickle
  only with ``cloudpickle`` (installed with ``pip install picard_casadi[dask]``;
  used automatically when present); otherwise a :class:`TypeError` names the
  experiment before any work starts.  The same holds for a ``callback``
  (which then runs in the worker);
- functions defined in the script that is run (``__main__``) need the
  ``if __name__ == "__main__":`` guard around the script's work, since a
  local pool starts its processes with ``spawn`` (a fresh interpreter that
  imports the script; ``fork`` is unsafe with threads).

Results come back without their attached model (``_predictor`` and the
discretisation close over CasADi functions;
:mod:`picard_casadi.estimation.portable` re-attaches the caller's own).
Warnings raised in a worker are re-issued here, in task order.

Each task runs with one BLAS thread (:mod:`picard_casadi.runtime.threads`), so ``k``
workers use ``k`` cores.  Ctrl-C cancels the tasks not yet started and, for
a pool created here, stops its processes.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import hashlib
import multiprocessing
import os
import pickle
import sys
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

import numpy as np

from .user_warnings import warn_user

__all__ = ["executor_for", "run_tasks", "encode", "decoded", "Encoded",
           "stop_in_a_starting_worker"]

# Decoded problems a worker keeps (each is a model, its data and options).
_KEEP = 4


# ---------------------------------------------------------------------- executors
def _check_executor(executor: Any) -> None:
    if not callable(getattr(executor, "submit", None)):
        raise TypeError(
            f"`executor` must be a concurrent.futures.Executor (something with submit(fn, "
            f"*args)), e.g. ProcessPoolExecutor() or a Dask client's get_executor(); got "
            f"{type(executor).__name__}"
        )


def _workers(n_jobs: Any) -> int:
    if isinstance(n_jobs, (bool, np.bool_)) or not isinstance(n_jobs, (int, np.integer)):
        raise ValueError(f"`n_jobs` must be a positive integer or -1 (every core), got {n_jobs!r}")
    if n_jobs == -1:
        return os.cpu_count() or 1
    if n_jobs < 1:
        raise ValueError(f"`n_jobs` must be a positive integer or -1 (every core), got {n_jobs!r}")
    return int(n_jobs)


@contextlib.contextmanager
def executor_for(executor: Any = None, n_jobs: Any = None, n_tasks: int | None = None
                 ) -> Iterator[Any]:
    """The executor to run tasks on: the given one, a local pool, or ``None`` (serial).

    Parameters
    ----------
    executor : concurrent.futures.Executor, optional
        Used as given and left running.
    n_jobs : int, optional
        A local process pool of this many workers (at most ``n_tasks``),
        shut down on leaving the block; ``-1`` is one per core, ``1`` runs
        serially in this process.
    n_tasks : int, optional
        How many tasks will run (no more workers than that are started).

    Raises
    ------
    ValueError
        When both are given, or ``n_jobs`` is not a positive integer or -1.
    TypeError
        When ``executor`` has no ``submit``.
    """
    if executor is not None and n_jobs is not None:
        raise ValueError("pass `executor` or `n_jobs`, not both (n_jobs=k creates a local "
                         "pool of k processes; executor= uses yours)")
    if executor is not None:
        _check_executor(executor)
        yield executor
        return
    k = 1 if n_jobs is None else _workers(n_jobs)
    if n_tasks is not None:
        k = min(k, max(int(n_tasks), 1))
    if k <= 1:
        yield None
        return
    pool = cf.ProcessPoolExecutor(max_workers=k, mp_context=multiprocessing.get_context("spawn"))
    try:
        yield pool
    except BaseException:
        _stop(pool)
        raise
    else:
        pool.shutdown(wait=True)


def _stop(pool: cf.ProcessPoolExecutor) -> None:
    """Cancel what has not started and stop the pool's processes now."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        with contextlib.suppress(Exception):
            proc.terminate()
    for proc in processes:
        with contextlib.suppress(Exception):
            proc.join(timeout=5)


def run_tasks(fn: Callable[..., Any], tasks: Sequence[tuple], executor: Any = None) -> list[Any]:
    """``[fn(*args) for args in tasks]``, on ``executor`` when given, in task order.

    ``fn`` must be a module-level function (it is sent by reference).  A task
    that raises stops the others (those not started are cancelled) and the
    first failure in task order is raised here.  Warnings a worker raised
    are re-issued here.

    Parameters
    ----------
    fn : callable
    tasks : sequence of tuple
        The arguments of each call.
    executor : concurrent.futures.Executor, optional
        ``None`` runs the calls here, one after another.

    Returns
    -------
    list
        The values, in the order of ``tasks``.
    """
    if executor is None:
        return [fn(*args) for args in tasks]
    try:
        return _run_on(executor, fn, tasks)
    except BrokenProcessPool as error:
        if not _script_unguarded():
            raise
        raise RuntimeError(
            "the process pool broke (a worker process died at its start or during a "
            "task): a pool's processes import the script that was run again "
            "(spawn), so a script that starts the work at import must put it under "
            "`if __name__ == \"__main__\":`; otherwise a worker crashed or ran out "
            "of memory") from error


def _run_on(executor: Any, fn: Callable[..., Any], tasks: Sequence[tuple]) -> list[Any]:
    """:func:`run_tasks` on an executor."""
    futures = [executor.submit(_call_in_worker, fn, args) for args in tasks]
    try:
        cf.wait(futures, return_when=cf.FIRST_EXCEPTION)
        failed = [f for f in futures if f.done() and not f.cancelled() and f.exception()]
        if failed:
            for f in futures:
                f.cancel()
            raise failed[0].exception()
        out = []
        for f in futures:
            value, caught = f.result()
            for message, category in caught:
                warn_user(message, category)
            out.append(value)
        return out
    except BaseException:
        for f in futures:
            f.cancel()
        raise


def stop_in_a_starting_worker(what: str) -> None:
    """Stop a spawned worker at once where it runs ``what`` while still
    importing the user's script (no ``if __name__ == "__main__":``): each
    worker ran the script's fit again and printed its tracebacks (109 lines
    before the pool's own message); now one line each, and the pool's
    message says the rest."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise SystemExit(f"picard_casadi: {what} was called in a worker process importing "
                         "the script again (spawn); stopped: put the script's work under "
                         '`if __name__ == "__main__":`')


def _script_unguarded() -> bool:
    """Whether the script being run is a file, which a spawned process imports
    again: the likely cause of a pool that breaks (no file, no such cause)."""
    main = sys.modules.get("__main__")
    return bool(getattr(main, "__file__", None))


def _call_in_worker(fn: Callable[..., Any], args: tuple) -> tuple[Any, list[tuple[str, type]]]:
    """Run ``fn(*args)`` with one BLAS thread, recording its warnings to send back."""
    from .threads import solver_threads

    with warnings.catch_warnings(record=True) as caught, solver_threads():
        warnings.simplefilter("always")
        value = fn(*args)
    out = []
    for w in caught:
        category = w.category
        try:
            pickle.loads(pickle.dumps(category))
        except Exception:  # a warning class defined where the caller cannot import it
            category = UserWarning
        out.append((str(w.message), category))
    return value, out


# ---------------------------------------------------------------------- payload
@dataclass(frozen=True)
class Encoded:
    """Serialised task data and its hash (workers decode it once per hash)."""

    key: str
    blob: bytes


def _dumps(obj: Any) -> bytes:
    try:
        import cloudpickle
    except ImportError:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def encode(parts: dict[str, Any]) -> Encoded:
    """Serialise what every task needs, once; a :class:`TypeError` names what does not pickle.

    Parameters
    ----------
    parts : dict
        Named parts (``"model"``, ``"experiments"``, ``"kwargs"``, ...).
        A list of experiments is checked one by one, and a dict of keyword
        arguments key by key, so the error names the culprit.

    Returns
    -------
    Encoded
    """
    try:
        blob = _dumps(parts)
    except Exception as err:  # pickling raises many types (PicklingError, AttributeError, ...)
        raise TypeError(_unpicklable(parts, err)) from err
    return Encoded(hashlib.sha256(blob).hexdigest(), blob)


def _unpicklable(parts: dict[str, Any], err: Exception) -> str:
    def fails(obj: Any) -> bool:
        try:
            _dumps(obj)
        except Exception:
            return True
        return False

    culprit, is_input = "the task data", False
    for name, value in parts.items():
        if not fails(value):
            continue
        culprit = f"`{name}`"
        if name == "experiments":
            for e in value:
                if fails(e):
                    is_input = fails(e.u)
                    culprit = (f"experiment {e.name!r} (its input `u`, a "
                               f"{type(e.u).__name__})" if is_input else f"experiment {e.name!r}")
                    break
        elif isinstance(value, dict):
            for k, v in value.items():
                if fails(v):
                    culprit = f"`{k}`"
                    break
        break
    return (
        f"{culprit} cannot be sent to another process ({type(err).__name__}: {err}). "
        + ("Use an array of inputs, a" if is_input else "Use a")
        + " module-level function or a functools.partial of one; "
        "lambdas and nested functions need cloudpickle (pip install picard_casadi[dask]). "
        "Or run without executor/n_jobs."
    )


_DECODED: OrderedDict[str, Any] = OrderedDict()
_DECODED_LOCK = threading.Lock()


def decoded(data: Encoded) -> Any:
    """``data`` decoded, once per process: later tasks of the same call share the objects."""
    with _DECODED_LOCK:
        if data.key in _DECODED:
            _DECODED.move_to_end(data.key)
            return _DECODED[data.key]
    value = pickle.loads(data.blob)
    with _DECODED_LOCK:
        value = _DECODED.setdefault(data.key, value)
        while len(_DECODED) > _KEEP:
            _DECODED.popitem(last=False)
    return value
