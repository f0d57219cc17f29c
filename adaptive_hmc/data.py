"""Data: locating named data sets and tables (read by :mod:`~adaptive_hmc.tables`),
row selection, standardisation, feature selection, k-fold splits, and the inputs
a finished run predicts for (:func:`read_inputs`, matched to its columns).

Flow position: **data** -> models. Data are read from local files only: the copies
the package ships (robot arm, Rasmussen's five UCI tasks), a directory named by ``ADAPTIVE_HMC_DATA``, or a
``shared/data`` folder beside or above the working directory. Problems are
raised as :class:`DataError`, which names the config key they concern.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .tables import (Columns, DataError, check_finite, encode_table, indicator_names, parse_table, read_table,
                     single_row_classes)
from .tasks import LOADERS

_SHIPPED = Path(__file__).parent / "datasets"


def data_dir(name: str) -> Path:
    """Directory of data set ``name``; FileNotFoundError lists where it looked."""
    candidates = []
    if os.environ.get("ADAPTIVE_HMC_DATA"):
        candidates.append(Path(os.environ["ADAPTIVE_HMC_DATA"]) / name)
    candidates.append(_SHIPPED / name)
    here = Path.cwd().resolve()
    for base in (here, *here.parents):
        candidates.append(base / "shared" / "data" / name)
        candidates.append(base.parent / "shared" / "data" / name)
    for c in candidates:
        if c.is_dir():
            return c
    raise FileNotFoundError(f"data set {name!r} not found; looked in: " +
                            ", ".join(str(c) for c in candidates[:4]) +
                            " and shared/data above the working directory "
                            "(set ADAPTIVE_HMC_DATA to the folder holding it)")


class RobotArm(NamedTuple):
    X: np.ndarray  # (600, 2) joint angles
    Y: np.ndarray  # (600, 2) arm position

    def rows(self, first: int, last: int):
        """Cases first..last, numbered from 1 and inclusive, as in the papers."""
        return self.X[first - 1:last], self.Y[first - 1:last]


def robot_arm_truth(X) -> np.ndarray:
    """Noise-free outputs of MacKay's robot arm (Wang thesis eqs 4.1-4.2)."""
    x1, x2 = X[:, 0], X[:, 1]
    return np.column_stack([2.0 * np.cos(x1) + 1.3 * np.cos(x1 + x2),
                            2.0 * np.sin(x1) + 1.3 * np.sin(x1 + x2)])


def load_robot_arm() -> RobotArm:
    """MacKay's robot arm: 600 cases, 2 inputs, 2 outputs (see its PROVENANCE.md)."""
    d = data_dir("robot_arm")
    X = np.loadtxt(d / "Mackay-inputs.data")
    Y = np.loadtxt(d / "Mackay-outputs.data")
    if X.shape != (600, 2) or Y.shape != (600, 2):
        raise ValueError(f"{d}: expected 600x2 inputs and outputs, got {X.shape} and {Y.shape}")
    return RobotArm(X, Y)


class Standardizer(NamedTuple):
    """Affine map to zero mean, unit sd per column (fitted on training data),
    after an optional choice of ``columns`` of the raw table (empty: all) and
    an optional log(1 + x) (``log1p``): the map from a raw input row to the
    network's inputs, stored with a run and applied by predict."""

    mean: np.ndarray
    sd: np.ndarray
    columns: np.ndarray = np.empty(0, np.int64)
    log1p: bool = False
    width: int = 0          # columns of a raw row (0: as many as mean)
    names: tuple = ()       # the raw row's column names, from the training table's header (or none)
    target_names: tuple = ()  # the names of the table's target columns (predictions are named after them)
    classes: tuple = ()     # a classification's labels as the table writes them, class k the k-th (or none)
    levels: tuple = ()      # ((column, (level, ...)), ...): the raw table's text columns (data.categorical)

    @classmethod
    def identity(cls, n_columns: int, columns=None, log1p: bool = False):
        """No scaling, of a raw table with ``n_columns`` columns (then ``columns`` and ``log1p``)."""
        cols = np.empty(0, np.int64) if columns is None else np.asarray(columns, np.int64)
        n = cols.size if cols.size else n_columns
        return cls(np.zeros(n), np.ones(n), cols, bool(log1p), int(n_columns))

    @classmethod
    def fit(cls, A, inputs: bool = False, columns=None, log1p: bool = False):
        """Fitted to the rows of ``A`` (after ``columns`` and ``log1p``). A
        column that never varies gets sd 1, or, for ``inputs``, an infinite sd,
        so that it maps to 0 whatever its value: the training data say nothing
        about the weights out of such an input, so another value at prediction
        time would only multiply weights drawn from their (heavy-tailed) prior.
        One-hot levels absent from a small training set are the common case
        (Rasmussen's servo task with 11 cases)."""
        base = cls.identity(np.shape(A)[1], columns, log1p)
        A = base.prepare(A)
        sd = A.std(axis=0)
        return base._replace(mean=A.mean(axis=0), sd=np.where(sd > 0, sd, np.inf if inputs else 1.0))

    def prepare(self, A) -> np.ndarray:
        """The chosen columns of ``A``, log(1 + x) when asked: before the affine map."""
        A = np.asarray(A, float)
        if self.columns.size:
            A = A[:, self.columns]
        return np.log1p(A) if self.log1p else A

    def transform(self, A):
        return (self.prepare(A) - self.mean) / self.sd

    def inverse(self, A):
        return np.asarray(A, float) * self.sd + self.mean


