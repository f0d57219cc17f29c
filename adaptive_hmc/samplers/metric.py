"""A metric learned from the chains: a factor per weight of FBM's heuristic step
scales, from the draws' and the gradients' variances in warm-up windows
(nutpie's estimate, Seyboldt 2024; Stan's expanding windows).

Flow position: samplers (plain NumPy; the compiled iteration only sums the
moments, :class:`~adaptive_hmc.samplers.chain.Observers`). The network's chain set
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

"low_rank" adds to those factors, per chain, a few directions in which the
chain's draws spread more or less than the diagonal says (nutpie's low-rank
estimate, Seyboldt 2024: in the diagonal's coordinates, the covariance S
that solves S Cov(grad) S = Cov(draws) in the span of the draws and the
gradients; its eigenvalues outside [1 / LOW_RANK_CUTOFF, LOW_RANK_CUTOFF]
and their eigenvectors, :func:`low_rank_metric`), which the leapfrog
applies as masses (:func:`~adaptive_hmc.samplers.leapfrog.leapfrog_metric`).
It learns in the same windows and in :data:`LOW_RANK_WINDOWS` after them,
from at most :data:`TRACE_ROWS` iterations a chain a window.
"""
from __future__ import annotations

import numpy as np

#: Kinds of step scale of a network's chains (``metric``): "heuristic", FBM's scales (Neal 1995) times
#: the step factor, the papers' way; "learned", those scales each times a factor learned from the chains;
#: "low_rank", those factors and each chain's low-rank masses.
METRICS = ("heuristic", "learned", "low_rank")

#: The learned metric's windows, in super-transitions counted from 0: the moments of super-transitions
#: start..end-1 make the factors used from super-transition end on (the first, 0, is a fast start: the
#: chains leave their starts; the last factors are kept for the rest of the run).
WINDOWS = ((1, 4), (4, 8), (8, 16), (16, 32))

#: The low-rank metric's windows after :data:`WINDOWS` (its diagonal factors are learned in them too).
LOW_RANK_WINDOWS = WINDOWS + ((32, 64), (64, 128))

#: The most iterations a chain's window keeps for the low rank (evenly spaced over its super-transitions),
#: the most directions a chain's metric holds, and the eigenvalue cutoff: directions whose variance
#: relative to the diagonal's lies within [1 / cutoff, cutoff] keep unit masses (nutpie's default cutoff is 100).
TRACE_ROWS, LOW_RANK_MOST, LOW_RANK_CUTOFF = 384, 16, 2.0

#: Each learned factor lies within [1 / FACTOR_LIMIT, FACTOR_LIMIT] times the heuristic scale.
FACTOR_LIMIT = 100.0


def window_of(n_super: int, metric: str = "learned"):
    """The window (start, end) whose moments super-transition ``n_super`` sums under ``metric``, or None."""
    for w in (LOW_RANK_WINDOWS if metric == "low_rank" else WINDOWS):
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


def trace_rows(window) -> int:
    """The iterations a chain keeps of each super-transition of ``window`` for the low rank."""
    return max(1, TRACE_ROWS // (window[1] - window[0]))


def _spd_mean(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The S with S b S = a, for symmetric positive definite a and b: b^(-1/2) (b^(1/2) a b^(1/2))^(1/2) b^(-1/2)."""
    w, v = np.linalg.eigh(b)
    half, inv_half = (v * np.sqrt(w)) @ v.T, (v / np.sqrt(w)) @ v.T
    m, u = np.linalg.eigh(half @ a @ half)
    return inv_half @ ((u * np.sqrt(np.maximum(m, 0.0))) @ u.T) @ inv_half


def low_rank_metric(draws: np.ndarray, grads: np.ndarray, scales: np.ndarray, cutoff: float | None = None,
                    most: int = LOW_RANK_MOST, gamma: float = 1e-5) -> np.ndarray:
    """One chain's low-rank metric, rows [lambda_j, u_j] (r, D + 1), from its ``draws`` and ``grads``
    (dU/dq) (n, D) and the diagonal ``scales`` (D,) its steps are proportional to. In the coordinates
    z = q / scales (gradients times scales), centred, and divided (multiplied) by the square root of
    c = the geometric mean over k of sd(z_k) / sd(dU/dz_k), the diagonal's common size, so that a
    direction the diagonal gets right has variance 1: the basis Q of the draws' and the gradients' span,
    the covariances Cx, Cg there (plus ``gamma`` I), S solving S Cg S = Cx (nutpie's Fisher-divergence
    estimate), and S's eigenvalues outside [1 / ``cutoff``, ``cutoff``] (default :data:`LOW_RANK_CUTOFF`,
    read at the call) with their eigenvectors (as Q's
    combinations, orthonormal), the ``most`` farthest from 1 in log. No rows when fewer than 3 draws or
    nothing is finite."""
    X, G = np.asarray(draws, dtype=np.float64), np.asarray(grads, dtype=np.float64)
    n, D = X.shape
    none = np.empty((0, D + 1))
    if n < 3 or not (np.all(np.isfinite(X)) and np.all(np.isfinite(G))):
        return none
    X = (X - X.mean(axis=0)) / scales
    G = (G - G.mean(axis=0)) * scales
    sx, sg = X.std(axis=0), G.std(axis=0)
    ok = (sx > 0) & (sg > 0)
    if not ok.any():
        return none
    c = np.sqrt(np.exp(np.mean(np.log(sx[ok]) - np.log(sg[ok]))))
    X, G = X / c, G * c
    Q = np.linalg.qr(np.concatenate([np.linalg.svd(X.T, full_matrices=False)[0],
                                     np.linalg.svd(G.T, full_matrices=False)[0]], axis=1))[0]
    px, pg = X @ Q, G @ Q
    eye = gamma * np.eye(Q.shape[1])
    vals, vecs = np.linalg.eigh(_spd_mean(px.T @ px / n + eye, pg.T @ pg / n + eye))
    far = np.abs(np.log(vals))
    keep = np.argsort(-far)[:most]
    keep = keep[far[keep] > np.log(LOW_RANK_CUTOFF if cutoff is None else cutoff)]
    if keep.size == 0:
        return none
    u = (Q @ vecs[:, keep]).T
    u /= np.sqrt((u ** 2).sum(axis=1, keepdims=True))
    return np.column_stack([vals[keep], u])


def low_rank_metrics(trace: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Every chain's :func:`low_rank_metric` from its ``trace`` (R, n, 2, D) of draws and gradients and its
    ``scales`` (R, D), padded with rows [1, 0...] (no change) to one array (R, r, D + 1)."""
    each = [low_rank_metric(t[:, 0], t[:, 1], s) for t, s in zip(trace, scales)]
    r = max(m.shape[0] for m in each)
    out = np.zeros((len(each), r, trace.shape[3] + 1))
    out[:, :, 0] = 1.0
    for j, m in enumerate(each):
        out[j, :m.shape[0]] = m
    return out
