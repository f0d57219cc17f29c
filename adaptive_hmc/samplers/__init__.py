"""Transitions, compiled: each Python-level one is ``(state, settings, rng) -> (state, info)``
with ``settings`` an :class:`HMCSettings`."""
from .chain import (ChainState, Phase, TransitionInfo, anneal, init_state, make_hmc, make_metropolis,
                    make_stochastic_dynamics, sample)
from .settings import HMCSettings, hmc_settings

__all__ = ["ChainState", "HMCSettings", "Phase", "TransitionInfo", "anneal", "hmc_settings", "init_state", "make_hmc",
           "make_metropolis", "make_stochastic_dynamics", "sample"]
