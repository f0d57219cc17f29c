"""Comparison tables and ArviZ export of finished runs.

Flow position: results -> **reports**. Reads runs through
:func:`~adaptive_hmc.results.read_run` only; never samples.
"""
from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import norm

from .models.mlp import predict
from .models.predictive import class_probabilities, predicted_labels, squared_errors
from .results import Run, RunError, read_run


def _arviz():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz
    return arviz


def retained_draws(run: Run) -> np.ndarray:
    """Per-super-transition mean test predictions of each chain after burn-in,
    (chains, draws, outputs, cases)."""
    P, C = run.predictions["history_pred"], run.predictions["history_count"]      # (S, R, out, N), (S, R)
    keep = run.retained()
    return np.transpose(P[keep] / C[keep][:, :, None, None], (1, 0, 2, 3))


#: Fewest kept samples of a chain for a per-sample ESS (below it, super-transition means are used).
MIN_KEPT = 50


def compute_spaced(weights) -> np.ndarray:
    """Indices of draws of weights (S,), in order, each repeated so that the
    draws are spaced by equal weight: draw i appears once for every multiple of
    the smallest weight that the running sum of weights passes at it. Equal
    weights give every index once; with weights in leapfrog steps, the
    sequence has one draw per that many gradients, so that its ESS is that of
    the weighted average (the estimator the run reports)."""
    w = np.asarray(weights, dtype=np.float64)
    if w.size == 0:
        return np.zeros(0, dtype=np.int64)
    c = np.floor(np.cumsum(w) / w.min() + 1e-9).astype(np.int64)
    return np.repeat(np.arange(w.size), np.diff(c, prepend=0))


def chain_draws(run: Run) -> tuple:
    """(draws, kind): each chain's draws of the test predictions after burn-in,
    a list of (draws, cases x outputs) arrays. From the kept samples (every
    ``thin``-th retained sample, network outputs at the test inputs) when every
    chain kept at least :data:`MIN_KEPT`, spaced by their weights
    (:func:`compute_spaced`; ``run.weight_by``); otherwise one draw per
    retained super-transition, the mean prediction of its samples."""
    chain = run.samples["chain"]
    R = run.predictions["history_count"].shape[1]
    counts = np.bincount(chain, minlength=R) if chain.size else np.zeros(R, int)
    if counts.min() >= MIN_KEPT:
        out = []
        for r in range(R):
            mine = chain == r
            F = predict(run.spec, run.samples["weights"][mine], run.predictions["X_test"])     # (S, N, out)
            out.append(F[compute_spaced(run.samples["weight"][mine])])
        return out, "samples"
    d = retained_draws(run)                                                          # (R, S, out, N)
    return [np.swapaxes(x, 1, 2) for x in d], "super-transition means"


def draws_ess(az, y) -> np.ndarray:
    """ArviZ's bulk ESS of each variable of draws ``y`` (1, draws, variables);
    0 where the draws never change (ArviZ would report their number: a chain
    that rejects everything is not a perfect sampler)."""
    ess = np.nan_to_num(az.ess(az.convert_to_dataset(y))["x"].values, nan=0.0)
    return np.where(np.ptp(y[0], axis=0) > 0, ess, 0.0)


def test_ess(run: Run) -> dict:
    """ESS of the test predictions per test set and posterior: {name: {"full":
    (ess, ess per 1000 gradient evaluations), "replicas": (the same, median
    over the CV replicas), "draws": what the draws are}} (a posterior the run
    does not have is left out).

    Each chain has its own posterior (the CV replicas see (k-1)/k of the
    training cases), so the ESS is computed per chain from its draws
    (:func:`chain_draws`): the median over cases and outputs of ArviZ's bulk
    ESS (0 for a case whose draws never change: a chain stuck for the whole
    run). The gradient evaluations are that chain's over the whole run (burn-in
    included), the cost a user pays for it."""
    draws, kind = chain_draws(run)
    if min(len(x) for x in draws) < 4:
        return {}
    az = _arviz()
    k = run.config.replicas.k
    grads = np.sum([e["chain_steps"] for e in run.log], axis=0)
    out = {}
    for name, cases in run.test_sets():
        per_chain = []
        for r, x in enumerate(draws):
            y = x[:, cases].reshape(1, len(x), -1)
            ess = float(np.median(draws_ess(az, y)))
            per_chain.append((ess, 1000 * ess / grads[r]))
        out[name] = {"draws": kind}
        if len(draws) > k:
            out[name]["full"] = per_chain[k]
        if k:
            out[name]["replicas"] = tuple(float(np.median([c[i] for c in per_chain[:k]])) for i in (0, 1))
    return out


