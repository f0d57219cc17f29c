"""Predictions of sampled networks: accumulation while the chains run, pooling
into the Bayesian model average, metrics, labels and class probabilities (one
place each: rewards, replicas, estimators, reports and plots use these).

Flow position: **models** (predictive side) -> samplers' observers, rewards, reports.
Orientation: accumulators hold outputs as (n_out, N); functions on outputs of
several samples take (..., n_out, N) where said, otherwise (..., N, n_out).
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
from numba import types
from numba.extending import overload
from scipy.special import expit
from scipy.stats import norm

from ..jit import njit
from .mlp import MLPSpec, pad_cases, softmax_norm


class Accumulator(NamedTuple):
    """Predictions of the samples on the inputs XT (n_in, N padded) with targets YT (n_t, N).
    pred/sq: sums of the outputs (regression) or class probabilities
    (classification) and of their squares, (n_out, N); var: sum of the noise
    variances (n_out,); lse: log sum over samples of p(y_n | sample), (N,);
    count: [number of samples]."""

    XT: np.ndarray
    YT: np.ndarray
    work: np.ndarray
    pred: np.ndarray
    sq: np.ndarray
    var: np.ndarray
    lse: np.ndarray
    count: np.ndarray


def new_accumulator(spec: MLPSpec, X, Y, arithmetic: str = "float64") -> Accumulator:
    """An empty accumulator for the cases X (N, n_in) with targets Y (N, n_t), the network's hidden units in
    ``arithmetic`` (that of the chain's own network, so that its predictions run the code of its Gibbs
    update's forward pass, compiled once; the sums in float64 either way)."""
    N = X.shape[0]
    n_out = spec.n_outputs
    XT = pad_cases(X.T).astype(arithmetic)
    return Accumulator(XT, spec.target_rows(Y), spec.workspace(XT.shape[1], arithmetic),
                       np.zeros((n_out, N)), np.zeros((n_out, N)), np.zeros(n_out),
                       np.full(N, -np.inf), np.zeros(1))


@functools.cache
def no_cases() -> Accumulator:
    """The accumulator of no cases, which the chain loop skips and so never writes (one, shared): the
    predictions of a chain that predicts nothing (a user density's). Its arrays have the types of every
    accumulator, so one compiled loop serves."""
    return new_accumulator(MLPSpec(1, (1,), 1), np.empty((0, 1)), np.empty((0, 1)))


def reset(acc: Accumulator) -> None:
    for a in (acc.pred, acc.sq, acc.var, acc.count):
        a[:] = 0.0
    acc.lse[:] = -np.inf


def snapshot(acc: Accumulator) -> Accumulator:
    """A copy of the sums (inputs and targets shared)."""
    return acc._replace(pred=acc.pred.copy(), sq=acc.sq.copy(), var=acc.var.copy(), lse=acc.lse.copy(),
                        count=acc.count.copy())


@njit(inline="always")
def add_output(acc, out, o, n):
    """Add output o of case n of one sample to the sums of ``acc``; returns the residual y - f."""
    f = out[o, n]
    acc.pred[o, n] += f
    acc.sq[o, n] += f * f
    return acc.YT[o, n] - f


@njit(inline="always")
def logaddexp(a, b):
    """log(exp(a) + exp(b)), with one exp and one log1p (it runs once per case
    of every sample's predictions)."""
    m = max(a, b)
    if m == -math.inf:
        return m
    return m + math.log1p(math.exp(min(a, b) - m))


@njit(inline="always")
def _log_sigmoid(f):
    return -math.log1p(math.exp(-f)) if f >= 0 else f - math.log1p(math.exp(f))


@njit(inner=True)
def accumulate(acc, out, noise):
    """Add the predictions of one sample (network outputs ``out``, (n_out, N))
    to ``acc``: Gaussian means and noise variances, or class probabilities;
    and log p(y | sample) of each target case. The targets' type chooses the
    likelihood's code, as the energy's (:func:`_add_sample`)."""
    acc.count[0] += 1.0
    _add_sample(acc, out, noise)


def _add_sample(acc, out, noise):
    """:func:`accumulate`'s sums by the targets' type (:data:`~adaptive_hmc.models.mlp.TARGET_TYPES`; class
    indices: one output logistic, several softmax), so that a network compiles its own likelihood alone."""


@overload(_add_sample)
def _add_sample_impl(acc, out, noise):
    dtype = acc.types[acc.fields.index("YT")].dtype
    if isinstance(dtype, types.Float):
        return lambda acc, out, noise: _add_gaussian(acc, out, noise)

    def classes(acc, out, noise):
        if acc.pred.shape[0] == 1:
            _add_logistic(acc, out)
        else:
            _add_softmax(acc, out)
    return classes


@njit(inline="always")
def _add_gaussian(acc, out, noise):
    n_out, N = acc.pred.shape
    log_norm = np.empty(n_out)       # per output, not per case: a log per case cost more than the rest
    for o in range(n_out):
        log_norm[o] = 0.5 * math.log(noise[o] / (2.0 * math.pi))
    for n in range(N):
        lp = 0.0
        for o in range(n_out):
            r = add_output(acc, out, o, n)
            lp += log_norm[o] - 0.5 * noise[o] * r * r
        acc.lse[n] = logaddexp(acc.lse[n], lp)
    for o in range(n_out):
        acc.var[o] += 1.0 / noise[o]


@njit(inline="always")
def _add_logistic(acc, out):
    for n in range(acc.pred.shape[1]):
        f = out[0, n]
        pr = 1.0 / (1.0 + math.exp(-f))
        acc.pred[0, n] += pr
        acc.sq[0, n] += pr * pr
        acc.lse[n] = logaddexp(acc.lse[n], _log_sigmoid(f) if acc.YT[0, n] > 0 else _log_sigmoid(-f))


@njit(inline="always")
def _add_softmax(acc, out):
    n_out, N = acc.pred.shape
    for n in range(N):
        m, s = softmax_norm(out, n)
        for o in range(n_out):
            pr = math.exp(out[o, n] - m) / s
            acc.pred[o, n] += pr
            acc.sq[o, n] += pr * pr
        acc.lse[n] = logaddexp(acc.lse[n], out[acc.YT[0, n], n] - m - math.log(s))


# -- labels, errors, probabilities ------------------------------------------------------

def predicted_labels(mean_outputs) -> np.ndarray:
    """Labels from averaged class probabilities (..., n_out, N): P(class 1) > 1/2
    for a logistic output (n_out = 1), the most probable class otherwise."""
    m = np.asarray(mean_outputs)
    if m.shape[-2] == 1:
        return (m[..., 0, :] > 0.5).astype(int)
    return m.argmax(axis=-2)


def squared_errors(mean, Y) -> np.ndarray:
    """Squared error of each case summed over outputs (Neal 1992's test error),
    for means and targets (..., N, n_out)."""
    return np.sum((np.asarray(mean) - Y) ** 2, axis=-1)


def class_probabilities(F, likelihood: str) -> np.ndarray:
    """Class probabilities (..., N, K) of network outputs (logits) F (..., N, n_out)."""
    if likelihood == "logistic":                 # the logistic function of each sign: no overflow, no 1 - p
        return np.stack([expit(-F[..., 0]), expit(F[..., 0])], axis=-1)
    E = np.exp(F - F.max(axis=-1, keepdims=True))
    return E / E.sum(axis=-1, keepdims=True)


def pointwise_log_likelihood(F, noise, Y, likelihood: str) -> np.ndarray:
    """log p(y_n | sample) (S, N) of targets Y (N, n_targets) under network
    outputs F (S, N, n_out) and noise precisions (S, n_out) (regression, the
    outputs summed per case) or logits (classification: Y holds labels)."""
    if likelihood == "gaussian":
        tau = noise[:, None, :]
        return np.sum(0.5 * np.log(tau / (2 * np.pi)) - 0.5 * tau * (Y[None] - F) ** 2, axis=2)
    label = Y[:, 0].astype(int)
    if likelihood == "logistic":
        f = np.where(label == 1, F[..., 0], -F[..., 0])
        return -np.logaddexp(0.0, -f)
    m = F.max(axis=-1, keepdims=True)
    log_norm = (m + np.log(np.exp(F - m).sum(axis=-1, keepdims=True)))[..., 0]
    return F[:, np.arange(len(label)), label] - log_norm


def predictive_moments(F, noise, weights=None) -> tuple:
    """Predictive mean and variance (noise included) of Gaussian-noise networks
    with outputs F (S, N, n_out) and noise precisions (S, n_out), the samples
    weighted by ``weights`` (S,) (default: equally)."""
    mean = np.average(F, axis=0, weights=weights)
    return mean, np.average((F - mean) ** 2, axis=0, weights=weights) + np.average(1.0 / noise, axis=0,
                                                                                    weights=weights)


def predictive_probabilities(F, likelihood: str, weights=None) -> np.ndarray:
    """Class probabilities (N, K) of networks with outputs F (S, N, n_out),
    averaged over the samples weighted by ``weights`` (S,) (default: equally).
    Each row is a distribution to the last bit: the weighted average can round
    a probability of 1 to 1 + 2^-52 (which scikit-learn's metrics refuse), so
    the averages are clipped to [0, 1] and divided by their sum."""
    P = np.clip(np.average(class_probabilities(F, likelihood), axis=0, weights=weights), 0.0, 1.0)
    return P / P.sum(axis=-1, keepdims=True)


# -- the model average --------------------------------------------------------------------

class Prediction(NamedTuple):
    """Model-average predictions on N cases. Regression: mean and variance
    (including the noise) per output, central interval of the Gaussian with that
    mean and variance. Classification: class probabilities (N, K), the pooled
    label and the majority vote of the replicas' own averages (ties go to the
    pooled label). lpd: log predictive density of each target (N,)."""

    mean: np.ndarray
    var: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    probs: np.ndarray | None
    label: np.ndarray | None
    vote: np.ndarray | None
    lpd: np.ndarray
    n_samples: int

    @property
    def sd(self) -> np.ndarray:
        return np.sqrt(self.var)


def pool_predictions(likelihood: str, pred, sq, var, lse, count, level: float = 0.95) -> Prediction:
    """Pool per-chain sums (R, n_out, N) into one :class:`Prediction`; chains
    without samples are left out."""
    count = np.asarray(count, float)
    n = count.sum()
    if n == 0:
        raise ValueError("no retained samples yet (burn-in longer than the run so far?)")
    used = count > 0
    mean = pred.sum(0) / n
    lpd = np.logaddexp.reduce(lse[used], axis=0) - math.log(n)
    if likelihood == "gaussian":
        v = np.maximum(sq.sum(0) / n - mean ** 2, 0.0) + (var.sum(0) / n)[:, None]
        z = norm.ppf(0.5 + level / 2)
        return Prediction(mean.T, v.T, (mean - z * np.sqrt(v)).T, (mean + z * np.sqrt(v)).T,
                          None, None, None, lpd, int(n))
    probs = mean.T if likelihood == "softmax" else np.column_stack([1 - mean[0], mean[0]])
    own_labels = predicted_labels(pred[used] / count[used][:, None, None])      # (R, N)
    label = predicted_labels(mean)
    K = probs.shape[1]
    votes = np.stack([(own_labels == c).sum(0) for c in range(K)], axis=1)
    vote = votes.argmax(axis=1)
    tie = (votes == votes.max(axis=1, keepdims=True)).sum(axis=1) > 1
    vote[tie] = label[tie]
    pv = probs * (1 - probs)
    return Prediction(probs, pv, probs, probs, probs, label, vote, lpd, int(n))


def to_original_units(pr: Prediction, mean, sd) -> Prediction:
    """A regression :class:`Prediction` made on targets standardised as
    (y - mean) / sd (per output), in the targets' original units: the log
    density drops by sum(log sd). Classification predictions pass unchanged."""
    if pr.probs is not None or (np.all(mean == 0) and np.all(sd == 1)):
        return pr
    return pr._replace(mean=mean + sd * pr.mean, var=sd ** 2 * pr.var, lower=mean + sd * pr.lower,
                       upper=mean + sd * pr.upper, lpd=pr.lpd - float(np.sum(np.log(sd))))


def standard_error(e) -> float:
    """Standard error of the mean of ``e`` over its cases (NaN for one case)."""
    return float(np.std(e, ddof=1) / math.sqrt(e.size)) if e.size > 1 else math.nan


def test_metrics(pr: Prediction, Y, likelihood: str) -> dict:
    """Mean squared error (summed over outputs, averaged over cases, Neal 1992)
    with its standard error, mean log predictive density, and for
    classification the error rates of the pooled label and of the vote."""
    out = {"mlpd": float(pr.lpd.mean()), "n_samples": pr.n_samples}
    if likelihood == "gaussian":
        se = squared_errors(pr.mean, Y)
        out.update(mse=float(se.mean()), mse_se=standard_error(se))
    else:
        y = Y[:, 0].astype(int)
        wrong = pr.label != y
        out.update(error_rate=float(wrong.mean()), error_rate_se=standard_error(wrong),
                   vote_error_rate=float((pr.vote != y).mean()))
    return out
