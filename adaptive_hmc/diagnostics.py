"""Monte Carlo error of chain averages.

Flow position: results -> **diagnostics**. Batch means (Flegal & Jones 2010):
the chain is cut into ``n_batches`` consecutive batches whose means are nearly
independent when batches are much longer than the autocorrelation time.
"""
import numpy as np


def batch_means_mcse(x, n_batches: int = 40) -> np.ndarray:
    """Monte Carlo standard error of the mean of ``x`` (n_samples, ...) along axis 0."""
    x = np.asarray(x, dtype=float)
    b = x.shape[0] // n_batches
    if b < 1:
        raise ValueError(f"{x.shape[0]} samples: need at least n_batches={n_batches}")
    means = x[: b * n_batches].reshape(n_batches, b, *x.shape[1:]).mean(axis=1)
    return means.std(axis=0, ddof=1) / np.sqrt(n_batches)


def effective_sample_size(x, n_batches: int = 40) -> np.ndarray:
    """ESS = var(x) / mcse^2 (batch means)."""
    x = np.asarray(x, dtype=float)
    return x.var(axis=0, ddof=1) / batch_means_mcse(x, n_batches) ** 2
