"""Hybrid Monte Carlo transitions (Duane et al. 1987; Neal 1992 eqs 15-23;
Neal 1993 eq 16; acceptance windows of Neal 1994 as used by Rasmussen 1996).

Flow position: integrator -> **transition** -> iteration
(:mod:`adaptive_hmc.samplers.chain`). :func:`hmc_kernel` works in place on
arrays, with the hyperparameters held fixed and the step sizes given.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba.extending import overload

from ..jit import njit
from .leapfrog import kinetic_with, leapfrog_with, set_state
from .settings import KernelInfo


@njit(inline="always")
def refresh_momentum(p, persistence, rng):
    """p <- alpha p + sqrt(1 - alpha^2) n (Neal 1993 eq 16); alpha = 0 draws afresh."""
    c = math.sqrt(1.0 - persistence * persistence)
    for k in range(p.size):
        p[k] = persistence * p[k] + c * rng.standard_normal()


@njit(inline="always")
def refresh_momentum_metric(p, persistence, low_rank, rng):
    """:func:`refresh_momentum` whose fresh part is drawn from N(0, M) under the low-rank metric
    (rows [lambda_j, u_j]: M^(1/2) = I + sum_j (lambda_j^(-1/2) - 1) u_j u_j^T; no rows: the same draws
    and arithmetic as :func:`refresh_momentum`)."""
    if low_rank.shape[0] == 0:
        return refresh_momentum(p, persistence, rng)
    n = np.empty(p.size)
    for k in range(p.size):
        n[k] = rng.standard_normal()
    for j in range(low_rank.shape[0]):
        d = 0.0
        for k in range(p.size):
            d += low_rank[j, k + 1] * n[k]
        c = (1.0 / math.sqrt(low_rank[j, 0]) - 1.0) * d
        for k in range(p.size):
            n[k] += c * low_rank[j, k + 1]
    c = math.sqrt(1.0 - persistence * persistence)
    for k in range(p.size):
        p[k] = persistence * p[k] + c * n[k]


def refresh_momentum_with(p, persistence, low_rank, rng):
    """In compiled code: :func:`refresh_momentum_metric` for a low-rank metric's rows,
    :func:`refresh_momentum` for :data:`~adaptive_hmc.samplers.settings.NO_METRIC`."""
    raise NotImplementedError("compiled code only")


@overload(refresh_momentum_with)         # not inlined (see leapfrog.py)
def _refresh_momentum_with(p, persistence, low_rank, rng):
    if low_rank.ndim == 1:
        return lambda p, persistence, low_rank, rng: refresh_momentum(p, persistence, rng)
    return lambda p, persistence, low_rank, rng: refresh_momentum_metric(p, persistence, low_rank, rng)


@njit(inline="always")
def draw_step_sizes(step_sizes, step_nu, rng):
    """The transition's step sizes: ``step_sizes``, times exp(nu C) with C
    standard Cauchy when nu > 0 (Neal 1992 eq 23)."""
    if step_nu > 0.0:
        return step_sizes * math.exp(step_nu * math.tan(math.pi * (rng.random() - 0.5)))
    return step_sizes.copy()


@njit(inline="always")
def _offer(idx, lo, hi, q, g, p, sign, u, h, candidate, rng):
    """Streaming choice of one state of window [lo, hi] with probability
    proportional to exp(-H): the state (q, sign p) at ``idx`` replaces the
    ``candidate`` (log sum, q, g, p, energy) with probability exp(-H) / (sum
    of exp(-H) so far). Returns the new log sum and the candidate's energy."""
    logsum, cq, cg, cp, cu = candidate
    if idx < lo or idx > hi:
        return logsum, cu
    m = max(logsum, -h)
    new = m + math.log(math.exp(logsum - m) + math.exp(-h - m))
    if rng.random() < math.exp(-h - new):
        set_state(cq, cg, cp, q, g, p, sign)
        cu = u
    return new, cu


class WindowChoice(NamedTuple):
    """The two windows of a windowed trajectory, reject [0, W-1] and accept
    [L-W+1, L]: per window the log of the sum of exp(-H) over the states
    offered to it so far and the state chosen among them (q, g, p, energy)."""

    reject_logsum: float
    reject_q: object
    reject_g: object
    reject_p: object
    reject_u: float
    accept_logsum: float
    accept_q: object
    accept_g: object
    accept_p: object
    accept_u: float


@njit(inner=True)
def _offer_both(idx, W, L, q, g, p, sign, u, h, sel, rng):
    """Offer the state (q, sign p) at trajectory index ``idx`` to both windows of ``sel``
    (a :class:`WindowChoice`); returns the new one. The sign instead of a negated copy: no array a step."""
    log_r, ru = _offer(idx, 0, W - 1, q, g, p, sign, u, h, (sel.reject_logsum, sel.reject_q, sel.reject_g,
                                                             sel.reject_p, sel.reject_u), rng)
    log_a, au = _offer(idx, L - W + 1, L, q, g, p, sign, u, h, (sel.accept_logsum, sel.accept_q, sel.accept_g,
                                                                 sel.accept_p, sel.accept_u), rng)
    return WindowChoice(log_r, sel.reject_q, sel.reject_g, sel.reject_p, ru, log_a, sel.accept_q, sel.accept_g,
                        sel.accept_p, au)


@njit(inline="always")
def squared_distance(a, b):
    """||a - b||^2. The square is a product, not ``** 2``: Numba may lower a
    power through a helper compiled without this package's fastmath flags and
    shared by every later compile in the process, so that the kernel's code
    (and its last bits) would depend on what the process compiled before
    (tests/test_reproducible.py)."""
    s = 0.0
    for k in range(a.size):
        d = a[k] - b[k]
        s += d * d
    return s


