"""Cross-validation replicas and the super-transition (Wang thesis section 3.2).

Flow position: transition -> **super-transition** -> reward. A
:class:`ReplicaSet` holds k Bayesian MLPs, replica j trained on every fold but
j and holding fold j out (plus, optionally, one chain on all the training
data). :func:`super_transition` runs a fixed budget of leapfrog steps at one
setting (step factor, L) on every replica, each replica in one compiled nogil
loop (:func:`run_replica`) on its own thread and its own random stream, so the
result is bit-identical whatever the thread count.

Predictions are accumulated as the chains run, without storing weights: for
every sample, the network outputs on the held-out fold (for this
super-transition's reward) and, after burn-in, on the test inputs (sums of the
outputs, of their squares and of the noise variances, and the log-sum-exp of
the predictive log densities of the test targets). Weight vectors are kept only
when ``thin`` > 0.
"""
from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.stats import norm

from .data import kfold
from .jit import njit
from .models.bnn import BayesianMLP, check_data
from .models.mlp import GAUSSIAN, LOGISTIC, MLPSpec, forward, mlp_step_scales, pad_cases, softmax_norm
from .models.priors import PriorSpec, gibbs_hyper, precisions
from .samplers.hmc import hmc_kernel
from .targets import energy_grad


@dataclass(frozen=True)
class TransitionOptions:
    """What every iteration of a replica does besides (step factor, L): Gibbs
    updates of the hyperparameters (after an initial phase of
    ``initial_phase_steps`` leapfrog steps with them fixed, Rasmussen 1996
    section 2.3), then one HMC transition with these options (see
    :class:`~adaptive_hmc.samplers.hmc.HMCParams`). A window larger than L + 1
    is cut to L + 1."""

    window: int = 1
    persistence: float = 0.0
    jitter: bool = False
    step_nu: float = 0.0
    max_energy_error: float = 1000.0
    gibbs: bool = True
    initial_phase_steps: int = 0

    def __post_init__(self):
        if int(self.window) != self.window or self.window < 1:
            raise ValueError(f"window={self.window}: must be an integer >= 1")
        if not 0.0 <= self.persistence < 1.0:
            raise ValueError(f"persistence={self.persistence}: must be in [0, 1)")
        if not self.step_nu >= 0:
            raise ValueError(f"step_nu={self.step_nu}: must be >= 0")
        if not self.max_energy_error > 0:
            raise ValueError(f"max_energy_error={self.max_energy_error}: must be > 0")
        if int(self.initial_phase_steps) != self.initial_phase_steps or self.initial_phase_steps < 0:
            raise ValueError(f"initial_phase_steps={self.initial_phase_steps}: must be an integer >= 0")


# -- compiled per-replica loop --------------------------------------------------

class Chain(NamedTuple):
    """A replica's persistent state. counters = [leapfrog steps, samples]."""

    q: np.ndarray
    g: np.ndarray
    p: np.ndarray
    tau: np.ndarray
    top: np.ndarray
    noise: np.ndarray
    counters: np.ndarray


class Accumulator(NamedTuple):
    """Predictions of the samples on the inputs XT (n_in, N padded) with targets YT (n_t, N).
    pred/sq: sums of the outputs (regression) or class probabilities
    (classification) and of their squares, (n_out, N); var: sum of the noise
    variances (n_out,); lse: log sum over samples of p(y_n | sample), (N,);
    count: [number of samples]."""

    XT: np.ndarray
    YT: np.ndarray
    work: np.ndarray
    pred: np.ndarray
    sq: np.ndarray
    var: np.ndarray
    lse: np.ndarray
    count: np.ndarray


class Record(NamedTuple):
    """Per-iteration diagnostics of one replica; hyper rows hold [tau, top, noise]."""

    accepted: np.ndarray
    accept_prob: np.ndarray
    energy_error: np.ndarray
    divergent: np.ndarray
    num_steps: np.ndarray
    energy: np.ndarray
    squared_jump: np.ndarray
    hyper: np.ndarray


@njit
def _logaddexp(a, b):
    m = max(a, b)
    if m == -math.inf:
        return m
    return m + math.log(math.exp(a - m) + math.exp(b - m))


@njit
def _log_sigmoid(f):
    return -math.log1p(math.exp(-f)) if f >= 0 else f - math.log1p(math.exp(f))


