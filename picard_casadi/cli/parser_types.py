"""The command line's argument types and spellings: numbers, bounds, weights, negative values."""

from __future__ import annotations

import argparse
import contextvars
import math
import re
from typing import Any

import numpy as np


def _number(text: str, kind: type, minimum: float, strict: bool, what: str) -> Any:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    if value < minimum or (strict and value == minimum):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def nonnegative_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    return _number(text, float, 0.0, False, "a number >= 0")


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    return _number(text, float, 0.0, True, "a positive number")


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _number(text, int, 0, False, "an integer >= 0")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _number(text, int, 1, False, "an integer >= 1")


def node_count(text: str) -> int:
    """argparse type: an integer >= 2."""
    return _number(text, int, 2, False, "an integer >= 2")


def job_count(text: str) -> int:
    """argparse type: a number of processes, an integer >= 1 or -1 (one per core)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1 and value != -1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, or -1 for one per core, "
                                         f"got {text!r}")
    return value


def finite(text: str, what: str, allow_inf: bool = False) -> float:
    try:
        value = float(text)
    except ValueError:
        again = (f" (one NAME=VALUE per flag: give the flag again for {text.split(',', 1)[1]!r})"
                 if "," in text and "=" in text.split(",", 1)[1] else "")
        raise argparse.ArgumentTypeError(f"{what}: {text!r} is not a number{again}") from None
    if math.isnan(value) or (math.isinf(value) and not allow_inf):
        raise argparse.ArgumentTypeError(f"{what}: expected a finite number, got {text!r}")
    return value


def assignment(text: str, form: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"expected {form}, got {text!r}")
    return name.strip(), value.strip()


def bounds_arg(text: str) -> tuple[str, float, float]:
    """argparse type of ``--bounds NAME=LO:HI`` (LO or HI empty: unbounded on that side)."""
    name, value = assignment(text, "NAME=LO:HI (e.g. k=0:10, k=0: or k=:5)")
    lo_text, sep, hi_text = value.partition(":")
    if not sep or ":" in hi_text:
        raise argparse.ArgumentTypeError(
            f"expected NAME=LO:HI (e.g. k=0:10, k=0: or k=:5), got {text!r}")
    lo = -math.inf if lo_text.strip() == "" else finite(lo_text, text, allow_inf=True)
    hi = math.inf if hi_text.strip() == "" else finite(hi_text, text, allow_inf=True)
    if lo == math.inf or hi == -math.inf:
        raise argparse.ArgumentTypeError(f"{text}: a lower bound of inf or an upper bound of "
                                         "-inf leaves nothing")
    if lo > hi:
        raise argparse.ArgumentTypeError(f"{text}: the lower bound {lo:g} exceeds the upper "
                                         f"bound {hi:g}")
    return name, lo, hi


def input_hold_arg(text: str) -> str | dict[str, str]:
    """argparse type of ``--input-hold``: ``linear`` or ``previous`` for every
    input, or ``NAME=previous[,NAME=linear...]`` for some (the others linear)."""
    if text.strip() in ("linear", "previous"):
        return text.strip()
    holds: dict[str, str] = {}
    for part in text.split(","):
        name, value = assignment(part, "linear, previous or NAME=previous[,NAME=...]")
        if value not in ("linear", "previous"):
            raise argparse.ArgumentTypeError(
                f"{text}: an input's hold is linear or previous, got {value!r}")
        holds[name] = value
    return holds


def fix_arg(text: str) -> tuple[str, float]:
    """argparse type of ``--fix NAME=VALUE``."""
    name, value = assignment(text, "NAME=VALUE (e.g. k=2.5)")
    return name, finite(value, text)


def weights_arg(text: str) -> str | np.ndarray:
    """argparse type of ``--weights``: ``auto``, ``none`` or one weight per output."""
    if text in ("auto", "none"):
        return text
    try:
        values = np.array([float(v) for v in text.replace(",", " ").split()])
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected auto, none or one number per output (w1,w2,...), got {text!r}") from None
    if (values.size == 0 or not np.all(np.isfinite(values)) or np.any(values < 0)
            or not np.any(values > 0)):
        raise argparse.ArgumentTypeError(
            f"the weights must be finite numbers >= 0, not all 0, got {text!r}")
    return values


def noise_arg(text: str) -> tuple[str | None, dict[str, object]]:
    """argparse type of ``--noise [OUTPUT=]DIST[:SIGMA]``: the output (None for
    every output) and the ``pc.Noise`` arguments.  ``DIST``: normal, log-normal
    or log10-normal; ``SIGMA``: a number (known), ``data`` (the CSV's
    ``sigma_<output>`` column) or a name (a noise parameter, shared by every
    output naming it); without it, estimated."""
    from ..noise import DISTRIBUTIONS

    output, _, spec = text.rpartition("=")
    dist, _, sigma = spec.partition(":")
    dist = dist.strip()
    if dist not in DISTRIBUTIONS:
        raise argparse.ArgumentTypeError(
            f"expected [OUTPUT=]DIST[:SIGMA] with DIST one of {', '.join(DISTRIBUTIONS)}, "
            f"got {text!r}")
    kwargs: dict[str, object] = {"distribution": dist}
    sigma = sigma.strip()
    if sigma:
        try:
            value = float(sigma)
        except ValueError:
            kwargs["sigma"] = sigma  # "data" or a noise parameter's name
        else:
            if not (np.isfinite(value) and value > 0):
                raise argparse.ArgumentTypeError(
                    f"a known sigma must be positive and finite, got {text!r}")
            kwargs["sigma"] = value
    return (output.strip() or None), kwargs


#: flags whose value may start with a minus sign (an aircraft's derivatives are negative)
_SIGNED_VALUE_FLAGS = ("--p0", "--x0")


_NUMBER_START = re.compile(r"-(\d|\.\d|inf|nan)", re.IGNORECASE)


def joined_negative_values(argv: list[str]) -> list[str]:
    """``--p0 -1,-5`` as ``--p0=-1,-5``: argparse reads a value starting with a
    minus sign as another flag ("expected one argument")."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if (argv[i] in _SIGNED_VALUE_FLAGS and i + 1 < len(argv)
                and _NUMBER_START.match(argv[i + 1])):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


