"""Text tables: reading a CSV (or whitespace-, semicolon- or tab-separated)
file into numbers with its header, the target columns by name or number, a
classification's text labels as classes, inputs for prediction matched by
column name; every problem a :class:`DataError` naming the config key, the
value and what is allowed.

Flow position: **tables** -> data.
"""
from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import numpy as np


class DataError(ValueError):
    """A problem with the data, tied to the config key that asked for it."""

    def __init__(self, key: str, value, allowed: str):
        super().__init__(f"{key} = {value!r}: {allowed}")
        self.key, self.value, self.allowed = key, value, allowed


def check_finite(A, what: str, first_row: int = 0) -> str | None:
    """None when every entry of the 2-d array ``A`` is finite; otherwise a
    message giving the count and the first row and column (numbered from
    ``first_row``: 0 for arrays, 1 for the lines of a file)."""
    bad = ~np.isfinite(A)
    if not bad.any():
        return None
    r, c = np.argwhere(bad)[0]
    return (f"{what} contain non-finite entries, {bad.sum()} NaN or infinite values (first at row "
            f"{r + first_row}, column {c + first_row}); only finite numbers are allowed")


#: Cells read as missing values (case does not matter).
MISSING = ("", "?", "na", "n/a", "nan", "null", "none")


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return math.nan if cell.strip().lower() in MISSING else None


#: Delimiters a table may use besides white space.
DELIMITERS = ",;\t"


def _sniff(lines: list) -> str | None:
    """The delimiter of a table: what Python's ``csv.Sniffer`` finds among
    :data:`DELIMITERS` in its first lines (quotes understood), else whichever
    of them occurs most in the first line outside quotes, or None (white
    space) when none does."""
    try:
        return csv.Sniffer().sniff("\n".join(lines[:20]), delimiters=DELIMITERS).delimiter
    except csv.Error:
        first = re.sub(r'"[^"]*"', "", lines[0])
        counts = {d: first.count(d) for d in DELIMITERS}
        best = max(counts, key=counts.get)
        return best if counts[best] else None


def _rows(lines: list, delim: str | None) -> list:
    """The cells of each line, as Python's ``csv`` module reads them (quoted cells may hold the delimiter and
    doubled quotes; the quotes are not part of a cell), stripped; white space splits where ``delim`` is None."""
    if delim is None:
        return [[c.strip('"') for c in ln.split()] for ln in lines]
    return [[c.strip() for c in row] for row in csv.reader(lines, delimiter=delim, skipinitialspace=True)]


def parse_table(path: Path, key: str, value, delimiter: str | None = None, header: bool | None = None,
                text_columns=None) -> tuple:
    """(A (rows, columns) with NaN for missing cells, column names or None,
    {column: its cells} of the columns that hold text) of a text table, read
    as Python's ``csv`` module reads it (R's ``write.csv`` quotes, a quoted
    cell holding the delimiter, Excel's UTF-8 byte-order mark): the
    delimiter is detected unless given; a first row
    holding text (not numbers or missing markers) is a header unless
    ``header`` says otherwise; empty lines and lines starting with # are
    skipped. ``text_columns(names, width)`` gives the columns that may hold
    text (a classification's labels; ``names`` None before a header is
    known); DataError names the first other cell
    that is neither a number nor missing."""
    if not path.is_file():
        raise DataError(key, value, f"no such file ({path})")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(key, value, f"not a text table ({path})") from None
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise DataError(key, value, f"the file has no rows ({path})")
    delim = delimiter if delimiter is not None else _sniff(lines)
    try:
        rows = _rows(lines, delim)
    except csv.Error as e:
        raise DataError(key, value, f"not a table Python's csv module can read ({e}) ({path})") from None
    width = len(rows[0])
    may_be_text = set(text_columns(None, width) if text_columns else ())
    if header is None:
        header = any(_number(c) is None for j, c in enumerate(rows[0]) if j not in may_be_text)
    names = rows[0] if header else None
    if header and text_columns:
        may_be_text = set(text_columns(names, width))
    body = rows[1:] if header else rows
    if not body:
        raise DataError(key, value, f"the file has no rows below its header ({path})")
    A = np.empty((len(body), width))
    texts: dict = {}
    for i, row in enumerate(body, start=1):
        if len(row) != width:
            raise DataError(key, value, f"row {i} has {len(row)} cells, the first row {width} ({path}); "
                                        f"delimiter {'white space' if delim is None else repr(delim)}")
        for j, cell in enumerate(row):
            v = _number(cell)
            if v is None and j in may_be_text:
                texts.setdefault(j, True)
                v = math.nan
            elif v is None:
                raise DataError(key, value, f"not a numeric table: row {i}, column {j} is {cell!r} (rows counted "
                                            f"from 1 below any header, columns from 0; missing values may be "
                                            f"written as {', '.join(repr(m) for m in MISSING if m)} or left empty)")
            A[i - 1, j] = v
    return A, names, {j: [row[j] for row in body] for j in texts}


