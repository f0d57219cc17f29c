"""Rasmussen (1996), Fig. 1: five UCI regression tasks, training sets of 1/8,
1/4, 1/2 and all of the training half, test errors normalised by the variance
of the test targets; MC hand-tuned (his recipe) and bandit-tuned (ours) beside
a GP with ARD, ensembles of nets chosen by cross-validation and linear
regression.

Run: python experiments/rasmussen1996.py [--quick] [--out DIR] [--workers N | --scheduler ADDR] [--docs]

The MC runs are a sweep (``adaptive-hmc sweep``) of configs/rasmussen1996_hand.yaml
and configs/rasmussen1996_bandit.yaml over the 15 partitions of each task; the
baselines run as Dask tasks on the same cluster. Everything finished is kept
in OUT (default: sweeps/rasmussen1996[_quick]) and read, not redone, when the
script runs again. ``--docs`` writes docs/rasmussen1996.md and its figure.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import yaml

from adaptive_hmc.data import Standardizer, load_split
from adaptive_hmc.front.sweep import dask_session, map_tasks, run_sweep
from adaptive_hmc.tasks import ENCODINGS, TASKS, TRAIN_CASES

ROOT = Path(__file__).resolve().parents[1]
SPLIT_SEED = 1996
SIZES = (8, 4, 2, 1)                      # parts of the training half, smallest training sets first
METHODS = {"mc_hand": "MC, hand-tuned (his eps 0.2, L 200)", "mc_bandit": "MC, bandit-tuned (ours)",
           "gp": "GP with ARD", "ensemble": "ensembles chosen by CV", "linear": "linear regression"}
DECAYS = (0.0, 0.01, 0.04, 0.16, 0.64, 2.56)


def hidden_units(n_cases: int, n_inputs: int) -> int:
    """His rule: at least as many parameters as training cases (direct
    connections and biases counted), at least 4 hidden units."""
    return max(4, math.ceil((n_cases - n_inputs - 1) / (n_inputs + 2)))


def partitions(tasks, sizes):
    """(task, parts, part) of every training set."""
    return [(t, p, j) for t in tasks for p in sizes for j in range(p)]


def split_of(task, parts, part):
    return {"train": TRAIN_CASES[task], "seed": SPLIT_SEED, "parts": parts, "part": part}


def cases(task, parts, part):
    s = load_split(dataset=task, split=split_of(task, parts, part))
    return s.train, s.tests["test"]


def label(task, parts, part):
    return f"{task}-n{TRAIN_CASES[task] // parts}-p{part}"


def seeded(seeds) -> bool:
    """Whether the MC runs use seeds other than the configs' own (1): the sweep then grids run.seed and
    each run's name ends in its seed."""
    return list(seeds) != [1]


def run_dirs(sweep_dir: Path, tasks, sizes, seeds=(1,)):
    """(method, task, parts, part, seed, run directory) of every MC run (see :func:`seeded`)."""
    for t, p, j in partitions(tasks, sizes):
        for s in seeds:
            for m in ("hand", "bandit"):
                name = f"rasmussen1996_{m}__{label(t, p, j)}" + (f"__seed={s}" if seeded(seeds) else "")
                yield m, t, p, j, s, sweep_dir / "runs" / name


def write_sweep(out: Path, tasks, sizes, quick: bool, seeds=(1,)) -> Path:
    entries = []
    for t, p, j in partitions(tasks, sizes):
        (X, _), _ = cases(t, p, j)
        entries.append({"label": label(t, p, j), "data.dataset": t, "data.split": split_of(t, p, j),
                        "model.hidden": [hidden_units(len(X), X.shape[1])]})
    spec = {"name": out.name, "base": [str(ROOT / "configs" / f"rasmussen1996_{m}.yaml") for m in ("hand", "bandit")],
            "grid": {"run.budget": [1000], "run.super_transitions": [6], "run.checkpoint_every": [1]} if quick else {},
            "cases": entries}
    if seeded(seeds):
        spec["grid"]["run.seed"] = [int(s) for s in seeds]
    out.mkdir(parents=True, exist_ok=True)
    path = out / "sweep_file.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


