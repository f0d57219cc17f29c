"""adaptive_hmc: Bayesian neural networks sampled by Hybrid Monte Carlo, tuned by GP bandits."""
from .estimator import BNNClassifier, BNNRegressor
from .replicas import ReplicaSet, TransitionOptions, super_transition
from .rewards import cv_reward, esjd_reward
from .runner import run
from .tuners import BanditTuner, FixedTuner

__all__ = ["BanditTuner", "BNNClassifier", "BNNRegressor", "FixedTuner", "ReplicaSet", "TransitionOptions",
           "cv_reward", "esjd_reward", "run", "super_transition"]
__version__ = "0.1.0"
