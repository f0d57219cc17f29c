"""How long a run will take, said before it starts: a short measured probe of
the sampler on this machine (every chain on its thread, Gibbs updates and
their moves on, as a super-transition runs them) scaled by a cost model of
the run: super-transitions x budget x the probe's seconds per leapfrog step,
plus the tuner's work between super-transitions.

Flow position: replicas, tuners -> **timing** -> cli (validate), estimator.
Changes no state: the probe runs on copies of the chains.
"""
from __future__ import annotations

import copy
import math
import time

import numpy as np

from .replicas import ReplicaSet
from .super_transition import super_transition
from .tuners.options import BanditOptions

#: The probe runs until it has taken this many seconds (doubling its leapfrog steps), or the run's budget.
PROBE_SECONDS = 0.5
#: A small step factor: the probe's trajectories neither diverge (which would end them early) nor matter.
PROBE_STEP_FACTOR = 0.05
#: Observations the tuner holds when its tell + ask is timed (its GP's cost grows with them).
TUNER_PROBE_OBSERVATIONS = 40


def seconds_per_step(replicas: ReplicaSet, num_steps: int, budget: int) -> float:
    """Seconds of a super-transition per leapfrog step of each chain, at
    trajectories of ``num_steps`` steps, measured by super-transitions from
    the present state that change nothing (all chains on the set's threads,
    the Gibbs updates on from the first step); the probe doubles its steps
    until it takes :data:`PROBE_SECONDS` or reaches ``budget``."""
    probe = copy.copy(replicas)
    probe.settings = replicas.settings._replace(initial_phase_steps=0)
    steps = min(budget, 2 * num_steps)
    while True:
        action = {"step_factor": PROBE_STEP_FACTOR, "num_steps": min(num_steps, steps)}
        _, result = super_transition(probe, replicas.state, action, steps, np.random.SeedSequence(0))
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
    for x in actions[:-1]:
        tuner.tell(x, -abs(x["step_factor"] - (a + b) / 2))
    t0 = time.perf_counter()
    tuner.tell(actions[-1], 0.0)
    tuner.ask()
    return time.perf_counter() - t0


def typical_num_steps(options) -> int:
    """The trajectory length the estimate assumes: a fixed tuner's, or the
    geometric middle of the bandit's bounds."""
    if isinstance(options, BanditOptions):
        lo, hi = options.bounds["num_steps"]
        return int(round(math.sqrt(lo * hi)))
    return int(options.num_steps)


def estimate(replicas: ReplicaSet, tuner_options, budget: int, super_transitions: int) -> dict:
    """The estimated seconds of ``super_transitions`` super-transitions of
    ``budget`` steps (sampling and tuner; compiling apart), with what it
    rests on."""
    L = min(typical_num_steps(tuner_options), budget)
    step = seconds_per_step(replicas, L, budget)
    tuner = tuner_seconds(tuner_options)
    per = budget * step + tuner
    return {"seconds": per * super_transitions, "per_super_transition": per, "seconds_per_step": step,
            "tuner_seconds": tuner, "num_steps": L, "chains": replicas.n_replicas, "threads": replicas.threads}


def describe(e: dict, super_transitions: int, max_seconds: float | None = None) -> str:
    """One line saying the estimate and its assumptions (``max_seconds``: a run until its chains meet)."""
    def span(s):
        return f"{s:.1f} s" if s < 10 else f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"
    head = (f"about {span(e['seconds'])} for {super_transitions} super-transitions" if max_seconds is None else
            f"at least about {span(e['seconds'])} ({super_transitions} super-transitions) and at most "
            f"{span(max_seconds)} (run.until.max_seconds; it stops earlier once the chains meet)")
    return (f"{head}, compiling apart: {span(e['per_super_transition'])} a super-transition, measured on this "
            f"machine by a probe of {e['chains']} chains on {e['threads']} threads at L = {e['num_steps']} "
            f"({1e6 * e['seconds_per_step']:.1f} us a leapfrog step), plus {1e3 * e['tuner_seconds']:.0f} ms of "
            f"tuner work; the tuner's choice of L moves it (short trajectories cost more per step)")
