"""The iteration every chain runs, compiled: [Gibbs update of the
hyperparameters, HMC transition], with optional observers of each sample.

Flow position: transition -> **iteration** -> super-transition. The replicas run
:func:`run_chain` on their threads; :func:`make_hmc` wraps the very same compiled
loop (one iteration) as a ``(state, settings, rng) -> (state, info)`` transition,
so the statistical tests exercise the production path.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba.extending import overload

from ..jit import is_ready, njit
from ..models.base import accumulate, energy_grad, gibbs_energy_grad, hyper_values, step_scales
from ..models.predictive import no_cases
from .annealing import annealed_kernel
from .baselines import metropolis_kernel, stochastic_dynamics_kernel
from .hmc import plain_hmc_kernel, windowed_hmc_kernel
from .leapfrog import kinetic_with
from .settings import HMC, KINDS, METROPOLIS, STOCHASTIC_DYNAMICS, HMCSettings, check_settings


class ChainState(NamedTuple):
    """A chain's state, the one type from the compiled loop to the Python API,
    updated in place by :func:`run_chain`: ``position``, ``grad`` (dU/dq
    there), ``momentum`` (kept for persistence), the target's hyperparameter
    state ``hyper``, ``counters`` = [leapfrog steps, iterations] since the
    start, the dummy kinetic energy ``kd`` = [K_d] of annealing (Neal 1992;
    unused otherwise) and ``energy`` = [U] at the position after the last
    iteration (or as :func:`init_state` evaluated it)."""

    position: np.ndarray
    grad: np.ndarray
    momentum: np.ndarray
    hyper: NamedTuple
    counters: np.ndarray
    kd: np.ndarray
    energy: np.ndarray


def new_chain(q, hyper) -> ChainState:
    """A chain at position ``q`` (owned by the chain) with hyperparameter state
    ``hyper``: zero momentum and counters, K_d at temperature 1 (D/2), its
    energy and gradient not yet evaluated (the first iteration does)."""
    return ChainState(q, np.empty_like(q), np.zeros_like(q), hyper, np.zeros(2, np.int64), np.array([0.5 * q.size]),
                      np.array([np.nan]))


def copy_chain(c: ChainState) -> ChainState:
    """A copy of chain ``c`` that shares no array with it."""
    return ChainState(*(a.copy() for a in c))


class Record(NamedTuple):
    """Per-iteration diagnostics, (..., n_iter); ``hyper`` rows are the target's
    :func:`~adaptive_hmc.models.base.hyper_values`."""

    accepted: np.ndarray        # share of the iteration's moves accepted: 0 or 1 (HMC), k/L (Metropolis)
    accept_prob: np.ndarray
    energy_error: np.ndarray
    divergent: np.ndarray
    num_steps: np.ndarray
    energy: np.ndarray
    squared_jump: np.ndarray
    temperature: np.ndarray     # measured from the momenta after the iteration: (K_s + K_d) / D annealed, else 2 K_s / D
    hyper: np.ndarray
    gradients: np.ndarray       # energy evaluations: num_steps, plus those of a Gibbs update (or one at the start)


def new_record(n_chains: int, n_iter: int, n_hyper: int) -> Record:
    """Zeroed records of ``n_chains`` chains (arrays (n_chains, n_iter[, n_hyper]))."""
    R, n = n_chains, n_iter
    return Record(np.zeros((R, n)), np.zeros((R, n)), np.zeros((R, n)), np.zeros((R, n), np.bool_),
                  np.zeros((R, n), np.int64), np.zeros((R, n)), np.zeros((R, n)), np.zeros((R, n)),
                  np.zeros((R, n, n_hyper)), np.zeros((R, n), np.int64))


#: The fewest leapfrog steps, on average, between two of a target's moves of its hyperparameters together
#: with q (the network's interweaving moves): a Gibbs update makes them when the trajectory after it crosses
#: a multiple of this many steps (every iteration for L >= 100; about every 100 / L-th for shorter ones, so
#: that their forward passes stay a bounded share of the gradients). Which iterations make them depends on
#: the step counts alone, never on the state: each update, with or without them, leaves the posterior
#: invariant.
HYPER_MOVE_STEPS = 100


class Observers(NamedTuple):
    """What is done with each sample besides recording it: its predictions on
    ``held`` (every sample) and ``test`` (of the iterations numbered above
    ``retain_after``, every ``predict_every``-th of this call), both
    :class:`~adaptive_hmc.models.predictive.Accumulator` (empty ones are
    skipped), and every ``thin``-th retained sample's [q, hyper values] as a
    row of ``kept`` (``thin`` 0 keeps none), and also those of the retained
    iterations (numbered in this call) in ``keep_at`` (increasing), with the
    iteration of each row in ``kept_iter``; ``moments`` (4, D) adds each
    iteration's q, q^2, dU/dq and (dU/dq)^2 to its rows (0 columns: none), for
    the learned metric (:mod:`~adaptive_hmc.samplers.metric`), and ``trace``
    (n, 2, D) holds the first n iterations' q and dU/dq, for the low-rank
    metric (0 rows: none)."""

    held: NamedTuple
    test: NamedTuple
    retain_after: int
    thin: int
    kept: np.ndarray
    predict_every: int = 1
    moments: np.ndarray = np.zeros((4, 0))
    keep_at: np.ndarray = np.zeros(0, np.int64)
    kept_iter: np.ndarray = np.zeros(0, np.int64)
    trace: np.ndarray = np.zeros((0, 2, 0))

    @classmethod
    def keeping(cls, kept: np.ndarray) -> "Observers":
        """Observers that keep every sample as a row of ``kept`` and predict nothing (a chain without cases)."""
        none = no_cases()
        return cls(none, none, -1, 1, kept)


@njit(inner=True)
def fill_step_sizes(target, hyper, settings, out):
    """The absolute step sizes of ``settings`` at ``hyper``: its ``step_size``
    (one value or one per parameter), or ``step_factor`` times the target's
    heuristic scales (each times its ``step_scale`` factor, when given)."""
    n = settings.step_size.size
    if n > 0:
        for k in range(out.size):
            out[k] = settings.step_size[k if n > 1 else 0]
        return out
    step_scales(target, hyper, out)
    out *= settings.step_factor
    if settings.step_scale.size:
        out *= settings.step_scale
    return out


class HMCMove(NamedTuple):
    """The iteration's transition, as a type: :func:`run_chain` passes one of
    these markers to the compiled loop, which is compiled for each marker type
    it meets with only that transition's kernel in it (a run compiles the
    kernels it uses, not every branch). ``kind`` is the index into
    :data:`~adaptive_hmc.samplers.settings.KINDS` (annealing: the schedule's)."""

    kind: int = HMC


class WindowedHMCMove(NamedTuple):
    kind: int = HMC


class MetropolisMove(NamedTuple):
    kind: int = METROPOLIS


class StochasticDynamicsMove(NamedTuple):
    kind: int = STOCHASTIC_DYNAMICS


class AnnealedMove(NamedTuple):
    kind: int = HMC


#: The marker of each entry of KINDS.
MOVES = (HMCMove(), MetropolisMove(), StochasticDynamicsMove())


def move_of(settings: HMCSettings) -> NamedTuple:
    """The move marker of checked ``settings``: annealed when it holds a
    schedule, windowed HMC when its window is above 1."""
    if settings.anneal.shape[0] > 0:
        return AnnealedMove(settings.kind)
    return WindowedHMCMove() if settings.kind == HMC and settings.window > 1 else MOVES[settings.kind]


def transition(move, chain, u, step_sizes, settings, target, rng):
    """One transition of the kind ``move`` marks from ``chain`` (in place) at
    energy ``u``: its :class:`~adaptive_hmc.samplers.settings.KernelInfo`."""


@overload(transition)
def _transition(move, chain, u, step_sizes, settings, target, rng):
    cls = move.instance_class
    if cls is AnnealedMove:
        return lambda move, chain, u, step_sizes, settings, target, rng: annealed_kernel(
            chain.position, u, chain.grad, chain.momentum, chain.kd, step_sizes, settings, chain.counters[1], target,
            chain.hyper, rng)
    if cls is MetropolisMove:
        return lambda move, chain, u, step_sizes, settings, target, rng: metropolis_kernel(
            chain.position, u, chain.grad, step_sizes, settings, target, chain.hyper, rng)
    kernel = {HMCMove: plain_hmc_kernel, WindowedHMCMove: windowed_hmc_kernel}.get(cls, stochastic_dynamics_kernel)
    return lambda move, chain, u, step_sizes, settings, target, rng: kernel(
        chain.position, u, chain.grad, chain.momentum, step_sizes, settings, target, chain.hyper, rng)


@njit(inline="always")
def _observe_metric(obs, q, g, i):
    """What the learned metrics read of iteration ``i``'s state (q, dU/dq): the sums of
    :attr:`Observers.moments` and the row of :attr:`Observers.trace` (each when it has D columns)."""
    D = q.size
    if obs.moments.shape[1] == D:
        for k in range(D):
            obs.moments[0, k] += q[k]
            obs.moments[1, k] += q[k] * q[k]
            obs.moments[2, k] += g[k]
            obs.moments[3, k] += g[k] * g[k]
    if i < obs.trace.shape[0] and obs.trace.shape[2] == D:
        for k in range(D):
            obs.trace[i, 0, k] = q[k]
            obs.trace[i, 1, k] = g[k]


@njit
def _run_chain(target, chain, settings, n_iter, rec, obs, rng, move):
    D = chain.position.size
    step_sizes = fill_step_sizes(target, chain.hyper, settings, np.empty(D))
    u = 0.0
    current = False         # whether u and chain.grad are the energy and gradient at the chain's state
    n_kept, n_at = 0, 0     # samples kept; entries of obs.keep_at passed
    for i in range(n_iter):
        evaluations = 0
        if settings.gibbs and chain.counters[0] >= settings.initial_phase_steps:
            steps = chain.counters[0]
            moves = (steps + settings.num_steps) // HYPER_MOVE_STEPS > steps // HYPER_MOVE_STEPS
            u, evaluations = gibbs_energy_grad(chain.position, chain.grad, target, chain.hyper, rng, moves)
            fill_step_sizes(target, chain.hyper, settings, step_sizes)
        elif not current:
            u = energy_grad(chain.position, chain.grad, target, chain.hyper)
            evaluations = 1
        current = True
        info = transition(move, chain, u, step_sizes, settings, target, rng)
        u = info.energy
        chain.counters[0] += info.num_steps
        chain.counters[1] += 1
        rec.gradients[i] = info.num_steps + evaluations
        rec.accepted[i] = info.accepted
        rec.accept_prob[i] = info.accept_prob
        rec.energy_error[i] = info.energy_error
        rec.divergent[i] = info.divergent
        rec.num_steps[i] = info.num_steps
        rec.energy[i] = u
        rec.squared_jump[i] = info.squared_jump
        ks = kinetic_with(chain.momentum, settings.low_rank)
        rec.temperature[i] = (ks + chain.kd[0]) / D if settings.anneal.shape[0] > 0 else 2.0 * ks / D
        hyper_values(target, chain.hyper, rec.hyper[i])
        if obs is not None:
            _observe_metric(obs, chain.position, chain.grad, i)
            if obs.held.YT.shape[1] > 0:
                accumulate(chain.position, target, chain.hyper, obs.held)
            if chain.counters[1] > obs.retain_after:
                if obs.test.YT.shape[1] > 0 and (i + 1) % obs.predict_every == 0:
                    accumulate(chain.position, target, chain.hyper, obs.test)
                at = n_at < obs.keep_at.size and obs.keep_at[n_at] == i
                n_at += 1 if at else 0
                if obs.thin > 0 and (chain.counters[1] % obs.thin == 0 or at):
                    for k in range(D):
                        obs.kept[n_kept, k] = chain.position[k]
                    hyper_values(target, chain.hyper, obs.kept[n_kept, D:])
                    if n_kept < obs.kept_iter.size:
                        obs.kept_iter[n_kept] = i
                    n_kept += 1
    if n_iter > 0:
        chain.energy[0] = u
    return n_kept


def run_chain(target, chain, settings, n_iter, rec, obs, rng):
    """``n_iter`` iterations of [Gibbs update of the hyperparameters (when
    ``settings.gibbs``, once ``settings.initial_phase_steps`` leapfrog steps are
    done), transition of ``settings.kind`` (HMC, random-walk Metropolis or
    stochastic dynamics; with a ``settings.anneal`` schedule, annealed HMC or
    annealed Metropolis of eq 27)] on ``chain``, in place, in compiled code
    that holds only that transition (:func:`move_of`; releases the GIL).
    Iteration i is written to ``rec[..., i]``; ``obs`` is an
    :class:`Observers` or None. Returns the number of rows of ``obs.kept``
    written."""
    return _run_chain(target, chain, settings, n_iter, rec, obs, rng, move_of(settings))


def run_chain_ready(target, chain, settings, rec, obs, rng) -> bool | None:
    """Whether :func:`run_chain` with these arguments' types runs without
    compiling (:func:`~adaptive_hmc.jit.is_ready`)."""
    return is_ready(_run_chain, target, chain, settings, 0, rec, obs, rng, move_of(settings))


# -- Python-level transitions ----------------------------------------------------------

def _own(state: ChainState, counters=None) -> ChainState:
    """A chain holding copies of ``state``'s arrays (``counters``: others)."""
    c = copy_chain(state)
    return c if counters is None else c._replace(counters=counters)


class TransitionInfo(NamedTuple):
    accepted: bool        # moved to the proposal (accept window; Metropolis: to one of the iteration's proposals)
    accept_prob: float    # min(1, exp(-energy_error)) (Metropolis: the mean over the iteration's proposals);
                          # 1 for uncorrected dynamics (0 when it diverged)
    energy_error: float   # H(proposal) - H(current); for windows log(sum_reject e^-H / sum_accept e^-H)
    divergent: bool       # non-finite energy or gradient, or energy error above the limit
    num_steps: int        # leapfrog steps (gradient evaluations) used
    squared_jump: float = float("nan")   # ||proposal - current||^2 (Metropolis: see metropolis_kernel)


def init_state(model, position, hyper=None) -> ChainState:
    """A chain state of ``model`` at ``position`` with energy and gradient
    evaluated, zero momentum, and ``hyper`` (default: the model's initial one)."""
    q = np.array(position, dtype=np.float64)
    if q.shape != (model.dim,):
        raise ValueError(f"position has shape {q.shape}; expected ({model.dim},)")
    hyper = model.initial_hyper() if hyper is None else hyper.copy()
    u, g = model.energy_grad(q, hyper)
    return new_chain(q, hyper)._replace(grad=g, energy=np.array([float(u)]))


def checked(settings: HMCSettings, dim: int) -> HMCSettings:
    """``settings`` checked for a transition of a ``dim``-parameter model."""
    s = check_settings(settings)
    if s.step_size.size not in (0, 1, dim):
        raise ValueError(f"step_size has {s.step_size.size} entries; give one or {dim}")
    if s.low_rank.shape[0] and s.low_rank.shape[1] != dim + 1:
        raise ValueError(f"low_rank rows have {s.low_rank.shape[1]} entries; give 1 + {dim}")
    return s


def make_hmc(model, kind: str = "hmc"):
    """The [Gibbs, transition] iteration of :func:`run_chain` as a transition
    ``(state, settings, rng) -> (state, info)`` for ``model`` (a
    :class:`~adaptive_hmc.models.base.Model`); ``settings`` an
    :class:`~adaptive_hmc.samplers.settings.HMCSettings` (with ``gibbs`` false,
    the hyperparameters stay fixed) whose ``kind`` is set to ``kind``. The
    state given is not changed."""
    n_hyper = len(model.hyper_names())

    def transition(state: ChainState, settings: HMCSettings, rng):
        s = checked(settings._replace(kind=KINDS.index(kind)), model.dim)
        chain = _own(state)
        rec = Record(*(a[0] for a in new_record(1, 1, n_hyper)))
        run_chain(model.target, chain, s, 1, rec, None, rng)
        info = TransitionInfo(bool(rec.accepted[0] > 0), float(rec.accept_prob[0]), float(rec.energy_error[0]),
                              bool(rec.divergent[0]), int(rec.num_steps[0]), float(rec.squared_jump[0]))
        return chain, info

    return transition


def make_metropolis(model):
    """Random-walk Metropolis for ``model`` (:func:`make_hmc` with kind
    "metropolis"): ``num_steps`` proposals per iteration, the proposal sd of
    parameter k being its step size (``step_factor`` times the heuristic scale,
    or ``step_size``), randomised by ``step_nu``."""
    return make_hmc(model, "metropolis")


def make_stochastic_dynamics(model):
    """Uncorrected stochastic dynamics for ``model`` (:func:`make_hmc` with kind
    "stochastic_dynamics"): ``num_steps`` leapfrog steps after a refresh of the
    momentum with ``persistence``, no acceptance test."""
    return make_hmc(model, "stochastic_dynamics")


class Phase(NamedTuple):
    """A phase of an annealing schedule: ``iterations`` of [eq 24 with
    ``alpha`` and ``t0``, dynamical move]; Neal (1992): 10 x (0, 15),
    130 x (0.95, 1), 60 x (0, 1)."""

    iterations: int
    alpha: float
    t0: float


def sample(model, state: ChainState, settings: HMCSettings, n_iter: int, rng, every: int = 1):
    """``n_iter`` iterations of :func:`run_chain` (the transition of
    ``settings.kind``, annealed when ``settings.anneal`` holds a schedule,
    counted by the state's iteration counter) from ``state``, without
    observers. Returns (final state, trace, positions): the trace has per
    iteration the temperature measured from the momenta, the potential energy,
    the share of moves accepted and the energy evaluations used; positions
    (n_iter // every, D) are the states after every ``every``-th iteration."""
    s = checked(settings, model.dim)
    every, n_iter = int(every), int(n_iter)
    if every < 1 or n_iter < 0:
        raise ValueError(f"every={every}, n_iter={n_iter}: every >= 1 and n_iter >= 0")
    chain = _own(state)
    n_hyper = len(model.hyper_names())
    records, positions = [], []
    for start in range(0, n_iter, every):
        rec = Record(*(a[0] for a in new_record(1, min(every, n_iter - start), n_hyper)))
        run_chain(model.target, chain, s, rec.accepted.size, rec, None, rng)
        records.append(np.column_stack([rec.temperature, rec.energy, rec.accepted, rec.num_steps]))
        if rec.accepted.size == every:
            positions.append(chain.position.copy())
    trace = np.concatenate(records) if records else np.empty((0, 4))
    return chain, trace, np.array(positions).reshape(-1, model.dim)


def anneal(model, state: ChainState, phases, settings: HMCSettings, rng, metropolis: bool = False,
           kd: float | None = None, every: int = 1):
    """Run an annealing schedule (a list of :class:`Phase` or (iterations,
    alpha, t0), counted from this call) from ``state``: :func:`sample` with
    ``settings.anneal`` set to ``phases`` and kind hmc (``settings.num_steps``
    leapfrog steps a trajectory) or, with ``metropolis``, kind metropolis
    (``num_steps`` moves of eq 27 an iteration). The dummy kinetic energy
    starts at ``kd`` (default: the state's, or D/2). Returns (final state,
    final K_d, trace, positions) as :func:`sample` (Neal's Fig. 3 plots the
    trace's energy against its temperature)."""
    phases = [tuple(Phase(*ph)) for ph in phases]
    s = settings._replace(kind=METROPOLIS if metropolis else HMC, anneal=np.array(phases, dtype=float).reshape(-1, 3))
    start = _own(state, np.zeros(2, np.int64))
    if kd is not None:
        start.kd[0] = kd
    final, trace, positions = sample(model, start, s, int(sum(ph[0] for ph in phases)), rng, every)
    final = final._replace(counters=state.counters + final.counters)
    return final, float(final.kd[0]), trace, positions
