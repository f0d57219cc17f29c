"""The network's precisions integrated out of HMC's density (``PriorSpec(collapse=True)``, the config's
``model.priors.collapse``).

Flow position: model (:mod:`~adaptive_hmc.models.bnn` calls these kernels for a target whose
``collapse`` is a :class:`Collapse`; None compiles none of this code).

A weight group of n weights w (each of prior precision tau c_k, c_k the slot's fixed scale) under
tau ~ Gamma(shape a = alpha/2, rate b = alpha/(2 mu)) has, tau integrated out, the multivariate t
density p(w) prop. to (b + sum_k c_k w_k^2 / 2)^-(a + n/2), so that its energy is

    U_g(w) = (a + n/2) log(b + SS/2),   dU_g/dw_k = (a + n/2) / (b + SS/2) c_k w_k:

the gradient of a Gaussian prior whose precision is the conditional mean of tau given w. The Gaussian
likelihood's noise precision (shape a, rate b, N cases) likewise gives (a + N/2) log(b + SSE/2), whose
gradient is the Gaussian one at the noise precision (a + N/2) / (b + SSE/2). HMC then samples the
weights' marginal posterior, one smooth density with no funnel between a group's precision and its
weights (FBM integrates out the lowest level the same way; here every free group that has no ARD, and
the noise). The precisions are still drawn from their conditionals given the weights before each
trajectory (:func:`~adaptive_hmc.models.priors.gibbs_hyper`): exact draws of the joint posterior, for the
reports, the log hyperparameters' R-hat and the predictions' noise. ARD precisions stay explicit (Gibbs).

The step scales of a collapsed group cannot follow those draws: a step size that depends on a precision
drawn from its conditional given the current weights would make HMC's kernel on the marginal depend on
the state, and the chain would no longer leave the posterior invariant. They are FBM's heuristic at a
fixed reference precision (:data:`REFERENCE`: the chains' initial value, a weight of sd 1 before the
slot's scale) and noise precision 1, corrected by the learned metric where it runs
(``sampler.metric: learned``); explicit precisions (ARD, fixed groups) keep their own.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..jit import njit
from .mlp import N_OUT, forward, mlp_energy_grad, mlp_step_scales

#: The precision of every collapsed slot (times its scale) and of a collapsed noise at which the step
#: scales are computed: the chains' initial hyperparameter value (NetworkOptions.initial_hyper).
REFERENCE = 1.0


class Collapse(NamedTuple):
    """Which precisions are integrated out, their posterior shapes and prior rates, and scratch."""

    slot: np.ndarray          # (S,) bool: the slot's precision is integrated out
    shape: np.ndarray         # (S,) alpha/2 + n_s/2 of a collapsed slot
    rate: np.ndarray          # (S,) alpha / (2 mu)
    noise: bool               # the noise precisions are integrated out
    noise_shape: np.ndarray   # (n_out,) alpha/2 + N/2
    noise_rate: np.ndarray    # (n_out,)
    scale_prec: np.ndarray    # (D,) each weight's precision for the step scales where its slot is collapsed
    scale_noise: np.ndarray   # (n_out,) the noise precisions for the step scales
    prec: np.ndarray          # (D,) scratch: each weight's precision in the gradient
    sums: np.ndarray          # (S,) scratch: the slots' scaled sums of squares, then effective precisions
    sse: np.ndarray           # (n_out,) scratch: residual sums of squares
    noise_eff: np.ndarray     # (n_out,) scratch: effective noise precisions
    unit: np.ndarray          # (n_out,) ones
    zero: np.ndarray          # (D,) zeros


def build_collapse(prior, n_cases: int, gaussian: bool) -> Collapse:
    """The :class:`Collapse` of ``prior`` (:class:`~adaptive_hmc.models.priors.Prior`) on ``n_cases``
    training cases: every free slot without an ARD mean, and the noise of a Gaussian likelihood when free."""
    S, D, n_out = prior.slot_shape.size, prior.param_slot.size, prior.noise_shape.size
    slot = np.isfinite(prior.slot_shape) & (prior.slot_top < 0)
    count = np.bincount(prior.param_slot, minlength=S).astype(np.float64)
    a = np.where(slot, 0.5 * prior.slot_shape, 0.0)
    shape = np.where(slot, a + 0.5 * count, 0.0)
    rate = np.where(slot, a / prior.slot_mean, 1.0)
    noise = bool(gaussian and np.isfinite(prior.noise_shape).all())
    na = 0.5 * prior.noise_shape if noise else np.zeros(n_out)
    noise_shape = na + 0.5 * n_cases if noise else np.zeros(n_out)
    noise_rate = na / prior.noise_mean if noise else np.ones(n_out)
    return Collapse(slot, shape, rate, noise, noise_shape, noise_rate, REFERENCE * prior.param_scale,
                    np.full(n_out, REFERENCE), np.empty(D), np.empty(S), np.empty(n_out), np.empty(n_out),
                    np.ones(n_out), np.zeros(D))


@njit(inner=True)
def _group_terms(q, c, prior, prec):
    """The collapsed groups' energy less their Gaussian terms at the effective precisions (which the
    network's energy adds), and every weight's precision in the gradient, into ``c.prec``."""
    for s in range(c.sums.size):
        c.sums[s] = 0.0
    for k in range(q.size):
        c.sums[prior.param_slot[k]] += prior.param_scale[k] * q[k] * q[k]
    e = 0.0
    for s in range(c.sums.size):
        if c.slot[s]:
            r = c.rate[s] + 0.5 * c.sums[s]
            e += c.shape[s] * math.log(r) - 0.5 * c.shape[s] / r * c.sums[s]
            c.sums[s] = c.shape[s] / r
    for k in range(q.size):
        s = prior.param_slot[k]
        c.prec[k] = c.sums[s] * prior.param_scale[k] if c.slot[s] else prec[k]
    return e


@njit(inner=True)
def _one_noise(q, grad, t, c, e):
    """A collapsed noise on one output: the likelihood's gradient at noise precision 1 scaled by the
    effective precision (one pass), the weights' Gaussian terms added after."""
    half = mlp_energy_grad(q, grad, t.arch, t.XT, t.YT, c.zero, c.unit, t.work, t.sparse, t.scratch)
    r = c.noise_rate[0] + half
    eff = c.noise_shape[0] / r
    for k in range(q.size):
        grad[k] = eff * grad[k] + c.prec[k] * q[k]
    p = 0.0
    for k in range(q.size):         # a sum apart from the stores (see mlp.passes._likelihood_block)
        p += c.prec[k] * q[k] * q[k]
    return e + 0.5 * p + c.noise_shape[0] * math.log(r)


