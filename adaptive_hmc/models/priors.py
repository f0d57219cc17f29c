"""Hierarchical Gaussian priors on the weight groups, ARD, and Gibbs updates of
the hyperparameters (Rasmussen 1996, sections 2.1 and 2.2.2; Neal 1995).

Flow position: model -> **priors** -> transition. :class:`PriorSpec` is the
user-facing description; :func:`build_prior` turns it into the arrays
(:class:`Prior`) that the compiled :func:`gibbs_hyper` works on.

Gamma parameterisation (Rasmussen 1996): a precision tau ~ Gamma(mean mu, shape
alpha) has density proportional to tau^(alpha/2 - 1) exp(-tau alpha / (2 mu)),
i.e. shape alpha/2 and rate alpha/(2 mu). mu = 400 corresponds to sd 0.05.
``shape = inf`` fixes the precision at ``mean_precision``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..jit import njit
from .mlp import GAUSSIAN, LIKELIHOOD, MLPSpec


@dataclass(frozen=True)
class GammaPrior:
    """Gamma(mean ``mean_precision``, shape ``shape``) prior on a precision;
    ``shape=inf`` fixes the precision at its mean."""

    mean_precision: float = 400.0
    shape: float = 0.5

    def __post_init__(self):
        if not (self.mean_precision > 0 and math.isfinite(self.mean_precision)):
            raise ValueError(f"mean_precision={self.mean_precision}: must be a finite number > 0")
        if not self.shape > 0:
            raise ValueError(f"shape={self.shape}: must be > 0 (inf fixes the precision)")

    @classmethod
    def fixed_sd(cls, sd: float) -> GammaPrior:
        return cls(1.0 / sd ** 2, math.inf)


#: Default shape (alpha above) of each weight group's precision prior: 2, an exponential prior on the
#: precision (Gamma shape 1) around the mean 400 (sd 0.05). Neal's 0.5 (shape 0.25) is so vague that on
#: real data the group precisions' posterior is about as wide as their prior (sd 4 in log tau) and the
#: chains take thousands of super-transitions to cross it (docs/RESULTS.md, hierarchical mixing); the
#: papers' configs spell 0.5. The noise keeps 0.5 (the data determine it).
WEIGHT_SHAPE = 2.0


def weight_prior() -> GammaPrior:
    """A weight group's default precision prior: Gamma(mean 400, shape :data:`WEIGHT_SHAPE`)."""
    return GammaPrior(400.0, WEIGHT_SHAPE)


#: How the precisions are sampled: "gibbs", Neal's conjugate Gibbs updates given
#: the weights alone; "interweave", each Gibbs update followed by slice updates
#: of the precisions jointly with their weights' scale (:func:`scale_directions`).
HYPER_MOVES = ("interweave", "gibbs")


@dataclass(frozen=True)
class PriorSpec:
    """Priors of every weight group and of the noise (defaults: mean precision 400
    (sd 0.05) for every group and the noise, shape :data:`WEIGHT_SHAPE` (2) for
    the weight groups and Neal's 0.5 for the noise, output bias fixed at sd 100;
    Neal's robot-arm specification is ``0.05:0.5`` for every group).

    ``scale_hidden_output`` multiplies the hidden-output precision by the number
    of units of the last hidden layer, so that the prior output magnitude does
    not depend on it. ``ard`` gives the weights out of each input (input-hidden
    and, separately, input-output) a precision tau_i ~ Gamma(mu, ``ard_shape``),
    with one group-level mean mu ~ ``ard_top`` per group (Rasmussen's 3-level prior).
    ``hyper_moves`` (:data:`HYPER_MOVES`): "gibbs" updates the precisions as
    Neal does, by Gibbs sampling given the weights; "interweave" (the default)
    adds, after each Gibbs update, slice updates of each free precision
    together with the scale of its weights, and of each hidden layer's
    incoming against its outgoing weights (:func:`scale_directions`).
    ``collapse``: integrate every free precision without ARD, and a Gaussian
    likelihood's free noise precision, out of HMC's density (:mod:`~adaptive_hmc.models.collapsed`);
    they are still drawn from their conditionals before each trajectory.
    """

    input_hidden: GammaPrior = field(default_factory=weight_prior)
    hidden_hidden: GammaPrior = field(default_factory=weight_prior)
    hidden_bias: GammaPrior = field(default_factory=weight_prior)
    hidden_output: GammaPrior = field(default_factory=weight_prior)
    output_bias: GammaPrior = field(default_factory=lambda: GammaPrior.fixed_sd(100.0))
    input_output: GammaPrior = field(default_factory=weight_prior)
    noise: GammaPrior = field(default_factory=GammaPrior)
    ard: bool = False
    ard_top: GammaPrior = field(default_factory=lambda: GammaPrior(400.0, 1.0))
    ard_shape: float = 0.5
    scale_hidden_output: bool = True
    hyper_moves: str = "interweave"
    collapse: bool = False

    def __post_init__(self):
        if self.hyper_moves not in HYPER_MOVES:
            raise ValueError(f"hyper_moves={self.hyper_moves!r}: allowed are {', '.join(HYPER_MOVES)}")


