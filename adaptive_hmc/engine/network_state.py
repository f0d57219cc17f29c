"""The state of a network's chain set as one value (:class:`NetworkState`), what a
super-transition adds to it (:class:`Sums`, the sample store's unit), how a
step is folded in, and what a checkpoint holds of it.

Flow position: network_options -> **network_state** -> super_transition -> network_chains, store.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..samplers.chain import ChainState


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
    """The running sums of the :class:`Sums` fields of the same names over
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
    and their weight ``kept_weight`` (R,), and each kept row's
    ``kept_stats`` (:data:`KEPT_STATS`)."""

    pred: np.ndarray
    count: np.ndarray
    hyper: np.ndarray
    kept: tuple
    kept_weight: np.ndarray
    kept_stats: tuple


#: What is recorded of each kept row's iteration (the columns of :attr:`Sums.kept_stats`), in ArviZ's
#: names: the Hamiltonian U + K after the iteration (the selected state's, with its momentum: Stan's
#: ``energy__``), the log density -U, the acceptance probability, whether it diverged, its leapfrog steps;
#: and whether the row is a diagnostic draw (1) or only a ``thin``-th one (0) (super_transition.keep_at).
KEPT_STATS = ("energy", "lp", "acceptance_rate", "diverging", "n_steps", "diagnostic")


class NetworkState(NamedTuple):
    """The evolving state of a network's chain set, one value, never changed in
    place: :func:`super_transition` returns a new one. ``chains`` (one
    :class:`~adaptive_hmc.samplers.chain.ChainState` each), ``n_super``
    super-transitions done, ``streams_spawned`` random streams spawned, each
    chain's ``step_calibration``, the learned metric's ``step_scale`` (D,;
    empty: none yet) and the ``moments`` (R, 4, D) its present window has
    summed over ``moment_count`` iterations (:mod:`~adaptive_hmc.samplers.metric`), the low-rank metric's
    ``trace`` (R, n, 2, D) of its present window's draws and gradients and each chain's ``low_rank`` rows
    (R, r, D + 1; r 0: none); the running ``totals`` and the ``history``
    (one :class:`Entry` per super-transition), which a resume rebuilds by
    replaying the sample store's steps (:data:`REPLAYED`)."""

    chains: tuple
    n_super: int
    streams_spawned: int
    step_calibration: np.ndarray
    totals: Totals
    history: tuple
    step_scale: np.ndarray
    moments: np.ndarray
    moment_count: int
    trace: np.ndarray
    low_rank: np.ndarray


#: The fields of :class:`NetworkState` that a resume rebuilds from the sample
#: store (:func:`fold` of each step); a checkpoint holds the others.
REPLAYED = ("totals", "history")


def fold(setup: "NetworkChains", state: NetworkState, step: "Sums") -> NetworkState:
    """The state after one super-transition's :class:`Sums`, as a run does
    after each and as a resume replays them from the sample store (the same
    operations in the same order, so the totals come back bit for bit)."""
    totals = Totals(*(np.logaddexp(t, step.lse) if f == "lse" else t + getattr(step, f)     # the Sums's sums
                      for f, t in zip(Totals._fields, state.totals)))
    entry = Entry(step.pred * setup.target_sd[:, None] + setup.target_mean[:, None] * step.count[:, None, None],
                  step.count, step.hyper, tuple(step.kept), np.asarray(step.kept_weight, dtype=np.float64),
                  tuple(step.kept_stats))
    return state._replace(n_super=state.n_super + 1, totals=totals, history=state.history + (entry,))


def checkpoint_state(state: NetworkState) -> dict:
    """What a checkpoint holds of ``state``: its fields but :data:`REPLAYED`,
    walked (chains as lists of arrays, :func:`chain_arrays`)."""
    return {f: [[a.copy() for a in chain_arrays(c)] for c in v] if f == "chains" else
            (v.copy() if isinstance(v, np.ndarray) else v)
            for f, v in zip(state._fields, state) if f not in REPLAYED}


def restore_state(setup: "NetworkChains", saved: dict, steps) -> NetworkState:
    """The state of :func:`checkpoint_state` ``saved``, its :data:`REPLAYED`
    fields rebuilt by folding the stored ``steps`` (every super-transition's
    :class:`Sums` up to the checkpoint, in order) into ``setup``'s start."""
    start = setup.initial
    if len(saved["chains"]) != len(start.chains):
        raise ValueError(f"state has {len(saved['chains'])} chains; this set has {len(start.chains)}")
    fields = {f: tuple(chain_from_arrays(c, a) for c, a in zip(start.chains, saved[f])) if f == "chains" else
              np.array(saved[f], dtype=np.float64) if isinstance(getattr(start, f), np.ndarray) else saved[f]
              for f in NetworkState._fields if f not in REPLAYED and f != "n_super" and f in saved}
    state = start._replace(**fields)
    for step in steps:
        state = fold(setup, state, step)
    if state.n_super != saved["n_super"]:
        raise ValueError(f"the sample store holds {state.n_super} super-transitions; the checkpoint "
                         f"{saved['n_super']}")
    return state




class Sums(NamedTuple):
    """What one super-transition adds, per chain (R chains, out outputs, N
    test cases, H hyperparameters): the weighted sums of its retained
    samples' test predictions ``pred`` and squares ``sq`` (R, out, N), noise
    variances ``var`` (R, out), the log of the weighted sum of p(y | sample)
    ``lse`` (R, N), in the chains' units; the sum of the weights ``count`` and
    the number ``retained`` (R,); the hyperparameters at its end ``hyper``
    (R, H); the ``kept`` rows of each chain (positions then hyperparameter
    values) and the weight of each chain's kept rows ``kept_weight`` (R,);
    each kept row's iteration's ``kept_stats`` (n_j, :data:`KEPT_STATS`).
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
    kept_stats: list
