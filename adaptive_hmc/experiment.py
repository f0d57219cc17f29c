"""A configured experiment: build the replicas and the tuner from a
:class:`~adaptive_hmc.config.Config`, run the outer loop with a checkpoint
after every ``checkpoint_every`` super-transitions, and write the run directory.

Flow position: config -> **experiment** (runner + results). Run directory::

    config.resolved.yaml  metadata.json  log.jsonl  checkpoint.pkl
    predictions.npz  samples.npz  tuner.json  summary.json  plots/
"""
from __future__ import annotations

import io
import json
import math
import os
import pickle
import platform
import sys
import time
from importlib import metadata as importlib_metadata
from pathlib import Path

import numpy as np
import yaml

from .config import Config, ConfigError, load_data, to_dict
from .data import Standardizer
from .models.mlp import MLPSpec
from .models.priors import GammaPrior, PriorSpec
from .replicas import ReplicaSet, TransitionOptions, load_replicas_state, replicas_state
from .rewards import cv_reward, esjd_reward
from .runner import run
from .tuners import BanditTuner, FixedTuner
from .tuners.schedules import Exponential, Polynomial, Wang2013


def _prior(c) -> GammaPrior:
    mean = c.mean_precision if c.mean_precision is not None else 1.0 / c.sd ** 2
    return GammaPrior(float(mean), float(c.shape))


def build(cfg: Config, source: str = "<config>"):
    """(replicas, tuner, reward function) for ``cfg``; raises ConfigError."""
    data = load_data(cfg, source)
    (X, Y), tests = data["train"], dict(data["test"])
    if cfg.data.standardize_inputs:
        sc = Standardizer.fit(X)
        X = sc.transform(X)
        tests = {n: (sc.transform(a), b) for n, (a, b) in tests.items()}
    m = cfg.model
    try:
        spec = MLPSpec(X.shape[1], tuple(m.hidden), data["n_outputs"], m.likelihood, m.direct)
        p = m.priors
        groups = {g: _prior(getattr(p, g)) for g in ("input_hidden", "hidden_hidden", "hidden_bias",
                                                      "hidden_output", "output_bias", "input_output", "noise")
                  if getattr(p, g) is not None}
        priors = PriorSpec(**groups, ard=p.ard, ard_shape=float(p.ard_shape),
                           scale_hidden_output=p.scale_hidden_output)
        s = cfg.sampler
        options = TransitionOptions(window=s.window, persistence=float(s.persistence), jitter=s.jitter,
                                    step_nu=float(s.step_nu), max_energy_error=float(s.max_energy_error),
                                    gibbs=s.gibbs, initial_phase_steps=s.initial_phase_steps)
        root = np.random.SeedSequence(cfg.run.seed)
        seed_replicas, seed_tuner = root.spawn(2)
        replicas = ReplicaSet(spec, X, Y, k=cfg.replicas.k, full_data_chain=cfg.replicas.full_data_chain,
                              priors=priors, options=options, test_sets=tests, seed=seed_replicas,
                              initial_hyper=None if s.initial_hyper is None else float(s.initial_hyper),
                              init_scale=float(s.init_scale), burn_in_samples=cfg.run.burn_in.samples,
                              burn_in_super_transitions=cfg.run.burn_in.super_transitions,
                              thin=cfg.run.thin, threads=cfg.run.threads)
    except ValueError as e:
        raise ConfigError(f"{source}: model/data: {e}") from None
    t = cfg.tuner
    if t.kind == "fixed":
        tuner = FixedTuner(step_factor=float(t.step_factor), num_steps=int(t.num_steps))
    else:
        sch = {"exponential": lambda: Exponential(float(t.schedule.rate)),
               "polynomial": lambda: Polynomial(float(t.schedule.gamma)),
               "wang2013": lambda: Wang2013(int(t.schedule.burn_in))}[t.schedule.kind]()
        bounds = {"step_factor": tuple(float(v) for v in t.bounds["step_factor"]),
                  "num_steps": tuple(int(v) for v in t.bounds["num_steps"])}
        tuner = BanditTuner(bounds, seed=int(seed_tuner.generate_state(1)[0]), alpha=float(t.alpha),
                            delta=float(t.delta), noise=float(t.noise), schedule=sch,
                            first_action=t.first_action, maxfun=t.maxfun)
    if t.reward == "esjd":
        reward = esjd_reward
    else:
        reward = (lambda res: cv_reward(res, t.cv_metric)) if replicas.n_cv else (lambda res: math.nan)
    return replicas, tuner, reward


# -- run directory -------------------------------------------------------------------

