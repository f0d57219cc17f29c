"""Tuning study: hand-tuned grids against the GP bandit at equal compute.

For each target, (a) a grid of hand settings, 4 step factors x 3 trajectory
lengths, as a user who does not know the answer would try, each cell a run of
the same leapfrog budget per chain as the bandit; (b) the bandit with the
thesis's reward model (minus the CV error, standardised, linear axes); (c) the
bandit with the package's default (ESJD/sqrt(L), rank transform, log step
axis). Reported per run: the share of post-warm-up super-transitions whose
mean acceptance is below 0.2, divergences, test error, and the ESS of the test
predictions per 1000 gradient evaluations (ArviZ bulk ESS of the per-sample
predictions, median over test cases; full-data chain and CV replicas apart).

Targets:
  robot_arm       configs/robot_arm_bandit.yaml (hierarchical priors); grid cells on the config's 8 chains of
                  the posterior, as the bandit (the ESS of one chain misses what differs between chains)
  robot_arm_fixed configs/robot_arm_fixed_hyper_bandit.yaml (every hyperparameter fixed)
  gauss1, gauss2  the thesis's bivariate Gaussians (chapter 2: covariance [[1, .99], [.99, 1]] and
                  [[2, .99], [.99, 2]]), plain HMC with an absolute step size, one chain, the ESJD reward;
                  no predictive task: the ESS is the smallest of the two coordinates' and their squares'
                  (the means and the variances; the coordinates alone are reported too)

Run: python experiments/tuning_study.py [--targets ...] [--seeds 1 2 3] [--grid-seeds 1] [--runs runs/tuning_study]
     [--out docs/tuning_study.md] [--quick] [--workers N | --scheduler ADDRESS]
The robot-arm runs go through the normal run directories (RUNS/TARGET/NAME-seedS), each a Dask task on one
thread (a local cluster of one worker per core by default); finished ones are read, not re-run, and
interrupted ones resume. The Gaussian targets have no config section (the configs describe
networks on data) and run through the Python API: the same BanditTuner, the same ESJD reward.
--quick shrinks every target (a few super-transitions of a small budget) to check the pipeline.
"""
from __future__ import annotations

import argparse
import sys
import json
import math
import time
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np

from adaptive_hmc.config import read_config
from adaptive_hmc.front.experiment import run_experiment
from adaptive_hmc.models.gaussian import GaussianTarget
from adaptive_hmc.engine.network_options import DEFAULT_WEIGHT_BY
from adaptive_hmc.engine.super_transition import iterations
from adaptive_hmc.engine.driver import drive
from adaptive_hmc.engine.chain_set import ChainSetBase
from adaptive_hmc.engine.runner import Plan
from adaptive_hmc.engine.super_transition import SuperTransitionResult
from adaptive_hmc.diagnostics import batch_means_mcse, compute_spaced, draws_ess
from adaptive_hmc.front.reports import diagnostics
from adaptive_hmc.rundir.finished_run import read_run
from adaptive_hmc.rundir.results import RunDir
from adaptive_hmc.samplers.chain import init_state, make_hmc, new_record
from adaptive_hmc.samplers.settings import hmc_settings
from adaptive_hmc.front.sweep import dask_session, map_tasks
from adaptive_hmc.tuners import BanditOptions, BanditTuner, FixedTuner

ROOT = Path(__file__).resolve().parents[1]
LOW = 0.2   # a super-transition whose mean acceptance is below this counts as stuck

#: Thesis reward model: config overrides (robot arm) and BanditTuner options (Gaussians).
THESIS = {"tuner.reward": "cv", "tuner.transform": "standardize", "tuner.log_axes": [], "tuner.leave_below": None, "tuner.accept_floor": None,
          "sampler.jitter": False, "run.weight_by": "iterations"}
