"""Accurate integration of every Picard interval from its start (CVODES).

Two users: ``method="shooting"`` (the states at the samples and the interval
ends are its model) and the discretisation certificate (an accurate solution
to hold the collocation solution against).

Each interval is one CVODES run from its start, with outputs at its sample
times and its end (no restart between them), in normalised time, with the
inputs replaced by their Chebyshev interpolant over the interval: of degree
16, or 32 or 64 where 16 does not reproduce them to 1e-12 of their size at
the midpoints of the interpolation points.  Intervals with the same output
times and degree share one integrator, mapped over them.  Inputs that no
such polynomial reproduces (a sampled input held or interpolated linearly
between samples jumps or kinks at each one) are integrated instead as a
chain of segments cut at the sample times, CVODES restarting on each (as in
:func:`picard_casadi.simulate`), intervals padded to the same number of
segments with segments of zero length (cost: ``docs/certificate.md``).
"""

from __future__ import annotations

import threading

import casadi as ca
import numpy as np

from ..model import Model
from ..runtime.interrupts import interruptible, reraise_if_interrupted
from ..runtime.native_output import captured_native_output
from ..simulate import (_INPUT_DEGREE, _input_coefficients, _segment_coefficients,
                        _segment_integrator)
from .discretisation import Discretisation, to_map_layout

__all__ = ["IntervalIntegrator", "interval_integrator", "chained_interval_states"]

_DEGREES = (16, 32, 64)
_INPUT_ACCURACY = 1e-12


def _interval_inputs(exp, t0: np.ndarray, h: np.ndarray, nu: int
                     ) -> list[tuple[int, np.ndarray] | None]:
    """For each interval ``[t0_i, t0_i + h_i]`` of experiment ``exp``: the lowest
    degree in ``_DEGREES`` whose Chebyshev interpolant reproduces the inputs,
    and its coefficients; ``None`` where none does.  All intervals are fitted
    at once (one evaluation of the inputs per degree)."""
    n = t0.size
    if nu == 0:
        return [(_DEGREES[0], np.zeros(0))] * n
    out: list[tuple[int, np.ndarray] | None] = [None] * n
    todo = np.arange(n)
    for d in _DEGREES:
        if todo.size == 0:
            break
        a, b = t0[todo], t0[todo] + h[todo]
        coef = _segment_coefficients(lambda tt: exp.inputs(tt, nu), a, b, nu, d)  # (nu (d+1), n)
        # check between the interpolation points
        k = np.arange(d)
        mids = np.cos(np.pi * (k + 1.0) / (d + 1))
        times = a[:, None] + 0.5 * (b - a)[:, None] * (mids[None, :] + 1.0)
        vals = exp.inputs(times.ravel(), nu).reshape(todo.size, d, nu)
        T = np.polynomial.chebyshev.chebvander(mids, d)  # (d, d+1)
        approx = np.einsum("mk,skn->smn", T, coef.T.reshape(todo.size, d + 1, nu))
        size = np.maximum(np.abs(vals).max(axis=(1, 2)), 1e-300)
        fits = np.abs(approx - vals).max(axis=(1, 2)) <= _INPUT_ACCURACY * size
        for i in np.flatnonzero(fits):
            out[todo[i]] = (d, coef[:, i])
        todo = todo[~fits]
    return out


def _state_at(states: dict[float, ca.MX], tau: float) -> ca.MX:
    """The state at the output time of ``states`` nearest ``tau``.

    The output grids are built from the sample times (rounded), the slots
    from the normalised sample times: the two agree only to round-off, so a
    slot is matched to the nearest grid time, not looked up by its rounded
    value (which differed in the last digit for one sample: a KeyError).
    """
    keys = np.fromiter(states, float, len(states))
    return states[float(keys[np.argmin(np.abs(keys - tau))])]


