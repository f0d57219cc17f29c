"""The tuners a saved state names: ``TUNERS`` {kind: class}, the package's two and any a user registers
(:func:`register_tuner`), so that every restore (a configured run's ``--resume``, ``sample(checkpoint=...)``,
``read_run(DIR).tuner()``) builds the tuner its state's ``kind`` says.

Flow position: tuners (bandit, fixed) -> **registry** -> the restores in rundir.
"""
from __future__ import annotations

from .bandit import BanditTuner
from .fixed import FixedTuner

#: The tuner class of each ``state_dict()["kind"]``.
TUNERS: dict = {"bandit": BanditTuner, "fixed": FixedTuner}


def register_tuner(kind: str, cls) -> None:
    """Make ``cls`` (a :class:`~adaptive_hmc.tuners.base.Tuner`, whose ``state_dict()`` says ``kind``) the tuner
    that restores states of ``kind``; the package's own kinds cannot be replaced."""
    if kind in ("bandit", "fixed") and TUNERS.get(kind) is not cls:
        raise ValueError(f"tuner kind {kind!r}: the package's own; register yours under another name")
    if not callable(getattr(cls, "from_state", None)):
        raise TypeError(f"{cls!r}: a tuner class with from_state(state) (the Tuner protocol)")
    TUNERS[kind] = cls


def tuner_from_state(state: dict):
    """The tuner ``state`` (a ``state_dict()``) was saved from; ValueError naming an unknown kind."""
    kind = state.get("kind")
    if kind not in TUNERS:
        raise ValueError(f"a tuner of kind {kind!r} saved this state, and no such kind is registered (known: "
                         f"{', '.join(sorted(TUNERS))}): adaptive_hmc.tuners.register_tuner({kind!r}, YourTuner) "
                         f"before resuming")
    return TUNERS[kind].from_state(state)
