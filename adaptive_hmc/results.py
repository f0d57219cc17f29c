"""The run directory: file names, the log, atomic writes, checkpoints, the
summary, and :func:`read_run`, which returns a finished run as one typed object.

Flow position: runner -> **results** -> reports, plots, CLI. Everything else
reads and writes run directories only through this module. Layout::

    config.resolved.yaml  metadata.json  log.jsonl  store/  checkpoint.npz  checkpoint.prev.npz  .lock
    predictions.npz  samples.npz  tuner.json  summary.json  plots/

The samples go to the append-only sample store (:mod:`~adaptive_hmc.store`),
written once; the log is appended a line per super-transition. A checkpoint
holds state only (the chains' arrays, random-stream and super-transition
counters, the tuner's state, the log's length, the sampling time), so its
size does not grow with the run; the one before it is kept, and a damaged
newest checkpoint falls back to it. Checkpoints are data, never pickles:
arrays in an npz, the tuner as JSON inside it, with a format version and a
SHA-256 checksum; anything else is refused. A ``.tmp`` file is never taken
for the file it was to become. A run holds an exclusive lock on its
directory while it works.
"""
from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import platform
import sys
import time
import zipfile
import zlib
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import NamedTuple

import numpy as np
import yaml

from .config import Config, ConfigError, parse, to_dict
from .data import Standardizer
from .diagnostics import RHAT_LIMIT, compute_spaced, diagnose
from .models.mlp import MLPSpec, predict
from .models.predictive import predictive_moments, predictive_probabilities
from .replicas import ReplicaSet, chain_indices
from .runner import LogEntry
from .store import STORE, SampleStore, atomic_write, npz_bytes
from .tuners import BanditTuner, FixedTuner

CONFIG, METADATA, LOG = "config.resolved.yaml", "metadata.json", "log.jsonl"
CHECKPOINT, PREVIOUS = "checkpoint.npz", "checkpoint.prev.npz"
PREDICTIONS, SAMPLES = "predictions.npz", "samples.npz"
TUNER, SUMMARY, PLOTS, LOCK = "tuner.json", "summary.json", "plots", ".lock"
#: Files a run writes when it starts, before its first checkpoint.
START_FILES = {CONFIG, METADATA, LOG, LOCK, STORE}
#: 2: each chain's dummy kinetic energy (annealing); 3: kept rows' weights; 4: state only (samples in the store)
CHECKPOINT_FORMAT = 4


class RunError(ValueError):
    """A run directory that cannot be used as asked; the message says what to do."""


def _npz(**arrays) -> bytes:
    return npz_bytes(compress=True, **arrays)


def _json(obj) -> bytes:
    return json.dumps(obj, indent=2).encode()


def resolved_config(cfg: Config) -> bytes:
    """The config as the run directory stores it (every default filled in)."""
    return yaml.safe_dump(to_dict(cfg), sort_keys=False).encode()


def versions() -> dict:
    out = {"python": sys.version.split()[0]}
    for pkg in ("adaptive_hmc", "numpy", "scipy", "scikit-learn", "numba"):
        try:
            out[pkg] = importlib_metadata.version(pkg)
        except importlib_metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


#: A super-transition whose mean acceptance is below this mixes poorly (issue of tuning, not of luck).
LOW_ACCEPTANCE = 0.2
#: Fewest kept samples of a chain for per-sample draws (below it, super-transition means are used).
MIN_KEPT = 50


def kept_samples(replicas: ReplicaSet) -> dict:
    """The kept samples of every chain as :func:`prediction_draws` and
    :func:`hyper_draws` take them (the arrays samples.npz stores)."""
    W, noise, chain = replicas.samples()
    A, _, _ = replicas.kept_rows()
    return {"weights": W, "noise_precision": noise, "chain": chain, "weight": replicas.kept_weights(),
            "hyper": A[:, replicas.dim:], "target_mean": replicas.target_mean, "target_sd": replicas.target_sd}


