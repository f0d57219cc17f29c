"""The defaults of a chain set's optional members (:class:`ChainSetBase`), which the network's network's chain set, a
density's chains and a chain set of one's own inherit: the interface itself is
:class:`~adaptive_hmc.engine.runner.ChainSet`.

Flow position: super_transition -> **chain_set** -> network_chains, density_chains, runner.
"""
from __future__ import annotations

from ..samplers.settings import Action
from .super_transition import SuperTransitionResult


class ChainSetBase:
    """Defaults of :class:`ChainSet`'s optional members, so that a new chain set writes its ``state`` (with its
    ``n_super``) and :meth:`step` alone (NumPyro's ``MCMCKernel`` shape: ``init`` and ``sample``; the driver
    threads the state through :meth:`step`): nothing to compile or start, and so no start's cost in a first
    super-transition; no probes (every action the tuner asks is run); no checkpoints."""

    @property
    def n_super(self) -> int:
        return self.state.n_super

    def started(self, state) -> dict | None:
        return None

    def compile(self) -> float:
        return 0.0

    def kernels_ready(self) -> bool:
        return True

    def start_chains(self) -> None:
        return None

    def probe(self, action: Action, budget: int, k: int = 0) -> None:
        return None

    def checkpoint(self) -> dict:
        raise NotImplementedError(f"{type(self).__name__}: a chain set without checkpoints")

    def restore(self, saved: dict, stored) -> None:
        raise NotImplementedError(f"{type(self).__name__}: a chain set without checkpoints")


def advance(chains, action: Action, budget: int, rng=None) -> SuperTransitionResult:
    """One super-transition of ``chains`` from their present ``state``, which they then hold: what the driver
    does for each (:func:`~adaptive_hmc.engine.driver.drive`) without a tuner, a log, the starts' accounting or
    a sink, for scripts and tests that drive a chain set by hand; its result."""
    state, result = chains.step(chains.state, action, budget) if rng is None else \
        chains.step(chains.state, action, budget, rng)
    chains.state = state
    return result