def model_average_errors(run: Run, chains: str) -> tuple:
    """({test set: error}, {test set: its standard error}) of the model average
    of the retained samples of ``chains`` ("all", "full", "replicas"): mean
    squared error for regression, error rate for classification."""
    rows = run.chain_indices(chains)
    n = run.predictions["history_count"][:, rows].sum()
    if n == 0:
        return {}, {}
    mean = run.predictions["history_pred"][:, rows].sum(axis=(0, 1)) / n         # (out, N)
    Y = run.predictions["Y_test"]
    err, se = {}, {}
    for name, cases in run.test_sets():
        if run.likelihood == "gaussian":
            e = squared_errors(mean[:, cases].T, Y[cases])
        else:
            e = (predicted_labels(mean[:, cases]) != Y[cases, 0]).astype(float)
        err[name], se[name] = float(e.mean()), float(e.std(ddof=1) / np.sqrt(e.size))
    return err, se


METRIC = {"test_mse": "MSE", "test_error_rate": "error rate"}


def compare(dirs, chains: str | None = None) -> list:
    """One row (dict) per run directory: test errors (the metric named), CV
    error, acceptance, the share of post-warm-up super-transitions with mean
    acceptance below 0.2, the super-transitions with a stuck chain,
    divergences, cost (sampling and compile time apart), and the ESS of the
    test predictions per posterior (:func:`test_ess`). Test errors are those of
    each run's summary (its ``replicas.predict_from``), or, with ``chains``, of
    those chains' samples."""
    rows = []
    for d in dirs:
        run = read_run(d)
        s = run.summary
        key = "test_mse" if "test_mse" in s else "test_error_rate"
        try:
            test, test_se = (s[key], s[key + "_se"]) if chains is None else model_average_errors(run, chains)
        except ValueError as e:
            raise RunError(f"{d}: {e}") from None
        rows.append({"run": str(d), "tuner": s["tuner"], "seed": s["seed"], "metric": METRIC[key],
                     "data": s["data"], "chains": chains or s["predict_from"],
                     "test": test, "test_se": test_se, "cv_error": s["cv_error"],
                     "acceptance": s["acceptance"], "divergences": s["divergences"],
                     "stuck": s["stuck_super_transitions"], "low_acceptance_share": s["low_acceptance_share"],
                     "leapfrog_steps": s["leapfrog_steps"], "wall_s": s["wall_s"],
                     "compile_s": s["compile_s"], "ess": test_ess(run)})
    return rows


def table(rows, markdown: bool = True) -> str:
    """The rows as tables, one per metric (regression and classification apart),
    a column per data set and test set."""
    out = []
    for metric in dict.fromkeys(r["metric"] for r in rows):
        out.append(_table([r for r in rows if r["metric"] == metric], metric, markdown))
    return "\n\n".join(out)


def _ess_cell(v) -> str:
    return "-" if v is None else f"{v[0]:.0f} ({v[1]:.3f})"


def _table(rows, metric: str, markdown: bool) -> str:
    sets = sorted({(r["data"], n) for r in rows for n in r["test"]})
    label = {(d, n): f"{d}/{n}" for d, n in sets}
    head = (["run", "tuner", "chains"] + [f"test {metric} {label[s]} ± se" for s in sets]
            + ["CV error", "acceptance", "acc < 0.2 share", "stuck", "divergences", "leapfrog steps",
               "sampling s", "compile s"]
            + [f"ESS (per 1000 grad) {label[s]}, {post}" for post in ("full-data chain", "median replica")
               for s in sets])
    body = []
    for r in rows:
        mine = [(r["data"], n) for n in r["test"]]
        cells = [r["run"], r["tuner"], r["chains"]]
        cells += [f"{r['test'][s[1]]:.5f} ± {r['test_se'][s[1]]:.5f}" if s in mine else "-" for s in sets]
        low = r["low_acceptance_share"]
        cells += ["-" if r["cv_error"] is None else f"{r['cv_error']:.5f}", f"{r['acceptance']:.3f}",
                  "-" if low is None else f"{low:.2f}", str(r["stuck"]),
                  str(r["divergences"]), f"{r['leapfrog_steps']:,}", f"{r['wall_s']:.1f}", f"{r['compile_s']:.1f}"]
        for post in ("full", "replicas"):
            cells += [_ess_cell(r["ess"].get(s[1], {}).get(post)) if s in mine else "-" for s in sets]
        body.append(cells)
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in body])
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in [head] + body)


def prediction_table(run: Run, X, chains: str | None = None, level: float = 0.95) -> tuple:
    """(column names, values (N, columns)) of the predictions of ``run`` at inputs
    X: for regression the predictive mean, sd (noise included) and central
    ``level`` interval of the Gaussian with that mean and sd, per output; for
    classification the class probabilities and the label."""
    if run.likelihood == "gaussian":
        mean, sd = run.predict(X, return_std=True, chains=chains)
        z = norm.ppf(0.5 + level / 2)
        outs = range(mean.shape[1])
        names = ([f"mean_{o}" for o in outs] + [f"sd_{o}" for o in outs] + [f"lower_{o}" for o in outs]
                 + [f"upper_{o}" for o in outs])
        return names, np.column_stack([mean, sd, mean - z * sd, mean + z * sd])
    P = run.predict_proba(X, chains=chains)
    return [f"p_{k}" for k in range(P.shape[1])] + ["label"], np.column_stack([P, P.argmax(axis=1)])


