"""A user's measurements from a CSV file as ``Experiment`` objects (the command line's DATA)."""

from __future__ import annotations

import csv
import difflib
import io
import math
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..inputs import is_linear

if TYPE_CHECKING:
    from ..experiment import Experiment
    from ..model import Model


#: column names that mean the times (the header needs 'time')
_TIME_NAMES = {"t", "times", "time_s", "t_s", "sec", "secs", "seconds", "timestamp",
               "time (s)", "time[s]", "time [s]"}


def read_csv_experiments(path: str | Path, model: Model,
                         input_hold: str | Sequence[str] | None = None,
                         conditions: str | Path | None = None, *,
                         measured: bool = True,
                         ignore: Sequence[str] = ()) -> list[Experiment]:
    """Experiments from a CSV file, one row per sample: the command line's
    ``DATA`` (docs/cli.md) read in Python.

    Columns: ``experiment`` (a name; without it the file is one experiment,
    named as the file), ``time``, one column per output (named
    as the model's ``y_names``) and, when the model has inputs, one per input
    (``u_names``); optionally ``sigma_<output>``, each measurement's noise
    standard deviation.  Empty output cells are missing values.  Rows of one
    experiment at one time are replicates.

    Parameters
    ----------
    path : str or Path
        The CSV file.  It is read as UTF-8, with or without the byte-order
        mark that Excel writes; a file that is not UTF-8 is read as Latin-1
        (every byte is a character there) with a ``UserWarning`` naming the
        first line that is not UTF-8.
    model : Model
        Its output and input names are the columns.
    input_hold : {None, "linear", "previous"} or sequence of them
        Inputs between samples: interpolated linearly (``"linear"``, right
        for measured smooth signals; ``None``, the default, reads them so and
        a fit notes inputs that look like a staircase) or held
        (``"previous"``, for step inputs: the intervals start where one
        changes; an empty cell holds the value of its experiment's row
        before, as a historian logs a set point only where it changes); a
        sequence gives one per input
        (``Experiment``'s ``u_interpolation``).
    conditions : str or Path, optional
        A condition table, the command line's ``--conditions`` file: each
        experiment's constants and own parameters (:func:`apply_conditions`),
        as a fit with it was stated (``EstimationResult.from_json`` of such a
        fit needs them).
    measured : bool
        False: runs to predict (the command line's ``predict``): output
        columns may be left out, and an experiment without a measured value
        has ``y`` None (``Experiment(t, None, ...)``).
    ignore : sequence of str
        Columns of the file not read (a data logger's other channels: speed,
        wind, GPS); without it a column the model does not name is an error
        (a misspelt output would otherwise go unread).

    Returns
    -------
    list of Experiment
        In the order of their first rows, each with ``x0`` unset.

    Raises
    ------
    ValueError
        Naming the file, the line and the column of the first problem.
    """
    from ..experiment import Experiment

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no such file {str(path)!r}")
    text = _read_text(path)
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise ValueError(f"{path}: the file is empty") from None
        rows = list(enumerate(reader, start=2))
    except csv.Error as err:
        raise ValueError(f"{path}, line {reader.line_num}: not readable as CSV ({err})") from None
    expected = ["experiment", "time", *model.y_names, *model.u_names]
    header = _without_units(header, expected, model, path)
    # optional: each measurement's noise standard deviation, "sigma_<output>"
    sigma_columns = [f"sigma_{k}" for k in model.y_names]
    ignored = set(ignore)
    read = ignored & {*expected, *sigma_columns}
    if read:
        raise ValueError(f"`ignore`: {sorted(read)} are columns the model reads; ignore "
                         "only the file's other channels")
    unknown = [h for h in header if h not in expected and h not in sigma_columns
               and column_name(h) not in ignored]
    if unknown:
        hint = ""
        near = {h.lower(): h for h in expected}
        # (a name only where the file lacks it: a column 't' beside an output
        # 'T' is the time, not the output)
        close = [f"{u!r} -> {near[u.lower()]!r}" for u in unknown
                 if u.lower() in near and near[u.lower()] not in header]
        if close:
            hint = f" (names are case-sensitive: {', '.join(close)})"
        else:  # a typo ('thetta' for 'theta'), where the file lacks the name
            missing = [h for h in expected + sigma_columns if h not in header]
            typos = [f"{u!r} -> {m[0]!r}" for u in unknown
                     for m in [difflib.get_close_matches(u, missing, n=1, cutoff=0.75)] if m]
            if typos:
                hint = f" (a typo? {', '.join(typos)})"
        timed = [u for u in unknown if u.lower() in _TIME_NAMES]
        if "time" not in header and len(timed) == 1:
            hint = f" (the times' column is named 'time': {timed[0]!r} -> 'time')"
        if len(header) == 1:
            for sep, name in ((";", "semicolons"), ("\t", "tabs")):
                if sep in header[0]:
                    hint = f" (the columns seem separated by {name}; use commas)"
                    if sep == ";" and any(len(r) > 1 for _, r in rows[:20]):
                        # read with commas as separators, "0,5;1,2" splits at the
                        # decimal commas: a European spreadsheet's export
                        hint = (" (the columns seem separated by semicolons, and the "
                                "numbers written with decimal commas, as a spreadsheet in "
                                "a European locale exports them: write decimal points and "
                                "separate the columns with commas)")
        raise ValueError(
            f"{path}, line 1: unknown column(s) {unknown}; expected 'experiment', "
            f"'time', outputs {list(model.y_names)}"
            + (f" and inputs {list(model.u_names)}" if model.nu else "")
            + f" (optional: {', '.join(repr(c) for c in sigma_columns)}, each measurement's "
            "noise standard deviation)" + hint
            + ("" if hint else "; channels the model does not use are left out with "
               f"ignore={[column_name(u) for u in unknown]}")
        )
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise ValueError(f"{path}, line 1: column(s) {twice} appear more than once")
    # without a column 'experiment' the file is one experiment, named as the
    # file (a data logger's record)
    missing = [h for h in expected if h not in header and h != "experiment"
               and (measured or h not in model.y_names)]
    if missing:
        outputs = [h for h in missing if h in model.y_names]
        raise ValueError(f"{path}, line 1: missing column(s) {missing}"
                         + (f" (an output not measured is a column of empty cells: add "
                            f"{', '.join(repr(h) for h in outputs)} to the header and leave "
                            "it empty)" if outputs else ""))
    col = {h: i for i, h in enumerate(header)}
    given_sigma = [c for c in sigma_columns if c in col]
    # a held input's empty cell holds its value from the row before (a
    # historian logs a set point where it changes)
    one_each = isinstance(input_hold, str) or (input_hold is not None
                                                and len(input_hold) == model.nu)
    held = [one_each and not is_linear(input_hold, k) for k in range(model.nu)]
    groups: dict[str, list[tuple[int, float, list[float], list[float], list[float]]]] = {}
    unnamed: list[int] = []  # lines whose experiment cell is empty
    _no_input_at_all(rows, header, col, model.u_names, path)
    for line, row in rows:
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise ValueError(f"{path}, line {line}: {len(row)} cells, the header has {len(header)}")

        def number(name: str, allow_empty: bool) -> float:
            cell = row[col[name]].strip()
            if cell == "":
                if allow_empty:
                    return math.nan
                raise ValueError(f"{path}, line {line}: column {name!r} is empty"
                                 + ("; an input logged only where it changes is held from "
                                    "one value to the next with input_hold='previous' "
                                    "(--input-hold previous)" if name in model.u_names
                                    else ""))
            try:
                value = float(cell)
            except ValueError:
                raise ValueError(
                    f"{path}, line {line}: column {name!r} holds {cell!r}, not a number"
                    + ("; a missing value is an empty cell (or NaN)" if allow_empty else "")
                    + ("; a timestamp is converted first, to the time elapsed in the model's "
                       "time unit (docs/cli.md, 'The CSV')"
                       if name == "time" and re.search(r"\d[-/:.]\d+[-/:]\d", cell) else "")
                ) from None
            if math.isinf(value):
                raise ValueError(f"{path}, line {line}: column {name!r} is infinite")
            if math.isnan(value) and not allow_empty:  # "NaN" where a value is needed
                raise ValueError(f"{path}, line {line}: column {name!r} holds {cell!r}; "
                                 "it cannot be missing (fill the gap, or cut the record there)")
            return value

        name = (row[col["experiment"]].strip() or "experiment") if "experiment" in col \
            else Path(path).stem
        if "experiment" in col and not row[col["experiment"]].strip():
            unnamed.append(line)
        t = number("time", False)
        y = [number(k, True) if k in col else math.nan for k in model.y_names]
        u = [number(k, h) for k, h in zip(model.u_names, held)]
        sig = [number(c, True) if c in col else math.nan for c in sigma_columns]
        groups.setdefault(name, []).append((line, t, y, u, sig))
    if not groups:
        raise ValueError(f"{path}: no data rows")
    if unnamed and len(unnamed) < sum(len(samples) for samples in groups.values()):
        # rows of no experiment among named ones (a logger's cell left empty
        # made an experiment "experiment" of its own, fitted with its own x0)
        raise ValueError(f"{path}, line {unnamed[0]}: the column 'experiment' is empty "
                         f"({len(unnamed)} such row(s)), where other rows name theirs: name "
                         "the experiment of every row")
    experiments = []
    for name, samples in groups.items():
        for (l0, t0, *_), (l1, t1, *_) in zip(samples[:-1], samples[1:]):
            if t1 < t0:
                raise ValueError(
                    f"{path}, line {l1}: time {t1} of experiment {name!r} comes before "
                    f"{t0} (line {l0}); times must increase within an experiment (a time "
                    "repeated on consecutive rows holds replicates)"
                )
        t = np.array([s[1] for s in samples])
        y = np.array([s[2] for s in samples])
        u = _held_forward(np.array([s[3] for s in samples]), held, model.u_names,
                          [s[0] for s in samples], path, name) if model.nu else None
        sigma = np.array([s[4] for s in samples]) if given_sigma else None
        if not (measured or np.any(np.isfinite(y))):  # a run to predict: no data
            y, sigma = None, None
        try:
            # intervals start where a held input jumps: at its changes where
            # every input is held (Experiment's default), at every sample
            # beside inputs read linearly
            mixed = (input_hold is not None and model.nu
                     and any(is_linear(input_hold, k) for k in range(model.nu))
                     and not all(is_linear(input_hold, k) for k in range(model.nu)))
            experiments.append(Experiment(
                t, y, u=u, name=name, u_interpolation=input_hold,
                breakpoints=t if mixed else None, sigma=sigma))
        except ValueError as err:
            raise ValueError(f"{path}: {_rows_as_lines(str(err), [s[0] for s in samples])}"
                             ) from None
    return apply_conditions(conditions, model, experiments) if conditions else experiments


