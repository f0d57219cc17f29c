"""Hybrid Monte Carlo transitions (Duane et al. 1987; Neal 1992 eqs 15-23;
Neal 1993 eq 16; acceptance windows of Neal 1994 as used by Rasmussen 1996).

Flow position: integrator -> **transition** -> super-transition. The compiled
:func:`hmc_kernel` works in place on arrays; :func:`make_hmc` wraps it as a
pure ``(state, params, rng) -> (state, info)`` transition.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..jit import njit
from ..targets import energy_grad
from .leapfrog import kinetic, leapfrog


class ChainState(NamedTuple):
    """Position, cached energy and gradient, momentum (kept for persistence),
    and the hyperparameters (``None`` for targets without any)."""

    position: np.ndarray
    energy: float
    grad: np.ndarray
    momentum: np.ndarray
    hyper: object | None = None


class TransitionInfo(NamedTuple):
    accepted: bool        # moved to the proposal (accept window); always True for uncorrected dynamics
    accept_prob: float    # min(1, exp(-energy_error)); 1 for uncorrected dynamics
    energy_error: float   # H(proposal) - H(current); for windows log(sum_reject e^-H / sum_accept e^-H)
    divergent: bool       # non-finite energy or gradient, or energy error above the limit
    num_steps: int        # leapfrog steps (gradient evaluations) used


@dataclass(frozen=True)
class HMCParams:
    """Settings of one HMC transition.

    Exactly one of ``step_factor`` (multiplies the target's per-parameter
    heuristic scales, FBM's stepsize adjustment factor) and ``step_size`` (an
    absolute step, scalar or per parameter) is given.

    num_steps : trajectory length L (leapfrog steps).
    window : acceptance window W (1 = plain HMC). The trajectory has L + 1
        states, the current one placed uniformly among the first W (Neal 1994).
    persistence : alpha of the partial momentum refresh p <- alpha p +
        sqrt(1 - alpha^2) n, with momentum negation on rejection (Neal 1993 eq 16).
    jitter : draw L uniformly from 1..num_steps each transition.
    step_nu : randomise the step as eps exp(nu C), C standard Cauchy (Neal 1992 eq 23).
    max_energy_error : energy errors above this count as divergences.
    """

    num_steps: int
    step_factor: float | None = None
    step_size: object = None
    window: int = 1
    persistence: float = 0.0
    jitter: bool = False
    step_nu: float = 0.0
    max_energy_error: float = 1000.0

    def __post_init__(self):
        check_step(self.step_factor, self.step_size, self.step_nu)
        if int(self.num_steps) != self.num_steps or self.num_steps < 1:
            raise ValueError(f"num_steps={self.num_steps}: must be an integer >= 1")
        if not 1 <= self.window <= self.num_steps:
            raise ValueError(f"window={self.window}: must be in 1..num_steps ({self.num_steps})")
        if not 0.0 <= self.persistence < 1.0:
            raise ValueError(f"persistence={self.persistence}: must be in [0, 1)")

    def steps(self, model, hyper) -> np.ndarray:
        """Per-parameter absolute step sizes for ``model`` at ``hyper``."""
        return resolve_steps(self.step_factor, self.step_size, model, hyper)


def check_step(step_factor, step_size, step_nu=0.0):
    """Exactly one of a positive step factor and positive absolute step sizes; nu >= 0."""
    if (step_factor is None) == (step_size is None):
        raise ValueError("give exactly one of step_factor and step_size")
    if step_factor is not None and not step_factor > 0:
        raise ValueError(f"step_factor={step_factor}: must be > 0")
    if step_size is not None and not np.all(np.asarray(step_size) > 0):
        raise ValueError("step_size: every entry must be > 0")
    if not step_nu >= 0:
        raise ValueError(f"step_nu={step_nu}: must be >= 0")


def resolve_steps(step_factor, step_size, model, hyper) -> np.ndarray:
    """Absolute per-parameter steps: ``step_size`` broadcast, or ``step_factor``
    times the model's heuristic scales at ``hyper``."""
    if step_size is not None:
        return np.broadcast_to(np.asarray(step_size, float), (model.dim,)).copy()
    return step_factor * model.scales(hyper)


@njit
def refresh_momentum(p, persistence, rng):
    """p <- alpha p + sqrt(1 - alpha^2) n (Neal 1993 eq 16); alpha = 0 draws afresh."""
    c = math.sqrt(1.0 - persistence * persistence)
    for k in range(p.size):
        p[k] = persistence * p[k] + c * rng.standard_normal()


@njit
def draw_steps(step_size, step_nu, rng):
    """The transition's step sizes: step_size, times exp(nu C) with C standard
    Cauchy when nu > 0 (Neal 1992 eq 23)."""
    if step_nu > 0.0:
        return step_size * math.exp(step_nu * math.tan(math.pi * (rng.random() - 0.5)))
    return step_size.copy()


@njit
def _offer(idx, lo, hi, q, g, p, u, h, logsum, cq, cg, cp, cu, rng):
    """Streaming choice of one state of window [lo, hi] with probability
    proportional to exp(-H): the state at ``idx`` replaces the candidate with
    probability exp(-H) / (sum of exp(-H) so far). Returns the new log sum."""
    if idx < lo or idx > hi:
        return logsum, cu
    m = max(logsum, -h)
    new = m + math.log(math.exp(logsum - m) + math.exp(-h - m))
    if rng.random() < math.exp(-h - new):
        cq[:] = q
        cg[:] = g
        cp[:] = p
        cu = u
    return new, cu