@njit
def accumulate(acc, out, noise, lik):
    """Add the predictions of one sample (network outputs ``out``, (n_out, N))
    to ``acc``: Gaussian means and noise variances, or class probabilities;
    and log p(y | sample) of each target case."""
    n_out, N = acc.pred.shape
    acc.count[0] += 1.0
    for n in range(N):
        if lik == GAUSSIAN:
            lp = 0.0
            for o in range(n_out):
                f = out[o, n]
                acc.pred[o, n] += f
                acc.sq[o, n] += f * f
                r = acc.YT[o, n] - f
                lp += 0.5 * math.log(noise[o] / (2.0 * math.pi)) - 0.5 * noise[o] * r * r
        elif lik == LOGISTIC:
            f = out[0, n]
            pr = 1.0 / (1.0 + math.exp(-f))
            acc.pred[0, n] += pr
            acc.sq[0, n] += pr * pr
            lp = _log_sigmoid(f) if acc.YT[0, n] > 0.5 else _log_sigmoid(-f)
        else:
            m, s = softmax_norm(out, n)
            for o in range(n_out):
                pr = math.exp(out[o, n] - m) / s
                acc.pred[o, n] += pr
                acc.sq[o, n] += pr * pr
            lp = out[int(acc.YT[0, n]), n] - m - math.log(s)
        acc.lse[n] = _logaddexp(acc.lse[n], lp)
    if lik == GAUSSIAN:
        for o in range(n_out):
            acc.var[o] += 1.0 / noise[o]


@njit
def _load(t, prior, c, sumsq, step_factor, steps):
    """Hyperparameters -> target precisions and step sizes; returns U(q)."""
    precisions(prior, c.tau, t.prec)
    t.noise[:] = c.noise
    mlp_step_scales(t.arch, t.prec, t.noise, sumsq, float(t.YT.shape[1]), steps)
    steps *= step_factor
    return energy_grad(c.q, c.g, t)


@njit
def run_replica(t, prior, c, sumsq, step_factor, n_steps, n_iter, window, persistence, jitter,
                step_nu, max_energy_error, gibbs, initial_phase_steps, retain_after, thin,
                held, test, rec, kept, rng):
    """``n_iter`` iterations of [Gibbs update of the hyperparameters (once
    ``initial_phase_steps`` leapfrog steps are done), HMC transition] on one
    replica, in place on its chain ``c``; predictions go to ``held`` (every
    sample) and ``test`` (samples numbered above ``retain_after``), the weights
    and noise precisions of every ``thin``-th retained sample to the rows of
    ``kept``. Returns the number of rows of ``kept`` written."""
    steps = np.empty(c.q.size)
    u = _load(t, prior, c, sumsq, step_factor, steps)
    lik = t.arch[2]
    S, T = c.tau.size, c.top.size
    n_kept = 0
    for i in range(n_iter):
        if gibbs and c.counters[0] >= initial_phase_steps:
            gibbs_hyper(c.q, c.tau, c.top, c.noise, prior, t.arch, t.XT, t.YT, t.work, rng)
            u = _load(t, prior, c, sumsq, step_factor, steps)
        acc, prob, dh, div, used, u, jump = hmc_kernel(
            c.q, u, c.g, c.p, steps, n_steps, window, persistence, jitter, step_nu,
            max_energy_error, t, rng)
        c.counters[0] += used
        c.counters[1] += 1
        rec.accepted[i] = acc
        rec.accept_prob[i] = prob
        rec.energy_error[i] = dh
        rec.divergent[i] = div
        rec.num_steps[i] = used
        rec.energy[i] = u
        rec.squared_jump[i] = jump
        rec.hyper[i, :S] = c.tau
        rec.hyper[i, S:S + T] = c.top
        rec.hyper[i, S + T:] = c.noise
        if held.YT.shape[1] > 0:
            accumulate(held, forward(c.q, t.arch, held.XT, held.work), c.noise, lik)
        if c.counters[1] > retain_after:
            if test.YT.shape[1] > 0:
                accumulate(test, forward(c.q, t.arch, test.XT, test.work), c.noise, lik)
            if thin > 0 and c.counters[1] % thin == 0:
                kept[n_kept, :c.q.size] = c.q
                kept[n_kept, c.q.size:] = c.noise
                n_kept += 1
    return n_kept


