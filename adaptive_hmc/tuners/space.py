"""The action box a tuner searches: one :class:`Dimension` per action, each
owning its bounds, whether it is integer and whether the reward model sees it
on a log scale, and the :class:`Space` of them with the maps between actions
(dicts in original units) and points of the unit box the GP works in (as
scikit-optimize's ``Space`` of ``Dimension`` s owns its transforms).

Flow position: **tuner** (the bandit, its plots).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class Dimension(NamedTuple):
    """One action: ``name`` in [``low``, ``high``], rounded when ``integer``,
    seen by the reward model on a log scale when ``log``."""

    name: str
    low: float
    high: float
    integer: bool = False
    log: bool = False

    def axis(self, n: int) -> np.ndarray:
        """``n`` values from low to high, evenly spaced on the model's scale (geometric on a log axis)."""
        return (np.geomspace if self.log else np.linspace)(self.low, self.high, n)


def check_bounds(bounds) -> dict:
    """{name: (lower, upper)} with finite lower < upper; ValueError otherwise."""
    if not isinstance(bounds, dict) or not bounds:
        raise ValueError(f"bounds={bounds!r}: need a non-empty dict of name -> (lower, upper)")
    out = {}
    for name, b in bounds.items():
        try:
            lo, hi = b
        except (TypeError, ValueError):
            raise ValueError(f"bounds[{name!r}]={b!r}: need a pair (lower, upper)") from None
        if not (isinstance(lo, (int, float)) and isinstance(hi, (int, float))
                and math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"bounds[{name!r}]=({lo!r}, {hi!r}): need finite numbers with lower < upper")
        out[str(name)] = (lo, hi)
    return out


class Space:
    """The box of ``bounds`` ({name: (lower, upper)}); a dimension whose bounds
    are both ints is integer unless ``integer`` (names) says otherwise;
    ``log_axes`` names the dimensions the reward model sees on a log scale
    (their lower bounds must be > 0). Each argument is checked here, with a
    ValueError naming what is wrong."""

    def __init__(self, bounds, integer=None, log_axes=()):
        self.bounds = check_bounds(bounds)
        self.names = list(self.bounds)
        if integer is None:
            integer = [n for n, (lo, hi) in self.bounds.items() if isinstance(lo, int) and isinstance(hi, int)]
        unknown = set(integer) - set(self.names)
        if unknown:
            raise ValueError(f"integer={sorted(unknown)}: not among the bounds {self.names}")
        unknown = set(log_axes) - set(self.names)
        if unknown:
            raise ValueError(f"log_axes={sorted(unknown)}: not among the bounds {self.names}")
        for n in self.names:
            if n in set(log_axes) and self.bounds[n][0] <= 0:
                raise ValueError(f"log_axes: {n!r} has bounds {self.bounds[n]}; a log scale needs lower > 0")
        self.dimensions = [Dimension(n, *self.bounds[n], n in set(integer), n in set(log_axes)) for n in self.names]
        self.integer = [d.name for d in self.dimensions if d.integer]
        self.log_axes = [d.name for d in self.dimensions if d.log]
        self._log = np.array([d.log for d in self.dimensions])
        self.lower = np.array([d.low for d in self.dimensions], float)
        self.upper = np.array([d.high for d in self.dimensions], float)
        self._lo, self._hi = self._warp(self.lower), self._warp(self.upper)

    def __len__(self) -> int:
        return len(self.dimensions)

    def dimension(self, name: str) -> Dimension:
        return self.dimensions[self.names.index(name)]

    def _warp(self, a):
        """Actions in original units -> the model's axes (log for :attr:`log_axes`)."""
        a = np.asarray(a, float)
        return np.where(self._log, np.log(np.where(self._log, a, 1.0)), a)

    def to_unit(self, actions) -> np.ndarray:
        """Actions (n, d) in original units -> points of the unit box."""
        return (self._warp(np.atleast_2d(np.asarray(actions, float))) - self._lo) / (self._hi - self._lo)

    def unit(self, action) -> np.ndarray:
        """One action (a dict with exactly the dimensions' names, inside the box) -> its unit point;
        ValueError naming what is wrong with it."""
        if not isinstance(action, dict) or set(action) != set(self.names):
            raise ValueError(f"action {action!r}: need a dict with exactly the keys {self.names}")
        a = np.array([float(action[n]) for n in self.names])
        if not np.all(np.isfinite(a)) or np.any(a < self.lower) or np.any(a > self.upper):
            raise ValueError(f"action {action!r}: outside the bounds {self.bounds}")
        return self.to_unit(a)[0]

    def action(self, x) -> dict:
        """The action (a dict in original units, integers rounded) at unit point ``x`` (clipped to the box)."""
        w = self._lo + np.clip(x, 0.0, 1.0) * (self._hi - self._lo)
        a = np.clip(np.where(self._log, np.exp(np.where(self._log, w, 0.0)), w), self.lower, self.upper)
        return {d.name: (int(round(v)) if d.integer else float(v)) for d, v in zip(self.dimensions, a)}

    def grid(self, n: int) -> tuple:
        """(axes, points): ``n`` values per dimension (:meth:`Dimension.axis`) and every combination (n^d, d)."""
        axes = [d.axis(n) for d in self.dimensions]
        return axes, np.stack([g.ravel() for g in np.meshgrid(*axes, indexing="ij")], axis=1)