ROBOT = {
    "robot_arm": {"config": "robot_arm_bandit.yaml", "grid": ([0.05, 0.1, 0.2, 0.4], [100, 500, 2500])},
    "robot_arm_fixed": {"config": "robot_arm_fixed_hyper_bandit.yaml",
                        "grid": ([0.05, 0.1, 0.2, 0.4], [100, 500, 2500])},
}
GAUSS = {
    "gauss1": {"cov": [[1.0, 0.99], [0.99, 1.0]], "hand": [(0.16, 40), (0.16, 50), (0.15, 50)]},
    "gauss2": {"cov": [[2.0, 0.99], [0.99, 2.0]], "hand": [(0.16, 40), (0.16, 50), (0.15, 50)]},
}
GAUSS_GRID = ([0.03, 0.1, 0.3, 1.0], [10, 30, 100])
#: The Gaussians' action box: the step factor is the absolute step (a Gaussian run has no step heuristic).
GAUSS_BOUNDS = {"step_factor": (0.01, 1.0), "num_steps": (1, 100)}
GAUSS_SIZE = {"super_transitions": 200, "budget": 2000, "warmup": 3, "burn_in": 20}


#: The kinds of run: hand grid cells, the best of them again on more seeds (robot arm, "top"), the thesis's
#: hand settings (Gaussians), the bandit with the thesis's reward model, with the default, and with
#: calibrated step scales (robot arm).
KINDS = ("hand", "top", "thesis_hand", "thesis", "default", "calibrated")


# -- robot arm: runs through the run directories ----------------------------------------------------
#: The default with each chain's step scales calibrated to its curvature after warm-up
#: (sampler.calibrate_steps): a factor of 2 is then the stability limit, so the box reaches 2.
CALIBRATED = {"sampler.calibrate_steps": True, "tuner.bounds": {"step_factor": [0.02, 2.02], "num_steps": [20, 5020]}}


def hand_run(eps: float, L: int, seed: int, kind: str = "hand") -> tuple:
    """(label, kind, action, overrides, seed) of one robot-arm grid cell's run."""
    over = {"tuner.kind": "fixed", "tuner.step_factor": eps, "tuner.num_steps": L,
            "tuner.bounds": None, "tuner.warmup_super_transitions": 0}
    return f"hand eps={eps} L={L}", kind, (eps, L), over, seed


def best_cells(rows: list, target: str, k: int) -> list:
    """The ``k`` grid cells (eps, L) of ``target`` with the highest median ESS per gradient over their seeds."""
    grid = {}
    for r in rows:
        if r["target"] == target and r["kind"] == "hand":
            grid.setdefault(tuple(r["action"]), []).append(figure_of(r))
    return sorted(grid, key=lambda a: -np.median(grid[a]))[:k]


def robot_runs(target: str, seeds, grid_seeds, quick: bool, calibrated_seeds=(), top=(), top_seeds=(),
               thin: int = 1) -> list:
    """(label, kind, action or None, overrides, seed) of every run of a robot-arm target; ``top``: cells
    (eps, L) run again on ``top_seeds`` (their kind "top" here, "hand" in the rows); ``thin``: the runs'
    run.thin (the ESS is measured on the kept samples: with long trajectories thin 5 keeps a few a
    super-transition and the figure is a lower bound, see adaptive_hmc.rundir.verdicts.thin_limited)."""
    steps, lengths = ROBOT[target]["grid"]
    out = [hand_run(eps, L, seed) for seed in grid_seeds for eps in steps for L in lengths]
    out += [hand_run(eps, L, seed, "top") for seed in top_seeds for eps, L in top]
    for seed in seeds:
        out.append(("bandit, thesis reward model", "thesis", None, dict(THESIS), seed))
        out.append(("bandit, default", "default", None, {}, seed))
    for seed in calibrated_seeds:
        out.append(("bandit, default, calibrated steps", "calibrated", None, json.loads(json.dumps(CALIBRATED)),
                    seed))
    for _, _, _, over, _ in out:
        over.update({"run.thin": thin, "run.threads": 1})
        if over.get("tuner.reward") == "cv":
            over.update({"chains": None, "cv.folds": 8, "cv.full_chain": True})   # the config's 8 chains as folds
        if quick:
            over.update({"run.super_transitions": 12, "run.budget": 2000, "run.burn_in": {"super_transitions": 3},
                         "tuner.warmup_super_transitions": 0 if over.get("tuner.kind") == "fixed" else 2})
            if over.get("tuner.kind") == "fixed":
                over["tuner.num_steps"] = min(over["tuner.num_steps"], 500)
            else:
                top = over.get("tuner.bounds", {}).get("step_factor", [0.01, 1.01])
                over["tuner.bounds"] = {"step_factor": top, "num_steps": [20, 520]}
    return out