def _rows_as_lines(message: str, lines: list[int]) -> str:
    """An Experiment's message with its rows (counted from 0 in the
    experiment's samples) named as the file's lines."""
    def line(m: re.Match[str]) -> str:
        rows = [int(r) for r in re.findall(r"\d+", m.group(0))]
        if any(r >= len(lines) for r in rows):
            return m.group(0)
        return ("lines " + " and ".join(str(lines[r]) for r in rows) if len(rows) > 1
                else f"line {lines[rows[0]]}")

    return re.sub(r"\brows? \d+(?: and \d+)?", line, message)


def _no_input_at_all(rows: list, header: list[str], col: dict[str, int],
                     inputs: Sequence[str], path: Path) -> None:
    """A ValueError where an input's column is empty on every row of an
    experiment (a tumour study's vehicle group, its dose left blank: read as
    a missing value, "column 'dose_rate' is empty; ... --input-hold previous")."""
    first: dict[tuple[str, str], int] = {}
    given: set[tuple[str, str]] = set()
    for line, row in rows:
        if len(row) != len(header) or not any(cell.strip() for cell in row):
            continue
        name = row[col["experiment"]].strip() if "experiment" in col else ""
        for u in inputs:
            if u in col:
                first.setdefault((name, u), line)
                if row[col[u]].strip():
                    given.add((name, u))
    for (name, u), line in first.items():
        if (name, u) not in given:
            which = f"experiment {name!r}" if name else "the file"
            raise ValueError(f"{path}, line {line}: column {u!r} is empty on every row of "
                             f"{which}: an input it does not receive is 0 (or its constant "
                             "value) on its rows")


