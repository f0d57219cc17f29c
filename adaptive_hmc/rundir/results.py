"""The run directory: file names, the log, atomic writes, checkpoints, the
summary (a finished run is read back by :mod:`~adaptive_hmc.rundir.finished_run`).

Flow position: runner -> **results** -> reports, plots, CLI. Everything else
reads and writes run directories only through this module. Layout::

    config.resolved.yaml  metadata.json  log.jsonl  store/  checkpoint.npz  checkpoint.prev.npz  .lock
    predictions.npz  samples.npz  tuner.json  summary.json  plots/

The samples go to the append-only sample store (:mod:`~adaptive_hmc.rundir.store`),
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
import json
import os
import platform
import sys
import time
from importlib import metadata as importlib_metadata
from pathlib import Path

import numpy as np
import yaml

from .checkpoint import Checkpoint, NoIntactCheckpoint, newest_intact, pack_checkpoint
from ..config import Config, to_dict
from ..data import Standardizer
from .metrics import density_summary, kept_samples, summarize
from ..engine.network_state import KEPT_STATS
from ..engine.network_chains import NetworkChains
from ..engine.runner import LogEntry
from .store import SUMS, STORE, SampleStore, atomic_netcdf, atomic_write, npz_bytes
from ..tuners.registry import tuner_from_state

CONFIG, METADATA, LOG = "config.resolved.yaml", "metadata.json", "log.jsonl"
CHECKPOINT, PREVIOUS = "checkpoint.npz", "checkpoint.prev.npz"
PREDICTIONS, SAMPLES = "predictions.npz", "samples.npz"
TUNER, SUMMARY, PLOTS, LOCK = "tuner.json", "summary.json", "plots", ".lock"
#: A density run's draws (``model.kind: density``): ArviZ InferenceData, beside its summary.
POSTERIOR = "posterior.nc"
#: Where a density run kept its draws before they went to the sample store as a network run's do: a run
#: directory holding it is refused on resume (its finished results still read).
OLD_DRAWS = "checkpoint.draws"
#: What ``export --kfold K`` writes: the elpd figures, and the run of the fold posteriors (a run directory).
ELPD, KFOLD = "elpd.json", "kfold-{k}"
#: Files a run writes when it starts, before its first checkpoint.
START_FILES = {CONFIG, METADATA, LOG, LOCK, STORE}


def is_density_run(d) -> bool:
    """Whether run directory ``d`` holds a run of a user's density (its config's ``model.kind: density``)."""
    try:
        raw = yaml.safe_load((Path(d) / CONFIG).read_text())
        return isinstance(raw, dict) and (raw.get("model") or {}).get("kind") == "density"
    except (OSError, yaml.YAMLError):
        return (Path(d) / POSTERIOR).is_file()


def fold_of_case(net: NetworkChains) -> np.ndarray:
    """Each training case's fold (the cross-validation replica that leaves it out), -1 without folds."""
    out = np.full(len(net.X_train), -1)
    for j, cases in enumerate(net.folds):
        out[cases] = j
    return out


class RunError(ValueError):
    """A run directory that cannot be used as asked; the message says what to do."""


def _json(obj) -> bytes:
    return json.dumps(obj, indent=2).encode()


def resolved_config(cfg: Config) -> bytes:
    """The config as the run directory stores it (every default filled in)."""
    return yaml.safe_dump(to_dict(cfg), sort_keys=False).encode()


