"""Potential energies the samplers can target, behind one compiled entry point.

Flow position: model -> **target** -> integrator. A :class:`Target` is a
NamedTuple of arrays (one numba type for every kind, so every kernel compiles
once): kind 0 is a Bayesian MLP (weights given hyperparameters), kind 1 a
Gaussian N(mean, A^-1) used by the statistical tests and as a generic example.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .jit import njit
from .models.mlp import mlp_energy_grad

MLP, GAUSSIAN = 0, 1


class Target(NamedTuple):
    kind: int
    arch: np.ndarray   # (5 + n_layers,) int64, see models.mlp
    XT: np.ndarray     # (n_in, N) training inputs, cases along rows
    YT: np.ndarray     # (n_targets, N)
    prec: np.ndarray   # (D,) prior precision of each weight (filled from the hyperparameters)
    noise: np.ndarray  # (n_out,) noise precisions
    work: np.ndarray   # scratch of the MLP kernels
    A: np.ndarray      # (D, D) precision matrix of a Gaussian target
    mean: np.ndarray   # (D,) mean of a Gaussian target


@njit
def energy_grad(q, grad, t):
    """Potential energy U(q) of target ``t``; writes dU/dq into ``grad``."""
    if t.kind == MLP:
        return mlp_energy_grad(q, grad, t.arch, t.XT, t.YT, t.prec, t.noise, t.work)
    D = q.size
    d = q - t.mean
    u = 0.0
    for i in range(D):
        s = 0.0
        for j in range(D):
            s += t.A[i, j] * d[j]
        grad[i] = s
        u += 0.5 * d[i] * s
    return u


_E2 = np.empty((0, 0))
_E1 = np.empty(0)
_I1 = np.zeros(1, np.int64)


class GaussianTarget:
    """N(mean, cov) as a sampling target, with step scales 1/sqrt(A_ii)
    (A = cov^-1), the same second-derivative rule the MLP heuristic follows."""

    def __init__(self, mean, cov):
        mean = np.ascontiguousarray(mean, dtype=np.float64)
        cov = np.asarray(cov, dtype=np.float64)
        if cov.shape != (mean.size, mean.size):
            raise ValueError(f"cov has shape {cov.shape}; expected {(mean.size, mean.size)}")
        self.mean, self.cov = mean, cov
        A = np.ascontiguousarray(np.linalg.inv(cov))
        self.target = Target(GAUSSIAN, _I1, _E2, _E2, _E1, _E1, _E2, A, mean)
        self.dim = mean.size

    def load(self, hyper):
        """Nothing to load: a Gaussian target has no hyperparameters."""

    def scales(self, hyper=None):
        return 1.0 / np.sqrt(np.diag(self.target.A))
