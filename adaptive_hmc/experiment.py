"""A configured experiment: build the run from a
:class:`~adaptive_hmc.config.Config`, run the outer loop with a checkpoint
after every ``checkpoint_every`` super-transitions, and write the run directory.

Flow position: config -> **experiment** (runner + results).
"""
from __future__ import annotations

import sys
import time

import numpy as np

from .config import Config, ConfigError
from .data import Standardizer
from .results import RunDir, RunError
from .runner import RunSetup, make_run, run_super_transitions


def build(cfg: Config, source: str = "<config>") -> RunSetup:
    """The run's parts (:func:`~adaptive_hmc.runner.make_run`) for ``cfg``; raises ConfigError."""
    split = cfg.data.split(cfg.model.likelihood, source)
    (X, Y), tests = split.train, dict(split.tests)
    if cfg.data.standardize_inputs:
        sc = Standardizer.fit(X)
        X = sc.transform(X)
        tests = {n: (sc.transform(a), b) for n, (a, b) in tests.items()}
    s, r, t = cfg.sampler, cfg.run, cfg.tuner
    try:
        return make_run(cfg.model.spec(X.shape[1], split.n_outputs), X, Y, tuner=t.options(), seed=r.seed,
                        reward=t.reward, cv_metric=t.cv_metric, k=cfg.replicas.k,
                        full_data_chain=cfg.replicas.full_data_chain, priors=cfg.model.priors.prior_spec(),
                        settings=s.settings(), test_sets=tests,
                        initial_hyper=None if s.initial_hyper is None else float(s.initial_hyper),
                        init_scale=float(s.init_scale), burn_in_samples=r.burn_in.samples,
                        burn_in_super_transitions=r.burn_in.super_transitions, thin=r.thin, threads=r.threads)
    except ValueError as e:
        raise ConfigError(f"{source}: model/data: {e}") from None


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
    rd = RunDir(out)
    if resume and not rd.has_checkpoint:
        raise RunError(f"{rd.path}: nothing to resume (no checkpoint)")
    if not resume and not rd.is_empty():
        raise RunError(f"{rd.path}: the run directory exists and is not empty; use --resume or another --out")
    replicas, tuner, reward, cv_metric = build(cfg, source)   # all validation happens before anything is written
    if resume:
        rd.check_same_config(cfg)
        tuner, log, wall = rd.restore(replicas, type(tuner))
        meta = rd.read_metadata()
        meta.setdefault("resumed", []).append(time.strftime("%Y-%m-%dT%H:%M:%S"))
        rd.write_metadata(meta)
    else:
        meta = rd.start(cfg, source, replicas.threads)
        log, wall = [], 0.0
    rd.write_log(log)     # exactly the checkpointed entries (a kill may have left more)
    progress = Progress(cfg.run.super_transitions, len(log), quiet)
    done_here = 0
    last = time.perf_counter()

    def after_each(entry, result):
        nonlocal wall, done_here, last
        wall += time.perf_counter() - last        # the step itself, not the previous checkpoint
        rd.append_log(entry)
        progress.update(entry)
        done_here += 1
        if replicas.n_super % cfg.run.checkpoint_every == 0 or replicas.n_super == cfg.run.super_transitions:
            rd.save_checkpoint(replicas, tuner, log, wall)
        last = time.perf_counter()
        return stop_after is not None and done_here >= stop_after

    try:
        run_super_transitions(replicas, tuner, cfg.run.super_transitions, cfg.run.budget, reward, cv_metric,
                              callback=after_each, warmup=cfg.tuner.warmup_super_transitions, log=log)
    finally:
        progress.close()
    if replicas.n_super < cfg.run.super_transitions:
        return {}
    meta["end"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    rd.write_metadata(meta)
    return rd.write_results(replicas, tuner, log, wall, cfg)