def robot_row(target: str, label: str, kind: str, action, over: dict, seed: int, runs: Path) -> dict:
    path = ROOT / "configs" / ROBOT[target]["config"]
    name = label.replace(" ", "_").replace(",", "").replace("=", "")
    d = RunDir(runs / target / f"{name}-seed{seed}")
    if not d.is_finished:
        cfg = read_config(path, {**over, "run.seed": seed})
        print(f"{'resuming' if d.has_checkpoint else 'running'} {target}: {label}, seed {seed}", flush=True)
        run_experiment(cfg, d.path, source=str(path), resume=d.has_checkpoint, quiet=True)
    run = read_run(d.path)
    s = run.summary
    first = diagnostics(run).get("test", {}).get(run.test_sets()[0][0])
    return {"target": target, "label": label, "kind": kind, "action": action, "seed": seed,
            "low_share": s["low_acceptance_share"], "divergences": s["divergences"],
            "trajectories": sum(e["iterations"] * len(e["acceptance"]) for e in run.log),
            "test": [s["test_mse"][n] for n, _ in run.test_sets()],
            "ess_full": first["ess_per_1000_gradients"]["median"] if first else math.nan,   # every gradient
            "ess_replicas": math.nan,
            "wall_s": s["wall_s"], "dir": str(d.path)}


# -- Gaussians: the same tuner and reward through the Python API -------------------------------------
class GaussianState(NamedTuple):
    """A Gaussian chain's state: its HMC state, its random stream's state and the super-transitions done."""

    hmc: object
    rng: dict
    n_super: int


class GaussianChain(ChainSetBase):
    """One chain of HMC (an absolute step, trajectory lengths drawn from 1..L with ``jitter``, as the package's
    tuned sampler) on N(0, ``cov``) from a start 3 sds out, as a chain set of the package's driver
    (:class:`~adaptive_hmc.engine.chain_set.ChainSetBase`: its state and :meth:`step`): the study's Gaussian runs
    take the loop every run takes (:func:`~adaptive_hmc.engine.driver.drive`), their actions' step factor the
    absolute step. Each super-transition's unit (``step``) is its positions (n_iter, 2)."""

    def __init__(self, cov, seed: int, jitter: bool):
        self.model = GaussianTarget(np.zeros(2), np.array(cov))
        self.hmc, self.jitter = make_hmc(self.model), jitter
        rng = np.random.default_rng(seed)
        start = init_state(self.model, rng.normal(size=2) * 3.0)
        self.state = GaussianState(start, rng.bit_generator.state, 0)

    def step(self, state: GaussianState, action, budget: int) -> tuple:
        """(the state after one super-transition at ``action`` from ``state``, its result); ``state`` unchanged."""
        eps, L = float(action.step_factor), int(action.num_steps)
        settings, n = hmc_settings(num_steps=L, step_size=eps, jitter=self.jitter), iterations(budget, L, self.jitter)
        rec, q, t0 = new_record(1, n, 0), np.empty((n, 2)), time.perf_counter()
        rng = np.random.default_rng()
        rng.bit_generator.state = state.rng
        hmc = state.hmc
        for t in range(n):
            hmc, info = self.hmc(hmc, settings, rng)
            for field in ("accepted", "accept_prob", "energy_error", "divergent", "num_steps", "squared_jump"):
                getattr(rec, field)[0, t] = getattr(info, field)
            rec.gradients[0, t] = info.num_steps
            q[t] = hmc.position
        result = SuperTransitionResult(state.n_super, eps, L, n, rec, time.perf_counter() - t0, q)
        return GaussianState(hmc, rng.bit_generator.state, state.n_super + 1), result


