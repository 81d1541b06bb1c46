"""``method="ipopt"``: IPOPT on the collocation constraints of the same discretisation.

One NLP over ``p`` and every node value ``u_j`` (the interval start ``x_j``
is the first node, ``u_j[:, 0]``):

    minimise    0.5 sum_i w (y_i - g(t_i, u(t_i), p))^2 / N
    subject to  u_j = P_{x_j, p} u_j        (the Picard fixed point, nodes 1..K-1)
                u_j(T) = x_{j+1}            (exact continuity)
                p in p_bounds, every interval start x_j in the state box

with the same nodes, scheme, ``T``, start and scaling as ``method="picard"``.
The Picard map is linear in the vector field's node values, so the NLP maps
the model's ``f`` over every node and integrates with sparse constant
matrices: one interval's function mapped over the intervals
(:func:`collocation_expressions`), with its Hessian and constraint Jacobian
written interval by interval (:mod:`~picard_casadi.methods.collocation_derivatives`;
CasADi's own derivatives of the mapped graph took half of IPOPT's time), in
generated code and on the virtual machine alike; with ``expand=True`` the
virtual machine solves instead the whole NLP as one graph expanded to SX
(:func:`collocation_expressions_flat`).  IPOPT solves it
through ``casadi.nlpsol`` with the exact Hessian or the Gauss-Newton Hessian
``J^T J`` of the residuals (the way CasADi's system-identification example
passes ``hess_lag``).  The data
weights are NLP parameters, so re-weighting does not rebuild the NLP.  With
code generation on, the NLP's functions are generated from the MX graph (the
mapped vector field becomes a loop in C), compiled and cached like the Picard
methods' (:func:`picard_casadi.runtime.codegen.compile_nlpsol`).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import casadi as ca
import numpy as np

from ..runtime.interrupts import (interrupted, interruptible, repeated_interrupts,
                                  reraise_if_interrupted)
from ..runtime.native_output import captured_native_output, released_output
from ..transcription.discretisation import Discretisation, to_map_layout
from .registry import MethodSpec, register
from .base import (IterationRecord, LoopOutcome, Setup, require_bool, require_nonnegative_int,
                   require_one_of, require_positive, require_positive_int)
from .collocation_derivatives import (constraint_jacobian, derivatives_version, lagrangian_hessian,
                                      source_version)
from .collocation_layout import (collocation_parameters, interval_data, interval_symbols,
                                 unscaled_unknowns)

__all__ = ["IpoptOptions", "solve_ipopt", "collocation_expressions", "check_ipopt_options", "gauss_newton_hessian",
           "run_nlp", "ipopt_history"]

HESSIANS = ("exact", "gauss-newton")

#: nlpsol options holding derivative functions, each built on demand
Derived = dict[str, Callable[[], ca.Function]]

#: The per-interval NLP's Hessian and constraint Jacobian from its structure
#: (:mod:`~picard_casadi.methods.collocation_derivatives`), compiled or on the
#: virtual machine; False leaves them to CasADi, as
#: ``benchmarks/ipopt_derivatives.py`` does to compare
STRUCTURED_DERIVATIVES = True


def check_ipopt_options(options: Any) -> dict[str, Any]:
    """Validate the pass-through IPOPT options (names and value types).

    Raises
    ------
    TypeError
        If ``options`` is not a dict of ``str -> int | float | str``.
    """
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise TypeError(f"ipopt_options must be a dict of IPOPT options, got {type(options).__name__}")
    out = {}
    for key, val in options.items():
        if not isinstance(key, str):
            raise TypeError(f"ipopt_options: option names must be strings, got {key!r}")
        if isinstance(val, bool) or not isinstance(val, (int, float, str, np.integer, np.floating)):
            raise TypeError(
                f"ipopt_options[{key!r}] must be an int, float or str (IPOPT's "
                f"Integer, Number or String), got {type(val).__name__}"
            )
        out[key] = val.item() if isinstance(val, (np.integer, np.floating)) else val
    for key, val in out.items():
        problem = _probe_ipopt_option(key, val)
        if problem:
            raise ValueError(
                f"ipopt_options[{key!r}] = {val!r}: {problem}; valid names, types and "
                f"values are listed at {IPOPT_OPTIONS_URL}"
            )
    return out


IPOPT_OPTIONS_URL = "https://coin-or.github.io/Ipopt/OPTIONS.html"
_PROBED: dict[tuple[str, str], str] = {}


def _probe_ipopt_option(key: str, val: Any) -> str:
    """Set one IPOPT option on a one-variable NLP; return IPOPT's complaint, or ''."""
    cache_key = (key, repr(val))
    if cache_key in _PROBED:
        return _PROBED[cache_key]
    x = ca.SX.sym("x")
    problem = ""
    try:
        with captured_native_output() as printed:
            solver = ca.nlpsol("probe", "ipopt", {"x": x, "f": (x - 1) ** 2},
                               {"ipopt": {"print_level": 0, "sb": "yes", key: val},
                                "print_time": False, "error_on_fail": False})
            solver(x0=0.0)
        if solver.stats().get("return_status") == "Invalid_Option":
            text = " ".join(line.strip() for line in printed[0].splitlines() if line.strip())
            problem = f"IPOPT rejected it ({text[:300] or 'unknown option or bad value'})"
    except RuntimeError as err:
        reraise_if_interrupted(err)
        reason = re.sub(r"^.*?\.cpp:\d+: ", "", str(err).strip().splitlines()[-1])
        if "type mismatch" in reason:
            reason = "the value has the wrong type for this option"
        problem = f"rejected ({reason})"
    _PROBED[cache_key] = problem
    return problem