def target_indices(target_columns, names, width: int) -> list:
    """Column indices (0-based) of ``target_columns``: numbers (negative from the
    end) or, with a header, names."""
    cols = []
    for c in target_columns:
        if isinstance(c, str):
            if names is None:
                raise DataError("data.target_columns", list(target_columns),
                                f"column {c!r} named, but the file has no header row")
            if c not in names:
                raise DataError("data.target_columns", list(target_columns),
                                f"no column named {c!r}; the header has {names}")
            cols.append(names.index(c))
        elif not -width <= c < width:
            raise DataError("data.target_columns", list(target_columns), f"the file has {width} columns")
        else:
            cols.append(c % width)
    if len(set(cols)) < len(cols):
        raise DataError("data.target_columns", list(target_columns),
                        f"names a column twice (as columns {cols}, counted from 0); each target column once")
    return cols


def label_classes(cells) -> tuple:
    """The classes of a column of text labels: its distinct cells but the
    missing ones, sorted; class k is the k-th (as scikit-learn codes them)."""
    return tuple(sorted({c for c in cells if c.strip().lower() not in MISSING}))


def single_row_classes(labels) -> list:
    """The classes among ``labels`` (one per row, as the user writes them) that have a single row, which a
    stratified split cannot place on both sides."""
    names, counts = np.unique(np.asarray(labels, dtype=str), return_counts=True)
    return [str(n) for n in names[counts < 2]]


def read_table(path: Path, target_columns, key: str, value, delimiter=None, header=None, labels: bool = False):
    """(X, Y, column names or None, classes) of a table (see :func:`parse_table`):
    ``target_columns`` are Y, the rest X; missing cells are NaN. With
    ``labels`` (a classification) the target may be text ('yes'/'no'): its
    distinct labels sorted are the classes, class k coded k, as scikit-learn's
    estimators do (``classes`` empty for numeric labels)."""
    def label_columns(names, width):
        if names is None:                   # before a header is known: the columns given by number
            return [c % width for c in target_columns if not isinstance(c, str) and -width <= c < width]
        return target_indices(target_columns, names, width)
    A, names, texts = parse_table(path, key, value, delimiter, header, label_columns if labels else None)
    cols = target_indices(target_columns, names, A.shape[1])
    classes: tuple = ()
    for j, cells in texts.items():
        classes = label_classes(cells)
        code = {c: k for k, c in enumerate(classes)}
        A[:, j] = [code.get(c, math.nan) for c in cells]
    return np.delete(A, cols, axis=1), A[:, cols], names, classes


def read_inputs(path, n_inputs: int, names=(), notes: list | None = None):
    """Inputs (N, n_inputs) for prediction from a table (see :func:`parse_table`;
    no missing values); ValueError says what is wrong. When the file has a
    header and the run knows its input columns' ``names``, columns are matched
    by name (in any order; a missing or an unknown one is an error naming it);
    otherwise they are read by position, and when the run knows the names, a
    line appended to ``notes`` says the order assumed."""
    try:
        X, header, _ = parse_table(Path(path), "input", str(path))
    except DataError as e:
        raise ValueError(f"{path}: {e.allowed}") from None
    if header is not None and names:
        missing = [n for n in names if n not in header]
        extra = [h for h in header if h not in names]
        if missing or extra or len(set(header)) != len(header):
            raise ValueError(f"{path}: the header's columns {list(header)} do not match the run's inputs "
                             f"{list(names)}" + (f"; missing: {missing}" if missing else "")
                             + (f"; not inputs of the run: {extra}" if extra else "")
                             + ("; a name given twice" if len(set(header)) != len(header) else ""))
        X = X[:, [header.index(n) for n in names]]
    elif header is None and names and notes is not None:
        notes.append(f"{path}: no header row, so its columns are read by position as the run's inputs "
                     f"{', '.join(names)} (a header with those names matches them by name, in any order)")
    if X.shape[1] != n_inputs:
        raise ValueError(f"{path}: {X.shape[1]} columns; the network takes {n_inputs} inputs (one column each)")
    problem = check_finite(X, "inputs", first_row=1)
    if problem:
        raise ValueError(f"{path}: {problem}")
    return X