def _held_forward(u: np.ndarray, held: list[bool], names: Sequence[str], lines: list[int],
                  path: Path, experiment: str) -> np.ndarray:
    """The inputs ``u`` (N, nu) of one experiment with each held input's empty
    cells (NaN) holding the value before; a ValueError where its first row
    has none."""
    for k in np.flatnonzero(held):
        column = u[:, k]
        if np.isnan(column[0]):
            raise ValueError(f"{path}, line {lines[0]}: column {names[k]!r} is empty on the "
                             f"first row of experiment {experiment!r}: a held input holds the "
                             "value before an empty cell, and there is none; give its value "
                             "where the record starts")
        filled = np.flatnonzero(~np.isnan(column))
        u[:, k] = column[filled[np.searchsorted(filled, np.arange(column.size), "right") - 1]]
    return u


def _read_text(path: Path) -> str:
    """The file's text: UTF-8 (a byte-order mark dropped), else Latin-1 with a note."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ValueError(f"{path}: cannot read the file ({err.strerror})") from None
    if b"\x00" in data[:4096] and (data.startswith((b"\xff\xfe", b"\xfe\xff"))):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            pass
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        warnings.warn(f"{path} is not UTF-8 (byte 0x{data[err.start]:02x} on line {line}); "
                      "read as Latin-1", UserWarning, stacklevel=3)
        return data.decode("latin-1")


_UNIT = re.compile(r"^(?P<name>.*?)\s*[\[(](?P<unit>[^\])]*)[\])]\s*$")


def column_name(cell: str) -> str:
    """A header cell's column name, a unit after it (``speed [kn]``) left out."""
    m = _UNIT.match(cell.strip())
    return m["name"] if m else cell.strip()


