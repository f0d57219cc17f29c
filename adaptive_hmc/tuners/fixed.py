"""A tuner that always asks the same action: a hand-tuned run is the bandit's
loop with this tuner in its place (Flow position: **tuner**)."""
from __future__ import annotations

import math

from .base import TellInfo


class FixedTuner:
    """``FixedTuner(step_factor=0.3, num_steps=2000)``: the
    :class:`~adaptive_hmc.tuners.base.Tuner` protocol, never moves (no
    feasibility model: ``accept_floor`` None)."""

    accept_floor = None

    def __init__(self, **action):
        if not action:
            raise ValueError("FixedTuner needs the action, e.g. FixedTuner(step_factor=0.3, num_steps=2000)")
        for k, v in action.items():
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{k}={v!r}: must be a finite number")
        self.action = dict(action)
        self._history = []

    def ask(self) -> dict:
        return dict(self.action)

    def tell(self, action: dict, reward: float, acceptance: float | None = None,
             transient: bool = False) -> TellInfo:
        self._history.append({"action": dict(action), "reward": float(reward), "p": 0.0, "moved": False})
        return TellInfo(0.0, False)

    @property
    def history(self) -> list:
        return [dict(h, action=dict(h["action"])) for h in self._history]

    def state_dict(self) -> dict:
        return {"kind": "fixed", "action": dict(self.action), "history": self.history}

    @classmethod
    def from_state(cls, state: dict) -> "FixedTuner":
        t = cls(**state["action"])
        t._history = [dict(h, action=dict(h["action"])) for h in state["history"]]
        return t
