"""Text tables: reading a CSV (or whitespace-, semicolon- or tab-separated)
file into numbers with its header, the target columns by name or number, a
classification's text labels as classes, inputs for prediction matched by
column name; every problem a :class:`DataError` naming the config key, the
value and what is allowed.

Flow position: **tables** -> data.
"""
from __future__ import annotations

import codecs
import csv
import io
import math
import re
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np


class DataError(ValueError):
    """A problem with the data, tied to the config key that asked for it."""

    def __init__(self, key: str, value, allowed: str):
        super().__init__(f"{key} = {value!r}: {allowed}")
        self.key, self.value, self.allowed = key, value, allowed


def check_finite(A, what: str, first_row: int = 0) -> str | None:
    """None when every entry of the 2-d array ``A`` is finite; otherwise a
    message giving the count and the first row (numbered from ``first_row``:
    0 for arrays, 1 for the rows of a file) and column (numbered from 0, as
    every message counts columns)."""
    bad = ~np.isfinite(A)
    if not bad.any():
        return None
    r, c = np.argwhere(bad)[0]
    return (f"{what} contain non-finite entries, {bad.sum()} NaN or infinite values (first at row "
            f"{r + first_row}, column {c}; rows counted from {first_row}, columns from 0); only finite numbers are "
            f"allowed")


#: Cells read as missing values (case does not matter), as docs/CONFIG.md (data.missing) lists them; any other
#: text (none, null, n/a) is a level of a text column.
MISSING = ("", "?", "na", "nan")


def is_missing(cell: str) -> bool:
    """Whether ``cell`` is one of the :data:`MISSING` markers."""
    return cell.strip().lower() in MISSING


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return math.nan if is_missing(cell) else None


#: A number written with a currency, a percent sign or a decimal comma or digit grouping: '5%', '$3', '1,5'.
_WRITTEN = re.compile(r"[-+]?([$€£¥]?)\s*[-+]?\d+(?:[.,' ]\d+)*\s*(%|‰|[$€£¥]?)")


def written_number(cell: str) -> str | None:
    """How to write ``cell`` when it is a number written as text ('5%', '$3', '1,5'), else None."""
    m = _WRITTEN.fullmatch(cell.strip())
    if m is None or not (m.group(1) or m.group(2) or "," in cell):
        return None
    return (f"{cell.strip()!r} is a number written with a unit or a decimal comma: write the column as plain "
            f"numbers (a decimal point, no unit, no thousands separator: 5 for 5%, 1.5 for 1,5), e.g. by formatting "
            f"its cells as numbers in the spreadsheet")


#: Delimiters a table may use besides white space.
DELIMITERS = ",;\t"


def _sniff(text: str) -> str | None:
    """The delimiter of a table: what Python's ``csv.Sniffer`` finds among
    :data:`DELIMITERS` in its first lines (quotes understood), else whichever
    of them occurs most in the first line outside quotes, or None (white
    space) when none does."""
    lines = [ln for ln in re.split(r"\r\n|\r|\n", text) if ln.strip() and not ln.lstrip().startswith("#")] or [""]
    try:
        return csv.Sniffer().sniff("\n".join(lines[:20]), delimiters=DELIMITERS).delimiter
    except csv.Error:
        first = re.sub(r'"[^"]*"', "", lines[0])
        counts = {d: first.count(d) for d in DELIMITERS}
        best = max(counts, key=counts.get)
        return best if counts[best] else None


def _rows(text: str, delim: str | None) -> list:
    """The cells of each row of ``text``, as Python's ``csv`` module reads them (quoted cells may hold the
    delimiter, doubled quotes and line breaks; the quotes are not part of a cell; only \\n and \\r end a row),
    stripped; spaces and tabs split each line where ``delim`` is None. Blank rows and rows whose first cell
    starts with # are left out, after the parse (a quoted cell may hold either)."""
    if delim is None:
        rows = [[c.strip('"') for c in re.split(r"[ \t]+", ln.strip(" \t"))] for ln in re.split(r"\r\n|\r|\n", text)]
    else:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delim, skipinitialspace=True)
        rows = [[c.strip() for c in row] for row in reader]
    return [r for r in rows if any(r) and not r[0].startswith("#")]


class Table(NamedTuple):
    """A text table as :func:`parse_table` reads it."""

    A: np.ndarray           # (rows, columns), NaN for missing cells and for the cells of text columns
    names: list | None      # the header's cells, or None
    texts: dict             # {column: its cells} of the columns that hold text
    notes: tuple = ()       # what was done that the user should hear (an empty trailing column left out, ...)
    cells: dict = {}        # {column: its cells as written} of every column that may hold text ('01' is not '1')


