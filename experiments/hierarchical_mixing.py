"""Whether the hierarchical model's chains meet on real data: the estimators
(`BNNClassifier`, `BNNRegressor`) on scikit-learn's breast_cancer, diabetes
and digits, each a 75/25 split (random_state 0), with their defaults or with
what a row changes; for each fit the largest R-hat across the posterior's
chains of the test predictions and of the log hyperparameters, the smallest
and median bulk ESS of the test predictions (on the samples the fit keeps after
its burn-in), its gradients and wall time (compiling apart), and the test log
loss and expected calibration error (classification) or RMSE and mean negative
log predictive density (regression).

Rows (`--rows`; each a data set and the estimator's keyword arguments):
  default       the estimators' defaults: each chain from its own optimized
                network, weight-group precision priors of shape 2,
                interweaving moves, L up to the budget, run until the chains meet
                (R-hat <= 1.01, ESS >= 400) within 600 s
  random        the same from small random weights (the defaults before the
                optimized starts)
  learned       the defaults with the metric learned from the chains (each
                weight's heuristic step scale times a factor from the draws'
                and gradients' variances in warm-up windows)
  neal          the same with Neal's hyperpriors (shape 0.5 for every group):
                the estimators' defaults before the shape-2 priors
  gibbs-30      Neal's hyperpriors and Gibbs updates alone, L up to 500, 30
                super-transitions (the estimators' defaults before the
                interweaving moves)
  interweave-30 Neal's hyperpriors, the interweaving moves, L up to 500, 30
                super-transitions
  box-500       the defaults with L up to 500 (the default before L reached the
                budget)
  slowest       the defaults rewarding the slowest quantity's movement (the log
                hyperparameters' and the energy's) instead of ESJD/sqrt(L)
  half-burn     the defaults with the first half of a fit run until its chains
                meet burned in (the default before: now the first quarter)
  gibbs         the defaults with Gibbs updates alone (no interweaving moves)

Besides R-hat and ESS, each row gives each chain's own split R-hat (its first
half against its second, the largest over the test predictions and over the
log hyperparameters), the verdict (met, moving, apart), the log
hyperparameters' smallest ESS per second of sampling, the median L, and the
share of the run's gradients spent on actions whose reward was under a tenth
of the best reward told (the warm-up's, from a cold start, are not told).

Run: python experiments/hierarchical_mixing.py [--data breast_cancer diabetes]
     [--rows default neal] [--seeds 0 1 2 3] [--super-transitions N] [--docs] [--quick]
--docs writes docs/hierarchical_mixing.md and .json; --quick (the tests) runs
a small fit of each row on 120 diabetes cases and writes no docs.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adaptive_hmc import BNNClassifier, BNNRegressor  # noqa: E402
from adaptive_hmc.front.plots import calibration_bins  # noqa: E402
from adaptive_hmc.rundir.metrics import kept_samples, log_gradients, run_diagnostics  # noqa: E402
from adaptive_hmc.models.priors import GammaPrior, PriorSpec  # noqa: E402

NEAL = dict(input_hidden=GammaPrior(400.0, 0.5), hidden_bias=GammaPrior(400.0, 0.5),
            hidden_output=GammaPrior(400.0, 0.5))
ROWS = {
    "default": {},
    "random": dict(start="random"),
    "learned": dict(metric="learned"),
    "neal": dict(priors=PriorSpec(**NEAL)),
    "gibbs-30": dict(priors=PriorSpec(**NEAL, hyper_moves="gibbs"), num_steps_bounds=(10, 500), max_seconds=None),
    "interweave-30": dict(priors=PriorSpec(**NEAL), num_steps_bounds=(10, 500), max_seconds=None),
    "box-500": dict(num_steps_bounds=(10, 500)),
    "slowest": dict(reward="slowest"),
    "half-burn": {},
    "gibbs": dict(priors=PriorSpec(hyper_moves="gibbs")),
}
#: Rows that change a constant of the estimators' module instead of a keyword.
MODULE_SETTINGS = {"half-burn": {"UNTIL_BURN_IN": 2}}
QUICK = dict(hidden=4, budget=200, super_transitions=6, num_steps_bounds=(5, 40), initial_phase_steps=100)


def load(name: str):
    """(X, y, estimator class) of a scikit-learn data set, or of statsmodels' ``fair`` (the affairs of 6366
    women, Fair 1978: eight inputs and the time spent in affairs; statsmodels must be installed)."""
    if name == "fair":
        from statsmodels.datasets import fair
        d = fair.load_pandas().data
        return d.drop(columns="affairs").to_numpy(float), d["affairs"].to_numpy(float), BNNRegressor
    from sklearn import datasets
    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    return X, y, BNNRegressor if name in ("diabetes", "fair") else BNNClassifier


def measure(data: str, row: str, quick: bool, seed: int | None = None, fixed: int | None = None) -> dict:
    """One fit of ``row`` on ``data`` and what it buys; with ``seed``, that seed's; with ``fixed``, exactly
    that many super-transitions (no run until the chains meet: the first third burned in)."""
    from sklearn.model_selection import train_test_split
    X, y, cls = load(data)
    if quick:
        X, y = X[:120], y[:120]
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    until = quick and row in ("default", "neal", "half-burn")
    options = dict(ROWS[row], **QUICK, **({"max_seconds": 5.0, "target_ess": 20} if until else {})) if quick \
        else dict(ROWS[row])
    options.update({} if seed is None else {"seed": seed},
                   **({} if fixed is None else {"super_transitions": fixed, "max_seconds": None}))
    model = cls(**options)
    from adaptive_hmc.front import estimator
    saved = {k: getattr(estimator, k) for k in MODULE_SETTINGS.get(row, {})}
    t0 = time.perf_counter()
    try:
        vars(estimator).update(MODULE_SETTINGS.get(row, {}))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X_train, y_train)
        wall = time.perf_counter() - t0
        n = model.chains_.n_super
        burn = model._burn_in(n)
    finally:
        vars(estimator).update(saved)
    d = run_diagnostics(model.spec_, kept_samples(model.chains_, after=burn), model.chains_.chain_indices("full"),
                        "full", {"X_test": model.x_scale_.transform(X_test), "history_pred": [], "history_count": []},
                        {"test": slice(0, len(X_test))}, model.chains_.history_hyper[burn:],
                        int(log_gradients(model.log_).sum()), sum(e["seconds"] for e in model.log_))
    test, hyper = d["test"]["test"], d["hyper"]
    rewards = np.array([e["reward"] if e["reward"] is not None else -np.inf for e in model.log_])
    grads = np.array([e["gradients"] for e in model.log_], dtype=float)
    told = np.array([e["told"] is not None for e in model.log_])
    best = rewards[told].max() if told.any() else -np.inf      # the best told: a warm-up transient is no action's
    out = {"data": data, "row": row, "seed": options.get("seed", 0), "super_transitions": n, "burn_in": burn, "rhat_test": test["rhat_max"],
           "rhat_hyper": hyper["rhat_max"] if hyper else None, "ess_test_min": test["ess_bulk"]["min"],
           "ess_test_median": test["ess_bulk"]["median"], "ess_hyper_min": hyper["ess_bulk"]["min"] if hyper else None,
           "gradients": d["gradients"], "sampling_s": d["sampling_s"], "wall_s": round(wall, 1),
           "ess_hyper_per_s": hyper["ess_per_second"]["min"] if hyper else None,
           "own_rhat_test": d["within_chain"]["predictions"], "own_rhat_hyper": d["within_chain"].get("hyper"),
           "verdict": d["verdict"], "median_L": float(np.median([e["num_steps"] for e in model.log_])),
           "low_reward_gradients": float(grads[rewards < 0.1 * best].sum() / grads.sum()) if best > 0 else None,
           "converged": None if model.convergence_ is None else model.convergence_["met"],
           "start_s": (model.chains_.start_info or {}).get("seconds"),
           "start_gradients": (model.chains_.start_info or {}).get("gradients")}
    if cls is BNNClassifier:
        P = model.predict_proba(X_test)
        codes = np.searchsorted(model.classes_, y_test)
        out["log_loss"] = float(-np.mean(np.log(np.clip(P[np.arange(len(codes)), codes], 1e-300, None))))
        out["ece"] = calibration_bins(P, codes)[3]       # 10 equal-width confidence bins, as predictive_check.png
    else:
        mean, sd = model.predict(X_test, return_std=True)
        out["rmse"] = float(np.sqrt(np.mean((mean - y_test) ** 2)))
        out["nll"] = float(-stats.norm.logpdf(y_test, mean, sd).mean())
    return out


def _cell(v, fmt="{:.3f}"):
    return "-" if v is None else fmt.format(v)


def _own(values) -> str:
    return "-" if not values else ", ".join("-" if v is None else f"{v:.2f}" for v in values)


def markdown(results: list, seconds: float, rows) -> str:
    lines = ["# Hierarchical mixing on real data", "",
             f"Written by `python experiments/hierarchical_mixing.py --docs --rows {' '.join(rows)}` "
             f"({seconds / 60:.0f} min on a 2-core machine); what the rows are: the script's docstring and "
             "[RESULTS.md](RESULTS.md#hierarchical-mixing-on-real-data).", "",
             "| data | row | super-transitions (burn-in) | R-hat test / hyper | ESS test min / median | "
             "ESS hyper min (per s) | each chain's own R-hat, test / hyper | verdict | median L | gradients "
             "(low-reward share) | sampling s | test error |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        err = (f"log loss {r['log_loss']:.4f}, ECE {r['ece']:.4f}" if "log_loss" in r
               else f"RMSE {r['rmse']:.2f}, NLL {r['nll']:.4f}")
        lines.append(f"| {r['data']} | {r['row']} | {r['super_transitions']} ({r['burn_in']}) | "
                     f"{_cell(r['rhat_test'])} / {_cell(r['rhat_hyper'])} | {r['ess_test_min']:.0f} / "
                     f"{r['ess_test_median']:.0f} | {_cell(r['ess_hyper_min'], '{:.0f}')} "
                     f"({_cell(r.get('ess_hyper_per_s'), '{:.2f}')}) | {_own(r.get('own_rhat_test'))} / "
                     f"{_own(r.get('own_rhat_hyper'))} | {r.get('verdict', '-')} | {_cell(r.get('median_L'), '{:.0f}')} | "
                     f"{r['gradients']:,} ({_cell(r.get('low_reward_gradients'), '{:.2f}')}) | "
                     f"{r['sampling_s']:.0f} | {err} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", nargs="+", default=["breast_cancer", "diabetes"],
                   choices=["breast_cancer", "diabetes", "digits", "fair"])
    p.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    p.add_argument("--docs", action="store_true", help="write docs/hierarchical_mixing.md and .json")
    p.add_argument("--quick", action="store_true", help="small fits (the tests); writes no docs")
    p.add_argument("--seeds", type=int, nargs="+", help="fit each row with each of these seeds (default: 0)")
    p.add_argument("--super-transitions", type=int, help="a fixed length (ESS per second of runs of equal length, "
                   "not stopped where their check first passes)")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    results = []
    for data in (["diabetes"] if a.quick else a.data):
        for row in a.rows:
            for seed in a.seeds or [None]:
                results.append(measure(data, row, a.quick, seed, a.super_transitions))
                print(json.dumps(results[-1]), flush=True)
    if a.docs and not a.quick:
        (ROOT / "docs" / "hierarchical_mixing.json").write_text(json.dumps(results, indent=1) + "\n")
        (ROOT / "docs" / "hierarchical_mixing.md").write_text(markdown(results, time.perf_counter() - t0, a.rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
