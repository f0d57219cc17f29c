"""The super-transition (Wang thesis section 3.2): a fixed budget of
leapfrog steps at one setting (step factor, L) on every chain of a network's
chain set, each chain in the compiled iteration on its own thread and random
stream, so that the result is bit-identical whatever the thread count; the
held-out and test predictions accumulated as the chains run.

Flow position: network_state -> **super_transition** -> network_chains.
"""
from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from ..models.base import hyper_values
from ..models.predictive import reset, snapshot
from ..samplers.calibration import CURVATURE_EVALUATIONS, curvature_scale
from ..samplers.chain import Observers, Record, copy_chain, new_record, run_chain
from ..samplers.metric import learned_factors, low_rank_metrics, trace_rows, window_of
from ..samplers.settings import Action, check_settings
from .network_options import as_seed_sequence
from .network_state import NetworkState, Sums, fold


class HeldOut(NamedTuple):
    """A network's cross-validation replicas' held-out predictions of one
    super-transition: one :class:`~adaptive_hmc.models.predictive.Accumulator`
    per CV replica holding its samples only, and the network's likelihood (how
    to score them)."""

    accumulators: list
    likelihood: str


class SuperTransitionResult(NamedTuple):
    """What one super-transition did, the one info value of every chain set:
    its index and action, its iterations, the chains' :class:`Record`
    (per-iteration arrays (R, n_iter)), its seconds, its unit of its own kind
    (``unit``: what it adds to the state and to the sample store: a network's
    :class:`Sums`, a density's draws), the gradients before it and, for a
    network with CV replicas, their ``held_out`` predictions (None
    otherwise)."""

    index: int
    step_factor: float
    num_steps: int
    n_iter: int
    record: Record
    seconds: float
    unit: Sums | np.ndarray
    setup_gradients: int = 0      # evaluations before it (all chains): the step calibration's, the optimized starts'
    held_out: HeldOut | None = None

    @property
    def acceptance(self) -> np.ndarray:
        """Acceptance rate of each chain."""
        return self.record.accepted.mean(axis=1)

    @property
    def leapfrog_steps(self) -> int:
        return int(self.record.num_steps.sum())

    @property
    def gradients(self) -> int:
        """Every energy and gradient evaluation of the chains: the leapfrog
        steps, the one after each Gibbs update (and the forward passes of the
        interweaving moves), the step calibration's and the optimized starts'."""
        return int(self.record.gradients.sum()) + self.setup_gradients


#: A probe runs this many trajectories of its L a chain (three with jitter's lengths 1..L).
PROBE_TRAJECTORIES = 2
#: The probes' random streams are spawned under this key, apart from the chains' (numbered from 0).
PROBE_KEY = 2 ** 31