def output_grids(disc: Discretisation) -> list[tuple[float, ...]]:
    """Per interval: its output times, normalised, its samples inside and its
    end 1."""
    grids = []
    for j in range(disc.n_intervals):
        taus = disc.sample_tau[j][disc.sample_exp[j] == disc.exp_of[j]]
        grids.append(tuple(np.unique(np.concatenate([np.round(taus[taus > 0], 13), [1.0]]))))
    return grids


def inputs_vary(disc: Discretisation) -> bool:
    """Whether some interval's inputs are not one constant (the intervals
    :func:`chained_interval_states` integrates one by one)."""
    return any(value is None for _, value in _constant_pieces(disc))


def _interval_plan(disc: Discretisation
                   ) -> tuple[list[tuple[float, ...]], list[tuple[int, np.ndarray] | None]]:
    """Per interval: its output times (:func:`output_grids`) and its inputs'
    Chebyshev fit (:func:`_interval_inputs`; None: integrated in segments cut
    at the sample times)."""
    J, nu = disc.n_intervals, disc.model.nu
    grids = output_grids(disc)
    inputs: list[tuple[int, np.ndarray] | None] = [None] * J
    for e, sl in enumerate(disc.intervals_of):
        js = np.arange(sl.start, sl.stop)
        for j, fit in zip(js, _interval_inputs(disc.experiments[e], disc.t0[js], disc.h[js], nu)):
            inputs[j] = fit
    return grids, inputs


def _slots_and_ends(disc: Discretisation, states: dict[int, dict[float, ca.MX]],
                    starts: list[ca.MX]) -> tuple[ca.MX, ca.MX]:
    """The states at every sample slot ``(nx, J M)`` and the intervals' end states
    ``(nx, J)`` from each interval's ``states`` by normalised time; a padding
    slot (no sample) holds the interval's start."""
    slots, ends = [], []
    for j in range(disc.n_intervals):
        for s in range(disc.M):
            tau = float(disc.sample_tau[j, s])
            real = disc.sample_exp[j, s] == disc.exp_of[j]
            slots.append(_state_at(states[j], tau) if real and tau > 0 else starts[j])
        ends.append(states[j][1.0])
    return ca.horzcat(*slots), ca.horzcat(*ends)


def _constant_inputs(exp, t0: np.ndarray, h: np.ndarray, nu: int) -> list[np.ndarray | None]:
    """For each interval ``[t0_i, t0_i + h_i]`` of experiment ``exp``: its inputs'
    value where they are the same at its start, 17 points inside and every
    sample time of the experiment inside it (an experiment's constants, a
    held input between its steps; the value at its end is the next
    interval's, a held input's step there is no change inside), else
    ``None``."""
    n = t0.size
    if nu == 0:
        return [np.zeros(0)] * n
    k = np.linspace(0.0, 1.0, 19)[:-1]
    times = t0[:, None] + h[:, None] * k[None, :]
    vals = exp.inputs(times.ravel(), nu).reshape(n, k.size, nu)
    same = np.all(vals == vals[:, :1, :], axis=(1, 2))
    # the sample times inside each such interval, all in one call of the
    # inputs (one call per interval: 86 000 calls of a delay's round inputs,
    # 22 s of a quadrotor's 175 s fit)
    cand = np.flatnonzero(same)
    first = np.searchsorted(exp.t, t0[cand], side="right")
    count = np.searchsorted(exp.t, t0[cand] + h[cand], side="left") - first
    has = count > 0
    if np.any(has):
        rows = np.concatenate([np.arange(a, a + c) for a, c in zip(first[has], count[has])])
        owner = np.repeat(cand[has], count[has])
        off = np.any(exp.inputs(exp.t[rows], nu) != vals[owner, 0, :], axis=1)
        same[np.unique(owner[off])] = False
    return [vals[i, 0].copy() if same[i] else None for i in range(n)]


