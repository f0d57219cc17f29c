"""Neal's (1992) network model: weights from uniform coordinates by a logistic
transform with group scales (eqs 28-29), the noise integrated out (eqs 30-35).

Flow position: **models** -> samplers (a target of :mod:`adaptive_hmc.models.base`'s
interface). The position holds one coordinate q_i per weight, in the layout of
:class:`~adaptive_hmc.models.mlp.MLPSpec`, then one per scale group; each is
mapped into [0, 1] by reflected replication (eq 29),

    a = q - floor(q) (floor even),  1 - (q - floor(q)) (floor odd),

and w_i = s_g / (1 - s_g) * log(a_i / (1 - a_i)) (eq 28), s_g the mapped scale
coordinate of weight i's group: input-hidden weights (and hidden-hidden), hidden
biases, and hidden-output weights with the output biases (Neal's three groups).
The prior is uniform in these coordinates, so the energy is the data term
alone; with a Gamma(m0, s0) prior on the noise precision integrated out (eq 34),

    U = (m0 + m) / 2 * [log(s0 + S) - log(s0)],

S the total squared error and m = N * n_outputs. The step scales are 1: the step
factor is Neal's absolute step eps0 in these coordinates (about 1e-4 to 1e-3).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..jit import njit
from .base import Model, NoHyper, TargetKernels, no_gibbs, no_hyper_values
from .bnn import check_data
from .mlp import MLPSpec, forward, mlp_energy_grad, pad_cases, predict
from .predictive import add_output, logaddexp

#: Neal's scale groups by weight kind.
GROUP_OF_KIND = {"input_hidden": 0, "hidden_hidden": 0, "hidden_bias": 1, "hidden_output": 2, "output_bias": 2}
N_GROUPS = 3


class Neal92Target(NamedTuple):
    arch: np.ndarray      # of the MLP (Gaussian outputs, no direct connections)
    XT: np.ndarray        # (n_in, N padded)
    YT: np.ndarray        # (n_out, N)
    work: np.ndarray
    group: np.ndarray     # (D,) int64 scale group of each weight
    zero_prec: np.ndarray   # (D,) zeros: the MLP kernel without a Gaussian prior
    unit_noise: np.ndarray  # (n_out,) ones: half the squared error
    w: np.ndarray         # (D,) scratch: the weights
    gw: np.ndarray        # (D,) scratch: d(S/2)/dw
    m0: float
    s0: float


@njit(inline="always")
def reflect(x):
    """(a in [0, 1], da/dx = +-1) of coordinate x by reflected replication (eq 29)."""
    f = math.floor(x)
    frac = x - f
    if int(f) % 2 == 0:
        return frac, 1.0
    return 1.0 - frac, -1.0


@njit
def fill_weights(q, group, w):
    """The weights of eq 28 at position ``q`` into ``w``; returns w."""
    D = w.size
    for i in range(D):
        s, _ = reflect(q[D + group[i]])
        a, _ = reflect(q[i])
        w[i] = s / (1.0 - s) * math.log(a / (1.0 - a))
    return w


@njit
def _energy_grad(q, grad, t, hyper):
    D = t.w.size
    fill_weights(q, t.group, t.w)
    half = mlp_energy_grad(t.w, t.gw, t.arch, t.XT, t.YT, t.zero_prec, t.unit_noise, t.work, None, None)
    m = t.YT.shape[0] * t.YT.shape[1]
    sse = 2.0 * half
    c = (t.m0 + m) / (t.s0 + sse)          # dU/dw = c * d(S/2)/dw
    for g in range(N_GROUPS):
        grad[D + g] = 0.0
    for i in range(D):
        g = t.group[i]
        s, sign_s = reflect(q[D + g])
        a, sign_a = reflect(q[i])
        dw = c * t.gw[i]
        grad[i] = dw * s / (1.0 - s) / (a * (1.0 - a)) * sign_a
        grad[D + g] += dw * math.log(a / (1.0 - a)) / ((1.0 - s) * (1.0 - s)) * sign_s
    return 0.5 * (t.m0 + m) * (math.log(t.s0 + sse) - math.log(t.s0))


@njit
def _step_scales(t, hyper, out):
    out[:] = 1.0
    return out


@njit(inline="always")
def log_predictive(s_train, s_new, m, n_out, m0, s0):
    """log of eq 35: the density of a new output vector at squared error
    ``s_new`` given the weights, whose squared error on the m training outputs
    is ``s_train``."""
    return (math.lgamma(0.5 * (m0 + m + n_out)) - math.lgamma(0.5 * (m0 + m)) - 0.5 * n_out * math.log(math.pi)
            + 0.5 * (m0 + m) * math.log(s0 + s_train) - 0.5 * (m0 + m + n_out) * math.log(s0 + s_train + s_new))


@njit
def _training_sse(t):
    """Total squared error on the training cases of the weights in ``t.w`` (a forward pass)."""
    out = forward(t.w, t.arch, t.XT, t.work, None, None)
    sse = 0.0
    for o in range(t.YT.shape[0]):
        for n in range(t.YT.shape[1]):
            r = out[o, n] - t.YT[o, n]
            sse += r * r
    return sse


@njit
def accumulate_eq35(t, acc):
    """Add the sample whose weights are in ``t.w`` to ``acc``: predictive means
    and their squares; the noise variance of eq 35's Student-t, (s0 + S) /
    (m0 + m - 2) per output; log eq 35 per case. (For any target with Neal's
    fields arch, XT, YT, work, w, m0, s0.)"""
    m = t.YT.shape[0] * t.YT.shape[1]
    sse = _training_sse(t)
    out = forward(t.w, t.arch, acc.XT, acc.work, None, None)
    n_out, N = acc.pred.shape
    acc.count[0] += 1.0
    for n in range(N):
        s_new = 0.0
        for o in range(n_out):
            r = add_output(acc, out, o, n)
            s_new += r * r
        acc.lse[n] = logaddexp(acc.lse[n], log_predictive(sse, s_new, m, n_out, t.m0, t.s0))
    for o in range(n_out):
        acc.var[o] += (t.s0 + sse) / (t.m0 + m - 2.0)


@njit
def _accumulate(q, t, hyper, acc):
    fill_weights(q, t.group, t.w)
    accumulate_eq35(t, acc)


Neal92Target.kernels = TargetKernels(_energy_grad, _step_scales, no_gibbs, no_hyper_values, _accumulate)


class NealMLP(Model):
    """What Neal's (1992, 1993) models share: an MLP with Gaussian outputs (no
    direct connections) on training data (X, Y), three weight groups, the
    noise integrated out with m0 = s0 = 0.1 by default, no hyperparameters. A
    subclass sets ``Target`` (a NamedTuple with :class:`Neal92Target`'s
    fields and its own kernels) and defines the position's meaning
    (:meth:`initial_position`, :meth:`weights`)."""

    Target = None
    name = "Neal's model"

    def __init__(self, spec: MLPSpec, X, Y, m0: float = 0.1, s0: float = 0.1):
        if spec.likelihood != "gaussian" or spec.direct:
            raise ValueError(f"{self.name} is for Gaussian outputs without direct connections")
        if not (m0 > 0 and s0 > 0):
            raise ValueError(f"m0={m0}, s0={s0}: both must be > 0")
        X, Y = check_data(spec, X, Y, "training data")
        self.spec, self.X, self.Y = spec, X, Y
        D = spec.n_params
        group = np.empty(D, np.int64)
        for g in spec.groups:
            group[g.slice] = GROUP_OF_KIND[g.kind]
        XT = pad_cases(X.T)
        self.target = self.Target(spec.arch, XT, spec.target_rows(Y), spec.workspace(XT.shape[1]), group,
                                  np.zeros(D), np.ones(spec.n_outputs), np.empty(D), np.empty(D), float(m0),
                                  float(s0))
        self.dim = D + N_GROUPS
        self.n_cases = X.shape[0]

    def initial_hyper(self, value=None):
        return NoHyper.empty()

    def noise_precisions(self, Q, hyper_rows=None) -> np.ndarray:
        """(S, n_outputs): (m0 + m - 2) / (s0 + S(w)) for each sample, the
        precision whose inverse is the variance of eq 35's Student-t."""
        W = self.weights(Q)
        t = self.target
        m = self.Y.size
        sse = ((predict(self.spec, W, self.X) - self.Y) ** 2).sum(axis=(1, 2))
        return np.repeat(((t.m0 + m - 2.0) / (t.s0 + sse))[:, None], self.spec.n_outputs, axis=1)


class Neal92MLP(NealMLP):
    """Neal's (1992) model: uniform coordinates, three scale groups (eqs 28-29),
    noise integrated out."""

    Target = Neal92Target
    name = "Neal's 1992 model"

    def initial_position(self, rng, scale: float = 0.0) -> np.ndarray:
        """A draw from the prior: every coordinate uniform on (0, 1) (Neal's
        start; ``scale`` is not used)."""
        return rng.uniform(0.0, 1.0, size=self.dim)

    def weights(self, Q, hyper_rows=None) -> np.ndarray:
        """The weights (S, D) of positions Q (S, dim) (eq 28)."""
        Q = np.atleast_2d(np.asarray(Q, dtype=np.float64))
        W = np.empty((Q.shape[0], self.spec.n_params))
        for k in range(Q.shape[0]):
            fill_weights(np.ascontiguousarray(Q[k]), self.target.group, W[k])
        return W
