"""Tuners: ``ask() -> action``, ``tell(action, reward) -> TellInfo``."""
from .acquisition import maximize, ucb, ucb_beta
from .bandit import BanditTuner
from .base import TellInfo
from .fixed import FixedTuner
from .gp import GPRewardModel
from .schedules import Exponential, Polynomial, Wang2013

__all__ = ["BanditTuner", "FixedTuner", "GPRewardModel", "Exponential", "Polynomial", "TellInfo", "Wang2013",
           "maximize", "ucb", "ucb_beta"]
