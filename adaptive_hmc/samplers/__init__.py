"""Transitions: each is ``(state, params, rng) -> (state, info)``."""
from .baselines import MetropolisParams, make_metropolis, make_stochastic_dynamics
from .hmc import ChainState, HMCParams, TransitionInfo, init_state, make_hmc


def sequence(*steps):
    """One transition made of several: ``steps`` are (transition, params) pairs,
    applied in order; the info is the list of their infos."""

    def transition(state, params=None, rng=None):
        infos = []
        for step, p in steps:
            state, info = step(state, p, rng)
            infos.append(info)
        return state, infos

    return transition


__all__ = ["ChainState", "HMCParams", "MetropolisParams", "TransitionInfo", "init_state",
           "make_hmc", "make_metropolis", "make_stochastic_dynamics", "sequence"]
