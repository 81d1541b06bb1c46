"""Reading measured channels from text files of numeric columns.

Flight-test and laboratory recorders write one row per sample, the
channels in whitespace- (or comma-) separated columns, with or without a
header: free text, then a line of channel names and often a line of units
(the flight-test textbook's ``*_withHeader.asc``).  :func:`read_columns`
reads such a file, picks channels by number or by name, converts angles
given in degrees to radians where the header says so (or where asked), and
applies any other factor::

    data = pc.read_columns("hfb320_1_10_withHeader.asc",
                           {"t": "T", "de": "DELV", "V": "TASCG", "q": "Q"})
    exp = pc.Experiment(t=data["t"], y=data.stack("V", "q"), u=data.stack("de"))
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["read_columns", "Columns"]

_DEGREES = re.compile(r"^deg(rees?)?(/s(2|\^2)?|/sec)?$", re.IGNORECASE)


def _is_number(token: str) -> bool:
    try:
        float(token.replace("D", "E").replace("d", "e"))
    except ValueError:
        return False
    return True


@dataclass
class Columns:
    """The channels read by :func:`read_columns`.

    Attributes
    ----------
    values : dict of str to ndarray (N,)
        Each channel, in the order asked for, converted as asked.
    units : dict of str to str
        Each channel's unit as the header gives it after conversion
        (``"rad"`` for an angle converted from ``"deg"``; ``""`` without a
        header).
    path : str
    """

    values: dict[str, np.ndarray]
    units: dict[str, str] = field(default_factory=dict)
    path: str = ""

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self.values[name]
        except KeyError:
            raise KeyError(f"{name!r} was not read from {self.path!r}; read were: "
                           f"{', '.join(self.values)}") from None

    def stack(self, *names: str) -> np.ndarray:
        """The channels ``names`` as the columns of one array ``(N, len(names))``."""
        return np.column_stack([self[name] for name in names])


def read_columns(path: str | Path, columns: Mapping[str, int | str], *,
                 scale: Mapping[str, float] | None = None,
                 degrees_to_radians: bool | Mapping[str, bool] = True,
                 delimiter: str | None = None) -> Columns:
    """Read named channels from a text file of numeric columns.

    Parameters
    ----------
    path : str or Path
        Rows of numbers, whitespace-separated (or by ``delimiter``); Fortran
        exponents (``1.0D+00``) are read.  Lines before the first row of
        numbers are the header: its last line with as many words as there
        are columns, followed by another such line, gives the channel names
        and their units; a single such line, the names.
    columns : mapping of str to int or str
        For each channel to read, the name it gets and its column: a number
        counted from 1 (as the book's and most recorders' documentation
        count them), or a name of the header (case-insensitive).
    scale : mapping of str to float, optional
        Factors applied to channels after reading (units the header does
        not state: ``{"p": math.pi / 180}``).
    degrees_to_radians : bool or mapping of str to bool
        Convert channels whose header unit is degrees (``DEG``, ``DEG/S``,
        ``DEG/S2``) to radians (default); a mapping decides per channel.
    delimiter : str, optional
        Column separator; default any whitespace (and ``,`` where a row has
        commas).

    Returns
    -------
    Columns

    Raises
    ------
    ValueError
        Naming the file, the line or the channel: no rows of numbers, rows of
        different lengths, a column number beyond the file's, a header name
        that is not there, a non-finite factor, a channel converted from
        degrees twice (the header's ``DEG`` and a ``scale`` of ``pi/180``), a
        conversion asked for a channel the header does not give in degrees.
    """
    path = Path(path)
    if not isinstance(columns, Mapping) or not columns:
        raise ValueError("`columns` must map each channel's name to its column number "
                         "(from 1) or header name, e.g. {'t': 1, 'q': 'Q'}")
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ValueError(f"`path`: cannot read {str(path)!r} ({err.strerror or err})") from None
    if raw.startswith(b"MATLAB") or b"\0" in raw[:4096]:
        kind = "a MATLAB .mat file" if raw.startswith(b"MATLAB") else "a binary file"
        raise ValueError(f"`path`: {str(path)!r} is {kind}, not columns of text: read it with "
                         "scipy.io.loadmat (or MATLAB/Octave) and pass the arrays to "
                         "pc.Experiment, or use a text export of the same channels (the "
                         "flight-test data's .asc files)")
    lines = raw.decode(errors="replace").splitlines()

    def split(line: str) -> list[str]:
        sep = delimiter if delimiter is not None else ("," if "," in line else None)
        return [w.strip() for w in line.split(sep) if w.strip()]

    rows: list[list[float]] = []
    header: list[list[str]] = []
    first_row = None
    for number, line in enumerate(lines, 1):
        words = split(line)
        if not words:
            continue
        if all(_is_number(w) for w in words):
            if first_row is None:
                first_row = number
            elif len(words) != len(rows[0]):
                raise ValueError(f"{path}, line {number}: {len(words)} numbers, the first row "
                                 f"(line {first_row}) has {len(rows[0])}")
            rows.append([float(w.replace("D", "E").replace("d", "e")) for w in words])
        elif first_row is None:
            header.append(words)
        else:
            raise ValueError(f"{path}, line {number}: not a row of numbers: {line.strip()[:60]!r}")
    if not rows:
        raise ValueError(f"`path`: {str(path)!r} has no rows of numbers")
    data = np.asarray(rows)
    ncol = data.shape[1]
    # header lines with a word per column: the names, and the units right after
    full = [i for i, h in enumerate(header) if len(h) == ncol]
    names: list[str] = []
    units: list[str] = [""] * ncol
    if len(full) >= 2 and full[-1] == full[-2] + 1:
        names, units = header[full[-2]], header[full[-1]]
    elif full:
        names = header[full[-1]]
    lookup = {n.lower(): i for i, n in enumerate(names)}
    factors = dict(scale or {})
    values: dict[str, np.ndarray] = {}
    out_units: dict[str, str] = {}
    for name, col in columns.items():
        if isinstance(col, (bool, np.bool_)) or not isinstance(col, (int, np.integer, str)):
            raise ValueError(f"`columns`[{name!r}]: a column number (from 1) or a header name, "
                             f"got {col!r}")
        if isinstance(col, str):
            if col.lower() not in lookup:
                known = ", ".join(names) if names else "none: the file has no header"
                raise ValueError(f"`columns`[{name!r}]: {col!r} is not a channel of {path} "
                                 f"(its header names: {known})")
            index = lookup[col.lower()]
        else:
            if not 1 <= int(col) <= ncol:
                raise ValueError(f"`columns`[{name!r}]: column {int(col)} of {path}, which has "
                                 f"{ncol} columns (counted from 1)")
            index = int(col) - 1
        v = data[:, index].copy()
        unit = units[index]
        asked = isinstance(degrees_to_radians, Mapping) and bool(degrees_to_radians.get(name))
        convert = (degrees_to_radians.get(name, False) if isinstance(degrees_to_radians, Mapping)
                   else bool(degrees_to_radians))
        converted = convert and bool(_DEGREES.match(unit))
        if asked and not converted:
            where = (f"the header of {path} gives its column the unit {unit!r}, not degrees"
                     if unit else f"{path} has no header line of units" if not names else
                     f"the header of {path} gives its column no unit")
            raise ValueError(
                f"`degrees_to_radians`[{name!r}]: {where}, so nothing would be converted; give "
                f"the factor instead, scale={{{name!r}: math.pi / 180}}")
        if converted:
            v *= math.pi / 180.0
            unit = re.sub(r"(?i)^deg(rees?)?", "rad", unit)
        if name in factors:
            factor = float(factors.pop(name))
            if not math.isfinite(factor):
                raise ValueError(f"`scale`[{name!r}] must be a finite number, got {factor}")
            if converted and math.isclose(abs(factor), math.pi / 180.0, rel_tol=1e-6):
                # the header's DEG already converted it: twice gave 0.27 deg for 15.7
                raise ValueError(
                    f"`scale`[{name!r}] converts degrees to radians, but its header unit "
                    f"{units[index]!r} already had it converted (degrees_to_radians): drop "
                    f"it from `scale`, or pass degrees_to_radians={{{name!r}: False}}")
            v *= factor
        values[name] = v
        out_units[name] = unit
    if factors:
        raise ValueError(f"`scale` names channels that were not read: {', '.join(factors)}")
    return Columns(values=values, units=out_units, path=str(path))
