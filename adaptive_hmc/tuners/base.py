"""What every tuner offers the runner: ``ask() -> action`` (a dict),
``tell(action, reward) -> TellInfo``, ``state_dict()`` and ``from_state(state)``.

Flow position: reward -> **tuner** -> next action. Tuners know nothing of HMC.
"""
from __future__ import annotations

from typing import NamedTuple


class TellInfo(NamedTuple):
    """What a tell did: ``p``, the probability of moving that it used (0 for a
    fixed tuner), and whether the tuner ``moved`` to a new action."""

    p: float
    moved: bool
