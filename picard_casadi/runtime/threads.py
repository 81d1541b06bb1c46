"""BLAS threads during a solve: one, unless the user says otherwise.

The linear algebra of an estimate is many small dense problems (one
fixed-point matrix per interval, a condensed least-squares problem of a few
dozen unknowns).  Multi-threaded BLAS does not speed these up, and its
threads spin while they wait, most of all beside other work on a machine of
few cores (``docs/performance.md``, "BLAS threads").  So :func:`solver_threads` limits the BLAS
libraries loaded in the process (threadpoolctl) to
``$PICARD_CASADI_BLAS_THREADS`` threads (default 1; ``0`` leaves them alone)
while ``estimate`` runs, and restores them afterwards.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = ["solver_threads", "with_solver_threads", "blas_thread_limit"]

F = TypeVar("F", bound=Callable[..., Any])


def blas_thread_limit() -> int | None:
    """The BLAS thread limit for solves (``None``: no limit)."""
    text = os.environ.get("PICARD_CASADI_BLAS_THREADS", "1").strip()
    try:
        value = int(text)
    except ValueError:
        raise ValueError(
            f"PICARD_CASADI_BLAS_THREADS must be a whole number of threads (0: no limit), "
            f"got {text!r}") from None
    if value < 0:
        raise ValueError(f"PICARD_CASADI_BLAS_THREADS must be >= 0, got {value}")
    return value or None


@contextlib.contextmanager
def solver_threads() -> Iterator[None]:
    """Limit the BLAS threads for the duration of the block (see the module doc)."""
    limit = blas_thread_limit()
    if limit is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=limit, user_api="blas"):
        yield


def with_solver_threads(fn: F) -> F:
    """Decorator: run ``fn`` inside :func:`solver_threads`."""

    @functools.wraps(fn)
    def limited(*args: Any, **kwargs: Any) -> Any:
        with solver_threads():
            return fn(*args, **kwargs)

    return limited  # type: ignore[return-value]