def _constant_pieces(disc: Discretisation) -> list[tuple[list[int], np.ndarray | None]]:
    """The mesh's intervals grouped into pieces that one CVODES run covers: the
    longest runs of consecutive intervals of one experiment whose inputs are
    one constant (their value), and each other interval alone (``None``)."""
    nu = disc.model.nu
    pieces: list[tuple[list[int], np.ndarray | None]] = []
    for e, sl in enumerate(disc.intervals_of):
        js = np.arange(sl.start, sl.stop)
        values = _constant_inputs(disc.experiments[e], disc.t0[js], disc.h[js], nu)
        for j, v in zip(js, values):
            last = pieces[-1] if pieces else None
            if (v is not None and last is not None and last[1] is not None
                    and disc.exp_of[last[0][-1]] == e and np.array_equal(last[1], v)):
                last[0].append(int(j))
            else:
                pieces.append(([int(j)], v))
    return pieces


#: CasADi's CVODES interface returns the initial state for an output time
#: within about 2e-9 of the start (casadi 3.8.2, in the normalised time of
#: :func:`~picard_casadi.simulate._build_segment_integrator`): a piece's first
#: output is kept at least this fraction of the piece's length from its start
#: (Robertson to t = 1e6 with samples from t = 1e-5: one piece of 1e6 put the
#: first eight samples of B at 0, 1000 times its residuals, in single
#: shooting's outputs)
SHORTEST_OUTPUT = 1e-6


def _short_pieces(disc: Discretisation, grids: list[tuple[float, ...]]
                  ) -> list[tuple[list[int], np.ndarray | None]]:
    """:func:`_constant_pieces`, each split where its length would exceed its
    first output time over :data:`SHORTEST_OUTPUT`."""
    out: list[tuple[list[int], np.ndarray | None]] = []
    for js, value in _constant_pieces(disc):
        if value is None:
            out.append((js, value))
            continue
        current: list[int] = []
        end = 0.0  # the latest time the current piece may reach
        for j in js:
            if current and float(disc.t0[j] + disc.h[j]) > end:
                out.append((current, value))
                current = []
            if not current:  # the longest piece its first output allows
                end = float(disc.t0[j] + grids[j][0] * disc.h[j] / SHORTEST_OUTPUT)
            current.append(j)
        out.append((current, value))
    return out