def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def atomic_write(path: Path, data: bytes) -> None:
    """Write via a temporary file and rename, so a kill never leaves half a file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _versions() -> dict:
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


def write_results(out: Path, replicas: ReplicaSet, tuner, log: list, wall_s: float, cfg: Config) -> dict:
    arrays = {"history_pred": np.array(replicas.history_pred), "history_count": np.array(replicas.history_count),
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
    atomic_write(out / "predictions.npz", _npz(**arrays))
    Q, noise = replicas.samples()
    atomic_write(out / "samples.npz", _npz(weights=Q, noise_precision=noise, arch=replicas.spec.arch))
    atomic_write(out / "tuner.json", json.dumps(tuner.state_dict(), indent=1).encode())
    summary = summarize(replicas, log, wall_s, cfg)
    atomic_write(out / "summary.json", json.dumps(summary, indent=2).encode())
    return summary


class Progress:
    """tqdm bar on a terminal, plain log lines otherwise."""

    def __init__(self, total: int, initial: int, quiet: bool = False):
        self.quiet = quiet
        self.bar = None
        if not quiet and sys.stderr.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total, initial=initial, unit="st", desc="super-transitions")
        self.total = total

    def update(self, e: dict):
        acc = float(np.mean(e["acceptance"]))
        reward = "failed" if e["reward"] is None else f"{e['reward']:.6g}"
        if self.bar is not None:
            self.bar.set_postfix_str(f"eps={e['step_factor']:.3f} L={e['num_steps']} reward={reward} acc={acc:.2f}")
            self.bar.update(1)
        elif not self.quiet:
            print(f"super-transition {e['i'] + 1}/{self.total}: eps={e['step_factor']:.4f} L={e['num_steps']} "
                  f"reward={reward} acceptance={acc:.3f} divergences={e['divergences']} {e['seconds']:.2f}s",
                  flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def run_experiment(cfg: Config, out, source: str = "<config>", resume: bool = False, quiet: bool = False,
                   stop_after=None) -> dict:
    """Run (or resume) ``cfg`` into directory ``out``; returns the summary.
    ``stop_after`` ends the process's work after that many super-transitions
    (as an interruption would), leaving the checkpoint behind."""
    out = Path(out)
    ckpt = out / "checkpoint.pkl"
    if resume and not ckpt.is_file():
        raise ConfigError(f"{out}: nothing to resume (no checkpoint.pkl)")
    if not resume and out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out}: the run directory exists and is not empty; use --resume or another --out")
    replicas, tuner, reward = build(cfg, source)      # all validation happens before anything is written
    out.mkdir(parents=True, exist_ok=True)
    resolved = yaml.safe_dump(to_dict(cfg), sort_keys=False).encode()
    if resume:
        if (out / "config.resolved.yaml").read_bytes() != resolved:
            raise ConfigError(f"{out}: the config differs from the one this run started with "
                              f"({out / 'config.resolved.yaml'})")
        state = pickle.loads(ckpt.read_bytes())
        load_replicas_state(replicas, state["replicas"])
        tuner = type(tuner).from_state(state["tuner"])
        log, wall, meta = state["log"], state["wall_s"], json.loads((out / "metadata.json").read_text())
        meta.setdefault("resumed", []).append(time.strftime("%Y-%m-%dT%H:%M:%S"))
    else:
        atomic_write(out / "config.resolved.yaml", resolved)
        log, wall = [], 0.0
        meta = {"name": cfg.name, "seed": cfg.run.seed, "config_source": str(source), "versions": _versions(),
                "machine": {"platform": platform.platform(), "processor": platform.processor(),
                            "cores": len(os.sched_getaffinity(0)), "threads": replicas.threads},
                "start": time.strftime("%Y-%m-%dT%H:%M:%S")}
    atomic_write(out / "metadata.json", json.dumps(meta, indent=2).encode())
    # The log file holds exactly the checkpointed entries (a kill may have left more).
    atomic_write(out / "log.jsonl", "".join(json.dumps(e) + "\n" for e in log).encode())
    progress = Progress(cfg.run.super_transitions, len(log), quiet)
    done_here = 0
    last = time.perf_counter()

    def after_each(entry, result):
        nonlocal wall, done_here, last
        wall += time.perf_counter() - last        # the step itself, not the previous checkpoint
        log.append(entry)
        with open(out / "log.jsonl", "a") as f:
            f.write(json.dumps(entry) + "\n")
        progress.update(entry)
        done_here += 1
        if replicas.n_super % cfg.run.checkpoint_every == 0 or replicas.n_super == cfg.run.super_transitions:
            state = {"replicas": replicas_state(replicas), "tuner": tuner.state_dict(), "log": log, "wall_s": wall}
            atomic_write(ckpt, pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
        last = time.perf_counter()
        return stop_after is not None and done_here >= stop_after

    try:
        run(replicas, tuner, cfg.run.super_transitions, cfg.run.budget, reward, callback=after_each,
            warmup=cfg.tuner.warmup_super_transitions)
    finally:
        progress.close()
    if replicas.n_super < cfg.run.super_transitions:
        return {}
    meta["end"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    atomic_write(out / "metadata.json", json.dumps(meta, indent=2).encode())
    return write_results(out, replicas, tuner, log, wall, cfg)