def _without_units(header: list[str], expected: list[str], model: Model,
                   path: Path) -> list[str]:
    """The header with a unit after a column's name (``speed [rad/s]``,
    ``time (s)``) dropped where the name is one the file needs; a
    ``ValueError`` where the model states another unit for it (a data
    logger writes units into its header: they were refused as unknown
    columns)."""
    # (the time's only warned of where the model states no t_unit: "s" then)
    units = {**dict(zip(model.y_names, model.y_units)), **dict(zip(model.u_names, model.u_units))}
    out = []
    unchecked = []
    unstated = []
    for h in header:
        m = _UNIT.match(h)
        if h in expected or m is None or m["name"] not in expected:
            if h in expected and units.get(h):
                unstated.append((h, units[h]))
            out.append(h)
            continue
        name, unit = m["name"], m["unit"].strip()
        if name == "time" and unit and unit != model.t_unit and getattr(
                model, "_t_unit_given", False):
            # (a Duffing record's "time (ms)" against a model in "s": a note, and
            # a 72 s fit to nonsense; the other units were errors)
            raise ValueError(f"{path}, line 1: column {h!r} is in {unit!r}, and the model's "
                             f"time in {model.t_unit!r}: convert the times, or state the "
                             "unit in the model")
        if name == "time" and unit and unit != model.t_unit:
            # (a cycler's "time (h)" read as seconds, without a word)
            warnings.warn(f"{path}: column {h!r} is in {unit!r}, and the model's time in "
                          f"{model.t_unit!r} (Model(t_unit=...), 's' unless stated): the "
                          f"times are read as they are, so the model's rates are per "
                          f"{unit}; convert the times, or state Model(t_unit={unit!r})",
                          UserWarning, stacklevel=4)
        stated = units.get(name, "")
        if stated and unit and unit != stated:
            raise ValueError(f"{path}, line 1: column {h!r} is in {unit!r}, and the model's "
                             f"{name!r} in {stated!r}: convert the data, or state the unit in "
                             "the model")
        if unit and not stated and name in units:
            unchecked.append(f"{name} [{unit}]")
        out.append(name)
    if unstated:
        # a heading in degrees against a model in rad, no unit in the header: a
        # ship's gain K came 57.3 times the truth with no word (the header's
        # "psi [deg]" is refused at once)
        listed = ", ".join(f"{n} ({u})" for n, u in unstated)
        name, unit = unstated[0]
        warnings.warn(f"{path}: its header gives no unit for {listed}; they are read in the "
                      "model's units (in brackets): write the data's unit after each name "
                      f"({name} [{unit}], say) to have it checked", UserWarning, stacklevel=4)
    if unchecked:
        # a gyro's deg/s against a model in rad/s is the classic mix-up: said
        warnings.warn(f"{path}: the units of {', '.join(unchecked)} in its header are not "
                      "checked, as the model states none for them (Model(y_units=..., "
                      "u_units=...))", UserWarning, stacklevel=4)
    return out