def export(d) -> Path:
    """``d/inference_data.nc``, ArviZ InferenceData of the run's kept samples
    (``run.thin`` > 0), chains = the run's chains (each cut to the shortest
    chain's number of kept samples, so the draws are rectangular):

    - posterior: ``weights`` (weight) and the log of every hyperparameter;
    - posterior_predictive: ``y_hat`` (case, output), the network's outputs
      (regression) or class probabilities (classification) at the test inputs;
    - log_likelihood: ``y`` (case), log p(y_case | sample) of the test cases, so
      that ``az.loo`` and ``az.waic`` work;
    - observed_data: ``y_test``, the test targets;
    - sample_stats: per draw, the super-transition, its step factor and L, the
      chain's acceptance, divergences (``diverging``: any) and mean potential
      energy in it, and the draw's ``sample_weight`` in the run's averages
      (``run.weight_by``: 1, or its iteration's leapfrog steps; ArviZ's
      summaries treat draws as equal, so with unequal weights they describe
      the kept draws, not the run's weighted average);
    - predictions: the per-super-transition mean test predictions of each chain
      after burn-in (what ``compare`` computes the ESS from).
    """
    run = read_run(d)
    az = _arviz()
    s, spec = run.samples, run.spec
    if not len(s["weights"]):
        raise RunError(f"{run.dir}: no kept samples to export (run.thin: 0 keeps none)")
    chains = [int(r) for r in np.unique(s["chain"])]
    n = min(int(np.sum(s["chain"] == r)) for r in chains)
    pick = np.concatenate([np.flatnonzero(s["chain"] == r)[:n] for r in chains])       # chain-major
    W, hyper, st = s["weights"][pick], s["hyper"][pick], s["super_transition"][pick]
    R = len(chains)
    X, Y = run.predictions["X_test"], run.predictions["Y_test"]
    F, noise = run.outputs(W, s["noise_precision"][pick], X)        # X_test is in the network's units
    if run.likelihood == "gaussian":
        tau = noise[:, None, :]
        y_hat = F
        loglik = np.sum(0.5 * np.log(tau / (2 * np.pi)) - 0.5 * tau * (Y[None] - F) ** 2, axis=2)
    else:
        y_hat = class_probabilities(F, run.likelihood)
        label = Y[:, 0].astype(int)
        loglik = np.log(np.maximum(y_hat[:, np.arange(len(label)), label], 1e-300))
    names = [re.sub(r"\W+", "_", str(v)).strip("_") for v in run.predictions["hyper_names"]]

    def shaped(a):
        return a.reshape(R, n, *a.shape[1:])

    log = {e["i"]: e for e in run.log}
    chain_of = np.repeat(chains, n)
    stat = {"super_transition": st, "sample_weight": s["weight"][pick],
            "step_factor": np.array([log[i]["step_factor"] for i in st]),
            "num_steps": np.array([log[i]["num_steps"] for i in st]),
            "acceptance": np.array([log[i]["acceptance"][c] for i, c in zip(st, chain_of)]),
            "divergences": np.array([log[i]["chain_divergences"][c] for i, c in zip(st, chain_of)]),
            "energy": np.array([log[i]["chain_energy"][c] for i, c in zip(st, chain_of)])}
    stat["diverging"] = stat["divergences"] > 0
    cases = [f"{name}[{i}]" for name, sl in run.test_sets() for i in range(sl.stop - sl.start)]
    draws = retained_draws(run)
    with warnings.catch_warnings():         # "more chains than draws" when a run is short
        warnings.simplefilter("ignore", UserWarning)
        idata = az.from_dict(
            posterior={"weights": shaped(W), **{f"log_{v}": shaped(np.log(hyper[:, i])) for i, v in enumerate(names)}},
            posterior_predictive={"y_hat": shaped(y_hat)}, log_likelihood={"y": shaped(loglik)},
            observed_data={"y_test": Y if run.likelihood == "gaussian" else Y[:, 0].astype(int)},
            sample_stats={k: shaped(v) for k, v in stat.items()},
            predictions={name: np.transpose(draws[:, :, :, sl], (0, 1, 3, 2)) for name, sl in run.test_sets()},
            coords={"chain": chains, "case": cases, "weight": [f"w{k}" for k in range(spec.n_params)]},
            dims={"weights": ["weight"], "y_hat": ["case", "class" if run.likelihood != "gaussian" else "output"],
                  "y": ["case"], "y_test": ["case"] + (["output"] if run.likelihood == "gaussian" else [])},
            attrs={"run": str(run.dir), "likelihood": run.likelihood,
                   "note": f"posterior: the kept samples (every run.thin-th retained one), {n} per chain; "
                           f"predictions: one draw per retained super-transition, the mean over its samples"})
    path = run.dir / "inference_data.nc"
    idata.to_netcdf(str(path))
    return path
