"""adaptive_hmc: Bayesian neural networks sampled by Hybrid Monte Carlo, tuned by GP bandits."""
from .tuners import BanditTuner, FixedTuner

__all__ = ["BanditTuner", "FixedTuner"]
__version__ = "0.1.0"