def _spaced_draws(kept: dict, rows, values) -> np.ndarray:
    """Draws (chains, draws, ...) of ``values(mask)`` (one row per kept
    sample of the chain ``mask`` selects), spaced by the samples' weights
    (:func:`~adaptive_hmc.diagnostics.compute_spaced`, at most twice as many
    draws as kept samples), each chain cut to the shortest."""
    out = []
    for r in rows:
        mine = kept["chain"] == r
        out.append(values(mine)[compute_spaced(kept["weight"][mine], max_draws=2 * int(mine.sum()))])
    n = min(len(x) for x in out)
    return np.stack([x[:n] for x in out])


def _kept_per_chain(kept: dict, rows) -> int:
    """The fewest kept samples of the chains ``rows``."""
    chain = kept["chain"]
    return int((np.bincount(chain, minlength=max(rows) + 1)[rows] if chain.size else np.zeros(len(rows), int)).min())


def prediction_draws(spec: MLPSpec, kept: dict, rows, X_test, history_pred, history_count) -> tuple:
    """(draws, kind): draws (chains, draws, cases x outputs) of the test
    predictions after burn-in of chains ``rows``. From the kept samples
    (``kept``: weights (S, D), chain and weight (S,), target_mean and
    target_sd; every ``thin``-th retained sample, network outputs at the test
    inputs in the targets' units) when every chain kept at least
    :data:`MIN_KEPT`, spaced by their weights
    (:func:`_spaced_draws`; ``run.weight_by``); otherwise one draw per super-transition in which every chain retained
    samples, the mean prediction of its samples (``history_pred`` (S, R, out,
    N) sums, ``history_count`` (S, R)). Chains are cut to the shortest."""
    fewest = _kept_per_chain(kept, rows)
    if fewest >= MIN_KEPT or (np.size(history_pred) == 0 and fewest >= 4):
        def outputs(mine):
            F = predict(spec, kept["weights"][mine], X_test)                      # (S, N, out)
            if spec.likelihood == "gaussian":
                F = kept["target_mean"] + kept["target_sd"] * F
            return F.reshape(len(F), -1)
        return _spaced_draws(kept, rows, outputs), "samples"
    P, C = np.asarray(history_pred), np.asarray(history_count)
    if P.size == 0:
        return np.zeros((len(rows), 0, 0)), "none"
    P, C = P[:, rows], C[:, rows]
    keep = np.all(C > 0, axis=1)
    d = P[keep] / C[keep][:, :, None, None]                                         # (S, R, out, N)
    return (np.transpose(d, (1, 0, 3, 2)).reshape(len(rows), int(keep.sum()), P.shape[2] * P.shape[3]),
            "super-transition means")


def hyper_draws(kept: dict, rows, history_hyper) -> np.ndarray:
    """Draws (chains, draws, H') of the logs of the hyperparameters that vary
    (fixed ones are left out) of chains ``rows``: the kept samples' when every
    chain kept :data:`MIN_KEPT`, else each super-transition's last."""
    if _kept_per_chain(kept, rows) >= MIN_KEPT:
        y = _spaced_draws(kept, rows, lambda mine: kept["hyper"][mine])
    else:
        H = np.asarray(history_hyper)
        y = np.transpose(H[:, rows], (1, 0, 2)) if H.size else np.empty((len(rows), 0, 0))
    varying = np.ptp(y.reshape(-1, y.shape[2]), axis=0) > 0 if y.size else np.zeros(0, bool)
    return np.log(y[:, :, varying])


