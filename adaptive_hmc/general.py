"""Chains of any log density, tuned by the bandit: a user's function of the
unconstrained position returning (log density, gradient) in, ArviZ
InferenceData out.

Flow position: models (:class:`~adaptive_hmc.models.density.LogDensity`) ->
samplers (warm-up adaptation, the compiled chain loop) -> **general** ->
runner (the outer loop: ask -> super-transition -> reward -> tell). After a
warm-up that adapts a diagonal metric and a reference step
(:mod:`~adaptive_hmc.samplers.adaptation`), every chain samples the one
posterior in super-transitions of a fixed budget of leapfrog steps at the
tuner's (step factor, L); every sample after warm-up is kept.
"""
from __future__ import annotations

import math
import os
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .diagnostics import chain_statistics, summary_line, trust_warnings
from .models.base import NoHyper
from .models.density import LogDensity
from .models.mlp import MLPSpec
from .models.predictive import new_accumulator
from .replica_options import as_seed_sequence
from .super_transition import SuperTransitionResult, iterations
from .rewards import esjd_reward
from .runner import can_draw_bar, compile_kernels, run_super_transitions
from .density_checkpoint import CheckpointError, previous_checkpoint, restore, run_key, save
from .samplers.adaptation import STEP_FLOOR, DualAveraging, lost_chains, pooled_variance, windows
from .samplers.chain import Observers, Record, copy_chain, new_chain, new_record, run_chain, run_chain_ready
from .samplers.settings import HMCSettings, check_settings
from .tuners.options import BanditOptions

#: Warm-up trajectories: L drawn uniformly from 1..L_w, L_w = ceil(WARMUP_LENGTH / step) within
#: [WARMUP_STEPS, MAX_WARMUP_STEPS] (a trajectory of about one posterior sd on average, in the metric's
#: units, however small the step: a stiff posterior still moves while its metric is learnt).
WARMUP_STEPS, MAX_WARMUP_STEPS, WARMUP_LENGTH = 16, 1024, 2.0
#: Super-transitions hold at least this many of the longest trajectories the tuner may ask for.
TRAJECTORIES_PER_SUPER_TRANSITION = 10
#: The smallest reference step warm-up may end with (posterior sds; 10^4 steps to cross one sd), and how many
#: iterations in a row dual averaging may sit at its floor before warm-up stops: chains that cannot move.
MIN_STEP, STEP_FLOOR_PATIENCE = 1e-4, 25
_EMPTY = new_accumulator(MLPSpec(1, (1,), 1), np.empty((0, 1)), np.empty((0, 1)))


