"""SBML to CasADi: the part of a PEtab problem that is an SBML model.

:func:`_translate_sbml` turns an SBML document (python-libsbml) into the
states, parameters, right-hand side and initial-state expressions of a
:class:`~picard_casadi.model.Model`; :class:`_MathConverter` walks
libsbml's expression trees into CasADi SX.  Used by
:mod:`picard_casadi.io.petab` (``read_petab``), which holds what is
supported and what is refused.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import casadi as ca

from ..errors import with_closest

__all__ = ["_MathConverter", "_parse_formula", "_names_in", "_Sbml", "_translate_sbml"]

_AVOGADRO = 6.02214076e23


# --------------------------------------------------------------------------- math

_HILL_TINY = 1e-300   # below it a Hill fraction's base is taken as written


def _hill_fraction(a: Any, b: Any, n: Any) -> ca.SX:
    """``a^n / (a^n + b^n)`` finite, with finite derivatives, for any ``n``.

    For positive ``a`` and ``b`` it is the logistic function of ``z = n
    (log a - log b)``, evaluated as ``1 / (1 + exp(-z))`` or ``exp(z) / (1 +
    exp(z))``, whichever does not overflow; elsewhere (a base zero,
    negative or below ``_HILL_TINY``) the fraction as written.  Each branch
    sees harmless arguments where it is not taken (``if_else`` evaluates
    both), so neither its value nor its derivatives can turn the other's
    into NaN.
    """
    a, b, n = ca.SX(a), ca.SX(b), ca.SX(n)
    positive = ca.logic_and(a > _HILL_TINY, b > _HILL_TINY)
    z = n * (ca.log(ca.if_else(positive, a, 1.0)) - ca.log(ca.if_else(positive, b, 1.0)))
    e = ca.exp(ca.if_else(z >= 0, -z, z))          # exp(-|z|), its slope -1 at 0
    logistic = ca.if_else(z >= 0, 1 / (1 + e), e / (1 + e))
    a_n = ca.if_else(positive, 1.0, a) ** n
    b_n = ca.if_else(positive, 1.0, b) ** n
    return ca.if_else(positive, logistic, a_n / (a_n + b_n))


def _unary(libsbml: Any) -> dict[int, Callable[[ca.SX], ca.SX]]:
    inv = lambda f: (lambda a: f(1 / a))  # noqa: E731
    return {
        libsbml.AST_FUNCTION_ABS: ca.fabs, libsbml.AST_FUNCTION_EXP: ca.exp,
        libsbml.AST_FUNCTION_LN: ca.log, libsbml.AST_FUNCTION_FLOOR: ca.floor,
        libsbml.AST_FUNCTION_CEILING: ca.ceil,
        libsbml.AST_FUNCTION_SIN: ca.sin, libsbml.AST_FUNCTION_COS: ca.cos,
        libsbml.AST_FUNCTION_TAN: ca.tan, libsbml.AST_FUNCTION_ARCSIN: ca.asin,
        libsbml.AST_FUNCTION_ARCCOS: ca.acos, libsbml.AST_FUNCTION_ARCTAN: ca.atan,
        libsbml.AST_FUNCTION_SINH: ca.sinh, libsbml.AST_FUNCTION_COSH: ca.cosh,
        libsbml.AST_FUNCTION_TANH: ca.tanh, libsbml.AST_FUNCTION_ARCSINH: ca.asinh,
        libsbml.AST_FUNCTION_ARCCOSH: ca.acosh, libsbml.AST_FUNCTION_ARCTANH: ca.atanh,
        libsbml.AST_FUNCTION_SEC: lambda a: 1 / ca.cos(a),
        libsbml.AST_FUNCTION_CSC: lambda a: 1 / ca.sin(a),
        libsbml.AST_FUNCTION_COT: lambda a: 1 / ca.tan(a),
        libsbml.AST_FUNCTION_SECH: lambda a: 1 / ca.cosh(a),
        libsbml.AST_FUNCTION_CSCH: lambda a: 1 / ca.sinh(a),
        libsbml.AST_FUNCTION_COTH: lambda a: 1 / ca.tanh(a),
        libsbml.AST_FUNCTION_ARCSEC: inv(ca.acos), libsbml.AST_FUNCTION_ARCCSC: inv(ca.asin),
        libsbml.AST_FUNCTION_ARCCOT: inv(ca.atan), libsbml.AST_FUNCTION_ARCSECH: inv(ca.acosh),
        libsbml.AST_FUNCTION_ARCCSCH: inv(ca.asinh),
        libsbml.AST_FUNCTION_ARCCOTH: inv(ca.atanh),
    }


class _MathConverter:
    """libsbml ASTs (MathML, or PEtab's formulas parsed by libsbml) as CasADi SX.

    Walking the AST, not evaluating a string, keeps SBML's meaning of every
    operator (``log`` with a base, ``piecewise``, the ``time`` csymbol,
    n-ary relations) and names the construct it cannot translate.  A Hill
    fraction with an exponent that is not a number, ``a^n / (a^n + b^n)``
    within a quotient's factors, is evaluated so that it stays finite where
    the powers underflow or overflow (:func:`_hill_fraction`).
    """

    def __init__(self, libsbml: Any, lookup: Callable[[str], ca.SX],
                 functions: Mapping[str, tuple[list[str], Any]], t: ca.SX, where: str) -> None:
        self.sbml = libsbml
        self.lookup = lookup
        self.functions = functions
        self.t = t
        self.where = where
        self.unary = _unary(libsbml)
        s = libsbml
        self.relations = {s.AST_RELATIONAL_EQ: lambda a, b: a == b,
                          s.AST_RELATIONAL_NEQ: lambda a, b: a != b,
                          s.AST_RELATIONAL_LT: lambda a, b: a < b,
                          s.AST_RELATIONAL_LEQ: lambda a, b: a <= b,
                          s.AST_RELATIONAL_GT: lambda a, b: a > b,
                          s.AST_RELATIONAL_GEQ: lambda a, b: a >= b}

    def __call__(self, node: Any, local: Mapping[str, ca.SX] | None = None,
                 context: str = "") -> ca.SX:
        if node is None:
            raise ValueError(f"{self.where}: {context or 'an expression'} has no math")
        return ca.SX(self._convert(node, dict(local or {}), context))

    def _fail(self, what: str, context: str) -> NotImplementedError:
        return NotImplementedError(
            f"{self.where}: {what} (in {context or 'an expression'}) is not supported by the "
            "PEtab importer")

    def _power(self, node: Any) -> tuple[str, str, Any, Any] | None:
        """A power whose exponent is not a number: its base's and exponent's
        text (to compare them) and nodes; otherwise None."""
        s = self.sbml
        if node.getType() not in (s.AST_POWER, s.AST_FUNCTION_POWER) \
                or node.getNumChildren() != 2 or node.getChild(1).isNumber():
            return None
        base, expo = node.getChild(0), node.getChild(1)
        return s.formulaToL3String(base), s.formulaToL3String(expo), base, expo

    def _factors(self, node: Any) -> list[Any]:
        """The factors of a product (the node itself if it is not one)."""
        if node.getType() != self.sbml.AST_TIMES:
            return [node]
        return [f for i in range(node.getNumChildren()) for f in self._factors(node.getChild(i))]

    def _hill_quotient(self, num: Any, den: Any, conv: Callable[[Any], Any]) -> Any:
        """``num / den`` with each Hill fraction ``a^n / (a^n + b^n)`` in it
        (``a^n`` a factor of ``num``, ``a^n + b^n`` one of ``den``, the same
        exponent ``n`` and not a number) evaluated by :func:`_hill_fraction`;
        None where there is none.

        As written, the fraction is 0/0 where both powers underflow or
        overflow (Elowitz's ``KM^n_Hill`` with ``n_Hill`` = 261 and ``KM`` =
        0.017; Borghans' ``n_par`` above 1000): the model could not be
        evaluated at such parameters although the fraction is 0, 1/2 or 1
        there.
        """
        nums, dens = self._factors(num), self._factors(den)
        taken_num: set[int] = set()
        taken_den: set[int] = set()
        hills = []
        for j, d in enumerate(dens):
            if d.getType() != self.sbml.AST_PLUS or d.getNumChildren() != 2:
                continue
            p, q = self._power(d.getChild(0)), self._power(d.getChild(1))
            if p is None or q is None or p[1] != q[1] or p[0] == q[0]:
                continue
            for i, f in enumerate(nums):
                r = self._power(f)
                if i in taken_num or r is None or r[1] != p[1] or r[0] not in (p[0], q[0]):
                    continue
                top, other = (p, q) if r[0] == p[0] else (q, p)
                hills.append(_hill_fraction(conv(top[2]), conv(other[2]), conv(top[3])))
                taken_num.add(i)
                taken_den.add(j)
                break
        if not hills:
            return None
        out: Any = 1.0
        for i, f in enumerate(nums):
            if i not in taken_num:
                out = out * conv(f)
        for h in hills:
            out = out * h
        for j, d in enumerate(dens):
            if j not in taken_den:
                out = out / conv(d)
        return out

    def _convert(self, node: Any, local: dict[str, ca.SX], context: str) -> Any:
        s = self.sbml
        k = node.getType()
        kids = [node.getChild(i) for i in range(node.getNumChildren())]
        conv = lambda n: self._convert(n, local, context)  # noqa: E731
        if k == s.AST_INTEGER:
            return float(node.getInteger())
        if k in (s.AST_REAL, s.AST_REAL_E, s.AST_RATIONAL):
            return float(node.getReal())
        if k == s.AST_NAME:
            name = node.getName()
            return local[name] if name in local else self.lookup(name)
        if k == s.AST_NAME_TIME:
            return self.t
        if k == s.AST_NAME_AVOGADRO:
            return _AVOGADRO
        if k == s.AST_CONSTANT_E:
            return math.e
        if k == s.AST_CONSTANT_PI:
            return math.pi
        if k == s.AST_CONSTANT_TRUE:
            return 1.0
        if k == s.AST_CONSTANT_FALSE:
            return 0.0
        if k == s.AST_PLUS:
            out: Any = 0.0
            for c in kids:
                out = out + conv(c)
            return out
        if k == s.AST_TIMES:
            out = 1.0
            for c in kids:
                out = out * conv(c)
            return out
        if k == s.AST_MINUS:
            if len(kids) == 1:
                return -conv(kids[0])
            return conv(kids[0]) - conv(kids[1])
        if k == s.AST_DIVIDE:
            hill = self._hill_quotient(kids[0], kids[1], conv)
            return conv(kids[0]) / conv(kids[1]) if hill is None else hill
        if k in (s.AST_POWER, s.AST_FUNCTION_POWER):
            base, expo = conv(kids[0]), conv(kids[1])
            return ca.power(ca.SX(base), ca.SX(expo)) if isinstance(base, float) else base ** expo
        if k in self.unary:
            return self.unary[k](ca.SX(conv(kids[0])))
        if k == s.AST_FUNCTION_LOG:  # log(base, x); a single child: base 10
            if len(kids) == 1:
                return ca.log10(ca.SX(conv(kids[0])))
            return ca.log(ca.SX(conv(kids[1]))) / ca.log(ca.SX(conv(kids[0])))
        if k == s.AST_FUNCTION_ROOT:
            if len(kids) == 1:
                return ca.sqrt(ca.SX(conv(kids[0])))
            return ca.SX(conv(kids[1])) ** (1 / ca.SX(conv(kids[0])))
        if k in (s.AST_FUNCTION_MAX, s.AST_FUNCTION_MIN):
            f = ca.fmax if k == s.AST_FUNCTION_MAX else ca.fmin
            out = ca.SX(conv(kids[0]))
            for c in kids[1:]:
                out = f(out, conv(c))
            return out
        if k == s.AST_FUNCTION_REM:
            return ca.fmod(ca.SX(conv(kids[0])), ca.SX(conv(kids[1])))
        if k == s.AST_FUNCTION_QUOTIENT:
            q = ca.SX(conv(kids[0])) / conv(kids[1])
            return ca.sign(q) * ca.floor(ca.fabs(q))
        if k in self.relations:
            rel = self.relations[k]
            vals = [ca.SX(conv(c)) for c in kids]
            out = rel(vals[0], vals[1])
            for a, b in zip(vals[1:-1], vals[2:]):
                out = ca.logic_and(out, rel(a, b))
            return out
        if k == s.AST_LOGICAL_AND:
            out = ca.SX(1.0)
            for c in kids:
                out = ca.logic_and(out, ca.SX(conv(c)))
            return out
        if k == s.AST_LOGICAL_OR:
            out = ca.SX(0.0)
            for c in kids:
                out = ca.logic_or(out, ca.SX(conv(c)))
            return out
        if k == s.AST_LOGICAL_NOT:
            return ca.logic_not(ca.SX(conv(kids[0])))
        if k == s.AST_LOGICAL_XOR:
            out = ca.SX(0.0)
            for c in kids:
                v = ca.SX(conv(c))
                out = ca.logic_and(ca.logic_or(out, v), ca.logic_not(ca.logic_and(out, v)))
            return out
        if k == s.AST_FUNCTION_PIECEWISE:
            # value_1, condition_1, value_2, condition_2, ..., [otherwise]
            out = ca.SX(conv(kids[-1])) if len(kids) % 2 else ca.SX(0.0)
            for i in range(len(kids) // 2 - 1, -1, -1):
                out = ca.if_else(ca.SX(conv(kids[2 * i + 1])), ca.SX(conv(kids[2 * i])), out)
            return out
        if k == s.AST_FUNCTION:
            name = node.getName()
            if name not in self.functions:
                raise ValueError(f"{self.where}: function {name!r} (in {context}) is not "
                                 "defined in the SBML model")
            args, body = self.functions[name]
            if len(args) != len(kids):
                raise ValueError(f"{self.where}: function {name!r} takes {len(args)} "
                                 f"arguments, {len(kids)} given (in {context})")
            bound = {a: ca.SX(conv(c)) for a, c in zip(args, kids)}
            return self._convert(body, bound, f"function {name!r}")
        if k == s.AST_FUNCTION_DELAY:
            raise self._fail("delay()", context)
        if k == s.AST_FUNCTION_RATE_OF:
            raise self._fail("rateOf()", context)
        if k == s.AST_FUNCTION_FACTORIAL:
            raise self._fail("factorial()", context)
        raise self._fail(f"the MathML element {node.getName() or k!r}", context)


def _parse_formula(libsbml: Any, formula: str, where: str) -> Any:
    """A PEtab formula (``^`` or ``**``; ``log`` natural) as a libsbml AST."""
    settings = libsbml.L3ParserSettings()
    settings.setParseLog(libsbml.L3P_PARSE_LOG_AS_LN)
    ast = libsbml.parseL3FormulaWithSettings(str(formula).replace("**", "^"), settings)
    if ast is None:
        raise ValueError(f"{where}: cannot parse the formula {formula!r}: "
                         f"{libsbml.getLastParseL3Error()}")
    return ast


def _names_in(libsbml: Any, ast: Any) -> set[str]:
    """The names (symbols and functions) an AST uses."""
    out: set[str] = set()
    stack = [ast]
    while stack:
        n = stack.pop()
        if n.getType() in (libsbml.AST_NAME, libsbml.AST_FUNCTION):
            out.add(n.getName())
        stack.extend(n.getChild(i) for i in range(n.getNumChildren()))
    return out


# --------------------------------------------------------------------------- SBML

@dataclass
class _Sbml:
    """An SBML model translated: states, their derivatives and initial values."""

    t: ca.SX
    x: ca.SX
    x_names: list[str]
    rhs: ca.SX
    x0: list[ca.SX]
    p: dict[str, ca.SX]          # model parameters by name (SBML ids and species' x0)
    value: Callable[[str], ca.SX]  # any SBML id as an expression of (x, p, t)
    default: dict[str, ca.SX]     # SBML's own value of each p (a parameter's, a species' x0)
    convert: _MathConverter
    t_unit: str = ""              # the model's time unit, where SBML states one


#: a time unit of this many seconds, by its usual symbol
_TIME_UNITS = {1.0: "s", 60.0: "min", 3600.0: "h", 86400.0: "d"}


def time_unit(libsbml: Any, m: Any) -> str:
    """The SBML model ``m``'s time unit: Level 3's ``timeUnits``, or Level
    2's redefined ``time``; a whole number of seconds, minutes, hours or
    days by its symbol, another unit by its id, and ``""`` where the model
    states none (PEtab's time has no unit of its own)."""
    uid = m.getTimeUnits() if m.isSetTimeUnits() else "time"
    ud = m.getUnitDefinition(uid)
    if ud is not None and ud.getNumUnits() == 1:
        u = ud.getUnit(0)
        if u.getKind() == libsbml.UNIT_KIND_SECOND and u.getExponent() == 1:
            return _TIME_UNITS.get(u.getMultiplier() * 10.0 ** u.getScale(), uid)
    if m.isSetTimeUnits():
        return {"second": "s", "dimensionless": ""}.get(uid, uid)
    return ""


def _translate_sbml(libsbml: Any, doc: Any, where: str, as_parameters: set[str],
                    species_set: set[str]) -> _Sbml:
    """The SBML model as CasADi expressions.

    ``as_parameters``: SBML parameter and (constant) compartment ids that
    become model parameters (a species' initial concentration stays as given
    when its compartment's size is set this way, as PEtab reads it);
    ``species_set``: species (and parameters a rate rule drives) whose
    initial value a parameter ``<id>_0`` gives.
    """
    m = doc.getModel()
    if m is None:
        raise ValueError(f"{where}: no SBML model in the file")
    if m.getNumEvents():
        raise NotImplementedError(f"{where}: SBML events ({m.getNumEvents()}, e.g. "
                                  f"{m.getEvent(0).getId()!r}) are not supported")
    for r in m.getListOfRules():
        if r.isAlgebraic():
            raise NotImplementedError(f"{where}: SBML algebraic rules are not supported")
    if m.isSetConversionFactor() or any(s.isSetConversionFactor() for s in m.getListOfSpecies()):
        raise NotImplementedError(f"{where}: SBML conversion factors are not supported")
    t = ca.SX.sym("t")
    functions = {}
    for fd in m.getListOfFunctionDefinitions():
        functions[fd.getId()] = ([fd.getArgument(i).getName() for i in range(fd.getNumArguments())],
                                 fd.getBody())
    assignment = {r.getVariable(): r for r in m.getListOfRules() if r.isAssignment()}
    rate = {r.getVariable(): r for r in m.getListOfRules() if r.isRate()}
    initial = {a.getSymbol(): a for a in m.getListOfInitialAssignments()}
    compartments = {c.getId(): c for c in m.getListOfCompartments()}
    species = {s.getId(): s for s in m.getListOfSpecies()}
    params = {q.getId(): q for q in m.getListOfParameters()}
    reactions = {r.getId(): r for r in m.getListOfReactions()}
    for cid, c in compartments.items():
        if cid in rate or cid in assignment or not c.getConstant():
            raise NotImplementedError(f"{where}: compartment {cid!r} is not constant (its size "
                                      "changes); only constant compartments are supported")
        if cid in as_parameters and cid in initial:
            raise NotImplementedError(f"{where}: compartment {cid!r} is set by the PEtab "
                                      "tables and by an SBML initial assignment; that is not "
                                      "supported")
    for pid in as_parameters:
        if pid not in params and pid not in compartments:
            raise ValueError(f"{where}: {with_closest(pid, [*params, *compartments])} is not "
                             "a parameter or compartment of the SBML model")
        if pid in assignment or pid in rate:
            raise ValueError(f"{where}: parameter {pid!r} is set by an SBML rule, so the PEtab "
                             "tables cannot set or estimate it")
    stoich_ids = {sr.getId() for r in m.getListOfReactions()
                  for sr in list(r.getListOfReactants()) + list(r.getListOfProducts())
                  if sr.isSetId()}
    variable = sorted(stoich_ids & (set(assignment) | set(rate) | set(initial)))
    if variable:
        raise NotImplementedError(f"{where}: variable stoichiometries ({variable}) are not "
                                  "supported")

    # constant parameters and compartment sizes the tables set or estimate
    p = {pid: ca.SX.sym(pid) for pid in [*params, *compartments] if pid in as_parameters}
    for sid in sorted(species_set):
        if sid not in species and not (sid in params and sid in rate):
            raise ValueError(f"{where}: {sid!r} is not a species of the SBML model (nor a "
                             "parameter a rate rule drives)")
        name = f"{sid}_0"
        while name in params or name in species or name in compartments or name in p:
            name += "_"
        p[sid] = ca.SX.sym(name)  # keyed by the species' id; named <id>_0
    state_ids = [sid for sid in species if sid not in assignment]
    state_ids += [pid for pid in params if pid in rate]
    for cid in rate:
        if cid not in species and cid not in params:
            raise NotImplementedError(f"{where}: a rate rule for {cid!r} is not supported")
    x = ca.SX.sym("x", len(state_ids))
    index = {sid: i for i, sid in enumerate(state_ids)}

    memo: dict[tuple[str, bool], ca.SX] = {}
    busy: set[tuple[str, bool]] = set()

    def resolve(name: str, at_start: bool) -> ca.SX:
        key = (name, at_start)
        if key in memo:
            return memo[key]
        if key in busy:
            raise ValueError(f"{where}: the SBML rules or initial assignments for {name!r} "
                             "depend on themselves")
        busy.add(key)
        try:
            memo[key] = value = _resolve(name, at_start)
        finally:
            busy.discard(key)
        return value

    conv_dyn = _MathConverter(libsbml, lambda n: resolve(n, False), functions, t, where)
    conv_ini = _MathConverter(libsbml, lambda n: resolve(n, True), functions, ca.SX(0.0), where)

    def initial_value(name: str) -> ca.SX:
        """A state's (or a parameter's) value at t = 0, the condition table's first."""
        return p[name] if name in species_set else sbml_initial(name)

    def sbml_initial(name: str) -> ca.SX:
        """The value at t = 0 that the SBML model gives."""
        if name in initial:
            return conv_ini(initial[name].getMath(), context=f"the initial assignment of {name!r}")
        if name in compartments:
            c = compartments[name]
            if not c.isSetSize():
                raise ValueError(f"{where}: compartment {name!r} has no size")
            return ca.SX(float(c.getSize()))
        if name in species:
            s = species[name]
            size = resolve(s.getCompartment(), True)
            if s.isSetInitialConcentration():
                c = float(s.getInitialConcentration())
                return ca.SX(c * size if s.getHasOnlySubstanceUnits() else c)
            if s.isSetInitialAmount():
                a = float(s.getInitialAmount())
                return ca.SX(a if s.getHasOnlySubstanceUnits() else a / size)
            raise ValueError(f"{where}: species {name!r} has no initial value")
        q = params[name]
        if not q.isSetValue():
            raise ValueError(f"{where}: parameter {name!r} has no value")
        return ca.SX(float(q.getValue()))

    def _resolve(name: str, at_start: bool) -> ca.SX:
        conv = conv_ini if at_start else conv_dyn
        if name == "time":  # a formula's name for time (SBML's is the csymbol)
            if name not in species and name not in params and name not in compartments:
                return conv.t
        if name in p and name not in rate and (name in params or name in compartments):
            return p[name]  # a constant the tables set: the same at t = 0 and later
        if name in assignment:
            return conv(assignment[name].getMath(), context=f"the assignment rule of {name!r}")
        if name in index:
            return initial_value(name) if at_start else x[index[name]]
        if name in compartments:
            if name in initial:
                raise NotImplementedError(f"{where}: the initial assignment of compartment "
                                          f"{name!r} is not supported")
            c = compartments[name]
            if not c.isSetSize():
                raise ValueError(f"{where}: compartment {name!r} has no size")
            return ca.SX(float(c.getSize()))
        if name in params:
            if name in initial:
                return conv_ini(initial[name].getMath(),
                                context=f"the initial assignment of {name!r}")
            return initial_value(name)
        if name in reactions:
            return rate_of(reactions[name], conv)
        if name in stoich_ids:
            raise NotImplementedError(f"{where}: species reference {name!r} used in math is "
                                      "not supported")
        raise ValueError(f"{where}: the symbol {name!r} is not defined in the SBML model")

    def rate_of(r: Any, conv: _MathConverter) -> ca.SX:
        kl = r.getKineticLaw()
        if kl is None or not kl.isSetMath():
            raise ValueError(f"{where}: reaction {r.getId()!r} has no kinetic law")
        local = {q.getId(): ca.SX(float(q.getValue())) for q in kl.getListOfParameters()}
        if hasattr(kl, "getListOfLocalParameters"):
            local.update({q.getId(): ca.SX(float(q.getValue()))
                          for q in kl.getListOfLocalParameters()})
        return conv(kl.getMath(), local, context=f"the kinetic law of reaction {r.getId()!r}")

    def stoichiometry(sr: Any, rid: str) -> float:
        if hasattr(sr, "isSetStoichiometryMath") and sr.isSetStoichiometryMath():
            raise NotImplementedError(f"{where}: stoichiometryMath (reaction {rid!r}) is not "
                                      "supported")
        return float(sr.getStoichiometry()) if sr.isSetStoichiometry() else 1.0

    flux = {sid: ca.SX(0.0) for sid in species}
    for rid, r in reactions.items():
        if r.isSetFast() and r.getFast():
            raise NotImplementedError(f"{where}: fast reaction {rid!r} is not supported")
        v = rate_of(r, conv_dyn)
        for sr in r.getListOfReactants():
            flux[sr.getSpecies()] = flux[sr.getSpecies()] - stoichiometry(sr, rid) * v
        for sr in r.getListOfProducts():
            flux[sr.getSpecies()] = flux[sr.getSpecies()] + stoichiometry(sr, rid) * v
    rhs = []
    for sid in state_ids:
        if sid in rate:
            rhs.append(conv_dyn(rate[sid].getMath(), context=f"the rate rule of {sid!r}"))
        elif sid in species and not (species[sid].getBoundaryCondition()
                                     or species[sid].getConstant()):
            s = species[sid]
            size = resolve(s.getCompartment(), False)
            rhs.append(flux[sid] if s.getHasOnlySubstanceUnits() else flux[sid] / size)
        else:  # a boundary or constant species
            rhs.append(ca.SX(0.0))
    x0 = [resolve(sid, True) for sid in state_ids]
    # SBML's own values of what the tables set (for a condition that leaves it empty)
    default = {name: sbml_initial(name) for name in p}
    return _Sbml(t=t, x=x, x_names=state_ids, rhs=ca.vertcat(*rhs), x0=x0, p=p,
                 value=lambda n: resolve(n, False), default=default, convert=conv_dyn,
                 t_unit=time_unit(libsbml, m))


