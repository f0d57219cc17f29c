"""The target interface: what a model implements so that every sampler runs on it.

Flow position: data -> **models** -> samplers. A target is a NamedTuple of
arrays (the model's data: inputs, prior arrays, scratch space). Its class
carries a :class:`TargetKernels` of compiled functions in the attribute
``kernels``; the generic functions below call them, from compiled code (by
Numba ``overload``, resolved once per target type at compile time, so a call
costs nothing) and from Python alike. A new model (another parameterisation, a
user's own log density) defines its NamedTuple, its kernels and a small Python
class (:class:`Model`); no sampler changes.

The hyperparameters are not part of the target: they are a NamedTuple of arrays
in the chain's state (``hyper``), updated in place by ``gibbs`` and read by
``energy_grad`` and ``step_scales``. A target without hyperparameters uses
:class:`NoHyper`.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
from numba.extending import overload

from ..jit import njit


class TargetKernels(NamedTuple):
    """Compiled functions (``numba.njit``, ``cache=True``) of one target type.

    energy_grad(q, grad, target, hyper) -> U : potential energy -log p(q | hyper, data)
        up to a constant; writes dU/dq into ``grad``.
    step_scales(target, hyper, out) -> out : per-parameter step scales (estimates of
        (d^2 U/dq_k^2)^-1/2) from the hyperparameters and data only, never from q.
    gibbs(q, target, hyper, rng) : Gibbs update of ``hyper`` given q, in place
        (a function that does nothing where there are none); an update may
        move q with the hyperparameters (the network's interweaving moves).
    hyper_values(hyper, out) : the hyperparameters as one flat row (for records).
    accumulate(q, target, hyper, acc) : add the predictions of the sample (q, hyper)
        on the cases of ``acc`` (an :class:`~adaptive_hmc.models.predictive.Accumulator`);
        ``None`` for targets that predict nothing.
    gibbs_energy_grad(q, grad, target, hyper, rng, moves) -> (U, evaluations) :
        ``gibbs`` then ``energy_grad`` at the new hyperparameters, the same
        numbers, and the number of energy evaluations (forward passes) both
        made (1, plus the update's own: the network's outputs for the noise,
        and those of updates that move q with the hyperparameters, made only
        when ``moves`` is true); ``None``: the two in turn (one evaluation).
    """

    energy_grad: Callable
    step_scales: Callable
    gibbs: Callable
    hyper_values: Callable
    accumulate: Callable | None = None
    gibbs_energy_grad: Callable | None = None


class NoHyper(NamedTuple):
    """The hyperparameter state of a target that has none."""

    values: np.ndarray

    @classmethod
    def empty(cls) -> NoHyper:
        return cls(np.empty(0))

    def copy(self) -> NoHyper:
        return self


class Model:
    """The Python side of a model, as transitions and chain sets use it.

    A subclass sets ``target`` (the NamedTuple whose class has ``kernels``) and
    ``dim`` (number of parameters) and defines :meth:`initial_hyper` and
    :meth:`hyper_names`.
    """

    target: NamedTuple
    dim: int

    def initial_hyper(self, value=None):
        """A hyperparameter state (NamedTuple of arrays with ``copy()``)."""
        return NoHyper.empty()

    def hyper_names(self) -> list:
        """Names of the entries of :func:`hyper_values`."""
        return []

    def scales(self, hyper=None) -> np.ndarray:
        """Heuristic step scales s_k at ``hyper``: a step factor eps gives steps eps * s_k."""
        hyper = self.initial_hyper() if hyper is None else hyper
        return step_scales(self.target, hyper, np.empty(self.dim))

    def energy_grad(self, q, hyper) -> tuple:
        """(U(q), dU/dq) at ``hyper``."""
        g = np.empty(self.dim)
        return energy_grad(np.ascontiguousarray(q, dtype=np.float64), g, self.target, hyper), g

    # Networks: what a kept sample (position row, hyperparameter-value row) means.
    def weights(self, Q, hyper_rows=None) -> np.ndarray:
        """The network weights (S, n_params) of positions Q (S, dim): the
        positions themselves unless the model reparameterises them."""
        return np.atleast_2d(np.asarray(Q, dtype=np.float64))

    def noise_precisions(self, Q, hyper_rows) -> np.ndarray:
        """(S, n_outputs) noise precisions of the samples: the hyperparameter
        columns named noise_* (none for classification)."""
        cols = [i for i, n in enumerate(self.hyper_names()) if n.startswith("noise_")]
        return np.atleast_2d(np.asarray(hyper_rows, dtype=np.float64))[:, cols]


@njit
def no_gibbs(q, target, hyper, rng):
    """The Gibbs update of a target without hyperparameters."""


@njit
def no_hyper_values(hyper, out):
    """The (empty) hyperparameter row of a target without hyperparameters."""


@njit
def unit_step_scales(target, hyper, out):
    """Step scales of 1 in every coordinate (a target whose coordinates are already on the posterior's scale)."""
    out[:] = 1.0
    return out


def _kernels(target_type) -> TargetKernels:
    kernels = getattr(target_type, "kernels", None)
    if not isinstance(kernels, TargetKernels):
        raise TypeError(f"{target_type!r} is not a sampling target: its class needs a TargetKernels "
                        f"attribute 'kernels' (see adaptive_hmc.models.base)")
    return kernels


def energy_grad(q, grad, target, hyper):
    """U(q) of ``target`` at ``hyper``; writes dU/dq into ``grad``."""
    return _kernels(type(target)).energy_grad(q, grad, target, hyper)


def step_scales(target, hyper, out):
    """Heuristic per-parameter step scales into ``out``."""
    return _kernels(type(target)).step_scales(target, hyper, out)


def gibbs(q, target, hyper, rng):
    """Gibbs update of ``hyper`` given ``q``, in place."""
    _kernels(type(target)).gibbs(q, target, hyper, rng)


def gibbs_energy_grad(q, grad, target, hyper, rng, moves=True):
    """Gibbs update of ``hyper`` given ``q`` (in place; a model's update may
    move ``q`` with it, when ``moves``), then U(q) at the new hyperparameters,
    with dU/dq written into ``grad``: returns (U, energy evaluations made)."""
    k = _kernels(type(target))
    if k.gibbs_energy_grad is not None:
        return k.gibbs_energy_grad(q, grad, target, hyper, rng, moves)
    k.gibbs(q, target, hyper, rng)
    return k.energy_grad(q, grad, target, hyper), 1


def hyper_values(target, hyper, out):
    """The hyperparameters as one flat row, into ``out`` (returned)."""
    _kernels(type(target)).hyper_values(hyper, out)
    return out


def accumulate(q, target, hyper, acc):
    """Add the predictions of the sample (q, hyper) to the accumulator ``acc``."""
    _kernels(type(target)).accumulate(q, target, hyper, acc)


@overload(energy_grad)
def _energy_grad(q, grad, target, hyper):
    fn = _kernels(target.instance_class).energy_grad
    return lambda q, grad, target, hyper: fn(q, grad, target, hyper)


@overload(step_scales)
def _step_scales(target, hyper, out):
    fn = _kernels(target.instance_class).step_scales
    return lambda target, hyper, out: fn(target, hyper, out)


@overload(gibbs)
def _gibbs(q, target, hyper, rng):
    fn = _kernels(target.instance_class).gibbs
    return lambda q, target, hyper, rng: fn(q, target, hyper, rng)


@overload(gibbs_energy_grad)
def _gibbs_energy_grad(q, grad, target, hyper, rng, moves=True):
    k = _kernels(target.instance_class)
    if k.gibbs_energy_grad is not None:
        fused = k.gibbs_energy_grad
        return lambda q, grad, target, hyper, rng, moves=True: fused(q, grad, target, hyper, rng, moves)
    update, energy = k.gibbs, k.energy_grad

    def impl(q, grad, target, hyper, rng, moves=True):
        update(q, target, hyper, rng)
        return energy(q, grad, target, hyper), 1
    return impl


@overload(hyper_values)
def _hyper_values(target, hyper, out):
    fn = _kernels(target.instance_class).hyper_values

    def impl(target, hyper, out):
        fn(hyper, out)
        return out
    return impl


@overload(accumulate)
def _accumulate(q, target, hyper, acc):
    fn = _kernels(target.instance_class).accumulate
    if fn is None:
        raise TypeError(f"{target.instance_class.__name__} has no accumulate kernel: it makes no predictions")
    return lambda q, target, hyper, acc: fn(q, target, hyper, acc)
