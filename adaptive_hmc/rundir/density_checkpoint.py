"""The checkpoint of :func:`~adaptive_hmc.front.general.sample`: the chains'
state in the package's one checkpoint codec (:mod:`~adaptive_hmc.rundir.checkpoint`:
versioned, checksummed, never a pickle), written atomically with the one
before it kept, and the draws appended once, a shard per super-transition.

Flow position: store, checkpoint, tuners -> **density_checkpoint** -> general.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from .checkpoint import Checkpoint, NoIntactCheckpoint, newest_intact, pack_checkpoint
from ..engine.replica_options import as_seed_sequence
from .store import SampleStore, atomic_write

class CheckpointError(ValueError):
    """A checkpoint of :func:`~adaptive_hmc.front.general.sample` that cannot be resumed (damaged, or another run's)."""


#: What a checkpoint's key may hold (as those written before runs could be extended did) that a resume need not
#: share: the run's length (more extends it).
LENGTH = ("super_transitions",)


def run_key(q0, seed, **settings) -> dict:
    """What a checkpoint must share with the run that resumes or extends it
    (everything but the run's length)."""
    seed_repr = seed if isinstance(seed, (int, np.integer)) else repr(as_seed_sequence(seed).entropy)
    return dict(settings, seed=int(seed_repr) if isinstance(seed_repr, (int, np.integer)) else seed_repr,
                starts=hashlib.sha256(np.ascontiguousarray(q0).tobytes()).hexdigest(), shape=list(q0.shape))


class DrawsCodec:
    """A density run's unit in the sample store: one super-transition's draws
    (R, n, D), statistics ({name: (R, n)}) and log entry, a shard each (its
    draws' count varies with L): arrays ``draws``, ``log`` (JSON) and ``stats/NAME``."""

    compress = True

    @staticmethod
    def encode(units: list, first: int) -> dict:
        (draws, stats, entry), = units
        return dict(draws=draws, log=np.array(json.dumps(entry)), **{f"stats/{k}": v for k, v in stats.items()})

    @staticmethod
    def decode(a: dict, first: int) -> list:
        return [(a["draws"], {k.removeprefix("stats/"): v for k, v in a.items() if k.startswith("stats/")},
                 json.loads(str(a["log"])))]


#: The density runs' codec.
DRAWS = DrawsCodec()


def draws_dir(path: Path) -> Path:
    """The folder beside checkpoint ``path`` that holds the draws, one shard a super-transition (``NAME.draws``)."""
    return path.with_name(f"{path.stem}.draws")


def previous_checkpoint(path: Path) -> Path:
    """Where the checkpoint before the newest is kept (``NAME.prev.npz`` beside ``NAME.npz``)."""
    return path.with_name(f"{path.stem}.prev{path.suffix}")


def save(path: Path, key: dict, chains, run: dict, bandit, log: list, stats: list) -> None:
    """The state of a run after warm-up or a super-transition: the draws,
    statistics and log entries of the super-transitions not yet stored, each
    in a shard of its own (written once: what a run writes per
    super-transition does not grow with it), then the checkpoint (the chains,
    streams, tuner, counts), each atomically; the checkpoint before is kept."""
    store = SampleStore(draws_dir(path), DRAWS)
    for i in range(chains.draws_stored, len(stats)):
        store.append([(np.stack([d[i] for d in chains.draws]), stats[i], log[i])], i)
    chains.draws_stored = len(stats)
    state = dict(chains.checkpoint(), key=key, run=run, stored=len(stats))
    ck = Checkpoint(state, bandit.state_dict(), len(log), float(sum(e["seconds"] for e in log)))
    atomic_write(path, pack_checkpoint(ck), previous=previous_checkpoint(path))


def _read_shards(path: Path, n: int) -> tuple:
    """(draws per chain per super-transition, stats, log) of the first ``n``
    super-transitions in the store beside checkpoint ``path``, those after them
    (written before a kill reached the checkpoint) removed; CheckpointError when
    one is missing or damaged."""
    store = SampleStore(draws_dir(path), DRAWS)
    store.truncate(n)
    try:
        units = store.read(n)
    except ValueError as e:
        prev = previous_checkpoint(path)
        raise CheckpointError(f"{e}: the draws are missing or damaged; remove {path}, {prev} and {store.path} to "
                              f"start again") from None
    draws = [[u[0][j] for u in units] for j in range(units[0][0].shape[0])] if units else None
    return draws, [u[1] for u in units], [u[2] for u in units]


def _read_checkpoint(path: Path) -> tuple:
    """(checkpoint, note) of the newest intact of checkpoint ``path`` and the
    one before it (:func:`~adaptive_hmc.rundir.checkpoint.newest_intact`); CheckpointError
    when neither is intact."""
    try:
        return newest_intact(path, previous_checkpoint(path), "a checkpoint of sample()")
    except NoIntactCheckpoint as e:
        raise CheckpointError(f"{e}; remove them or give another checkpoint path (a run's --out) to start "
                              f"again") from None


def restore(path: Path, key: dict, chains) -> tuple:
    """(run, tuner, log, stats, note) of checkpoint ``path`` (or the one before
    it when it is damaged; the note says so), its chains and draws put back
    into ``chains`` (:meth:`~adaptive_hmc.engine.density_chains.DensityChains.restore`)."""
    from ..tuners.registry import tuner_from_state
    ck, note = _read_checkpoint(path)
    state = ck.replicas
    saved = {k: v for k, v in state["key"].items() if k not in LENGTH}
    differ = sorted(k for k in set(key) | set(saved) if key.get(k) != saved.get(k))
    if differ:
        raise CheckpointError(f"checkpoint {path}: written by a run with other {', '.join(differ)}; resume with the "
                              f"same arguments, or give another checkpoint path (a run's --out)")
    draws, stats, log = _read_shards(path, state["stored"])
    chains.restore(state, draws)
    chains.draws_stored = state["stored"]
    return state["run"], tuner_from_state(ck.tuner), log, stats, note