def iterations(budget: int, num_steps: int, jitter: bool) -> int:
    """Iterations of a super-transition: ``floor(budget / num_steps)``, so a
    chain never uses more than ``budget`` leapfrog steps; with jitter (L
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


#: The diagnostic draws: the kept samples of a super-transition a chain keeps (when ``thin`` > 0) evenly
#: spaced over its retained iterations, besides every ``thin``-th, from which R-hat, ESS and E-BFMI are
#: computed and which the export holds: the same draws whatever ``thin`` (so the figures measure the
#: chains, not the thinning), and as many in every super-transition (so that each weighs its equal budget
#: of leapfrog steps alike, as the run's averages do). Fewer where one super-transition's rows of all
#: chains would pass :data:`DIAGNOSTIC_BYTES`.
DIAGNOSTIC_DRAWS, DIAGNOSTIC_BYTES = 16, 256 * 1024


def diagnostic_draws(n_chains: int, width: int) -> int:
    """Diagnostic draws a chain keeps per super-transition (:data:`DIAGNOSTIC_DRAWS`, within the bytes)."""
    return int(max(2, min(DIAGNOSTIC_DRAWS, DIAGNOSTIC_BYTES // (8 * n_chains * width))))


def keep_at(n_iter: int, before: int, retain_after: int, thin: int, k: int) -> np.ndarray:
    """The iterations (numbered in a super-transition of ``n_iter``, after ``before`` of the chain) of its
    diagnostic draws: ``k`` evenly spaced over the retained ones (those past ``retain_after``; all of them
    when fewer); none with ``thin`` 0."""
    first = max(0, retain_after - before)
    m = n_iter - first
    if thin <= 0 or m <= 0 or k <= 0:
        return np.zeros(0, np.int64)
    k = min(k, m)
    return (first + np.floor((np.arange(k) + 0.5) * m / k)).astype(np.int64)


def kept_stats(rec: Record, j: int, at: np.ndarray, dim: int, diagnostic: np.ndarray) -> np.ndarray:
    """The :data:`~adaptive_hmc.engine.network_state.KEPT_STATS` (n_kept, 6) of chain ``j``'s kept rows,
    of the iterations ``at`` of the record (K from the record's temperature 2 K / D), and whether each is
    a diagnostic draw (one of the iterations ``diagnostic``)."""
    u = rec.energy[j, at]
    return np.column_stack([u + 0.5 * dim * rec.temperature[j, at], -u, rec.accept_prob[j, at],
                            rec.divergent[j, at], rec.num_steps[j, at],
                            np.isin(at, diagnostic)]).reshape(at.size, 6).astype(np.float64)


def _settings(setup: NetworkChains, state: NetworkState, step_factor, num_steps, budget):
    """The chains' settings for one super-transition at (``step_factor``, ``num_steps``) of ``budget`` steps."""
    if not (isinstance(budget, (int, np.integer)) and budget >= 1):
        raise ValueError(f"budget={budget!r}: must be an integer >= 1 (leapfrog steps per chain)")
    if num_steps > budget:
        raise ValueError(f"num_steps={num_steps!r}: must be an integer in 1..budget ({budget})")
    base = setup.settings.step_size             # absolute base steps (Neal's eps0), or none: FBM's heuristic scales
    return check_settings(setup.settings._replace(
        num_steps=int(num_steps), step_factor=0.0 if base.size else float(step_factor),
        step_size=base * float(step_factor) if base.size else np.empty(0), step_scale=state.step_scale))


def _each(fn, R: int, threads: int) -> None:
    """``fn(j)`` for j < R, on up to ``threads`` threads (the kernels release the GIL)."""
    if threads > 1 and R > 1:
        with ThreadPoolExecutor(min(threads, R)) as executor:
            list(executor.map(fn, range(R)))
    else:
        for j in range(R):
            fn(j)


def _kept_buffers(setup: NetworkChains, chains: tuple, n_iter: int, retain_after: int) -> tuple:
    """(each chain's diagnostic draws' iterations, :func:`keep_at`; the arrays its kept samples and their
    iterations are written into)."""
    thin, width = setup.thin, setup.dim + len(setup.hyper_names)
    at = [keep_at(n_iter, int(c.counters[1]), retain_after, thin, setup.diagnostic_draws) for c in chains]
    size = [n_iter // thin + 1 + a.size if thin else 0 for a in at]
    return at, [np.empty((n, width)) for n in size], [np.zeros(n, np.int64) for n in size]


def _calibration(setup: NetworkChains, state: NetworkState) -> tuple:
    """(each chain's step calibration, the gradients measuring it took): measured at the super-transition
    ``setup.calibrate_after``, else the state's."""
    if setup.calibrate_after != state.n_super:
        return state.step_calibration, 0
    return np.array([curvature_scale(r.model, c.position, c.hyper) for r, c in zip(setup.chain_data, state.chains)]), \
        setup.n_chains * CURVATURE_EVALUATIONS


def _step(setup: NetworkChains, chains: tuple, wp, w, kept: list, stats: list) -> Sums:
    """The chains' sums of one super-transition (their test accumulators weighted by ``wp``, each predicting
    sample standing for its iterations), their hyperparameters at its end and their kept samples."""
    n_retained = np.array([r.test.count[0] for r in setup.chain_data])
    mine, H = setup.chain_data, len(setup.hyper_names)
    return Sums(pred=wp[:, None, None] * np.stack([r.test.pred for r in mine]),
                sq=wp[:, None, None] * np.stack([r.test.sq for r in mine]),
                var=wp[:, None] * np.stack([r.test.var for r in mine]),
                lse=np.log(wp)[:, None] + np.stack([r.test.lse for r in mine]),
                count=wp * n_retained, retained=n_retained.astype(np.int64),
                hyper=np.stack([hyper_values(r.model.target, c.hyper, np.empty(H)) for r, c in zip(mine, chains)]),
                kept=kept, kept_weight=w, kept_stats=stats)


def _trace_of(window, trace: list) -> np.ndarray:
    """Each chain's rows of this super-transition for the low rank: :func:`trace_rows` of its iterations,
    evenly spaced (R, m, 2, D)."""
    n = trace[0].shape[0]
    m = min(n, trace_rows(window))
    at = np.floor((np.arange(m) + 0.5) * n / m).astype(np.int64) if m else np.zeros(0, np.int64)
    return np.stack([t[at] for t in trace])


def _learned_metric(setup: NetworkChains, state: NetworkState, chains: tuple, window, moments, n_iter: int,
                    trace: list) -> dict:
    """The learned metric's state after a super-transition of its ``window``: the moments (and the low
    rank's trace) summed on, or at the window's end its factors and each chain's low rank (frozen till the
    next window) and the moments and the trace cleared."""
    count = state.moment_count + n_iter
    traced = np.concatenate([state.trace, _trace_of(window, trace)], axis=1) if setup.metric == "low_rank" \
        else state.trace
    if state.n_super + 1 != window[1]:
        return dict(moments=moments, moment_count=count, trace=traced)
    heuristic = np.stack([r.model.scales(c.hyper) for r, c in zip(setup.chain_data, chains)])
    factors = learned_factors(moments, count, heuristic)
    low_rank = low_rank_metrics(traced, heuristic * factors) if setup.metric == "low_rank" else state.low_rank
    return dict(step_scale=factors, moments=np.zeros_like(moments), moment_count=0,
                trace=traced[:, :0], low_rank=low_rank)


def _metric_buffers(setup: NetworkChains, state: NetworkState, window, n_iter: int) -> tuple:
    """(the moments the chains sum on, each chain's trace of its iterations) of a super-transition in the
    learned metric's ``window`` (None: none)."""
    moments = state.moments.copy() if window else np.zeros((setup.n_chains, 4, 0))
    rows = n_iter if window and setup.metric == "low_rank" else 0
    return moments, [np.zeros((rows, 2, setup.dim)) for _ in range(setup.n_chains)]


def super_transition(setup: NetworkChains, state: NetworkState, action: Action, budget: int,
                     rng=None) -> tuple:
    """One super-transition from ``state``: :func:`iterations` of [Gibbs, HMC at ``action`` (its ``step_factor``
    and ``num_steps`` L)] on every chain of ``setup``, the leapfrog steps of the ``budget`` (exactly without
    jitter, on average with it); returns (the new :class:`NetworkState`, :class:`SuperTransitionResult`) and
    changes neither argument (the chains run on copies; ``setup``'s scratch accumulators are reused, so one
    setup runs one super-transition at a time). The steps are ``step_factor`` times the heuristic scales, or,
    when the settings carry a ``step_size`` (absolute base steps), ``step_factor`` times those.

    ``rng`` is a ``numpy.random.SeedSequence`` (one child per chain is spawned from it for this call; default
    the set's stream after the state's ``streams_spawned``) or a Generator (from which such a SeedSequence is
    seeded).
    """
    step_factor, num_steps = Action.of(action)
    settings = _settings(setup, state, step_factor, num_steps, budget)
    base = setup.settings.step_size             # absolute base steps (Neal's eps0), or none: FBM's heuristic scales
    calibration, calibration_gradients = _calibration(setup, state)
    R, n_iter = setup.n_chains, iterations(budget, num_steps, settings.jitter)
    seq = setup.streams(state.streams_spawned) if rng is None else as_seed_sequence(rng)
    streams = [np.random.Generator(np.random.PCG64(s)) for s in seq.spawn(R)]
    chains = tuple(copy_chain(c) for c in state.chains)
    H = len(setup.hyper_names)
    rec = new_record(R, n_iter, H)
    retain_after = setup.burn_in_samples if state.n_super >= setup.burn_in_super_transitions \
        else np.iinfo(np.int64).max
    thin = setup.thin
    every = predict_every(setup.predict_steps, num_steps, settings.jitter, n_iter)
    at, kept, kept_iter = _kept_buffers(setup, chains, n_iter, int(retain_after))
    n_kept = [0] * R
    window = window_of(state.n_super, setup.metric) if state.moments.shape[2] else None
    moments, trace = _metric_buffers(setup, state, window, n_iter)

    def one(j):
        r = setup.chain_data[j]
        reset(r.held)
        reset(r.test)
        c = calibration[j]
        mine = settings._replace(step_size=settings.step_size * c) if base.size else \
            settings._replace(step_factor=settings.step_factor * c)
        if setup.metric == "low_rank":
            mine = mine._replace(low_rank=state.low_rank[j])
        n_kept[j] = run_chain(r.model.target, chains[j], mine, n_iter, Record(*(a[j] for a in rec)),
                              Observers(r.held, r.test, int(retain_after), thin, kept[j], every, moments[j], at[j],
                                        kept_iter[j], trace[j]), streams[j])

    t0 = time.perf_counter()
    _each(one, R, setup.threads)
    seconds = time.perf_counter() - t0
    w = np.array([1.0 if setup.weight_by == "iterations" or n_iter == 0 else      # each retained iteration's
                  float(rec.num_steps[j].sum()) / n_iter for j in range(R)])         # weight (WEIGHT_BY)
    step = _step(setup, chains, every * w, w, [kept[j][:n] for j, n in enumerate(n_kept)],
                 [kept_stats(rec, j, kept_iter[j][:n_kept[j]], setup.dim, at[j]) for j in range(R)])
    spawned = state.streams_spawned + (R if rng is None else 0)
    metric = _learned_metric(setup, state, chains, window, moments, n_iter, trace) if window else {}
    new = fold(setup, state._replace(chains=chains, streams_spawned=spawned, step_calibration=calibration,
                                     **metric), step)
    held = HeldOut([snapshot(r.held) for r in setup.chain_data[:setup.n_cv]], setup.spec.likelihood) \
        if setup.n_cv else None
    return new, SuperTransitionResult(state.n_super, float(step_factor), int(num_steps), n_iter, rec, seconds, step,
                                      calibration_gradients, held)
