"""The command line's own failures: bad input (exit 2) and a fit that failed (exit 1)."""

from __future__ import annotations


class CliError(Exception):
    """An error in the arguments or the input files (exit status 2)."""


class CliFailure(Exception):
    """The work could not be completed (exit status 1), e.g. results not written."""
