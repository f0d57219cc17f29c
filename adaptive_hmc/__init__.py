"""adaptive_hmc: Bayesian neural networks sampled by Hybrid Monte Carlo, tuned by GP bandits.

Everything needed to build and run a model without deep imports: the network
and its priors, the transitions and their settings, the chain sets, the tuners,
the rewards, the outer loop, finished runs, and the scikit-learn style
estimators. Names are imported on first use (PEP 562), so that the command
line starts at once.
"""
from importlib import import_module

_WHERE = {
    "BNNClassifier": "front.estimator", "BNNRegressor": "front.estimator",
    "BayesianMLP": "models.bnn", "GaussianTarget": "models.gaussian", "MLPSpec": "models.mlp",
    "GammaPrior": "models.priors", "PriorSpec": "models.priors",
    "NetworkOptions": "engine.network_chains", "NetworkChains": "engine.network_chains", "super_transition": "engine.network_chains",
    "read_run": "rundir.finished_run",
    "cv_reward": "engine.rewards", "esjd_reward": "engine.rewards", "esjd": "engine.rewards", "sample": "front.general",
    "RunOptions": "engine.runner", "make_run": "engine.runner", "run_super_transitions": "engine.driver",
    "HMCSettings": "samplers", "hmc_settings": "samplers", "init_state": "samplers", "make_hmc": "samplers",
    "make_metropolis": "samplers", "make_stochastic_dynamics": "samplers",
    "BanditTuner": "tuners", "FixedTuner": "tuners", "BanditOptions": "tuners",
    "FixedOptions": "tuners.options",
}
__all__ = sorted(_WHERE)
__version__ = "0.1.0"

#: How long a model's first run takes to compile its sampler on 2 cores (NUMBA_CACHE_DIR empty, an idle
#: machine, `compile_s`: the README's main job 20.7-22.7 s in a clean clone's CI, the `init` regression
#: template 35-43 s). Said at the start of a run, before the imports that take a second or two.
COMPILE_TIME = "about 20-45 s"

#: The draws a chain ``adaptive-hmc export`` writes by default, evenly spaced (``--draws all``: every one): an
#: ArviZ user's few thousand in all, where a long run holds tens of thousands.
EXPORT_DRAWS = 1000


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError(f"module 'adaptive_hmc' has no attribute {name!r}")
    value = getattr(import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
