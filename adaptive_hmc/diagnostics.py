"""Monte Carlo error of chain averages, and the convergence diagnostics of a
run's chains.

Flow position: results -> **diagnostics**. Batch means (Flegal & Jones 2010):
the chain is cut into ``n_batches`` consecutive batches whose means are nearly
independent when batches are much longer than the autocorrelation time.
Across chains of one posterior: ArviZ's rank-normalised split R-hat and bulk
and tail ESS (Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021).
"""
import warnings

import numpy as np

#: R-hat above this says the chains have not met (Vehtari et al. 2021, section 4).
RHAT_LIMIT = 1.01


def batch_means_mcse(x, n_batches: int = 40) -> np.ndarray:
    """Monte Carlo standard error of the mean of ``x`` (n_samples, ...) along axis 0."""
    x = np.asarray(x, dtype=float)
    b = x.shape[0] // n_batches
    if b < 1:
        raise ValueError(f"{x.shape[0]} samples: need at least n_batches={n_batches}")
    means = x[: b * n_batches].reshape(n_batches, b, *x.shape[1:]).mean(axis=1)
    return means.std(axis=0, ddof=1) / np.sqrt(n_batches)


def compute_spaced(weights, max_draws: int | None = None) -> np.ndarray:
    """Indices of draws of weights (S,), in order, each repeated so that the
    draws are spaced by equal weight: draw i appears once for every multiple of
    a unit weight that the running sum of weights passes at it (systematic
    resampling). The unit is the smallest weight, or, when that would give
    more than ``max_draws`` draws, the total weight / ``max_draws`` (a draw
    lighter than the unit may then appear not at all). Equal weights give
    every index once; with weights in leapfrog steps, the sequence has one
    draw per that many gradients, so that its ESS is that of the weighted
    average (the estimator the run reports)."""
    w = np.asarray(weights, dtype=np.float64)
    if w.size == 0:
        return np.zeros(0, dtype=np.int64)
    unit = w.min() if max_draws is None else max(w.min(), w.sum() / max_draws)
    c = np.floor(np.cumsum(w) / unit + 1e-9).astype(np.int64)
    return np.repeat(np.arange(w.size), np.diff(c, prepend=0))


def arviz():
    """ArviZ, imported without its import-time warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz
    return arviz


def chain_statistics(y) -> dict:
    """Rank-normalised split R-hat and bulk and tail ESS of each variable of
    draws ``y`` (chains, draws, variables), ArviZ's. A variable whose draws
    never change in some chain gets ESS 0 and R-hat inf (ArviZ would count
    such a chain as perfect): a chain that rejects everything is a failure.
    One chain's R-hat is that of its two halves as two chains (ArviZ computes
    none for one chain; split, as ArviZ splits every chain, into quarters):
    whether the chain's parts agree."""
    az = arviz()
    y = np.asarray(y, dtype=np.float64)
    halves = y[:, : y.shape[1] // 2 * 2].reshape(2, y.shape[1] // 2, -1) if y.shape[0] == 1 else y
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # "more chains than draws", constant draws
        ds = az.convert_to_dataset(y)
        out = {"rhat": az.rhat(az.convert_to_dataset(halves), method="rank")["x"].values,
               "ess_bulk": az.ess(ds, method="bulk")["x"].values,
               "ess_tail": az.ess(ds, method="tail")["x"].values}
    out = {k: np.nan_to_num(np.atleast_1d(v), nan=np.inf if k == "rhat" else 0.0) for k, v in out.items()}
    stuck = np.any(np.ptp(y, axis=1) == 0, axis=0)
    out["rhat"] = np.where(stuck, np.inf, out["rhat"])
    for k in ("ess_bulk", "ess_tail"):
        out[k] = np.where(stuck, 0.0, out[k])
    return out


def draws_ess(y) -> np.ndarray:
    """Bulk ESS of each variable of draws ``y`` (chains, draws, variables);
    0 where the draws never change."""
    return chain_statistics(y)["ess_bulk"]


def diagnose(y, gradients: float, seconds: float) -> dict:
    """What the run's user needs of draws ``y`` (chains, draws, variables) of
    the quantities they care about: the largest R-hat, the smallest and the
    median over variables of the bulk and tail ESS, and of the bulk ESS per
    1000 ``gradients`` (every gradient the run computed) and per ``seconds``
    (of sampling)."""
    st = chain_statistics(y)
    bulk, tail = st["ess_bulk"], st["ess_tail"]
    rhat = float(np.max(st["rhat"]))

    def both(v):
        return {"min": float(np.min(v)), "median": float(np.median(v))}
    return {"chains": int(y.shape[0]), "draws_per_chain": int(y.shape[1]), "variables": int(y.shape[2]),
            "rhat_max": rhat if np.isfinite(rhat) else None,
            "ess_bulk": both(bulk), "ess_tail": both(tail),
            "ess_per_1000_gradients": both(1000 * bulk / gradients) if gradients > 0 else None,
            "ess_per_second": both(bulk / seconds) if seconds > 0 else None}