# -- Python side ----------------------------------------------------------------

def _accumulator(spec: MLPSpec, X, Y) -> Accumulator:
    N = X.shape[0]
    n_out = spec.n_outputs
    XT = pad_cases(X.T)
    return Accumulator(XT, np.ascontiguousarray(Y.T), spec.workspace(XT.shape[1]),
                       np.zeros((n_out, N)), np.zeros((n_out, N)), np.zeros(n_out),
                       np.full(N, -np.inf), np.zeros(1))


def _reset(acc: Accumulator):
    for a in (acc.pred, acc.sq, acc.var, acc.count):
        a[:] = 0.0
    acc.lse[:] = -np.inf


def _as_seed_sequence(seed) -> np.random.SeedSequence:
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(seed.integers(0, 2 ** 63, size=4))
    if not (isinstance(seed, (int, np.integer)) and seed >= 0):
        raise ValueError(f"seed={seed!r}: must be an integer >= 0")
    return np.random.SeedSequence(int(seed))


class Replica:
    """One chain: a model on its training cases, its held-out fold (empty for
    the full-data chain), its state and its test accumulator."""

    def __init__(self, model: BayesianMLP, X_held, Y_held, X_test, Y_test, initial_hyper, q0):
        self.model = model
        h = model.initial_hyper(initial_hyper)
        self.chain = Chain(q0, np.empty_like(q0), np.zeros_like(q0), h.tau, h.top, h.noise,
                           np.zeros(2, np.int64))
        self.held = _accumulator(model.spec, X_held, Y_held)
        self.test = _accumulator(model.spec, X_test, Y_test)


