"""Numerical breakdowns inside a method: an honest failure, never a raw exception.

A model that blows up for the current parameters (``x' = p x^2`` with
``p0 = 50``) makes the sensitivities along an interval chain overflow, and
LAPACK then fails on ``inf``/``NaN`` (``LinAlgError: SVD did not converge``,
with ``** On entry to DLASCL parameter number 4 had an illegal value``
printed by the Fortran library on the terminal); CVODES and IPOPT raise
CasADi ``RuntimeError`` s.  This module turns them into results:

* :func:`guarded_step` wraps a step rule's ``step``: LAPACK's prints are
  captured, a :class:`numpy.linalg.LinAlgError` becomes a failed step whose
  message says what broke and where (the first interval with non-finite
  values: experiment, interval and time span);
* :func:`guarded_solve` wraps a method's solve: whatever numerical error
  still escapes (CasADi ``RuntimeError``, ``LinAlgError``, overflow) becomes
  ``success=False`` with status ``"breakdown"``, and a Ctrl-C that CasADi
  disguised becomes :class:`KeyboardInterrupt` again
  (:mod:`picard_casadi.runtime.interrupts`).  The package's own errors (bad input,
  a failed compilation under ``codegen=True``) pass through unchanged.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import PicardError
from ..runtime.interrupts import (interrupt_checked, interruptible, is_interrupt,
                                  reraise_if_interrupted)
from ..runtime.native_output import captured_native_output
from .base import LoopOutcome, Setup, StepInfo

__all__ = ["describe_interval", "first_nonfinite_interval", "failed_step", "guarded_step",
           "guarded_solve", "NUMERICAL_ERRORS"]

# what numerical code raises when it breaks down (CasADi raises RuntimeError)
NUMERICAL_ERRORS = (np.linalg.LinAlgError, RuntimeError, FloatingPointError, OverflowError,
                    ZeroDivisionError)


def describe_interval(setup: Setup, j: int) -> str:
    """``"interval 12 of experiment 'a' (t = 0.11 to 0.12)"`` for global interval ``j``."""
    disc = setup.disc
    e = int(disc.exp_of[j])
    local = j - disc.intervals_of[e].start
    t0, t1 = float(disc.t0[j]), float(disc.t0[j] + disc.h[j])
    return (f"interval {local} of experiment {disc.experiments[e].name!r} "
            f"(t = {t0:.6g} to {t1:.6g})")


def first_nonfinite_interval(*arrays: np.ndarray, limit: float = np.inf) -> int | None:
    """The first index along axis 0 where any of ``arrays`` is not finite (or larger
    than ``limit`` in magnitude), or None."""
    with np.errstate(all="ignore"):
        if all(np.asarray(a).ndim == 0 or np.max(np.abs(a), initial=0.0) <= limit
               for a in arrays):
            return None  # the common case: one pass per array
    bad = None
    for a in arrays:
        a = np.asarray(a)
        if a.ndim == 0:
            continue
        with np.errstate(all="ignore"):
            rows = ~(np.abs(a.reshape(a.shape[0], -1)) <= limit).all(axis=1)
        if np.any(rows):
            k = int(np.flatnonzero(rows)[0])
            bad = k if bad is None else min(bad, k)
    return bad


#: how a non-finite linearisation with states exactly on an edge says so
AT_DOMAIN_EDGE = "exactly on the edge of the model's domain"


def _edge_culprits(setup: Setup, U: np.ndarray, p: np.ndarray, candidates: np.ndarray,
                   edge: np.ndarray, below: bool = False) -> np.ndarray:
    """Of the ``candidates`` (states on the lower ``edge`` of the domain, or
    below it where ``below``), those whose value there makes the derivatives
    of ``f`` not finite at a node where it is so (the other candidates moved
    just inside the edge there), and finite with it moved inside.  (A
    fractional order ``k A**n`` run to full conversion blamed the product B,
    which sits at 0 at the start and enters no power.)"""
    disc = setup.disc
    model = disc.model
    jac = model.f_jacobian
    inside = edge + 1e-6 * np.maximum(1.0, np.abs(edge))
    found = np.zeros_like(candidates)
    for i in np.flatnonzero(candidates):
        hits = np.argwhere(U[:, i, :] < edge[i] if below else U[:, i, :] == edge[i])
        if hits.size == 0:
            continue
        j, k = (int(v) for v in hits[0])
        xs = U[j, :, k].copy()
        others = candidates & (xs <= edge)
        others[i] = False
        xs[others] = inside[others]
        moved = xs.copy()
        moved[i] = inside[i]
        t, u = disc.node_times[j, k], disc.node_inputs[j, :, k]
        with np.errstate(all="ignore"):
            try:
                there, off = (np.asarray(jac(t, v, p, u)) for v in (xs, moved))
            except RuntimeError:
                continue
        found[i] = not np.all(np.isfinite(there)) and np.all(np.isfinite(off))
    return found


def not_finite_message(setup: Setup, U: np.ndarray, what: str,
                       p: np.ndarray | None = None) -> str:
    """The message of a step whose ``what`` (``"residuals or Jacobian"``) is not
    finite at the node values ``U`` ``(J, nx, K)``.

    Where states sit exactly on a finite edge of the model's domain (0, or
    ``x_domain``'s bounds), that is the likelier cause: ``v**beta`` has the
    derivative ``v**beta log(v)`` in ``beta``, NaN at ``v = 0``, inside a domain
    ``[0, inf)`` (a user's toggle switch and repressilator, told that "the
    model left its domain")."""
    model = setup.disc.model
    domain = model.x_domain
    lo = np.zeros(model.nx) if domain is None else np.where(np.isfinite(domain[0]),
                                                              domain[0], 0.0)
    hi = np.full(model.nx, np.nan) if domain is None else domain[1]
    U = np.asarray(U, float)
    on_edge = np.any((U == lo[None, :, None]) | (U == hi[None, :, None]), axis=(0, 2))
    head = f"{what} are not finite at the current iterate; "
    if p is not None:
        if np.any(on_edge):
            on_edge = _edge_culprits(setup, U, np.asarray(p, float), on_edge, lo)
        if not np.any(on_edge):
            # (also where none is on it: a soil store run dry to -1.3 under
            # fmax(SM, 0)**beta was "the model left its domain", SM unnamed)
            below = _edge_culprits(setup, U, np.asarray(p, float),
                                   np.any(U < lo[None, :, None], axis=(0, 2)), lo, below=True)
            if np.any(below):
                names = ", ".join(model.x_names[i] for i in np.flatnonzero(below))
                return (head + f"{names} {'is' if np.count_nonzero(below) == 1 else 'are'} "
                        "below the edge of the model's domain (for example a negative amount) "
                        "at some nodes, where a power x**p or a log(x) is not finite, and "
                        "finite just inside it: keep it inside (x_domain, x0_bounds), or "
                        "where the model reaches the edge itself (a fractional order run to "
                        "full conversion), leave out the data past it or write the rate so "
                        "that it is finite there")
    if np.any(on_edge):
        names = ", ".join(model.x_names[i] for i in np.flatnonzero(on_edge))
        starts = [sl.start for sl in setup.disc.intervals_of]
        given = [i for i in np.flatnonzero(on_edge)
                 if any(not setup.free_x[j, i] and U[j, i, 0] == lo[i] for j in starts)]
        if given:
            # (a receptor's occupancy from Model(x0=[0, ...]) under occ**nH: told
            # to bound it with x0_bounds, which then refused the given start)
            which = ", ".join(model.x_names[i] for i in given)
            return (head + f"{which} {'starts' if len(given) == 1 else 'start'} "
                    f"{AT_DOMAIN_EDGE} (for example 0), a given initial value (Experiment "
                    "x0, Model(x0=...) or estimate_x0=False), where a power x**p or a log(x) "
                    "has no finite derivative: give it a small positive initial value (such "
                    "as 1e-6), or write the model to be finite there")
        return (head + f"{names} {'is' if np.count_nonzero(on_edge) == 1 else 'are'} "
                f"{AT_DOMAIN_EDGE} (for example 0) at some nodes, where a power x**p or a "
                "log(x) has no finite derivative: keep them off it with x0_bounds (a lower "
                "bound such as 1e-6), or start from a p0 and x0 that do")
    return head + "the model left its domain (add or tighten x0_bounds/p_bounds)"


def failed_step(Xs: np.ndarray, ps: np.ndarray, message: str, control: float = 0.0,
                phi: float = np.nan) -> StepInfo:
    """A step that failed: the iteration stops with ``message``."""
    return StepInfo(Xs, ps, phi, phi, np.nan, 0.0, False, 1, control, failed=True,
                    message=message)


def _lapack_note(printed: str) -> str:
    lines = [ln.strip() for ln in printed.splitlines() if ln.strip()]
    return f" (LAPACK printed: {lines[0][:120]!r})" if lines else ""


def guarded_step(step: Callable[..., StepInfo]) -> Callable[..., StepInfo]:
    """Decorate a step rule's ``step(self, Xs, U, ps, V, lam)`` as the module doc says."""

    @functools.wraps(step)
    @interrupt_checked
    def wrapper(self: Any, Xs: np.ndarray, U: Any, ps: np.ndarray, V: np.ndarray,
                lam: float) -> StepInfo:
        printed: list[str] = []
        try:
            with captured_native_output() as printed:
                return step(self, Xs, U, ps, V, lam)
        except np.linalg.LinAlgError as err:
            text = printed[0] if printed else ""
            reraise_if_interrupted(err, text)
            X, p = self.setup.from_scaled(Xs, ps)
            return failed_step(Xs, ps, (
                f"the linear algebra of the step failed (numpy: {err}){_lapack_note(text)} "
                f"at p = {np.array2string(p, precision=6)}: the linearisation is singular "
                "or not finite there; start from a better p0 or bound p (p_bounds) and "
                "the states (x0_bounds)"), getattr(self, "mu", 0.0))

    return wrapper


def _from_numerical_code(err: BaseException) -> bool:
    """Whether ``err`` was raised by CasADi, NumPy or this package's numerics, not by
    the user's code (a callback): judged by where it was raised, and for CasADi's
    ``RuntimeError`` by its text."""
    if isinstance(err, PicardError):
        return False
    text = str(err)
    if isinstance(err, RuntimeError) and (".cpp:" in text or "Error in Function" in text):
        return True
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return False
    last = frames[-1].filename.replace("\\", "/")
    return any(part in last for part in ("/casadi/", "/numpy/", "/picard_casadi/"))


def guarded_solve(solve: Callable[..., LoopOutcome], method: str) -> Callable[..., LoopOutcome]:
    """Wrap a method's ``solve(setup, opts, callback)`` as the module doc says."""

    @functools.wraps(solve)
    def wrapper(setup: Setup, opts: Any, callback: Any = None) -> LoopOutcome:
        try:
            with interruptible():
                return solve(setup, opts, callback)
        except NUMERICAL_ERRORS as err:
            if is_interrupt(err):
                raise KeyboardInterrupt from None
            if not _from_numerical_code(err):  # the package's own, or the user's callback
                raise
            lines = [ln for ln in str(err).strip().splitlines() if ln.strip()]
            detail = lines[-1][:300] if lines else type(err).__name__
            return LoopOutcome(
                X=setup.X0.copy(), U=setup.U0.copy(), p=setup.p0.copy(),
                V=np.zeros_like(setup.X0), lam=0.0, iterations=0, success=False,
                status="breakdown",
                message=(f"{method} broke down: {type(err).__name__}: {detail}; the result "
                         "is the starting point, not an estimate (the model may blow up "
                         "for these parameters: bound p with p_bounds, start from a better "
                         "p0, or use a shorter T)"))

    return wrapper