def _decode(raw: bytes, path: Path, key: str, value, encoding: str | None) -> str:
    """The text of a file: in ``encoding`` when one is named, else UTF-8 (an
    Excel byte-order mark skipped) or UTF-16 when it starts with UTF-16's
    byte-order mark; DataError says what the bytes look like and how to name
    their encoding."""
    name = "the encoding (data.encoding in a config; --encoding for init and predict)"
    if encoding is not None:
        try:
            codec = codecs.lookup(encoding).name
        except LookupError:
            raise DataError(key, value, f"encoding {encoding!r} is not one Python knows ({path}); e.g. utf-8, "
                                        f"latin-1, cp1252, utf-16") from None
        if codec.startswith(("utf-16", "utf-32")) and raw and b"\0" not in raw:
            raise DataError(key, value, f"not {encoding} text: the file holds no NUL bytes, which {encoding} "
                                        f"text of Latin letters and digits does, so it is UTF-8 or another 8-bit "
                                        f"encoding ({path}): leave out {name} to read UTF-8, or name the file's")
        try:
            return raw.decode("utf-8-sig" if codec == "utf-8" else encoding)     # Excel's byte-order mark skipped
        except UnicodeDecodeError as e:
            raise DataError(key, value, f"not {encoding} text: byte 0x{raw[e.start]:02x} at offset {e.start} "
                                        f"({path}); name {name}") from None
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return raw.decode("utf-16")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataError(key, value, f"not UTF-8 text: byte 0x{raw[e.start]:02x} at offset {e.start} ({path}); a "
                                    f"file saved as Latin-1 or Windows-1252? name {name}, e.g. latin-1") from None
    if "\0" in text:
        half = raw[1::2].count(0) > len(raw) // 4 or raw[0::2].count(0) > len(raw) // 4
        raise DataError(key, value, f"not a text table ({path}): it holds NUL bytes" + (
            f", as UTF-16 without a byte-order mark does; name {name}, e.g. utf-16-le" if half else ""))
    return text


def _trailing_empty(rows: list) -> int:
    """The number of columns at the right that are empty in every row, header
    included (a delimiter at the end of every line, as spreadsheets write)."""
    width, n = len(rows[0]), 0
    while n < width - 1 and all(len(r) == width and r[width - 1 - n] == "" for r in rows):
        n += 1
    return n


def _numeric_header(first: list, body: list) -> bool:
    """Whether a first row of numbers looks like a header all the same: distinct
    whole numbers (years, codes), each outside its column's range below it in
    most columns."""
    try:
        v = np.array([float(c) for c in first])
        B = np.array([[_number(c) for c in r] for r in body[:1000]], float)
    except (TypeError, ValueError):
        return False
    if len(v) < 2 or not np.all(v == np.round(v)) or len(set(v)) < len(v) or not B.size:
        return False
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        outside = (v < np.nanmin(B, axis=0)) | (v > np.nanmax(B, axis=0))
    return outside.sum() > len(v) / 2


def parse_table(path: Path, key: str, value, delimiter: str | None = None, header: bool | None = None,
                text_columns=None, encoding: str | None = None) -> Table:
    """A text table (:class:`Table`), read as Python's ``csv`` module reads
    it (R's ``write.csv`` quotes, a quoted cell holding the delimiter or a line
    break, Excel's UTF-8 byte-order mark; UTF-16 with its byte-order mark, or
    the ``encoding`` named): the delimiter is detected unless given; a first
    row holding text (not numbers or missing markers) is a header unless
    ``header`` says otherwise; blank rows and rows starting with # are
    skipped (after the parse: a quoted cell may hold either); empty columns
    at the right (a trailing delimiter) are left out with a note. ``text_columns(names, width)`` gives the columns that may
    hold text (a classification's labels, text inputs; ``names`` None before a
    header is known); DataError names the first other cell that is neither a
    number nor missing, and a column name the header gives twice."""
    if not path.is_file():
        raise DataError(key, value, f"no such file ({path})")
    text = _decode(path.read_bytes(), path, key, value, encoding)
    delim = delimiter if delimiter is not None else _sniff(text)
    try:
        rows = _rows(text, delim)
    except csv.Error as e:
        raise DataError(key, value, f"not a table Python's csv module can read ({e}) ({path})") from None
    if not rows:
        raise DataError(key, value, f"the file has no rows ({path})")
    notes = []
    empty = _trailing_empty(rows)
    if empty:
        width = len(rows[0]) - empty
        rows = [r[:width] for r in rows]
        notes.append(f"{path}: column{'s' if empty > 1 else ''} {width}{f'..{width + empty - 1}' if empty > 1 else ''}"
                     f" (counted from 0) {'are' if empty > 1 else 'is'} empty in every row, header included (a "
                     f"delimiter at the end of each line): left out")
    width = len(rows[0])
    may_be_text = set(text_columns(None, width) if text_columns else ())
    detected = header is None
    if detected:
        header = any(_number(c) is None for j, c in enumerate(rows[0]) if j not in may_be_text)
    names = _unique(rows[0], key, value, path) if header else None
    if header and text_columns:
        may_be_text = set(text_columns(names, width))
    body = rows[1:] if header else rows
    if not body:
        raise DataError(key, value, f"the file has no rows below its header ({path})")
    if detected and not header and _numeric_header(rows[0], body[1:]):
        shown = ", ".join(rows[0][:4]) + (", ..." if width > 4 else "")
        notes.append(f"{path}: the first row ({shown}) holds only numbers, so it is read as data; if it names the "
                     f"columns, set data.header: true")
    A, texts = _cells(body, width, may_be_text, delim, key, value, path)
    return Table(A, names, texts, tuple(notes), {j: [row[j] for row in body] for j in may_be_text if j < width})


