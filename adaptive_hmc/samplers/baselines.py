"""Baseline transitions from the seeds: random-walk Metropolis (Neal 1992 eq 27
with a fresh momentum) and uncorrected stochastic dynamics (Neal 1993 section 2.3).

Flow position: integrator -> **transition**. Same ``(state, params, rng) ->
(state, info)`` contract as :mod:`adaptive_hmc.samplers.hmc`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional


from ..jit import njit
from ..targets import energy_grad
from .hmc import (ChainState, HMCParams, TransitionInfo, _copy_state, check_step, draw_steps,
                  refresh_momentum, resolve_steps)
from .leapfrog import kinetic, leapfrog


@njit
def metropolis_kernel(q, u, g, step_size, step_nu, target, rng):
    """q* = q + eps * n, n ~ N(0, I) (Neal 1992 eq 27 with fresh momentum n),
    accepted with probability min(1, exp(U(q) - U(q*))). In place; returns
    (accepted, accept_prob, energy_error, divergent, new_energy)."""
    step = draw_steps(step_size, step_nu, rng)
    q0 = q.copy()
    g0 = g.copy()
    for k in range(q.size):
        q[k] += step[k] * rng.standard_normal()
    u1 = energy_grad(q, g, target)
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
def stochastic_dynamics_kernel(q, u, g, p, step_size, n_steps, persistence, target, rng):
    """Partial momentum refresh then ``n_steps`` leapfrog steps, with NO
    acceptance test (Neal 1993 section 2.3): biased for any non-zero step.
    A non-finite energy restores the state and negates the momentum. Returns
    (divergent, energy_error, steps_used, new_energy)."""
    refresh_momentum(p, persistence, rng)
    h0 = u + kinetic(p)
    q0 = q.copy()
    g0 = g.copy()
    p0 = p.copy()
    u1, used, ok = leapfrog(q, p, g, step_size, n_steps, target)
    if ok:
        return False, u1 + kinetic(p) - h0, used, u1
    q[:] = q0
    g[:] = g0
    p[:] = -p0
    return True, math.inf, used, u


@dataclass(frozen=True)
class MetropolisParams:
    """Random-walk Metropolis: the proposal sd of parameter k is
    ``step_factor * s_k`` (heuristic scales) or ``step_size``."""

    step_factor: Optional[float] = None
    step_size: object = None
    step_nu: float = 0.0

    def __post_init__(self):
        check_step(self.step_factor, self.step_size, self.step_nu)

    def steps(self, model, hyper):
        return resolve_steps(self.step_factor, self.step_size, model, hyper)


def make_metropolis(model):
    """Random-walk Metropolis transition for ``model``."""

    def transition(state: ChainState, params: MetropolisParams, rng):
        model.load(state.hyper)
        q, g, p = _copy_state(state)
        acc, prob, du, div, u = metropolis_kernel(q, state.energy, g, params.steps(model, state.hyper),
                                                  float(params.step_nu), model.target, rng)
        return (ChainState(q, float(u), g, p, state.hyper),
                TransitionInfo(bool(acc), float(prob), float(du), bool(div), 1))

    return transition


def make_stochastic_dynamics(model):
    """Uncorrected stochastic dynamics for ``model``, configured by
    :class:`~adaptive_hmc.samplers.hmc.HMCParams` (``persistence``,
    ``num_steps``, step; windows and jitter do not apply)."""

    def transition(state: ChainState, params: HMCParams, rng):
        model.load(state.hyper)
        q, g, p = _copy_state(state)
        div, dh, used, u = stochastic_dynamics_kernel(
            q, state.energy, g, p, params.steps(model, state.hyper), int(params.num_steps),
            float(params.persistence), model.target, rng)
        return (ChainState(q, float(u), g, p, state.hyper),
                TransitionInfo(not div, 1.0, float(dh), bool(div), int(used)))

    return transition
