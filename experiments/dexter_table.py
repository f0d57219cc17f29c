"""Dexter (Wang thesis section 4.2, Tables 4.2-4.3, Figs 4.4-4.6): the bandit-tuned
and a hand-tuned 295-20-8-1 network on stratified 200/100 splits of Dexter's
300 training cases (the challenge's validation and test sets are not
available), beside L2 logistic regression and a linear SVM (scikit-learn,
regularisation by inner 5-fold CV) on the same 295 selected features and on all
20,000.

Run: python experiments/dexter_table.py [--quick] [--runs DIR] [--splits 1 2 3] [--docs]

The network runs are ordinary run directories, DIR/<config>_split<s> (default
DIR: runs/dexter, or sweeps/dexter_quick with --quick), made from
configs/dexter_{bandit,human}[_quick].yaml with data.split.seed = s; finished
ones are read, not rerun (a full-size run takes 22 to 47 minutes on 2 cores).
``--docs`` writes docs/dexter_table.md and its figures.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from adaptive_hmc.config import read_config
from adaptive_hmc.data import load_split, select_features
from adaptive_hmc.front.experiment import run_experiment
from adaptive_hmc.models.predictive import predicted_labels
from adaptive_hmc.front.reports import diagnostics
from adaptive_hmc.rundir.finished_run import read_run

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {"bandit": "dexter_bandit", "human": "dexter_human"}


def split_of(seed: int) -> dict:
    """The configs' data.split with seed ``seed``: 200 stratified training cases, the other 100 evaluate."""
    return {"data.split": {"train": 200, "seed": int(seed), "stratify": True}}
#: Thesis Table 4.2 (the challenge's validation set, 300 cases).
THESIS = {"New-Bayes-nn-sel (Neal & Zhang)": "0.0800", "adaptive HMC, mean of the 10 networks": "0.0730 ± 0.0096",
          "adaptive HMC, median of the 10 networks": "0.0700", "adaptive HMC, majority vote": "0.0667"}


def run_network(kind: str, split: int, runs: Path, quick: bool) -> Path:
    name = CONFIGS[kind] + ("_quick" if quick else "")
    out = runs / f"{name}_split{split}"
    if not (out / "summary.json").is_file():
        path = ROOT / "configs" / f"{name}.yaml"
        cfg = read_config(path, split_of(split))
        run_experiment(cfg, out, source=str(path), resume=(out / "checkpoint.npz").is_file(), quiet=True)
    return out


def analyse(d: Path) -> dict:
    """Error rates of a run on its evaluation cases: the pooled model average,
    each CV replica's own average (its network), their majority vote (ties to
    the pooled average), the mean log predictive probability, and the ESS of
    the evaluation predictions (ArviZ's bulk ESS across the replicas, median
    over cases, also per 1000 of every gradient the run computed: what the
    sampling buys)."""
    run = read_run(d)
    P, C = run.predictions["history_pred"], run.predictions["history_count"]     # (S, R, 1, N), (S, R)
    y = run.predictions["Y_test"][:, 0].astype(int)
    rows = run.chain_indices("replicas")
    per = P[:, rows].sum(axis=0)[:, 0] / C[:, rows].sum(axis=0)[:, None]           # (R, N) probability of 1
    pooled = P[:, rows].sum(axis=(0, 1))[0] / C[:, rows].sum()
    labels = (per > 0.5).astype(int)
    votes = labels.sum(axis=0)
    majority = np.where(2 * votes == len(rows), pooled > 0.5, 2 * votes > len(rows)).astype(int)
    each = (labels != y).mean(axis=1)
    s = run.summary
    d = diagnostics(run)
    t = d.get("test", {}).get("test")
    ess = (t["ess_bulk"]["median"], t["ess_per_1000_gradients"]["median"]) if t else (float("nan"),) * 2
    return {"pooled": float((predicted_labels(pooled[None]) != y).mean()), "each_mean": float(each.mean()),
            "each_median": float(np.median(each)), "majority": float((majority != y).mean()),
            "mlpd": float(s["test_mlpd"]["test"]), "acceptance": s["acceptance"],
            "low_acceptance_share": s["low_acceptance_share"], "divergences": s["divergences"],
            "leapfrog_steps": s["leapfrog_steps"], "wall_s": s["wall_s"], "final_action": s["final_action"],
            "ess": ess[0], "ess_per_1000_grad": ess[1], "ess_draws": d.get("draws")}