@njit(inline="always")
def _trajectory_start(q, u, g, p, step_sizes, settings, rng):
    """What every HMC transition starts with: the momentum refresh, the
    transition's step sizes, its trajectory length L (drawn from 1..L with
    jitter), the starting total energy and copies of the starting state."""
    refresh_momentum_with(p, settings.persistence, settings.low_rank, rng)
    step = draw_step_sizes(step_sizes, settings.step_nu, rng)
    L = settings.num_steps
    if settings.jitter:
        L = 1 + int(rng.random() * L)
    return step, L, u + kinetic_with(p, settings.low_rank), q.copy(), g.copy(), p.copy()


@njit(inner=True)
def plain_hmc_kernel(q, u, g, p, step_sizes, settings, target, hyper, rng):
    """:func:`hmc_kernel` with window 1: the last state of the trajectory is the proposal."""
    step, L, h0, q0, g0, p0 = _trajectory_start(q, u, g, p, step_sizes, settings, rng)
    u1, used, ok = leapfrog_with(q, p, g, step, L, target, hyper, settings.low_rank)
    dh = u1 + kinetic_with(p, settings.low_rank) - h0 if ok else math.inf
    divergent = (not ok) or (not dh <= settings.max_energy_error)
    prob = 0.0 if divergent else min(1.0, math.exp(-dh))
    jump = 0.0 if divergent else squared_distance(q, q0)
    if not divergent and rng.random() < prob:
        return KernelInfo(1.0, prob, dh, False, used, u1, jump)
    set_state(q, g, p, q0, g0, p0, -1.0)
    return KernelInfo(0.0, prob, dh, divergent, used, u, jump)


@njit(inner=True)
def windowed_hmc_kernel(q, u, g, p, step_sizes, settings, target, hyper, rng):
    """:func:`hmc_kernel` with a window W > 1 (Neal 1994)."""
    step, L, h0, q0, g0, p0 = _trajectory_start(q, u, g, p, step_sizes, settings, rng)
    W = min(settings.window, L + 1)
    # Windowed HMC: states 0..L, reject window [0, W-1], accept window [L-W+1, L];
    # the current state sits at a uniformly chosen s in [0, W-1].
    s = int(rng.random() * W)
    sel = WindowChoice(-math.inf, q0.copy(), g0.copy(), p0.copy(), u, -math.inf, q0.copy(), g0.copy(), p0.copy(), u)
    sel = _offer_both(s, W, L, q0, g0, p0, 1.0, u, h0, sel, rng)
    used = 0
    ok = True
    worst = 0.0
    # Backward from the current state (run with negated momentum, offer (q, -p)),
    # then forward: states s-1..0, then s+1..L.
    qb, gb, pb = np.empty_like(q0), np.empty_like(g0), np.empty_like(p0)
    set_state(qb, gb, pb, q0, g0, p0, -1.0)
    for i in range(L):
        backward = i < s
        qx, gx, px = (qb, gb, pb) if backward else (q, g, p)
        ux, n, ok = leapfrog_with(qx, px, gx, step, 1, target, hyper, settings.low_rank)
        used += n
        if not ok:
            break
        h = ux + kinetic_with(px, settings.low_rank)
        worst = max(worst, h - h0)
        if backward:
            sel = _offer_both(s - 1 - i, W, L, qx, gx, px, -1.0, ux, h, sel, rng)
        else:
            sel = _offer_both(i + 1, W, L, qx, gx, px, 1.0, ux, h, sel, rng)
    if not ok:
        set_state(q, g, p, q0, g0, p0, -1.0)
        return KernelInfo(0.0, 0.0, math.inf, True, used, u, 0.0)
    dh = sel.reject_logsum - sel.accept_logsum
    prob = min(1.0, math.exp(-dh))
    divergent = not worst <= settings.max_energy_error
    jump = squared_distance(sel.accept_q, q0)
    if rng.random() < prob:
        set_state(q, g, p, sel.accept_q, sel.accept_g, sel.accept_p, 1.0)
        return KernelInfo(1.0, prob, dh, divergent, used, sel.accept_u, jump)
    set_state(q, g, p, sel.reject_q, sel.reject_g, sel.reject_p, -1.0)
    return KernelInfo(0.0, prob, dh, divergent, used, sel.reject_u, jump)


@njit
def hmc_kernel(q, u, g, p, step_sizes, settings, target, hyper, rng):
    """One HMC transition of ``target`` at ``hyper`` (held fixed) in place on
    (q, g, p), with the absolute ``step_sizes`` and the trajectory settings
    (num_steps, window, persistence, jitter, step_nu, max_energy_error, low_rank) of
    ``settings``, an :class:`~adaptive_hmc.samplers.settings.HMCSettings`; returns
    a :class:`~adaptive_hmc.samplers.settings.KernelInfo` (accepted 1 or 0), whose
    squared_jump is ||q_proposal - q_current||^2 (the proposal being the state
    chosen from the accept window), 0 for a divergence.

    Rejection (and divergence) restores q and g and negates the momentum, as
    persistence requires (Neal 1993); with persistence 0 the sign is irrelevant.
    """
    if settings.window == 1:
        return plain_hmc_kernel(q, u, g, p, step_sizes, settings, target, hyper, rng)
    return windowed_hmc_kernel(q, u, g, p, step_sizes, settings, target, hyper, rng)