def select_features(X, labels, k: int) -> np.ndarray:
    """The ``k`` columns of X (N, n) whose presence (x != 0) is most related to
    the 0/1 ``labels`` by Pearson's chi-squared test of the 2 x 2 table
    (presence x class), ties broken by the number of cases where the feature is
    present; sorted column indices. A univariate filter on the cases given only
    (Dexter: Neal & Zhang's entries also filtered features one at a time)."""
    import scipy.sparse as sp
    labels = np.asarray(labels, float).ravel()
    P = (abs(sp.csc_matrix(X)) > 0).astype(float)
    n = labels.size
    if P.shape[0] != n or not np.isin(labels, (0.0, 1.0)).all():
        raise ValueError(f"select_features: {P.shape[0]} cases and {n} labels, or labels other than 0/1")
    if not 1 <= k <= P.shape[1]:
        raise ValueError(f"select_features: k={k} must be in 1..{P.shape[1]} (the number of features)")
    a = np.asarray(P.T @ labels).ravel()            # present and class 1
    present = np.asarray(P.sum(axis=0)).ravel()
    n1 = labels.sum()
    table = np.stack([a, present - a, n1 - a, n - n1 - present + a])        # (4, n_features)
    rows = np.stack([present, present, n - present, n - present])
    cols = np.stack([np.full_like(a, n1), np.full_like(a, n - n1)] * 2)
    expected = rows * cols / n
    with np.errstate(divide="ignore", invalid="ignore"):
        chi2 = np.where(expected > 0, (table - expected) ** 2 / expected, 0.0).sum(axis=0)
    order = np.lexsort((-present, -chi2))
    return np.sort(order[:k])


def kfold(n_cases: int, k: int, rng, labels=None) -> list:
    """Held-out index sets of a seeded k-fold split of cases 0..n_cases-1:
    ``k`` disjoint sorted arrays covering every case, sizes differing by at
    most one. With ``labels`` the split is stratified: each class is shuffled
    and dealt round-robin, so every fold holds its share of each class.
    ``rng`` is a ``numpy.random.Generator`` (or a seed)."""
    if not (isinstance(k, (int, np.integer)) and 2 <= k <= n_cases):
        raise ValueError(f"k={k!r}: the number of folds must be an integer in 2..{n_cases} (the number of cases)")
    rng = np.random.default_rng(rng)
    if labels is None:
        order = rng.permutation(n_cases)
    else:
        labels = np.asarray(labels).reshape(n_cases, -1)[:, 0]
        order = np.concatenate([rng.permutation(np.flatnonzero(labels == c)) for c in np.unique(labels)])
    return [np.sort(order[j::k]) for j in range(k)]


class Split(NamedTuple):
    """Training cases, named test sets ({name: (X, Y)}), the number of network
    outputs, and notes for the user (rows left out for missing values)."""

    train: tuple
    tests: dict
    n_outputs: int
    notes: tuple = ()
    input_names: tuple = ()     # the input columns' names, when the table has a header
    target_names: tuple = ()    # the target columns' names, likewise
    classes: tuple = ()         # text labels of a classification, sorted: class k is classes[k] (coded k)
    levels: tuple = ()          # ((column, (level, ...)), ...): the text input columns, as data.categorical


