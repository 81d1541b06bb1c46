"""The transcription: the per-interval functions mapped over every interval of every experiment.

:class:`Transcription` holds the mapped functions of one problem (built per
interval in :mod:`picard_casadi.transcription.interval_functions`), the
data, weights and scales they are called with, and evaluates residuals,
objective, derivatives and trajectories on arrays ``(J, ...)``: compiled
(:mod:`picard_casadi.runtime.compiled_functions`) or on CasADi's virtual
machine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import casadi as ca
import numpy as np

from .discretisation import Discretisation, from_map_layout, node_columns, to_map_layout
from .interval_functions import IntervalFunctions, build_interval_functions
from .interval_linearisation import sparse_interval_functions, sparse_pays
from .interval_products import IntervalProducts, interval_product_functions
from .sensitivity import FixedPointLinearisation, PointDerivatives

__all__ = ["Transcription"]


#: a settle's scaled fixed-point residuals below this are near the round-off
#: of the Picard map's own evaluation on stiff meshes: there a Newton step that
#: does not lower the residual tenfold (Newton converges quadratically; round-off
#: does not) ends the settle, and a step is not halved where its full length
#: did not help (a shorter step cannot beat round-off either)
ROUND_OFF_ZONE = 1e-10
#: ... the reduction a Newton step must reach there to go on
ROUND_OFF_REDUCTION = 0.1


def _at_round_off(res: float, res_new: float) -> bool:
    """Whether a settle's Newton step from the residual ``res`` to ``res_new``
    ends it at round-off (:data:`ROUND_OFF_ZONE`)."""
    return res < ROUND_OFF_ZONE and res_new > ROUND_OFF_REDUCTION * res

# A backend maps {name: (function of one call, map count)} to callable functions.
Backend = Callable[[Mapping[str, tuple[ca.Function, int]]], Mapping[str, ca.Function]]


def _virtual_machine(units: Mapping[str, tuple[ca.Function, int]]) -> dict[str, ca.Function]:
    return {name: f.map(count) for name, (f, count) in units.items()}


def _kept_point(X: np.ndarray, U: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, ...]:
    """Copies of a point ``(X, U, p)`` to recognise it later (callers may reuse
    their arrays)."""
    return (np.array(X, float), np.array(U, float), np.array(p, float))


def _same_point(kept: tuple[np.ndarray, ...], X: np.ndarray, U: np.ndarray,
                p: np.ndarray) -> bool:
    """Whether ``(X, U, p)`` is the point :func:`_kept_point` kept, exactly."""
    return (np.array_equal(kept[0], X) and np.array_equal(kept[2], p)
            and np.array_equal(kept[1], U))


class Transcription:
    """The mapped functions of one problem and the numeric data they read.

    Parameters
    ----------
    disc : Discretisation
    n : int
        Picard order in the loss.
    weights : array_like, shape (ny,)
        Per-output weights of the data misfit.
    x_scale : array_like, shape (nx,)
        State scale for the continuity residuals.
    backend : callable, optional
        Maps ``{name: casadi.Function}`` to functions to call (for example
        code-generated ones).  Default: CasADi's virtual machine.

    Notes
    -----
    Arrays in and out are per interval: ``X`` is ``(J, nx)`` (interval starts),
    ``U`` is ``(J, nx, K)``, ``V`` is ``(J, nx)``.
    """

    def __init__(
        self,
        disc: Discretisation,
        n: int,
        weights: np.ndarray,
        x_scale: np.ndarray,
        backend: Backend | None = None,
        interval_functions: IntervalFunctions | None = None,
    ) -> None:
        self.disc = disc
        self.n = int(n)
        self.fns = interval_functions or build_interval_functions(disc, n)
        J = disc.n_intervals
        f = self.fns
        units = {name: (getattr(f, name), J) for name in (
            "picard", "residual", "jacobian", "gradient", "trajectory", "objective",
            "summary", "relax")}
        points = PointDerivatives(disc.model, 1, 1).units
        units["f_derivatives"] = (points["f_derivatives"], J * disc.K)
        units["g_derivatives"] = (points["g_derivatives"], J * disc.M)
        if sparse_pays(disc.model):
            units.update({name: (fn, J) for name, fn in sparse_interval_functions(disc).items()})
        self._backend = backend or _virtual_machine
        self.functions = self._backend(units)
        self._products: tuple[Mapping[str, Any], dict[str, ca.Function]] | None = None
        self._input_names = {k: u.name_in() for k, (u, _) in units.items()}  # keys of _dm
        # compiled functions called on NumPy buffers, when the backend offers them
        self._native_of = getattr(self.functions, "native", None)
        self.x_scale = np.asarray(x_scale, float)
        self._data_common = self._pack_common()
        self._dm_memo: dict[str, tuple[np.ndarray, ca.DM]] = {}
        # the point (_kept_point) and outputs of the last trajectory() call (see summary())
        self._last_trajectory: tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]] | None = None
        # the point and residual of the last settle() (see there)
        self._last_settled: tuple[tuple[np.ndarray, ...], float] | None = None
        self._fixed_point = FixedPointLinearisation(disc, self.functions, self._common)
        self.set_weights(weights)

    # ------------------------------------------------------------------ data
    def _pack_common(self) -> dict[str, ca.DM]:
        d = self.disc
        J = d.n_intervals
        return {
            "t0": ca.DM(d.t0[None, :]),
            "h": ca.DM(d.h[None, :]),
            "Wn": ca.DM(to_map_layout(d.node_inputs)),
            "S": ca.DM(to_map_layout(d.sample_rows)),
            "ts": ca.DM(to_map_layout(d.sample_times[:, None, :])),
            "Ws": ca.DM(to_map_layout(d.sample_inputs)),
            "Y": ca.DM(to_map_layout(d.y)),
            "Ym": ca.DM(to_map_layout(d.mask)),
            "c": ca.DM(d.has_next.astype(float)[None, :]),
            "xs": ca.DM(self.x_scale),
            "_J": J,
        }

    def set_weights(self, weights: np.ndarray) -> None:
        """Set per-output weights; residuals become ``sqrt(w_k s_i / N) (y - g)``,
        ``s_i`` each value's own weight (``Discretisation.sample_weights``)."""
        d = self.disc
        w = np.asarray(weights, float).ravel()
        if w.size != d.model.ny or np.any(~np.isfinite(w)) or np.any(w < 0):
            raise ValueError(
                f"weights must be {d.model.ny} finite non-negative numbers, got {w}"
            )
        self.weights = w
        # each value's weight: its output's times its own (Experiment sigma)
        self._Wt = np.sqrt(d.sample_weights * (w / d.n_samples_total)[None, :, None])
        self._data_common["Wt"] = ca.DM(to_map_layout(self._Wt))
        # the data too: Discretisation.replace_data may have moved them
        self._data_common["Y"] = ca.DM(to_map_layout(d.y))
        self._data_common["Ym"] = ca.DM(to_map_layout(d.mask))
        self._common_np = {k: (v.full() if isinstance(v, ca.DM) else v)
                           for k, v in self._data_common.items()}

    # ------------------------------------------------------------------ layout
    @property
    def native(self) -> bool:
        """Whether the functions are compiled and called on NumPy buffers."""
        return self._native_of is not None

    def _native(self, name: str):
        """The NumPy-buffer call of compiled function ``name``, or ``None``."""
        return None if self._native_of is None else self._native_of(name)

    @property
    def linearisation_units(self) -> tuple[str, ...]:
        """Names of the functions that :meth:`interval_sensitivities` and
        :meth:`settle` call: the per-interval sparse pair, or the point
        derivatives of the dense path."""
        if self._fixed_point.sparse:
            return ("interval_linearisation", "interval_newton")
        return ("f_derivatives", "g_derivatives")

    def interval_products(self, X: np.ndarray, U: np.ndarray, p: np.ndarray):
        """The linearisation at ``(X, U, p)`` as chained products
        (:class:`~picard_casadi.transcription.interval_products.IntervalProducts`)."""
        compiled, units = self.product_functions()
        native = getattr(compiled, "native", None)
        functions = {name: (native(name) if native is not None else None, unit)
                     for name, unit in units.items()}
        return IntervalProducts(self.disc, functions, X, self.nodes_np(U), p, self._common())

    def product_functions(self) -> tuple[Mapping[str, Any], dict[str, ca.Function]]:
        """The chained product functions (built, and compiled, on first use: only
        the products-only step calls them), as the backend gives them and as
        functions of one interval."""
        if self._products is None:
            units = interval_product_functions(self.disc)
            J = self.disc.n_intervals
            self._products = (self._backend({k: (u, J) for k, u in units.items()}), units)
        return self._products

    def nodes_arg(self, U: np.ndarray | ca.DM) -> np.ndarray | ca.DM:
        """Node values in the layout of the mapped functions, ``(nx, J K)``.

        The iteration keeps ``U`` in this form so it goes into every call
        without a conversion: a DM for CasADi's virtual machine (NumPy to DM
        costs about 45 ns per entry, which on CMG was half of an iteration of
        the paper's algorithm), a NumPy array for compiled functions.
        """
        if self.native:
            return self._nodes_map(U)
        return self.nodes_dm(U)

    def nodes_dm(self, U: np.ndarray | ca.DM) -> ca.DM:
        """Node values as a DM ``(nx, J K)``."""
        if isinstance(U, ca.DM):
            return U
        U = np.asarray(U)
        return ca.DM(U if U.ndim == 2 else to_map_layout(U))

    def _nodes_map(self, U: np.ndarray | ca.DM) -> np.ndarray:
        """Node values as an array ``(nx, J K)``."""
        if isinstance(U, ca.DM):
            return U.full()
        U = np.asarray(U)
        return U if U.ndim == 2 else to_map_layout(U)

    def nodes_np(self, U: np.ndarray | ca.DM) -> np.ndarray:
        """Node values as an array ``(J, nx, K)``."""
        if isinstance(U, ca.DM):
            return from_map_layout(U.full(), self.disc.n_intervals)
        U = np.asarray(U)
        return from_map_layout(U, self.disc.n_intervals) if U.ndim == 2 else U

    def _dm(self, key: str, a: np.ndarray) -> ca.DM:
        """``a`` as a DM, reusing the last conversion under ``key`` when equal.

        The iteration evaluates several functions at the same ``X``, ``p`` and
        multiplier shifts ``V`` (the accepted line-search point is where the
        next gradient, the Picard update and the summary are evaluated); a
        comparison costs a few microseconds, a conversion about 50 ns per entry.
        """
        last = self._dm_memo.get(key)
        if last is not None and last[0].shape == a.shape and np.array_equal(last[0], a):
            return last[1]
        dm = ca.DM(a)
        self._dm_memo[key] = (np.array(a, copy=True), dm)
        return dm

    def _xn(self, X: np.ndarray) -> np.ndarray:
        xn = np.zeros_like(X)
        xn[:-1] = X[1:]
        xn[~self.disc.has_next] = 0.0
        return xn

    def _common(self) -> dict:
        """The problem's constant data, in the form the functions take
        (NumPy arrays for compiled calls, DMs for the virtual machine)."""
        return self._common_np if self.native else self._data_common

    def _call(self, name: str, *args: Any) -> list:
        """Evaluate mapped function ``name``; outputs as NumPy arrays (compiled)
        or DMs (virtual machine), both of which ``np.asarray`` reads.

        NumPy arguments go straight into a compiled function; for the virtual
        machine they become DMs, the last conversion of each input name reused
        (:meth:`_dm`).
        """
        nf = self._native(name)
        if nf is not None:
            return nf(*args)
        names = self._input_names[name]
        out = self.functions[name](*[a if isinstance(a, (ca.DM, float, int))
                                     else self._dm(names[i], a) for i, a in enumerate(args)])
        return list(out) if isinstance(out, (list, tuple)) else [out]

    def _args(self, X: np.ndarray, U: np.ndarray, p: np.ndarray,
              V: np.ndarray, lam: float) -> list:
        """Arguments of the residual family, for :meth:`_call`."""
        c = self._common()
        return [
            X.T, self.nodes_arg(U), p, self._xn(X).T, V.T, float(lam), c["xs"], c["t0"], c["h"],
            c["Wn"], c["S"], c["ts"], c["Ws"], c["Y"], c["Wt"], c["c"],
        ]

    # ------------------------------------------------------------------ evaluation
    def residuals(self, X, U, p, V, lam) -> np.ndarray:
        """Residuals, shape ``(J, ny M + nx)``."""
        return np.asarray(self._call("residual", *self._args(X, U, p, V, lam))[0]).T

    def jacobian(self, X, U, p, V, lam) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Residuals ``(J, m)`` and their Jacobians ``(J, m, nx)``, ``(J, m, np)``."""
        J = self.disc.n_intervals
        r, Jx, Jp = (np.asarray(o) for o in self._call("jacobian", *self._args(X, U, p, V, lam)))
        return (r.T, from_map_layout(Jx, J), from_map_layout(Jp, J))

    def fixed_point_jacobian(self, X, U, p, V, lam) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Residuals of ``P^n U`` and their exact fixed-point Jacobians.

        Like :meth:`jacobian`, but the derivatives are those of the Picard
        fixed point (the limit ``n -> infinity``, see
        :mod:`picard_casadi.transcription.sensitivity`), evaluated at ``P^{n-1} U``.
        """
        Un = self.nodes_np(U)
        for _ in range(self.n - 1):
            Un = self.picard(X, Un, p)
        return self._fixed_point.linearise(X, Un, p, V, lam, self._Wt, self.x_scale)

    def node_jacobians(self, U: np.ndarray | ca.DM, p: np.ndarray) -> np.ndarray:
        """The vector field's Jacobian ``f_x`` at every node, ``(J, K, nx, nx)``."""
        return self._fixed_point.node_derivatives(self.nodes_np(U), np.asarray(p, float))[1]

    def interval_sensitivities(self, X, U, p, full: bool = False, trimmed: bool = False
                               ) -> dict[str, np.ndarray]:
        """Outputs, end states and their exact fixed-point derivatives per interval
        (``full``: also what the second-order terms need; ``trimmed``: ``dG``
        may leave out the padding samples; see
        :meth:`~picard_casadi.transcription.sensitivity.FixedPointLinearisation.interval_sensitivities`)."""
        return self._fixed_point.interval_sensitivities(X, self.nodes_np(U), p, full, trimmed)

    @property
    def kernels(self) -> Any:
        """The iteration's compiled linear algebra
        (:class:`~picard_casadi.transcription.kernels.IterationKernels`), or None on the
        virtual machine (NumPy's then)."""
        return self._fixed_point.kernels

    @property
    def last_fixed_point_inverse(self) -> np.ndarray | None:
        """``(I - dP/dU)^-1`` per interval ``(J, K nx, K nx)`` of the last
        :meth:`interval_sensitivities` (``None`` if an interval was singular)."""
        return self._fixed_point.last_inverse

    def newton_step(self, X: np.ndarray, U: np.ndarray, p: np.ndarray,
                    only: np.ndarray | None = None) -> np.ndarray:
        """Node values ``(J, nx, K)`` after one Newton step on the fixed point
        ``U = P U`` of every interval (or of those ``only`` marks; the others
        keep ``U``), with the dense fixed-point system; NaN on an interval
        whose matrix is singular."""
        return self._fixed_point.newton_step(X, self.nodes_np(U), p, only)[0]

    def set_x_scale(self, x_scale: np.ndarray) -> None:
        """Set the state scales ``(nx,)`` of the continuity residuals and of the
        fixed-point tolerances (positive and finite; checked by the caller)."""
        self.x_scale = np.asarray(x_scale, float)
        self._data_common["xs"] = ca.DM(self.x_scale)
        self._common_np["xs"] = self.x_scale.reshape(-1, 1)

    def predict_nodes(self, U: np.ndarray, dX: np.ndarray, dp: np.ndarray) -> np.ndarray:
        """Node values predicted after a step, from the last fixed-point Jacobian."""
        return self._fixed_point.predict_nodes(U, dX, dp)

    def settle(self, X: np.ndarray, U: np.ndarray, p: np.ndarray, tol: float,
               max_sweeps: int = 50) -> tuple[np.ndarray, float, int]:
        """Solve ``U = P U`` to a scaled tolerance, never ending worse than the start.

        With the sparse per-interval Newton step
        (:mod:`picard_casadi.transcription.interval_linearisation`), damped Newton steps:
        each residual from a Picard application, a Newton call only where a
        step is needed, and a step that does not lower the residual halved.
        Otherwise (the dense fallback) chord steps come first where the
        inverse of ``I - dP/dU`` from the last linearisation is at hand
        (Newton steps form it, see :meth:`FixedPointLinearisation.chord_step`),
        used while each halves the residual (near a Gauss-Newton trial point
        they converge in one or two); then Picard sweeps, cheap where ``P``
        contracts; when a sweep does not halve the residual, damped Newton
        steps on ``U - P U = 0``
        (:func:`~picard_casadi.transcription.sensitivity.newton_fixed_point_step`).
        A point the last call settled to within ``tol`` is returned as it is,
        without evaluating ``P`` again (the accepted trial point of a step).

        Returns
        -------
        U : ndarray
        residual : float
            Scaled ``max |P U - U|`` of the returned ``U``.
        evaluations : int
            Picard-map evaluations (or Newton calls) used.
        """
        Un = self.nodes_np(U)
        last = self._last_settled
        if last is not None and last[1] <= tol and _same_point(last[0], X, Un, p):
            return Un, last[1], 0  # just settled here (the accepted trial point)
        if self._fixed_point.sparse:
            out = self._settle_newton(X, Un, p, tol, max_sweeps)
        else:
            out = self._settle_dense(X, Un, p, tol, max_sweeps)
        self._last_settled = (_kept_point(X, out[0], p), out[1])
        return out

    def _settle_newton(self, X: np.ndarray, U: np.ndarray, p: np.ndarray, tol: float,
                       max_calls: int) -> tuple[np.ndarray, float, int]:
        """:meth:`settle` with the sparse Newton step (see there).

        The residual of each point comes from one Picard application, which
        needs no factorisation; the Newton call (a sparse factorisation per
        interval) is made only where a step is needed.  From a first-order
        prediction that is one or two steps: on the ring of 160 states this
        took the Newton calls of a solve from 75 to 32 (``docs/performance.md``).
        """
        newton = self._fixed_point.sparse_newton_step
        res = self._fixed_point_residual(X, U, p)
        calls = 1
        while res > tol and calls < max_calls:
            step, _ = newton(X, U, p, self.x_scale)
            calls += 1
            alpha = 1.0
            while True:
                trial = U + alpha * (step - U)
                trial_res = self._fixed_point_residual(X, trial, p)
                calls += 1
                if (trial_res < res or alpha <= 1.0 / 64 or calls >= max_calls
                        or res < ROUND_OFF_ZONE):
                    break
                alpha *= 0.5
            if not trial_res < res:
                break  # no progress from here
            stalled = _at_round_off(res, trial_res)
            U, res = trial, trial_res
            if stalled:
                break  # round-off (ROUND_OFF_ZONE)
        return U, res, calls

    def fixed_point_residuals(self, X: np.ndarray, U: np.ndarray, p: np.ndarray) -> np.ndarray:
        """Scaled ``max |P U - U|`` of each interval, ``(J,)`` (NaN where not finite)."""
        return self._interval_residuals(self.picard(X, self.nodes_np(U), p), self.nodes_np(U))

    def _fixed_point_residual(self, X: np.ndarray, U: np.ndarray, p: np.ndarray) -> float:
        """Scaled ``max |P U - U|`` (``inf`` if not finite), from one Picard application."""
        return self._scaled_residual(self.picard(X, U, p), U)

    def _interval_residuals(self, PU: np.ndarray, U: np.ndarray) -> np.ndarray:
        """Scaled ``max |P U - U|`` of each interval, ``(J,)``, from node values
        ``U`` and their Picard image ``PU`` (NaN where not finite)."""
        with np.errstate(all="ignore"):
            return np.max(np.abs(PU - U) * (1.0 / self.x_scale[None, :, None]), axis=(1, 2))

    def _scaled_residual(self, PU: np.ndarray, U: np.ndarray) -> float:
        """Scaled ``max |P U - U|`` over all intervals (``inf`` if not finite)."""
        r = float(np.max(self._interval_residuals(PU, U)))
        return r if np.isfinite(r) else np.inf

    def _settle_dense(self, X: np.ndarray, U: np.ndarray, p: np.ndarray, tol: float,
                      max_sweeps: int) -> tuple[np.ndarray, float, int]:
        """:meth:`settle` with chord steps, Picard sweeps and dense Newton steps."""
        residual = self._scaled_residual
        U = self.nodes_np(U)
        PU = self.picard(X, U, p)
        res = residual(PU, U)
        calls = 1
        newton = False
        chord = True
        while res > tol and calls < max_sweeps:
            if chord:
                # chord steps with the last linearisation's Jacobian: kept
                # while each at least halves the residual
                U_new = self._fixed_point.chord_step(U, PU)
                if U_new is None:
                    chord = False
                    continue
                PU_new = self.picard(X, U_new, p)
                calls += 1
                res_new = residual(PU_new, U_new)
                if not res_new <= 0.5 * res:
                    chord = False
                    if not res_new < res:
                        continue
            elif not newton:
                U_new = PU
                PU_new = self.picard(X, U_new, p)
                calls += 1
                res_new = residual(PU_new, U_new)
                if res_new > 0.5 * res:
                    newton = True  # Picard does not contract (fast enough) here
                    if res_new >= res:
                        continue
            else:
                U_new, PU_new, calls = self._damped_newton_step(X, U, PU, p, tol, calls,
                                                                max_sweeps)
                res_new = residual(PU_new, U_new)
                if not res_new < res:
                    break  # no progress from here
                if _at_round_off(res, res_new):
                    U, PU, res = U_new, PU_new, res_new
                    break  # round-off (ROUND_OFF_ZONE)
            U, PU, res = U_new, PU_new, res_new
        return U, res, calls

    def _damped_newton_step(self, X: np.ndarray, U: np.ndarray, PU: np.ndarray,
                            p: np.ndarray, tol: float, calls: int, max_calls: int
                            ) -> tuple[np.ndarray, np.ndarray, int]:
        """One dense Newton step on the intervals not yet settled, damped interval
        by interval.

        Each interval's fixed point is a system of its own, so a step is
        halved (down to 1/64) only on the intervals whose scaled residual it
        does not lower, and an interval that no step lowers keeps its node
        values; one Picard application per halving evaluates every trial at
        once (with generated code, on the intervals it moves only).  (One damping for all intervals, judged on the largest
        residual, held every interval to the worst one's pace.)

        Returns
        -------
        U_new, PU_new : ndarray (J, nx, K)
            Node values after the step and their Picard image.
        calls : int
            ``calls`` plus the Picard applications used.
        """
        res_j = self._interval_residuals(PU, U)
        # only the intervals not yet settled: a settle's later steps move a
        # fraction of them (fa18-roll-rud: a third to a tenth)
        todo = ~(res_j <= tol)  # NaN: unsettled
        with np.errstate(all="ignore"):
            U_full, _ = self._fixed_point.newton_step(X, U, p, None if todo.all() else todo)
        step = U_full - U
        U_new, PU_new = U.copy(), PU.copy()
        alpha = 1.0
        while todo.any() and alpha >= 1.0 / 64 and calls < max_calls:
            # the trial moves the intervals still to do; only they are evaluated
            idx = np.flatnonzero(todo)
            trial = U[idx] + alpha * step[idx]
            PU_trial = self.picard_of(X, U, p, idx, trial)
            calls += 1
            better = self._interval_residuals(PU_trial, trial) < res_j[idx]
            U_new[idx[better]], PU_new[idx[better]] = trial[better], PU_trial[better]
            todo[idx[better]] = False
            todo &= ~(res_j < ROUND_OFF_ZONE)  # not halved there (ROUND_OFF_ZONE)
            alpha *= 0.5
        return U_new, PU_new, calls

    def gradient(self, X, U, p, V, lam) -> tuple[float, np.ndarray, np.ndarray]:
        """Objective ``0.5 |r|^2`` and its gradient in ``X`` ``(J, nx)`` and ``p``."""
        phi, gx, gp, gxn = (np.asarray(o) for o in
                            self._call("gradient", *self._args(X, U, p, V, lam)))
        gX = gx.T.copy()
        gxn = gxn.T
        gX[1:] += np.where(self.disc.has_next[:-1, None], gxn[:-1], 0.0)
        return float(np.sum(phi)), gX, gp.sum(axis=1)

    def picard_of(self, X: np.ndarray, U: np.ndarray, p: np.ndarray, idx: np.ndarray,
                  rows: np.ndarray) -> np.ndarray:
        """One Picard application on the intervals ``idx`` with node values
        ``rows``, ``(len(idx), nx, K)`` (``X (J, nx)``; ``U (J, nx, K)``: the
        other intervals' node values).  With generated code only those
        intervals are evaluated, else all of them."""
        nf = self._native("picard")
        n = idx.size
        if nf is None or n == self.disc.n_intervals:
            U = U.copy()
            U[idx] = rows
            return self.picard(X, U, p)[idx]
        c = self._common()
        out = nf(X[idx].T, to_map_layout(rows), p, c["t0"][:, idx], c["h"][:, idx],
                 c["Wn"][:, node_columns(idx, self.disc.K)], count=n)[0]
        return from_map_layout(np.asarray(out), n)

    def picard(self, X: np.ndarray, U: np.ndarray | ca.DM, p: np.ndarray) -> np.ndarray:
        """One Picard application on every interval, ``(J, nx, K)``."""
        c = self._common()
        out = self._call("picard", X.T, self.nodes_arg(U), p, c["t0"], c["h"], c["Wn"])[0]
        return from_map_layout(np.asarray(out), self.disc.n_intervals)

    def objective(self, X, U, p, V, lam) -> float:
        """``L_{lambda,n}`` (with the multiplier shift): ``0.5 |r|^2``, summed."""
        return float(np.sum(np.asarray(self._call("objective", *self._args(X, U, p, V, lam))[0])))

    def summary(self, X, U, p) -> tuple[float, np.ndarray]:
        """Unweighted data misfit ``1/(2N) sum |y - g|^2`` and end states ``(J, nx)``.

        From the last :meth:`trajectory` where that was at the same point (the
        accepted trial point, whose merit was just evaluated), else one call.
        """
        last = self._last_trajectory
        if last is not None and _same_point(last[0], X, self.nodes_np(U), p):
            _, Ys, xe = last[1]
            d = self.disc
            return float(0.5 * np.sum(d.mask * (d.y - Ys) ** 2) / d.n_samples_total), xe
        c = self._common()
        sse, xe = (np.asarray(o) for o in self._call(
            "summary", X.T, self.nodes_arg(U), p, c["t0"], c["h"], c["Wn"], c["S"], c["ts"],
            c["Ws"], c["Y"], c["Ym"]))
        return float(0.5 * np.sum(sse) / self.disc.n_samples_total), xe.T

    def relax(self, X: np.ndarray, U: ca.DM, p: np.ndarray,
              sigma: float) -> tuple[np.ndarray | ca.DM, float, float, np.ndarray]:
        """The relaxed update ``U + sigma (P U - U)`` and the summary of its result.

        Returns
        -------
        U : casadi.DM or ndarray
            Updated node values, ``(nx, J K)`` (as :meth:`nodes_arg`).
        fixed_point : float
            Scaled ``max |P U - U|`` before the update (``inf`` if not finite).
        misfit : float
            Unweighted data misfit of the updated ``U`` (as :meth:`summary`).
        xend : ndarray (J, nx)
            End states of the updated ``U``.
        """
        c = self._common()
        U_new, *rest = self._call(
            "relax", X.T, self.nodes_arg(U), p, c["t0"], c["h"], c["Wn"], c["S"], c["ts"],
            c["Ws"], c["Y"], c["Ym"], float(sigma), c["xs"])
        fp, fp_sum, sse, xe = (np.asarray(o) for o in rest)  # U_new stays as nodes_arg
        fixed_point = float(np.max(fp))
        if not np.isfinite(float(np.sum(fp_sum))):
            fixed_point = np.inf
        misfit = float(0.5 * np.sum(sse) / self.disc.n_samples_total)
        return U_new, fixed_point, misfit, xe.T

    def trajectory(self, X, U, p) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """States ``(J, nx, M)`` and outputs ``(J, ny, M)`` at samples, end states ``(J, nx)``."""
        c = self._common()
        J = self.disc.n_intervals
        Xs, Ys, xe = (np.asarray(o) for o in self._call(
            "trajectory", X.T, self.nodes_arg(U), p, c["t0"], c["h"], c["Wn"], c["S"], c["ts"],
            c["Ws"]))
        out = (from_map_layout(Xs, J), from_map_layout(Ys, J), xe.T)
        self._last_trajectory = (_kept_point(X, self.nodes_np(U), p), out)  # for summary()
        return out

    def continuity_gap(self, X, U, p) -> tuple[float, float]:
        """Largest ``|u_j(T) - x_{j+1}|``: in state units and in scaled units."""
        _, _, xe = self.trajectory(X, U, p)
        hn = self.disc.has_next
        if not np.any(hn):
            return 0.0, 0.0
        gap = np.abs(xe[hn] - X[1:][hn[:-1]])
        return float(gap.max()), float((gap / self.x_scale).max())

    def misfit(self, X, U, p) -> float:
        """Unweighted data misfit ``1/(2N) sum |y_i - g|^2`` of ``P^n U``."""
        _, Ys, _ = self.trajectory(X, U, p)
        d = self.disc
        return float(0.5 * np.sum(d.mask * (d.y - Ys) ** 2) / d.n_samples_total)
