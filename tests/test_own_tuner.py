"""A user's tuner is its own file and options type: one defined here (a
seeded random search over the action box) runs ``sample()`` through the
Tuner protocol without a change to the engine."""
import ast
from dataclasses import dataclass, field

import numpy as np
import pytest

from adaptive_hmc import sample
from adaptive_hmc.jit import njit
from adaptive_hmc.tuners.base import TellInfo, Tuner


class RandomSearch:
    """Each action uniform in the box (L an integer), drawn from a seeded stream; no feasibility model."""

    accept_floor = None

    def __init__(self, bounds: dict, seed: int):
        self.bounds, self.seed = {k: tuple(v) for k, v in bounds.items()}, int(seed)
        self._rng, self._history = np.random.default_rng(self.seed), []

    def ask(self) -> dict:
        (flo, fhi), (lo, hi) = self.bounds["step_factor"], self.bounds["num_steps"]
        return {"step_factor": float(self._rng.uniform(flo, fhi)), "num_steps": int(self._rng.integers(lo, hi + 1))}

    def tell(self, action, reward, acceptance=None, transient=False) -> TellInfo:
        self._history.append({"action": dict(action), "reward": float(reward), "p": 1.0, "moved": True})
        return TellInfo(1.0, True)

    @property
    def history(self) -> list:
        return [dict(h) for h in self._history]

    def state_dict(self) -> dict:
        return {"kind": "random", "bounds": self.bounds, "seed": self.seed, "history": self.history}

    @classmethod
    def from_state(cls, state: dict) -> "RandomSearch":
        t = cls(state["bounds"], state["seed"])
        for _ in state["history"]:
            t.ask()
        t._history = [dict(h) for h in state["history"]]
        return t


@dataclass(frozen=True)
class RandomSearchOptions:
    """Its options type: the box (which ``sample()`` replaces with its own) and ``tuner(seed)``."""

    bounds: dict = field(default_factory=lambda: {"step_factor": (0.1, 1.0), "num_steps": (2, 20)})

    def tuner(self, seed: int) -> RandomSearch:
        return RandomSearch(self.bounds, seed)


@njit(cache=False)
def _std_normal(q):
    return -0.5 * np.sum(q * q), -q


@pytest.mark.filterwarnings("ignore:the largest R-hat")
def test_a_tuner_of_ones_own_runs_sample_through_the_protocol():
    assert isinstance(RandomSearch({"step_factor": (0.1, 1.0), "num_steps": (2, 20)}, 0), Tuner)
    idata = sample(_std_normal, np.zeros((2, 3)), warmup=100, super_transitions=6, budget=200, seed=4,
                   tuner=RandomSearchOptions())
    actions = [(e["step_factor"], e["num_steps"]) for e in ast.literal_eval(idata.attrs["tuner_log"])]
    assert len(actions) == 6 and len(set(actions)) == 6                      # a new random action each time
    lo, hi = (int(v) for v in idata.attrs["num_steps_bounds"])
    assert all(lo <= L <= hi for _, L in actions)                            # within sample()'s own box
    q = idata.posterior["q"].values.reshape(-1, 3)
    assert abs(q.mean()) < 0.5 and 0.5 < q.std() < 1.5                      # it samples N(0, I)