class DensityChains:
    """R chains of one :class:`~adaptive_hmc.models.density.LogDensity`, each
    with its own scaled target and random stream; :meth:`run` is one
    super-transition (the interface :func:`~adaptive_hmc.runner.run_super_transitions`
    drives). ``draws`` collects every sample (R lists of (n, D) arrays, in
    the scaled coordinates z; q = scale z)."""

    def __init__(self, model: LogDensity, positions, seed, threads: int | None = None,
                 settings: HMCSettings = HMCSettings(jitter=True)):
        positions = np.array(positions, dtype=np.float64)
        if positions.ndim != 2 or positions.shape[1] != model.dim or positions.shape[0] < 1:
            raise ValueError(f"initial_positions has shape {positions.shape}; expected (chains, {model.dim})")
        if not np.all(np.isfinite(positions)):
            raise ValueError("initial_positions: every coordinate must be finite")
        self.model, self.settings = model, check_settings(settings, need_step=False)
        self.R = positions.shape[0]
        self.scale = np.ones(model.dim)
        self.targets = [model.chain_target(self.scale) for _ in range(self.R)]
        self.chains = [new_chain(q.copy(), NoHyper.empty()) for q in positions]
        self.streams = [np.random.Generator(np.random.PCG64(s)) for s in as_seed_sequence(seed).spawn(self.R)]
        self.threads = min(self.R, int(threads) if threads else len(os.sched_getaffinity(0)))
        self.n_super, self.draws, self.warmup_gradients = 0, [[] for _ in range(self.R)], 0
        self.draws_stored = 0          # super-transitions whose draws a checkpoint's shards hold

    def rescale(self, scale):
        """Move every chain to coordinates scaled by ``scale`` (the same positions q)."""
        scale = np.asarray(scale, dtype=np.float64)
        for c in self.chains:
            c.position[:] = c.position * self.scale / scale
            c.momentum[:] = 0.0
        self.scale = scale.copy()
        self.targets = [self.model.chain_target(self.scale) for _ in range(self.R)]

    def _each(self, fn):
        if self.threads > 1:
            with ThreadPoolExecutor(self.threads) as ex:
                list(ex.map(fn, range(self.R)))
        else:
            for j in range(self.R):
                fn(j)
        self.model.check()

    def _compile_calls(self) -> list:
        """Arguments of the calls of the chain loop, with and without
        observers, that run no iteration and change nothing."""
        s = check_settings(self.settings._replace(step_factor=1.0, num_steps=1))
        rec = Record(*(a[0] for a in new_record(1, 0, 0)))
        return [(self.targets[0], copy_chain(self.chains[0]), s, rec, obs, np.random.default_rng(0))
                for obs in (None, Observers(_EMPTY, _EMPTY, -1, 1, np.empty((0, self.model.dim))))]

    def kernels_ready(self) -> bool | None:
        """Whether the chain loop is compiled or in the compile cache (None: unknown)."""
        ready = [run_chain_ready(*call) for call in self._compile_calls()]
        return None if None in ready else all(ready)

    def compile(self) -> float:
        """Compile (or load from the cache) the chain loop for this density
        with and without observers, running no iteration; its seconds."""
        t0 = time.perf_counter()
        for target, chain, s, rec, obs, rng in self._compile_calls():
            run_chain(target, chain, s, 0, rec, obs, rng)
        return time.perf_counter() - t0

    def warm_up(self, n: int, target_accept: float = 0.8) -> float:
        """``n`` warm-up iterations (L uniform in 1..L_w, see
        :data:`WARMUP_LENGTH`): the step factor by dual averaging toward
        ``target_accept`` (the chains' mean acceptance probability) and, at the
        end of each of Stan's slow windows, the scale set to the sd of the
        window's positions. Before the slow windows (at iterations 8, 16, 32,
        ...) chains that accepted nothing since the last look and whose log
        density is far below the best chain's
        (:func:`~adaptive_hmc.samplers.adaptation.lost_chains`) are moved to
        another chain's position, with a warning, and the step's adaptation
        starts again. Returns the step factor kept (the average of the last
        stretch); :class:`WarmupError` when the step sits at its floor or ends
        below :data:`MIN_STEP`: the chains cannot move."""
        da = DualAveraging(1.0 / WARMUP_STEPS, target_accept)
        step = math.exp(da.log_step)
        slow = windows(n)
        checks = [c for c in (2 ** k for k in range(3, 32)) if c <= (slow[0][0] if slow else n - 1)]
        window_draws: list = []
        rec = new_record(self.R, 1, 0)
        at_floor, moved, looked = 0, np.zeros(self.R, bool), 0
        for i in range(n):
            if i in checks:
                if self._relocate(i, moved, looked):
                    da.restart(1.0 / WARMUP_STEPS)
                    step, at_floor = 1.0 / WARMUP_STEPS, 0
                moved[:], looked = False, i
            L = min(MAX_WARMUP_STEPS, max(WARMUP_STEPS, math.ceil(WARMUP_LENGTH / step)))
            s = self.settings._replace(step_factor=step, num_steps=L, jitter=True)
            for j in range(self.R):           # one iteration each: too short to be worth a thread
                run_chain(self.targets[j], self.chains[j], s, 1, Record(*(a[j] for a in rec)), None, self.streams[j])
            self.model.check()
            self.warmup_gradients += int(rec.gradients.sum())
            moved |= rec.accepted[:, 0] > 0
            step = da.update(float(np.mean(rec.accept_prob)))
            at_floor = at_floor + 1 if step <= STEP_FLOOR * (1 + 1e-9) else 0
            if at_floor >= STEP_FLOOR_PATIENCE:
                self._stuck(step, i)
            if any(a <= i < b for a, b in slow):
                window_draws.append([c.position * self.scale for c in self.chains])
            if any(i + 1 == b for _, b in slow):
                self.rescale(np.sqrt(pooled_variance(np.array(window_draws).transpose(1, 0, 2))))
                window_draws = []
                da.restart(step)
        final = da.final if n else step
        if final < MIN_STEP:
            self._stuck(final, n - 1)
        return final

    def log_densities(self) -> np.ndarray:
        """Each chain's log density after its last iteration (up to a constant shared by the chains)."""
        return np.array([-c.energy[0] for c in self.chains])

    def _relocate(self, i: int, moved, since: int) -> list:
        """Move the lost chains (that have not moved since the last look, far
        below the best) to the position of a chain that is not lost, drawn by
        the lost chain's own stream; warn naming them."""
        lp = self.log_densities()
        lost = lost_chains(lp, moved, self.model.dim)
        good = [j for j in range(self.R) if j not in lost]
        if not lost or not good:
            return []
        moves = []
        for j in lost:
            k = good[int(self.streams[j].integers(len(good)))]
            self.chains[j].position[:] = self.chains[k].position
            self.chains[j].momentum[:] = 0.0
            moves.append(f"chain {j} (log density {lp[j]:.4g}) to chain {k}'s position")
        warnings.warn(f"warm-up iteration {i}: moved {'; '.join(moves)}: they accepted no proposal since iteration "
                      f"{since}, far below the best chain's log density ({max(lp[good]):.4g}), and the step they "
                      f"need would stall every chain; start the chains nearer the posterior's bulk to keep them "
                      f"independent", ConvergenceWarning,
                      stacklevel=4)
        return lost

    def _stuck(self, step: float, i: int):
        lp = self.log_densities()
        j = int(np.argmin(lp))
        raise WarmupError(
            f"warm-up cannot find a step that moves the chains: the step shrank to {step:.3g} posterior sds by "
            f"iteration {i + 1} (the least useful is {MIN_STEP:g}); chain {j} is at log density {lp[j]:.4g}, the "
            f"best chain at {lp.max():.4g}. The density is finite there but too steep to follow (a start in a "
            f"region far from the posterior's mass, such as a non-stationary or non-invertible coefficient, or a "
            f"huge scale): start the chains nearer the posterior's bulk (draws from the prior, or values near 0 on "
            f"the unconstrained scale), or check the density where chain {j} is")

    def run(self, step_factor: float, num_steps: int, budget: int) -> SuperTransitionResult:
        """One super-transition: :func:`~adaptive_hmc.super_transition.iterations` of
        HMC at (step factor, L) on every chain, every sample kept."""
        s = check_settings(self.settings._replace(step_factor=float(step_factor), num_steps=int(num_steps)))
        n_iter = iterations(budget, num_steps, s.jitter)
        rec = new_record(self.R, n_iter, 0)
        kept = [np.empty((n_iter, self.model.dim)) for _ in range(self.R)]

        def one(j):
            obs = Observers(_EMPTY, _EMPTY, -1, 1, kept[j])
            run_chain(self.targets[j], self.chains[j], s, n_iter, Record(*(a[j] for a in rec)), obs, self.streams[j])
        t0 = time.perf_counter()
        self._each(one)
        seconds = time.perf_counter() - t0
        for j in range(self.R):
            self.draws[j].append(kept[j] * self.scale)
        result = SuperTransitionResult(self.n_super, float(step_factor), int(num_steps), n_iter, rec, [], "none",
                                       seconds, None)
        self.n_super += 1
        return result