@njit
def _offer_both(idx, W, L, q, g, p, u, h, sel, rng):
    """Offer the state at trajectory index ``idx`` to the reject window [0, W-1]
    and the accept window [L-W+1, L]. ``sel`` holds, per window, the running
    log sum of exp(-H) and the chosen state: (log_r, rq, rg, rp, ru, log_a, aq, ag, ap, au)."""
    log_r, rq, rg, rp, ru, log_a, aq, ag, ap, au = sel
    log_r, ru = _offer(idx, 0, W - 1, q, g, p, u, h, log_r, rq, rg, rp, ru, rng)
    log_a, au = _offer(idx, L - W + 1, L, q, g, p, u, h, log_a, aq, ag, ap, au, rng)
    return (log_r, rq, rg, rp, ru, log_a, aq, ag, ap, au)


@njit
def _squared_distance(a, b):
    s = 0.0
    for k in range(a.size):
        s += (a[k] - b[k]) ** 2
    return s


@njit
def hmc_kernel(q, u, g, p, step_size, n_steps, window, persistence, jitter, step_nu,
               max_energy_error, target, rng):
    """One HMC transition in place on (q, g, p); returns
    (accepted, accept_prob, energy_error, divergent, steps_used, new_energy,
    squared_jump), where squared_jump is ||q_proposal - q_current||^2 (the
    proposal being the state chosen from the accept window), 0 for a divergence.

    Rejection (and divergence) restores q and g and negates the momentum, as
    persistence requires (Neal 1993); with persistence 0 the sign is irrelevant.
    """
    refresh_momentum(p, persistence, rng)
    step = draw_steps(step_size, step_nu, rng)
    L = n_steps
    if jitter:
        L = 1 + int(rng.random() * n_steps)
    W = min(window, L + 1)
    h0 = u + kinetic(p)
    q0 = q.copy()
    g0 = g.copy()
    p0 = p.copy()
    if W == 1:
        u1, used, ok = leapfrog(q, p, g, step, L, target)
        dh = u1 + kinetic(p) - h0 if ok else math.inf
        divergent = (not ok) or (not dh <= max_energy_error)
        prob = 0.0 if divergent else min(1.0, math.exp(-dh))
        jump = 0.0 if divergent else _squared_distance(q, q0)
        if not divergent and rng.random() < prob:
            return True, prob, dh, False, used, u1, jump
        q[:] = q0
        g[:] = g0
        p[:] = -p0
        return False, prob, dh, divergent, used, u, jump
    # Windowed HMC: states 0..L, reject window [0, W-1], accept window [L-W+1, L];
    # the current state sits at a uniformly chosen s in [0, W-1].
    s = int(rng.random() * W)
    sel = (-math.inf, q0.copy(), g0.copy(), p0.copy(), u, -math.inf, q0.copy(), g0.copy(), p0.copy(), u)
    sel = _offer_both(s, W, L, q0, g0, p0, u, h0, sel, rng)
    used = 0
    ok = True
    worst = 0.0
    # Backward from the current state (run with negated momentum, offer (q, -p)),
    # then forward: states s-1..0, then s+1..L.
    qb, gb, pb = q0.copy(), g0.copy(), -p0
    for i in range(L):
        backward = i < s
        qx, gx, px = (qb, gb, pb) if backward else (q, g, p)
        ux, n, ok = leapfrog(qx, px, gx, step, 1, target)
        used += n
        if not ok:
            break
        h = ux + kinetic(px)
        worst = max(worst, h - h0)
        if backward:
            sel = _offer_both(s - 1 - i, W, L, qx, gx, -px, ux, h, sel, rng)
        else:
            sel = _offer_both(i + 1, W, L, qx, gx, px, ux, h, sel, rng)
    if not ok:
        q[:] = q0
        g[:] = g0
        p[:] = -p0
        return False, 0.0, math.inf, True, used, u, 0.0
    log_r, rq, rg, rp, ru, log_a, aq, ag, ap, au = sel
    dh = log_r - log_a
    prob = min(1.0, math.exp(-dh))
    divergent = not worst <= max_energy_error
    jump = _squared_distance(aq, q0)
    if rng.random() < prob:
        q[:] = aq
        g[:] = ag
        p[:] = ap
        return True, prob, dh, divergent, used, au, jump
    q[:] = rq
    g[:] = rg
    p[:] = -rp
    return False, prob, dh, divergent, used, ru, jump


def _copy_state(state: ChainState):
    return (state.position.copy(), state.grad.copy(), state.momentum.copy())


def make_hmc(model):
    """HMC transition ``(state, params: HMCParams, rng) -> (state, info)`` for
    ``model`` (a :class:`~adaptive_hmc.models.bnn.BayesianMLP` or
    :class:`~adaptive_hmc.targets.GaussianTarget`). Hyperparameters are held
    fixed; the step sizes come from them (never from the weights)."""

    def transition(state: ChainState, params: HMCParams, rng):
        model.load(state.hyper)
        q, g, p = _copy_state(state)
        acc, prob, dh, div, used, u, _ = hmc_kernel(
            q, state.energy, g, p, params.steps(model, state.hyper), int(params.num_steps),
            int(params.window), float(params.persistence), bool(params.jitter),
            float(params.step_nu), float(params.max_energy_error), model.target, rng)
        info = TransitionInfo(bool(acc), float(prob), float(dh), bool(div), int(used))
        return ChainState(q, float(u), g, p, state.hyper), info

    return transition


def init_state(model, position, hyper=None) -> ChainState:
    """A chain state at ``position`` with energy and gradient evaluated and zero momentum."""
    q = np.array(position, dtype=np.float64)
    if q.shape != (model.dim,):
        raise ValueError(f"position has shape {q.shape}; expected ({model.dim},)")
    model.load(hyper)
    g = np.empty_like(q)
    u = energy_grad(q, g, model.target)
    return ChainState(q, float(u), g, np.zeros_like(q), hyper)
