"""Warm-up adaptation for a target without step-size heuristics: the step
factor by dual averaging toward a target acceptance (Hoffman & Gelman 2014,
Stan's constants) and a diagonal metric from windowed estimates of the
position variance (Stan's expanding slow windows, pooled within chains).

Flow position: samplers (plain NumPy; no compiled code). Used by
:mod:`adaptive_hmc.front.general` between single iterations of the chains.
"""
from __future__ import annotations

import math

import numpy as np

#: The smallest step dual averaging proposes (in the metric's units): no arithmetic on trajectory lengths
#: derived from it can overflow, and a warm-up that sits there is stopped (:data:`STEP_FLOOR_PATIENCE`).
STEP_FLOOR = 1e-8
#: A chain is lost when its log density is this many nats, plus :data:`FAR_BELOW_PER_COORDINATE` per
#: coordinate, below the best chain's: far beyond the spread of a posterior's typical set (about sqrt(D/2)).
FAR_BELOW, FAR_BELOW_PER_COORDINATE = 1000.0, 10.0


class DualAveraging:
    """log step -> the step whose mean acceptance is ``target`` (Hoffman &
    Gelman 2014, eq. 6; gamma 0.05, t0 10, kappa 0.75, mu = log(10 eps0))."""

    def __init__(self, step: float, target: float = 0.8, gamma: float = 0.05, t0: float = 10.0,
                 kappa: float = 0.75):
        if not 0 < target < 1:
            raise ValueError(f"target acceptance {target!r}: must be in (0, 1)")
        self.target, self.gamma, self.t0, self.kappa = target, gamma, t0, kappa
        self.restart(step)

    def restart(self, step: float):
        """Start again from ``step`` (after the metric changed)."""
        self.mu, self.log_step, self.log_bar, self.h_bar, self.t = math.log(10 * step), math.log(step), 0.0, 0.0, 0

    def update(self, accept_prob: float) -> float:
        """Learn from one iteration's acceptance probability; the next step."""
        self.t += 1
        a = accept_prob if math.isfinite(accept_prob) else 0.0
        w = 1.0 / (self.t + self.t0)
        self.h_bar = (1 - w) * self.h_bar + w * (self.target - a)
        self.log_step = max(self.mu - math.sqrt(self.t) / self.gamma * self.h_bar, math.log(STEP_FLOOR))
        eta = self.t ** -self.kappa
        self.log_bar = eta * self.log_step + (1 - eta) * self.log_bar
        return math.exp(self.log_step)

    @property
    def final(self) -> float:
        """The averaged step, to keep after warm-up."""
        return math.exp(self.log_bar)


def windows(n: int, init: int = 75, term: int = 50, base: int = 25) -> list:
    """Stan's warm-up schedule of ``n`` iterations as the ends (exclusive) of
    its slow windows: a fast start of ``init``, windows of ``base``, 2 base,
    4 base, ... (the last stretched to the end), a fast end of ``term``; for
    n < init + term + base the shares 15% / 75% / 10%."""
    if n < 20:
        return []
    if init + term + base > n:
        init, term = int(0.15 * n), int(0.1 * n)
        base = n - init - term
    ends, start, size = [], init, base
    while start + size <= n - term:
        nxt = start + size
        if nxt + 2 * size > n - term:           # the next would not fit: this one takes the rest
            nxt = n - term
        ends.append(nxt)
        start, size = nxt, 2 * size
    return [(s, e) for s, e in zip([init] + ends[:-1], ends)]


def pooled_variance(draws) -> np.ndarray:
    """The within-chain variance of draws (R, n, D), pooled over chains and
    regularised toward 1e-3 as Stan's (n / (n + 5) var + 1e-3 5 / (n + 5))."""
    draws = np.asarray(draws)
    R, n = draws.shape[:2]
    var = draws.var(axis=1, ddof=1).mean(axis=0)
    m = R * n
    return m / (m + 5.0) * var + 1e-3 * 5.0 / (m + 5.0)


def lost_chains(log_density, moved, dim: int) -> list:
    """The chains that did not move (``moved`` false: no proposal accepted
    since the last look) and whose log density is far below the best chain's
    (:data:`FAR_BELOW` + :data:`FAR_BELOW_PER_COORDINATE` x ``dim`` nats), or
    not finite: where the shared step would have to shrink without bound for
    them to move (a start where the density is finite but astronomically
    small, such as an ARMA model's non-invertible region). A chain still
    climbing from a far start moves, and is left alone."""
    lp = np.asarray(log_density, dtype=np.float64)
    ok = np.isfinite(lp)
    if not ok.any():
        return list(range(lp.size))
    best = lp[ok].max()
    return [j for j in range(lp.size)
            if not moved[j] and (not ok[j] or lp[j] < best - FAR_BELOW - FAR_BELOW_PER_COORDINATE * dim)]
