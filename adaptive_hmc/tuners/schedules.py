"""Annealing schedules p_i: the probability that the tuner moves to the
acquisition's maximiser at step i (Wang thesis Algorithm 3). Each is a small
callable with a JSON-serialisable description.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Exponential:
    """p_i = exp(-rate (i - 1)) (thesis default rate 0.01): the expected number
    of moves, sum_i p_i = 1 / (1 - exp(-rate)), is finite."""

    rate: float = 0.01

    def __call__(self, i: int) -> float:
        return math.exp(-self.rate * (i - 1))


@dataclass(frozen=True)
class Polynomial:
    """p_i = i^(-gamma) (thesis section 3.3): more adaptation, distinct actions
    grow only like a power of i below 1 (logarithmically for gamma = 1)."""

    gamma: float = 1.0

    def __call__(self, i: int) -> float:
        return float(i) ** (-self.gamma)


@dataclass(frozen=True)
class Wang2013:
    """p_i = max(i - k + 1, 1)^(-1/2) with k burn-in steps (Wang, Mohamed & de Freitas 2013)."""

    burn_in: int = 0

    def __call__(self, i: int) -> float:
        return max(i - self.burn_in + 1, 1) ** -0.5


SCHEDULES = {"exponential": Exponential, "polynomial": Polynomial, "wang2013": Wang2013}


def schedule_to_dict(s) -> dict:
    name = {v: k for k, v in SCHEDULES.items()}[type(s)]
    return {"kind": name, **asdict(s)}


def schedule_from_dict(d: dict):
    d = dict(d)
    kind = d.pop("kind")
    if kind not in SCHEDULES:
        raise ValueError(f"schedule kind {kind!r}: allowed are {sorted(SCHEDULES)}")
    return SCHEDULES[kind](**d)