def run_diagnostics(spec: MLPSpec, kept: dict, rows, chains: str, predictions: dict, test_slices: dict,
                    history_hyper, gradients: int, seconds: float) -> dict:
    """summary.json's ``diagnostics``: R-hat and bulk and tail ESS across the
    predicting chains ``rows`` (``chains``) of the test predictions of each
    test set and of the hyperparameters
    (:func:`~adaptive_hmc.diagnostics.diagnose`); ESS per 1000 of every
    gradient the run computed (all chains, warm-up and burn-in included) and
    per second of sampling. Empty when there are fewer than 4 draws."""
    y, kind = prediction_draws(spec, kept, rows, predictions["X_test"], predictions["history_pred"],
                               predictions["history_count"])
    if y.shape[1] < 4:
        return {}
    n_out = spec.n_outputs
    distinct = int(np.isin(kept["chain"], rows).sum()) if kind == "samples" else y.shape[0] * y.shape[1]
    out = {"chains": chains, "draws": kind, "distinct_draws": distinct, "gradients": int(gradients),
           "sampling_s": round(seconds, 2), "test": {}}
    for name, sl in test_slices.items():
        cols = (np.arange(sl.start, sl.stop)[:, None] * n_out + np.arange(n_out)).ravel()
        out["test"][name] = diagnose(y[:, :, cols], gradients, seconds)
    h = hyper_draws(kept, rows, history_hyper)
    out["hyper"] = diagnose(h, gradients, seconds) if h.size and h.shape[1] >= 4 else None
    found = [d["rhat_max"] for d in [*out["test"].values(), out["hyper"]] if d is not None]
    out["rhat_max"] = None if None in found else max(found, default=None)
    return out


def diagnostics_line(summary: dict) -> str:
    """One line of a finished run's answer and what it cost: the chains that
    predict, the largest R-hat, the smallest and median ESS of the first test
    set's predictions, per 1000 gradients and per second of sampling."""
    d = summary.get("diagnostics") or {}
    if not d.get("test"):
        return f"{summary['leapfrog_steps']:,} gradients, {summary['wall_s']:.1f} s sampling (no test-set ESS)"
    name, t = next(iter(d["test"].items()))
    r = d["rhat_max"]
    per_g, per_s = t["ess_per_1000_gradients"], t["ess_per_second"]
    bound = (" (a lower bound: near the number of kept draws; a smaller run.thin measures more)"
             if thin_limited(d) else "")
    return (f"{t['chains']} {d['chains']!r} chains; R-hat max {'not finite' if r is None else f'{r:.3f}'}; "
            f"ESS of the {name} predictions (smallest / median over outputs) {t['ess_bulk']['min']:.0f} / "
            f"{t['ess_bulk']['median']:.0f}, per 1000 gradients {per_g['min']:.3f} / {per_g['median']:.3f} "
            f"({d['gradients']:,} gradients, every chain), per second {per_s['min']:.2f} / {per_s['median']:.2f} "
            f"({d['sampling_s']:.1f} s sampling, compiling apart){bound}")


def thin_limited(diagnostics: dict) -> bool:
    """Whether the median ESS of a test set's predictions exceeds half the
    number of distinct draws it was measured on: the kept samples
    (``run.thin``) then limit the figure, which is a lower bound of the
    answer's ESS."""
    d = diagnostics or {}
    return any(t["ess_bulk"]["median"] > 0.5 * d["distinct_draws"] for t in d.get("test", {}).values())


def rhat_warning(diagnostics: dict) -> str | None:
    """A warning when the chains have not met (R-hat above
    :data:`~adaptive_hmc.diagnostics.RHAT_LIMIT`, or a quantity stuck in a chain)."""
    if not diagnostics or diagnostics.get("chains") is None:
        return None
    r = diagnostics["rhat_max"]
    if r is not None and r <= RHAT_LIMIT:
        return None
    shown = "not finite (a chain never moved)" if r is None else f"{r:.3f}"
    return (f"the largest R-hat across the {diagnostics['chains']!r} chains is {shown}, above {RHAT_LIMIT}: the "
            f"chains have not met, so their answer is not yet the posterior's (run longer, or see the log for "
            f"stuck chains)")


