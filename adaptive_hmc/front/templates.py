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

from ..tables import DataError, label_classes, parse_table, single_row_classes, target_indices

#: The tasks a template is shipped for.
KINDS = ("regression", "classification")


def template_text(kind: str) -> str:
    """The shipped template of ``kind`` (one of :data:`KINDS`), comments included."""
    if kind not in KINDS:
        raise ValueError(f"template {kind!r}: allowed are {', '.join(KINDS)}")
    return (files("adaptive_hmc") / "front" / "templates" / f"{kind}.yaml").read_text(encoding="utf-8")


def _set(text: str, key: str, value: str) -> str:
    """``text`` with the first line ``key: ...`` (any indent) given ``value``, its comment kept."""
    pattern = re.compile(rf"^(\s*{re.escape(key)}: )([^#\n]*?)( *)(#.*)?$", re.M)
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
    return v if re.fullmatch(r"[A-Za-z_./][\w./-]*", v) else json.dumps(v)


def _classes(labels: np.ndarray, target: str, csv: Path) -> str:
    """The likelihood for label column ``labels``: logistic for 0/1, softmax for 0..K-1 (K > 2)."""
    values = np.unique(labels[~np.isnan(labels)])
    if values.size >= 2 and np.array_equal(values, np.arange(values.size)):
        return "logistic" if values.size == 2 else "softmax"
    shown = ", ".join(f"{v:g}" for v in values[:8]) + (", ..." if values.size > 8 else "")
    raise DataError("--target", target, f"the labels in {csv} are {shown}; classification needs class indices "
                                        f"0..K-1 (K >= 2): recode the column, or use regression")


def write_template(kind: str, out: Path, csv: Path | None = None, target: str | None = None,
                   force: bool = False) -> str:
    """Write the ``kind`` template to ``out`` (refused when it exists, unless
    ``force``); with ``csv``, prefilled from its header: ``data.path``
    (relative to ``out``'s folder), ``data.target_columns`` (``target``, by
    default the last column) and the run's name; for classification the
    likelihood from the labels. Returns a line saying what to do next.
    :class:`~adaptive_hmc.data.DataError` (exit 2) names what is wrong."""
    text = template_text(kind)
    if out.exists() and not force:
        raise DataError("--out", str(out), "exists; choose another file name, or add --force to overwrite it")
    if csv is not None:
        def label_column(names, width):           # a classification's labels may be text ('yes'/'no')
            return [] if names is None or kind != "classification" else \
                target_indices([target or names[-1]], names, width)
        A, names, texts = parse_table(csv, "--csv", str(csv), text_columns=label_column)
        if names is None:
            raise DataError("--csv", str(csv), "has no header row; the templates name their columns "
                                               "(add a header, or copy a template and give column numbers)")
        target = target or names[-1]
        col = target_indices([target], names, A.shape[1])[0]
        rel = os.path.relpath(csv.resolve(), out.absolute().parent)
        text = _set(text, "name", re.sub(r"[^A-Za-z0-9._-]+", "_", csv.stem) or "my_data")
        text = _set(text, "path", _scalar(rel))
        text = _set(text, "target_columns", f"[{_scalar(target)}]")
        if kind == "classification":
            classes = label_classes(texts.get(col, ()))
            text = _set(text, "likelihood", ("logistic" if len(classes) == 2 else "softmax") if len(classes) >= 2
                        else _classes(A[:, col], target, csv))
            lone = single_row_classes([c for c in texts.get(col, ()) if c in classes] if classes else
                                      [f"{v:g}" for v in A[:, col][~np.isnan(A[:, col])]])
            if lone:
                raise DataError("--target", target, f"class {lone[0]!r} of {csv} has a single row; the template's "
                                f"stratified split needs at least 2 of each class: remove or merge it")
    elif target is not None:
        raise DataError("--target", target, "needs --csv (the table whose column it names)")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    step = "" if csv is not None else "set data.path and data.target_columns, then: "
    return f"wrote {out}; {step}adaptive-hmc validate {out} && adaptive-hmc run {out}"