class ReplicaSet:
    """k cross-validation replicas of a Bayesian MLP (Wang thesis section 3.2).

    Parameters
    ----------
    spec, X, Y : the network and the training data (Y as for
        :class:`~adaptive_hmc.models.bnn.BayesianMLP`).
    k : number of folds (and of CV replicas), >= 2, or 0 for the full-data
        chain alone (no reward). The split is seeded and, for classification,
        stratified.
    full_data_chain : add one chain on all training cases; it follows the same
        settings and contributes to test predictions, never to the reward.
    priors : :class:`~adaptive_hmc.models.priors.PriorSpec`.
    options : :class:`TransitionOptions`.
    test_sets : {name: (X, Y)} on which retained samples are evaluated.
    seed : int or ``numpy.random.SeedSequence``; decides the folds, the initial
        weights and (through :attr:`streams`) every super-transition's random
        numbers.
    initial_hyper : starting value of every free precision (None: prior means).
    init_scale : initial weights N(0, init_scale^2); 0 starts at zero (FBM).
    burn_in_samples : samples of each chain discarded from predictions.
    burn_in_super_transitions : super-transitions discarded from predictions.
    thin : keep every thin-th retained weight vector (0 keeps none).
    threads : worker threads (default: the cores available); results do not depend on it.
    """

    def __init__(self, spec: MLPSpec, X, Y, *, k: int = 8, full_data_chain: bool = False,
                 priors: PriorSpec = PriorSpec(), options: TransitionOptions = TransitionOptions(),
                 test_sets: dict | None = None, seed=0, initial_hyper: float | None = 1.0,
                 init_scale: float = 0.0, burn_in_samples: int = 0, burn_in_super_transitions: int = 0,
                 thin: int = 0, threads: int | None = None):
        X, Y = check_data(spec, X, Y, "training data")
        for name, v in (("burn_in_samples", burn_in_samples), ("thin", thin),
                        ("burn_in_super_transitions", burn_in_super_transitions)):
            if int(v) != v or v < 0:
                raise ValueError(f"{name}={v!r}: must be an integer >= 0")
        self.spec, self.options = spec, options
        self.burn_in_samples, self.burn_in_super_transitions = int(burn_in_samples), int(burn_in_super_transitions)
        self.thin = int(thin)
        self.threads = int(threads) if threads else len(os.sched_getaffinity(0))
        fold_seed, init_seed, self.streams = _as_seed_sequence(seed).spawn(3)
        classify = spec.likelihood != "gaussian"
        if k == 0 and not full_data_chain:
            raise ValueError("k=0 (no cross-validation replicas) needs full_data_chain=True")
        self.folds = kfold(X.shape[0], k, np.random.default_rng(fold_seed), Y if classify else None) if k else []
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
        self.Y_test = np.concatenate(tY) if tY else np.empty((0, Y.shape[1]))
        self.n_cv = k
        init_rng = np.random.default_rng(init_seed)
        parts = [(np.setdiff1d(np.arange(X.shape[0]), f), f) for f in self.folds]
        if full_data_chain:
            parts.append((np.arange(X.shape[0]), np.arange(0)))
        self.replicas = []
        for train, held in parts:
            model = BayesianMLP(spec, X[train], Y[train], priors)
            q0 = model.initial_position(init_rng, init_scale)
            self.replicas.append(Replica(model, X[held], Y[held], self.X_test, self.Y_test, initial_hyper, q0))
        R, n_out, Nt = len(self.replicas), spec.n_outputs, self.X_test.shape[0]
        # Retained test predictions over the whole run, per replica.
        self.test_pred = np.zeros((R, n_out, Nt))
        self.test_sq = np.zeros((R, n_out, Nt))
        self.test_var = np.zeros((R, n_out))
        self.test_lse = np.full((R, Nt), -np.inf)
        self.test_count = np.zeros(R)
        # Per super-transition: sums of retained test predictions and their counts.
        self.history_pred: list = []
        self.history_count: list = []
        # Per super-transition: hyperparameters of each chain's last sample (R, H).
        self.history_hyper: list = []
        self.kept: list = [[] for _ in range(R)]
        self.n_super = 0

    @property
    def n_replicas(self) -> int:
        return len(self.replicas)

    @property
    def hyper_names(self) -> list:
        m = self.replicas[0].model
        T, n_out = self.replicas[0].chain.top.size, self.spec.n_outputs
        return list(m.slot_names) + [f"ard_mean_{t}" for t in range(T)] + [f"noise_{o}" for o in range(n_out)]

    # -- predictions ------------------------------------------------------------
    def prediction(self, name: str, level: float = 0.95) -> Prediction:
        """Bayesian model average of all retained samples of all chains on test set ``name``."""
        if name not in self.test_slices:
            raise KeyError(f"test set {name!r}: known are {self.test_names}")
        sl = self.test_slices[name]
        return pool(self.spec.likelihood, self.test_pred[:, :, sl], self.test_sq[:, :, sl], self.test_var,
                    self.test_lse[:, sl], self.test_count, level)

    def metrics(self) -> dict:
        """{test set: {mse, mse_se, mlpd, error_rate, ...}} of the model average."""
        return {name: test_metrics(self.prediction(name), self.Y_test[self.test_slices[name]],
                                   self.spec.likelihood) for name in self.test_names}

    def samples(self) -> tuple:
        """Kept weight vectors (S, D) and noise precisions (S, n_out) of all
        chains (needs ``thin`` > 0)."""
        D = self.spec.n_params
        rows = [q for chain in self.kept for q in chain]
        A = np.array(rows) if rows else np.empty((0, D + self.spec.n_outputs))
        return A[:, :D], A[:, D:]


class Prediction(NamedTuple):
    """Model-average predictions on N cases. Regression: mean and variance
    (including the noise) per output, central interval of the Gaussian with that
    mean and variance. Classification: class probabilities (N, K), the pooled
    label and the majority vote of the replicas' own averages (ties go to the
    pooled label). lpd: log predictive density of each target (N,)."""

    mean: np.ndarray
    var: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    probs: np.ndarray | None
    label: np.ndarray | None
    vote: np.ndarray | None
    lpd: np.ndarray
    n_samples: int

    @property
    def sd(self) -> np.ndarray:
        return np.sqrt(self.var)


