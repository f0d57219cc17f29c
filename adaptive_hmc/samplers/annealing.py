"""Simulated annealing with dummy momentum (Neal 1992, eqs 24-27).

Flow position: integrator -> **transition** -> iteration
(:func:`~adaptive_hmc.samplers.chain.run_chain` runs :func:`annealed_kernel`
when ``HMCSettings.anneal`` holds a schedule; :func:`~adaptive_hmc.samplers.chain.anneal`
is its Python-level form). The momentum has N_s significant
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
average over the fresh K_d, exactly as plain HMC at T0 = 1. Gibbs updates of
a model's hyperparameters between iterations (Neal's models have none) keep
the distribution at T = 1 invariant too: the momenta do not depend on them.
"""
from __future__ import annotations

import math

import numpy as np

from ..jit import njit
from ..models.base import energy_grad
from .hmc import draw_step_sizes, squared_distance
from .leapfrog import kinetic, leapfrog, set_state
from .settings import METROPOLIS, KernelInfo


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
def phase_of(schedule, iteration):
    """(alpha, T0) of the phase of ``schedule`` (rows (iterations, alpha, T0))
    that holds ``iteration`` (counted from 0); the last phase goes on after the end."""
    end = 0.0
    for k in range(schedule.shape[0]):
        end += schedule[k, 0]
        if iteration < end:
            return schedule[k, 1], schedule[k, 2]
    return schedule[schedule.shape[0] - 1, 1], schedule[schedule.shape[0] - 1, 2]


@njit
def _annealed_move(q, u, g, p, kd, step_sizes, settings, phase, target, hyper, rng):
    """One stochastic move (eq 24) then one dynamical move accepted by eq 25:
    ``settings.num_steps`` leapfrog steps (HMC) or, with ``metropolis``, the
    move q* = q + eps p_s (eq 27), ``phase`` being (alpha, t0, metropolis). In
    place on (q, g, p); returns (accepted, accept_prob, dH, divergent, energy
    evaluations, new energy, new K_d, squared jump of the proposal)."""
    alpha, t0, metropolis = phase
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
    jump = 0.0 if divergent else squared_distance(q, q0)
    prob = dummy_accept_prob(dh, kd, q.size)
    if not divergent and rng.random() < prob:
        return True, prob, dh, False, used, u1, kd - dh, jump
    set_state(q, g, p, q0, g0, p0, 1.0)
    return False, prob, dh, divergent, used, u, kd, jump


@njit
def annealed_kernel(q, u, g, p, kd, step_sizes, settings, iteration, target, hyper, rng):
    """Iteration ``iteration`` of a chain annealed by ``settings.anneal``: with
    kind hmc one annealed trajectory, with kind metropolis ``settings.num_steps``
    annealed moves of eq 27. ``kd`` is the chain's dummy kinetic energy, a
    1-element array updated in place. Returns a
    :class:`~adaptive_hmc.samplers.settings.KernelInfo` (the share of moves
    accepted, the mean acceptance probability, the last dH), the squared jump such that probability x jump is
    the iteration's expected squared jump (as
    :func:`~adaptive_hmc.samplers.baselines.metropolis_kernel`)."""
    alpha, t0 = phase_of(settings.anneal, iteration)
    metropolis = settings.kind == METROPOLIS
    moves = settings.num_steps if metropolis else 1
    n_acc = 0
    p_sum = 0.0
    jump_sum = 0.0
    used = 0
    dh = 0.0
    divergent = False
    for _ in range(moves):
        acc, prob, dh, div, n, u, k_d, jump = _annealed_move(q, u, g, p, kd[0], step_sizes, settings,
                                                            (alpha, t0, metropolis), target, hyper, rng)
        kd[0] = k_d
        n_acc += acc
        p_sum += prob
        jump_sum += prob * jump
        used += n
        divergent = divergent or div
    mean_p = p_sum / moves
    return KernelInfo(n_acc / moves, mean_p, dh, divergent, used, u, jump_sum / mean_p if mean_p > 0.0 else 0.0)
