"""The table of methods: :class:`MethodSpec` and :func:`register`.

The package's ``methods`` module registers ``picard`` and ``picard-gn``;
``ipopt`` and ``shooting`` register themselves when first asked for
(:func:`picard_casadi.methods.get_method`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from .base import LoopOutcome
from .breakdown import guarded_solve

__all__ = ["MethodSpec", "METHODS", "register"]


@dataclass(frozen=True)
class MethodSpec:
    """A method: its options class and its solve function."""

    name: str
    options: type
    solve: Callable[..., LoopOutcome]
    description: str
    uses_picard_order: bool = True


#: the registered methods by name
METHODS: dict[str, MethodSpec] = {}


def register(spec: MethodSpec) -> None:
    """Add a method to the registry.

    Its solve is wrapped so that numerical breakdowns end as ``success=False``
    and Ctrl-C as KeyboardInterrupt (:mod:`picard_casadi.methods.breakdown`).
    """
    METHODS[spec.name] = replace(spec, solve=guarded_solve(spec.solve, spec.name))
