"""Config templates for a user's own table, shipped with the package
(``adaptive_hmc/front/templates/*.yaml``) and written by ``adaptive-hmc init``,
prefilled from a CSV's header when one is given.

Flow position: beside config (it writes what config reads); reads tables
through :mod:`~adaptive_hmc.data` only.
"""
from __future__ import annotations

import json
import os
import re
from importlib.resources import files
from pathlib import Path

import numpy as np

from ..tables import (MAX_LEVELS, DataError, encoded_names, indicator_names, is_missing, label_classes,
                      parse_table, single_row_classes, written_number)

#: The tasks a template is shipped for.
KINDS = ("regression", "classification")


def template_text(kind: str) -> str:
    """The shipped template of ``kind`` (one of :data:`KINDS`), comments included."""
    if kind not in KINDS:
        raise ValueError(f"template {kind!r}: allowed are {', '.join(KINDS)}")
    return (files("adaptive_hmc") / "front" / "templates" / f"{kind}.yaml").read_text(encoding="utf-8")


def _set(text: str, key: str, value: str, after: str | None = None) -> str:
    """``text`` with the first line ``key: ...`` (any indent) given ``value``, its comment kept; where there is
    none, a new line after the line of key ``after``, at its indent."""
    pattern = re.compile(rf"^(\s*{re.escape(key)}: )([^#\n]*?)( *)(#.*)?$", re.M)
    if not pattern.search(text) and after is not None:
        m = re.search(rf"^(\s*){re.escape(after)}: .*$", text, re.M)
        return text[:m.end()] + f"\n{m.group(1)}{key}: {value}" + text[m.end():]
    if not pattern.search(text):
        raise ValueError(f"template has no line for {key!r}")

    def line(m):           # the comment stays in its column when the value fits
        if not m.group(4):
            return m.group(1) + value
        width = len(m.group(2)) + len(m.group(3))
        return m.group(1) + value.ljust(width - 1) + " " + m.group(4)
    return pattern.sub(line, text, count=1)


def _scalar(v: str) -> str:
    """``v`` as a YAML scalar: bare when plain, else quoted."""
    return v if re.fullmatch(r"[A-Za-z_./][\w./-]*", v) else _yaml_json(v)


def _classes(labels: np.ndarray, target: str, csv: Path) -> str:
    """The likelihood for label column ``labels``: logistic for 0/1, softmax for 0..K-1 (K > 2)."""
    values = np.unique(labels[~np.isnan(labels)])
    if values.size >= 2 and np.array_equal(values, np.arange(values.size)):
        return "logistic" if values.size == 2 else "softmax"
    shown = ", ".join(f"{v:g}" for v in values[:8]) + (", ..." if values.size > 8 else "")
    raise DataError("--target", target, f"the labels in {csv} are {shown}; classification needs class indices "
                                        f"0..K-1 (K >= 2): recode the column, or use regression")


def _yaml_json(value) -> str:
    """``value`` as JSON, which is YAML, in UTF-8 (``ensure_ascii=False``: an emoji or an accent as written),
    with the characters YAML reads as line breaks or will not take unescaped written as escapes."""
    return re.sub(r"[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]", lambda m: f"\\u{ord(m.group()):04x}",
                  json.dumps(value, ensure_ascii=False))


def _text_inputs(table, target_col: int, csv: Path, said: list) -> dict:
    """{column: its levels} of the input columns of ``csv`` that hold text
    (``table.texts``, :func:`~adaptive_hmc.tables.parse_table`'s), a line in ``said`` for each one's cells read
    as missing ('NA'); DataError for a column of numbers with a few stray words, of numbers written as text
    ('5%', '1,5'), or of too many distinct texts."""
    levels, A, names = {}, table.A, table.names
    for j, cells in sorted(table.texts.items()):
        if j == target_col:
            continue
        words = [(i, c) for i, c in enumerate(cells, start=1) if np.isnan(A[i - 1, j]) and not is_missing(c)]
        if words and all(written_number(c) for _, c in words):
            i, c = words[0]
            raise DataError("--csv", str(csv), f"input column {names[j]!r} of {csv} holds numbers written as text: "
                                               f"row {i} is {c!r} (rows counted from 1 below the header); "
                                               f"{written_number(c)}")
        if len(words) < (~np.isnan(A[:, j])).sum():     # mostly numbers: the words are typing errors
            i, c = words[0]
            hint = f"; {written_number(c)}" if written_number(c) else ""
            raise DataError("--csv", str(csv), f"not a numeric table: row {i}, column {j} ({names[j]!r}) is {c!r}, "
                                               f"in a column of numbers (rows counted from 1 below the header, "
                                               f"columns from 0); fix the cell, or leave it empty as missing{hint}")
        found = label_classes(cells)
        if len(found) > MAX_LEVELS:
            raise DataError("--csv", str(csv), f"input column {names[j]!r} holds {len(found)} distinct texts "
                                               f"({', '.join(map(repr, found[:4]))}, ...); a text input becomes one "
                                               f"input column a level, at most {MAX_LEVELS}: leave the column out "
                                               f"of the table, or recode it as numbers")
        levels[names[j]] = list(found)
        marked = sorted({c for c in cells if is_missing(c) and c.strip()})
        if marked:
            said.append(f"column {names[j]!r}: {sum(is_missing(c) and bool(c.strip()) for c in cells)} rows hold "
                        f"{', '.join(map(repr, marked))}, read as missing, as empty, ?, NA and nan are in any case "
                        f"(data.missing: those rows are left out)")
    return levels


