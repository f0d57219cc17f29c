"""adaptive_hmc: Bayesian neural networks sampled by Hybrid Monte Carlo, tuned by GP bandits.

Everything needed to build and run a model without deep imports: the network
and its priors, the transitions and their settings, the replicas, the tuners,
the rewards and the outer loop, and the scikit-learn style estimators.
"""
from .estimator import BNNClassifier, BNNRegressor
from .models.bnn import BayesianMLP
from .models.gaussian import GaussianTarget
from .models.mlp import MLPSpec
from .models.priors import GammaPrior, PriorSpec
from .replicas import ReplicaSet, super_transition
from .results import read_run
from .rewards import cv_reward, esjd_reward
from .runner import make_run, run_super_transitions
from .samplers import HMCSettings, hmc_settings, init_state, make_hmc, make_metropolis, make_stochastic_dynamics
from .tuners import BanditTuner, FixedTuner

__all__ = ["BNNClassifier", "BNNRegressor", "BanditTuner", "BayesianMLP", "FixedTuner", "GammaPrior",
           "GaussianTarget", "HMCSettings", "MLPSpec", "PriorSpec", "ReplicaSet", "cv_reward", "esjd_reward",
           "hmc_settings", "init_state", "make_hmc", "make_metropolis", "make_run", "make_stochastic_dynamics",
           "read_run", "run_super_transitions", "super_transition"]
__version__ = "0.1.0"
