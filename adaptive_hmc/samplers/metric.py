"""A metric learned from the chains: a factor per weight of FBM's heuristic step
scales, from the draws' and the gradients' variances in warm-up windows
(nutpie's estimate, Seyboldt 2024; Stan's expanding windows).

Flow position: samplers (plain NumPy; the compiled iteration only sums the
moments, :class:`~adaptive_hmc.samplers.chain.Observers`). The replica set
sums each chain's moments over a window of super-transitions
(:data:`WINDOWS`) and, at its end, sets the step factors of every chain to
:func:`learned_factors`, frozen after the last window.

For a Gaussian posterior of sd sigma_k in weight k, the draws' variance is
sigma_k^2 and the gradients' 1 / sigma_k^2, so sqrt(sd(q_k) / sd(dU/dq_k))
estimates sigma_k from both (nutpie's diagonal estimate), robust where the
draws alone have not spread yet. FBM's heuristic s_k estimates the same
sigma_k from the priors and the inputs, assuming every tanh unit at slope 1
and every weight at its prior scale; the factor sigma_k / s_k corrects it
where the data say otherwise (saturated units, weights far from their prior
scale). The factor multiplies s_k(hyper), which still follows the
hyperparameters' Gibbs updates, so the correction holds while they move; the
factors' geometric mean is 1, so that the tuner's step factor keeps its
scale.
"""
from __future__ import annotations

import numpy as np

#: Kinds of step scale of a network's chains (``metric``): "heuristic", FBM's scales (Neal 1995) times
#: the step factor, the papers' way; "learned", those scales each times a factor learned from the chains.
METRICS = ("heuristic", "learned")

#: The learned metric's windows, in super-transitions counted from 0: the moments of super-transitions
#: start..end-1 make the factors used from super-transition end on (the first, 0, is a fast start: the
#: chains leave their starts; the last factors are kept for the rest of the run).
WINDOWS = ((1, 4), (4, 8), (8, 16), (16, 32))

#: Each learned factor lies within [1 / FACTOR_LIMIT, FACTOR_LIMIT] times the heuristic scale.
FACTOR_LIMIT = 100.0


def window_of(n_super: int):
    """The window (start, end) whose moments super-transition ``n_super`` sums, or None."""
    for w in WINDOWS:
        if w[0] <= n_super < w[1]:
            return w
    return None


def learned_factors(moments: np.ndarray, count: int, heuristic: np.ndarray) -> np.ndarray:
    """The factors (D,) of the heuristic scales from the chains' summed
    ``moments`` (R, 4, D): each chain's sums of q, q^2, dU/dq and (dU/dq)^2
    over ``count`` iterations, and the chains' ``heuristic`` scales (R, D) at
    the window's end. The draws' and the gradients' within-chain variances,
    pooled over chains, give sigma_k = (var(q_k) / var(g_k))^(1/4); each
    factor sigma_k / s_k (s_k the geometric mean of the chains' heuristic
    scales) is shrunk toward 1 in log space by n / (n + 5) (n the pooled
    iterations, as Stan regularises its estimate), limited to
    :data:`FACTOR_LIMIT`, and the factors are divided by their geometric
    mean. Where a variance is 0 or not finite, the factor is 1."""
    m = np.asarray(moments, dtype=np.float64)
    R, n = m.shape[0], int(count)
    if n < 2:
        return np.ones(m.shape[2])
    mean_q, mean_g = m[:, 0] / n, m[:, 2] / n
    var_q = ((m[:, 1] - n * mean_q ** 2) / (n - 1)).mean(axis=0)
    var_g = ((m[:, 3] - n * mean_g ** 2) / (n - 1)).mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_f = 0.25 * (np.log(var_q) - np.log(var_g)) - np.log(heuristic).mean(axis=0)
    log_f = np.where(np.isfinite(log_f), log_f, 0.0) * (R * n / (R * n + 5.0))
    log_f = np.clip(log_f, -np.log(FACTOR_LIMIT), np.log(FACTOR_LIMIT))
    return np.exp(log_f - log_f.mean())