def _unique(names: list, key: str, value, path: Path) -> list:
    """The header's ``names``; DataError naming the first name given twice and both its columns."""
    seen: dict = {}
    for j, n in enumerate(names):
        if n in seen:
            raise DataError(key, value, f"the header names column {n!r} twice (columns {seen[n]} and {j}, counted "
                                        f"from 0) ({path}); rename one, so that each name says one column")
        seen[n] = j
    return names


def _cells(body: list, width: int, may_be_text: set, delim, key: str, value, path: Path) -> tuple:
    """(the rows' numbers, NaN for missing cells and the text of the columns ``may_be_text``; {column: its cells}
    of those that hold text); DataError names a row of another width, or another cell that is not a number."""
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
                broken = " (a line break inside a quoted cell)" if "\n" in cell or "\r" in cell else ""
                hint = f"; {written_number(cell)}" if written_number(cell) else ""
                raise DataError(key, value, f"not a numeric table: row {i}, column {j} is {cell!r}{broken} (rows "
                                            f"counted from 1 below any header, columns from 0; missing values may "
                                            f"be written as {', '.join(repr(m) for m in MISSING if m)} or left "
                                            f"empty) ({path}){hint}")
            A[i - 1, j] = v
    return A, {j: [row[j] for row in body] for j in texts}


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
    return tuple(sorted({c for c in cells if not is_missing(c)}))


def single_row_classes(labels) -> list:
    """The classes among ``labels`` (one per row, as the user writes them) that have a single row, which a
    stratified split cannot place on both sides."""
    names, counts = np.unique(np.asarray(labels, dtype=str), return_counts=True)
    return [str(n) for n in names[counts < 2]]


#: The most levels a text input column may have (each is a column of the network's inputs).
MAX_LEVELS = 30


def indicator_names(column: str, levels) -> list:
    """The network's input columns for text input ``column`` with ``levels``:
    one 0/1 column ``column=second level`` for two levels, else one a level."""
    return [f"{column}={lv}" for lv in (levels[1:] if len(levels) == 2 else levels)]


def encode_levels(cells, column: str, levels, where: str, unseen: str = "a level the run was not trained on") \
        -> np.ndarray:
    """The indicator columns (rows, :func:`indicator_names`) of text cells
    ``cells`` of ``column``: a missing cell gives NaN in each; a level not in
    ``levels`` is a ValueError naming the row (from 1, in ``where``), the
    column, what it is (``unseen``) and the levels known."""
    code = {lv: k for k, lv in enumerate(levels)}
    out = np.zeros((len(cells), len(levels)))
    for i, cell in enumerate(cells):
        k = code.get(cell)
        if k is not None:
            out[i, k] = 1.0
        elif is_missing(cell):
            out[i] = math.nan
        else:
            raise ValueError(f"row {i + 1} of {where}: column {column!r} is {cell!r}, {unseen}; it knows "
                             f"{', '.join(map(repr, levels))}")
    return out[:, 1:] if len(levels) == 2 else out


def encoded_names(columns, levels: dict, key: str, value, path) -> list:
    """The network's input names for input ``columns`` (each named in ``levels`` as its
    :func:`indicator_names`); DataError when two are one name (a column ``a=y`` beside text column ``a``)."""
    seen: dict = {}

    def what(n, c):
        return f"text column {c!r}'s indicator of level {n[len(c) + 1:]!r}" if c in levels else f"input column {c!r}"
    for c in columns:
        for n in indicator_names(c, levels[c]) if c in levels else [c]:
            if n in seen:
                both = sorted([what(n, seen[n]), what(n, c)], key=lambda w: w.startswith("text"))
                raise DataError(key, value, f"{both[0]} and {both[1]} have one name, {n!r}, among the network's "
                                            f"inputs ({path}); rename the column")
            seen[n] = c
    return list(seen)