def _prefill(kind: str, text: str, table, csv: Path, target: str | None, out: Path, said: list) -> str:
    """The template ``text`` prefilled from the :class:`~adaptive_hmc.tables.Table` of ``csv`` (see
    :func:`write_template`), what init says appended to ``said``."""
    names, texts, A = table.names, table.texts, table.A
    if names is None:
        raise DataError("--csv", str(csv), "has no header row; the templates name their columns "
                                           "(add a header, or copy a template and give column numbers)")
    target = target or names[-1]
    if target not in names:
        raise DataError("--target", target, f"no column named {target!r} in {csv}; the header has {names}")
    col = names.index(target)
    if kind == "regression" and col in texts:
        first = next(c for c in texts[col] if not is_missing(c))
        hint = f"; {written_number(first)}" if written_number(first) else ""
        raise DataError("--target", target, f"column {target!r} of {csv} holds text ({first!r}); regression "
                                            f"needs numbers: recode it, or use the classification template{hint}")
    levels = _text_inputs(table, col, csv, said)
    if not encoded_names([n for n in names if n != target], levels, "--csv", str(csv), csv):
        raise DataError("--csv", str(csv), f"has no input column beside the target {target!r}")
    text = _set(text, "name", re.sub(r"[^A-Za-z0-9._-]+", "_", csv.stem) or "my_data")
    out.parent.mkdir(parents=True, exist_ok=True)
    text = _set(text, "path", _scalar(os.path.relpath(csv.resolve(), out.parent.resolve())))   # through links
    text = _set(text, "target_columns", f"[{_scalar(target)}]")
    if levels:
        text = _set(text, "categorical", _yaml_json(levels))
        said += [f"input column {c!r} holds text: encoded as {', '.join(indicator_names(c, v))} (levels "
                 f"{', '.join(map(repr, v))}; data.categorical)" for c, v in levels.items()]
    if kind == "classification":
        classes = label_classes(texts.get(col, ()))
        text = _set(text, "likelihood", ("logistic" if len(classes) == 2 else "softmax") if len(classes) >= 2
                    else _classes(A[:, col], target, csv))
        lone = single_row_classes([c for c in texts.get(col, ()) if c in classes] if classes else
                                  [f"{v:g}" for v in A[:, col][~np.isnan(A[:, col])]])
        if lone:
            raise DataError("--target", target, f"class {lone[0]!r} of {csv} has a single row; the template's "
                            f"stratified split needs at least 2 of each class: remove or merge it")
    return text


def write_template(kind: str, out: Path, csv: Path | None = None, target: str | None = None,
                   force: bool = False, encoding: str | None = None) -> str:
    """Write the ``kind`` template to ``out`` (refused when it exists, unless
    ``force``); with ``csv``, prefilled from its header: ``data.path``
    (relative to ``out``'s folder, through any symbolic links),
    ``data.target_columns`` (``target``, by default the last column), the
    text input columns and their levels (``data.categorical``, in UTF-8), the
    ``encoding`` when one is named, and the run's name; for classification
    the likelihood from the labels. Returns what was done and what to do
    next. :class:`~adaptive_hmc.data.DataError` (exit 2) names what is wrong."""
    text = template_text(kind)
    if out.exists() and not force:
        raise DataError("--out", str(out), "exists; choose another file name, or add --force to overwrite it")
    said: list = []
    if csv is not None:
        table = parse_table(csv, "--csv", str(csv), encoding=encoding,
                            text_columns=lambda names, width: range(width) if names else [])
        said += table.notes
        text = _prefill(kind, text, table, csv, target, out, said)
        if encoding is not None:
            text = _set(text, "encoding", _scalar(encoding), after="path")
    elif target is not None:
        raise DataError("--target", target, "needs --csv (the table whose column it names)")
    elif encoding is not None:
        raise DataError("--encoding", encoding, "needs --csv (the table it reads)")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    step = "" if csv is not None else "set data.path and data.target_columns, then: "
    return "\n".join(said + [f"wrote {out}; {step}adaptive-hmc validate {out} && adaptive-hmc run {out}"])