def baselines(split: int, quick: bool) -> dict:
    """L2 logistic regression and a linear SVM on the split's training cases,
    regularisation chosen by inner stratified 5-fold CV, on log(1 + count)
    inputs scaled by their largest training value: the 295 selected features
    (chosen on the training cases, as the network's) and all 20,000."""
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MaxAbsScaler
    from sklearn.svm import LinearSVC
    cfg = read_config(ROOT / "configs" / f"{CONFIGS['bandit']}.yaml", split_of(split))
    sp_ = load_split(dataset="dexter", split=cfg.data.split.model_dump(), likelihood="logistic")
    (X, Y), (Xt, Yt) = sp_.train, sp_.tests["test"]
    y, yt = Y[:, 0].astype(int), Yt[:, 0].astype(int)
    cols = select_features(X, y, cfg.data.select_features)
    cv = StratifiedKFold(5, shuffle=True, random_state=split)
    grid = np.logspace(-3, 2, 4 if quick else 11)
    out = {}
    import warnings
    warnings.filterwarnings("ignore", category=FutureWarning, module="sklearn")   # API-transition notices
    for feats, c in (("295 selected", cols), ("all 20,000", np.arange(X.shape[1]))):
        A, At = sp.csr_matrix(np.log1p(X[:, c])), sp.csr_matrix(np.log1p(Xt[:, c]))
        models = {"L2 logistic regression": make_pipeline(MaxAbsScaler(), LogisticRegressionCV(
                      Cs=grid, cv=cv, max_iter=5000, scoring="accuracy")),
                  "linear SVM": make_pipeline(MaxAbsScaler(), GridSearchCV(LinearSVC(max_iter=20000), {"C": grid},
                                                                           cv=cv))}
        for name, m in models.items():
            m.fit(A, y)
            out[f"{name}, {feats}"] = float((m.predict(At) != yt).mean())
    return out


def _ms(v) -> str:
    v = np.asarray(v, float)
    return f"{v.mean():.4f} ± {v.std(ddof=1):.4f}" if v.size > 1 else f"{v.mean():.4f}"


def report(nets: dict, base: dict, splits, quick: bool, seconds: float | None) -> str:
    default = [1] if quick else [1, 2, 3]
    flags = (" --quick" if quick else "") + ("" if list(splits) == default else
                                             " --splits " + " ".join(map(str, splits)))
    lines = ["# Dexter: the thesis's classification experiment (section 4.2)", "",
             "Generated by `python experiments/dexter_table.py" + flags + " --docs`; do "
             "not edit. The challenge's validation and test sets are not available: the 300 training cases are "
             f"split, stratified, into 200 training and 100 evaluation cases, {len(splits)} different split(s) "
             f"(seeds {', '.join(map(str, splits))}); everything below is on those evaluation cases, **a different "
             "evaluation set from the thesis's** (its Table 4.2 is the challenge's 300 validation cases). 295 "
             "features selected on the training cases by a chi-squared test of presence against the label, "
             "log(1 + count) inputs, a 295-20-8-1 tanh network with a logistic output (6097 parameters), "
             "hierarchical priors with ARD on the inputs, 10 CV replicas on the 200 training cases, each "
             + ("8 super-transitions of 2000 leapfrog steps (quick form)" if quick else
                "160 super-transitions of 20,000 leapfrog steps (3.2 million, as Neal's entry)")
             + ". The bandit tunes (eps, L) in [0.01, 0.61] x [20, 2000] with the package's default reward "
             "(ESJD/sqrt(L)); the hand-tuned run uses eps 0.2, L 100, window 10 throughout. Predictions from each "
             "chain's samples after its first " + ("4 super-transitions" if quick else "6000 iterations") + ".", "",
             *([] if quick or len(splits) >= 3 else
               [f"**{len(splits)} split(s) only**: the protocol asks for at least three; each further split is a "
                "full-size bandit run and a hand-tuned one (25 to 47 and 22 to 33 minutes on this shared 2-core "
                "machine). With 100 evaluation cases one error is 0.01 and the standard error of a rate near 0.06 is "
                "about 0.024: the differences below are within it.", ""]),
             "## Thesis Table 4.2 (validation set) and ours (evaluation cases)", "",
             "| method | thesis (validation set) | here: error rate, mean ± sd over splits |", "|---|---|---|"]
    rows = [("New-Bayes-nn-sel (Neal & Zhang)", "0.0800", "-")]
    for kind, label in (("bandit", "adaptive HMC (bandit)"), ("human", "hand-tuned HMC (FBM style)")):
        rs = [nets[kind][s] for s in splits if s in nets.get(kind, {})]
        if not rs:
            continue
        th = kind == "bandit"
        rows += [(f"{label}, model average of the 10 replicas", "-", _ms([r["pooled"] for r in rs])),
                 (f"{label}, mean of the 10 networks", THESIS["adaptive HMC, mean of the 10 networks"] if th else "-",
                  _ms([r["each_mean"] for r in rs])),
                 (f"{label}, median of the 10 networks", THESIS["adaptive HMC, median of the 10 networks"] if th
                  else "-", _ms([r["each_median"] for r in rs])),
                 (f"{label}, majority vote", THESIS["adaptive HMC, majority vote"] if th else "-",
                  _ms([r["majority"] for r in rs])),
                 (f"{label}, mean log predictive probability", "-", _ms([r["mlpd"] for r in rs]))]
    for name in sorted({k for b in base.values() for k in b}):
        rows.append((name, "-", _ms([base[s][name] for s in splits if s in base])))
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    lines += ["", "## The runs", "", "| run | split | acceptance | share of super-transitions with acceptance < 0.2 "
              "| divergences | final (eps, L) | ESS of the predictions (per 1000 gradients) | wall s |",
              "|---|---|---|---|---|---|---|---|"]
    for kind in ("bandit", "human"):
        for s in splits:
            r = nets.get(kind, {}).get(s)
            if r:
                a = r["final_action"]
                how = "" if r["ess_draws"] == "samples" else f"; {r['ess_draws']}"
                lines.append(f"| {kind} | {s} | {r['acceptance']:.2f} | {r['low_acceptance_share']:.2f} | "
                             f"{r['divergences']} | ({a['step_factor']:.3g}, {a['num_steps']}) | {r['ess']:.0f} "
                             f"({r['ess_per_1000_grad']:.3f}{how}) | {r['wall_s']:.0f} |")
    lines += ["", "ESS: ArviZ's bulk ESS of each replica's evaluation predictions (the network's logit at each "
              "evaluation case from the kept samples, spaced by their weights; from one draw per super-transition, "
              "its mean probability, where the cell says so), median over cases and over the 10 replicas, and that "
              "per 1000 of the replica's gradient evaluations over the whole run. Wall s: each run's sampling time "
              "as it ran (longer when it shared the cores with other runs).", "",
              "## Figures (thesis Figs 4.4-4.6), first split's bandit run", "",
              "![Reward surface with the tried actions (Fig. 4.4)](img/dexter_reward_surface.png)", "",
              "![Evaluation error against the number of samples (Fig. 4.5)](img/dexter_running_error.png)", "",
              "![Reward and acquisition along the slice eps = 0.22 (Fig. 4.6)](img/dexter_slice.png)", ""]
    if seconds is not None:
        lines += [f"Wall time of this script's last run: {seconds:.0f} s (runs it found finished in their "
                  "directories are read, not timed; each run's own time is in the table).", ""]
    return "\n".join(lines)


