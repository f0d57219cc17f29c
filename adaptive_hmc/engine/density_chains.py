"""The chains of a user's log density: R chains of one
:class:`~adaptive_hmc.models.density.LogDensity`, each on its own scaled
target with its own random stream; a warm-up that adapts their metric and a
reference step (and moves chains lost far below the others); super-transitions
at the tuner's (step factor, L), every sample kept.

Flow position: models, samplers -> **density_chains** -> general
(:func:`~adaptive_hmc.front.general.sample`), driven by
:func:`~adaptive_hmc.engine.driver.drive`.
"""
from __future__ import annotations

import math
import os
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..models.base import NoHyper
from ..models.density import LogDensity
from .network_options import as_seed_sequence
from ..samplers.adaptation import MIN_STEP, WindowAdaptation, lost_chains
from ..samplers.chain import Observers, Record, copy_chain, new_chain, new_record, run_chain, run_chain_ready
from ..samplers.settings import Action, HMCSettings, check_settings
from .chain_set import ChainSetBase
from .super_transition import SuperTransitionResult, iterations

#: The chain-state arrays a checkpoint holds (a density has no hyperparameters).
CHAIN_ARRAYS = ("position", "grad", "momentum", "counters", "kd", "energy")
#: Super-transitions hold at least this many of the longest trajectories the tuner may ask for.
TRAJECTORIES_PER_SUPER_TRANSITION = 10


