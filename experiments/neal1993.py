"""Neal (1993), "Bayesian learning via stochastic dynamics": his robot-arm
experiments with his 1993 model (16 hidden units, the 200 training cases,
unscaled weights times three category scale factors, noise integrated out).

- Hybrid Monte Carlo: 500 iterations of 1000 leapfrog steps with eps = 0.00012,
  predictions from the last 250 (his test error 0.00559; his Fig. 2).
- Uncorrected stochastic dynamics (eq 16, persistence alpha = 0.999, one
  leapfrog step an iteration, no acceptance test), 500,000 iterations: at
  eps = 0.00012 (his Fig. 4a: comparable to HMC) and at eps = 0.0003 (his
  Fig. 4b: the dynamics become unstable); predictions from every 1000th state
  of the last 250,000.
- Conventional backpropagation (eq 16 without its random term: batch gradient
  descent with momentum on eq 5's data term), without weight decay and with
  one weight-decay constant per category taken from the Bayesian run (eq 6)
  (his Fig. 1): training and test error against iterations.

Run: python experiments/neal1993.py [--quick] [--workers N | --scheduler ADDR] [--out DIR] [--docs]

Each run is a Dask task (results in OUT/results.json, default
sweeps/neal1993[_quick], read, not redone, when the script runs again);
``--docs`` writes docs/neal1993.md, docs/neal1993.json and the figure.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from adaptive_hmc.data import load_robot_arm
from adaptive_hmc.models.mlp import MLPSpec, predict
from adaptive_hmc.models.neal1992 import N_GROUPS
from adaptive_hmc.models.neal1993 import Neal93MLP
from adaptive_hmc.models.predictive import squared_errors
from adaptive_hmc.samplers import hmc_settings, init_state, sample
from adaptive_hmc.front.sweep import dask_session, timed_map_tasks

ROOT = Path(__file__).resolve().parents[1]
HIDDEN = 16
PUBLISHED = {"hmc": 0.00559}
HMC = {"iterations": 500, "num_steps": 1000, "eps": 0.00012, "keep_last": 250}
SD = {"iterations": 500_000, "persistence": 0.999, "every": 1000, "keep_last": 250_000}
SD_STEPS = {"sd_0.00012": 0.00012, "sd_0.0003": 0.0003}
#: An energy peak: the potential energy more than this above its median after the first tenth of the run
#: (its equilibrium sd is about sqrt(D / 2), 7 for this network's 85 parameters).
PEAK = 100.0
BP = {"iterations": 200_000, "learning_rate": 1e-6, "momentum": 0.9, "every": 500}


def _problem():
    arm = load_robot_arm()
    (X, Y), (Xt, Yt) = arm.rows(1, 200), arm.rows(201, 400)
    spec = MLPSpec(2, (HIDDEN,), 2)
    return spec, Neal93MLP(spec, X, Y), X, Y, Xt, Yt


def _errors(spec, W, X, Y, Xt, Yt) -> dict:
    """Per-network training and test errors, and the test error of the averaged prediction."""
    F = predict(spec, W, Xt)
    return {"train_errors": [float(np.mean(squared_errors(f, Y))) for f in predict(spec, W, X)],
            "test_errors": [float(np.mean(squared_errors(f, Yt))) for f in F],
            "test_error": float(np.mean(squared_errors(F.mean(axis=0), Yt)))}


def hmc_run(seed: int, scale: float = 1.0) -> dict:
    t0 = time.perf_counter()
    spec, model, X, Y, Xt, Yt = _problem()
    rng = np.random.default_rng([seed, 1993])
    n, L = max(4, int(HMC["iterations"] * scale)), max(10, int(HMC["num_steps"] * scale))
    settings = hmc_settings(L, step_size=HMC["eps"], gibbs=False)
    _, trace, Q = sample(model, init_state(model, model.initial_position(rng)), settings, n, rng)
    keep = Q[-max(2, int(HMC["keep_last"] * scale)):]
    out = _errors(spec, model.weights(Q), X, Y, Xt, Yt)
    W = model.weights(keep)
    ms = [float(np.mean(W[:, model.target.group == g] ** 2)) for g in range(N_GROUPS)]
    out.update(test_error=_errors(spec, W, X, Y, Xt, Yt)["test_error"],
               acceptance=float(trace[:, 2].mean()), energy=trace[:, 1].tolist(),
               scale_factors=np.abs(keep[:, -N_GROUPS:]).tolist(), weight_mean_square=ms,
               seconds=time.perf_counter() - t0)
    return out


def sd_run(name: str, seed: int, scale: float = 1.0) -> dict:
    t0 = time.perf_counter()
    spec, model, X, Y, Xt, Yt = _problem()
    rng = np.random.default_rng([seed, 1993, list(SD_STEPS).index(name)])
    every = max(1, int(SD["every"] * scale))
    settings = hmc_settings(1, step_size=SD_STEPS[name], persistence=SD["persistence"], gibbs=False,
                            kind="stochastic_dynamics")
    n = max(4 * every, int(SD["iterations"] * scale))
    _, trace, Q = sample(model, init_state(model, model.initial_position(rng)), settings, n, rng, every)
    out = _errors(spec, model.weights(Q), X, Y, Xt, Yt)
    keep = Q[-max(2, len(Q) // 2):]
    e = trace[n // 10:, 1]                              # after the descent from the start
    e = e[np.isfinite(e)]
    idx = np.flatnonzero(e > np.median(e) + PEAK)        # excursions closer than `every` iterations are one peak
    out.update(test_error=_errors(spec, model.weights(keep), X, Y, Xt, Yt)["test_error"],
               energy=[float(v) for v in trace[::every, 1]], divergences=int((trace[:, 2] == 0).sum()),
               max_energy=float(e.max()), median_energy=float(np.median(e)),
               peaks=int(idx.size > 0) + int(np.sum(np.diff(idx) > every)), seconds=time.perf_counter() - t0)
    return out


def backprop_run(decay: dict | None, seed: int, scale: float = 1.0) -> dict:
    """Batch gradient descent with momentum (eq 16 without noise) on eq 5's
    data term plus sum_g lambda_g |w_g|^2 (eq 6; ``decay`` {group: lambda}, or
    None), from small random weights; errors every BP["every"] iterations."""
    t0 = time.perf_counter()
    spec, model, X, Y, Xt, Yt = _problem()
    rng = np.random.default_rng([seed, 1993, 6])
    D = spec.n_params
    lam = np.zeros(D) if decay is None else np.array([decay[str(g)] for g in model.target.group])
    w = 0.1 * rng.standard_normal(D)
    v = np.zeros(D)
    q = np.concatenate([w, np.ones(N_GROUPS)])           # the 1993 model at scale factors 1: its weights are w
    hyper = model.initial_hyper()
    n, every = max(10, int(BP["iterations"] * scale)), max(1, int(BP["every"] * scale))
    W = []
    for i in range(n):
        q[:D] = w
        _, g = model.energy_grad(q, hyper)
        grad = g[:D] - w + 2.0 * lam * w                # minus the N(0, 1) prior's gradient, plus the decay
        v = BP["momentum"] * v - BP["learning_rate"] * grad
        w = w + v
        if (i + 1) % every == 0:
            W.append(w.copy())
    out = _errors(spec, np.array(W), X, Y, Xt, Yt)
    out.update(every=every, final_test_error=out["test_errors"][-1], best_test_error=min(out["test_errors"]),
               seconds=time.perf_counter() - t0)
    return out


def task(kind: str, *args) -> dict:
    """One run of ``kind`` (hmc, sd or backprop) with ``args``: what a Dask task runs."""
    return {"hmc": hmc_run, "sd": sd_run, "backprop": backprop_run}[kind](*args)


def decay_from(hmc: dict) -> dict:
    """Weight-decay constants of eq 6 from the Bayesian run: lambda_g = 1 / (2 v_g), v_g the posterior
    mean square of the weights in category g (the Gaussian prior that gives such weights)."""
    return {str(g): float(1.0 / (2.0 * v)) for g, v in enumerate(hmc["weight_mean_square"])}


def summary(res: dict) -> dict:
    return {"published": PUBLISHED, "hmc": res["hmc"]["test_error"], "hmc_acceptance": res["hmc"]["acceptance"],
            "sd": {k: {f: res[k][f] for f in ("test_error", "divergences", "max_energy", "median_energy", "peaks")}
                   for k in SD_STEPS},
            "backprop": {k: {"final": res[k]["final_test_error"], "best": res[k]["best_test_error"]}
                         for k in ("bp_no_decay", "bp_decay")},
            "decay": res["decay"], "seconds": {k: v["seconds"] for k, v in res.items() if isinstance(v, dict)
                                               and "seconds" in v}}


def report(res: dict, quick: bool, wall) -> str:
    s = summary(res)
    sd = s["sd"]
    lines = ["# Neal (1993): Hybrid Monte Carlo, stochastic dynamics and backpropagation", "",
             "Generated by `python experiments/neal1993.py" + (" --quick" if quick else "") + " --docs`; do not "
             f"edit. Robot arm, the 200 training cases, {HIDDEN} hidden units, Neal's 1993 model "
             "(`model.kind: neal1993`: unscaled weights N(0, 1) times one scale factor per category, the scale "
             "factors' prior 1/(2(1+|s|)^2) (the paper gives none; this is his 1992 one), noise integrated out, "
             "m0 = s0 = 0.1), raw inputs and targets; test errors on rows 201-400.", "",
             "| method | Neal (1993) | here |", "|---|---|---|",
             f"| HMC, 500 x 1000 leapfrog steps, eps 0.00012, last 250 predict | 0.00559 | {s['hmc']:.5f} "
             f"(acceptance {s['hmc_acceptance']:.2f}; his: about 0.90) |",
             f"| stochastic dynamics, alpha 0.999, eps 0.00012 | comparable to HMC (Fig. 4a) | "
             f"{sd['sd_0.00012']['test_error']:.5f} |",
             f"| stochastic dynamics, alpha 0.999, eps 0.0003 | unstable: two energy peaks (Fig. 4b) | "
             f"{sd['sd_0.0003']['test_error']:.5f}; {sd['sd_0.0003']['peaks']} energy peaks (highest "
             f"{sd['sd_0.0003']['max_energy']:.0f}, median {sd['sd_0.0003']['median_energy']:.0f}; at 0.00012: "
             f"{sd['sd_0.00012']['peaks']} peaks, highest {sd['sd_0.00012']['max_energy']:.0f}) |",
             f"| backpropagation, no weight decay | test error rises after an early minimum (Fig. 1a) | final "
             f"{s['backprop']['bp_no_decay']['final']:.5f}, best on the way {s['backprop']['bp_no_decay']['best']:.5f} |",
             f"| backpropagation, weight decay from the Bayesian run | no early stopping needed (Fig. 1b) | final "
             f"{s['backprop']['bp_decay']['final']:.5f}, best {s['backprop']['bp_decay']['best']:.5f} |", "",
             "Weight-decay constants lambda_g = 1/(2 v_g), v_g the mean square of category g's weights over the "
             "HMC run's last 250 iterations: "
             + ", ".join(f"{n} {v:.3g}" for n, v in zip(("input-hidden", "hidden bias", "to output"),
                                                        s["decay"].values())) + ". Backpropagation: batch "
             f"gradient descent with momentum {BP['momentum']}, learning rate {BP['learning_rate']:g}, from "
             f"N(0, 0.1^2) weights, {BP['iterations']:,} iterations (the paper does not give its settings).", "",
             f"An energy peak is an excursion of the potential energy more than {PEAK:g} above its median after the "
             f"first tenth of the run (its equilibrium sd is about 7); excursions within {SD['every']} iterations "
             "of each other count as one.", "",
             "![Figs. 1, 2 and 4](img/neal1993.png)", ""]
    if wall is not None:
        lines += [f"Wall time on this machine: {wall:.0f} s (" + ", ".join(f"{k} {v:.0f} s" for k, v in
                                                                        s["seconds"].items()) + " of one core).", ""]
    return "\n".join(lines)


def figure(res: dict, path: Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(2, 3, figsize=(14, 7))
    for a, key, title in ((ax[0, 0], "bp_no_decay", "Fig. 1a: backprop, no weight decay"),
                          (ax[0, 1], "bp_decay", "Fig. 1b: backprop, weight decay")):
        r = res[key]
        it = np.arange(1, len(r["train_errors"]) + 1) * r["every"]
        a.plot(it, r["train_errors"], "k-", lw=0.8, label="training")
        a.plot(it, r["test_errors"], "k:", lw=1.0, label="test")
        a.set_ylim(0.003, 0.012)
        a.set_xlabel("iterations")
        a.set_title(title)
        a.legend(fontsize=7)
    r = res["hmc"]
    it = np.arange(1, len(r["train_errors"]) + 1)
    ax[0, 2].plot(it, r["train_errors"], "k-", lw=0.7, label="training, each network")
    ax[0, 2].plot(it, r["test_errors"], "k:", lw=0.7, label="test, each network")
    ax[0, 2].axhline(r["test_error"], color="r", lw=1, label="test, averaged over the last half")
    ax[0, 2].set_ylim(0.003, 0.012)
    ax[0, 2].set_xlabel("HMC iterations (1000 leapfrog steps each)")
    ax[0, 2].set_title("Fig. 2: Hybrid Monte Carlo")
    ax[0, 2].legend(fontsize=7)
    for a, key, title in ((ax[1, 0], "sd_0.00012", "Fig. 4a: stochastic dynamics, eps 0.00012"),
                          (ax[1, 1], "sd_0.0003", "stochastic dynamics, eps 0.0003")):
        r = res[key]
        it = np.arange(1, len(r["train_errors"]) + 1)
        a.plot(it, r["train_errors"], "k-", lw=0.7, label="training")
        a.plot(it, r["test_errors"], "k:", lw=0.7, label="test")
        a.axhline(r["test_error"], color="r", lw=1, label="test, averaged over the last half")
        a.set_ylim(0.003, 0.012)
        a.set_xlabel("iterations / 1000")
        a.set_title(title)
        a.legend(fontsize=7)
    for key, style in (("sd_0.00012", "k-"), ("sd_0.0003", "r-")):
        e = np.array(res[key]["energy"])
        ax[1, 2].plot(np.arange(len(e)), e, style, lw=0.7, label=f"eps {SD_STEPS[key]:g}")
    ax[1, 2].set_xlabel("iterations / 1000")
    ax[1, 2].set_ylabel("potential energy")
    ax[1, 2].set_title("Fig. 4b: energy of stochastic dynamics")
    ax[1, 2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="every run a small fraction of its length")
    ap.add_argument("--out", help="results directory (default: sweeps/neal1993[_quick])")
    ap.add_argument("--workers", type=int, help="local Dask worker processes (default: one per core)")
    ap.add_argument("--scheduler", help="address of a running Dask scheduler instead of a local cluster")
    ap.add_argument("--docs", action="store_true", help="write docs/neal1993.{md,json} and its figure")
    args = ap.parse_args(argv)
    scale = 0.02 if args.quick else 1.0
    out = Path(args.out or f"sweeps/neal1993{'_quick' if args.quick else ''}")
    out.mkdir(parents=True, exist_ok=True)
    timings = out / "timings.json"
    store = out / "results.json"
    with dask_session(args.scheduler, args.workers) as client:
        calls = {"hmc": ("hmc", 0, scale), "bp_no_decay": ("backprop", None, 0, scale),
                 **{k: ("sd", k, 0, scale) for k in SD_STEPS}}
        res = timed_map_tasks(client, task, calls, store, timings, "runs")
        res["decay"] = decay_from(res["hmc"])
        res.update(timed_map_tasks(client, task, {"bp_decay": ("backprop", res["decay"], 0, scale)}, store, timings,
                                   "bp_decay"))
    wall = sum(json.loads(timings.read_text()).values())
    text = report(res, args.quick, wall)
    (out / "neal1993.md").write_text(text)
    figure(res, out / "neal1993.png")
    if args.docs:
        (ROOT / "docs" / "neal1993.md").write_text(text)
        (ROOT / "docs" / "neal1993.json").write_text(json.dumps(summary(res), indent=1))
        figure(res, ROOT / "docs" / "img" / "neal1993.png")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