@dataclass
class IpoptOptions:
    """Options of ``method="ipopt"``.

    Attributes
    ----------
    max_iter : int
        IPOPT iteration limit.
    tol : float
        IPOPT's convergence tolerance (scaled NLP error).
    hessian : {"exact", "gauss-newton"}
        Exact Hessian of the Lagrangian, or ``J^T J`` of the data residuals.
    expand : bool
        On CasADi's virtual machine, solve the NLP as one graph over all
        intervals expanded to SX, with CasADi's derivatives, instead of the
        per-interval form that generated code uses (the default).  Its
        solve is about 1.3x faster on the F/A-18 runs (slower on cmg), but
        it is built anew at every call: 9-16 s on the F/A-18 runs and about
        two minutes on cmg, against 0.02-0.2 s (``docs/performance.md``,
        "IPOPT's NLP").
        Generated code is built from the per-interval form either way.
    ipopt_options : dict, optional
        Passed to IPOPT unchanged (for example ``{"linear_solver": "ma27"}``).
    print_level : int
        IPOPT's print level (0 is silent).
    lam : float
        Accepted for a uniform call signature; unused (continuity is exact).
    """

    max_iter: int = 3000
    tol: float = 1e-10
    hessian: str = "exact"
    expand: bool = False
    ipopt_options: dict[str, Any] | None = field(default=None)
    print_level: int = 0
    lam: float = 0.0
    #: IPOPT's tolerances are fixed when the solver is built, so the
    #: re-weighting rounds of ``weights="auto"`` keep them (a looser round
    #: meant a second NLP build: fa18-roll-ail 20 s instead of 9)
    tolerance_fixed_at_build: ClassVar[bool] = True

    def validate(self) -> None:
        """Raise ValueError/TypeError naming a bad option."""
        require_positive_int("max_iter", self.max_iter)
        require_positive("tol", self.tol)
        require_one_of("hessian", self.hessian, HESSIANS)
        require_bool("expand", self.expand)
        require_nonnegative_int("print_level", self.print_level)
        self.ipopt_options = check_ipopt_options(self.ipopt_options)


#: iterations in a row without a move that end an IPOPT solve as stalled
STALL_ITERATIONS = 30
#: a move smaller than this fraction of the iterate's largest entry (plus one) is none
STALL_CHANGE = 1e-13
#: an iterate counts as stalled only while a constraint is violated by more than this
STALL_VIOLATION = 1e-6


