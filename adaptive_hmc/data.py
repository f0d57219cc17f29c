"""Data: locating and reading tables and named data sets, row selection,
finiteness checks, standardisation, k-fold splits.

Flow position: **data** -> models. Data are read from local files only: the copy
the package ships (robot arm), a directory named by ``ADAPTIVE_HMC_DATA``, or a
``shared/data`` folder beside or above the working directory. Problems are
raised as :class:`DataError`, which names the config key they concern.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np

_SHIPPED = Path(__file__).parent / "datasets"


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
    """Affine map to zero mean, unit sd per column (fitted on training data)."""

    mean: np.ndarray
    sd: np.ndarray

    @classmethod
    def identity(cls, n_columns: int):
        return cls(np.zeros(n_columns), np.ones(n_columns))

    @classmethod
    def fit(cls, A):
        A = np.asarray(A, float)
        sd = A.std(axis=0)
        return cls(A.mean(axis=0), np.where(sd > 0, sd, 1.0))

    def transform(self, A):
        return (np.asarray(A, float) - self.mean) / self.sd

    def inverse(self, A):
        return np.asarray(A, float) * self.sd + self.mean


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
    """Training cases, named test sets ({name: (X, Y)}) and the number of network outputs."""

    train: tuple
    tests: dict
    n_outputs: int


def read_table(path: Path, target_columns, key: str, value) -> tuple:
    """(X, Y) of a numeric table (comma-separated when the name ends in .csv,
    white space otherwise): ``target_columns`` (0-based, negative from the end)
    are Y, the rest X."""
    if not path.is_file():
        raise DataError(key, value, f"no such file ({path})")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)      # numpy warns, and returns nothing, on an empty file
            A = np.loadtxt(path, delimiter="," if path.suffix == ".csv" else None, ndmin=2)
    except UserWarning:
        raise DataError(key, value, f"the file has no rows ({path})") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise DataError(key, value, f"not a numeric table: {e}") from None
    if any(not -A.shape[1] <= c < A.shape[1] for c in target_columns):
        raise DataError("data.target_columns", list(target_columns), f"the file has {A.shape[1]} columns")
    cols = [c % A.shape[1] for c in target_columns]
    if len(set(cols)) < len(cols):
        raise DataError("data.target_columns", list(target_columns),
                        f"names a column twice (as columns {cols}, counted from 0); each target column once")
    return np.delete(A, cols, axis=1), A[:, cols]


def read_inputs(path, n_inputs: int):
    """Inputs (N, n_inputs) for prediction from a numeric table (comma-separated
    when the name ends in .csv, white space otherwise); ValueError says what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            X = np.loadtxt(path, delimiter="," if path.suffix == ".csv" else None, ndmin=2)
    except UserWarning:
        raise ValueError(f"{path}: the file has no rows") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a numeric table: {e}") from None
    if X.shape[1] != n_inputs:
        raise ValueError(f"{path}: {X.shape[1]} columns; the network takes {n_inputs} inputs (one column each)")
    problem = check_finite(X, "inputs", first_row=1)
    if problem:
        raise ValueError(f"{path}: {problem}")
    return X


def select_rows(A, rows, key: str):
    """Rows first..last of ``A``, numbered from 1 and inclusive, as in the papers."""
    lo, hi = rows
    if hi > len(A):
        raise DataError(key, [lo, hi], f"the data has {len(A)} rows")
    return A[lo - 1:hi]


def load_split(*, dataset=None, file=None, path=None, base_dir=".", target_columns=None, train_rows,
               test_sets=None, likelihood="gaussian") -> Split:
    """Read a named data set (``dataset``, and ``file`` in its folder unless it is
    the robot arm) or a table at ``path`` (a relative path is relative to
    ``base_dir``, the config file's folder), select the training and test rows,
    and check that the data are finite and fit the likelihood."""
    if dataset == "robot_arm":
        try:
            arm = load_robot_arm()
        except (FileNotFoundError, ValueError) as e:
            raise DataError("data.dataset", "robot_arm", str(e)) from None
        X, Y = arm.X, arm.Y
    else:
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
        X, Y = read_table(p, target_columns, key, value)
    for what, arr in (("inputs", X), ("targets", Y)):
        problem = check_finite(arr, what, first_row=1)
        if problem:
            raise DataError("data", dataset or path, problem)
    if X.shape[1] < 1:
        raise DataError("data", dataset or path, "no input columns")
    if likelihood == "gaussian" and Y.shape[1] < 1:
        raise DataError("data.target_columns", target_columns, "no target columns")
    if likelihood != "gaussian" and Y.shape[1] != 1:
        raise DataError("data.target_columns", target_columns, "classification needs one label column")
    n_out = {"gaussian": Y.shape[1], "logistic": 1, "softmax": int(Y.max()) + 1}[likelihood]
    train = (select_rows(X, train_rows, "data.train_rows"), select_rows(Y, train_rows, "data.train_rows"))
    tests = {n: (select_rows(X, v, f"data.test_sets.{n}"), select_rows(Y, v, f"data.test_sets.{n}"))
             for n, v in (test_sets or {}).items()}
    return Split(train, tests, n_out)