def apply_conditions(path: str | Path, model: Model, experiments: Sequence[Experiment]
                     ) -> list[Experiment]:
    """The experiments with the parameter values of a condition table (the
    command line's ``--conditions``): a CSV with a column ``experiment`` and
    one per model parameter it sets; a cell is a number (a constant of that
    experiment), a name (an estimated parameter of that name) or empty (the
    shared parameter).

    Raises
    ------
    ValueError
        Naming the file and line: an unreadable or empty file, a column that
        is not a parameter, an experiment not in ``experiments`` or given
        twice, a cell that is not finite.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as err:
        raise ValueError(f"{path}: cannot read the file ({err.strerror})") from None
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows:
        raise ValueError(f"{path}: the file is empty")
    header = [h.strip() for h in rows[0]]
    if "experiment" not in header:
        raise ValueError(f"{path}, line 1: no column 'experiment'")
    unknown = [h for h in header if h != "experiment" and h not in model.p_names]
    if unknown:
        raise ValueError(f"{path}, line 1: column(s) {unknown} are not parameters "
                       f"of the model ({', '.join(model.p_names)})")
    by_name = {e.name: e for e in experiments}
    settings: dict[str, dict[str, float | str]] = {}
    first_line: dict[str, int] = {}
    for line, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise ValueError(f"{path}, line {line}: {len(row)} cells, the header "
                           f"has {len(header)}")
        cells = dict(zip(header, (c.strip() for c in row)))
        name = cells.pop("experiment")
        if name not in by_name:
            raise ValueError(f"{path}, line {line}: no experiment {name!r} in the "
                           f"data (experiments: {', '.join(by_name)})")
        if name in first_line:  # the last row had won, silently
            raise ValueError(f"{path}, line {line}: experiment {name!r} is given "
                           f"again (first on line {first_line[name]}); one row per experiment")
        first_line[name] = line
        values: dict[str, float | str] = {}
        for key, cell in cells.items():
            if not cell:
                continue
            try:
                number = float(cell)
            except ValueError:
                values[key] = cell
            else:
                if not math.isfinite(number):
                    raise ValueError(f"{path}, line {line}: column {key!r} is "
                                   f"not finite")
                values[key] = number
        settings[name] = values
    return [e.replaced(parameters={**e.parameters, **settings.get(e.name, {})})
            for e in experiments]
