"""A Gaussian N(mean, A^-1) as a sampling target: the statistical tests' target
with known moments, and the smallest example of the target interface.

Flow position: **models** -> samplers (see :mod:`adaptive_hmc.models.base`).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..jit import njit
from .base import Model, TargetKernels, no_gibbs, no_hyper_values


class GaussianData(NamedTuple):
    A: np.ndarray      # (D, D) precision matrix
    mean: np.ndarray   # (D,)


@njit
def _energy_grad(q, grad, t, hyper):
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


@njit
def _step_scales(t, hyper, out):
    """1/sqrt(A_kk): the second-derivative rule the MLP heuristic follows."""
    for k in range(out.size):
        out[k] = 1.0 / np.sqrt(t.A[k, k])
    return out


GaussianData.kernels = TargetKernels(_energy_grad, _step_scales, no_gibbs, no_hyper_values)


class GaussianTarget(Model):
    """N(mean, cov) as a sampling target, with step scales 1/sqrt(A_ii) (A = cov^-1)."""

    def __init__(self, mean, cov):
        mean = np.ascontiguousarray(mean, dtype=np.float64)
        cov = np.asarray(cov, dtype=np.float64)
        if cov.shape != (mean.size, mean.size):
            raise ValueError(f"cov has shape {cov.shape}; expected {(mean.size, mean.size)}")
        self.mean, self.cov = mean, cov
        self.target = GaussianData(np.ascontiguousarray(np.linalg.inv(cov)), mean)
        self.dim = mean.size

