"""The outer loop (Wang thesis Algorithm 3): ask -> super-transition -> reward -> tell.

Flow position: tuner + super-transition -> **runner** -> results. A hand-tuned
run is the same loop with a :class:`~adaptive_hmc.tuners.fixed.FixedTuner`.
"""
from __future__ import annotations

import math

from .replicas import ReplicaSet, super_transition
from .rewards import cv_error, cv_reward


def fallback_reward(tuner) -> float:
    """The reward told for a super-transition whose reward is not finite: the
    worst reward seen so far minus its spread (or -1 when there is none), so a
    failure ranks below every success without a far outlier that would flatten
    the reward model."""
    seen = [h["reward"] for h in tuner.history]
    if not seen:
        return -1.0
    spread = max(seen) - min(seen)
    return min(seen) - (spread if spread > 0 else abs(min(seen)) + 1.0)


def step(replicas: ReplicaSet, tuner, budget: int, reward=cv_reward, tell: bool = True) -> tuple:
    """One iteration of the loop; returns (log entry, SuperTransitionResult).
    With ``tell`` false (warm-up) the reward is logged but not told to the tuner."""
    action = tuner.ask()
    result = super_transition(replicas, float(action["step_factor"]), int(action["num_steps"]), budget)
    raw = float(reward(result))
    told = None
    h = {"p": None, "moved": False}
    if tell:
        told = raw if math.isfinite(raw) else fallback_reward(tuner)
        tuner.tell(action, told)
        h = tuner.history[-1]
    rec = result.record
    entry = {"i": result.index, "step_factor": result.step_factor, "num_steps": result.num_steps,
             "p": h["p"], "moved": h["moved"], "reward": raw if math.isfinite(raw) else None, "told": told,
             "cv_error": cv_error(result) if result.held_out else None,
             "acceptance": [round(float(a), 6) for a in result.acceptance],
             "divergences": int(rec.divergent.sum()), "iterations": result.n_iter,
             "leapfrog_steps": result.leapfrog_steps, "seconds": round(result.seconds, 4)}
    return entry, result


def run(replicas: ReplicaSet, tuner, super_transitions: int, budget: int, reward=cv_reward,
        callback=None, warmup: int = 0) -> list:
    """Run super-transitions until ``replicas`` has done ``super_transitions`` of
    them; ``callback(entry, result)`` after each ends the run early when it
    returns True. Returns the log entries.

    The rewards of the first ``warmup`` super-transitions are not told to the
    tuner: from a cold start they measure how far the chains still are from
    equilibrium, not the action, and one such outlier would dominate the
    reward model."""
    log = []
    while replicas.n_super < super_transitions:
        entry, result = step(replicas, tuner, budget, reward, tell=replicas.n_super >= warmup)
        log.append(entry)
        if callback is not None and callback(entry, result):
            break
    return log
