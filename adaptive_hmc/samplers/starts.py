"""Optimized starts: each chain begins at its own optimized network rather than
at small random weights (Sommer et al. 2024, MILE 2025: the members of a deep
ensemble as the starts of a sampler's chains).

Flow position: models -> **samplers** (called by the network's chain set once, before
its first super-transition, never inside a transition).

From each chain's own random start, :func:`optimized_start` runs L-BFGS
(scipy) on the log posterior of the weights with the hyperparameters held at
the chain's initial values (every free precision 1: weights of sd 1 on
standardised inputs and targets, noise sd 1), then frees them: a Gibbs update
of the hyperparameters given the optimized weights (the model's own update,
the interweaving moves included). ``StartOptions(rounds=R)`` repeats that R
times, each later round at the hyperparameters the last update drew, so that
the weights' scale and the noise level follow the data; measured on
statsmodels' fair, five rounds led the chains deep into fits of the training
rows that predicted worse (docs/RESULTS.md, optimized starts), so one round is
the default. The chains stay apart because each climbs from its own start and
its own random stream into whichever mode that start leads to
(``tests/test_starts.py`` checks that chains started in two modes are told
apart by R-hat).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from ..models.base import energy_grad, gibbs


#: Kinds of start of a network's chains (``start``): "random", the chains' random (or zero) weights as they are
#: (FBM, the papers); "optimized", each chain from its own optimized network (:func:`optimized_start`).
STARTS = ("random", "optimized")


@dataclass(frozen=True)
class StartOptions:
    """How :func:`optimized_start` optimizes: ``rounds`` of at most
    ``iterations`` L-BFGS iterations each, a Gibbs update of the
    hyperparameters after each; ``max_seconds`` caps the whole set's
    optimization (reached, the chains start where they got to, which then
    depends on the machine's speed: the run says so)."""

    rounds: int = 1
    iterations: int = 2000
    max_seconds: float = 120.0

    def __post_init__(self):
        for name in ("rounds", "iterations"):
            v = getattr(self, name)
            if int(v) != v or v < 1:
                raise ValueError(f"start {name}={v!r}: must be an integer >= 1")
        if not self.max_seconds > 0:
            raise ValueError(f"start max_seconds={self.max_seconds!r}: must be > 0")


class _Counted:
    """The potential energy and its gradient at fixed hyperparameters, for scipy, counting evaluations;
    not finite (weights so large that the network overflows) reads as +inf with a zero gradient, which
    L-BFGS's line search backs away from."""

    def __init__(self, target, hyper, dim: int):
        self.target, self.hyper, self.grad, self.evaluations = target, hyper, np.empty(dim), 0

    def __call__(self, q):
        self.evaluations += 1
        u = energy_grad(np.ascontiguousarray(q), self.grad, self.target, self.hyper)
        if not (math.isfinite(u) and np.all(np.isfinite(self.grad))):
            return math.inf, np.zeros_like(q)
        return u, self.grad.copy()


def optimized_start(target, q, hyper, rng, options: StartOptions = StartOptions(),
                    deadline: float = math.inf) -> dict:
    """Optimize a chain's start in place: ``q`` (its weights) and ``hyper``
    (its hyperparameters, updated by Gibbs after each round, with ``rng``).
    Stops early at ``deadline`` (a ``time.perf_counter()`` value). Returns
    what it did: energies before and after, rounds, L-BFGS iterations,
    gradient evaluations, and whether the deadline cut it short."""
    fn = _Counted(target, hyper, q.size)
    u0 = fn(q)[0]
    iterations, rounds, cut = 0, 0, False
    for _ in range(options.rounds):
        if time.perf_counter() >= deadline:
            cut = True
            break

        def stop(intermediate_result):
            if time.perf_counter() >= deadline:
                raise StopIteration

        res = minimize(fn, q.copy(), jac=True, method="L-BFGS-B", callback=stop,
                       options={"maxiter": options.iterations, "maxcor": 20})
        if np.all(np.isfinite(res.x)) and math.isfinite(res.fun):
            q[:] = res.x
        iterations += int(res.nit)
        rounds += 1
        gibbs(q, target, hyper, rng)
    grad = np.empty(q.size)
    return {"energy_before": float(u0), "energy_after": float(energy_grad(q, grad, target, hyper)),
            "rounds": rounds, "iterations": iterations, "gradients": fn.evaluations + 1, "cut_short": cut}
