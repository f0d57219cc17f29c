"""Reading run directories: comparison tables and ArviZ export.

Flow position: results -> **reports**. Reads only what a run wrote; never samples.
"""
from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np


def read_run(d) -> dict:
    """summary, log, predictions and tuner state of run directory ``d``."""
    d = Path(d)
    if not (d / "summary.json").is_file():
        raise FileNotFoundError(f"{d}: not a finished run directory (no summary.json)")
    log = [json.loads(line) for line in (d / "log.jsonl").read_text().splitlines() if line.strip()]
    with np.load(d / "predictions.npz") as z:
        pred = {k: z[k] for k in z.files}
    return {"dir": d, "summary": json.loads((d / "summary.json").read_text()), "log": log, "pred": pred,
            "tuner": json.loads((d / "tuner.json").read_text()),
            "config": (d / "config.resolved.yaml").read_text()}


def _arviz():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz
    return arviz


def _retained(run: dict) -> np.ndarray:
    """Mask of the super-transitions in which every chain retained samples (after burn-in)."""
    return np.all(run["pred"]["history_count"] > 0, axis=1)


def retained_draws(run: dict) -> np.ndarray:
    """Per-super-transition mean test predictions of each chain after burn-in,
    (chains, draws, outputs, cases)."""
    P, C = run["pred"]["history_pred"], run["pred"]["history_count"]      # (S, R, out, N), (S, R)
    keep = _retained(run)
    return np.transpose(P[keep] / C[keep][:, :, None, None], (1, 0, 2, 3))


def test_ess(run: dict) -> dict:
    """Median over cases and outputs of ArviZ's bulk ESS of the test predictions
    (draws: super-transitions, chains: replicas), per test set."""
    draws = retained_draws(run)
    if draws.shape[1] < 4:
        return {}
    az = _arviz()
    out = {}
    for name, (a, b) in zip(run["pred"]["test_names"], run["pred"]["test_bounds"]):
        x = draws[:, :, :, a:b].reshape(draws.shape[0], draws.shape[1], -1)
        with warnings.catch_warnings():     # "more chains than draws" when a run is short
            warnings.simplefilter("ignore", UserWarning)
            ess = az.ess(az.convert_to_dataset(x))["x"].values
        out[str(name)] = float(np.median(ess))
    return out


def compare(dirs) -> list:
    """One row (dict) per run directory."""
    rows = []
    for d in dirs:
        run = read_run(d)
        s = run["summary"]
        key = "test_mse" if "test_mse" in s else "test_error_rate"
        rows.append({"run": str(d), "tuner": s["tuner"], "seed": s["seed"], "metric": key,
                     "test": s[key], "test_se": s[key + "_se"], "cv_error": s["cv_error"],
                     "acceptance": s["acceptance"], "divergences": s["divergences"],
                     "leapfrog_steps": s["leapfrog_steps"], "wall_s": s["wall_s"], "ess": test_ess(run)})
    return rows


def table(rows, markdown: bool = True) -> str:
    names = sorted({n for r in rows for n in r["test"]})
    head = ["run", "tuner"] + [f"{n} ± se" for n in names] + ["CV error", "acceptance", "divergences",
                                                             "leapfrog steps", "wall s"] + [f"ESS {n}" for n in names]
    body = []
    for r in rows:
        cells = [r["run"], r["tuner"]]
        cells += [f"{r['test'][n]:.5f} ± {r['test_se'][n]:.5f}" if n in r["test"] else "-" for n in names]
        cells += ["-" if r["cv_error"] is None else f"{r['cv_error']:.5f}", f"{r['acceptance']:.3f}",
                  str(r["divergences"]), f"{r['leapfrog_steps']:,}", f"{r['wall_s']:.1f}"]
        cells += [f"{r['ess'][n]:.0f}" if n in r["ess"] else "-" for n in names]
        body.append(cells)
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in body])
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in [head] + body)


def export(d) -> Path:
    """``d/inference_data.nc``: ArviZ InferenceData with the retained
    per-super-transition test predictions (group predictions) and the chains'
    hyperparameters (group posterior), chains = replicas, draws = super-transitions."""
    run = read_run(d)
    az = _arviz()
    draws = retained_draws(run)
    H = np.transpose(run["pred"]["history_hyper"][_retained(run)], (1, 0, 2))          # (R, S, H)
    names = [re.sub(r"\W+", "_", str(n)).strip("_") for n in run["pred"]["hyper_names"]]
    posterior = {f"log_{n}": np.log(H[:, :, i]) for i, n in enumerate(names)}
    predictions = {}
    for name, (a, b) in zip(run["pred"]["test_names"], run["pred"]["test_bounds"]):
        predictions[str(name)] = np.transpose(draws[:, :, :, a:b], (0, 1, 3, 2))  # (R, S, N, out)
    with warnings.catch_warnings():         # "more chains than draws" when a run is short
        warnings.simplefilter("ignore", UserWarning)
        idata = az.from_dict(posterior=posterior, predictions=predictions,
                             attrs={"run": str(d), "note": "one draw per super-transition: the mean over its "
                                    "samples (predictions) or its last sample (hyperparameters)"})
    path = Path(d) / "inference_data.nc"
    idata.to_netcdf(str(path))
    return path
