"""Simulated annealing with dummy momentum (Neal 1992, eqs 24-27).

Flow position: integrator -> **transition**. The momentum has N_s significant
components (the model's parameters) and N_d = N_s dummy ones, of which only
the kinetic energy K_d is stored. A stochastic move (eq 24),

    p <- alpha |p| u + sqrt(T0) sqrt(1 - alpha^2) n,

over all N = N_s + N_d components (u uniform on the unit sphere, n standard
normal), cools or heats the system towards temperature T0; a dynamical move
(L leapfrog steps, or the Metropolis move q* = q + eps p_s of eq 27) changing
the energy H by dH is accepted with probability

    rho = (1 - dH / K_d)^(N_d/2 - 1)   (0 when dH >= K_d)        (eq 25)

and K_d absorbs the change (K_d <- K_d - dH), so the total energy is kept.
rho tends to exp(-dH / T) as N_d grows (eq 26); with alpha = 0 it accepts, on
average over the fresh K_d, exactly as plain HMC at T0 = 1. The hyperparameters
are held fixed (Neal's 1992 models have none).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..jit import njit
from ..models.base import energy_grad
from .chain import ChainState, checked, fill_step_sizes
from .hmc import draw_step_sizes
from .leapfrog import kinetic, leapfrog


@njit
def anneal_momentum(p, kd, alpha, t0, rng):
    """Eq 24 over the significant momentum ``p`` (in place) and N_d = p.size
    dummy components of kinetic energy ``kd``; returns the new K_d."""
    n_s = p.size
    r = math.sqrt(2.0 * (kinetic(p) + kd))
    z = np.empty(2 * n_s)
    norm = 0.0
    for k in range(2 * n_s):
        z[k] = rng.standard_normal()
    for k in range(2 * n_s):
        norm += z[k] * z[k]
    norm = math.sqrt(norm)
    c = math.sqrt(t0) * math.sqrt(1.0 - alpha * alpha)
    new_kd = 0.0
    for k in range(2 * n_s):
        v = alpha * r * z[k] / norm + c * rng.standard_normal()
        if k < n_s:
            p[k] = v
        else:
            new_kd += 0.5 * v * v
    return new_kd


@njit
def dummy_accept_prob(dh, kd, n_d):
    """Eq 25: (1 - dH/K_d)^(N_d/2 - 1), at most 1; 0 when dH >= K_d or dH is not finite."""
    if not (dh < kd) or not math.isfinite(dh):
        return 0.0
    return min(1.0, math.exp((0.5 * n_d - 1.0) * math.log1p(-dh / kd)))


@njit
def annealed_kernel(q, u, g, p, kd, step_sizes, settings, alpha, t0, metropolis, target, hyper, rng):
    """One stochastic move (eq 24) then one dynamical move accepted by eq 25:
    ``settings.num_steps`` leapfrog steps (HMC) or, with ``metropolis``, the
    move q* = q + eps p_s (eq 27). In place on (q, g, p); returns (accepted,
    accept_prob, dH, divergent, energy evaluations, new energy, new K_d)."""
    kd = anneal_momentum(p, kd, alpha, t0, rng)
    step = draw_step_sizes(step_sizes, settings.step_nu, rng)
    q0 = q.copy()
    g0 = g.copy()
    p0 = p.copy()
    if metropolis:
        for k in range(q.size):
            q[k] += step[k] * p[k]
        u1 = energy_grad(q, g, target, hyper)
        gsum = 0.0
        for k in range(g.size):
            gsum += g[k]
        ok = math.isfinite(u1) and math.isfinite(gsum)
        used = 1
        dh = u1 - u if ok else math.inf
    else:
        h0 = u + kinetic(p)
        u1, used, ok = leapfrog(q, p, g, step, settings.num_steps, target, hyper)
        dh = u1 + kinetic(p) - h0 if ok else math.inf
    divergent = not (ok and dh <= settings.max_energy_error)
    prob = dummy_accept_prob(dh, kd, q.size)
    if not divergent and rng.random() < prob:
        return True, prob, dh, False, used, u1, kd - dh
    q[:] = q0
    g[:] = g0
    p[:] = p0
    return False, prob, dh, divergent, used, u, kd


class Phase(NamedTuple):
    """A phase of an annealing schedule: ``iterations`` of [eq 24 with
    ``alpha`` and ``t0``, dynamical move]; Neal (1992): 10 x (0, 15),
    130 x (0.95, 1), 60 x (0, 1)."""

    iterations: int
    alpha: float
    t0: float


def temperature(p, kd) -> float:
    """The temperature measured from the momentum, 2 (K_s + K_d) / N."""
    return float(2.0 * (0.5 * np.dot(p, p) + kd) / (2 * p.size))


def anneal(model, state: ChainState, phases, settings, rng, metropolis: bool = False, kd: float | None = None):
    """Run an annealing schedule (a list of :class:`Phase` or (iterations,
    alpha, t0)) from ``state`` with the trajectory settings ``settings`` (an
    :class:`~adaptive_hmc.samplers.settings.HMCSettings`: num_steps, the step
    and its randomisation ``step_nu``); the dummy kinetic energy starts at
    ``kd`` (default: N_d/2, temperature 1). Returns (final state, final K_d,
    trace, positions): the trace has per iteration the temperature measured
    from the momenta, the potential energy, whether the move was accepted and
    the energy evaluations used (Neal's Fig. 3 plots energy against
    temperature); positions (iterations, D) are the states after each iteration."""
    s = checked(settings, model.dim)
    steps = fill_step_sizes(model.target, state.hyper, s, np.empty(model.dim))
    q, g, p = state.position.copy(), state.grad.copy(), state.momentum.copy()
    u = state.energy
    kd = 0.5 * model.dim if kd is None else float(kd)
    rows, positions = [], []
    for phase in phases:
        n, alpha, t0 = Phase(*phase)
        if not (0.0 <= alpha < 1.0 and t0 > 0 and n >= 0):
            raise ValueError(f"phase {tuple(phase)}: iterations >= 0, alpha in [0, 1) and t0 > 0")
        for _ in range(int(n)):
            acc, prob, dh, div, used, u, kd = annealed_kernel(q, u, g, p, kd, steps, s, float(alpha), float(t0),
                                                              metropolis, model.target, state.hyper, rng)
            rows.append((temperature(p, kd), u, acc, used))
            positions.append(q.copy())
    trace = np.array(rows, dtype=float).reshape(-1, 4)
    return (ChainState(q, float(u), g, p, state.hyper, state.counters), kd, trace,
            np.array(positions).reshape(-1, model.dim))