class Prior(NamedTuple):
    """Prior as arrays. S precision slots, T ARD top-level means, D weights."""

    param_slot: np.ndarray   # (D,) int64: slot of each weight
    param_scale: np.ndarray  # (D,) precision of weight k = tau[param_slot[k]] * param_scale[k]
    slot_shape: np.ndarray   # (S,) alpha; inf = fixed
    slot_mean: np.ndarray    # (S,) mu, used when slot_top < 0
    slot_top: np.ndarray     # (S,) int64 index of the ARD mean governing the slot, or -1
    top_shape: np.ndarray    # (T,) alpha_0
    top_mean: np.ndarray     # (T,) mean of the ARD mean's prior
    noise_shape: np.ndarray  # (n_out,) alpha; inf = fixed
    noise_mean: np.ndarray   # (n_out,)


class Hyper(NamedTuple):
    """Hyperparameter values: slot precisions, ARD means, noise precisions, and
    ``prec``, the prior precision of every weight that ``tau`` implies
    (derived: :func:`precisions`; kept in step by :func:`initial_hyper` and
    :func:`gibbs_hyper`)."""

    tau: np.ndarray
    top: np.ndarray
    noise: np.ndarray
    prec: np.ndarray

    def copy(self) -> Hyper:
        return Hyper(self.tau.copy(), self.top.copy(), self.noise.copy(), self.prec.copy())


def build_prior(spec: MLPSpec, priors: PriorSpec):
    """Arrays for ``spec`` under ``priors``; returns (Prior, slot_names)."""
    D = spec.n_params
    slot = np.empty(D, np.int64)
    scale = np.ones(D)
    shapes, means, tops, names = [], [], [], []
    top_shape, top_mean = [], []
    h_last = spec.hidden[-1]
    for g in spec.groups:
        gp = getattr(priors, g.kind)
        idx = np.arange(g.start, g.stop)
        if priors.ard and g.kind in ("input_hidden", "input_output"):
            t = len(top_shape)
            top_shape.append(priors.ard_top.shape)
            top_mean.append(priors.ard_top.mean_precision)
            fan_out = g.shape[1]
            for i in range(spec.n_inputs):
                slot[idx[i * fan_out:(i + 1) * fan_out]] = len(shapes)
                shapes.append(priors.ard_shape)
                means.append(priors.ard_top.mean_precision)
                tops.append(t)
                names.append(f"{g.name}[input {i}]")
            continue
        slot[idx] = len(shapes)
        shapes.append(gp.shape)
        means.append(gp.mean_precision)
        tops.append(-1)
        names.append(g.name)
        if g.kind == "hidden_output" and priors.scale_hidden_output:
            scale[idx] = h_last
    n_out = spec.n_outputs
    noise_shape = np.full(n_out, priors.noise.shape if spec.likelihood == "gaussian" else math.inf)
    prior = Prior(slot, scale, np.array(shapes, float), np.array(means, float),
                  np.array(tops, np.int64), np.array(top_shape, float), np.array(top_mean, float),
                  noise_shape, np.full(n_out, priors.noise.mean_precision))
    return prior, names