# The library's messages give advice as Python keywords; here, as this program's flags
_FLAG_SPELLINGS = (
    (re.compile(r"codegen=False or 'auto'"), "--codegen off or auto"),
    (re.compile(r"codegen=False"), "--codegen off"),
    (re.compile(r"codegen=True"), "--codegen on"),
    (re.compile(r"codegen='auto'"), "--codegen auto"),
    (re.compile(r"pass max_intervals=([\d,]+) to estimate\(\)"),
     lambda m: "pass --max-intervals " + m.group(1).replace(",", "")),
    (re.compile(r"pass max_intervals to estimate\(\)"), "pass --max-intervals"),
    (re.compile(r"max_intervals=([\d,]+)"),
     lambda m: "--max-intervals " + m.group(1).replace(",", "")),
    (re.compile(r"Experiment\(\.\.\., u_interpolation='previous'(, breakpoints=t)?\)"),
     "--input-hold previous"),
    (re.compile(r"u_interpolation='(previous|linear)'(, breakpoints=t)?"),
     lambda m: "--input-hold " + m.group(1)),
    (re.compile(r"Experiment\(\.\.\., u_interpolation=\[[^\]]*\], breakpoints=t\) \(one per "
                r"input; (\S+) held\)"),
     lambda m: "--input-hold " + ",".join(f"{n}=previous" for n in m.group(1).split("+"))),
    (re.compile(r"Experiment\(\.\.\., x0=\[\.\.\.\]\) \(estimated from there unless "
                r"estimate_x0=False\)"), "--x0 (estimated from there unless --x0-known)"),
    (re.compile(r"estimate_x0=False"), "--x0-known"),
    (re.compile(r"pass Experiment\(\.\.\., t0=0\.0\)"), "pass --t0 0"),
    (re.compile(r"give it as Experiment\(\.\.\., t0=0\.0\)"), "give it as --t0 0"),
    (re.compile(r"\bt0=0\.0 would"), "--t0 0 would"),
    (re.compile(r"pass method= to choose"), "pass --method to choose"),
    (re.compile(r"noise='log-normal' \(a relative error\) or pc\.Noise\(sigma=a \+ b\*g, "
                r"output=g, \.\.\.\) \(docs/likelihood\.md\)"),
     "--noise log-normal (a relative error; a noise formula such as a + b*g needs the "
     "Python API, docs/likelihood.md)"),
    (re.compile(r"noise='([\w-]+)'"), lambda m: "--noise " + m.group(1)),
    (re.compile(r"multistart=(\d+)"), lambda m: "--multistart " + m.group(1)),
    (re.compile(r"per_experiment=\['NAME'\]"), "--per-experiment NAME"),
    (re.compile(r"ignore=\[([^\]]*)\]"),
     lambda m: "--ignore-columns " + ",".join(n.strip(" '\"") for n in m.group(1).split(","))),
    (re.compile(r"weights='auto'"), "--weights auto"),
    (re.compile(r"guess='(\w+)'"), lambda m: "--guess " + m.group(1)),
    (re.compile(r"method='([\w-]+)'"), lambda m: "--method " + m.group(1)),
    (re.compile(r"pc\.profile(\(res\))?"), "--profile"),
    (re.compile(r"increase max_iter"), "increase --max-iter"),
    (re.compile(r"progress_window=0"), "--progress-window 0"),
    (re.compile(r"(?<!')\bp_bounds\b(?!')"), "--bounds"),  # not a quoted Python name
    (re.compile(r"set it in every experiment \(Experiment\(parameters=\{\.\.\.\}\)\), or map "
                r"it to a parameter's name there"),
     "give it in every experiment's row of --conditions (a number, or a parameter's name)"),
    (re.compile(r"\b(shorter|smaller) T\b"), lambda m: m.group(1) + " --T"),
    # (only compare keeps its mesh: a user's study was told "refine=True")
    (re.compile(r"refine=True refines the mesh until it is"),
     "`picard-casadi fit` refines the mesh until it is"),
    (re.compile(r"\bmore nodes\b"), "more --nodes"),
)


