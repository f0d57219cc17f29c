"""float32 against float64 (``sampler.arithmetic``): the same runs in both
precisions, whether their answers agree within Monte Carlo error, and what
float32 buys in gradients a second.

Targets:

  robot_arm  configs/robot_arm_fixed_hyper_bandit.yaml (MacKay's robot arm, a
             2-16-2 network with fixed priors, 8 chains) shortened to
             ``--super-transitions`` (a quarter burn-in, every 2nd sample kept);
             the quantities: the test predictions y_hat of rows 201-600 (800).
  diabetes   scikit-learn's diabetes (442 cases, 10 inputs; 75% training),
             BNNRegressor with its defaults (the hierarchical priors, 4 chains
             from optimized starts) for exactly ``--super-transitions``; the
             quantities: each training case's log likelihood (331).
  breast_cancer  the same with BNNClassifier on scikit-learn's breast_cancer
             (569 cases, 30 inputs; 426 training: a classification table).
  fair       the same with BNNRegressor on statsmodels' fair (6366 cases,
             8 inputs; 4774 training: a table of thousands of rows, whose
             chains do not meet in such a run, so that only the control pair
             says what agreement to expect).

The two precisions run from different seeds (1 for float64, 2 for float32):
from one seed their chains would follow each other for a long while and agree
trivially. A control pair, float64 from seeds 1 and 3, shows what the same
statistics give for two runs of one target (what unmet chains or MCSEs that
are too small would do to them alike). For each quantity the two posterior means and their Monte Carlo standard
errors (ArviZ's, of the exported diagnostic draws) give z = (m32 - m64) /
sqrt(se32^2 + se64^2); the answers agree when max |z| stays below the 1%
Bonferroni bound over the quantities and the mean of z^2 is near 1 (its
standard error about sqrt(2/n) if the z were independent; neighbouring
quantities are correlated, so it varies more).

Run: python experiments/precision.py [--targets robot_arm diabetes breast_cancer fair] [--super-transitions 60]
     [--runs runs/precision] [--quick]
Writes docs/precision.md and docs/precision.json (not with --quick, which runs
6 super-transitions of a small budget to check the pipeline).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import yaml
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
#: The runs: (name, arithmetic, seed); float64-control is the same target as float64 from another seed.
RUNS = (("float64", "float64", 1), ("float32", "float32", 2), ("float64-control", "float64", 3))


def robot_arm(name: str, arithmetic: str, seed: int, super_transitions: int, runs: Path, quick: bool) -> tuple:
    """(means, standard errors, gradients, sampling seconds) of the robot arm's test predictions."""
    import arviz as az
    raw = yaml.safe_load((ROOT / "configs" / "robot_arm_fixed_hyper_bandit.yaml").read_text())
    raw["name"] = f"precision_robot_arm_{name}"
    raw["data"]["dataset"] = "robot_arm"
    raw["sampler"]["arithmetic"] = arithmetic
    raw["run"].update(seed=seed, super_transitions=super_transitions, burn_in={"super_transitions": super_transitions // 4},
                      thin=2, checkpoint_every=10)
    if quick:
        raw["run"]["budget"] = 2000
        raw["tuner"].update(warmup_super_transitions=2, bounds={"step_factor": [0.01, 1.01], "num_steps": [20, 1000]})
    runs.mkdir(parents=True, exist_ok=True)
    cfg, out = runs / f"robot_arm_{name}.yaml", runs / f"robot_arm_{name}"
    cfg.write_text(yaml.safe_dump(raw, sort_keys=False))
    cli = [sys.executable, "-m", "adaptive_hmc.front.cli"]
    resume = ["--resume"] if (out / "config.yaml").is_file() else []    # an interrupted run resumes
    if not (out / "summary.json").is_file():
        subprocess.run(cli + ["run", str(cfg), "--out", str(out)] + resume, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(cli + ["export", str(out)], check=True, stdout=subprocess.DEVNULL)
    idata = az.from_netcdf(out / "inference_data.nc")
    y = idata.predictions["y_hat"]
    summary = json.loads((out / "summary.json").read_text())
    return (y.mean(("chain", "draw")).values.ravel(), az.mcse(idata.predictions)["y_hat"].values.ravel(),
            summary["gradients"], summary["diagnostics"]["sampling_s"])


def load(data: str) -> tuple:
    """(X, y, estimator class) of scikit-learn's diabetes or breast_cancer, or statsmodels' fair (the
    affairs of 6366 women, Fair 1978: eight inputs and the time spent in affairs; statsmodels must be
    installed)."""
    from adaptive_hmc import BNNClassifier, BNNRegressor
    if data == "fair":
        from statsmodels.datasets import fair
        d = fair.load_pandas().data
        return d.drop(columns="affairs").to_numpy(float), d["affairs"].to_numpy(float), BNNRegressor
    from sklearn import datasets
    X, y = getattr(datasets, f"load_{data}")(return_X_y=True)
    return X, y, BNNRegressor if data == "diabetes" else BNNClassifier


def estimator_target(data: str):
    """The run of an estimator target: (means, standard errors, gradients, sampling seconds) of its
    training cases' log likelihoods, the estimator's defaults for exactly ``super_transitions``."""
    def run(name: str, arithmetic: str, seed: int, super_transitions: int, runs: Path, quick: bool) -> tuple:
        import arviz as az
        from sklearn.model_selection import train_test_split
        X, y, cls = load(data)
        X_train, _, y_train, _ = train_test_split(X, y, test_size=0.25, random_state=0)
        options = dict(hidden=4, budget=200, num_steps_bounds=(5, 40), initial_phase_steps=100) if quick else {}
        model = cls(arithmetic=arithmetic, max_seconds=None, super_transitions=super_transitions, seed=seed,
                    **options)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X_train, y_train)
        ll = model.to_inference_data().log_likelihood
        gradients = int(sum(e["gradients"] for e in model.log_))
        return (ll["y"].mean(("chain", "draw")).values.ravel(), az.mcse(ll)["y"].values.ravel(), gradients,
                sum(e["seconds"] for e in model.log_))
    return run


#: Every target and its run.
TARGETS = {"robot_arm": robot_arm, **{d: estimator_target(d) for d in ("diabetes", "breast_cancer", "fair")}}


def compare(target: str, pair: str, a: dict, b: dict) -> dict:
    """The agreement of the answers ``a`` (float64) and ``b`` (dicts of means, se, gradients, seconds)."""
    z = (b["mean"] - a["mean"]) / np.sqrt(a["se"] ** 2 + b["se"] ** 2)
    n = z.size
    bound = float(stats.norm.ppf(1 - 0.005 / n))
    return {"target": target, "pair": pair, "quantities": n, "max_abs_z": round(float(np.abs(z).max()), 3),
            "bonferroni_1pct": round(bound, 3), "mean_z2": round(float(np.mean(z ** 2)), 3),
            "share_abs_z_over_2": round(float(np.mean(np.abs(z) > 2)), 4),
            "agree": bool(np.abs(z).max() < bound),
            "median_se_float64": float(np.median(a["se"])), "median_se_float32": float(np.median(b["se"])),   # b's
            "gradients_per_s": [round(r["gradients"] / r["seconds"]) for r in (a, b)],
            "speedup": round((b["gradients"] / b["seconds"]) / (a["gradients"] / a["seconds"]), 3)}


def markdown(rows: list, minutes: float, super_transitions: int, targets) -> str:
    lines = ["# float32 against float64", "",
             f"Written by `python experiments/precision.py --super-transitions {super_transitions} --targets "
             f"{' '.join(targets)}` ({minutes:.0f} min on a 2-core machine; the other targets' rows are those of "
             f"an earlier write, 120 super-transitions); what the targets and quantities are: the script's "
             "docstring and [METHOD.md](METHOD.md#float32-arithmetic-samplerprecision-float32).", "",
             "| target | pair | quantities | max abs z (1% bound) | mean z^2 | share abs z > 2 | median MCSEs | "
             "gradients/s | speed-up | max abs z below the bound |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        g = r["gradients_per_s"]
        lines.append(f"| {r['target']} | {r['pair']} | {r['quantities']} | {r['max_abs_z']} ({r['bonferroni_1pct']}) | "
                     f"{r['mean_z2']} | {r['share_abs_z_over_2']} | {r['median_se_float64']:.3g} / "
                     f"{r['median_se_float32']:.3g} | {g[0]:,} / {g[1]:,} | {r['speedup']} | "
                     f"{'yes' if r['agree'] else 'no'} |")
    unmet = [(r["target"], r["mean_z2"], c["mean_z2"]) for r in rows for c in rows
             if c["target"] == r["target"] and c["pair"].endswith("control") and not r["pair"].endswith("control")
             and not c["agree"]]
    for target, z32, z64 in unmet:
        lines += ["", f"{target}: the two float64 runs do not agree either (their chains have not met in so short a "
                      f"run): float32's answer is as close to float64's as float64's to itself, or closer (mean z^2 "
                      f"{z32} against {z64})."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> list:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--targets", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    p.add_argument("--super-transitions", type=int, default=60)
    p.add_argument("--runs", default=str(ROOT / "runs" / "precision"))
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    n = 6 if a.quick else a.super_transitions
    t0 = time.perf_counter()
    rows = []
    for target in a.targets:
        res = {}
        for name, prec, seed in RUNS:
            m, se, g, s = TARGETS[target](name, prec, seed, n, Path(a.runs) / ("quick" if a.quick else ""), a.quick)
            res[name] = {"mean": m, "se": se, "gradients": g, "seconds": s}
        for other in ("float32", "float64-control"):
            rows.append(compare(target, f"float64 / {other}", res["float64"], res[other]))
            print(json.dumps(rows[-1]), flush=True)
    if not a.quick:                      # the rows of targets not run this time are kept from the last write
        minutes = (time.perf_counter() - t0) / 60
        path = ROOT / "docs" / "precision.json"
        kept = [r for r in (json.loads(path.read_text()) if path.is_file() else []) if r["target"] not in a.targets]
        every = sorted(kept + rows, key=lambda r: list(TARGETS).index(r["target"]))
        (ROOT / "docs" / "precision.md").write_text(markdown(every, minutes, n, a.targets))
        path.write_text(json.dumps(every, indent=1) + "\n")
    return rows


if __name__ == "__main__":
    main()
