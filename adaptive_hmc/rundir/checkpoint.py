"""The checkpoint codec: a run's state (the chains, their counters, the
tuner, the log's length, the sampling time) as npz bytes with a format
version and a SHA-256 checksum, and back. Data, never pickles: anything else
is refused. The state's fields are walked, not listed here.

Flow position: store -> **checkpoint** -> results.
"""
from __future__ import annotations

import hashlib
import io
import json
import zipfile
import zlib
from typing import NamedTuple

import numpy as np

from .store import npz_bytes, npz_problem

#: 2: each chain's dummy kinetic energy (annealing); 3: kept rows' weights; 4: state only (samples in the store)
CHECKPOINT_FORMAT = 4


class Checkpoint(NamedTuple):
    """What a run needs, beside its sample store and log, to go on exactly where it stopped."""

    chains: dict       # the chain set's checkpoint(): its chains, counters, step calibration (and a run's extras)
    tuner: dict        # the tuner's state_dict()
    n_log: int         # entries of log.jsonl that belong to it
    wall_s: float      # sampling time so far


def _checksum(arrays: dict) -> str:
    h = hashlib.sha256()
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def pack_checkpoint(ck: Checkpoint) -> bytes:
    """The checkpoint as npz bytes: the state's arrays, one JSON record of the
    rest (its scalars, the tuner, the log's length), a checksum. The state's
    fields are walked, not listed: :class:`NetworkState` is their one list."""
    arrays, scalars = {}, {}
    for key, value in ck.chains.items():
        if key == "chains":
            arrays.update({f"chain/{r}/{i}": a for r, chain in enumerate(value) for i, a in enumerate(chain)})
            scalars["chain_arrays"] = [len(c) for c in value]
        elif isinstance(value, np.ndarray):
            arrays[f"state/{key}"] = value
        else:
            scalars[key] = value
    record = {"format": CHECKPOINT_FORMAT, "state": scalars, "tuner": ck.tuner, "n_log": ck.n_log,
              "wall_s": ck.wall_s}
    arrays["record"] = np.frombuffer(json.dumps(record).encode(), np.uint8)
    arrays["checksum"] = np.frombuffer(_checksum(arrays).encode(), np.uint8)
    return npz_bytes(**arrays)


def unpack_checkpoint(data: bytes) -> Checkpoint:
    """Inverse of :func:`pack_checkpoint`; ValueError for anything that is not
    an intact checkpoint of this format."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, RuntimeError, zipfile.BadZipFile, zlib.error) as e:
        raise ValueError(f"not an npz archive ({npz_problem(e)})") from None
    if "checksum" not in arrays or "record" not in arrays:
        raise ValueError("no checksum or record: not a checkpoint of this package")
    stored = arrays.pop("checksum").tobytes().decode("ascii", "replace")
    if stored != _checksum(arrays):
        raise ValueError("checksum mismatch: the file is damaged")
    record = json.loads(arrays["record"].tobytes())
    if record.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"format {record.get('format')!r}; this version reads format {CHECKPOINT_FORMAT}")
    state = dict(record["state"])
    state["chains"] = [[arrays[f"chain/{r}/{i}"] for i in range(n)] for r, n in enumerate(state.pop("chain_arrays"))]
    state.update({k.removeprefix("state/"): v for k, v in arrays.items() if k.startswith("state/")})
    return Checkpoint(state, record["tuner"], int(record["n_log"]), float(record["wall_s"]))


class NoIntactCheckpoint(ValueError):
    """Neither a checkpoint nor the one before it can be read; the message says why for each."""


def newest_intact(path, previous, what: str = "an intact checkpoint of this package") -> tuple:
    """(checkpoint, note) of the newest intact of checkpoint ``path`` and the one before it, ``previous``
    (note: "" or why the newest was not used), the one reader of every kind of run's checkpoints;
    :class:`NoIntactCheckpoint` when neither is intact (``what``: what a damaged one is not)."""
    problems = []
    for p in (path, previous):
        try:
            ck = unpack_checkpoint(p.read_bytes())
        except FileNotFoundError:
            problems.append(f"{p}: missing")
            continue
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            problems.append(f"{p}: not {what} ({e})")
            continue
        return ck, "" if p == path else f"{problems[0]}; resuming from the previous checkpoint ({p})"
    raise NoIntactCheckpoint("; ".join(problems))
