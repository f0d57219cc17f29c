"""How long a run will take, said before it starts: a short measured probe of
the sampler on this machine (every chain on its thread, Gibbs updates and
their moves on, as a super-transition runs them) scaled by a cost model of
the run: super-transitions x budget x the probe's seconds per leapfrog step,
plus the tuner's work between super-transitions.

A user density's run (:func:`density_estimate`) is probed the same way, on
chains of its own from the run's starts; its warm-up and budget depend on the
reference step that warm-up will find, so the estimate assumes one
(:data:`ASSUMED_STEP`) and says so.

Flow position: network_chains, density_chains, tuners -> **timing** -> cli (validate), estimator.
Changes no state: the probe runs on copies of the chains.
"""
from __future__ import annotations

import copy
import math
import time

import numpy as np

from .density_chains import SAMPLE_DEFAULTS, DensityChains, tuner_box
from .network_chains import NetworkChains
from ..samplers.adaptation import WARMUP_STEPS
from ..samplers.settings import Action
from .super_transition import super_transition
from ..tuners.options import BanditOptions

#: The probe runs until it has taken this many seconds (doubling its leapfrog steps), or the run's budget.
PROBE_SECONDS = 0.5
#: A small step factor: the probe's trajectories neither diverge (which would end them early) nor matter.
PROBE_STEP_FACTOR = 0.05
#: Observations the tuner holds when its tell + ask is timed (its GP's cost grows with them).
TUNER_PROBE_OBSERVATIONS = 40


def seconds_per_step(net: NetworkChains, num_steps: int, budget: int) -> float:
    """Seconds of a super-transition per leapfrog step of each chain, at
    trajectories of ``num_steps`` steps, measured by super-transitions from
    the present state that change nothing (all chains on the set's threads,
    the Gibbs updates on from the first step); the probe doubles its steps
    until it takes :data:`PROBE_SECONDS` or reaches ``budget``."""
    probe = copy.copy(net)
    probe.settings = net.settings._replace(initial_phase_steps=0)
    steps = min(budget, 2 * num_steps)
    while True:
        action = Action(PROBE_STEP_FACTOR, min(num_steps, steps))
        _, result = super_transition(probe, net.state, action, steps, np.random.SeedSequence(0))
        if result.seconds >= PROBE_SECONDS or steps >= budget:
            return result.seconds / steps
        steps = min(budget, 2 * steps)


def tuner_seconds(options) -> float:
    """Seconds of the bandit tuner's tell + ask holding
    :data:`TUNER_PROBE_OBSERVATIONS` observations (a GP fit and DIRECT), the
    work between super-transitions; 0 for a fixed action."""
    if not isinstance(options, BanditOptions):
        return 0.0
    tuner = options.tuner(0)
    rng = np.random.default_rng(0)
    lo, hi = options.bounds["num_steps"]
    (a, b) = options.bounds["step_factor"]
    actions = [{"step_factor": float(rng.uniform(a, b)), "num_steps": int(rng.integers(lo, hi + 1))}
               for _ in range(TUNER_PROBE_OBSERVATIONS)]
    accepted = {"acceptance": 0.9} if options.accept_floor is not None else {}   # the feasibility GP in use too
    for x in actions[:-1]:
        tuner.tell(x, -abs(x["step_factor"] - (a + b) / 2), **accepted)
    t0 = time.perf_counter()
    tuner.tell(actions[-1], 0.0, **accepted)
    tuner.ask()
    return time.perf_counter() - t0


def typical_num_steps(options) -> int:
    """The trajectory length the estimate assumes: the options' own ``typical_num_steps()`` (a fixed
    tuner's L, the geometric middle of the bandit's bounds); for options of one's own without it, the
    geometric middle of their L ``bounds``, or their ``num_steps``."""
    if callable(getattr(options, "typical_num_steps", None)):
        return int(options.typical_num_steps())
    if hasattr(options, "bounds"):
        lo, hi = options.bounds["num_steps"]
        return int(round(math.sqrt(lo * hi)))
    return int(options.num_steps)


def estimate(net: NetworkChains, tuner_options, budget: int, super_transitions: int) -> dict:
    """The estimated seconds of ``super_transitions`` super-transitions of
    ``budget`` steps (sampling and tuner; compiling apart), with what it
    rests on."""
    L = min(typical_num_steps(tuner_options), budget)
    step = seconds_per_step(net, L, budget)
    tuner = tuner_seconds(tuner_options)
    per = budget * step + tuner
    return {"seconds": per * super_transitions, "per_super_transition": per, "seconds_per_step": step,
            "tuner_seconds": tuner, "num_steps": L, "chains": net.n_chains, "threads": net.threads}


