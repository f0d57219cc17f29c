"""The chains of a run and the super-transition (Wang thesis section 3.2).

Flow position: samplers -> **super-transition** -> reward. A
:class:`NetworkChains` holds k Bayesian MLPs, as its options' ``layout`` says. With
``Layout.chains(k)`` (the default whenever the reward reads no held-out prediction) they
are k chains of one posterior, every chain on all the training cases, each with its own
start and random stream. With ``Layout.cv(k)`` (the thesis's CV reward) replica j is
trained on every fold but j and holds fold j out, plus, optionally, one chain
on all the training data, which then makes the predictions.
:func:`~adaptive_hmc.engine.super_transition.super_transition` runs a fixed budget of leapfrog steps at one
setting (step factor, L) on every chain, each chain in the compiled
iteration :func:`~adaptive_hmc.samplers.chain.run_chain` on its own thread and
its own random stream, so the result is bit-identical whatever the thread count.

Predictions are accumulated as the chains run, without storing weights: for
every sample, the network outputs on the held-out fold (for this
super-transition's reward) and, after burn-in, on the test inputs
(:mod:`adaptive_hmc.models.predictive`). Weight vectors are kept only when
``thin`` > 0.
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np

from ..data import kfold
from ..models.base import energy_grad, gibbs, hyper_values
from ..models.bnn import BayesianMLP, check_data
from ..models.mlp import MLPSpec
from ..models.neal1992 import Neal92MLP
from ..models.neal1993 import Neal93MLP
from ..models.predictive import Prediction, new_accumulator, pool_predictions, test_metrics, to_original_units
from ..models.priors import PriorSpec
from ..samplers.chain import Observers, Record, copy_chain, new_chain, new_record, run_chain, run_chain_ready
from ..samplers.settings import Action, check_settings
from ..samplers.starts import optimized_start
from .chain_set import ChainSetBase
from .network_options import (MODELS, NetworkOptions, as_seed_sequence, chain_indices,
                              threads_within)
from .network_state import KEPT_STATS, NetworkState, Totals, checkpoint_state, restore_state
from .super_transition import PROBE_KEY, PROBE_TRAJECTORIES, SuperTransitionResult, diagnostic_draws, super_transition


def memory_estimate(spec: MLPSpec, n_train: int, n_test: int, n_chains: int, kept_rows: int = 0) -> int:
    """Bytes a :class:`NetworkChains` of ``n_chains`` chains needs, roughly: per
    chain, the kernels' scratch space over its training, held-out and test
    cases, some twenty parameter-sized vectors, and ``kept_rows`` kept samples
    over the run."""
    R = n_chains
    rows = 2 * sum(spec.hidden) + 2 * spec.n_outputs
    cases = 2 * n_train + n_test + 3 * 8                    # training + held-out <= 2 N; padding
    return 8 * (R * (rows * cases + 4 * spec.n_outputs * n_test + 20 * spec.n_params)
                + kept_rows * (spec.n_params + spec.n_outputs))


def build_model(kind: str, spec: MLPSpec, X, Y, priors: PriorSpec, arithmetic: str = "float64", threads: int = 1):
    """The model ``kind`` (one of :data:`MODELS`) of network ``spec`` on (X, Y), the
    network's hidden units in ``arithmetic`` and its blocks of cases shared by ``threads`` (model bnn)."""
    if kind == "bnn":
        return BayesianMLP(spec, X, Y, priors, arithmetic=arithmetic, threads=threads)
    if kind == "neal1992":
        return Neal92MLP(spec, X, Y)
    if kind == "neal1993":
        return Neal93MLP(spec, X, Y)
    raise ValueError(f"model={kind!r}: allowed are {', '.join(MODELS)}")


class ChainData:
    """What one chain runs on: a model on its training cases, its held-out fold
    (empty for a chain on all the training cases) and the scratch accumulators
    of a super-transition's held-out and test predictions. Its state lives in
    :class:`NetworkState`."""

    def __init__(self, model: BayesianMLP, X_held, Y_held, X_test, Y_test):
        self.model = model
        arithmetic = getattr(model, "arithmetic", "float64")
        self.held = new_accumulator(model.spec, X_held, Y_held, arithmetic)
        self.test = new_accumulator(model.spec, X_test, Y_test, arithmetic)


