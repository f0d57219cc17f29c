"""Neal's (1993) network model: unscaled weights times one scale factor per
category, the noise integrated out (Neal 1993 section 3; 1992 eqs 30-35).

Flow position: **models** -> samplers (a target of :mod:`adaptive_hmc.models.base`'s
interface). The position holds one unscaled weight u_i per weight, in the
layout of :class:`~adaptive_hmc.models.mlp.MLPSpec`, then the scale factors
s_g of the three categories (input-hidden; bias-hidden; hidden and bias to
output); the weights are w_i = s_g u_i. The unscaled weights have the
Gaussian prior N(0, 1) ("I fix w to one, but multiply each weight by a scale
factor associated with its category"). The paper does not give the scale
factors' prior; here it is the one of Neal (1992), whose scale s/(1 - s) with s
uniform on [0, 1] has density 1/(1 + t)^2 on t > 0, made symmetric on the real
line: p(s_g) = 1 / (2 (1 + |s_g|)^2). (A flat prior would not do: tanh units
saturate, so the likelihood stays bounded away from 0 as input weights grow,
and a flat prior on their scale leaves the posterior improper.) With the
noise precision's Gamma(m0, s0) prior integrated out (eq 34 of 1992),

    U = sum_i u_i^2 / 2 + sum_g 2 log(1 + |s_g|) + (m0 + m) / 2 * [log(s0 + S) - log(s0)],

S the total squared error and m = N * n_outputs. The step scales are 1: the
step factor is Neal's absolute step (eps = 0.00012 in the paper).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..jit import njit
from .base import TargetKernels, no_gibbs, no_hyper_values, unit_step_scales
from .mlp import mlp_energy_grad
from .neal1992 import N_GROUPS, NealMLP, accumulate_eq35


class Neal93Target(NamedTuple):
    arch: np.ndarray
    XT: np.ndarray
    YT: np.ndarray
    work: np.ndarray
    group: np.ndarray     # (D,) int64 category of each weight
    zero_prec: np.ndarray
    unit_noise: np.ndarray
    w: np.ndarray         # (D,) scratch: the weights
    gw: np.ndarray        # (D,) scratch: d(S/2)/dw
    m0: float
    s0: float


@njit
def fill_weights(q, group, w):
    """w_i = s_g u_i at position ``q`` into ``w``; returns w."""
    D = w.size
    for i in range(D):
        w[i] = q[D + group[i]] * q[i]
    return w


@njit
def _energy_grad(q, grad, t, hyper):
    D = t.w.size
    fill_weights(q, t.group, t.w)
    half = mlp_energy_grad(t.w, t.gw, t.arch, t.XT, t.YT, t.zero_prec, t.unit_noise, t.work, None, None)
    m = t.YT.shape[0] * t.YT.shape[1]
    sse = 2.0 * half
    c = (t.m0 + m) / (t.s0 + sse)
    prior = 0.0
    for g in range(N_GROUPS):
        s = q[D + g]
        prior += 2.0 * math.log1p(abs(s))
        grad[D + g] = 2.0 / (1.0 + abs(s)) * (1.0 if s > 0 else -1.0 if s < 0 else 0.0)
    for i in range(D):
        g = t.group[i]
        dw = c * t.gw[i]
        grad[i] = q[i] + dw * q[D + g]
        grad[D + g] += dw * q[i]
        prior += 0.5 * q[i] * q[i]
    return prior + 0.5 * (t.m0 + m) * (math.log(t.s0 + sse) - math.log(t.s0))


@njit
def _accumulate(q, t, hyper, acc):
    fill_weights(q, t.group, t.w)
    accumulate_eq35(t, acc)


Neal93Target.kernels = TargetKernels(_energy_grad, unit_step_scales, no_gibbs, no_hyper_values, _accumulate)


class Neal93MLP(NealMLP):
    """Neal's (1993) model: unscaled weights with N(0, 1) priors, one scale
    factor s per category (prior 1 / (2 (1 + |s|)^2)), noise integrated out."""

    Target = Neal93Target
    name = "Neal's 1993 model"

    def initial_position(self, rng, scale: float = 0.0) -> np.ndarray:
        """Unscaled weights drawn from their N(0, 1) prior, scale factors 1
        (weights N(0, 1): the paper's w = 1); ``scale`` is not used."""
        return np.concatenate([rng.standard_normal(self.spec.n_params), np.ones(N_GROUPS)])

    def weights(self, Q, hyper_rows=None) -> np.ndarray:
        """The weights (S, D) of positions Q (S, dim): s_g u_i."""
        Q = np.atleast_2d(np.asarray(Q, dtype=np.float64))
        return Q[:, :self.spec.n_params] * Q[:, self.spec.n_params + self.target.group]