def pool(likelihood: str, pred, sq, var, lse, count, level: float = 0.95) -> Prediction:
    """Pool per-replica sums (R, n_out, N) into one :class:`Prediction`;
    replicas without samples are left out."""
    count = np.asarray(count, float)
    n = count.sum()
    if n == 0:
        raise ValueError("no retained samples yet (burn-in longer than the run so far?)")
    used = count > 0
    mean = pred.sum(0) / n
    lpd = np.logaddexp.reduce(lse[used], axis=0) - math.log(n)
    if likelihood == "gaussian":
        v = np.maximum(sq.sum(0) / n - mean ** 2, 0.0) + (var.sum(0) / n)[:, None]
        z = norm.ppf(0.5 + level / 2)
        return Prediction(mean.T, v.T, (mean - z * np.sqrt(v)).T, (mean + z * np.sqrt(v)).T,
                          None, None, None, lpd, int(n))
    probs = mean.T if likelihood == "softmax" else np.column_stack([1 - mean[0], mean[0]])
    own = pred[used] / count[used][:, None, None]
    if likelihood == "logistic":
        own_labels = (own[:, 0] > 0.5).astype(int)
    else:
        own_labels = own.argmax(axis=1)
    label = probs.argmax(axis=1)
    K = probs.shape[1]
    votes = np.stack([(own_labels == c).sum(0) for c in range(K)], axis=1)
    vote = votes.argmax(axis=1)
    tie = (votes == votes.max(axis=1, keepdims=True)).sum(axis=1) > 1
    vote[tie] = label[tie]
    pv = probs * (1 - probs)
    return Prediction(probs, pv, probs, probs, probs, label, vote, lpd, int(n))


def test_metrics(pr: Prediction, Y, likelihood: str) -> dict:
    """Mean squared error (summed over outputs, averaged over cases, Neal 1992)
    with its standard error, mean log predictive density, and for
    classification the error rates of the pooled label and of the vote."""
    out = {"mlpd": float(pr.lpd.mean()), "n_samples": pr.n_samples}
    if likelihood == "gaussian":
        se = np.sum((pr.mean - Y) ** 2, axis=1)
        out.update(mse=float(se.mean()), mse_se=float(se.std(ddof=1) / math.sqrt(se.size)))
    else:
        y = Y[:, 0].astype(int)
        wrong = pr.label != y
        out.update(error_rate=float(wrong.mean()), error_rate_se=float(wrong.std(ddof=1) / math.sqrt(y.size)),
                   vote_error_rate=float((pr.vote != y).mean()))
    return out


class SuperTransitionResult(NamedTuple):
    """What one super-transition did. Per-iteration arrays are (R, n_iter)
    (``hyper`` is (R, n_iter, H), columns :attr:`ReplicaSet.hyper_names`);
    ``held_out`` has one :class:`Accumulator` per CV replica holding this
    super-transition's samples only."""

    index: int
    step_factor: float
    num_steps: int
    n_iter: int
    record: Record
    held_out: list
    likelihood: str
    seconds: float

    @property
    def acceptance(self) -> np.ndarray:
        """Acceptance rate of each replica."""
        return self.record.accepted.mean(axis=1)

    @property
    def leapfrog_steps(self) -> int:
        return int(self.record.num_steps.sum())


def _record(R: int, n: int, H: int) -> Record:
    return Record(np.zeros((R, n), np.bool_), np.zeros((R, n)), np.zeros((R, n)), np.zeros((R, n), np.bool_),
                  np.zeros((R, n), np.int64), np.zeros((R, n)), np.zeros((R, n)), np.zeros((R, n, H)))


