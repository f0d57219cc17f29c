"""What a density run (:func:`~adaptive_hmc.front.general.sample`) keeps in a
run directory beside a network run's: the store's codec of its unit (a
super-transition's draws and per-draw statistics) and the key a checkpoint
must share with the run that resumes it. The directory, its checkpoints, log
and store are the run directory's (:class:`~adaptive_hmc.rundir.results.RunDir`),
the same for both kinds of run.

Flow position: store -> **density_checkpoint** -> results.
"""
from __future__ import annotations

import hashlib

import numpy as np

from ..engine.network_options import as_seed_sequence


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


def key_problem(saved: dict, key: dict) -> str | None:
    """Why a checkpoint written with key ``saved`` cannot go on as the run of ``key`` (None: it can)."""
    saved = {k: v for k, v in saved.items() if k not in LENGTH}
    differ = sorted(k for k in set(key) | set(saved) if key.get(k) != saved.get(k))
    return f"written by a run with other {', '.join(differ)}" if differ else None


class DrawsCodec:
    """A density run's unit in the sample store: one super-transition's draws
    (R, n, D) and per-draw statistics ({name: (R, n)}; n varies with L), as
    arrays ``I/draws`` and ``I/stats/NAME`` of the shard's I-th unit."""

    compress = True

    @staticmethod
    def encode(units: list, first: int) -> dict:
        out = {}
        for i, (draws, stats) in enumerate(units):
            out[f"{i}/draws"] = draws
            out.update({f"{i}/stats/{k}": v for k, v in stats.items()})
        return out

    @staticmethod
    def decode(a: dict, first: int) -> list:
        n = sum(1 for k in a if k.endswith("/draws"))
        return [(a[f"{i}/draws"], {k.removeprefix(f"{i}/stats/"): v for k, v in a.items()
                                   if k.startswith(f"{i}/stats/")}) for i in range(n)]


#: The density runs' codec.
DRAWS = DrawsCodec()
