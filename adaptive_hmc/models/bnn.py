"""A Bayesian MLP on a data set: spec + priors + training data, as a sampling
target with step-size heuristic and Gibbs updates of its hyperparameters.

Flow position: data -> **model** -> transitions. Ties together
:mod:`~adaptive_hmc.models.mlp` and :mod:`~adaptive_hmc.models.priors`.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..targets import MLP, Target, energy_grad
from .mlp import MLPSpec, mlp_step_scales, pad_cases, predict
from .priors import (
    Hyper,
    PriorSpec,
    build_prior,
    gibbs_hyper,
    initial_hyper,
    precisions,
)


class GibbsInfo(NamedTuple):
    accepted: bool = True
    accept_prob: float = 1.0
    energy_error: float = 0.0
    divergent: bool = False
    num_steps: int = 0


def check_data(spec: MLPSpec, X, Y, name: str = "data"):
    """Validated float64 copies of X (N, n_in) and Y (N, n_targets); raises
    ValueError naming what is wrong."""
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
        bad = ~np.isfinite(arr)
        if bad.any():
            r, c = np.argwhere(bad)[0]
            raise ValueError(f"{name}: {what} contain {bad.sum()} non-finite values (first at row {r}, "
                             f"column {c}); only finite numbers are allowed")
    if spec.likelihood == "logistic" and not np.isin(Y, (0.0, 1.0)).all():
        raise ValueError(f"{name}: logistic targets must be 0 or 1")
    if spec.likelihood == "softmax" and not (np.isin(Y, np.arange(spec.n_outputs))).all():
        raise ValueError(f"{name}: softmax targets must be class indices 0..{spec.n_outputs - 1}")
    return X, Y


class BayesianMLP:
    """Posterior of an MLP's weights and hyperparameters on training data (X, Y).

    Y is (N, n_outputs) for regression, 0/1 labels for logistic, and class
    indices 0..K-1 for softmax.
    """

    def __init__(self, spec: MLPSpec, X, Y, priors: PriorSpec = PriorSpec()):
        X, Y = check_data(spec, X, Y, "training data")
        self.spec, self.priors = spec, priors
        self.X, self.Y = X, Y
        self.prior, self.slot_names = build_prior(spec, priors)
        XT = pad_cases(X.T)
        self.target = Target(MLP, spec.arch, XT, np.ascontiguousarray(Y.T), np.empty(spec.n_params),
                             np.ones(spec.n_outputs), spec.workspace(XT.shape[1]),
                             np.empty((0, 0)), np.empty(0))
        self.sumsq = np.ascontiguousarray((XT ** 2).sum(axis=1))
        self.n_cases = X.shape[0]
        self.dim = spec.n_params

    def initial_hyper(self, value=None) -> Hyper:
        return initial_hyper(self.prior, value)

    def load(self, hyper: Hyper):
        """Write the weight precisions and noise precisions of ``hyper`` into the target."""
        precisions(self.prior, hyper.tau, self.target.prec)
        self.target.noise[:] = hyper.noise

    def scales(self, hyper: Hyper) -> np.ndarray:
        """Heuristic step scales s_k (see :func:`~adaptive_hmc.models.mlp.mlp_step_scales`)."""
        self.load(hyper)
        return mlp_step_scales(self.target.arch, self.target.prec, self.target.noise, self.sumsq,
                               float(self.n_cases), np.empty(self.dim))

    def energy_grad(self, q, hyper: Hyper):
        self.load(hyper)
        g = np.empty(self.dim)
        return energy_grad(np.ascontiguousarray(q, dtype=np.float64), g, self.target), g

    def initial_position(self, rng=None, scale: float = 0.0) -> np.ndarray:
        """Zero weights (FBM's default start), or N(0, scale^2) weights when scale > 0."""
        if scale > 0:
            return scale * rng.standard_normal(self.dim)
        return np.zeros(self.dim)

    def predict(self, Q, X) -> np.ndarray:
        return predict(self.spec, Q, X)

    def gibbs(self, state, params=None, rng=None):
        """Gibbs update of every free hyperparameter given the weights, as a
        transition ``(state, params, rng) -> (state, info)``; the energy and
        gradient are re-evaluated under the new hyperparameters."""
        h = state.hyper.copy()
        t = self.target
        gibbs_hyper(state.position, h.tau, h.top, h.noise, self.prior, t.arch, t.XT, t.YT, t.work, rng)
        u, g = self.energy_grad(state.position, h)
        return state._replace(energy=float(u), grad=g, hyper=h), GibbsInfo()