def summarize(replicas: ReplicaSet, log: list, wall_s: float, cfg: Config, compile_s: float = 0.0,
              kept: dict | None = None) -> dict:
    """summary.json: test errors per test set, CV error, acceptance, divergences,
    stuck chains and the share of post-warm-up super-transitions with mean
    acceptance below :data:`LOW_ACCEPTANCE`, leapfrog steps (every gradient of
    every chain), wall time (sampling only) and compile time, final action, and
    the multi-chain diagnostics of the predicting chains
    (:func:`run_diagnostics`; ``kept``: :func:`kept_samples`, when the caller has them)."""
    chains = cfg.replicas.predict_from
    rows = replicas.chain_indices(chains)
    metrics = replicas.metrics(chains) if replicas.test_count[rows].sum() > 0 else {}
    gradients = int(sum(e["leapfrog_steps"] for e in log))
    diagnostics = run_diagnostics(replicas.spec, kept or kept_samples(replicas), rows, chains,
                                  {"X_test": replicas.X_test, "history_pred": replicas.history_pred,
                                   "history_count": replicas.history_count}, replicas.test_slices,
                                  replicas.history_hyper, gradients, wall_s) if replicas.history_pred else {}
    burn = cfg.run.burn_in.super_transitions
    cv = [e["cv_error"] for e in log[burn:] if e["cv_error"] is not None]
    key = "mse" if replicas.spec.likelihood == "gaussian" else "error_rate"
    return {
        "name": cfg.name, "data": cfg.data.dataset or Path(cfg.data.path).stem, "seed": cfg.run.seed,
        "tuner": cfg.tuner.kind, "predict_from": chains,
        f"test_{key}": {n: m[key] for n, m in metrics.items()},
        f"test_{key}_se": {n: m[f"{key}_se"] for n, m in metrics.items()},
        "test_mlpd": {n: m["mlpd"] for n, m in metrics.items()},
        "cv_error": float(np.mean(cv)) if cv else None,
        "acceptance": float(np.mean([np.mean(e["acceptance"]) for e in log])) if log else None,
        "divergences": int(sum(e["divergences"] for e in log)),
        "stuck_super_transitions": sum(1 for e in log if e["stuck_chains"]),
        "low_acceptance_share": _low_share(log[cfg.tuner.warmup_super_transitions if cfg.tuner.kind == "bandit"
                                               else 0:]),
        "leapfrog_steps": gradients,
        "super_transitions": len(log), "samples_retained": int(replicas.retained.sum()),
        "final_action": {"step_factor": log[-1]["step_factor"], "num_steps": log[-1]["num_steps"]} if log else None,
        "wall_s": round(wall_s, 2), "compile_s": round(compile_s, 2),
        "step_calibration": [round(float(c), 6) for c in replicas.step_calibration],
        "diagnostics": diagnostics,
    }


TIMINGS = ("wall_s", "compile_s", "sampling_s", "ess_per_second")


def untimed(summary):
    """The summary without its timings (:data:`TIMINGS`, at any depth): what
    the seed alone decides, whatever the machine, the thread count or a resume."""
    if isinstance(summary, dict):
        return {k: untimed(v) for k, v in summary.items() if k not in TIMINGS}
    return summary


def _low_share(log: list) -> float | None:
    """Share of the super-transitions in ``log`` whose mean acceptance is below :data:`LOW_ACCEPTANCE`."""
    if not log:
        return None
    return float(np.mean([np.mean(e["acceptance"]) < LOW_ACCEPTANCE for e in log]))


class Checkpoint(NamedTuple):
    """What a run needs, beside its sample store and log, to go on exactly where it stopped."""

    replicas: dict     # ReplicaSet.state(): the chains, counters, step calibration
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
    fields are walked, not listed: :meth:`ReplicaSet.state` is their one list."""
    arrays, scalars = {}, {}
    for key, value in ck.replicas.items():
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
    return _npz(**arrays)


def unpack_checkpoint(data: bytes) -> Checkpoint:
    """Inverse of :func:`pack_checkpoint`; ValueError for anything that is not
    an intact checkpoint of this format."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, RuntimeError, zipfile.BadZipFile, zlib.error) as e:
        raise ValueError(f"not an npz archive ({e})") from None
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


