"""Code generation (placeholder until the code-generation issue lands)."""

from __future__ import annotations


def backend_for(codegen):
    return None, ""