def row_range(rows, n_rows: int, key: str) -> np.ndarray:
    """Indices of rows first..last (a pair), numbered from 1 and inclusive, as
    in the papers; or of the rows listed in ``{"rows": [r1, r2, ...]}`` (numbered
    from 1, each at most once)."""
    if isinstance(rows, dict):
        listed = np.asarray(rows["rows"], dtype=np.int64)
        if listed.size == 0:
            raise DataError(key, rows, "list at least one row")
        bad = listed[(listed < 1) | (listed > n_rows)]
        if bad.size:
            raise DataError(key, int(bad[0]), f"rows are numbered 1..{n_rows} (the data has {n_rows} rows)")
        values, counts = np.unique(listed, return_counts=True)
        if np.any(counts > 1):
            raise DataError(key, int(values[counts > 1][0]), "a row may be listed once")
        return values - 1
    lo, hi = rows
    if hi > n_rows:
        raise DataError(key, [lo, hi], f"the data has {n_rows} rows")
    return np.arange(lo - 1, hi)


def _shown(rows):
    return rows if isinstance(rows, dict) else list(rows)


def _split_sizes(split: dict, n: int) -> int:
    """The number of test cases of ``split`` on ``n`` rows (0: every row
    trains, asked for as ``train: 1.0`` or ``train: n``), as scikit-learn's
    train_test_split counts them; a DataError in the config's words when the
    sizes do not fit."""
    train, test = split["train"], split.get("test")
    every = f"train: 1.0 (or {n}) trains on every row, with no test set"
    if isinstance(train, float) and train > 1 or isinstance(train, int) and train > n:
        raise DataError("data.split.train", train, f"a fraction below 1 or at most the {n} complete rows; {every}")
    if test is not None and isinstance(test, float) and test >= 1:
        raise DataError("data.split.test", test, f"a fraction below 1 or a number of cases (at most {n - 1})")
    n_train = int(train * n) if isinstance(train, float) else train
    if n_train == n:
        if test is not None:
            raise DataError("data.split", dict(split), f"every one of the {n} complete rows trains, none is left to "
                                                       f"test; lower train, or leave out test ({every})")
        return 0
    n_test = (math.ceil(test * n) if isinstance(test, float) else test) if test is not None else n - n_train
    if n_train < 1 or n_train + n_test > n:
        raise DataError("data.split", dict(split), f"{n_train} training and {n_test} test cases, but the table has "
                                                   f"{n} complete rows")
    return n_test


def _read(dataset, file, path, base_dir, target_columns, header, delimiter, likelihood, categorical, encoding):
    """The :class:`~adaptive_hmc.tables.Columns` of the named data set or table (:func:`load_split`)."""
    if dataset == "robot_arm":
        try:
            arm = load_robot_arm()
        except (FileNotFoundError, ValueError) as e:
            raise DataError("data.dataset", "robot_arm", str(e)) from None
        return Columns(arm.X, arm.Y, None, None, (), ())
    if dataset in LOADERS and file is None:
        try:
            X, y = LOADERS[dataset](data_dir(dataset))
        except (OSError, ValueError) as e:
            raise DataError("data.dataset", dataset, f"cannot read it: {e}") from None
        return Columns(X, y[:, None], None, None, (), ())
    if dataset is not None:
        try:
            p = data_dir(dataset) / file
        except FileNotFoundError as e:
            raise DataError("data.dataset", dataset, str(e)) from None
        key, value = "data.file", file
    else:
        p = Path(path)
        if not p.is_absolute():
            p = Path(base_dir) / p
        key, value = "data.path", path
    return read_table(p, target_columns, key, value, delimiter, header, likelihood != "gaussian", categorical,
                      encoding)


def _check(X, Y, source, target_columns, missing, likelihood, input_names) -> np.ndarray:
    """The rows with a missing value (bool), once the data are finite where given and fit the likelihood and
    ``missing``; DataError in the config's words otherwise."""
    for what, arr in (("inputs", X), ("targets", Y)):
        problem = check_finite(np.where(np.isnan(arr), 0.0, arr), what, first_row=1)     # infinities
        if problem:
            raise DataError("data", source, problem)
    incomplete = np.isnan(X).any(axis=1) | np.isnan(Y).any(axis=1)
    if missing == "error" and incomplete.any():
        raise DataError("data.missing", "error", f"{incomplete.sum()} rows have missing values (first: row "
                        f"{np.flatnonzero(incomplete)[0] + 1}, counted from 1); set data.missing: drop_rows to "
                        f"leave such rows out")
    if X.shape[1] < 1:
        raise DataError("data", source, "no input columns")
    if likelihood == "gaussian" and Y.shape[1] < 1:
        raise DataError("data.target_columns", target_columns, "no target columns")
    if likelihood != "gaussian" and Y.shape[1] != 1:
        raise DataError("data.target_columns", target_columns, "classification needs one label column")
    if incomplete.all():
        empty = [j for j in range(X.shape[1]) if np.isnan(X[:, j]).all()]
        why = ""
        if empty:
            name = repr(input_names[empty[0]]) if input_names else f"{empty[0]} (counted from 0)"
            why = f": input column {name} is empty in every row; leave it out of the table"
        raise DataError("data", source, f"every one of the {len(X)} rows has a missing value, so none is left to "
                                        f"train on{why}")
    return incomplete


