"""The tuners' options as types, each default in one place: what a config
(``TunerConfig.options()``) and the estimators build, and what
:func:`~adaptive_hmc.engine.runner.make_run` turns into a tuner
(:class:`~adaptive_hmc.tuners.bandit.BanditOptions`, declared beside its tuner,
and :class:`FixedOptions`).

Flow position: **tuner** (built above it by the config and the estimators).
"""
from __future__ import annotations

from dataclasses import MISSING, dataclass, fields

from .bandit import BanditOptions
from .fixed import FixedTuner

__all__ = ["BanditOptions", "FixedOptions", "bandit_default"]


@dataclass(frozen=True)
class FixedOptions:
    """A fixed (hand-tuned) setting: step factor eps and trajectory length L."""

    step_factor: float
    num_steps: int

    def tuner(self, seed: int = 0) -> FixedTuner:
        """The tuner, which never moves (``seed`` is not used)."""
        return FixedTuner(step_factor=float(self.step_factor), num_steps=int(self.num_steps))

    def typical_num_steps(self) -> int:
        """The trajectory length a time estimate assumes: L itself."""
        return int(self.num_steps)


def bandit_default(name: str):
    """The package's default of :class:`BanditOptions` field ``name``."""
    f = next(f for f in fields(BanditOptions) if f.name == name)
    return f.default_factory() if f.default is MISSING else f.default

