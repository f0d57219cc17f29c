"""Tuners: the :class:`~adaptive_hmc.tuners.base.Tuner` protocol, ``ask() -> action``, ``tell(action, reward,
acceptance, transient) -> TellInfo``."""
from .acquisition import maximize, ucb, ucb_beta
from .bandit import BanditOptions, BanditTuner
from .base import TellInfo, Tuner
from .fixed import FixedTuner
from .gp import GPRewardModel
from .registry import TUNERS, register_tuner, tuner_from_state
from .schedules import Exponential, Polynomial, Wang2013

__all__ = ["BanditOptions", "BanditTuner", "FixedTuner", "GPRewardModel", "Exponential", "Polynomial", "TellInfo",
           "Tuner", "TUNERS", "Wang2013", "maximize", "register_tuner", "tuner_from_state", "ucb", "ucb_beta"]
