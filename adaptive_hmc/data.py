"""Data sets: locating and loading the benchmark data, standardisation.

Flow position: **data** -> model. Data are read from local files only: the copy
the package ships (robot arm), a directory named by ``ADAPTIVE_HMC_DATA``, or a
``shared/data`` folder beside or above the working directory.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

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
    """Affine map to zero mean, unit sd per column (fitted on training data)."""

    mean: np.ndarray
    sd: np.ndarray

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