class GaussianDraws:
    """The driver's sink of a Gaussian run (:class:`~adaptive_hmc.engine.driver.Sink`): the draws after the
    burn-in and their weights (``weight_by``, as a run's samples), each told super-transition's low-acceptance
    flag, the divergences, trajectories and gradients."""

    def __init__(self, size: dict, weight_by: str):
        self.size, self.weight_by = size, weight_by
        self.draws, self.weights, self.low = [], [], []
        self.grads = self.divergences = self.trajectories = 0

    def append(self, entry, result):
        rec, n = result.record, result.n_iter
        accepted = float(rec.accepted.sum())
        if result.index >= self.size["burn_in"] and n:
            self.draws.extend(result.unit)
            # each draw weighs its super-transition's mean steps, as a run's samples (or 1: "iterations")
            self.weights.extend([1] * n if self.weight_by == "iterations" else [int(rec.num_steps.sum()) / n] * n)
        if result.index >= self.size["warmup"]:
            self.low.append(accepted / max(n, 1) < LOW)
        self.grads += int(rec.gradients.sum())
        self.divergences += int(rec.divergent.sum())
        self.trajectories += n

    def checkpoint(self, n: int, end: bool, wall: float):
        pass


def gaussian_run(cov, tuner, size: dict, seed: int, weight_by: str = DEFAULT_WEIGHT_BY, jitter: bool = False) -> dict:
    """One :class:`GaussianChain` on N(0, cov) driven by the package's driver, its actions from ``tuner``
    (rewards ESJD/sqrt(L) and acceptance told as a run's), ``size`` as :data:`GAUSS_SIZE`. Returns the
    low-acceptance share after warm-up, divergences, and the ESS per 1000 gradients of the chain's average,
    its draws weighted as ``weight_by`` says (as a run's samples, ``run.weight_by``): "ess_full" the smallest
    over the coordinates and their squares (means and variances), "ess_mean" over the coordinates alone."""
    sink = GaussianDraws(size, weight_by)
    drive(Plan(GaussianChain(cov, seed, jitter), tuner, size["budget"], warmup=size["warmup"]),
          size["super_transitions"], sink=sink)
    draws, weights, grads, low = sink.draws, sink.weights, sink.grads, sink.low
    divergences, trajectories = sink.divergences, sink.trajectories

    def ess(d):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return draws_ess(np.array(d)[None]) if len(d) >= 4 else np.zeros(np.shape(d)[1:])

    x = np.array(draws).reshape(-1, 2)[compute_spaced(weights)]
    both = ess(np.hstack([x, x ** 2]))          # the coordinates (means) and their squares (variances)
    return {"low_share": float(np.mean(low)) if low else math.nan, "divergences": int(divergences),
            "trajectories": int(trajectories), "bias_z": bias_z(x, cov),
            "ess_full": 1000 * float(both.min()) / grads, "ess_mean": 1000 * float(both[:2].min()) / grads,
            "ess_replicas": math.nan, "test": [], "wall_s": math.nan}


def bias_z(x, cov) -> float:
    """The largest over the coordinates and their squares of draws ``x`` (draws, 2) of N(0, ``cov``) of
    |estimate - truth| / its batch-means MCSE: a chain that never leaves a wrong region (e.g. one whose
    trajectories are a whole number of periods along an axis, which then never moves) has a large ESS and
    the wrong answer; inf when the draws are too few to tell."""
    if len(x) < 40:
        return math.inf
    q = np.hstack([x, x ** 2])
    truth = np.concatenate([np.zeros(2), np.diag(np.asarray(cov))])
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.abs(q.mean(axis=0) - truth) / batch_means_mcse(q)
    return float(np.nan_to_num(z, nan=math.inf, posinf=math.inf).max())


