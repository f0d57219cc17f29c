"""Baseline transitions from the seeds, compiled, with the iteration signature
of :func:`~adaptive_hmc.samplers.hmc.hmc_kernel`: random-walk Metropolis
(Neal 1992 eq 27 with a fresh momentum) and uncorrected stochastic dynamics
(Neal 1993 section 2.3).

Flow position: integrator -> **transition** -> iteration
(:mod:`adaptive_hmc.samplers.chain`, which runs them as ``sampler.kind``
``metropolis`` and ``stochastic_dynamics``). In place on arrays, with the
hyperparameters held fixed and the step sizes given.
"""
from __future__ import annotations

import math

import numpy as np

from ..jit import njit
from ..models.base import energy_grad
from .hmc import draw_step_sizes, refresh_momentum, squared_distance
from .leapfrog import copy_into, kinetic, leapfrog, set_state
from .settings import KernelInfo


@njit
def metropolis_kernel(q, u, g, step_sizes, settings, target, hyper, rng):
    """``settings.num_steps`` random-walk Metropolis proposals q* = q + eps * n,
    n ~ N(0, I), each accepted with probability min(1, exp(U(q) - U(q*))) and
    costing one energy evaluation. Returns a
    :class:`~adaptive_hmc.samplers.settings.KernelInfo`: the share of the
    proposals accepted, the mean acceptance probability, the last energy error,
    any divergent (non-finite energy), the energy evaluations, the new energy,
    and squared_jump, set so that
    mean probability x squared_jump is the iteration's expected squared jump,
    sum over proposals of probability x ||q* - q||^2 (what the ESJD reward reads)."""
    L = settings.num_steps
    q0 = np.empty_like(q)
    g0 = np.empty_like(g)
    n_accepted = 0
    divergent = False
    p_sum = 0.0
    jump_sum = 0.0
    du = 0.0
    for j in range(L):
        step = draw_step_sizes(step_sizes, settings.step_nu, rng)
        copy_into(q0, q)
        copy_into(g0, g)
        for k in range(q.size):
            q[k] += step[k] * rng.standard_normal()
        u1 = energy_grad(q, g, target, hyper)
        gsum = 0.0
        for k in range(q.size):
            gsum += g[k]
        ok = math.isfinite(u1) and math.isfinite(gsum)
        du = u1 - u if ok else math.inf
        prob = min(1.0, math.exp(-du)) if ok else 0.0
        p_sum += prob
        jump_sum += prob * squared_distance(q, q0)
        divergent = divergent or not ok
        if ok and rng.random() < prob:
            u = u1
            n_accepted += 1
        else:
            copy_into(q, q0)
            copy_into(g, g0)
    mean_p = p_sum / L
    return KernelInfo(n_accepted / L, mean_p, du, divergent, L, u, jump_sum / mean_p if mean_p > 0.0 else 0.0)


@njit
def stochastic_dynamics_kernel(q, u, g, p, step_sizes, settings, target, hyper, rng):
    """Partial momentum refresh then ``settings.num_steps`` leapfrog steps with
    NO acceptance test (Neal 1993 section 2.3): biased for any non-zero step.
    A non-finite energy restores the state and negates the momentum (probability
    0, divergent). Returns a :class:`~adaptive_hmc.samplers.settings.KernelInfo`,
    as :func:`~adaptive_hmc.samplers.hmc.hmc_kernel`."""
    refresh_momentum(p, settings.persistence, rng)
    step = draw_step_sizes(step_sizes, settings.step_nu, rng)
    h0 = u + kinetic(p)
    q0 = q.copy()
    g0 = g.copy()
    p0 = p.copy()
    u1, used, ok = leapfrog(q, p, g, step, settings.num_steps, target, hyper)
    if ok:
        return KernelInfo(1.0, 1.0, u1 + kinetic(p) - h0, False, used, u1, squared_distance(q, q0))
    set_state(q, g, p, q0, g0, p0, -1.0)
    return KernelInfo(0.0, 0.0, math.inf, True, used, u, 0.0)
