"""Rewards of a super-transition (higher is better).

Flow position: super-transition -> **reward** -> tuner. A reward is a function
of a :class:`~adaptive_hmc.engine.super_transition.SuperTransitionResult` only, so it sees
nothing but the samples of that super-transition.
"""
from __future__ import annotations

import math

import numpy as np

from ..models.predictive import predicted_labels, squared_errors

CV_METRICS = ("mse", "error_rate", "log_loss")


def held_out_error(acc, likelihood: str, metric: str) -> float:
    """Error on one held-out fold of the model average of the samples in ``acc``
    (an :class:`~adaptive_hmc.models.predictive.Accumulator`): mean squared error summed
    over outputs and averaged over cases; error rate of the averaged class
    probabilities; or log loss, minus the mean log of the averaged predictive
    probability of each case's label."""
    n = acc.count[0]
    if n == 0:
        return math.inf
    if metric == "log_loss":
        return float(-(acc.lse - math.log(n)).mean())
    mean = acc.pred / n
    if metric == "mse":
        if likelihood != "gaussian":
            raise ValueError("metric 'mse' is for regression; use 'error_rate' or 'log_loss'")
        return float(squared_errors(mean.T, acc.YT.T).mean())
    if metric == "error_rate":
        if likelihood == "gaussian":
            raise ValueError("metric 'error_rate' is for classification; use 'mse' or 'log_loss'")
        return float(np.mean(predicted_labels(mean) != acc.YT[0]))
    raise ValueError(f"metric={metric!r}: allowed are {CV_METRICS}")


def cv_error(result, metric: str = None) -> float:
    """Mean over the CV replicas of their held-out errors (Wang thesis section
    3.2), this super-transition's samples only. Default metric: mse for
    regression, error_rate for classification."""
    held = result.held_out
    metric = metric or default_metric(held.likelihood)
    return float(np.mean([held_out_error(a, held.likelihood, metric) for a in held.accumulators]))


def default_metric(likelihood: str) -> str:
    return "mse" if likelihood == "gaussian" else "error_rate"


def cv_reward(result, metric: str = None) -> float:
    """Minus :func:`cv_error`."""
    return -cv_error(result, metric)


def esjd(accept_prob, squared_jump, num_steps: int) -> float:
    """Expected squared jumping distance per unit of trajectory cost (Wang,
    Mohamed & de Freitas 2013) of any sampler's super-transition: the sum over
    iterations of acceptance probability x ||q_proposal - q_current||^2,
    divided by sqrt(L), averaged over chains; ``accept_prob`` and
    ``squared_jump`` are (chains, iterations) (or (iterations,) for one chain)."""
    a, j = np.atleast_2d(accept_prob), np.atleast_2d(squared_jump)
    return float(np.mean(np.sum(a * j, axis=1)) / math.sqrt(num_steps))


def esjd_reward(result) -> float:
    """:func:`esjd` of a super-transition's result."""
    r = result.record
    return esjd(r.accept_prob, r.squared_jump, result.num_steps)


#: The lag of :func:`slowest_movement`'s jumps: this share of a super-transition's iterations (its budget of
#: leapfrog steps, whatever L), at least one iteration.
LAG_SHARE = 0.25


def slowest_movement(result) -> float:
    """How far the quantity that mixes slowest moved in a super-transition, per gradient: for each log
    hyperparameter that varies and for the potential energy (the data fit: the predictions' summary,
    recorded at every iteration), the mean over chains and iterations t of (x[t + m] - x[t])^2 / 2, m a
    :data:`LAG_SHARE` of the iterations, over the variance of x across all chains' iterations of the
    super-transition; the smallest of these, times the leapfrog steps over every gradient (a Gibbs update's
    and the interweaving moves' evaluations count). A ratio near 1 says the quantity forgets its start
    within a quarter of the budget; near 0, that it barely moved against its spread across the chains. It
    is what the verdict waits on (the log hyperparameters and the predictions), where ESJD/sqrt(L) rewards
    the weights' movement; 0 for a super-transition of fewer than 2 iterations."""
    rec = result.record
    R, n = rec.energy.shape
    if n < 2 or result.gradients <= 0:
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(rec.hyper)
    series = np.concatenate([logs, rec.energy[:, :, None]], axis=2)                    # (R, n, H + 1)
    series = series[:, :, np.all(np.isfinite(series), axis=(0, 1)) & (np.ptp(series, axis=(0, 1)) > 0)]
    if series.shape[2] == 0:
        return 0.0
    m = max(1, int(round(LAG_SHARE * n)))
    jumps = 0.5 * np.mean((series[:, m:] - series[:, :-m]) ** 2, axis=(0, 1))
    spread = series.reshape(R * n, -1).var(axis=0)
    return float(np.min(jumps / spread) * result.leapfrog_steps / result.gradients)
