"""Checks of the package's arguments, before anything is built.

Pure functions: each takes a value and the argument's name, returns the value
in the form the package uses, and raises :class:`TypeError` (wrong kind of
value) or :class:`ValueError` (right kind, wrong value) naming the argument
and what it accepts.  NumPy scalars (``np.int64(5)``, ``np.float32(0.1)``)
are accepted wherever Python numbers are; ``bool`` is not a number here
(``n=True`` is a mistake, not ``n=1``).

The resource guard on a problem's size is
:mod:`picard_casadi.transcription.problem_size`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "as_int", "as_positive_number", "as_bool", "as_codegen", "check_seed",
    "check_bounds_not_nan", "check_callback", "check_choice",
]

def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def as_int(value: Any, name: str, minimum: int = 1) -> int:
    """``value`` as an ``int >= minimum``; Python and NumPy integers (and
    integral floats such as ``2.0``) are accepted.

    Raises
    ------
    TypeError
        For ``None``, strings, booleans and other non-numbers.
    ValueError
        For non-integral or too small values.
    """
    if not _is_number(value):
        raise TypeError(f"`{name}` must be an integer >= {minimum}, got {value!r} "
                        f"({type(value).__name__})")
    if not math.isfinite(float(value)) or int(value) != value:
        raise ValueError(f"`{name}` must be an integer >= {minimum}, got {value!r}")
    if int(value) < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}, got {value!r}")
    return int(value)


def as_positive_number(value: Any, name: str) -> float:
    """``value`` as a finite ``float > 0`` (Python or NumPy int or float).

    Raises
    ------
    TypeError
        For ``None``, strings, booleans and other non-numbers.
    ValueError
        For zero, negative, NaN or infinite values.
    """
    if not _is_number(value):
        raise TypeError(f"`{name}` must be a positive number, got {value!r} "
                        f"({type(value).__name__})")
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"`{name}` must be a positive finite number, got {value!r}")
    return v


def as_bool(value: Any, name: str) -> bool:
    """``value`` as a ``bool``: only ``True``/``False`` (or NumPy's) are accepted.

    A string such as ``"no"`` is truthy, so it is refused rather than read
    as ``True``.
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be True or False, got {value!r} ({type(value).__name__})")
    return bool(value)


def check_seed(seed: Any, name: str = "seed") -> Any:
    """A seed for :func:`numpy.random.default_rng`: ``None``, an integer
    ``>= 0``, a :class:`numpy.random.SeedSequence` or a
    :class:`numpy.random.Generator`."""
    if seed is None or isinstance(seed, (np.random.SeedSequence, np.random.Generator)):
        return seed
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (numbers.Integral,)):
        raise TypeError(f"`{name}` must be None, an integer >= 0 or a numpy Generator, "
                        f"got {seed!r} ({type(seed).__name__})")
    if seed < 0:
        raise ValueError(f"`{name}` must be an integer >= 0, got {seed!r}")
    return int(seed)


def check_bounds_not_nan(bounds: Any, name: str) -> None:
    """Refuse a NaN in a ``(lower, upper)`` pair of bounds.

    NaN is neither a bound nor "no bound": ``None``, ``-inf`` and ``inf``
    say that.  Other malformed bounds are left to the caller's own checks.
    """
    if bounds is None:
        return
    try:
        lower, upper = bounds
    except (TypeError, ValueError):
        return
    for side, part in (("lower", lower), ("upper", upper)):
        if part is None:
            continue
        try:
            arr = np.asarray(part, dtype=float).ravel()
            # None for one entry is "no bound" there, as None for a whole side
            given = np.array([v is not None for v in np.asarray(part, dtype=object).ravel()])
        except (TypeError, ValueError):
            return
        if given.size != arr.size:
            given = np.ones(arr.size, dtype=bool)
        bad = np.isnan(arr) & given
        if np.any(bad):
            i = int(np.flatnonzero(bad)[0])
            where = f"[{i}]" if arr.size > 1 else ""
            no_bound = "-inf" if side == "lower" else "inf"
            raise ValueError(
                f"`{name}`: the {side} bound{where} is NaN; use None or {no_bound} for no "
                f"{side} bound, or a number"
            )


def as_codegen(value: Any) -> bool | str:
    """``codegen`` as ``True``, ``False`` or ``"auto"`` (NumPy booleans accepted)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, str) and value == "auto":
        return "auto"
    raise ValueError(f"codegen must be True, False or 'auto', got {value!r}")


def check_callback(callback: Any, name: str = "callback") -> None:
    """``None`` or a callable."""
    if callback is not None and not callable(callback):
        raise TypeError(f"`{name}` must be a callable or None, got {type(callback).__name__}")


def check_choice(value: Any, name: str, choices: Sequence[Any]) -> None:
    """``value`` must be one of ``choices`` (compared by equality, hashable or not)."""
    try:
        ok = any(isinstance(value, type(c)) and bool(value == c) for c in choices)
    except Exception:  # an array compared to a string, say
        ok = False
    if not ok:
        raise ValueError(f"`{name}` must be one of {tuple(choices)!r}, got {value!r}")
