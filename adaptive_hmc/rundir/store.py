"""The sample store: every super-transition's :class:`~adaptive_hmc.engine.network_state.Sums`
(prediction sums, hyperparameters, kept weight vectors with their weights),
appended as the run goes and never rewritten; and the atomic writes every
run file goes through.

Flow position: network_chains -> **store** -> results. The store is a folder of
npz shards, ``store/000000.npz``, ``store/000017.npz``, ..., each holding the
super-transitions from the one its name gives up to the next shard's:
plain NumPy files that ``numpy.load`` opens without this package, written
while the run runs (so a running run's samples can be read), each one
written once. npz because the rest of the run directory is npz, NumPy reads
it everywhere, and a shard per checkpoint keeps every write atomic (a kill
leaves whole shards or a ``.tmp``, never half a row) without HDF5's or
Zarr's dependencies and file-locking rules. Arrays of a shard of n
super-transitions of R chains (out outputs, N test cases, H hyperparameters):

- ``pred``, ``sq`` (n, R, out, N), ``var`` (n, R, out), ``lse`` (n, R, N),
  ``count``, ``retained`` (n, R), ``hyper`` (n, R, H): :class:`Sums`'s fields;
- ``kept_rows`` (m, positions + H), with ``kept_step`` (m,) (the
  super-transition, counted in the run) and ``kept_chain`` (m,);
  ``kept_weight`` (n, R): the weight of each chain's kept rows; ``kept_stats``
  (m, 5): each kept row's iteration's Hamiltonian, log density, acceptance
  probability, divergence, leapfrog steps and whether it is a diagnostic
  draw (``KEPT_STATS``).
"""
from __future__ import annotations

import io
import os
import shutil
import zipfile
import zlib
from pathlib import Path

import numpy as np

from ..engine.network_state import KEPT_STATS, Sums

STORE = "store"
#: What reading a damaged npz file (truncated, bit-flipped, another file's arrays) raises.
DAMAGED_NPZ = (OSError, ValueError, EOFError, KeyError, IndexError, zipfile.BadZipFile, zlib.error)


def npz_problem(e: Exception) -> str:
    """What is wrong with a file that ``numpy.load(..., allow_pickle=False)`` refused, in the package's
    words: NumPy's advice to load a pickle with ``allow_pickle=True`` is never one a user should follow
    (a run never writes a pickle, and loading one runs whatever code it holds)."""
    if "pickle" in str(e).lower():
        return "it holds a pickle (Python objects), which no run writes and this package never loads"
    return f"{type(e).__name__}: {e}"
_ARRAYS = tuple(f for f in Sums._fields if f not in ("kept", "kept_stats"))   # kept rows: by row, with their chain


def atomic_write(path: Path, data: bytes, previous: Path | None = None) -> None:
    """Write via a temporary file and rename, so a kill never leaves half a
    file; a failed write (a full disk) removes its temporary file. With
    ``previous``, the file being replaced is kept under that name, once the
    new one is whole."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if previous is not None and path.is_file():
            os.replace(path, previous)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_netcdf(idata, path: Path) -> None:
    """ArviZ InferenceData ``idata`` written to ``path`` as :func:`atomic_write` writes bytes: whole, then
    renamed (a failed write removes its temporary file)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        idata.to_netcdf(str(tmp))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def npz_bytes(compress: bool = True, **arrays) -> bytes:
    buf = io.BytesIO()
    (np.savez_compressed if compress else np.savez)(buf, **arrays)
    return buf.getvalue()


class SumsCodec:
    """A network run's unit, a super-transition's :class:`~adaptive_hmc.engine.network_state.Sums`,
    as a shard's arrays (the module's docstring lists them); several super-transitions a shard."""

    compress = False

    @staticmethod
    def encode(steps: list, first: int) -> dict:
        arrays = {k: np.stack([getattr(s, k) for s in steps]) for k in _ARRAYS}
        rows = [(first + i, j, r) for i, s in enumerate(steps) for j, chain in enumerate(s.kept) for r in chain]
        arrays["kept_rows"] = np.array([r for _, _, r in rows]) if rows else np.empty((0, 0))
        arrays["kept_step"] = np.array([i for i, _, _ in rows], dtype=np.int64)
        arrays["kept_chain"] = np.array([j for _, j, _ in rows], dtype=np.int64)
        stats = [r for s in steps for chain in s.kept_stats for r in chain]
        arrays["kept_stats"] = np.array(stats) if stats else np.empty((0, len(KEPT_STATS)))
        return arrays

    @staticmethod
    def decode(a: dict, first: int) -> list:
        R, steps = a["count"].shape[1], []
        for i in range(a["count"].shape[0]):
            mine = a["kept_step"] == first + i
            kept = [a["kept_rows"][mine & (a["kept_chain"] == j)] for j in range(R)]
            stats = a.get("kept_stats", np.full((len(a["kept_step"]), len(KEPT_STATS)), np.nan))  # older stores: none
            steps.append(Sums(**{k: a[k][i] for k in _ARRAYS}, kept=kept,
                              kept_stats=[stats[mine & (a["kept_chain"] == j)] for j in range(R)]))
        return steps


#: The network runs' codec.
SUMS = SumsCodec()


class SampleStore:
    """The shards in folder ``path`` (it need not exist yet), each holding the
    units (a super-transition's what-it-adds) that ``codec`` encodes and
    decodes: :data:`SUMS` for a network run, a density run's draws
    (:data:`~adaptive_hmc.rundir.density_checkpoint.DRAWS`)."""

    def __init__(self, path, codec=SUMS):
        self.path, self.codec = Path(path), codec

    def shards(self) -> list:
        """(first super-transition, path) of every whole shard, in order."""
        if not self.path.is_dir():
            return []
        return sorted((int(p.stem), p) for p in self.path.glob("*.npz") if p.stem.isdigit())

    def append(self, steps: list, first: int) -> None:
        """Write ``steps`` (super-transitions ``first``, ``first + 1``, ...) as one shard."""
        if not steps:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path / f"{first:06d}.npz",
                     npz_bytes(compress=self.codec.compress, **self.codec.encode(steps, first)))

    def truncate(self, n_super: int) -> None:
        """Remove the shards of super-transitions from ``n_super`` on (written
        after the checkpoint a resume starts from) and stray ``.tmp`` files."""
        for first, p in self.shards():
            if first >= n_super:
                p.unlink()
        if self.path.is_dir():
            for p in self.path.glob("*.tmp"):
                p.unlink()

    def read(self, n_super: int | None = None) -> list:
        """The unit (a network's :class:`~adaptive_hmc.engine.network_state.Sums`)
        of every stored super-transition (the first ``n_super``); ValueError
        when a shard is missing or damaged."""
        steps = []
        for first, p in self.shards():
            if n_super is not None and first >= n_super:
                break
            if first != len(steps):
                raise ValueError(f"{self.path}: super-transitions {len(steps)} to {first - 1} are missing")
            try:
                with np.load(p, allow_pickle=False) as z:
                    a = {k: z[k] for k in z.files}
                steps.extend(self.codec.decode(a, first))
            except DAMAGED_NPZ as e:
                raise ValueError(f"{p}: damaged ({npz_problem(e)})") from None
        if n_super is not None and len(steps) != n_super:
            raise ValueError(f"{self.path}: holds {len(steps)} super-transitions, the checkpoint {n_super}")
        return steps

    def remove(self) -> None:
        """Remove the store (a run that starts over)."""
        if self.path.is_dir():
            shutil.rmtree(self.path)