def _test_cases(spec: MLPSpec, test_sets: dict, n_targets: int) -> tuple:
    """(names, {name: its slice}, inputs, targets in their original units) of the ``test_sets`` {name: (X, Y)},
    concatenated in their order."""
    names, slices, tX, tY, start = [], {}, [], [], 0
    for name, (Xt, Yt) in test_sets.items():
        Xt, Yt = check_data(spec, Xt, Yt, f"test set {name!r}")
        names.append(name)
        slices[name] = slice(start, start + Xt.shape[0])
        start += Xt.shape[0]
        tX.append(Xt)
        tY.append(Yt)
    return names, slices, np.concatenate(tX) if tX else np.empty((0, spec.n_inputs)), \
        np.concatenate(tY) if tY else np.empty((0, n_targets))


class NetworkChains(ChainSetBase):
    """k chains of a Bayesian MLP: of its posterior, or cross-validation
    replicas (Wang thesis section 3.2): the network ``spec`` on the training
    data (X, Y) (Y as for :class:`~adaptive_hmc.models.bnn.BayesianMLP`), the
    :class:`NetworkOptions` ``options`` (each keyword in ``overrides``
    replacing the field of that name), ``test_sets`` {name: (X, Y)} on which
    retained samples are evaluated, and the ``seed`` (an int or a
    ``numpy.random.SeedSequence``), which decides the folds, the initial weights
    and (through :meth:`streams`) every super-transition's random numbers.
    """

    def __init__(self, spec: MLPSpec, X, Y, options: NetworkOptions | None = None, *, test_sets: dict | None = None,
                 seed=0, **overrides):
        o = replace(options or NetworkOptions(), **overrides)
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
        fold_seed, init_seed, self._streams, self._start_seed = as_seed_sequence(seed).spawn(4)
        classify = spec.likelihood != "gaussian"
        k, data = o.layout.k, o.layout.data
        self.data = data
        init_scale = o.init_scale
        if init_scale is None:
            init_scale = 0.1 if data == "full" else 0.0
        folds = k if data == "folds" else 0
        self.folds = kfold(X.shape[0], k, np.random.default_rng(fold_seed), Y if classify else None) if folds else []
        self.test_names, self.test_slices, self.X_test, self.Y_test = _test_cases(spec, test_sets or {}, Y.shape[1])
        Y_test = self._scaled(self.Y_test)
        self.n_cv = folds
        init_rng = np.random.default_rng(init_seed)
        parts = [(np.setdiff1d(np.arange(X.shape[0]), f), f) for f in self.folds]
        parts += [(np.arange(X.shape[0]), np.arange(0))] * (k if data == "full" else int(o.layout.full_data_chain))
        self.chain_data, chains = [], []
        #: Threads that share each chain's energy and gradient: those the chains leave over.
        self.threads_within = threads_within(self.threads, len(parts))
        for train, held in parts:
            m = build_model(o.model, spec, X[train], Y[train], o.priors, o.arithmetic, self.threads_within)
            chains.append(new_chain(m.initial_position(init_rng, init_scale), m.initial_hyper(o.initial_hyper)))
            self.chain_data.append(ChainData(m, X[held], Y[held], self.X_test, Y_test))
        self.hyper_names = self.chain_data[0].model.hyper_names()
        self.dim = self.chain_data[0].model.dim          # position coordinates of a chain (weights, or Neal's)
        #: Diagnostic draws a chain keeps per super-transition besides every thin-th (super_transition.keep_at).
        self.diagnostic_draws = diagnostic_draws(len(self.chain_data), self.dim + len(self.hyper_names))
        R, n_out, Nt = len(self.chain_data), spec.n_outputs, self.X_test.shape[0]
        totals = Totals(np.zeros((R, n_out, Nt)), np.zeros((R, n_out, Nt)), np.zeros((R, n_out)),
                        np.full((R, Nt), -np.inf), np.zeros(R), np.zeros(R, dtype=np.int64))
        #: The state at the start (never changed: every super-transition runs on copies of the chains).
        self.metric = o.metric
        moments = np.zeros((R, 4, self.dim if o.metric != "heuristic" else 0))
        self.initial = NetworkState(tuple(chains), 0, 0, np.ones(R), totals, (), np.empty(0), moments, 0,
                                    np.zeros((R, 0, 2, self.dim)), np.zeros((R, 0, self.dim + 1)))
        #: The current state, which the driver threads through :meth:`step` and publishes here.
        self.state = self.initial
        #: What the optimized starts did (:meth:`start_chains`), None until they are made.
        self.start_info: dict | None = None

    def _scaled(self, Y):
        """Regression targets in the chains' (standardised) units."""
        return (Y - self.target_mean) / self.target_sd

    @property
    def n_chains(self) -> int:
        return len(self.chain_data)

    def streams(self, spawned: int) -> np.random.SeedSequence:
        """The run's stream of seeds after ``spawned`` children were spawned from it."""
        s = self._streams
        return np.random.SeedSequence(s.entropy, spawn_key=s.spawn_key, pool_size=s.pool_size,
                                      n_children_spawned=spawned)

    def start_chains(self) -> dict | None:
        """With ``start="optimized"``, before the first super-transition: each
        chain's start replaced by its own optimized network
        (:func:`~adaptive_hmc.samplers.starts.optimized_start`, from the
        chain's random start, on its own random stream, the chains on
        :attr:`threads` threads: the same starts whatever their number);
        :attr:`initial` and :attr:`state` become the optimized chains. Returns
        what it did (also :attr:`start_info`), None when there was nothing to
        do (a random start, already done, or a set restored from a checkpoint)."""
        if not self._starts_pending:
            return None
        o = self.options.start_options
        chains = [copy_chain(c) for c in self.initial.chains]
        seeds = self._start_seed.spawn(len(chains))
        t0 = time.perf_counter()
        deadline = t0 + o.max_seconds

        def start(j):
            c = chains[j]
            return optimized_start(self.chain_data[j].model.target, c.position, c.hyper, np.random.default_rng(seeds[j]),
                                   o, deadline)
        with ThreadPoolExecutor(max(1, min(self.threads, len(chains)))) as pool:
            infos = list(pool.map(start, range(len(chains))))
        chains = tuple(new_chain(c.position, c.hyper) for c in chains)
        self.initial = self.initial._replace(chains=chains)
        self.state = self.initial
        self.start_info = {"seconds": round(time.perf_counter() - t0, 3),
                           "gradients": int(sum(i["gradients"] for i in infos)),
                           "cut_short": any(i["cut_short"] for i in infos), "chains": infos}
        return self.start_info

    @property
    def _starts_pending(self) -> bool:
        """Whether :meth:`start_chains` has optimized starts to make: asked for, not made, and the set at its
        start (not restored from a checkpoint)."""
        return self.options.start == "optimized" and self.start_info is None and self.state is self.initial

    def step(self, state, action: Action, budget: int, rng=None) -> tuple:
        """(the new state, the result) of one :func:`super_transition` from ``state`` at ``action``, a pure
        function of them (:attr:`state` is not changed)."""
        return super_transition(self, state, action, budget, rng)

    def started(self, state) -> dict | None:
        """What the optimized starts did (:meth:`start_chains`) when ``state`` is the set's start, whose first
        super-transition counts their gradients and seconds (the driver adds them to its result); else None."""
        return self.start_info if state is self.initial else None

    def probe(self, action: Action, budget: int, k: int = 0) -> "SuperTransitionResult":
        """A trial of ``action`` that leaves :attr:`state` as it was: a
        :func:`super_transition` of :data:`PROBE_TRAJECTORIES` trajectories a
        chain (at most ``budget`` leapfrog steps) on copies of the chains, its
        new state dropped. Its random stream is the ``k``-th probe's of the
        present super-transition (apart from the chains' streams), so a resumed
        run probes alike."""
        s = self._streams
        seq = np.random.SeedSequence(s.entropy, spawn_key=s.spawn_key + (PROBE_KEY, self.n_super, int(k)),
                                     pool_size=s.pool_size)
        action = Action.of(action)
        _, result = super_transition(self, self.state, action, min(int(budget), PROBE_TRAJECTORIES * action.num_steps),
                                     seq)
        return result

    # -- the current state's parts, by name ----------------------------------------
    n_super = property(lambda self: self.state.n_super)
    step_calibration = property(lambda self: self.state.step_calibration)
    step_scale = property(lambda self: self.state.step_scale)             # the learned metric's factors
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
                for j in range(self.n_chains)]

    # -- predictions ------------------------------------------------------------
    def chain_indices(self, chains: str = "all") -> np.ndarray:
        """Rows of the chains whose samples predict: "all", "full" (the
        chains on all the training cases: the posterior) or "replicas" (the
        CV replicas, each trained on (k-1)/k of the data)."""
        return chain_indices(chains, self.n_cv, self.n_chains)

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

    def samples(self, at=None) -> tuple:
        """Kept weight vectors (S, D), noise precisions (S, n_out) and the chain
        of each (S,), of all chains (needs ``thin`` > 0), or of the rows ``at``
        alone (:meth:`kept_rows`); :meth:`kept_rows` has the rest of what is kept."""
        A, chain, _ = self.kept_rows(at)
        return (*self.weights_of(A, chain), chain)

    def weights_of(self, A, chain) -> tuple:
        """(weights (S, D), noise precisions (S, n_out)) of kept rows ``A`` of chains ``chain`` (S,)."""
        W = np.empty((len(A), self.spec.n_params))
        width = self.chain_data[0].model.noise_precisions(A[:0, :self.dim], A[:0, self.dim:]).shape[1]
        noise = np.empty((len(A), width))
        for j, r in enumerate(self.chain_data):
            mine = chain == j
            if mine.any():
                W[mine] = r.model.weights(A[mine, :self.dim])
                noise[mine] = r.model.noise_precisions(A[mine, :self.dim], A[mine, self.dim:])
        return W, noise

    def _kept_counts(self) -> np.ndarray:
        """Rows kept (R, super-transitions) by each chain in each super-transition."""
        hist, R = self.state.history, self.n_chains
        return np.array([[len(e.kept[j]) for e in hist] for j in range(R)], dtype=np.int64).reshape(R, len(hist))

    def kept_index(self) -> tuple:
        """(the chain (S,), the super-transition (S,)) of each row of :meth:`kept_rows`, without the rows."""
        n, R = self._kept_counts(), self.n_chains
        return (np.repeat(np.arange(R), n.sum(axis=1)),
                np.concatenate([np.repeat(np.arange(n.shape[1]), n[j]) for j in range(R)] + [np.zeros(0, np.int64)]))

    def kept_rows(self, at=None) -> tuple:
        """All kept rows (S, dim + H): positions (the weights, or Neal's
        coordinates) then hyperparameter values (:attr:`hyper_names`), chain
        by chain, with the chain (S,) and the super-transition (S,) of each;
        or the rows ``at`` (indices in that order) alone, gathered without the others."""
        chain, st = self.kept_index()
        if at is None:
            return np.concatenate(self.kept), chain, st
        at, n, hist = np.asarray(at, dtype=np.int64), self._kept_counts().ravel(), self.state.history
        ends = np.cumsum(n)
        block = np.searchsorted(ends, at, side="right")             # chain-major: (chain, super-transition)
        j, e = np.divmod(block, len(hist)) if len(hist) else (block, block)
        rows = [hist[b].kept[a][w] for a, b, w in zip(j, e, at - ends[block] + n[block])]
        return np.array(rows).reshape(len(at), self.dim + len(self.hyper_names)), chain[at], st[at]

    def kept_stats(self) -> np.ndarray:
        """The :data:`~adaptive_hmc.engine.network_state.KEPT_STATS` of each row of :meth:`kept_rows`."""
        hist = self.state.history
        return np.concatenate([np.empty((0, len(KEPT_STATS)))] + [e.kept_stats[j] for j in range(self.n_chains)
                                                                   for e in hist if len(e.kept_stats[j])])

    def kept_weights(self) -> np.ndarray:
        """The weight (S,) of each kept row of :meth:`kept_rows` in the
        predictions: 1, or with ``weight_by="gradients"`` its iteration's
        leapfrog steps."""
        hist = self.state.history
        return np.concatenate([np.repeat([e.kept_weight[j] for e in hist], [len(e.kept[j]) for e in hist])
                               for j in range(self.n_chains)] + [np.zeros(0)]).astype(np.float64)

    def _compile_call(self) -> tuple:
        """Arguments of a call of :func:`run_chain` that runs no iteration and
        changes nothing, with the types of the run's calls."""
        r = self.chain_data[0]
        settings = check_settings(self.settings._replace(num_steps=self.settings.window, step_factor=1.0,
                                                         step_size=np.empty(0)))
        if self.metric == "low_rank":                       # its rows' type: a 2-d array (none yet)
            settings = settings._replace(low_rank=self.initial.low_rank[0])
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
        if self._starts_pending:                             # what the optimized starts call from Python
            energy_grad(chain.position, np.empty_like(chain.position), target, chain.hyper)
            gibbs(chain.position, target, chain.hyper, rng)
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
