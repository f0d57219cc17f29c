"""float32 against float64 (``sampler.precision``): the same runs in both
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

Run: python experiments/precision.py [--targets robot_arm diabetes] [--super-transitions 60]
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
#: The runs: (name, precision, seed); float64-control is the same target as float64 from another seed.
RUNS = (("float64", "float64", 1), ("float32", "float32", 2), ("float64-control", "float64", 3))


def robot_arm(name: str, precision: str, seed: int, super_transitions: int, runs: Path, quick: bool) -> tuple:
    """(means, standard errors, gradients, sampling seconds) of the robot arm's test predictions."""
    import arviz as az
    raw = yaml.safe_load((ROOT / "configs" / "robot_arm_fixed_hyper_bandit.yaml").read_text())
    raw["name"] = f"precision_robot_arm_{name}"
    raw["data"]["dataset"] = "robot_arm"
    raw["sampler"]["precision"] = precision
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


def diabetes(name: str, precision: str, seed: int, super_transitions: int, runs: Path, quick: bool) -> tuple:
    """(means, standard errors, gradients, sampling seconds) of diabetes' training log likelihoods."""
    import arviz as az
    from sklearn.datasets import load_diabetes
    from sklearn.model_selection import train_test_split

    from adaptive_hmc import BNNRegressor
    X, y = load_diabetes(return_X_y=True)
    X_train, _, y_train, _ = train_test_split(X, y, test_size=0.25, random_state=0)
    options = dict(hidden=4, budget=200, num_steps_bounds=(5, 40), initial_phase_steps=100) if quick else {}
    model = BNNRegressor(precision=precision, max_seconds=None, super_transitions=super_transitions,
                         seed=seed,
                         **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X_train, y_train)
    ll = model.to_inference_data().log_likelihood
    gradients = int(sum(e["gradients"] for e in model.log_))
    return (ll["y"].mean(("chain", "draw")).values.ravel(), az.mcse(ll)["y"].values.ravel(), gradients,
            sum(e["seconds"] for e in model.log_))


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


def markdown(rows: list, minutes: float, super_transitions: int) -> str:
    lines = ["# float32 against float64", "",
             f"Written by `python experiments/precision.py --super-transitions {super_transitions}` "
             f"({minutes:.0f} min on a 2-core machine); what the targets and quantities are: the script's "
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
    return "\n".join(lines) + "\n"


def main(argv=None) -> list:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--targets", nargs="+", default=["robot_arm", "diabetes"], choices=["robot_arm", "diabetes"])
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
            run = robot_arm if target == "robot_arm" else diabetes
            m, se, g, s = run(name, prec, seed, n, Path(a.runs) / ("quick" if a.quick else ""), a.quick)
            res[name] = {"mean": m, "se": se, "gradients": g, "seconds": s}
        for other in ("float32", "float64-control"):
            rows.append(compare(target, f"float64 / {other}", res["float64"], res[other]))
            print(json.dumps(rows[-1]), flush=True)
    if not a.quick:
        minutes = (time.perf_counter() - t0) / 60
        (ROOT / "docs" / "precision.md").write_text(markdown(rows, minutes, n))
        (ROOT / "docs" / "precision.json").write_text(json.dumps(rows, indent=1) + "\n")
    return rows


if __name__ == "__main__":
    main()