def super_transition(replicas: ReplicaSet, step_factor: float, num_steps: int, budget: int,
                     rng=None) -> SuperTransitionResult:
    """Run ``floor(budget / num_steps)`` iterations of [Gibbs, HMC at (step_factor,
    num_steps)] on every replica; a replica never uses more than ``budget``
    leapfrog steps (with jitter, L <= num_steps).

    ``rng`` is a ``numpy.random.SeedSequence`` (one child per replica is spawned
    from it for this call; default :attr:`ReplicaSet.streams`) or a Generator
    (from which such a SeedSequence is seeded).
    """
    if not (isinstance(step_factor, (int, float, np.floating)) and math.isfinite(step_factor) and step_factor > 0):
        raise ValueError(f"step_factor={step_factor!r}: must be a finite number > 0")
    if not (isinstance(budget, (int, np.integer)) and budget >= 1):
        raise ValueError(f"budget={budget!r}: must be an integer >= 1 (leapfrog steps per replica)")
    if not (isinstance(num_steps, (int, np.integer)) and 1 <= num_steps <= budget):
        raise ValueError(f"num_steps={num_steps!r}: must be an integer in 1..budget ({budget})")
    seq = replicas.streams if rng is None else _as_seed_sequence(rng)
    streams = [np.random.Generator(np.random.PCG64(s)) for s in seq.spawn(replicas.n_replicas)]
    o, R, n_iter = replicas.options, replicas.n_replicas, int(budget) // int(num_steps)
    chain0 = replicas.replicas[0].chain
    H = chain0.tau.size + chain0.top.size + chain0.noise.size
    rec = _record(R, n_iter, H)
    retain = replicas.n_super >= replicas.burn_in_super_transitions
    thin = replicas.thin
    width = replicas.spec.n_params + replicas.spec.n_outputs
    kept = [np.empty((n_iter // thin + 1 if thin else 0, width)) for _ in range(R)]

    def one(j):
        r = replicas.replicas[j]
        _reset(r.held)
        _reset(r.test)
        retain_after = replicas.burn_in_samples if retain else np.iinfo(np.int64).max
        n_kept = run_replica(r.model.target, r.model.prior, r.chain, r.model.sumsq, float(step_factor),
                             int(num_steps), n_iter, int(o.window), float(o.persistence), bool(o.jitter),
                             float(o.step_nu), float(o.max_energy_error), bool(o.gibbs),
                             int(o.initial_phase_steps), retain_after, thin, r.held, r.test,
                             Record(*(a[j] for a in rec)), kept[j], streams[j])
        replicas.kept[j].extend(kept[j][:n_kept])

    t0 = time.perf_counter()
    if replicas.threads > 1 and R > 1:
        with ThreadPoolExecutor(min(replicas.threads, R)) as pool_:
            list(pool_.map(one, range(R)))
    else:
        for j in range(R):
            one(j)
    seconds = time.perf_counter() - t0
    st_pred = np.stack([r.test.pred for r in replicas.replicas])
    st_count = np.array([r.test.count[0] for r in replicas.replicas])
    replicas.test_pred += st_pred
    replicas.test_sq += np.stack([r.test.sq for r in replicas.replicas])
    replicas.test_var += np.stack([r.test.var for r in replicas.replicas])
    replicas.test_lse = np.logaddexp(replicas.test_lse, np.stack([r.test.lse for r in replicas.replicas]))
    replicas.test_count += st_count
    replicas.history_pred.append(st_pred)
    replicas.history_count.append(st_count)
    replicas.history_hyper.append(np.stack([np.concatenate([r.chain.tau, r.chain.top, r.chain.noise])
                                            for r in replicas.replicas]))
    held = [r.held._replace(pred=r.held.pred.copy(), sq=r.held.sq.copy(), var=r.held.var.copy(),
                            lse=r.held.lse.copy(), count=r.held.count.copy())
            for r in replicas.replicas[:replicas.n_cv]]
    replicas.n_super += 1
    return SuperTransitionResult(replicas.n_super - 1, float(step_factor), int(num_steps), n_iter, rec, held,
                                 replicas.spec.likelihood, seconds)


def replicas_state(rs: ReplicaSet) -> dict:
    """Everything a :class:`ReplicaSet` changes while it runs (arrays and ints),
    for checkpoints; :func:`load_replicas_state` puts it back into a set built
    with the same arguments."""
    return {"n_super": rs.n_super, "streams_spawned": rs.streams.n_children_spawned,
            "chains": [[a.copy() for a in r.chain] for r in rs.replicas],
            "test": {k: getattr(rs, k).copy() for k in ("test_pred", "test_sq", "test_var", "test_lse", "test_count")},
            "history_pred": list(rs.history_pred), "history_count": list(rs.history_count),
            "history_hyper": list(rs.history_hyper), "kept": [list(k) for k in rs.kept]}


def load_replicas_state(rs: ReplicaSet, state: dict) -> None:
    if len(state["chains"]) != rs.n_replicas:
        raise ValueError(f"state has {len(state['chains'])} chains; this set has {rs.n_replicas}")
    for r, arrays in zip(rs.replicas, state["chains"]):
        for dst, src in zip(r.chain, arrays):
            dst[...] = src
    for k, v in state["test"].items():
        getattr(rs, k)[...] = v
    rs.history_pred, rs.history_count = list(state["history_pred"]), list(state["history_count"])
    rs.history_hyper = list(state["history_hyper"])
    rs.kept = [list(k) for k in state["kept"]]
    rs.n_super = state["n_super"]
    s = rs.streams
    rs.streams = np.random.SeedSequence(s.entropy, spawn_key=s.spawn_key, pool_size=s.pool_size,
                                        n_children_spawned=state["streams_spawned"])