def tuner_box(step: float, step_factor_bounds, trajectory_bounds, budget: int | None) -> tuple:
    """(the budget, the tuner's bounds) of a density run whose reference step is ``step`` posterior sds: the
    step factor within ``step_factor_bounds`` (factors of the step), L from the ``trajectory_bounds`` (in
    posterior sds) over the step, the shortest at most half the budget and the longest within it; the
    budget, when None, :data:`TRAJECTORIES_PER_SUPER_TRANSITION` of the longest (at least 1,000). The one
    statement of the box, for the run and for its time estimate."""
    tlo, thi = trajectory_bounds
    lo, hi = max(1, math.ceil(tlo / step)), max(2, math.ceil(thi / step))
    if budget is None:
        budget = max(1000, TRAJECTORIES_PER_SUPER_TRANSITION * hi)
    lo = min(lo, budget // 2)
    return budget, {"step_factor": tuple(step_factor_bounds), "num_steps": (lo, min(budget, max(lo + 1, hi)))}


class SampleDefaults(NamedTuple):
    """The defaults of :func:`~adaptive_hmc.front.general.sample`'s options, declared
    once: its signature and a density config's keys take them from here."""

    warmup: int = 1000
    super_transitions: int = 40
    budget: int | None = None
    step_factor_bounds: tuple = (0.5, 1.5)
    trajectory_bounds: tuple = (3.0, 8.0)
    target_accept: float = 0.8


SAMPLE_DEFAULTS = SampleDefaults()


class DensityState(NamedTuple):
    """The chains of a user density as one value (the network's
    :class:`~adaptive_hmc.engine.network_state.NetworkState`'s counterpart):
    each chain's state, the metric's ``scale`` (the chains' coordinates are z,
    q = scale z), each chain's random stream (its PCG64 state), the
    super-transitions done, the warm-up's gradients and the reference step it
    found (in the metric's units, posterior sds), of which an action's step
    factor is a multiple (as a network's step factor multiplies its heuristic
    step scales). Nothing changes one in place: warm-up and
    :func:`density_super_transition` return new ones."""

    chains: tuple
    scale: np.ndarray
    streams: tuple
    n_super: int
    warmup_gradients: int
    reference_step: float = 1.0


def _generators(streams) -> list:
    """A Generator at each of the PCG64 states ``streams`` (sharing nothing with them)."""
    out = []
    for st in streams:
        g = np.random.Generator(np.random.PCG64(0))
        g.bit_generator.state = st
        out.append(g)
    return out


def _states(generators) -> tuple:
    return tuple(g.bit_generator.state for g in generators)


def density_super_transition(setup: "DensityChains", state: DensityState, action: Action, budget: int) -> tuple:
    """One super-transition from ``state``: :func:`~adaptive_hmc.engine.super_transition.iterations`
    of HMC at ``action`` on every chain of ``setup``, every sample kept; returns (the new
    :class:`DensityState`, :class:`~adaptive_hmc.engine.super_transition.SuperTransitionResult`
    whose ``step`` is the draws, (R, n_iter, D) in q's units) and changes neither argument."""
    step_factor, num_steps = Action.of(action)
    s = check_settings(setup.settings._replace(step_factor=step_factor * state.reference_step, num_steps=num_steps))
    n_iter = iterations(budget, num_steps, s.jitter)
    rec = new_record(setup.R, n_iter, 0)
    kept = np.empty((setup.R, n_iter, setup.model.dim))
    chains, streams, targets = [copy_chain(c) for c in state.chains], _generators(state.streams), \
        setup.targets(state.scale)

    def one(j):
        obs = Observers.keeping(kept[j])
        run_chain(targets[j], chains[j], s, n_iter, Record(*(a[j] for a in rec)), obs, streams[j])
    t0 = time.perf_counter()
    setup.each(one)
    seconds = time.perf_counter() - t0
    new = state._replace(chains=tuple(chains), streams=_states(streams), n_super=state.n_super + 1)
    return new, SuperTransitionResult(state.n_super, step_factor, num_steps, n_iter, rec, seconds,
                                      kept * state.scale)


#: The per-draw statistics of a density run (the fields of the chains' :class:`Record`): acceptance
#: probability, divergence, L, U and the kinetic temperature.
RECORD_STATS = ("accept_prob", "divergent", "num_steps", "energy", "temperature")


class DensityChains(ChainSetBase):
    """R chains of one :class:`~adaptive_hmc.models.density.LogDensity`, each
    with its own scaled target and random stream, a
    :class:`~adaptive_hmc.engine.runner.ChainSet` (what
    :func:`~adaptive_hmc.engine.driver.drive` drives): the
    setup (the density, settings, threads) and :attr:`state`, a
    :class:`DensityState` that :meth:`warm_up` replaces and :meth:`step` (one
    :func:`density_super_transition`) advances for the driver, which threads it. The draws go to the run's
    sink (:meth:`unit`: a run directory's store, or :func:`~adaptive_hmc.front.general.sample`'s collecting
    sink), not to the chains."""

    def __init__(self, model: LogDensity, positions, seed, threads: int | None = None,
                 settings: HMCSettings = HMCSettings(jitter=True)):
        positions = np.array(positions, dtype=np.float64)
        if positions.ndim != 2 or positions.shape[1] != model.dim or positions.shape[0] < 1:
            raise ValueError(f"initial_positions has shape {positions.shape}; expected (chains, {model.dim})")
        if not np.all(np.isfinite(positions)):
            raise ValueError("initial_positions: every coordinate must be finite")
        self.model, self.settings = model, check_settings(settings, need_step=False)
        self.R = positions.shape[0]
        self.threads = min(self.R, int(threads) if threads else len(os.sched_getaffinity(0)))
        self._targets = (None, None)
        self.state = DensityState(tuple(new_chain(q.copy(), NoHyper.empty()) for q in positions), np.ones(model.dim),
                                  tuple(np.random.PCG64(s).state for s in as_seed_sequence(seed).spawn(self.R)), 0, 0)

    # -- the current state's parts, by name
    n_super = property(lambda self: self.state.n_super)
    scale = property(lambda self: self.state.scale)
    chains = property(lambda self: self.state.chains)
    warmup_gradients = property(lambda self: self.state.warmup_gradients)

    def targets(self, scale) -> list:
        """Each chain's target (a scratch of its own) for coordinates scaled by ``scale``, kept while it is the same."""
        key, targets = self._targets
        if key is None or not np.array_equal(key, scale):
            targets = [self.model.chain_target(scale) for _ in range(self.R)]
            self._targets = (np.array(scale, copy=True), targets)
        return targets

    @staticmethod
    def rescaled(chains, scale, new_scale) -> list:
        """``chains`` (changed in place) moved to coordinates scaled by ``new_scale`` (the same positions q)."""
        for c in chains:
            c.position[:] = c.position * scale / new_scale
            c.momentum[:] = 0.0
        return chains

    def each(self, fn):
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
        return [(self.targets(self.scale)[0], copy_chain(self.chains[0]), s, rec, obs, np.random.default_rng(0))
                for obs in (None, Observers.keeping(np.empty((0, self.model.dim))))]

    def kernels_ready(self) -> bool | None:
        """Whether the chain loop is compiled or in the compile cache (None: unknown)."""
        ready = [run_chain_ready(*call) for call in self._compile_calls()]
        return None if None in ready else all(ready)

    def start_chains(self) -> None:
        """Nothing: a density's chains start where they are given (:meth:`warm_up` moves lost ones)."""
        return None

    def compile(self) -> float:
        """Compile (or load from the cache) the chain loop for this density
        with and without observers, running no iteration; its seconds."""
        t0 = time.perf_counter()
        for target, chain, s, rec, obs, rng in self._compile_calls():
            run_chain(target, chain, s, 0, rec, obs, rng)
        return time.perf_counter() - t0

    def warm_up(self, n: int, target_accept: float = 0.8) -> float:
        """``n`` warm-up iterations (L uniform in 1..L_w, see
        :data:`WARMUP_LENGTH`) from :attr:`state`, which it replaces: the step
        factor by dual averaging toward ``target_accept`` (the chains' mean
        acceptance probability) and, at the end of each of Stan's slow windows,
        the scale set to the sd of the window's positions. Before the slow
        windows (at iterations 8, 16, 32, ...) chains that accepted nothing
        since the last look and whose log density is far below the best chain's
        (:func:`~adaptive_hmc.samplers.adaptation.lost_chains`) are moved to
        another chain's position, with a warning, and the step's adaptation
        starts again. Returns the step factor kept (the average of the last
        stretch); :class:`WarmupError` when the step sits at its floor or ends
        below :data:`MIN_STEP`: the chains cannot move."""
        chains, streams = [copy_chain(c) for c in self.state.chains], _generators(self.state.streams)
        scale, gradients = self.state.scale, self.state.warmup_gradients
        w = WindowAdaptation(n, target_accept)
        rec = new_record(self.R, 1, 0)
        moved, looked = np.zeros(self.R, bool), 0
        for i in range(n):
            if i in w.checks:
                if self._relocate(chains, streams, i, moved, looked):
                    w.restart()
                moved[:], looked = False, i
            s = self.settings._replace(step_factor=w.step_size, num_steps=w.num_steps(), jitter=True)
            targets = self.targets(scale)
            for j in range(self.R):           # one iteration each: too short to be worth a thread
                run_chain(targets[j], chains[j], s, 1, Record(*(a[j] for a in rec)), None, streams[j])
            self.model.check()
            gradients += int(rec.gradients.sum())
            moved |= rec.accepted[:, 0] > 0
            new_scale = w.update(i, float(np.mean(rec.accept_prob)), [c.position * scale for c in chains])
            if w.stuck:
                self._stuck(chains, w.step_size, i)
            if new_scale is not None:
                chains, scale = self.rescaled(chains, scale, new_scale), new_scale
        final = w.final()
        if final < MIN_STEP:
            self._stuck(chains, final, n - 1)
        self.state = self.state._replace(chains=tuple(chains), scale=scale, streams=_states(streams),
                                         warmup_gradients=gradients, reference_step=float(final))
        return final

    def step(self, state: DensityState, action: Action, budget: int) -> tuple:
        """(the new state, the result) of one :func:`density_super_transition` from ``state`` at ``action``, a
        pure function of them (:attr:`state` is not changed)."""
        return density_super_transition(self, state, action, budget)

    @staticmethod
    def unit(result: SuperTransitionResult) -> tuple:
        """What a super-transition adds to the run (the sample store's unit): its draws (R, n, D) and per-draw
        statistics ({field: (R, n)}, :data:`RECORD_STATS`)."""
        return np.stack(result.unit), {f: getattr(result.record, f) for f in RECORD_STATS}

    # -- checkpoints (the chain-set interface of runner.ChainSet) -----------------------
    def checkpoint(self) -> dict:
        """What a checkpoint holds of the chains: their arrays (:data:`CHAIN_ARRAYS`), the metric's scale,
        the random streams' states, the super-transitions done and the warm-up's gradients (the draws are
        stored apart, once each)."""
        st = self.state
        return dict(chains=[[getattr(c, f).copy() for f in CHAIN_ARRAYS] for c in st.chains],
                    scale=st.scale.copy(), n_super=st.n_super, streams=list(st.streams),
                    warmup_gradients=st.warmup_gradients, reference_step=st.reference_step)

    def restore(self, saved: dict, units: list) -> None:
        """The state of :meth:`checkpoint` ``saved`` put back (its super-transitions' ``units``, :meth:`unit`, stay
        in the run's store, which alone holds the draws)."""
        chains = [copy_chain(c) for c in self.state.chains]
        for c, arrays in zip(chains, saved["chains"], strict=True):
            for f, a in zip(CHAIN_ARRAYS, arrays, strict=True):
                getattr(c, f)[...] = a
        if len(saved["streams"]) != self.R:
            raise ValueError(f"the checkpoint holds {len(saved['streams'])} streams for {self.R} chains")
        self.state = DensityState(tuple(chains), np.asarray(saved["scale"], dtype=np.float64),
                                  tuple(saved["streams"]), int(saved["n_super"]), int(saved["warmup_gradients"]),
                                  float(saved["reference_step"]))

    def log_densities(self, chains=None) -> np.ndarray:
        """Each chain's log density after its last iteration (up to a constant shared by the chains)."""
        return np.array([-c.energy[0] for c in (self.chains if chains is None else chains)])

    def _relocate(self, chains, streams, i: int, moved, since: int) -> list:
        """Move the lost ``chains`` (that have not moved since the last look,
        far below the best) to the position of a chain that is not lost, drawn
        by the lost chain's own stream; warn naming them."""
        lp = self.log_densities(chains)
        lost = lost_chains(lp, moved, self.model.dim)
        good = [j for j in range(self.R) if j not in lost]
        if not lost or not good:
            return []
        moves = []
        for j in lost:
            k = good[int(streams[j].integers(len(good)))]
            chains[j].position[:] = chains[k].position
            chains[j].momentum[:] = 0.0
            moves.append(f"chain {j} (log density {lp[j]:.4g}) to chain {k}'s position")
        warnings.warn(f"warm-up iteration {i}: moved {'; '.join(moves)}: they accepted no proposal since iteration "
                      f"{since}, far below the best chain's log density ({max(lp[good]):.4g}), and the step they "
                      f"need would stall every chain; start the chains nearer the posterior's bulk to keep them "
                      f"independent", ConvergenceWarning,
                      stacklevel=4)
        return lost

    def _stuck(self, chains, step: float, i: int):
        lp = self.log_densities(chains)
        j = int(np.argmin(lp))
        raise WarmupError(
            f"warm-up cannot find a step that moves the chains: the step shrank to {step:.3g} posterior sds by "
            f"iteration {i + 1} (the least useful is {MIN_STEP:g}); chain {j} is at log density {lp[j]:.4g}, the "
            f"best chain at {lp.max():.4g}. The density is finite there but too steep to follow (a start in a "
            f"region far from the posterior's mass, such as a non-stationary or non-invertible coefficient, or a "
            f"huge scale): start the chains nearer the posterior's bulk (draws from the prior, or values near 0 on "
            f"the unconstrained scale), or check the density where chain {j} is")


class WarmupError(RuntimeError):
    """Warm-up cannot find a step at which the chains move (the message names the chain and its log density)."""