def chained_interval_states(disc: Discretisation, rtol: float, atol: float, max_steps: int,
                            method: str = "bdf", model: Model | None = None) -> ca.Function:
    """Single shooting on the mesh: each experiment integrated from its initial
    state, interval after interval, each interval starting where the last ended.

    ``(X0 (nx, E), p) -> (Xs (nx, J M), xend (nx, J), X (nx, J))``: the
    states at the sample slots, the intervals' end states and their starts,
    for the experiments' initial states ``X0``.  Consecutive intervals whose
    inputs are one constant (none, or an experiment's constants) are one
    CVODES run with outputs at their sample times and ends (a restart per
    interval costs CVODES its step size and order each time: PEtab's
    Crauste, 64 intervals, integrated 4 times faster in one run); each other
    interval is integrated as :class:`IntervalIntegrator` integrates it (its
    inputs' polynomial or its segments).  So the trajectory is the model's
    with every gap zero.  An MX function; ``model``: another model on the
    same mesh with the mesh model's inputs, such as the one with its
    sensitivities as states
    (:func:`~picard_casadi.transcription.forward_sensitivity.sensitivity_model`);
    ``X0`` then holds its states.
    """
    m = disc.model if model is None else model
    J, nx, np_ = disc.n_intervals, m.nx, m.np
    X0 = ca.MX.sym("X0", nx, len(disc.intervals_of))
    p = ca.MX.sym("p", np_)
    grids, inputs = _interval_plan(disc)
    starts: list[ca.MX] = [ca.MX()] * J
    states: dict[int, dict[float, ca.MX]] = {}
    x = None
    pieces = _short_pieces(disc, grids)
    run: list[int] = []  # consecutive intervals restarted at each sample: one chain
    for k, (js, value) in enumerate(pieces):
        j1 = js[0]
        if j1 == disc.intervals_of[disc.exp_of[j1]].start:
            x = X0[:, int(disc.exp_of[j1])]
        if value is None and inputs[j1] is None:
            run.append(j1)
            nxt = pieces[k + 1][0][0] if k + 1 < len(pieces) else None
            if (nxt is not None and pieces[k + 1][1] is None and inputs[nxt] is None
                    and nxt == j1 + 1 and disc.exp_of[nxt] == disc.exp_of[j1]):
                continue  # the run goes on
            chained = _segment_chain(disc, run, x, p, rtol, atol, max_steps, method, m)
            for j in run:
                starts[j] = x
                states[j] = chained[j]
                x = states[j][1.0]
            run = []
            continue
        if value is not None:
            a = float(disc.t0[j1])
            L = float(disc.t0[js[-1]] + disc.h[js[-1]] - a)
            # each interval's output times, in the piece's normalised time
            where = [(disc.t0[j] + np.asarray(grids[j]) * disc.h[j] - a) / L for j in js]
            grid = np.unique(np.round(np.concatenate(where), 13))
            grid[-1] = 1.0
            step = _segment_integrator(m, rtol, atol, max_steps, 0, tuple(grid), method)
            columns = ca.horzsplit(step(x, ca.DM(np.r_[a, L, value]), p))
            for j, times in zip(js, where):
                starts[j] = x
                states[j] = {tau: columns[int(np.argmin(np.abs(grid - s)))]
                             for tau, s in zip(grids[j], times)}
                x = states[j][1.0]
            continue
        j = j1  # an interval alone, its inputs a polynomial
        starts[j] = x
        degree, coef = inputs[j]
        step = _segment_integrator(m, rtol, atol, max_steps, degree, grids[j], method)
        Q = ca.DM(np.concatenate([[disc.t0[j], disc.h[j]], coef]))
        columns = ca.horzsplit(step(x, Q, p))
        states[j] = {tau: columns[g] for g, tau in enumerate(grids[j])}
        x = states[j][1.0]
    slots, ends = _slots_and_ends(disc, states, starts)
    return ca.Function("chained_interval_states", [X0, p], [slots, ends, ca.horzcat(*starts)],
                       ["X0", "p"], ["Xs", "xend", "X"])


def _segment_bounds(disc: Discretisation, j: int) -> np.ndarray:
    """Interval ``j``'s segments between CVODES restarts: its start, its own
    experiment's sample times in it, and its end."""
    ts = disc.sample_times[j][disc.sample_exp[j] == disc.exp_of[j]]
    return np.unique(np.concatenate([[disc.t0[j]], ts, [disc.t0[j] + disc.h[j]]]))


def _segment_chain(disc: Discretisation, js: list[int], x: ca.MX, p: ca.MX, rtol: float,
                   atol: float, max_steps: int, method: str, model: Model
                   ) -> dict[int, dict[float, ca.MX]]:
    """States of the consecutive intervals ``js`` of one experiment at their
    sample times, integrated from ``x`` at the first one's start with CVODES
    restarted at each sample and at each interval's end, as
    :meth:`IntervalIntegrator._segment_states` integrates one interval: the
    same segments in the same order, one ``mapaccum`` over all of them (a
    graph per interval took TC01's 454 intervals 0.65 s to build)."""
    nu = model.nu
    bounds = [_segment_bounds(disc, j) for j in js]
    counts = [b.size - 1 for b in bounds]
    Q = np.zeros((2 + nu * (_INPUT_DEGREE + 1), sum(counts)))
    exp = disc.experiments[disc.exp_of[js[0]]]
    at = 0
    for b, n in zip(bounds, counts):
        Q[0, at:at + n] = b[:-1]
        Q[1, at:at + n] = np.diff(b)
        if nu:
            Q[2:, at:at + n] = _input_coefficients(lambda tt: exp.inputs(tt, nu), b, nu)
        at += n
    step = _segment_integrator(model, rtol, atol, max_steps, method=method)
    traj = step.mapaccum("chain", sum(counts), [0], [0])(x, ca.DM(Q), p)
    out: dict[int, dict[float, ca.MX]] = {}
    at = 0
    for j, b, n in zip(js, bounds, counts):
        taus = np.round((b[1:] - disc.t0[j]) / disc.h[j], 13)
        taus[-1] = 1.0
        out[j] = {float(tau): traj[:, at + k] for k, tau in enumerate(taus)}
        at += n
    return out


