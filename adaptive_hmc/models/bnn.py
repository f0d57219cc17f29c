"""A Bayesian MLP on a data set: spec + priors + training data, as a sampling
target (the kernels of :mod:`adaptive_hmc.models.base`'s interface).

Flow position: data -> **model** -> samplers. Ties together
:mod:`~adaptive_hmc.models.mlp` and :mod:`~adaptive_hmc.models.priors`.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..data import check_finite
from ..jit import njit
from .base import Model, TargetKernels
from .mlp import (GAUSSIAN, LIKELIHOOD, MLPSpec, SparseInputs, forward, mlp_energy_grad, mlp_energy_grad_from,
                  mlp_step_scales, pad_cases, predict, sparse_inputs, use_sparse)
from .predictive import accumulate
from .priors import Hyper, Prior, PriorSpec, build_prior, gibbs_hyper, initial_hyper


def check_data(spec: MLPSpec, X, Y, name: str = "data"):
    """Validated float64 copies of X (N, n_in) and Y (N, n_targets); raises
    ValueError naming what is wrong (rows and columns counted from 0)."""
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim == 1:
        Y = Y[:, None]
    if X.ndim != 2 or X.shape[1] != spec.n_inputs:
        raise ValueError(f"{name}: inputs have shape {X.shape}; the network expects (N, {spec.n_inputs})")
    n_t = spec.n_outputs if spec.likelihood == "gaussian" else 1
    if Y.ndim != 2 or Y.shape != (X.shape[0], n_t):
        raise ValueError(f"{name}: targets have shape {Y.shape}; expected ({X.shape[0]}, {n_t}) "
                         f"for a {spec.likelihood} network with {spec.n_outputs} outputs")
    for what, arr in (("inputs", X), ("targets", Y)):
        problem = check_finite(arr, what, first_row=0)
        if problem:
            raise ValueError(f"{name}: {problem}")
    if spec.likelihood == "logistic" and not np.isin(Y, (0.0, 1.0)).all():
        raise ValueError(f"{name}: logistic targets must be 0 or 1")
    if spec.likelihood == "softmax" and not (np.isin(Y, np.arange(spec.n_outputs))).all():
        raise ValueError(f"{name}: softmax targets must be class indices 0..{spec.n_outputs - 1}")
    return X, Y


class MLPTarget(NamedTuple):
    """The posterior of an MLP's weights given hyperparameters, as arrays."""

    arch: np.ndarray    # (5 + n_layers,) int64, see models.mlp
    XT: np.ndarray      # (n_in, N padded) training inputs, cases along rows
    YT: np.ndarray      # (n_targets, N)
    work: np.ndarray    # scratch of the kernels
    prior: Prior
    sumsq: np.ndarray   # (n_in,) sum over training cases of each squared input
    sparse: SparseInputs | None  # the nonzero training inputs (None: the first layer reads XT)


@njit(inline="always")
def _energy_grad(q, grad, t, hyper):
    return mlp_energy_grad(q, grad, t.arch, t.XT, t.YT, hyper.prec, hyper.noise, t.work, t.sparse)


@njit(inline="always")
def _step_scales(t, hyper, out):
    return mlp_step_scales(t.arch, hyper.prec, hyper.noise, t.sumsq, float(t.YT.shape[1]), out)


@njit(inline="always")
def _gibbs(q, t, hyper, rng):
    out = forward(q, t.arch, t.XT, t.work, t.sparse) if t.arch[LIKELIHOOD] == GAUSSIAN else t.work[:0]
    gibbs_hyper(q, hyper, t.prior, t.arch, out, t.YT, rng)


@njit(inline="always")
def _gibbs_energy_grad(q, grad, t, hyper, rng):
    out = forward(q, t.arch, t.XT, t.work, t.sparse)       # read by the noise's update and by the gradient
    gibbs_hyper(q, hyper, t.prior, t.arch, out, t.YT, rng)
    return mlp_energy_grad_from(out, q, grad, t.arch, t.XT, t.YT, hyper.prec, hyper.noise, t.work, t.sparse)


@njit
def _hyper_values(hyper, out):
    S, T = hyper.tau.size, hyper.top.size
    for k in range(S):
        out[k] = hyper.tau[k]
    for k in range(T):
        out[S + k] = hyper.top[k]
    for k in range(hyper.noise.size):
        out[S + T + k] = hyper.noise[k]


@njit(inline="always")
def _accumulate(q, t, hyper, acc):
    accumulate(acc, forward(q, t.arch, acc.XT, acc.work, None), hyper.noise, t.arch[LIKELIHOOD])


MLPTarget.kernels = TargetKernels(_energy_grad, _step_scales, _gibbs, _hyper_values, _accumulate, _gibbs_energy_grad)


class BayesianMLP(Model):
    """Posterior of an MLP's weights and hyperparameters on training data (X, Y).

    Y is (N, n_outputs) for regression, 0/1 labels for logistic, and class
    indices 0..K-1 for softmax. ``sparse``: run the first layer on the nonzero
    inputs (None: when X is wide and mostly zero, :func:`~adaptive_hmc.models.mlp.use_sparse`).
    """

    def __init__(self, spec: MLPSpec, X, Y, priors: PriorSpec = PriorSpec(), sparse: bool | None = None):
        X, Y = check_data(spec, X, Y, "training data")
        self.spec, self.priors = spec, priors
        self.X, self.Y = X, Y
        self.prior, self.slot_names = build_prior(spec, priors)
        XT = pad_cases(X.T)
        self.sparse = use_sparse(X) if sparse is None else bool(sparse)
        nonzero = sparse_inputs(X) if self.sparse else None   # None: the sparse code is not even compiled
        self.target = MLPTarget(spec.arch, XT, np.ascontiguousarray(Y.T), spec.workspace(XT.shape[1]),
                                self.prior, np.ascontiguousarray((XT ** 2).sum(axis=1)), nonzero)
        self.n_cases = X.shape[0]
        self.dim = spec.n_params

    def initial_hyper(self, value=None) -> Hyper:
        """Hyperparameters at their prior means, or every free precision at ``value``."""
        return initial_hyper(self.prior, value)

    def hyper_names(self) -> list:
        T = self.prior.top_shape.size
        return (list(self.slot_names) + [f"ard_mean_{t}" for t in range(T)]
                + [f"noise_{o}" for o in range(self.spec.n_outputs)])

    def initial_position(self, rng=None, scale: float = 0.0) -> np.ndarray:
        """Zero weights (FBM's default start), or N(0, scale^2) weights when scale > 0."""
        if scale > 0:
            return scale * rng.standard_normal(self.dim)
        return np.zeros(self.dim)

    def predict(self, Q, X) -> np.ndarray:
        return predict(self.spec, Q, X)