def gaussian_rows(target: str, seeds, grid_seeds, quick: bool, kinds=None) -> list:
    cfg = GAUSS[target]
    size = dict(GAUSS_SIZE, super_transitions=15, burn_in=3, warmup=2) if quick else GAUSS_SIZE
    rows = []

    def add(label, kind, action, tuner, seed, jitter=False):
        if kinds is not None and kind not in kinds:
            return
        t0 = time.perf_counter()
        r = gaussian_run(cfg["cov"], tuner, size, seed, "iterations" if kind == "thesis" else DEFAULT_WEIGHT_BY,
                         jitter)
        r.update(target=target, label=label, kind=kind, action=action, seed=seed,
                 wall_s=time.perf_counter() - t0, dir="-")
        rows.append(r)

    for seed in grid_seeds:
        for eps in GAUSS_GRID[0]:
            for L in GAUSS_GRID[1]:
                add(f"hand eps={eps} L={L}", "hand", (eps, L), FixedTuner(step_factor=eps, num_steps=L), seed)
        for eps, L in cfg["hand"]:
            add(f"thesis hand setting eps={eps} L={L}", "thesis_hand", (eps, L), FixedTuner(step_factor=eps, num_steps=L), seed)
    for seed in seeds:
        add("bandit, thesis reward model", "thesis", None,
            BanditTuner(BanditOptions.thesis(GAUSS_BOUNDS), seed), seed)
        add("bandit, default", "default", None,
            BanditTuner(BanditOptions(GAUSS_BOUNDS), seed),
            seed, jitter=True)
    return rows


# -- report --------------------------------------------------------------------------------------------
#: The bar (issue: the bandit tunes on every problem): at most 5% of super-transitions with mean acceptance
#: under 0.2, and ESS per gradient at least BAR times the best grid cell's. Cells whose trajectories diverge more than CLEAN are named apart.
BAR, CLEAN = 0.7, 0.005
#: A Gaussian run whose estimate of a mean or a variance is more than this many MCSEs from the truth has the
#: wrong answer (batch means of 40 batches: |t_39| > 5 has probability about 1e-5), and its ESS counts 0.
BIAS_Z = 5.0


def figure_of(r: dict, key: str = "ess_full") -> float:
    """A run's ESS per 1000 gradients ``key``, 0 when it has the wrong answer (:data:`BIAS_Z`; the robot
    arm's rows have no known answer to hold them to)."""
    return 0.0 if r.get("bias_z", 0.0) > BIAS_Z else r[key]


def bar(rows: list) -> dict:
    """For each target and bandit kind: the median figures over seeds and whether
    they meet the bar (low share <= 5%, ESS/1000 grad >= :data:`BAR` times the best
    grid cell's), beside the best cell whose divergent share is at most :data:`CLEAN`.
    For the Gaussians also the same figures of the coordinates alone ("mean": their
    means, without the variances)."""
    out = {}
    for target in dict.fromkeys(r["target"] for r in rows):
        mine_rows = [r for r in rows if r["target"] == target]

        def cells(key, clean=False):
            grid = {}
            for r in mine_rows:
                if r["kind"] == "hand":
                    grid.setdefault(r["label"], []).append(r)
            if clean:
                grid = {k: v for k, v in grid.items()
                        if sum(r["divergences"] for r in v) <= CLEAN * sum(r.get("trajectories", 0) for r in v)}
            c = np.array([np.median([figure_of(r, key) for r in v]) for v in grid.values()])
            return (float(np.max(c)), float(np.median(c))) if c.size else (math.nan, math.nan)

        best, median = cells("ess_full")
        clean = cells("ess_full", clean=True)[0]
        for kind in ("thesis", "default", "calibrated"):
            mine = [r for r in mine_rows if r["kind"] == kind]
            if not mine:
                continue
            low, ess = float(np.median([r["low_share"] for r in mine])), float(np.median([figure_of(r) for r in mine]))
            out[(target, kind)] = {"low_share": low, "ess": ess, "best_cell": best, "median_cell": median,
                                   "best_clean_cell": clean, "meets": low <= 0.05 and ess >= BAR * best}
            if "ess_mean" in mine[0]:
                b, m = cells("ess_mean")
                out[(target, kind)]["mean"] = {"ess": float(np.median([figure_of(r, "ess_mean") for r in mine])),
                                               "best_cell": b, "median_cell": m}
    return out