#: integrators kept for repeated calls on the same mesh (see :func:`interval_integrator`)
_KEEP = 4
_KEPT: list[tuple[tuple, "IntervalIntegrator"]] = []
_KEPT_LOCK = threading.Lock()


def _mesh_signature(disc: Discretisation, rtol: float, atol: float, max_steps: int,
                    method: str, model: Model) -> tuple:
    """What an :class:`IntervalIntegrator` depends on: the model and experiments
    (the objects themselves, compared by identity) and the mesh's arrays."""
    arrays = b"".join(np.ascontiguousarray(a).tobytes() for a in (
        disc.t0, disc.h, disc.sample_tau, disc.sample_exp, disc.exp_of))
    return (model, tuple(disc.experiments), int(disc.M), arrays, float(rtol),
            float(atol), int(max_steps), method)


def interval_integrator(disc: Discretisation, rtol: float, atol: float,
                        max_steps: int, method: str = "bdf",
                        model: Model | None = None) -> "IntervalIntegrator":
    """An :class:`IntervalIntegrator` for ``disc``, reused where the last few calls
    built one for the same model, experiments, mesh, tolerances and method
    (repeated estimates of one problem, a profile's many fits: building it
    costs a CasADi graph and the inputs' interpolants, 30 ms on cmg).
    ``model``: as :class:`IntervalIntegrator`'s."""
    model = disc.model if model is None else model
    key = _mesh_signature(disc, rtol, atol, max_steps, method, model)
    with _KEPT_LOCK:
        for k, (kept_key, integrator) in enumerate(_KEPT):
            if (kept_key[0] is key[0] and len(kept_key[1]) == len(key[1])
                    and all(a is b for a, b in zip(kept_key[1], key[1]))
                    and kept_key[2:] == key[2:]):
                _KEPT.append(_KEPT.pop(k))
                return integrator
    integrator = IntervalIntegrator(disc, rtol, atol, max_steps, method, model)
    with _KEPT_LOCK:
        _KEPT.append((key, integrator))
        del _KEPT[:-_KEEP]
    return integrator


