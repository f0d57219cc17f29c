"""The chains of a user's log density: R chains of one
:class:`~adaptive_hmc.models.density.LogDensity`, each on its own scaled
target with its own random stream; a warm-up that adapts their metric and a
reference step (and moves chains lost far below the others); super-transitions
at the tuner's (step factor, L), every sample kept.

Flow position: models, samplers -> **density_chains** -> general
(:func:`~adaptive_hmc.general.sample`), driven by
:func:`~adaptive_hmc.runner.run_super_transitions`.
"""
from __future__ import annotations

import math
import os
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .models.base import NoHyper
from .models.density import LogDensity
from .models.mlp import MLPSpec
from .models.predictive import new_accumulator
from .replica_options import as_seed_sequence
from .samplers.adaptation import STEP_FLOOR, DualAveraging, lost_chains, pooled_variance, windows
from .samplers.chain import Observers, Record, copy_chain, new_chain, new_record, run_chain, run_chain_ready
from .samplers.settings import Action, HMCSettings, check_settings
from .super_transition import SuperTransitionResult, iterations

#: The chain-state arrays a checkpoint holds (a density has no hyperparameters).
CHAIN_ARRAYS = ("position", "grad", "momentum", "counters", "kd", "energy")
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
    with its own scaled target and random stream, a
    :class:`~adaptive_hmc.runner.ChainSet` (what
    :func:`~adaptive_hmc.runner.run_super_transitions` drives; :meth:`run` is
    one super-transition). ``draws`` collects every sample (R lists of (n, D) arrays, in
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

    # -- checkpoints (the chain-set interface of runner.ChainSet) -----------------------
    def checkpoint(self) -> dict:
        """What a checkpoint holds of the chains: their arrays (:data:`CHAIN_ARRAYS`), the metric's scale,
        the random streams' states, the super-transitions done and the warm-up's gradients (the draws are
        stored apart, once each)."""
        return dict(chains=[[getattr(c, f).copy() for f in CHAIN_ARRAYS] for c in self.chains],
                    scale=self.scale.copy(), n_super=self.n_super,
                    streams=[g.bit_generator.state for g in self.streams], warmup_gradients=self.warmup_gradients)

    def restore(self, saved: dict, draws) -> None:
        """Put back the chains of :meth:`checkpoint` ``saved`` and the ``draws`` of its super-transitions
        (R lists of (n, D) arrays in the scaled coordinates, or None before the first)."""
        self.scale = np.asarray(saved["scale"], dtype=np.float64)
        self.targets = [self.model.chain_target(self.scale) for _ in range(self.R)]
        for c, arrays in zip(self.chains, saved["chains"], strict=True):
            for f, a in zip(CHAIN_ARRAYS, arrays, strict=True):
                getattr(c, f)[...] = a
        for g, st in zip(self.streams, saved["streams"], strict=True):
            g.bit_generator.state = st
        self.n_super, self.warmup_gradients = saved["n_super"], saved["warmup_gradients"]
        if draws is not None:
            self.draws = draws

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

    def run(self, action: Action, budget: int) -> SuperTransitionResult:
        """One super-transition: :func:`~adaptive_hmc.super_transition.iterations` of
        HMC at ``action`` on every chain, every sample kept."""
        step_factor, num_steps = Action.of(action)
        s = check_settings(self.settings._replace(step_factor=step_factor, num_steps=num_steps))
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
        result = SuperTransitionResult(self.n_super, step_factor, num_steps, n_iter, rec, [], "none",
                                       seconds, None)
        self.n_super += 1
        return result


class WarmupError(RuntimeError):
    """Warm-up cannot find a step at which the chains move (the message names the chain and its log density)."""
