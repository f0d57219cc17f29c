"""How the chains of a network's chain set are made and run (:class:`NetworkOptions`,
each default and check in one place), the names of its chains and models,
seeds, and the threads each chain gets (:func:`threads_within`).

Flow position: samplers -> **network_options** -> network_state -> super_transition -> network_chains.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import NamedTuple

import numba
import numpy as np

from ..models.priors import PriorSpec
from ..models.mlp import ARITHMETIC
from ..samplers.metric import METRICS
from ..samplers.settings import KINDS, HMCSettings
from ..samplers.starts import STARTS, StartOptions


def as_seed_sequence(seed) -> np.random.SeedSequence:
    """An int >= 0, a SeedSequence, or a Generator (which seeds one) as a SeedSequence."""
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(seed.integers(0, 2 ** 63, size=4))
    if not (isinstance(seed, (int, np.integer)) and seed >= 0):
        raise ValueError(f"seed={seed!r}: must be an integer >= 0")
    return np.random.SeedSequence(int(seed))




def threadsafe_layer() -> bool:
    """Whether numba's threading layer lets several threads run parallel loops at once: its tbb and omp
    layers do, its own workqueue (the one left where neither is installed) does not."""
    layer = numba.config.THREADING_LAYER
    if layer != "default":
        return layer != "workqueue"       # "tbb", "omp", "safe", "threadsafe": numba refuses them if absent
    for module in ("numba.np.ufunc.tbbpool", "numba.np.ufunc.omppool"):
        try:
            importlib.import_module(module)
            return True
        except ImportError:
            continue
    return False


def threads_within(threads: int, chains: int) -> int:
    """Threads that share each of ``chains`` chains' energy and gradient when a run has ``threads``: those
    the chains leave over (``threads // chains``, at least 1). Several chains sharing theirs run parallel
    loops at once, which needs a thread-safe layer (:func:`threadsafe_layer`); without one, 1. Results do not
    depend on it (:class:`~adaptive_hmc.models.mlp.ThreadScratch`)."""
    within = max(1, int(threads) // max(int(chains), 1))
    return 1 if within > 1 and chains > 1 and not threadsafe_layer() else within


CHAINS = ("all", "full", "replicas")
#: What the chains see (``data``): "full", k chains of the posterior given all
#: the training cases; "folds", k cross-validation replicas (the thesis).
DATA = ("full", "folds")


def default_data(reward: str) -> str:
    """The chains a reward needs: CV replicas for the held-out ("cv") reward,
    chains of the one posterior otherwise."""
    return "folds" if reward == "cv" else "full"


def chain_indices(chains: str, n_cv: int, n_chains: int) -> np.ndarray:
    """Rows of the chains named by ``chains`` among ``n_cv`` CV replicas
    followed (when ``n_chains`` > ``n_cv``) by the full-data chains: "all",
    "full" (the chains on all the training cases: the posterior) or
    "replicas"."""
    if chains == "all":
        return np.arange(n_chains)
    if chains == "full":
        if n_chains == n_cv:
            raise ValueError("chains='full': this set has no full-data chain (full_data_chain=False)")
        return np.arange(n_cv, n_chains)
    if chains == "replicas":
        if n_cv == 0:
            raise ValueError("chains='replicas': this set has no cross-validation replicas (its chains are all "
                             "on the full training data: data='full', or k=0)")
        return np.arange(n_cv)
    raise ValueError(f"chains={chains!r}: allowed are {CHAINS}")


#: The models a network's chain set can run (``model``): the Bayesian MLP with
#: hierarchical priors (FBM, Rasmussen), and Neal's 1992 and 1993 models.
MODELS = ("bnn", "neal1992", "neal1993")

#: How retained samples weigh in predictions (``weight_by``): "iterations"
#: (each retained iteration once, as the thesis) or "gradients" (each by the
#: leapfrog steps of its iteration, so that a super-transition weighs its compute
#: whatever its L).
WEIGHT_BY = ("iterations", "gradients")
DEFAULT_WEIGHT_BY = "gradients"
#: Leapfrog steps between predicting samples, at least (``predict_steps``).
DEFAULT_PREDICT_STEPS = 100
#: The number of chains of one posterior when none is given, whatever the entry point (a network config with
#: ``chains:``, the estimators, a density config): as Stan's and ArviZ's, enough for R-hat to see
#: chains that disagree. Cross-validation replicas (``data: folds``) default to the thesis's 8 folds.
DEFAULT_CHAINS, DEFAULT_FOLDS = 4, 8


def chains_or_folds(k: int | None, data: str) -> int:
    """``k``, or when it is None the default for ``data``: :data:`DEFAULT_CHAINS` chains of one posterior
    ("full") or :data:`DEFAULT_FOLDS` folds ("folds")."""
    return (DEFAULT_CHAINS if data == "full" else DEFAULT_FOLDS) if k is None else k


class Layout(NamedTuple):
    """Which chains a run has, decided once: ``data`` "full" (``k`` chains of one posterior, every one on all
    the training cases) or "folds" (``k`` cross-validation replicas, and a chain on all the training cases when
    ``full_data_chain``), and whose samples are the answer (``predict_from``, one of :data:`CHAINS`). A config's
    ``chains: K`` or ``cv: {folds, full_chain, predict_from}``, the estimators' ``k`` and ``reward``."""

    data: str
    k: int
    full_data_chain: bool
    predict_from: str

    @classmethod
    def chains(cls, k: int | None = None) -> "Layout":
        """``k`` chains of one posterior (default :data:`DEFAULT_CHAINS`)."""
        return cls("full", chains_or_folds(k, "full"), False, "full")

    @classmethod
    def cv(cls, folds: int | None = None, full_chain: bool = True, predict_from: str | None = None) -> "Layout":
        """``folds`` cross-validation replicas (default :data:`DEFAULT_FOLDS`) and, with ``full_chain``, a chain
        on all the training cases; ``predict_from`` by default that chain, or the replicas without it."""
        return cls("folds", chains_or_folds(folds, "folds"), bool(full_chain),
                   predict_from or ("full" if full_chain else "replicas"))

    @property
    def n_chains(self) -> int:
        """Chains in all: the replicas and the full-data chain."""
        return self.k + (self.full_data_chain and self.data == "folds")

    def problem(self, reward: str | None = None) -> tuple | None:
        """What is wrong with this layout (for ``reward``, when given), as (field, value, what is allowed) with
        the field one of "k", "full_data_chain", "predict_from", "data"; None when nothing is. Every entry point
        asks this one rule (:class:`NetworkOptions`, a config's checks, the estimators)."""
        data, k, full, predict = self
        if data not in DATA:
            return "data", data, f"allowed are {', '.join(DATA)}"
        if predict not in CHAINS:
            return "predict_from", predict, f"allowed are {', '.join(CHAINS)}"
        if reward == "cv" and (data != "folds" or k < 2):
            return ("k", k, "the cv reward reads held-out predictions: it needs >= 2 cross-validation folds") \
                if data == "folds" else ("data", data, "the cv reward reads held-out predictions: it needs "
                                                         "cross-validation folds")
        if data == "full":
            if k < 1:
                return "k", k, "needs >= 1 chains"
            if full:
                return "full_data_chain", full, "is for cross-validation folds (every chain of one posterior is " \
                                                "on all the training cases)"
            if predict == "replicas":
                return "predict_from", predict, "needs cross-validation folds (chains of one posterior are all " \
                                                "on the full data)"
            return None
        if k == 1 or k < 0:
            return "k", k, "0 (the full-data chain alone) or >= 2 folds"
        if k == 0 and not full:
            return "full_data_chain", full, "must be true with 0 folds (it is the only chain)"
        if predict == "full" and not full:
            return "predict_from", predict, "needs the full-data chain"
        if predict == "replicas" and k == 0:
            return "predict_from", predict, "needs >= 2 folds"
        return None



def sampler_problem(model: str, start: str, arithmetic: str, metric: str, kind: str, absolute_step: bool,
                    annealed: bool) -> tuple | None:
    """The first rule of a network's sampler that these choices break, as (field, value, what is allowed),
    or None: each rule stated once, for :class:`NetworkOptions` and for a config's check (which names its
    keys). Optimized starts and float32 arithmetic are for model "bnn"; a learned metric corrects the
    heuristic scales of kind hmc, so not with an absolute base step or annealing."""
    if start == "optimized" and model != "bnn":
        return "start", start, f"optimized starts are for model bnn (model {model} starts from a prior " \
            "draw): give random"
    if arithmetic != "float64" and model != "bnn":
        return "arithmetic", arithmetic, f"is for model bnn (model {model} runs in float64): give float64"
    if metric != "heuristic" and (kind != "hmc" or absolute_step or annealed):
        return "metric", metric, "learns factors of the heuristic step scales: for kind hmc without an " \
            "absolute base step or annealing; give heuristic"
    return None


@dataclass(frozen=True)
class NetworkOptions:
    """How the chains of a :class:`NetworkChains` are made and run, each default
    and each check in one place (what a config and the estimators build and
    :func:`~adaptive_hmc.engine.runner.make_run` consumes).

    layout : the chains, a :class:`Layout`: ``Layout.chains(k)``, k chains of
        the posterior (the default, :data:`DEFAULT_CHAINS`), or
        ``Layout.cv(folds, full_chain)``, cross-validation replicas (>= 2
        folds, or 0 for the full-data chain alone: no reward), with a chain on
        all the training cases that follows the same settings and makes the
        test predictions by default, never the reward. The split is seeded
        and, for classification, stratified.
    priors : :class:`~adaptive_hmc.models.priors.PriorSpec`.
    settings : :class:`~adaptive_hmc.samplers.settings.HMCSettings` of every
        iteration; its step and L are replaced by each super-transition's action.
    initial_hyper : starting value of every free precision (None: prior means).
    init_scale : initial weights N(0, init_scale^2); 0 starts at zero (FBM);
        None (the default): 0 with folds, 0.1 with chains of one posterior,
        whose starts must differ for R-hat to mean anything.
    burn_in_samples : samples of each chain discarded from predictions.
    burn_in_super_transitions : super-transitions discarded from predictions.
    thin : keep every thin-th retained weight vector, and besides these each
        chain's diagnostic draws,
        :func:`~adaptive_hmc.engine.super_transition.diagnostic_draws` a
        super-transition evenly spaced over its retained iterations, the same
        whatever ``thin`` (0 keeps none).
    predict_steps : leapfrog steps between the retained samples whose test
        predictions are accumulated, at least: a super-transition at L
        predicts from every ceil(predict_steps / L)-th of its iterations (L's
        mean with jitter; at most its number of iterations), each such sample
        weighing the iterations it stands for,
        so that predicting costs a small share of the gradients whatever L
        (a prediction on N_test cases costs about N_test / N_train of a
        gradient); 0 predicts from every retained iteration.
    weight_by : how retained samples weigh in the predictions, one of
        :data:`WEIGHT_BY`. With "gradients" every sample of a
        super-transition weighs its chain's leapfrog steps per iteration there
        (with jitter, their mean), so a super-transition at L = 20 and one at
        L = 5000 weigh the same (their compute) instead of 250 : 1; the kept
        rows carry the same weights (:meth:`NetworkChains.kept_weights`).
    threads : worker threads (default: the cores available): the chains run on them, and those the chains
        leave over share each chain's blocks of cases (:func:`threads_within`); results do
        not depend on it.
    standardize_targets : regression only: the chains sample a network for
        the targets standardised by the training cases' mean and sd per output
        (:attr:`NetworkChains.target_mean`, :attr:`NetworkChains.target_sd`); predictions, metrics and the
        per-super-transition history are reported in the original units (the
        held-out reward and the kept weights are in the standardised ones).
    model : the model of every chain, one of :data:`MODELS`: "bnn" (the
        Bayesian MLP with ``priors``), "neal1992" or "neal1993" (Neal's
        parameterisations with the noise integrated out; Gaussian outputs, no
        hyperparameters; ``priors`` and ``init_scale`` are not used, the start
        is a prior draw).
    start : one of :data:`~adaptive_hmc.samplers.starts.STARTS`: "random"
        (the default, FBM's and the papers' way: the chains start at their
        ``init_scale`` weights) or "optimized" (each chain from its own
        optimized network, :func:`~adaptive_hmc.samplers.starts.optimized_start`,
        before its first super-transition; the estimators' and the ``init``
        templates' default; model "bnn" only).
    start_options : :class:`~adaptive_hmc.samplers.starts.StartOptions` of an optimized start.
    metric : one of :data:`~adaptive_hmc.samplers.metric.METRICS`: "heuristic"
        (the default, FBM's scales times the step factor), "learned" (each
        scale times a factor learned from the chains' draws and gradients in
        the warm-up windows :data:`~adaptive_hmc.samplers.metric.WINDOWS`,
        then frozen) or "low_rank" (those factors and each chain's low-rank
        masses, :data:`~adaptive_hmc.samplers.metric.LOW_RANK_WINDOWS`); kind
        hmc, no absolute ``step_size`` or annealing.
    arithmetic : one of :data:`~adaptive_hmc.models.mlp.ARITHMETIC`: the network's
        hidden units in "float64" (the default) or "float32" (model "bnn"; the
        energy, likelihood and Metropolis test stay in float64).
    calibrate_after : None, or the super-transition (counted from 0) before
        which each chain's step scales are calibrated to the curvature at its
        state (:func:`~adaptive_hmc.samplers.calibration.curvature_scale`, about
        60 gradient evaluations a chain) and frozen for the rest of the run:
        a step factor of 2 is then the leapfrog stability limit at that state.
    """

    layout: Layout = Layout.chains()
    priors: PriorSpec = field(default_factory=PriorSpec)
    settings: HMCSettings = HMCSettings()
    initial_hyper: float | None = 1.0
    init_scale: float | None = None
    burn_in_samples: int = 0
    burn_in_super_transitions: int = 0
    thin: int = 0
    threads: int | None = None
    calibrate_after: int | None = None
    standardize_targets: bool = False
    model: str = "bnn"
    weight_by: str = DEFAULT_WEIGHT_BY
    predict_steps: int = DEFAULT_PREDICT_STEPS
    start: str = "random"
    start_options: StartOptions = StartOptions()
    metric: str = "heuristic"
    arithmetic: str = "float64"

    def __post_init__(self):
        for name in ("burn_in_samples", "thin", "burn_in_super_transitions", "predict_steps"):
            v = getattr(self, name)
            if int(v) != v or v < 0:
                raise ValueError(f"{name}={v!r}: must be an integer >= 0")
        if self.weight_by not in WEIGHT_BY:
            raise ValueError(f"weight_by={self.weight_by!r}: allowed are {', '.join(WEIGHT_BY)}")
        c = self.calibrate_after
        if c is not None and not (int(c) == c and c >= 0):
            raise ValueError(f"calibrate_after={c!r}: None or an integer >= 0")
        if self.model not in MODELS:
            raise ValueError(f"model={self.model!r}: allowed are {', '.join(MODELS)}")
        if self.start not in STARTS:
            raise ValueError(f"start={self.start!r}: allowed are {', '.join(STARTS)}")
        if self.arithmetic not in ARITHMETIC:
            raise ValueError(f"arithmetic={self.arithmetic!r}: allowed are {', '.join(ARITHMETIC)}")
        if self.metric not in METRICS:
            raise ValueError(f"metric={self.metric!r}: allowed are {', '.join(METRICS)}")
        kind = self.settings.kind
        bad = sampler_problem(self.model, self.start, self.arithmetic, self.metric, kind if isinstance(
            kind, str) else KINDS[kind], bool(np.size(self.settings.step_size)), bool(np.size(self.settings.anneal)))
        if bad is not None:
            field, value, allowed = bad
            raise ValueError(f"{field}={value!r}: {allowed}")
        if not isinstance(self.layout, Layout):
            raise ValueError(f"layout={self.layout!r}: a Layout (Layout.chains(k) or Layout.cv(folds, full_chain))")
        bad = self.layout.problem()
        if bad is not None:
            field, value, allowed = bad
            raise ValueError(f"{field}={value!r} (data={self.layout.data!r}): {allowed}")