class StopOnInterrupt(ca.Callback):
    """IPOPT's iteration callback: stop once a Ctrl-C was recorded; report progress.

    Inside an NLP whose functions integrate with CVODES, CasADi turns the
    Ctrl-C into a failed function evaluation, IPOPT treats it as an invalid
    number and carries on with shorter steps (measured: 92 s to stop a
    shooting solve).  Returning 1 from the callback ends the solve at the next
    iteration; :func:`run_nlp` then raises :class:`KeyboardInterrupt`.

    Inside :meth:`reporting`, each IPOPT iteration (from iteration 0, the
    start) is also passed to ``estimate``'s ``callback`` as an
    :class:`IterationRecord`: ``objective`` is IPOPT's objective, ``gap`` the
    largest scaled constraint violation (continuity and collocation defects),
    ``p`` the current parameters; ``grad_norm`` and the other fields IPOPT
    does not expose to the callback are NaN.  A callback returning True stops
    the solve (status ``"stopped"``); an exception it raises ends the solve
    and is raised again after it.

    It also ends a solve whose iterate has stopped moving while infeasible:
    :data:`STALL_ITERATIONS` iterations in a row that change no variable by
    more than :data:`STALL_CHANGE` of the iterate's largest entry, with a
    constraint violated by more than :data:`STALL_VIOLATION`, set
    :attr:`stalled`.  IPOPT's restoration phase can take such steps without
    end where every trial point fails to evaluate (a shooting solve whose
    solution blows up: steps of 1e-16 with 54 failed CVODES runs each, up to
    ``max_iter``).  A feasible iterate that stops moving (converged, with a
    ``tol`` it cannot reach) is left to IPOPT's own tests.
    """

    def __init__(self, nx: int, ng: int, np_: int) -> None:
        ca.Callback.__init__(self)
        self._sizes = {"x": nx, "lam_x": nx, "g": ng, "lam_g": ng, "p": np_, "lam_p": np_,
                       "f": 1}
        self._report: Any = None
        self._p_of: Any = None
        self._iteration = 0
        self._t0 = 0.0
        self._error: BaseException | None = None
        self.stopped = False
        #: the solve ended because its iterate stopped moving (see the class doc)
        self.stalled = False
        self._last_x: np.ndarray | None = None
        self._still = 0
        #: iterations seen in the last solve (IPOPT's own count is lost when
        #: an evaluation raises: :func:`run_nlp` then reports none)
        self.iterations = 0
        self.construct("stop_on_interrupt", {})

    def get_n_in(self) -> int:
        return ca.nlpsol_n_out()

    def get_n_out(self) -> int:
        return 1

    def get_name_in(self, i: int) -> str:
        return ca.nlpsol_out(i)

    def get_name_out(self, i: int) -> str:
        return "ret"

    def get_sparsity_in(self, i: int) -> ca.Sparsity:
        return ca.Sparsity.dense(self._sizes.get(ca.nlpsol_out(i), 0), 1)

    @contextlib.contextmanager
    def reporting(self, callback: Any, p_of: Any) -> Iterator[None]:
        """Pass each iteration to ``callback`` during the block (see the class doc).

        Parameters
        ----------
        callback : callable or None
            ``estimate``'s callback; None reports nothing.
        p_of : callable
            The physical parameters from IPOPT's (scaled) decision vector.
        """
        self._report, self._p_of = callback, p_of
        self._iteration, self._t0 = 0, time.perf_counter()
        self._error, self.stopped = None, False
        self.stalled, self._last_x, self._still, self.iterations = False, None, 0, 0
        try:
            yield
        finally:
            self._report = self._p_of = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def eval(self, arg: Any) -> list[int]:
        if interrupted():
            return [1]
        self.iterations += 1
        if self._stalls(np.asarray(arg[0], float).ravel(), np.asarray(arg[2], float).ravel()):
            self.stalled = True
            return [1]
        if self._report is None:
            return [0]
        try:
            g = np.asarray(arg[2], float).ravel()
            gap = float(np.abs(g).max(initial=0.0))
            nan = float("nan")
            rec = IterationRecord(
                iteration=self._iteration, objective=float(arg[1]), misfit=nan,
                grad_norm=nan, step_norm=nan, gap=gap, gap_scaled=gap, fixed_point=nan,
                lam=0.0, control=nan, time=time.perf_counter() - self._t0,
                p=[float(v) for v in self._p_of(np.asarray(arg[0], float).ravel())])
            self._iteration += 1
            with released_output():
                stop = self._report(rec) is True
        except BaseException as err:  # the user's callback: raised again after the solve
            self._error = err
            return [1]
        if stop:
            self.stopped = True
            return [1]
        return [0]

    @property
    def last_iterate(self) -> np.ndarray | None:
        """IPOPT's iterate at the last iteration of the last solve (``None`` before
        the first): what is left when an evaluation raises and the solution is lost."""
        return None if self._last_x is None else self._last_x.copy()

    def _stalls(self, x: np.ndarray, g: np.ndarray) -> bool:
        """Count iterations in a row whose infeasible iterate ``x`` (constraint
        values ``g``) did not move; True at the limit."""
        last, self._last_x = self._last_x, x.copy()
        if last is None or last.shape != x.shape:
            self._still = 0
            return False
        size = 1.0 + float(np.max(np.abs(x), initial=0.0))
        moved = not np.all(np.abs(x - last) <= STALL_CHANGE * size)  # NaN counts as a move
        feasible = bool(np.all(np.abs(g) <= STALL_VIOLATION))
        self._still = 0 if moved or feasible else self._still + 1
        return self._still >= STALL_ITERATIONS


def stalled_message(who: str) -> str:
    """What a solve that :class:`StopOnInterrupt` ended as stalled says."""
    return (f"{who} stopped: its iterate did not move in {STALL_ITERATIONS} iterations "
            "while the constraints were violated (IPOPT found no trial point it could "
            "evaluate and accept); the result is not an optimum")


