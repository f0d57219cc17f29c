"""The tuners' options as types, each default in one place: what a config
(``TunerConfig.options()``) and the estimators build, and what
:func:`~adaptive_hmc.engine.runner.make_run` turns into a tuner.

Flow position: **tuner** (built above it by the config and the estimators).
"""
from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields

from .bandit import BanditTuner
from .fixed import FixedTuner
from .schedules import Exponential


@dataclass(frozen=True)
class BanditOptions:
    """A GP-bandit tuner over ``bounds`` ({"step_factor": (low, high),
    "num_steps": (low, high)}), with the package's defaults (the tuning study,
    docs/RESULTS.md): ranked rewards, the step factor on a log axis, leaving
    collapsed actions, the feasibility model (whose length scale along the
    step factor is 0.1 of its log axis: acceptance falls off a cliff within a
    factor of 1.5-2 in step size) and a few chains' failure fading over 5
    tells, Wang's length scale, confidence, noise and annealing rate. :class:`~adaptive_hmc.tuners.bandit.BanditTuner`
    documents each option; its own defaults are the thesis's."""

    bounds: dict
    alpha: float = 0.2
    delta: float = 0.1
    noise: float = 0.1
    schedule: object = field(default_factory=lambda: Exponential(0.01))
    first_action: object = "centre"
    maxfun: int = 1000
    polish: bool = True
    fit_kernel: bool = False
    transform: str = "rank"
    log_axes: tuple = ("step_factor",)
    leave_below: float | None = 0.05
    accept_floor: float | None = 0.8
    accept_length_scales: dict | None = field(default_factory=lambda: {"step_factor": 0.1, "num_steps": 1.0})
    accept_memory: float | None = 5.0

    def tuner(self, seed: int) -> BanditTuner:
        """The tuner these options describe, with its own ``seed``."""
        return BanditTuner(self.bounds, seed, **{f.name: getattr(self, f.name) for f in fields(self)
                                                 if f.name != "bounds"})


@dataclass(frozen=True)
class FixedOptions:
    """A fixed (hand-tuned) setting: step factor eps and trajectory length L."""

    step_factor: float
    num_steps: int

    def tuner(self, seed: int = 0) -> FixedTuner:
        """The tuner, which never moves (``seed`` is not used)."""
        return FixedTuner(step_factor=float(self.step_factor), num_steps=int(self.num_steps))


def bandit_default(name: str):
    """The package's default of :class:`BanditOptions` field ``name``."""
    f = next(f for f in fields(BanditOptions) if f.name == name)
    return f.default_factory() if f.default is MISSING else f.default


#: The package's defaults as :class:`~adaptive_hmc.tuners.bandit.BanditTuner` keyword arguments.
DEFAULT_BANDIT = {f.name: bandit_default(f.name) for f in fields(BanditOptions) if f.name != "bounds"}