def markdown(rows: list, verdicts: dict, seconds: float, command: str, thin: int = 1) -> str:
    lines = ["# Tuning study", "",
             f"Made by `{command}` ({seconds / 60:.0f} min on 2 cores; the runs read from earlier studies or run "
             f"dirs took {sum(r['wall_s'] for r in rows if math.isfinite(r['wall_s'])) / 60:.0f} min of sampling "
             "in all). Per run: the share of post-warm-up "
             "super-transitions with mean acceptance below 0.2, divergent trajectories, test MSE (robot arm: rows "
             "201-400 / 401-600), and the ESS of the test predictions per 1000 gradient evaluations (ArviZ bulk "
             "ESS of the per-sample predictions, median over test cases; for the Gaussians, the smallest of the "
             "coordinates' and their squares', i.e. of the means and the variances) of the full-data chain and "
             "(median) of the CV replicas, each of the run's weighted average (`run.weight_by`: the default weighs "
             "each sample by its leapfrog steps, the thesis's runs each iteration once). Grid cells run the "
             "bandit's chains (robot arm: the config's 8 chains of the posterior, whose ESS sees what differs "
             "between chains; Gaussians: one chain) at its leapfrog budget per chain. "
             f"The robot-arm runs keep one sample in {thin} (`run.thin`; rows read back "
             "with --rerun keep their own study's), on which their ESS is measured: where trajectories are long "
             "and few samples are kept, a figure at a thin above 1 is a lower bound. A cell's figure is the "
             f"median over its seeds. The bar: at most 5% of super-transitions with mean acceptance under 0.2 and at "
             f"least {BAR} of the best cell's "
             f"ESS per gradient; the best cell whose trajectories diverge at most {CLEAN:.1%} of the time is "
             "shown beside it. The Gaussians' answers are known: a run whose estimate of a mean or a variance "
             f"is more than {BIAS_Z:g} Monte Carlo standard errors (batch means) from the truth has the wrong "
             "answer, whatever its ESS, and its ESS counts 0 in the bar (column 'bias z' below).", "",
             "## The bar", "",
             "| target | bandit | acc < 0.2 share | ESS/1000 grad | best grid cell | ratio | best cell, "
             f"<= {CLEAN:.1%} divergent | median grid cell | meets the bar "
             "| Gaussians, means alone: ESS / best / median cell |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (target, kind), v in verdicts.items():
        m = v.get("mean")
        means = f"{m['ess']:.2f} / {m['best_cell']:.2f} / {m['median_cell']:.2f}" if m else "-"
        lines.append(f"| {target} | {kind} | {v['low_share']:.3f} | {v['ess']:.3f} | {v['best_cell']:.3f} | "
                     f"{v['ess'] / v['best_cell']:.2f} | {v['best_clean_cell']:.3f} | "
                     f"{v['median_cell']:.3f} | {'yes' if v['meets'] else 'no'} | {means} |")
    lines += ["", "## Every run", "",
              "| target | run | seed | acc < 0.2 share | divergences | test MSE | ESS/1000 grad, full-data chain "
              "| ESS/1000 grad, replicas | ESS/1000 grad, means alone (Gaussians) | bias z (Gaussians) | seconds |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        test = " / ".join(f"{v:.5f}" for v in r["test"]) or "-"
        rep = "-" if math.isnan(r["ess_replicas"]) else f"{r['ess_replicas']:.3f}"
        low = "-" if r["low_share"] is None or math.isnan(r["low_share"]) else f"{r['low_share']:.3f}"
        spaced = f"{r['ess_mean']:.3f}" if "ess_mean" in r else "-"
        z = "-" if "bias_z" not in r else (f"{r['bias_z']:.1f}" if r["bias_z"] < 1e4 else "> 1e4")
        lines.append(f"| {r['target']} | {r['label']} | {r['seed']} | {low} | {r['divergences']} | {test} | "
                     f"{r['ess_full']:.3f} | {rep} | {spaced} | {z} | {r['wall_s']:.0f} |")
    return "\n".join(lines) + "\n"


def figure(rows: list, path: Path) -> None:
    """Per target, the grid's ESS/1000 grad as a heat map (median over grid
    seeds), and the bandits' figures beside it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    targets = list(dict.fromkeys(r["target"] for r in rows))
    fig, axes = plt.subplots(1, len(targets), figsize=(4.6 * len(targets), 4.2), squeeze=False)
    for ax, target in zip(axes[0], targets):
        hand = [r for r in rows if r["target"] == target and r["kind"] == "hand"]
        steps = sorted({r["action"][0] for r in hand})
        lengths = sorted({r["action"][1] for r in hand})
        M = np.full((len(steps), len(lengths)), np.nan)
        for i, e in enumerate(steps):
            for j, L in enumerate(lengths):
                v = [figure_of(r) for r in hand if r["action"] == (e, L)]
                M[i, j] = np.median(v)
        im = ax.imshow(M, origin="lower", cmap="viridis", aspect="auto")
        for i in range(len(steps)):
            for j in range(len(lengths)):
                ax.text(j, i, f"{M[i, j]:.2f}", ha="center", va="center", color="w", fontsize=8)
        ax.set_xticks(range(len(lengths)), [str(L) for L in lengths])
        ax.set_yticks(range(len(steps)), [str(e) for e in steps])
        ax.set_xlabel("trajectory length L")
        ax.set_ylabel("step size" if target in GAUSS else "step factor")
        fig.colorbar(im, ax=ax, label="ESS per 1000 gradients")
        bandit = []
        for kind in ("thesis", "default", "calibrated"):
            v = [figure_of(r) for r in rows if r["target"] == target and r["kind"] == kind]
            if v:
                bandit.append(f"bandit {kind}: {np.median(v):.2f}")
        ax.set_title(f"{target}\n" + ", ".join(bandit), fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", nargs="+", default=[*ROBOT, *GAUSS], choices=[*ROBOT, *GAUSS])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="seeds of the bandit runs")
    ap.add_argument("--grid-seeds", type=int, nargs="+", default=[1], help="seeds of the robot-arm grid cells")
    ap.add_argument("--gauss-grid-seeds", type=int, nargs="+", default=[1, 2, 3],
                    help="seeds of the Gaussians' grid cells (each cell's figure is the median over them)")
    ap.add_argument("--top-cells", type=int, default=3, help="the robot-arm grid cells with the highest ESS per "
                    "gradient on the grid seeds run again on --top-seeds (a best cell of one seed is the largest of "
                    "12 noisy figures; each cell's figure is the median over its seeds)")
    ap.add_argument("--top-seeds", type=int, nargs="*", default=[2, 3], help="seeds of the best cells' runs again")
    ap.add_argument("--calibrated-seeds", type=int, nargs="*", default=[1],
                    help="seeds of the robot-arm bandit runs with calibrated step scales")
    ap.add_argument("--thin", type=int, default=1, help="run.thin of the robot-arm runs (the ESS is measured on "
                    "the kept samples: above 1, a figure of long trajectories is a lower bound)")
    ap.add_argument("--runs", help="run directories (default: runs/tuning_study, runs/tuning_study_thinN "
                    "with another --thin)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "tuning_study.md"))
    ap.add_argument("--quick", action="store_true", help="shrunk targets, to check the pipeline")
    ap.add_argument("--scheduler", help="address of a Dask scheduler (default: a local cluster)")
    ap.add_argument("--workers", type=int, help="workers of the local cluster (default: the cores)")
    ap.add_argument("--rerun", nargs="+", choices=KINDS, help="run only these kinds of run and read the others' "
                    "rows from --reuse (after a change that only they see, e.g. of the default tuner)")
    ap.add_argument("--rerun-targets", nargs="+", choices=[*ROBOT, *GAUSS],
                    help="with --rerun: rerun those kinds on these targets alone (default: every target)")
    ap.add_argument("--reuse", default=str(ROOT / "docs" / "tuning_study.json"),
                    help="a previous study's rows (its JSON), read with --rerun")
    args = ap.parse_args(argv)
    if args.thin < 1:
        ap.error(f"--thin {args.thin}: must be an integer >= 1 (the ESS is measured on the kept samples)")
    args.runs = args.runs or ("runs/tuning_study" if args.thin == 1 else f"runs/tuning_study_thin{args.thin}")
    fresh = set(args.rerun or KINDS)
    again = set(args.rerun_targets or args.targets)
    t0 = time.perf_counter()
    rows = []
    reused = [dict(r, action=tuple(r["action"]) if r["action"] else None)
              for r in (json.loads(Path(args.reuse).read_text()) if args.rerun else [])
              if r["target"] in args.targets and (r["kind"] not in fresh or r["target"] not in again)
              and not ("top" in fresh and r["kind"] == "hand" and r["target"] in ROBOT and r["target"] in again
                       and r["seed"] not in args.grid_seeds)]
    calls, robot = {}, {}

    def run_robot(top=None):      # each run a Dask task on one thread (results do not depend on threads)
        new = {f"{target}/{run[0]}/{run[4]}": (target, *run, Path(args.runs))
               for target in args.targets if target in ROBOT and target in again
               for run in robot_runs(target, args.seeds, args.grid_seeds, args.quick, args.calibrated_seeds,
                                     (top or {}).get(target, ()), args.top_seeds if top else (), args.thin)
               if run[1] in fresh and (top is None or run[1] == "top")}
        calls.update(new)
        if new:
            with dask_session(args.scheduler, args.workers) as client:
                robot.update(map_tasks(client, robot_row, new, Path(args.runs) / "rows.json"))

    run_robot()
    if "top" in fresh and args.top_cells:      # the best cells of the grid seeds, on more seeds
        done = reused + [robot[k] for k in calls]
        run_robot({t: best_cells(done, t, args.top_cells) for t in args.targets if t in ROBOT})
    rows += reused
    for target in args.targets:
        if target in GAUSS:
            rows += gaussian_rows(target, args.seeds, args.gauss_grid_seeds, args.quick,
                                  fresh if target in again else set())
        else:
            rows += [dict(robot[k], action=tuple(robot[k]["action"]) if robot[k]["action"] else None,
                          kind="hand" if robot[k]["kind"] == "top" else robot[k]["kind"])
                     for k in calls if k.startswith(f"{target}/")]
    verdicts = bar(rows)
    command = " ".join(["python experiments/tuning_study.py", *(sys.argv[1:] if argv is None else argv)])
    text = markdown(rows, verdicts, time.perf_counter() - t0, command, args.thin)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    figure(rows, out.parent / "img" / (out.stem + ".png"))
    (out.parent / (out.stem + ".json")).write_text(json.dumps(rows, indent=1, default=str))
    print(text)
    print(f"written to {out} and {out.parent / 'img' / (out.stem + '.png')}")
    return verdicts


if __name__ == "__main__":
    main()