def _changed_keys(a, b, prefix: str = "") -> list:
    """(dotted key, value in ``a``, value in ``b``) of every leaf where two configs' dicts differ (absent: None)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [c for k in list(a) + [k for k in b if k not in a]
                for c in _changed_keys(a.get(k), b.get(k), f"{prefix}{k}.")]
    return [] if a == b else [(prefix.rstrip("."), a, b)]


def versions() -> dict:
    out = {"python": sys.version.split()[0]}
    for pkg in ("adaptive_hmc", "numpy", "scipy", "scikit-learn", "numba"):
        try:
            out[pkg] = importlib_metadata.version(pkg)
        except importlib_metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


class RunDirSink:
    """The driver's sink (:class:`~adaptive_hmc.engine.driver.Sink`) of every kind of run that keeps a run
    directory: each super-transition's log entry appended to ``log.jsonl`` and its unit (``unit(result)``,
    encoded by ``codec``) kept for the sample store; a checkpoint of ``chains`` (with ``extra()``, a dict)
    and ``tuner`` after the first, every ``every`` super-transitions once ``seconds`` of the run passed since
    the last, and at the end (:meth:`RunDir.save_checkpoint`); a resume is the same bits from any of them."""

    def __init__(self, rd: "RunDir", chains, tuner, log: list, every: int = 1, unit=lambda result: result.unit,
                 codec=SUMS, extra=dict, seconds: float = 0.0):
        self.rd, self.chains, self.tuner, self.log, self.every = rd, chains, tuner, log, every
        self.unit, self.codec, self.extra, self.seconds = unit, codec, extra, seconds
        self.unsaved: list = []     # the units of the super-transitions not yet in the sample store
        self.saved_at: float | None = None      # the run's seconds at this process's last checkpoint

    def append(self, entry, result):
        self.rd.append_log(entry)
        self.unsaved.append(self.unit(result))

    def checkpoint(self, n: int, end: bool, wall: float):
        due = n % self.every == 0 and (self.saved_at is None or wall - self.saved_at >= self.seconds)
        if due or end:
            self.rd.save_checkpoint(self.chains, self.tuner, self.log, wall, self.unsaved, self.codec, self.extra())
            self.saved_at = wall


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

    def prepare(self, resume: bool, say=None, extend: int = 0) -> bool:
        """Decide from the directory's state whether a run (of a network or a
        density) resumes (True: an interrupted run, or the finished one an
        ``extend`` adds to) or starts (False); :class:`RunError` saying why when
        neither is right; ``say`` is told when a run starts over (None: silent, as
        when the caller holds the directory's lock already; otherwise a run that
        holds it is refused as in use first). Writes nothing but the lock file."""
        if say is not None and self.file(LOCK).is_file():
            self.lock().close()             # a run working there (started, checkpointed) is named, not undone
        status = self.status()
        if extend and (resume or status != "finished"):
            raise RunError("--resume continues an interrupted run or extension; --extend adds to a finished one: one "
                           "or the other" if resume else f"{self.path}: --extend {extend}: adds super-transitions to a "
                           f"finished run, and " + {"checkpointed": "this one is unfinished (--resume it first)",
                                                    "foreign": "this is not a run directory of this package"}.get(
                               status, "there is none here"))
        if resume and not self.path.exists():
            raise RunError(f"{self.path}: no such run directory to resume (check --out); without --resume a new run "
                           f"starts there")
        if status == "foreign":
            names = sorted(p.name for p in self.path.iterdir() if p.name not in START_FILES
                           and not p.name.endswith(".tmp")) if self.path.is_dir() else []
            raise RunError(f"{self.path}: not a run directory of this package (" + (
                f"it holds files this package did not write ({', '.join(names[:5])})" if names else
                "it is not a directory") + "); choose another --out")
        if status == "finished":
            if not extend:
                raise RunError(f"{self.path}: holds a finished run (its results are there); use another --out to run "
                               f"again, or --extend N to add N super-transitions to it")
            if not self.has_checkpoint:
                raise RunError(f"{self.path}: --extend {extend}: its checkpoint is gone, so the chains cannot go on; "
                               f"run again with a longer run.super_transitions")
            self.check_layout()
            return True
        if status == "checkpointed":
            if not resume:
                raise RunError(f"{self.path}: holds an unfinished run with a checkpoint; add --resume to continue "
                               f"it, or use another --out")
            self.check_layout()
            return True
        if say is None:
            return False
        if status == "started":
            say(f"{self.path}: the run there stopped before its first checkpoint; starting it over")
        elif resume:
            say(f"{self.path}: nothing to resume (no checkpoint); starting the run")
        return False

    def check_layout(self) -> None:
        """RunError unless the run here can go on: one of an earlier version's layout cannot."""
        if self.file(OLD_DRAWS).is_dir():
            raise RunError(f"{self.path}: written by an earlier version, which kept the draws in {OLD_DRAWS}/; it "
                           f"cannot be resumed or extended (its finished results still read): start the run again "
                           f"in a new directory")

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

    def write_density_results(self, idata) -> dict:
        """A finished density run's draws (``posterior.nc``, ArviZ InferenceData) and its summary
        (:func:`~adaptive_hmc.rundir.metrics.density_summary`, ``summary.json``); returns the summary."""
        atomic_netcdf(idata, self.file(POSTERIOR))
        summary = density_summary(idata)
        atomic_write(self.file(SUMMARY), json.dumps(summary, indent=2).encode())
        return summary

    def _damaged(self, name: str, problem) -> RunError:
        """The refusal of a run whose file ``name`` is missing or damaged (``problem``: an exception, or words)."""
        if isinstance(problem, OSError):
            problem = problem.strerror or type(problem).__name__
        elif isinstance(problem, Exception):
            problem = f"{type(problem).__name__}: {(str(problem).splitlines() or [''])[0]}"
        return RunError(f"{self.file(name)}: missing or damaged ({problem}), so the run cannot go on; start it "
                        f"again in a new directory")

    def resolved(self) -> dict:
        """The config the run started with (``config.resolved.yaml``); RunError when missing or damaged."""
        try:
            raw = yaml.safe_load(self.file(CONFIG).read_text())
        except (OSError, ValueError, yaml.YAMLError) as e:
            raise self._damaged(CONFIG, e) from None
        if not (isinstance(raw, dict) and isinstance(raw.get("run"), dict)):
            raise self._damaged(CONFIG, "not a run's resolved config")
        return raw

    def check_same_config(self, cfg: Config) -> None:
        """RunError naming the keys where ``cfg`` differs from the config the run started with, but
        ``run.threads`` (every draw is the same whatever the threads: a run may resume on another machine)."""
        then, now = self.resolved(), yaml.safe_load(resolved_config(cfg))
        for raw in (then, now):
            raw["run"].pop("threads", None)
        if yaml.safe_dump(then) != yaml.safe_dump(now):
            changed = _changed_keys(then, now)
            shown = "; ".join(f"{k}: {a!r} then, {b!r} now" for k, a, b in changed[:3]) + \
                ("; ..." if len(changed) > 3 else "")
            raise RunError(f"{self.path}: the config differs from the one this run started with "
                           f"({self.file(CONFIG)}): {shown or 'the same keys, written differently'}; a run resumes "
                           f"with the config it started with (put it back, or start a new run with --out)")

    def read_metadata(self) -> dict:
        """``metadata.json``; RunError when missing or damaged."""
        try:
            meta = json.loads(self.file(METADATA).read_text())
        except (OSError, ValueError) as e:
            raise self._damaged(METADATA, e) from None
        if not isinstance(meta, dict):
            raise self._damaged(METADATA, f"a JSON {type(meta).__name__}, not an object")
        return meta

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

    # -- checkpoints (every kind of run: a network's chains or a density's) --------------------
    def sample_store(self, codec=SUMS) -> SampleStore:
        """The sample store of units that ``codec`` writes (:data:`~adaptive_hmc.rundir.store.SUMS`: a
        network run's; a density run's draws, :data:`~adaptive_hmc.rundir.density_checkpoint.DRAWS`)."""
        return SampleStore(self.file(STORE), codec)

    def save_checkpoint(self, chains, tuner, log: list, wall_s: float, unsaved: list, codec=SUMS,
                        extra: dict | None = None) -> None:
        """Append the ``unsaved`` units (the super-transitions since the last
        checkpoint; the list is emptied) to the sample store, keep the last
        checkpoint as the previous one, then write the new one (state only:
        ``chains.checkpoint()`` and ``extra``, the tuner's state, the log's
        length, the seconds). Each step is atomic, and a kill between them
        leaves a checkpoint the store holds every row of."""
        self.sample_store(codec).append(unsaved, first=chains.n_super - len(unsaved))
        unsaved.clear()
        atomic_write(self.file(CHECKPOINT), pack_checkpoint(Checkpoint(
            {**chains.checkpoint(), **(extra or {})}, tuner.state_dict(), len(log), wall_s)),
            previous=self.file(PREVIOUS))

    def load_checkpoint(self, what: str = "an intact checkpoint of this package") -> tuple:
        """(the newest intact checkpoint, a note: "" or why the newest was not
        used); a :class:`RunError` when neither it nor the previous one is
        intact (each named as not ``what``)."""
        try:
            return newest_intact(self.file(CHECKPOINT), self.file(PREVIOUS), what)
        except NoIntactCheckpoint as e:
            raise RunError(f"{e}; it cannot be resumed: remove {self.file(CHECKPOINT)} and {self.file(PREVIOUS)}, "
                           f"or start the run again in a new directory") from None

    def progress(self) -> tuple:
        """(super-transitions the newest intact checkpoint holds, the run's
        total); RunError when either cannot be read."""
        ck, _ = self.load_checkpoint()
        total = self.extended_to() or self.resolved()["run"].get("super_transitions")
        if not isinstance(total, int):
            raise self._damaged(CONFIG, f"run.super_transitions = {total!r}")
        return ck.chains["n_super"], total

    def extended_to(self) -> int | None:
        """The length an ``--extend`` set (the metadata's last extension), or None for a run never extended."""
        extensions = self.read_metadata().get("extended") if self.file(METADATA).is_file() else None
        try:
            return int(extensions[-1]["to"]) if extensions else None
        except (TypeError, KeyError, IndexError, ValueError):
            raise self._damaged(METADATA, f"extended = {extensions!r}") from None

    def begin_extension(self, by: int) -> int:
        """Record in the metadata that a finished run goes on to ``by`` more
        super-transitions than its checkpoint holds; returns the new length. The
        run stays finished (its summary and results readable) until
        :meth:`restore` has its chains back: a restore that fails loses nothing,
        and a kill after that restore leaves a run that ``--resume`` continues
        to the new length."""
        n = self.load_checkpoint()[0].chains["n_super"]
        meta = self.read_metadata()
        meta.setdefault("extended", []).append({"from": n, "to": n + by, "at": time.strftime("%Y-%m-%dT%H:%M:%S")})
        self.write_metadata(meta)
        return n + by

    def _take_back_extension(self) -> None:
        """Undo :meth:`begin_extension` on a run that is still finished (its restore refused)."""
        meta = self.read_metadata()
        if meta.get("extended"):
            meta["extended"].pop()
            self.write_metadata({k: v for k, v in meta.items() if v or k != "extended"})

    def restore(self, chains, codec=SUMS, check=None, what: str = "an intact checkpoint of this package") -> tuple:
        """(tuner, log, wall_s, note, the checkpoint's state) from the newest
        intact checkpoint, with ``chains`` (a network's or a density's)
        restored in place from it and the sample store of ``codec``'s units,
        which is cut back to it (as is the log); ``check(state)``: why the
        state cannot go on as this run (None: it can). A finished run (an
        ``--extend``'s) becomes an unfinished one only once its chains are back;
        a refusal before that takes back the extension :meth:`begin_extension`
        recorded, so the run is as it was."""
        try:
            restored = self._restore(chains, codec, check, what)
        except RunError:
            if self.is_finished:
                self._take_back_extension()
            raise
        if self.is_finished:            # the results are rewritten at the extended run's end
            self.file(SUMMARY).unlink()
        return restored

    def _restore(self, chains, codec, check, what) -> tuple:
        self.check_layout()
        ck, note = self.load_checkpoint(what)
        problem = check(ck.chains) if check is not None else None
        if problem:
            raise RunError(f"{self.file(CHECKPOINT)}: {problem}")
        n_super, store = ck.chains["n_super"], self.sample_store(codec)
        try:
            store.truncate(n_super)
            units = store.read(n_super)
        except (OSError, ValueError) as e:
            raise RunError(f"{self.file(STORE)}: the sample store does not hold the checkpoint's {n_super} "
                           f"super-transitions ({e}): the draws are missing or damaged; remove "
                           f"{self.file(CHECKPOINT)}, {self.file(PREVIOUS)} and {self.file(STORE)} to start again, "
                           f"or start the run again in a new directory") from None
        try:
            chains.restore(ck.chains, units)
            tuner = tuner_from_state(ck.tuner)
        except Exception as e:
            raise RunError(f"{self.file(CHECKPOINT)}: does not fit this run's config ({type(e).__name__}: {e}); "
                           f"start the run again in a new directory") from None
        log = self.read_log()
        if len(log) < ck.n_log:
            raise RunError(f"{self.file(LOG)}: holds {len(log)} entries, the checkpoint {ck.n_log}; start the run "
                           f"again in a new directory")
        self.remove_tmp()
        return tuner, log[:ck.n_log], ck.wall_s, note, ck.chains

    def write_results(self, net: NetworkChains, tuner, log: list, wall_s: float, cfg: Config,
                      x_scale: Standardizer, compile_s: float = 0.0, convergence: dict | None = None) -> dict:
        arrays = {"history_pred": np.array(net.history_pred),
                  "history_count": np.array(net.history_count),
                  "history_hyper": np.array(net.history_hyper), "X_test": net.X_test,
                  "Y_test": net.Y_test, "X_train": net.X_train, "Y_train": net.Y_train,
                  "test_names": np.array(net.test_names),
                  "test_bounds": np.array([[net.test_slices[n].start, net.test_slices[n].stop]
                                           for n in net.test_names]).reshape(-1, 2),
                  "hyper_names": np.array(net.hyper_names),
                  "fold_of_case": fold_of_case(net)}
        chains = cfg.layout.predict_from
        if net.test_count[net.chain_indices(chains)].sum() > 0:
            for n in net.test_names:
                pr = net.prediction(n, chains=chains)
                for f in ("mean", "var", "lower", "upper", "lpd"):
                    arrays[f"{n}/{f}"] = getattr(pr, f)
        atomic_write(self.file(PREDICTIONS), npz_bytes(**arrays))
        kept = kept_samples(net)
        atomic_write(self.file(SAMPLES), npz_bytes(**{k: kept[k] for k in ("weights", "noise_precision", "chain",
                                                                           "hyper", "weight", "super_transition",
                                                                           *KEPT_STATS)},
                                              arch=net.spec.arch,
                                              input_mean=x_scale.mean, input_sd=x_scale.sd,
                                              input_columns=x_scale.columns, input_log1p=x_scale.log1p,
                                              input_width=x_scale.width or x_scale.mean.size,
                                              input_names=np.array(x_scale.names, dtype=str),
                                              target_names=np.array(x_scale.target_names, dtype=str),
                                              target_classes=np.array(x_scale.classes, dtype=str),
                                              input_levels=np.array(json.dumps(x_scale.levels)),
                                              target_mean=net.target_mean, target_sd=net.target_sd))
        atomic_write(self.file(TUNER), json.dumps(tuner.state_dict(), indent=1).encode())
        summary = summarize(net, log, wall_s, cfg, compile_s, kept)
        summary["convergence"] = convergence       # run.until: whether and where the chains met (else None)
        atomic_write(self.file(SUMMARY), _json(summary))
        return summary