def _span(s: float) -> str:
    """Seconds in words: 1.2 s, 45 s, 3.5 min."""
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def describe(e: dict, super_transitions: int, max_seconds: float | None = None) -> str:
    """One line saying the estimate and its assumptions (``max_seconds``: a run until its chains meet)."""
    head = (f"about {_span(e['seconds'])} for {super_transitions} super-transitions" if max_seconds is None else
            f"at least about {_span(e['seconds'])} ({super_transitions} super-transitions) and at most "
            f"{_span(max_seconds)} (run.until.max_seconds; it stops earlier once the chains meet)")
    return (f"{head}, compiling apart: {_span(e['per_super_transition'])} a super-transition, measured on this "
            f"machine by a probe of {e['chains']} chains on {e['threads']} threads at L = {e['num_steps']} "
            f"({1e6 * e['seconds_per_step']:.1f} us a leapfrog step), plus {1e3 * e['tuner_seconds']:.0f} ms of "
            f"tuner work; the tuner's choice of L moves it (short trajectories cost more per step)")


#: The reference step (posterior sds) a density's estimate assumes warm-up finds: at or above it, warm-up
#: trajectories are the shortest (``WARMUP_STEPS``) and a super-transition the least budget (1000 steps a
#: chain), as on posteriordb's posteriors (docs/posteriordb.md; eight schools' is 0.38).
ASSUMED_STEP = 2.0 / WARMUP_STEPS
#: Warm-up iterations the probe times (each chain in turn, as warm-up runs them: their per-call overhead
#: outweighs a cheap density's leapfrog steps).
WARMUP_PROBE = 30


def density_estimate(model, starts, warmup: int, super_transitions: int, budget: int | None, trajectory_bounds,
                     threads: int | None = None, step_factor_bounds=SAMPLE_DEFAULTS.step_factor_bounds) -> dict:
    """The estimated seconds of a run of :func:`~adaptive_hmc.front.general.sample`
    (compiling apart) of ``model`` from ``starts``: warm-up (its first
    :data:`WARMUP_PROBE` iterations timed on chains of the probe's own) and
    ``super_transitions`` of ``budget`` steps a chain (all chains on their
    threads) at the middle of the trajectory bounds, plus the tuner's work,
    for the reference step :data:`ASSUMED_STEP`; the sampling probe times
    super-transitions of chains of its own at a small step, doubling its
    steps until it takes :data:`PROBE_SECONDS`."""
    budget, bounds = tuner_box(ASSUMED_STEP, step_factor_bounds, trajectory_bounds, budget or None)
    lo, hi = bounds["num_steps"]
    L = min(int(round(math.sqrt(lo * hi))), budget)
    steps = 2 * L
    while True:
        probe = DensityChains(model, starts, np.random.SeedSequence(0), threads)
        _, result = probe.step(probe.state, Action(PROBE_STEP_FACTOR, L), steps)
        if result.seconds >= PROBE_SECONDS or steps >= budget:
            break
        steps = min(budget, 2 * steps)
    per_step = result.seconds / steps                       # every chain one leapfrog step, on the threads
    probe = DensityChains(model, starts, np.random.SeedSequence(0), threads)
    n = min(warmup, WARMUP_PROBE)
    t0 = time.perf_counter()
    probe.warm_up(n)                                        # its first iterations: the longest trajectories
    warm = (time.perf_counter() - t0) / max(n, 1) * warmup
    tuner = tuner_seconds(BanditOptions(bounds))
    per = budget * per_step + tuner
    return {"seconds": warm + per * super_transitions, "warmup_seconds": warm, "per_super_transition": per,
            "seconds_per_step": per_step, "tuner_seconds": tuner, "num_steps": L, "budget": budget,
            "chains": probe.R, "threads": probe.threads}


def describe_density(e: dict, warmup: int, super_transitions: int, max_seconds: float | None = None) -> str:
    """One line saying a density run's estimate and its assumptions (``max_seconds``: a run until its chains meet)."""
    head = (f"about {_span(e['seconds'])}" if max_seconds is None else
            f"at least about {_span(e['seconds'])} and at most {_span(max_seconds)} (run.until.max_seconds; it "
            f"stops earlier once the chains meet)")
    return (f"{head}, compiling apart: {warmup} warm-up iterations ({_span(e['warmup_seconds'])}) and "
            f"{super_transitions} super-transitions of {e['budget']} leapfrog steps a chain "
            f"({_span(e['per_super_transition'])} each, {1e6 * e['seconds_per_step']:.1f} us a step of {e['chains']} "
            f"chains on {e['threads']} threads at L = {e['num_steps']}, measured on this machine, and "
            f"{1e3 * e['tuner_seconds']:.0f} ms of tuner work), if warm-up finds a step of at least "
            f"{ASSUMED_STEP:g} posterior sds (a stiffer posterior takes longer: its trajectories are longer)")
