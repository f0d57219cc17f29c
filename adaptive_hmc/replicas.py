"""The chains of a run and the super-transition (Wang thesis section 3.2).

Flow position: samplers -> **super-transition** -> reward. A
:class:`ReplicaSet` holds k Bayesian MLPs. With ``data="full"`` (the default
whenever the reward reads no held-out prediction) they are k chains of one
posterior, every chain on all the training cases, each with its own start and
random stream. With ``data="folds"`` (the thesis's CV reward) replica j is
trained on every fold but j and holds fold j out, plus, optionally, one chain
on all the training data, which then makes the predictions.
:func:`super_transition` runs a fixed budget of leapfrog steps at one
setting (step factor, L) on every replica, each replica in the compiled
iteration :func:`~adaptive_hmc.samplers.chain.run_chain` on its own thread and
its own random stream, so the result is bit-identical whatever the thread count.

Predictions are accumulated as the chains run, without storing weights: for
every sample, the network outputs on the held-out fold (for this
super-transition's reward) and, after burn-in, on the test inputs
(:mod:`adaptive_hmc.models.predictive`). Weight vectors are kept only when
``thin`` > 0.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, replace
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from .data import kfold
from .models.base import hyper_values
from .models.bnn import BayesianMLP, check_data
from .models.mlp import MLPSpec
from .models.neal1992 import Neal92MLP
from .models.neal1993 import Neal93MLP
from .models.predictive import (Prediction, new_accumulator, pool_predictions, reset, snapshot, test_metrics,
                                to_original_units)
from .models.priors import PriorSpec
from .samplers.calibration import CURVATURE_EVALUATIONS, curvature_scale
from .samplers.chain import (ChainState, Observers, Record, copy_chain, new_chain, new_record, run_chain,
                             run_chain_ready)
from .samplers.settings import HMCSettings, check_settings


def as_seed_sequence(seed) -> np.random.SeedSequence:
    """An int >= 0, a SeedSequence, or a Generator (which seeds one) as a SeedSequence."""
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(seed.integers(0, 2 ** 63, size=4))
    if not (isinstance(seed, (int, np.integer)) and seed >= 0):
        raise ValueError(f"seed={seed!r}: must be an integer >= 0")
    return np.random.SeedSequence(int(seed))


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


def memory_estimate(spec: MLPSpec, n_train: int, n_test: int, n_chains: int, kept_rows: int = 0) -> int:
    """Bytes a :class:`ReplicaSet` of ``n_chains`` chains needs, roughly: per
    chain, the kernels' scratch space over its training, held-out and test
    cases, some twenty parameter-sized vectors, and ``kept_rows`` kept samples
    over the run."""
    R = n_chains
    rows = 2 * sum(spec.hidden) + 2 * spec.n_outputs
    cases = 2 * n_train + n_test + 3 * 8                    # training + held-out <= 2 N; padding
    return 8 * (R * (rows * cases + 4 * spec.n_outputs * n_test + 20 * spec.n_params)
                + kept_rows * (spec.n_params + spec.n_outputs))


#: The models a replica set can run (``model``): the Bayesian MLP with
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


def build_model(kind: str, spec: MLPSpec, X, Y, priors: PriorSpec):
    """The model ``kind`` (one of :data:`MODELS`) of network ``spec`` on (X, Y)."""
    if kind == "bnn":
        return BayesianMLP(spec, X, Y, priors)
    if kind == "neal1992":
        return Neal92MLP(spec, X, Y)
    if kind == "neal1993":
        return Neal93MLP(spec, X, Y)
    raise ValueError(f"model={kind!r}: allowed are {', '.join(MODELS)}")


class Replica:
    """What one chain runs on: a model on its training cases, its held-out fold
    (empty for a chain on all the training cases) and the scratch accumulators
    of a super-transition's held-out and test predictions. Its state lives in
    :class:`ReplicaState`."""

    def __init__(self, model: BayesianMLP, X_held, Y_held, X_test, Y_test):
        self.model = model
        self.held = new_accumulator(model.spec, X_held, Y_held)
        self.test = new_accumulator(model.spec, X_test, Y_test)


def chain_arrays(chain: ChainState) -> list:
    """A chain's arrays (position, gradient, momentum, hyperparameters, counters, K_d), as a checkpoint holds
    them (not its energy: every super-transition evaluates it afresh)."""
    return [chain.position, chain.grad, chain.momentum, *chain.hyper, chain.counters, chain.kd]


def chain_from_arrays(template: ChainState, arrays) -> ChainState:
    """A new chain shaped as ``template`` holding ``arrays`` (:func:`chain_arrays`), each checked against it."""
    own = [a.copy() for a in chain_arrays(template)]
    for dst, src in zip(own, arrays, strict=True):
        dst[...] = src
    H = len(template.hyper)
    return ChainState(own[0], own[1], own[2], type(template.hyper)(*own[3:3 + H]), own[3 + H], own[4 + H],
                      np.array([np.nan]))


class Totals(NamedTuple):
    """The running sums of the :class:`Step` fields of the same names over
    every retained sample of the run, per chain (R chains, out outputs, N test
    cases; the chains' units): weighted test
    predictions ``pred`` and squares ``sq`` (R, out, N), noise variances
    ``var`` (R, out), the log of the weighted sum of p(y | sample) ``lse``
    (R, N), the sum of the weights ``count`` and the number ``retained`` (R,)."""

    pred: np.ndarray
    sq: np.ndarray
    var: np.ndarray
    lse: np.ndarray
    count: np.ndarray
    retained: np.ndarray


class Entry(NamedTuple):
    """What the state keeps of one super-transition: its weighted sums of
    test predictions ``pred`` (R, out, N) in the targets' original units,
    their weights ``count`` (R,), the hyperparameters at its end ``hyper``
    (R, H), each chain's ``kept`` rows (positions then hyperparameter values)
    and their weight ``kept_weight`` (R,)."""

    pred: np.ndarray
    count: np.ndarray
    hyper: np.ndarray
    kept: tuple
    kept_weight: np.ndarray


class ReplicaState(NamedTuple):
    """The evolving state of a replica set, one value, never changed in
    place: :func:`super_transition` returns a new one. ``chains`` (one
    :class:`~adaptive_hmc.samplers.chain.ChainState` each), ``n_super``
    super-transitions done, ``streams_spawned`` random streams spawned, each
    chain's ``step_calibration``; the running ``totals`` and the ``history``
    (one :class:`Entry` per super-transition), which a resume rebuilds by
    replaying the sample store's steps (:data:`REPLAYED`)."""

    chains: tuple
    n_super: int
    streams_spawned: int
    step_calibration: np.ndarray
    totals: Totals
    history: tuple


#: The fields of :class:`ReplicaState` that a resume rebuilds from the sample
#: store (:func:`fold` of each step); a checkpoint holds the others.
REPLAYED = ("totals", "history")


def fold(setup: "ReplicaSet", state: ReplicaState, step: "Step") -> ReplicaState:
    """The state after one super-transition's :class:`Step`, as a run does
    after each and as a resume replays them from the sample store (the same
    operations in the same order, so the totals come back bit for bit)."""
    totals = Totals(*(np.logaddexp(t, step.lse) if f == "lse" else t + getattr(step, f)     # the Step's sums
                      for f, t in zip(Totals._fields, state.totals)))
    entry = Entry(step.pred * setup.target_sd[:, None] + setup.target_mean[:, None] * step.count[:, None, None],
                  step.count, step.hyper, tuple(step.kept), np.asarray(step.kept_weight, dtype=np.float64))
    return state._replace(n_super=state.n_super + 1, totals=totals, history=state.history + (entry,))


def checkpoint_state(state: ReplicaState) -> dict:
    """What a checkpoint holds of ``state``: its fields but :data:`REPLAYED`,
    walked (chains as lists of arrays, :func:`chain_arrays`)."""
    return {f: [[a.copy() for a in chain_arrays(c)] for c in v] if f == "chains" else
            (v.copy() if isinstance(v, np.ndarray) else v)
            for f, v in zip(state._fields, state) if f not in REPLAYED}


def restore_state(setup: "ReplicaSet", saved: dict, steps) -> ReplicaState:
    """The state of :func:`checkpoint_state` ``saved``, its :data:`REPLAYED`
    fields rebuilt by folding the stored ``steps`` (every super-transition's
    :class:`Step` up to the checkpoint, in order) into ``setup``'s start."""
    start = setup.initial
    if len(saved["chains"]) != len(start.chains):
        raise ValueError(f"state has {len(saved['chains'])} chains; this set has {len(start.chains)}")
    fields = {f: tuple(chain_from_arrays(c, a) for c, a in zip(start.chains, saved[f])) if f == "chains" else
              np.array(saved[f], dtype=np.float64) if isinstance(getattr(start, f), np.ndarray) else saved[f]
              for f in ReplicaState._fields if f not in REPLAYED and f != "n_super"}
    state = start._replace(**fields)
    for step in steps:
        state = fold(setup, state, step)
    if state.n_super != saved["n_super"]:
        raise ValueError(f"the sample store holds {state.n_super} super-transitions; the checkpoint "
                         f"{saved['n_super']}")
    return state


@dataclass(frozen=True)
class ReplicaOptions:
    """How the chains of a :class:`ReplicaSet` are made and run, each default
    and each check in one place (what a config and the estimators build and
    :func:`~adaptive_hmc.runner.make_run` consumes).

    k : with ``data="full"``, the number of chains of the posterior (>= 1);
        with ``data="folds"``, the number of folds (and of CV replicas), >= 2,
        or 0 for the full-data chain alone (no reward). The split is seeded
        and, for classification, stratified.
    data : one of :data:`DATA`: "full" (every chain on all the training cases)
        or "folds" (CV replicas).
    full_data_chain : folds only: add one chain on all training cases; it
        follows the same settings and makes the test predictions by default,
        never the reward.
    priors : :class:`~adaptive_hmc.models.priors.PriorSpec`.
    settings : :class:`~adaptive_hmc.samplers.settings.HMCSettings` of every
        iteration; its step and L are replaced by each super-transition's action.
    initial_hyper : starting value of every free precision (None: prior means).
    init_scale : initial weights N(0, init_scale^2); 0 starts at zero (FBM);
        None (the default): 0 with folds, 0.1 with chains of one posterior,
        whose starts must differ for R-hat to mean anything.
    burn_in_samples : samples of each chain discarded from predictions.
    burn_in_super_transitions : super-transitions discarded from predictions.
    thin : keep every thin-th retained weight vector (0 keeps none).
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
        rows carry the same weights (:meth:`ReplicaSet.kept_weights`).
    threads : worker threads (default: the cores available); results do not depend on it.
    standardize_targets : regression only: the chains sample a network for
        the targets standardised by the training cases' mean and sd per output
        (:attr:`ReplicaSet.target_mean`, :attr:`ReplicaSet.target_sd`); predictions, metrics and the
        per-super-transition history are reported in the original units (the
        held-out reward and the kept weights are in the standardised ones).
    model : the model of every chain, one of :data:`MODELS`: "bnn" (the
        Bayesian MLP with ``priors``), "neal1992" or "neal1993" (Neal's
        parameterisations with the noise integrated out; Gaussian outputs, no
        hyperparameters; ``priors`` and ``init_scale`` are not used, the start
        is a prior draw).
    calibrate_after : None, or the super-transition (counted from 0) before
        which each chain's step scales are calibrated to the curvature at its
        state (:func:`~adaptive_hmc.samplers.calibration.curvature_scale`, about
        60 gradient evaluations a chain) and frozen for the rest of the run:
        a step factor of 2 is then the leapfrog stability limit at that state.
    """

    k: int = 8
    data: str = "full"
    full_data_chain: bool = False
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
        k, data, full = self.k, self.data, self.full_data_chain
        if data not in DATA:
            raise ValueError(f"data={data!r}: allowed are {', '.join(DATA)}")
        if data == "full" and (k < 1 or full):
            raise ValueError(f"data='full' (k={k}, full_data_chain={full}): needs k >= 1 chains, every "
                             f"one on all the training cases (full_data_chain is for data='folds')")
        if data == "folds" and k == 0 and not full:
            raise ValueError("k=0 (no cross-validation replicas) needs full_data_chain=True")


class ReplicaSet:
    """k chains of a Bayesian MLP: of its posterior, or cross-validation
    replicas (Wang thesis section 3.2): the network ``spec`` on the training
    data (X, Y) (Y as for :class:`~adaptive_hmc.models.bnn.BayesianMLP`), the
    :class:`ReplicaOptions` ``options`` (each keyword in ``overrides``
    replacing the field of that name), ``test_sets`` {name: (X, Y)} on which
    retained samples are evaluated, and the ``seed`` (an int or a
    ``numpy.random.SeedSequence``), which decides the folds, the initial weights
    and (through :meth:`streams`) every super-transition's random numbers.
    """

    def __init__(self, spec: MLPSpec, X, Y, options: ReplicaOptions | None = None, *, test_sets: dict | None = None,
                 seed=0, **overrides):
        o = replace(options or ReplicaOptions(), **overrides)
        self.options = o
        X, Y = check_data(spec, X, Y, "training data")
        self.X_train, self.Y_train = X, Y              # the network's inputs; targets in their original units
        self.target_mean, self.target_sd = np.zeros(Y.shape[1]), np.ones(Y.shape[1])
        if o.standardize_targets:
            if spec.likelihood != "gaussian":
                raise ValueError(f"standardize_targets: for regression only (this network is {spec.likelihood})")
            sd = Y.std(axis=0)
            self.target_mean, self.target_sd = Y.mean(axis=0), np.where(sd > 0, sd, 1.0)
        Y = self._scaled(Y)
        self.spec, self.settings = spec, check_settings(o.settings, need_step=False)
        self.burn_in_samples, self.burn_in_super_transitions = int(o.burn_in_samples), int(o.burn_in_super_transitions)
        self.thin, self.predict_steps, self.weight_by = int(o.thin), int(o.predict_steps), o.weight_by
        self.calibrate_after = None if o.calibrate_after is None else int(o.calibrate_after)
        self.threads = int(o.threads) if o.threads else len(os.sched_getaffinity(0))
        fold_seed, init_seed, self._streams = as_seed_sequence(seed).spawn(3)
        classify = spec.likelihood != "gaussian"
        k, data = o.k, o.data
        self.data = data
        init_scale = o.init_scale
        if init_scale is None:
            init_scale = 0.1 if data == "full" else 0.0
        folds = k if data == "folds" else 0
        self.folds = kfold(X.shape[0], k, np.random.default_rng(fold_seed), Y if classify else None) if folds else []
        self.test_names, tX, tY, self.test_slices = [], [], [], {}
        start = 0
        for name, (Xt, Yt) in (test_sets or {}).items():
            Xt, Yt = check_data(spec, Xt, Yt, f"test set {name!r}")
            self.test_names.append(name)
            self.test_slices[name] = slice(start, start + Xt.shape[0])
            start += Xt.shape[0]
            tX.append(Xt)
            tY.append(Yt)
        self.X_test = np.concatenate(tX) if tX else np.empty((0, spec.n_inputs))
        self.Y_test = np.concatenate(tY) if tY else np.empty((0, Y.shape[1]))      # original units
        Y_test = self._scaled(self.Y_test)
        self.n_cv = folds
        init_rng = np.random.default_rng(init_seed)
        parts = [(np.setdiff1d(np.arange(X.shape[0]), f), f) for f in self.folds]
        parts += [(np.arange(X.shape[0]), np.arange(0))] * (k if data == "full" else int(o.full_data_chain))
        self.replicas, chains = [], []
        for train, held in parts:
            m = build_model(o.model, spec, X[train], Y[train], o.priors)
            chains.append(new_chain(m.initial_position(init_rng, init_scale), m.initial_hyper(o.initial_hyper)))
            self.replicas.append(Replica(m, X[held], Y[held], self.X_test, Y_test))
        self.hyper_names = self.replicas[0].model.hyper_names()
        self.dim = self.replicas[0].model.dim          # position coordinates of a chain (weights, or Neal's)
        R, n_out, Nt = len(self.replicas), spec.n_outputs, self.X_test.shape[0]
        totals = Totals(np.zeros((R, n_out, Nt)), np.zeros((R, n_out, Nt)), np.zeros((R, n_out)),
                        np.full((R, Nt), -np.inf), np.zeros(R), np.zeros(R, dtype=np.int64))
        #: The state at the start (never changed: every super-transition runs on copies of the chains).
        self.initial = ReplicaState(tuple(chains), 0, 0, np.ones(R), totals, ())
        #: The current state, advanced by :meth:`run`.
        self.state = self.initial

    def _scaled(self, Y):
        """Regression targets in the chains' (standardised) units."""
        return (Y - self.target_mean) / self.target_sd

    @property
    def n_replicas(self) -> int:
        return len(self.replicas)

    def streams(self, spawned: int) -> np.random.SeedSequence:
        """The run's stream of seeds after ``spawned`` children were spawned from it."""
        s = self._streams
        return np.random.SeedSequence(s.entropy, spawn_key=s.spawn_key, pool_size=s.pool_size,
                                      n_children_spawned=spawned)

    def run(self, step_factor: float, num_steps: int, budget: int, rng=None) -> "SuperTransitionResult":
        """Advance :attr:`state` by one :func:`super_transition`; its result."""
        self.state, result = super_transition(self, self.state, {"step_factor": step_factor,
                                                                 "num_steps": num_steps}, budget, rng)
        return result

    def probe(self, step_factor: float, num_steps: int, budget: int, k: int = 0) -> "SuperTransitionResult":
        """A trial of (step factor, L) that leaves :attr:`state` as it was: a
        :func:`super_transition` of :data:`PROBE_TRAJECTORIES` trajectories a
        chain (at most ``budget`` leapfrog steps) on copies of the chains, its
        new state dropped. Its random stream is the ``k``-th probe's of the
        present super-transition (apart from the chains' streams), so a resumed
        run probes alike."""
        s = self._streams
        seq = np.random.SeedSequence(s.entropy, spawn_key=s.spawn_key + (PROBE_KEY, self.n_super, int(k)),
                                     pool_size=s.pool_size)
        action = {"step_factor": step_factor, "num_steps": num_steps}
        _, result = super_transition(self, self.state, action, min(int(budget), PROBE_TRAJECTORIES * num_steps), seq)
        return result

    # -- the current state's parts, by name ----------------------------------------
    n_super = property(lambda self: self.state.n_super)
    step_calibration = property(lambda self: self.state.step_calibration)
    chains = property(lambda self: self.state.chains)
    test_pred = property(lambda self: self.state.totals.pred)
    test_sq = property(lambda self: self.state.totals.sq)
    test_var = property(lambda self: self.state.totals.var)
    test_lse = property(lambda self: self.state.totals.lse)
    test_count = property(lambda self: self.state.totals.count)            # sum of the retained samples' weights
    retained = property(lambda self: self.state.totals.retained)           # number of retained samples
    history_pred = property(lambda self: [e.pred for e in self.state.history])
    history_count = property(lambda self: [e.count for e in self.state.history])
    history_hyper = property(lambda self: [e.hyper for e in self.state.history])   # each chain's last sample's

    @property
    def kept(self) -> list:
        """Each chain's kept rows (n_j, dim + H), in the order they were kept."""
        width = self.dim + len(self.hyper_names)
        return [np.concatenate([np.empty((0, width))] + [e.kept[j] for e in self.state.history if len(e.kept[j])])
                for j in range(self.n_replicas)]

    # -- predictions ------------------------------------------------------------
    def chain_indices(self, chains: str = "all") -> np.ndarray:
        """Rows of the chains whose samples predict: "all", "full" (the
        chains on all the training cases: the posterior) or "replicas" (the
        CV replicas, each trained on (k-1)/k of the data)."""
        return chain_indices(chains, self.n_cv, self.n_replicas)

    def prediction(self, name: str, level: float = 0.95, chains: str = "all") -> Prediction:
        """Bayesian model average of the retained samples of ``chains`` (see
        :meth:`chain_indices`) on test set ``name``."""
        if name not in self.test_slices:
            raise KeyError(f"test set {name!r}: known are {self.test_names}")
        sl, rows = self.test_slices[name], self.chain_indices(chains)
        pr = pool_predictions(self.spec.likelihood, self.test_pred[rows][:, :, sl], self.test_sq[rows][:, :, sl],
                              self.test_var[rows], self.test_lse[rows][:, sl], self.test_count[rows], level)
        return to_original_units(pr, self.target_mean, self.target_sd)

    def metrics(self, chains: str = "all") -> dict:
        """{test set: {mse, mse_se, mlpd, error_rate, ...}} of the model average of ``chains``."""
        return {name: test_metrics(self.prediction(name, chains=chains), self.Y_test[self.test_slices[name]],
                                   self.spec.likelihood) for name in self.test_names}

    def samples(self) -> tuple:
        """Kept weight vectors (S, D), noise precisions (S, n_out) and the chain
        of each (S,), of all chains (needs ``thin`` > 0); :meth:`kept_rows` has
        the rest of what is kept."""
        A, chain, _ = self.kept_rows()
        W = np.empty((len(A), self.spec.n_params))
        width = self.replicas[0].model.noise_precisions(A[:0, :self.dim], A[:0, self.dim:]).shape[1]
        noise = np.empty((len(A), width))
        for j, r in enumerate(self.replicas):
            mine = chain == j
            if mine.any():
                W[mine] = r.model.weights(A[mine, :self.dim])
                noise[mine] = r.model.noise_precisions(A[mine, :self.dim], A[mine, self.dim:])
        return W, noise, chain

    def kept_rows(self) -> tuple:
        """All kept rows (S, dim + H): positions (the weights, or Neal's
        coordinates) then hyperparameter values (:attr:`hyper_names`), chain
        by chain, with the chain (S,) and the super-transition (S,) of each."""
        hist, R = self.state.history, self.n_replicas
        n = np.array([[len(e.kept[j]) for e in hist] for j in range(R)], dtype=np.int64).reshape(R, len(hist))
        A = np.concatenate(self.kept)
        return (A, np.repeat(np.arange(R), n.sum(axis=1)),
                np.concatenate([np.repeat(np.arange(len(hist)), n[j]) for j in range(R)] + [np.zeros(0, np.int64)]))

    def kept_weights(self) -> np.ndarray:
        """The weight (S,) of each kept row of :meth:`kept_rows` in the
        predictions: 1, or with ``weight_by="gradients"`` its iteration's
        leapfrog steps."""
        hist = self.state.history
        return np.concatenate([np.repeat([e.kept_weight[j] for e in hist], [len(e.kept[j]) for e in hist])
                               for j in range(self.n_replicas)] + [np.zeros(0)]).astype(np.float64)

    def _compile_call(self) -> tuple:
        """Arguments of a call of :func:`run_chain` that runs no iteration and
        changes nothing, with the types of the run's calls."""
        r = self.replicas[0]
        settings = check_settings(self.settings._replace(num_steps=self.settings.window, step_factor=1.0,
                                                         step_size=np.empty(0)))
        H = len(self.hyper_names)
        return (r.model.target, copy_chain(self.state.chains[0]), settings,
                Record(*(a[0] for a in new_record(1, 0, H))),
                Observers(r.held, r.test, int(np.iinfo(np.int64).max), self.thin, np.empty((0, self.dim + H))),
                np.random.default_rng(0))

    def kernels_ready(self) -> bool | None:
        """Whether the kernels a super-transition runs are compiled or in the
        compile cache (None: unknown), so that :meth:`compile` will be quick."""
        return run_chain_ready(*self._compile_call())

    def compile(self) -> float:
        """Compile (or load from Numba's cache) the kernels a super-transition
        runs, by a call of no iterations that changes nothing; returns the
        seconds it took, so that run times can leave compilation out."""
        t0 = time.perf_counter()
        target, chain, settings, rec, obs, rng = self._compile_call()
        run_chain(target, chain, settings, 0, rec, obs, rng)
        hyper_values(target, chain.hyper, np.empty(len(self.hyper_names)))
        return time.perf_counter() - t0

    # -- checkpoints --------------------------------------------------------------
    def checkpoint(self) -> dict:
        """What a checkpoint holds of the current state (:func:`checkpoint_state`)."""
        return checkpoint_state(self.state)

    def restore(self, saved: dict, steps) -> None:
        """Set the state to the checkpointed ``saved`` with the stored ``steps``
        replayed (:func:`restore_state`); the set must be at its start."""
        if self.state.n_super:
            raise ValueError("restore needs a freshly built set")
        self.state = restore_state(self, saved, steps)


class Step(NamedTuple):
    """What one super-transition adds, per chain (R chains, out outputs, N
    test cases, H hyperparameters): the weighted sums of its retained
    samples' test predictions ``pred`` and squares ``sq`` (R, out, N), noise
    variances ``var`` (R, out), the log of the weighted sum of p(y | sample)
    ``lse`` (R, N), in the chains' units; the sum of the weights ``count`` and
    the number ``retained`` (R,); the hyperparameters at its end ``hyper``
    (R, H); the ``kept`` rows of each chain (positions then hyperparameter
    values) and the weight of each chain's kept rows ``kept_weight`` (R,).
    The unit of the sample store and of :func:`fold`."""

    pred: np.ndarray
    sq: np.ndarray
    var: np.ndarray
    lse: np.ndarray
    count: np.ndarray
    retained: np.ndarray
    hyper: np.ndarray
    kept: list
    kept_weight: np.ndarray


class SuperTransitionResult(NamedTuple):
    """What one super-transition did. Per-iteration arrays are (R, n_iter)
    (``hyper`` is (R, n_iter, H), columns :attr:`ReplicaSet.hyper_names`);
    ``held_out`` has one :class:`~adaptive_hmc.models.predictive.Accumulator`
    per CV replica holding this super-transition's samples only."""

    index: int
    step_factor: float
    num_steps: int
    n_iter: int
    record: Record
    held_out: list
    likelihood: str
    seconds: float
    step: Step          # what it adds to the state and to the sample store
    calibration_gradients: int = 0      # evaluations of the step calibration before it (all chains)

    @property
    def acceptance(self) -> np.ndarray:
        """Acceptance rate of each replica."""
        return self.record.accepted.mean(axis=1)

    @property
    def leapfrog_steps(self) -> int:
        return int(self.record.num_steps.sum())

    @property
    def gradients(self) -> int:
        """Every energy and gradient evaluation of the chains: the leapfrog
        steps, the one after each Gibbs update (and the forward passes of the
        interweaving moves), the step calibration's."""
        return int(self.record.gradients.sum()) + self.calibration_gradients


#: A probe runs this many trajectories of its L a chain (three with jitter's lengths 1..L).
PROBE_TRAJECTORIES = 2
#: The probes' random streams are spawned under this key, apart from the chains' (numbered from 0).
PROBE_KEY = 2 ** 31


def iterations(budget: int, num_steps: int, jitter: bool) -> int:
    """Iterations of a super-transition: ``floor(budget / num_steps)``, so a
    replica never uses more than ``budget`` leapfrog steps; with jitter (L
    drawn uniformly from 1..num_steps, mean (num_steps + 1) / 2)
    ``floor(2 budget / (num_steps + 1))``, so it uses ``budget`` on average."""
    return int(2 * budget // (num_steps + 1)) if jitter else int(budget) // int(num_steps)


def predict_every(predict_steps: int, num_steps: int, jitter: bool, n_iter: int) -> int:
    """A super-transition of ``n_iter`` iterations predicts from every this
    many: ceil(``predict_steps`` / L), L being ``num_steps`` or, with jitter,
    its mean (num_steps + 1) / 2, at most ``n_iter`` (so that each predicts);
    1 when ``predict_steps`` is 0."""
    mean = (num_steps + 1) / 2 if jitter else num_steps
    return max(1, min(math.ceil(predict_steps / mean), n_iter)) if predict_steps else 1


def super_transition(setup: ReplicaSet, state: ReplicaState, action: dict, budget: int,
                     rng=None) -> tuple:
    """One super-transition from ``state``: :func:`iterations` of [Gibbs, HMC at
    ``action`` (its ``step_factor`` and ``num_steps`` L)] on every chain of
    ``setup``, the leapfrog steps of the ``budget`` (exactly without jitter, on
    average with it); returns (the new :class:`ReplicaState`,
    :class:`SuperTransitionResult`) and changes neither argument (the chains
    run on copies; ``setup``'s scratch accumulators are reused, so one setup
    runs one super-transition at a time). The steps are ``step_factor`` times
    the heuristic scales, or, when the settings carry a ``step_size``
    (absolute base steps), ``step_factor`` times those.

    ``rng`` is a ``numpy.random.SeedSequence`` (one child per chain is spawned
    from it for this call; default the set's stream after the state's
    ``streams_spawned``) or a Generator (from which such a SeedSequence is seeded).
    """
    step_factor, num_steps = action["step_factor"], action["num_steps"]
    if not (isinstance(step_factor, (int, float, np.floating)) and math.isfinite(step_factor) and step_factor > 0):
        raise ValueError(f"step_factor={step_factor!r}: must be a finite number > 0")
    if not (isinstance(budget, (int, np.integer)) and budget >= 1):
        raise ValueError(f"budget={budget!r}: must be an integer >= 1 (leapfrog steps per replica)")
    if not (isinstance(num_steps, (int, np.integer)) and 1 <= num_steps <= budget):
        raise ValueError(f"num_steps={num_steps!r}: must be an integer in 1..budget ({budget})")
    base = setup.settings.step_size             # absolute base steps (Neal's eps0), or none: FBM's heuristic scales
    settings = check_settings(setup.settings._replace(
        num_steps=int(num_steps), step_factor=0.0 if base.size else float(step_factor),
        step_size=base * float(step_factor) if base.size else np.empty(0)))
    calibration, calibration_gradients = state.step_calibration, 0
    if setup.calibrate_after == state.n_super:
        calibration = np.array([curvature_scale(r.model, c.position, c.hyper)
                                for r, c in zip(setup.replicas, state.chains)])
        calibration_gradients = setup.n_replicas * CURVATURE_EVALUATIONS
    R, n_iter = setup.n_replicas, iterations(budget, num_steps, settings.jitter)
    seq = setup.streams(state.streams_spawned) if rng is None else as_seed_sequence(rng)
    streams = [np.random.Generator(np.random.PCG64(s)) for s in seq.spawn(R)]
    chains = tuple(copy_chain(c) for c in state.chains)
    H = len(setup.hyper_names)
    rec = new_record(R, n_iter, H)
    retain_after = setup.burn_in_samples if state.n_super >= setup.burn_in_super_transitions \
        else np.iinfo(np.int64).max
    thin = setup.thin
    every = predict_every(setup.predict_steps, num_steps, settings.jitter, n_iter)
    kept = [np.empty((n_iter // thin + 1 if thin else 0, setup.dim + H)) for _ in range(R)]
    n_kept = [0] * R

    def one(j):
        r = setup.replicas[j]
        reset(r.held)
        reset(r.test)
        c = calibration[j]
        mine = settings._replace(step_size=settings.step_size * c) if base.size else \
            settings._replace(step_factor=settings.step_factor * c)
        n_kept[j] = run_chain(r.model.target, chains[j], mine, n_iter, Record(*(a[j] for a in rec)),
                              Observers(r.held, r.test, int(retain_after), thin, kept[j], every), streams[j])

    def weight(j):
        """The weight of each retained iteration of chain j (:data:`WEIGHT_BY`)."""
        if setup.weight_by == "iterations" or n_iter == 0:
            return 1.0
        return float(rec.num_steps[j].sum()) / n_iter

    t0 = time.perf_counter()
    if setup.threads > 1 and R > 1:
        with ThreadPoolExecutor(min(setup.threads, R)) as executor:
            list(executor.map(one, range(R)))
    else:
        for j in range(R):
            one(j)
    seconds = time.perf_counter() - t0
    w = np.array([weight(j) for j in range(R)])
    wp = every * w                              # a predicting sample stands for `every` iterations
    n_retained = np.array([r.test.count[0] for r in setup.replicas])
    mine = setup.replicas
    step = Step(pred=wp[:, None, None] * np.stack([r.test.pred for r in mine]),
                sq=wp[:, None, None] * np.stack([r.test.sq for r in mine]),
                var=wp[:, None] * np.stack([r.test.var for r in mine]),
                lse=np.log(wp)[:, None] + np.stack([r.test.lse for r in mine]),
                count=wp * n_retained, retained=n_retained.astype(np.int64),
                hyper=np.stack([hyper_values(r.model.target, c.hyper, np.empty(H)) for r, c in zip(mine, chains)]),
                kept=[kept[j][:n] for j, n in enumerate(n_kept)], kept_weight=w)
    spawned = state.streams_spawned + (R if rng is None else 0)
    new = fold(setup, state._replace(chains=chains, streams_spawned=spawned, step_calibration=calibration), step)
    held = [snapshot(r.held) for r in setup.replicas[:setup.n_cv]]
    return new, SuperTransitionResult(state.n_super, float(step_factor), int(num_steps), n_iter, rec, held,
                                      setup.spec.likelihood, seconds, step, calibration_gradients)
