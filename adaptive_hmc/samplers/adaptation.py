"""Warm-up adaptation for a target without step-size heuristics: the step
factor by dual averaging toward a target acceptance (Hoffman & Gelman 2014,
Stan's constants) and a diagonal metric from windowed estimates of the
position variance (Stan's expanding slow windows, pooled within chains).

Flow position: samplers (plain NumPy; no compiled code). :class:`WindowAdaptation`
is the whole warm-up as init / update / final (BlackJAX's ``window_adaptation``
shape); :class:`~adaptive_hmc.engine.density_chains.DensityChains` runs the
chains' single iterations between its updates.
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
#: How many iterations in a row dual averaging may sit at :data:`STEP_FLOOR` before warm-up stops, and the
#: smallest reference step warm-up may end with (posterior sds; 10^4 steps to cross one sd): chains that
#: cannot move.
STEP_FLOOR_PATIENCE, MIN_STEP = 25, 1e-4
#: Warm-up trajectories: L drawn uniformly from 1..L_w, L_w = ceil(WARMUP_LENGTH / step) within
#: [WARMUP_STEPS, MAX_WARMUP_STEPS] (a trajectory of about one posterior sd on average, in the metric's
#: units, however small the step: a stiff posterior still moves while its metric is learnt).
WARMUP_STEPS, MAX_WARMUP_STEPS, WARMUP_LENGTH = 16, 1024, 2.0


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


class WindowAdaptation:
    """Stan's warm-up of ``n`` iterations as init (this constructor) /
    :meth:`update` / :meth:`final`: the step by dual averaging toward
    ``target_accept`` from 1 / :data:`WARMUP_STEPS`, and at the end of each
    slow window (:func:`windows`) the metric's scale, the sd of the window's
    positions (:func:`pooled_variance`), after which the step's adaptation
    starts again from the present step. :attr:`checks` are the iterations
    before the slow windows (8, 16, 32, ...) at which the chains that run it
    look for lost chains (:func:`lost_chains`); after moving some,
    :meth:`restart`. The chains' loop asks :meth:`num_steps` for each
    iteration's L and reads :attr:`stuck` after each update."""

    def __init__(self, n: int, target_accept: float = 0.8):
        self.n, self.da = n, DualAveraging(1.0 / WARMUP_STEPS, target_accept)
        self.step_size = math.exp(self.da.log_step)
        self.slow = windows(n)
        self.checks = [c for c in (2 ** k for k in range(3, 32)) if c <= (self.slow[0][0] if self.slow else n - 1)]
        self.window_draws: list = []
        self.at_floor = 0

    def num_steps(self) -> int:
        """L_w of the next iteration (:data:`WARMUP_LENGTH` / step within the bounds)."""
        return min(MAX_WARMUP_STEPS, max(WARMUP_STEPS, math.ceil(WARMUP_LENGTH / self.step_size)))

    def restart(self) -> None:
        """The chains were moved: the step's adaptation starts again from its first step."""
        self.da.restart(1.0 / WARMUP_STEPS)
        self.step_size, self.at_floor = 1.0 / WARMUP_STEPS, 0

    def update(self, i: int, accept_prob: float, positions) -> np.ndarray | None:
        """After iteration ``i``: learn the step from the chains' mean
        ``accept_prob``; keep ``positions`` (R, D, in the position's units)
        within a slow window; at a window's end return the new scale (else None)."""
        self.step_size = self.da.update(accept_prob)
        self.at_floor = self.at_floor + 1 if self.step_size <= STEP_FLOOR * (1 + 1e-9) else 0
        if any(a <= i < b for a, b in self.slow):
            self.window_draws.append(positions)
        if any(i + 1 == b for _, b in self.slow):
            scale = np.sqrt(pooled_variance(np.array(self.window_draws).transpose(1, 0, 2)))
            self.window_draws = []
            self.da.restart(self.step_size)
            return scale
        return None

    @property
    def stuck(self) -> bool:
        """Whether the step has sat at its floor for :data:`STEP_FLOOR_PATIENCE` iterations."""
        return self.at_floor >= STEP_FLOOR_PATIENCE

    def final(self) -> float:
        """The reference step to keep: the average of the last stretch (the present step after no iteration)."""
        return self.da.final if self.n else self.step_size
