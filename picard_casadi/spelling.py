"""The closest spelling of a name that is not known, for error messages.

Every message that names an unknown parameter, output, option or flag
offers the nearest known name through these two functions, so the hint
reads the same everywhere.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["closest", "with_closest"]


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest in spelling to ``name``, or None where none is
    close (``difflib.get_close_matches`` with its default cutoff, 0.6)."""
    match = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    return match[0] if match else None


def with_closest(name: str, known: Iterable[str]) -> str:
    """``name`` quoted, followed by ``(did you mean 'x'?)`` where a known
    name is close: ``'kb1' (did you mean 'k_b1'?)``."""
    near = closest(name, known)
    return f"{str(name)!r}" + (f" (did you mean {near!r}?)" if near else "")