# -- baselines (each a Dask task) ---------------------------------------------------------

def baseline(task, parts, part, method, seed=0) -> float:
    """Normalised test error of a baseline on one training set."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    (X, y), (Xt, yt) = cases(task, parts, part)
    y, yt = y[:, 0], yt[:, 0]
    sx, sy = Standardizer.fit(X, inputs=True), Standardizer.fit(y[:, None])
    Z, Zt, v = sx.transform(X), sx.transform(Xt), sy.transform(y[:, None])[:, 0]
    warnings.simplefilter("ignore", ConvergenceWarning)
    warnings.simplefilter("ignore", UserWarning)
    if method == "linear":
        from sklearn.linear_model import LinearRegression
        pred = LinearRegression().fit(Z, v).predict(Zt)
    elif method == "gp":
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
        kernel = ConstantKernel(1.0, (1e-3, 1e3)) * RBF(np.ones(Z.shape[1]), (1e-2, 1e3)) + \
            ConstantKernel(0.1, (1e-5, 1e2)) + WhiteKernel(0.1, (1e-6, 1e1))
        gp = GaussianProcessRegressor(kernel, n_restarts_optimizer=5, random_state=seed).fit(Z, v)
        pred = gp.predict(Zt)
    else:
        pred = _ensemble(Z, v, Zt, seed)
    pred = sy.inverse(pred[:, None])[:, 0]
    return float(np.mean((pred - yt) ** 2) / np.var(yt))


def _net(h, decay, seed):
    from sklearn.linear_model import Ridge
    from sklearn.neural_network import MLPRegressor
    if h == 0:
        return Ridge(alpha=decay + 1e-8)
    return MLPRegressor(hidden_layer_sizes=(int(h),), activation="tanh", solver="lbfgs", alpha=decay, max_iter=2000, random_state=seed)


def _ensemble(Z, v, Zt, seed):
    """His "common practice": hidden sizes from 0 (linear) up to as many
    weights as cases x 6 weight decays, each scored on 5 random validation
    thirds; then 10 nets of the best on all cases, averaged."""
    n, d = Z.shape
    top = max(1, (n - 1) // (d + 2))
    sizes = sorted(set(np.round(np.linspace(0, top, 6)).astype(int)))
    rng = np.random.default_rng(seed)
    splits = [rng.permutation(n) for _ in range(5)]
    best, best_err = None, np.inf
    for h in sizes:
        for decay in DECAYS:
            err = 0.0
            for k, order in enumerate(splits):
                val, fit = order[:max(1, n // 3)], order[max(1, n // 3):]
                m = _net(h, decay, seed + k).fit(Z[fit], v[fit])
                err += np.mean((m.predict(Z[val]) - v[val]) ** 2)
            if err < best_err:
                best, best_err = (h, decay), err
    return np.mean([_net(*best, seed + 100 + r).fit(Z, v).predict(Zt) for r in range(10)], axis=0)


def run_baselines(client, tasks, sizes, store: Path) -> dict:
    calls = {f"{label(t, p, j)}/{m}": (t, p, j, m) for t, p, j in partitions(tasks, sizes)
             for m in ("gp", "ensemble", "linear")}
    return map_tasks(client, baseline, calls, store)


# -- collecting and reporting -------------------------------------------------------------

def mc_error(run_dir: Path) -> float:
    p = np.load(run_dir / "predictions.npz")
    y = p["Y_test"]
    return float(np.mean((p["test/mean"] - y) ** 2) / np.var(y))


def collect(sweep_dir: Path, baselines: dict, tasks, sizes, seeds=(1,)) -> dict:
    """{task: {n_cases: {method: [errors over the partitions (and the MC runs' seeds)]}}}"""
    res = {}
    for m, t, p, j, _, d in run_dirs(sweep_dir, tasks, sizes, seeds):
        if (d / "predictions.npz").is_file():
            res.setdefault(t, {}).setdefault(TRAIN_CASES[t] // p, {}).setdefault(f"mc_{m}", []).append(mc_error(d))
    for t, p, j in partitions(tasks, sizes):
        cell = res.setdefault(t, {}).setdefault(TRAIN_CASES[t] // p, {})
        for m in ("gp", "ensemble", "linear"):
            if f"{label(t, p, j)}/{m}" in baselines:
                cell.setdefault(m, []).append(baselines[f"{label(t, p, j)}/{m}"])
    return res


def chain_figures(sweep_dir: Path, tasks, sizes, seeds=(1,)) -> dict:
    """What each MC method's chains buy, from each run's summary and log: the median ESS per 1000 gradients
    (every gradient, probes included) of the test predictions, the paired ratio bandit / hand of each
    training set and seed, and after the tuner's warm-up the runs with a super-transition accepting under
    5%, the divergent share of all trajectories, the runs above 0.5% divergent, and the probes made and
    failed."""
    out, ess = {}, {}
    for m, t, p, j, s, d in run_dirs(sweep_dir, tasks, sizes, seeds):
        if not (d / "summary.json").is_file():
            continue
        ess[(m, t, p, j, s)] = json.loads((d / "summary.json").read_text())[
            "diagnostics"]["test"]["test"]["ess_per_1000_gradients"]["median"]
        warmup = yaml.safe_load((d / "config.resolved.yaml").read_text())["tuner"]["warmup_super_transitions"]
        log = [json.loads(line) for line in (d / "log.jsonl").read_text().splitlines()]
        after = [r for r in log if r["i"] >= warmup]
        n = sum(r["iterations"] * len(r["acceptance"]) for r in after)
        div = sum(r["divergences"] for r in after)
        probes = [q for r in log for q in r.get("probes", [])]
        f = out.setdefault(m, {"runs": 0, "stuck_runs": 0, "divergent": 0, "trajectories": 0, "over": 0,
                               "probes": 0, "failed_probes": 0})
        f["runs"] += 1
        f["stuck_runs"] += any(min(r["acceptance"]) < 0.05 for r in after)
        f["divergent"] += div
        f["trajectories"] += n
        f["over"] += div > 0.005 * n
        f["probes"] += len(probes)
        f["failed_probes"] += sum(not q["passed"] for q in probes)
    for m, f in out.items():
        f["ess_median"] = float(np.median([v for k, v in ess.items() if k[0] == m]))
    ratios = [v / ess[("hand", *k[1:])] for k, v in ess.items() if k[0] == "bandit" and ("hand", *k[1:]) in ess]
    if ratios:
        out["paired"] = {"runs": len(ratios), "median": float(np.median(ratios)),
                         "geometric_mean": float(np.exp(np.mean(np.log(ratios)))),
                         "bandit_at_least_hand": float(np.mean(np.array(ratios) >= 1))}
    return out


def summarise(res: dict, tasks, sizes) -> dict:
    """Means, sd of the means, and the geometric mean over tasks per size index."""
    out = {"tasks": {}, "geo": {}}
    for t in tasks:
        for i, p in enumerate(sizes):
            n = TRAIN_CASES[t] // p
            for m, v in res[t][n].items():
                se = float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else None
                out["tasks"].setdefault(t, {}).setdefault(m, []).append((n, float(np.mean(v)), se))
    for m in METHODS:
        geo = []
        for i in range(len(sizes)):
            vals = [out["tasks"][t][m][i][1] for t in tasks if m in out["tasks"][t]]
            geo.append(float(np.exp(np.mean(np.log(vals)))) if len(vals) == len(tasks) else None)
        out["geo"][m] = geo
    return out


def report(summary: dict, tasks, sizes, quick: bool, seconds: dict, chains: dict = None, seeds=(1,)) -> str:
    frac = {8: "1/8", 4: "1/4", 2: "1/2", 1: "all"}
    lines = ["# Rasmussen (1996): five UCI regression tasks", "",
             "Generated by `python experiments/rasmussen1996.py" + (" --quick" if quick else "") +
             (" --seeds " + " ".join(map(str, seeds)) if seeded(seeds) else "") + " --docs`" +
             "; do not edit. Squared test error normalised by the variance of the test targets (his Fig. 1): "
             "1.0 is the error of predicting the test mean. Mean over the disjoint training sets of each size" +
             (f" and, for the MC methods, the run seeds {', '.join(map(str, seeds))} (one run of each method a "
              "training set and seed)" if seeded(seeds) else "") +
             ", ± one sd of that mean (none where a single run).", "",
             "![Normalised test error against training-set size, one panel per task and the geometric mean]"
             "(rasmussen1996.png)", ""]
    lines += [f"## Geometric mean over the {len(tasks)} tasks (his summary)", "",
              "| method | " + " | ".join(f"{frac[p]} of the training half" for p in sizes) + " |",
              "|---|" + "---|" * len(sizes)]
    geo = summary["geo"]
    best = [min((geo[m][i], m) for m in METHODS if geo[m][i] is not None)[1] for i in range(len(sizes))]
    for m, name in METHODS.items():
        cells = ["-" if v is None else (f"**{v:.3f}**" if best[i] == m else f"{v:.3f}") for i, v in enumerate(geo[m])]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "## Per task", ""]
    for t in tasks:
        rows = summary["tasks"][t]
        ns = [n for n, _, _ in rows["mc_hand"]]
        lines += [f"### {t} ({TRAIN_CASES[t]} training / rest test cases)", "", ENCODINGS[t], "",
                  "| method | " + " | ".join(f"n = {n}" for n in ns) + " |", "|---|" + "---|" * len(ns)]
        for m, name in METHODS.items():
            if m in rows:
                lines.append(f"| {name} | " + " | ".join(f"{mu:.3f}" + ("" if se is None else f" ± {se:.3f}")
                                                         for _, mu, se in rows[m]) + " |")
        lines.append("")
    if chains and {"hand", "bandit"} <= set(chains):
        lines += ["## What the chains buy", "",
                  "Per MC method, over its runs: the median ESS of the test predictions per 1000 gradients "
                  "(every gradient of the run, probes included); after the tuner's warm-up, the runs with a "
                  "super-transition in which the chain accepted under 5%, the divergent share of all "
                  "trajectories, and the runs above 0.5% divergent; the probes of larger untried steps.", "",
                  "| method | runs | ESS/1000 grad, median | runs with a chain under 5% | divergent | "
                  "runs > 0.5% divergent | probes (failed) |", "|---|---|---|---|---|---|---|"]
        for m in ("hand", "bandit"):
            f = chains[m]
            lines.append(f"| {METHODS['mc_' + m]} | {f['runs']} | {f['ess_median']:.3f} | {f['stuck_runs']} | "
                         f"{f['divergent'] / max(f['trajectories'], 1):.3%} | {f['over']} | "
                         f"{f['probes']} ({f['failed_probes']}) |")
        pr = chains.get("paired")
        lines += ["", f"Bandit against hand, median ESS: {chains['bandit']['ess_median'] / chains['hand']['ess_median']:.2f}"
                  + (f"; run by run (the same training set and seed, {pr['runs']} pairs): median ratio "
                     f"{pr['median']:.2f}, geometric mean {pr['geometric_mean']:.2f}, the bandit at least the "
                     f"hand recipe's in {pr['bandit_at_least_hand']:.0%} of them" if pr else "") + ".", ""]
    lines += ["## Wall time", "", "On this machine (2 cores, one Dask worker process each): " +
              ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items()) + ".", ""]
    return "\n".join(lines)


def _plain_ticks(ax, x=True):
    """Log axes labelled 0.1, 0.2, 0.5, 1, ... instead of powers of ten."""
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    for axis in (ax.xaxis, ax.yaxis) if x else (ax.yaxis,):
        axis.set_major_formatter(FormatStrFormatter("%.3g"))
        axis.set_minor_formatter(NullFormatter())


def figure(summary: dict, tasks, sizes, path: Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5))
    style = {"mc_hand": ("C0", "o"), "mc_bandit": ("C3", "s"), "gp": ("C2", "^"), "ensemble": ("C1", "v"),
             "linear": ("0.5", "x")}
    for ax, t in zip(axes.flat, tasks):
        for m, name in METHODS.items():
            rows = summary["tasks"][t].get(m)
            if not rows:
                continue
            n, mu, se = zip(*rows)
            ax.errorbar(n, mu, yerr=[0 if s is None else s for s in se], label=name, color=style[m][0],
                        marker=style[m][1], capsize=3)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(n)
        _plain_ticks(ax)
        ax.set_title(t)
        ax.set_xlabel("training cases")
        ax.set_ylabel("test error / test variance")
    ax = axes.flat[len(tasks)]
    for m, name in METHODS.items():
        g = summary["geo"][m]
        if None not in g:
            ax.plot([f"1/{p}" if p > 1 else "all" for p in sizes], g, label=name, color=style[m][0],
                    marker=style[m][1])
    ax.set_yscale("log")
    _plain_ticks(ax, x=False)
    ax.set_title("geometric mean over the tasks")
    ax.set_xlabel("share of the training half")
    ax.legend(fontsize=8)
    for a in axes.flat[len(tasks) + 1:]:
        a.axis("off")
    fig.suptitle("Rasmussen (1996) tasks: normalised squared test error")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two tasks, training sets of a quarter and of all "
                                                         "the cases, short runs: a check that everything works")
    ap.add_argument("--out", help="directory for the sweep and the baselines (default: sweeps/rasmussen1996)")
    ap.add_argument("--workers", type=int, help="local Dask worker processes (default: one per core)")
    ap.add_argument("--scheduler", help="address of a running Dask scheduler instead of a local cluster")
    ap.add_argument("--docs", action="store_true", help="write docs/rasmussen1996.md and docs/img/rasmussen1996.png")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1], help="run seeds of the MC runs (each training "
                    "set runs once per seed and method; default: the configs' seed 1)")
    args = ap.parse_args(argv)
    tasks = ("cpu", "servo") if args.quick else tuple(TASKS)
    sizes = (4, 1) if args.quick else SIZES
    out = Path(args.out or f"sweeps/rasmussen1996{'_quick' if args.quick else ''}")
    sweep_file = write_sweep(out, tasks, sizes, args.quick, args.seeds)
    timings = out / "timings.json"        # wall seconds of the invocation that did each phase's work
    seconds = json.loads(timings.read_text()) if timings.is_file() else {}
    with dask_session(args.scheduler, args.workers) as client:
        t0 = time.perf_counter()
        before = len(list((out / "sweep" / "runs").glob("*/summary.json")))
        status = run_sweep(sweep_file, out / "sweep", resume=True, client=client)
        if len(list((out / "sweep" / "runs").glob("*/summary.json"))) > before:
            seconds["MC sweep"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        n_before = len(json.loads((out / "baselines.json").read_text())) if (out / "baselines.json").is_file() else 0
        baselines = run_baselines(client, tasks, sizes, out / "baselines.json")
        if len(baselines) > n_before:
            seconds["baselines"] = time.perf_counter() - t0
        timings.write_text(json.dumps(seconds))
    summary = summarise(collect(out / "sweep", baselines, tasks, sizes, args.seeds), tasks, sizes)
    chains = chain_figures(out / "sweep", tasks, sizes, args.seeds)
    (out / "summary.json").write_text(json.dumps({**summary, "chains": chains}, indent=1))
    text = report(summary, tasks, sizes, args.quick, seconds, chains, args.seeds)
    (out / "rasmussen1996.md").write_text(text)
    figure(summary, tasks, sizes, out / "rasmussen1996.png")
    if args.docs:
        (ROOT / "docs" / "rasmussen1996.md").write_text(text.replace("(rasmussen1996.png)", "(img/rasmussen1996.png)"))
        figure(summary, tasks, sizes, ROOT / "docs" / "img" / "rasmussen1996.png")
    print(text)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
