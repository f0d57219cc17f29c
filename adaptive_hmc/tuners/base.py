"""What every tuner offers the runner, as a protocol (:class:`Tuner`):
``ask() -> action`` (a dict), ``tell(action, reward, acceptance, transient)
-> TellInfo``, ``history``, ``accept_floor``, ``state_dict()`` and
``from_state(state)``.

Flow position: reward -> **tuner** -> next action. Tuners know nothing of HMC.
"""
from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable


class TellInfo(NamedTuple):
    """What a tell did: ``p``, the probability of moving that it used (0 for a
    fixed tuner), and whether the tuner ``moved`` to a new action."""

    p: float
    moved: bool


@runtime_checkable
class Tuner(Protocol):
    """The one interface between the runner and a tuner (BanditTuner, FixedTuner, or a user's): the
    runner asks an action, runs it and tells the reward with the chains' ``acceptance`` (None: not
    measured) and whether the super-transition failed for a ``transient`` reason (a chain far from the
    others' typical set); ``accept_floor`` is the acceptance below which the tuner treats an action as
    infeasible (None: it models none, and the runner probes nothing); ``history`` one dict per tell with
    at least ``action`` and ``reward``; ``state_dict``/``from_state`` round-trip it through a checkpoint."""

    accept_floor: float | None

    def ask(self) -> dict: ...

    def tell(self, action: dict, reward: float, acceptance: float | None = None,
             transient: bool = False) -> TellInfo: ...

    @property
    def history(self) -> list: ...

    def state_dict(self) -> dict: ...

    @classmethod
    def from_state(cls, state: dict) -> "Tuner": ...
