"""The command line's DATA: :func:`~picard_casadi.io.csv_experiments.read_csv_experiments`
with its errors as :class:`CliError` and its notes on stderr."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

from ..io.csv_experiments import column_name, read_csv_experiments as _read
from .errors import CliError


def read_data_files(paths: list[str], model: Any, input_hold: Any = None, *,
                    measured: bool = True, ignore: str | None = None) -> list[Any]:
    """The experiments of one or more CSV files, in order (a file without an
    ``experiment`` column is one experiment named as the file); a
    :class:`CliError` where two files hold experiments of one name.
    ``measured`` False: runs to predict (output columns optional).  ``ignore``:
    ``--ignore-columns``, a comma list of columns not read; a name no file
    has is an error (a misspelt channel)."""
    ignored = [n.strip() for n in (ignore or "").split(",") if n.strip()]
    if ignored:
        present = set()
        for path in paths:
            try:
                with open(path, encoding="utf-8-sig", errors="replace") as f:
                    first = f.readline()
            except OSError:
                continue  # (the reader names it)
            present |= {column_name(c) for c in first.split(",")}
        absent = [n for n in ignored if n not in present]
        if absent:
            raise CliError(f"--ignore-columns: {absent} are columns of none of the DATA files")
    experiments: list[Any] = []
    origin: dict[str, str] = {}
    files: dict[Path, str] = {}
    for path in paths:
        same = files.setdefault(Path(path).resolve(), str(path))
        if same != str(path) or list(paths).count(path) > 1:
            raise CliError(f"DATA: {str(path)!r} is given twice" + (
                f" (as {same!r} too)" if same != str(path) else ""))
    for path in paths:
        for e in read_csv_experiments(path, model, input_hold, measured=measured,
                                      ignore=ignored):
            if e.name in origin:
                raise CliError(f"DATA: experiment {e.name!r} is in {origin[e.name]!r} and "
                               f"in {str(path)!r}; give each file's experiments names of "
                               "their own (a column 'experiment', or rename a file)")
            origin[e.name] = str(path)
            experiments.append(e)
    return experiments


def read_csv_experiments(path: str | Path, model: Any, input_hold: Any = None, *,
                         measured: bool = True, ignore: Any = ()) -> list[Any]:
    """:func:`~picard_casadi.io.csv_experiments.read_csv_experiments`, its
    ``ValueError`` a :class:`CliError` (exit status 2) and its warning (a file
    that is not UTF-8) a note on stderr, each naming the argument ``DATA``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            experiments = _read(path, model, input_hold, measured=measured, ignore=ignore)
        except ValueError as err:
            text = str(err)
            raise CliError(f"DATA {text}" if text.startswith(str(Path(path)))
                           else f"DATA: {text}") from None
    for note in caught:
        if str(note.message).startswith(str(Path(path))):  # the reader's own note
            print(f"picard-casadi: note: DATA {note.message}", file=sys.stderr)
        else:  # an Experiment's, as it was
            warnings.warn_explicit(note.message, note.category, note.filename, note.lineno)
    return experiments


def input_holds(hold: str | dict[str, str] | None, model: Any) -> str | list[str] | None:
    """``--input-hold`` for ``model``: as given for every input, or one hold
    per input where some are named (the others linear); a :class:`CliError`
    for a name that is not one of the model's inputs."""
    if hold is None or isinstance(hold, str):
        return hold
    unknown = [name for name in hold if name not in model.u_names]
    if unknown:
        raise CliError(f"--input-hold: {', '.join(map(repr, unknown))} is not an input of the "
                       f"model (its inputs: {', '.join(model.u_names) or 'none'})")
    return [hold.get(name, "linear") for name in model.u_names]
