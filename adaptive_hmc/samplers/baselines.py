"""Baseline transitions from the seeds: random-walk Metropolis (Neal 1992 eq 27
with a fresh momentum) and uncorrected stochastic dynamics (Neal 1993 section 2.3).

Flow position: integrator -> **transition**. Same ``(state, settings, rng) ->
(state, info)`` contract and settings type as :func:`~adaptive_hmc.samplers.chain.make_hmc`;
the hyperparameters are held fixed.
"""
from __future__ import annotations

import math

import numpy as np

from ..jit import njit
from ..models.base import energy_grad
from .chain import ChainState, TransitionInfo, checked, fill_step_sizes
from .hmc import draw_step_sizes, refresh_momentum
from .leapfrog import kinetic, leapfrog


@njit
def metropolis_kernel(q, u, g, step_sizes, step_nu, target, hyper, rng):
    """q* = q + eps * n, n ~ N(0, I) (Neal 1992 eq 27 with fresh momentum n),
    accepted with probability min(1, exp(U(q) - U(q*))). In place; returns
    (accepted, accept_prob, energy_error, divergent, new_energy)."""
    step = draw_step_sizes(step_sizes, step_nu, rng)
    q0 = q.copy()
    g0 = g.copy()
    for k in range(q.size):
        q[k] += step[k] * rng.standard_normal()
    u1 = energy_grad(q, g, target, hyper)
    gsum = 0.0
    for k in range(q.size):
        gsum += g[k]
    ok = math.isfinite(u1) and math.isfinite(gsum)
    du = u1 - u if ok else math.inf
    prob = min(1.0, math.exp(-du)) if ok else 0.0
    if ok and rng.random() < prob:
        return True, prob, du, False, u1
    q[:] = q0
    g[:] = g0
    return False, prob, du, not ok, u


@njit
def stochastic_dynamics_kernel(q, u, g, p, step_sizes, num_steps, persistence, target, hyper, rng):
    """Partial momentum refresh then ``num_steps`` leapfrog steps, with NO
    acceptance test (Neal 1993 section 2.3): biased for any non-zero step.
    A non-finite energy restores the state and negates the momentum. Returns
    (divergent, energy_error, steps_used, new_energy)."""
    refresh_momentum(p, persistence, rng)
    h0 = u + kinetic(p)
    q0 = q.copy()
    g0 = g.copy()
    p0 = p.copy()
    u1, used, ok = leapfrog(q, p, g, step_sizes, num_steps, target, hyper)
    if ok:
        return False, u1 + kinetic(p) - h0, used, u1
    q[:] = q0
    g[:] = g0
    p[:] = -p0
    return True, math.inf, used, u


def _prepared(model, state, settings):
    s = checked(settings, model.dim)
    steps = fill_step_sizes(model.target, state.hyper, s, np.empty(model.dim))
    return s, steps, state.position.copy(), state.grad.copy(), state.momentum.copy()


def make_metropolis(model):
    """Random-walk Metropolis for ``model``: the proposal sd of parameter k is
    the step size of ``settings`` (``step_factor`` times the heuristic scale,
    or ``step_size``), randomised by ``step_nu``."""

    def transition(state: ChainState, settings, rng):
        s, steps, q, g, p = _prepared(model, state, settings)
        acc, prob, du, div, u = metropolis_kernel(q, state.energy, g, steps, s.step_nu, model.target,
                                                  state.hyper, rng)
        return (ChainState(q, float(u), g, p, state.hyper, state.counters),
                TransitionInfo(bool(acc), float(prob), float(du), bool(div), 1))

    return transition


def make_stochastic_dynamics(model):
    """Uncorrected stochastic dynamics for ``model`` (``num_steps``,
    ``persistence`` and the step of ``settings``; windows and jitter do not apply)."""

    def transition(state: ChainState, settings, rng):
        s, steps, q, g, p = _prepared(model, state, settings)
        div, dh, used, u = stochastic_dynamics_kernel(q, state.energy, g, p, steps, s.num_steps, s.persistence,
                                                      model.target, state.hyper, rng)
        return (ChainState(q, float(u), g, p, state.hyper, state.counters),
                TransitionInfo(not div, 1.0, float(dh), bool(div), int(used)))

    return transition