#: Most per-input directions of an ARD group (:func:`scale_directions`).
MAX_SLOT_DIRECTIONS = 16


def scale_directions(spec: MLPSpec, prior: Prior) -> np.ndarray:
    """The directions (n, S) in which the "interweave" moves update the log
    precisions together with their weights: a move of t along d multiplies
    every weight of slot s by exp(t d_s) and its precision by exp(-2 t d_s),
    which leaves each weight's prior z-score sqrt(precision) w unchanged (the
    non-centred parameterisation, Yu & Meng 2011's interweaving). One
    direction per free slot; per hidden layer, one that scales its incoming
    weights and biases up together (the units' boundaries stay where they are,
    so a saturated layer's function hardly changes: alone, neither slot can
    travel the long tail of small precisions that the data leave there), and
    one that also scales its outgoing weights down: a move that leaves a
    network in tanh's linear range computing nearly the same function, along
    which the data hardly hold the two scales apart. A group with ARD over
    more than :data:`MAX_SLOT_DIRECTIONS` inputs gets one direction for all
    its inputs together instead of one each (each direction costs a few
    forward passes). Fixed slots never move."""
    S = prior.slot_shape.size
    free = np.isfinite(prior.slot_shape)
    slots = {g.name: np.unique(prior.param_slot[g.slice]) for g in spec.groups}
    rows = []
    for g in spec.groups:
        own = slots[g.name][free[slots[g.name]]]
        if own.size > MAX_SLOT_DIRECTIONS:             # ARD on many inputs: one direction for the group
            rows.append(np.isin(np.arange(S), own).astype(np.float64))
        else:
            rows.extend(np.eye(S)[s] for s in own)
    n_layers = len(spec.hidden)
    for layer in range(1, n_layers + 1):
        d = np.zeros(S)
        for g in spec.groups:
            if g.layer == layer and g.kind in ("input_hidden", "hidden_hidden", "hidden_bias"):
                d[slots[g.name]] = 1.0
        d[~free] = 0.0
        if (d > 0).sum() > 1:                          # the layer's incoming weights and biases together
            rows.append(d.copy())
        for g in spec.groups:
            if (g.kind == "hidden_hidden" and g.layer == layer + 1) or (g.kind == "hidden_output"
                                                                        and layer == n_layers):
                d[slots[g.name]] = -1.0
        d[~free] = 0.0
        if (d > 0).any() and (d < 0).any():
            rows.append(d)
    return np.array(rows, dtype=np.float64).reshape(-1, S)


@njit(inline="always")
def log_precision_prior(prior, top, s, v):
    """Log density (up to a constant) of v = log tau_s under its Gamma prior,
    the Jacobian of the log included: (alpha/2) v - (alpha / (2 mu)) e^v."""
    a = prior.slot_shape[s]
    mu = top[prior.slot_top[s]] if prior.slot_top[s] >= 0 else prior.slot_mean[s]
    return 0.5 * a * v - 0.5 * a / mu * math.exp(v)


def initial_hyper(prior: Prior, value: float | None = None) -> Hyper:
    """Hyperparameters at their prior means, or (``value`` given) every free
    precision set to ``value`` (Rasmussen's initial phase uses 1). Fixed slots
    keep their fixed value."""
    tau = prior.slot_mean.copy()
    top = prior.top_mean.copy()
    noise = prior.noise_mean.copy()
    if value is not None:
        tau[np.isfinite(prior.slot_shape)] = value
        top[:] = value
        noise[np.isfinite(prior.noise_shape)] = value
    return Hyper(tau, top, noise, precisions(prior, tau, np.empty(prior.param_slot.size)))


@njit
def precisions(prior, tau, out):
    """Prior precision of every weight: out[k] = tau[slot[k]] * scale[k]."""
    for k in range(out.size):
        out[k] = tau[prior.param_slot[k]] * prior.param_scale[k]
    return out


@njit(inline="always")
def _log_density_log_mu(u, c_lin, c_neg, c_pos):
    return c_lin * u - c_neg * math.exp(-u) - c_pos * math.exp(u)