class IntervalIntegrator:
    """``(X, p) -> (states at the sample slots, end states)`` of every interval.

    Parameters
    ----------
    disc : Discretisation
    rtol, atol : float
        CVODES tolerances (``atol`` applies to the states as they are).
    max_steps : int
        CVODES step limit between outputs.
    method : {"bdf", "adams"}
        CVODES' multistep method (``simulate._build_segment_integrator``):
        BDF for any model, Adams where the model is not stiff on the intervals.
    model : Model, optional
        Another model on the same mesh with the mesh model's inputs (its
        states ``X`` then), such as the one with its sensitivities as states
        (:func:`~picard_casadi.transcription.forward_sensitivity.sensitivity_model`).

    Attributes
    ----------
    function : casadi.Function
        ``(X (nx, J), p (np,)) -> (Xs (nx, J M), xend (nx, J))``, an MX
        function: call it with MX symbols (an NLP) or numbers.  Padding
        slots of ``Xs`` (no sample) hold the interval start.
    """

    def __init__(self, disc: Discretisation, rtol: float, atol: float, max_steps: int,
                 method: str = "bdf", model: Model | None = None) -> None:
        m = disc.model if model is None else model
        J, nx, np_ = disc.n_intervals, m.nx, m.np
        self.disc, self.model = disc, m
        X = ca.MX.sym("X", nx, J)
        p = ca.MX.sym("p", np_)
        grids, inputs = _interval_plan(disc)
        groups: dict[tuple, list[int]] = {}
        for j in range(J):
            key = ("segments",) if inputs[j] is None else (inputs[j][0], grids[j])
            groups.setdefault(key, []).append(j)
        states: dict[int, dict[float, ca.MX]] = {}  # interval -> tau -> state
        for key, js in groups.items():
            if key == ("segments",):
                states.update(self._segment_states(disc, js, X[:, js], p, rtol, atol,
                                                   max_steps, method, model=m))
                continue
            degree, grid = key
            step = _segment_integrator(m, rtol, atol, max_steps, degree, grid, method)
            Q = np.column_stack([np.concatenate([[disc.t0[j], disc.h[j]], inputs[j][1]])
                                 for j in js])
            xf = step.map(len(js))(X[:, js], ca.DM(Q), p)  # nx x (len(grid) len(js))
            columns = ca.horzsplit(xf)  # one split, not an MX slice per column
            G = len(grid)
            for n, j in enumerate(js):
                states[j] = {tau: columns[n * G + g] for g, tau in enumerate(grid)}
        slots, ends = _slots_and_ends(disc, states, [X[:, j] for j in range(J)])
        self.function = ca.Function("interval_states", [X, p], [slots, ends],
                                    ["X", "p"], ["Xs", "xend"])

    @staticmethod
    def _segment_states(disc: Discretisation, js: list[int], starts: ca.MX, p: ca.MX,
                        rtol: float, atol: float, max_steps: int, method: str = "bdf",
                        model: Model | None = None) -> dict[int, dict[float, ca.MX]]:
        """States of intervals ``js`` (``starts``: theirs, ``nx x len(js)``) at their
        sample times, CVODES restarted at each (``model``: as
        :func:`chained_interval_states`')."""
        m = disc.model if model is None else model
        nu = m.nu
        bounds = [_segment_bounds(disc, j) for j in js]
        S = max(b.size - 1 for b in bounds)
        Q = np.zeros((len(js), 2 + nu * (_INPUT_DEGREE + 1), S))
        for n, (j, b) in enumerate(zip(js, bounds)):
            exp = disc.experiments[disc.exp_of[j]]
            ns = b.size - 1
            Q[n, 0, :ns] = b[:-1]
            Q[n, 1, :ns] = np.diff(b)
            if nu:
                Q[n, 2:, :ns] = _input_coefficients(lambda tt, exp=exp: exp.inputs(tt, nu), b, nu)
            Q[n, 0, ns:] = b[-1]  # zero-length padding segments
        step = _segment_integrator(m, rtol, atol, max_steps, method=method)
        chain = step.mapaccum("interval", S, [0], [0]).map(len(js))
        traj = chain(starts, ca.DM(to_map_layout(Q)), p)  # nx x (S len(js))
        out = {}
        for n, (j, b) in enumerate(zip(js, bounds)):
            taus = np.round((b[1:] - disc.t0[j]) / disc.h[j], 13)
            taus[-1] = 1.0
            out[j] = {float(tau): traj[:, n * S + k] for k, tau in enumerate(taus)}
        return out

    def __call__(self, X: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """States at the sample slots ``(J, nx, M)`` and end states ``(J, nx)``.

        Raises
        ------
        RuntimeError
            When CVODES fails on an interval (CasADi's error; what CVODES and
            CasADi print is kept off the terminal).
        KeyboardInterrupt
            After Ctrl-C, which CasADi would report as a failed integration.
        """
        d = self.disc
        printed: list[str] = []
        try:
            with interruptible(), captured_native_output() as printed:
                Xs, xend = self.function(np.asarray(X, float).T, np.asarray(p, float))
        except RuntimeError as err:
            reraise_if_interrupted(err, printed[0] if printed else "")
            raise
        Xs = np.asarray(Xs).reshape(self.model.nx, d.n_intervals, d.M).transpose(1, 0, 2)
        return Xs, np.asarray(xend).T