class RunDir:
    """One run directory (it need not exist yet)."""

    def __init__(self, path):
        self.path = Path(path)

    def file(self, name: str) -> Path:
        return self.path / name

    @property
    def is_finished(self) -> bool:
        return self.file(SUMMARY).is_file()

    @property
    def has_checkpoint(self) -> bool:
        return self.file(CHECKPOINT).is_file() or self.file(PREVIOUS).is_file()

    @property
    def store(self) -> SampleStore:
        return SampleStore(self.file(STORE))

    def status(self) -> str:
        """"new" (absent or empty), "started" (stopped before its first
        checkpoint), "checkpointed", "finished", or "foreign" (holds files this
        package did not write, or is not a directory). A ``.tmp`` file (a write
        a kill or a full disk interrupted) counts as nothing."""
        if not self.path.exists():
            return "new"
        if not self.path.is_dir():
            return "foreign"
        names = {p.name for p in self.path.iterdir() if not p.name.endswith(".tmp")}
        if not names or names == {LOCK}:
            return "new"
        if SUMMARY in names:
            return "finished"
        if CHECKPOINT in names or PREVIOUS in names:
            return "checkpointed"
        if names <= START_FILES:
            return "started"
        return "foreign"

    def clear_start(self) -> None:
        """Remove the files of a run that stopped before its first checkpoint
        (and any interrupted write's ``.tmp``)."""
        for name in START_FILES - {LOCK, STORE}:
            self.file(name).unlink(missing_ok=True)
        self.store.remove()
        self.remove_tmp()

    def remove_tmp(self) -> None:
        """Remove the ``.tmp`` files interrupted writes left behind."""
        for p in self.path.glob("*.tmp"):
            p.unlink()

    def lock(self):
        """Create the directory and hold an exclusive lock on it until the
        returned file is closed (or the process ends); RunError names the
        process holding it."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            f = open(self.file(LOCK), "a+")
        except OSError as e:
            raise RunError(f"{self.path}: cannot create the run directory or its lock ({e.strerror})") from None
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            f.close()
            raise RunError(f"{self.path}: in use by another run (process {holder}); wait for it to end or use "
                           f"another --out") from None
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        return f

    # -- starting and resuming --------------------------------------------------------
    def start(self, cfg: Config, source: str, threads: int) -> dict:
        """Create the directory with the resolved config and new metadata; returns the metadata."""
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write(self.file(CONFIG), resolved_config(cfg))
        meta = {"name": cfg.name, "seed": cfg.run.seed, "config_source": str(source), "versions": versions(),
                "machine": {"platform": platform.platform(), "processor": platform.processor(),
                            "cores": len(os.sched_getaffinity(0)), "threads": threads},
                "start": time.strftime("%Y-%m-%dT%H:%M:%S")}
        self.write_metadata(meta)
        return meta

    def check_same_config(self, cfg: Config) -> None:
        if not self.file(CONFIG).is_file():
            raise RunError(f"{self.path}: {CONFIG} is missing, so the checkpoint cannot be matched to a config; "
                           f"start the run again in a new directory")
        if self.file(CONFIG).read_bytes() != resolved_config(cfg):
            raise RunError(f"{self.path}: the config differs from the one this run started with "
                           f"({self.file(CONFIG)})")

    def read_metadata(self) -> dict:
        return json.loads(self.file(METADATA).read_text())

    def write_metadata(self, meta: dict) -> None:
        atomic_write(self.file(METADATA), _json(meta))

    # -- the log ------------------------------------------------------------------------
    def write_log(self, entries: list) -> None:
        atomic_write(self.file(LOG), "".join(json.dumps(e) + "\n" for e in entries).encode())

    def append_log(self, entry: LogEntry) -> None:
        with open(self.file(LOG), "a") as f:
            f.write(json.dumps(entry) + "\n")

    def read_log(self) -> list:
        """The log's entries; a last line cut short by a kill is left out."""
        lines = [line for line in self.file(LOG).read_text().splitlines() if line.strip()]
        out = []
        for k, line in enumerate(lines):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                if k < len(lines) - 1:
                    raise
        return out

    # -- checkpoints ------------------------------------------------------------------------
    def save_checkpoint(self, replicas: ReplicaSet, tuner, log: list, wall_s: float) -> None:
        """Append the super-transitions since the last checkpoint to the sample
        store, keep the last checkpoint as the previous one, then write the
        new one (state only). Each step is atomic, and a kill between them
        leaves a checkpoint the store holds every row of."""
        pending = replicas.pending or []
        self.store.append(pending, first=replicas.n_super - len(pending))
        pending.clear()
        atomic_write(self.file(CHECKPOINT),
                     pack_checkpoint(Checkpoint(replicas.state(), tuner.state_dict(), len(log), wall_s)),
                     previous=self.file(PREVIOUS))

    def load_checkpoint(self) -> tuple:
        """(the newest intact checkpoint, a note: "" or why the newest was not
        used); a :class:`RunError` when neither it nor the previous one is intact."""
        problems = []
        for name in (CHECKPOINT, PREVIOUS):
            path = self.file(name)
            try:
                ck = unpack_checkpoint(path.read_bytes())
            except FileNotFoundError:
                problems.append(f"{path}: missing")
                continue
            except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
                problems.append(f"{path}: not an intact checkpoint of this package ({e})")
                continue
            note = "" if name == CHECKPOINT else f"{problems[0]}; resuming from the previous checkpoint ({path})"
            return ck, note
        raise RunError(f"{'; '.join(problems)}; it cannot be resumed: start the run again in a new directory")

    def progress(self) -> tuple:
        """(super-transitions the newest intact checkpoint holds, the run's
        total); RunError when either cannot be read."""
        ck, _ = self.load_checkpoint()
        try:
            total = yaml.safe_load(self.file(CONFIG).read_text())["run"]["super_transitions"]
        except (OSError, KeyError, TypeError, yaml.YAMLError) as e:
            raise RunError(f"{self.file(CONFIG)}: cannot be read ({e})") from None
        return ck.replicas["n_super"], total

    def restore(self, replicas: ReplicaSet, tuner_type) -> tuple:
        """(tuner, log, wall_s, note) from the newest intact checkpoint, with
        ``replicas`` restored in place from it and the sample store, which is
        cut back to it (as is the log)."""
        ck, note = self.load_checkpoint()
        n_super = ck.replicas["n_super"]
        try:
            self.store.truncate(n_super)
            steps = self.store.read(n_super)
        except (OSError, ValueError) as e:
            raise RunError(f"{self.file(STORE)}: the sample store does not hold the checkpoint's "
                           f"{n_super} super-transitions ({e}); start the run again in a new directory") from None
        try:
            replicas.restore(ck.replicas, steps)
            tuner = tuner_type.from_state(ck.tuner)
        except Exception as e:
            raise RunError(f"{self.file(CHECKPOINT)}: does not fit this run's config ({type(e).__name__}: {e}); "
                           f"start the run again in a new directory") from None
        log = self.read_log()
        if len(log) < ck.n_log:
            raise RunError(f"{self.file(LOG)}: holds {len(log)} entries, the checkpoint {ck.n_log}; start the run "
                           f"again in a new directory")
        self.remove_tmp()
        return tuner, log[:ck.n_log], ck.wall_s, note

    def write_results(self, replicas: ReplicaSet, tuner, log: list, wall_s: float, cfg: Config,
                      x_scale: Standardizer, compile_s: float = 0.0) -> dict:
        arrays = {"history_pred": np.array(replicas.history_pred),
                  "history_count": np.array(replicas.history_count),
                  "history_hyper": np.array(replicas.history_hyper), "X_test": replicas.X_test,
                  "Y_test": replicas.Y_test, "X_train": replicas.X_train, "Y_train": replicas.Y_train,
                  "test_names": np.array(replicas.test_names),
                  "test_bounds": np.array([[replicas.test_slices[n].start, replicas.test_slices[n].stop]
                                           for n in replicas.test_names]).reshape(-1, 2),
                  "hyper_names": np.array(replicas.hyper_names)}
        chains = cfg.replicas.predict_from
        if replicas.test_count[replicas.chain_indices(chains)].sum() > 0:
            for n in replicas.test_names:
                pr = replicas.prediction(n, chains=chains)
                for f in ("mean", "var", "lower", "upper", "lpd"):
                    arrays[f"{n}/{f}"] = getattr(pr, f)
        atomic_write(self.file(PREDICTIONS), _npz(**arrays))
        kept = kept_samples(replicas)
        super_index = replicas.kept_rows()[2]
        atomic_write(self.file(SAMPLES), _npz(weights=kept["weights"], noise_precision=kept["noise_precision"],
                                              chain=kept["chain"], arch=replicas.spec.arch, hyper=kept["hyper"],
                                              super_transition=super_index, weight=kept["weight"],
                                              input_mean=x_scale.mean, input_sd=x_scale.sd,
                                              input_columns=x_scale.columns, input_log1p=x_scale.log1p,
                                              input_width=x_scale.width or x_scale.mean.size,
                                              input_names=np.array(x_scale.names, dtype=str),
                                              target_names=np.array(x_scale.target_names, dtype=str),
                                              target_mean=replicas.target_mean, target_sd=replicas.target_sd))
        atomic_write(self.file(TUNER), json.dumps(tuner.state_dict(), indent=1).encode())
        summary = summarize(replicas, log, wall_s, cfg, compile_s, kept)
        atomic_write(self.file(SUMMARY), _json(summary))
        return summary