class WarmupError(RuntimeError):
    """Warm-up cannot find a step at which the chains move (the message names the chain and its log density)."""


#: Per-draw statistics in InferenceData's names, from the record's fields.
STATS = (("acceptance_rate", "accept_prob"), ("diverging", "divergent"), ("n_steps", "num_steps"), ("lp", "energy"),
         ("energy", "temperature"))


def sample(logp_grad, initial_positions, *, names: dict | None = None, constrain=None, warmup: int = 1000,
           super_transitions: int = 40, budget: int | None = None, step_factor_bounds=(0.5, 1.5),
           trajectory_bounds=(3.0, 8.0), target_accept: float = 0.8, seed=0, threads: int | None = None,
           tuner: BanditOptions | None = None, verbose: bool = False, checkpoint=None,
           stop_after: int | None = None):
    """Sample the density ``logp_grad(q) -> (log p(q), d log p / dq)`` over
    unconstrained coordinates with bandit-tuned HMC; returns ArviZ
    InferenceData.

    ``logp_grad`` is a Numba function (``numba.njit``; it runs inside the
    compiled chain loop) or any Python callable returning the two (called with
    the GIL held: slower). ``initial_positions`` (chains, dim) starts one chain
    each. ``names`` {name: shape} splits q into named parameters (default one
    vector "q"); ``constrain(Q) -> {name: array}``, given the draws Q (n, dim),
    reports them on the constrained scale instead (tau = exp(v), ...).

    ``warmup`` iterations adapt a diagonal metric (Stan's windows) and a
    reference step by dual averaging toward ``target_accept``; then
    ``super_transitions`` of ``budget`` leapfrog steps per chain (default: at
    least 1000, and 10 of the longest trajectories allowed) run at the
    tuner's actions (``tuner``: other
    :class:`~adaptive_hmc.tuners.options.BanditOptions`; its bounds are
    replaced): the step factor within ``step_factor_bounds`` times the
    reference step, and L such that the trajectory's length, step x L in the
    metric's units (posterior sds), is within ``trajectory_bounds`` (the
    defaults were chosen on posteriordb's posteriors: docs/posteriordb.md;
    with jitter a trajectory's length is uniform in 1..L steps). ``seed``
    decides every random number, whatever ``threads``.

    The result's ``posterior`` holds every post-warm-up draw; ``sample_stats``
    the acceptance probability, divergences, leapfrog steps and potential
    energy of each; ``attrs`` the tuner's log, the reference step, the metric
    scale, the gradient evaluations of the whole run (warm-up included) and
    the seconds of compiling (or loading from the cache), warm-up and sampling.

    ``checkpoint``: a file the state is written to after warm-up and after
    every super-transition (atomically; the one before it kept as
    ``NAME.prev.npz`` and taken when the newest is damaged), each
    super-transition's draws appended once to ``NAME.draws/``; a run given the same arguments
    and an existing checkpoint resumes from it, to the very draws an
    uninterrupted run makes; given more ``super_transitions`` than a finished
    run's checkpoint holds, it extends that run, to the draws of a run asked
    for the longer length at the start. ``stop_after``: return None after that many
    super-transitions of this call, leaving the checkpoint (as an interruption
    would).
    """
    import arviz as az

    for name, value, least in (("warmup", warmup, 0), ("super_transitions", super_transitions, 1),
                               ("budget", 1 if budget is None else budget, 1),
                               ("threads", 1 if threads is None else threads, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise ValueError(f"{name}={value!r}: an integer >= {least}")
    raw = np.asarray(initial_positions)
    if not (np.issubdtype(raw.dtype, np.integer) or np.issubdtype(raw.dtype, np.floating)):
        raise ValueError(f"initial_positions: real numbers, got dtype {raw.dtype}")
    q0 = np.atleast_2d(raw.astype(np.float64))
    model = LogDensity(logp_grad, q0.shape[1], names)
    model.check_start(q0)
    flo, fhi = (float(v) for v in step_factor_bounds)
    if not 0 < flo < fhi:
        raise ValueError(f"step_factor_bounds={tuple(step_factor_bounds)}: need 0 < low < high")
    tlo, thi = (float(v) for v in trajectory_bounds)
    if not 0 < tlo < thi:
        raise ValueError(f"trajectory_bounds={tuple(trajectory_bounds)}: need 0 < low < high")
    seed_chains, seed_tuner = as_seed_sequence(seed).spawn(2)
    chains = DensityChains(model, q0, seed_chains, threads)
    compile_s = compile_kernels(chains, quiet=not verbose and not can_draw_bar())
    key = run_key(q0, seed, warmup=int(warmup), budget=budget, step_factor_bounds=[flo, fhi],
                  trajectory_bounds=[tlo, thi], target_accept=float(target_accept),
                  tuner=None if tuner is None else repr(tuner))
    path = None if checkpoint is None else Path(checkpoint)
    if path is not None and (path.exists() or previous_checkpoint(path).exists()):
        run, bandit, log, stats, note = restore(path, key, chains)
        if note:
            print(note, file=sys.stderr, flush=True)
        if chains.n_super > super_transitions:
            raise CheckpointError(f"checkpoint {path}: holds {chains.n_super} super-transitions, more than the "
                                  f"super_transitions={super_transitions} asked for; ask for at least "
                                  f"{chains.n_super} (more extend the run), or give another path")
        step, budget, bounds = run["step"], run["budget"], run["bounds"]
    else:
        t0 = time.perf_counter()
        step = chains.warm_up(int(warmup), target_accept)
        lo, hi = max(1, math.ceil(tlo / step)), max(2, math.ceil(thi / step))
        if budget is None:
            budget = max(1000, TRAJECTORIES_PER_SUPER_TRANSITION * hi)
        lo = min(lo, budget // 2)
        bounds = {"step_factor": (flo * step, fhi * step), "num_steps": (lo, min(budget, max(lo + 1, hi)))}
        options = BanditOptions(bounds) if tuner is None else replace(tuner, bounds=bounds)
        bandit = options.tuner(int(seed_tuner.generate_state(1)[0]))
        run = dict(step=step, budget=budget, bounds=bounds, warmup_seconds=time.perf_counter() - t0)
        log, stats = [], []
        if path is not None:
            save(path, key, chains, run, bandit, log, stats)
    done_here = []

    def keep(entry, result):
        stats.append({field: getattr(result.record, field) for _, field in STATS})
        if path is not None:
            save(path, key, chains, run, bandit, log, stats)
        done_here.append(entry["i"])
        if verbose:
            print(f"super-transition {entry['i'] + 1}/{super_transitions}: eps={entry['step_factor']:.4g} "
                  f"L={entry['num_steps']} acceptance={np.mean(entry['acceptance']):.3f} "
                  f"divergences={entry['divergences']}", flush=True)
        return stop_after is not None and len(done_here) >= stop_after
    run_super_transitions(chains, bandit, super_transitions, budget, esjd_reward, callback=keep, warmup=0, log=log)
    if chains.n_super < super_transitions:
        return None
    Q = np.stack([np.concatenate(d) for d in chains.draws])                     # (R, n, dim)
    stats = {name: np.concatenate([st[field] for st in stats], axis=1) for name, field in STATS}
    R, n, D = Q.shape
    stats["energy"] = stats["lp"] + 0.5 * D * stats["energy"]     # the Hamiltonian: U + K (K = D T / 2)
    stats["lp"] = -stats["lp"]
    posterior = {k: v.reshape(R, n, *v.shape[1:]) for k, v in
                 (constrain(Q.reshape(R * n, D)) if constrain else model.split(Q.reshape(R * n, D))).items()}
    gradients = chains.warmup_gradients + int(sum(e["gradients"] for e in log))
    attrs = dict(reference_step=step, scale=chains.scale.tolist(), budget=budget,
                 num_steps_bounds=list(bounds["num_steps"]), gradients=gradients, compile_seconds=compile_s,
                 warmup_seconds=run["warmup_seconds"], sampling_seconds=sum(e["seconds"] for e in log),
                 tuner_log=[{k: e[k] for k in ("step_factor", "num_steps", "reward", "acceptance", "divergences")}
                            for e in log])
    st = chain_statistics(Q)
    if verbose:
        print(summary_line(st, stats, gradients, attrs["warmup_seconds"] + attrs["sampling_seconds"]), flush=True)
    for message in trust_warnings(st["rhat"], stats["diverging"], stats["energy"]):
        warnings.warn(message, ConvergenceWarning, stacklevel=2)
    return az.from_dict(posterior={k: np.asarray(v) for k, v in posterior.items()}, sample_stats=stats,
                        attrs={k: str(v) if k == "tuner_log" else v for k, v in attrs.items()})
