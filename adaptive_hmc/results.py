"""The run directory: file names, the log, atomic writes, checkpoints, the
summary, and :func:`read_run`, which returns a finished run as one typed object.

Flow position: runner -> **results** -> reports, plots, CLI. Everything else
reads and writes run directories only through this module. Layout::

    config.resolved.yaml  metadata.json  log.jsonl  checkpoint.pkl
    predictions.npz  samples.npz  tuner.json  summary.json  plots/
"""
from __future__ import annotations

import io
import json
import os
import pickle
import platform
import sys
import time
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import NamedTuple

import numpy as np
import yaml

from .config import Config, ConfigError, parse, to_dict
from .models.mlp import MLPSpec
from .replicas import ReplicaSet
from .runner import LogEntry
from .tuners import BanditTuner, FixedTuner

CONFIG, METADATA, LOG = "config.resolved.yaml", "metadata.json", "log.jsonl"
CHECKPOINT, PREDICTIONS, SAMPLES = "checkpoint.pkl", "predictions.npz", "samples.npz"
TUNER, SUMMARY, PLOTS = "tuner.json", "summary.json", "plots"


class RunError(ValueError):
    """A run directory that cannot be used as asked; the message says what to do."""


def atomic_write(path: Path, data: bytes) -> None:
    """Write via a temporary file and rename, so a kill never leaves half a file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


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


def summarize(replicas: ReplicaSet, log: list, wall_s: float, cfg: Config) -> dict:
    """summary.json: test errors per test set, CV error, acceptance, divergences,
    leapfrog steps, wall time, final action."""
    metrics = replicas.metrics() if replicas.test_count.sum() > 0 else {}
    burn = cfg.run.burn_in.super_transitions
    kept = [e["cv_error"] for e in log[burn:] if e["cv_error"] is not None]
    key = "mse" if replicas.spec.likelihood == "gaussian" else "error_rate"
    return {
        "name": cfg.name, "seed": cfg.run.seed, "tuner": cfg.tuner.kind,
        f"test_{key}": {n: m[key] for n, m in metrics.items()},
        f"test_{key}_se": {n: m[f"{key}_se"] for n, m in metrics.items()},
        "test_mlpd": {n: m["mlpd"] for n, m in metrics.items()},
        "cv_error": float(np.mean(kept)) if kept else None,
        "acceptance": float(np.mean([np.mean(e["acceptance"]) for e in log])) if log else None,
        "divergences": int(sum(e["divergences"] for e in log)),
        "leapfrog_steps": int(sum(e["leapfrog_steps"] for e in log)),
        "super_transitions": len(log), "samples_retained": int(replicas.test_count.sum()),
        "final_action": {"step_factor": log[-1]["step_factor"], "num_steps": log[-1]["num_steps"]} if log else None,
        "wall_s": round(wall_s, 2),
    }


class Checkpoint(NamedTuple):
    """What a run needs to go on exactly where it stopped."""

    replicas: dict     # ReplicaSet.state()
    tuner: dict        # the tuner's state_dict()
    log: list          # the log entries so far
    wall_s: float      # sampling time so far


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
        return self.file(CHECKPOINT).is_file()

    def is_empty(self) -> bool:
        return not self.path.exists() or not any(self.path.iterdir())

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
        return [json.loads(line) for line in self.file(LOG).read_text().splitlines() if line.strip()]

    # -- checkpoints ------------------------------------------------------------------------
    def save_checkpoint(self, replicas: ReplicaSet, tuner, log: list, wall_s: float) -> None:
        state = Checkpoint(replicas.state(), tuner.state_dict(), list(log), wall_s)._asdict()
        atomic_write(self.file(CHECKPOINT), pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))

    def load_checkpoint(self) -> Checkpoint:
        """The last checkpoint; a damaged or foreign file is a :class:`RunError`."""
        path = self.file(CHECKPOINT)
        try:
            state = pickle.loads(path.read_bytes())
            return Checkpoint(**state)
        except Exception as e:   # any damage: truncated, empty, random bytes, another program's pickle
            raise RunError(f"{path}: not a readable checkpoint of this package ({type(e).__name__}: {e}); "
                           f"it cannot be resumed: start the run again in a new directory") from None

    def restore(self, replicas: ReplicaSet, tuner_type) -> tuple:
        """(tuner, log, wall_s) from the last checkpoint, with ``replicas`` restored in place."""
        ck = self.load_checkpoint()
        try:
            replicas.restore(ck.replicas)
            tuner = tuner_type.from_state(ck.tuner)
        except Exception as e:
            raise RunError(f"{self.file(CHECKPOINT)}: does not fit this run's config ({type(e).__name__}: {e}); "
                           f"start the run again in a new directory") from None
        return tuner, ck.log, ck.wall_s

    # -- results -----------------------------------------------------------------------------
    def write_results(self, replicas: ReplicaSet, tuner, log: list, wall_s: float, cfg: Config) -> dict:
        arrays = {"history_pred": np.array(replicas.history_pred),
                  "history_count": np.array(replicas.history_count),
                  "history_hyper": np.array(replicas.history_hyper), "X_test": replicas.X_test,
                  "Y_test": replicas.Y_test, "test_names": np.array(replicas.test_names),
                  "test_bounds": np.array([[replicas.test_slices[n].start, replicas.test_slices[n].stop]
                                           for n in replicas.test_names]).reshape(-1, 2),
                  "hyper_names": np.array(replicas.hyper_names)}
        if replicas.test_count.sum() > 0:
            for n in replicas.test_names:
                pr = replicas.prediction(n)
                for f in ("mean", "var", "lower", "upper", "lpd"):
                    arrays[f"{n}/{f}"] = getattr(pr, f)
        atomic_write(self.file(PREDICTIONS), _npz(**arrays))
        Q, noise = replicas.samples()
        atomic_write(self.file(SAMPLES), _npz(weights=Q, noise_precision=noise, arch=replicas.spec.arch))
        atomic_write(self.file(TUNER), json.dumps(tuner.state_dict(), indent=1).encode())
        summary = summarize(replicas, log, wall_s, cfg)
        atomic_write(self.file(SUMMARY), _json(summary))
        return summary


class Run(NamedTuple):
    """A finished run, as read from its directory."""

    dir: Path
    config: Config
    spec: MLPSpec
    summary: dict
    log: list
    predictions: dict   # arrays of predictions.npz
    samples: dict       # weights (S, D) and noise_precision (S, n_out) of the kept samples
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
        return Run(rd.path, cfg, MLPSpec.from_arch(samples["arch"]), json.loads(rd.file(SUMMARY).read_text()),
                   rd.read_log(), pred, samples, json.loads(rd.file(TUNER).read_text()))
    except (OSError, ValueError, KeyError, ConfigError) as e:
        raise RunError(f"{rd.path}: a file of the run directory is missing or damaged "
                       f"({type(e).__name__}: {e})") from None