def _by_rows(train_rows, test_sets: dict, n_rows: int, complete) -> tuple:
    """(training rows, {test set: rows}) by row ranges or lists, the incomplete ones left out (``complete``)."""
    train = row_range(train_rows, n_rows, "data.train_rows")
    tests = {}
    for n, v in test_sets.items():
        tests[n] = row_range(v, n_rows, f"data.test_sets.{n}")
        both = np.intersect1d(tests[n], train)
        if both.size:
            raise DataError(f"data.test_sets.{n}", v if isinstance(v, dict) else list(v),
                            f"overlaps the training rows {_shown(train_rows)} (row {both[0] + 1} is in both); "
                            "test cases must not be training cases")
    return complete(train, "data.train_rows"), {n: complete(v, f"data.test_sets.{n}") for n, v in tests.items()}


def _by_split(split: dict, Y, classes, rows) -> tuple:
    """(training rows, {"test": rows} or {}) of a seeded shuffled ``split`` of the complete ``rows``."""
    from sklearn.model_selection import train_test_split
    if split.get("stratify"):
        lone = single_row_classes([classes[int(c)] if classes else f"{c:g}" for c in Y[rows, 0]])
        if lone:
            raise DataError("data.split", dict(split), f"class{'es' if len(lone) > 1 else ''} "
                            f"{', '.join(map(repr, lone))} {'have' if len(lone) > 1 else 'has'} a single row, and "
                            f"a stratified split needs at least 2 of each class: remove or merge "
                            f"{'them' if len(lone) > 1 else 'it'} ({rows.size} complete rows)")
    if _split_sizes(split, rows.size):
        try:
            train, test = train_test_split(rows, train_size=split["train"], test_size=split.get("test"),
                                           random_state=split.get("seed", 0),
                                           stratify=Y[rows, 0] if split.get("stratify") else None)
        except ValueError as e:
            raise DataError("data.split", dict(split), f"{e} ({rows.size} complete rows)") from None
    else:                                                   # every row a training case, no test set
        train, test = np.random.default_rng(split.get("seed", 0)).permutation(rows), None
    parts, part = split.get("parts", 1), split.get("part", 0)
    if not 0 <= part < parts <= train.size:
        raise DataError("data.split.part", part, f"0..{parts - 1} of parts = {parts} subsets of the "
                                                 f"{train.size} training cases")
    return np.sort(np.array_split(train, parts)[part]), {} if test is None else {"test": np.sort(test)}


def load_split(*, dataset=None, file=None, path=None, base_dir=".", target_columns=None, train_rows=None,
               test_sets=None, split=None, header=None, delimiter=None, missing="drop_rows",
               likelihood="gaussian", categorical=None, encoding=None) -> Split:
    """Read a named data set (``dataset``, and ``file`` in its folder unless it is
    the robot arm) or a table at ``path`` (a relative path is relative to
    ``base_dir``, the config file's folder; see :func:`parse_table` for
    ``header``, ``delimiter`` and ``encoding``, and :func:`read_table` for
    ``categorical``, the text input columns and their levels; a task of :mod:`~adaptive_hmc.tasks`, named
    without ``file``, comes encoded); choose the training and test cases, by row
    ranges or lists (``train_rows``, ``test_sets``, see :func:`row_range`; a
    test set may not overlap the training rows) or by a seeded shuffled ``split`` ({"train": n, "test": m
    or None for the rest, "seed": s, "stratify": bool, "parts": P, "part": j},
    with one test set "test"; with ``parts`` the training cases are dealt into
    P disjoint subsets of the shuffled order and subset j is used); leave out rows with missing values (``missing="drop_rows"``, said
    in the notes) or refuse them (``"error"``); check that the data are finite
    and fit the likelihood."""
    source = dataset or path
    X, Y, input_names, target_names, classes, notes = _read(dataset, file, path, base_dir, target_columns, header,
                                                            delimiter, likelihood, categorical, encoding)
    input_names, target_names, notes = tuple(input_names or ()), tuple(target_names or ()), list(notes)
    incomplete = _check(X, Y, source, target_columns, missing, likelihood, input_names)

    def complete(idx, what):
        bad = incomplete[idx]
        if bad.any():
            notes.append(f"{what}: left out {bad.sum()} of {idx.size} rows with missing values (first: row "
                         f"{idx[bad][0] + 1})")
        return idx[~bad]

    if split is None:
        train, tests = _by_rows(train_rows, test_sets or {}, len(X), complete)
    else:
        train, tests = _by_split(split, Y, classes, complete(np.arange(len(X)), "data"))
    Ytr = Y[train]
    n_out = {"gaussian": Y.shape[1], "logistic": 1, "softmax": int(np.nanmax(Y)) + 1}[likelihood]
    return Split((X[train], Ytr), {n: (X[i], Y[i]) for n, i in tests.items()}, n_out, tuple(notes),
                 input_names, target_names, classes, tuple((c, tuple(lv)) for c, lv in (categorical or {}).items()))