#: whether the command reads a PEtab problem (``--petab``): its bounds and
#: fixed parameters are the parameter table's, which refuses --bounds and --fix
PETAB_TERMS: contextvars.ContextVar[bool] = contextvars.ContextVar("petab_terms",
                                                                  default=False)

_PETAB_SPELLINGS = (
    (re.compile(r"fix parameters \(equal lower and upper p_bounds\)"),
     "fix parameters (estimate = 0 in the PEtab parameter table)"),
    (re.compile(r"fix parameters \(Parameter\(estimate=False\) in the table p0\)"),
     "fix parameters (estimate = 0 in the PEtab parameter table)"),
    (re.compile(r"\(its Parameter's bounds in the table p0\)"),
     "(the PEtab parameter table's lowerBound, upperBound)"),
    (re.compile(r"\(p_bounds\)"), "(the PEtab parameter table's lowerBound, upperBound)"),
    (re.compile(r"the Parameter bounds in the table p0"),
     "the PEtab parameter table's lowerBound and upperBound"),
    (re.compile(r"\bp_bounds\b"), "the PEtab parameter table's lowerBound and upperBound"),
)


#: where the parameter box came from when a model file gave it (``"P_BOUNDS in
#: model.py"``): a bound named in advice is that one, or a --bounds flag's
BOX_ORIGIN: contextvars.ContextVar[str] = contextvars.ContextVar("box_origin", default="")


def in_cli_terms(message: str) -> str:
    """``message`` with its advice in Python keywords (``codegen=False``,
    ``max_intervals=N``) spelled as this program's flags (and, reading a
    PEtab problem, the bounds as its parameter table's: :data:`PETAB_TERMS`;
    a model file's, :data:`BOX_ORIGIN`)."""
    if PETAB_TERMS.get():
        for pattern, spelling in _PETAB_SPELLINGS:
            message = pattern.sub(spelling, message)
    if BOX_ORIGIN.get():  # (a model file's bound was called "(--bounds)")
        message = re.sub(r"(?<!')\bp_bounds\b(?!')", f"{BOX_ORIGIN.get()} or --bounds",
                         message)
    for pattern, spelling in _FLAG_SPELLINGS:
        message = pattern.sub(spelling, message)
    return message
