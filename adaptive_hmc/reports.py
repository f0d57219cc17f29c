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

from .diagnostics import arviz
from .models.predictive import class_probabilities, predicted_labels, squared_errors
from .results import Run, RunError, read_run, run_diagnostics


def retained_draws(run: Run) -> np.ndarray:
    """Per-super-transition mean test predictions of each chain after burn-in,
    (chains, draws, outputs, cases)."""
    P, C = run.predictions["history_pred"], run.predictions["history_count"]      # (S, R, out, N), (S, R)
    keep = run.retained()
    return np.transpose(P[keep] / C[keep][:, :, None, None], (1, 0, 2, 3))


def diagnostics(run: Run) -> dict:
    """The run's multi-chain diagnostics (summary.json's ``diagnostics``:
    :func:`~adaptive_hmc.results.run_diagnostics`), computed from the run
    directory for a summary written without them."""
    if "diagnostics" in run.summary:
        return run.summary["diagnostics"]
    chains = run.config.replicas.predict_from
    return run_diagnostics(run.spec, run.samples, run.chain_indices(chains), chains, run.predictions,
                           dict(run.test_sets()), run.predictions["history_hyper"],
                           run.summary["leapfrog_steps"], run.summary["wall_s"])


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
    divergences, cost (sampling and compile time apart), and the multi-chain
    diagnostics of the predicting chains (:func:`diagnostics`: R-hat, ESS of
    the test predictions per 1000 of every gradient the run computed and per
    second of sampling, smallest and median over outputs). Test errors are those of
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
                     "compile_s": s["compile_s"], "diagnostics": diagnostics(run)})
    return rows


def table(rows, markdown: bool = True) -> str:
    """The rows as tables, one per metric (regression and classification apart),
    a column per data set and test set."""
    out = []
    for metric in dict.fromkeys(r["metric"] for r in rows):
        out.append(_table([r for r in rows if r["metric"] == metric], metric, markdown))
    return "\n\n".join(out)


def _ess_cells(d: dict, name: str) -> list:
    """R-hat max, and the smallest / median ESS per 1000 gradients and per second, of test set ``name``."""
    t = (d or {}).get("test", {}).get(name)
    if t is None:
        return ["-", "-", "-"]
    r = t["rhat_max"]
    g, sec = t["ess_per_1000_gradients"], t["ess_per_second"]
    return ["inf" if r is None else f"{r:.3f}", f"{g['min']:.3f} / {g['median']:.3f}",
            f"{sec['min']:.2f} / {sec['median']:.2f}"]


def _table(rows, metric: str, markdown: bool) -> str:
    sets = sorted({(r["data"], n) for r in rows for n in r["test"]})
    label = {(d, n): f"{d}/{n}" for d, n in sets}
    head = (["run", "tuner", "chains"] + [f"test {metric} {label[s]} ± se" for s in sets]
            + ["CV error", "acceptance", "acc < 0.2 share", "stuck", "divergences", "leapfrog steps",
               "sampling s", "compile s"]
            + [f"{what} {label[s]}" for s in sets for what in
               ("R-hat max", "ESS per 1000 grad (min / median)", "ESS per s (min / median)")])
    body = []
    for r in rows:
        mine = [(r["data"], n) for n in r["test"]]
        cells = [r["run"], r["tuner"], r["chains"]]
        cells += [f"{r['test'][s[1]]:.5f} ± {r['test_se'][s[1]]:.5f}" if s in mine else "-" for s in sets]
        low = r["low_acceptance_share"]
        cells += ["-" if r["cv_error"] is None else f"{r['cv_error']:.5f}", f"{r['acceptance']:.3f}",
                  "-" if low is None else f"{low:.2f}", str(r["stuck"]),
                  str(r["divergences"]), f"{r['leapfrog_steps']:,}", f"{r['wall_s']:.1f}", f"{r['compile_s']:.1f}"]
        for s in sets:
            cells += _ess_cells(r["diagnostics"], s[1]) if s in mine else ["-"] * 3
        body.append(cells)
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in body])
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in [head] + body)


def prediction_table(run: Run, X, chains: str | None = None, level: float = 0.95) -> tuple:
    """(column names, values (N, columns)) of the predictions of ``run`` at inputs
    X: for regression the predictive mean, sd (noise included) and central
    ``level`` interval of the Gaussian with that mean and sd, per output, named
    after the target (``price_mean``) when the training table had a header,
    else by position (``mean_0``); for classification the class probabilities
    and the label."""
    if run.likelihood == "gaussian":
        mean, sd = run.predict(X, return_std=True, chains=chains)
        z = norm.ppf(0.5 + level / 2)
        targets = run.input_map.target_names
        named = len(targets) == mean.shape[1]
        names = [f"{targets[o]}_{what}" if named else f"{what}_{o}"
                 for what in ("mean", "sd", "lower", "upper") for o in range(mean.shape[1])]
        return names, np.column_stack([mean, sd, mean - z * sd, mean + z * sd])
    P = run.predict_proba(X, chains=chains)
    return [f"p_{k}" for k in range(P.shape[1])] + ["label"], np.column_stack([P, P.argmax(axis=1)])


def export(d) -> Path:
    """``d/inference_data.nc``, ArviZ InferenceData of the run's kept samples
    (``run.thin`` > 0), chains = the run's predicting chains
    (``replicas.predict_from``: with chains of one posterior, all of them, so
    ArviZ's R-hat across them means what it says), each an ArviZ chain cut to
    the shortest chain's number of kept samples, so the draws are rectangular:

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
    az = arviz()
    s, spec = run.samples, run.spec
    if not len(s["weights"]):
        raise RunError(f"{run.dir}: no kept samples to export (run.thin: 0 keeps none)")
    posterior = run.config.replicas.predict_from
    chains = [int(r) for r in np.unique(s["chain"]) if r in run.chain_indices(posterior)]
    if not chains:
        raise RunError(f"{run.dir}: no kept samples of the {posterior!r} chains to export")
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
            predictions={name: np.transpose(draws[chains][:, :, :, sl], (0, 1, 3, 2))
                         for name, sl in run.test_sets()},
            coords={"chain": chains, "case": cases, "weight": [f"w{k}" for k in range(spec.n_params)]},
            dims={"weights": ["weight"], "y_hat": ["case", "class" if run.likelihood != "gaussian" else "output"],
                  "y": ["case"], "y_test": ["case"] + (["output"] if run.likelihood == "gaussian" else [])},
            attrs={"run": str(run.dir), "likelihood": run.likelihood,
                   "chains": f"{posterior}: " + ("chains of one posterior (every chain on all training cases)"
                                                 if run.config.replicas.data == "full" else
                                                 "of cross-validation replicas (folds) and full-data chain"),
                   "note": f"posterior: the kept samples (every run.thin-th retained one), {n} per chain; "
                           f"predictions: one draw per retained super-transition, the mean over its samples"})
    path = run.dir / "inference_data.nc"
    idata.to_netcdf(str(path))
    return path