@njit(inner=True)
def slice_log_mu(u0, c_lin, c_neg, c_pos, rng):
    """One univariate slice-sampling update (Neal 2003: stepping out, width 1,
    then shrinkage) of u = log mu for the density
    exp(c_lin u - c_neg e^-u - c_pos e^u), which is log-concave in u."""
    y = _log_density_log_mu(u0, c_lin, c_neg, c_pos) + math.log1p(-rng.random())
    left = u0 - rng.random()
    right = left + 1.0
    for _ in range(100):
        if _log_density_log_mu(left, c_lin, c_neg, c_pos) <= y:
            break
        left -= 1.0
    for _ in range(100):
        if _log_density_log_mu(right, c_lin, c_neg, c_pos) <= y:
            break
        right += 1.0
    while True:
        u1 = left + rng.random() * (right - left)
        if _log_density_log_mu(u1, c_lin, c_neg, c_pos) > y:
            return u1
        if u1 < u0:
            left = u1
        else:
            right = u1


@njit(inner=True)
def gibbs_hyper(q, hyper, prior, arch, out, YT, rng):
    """Gibbs updates of all free hyperparameters given the weights ``q``, in
    place on ``hyper`` (whose ``prec`` is refreshed at the end); ``out`` holds
    the network's outputs at q on the training cases (n_out, N or more; read
    for the noise precisions of a Gaussian likelihood only).

    Slot precision (n weights, sum of scaled squares SS) - conjugate:
        tau | q ~ Gamma(shape alpha/2 + n/2, rate alpha/(2 mu) + SS/2).
    ARD mean mu over tau_1..tau_I (shape alpha_1), prior Gamma(mean mu_0, shape alpha_0):
        p(mu | tau) ~ mu^(alpha_0/2 - I alpha_1/2 - 1)
                      exp(-(alpha_1 sum tau_i / 2) / mu - mu alpha_0 / (2 mu_0)),
    a generalised inverse Gaussian, not conjugate. Rasmussen's rejection sampler
    needs I alpha_1 > alpha_0 (false for 2 inputs with alpha_1 = 0.5, alpha_0 = 1),
    so it is updated here by slice sampling log mu (:func:`slice_log_mu`), which
    works for any I.
    Noise precision (Gaussian likelihood), N cases, residual sum of squares RSS:
        tau_noise | q ~ Gamma(shape alpha/2 + N/2, rate alpha/(2 mu) + RSS/2).
    """
    tau, top, noise = hyper.tau, hyper.top, hyper.noise
    S = tau.size
    ss = np.zeros(S)
    cnt = np.zeros(S)
    for k in range(q.size):
        s = prior.param_slot[k]
        ss[s] += prior.param_scale[k] * q[k] * q[k]
        cnt[s] += 1.0
    for t in range(top.size):
        a1 = 0.0
        n = 0.0
        sum_tau = 0.0
        for s in range(S):
            if prior.slot_top[s] == t:
                a1 = prior.slot_shape[s]
                n += 1.0
                sum_tau += tau[s]
        a0 = prior.top_shape[t]
        c_lin = 0.5 * a0 - 0.5 * n * a1
        c_neg = 0.5 * a1 * sum_tau
        c_pos = 0.5 * a0 / prior.top_mean[t]
        top[t] = math.exp(slice_log_mu(math.log(top[t]), c_lin, c_neg, c_pos, rng))
    for s in range(S):
        a = prior.slot_shape[s]
        if not math.isfinite(a):
            continue
        mu = top[prior.slot_top[s]] if prior.slot_top[s] >= 0 else prior.slot_mean[s]
        tau[s] = rng.gamma(0.5 * a + 0.5 * cnt[s], 1.0 / (0.5 * a / mu + 0.5 * ss[s]))
    if arch[LIKELIHOOD] == GAUSSIAN:
        N = YT.shape[1]  # the outputs may run over zero padding cases
        for o in range(noise.size):
            a = prior.noise_shape[o]
            if not math.isfinite(a):
                continue
            rss = 0.0
            for n in range(N):
                r = out[o, n] - YT[o, n]
                rss += r * r
            noise[o] = rng.gamma(0.5 * a + 0.5 * N, 1.0 / (0.5 * a / prior.noise_mean[o] + 0.5 * rss))
    precisions(prior, tau, hyper.prec)
