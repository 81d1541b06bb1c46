"""Where a model's right-hand side is not smooth in its states: functions
whose value jumps (``sign``, ``floor``, ``ceil``, ``fmod``, comparisons, so
``if_else`` and piecewise definitions) or whose derivative does (``fabs``,
``fmin``, ``fmax``), with the states each one's argument depends on.

Every method assumes a smooth model: the Gauss-Newton steps, the
collocation and CVODES.  A jump in time (a piecewise input) is where the
mesh or the integrator restarts; a jump in a state is where it crosses a
threshold, and where a state comes to rest there (Coulomb friction that
sticks) the solution chatters and every method slows down or fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import casadi as ca

__all__ = ["NonsmoothTerm", "nonsmooth_terms", "nonsmooth_note", "state_jump_note"]

#: CasADi operations whose value jumps, by the name a user writes
_JUMPS = {"OP_SIGN": "sign", "OP_FLOOR": "floor", "OP_CEIL": "ceil", "OP_FMOD": "fmod",
          "OP_REMAINDER": "remainder", "OP_COPYSIGN": "copysign", "OP_LT": "if_else",
          "OP_LE": "if_else", "OP_EQ": "if_else", "OP_NE": "if_else"}
#: ... and those whose derivative jumps
_KINKS = {"OP_FABS": "fabs", "OP_FMIN": "fmin", "OP_FMAX": "fmax"}
#: the smooth forms the notes advise
_SMOOTH = {"sign": "tanh({x} / eps) for sign({x})",
           "if_else": "a logistic 1 / (1 + exp(-({x} - c) / eps)) for a switch at {x} = c",
           "fabs": "sqrt({x}**2 + eps**2) for fabs({x})"}


@dataclass(frozen=True)
class NonsmoothTerm:
    """A function of the right-hand side that is not smooth.

    Attributes
    ----------
    name : str
        As a user writes it (``"sign"``; ``"if_else"`` for a comparison,
        as ``if_else`` and piecewise definitions make them).
    jumps : bool
        Its value jumps (else its derivative does).
    states : tuple of str
        The states its argument depends on (empty: of time, inputs and
        parameters alone).
    """

    name: str
    jumps: bool
    states: tuple[str, ...]


def nonsmooth_terms(model: Any) -> list[NonsmoothTerm]:
    """The functions of ``model.rhs`` that jump or kink, one per name, with
    the states their arguments depend on (by a pass over the expression's
    instructions, each carrying the set of states it depends on)."""
    f = ca.Function("rhs", [model.x, model.p, model.u, model.t], [model.rhs])
    codes = {getattr(ca, op): name for op, name in {**_JUMPS, **_KINKS}.items()
             if hasattr(ca, op)}
    on: dict[int, frozenset[int]] = {}
    found: dict[str, set[int]] = {}
    op_input, op_output = ca.OP_INPUT, ca.OP_OUTPUT
    for k in range(f.n_instructions()):
        op, args, outs = f.instruction_id(k), f.instruction_input(k), f.instruction_output(k)
        if op == op_input:  # (input index, nonzero) -> a work slot
            on[outs[0]] = frozenset([args[1]]) if args[0] == 0 else frozenset()
            continue
        if op == op_output:
            continue
        states = frozenset().union(*(on.get(a, frozenset()) for a in args if a >= 0))
        if op in codes:
            found.setdefault(codes[op], set()).update(states)
        for o in outs:
            on[o] = states
    names = list(model.x_names)
    order = list(dict.fromkeys([*_JUMPS.values(), *_KINKS.values()]))
    jump_names = set(_JUMPS.values())
    return [NonsmoothTerm(name, name in jump_names, tuple(names[i] for i in sorted(found[name])))
            for name in order if name in found]


def _smooth_forms(terms: list[NonsmoothTerm]) -> str:
    forms = [_SMOOTH[t.name].format(x=t.states[0] if t.states else "w")
             for t in terms if t.name in _SMOOTH]
    return "; ".join(forms)


def nonsmooth_note(model: Any) -> str:
    """Where the right-hand side jumps or kinks in a state, a sentence saying
    so and the smooth forms (for a failed fit's message), or ``""``.  A
    controls engineer's motor with Coulomb friction written ``Fc * sign(w)``
    failed in every method from a moderate start, the messages advising a
    better p0."""
    terms = [t for t in nonsmooth_terms(model) if t.states]
    if not terms:
        return ""
    jumps = [t for t in terms if t.jumps]
    used = ", ".join(f"{t.name}() of {'/'.join(t.states)}" for t in terms)
    forms = _smooth_forms(terms)
    return (f"the model's right-hand side uses {used}, where its "
            f"{'value' if jumps else 'derivative'} jumps: the steps of every method assume "
            "a smooth model, and fail where a state crosses such a point"
            + (f" (a smooth form: {forms})" if forms else ""))


def state_jump_note(model: Any) -> str:
    """Where the right-hand side's value jumps at a threshold of a state, a
    sentence for the start of a fit (the command line prints it before the
    fit), or ``""``: a pendulum with ``c * sign(omega)`` that comes to rest
    ran for more than 15 minutes without a word, single shooting's CVODES
    chattering at omega = 0 (25-34 s per iteration)."""
    terms = [t for t in nonsmooth_terms(model) if t.states and t.jumps]
    if not terms:
        return ""
    used = ", ".join(f"{t.name}() of {'/'.join(t.states)}" for t in terms)
    forms = _smooth_forms(terms)
    return (f"the model's right-hand side jumps where a state crosses a threshold ({used}): "
            "where a state comes to rest there (a friction that sticks), the solution "
            "chatters and every method slows down or fails"
            + (f"; a smooth form avoids it: {forms}" if forms else ""))