def raw_input_names(names, levels: dict) -> list:
    """The columns of a raw input table whose encoded columns are ``names``
    (each text column's indicator columns are one column there)."""
    of = {n: c for c, lv in levels.items() for n in indicator_names(c, lv)}
    out: list = []
    for n in names:
        n = of.get(n, n)
        if n not in out:
            out.append(n)
    return out


def read_inputs(path, n_inputs: int, names=(), notes: list | None = None, levels: dict | None = None,
                encoding: str | None = None):
    """Inputs (N, n_inputs) for prediction from a table (see :func:`parse_table`;
    no missing values); ValueError says what is wrong. When the file has a
    header and the run knows its input columns' ``names``, columns are matched
    by name (in any order; a missing or an unknown one is an error naming it);
    otherwise they are read by position, and when the run knows the names, a
    line appended to ``notes`` says the order assumed. The text columns of
    ``levels`` ({name: levels}, the run's ``data.categorical``) are encoded as
    the run's training table was (their cells as written); a level it did not know is an error naming
    the row, the column and the levels it knows. A header's column that is not an input of the run (a label
    column) may hold text: it is named as not an input."""
    levels = levels or {}
    raw = raw_input_names(names, levels) if names else []
    text = {j for j, n in enumerate(raw) if n in levels}
    try:
        table = parse_table(Path(path), "input", str(path), encoding=encoding,
                            text_columns=lambda header, width: text if header is None else
                            [j for j, n in enumerate(header) if n in levels or (raw and n not in raw)])
    except DataError as e:
        raise ValueError(f"{path}: {e.allowed}") from None
    header = table.names
    if notes is not None:
        notes.extend(table.notes)
    if header is not None and raw:
        missing = [n for n in raw if n not in header]
        extra = [h for h in header if h not in raw]
        if missing or extra:
            raise ValueError(f"{path}: the header's columns {list(header)} do not match the run's inputs "
                             f"{list(raw)}" + (f"; missing: {missing}" if missing else "")
                             + (f"; not inputs of the run: {extra}" if extra else ""))
        order = [header.index(n) for n in raw]
    else:
        if header is None and raw and notes is not None:
            notes.append(f"{path}: no header row, so its columns are read by position as the run's inputs "
                         f"{', '.join(raw)} (a header with those names matches them by name, in any order)")
        if raw and table.A.shape[1] != len(raw):
            raise ValueError(f"{path}: {table.A.shape[1]} columns; the run's inputs are {len(raw)} columns "
                             f"({', '.join(raw)})")
        order = list(range(table.A.shape[1]))
        table = table._replace(names=raw or None)
    try:
        X, source = encode_table(table, order, levels, "input", str(path), Path(path), "a level the run was not trained on")
    except DataError as e:
        raise ValueError(f"{path}: {e.allowed}") from None
    if X.shape[1] != n_inputs:
        raise ValueError(f"{path}: {X.shape[1]} columns; the network takes {n_inputs} inputs (one column each)")
    cells = np.zeros_like(table.A)             # a cell non-finite where one of its encoded columns is
    np.add.at(cells.T, source, X.T)
    problem = check_finite(cells, "inputs", first_row=1)
    if problem:
        raise ValueError(f"{path}: {problem}")
    return X