def gauss_newton_hessian(r: ca.MX, w: ca.MX, params: ca.MX) -> ca.Function:
    """``hess_lag`` option of ``nlpsol``: ``lam_f * triu(J^T J)`` of residuals ``r``.

    The way CasADi's system-identification example passes a Gauss-Newton
    Hessian to IPOPT (constraint curvature ignored).
    """
    Jr = ca.jacobian(r, w)
    sigma = ca.MX.sym("sigma")
    return ca.Function(
        "nlp_hess_l",
        {"x": w, "p": params, "lam_f": sigma, "hess_gamma_x_x": sigma * ca.triu(ca.mtimes(Jr.T, Jr))},
        ["x", "p", "lam_f", "lam_g"], ["hess_gamma_x_x"],
    )


def run_nlp(solver: ca.Function, params: np.ndarray, w0: np.ndarray, lbw: np.ndarray,
            ubw: np.ndarray) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Solve from ``w0`` (clipped into the box) with the NLP's parameters ``params``.

    Returns IPOPT's solution, its statistics, and what it printed.  Raises
    ValueError when IPOPT rejects an option, and KeyboardInterrupt after a
    Ctrl-C (which IPOPT would report as ``NonIpopt_Exception_Thrown``).
    When a function evaluation fails outright (CasADi raises, e.g. CVODES'
    ``CV_TOO_MUCH_WORK`` inside the gradient), the solution is the start and
    the statistics say ``return_status="Evaluation_Failed"`` with the
    error's last line under ``"error"``.
    """
    x0 = np.clip(w0, lbw, ubw)
    printed: list[str] = []
    try:
        with interruptible(), captured_native_output() as printed, repeated_interrupts():
            sol = solver(x0=x0, p=params, lbx=lbw, ubx=ubw,
                         lbg=0.0, ubg=0.0)
    except RuntimeError as err:
        text = printed[0] if printed else ""
        reraise_if_interrupted(err, text)
        from ..simulate import cvodes_flag

        stats = {"return_status": "Evaluation_Failed", "success": False, "iter_count": 0,
                 "error": cvodes_flag(err)}
        return {"x": ca.DM(x0)}, stats, text
    stats = solver.stats()
    text = printed[0] if printed else ""
    reraise_if_interrupted(None, text)
    if stats.get("return_status") == "Invalid_Option":
        detail = " ".join(line.strip() for line in text.splitlines()
                          if "option" in line.lower() or "type" in line.lower())
        raise ValueError(f"IPOPT rejected an option in ipopt_options: {detail or text.strip()[:500]}")
    return sol, stats, text


def ipopt_history(stats: dict[str, Any]) -> list[IterationRecord]:
    """The iteration history IPOPT reports, as :class:`IterationRecord` rows."""
    its = stats.get("iterations", {}) or {}
    n = len(its.get("obj", []))

    def column(name: str) -> list[float]:
        return [float(v) for v in its.get(name, [np.nan] * n)]

    obj, du, pr, d, mu = (column(k) for k in ("obj", "inf_du", "inf_pr", "d_norm", "mu"))
    return [IterationRecord(iteration=k, objective=obj[k], misfit=float("nan"),
                            grad_norm=du[k], step_norm=d[k], gap=pr[k], gap_scaled=pr[k],
                            fixed_point=float("nan"), lam=0.0, control=mu[k], time=float("nan"))
            for k in range(n)]


#: a run IPOPT ends with Search_Direction_Becomes_Too_Small is converged where
#: its last iterate's constraint violation and dual infeasibility are within
#: these (IPOPT's default acceptable_constr_viol_tol is 1e-2, acceptable_tol 1e-6)
SMALL_STEP_FEASIBLE = 1e-8
SMALL_STEP_STATIONARY = 1e-6

NLP_MAX_DIR = 8

def collocation_interval(disc: Discretisation) -> ca.Function:
    """One interval of the collocation NLP, to be mapped over all intervals.

    ``(U, p, t0, h, Wn, S, ts, Ws, Y, Wt, xs) -> (defects, r, end)``: with
    ``x = U[:, 0]`` the interval start, the scaled fixed-point defects
    ``(x + h F A^T - U)[:, 1:] / xs`` (``F`` the vector field at the nodes), the
    weighted data residuals ``vec(Wt * (Y - g(ts, x + h F S^T, p, Ws)))`` and
    the end state ``U[:, -1]``.  The values are those of the Picard functions
    with ``n = 1`` (same nodes, quadrature and sample rows).
    """
    m = disc.model
    K, M = disc.K, disc.M
    A = ca.DM(np.asarray(disc.quad.integration, float))
    tau = ca.DM(disc.quad.tau).T
    args = interval_symbols(disc)
    U, p, t0, h, Wn, S, ts, Ws, Y, Wt, xs = args.values()
    x = U[:, 0]
    # derivatives in at most NLP_MAX_DIR directions per sweep: CasADi's
    # default 64 made cmg's NLP 9 MB of C (its 64-direction derivatives of the
    # vector field alone 75,000 lines), 8 makes it 1.7 MB (gcc -O2: 30 s)
    few = {"max_num_dir": NLP_MAX_DIR}
    f = ca.Function("f", [m.t, m.x, m.p, m.u], [m.rhs], few)
    g = ca.Function("g", [m.t, m.x, m.p, m.u], [m.y], few)
    F = f.map(K)(t0 + h * tau, U, ca.repmat(p, 1, K), Wn)
    PU = ca.repmat(x, 1, K) + h * ca.mtimes(F, A.T)
    defects = (PU[:, 1:] - U[:, 1:]) / ca.repmat(xs, 1, K - 1)
    Xs = ca.repmat(x, 1, M) + h * ca.mtimes(F, S.T)
    Ys = g.map(M)(ts, Xs, ca.repmat(p, 1, M), Ws)
    r = ca.vec(Wt * (Y - Ys))
    return ca.Function("collocation_interval", list(args.values()), [defects, r, U[:, K - 1]],
                       list(args), ["defects", "r", "end"], few)


def collocation_expressions(setup: Setup, w: ca.MX, data: ca.MX,
                            scales: tuple[ca.MX, ca.MX] | None = None
                            ) -> tuple[ca.MX, ca.MX, ca.MX]:
    """Fixed-point defects, continuity defects and data residuals of the NLP.

    Every interval is :func:`collocation_interval`, mapped over all of them
    (``Function.map``): CasADi differentiates the map into maps of the one
    interval's derivatives, so the NLP's generated code has the size of one
    interval's, in a loop, whatever the number of intervals, and it reads the
    data (and, given ``scales``, the unknowns' scales) from the NLP's
    parameters (:func:`collocation_parameters`), so one compiled NLP serves
    any data on meshes of the same shape.

    Parameters
    ----------
    setup : Setup
    w : casadi.MX
        Decision vector ``[p / p_scale, vec(U_j / x_scale) for each j]``.
    data : casadi.MX
        The parameter vector (:func:`collocation_parameters`).
    scales : (casadi.MX, casadi.MX), optional
        ``x_scale`` and ``p_scale`` as symbols; by default the setup's
        values, as constants of the graph.
    """
    disc = setup.disc
    m = disc.model
    J, K, nx = disc.n_intervals, disc.K, m.nx
    xs, ps = scales if scales is not None else (ca.DM(setup.x_scale), ca.DM(setup.p_scale))
    U, p = unscaled_unknowns(disc, w, xs, ps)
    pieces = interval_data(disc, data)
    defects, r, end = collocation_interval(disc).map(J)(
        U, p, pieces["t0"], pieces["h"], pieces["Wn"], pieces["S"], pieces["ts"],
        pieces["Ws"], pieces["Y"], pieces["Wt"], xs)
    X = U[:, list(range(0, J * K, K))]
    nxt = [j for j in range(J) if disc.has_next[j]]
    cont = ((end[:, nxt] - X[:, [j + 1 for j in nxt]]) / ca.repmat(xs, 1, len(nxt))
            if nxt else ca.MX(nx, 0))
    return defects, cont, r


def collocation_expressions_flat(setup: Setup, w: ca.MX, Wt: ca.MX, Y: ca.MX
                                 ) -> tuple[ca.MX, ca.MX, ca.MX]:
    """The NLP of :func:`collocation_expressions` as one graph over all intervals.

    The form of ``expand=True`` on CasADi's virtual machine, expanded to SX
    and differentiated by CasADi: faster per iteration than the per-interval
    form, slow to build (``IpoptOptions.expand``).  The weights and the data
    are the NLP's parameters (the rest is constant).

    The Picard map is linear in the vector-field values at the nodes, so the
    model's ``f`` is mapped once over every node of every interval and the
    integration over each interval is a sparse constant matrix product
    (``x_j + h_j F_j A^T``); the outputs at the sample times are ``g`` mapped
    over the samples of ``x_j + h_j F_j S_j^T``.  CasADi then differentiates
    the (small) vector field over the map instead of a whole interval, which
    keeps the NLP's derivative functions compact enough to generate and
    compile.  The values are those of the per-interval functions with
    ``n = 1`` (same nodes, quadrature and sample rows).

    Parameters
    ----------
    setup : Setup
    w : casadi.MX
        Decision vector ``[p / p_scale, vec(U_j / x_scale) for each j]``.
    Wt : casadi.MX, shape (ny, J * M)
        Data weights in the map layout (zero at missing samples).
    Y : casadi.MX, shape (ny, J * M)
        The data in the same layout.
    """
    disc = setup.disc
    m = disc.model
    J, K, M, nx, np_ = disc.n_intervals, disc.K, disc.M, m.nx, m.np
    A = np.asarray(disc.quad.integration, float)  # K x K
    tau = np.asarray(disc.quad.tau, float)
    xs = ca.DM(setup.x_scale)
    p = w[:np_] * ca.DM(setup.p_scale)
    U = ca.reshape(w[np_:], nx, J * K) * ca.repmat(xs, 1, J * K)
    X = U[:, list(range(0, J * K, K))]
    # node values of the vector field, all intervals at once
    t_nodes = (disc.t0[:, None] + disc.h[:, None] * tau[None, :]).ravel()
    F = m.f.map(J * K)(ca.DM(t_nodes[None, :]), U, ca.repmat(p, 1, J * K),
                       ca.DM(to_map_layout(disc.node_inputs)))
    # interval starts spread to nodes / samples, and the quadrature per interval
    spread_nodes = ca.kron(ca.DM.eye(J), ca.DM.ones(1, K))
    integrate_nodes = ca.diagcat(*[ca.DM(h * A.T) for h in disc.h])
    PU = ca.mtimes(X, spread_nodes) + ca.mtimes(F, integrate_nodes)
    interior = [j * K + k for j in range(J) for k in range(1, K)]
    defects = (PU[:, interior] - U[:, interior]) / ca.repmat(xs, 1, len(interior))
    last = [j * K + K - 1 for j in range(J)]
    nxt = [j for j in range(J) if disc.has_next[j]]
    cont = (U[:, [last[j] for j in nxt]] - X[:, [j + 1 for j in nxt]]) / ca.repmat(xs, 1, len(nxt))
    # outputs at the measured sample slots only (padding slots carry no data)
    active = np.flatnonzero(to_map_layout(disc.mask).any(axis=0))
    rows = disc.sample_rows  # (J, M, K)
    cols = [int(i) for i in active]
    integrate_samples = ca.sparsify(
        ca.diagcat(*[ca.DM(h * rows[j].T) for j, h in enumerate(disc.h)])[:, cols])
    spread_samples = ca.kron(ca.DM.eye(J), ca.DM.ones(1, M))[:, cols]
    Xs = ca.mtimes(X, spread_samples) + ca.mtimes(F, integrate_samples)
    ts = to_map_layout(disc.sample_times[:, None, :])[:, active]
    Ws = to_map_layout(disc.sample_inputs)[:, active]
    Ys = m.g.map(len(active))(ca.DM(ts), Xs, ca.repmat(p, 1, len(active)), ca.DM(Ws))
    r_data = ca.vec(Wt[:, cols] * (Y[:, cols] - Ys))
    return defects, cont, r_data


class CollocationNLP:
    """The collocation NLP of a :class:`Setup`, built once and re-solved."""

    def __init__(self, setup: Setup, opts: IpoptOptions) -> None:
        disc = setup.disc
        m = disc.model
        J, K, nx, np_ = disc.n_intervals, disc.K, m.nx, m.np
        self.setup = setup
        w = ca.MX.sym("w", np_ + J * nx * K)
        ipopt = {
            "max_iter": int(opts.max_iter), "tol": float(opts.tol),
            "print_level": int(opts.print_level), "sb": "yes",
        }
        ipopt.update(opts.ipopt_options or {})
        n_g = J * nx * (K - 1) + nx * int(np.sum(disc.has_next))

        def build(flat: bool) -> tuple[dict[str, ca.MX], dict[str, Any], Derived]:
            # per interval (generated code, and the virtual machine by
            # default): the interval function mapped, data as parameters (the
            # C does not depend on the data or the number of intervals), its
            # Hessian and Jacobian from the NLP's structure; flat (the virtual
            # machine with expand=True): one graph over all intervals,
            # expanded to SX, differentiated by CasADi
            if not flat:
                # the scales are parameters too: they come from the data (the
                # initial guess's magnitudes), and as constants they made
                # every data set a new NLP to compile (cmg: 50 s per seed)
                n_data = collocation_parameters(disc, setup.tr._Wt).size
                data = ca.MX.sym("data", n_data + nx + np_)
                defects, cont, r_data = collocation_expressions(
                    setup, w, data[:n_data],
                    (data[n_data:n_data + nx], data[n_data + nx:]))
                self._params = lambda: np.concatenate([
                    collocation_parameters(disc, setup.tr._Wt), setup.x_scale, setup.p_scale])
            else:
                size = m.ny * disc.M * J
                data = ca.MX.sym("Wt_Y", 2 * size)
                defects, cont, r_data = collocation_expressions_flat(
                    setup, w, ca.reshape(data[:size], m.ny, disc.M * J),
                    ca.reshape(data[size:], m.ny, disc.M * J))
                self._params = lambda: np.concatenate([
                    to_map_layout(setup.tr._Wt).ravel(order="F"),
                    to_map_layout(setup.disc.y).ravel(order="F")])
            self._stop = StopOnInterrupt(w.numel(), n_g, data.numel())
            nlp = {"x": w, "p": data, "f": 0.5 * ca.sumsqr(r_data),
                   "g": ca.vertcat(ca.vec(defects), ca.vec(cont))}
            solver_opts: dict[str, Any] = {
                "ipopt": ipopt, "print_time": False, "expand": flat,
                "error_on_fail": False, "iteration_callback": self._stop,
            }
            derived: Derived = {}
            if not flat:
                solver_opts["oracle_options"] = {"max_num_dir": NLP_MAX_DIR}
            if not flat and STRUCTURED_DERIVATIVES:
                # CasADi's own derivatives of the mapped graph sweep every
                # interval once per colour (cmg: the Hessian 0.5 s and the
                # Jacobian 0.12 s of IPOPT's 0.87 s per iteration); written
                # from the NLP's structure instead (docs/performance.md)
                pieces = interval_data(disc, data[:n_data])
                scales = (data[n_data:n_data + nx], data[n_data + nx:])
                derived["jac_g"] = lambda: constraint_jacobian(disc, w, data, nlp["g"],
                                                               pieces, scales)
                if opts.hessian == "exact":
                    derived["hess_lag"] = lambda: lagrangian_hessian(disc, w, data, pieces,
                                                                     scales)
                else:
                    derived["hess_lag"] = lambda: gauss_newton_hessian(r_data, w, data)
            elif opts.hessian == "gauss-newton":
                solver_opts["hess_lag"] = gauss_newton_hessian(r_data, w, data)
            return nlp, solver_opts, derived

        self.note = ""
        self.solver = None
        if setup.compiled:
            from ..errors import CodegenError
            from ..runtime.codegen import NlpTooLarge, compile_nlpsol

            try:
                # generated from the MX graph: the mapped interval becomes a
                # loop in C; expanded to SX the same NLP is hundreds of MB of C
                nlp, solver_opts, derived = build(flat=False)
                # what builds the derived functions: the structured Jacobian
                # (and Hessian), and for gauss-newton the J^T J of
                # gauss_newton_hessian, whose changes must change the key too
                construction = derivatives_version() + (
                    "" if opts.hessian == "exact" else f" {source_version(gauss_newton_hessian)}")
                self.solver = compile_nlpsol("collocation", "ipopt", nlp, solver_opts, derived,
                                             f"{opts.hessian} {construction}")
            except NlpTooLarge as err:
                self.note = (f"IPOPT: {err}; the NLP runs on CasADi's virtual machine, "
                             "interval by interval")
            except CodegenError as err:  # a compiler or cache that failed on this NLP
                if getattr(setup.tr.functions, "strict", True):
                    raise
                self.note = (f"codegen='auto': the IPOPT NLP runs on CasADi's virtual "
                             f"machine: {err}")
        if self.solver is None:
            # the virtual machine: the same per-interval NLP and derivatives
            # (built in a fraction of a second), or with expand=True the flat
            # graph expanded to SX (its build took 9-16 s on the F/A-18 runs
            # and 126 s on cmg, at every call)
            nlp, solver_opts, derived = build(flat=bool(opts.expand))
            solver_opts.update({k: make() for k, make in derived.items()})
            self.solver = ca.nlpsol("collocation", "ipopt", nlp, solver_opts)
        self.n_g = n_g
        self.monitor = self._stop
        xl, xu, pl, pu = setup.scaled_bounds
        # the state box applies to the interval starts (the first node of each
        # interval), as in the Picard methods: the same feasible set.  Boxing
        # every node gave IPOPT thousands of barrier terms that, next to a data
        # misfit of order 1e-2, pulled its path into another local optimum
        # (CMG, seed 3).
        node_lb = np.full((J, K, nx), -np.inf)
        node_ub = np.full((J, K, nx), np.inf)
        node_lb[:, 0, :] = xl
        node_ub[:, 0, :] = xu
        lbw = np.concatenate([np.where(setup.free_p, pl, setup.p0 / setup.p_scale),
                              node_lb.ravel()])
        ubw = np.concatenate([np.where(setup.free_p, pu, setup.p0 / setup.p_scale),
                              node_ub.ravel()])
        # interval starts of experiments with known x0 are pinned
        for j in range(J):
            fixed = ~setup.free_x[j]
            if np.any(fixed):
                idx = np_ + j * K * nx + np.flatnonzero(fixed)
                val = setup.X0[j, fixed] / setup.x_scale[fixed]
                lbw[idx] = val
                ubw[idx] = val
        self.lbw, self.ubw = lbw, ubw
        self.J, self.K, self.nx, self.np = J, K, nx, np_

    def solve(self) -> tuple[dict[str, Any], dict[str, Any], str]:
        """Solve from the setup's start; return IPOPT's result, stats and output."""
        s = self.setup
        w0 = np.concatenate([s.p0 / s.p_scale,
                             (s.U0 / s.x_scale[None, :, None]).transpose(0, 2, 1).ravel()])
        return run_nlp(self.solver, self._params(), w0, self.lbw, self.ubw)


def solve_ipopt(setup: Setup, opts: IpoptOptions, callback=None) -> LoopOutcome:
    """Build (once per setup) and solve the collocation NLP."""
    key = ("ipopt", opts.hessian, opts.expand, opts.max_iter, opts.tol,
           tuple(sorted((opts.ipopt_options or {}).items())), opts.print_level)
    cache = setup.cache
    t0 = time.perf_counter()
    if key not in cache:
        cache[key] = CollocationNLP(setup, opts)
        setup.timings["build"] = setup.timings.get("build", 0.0) + time.perf_counter() - t0
    nlp = cache[key]
    with nlp.monitor.reporting(callback, lambda w: w[:setup.p_scale.size] * setup.p_scale):
        sol, stats, printed = nlp.solve()
    status = str(stats.get("return_status", "unknown"))
    if "error" in stats:
        status_error = f" ({stats['error']})"
    else:
        status_error = ""
    J, K, nx, np_ = nlp.J, nlp.K, nlp.nx, nlp.np
    w = np.asarray(sol["x"]).ravel()
    p = w[:np_] * setup.p_scale
    U = w[np_:].reshape(J, K, nx).transpose(0, 2, 1) * setup.x_scale[None, :, None]
    X = U[:, :, 0].copy()
    success = bool(stats.get("success", False))
    history = ipopt_history(stats)
    n_iter = int(stats.get("iter_count", len(history))) if "error" not in stats \
        else nlp.monitor.iterations
    last = history[-1] if history else None
    if (status == "Search_Direction_Becomes_Too_Small" and last is not None
            and last.gap <= SMALL_STEP_FEASIBLE and last.grad_norm <= SMALL_STEP_STATIONARY):
        # IPOPT's own reading of this status: "usually the algorithm is at an
        # optimal point but tol is too tight"; at a feasible point whose dual
        # infeasibility meets IPOPT's acceptable level it is an optimum (the
        # textbook's unstable aircraft under the likelihood's weights: 2.5e-10
        # against tol 1e-10, at the point shooting reaches)
        success = True
        status_note = (f" at a feasible point (constraint violation {last.gap:.1e}, dual "
                       f"infeasibility {last.grad_norm:.1e}, within IPOPT's acceptable "
                       "level): an optimum IPOPT cannot refine further")
    elif status == "Solved_To_Acceptable_Level":
        status_note = (" (IPOPT could not reach tol and stopped at its acceptable level; "
                       "pass ipopt_options={'acceptable_iter': 0} to insist)")
    else:
        status_note = ""
    advice = ("hessian='gauss-newton', a larger max_iter or a better start"
              if opts.hessian == "exact" else "a larger max_iter or a better start")
    message = f"IPOPT: {status}{status_error}{status_note}" + (
        "" if success else f" (see IPOPT's documentation of this status; try {advice})")
    if nlp.monitor.stalled:
        status, message = "stalled", stalled_message("IPOPT")
    if nlp.monitor.stopped:
        status, message = "stopped", "stopped by the callback"
    return LoopOutcome(X=X, U=U, p=p, V=np.zeros_like(X), lam=0.0, iterations=n_iter,
                       success=success, status="converged" if success else status,
                       message=message, history=history,
                       evaluations=int(stats.get("n_call_nlp_f", 0) or 0),
                       notes=[nlp.note] if nlp.note else [])


register(MethodSpec(
    "ipopt", IpoptOptions, solve_ipopt,
    "IPOPT on the collocation NLP of the same discretisation (exact continuity)",
    uses_picard_order=False,
))