def slice_figure(d: Path, path: Path, eps: float = 0.22):
    """The GP's mean reward +- 1 sd and the acquisition along L at step factor ``eps`` (thesis Fig. 4.6)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t = read_run(d).tuner()
    L = np.linspace(*t.bounds["num_steps"], 300)
    A = np.column_stack([np.full_like(L, eps), L])
    m, s = t.predict(A)
    u = t.acquisition(A)
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(6.5, 6), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    a1.plot(L, m, color="C3", label="GP mean")
    a1.fill_between(L, m - s, m + s, color="C0", alpha=0.3, label="± 1 sd")
    a1.set_ylabel("reward (ESJD/sqrt(L))")
    a1.set_title(f"Slice at step factor {eps}")
    a1.legend(fontsize=8)
    a2.plot(L, u, color="k")
    a2.set_ylabel("acquisition")
    a2.set_xlabel("trajectory length L")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def figures(d: Path, img: Path, prefix: str = "dexter"):
    from adaptive_hmc.front.plots import reward_surface, running_error
    run = read_run(d)
    reward_surface(run, img / f"{prefix}_reward_surface.png")
    running_error(run, img / f"{prefix}_running_error.png")
    slice_figure(d, img / f"{prefix}_slice.png")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the quick configs on one split")
    ap.add_argument("--runs", help="directory of the network runs (default: runs/dexter, sweeps/dexter_quick)")
    ap.add_argument("--splits", type=int, nargs="+", help="split seeds (default: 1 2 3; --quick: 1)")
    ap.add_argument("--kinds", nargs="+", choices=sorted(CONFIGS), default=sorted(CONFIGS),
                    help="which network runs (default: both)")
    ap.add_argument("--docs", action="store_true", help="write docs/dexter_table.md and docs/img/dexter_*.png")
    args = ap.parse_args(argv)
    splits = args.splits or ([1] if args.quick else [1, 2, 3])
    runs = Path(args.runs or ("sweeps/dexter_quick" if args.quick else "runs/dexter"))
    runs.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    nets = {k: {s: analyse(run_network(k, s, runs, args.quick)) for s in splits} for k in args.kinds}
    base = {s: baselines(s, args.quick) for s in splits}
    seconds = time.perf_counter() - t0
    text = report(nets, base, splits, args.quick, seconds)
    (runs / "dexter_table.md").write_text(text)
    (runs / "dexter_table.json").write_text(json.dumps({"networks": nets, "baselines": base}, indent=1))
    first = runs / f"{CONFIGS['bandit']}{'_quick' if args.quick else ''}_split{splits[0]}"
    if "bandit" in args.kinds:
        figures(first, runs)
    if args.docs:
        (ROOT / "docs" / "dexter_table.md").write_text(text)
        if "bandit" in args.kinds:
            figures(first, ROOT / "docs" / "img")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