class Run(NamedTuple):
    """A finished run, as read from its directory; :meth:`predict` and
    :meth:`predict_proba` use its kept samples on new inputs."""

    dir: Path
    config: Config
    spec: MLPSpec
    summary: dict
    log: list
    predictions: dict   # arrays of predictions.npz
    samples: dict       # weights (S, D), noise_precision (S, n_out), chain and weight (S,) of the kept samples
    tuner_state: dict

    def tuner(self):
        """The tuner as it ended (a BanditTuner refits its reward model from its history)."""
        return (BanditTuner if self.tuner_state["kind"] == "bandit" else FixedTuner).from_state(self.tuner_state)

    @property
    def likelihood(self) -> str:
        return self.spec.likelihood

    def retained(self) -> np.ndarray:
        """Mask of the super-transitions in which every chain retained samples (after burn-in)."""
        return np.all(self.predictions["history_count"] > 0, axis=1)

    @property
    def n_cv(self) -> int:
        """Cross-validation replicas: the first ``n_cv`` chains; the others sample the posterior."""
        return self.config.replicas.k if self.config.replicas.data == "folds" else 0

    def chain_indices(self, chains: str) -> np.ndarray:
        """Rows of ``chains`` ("all", "full", "replicas") in the per-chain arrays."""
        return chain_indices(chains, self.n_cv, self.predictions["history_count"].shape[1])

    def _outputs(self, X, chains: str | None):
        """Network outputs (S, N, n_out) of the kept samples of ``chains`` (default:
        the config's ``replicas.predict_from``) at inputs X (N, n_in), their noise
        precisions and their weights (``run.weight_by``)."""
        chains = chains or self.config.replicas.predict_from
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_raw_inputs:
            raise ValueError(f"inputs have shape {X.shape}; the run takes (N, {self.n_raw_inputs})")
        keep = np.isin(self.samples["chain"], self.chain_indices(chains))
        if not keep.any():
            raise RunError(f"{self.dir}: no kept samples of chains {chains!r} (run.thin: 0 keeps none, and "
                           f"burn-in keeps none of its super-transitions); rerun with run.thin > 0")
        Xs = self.input_map.transform(X)
        return (*self.outputs(self.samples["weights"][keep], self.samples["noise_precision"][keep], Xs),
                self.samples["weight"][keep])

    @property
    def input_map(self) -> Standardizer:
        """The map from a raw input row to the network's inputs (selection, log1p, standardisation)."""
        s = self.samples
        return Standardizer(s["input_mean"], s["input_sd"], s.get("input_columns", np.empty(0, np.int64)),
                            bool(s.get("input_log1p", False)), int(s.get("input_width", s["input_mean"].size)),
                            tuple(str(n) for n in s.get("input_names", ())),
                            tuple(str(n) for n in s.get("target_names", ())))

    @property
    def n_raw_inputs(self) -> int:
        """Columns of a raw input row (a feature selection keeps fewer for the network)."""
        return self.input_map.width

    def outputs(self, W, noise, Xs) -> tuple:
        """Network outputs (S, N, n_out) of weight vectors W at inputs Xs in the
        network's units (standardised as the run's inputs were; ``X_test`` of
        predictions.npz is), and the noise precisions ``noise`` (S, n_out), both
        in the targets' original units (the chains sample standardised targets
        when ``data.standardize_targets``)."""
        F = predict(self.spec, W, Xs)
        if self.likelihood != "gaussian":
            return F, noise
        mu, sd = self.samples["target_mean"], self.samples["target_sd"]
        return mu + sd * F, noise / sd ** 2

    def predict(self, X, return_std: bool = False, chains: str | None = None):
        """Regression: posterior predictive mean (N, n_out), and with
        ``return_std`` its sd, noise included. Classification: the label
        (class index) of the averaged class probabilities."""
        if self.likelihood != "gaussian":
            return self.predict_proba(X, chains).argmax(axis=1)
        F, noise, w = self._outputs(X, chains)
        mean, var = predictive_moments(F, noise, w)
        return (mean, np.sqrt(var)) if return_std else mean

    def predict_proba(self, X, chains: str | None = None) -> np.ndarray:
        """Class probabilities (N, K), averaged over the kept samples (by their weights)."""
        if self.likelihood == "gaussian":
            raise RunError(f"{self.dir}: a regression run has no class probabilities; use predict")
        F, _, w = self._outputs(X, chains)
        return predictive_probabilities(F, self.likelihood, w)

    def test_sets(self) -> list:
        """(name, slice of the test cases) of each test set."""
        return [(str(n), slice(int(a), int(b)))
                for n, (a, b) in zip(self.predictions["test_names"], self.predictions["test_bounds"])]


