"""Tuners: ``ask() -> action``, ``tell(action, reward)``."""
from .acquisition import maximize, ucb, ucb_beta
from .bandit import BanditTuner
from .fixed import FixedTuner
from .gp import GPRewardModel
from .schedules import Exponential, Polynomial, Wang2013

__all__ = ["BanditTuner", "FixedTuner", "GPRewardModel", "Exponential", "Polynomial", "Wang2013",
           "maximize", "ucb", "ucb_beta"]