def encode_table(table: Table, columns: list, levels: dict, key: str, value, path: Path, unseen: str) -> tuple:
    """(the table's ``columns`` as numbers, each named in ``levels`` replaced by its indicator columns
    (:func:`encode_levels`) of its cells as written; the table's column each of those columns comes from)."""
    parts, source = [], []
    for j in columns:
        name = table.names[j] if table.names is not None else str(j)
        if name in levels:
            try:
                parts.append(encode_levels(table.cells[j], name, levels[name], str(path), unseen))
            except ValueError as e:
                raise DataError(key, value, str(e)) from None
        else:
            parts.append(table.A[:, [j]])
        source += [j] * parts[-1].shape[1]
    return (np.hstack(parts) if parts else np.empty((len(table.A), 0))), np.array(source, int)


class Columns(NamedTuple):
    """A table's inputs and targets, as :func:`read_table` gives them."""

    X: np.ndarray               # (rows, inputs), text inputs as their indicator columns
    Y: np.ndarray               # (rows, targets), text labels as class codes
    input_names: list | None    # the names of X's columns (None without a header)
    target_names: list | None
    classes: tuple              # a classification's text labels, sorted (class k is the k-th); () for numbers
    notes: tuple                # :class:`Table`'s notes


def _check_categorical(categorical: dict, header) -> None:
    """DataError for a hand-written ``data.categorical`` whose levels are none or one given twice, or that names
    columns of a table without a header."""
    for c, lv in categorical.items():
        twice = [v for i, v in enumerate(lv) if v in lv[:i]]
        if twice or not lv:
            raise DataError(f"data.categorical.{c}", list(lv), f"lists level {twice[0]!r} twice; each level once"
                            if twice else "lists no level; give the column's levels (init writes them)")
    if categorical and header is False:
        raise DataError("data.categorical", sorted(categorical), "names columns, but data.header is false")


def _named_columns(categorical: dict, names: list, targets: list, path: Path) -> None:
    """DataError when ``data.categorical`` names a column the header ``names`` lacks, or a target column."""
    unknown = [c for c in categorical if c not in names]
    if unknown:
        raise DataError("data.categorical", sorted(categorical), f"no column named {unknown[0]!r} in {path}; the "
                                                                 f"header has {names}")
    if set(targets) & {names.index(c) for c in categorical}:
        raise DataError("data.categorical", sorted(categorical), "names a target column; it is for input columns "
                                                                 "(a classification's text labels need no entry)")


def read_table(path: Path, target_columns, key: str, value, delimiter=None, header=None, labels: bool = False,
               categorical: dict | None = None, encoding: str | None = None) -> Columns:
    """The :class:`Columns` of a table (see :func:`parse_table`):
    ``target_columns`` are Y, the rest X; missing cells are NaN. With ``labels`` (a classification) the
    target may be text ('yes'/'no'): its distinct labels sorted are the
    classes, class k coded k, as scikit-learn's estimators do (``classes``
    empty for numeric labels). The input columns named in ``categorical``
    ({name: levels}) hold text, each replaced by its indicator columns
    (:func:`indicator_names`) of its cells as written; their names are checked against the header before
    its cells are read."""
    categorical = categorical or {}
    _check_categorical(categorical, header)

    def text_columns(names, width):
        if names is None:                   # before a header is known: the columns given by number
            return [c % width for c in target_columns if labels and not isinstance(c, str) and -width <= c < width]
        targets = target_indices(target_columns, names, width)
        _named_columns(categorical, names, targets, path)
        return (targets if labels else []) + [j for j, n in enumerate(names) if n in categorical]
    try:
        table = parse_table(path, key, value, delimiter, header, text_columns, encoding)
    except DataError as e:
        if not e.allowed.startswith("not a numeric table"):
            raise
        raise DataError(key, value, f"{e.allowed}; a column of text levels is listed in data.categorical with its "
                                    f"levels (init writes them)") from None
    A, names = table.A, table.names
    if categorical and names is None:
        raise DataError("data.categorical", sorted(categorical), f"names columns, but {path} has no header row")
    cols = target_indices(target_columns, names, A.shape[1])
    classes: tuple = ()
    for j in cols:
        if j in table.texts:
            classes = label_classes(table.texts[j])
            code = {c: k for k, c in enumerate(classes)}
            A[:, j] = [code.get(c, math.nan) for c in table.texts[j]]
    inputs = [j for j in range(A.shape[1]) if j not in cols]
    x_names = None if names is None else encoded_names([names[j] for j in inputs], categorical, "data.categorical",
                                                       sorted(categorical), path)
    X, _ = encode_table(table, inputs, categorical, key, value, path, "a level data.categorical does not list for it")
    target_names = [names[j] for j in cols] if names is not None else None
    return Columns(X, A[:, cols], x_names, target_names, classes, table.notes)