def read_run(d) -> Run:
    """The finished run in directory ``d``; :class:`RunError` says what is missing or damaged."""
    rd = RunDir(d)
    if not rd.is_finished:
        raise RunError(f"{rd.path}: not a finished run directory (no {SUMMARY})")
    try:
        cfg = parse(yaml.safe_load(rd.file(CONFIG).read_text()), str(rd.file(CONFIG)))
        with np.load(rd.file(PREDICTIONS)) as z:
            pred = {k: z[k] for k in z.files}
        with np.load(rd.file(SAMPLES)) as z:
            samples = {k: z[k] for k in z.files}
        summary = json.loads(rd.file(SUMMARY).read_text())
        if "compile_s" not in summary or "chain" not in samples:
            raise RunError(f"{rd.path}: written by an older version of adaptive_hmc, whose run directories this "
                           f"one does not read; run the config again")
        n_out = pred["Y_test"].shape[1]
        samples.setdefault("target_mean", np.zeros(n_out))      # runs from before target standardisation
        samples.setdefault("target_sd", np.ones(n_out))
        samples.setdefault("weight", np.ones(len(samples["chain"])))   # runs from before sample weights
        return Run(rd.path, cfg, MLPSpec.from_arch(samples["arch"]), summary, rd.read_log(), pred, samples,
                   json.loads(rd.file(TUNER).read_text()))
    except (OSError, ValueError, KeyError, ConfigError) as e:
        raise RunError(f"{rd.path}: a file of the run directory is missing or damaged "
                       f"({type(e).__name__}: {e})") from None