@njit(inner=True)
def _noises(q, grad, t, c, e):
    """Collapsed noises on several outputs: a forward pass for the residuals, then the gradient at the
    effective noise precisions."""
    out = forward(q, t.arch, t.XT, t.work, t.sparse, t.scratch)
    N = t.YT.shape[1]
    for o in range(c.sse.size):
        s = 0.0
        for n in range(N):
            d = out[o, n] - t.YT[o, n]
            s += d * d
        c.sse[o] = s
        r = c.noise_rate[o] + 0.5 * s
        c.noise_eff[o] = c.noise_shape[o] / r
        e += c.noise_shape[o] * math.log(r) - 0.5 * c.noise_eff[o] * s
    return e + mlp_energy_grad(q, grad, t.arch, t.XT, t.YT, c.prec, c.noise_eff, t.work, t.sparse, t.scratch)


@njit(inner=True)
def collapsed_energy_grad(q, grad, t, hyper):
    """U(q) = -log p(q | explicit hyperparameters, data) + const of the marginal density (the module's
    docstring), its gradient into ``grad``."""
    c = t.collapse
    e = _group_terms(q, c, t.prior, hyper.prec)
    if not c.noise:
        return e + mlp_energy_grad(q, grad, t.arch, t.XT, t.YT, c.prec, hyper.noise, t.work, t.sparse, t.scratch)
    if t.arch[N_OUT] == 1:
        return _one_noise(q, grad, t, c, e)
    return _noises(q, grad, t, c, e)


@njit(inner=True)
def collapsed_step_scales(t, hyper, out):
    """FBM's step scales with each collapsed precision at its reference (the module's docstring)."""
    c = t.collapse
    for k in range(out.size):
        c.prec[k] = c.scale_prec[k] if c.slot[t.prior.param_slot[k]] else hyper.prec[k]
    noise = c.scale_noise if c.noise else hyper.noise
    return mlp_step_scales(t.arch, c.prec, noise, t.sumsq, float(t.YT.shape[1]), out)
