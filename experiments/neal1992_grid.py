"""Neal (1992), Fig. 1: the step-size grid. Hybrid Monte Carlo with and without
annealing on the robot arm (8 hidden units, the first 100 training cases, his
parameterisation with the noise integrated out), L = 1000 leapfrog steps, 200
iterations, randomised steps eps0 exp(nu C); a run fails when the test error
(rows 201-400) of the predictions averaged over the last 50 iterations exceeds
0.0075.

Run: python experiments/neal1992_grid.py [--quick] [--workers N | --scheduler ADDR] [--out DIR] [--docs]

Each run is a Dask task (a LocalCluster by default); results are kept in
OUT/results.json (default sweeps/neal1992_grid[_quick]) and read, not redone,
when the script runs again. ``--docs`` writes docs/neal1992_grid.md and its figure.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from adaptive_hmc.data import load_robot_arm
from adaptive_hmc.models.mlp import MLPSpec, predict
from adaptive_hmc.models.neal1992 import Neal92MLP
from adaptive_hmc.models.predictive import squared_errors
from adaptive_hmc.samplers import hmc_settings, init_state
from adaptive_hmc.samplers.annealing import anneal
from adaptive_hmc.sweep import dask_session, map_tasks

ROOT = Path(__file__).resolve().parents[1]
EPS0 = (0.25e-4, 0.35e-4, 0.5e-4, 0.71e-4, 1.0e-4, 1.41e-4, 2.0e-4)
NU = (0.50, 0.71, 1.00)
SEEDS = 9
FAIL = 0.0075
SCHEDULES = {"plain": [(200, 0.0, 1.0)], "annealed": [(10, 0.0, 15.0), (130, 0.95, 1.0), (60, 0.0, 1.0)]}
#: Neal's best cell (eps0 1e-4, nu 0.71): the errors of its best runs.
PUBLISHED_BEST = {"plain": 0.006565, "annealed": 0.006502}


def one_run(eps0: float, nu: float, schedule: str, seed: int, num_steps: int = 1000, scale: float = 1.0) -> dict:
    """One run of the grid: its test error and the seconds it took. ``scale``
    shortens every phase (for --quick)."""
    t0 = time.perf_counter()
    arm = load_robot_arm()
    (X, Y), (Xt, Yt) = arm.rows(1, 100), arm.rows(201, 400)
    spec = MLPSpec(2, (8,), 2)
    model = Neal92MLP(spec, X, Y)
    i_eps, i_nu = EPS0.index(eps0), NU.index(nu)
    rng = np.random.default_rng([seed, i_eps, i_nu, list(SCHEDULES).index(schedule)])
    state = init_state(model, model.initial_position(rng))
    phases = [(max(1, int(n * scale)), a, t) for n, a, t in SCHEDULES[schedule]]
    settings = hmc_settings(num_steps, step_size=eps0, step_nu=nu, gibbs=False)
    _, _, trace, positions = anneal(model, state, phases, settings, rng)
    last = max(1, int(50 * scale))
    mean = predict(spec, model.weights(positions[-last:]), Xt).mean(axis=0)
    error = float(np.mean(squared_errors(mean, Yt)))
    return {"eps0": eps0, "nu": nu, "schedule": schedule, "seed": seed, "test_error": error,
            "failed": bool(not error <= FAIL), "acceptance": float(trace[:, 2].mean()),
            "seconds": time.perf_counter() - t0}


#: The bandit's box: eps0 over the grid's range (log axis), L from 100 to 2000; nu fixed at his best 0.71.
BANDIT_BOUNDS = {"step_factor": (EPS0[0], EPS0[-1]), "num_steps": (100, 2000)}
BANDIT_NU = 0.71
BANDIT_ST = 20           # super-transitions over the grid runs' 200,000 leapfrog steps
BANDIT_RATE = 0.15       # p_i = exp(-0.15 (i - 1)): 0.06 by the last super-transition


def bandit_run(seed: int, total: int = 200_000, n_super: int = BANDIT_ST) -> dict:
    """One chain whose (eps0, L) a GP bandit chooses (the package's default reward
    model: ESJD/sqrt(L), rank transform, log eps0 axis, 3 warm-up
    super-transitions) within the same 200,000 leapfrog steps as a grid run,
    plain HMC at T0 = 1 with dummy acceptance; predictions from the samples of
    the last quarter of the compute (the grid's last 50 of 200 iterations)."""
    from adaptive_hmc.runner import DEFAULT_BANDIT, DEFAULT_WARMUP
    from adaptive_hmc.tuners import BanditTuner, Exponential
    t0 = time.perf_counter()
    arm = load_robot_arm()
    (X, Y), (Xt, Yt) = arm.rows(1, 100), arm.rows(201, 400)
    spec = MLPSpec(2, (8,), 2)
    model = Neal92MLP(spec, X, Y)
    rng = np.random.default_rng([seed, 1992])
    tuner = BanditTuner(BANDIT_BOUNDS, seed=seed, schedule=Exponential(BANDIT_RATE), **DEFAULT_BANDIT)
    state, kd = init_state(model, model.initial_position(rng)), None
    budget = total // n_super
    kept, actions, accepted = [], [], []
    for i in range(n_super):
        action = tuner.ask()
        eps0, L = float(action["step_factor"]), int(action["num_steps"])
        settings = hmc_settings(L, step_size=eps0, step_nu=BANDIT_NU, gibbs=False)
        start = state.position.copy()
        state, kd, trace, positions = anneal(model, state, [(budget // L, 0.0, 1.0)], settings, rng, kd=kd)
        jumps = np.diff(np.vstack([start, positions]), axis=0)
        reward = float(np.sum(jumps ** 2) / np.sqrt(L))
        if i >= DEFAULT_WARMUP:
            tuner.tell(action, reward)
        kept += [(p, i) for p in positions]
        actions.append((eps0, L))
        accepted.append(trace[:, 2].mean())
    last = [p for p, i in kept if i >= n_super - n_super // 4]
    mean = predict(spec, model.weights(np.array(last)), Xt).mean(axis=0)
    error = float(np.mean(squared_errors(mean, Yt)))
    return {"seed": seed, "test_error": error, "failed": bool(not error <= FAIL), "actions": actions,
            "acceptance": float(np.mean(accepted)), "seconds": time.perf_counter() - t0}


def key(eps0, nu, schedule, seed):
    return f"{schedule}/{eps0:g}/{nu:g}/{seed}"


def run_grid(client, out: Path, eps_values, nu_values, seeds, num_steps, scale) -> dict:
    calls = {key(e, n, s, seed): (e, n, s, seed, num_steps, scale) for s in SCHEDULES for e in eps_values
             for n in nu_values for seed in range(seeds)}
    return map_tasks(client, one_run, calls, out / "results.json")


def cells(results: dict, eps_values, nu_values) -> dict:
    """{schedule: {(eps0, nu): (failures, runs, best error, median error)}}"""
    out = {}
    for s in SCHEDULES:
        for e in eps_values:
            for n in nu_values:
                errs = [r["test_error"] for r in results.values() if r["schedule"] == s and r["eps0"] == e
                        and r["nu"] == n]
                fails = sum(not x <= FAIL for x in errs)
                finite = [x for x in errs if np.isfinite(x)]
                out.setdefault(s, {})[(e, n)] = (fails, len(errs), min(finite) if finite else float("nan"),
                                                 float(np.median(errs)))
    return out


def report(grid: dict, eps_values, nu_values, seeds, quick, seconds, bandit=None) -> str:
    lines = ["# Neal (1992), Fig. 1: the step-size grid", "",
             "Generated by `python experiments/neal1992_grid.py" + (" --quick" if quick else "") + " --docs`; do "
             "not edit. Robot arm, 8 hidden units, the first 100 training cases, Neal's parameterisation with the "
             "noise integrated out (`adaptive_hmc.models.neal1992`), HMC with L = 1000 and steps eps0 exp(nu C), "
             "200 iterations from a prior draw, plain (T0 = 1) or annealed (his schedule: 10 x (0, 15), "
             "130 x (0.95, 1), 60 x (0, 1), acceptance with dummy momentum); predictions averaged over the last 50 "
             f"iterations; a run **fails** when its test error (rows 201-400) exceeds {FAIL}. {seeds} seeds a cell.",
             "", "![Failures per cell](img/neal1992_grid.png)", ""]
    for s in SCHEDULES:
        lines += [f"## {s}: failures out of {seeds} (best run's test error)", "",
                  "| nu \\ eps0 | " + " | ".join(f"{e * 1e4:g}e-4" for e in eps_values) + " |",
                  "|---|" + "---|" * len(eps_values)]
        for n in nu_values:
            row = []
            for e in eps_values:
                f, runs, best, _ = grid[s][(e, n)]
                row.append(f"{f} ({best:.5f})")
            lines.append(f"| {n:g} | " + " | ".join(row) + " |")
        lines.append("")
    if bandit:
        errs = [r["test_error"] for r in bandit.values()]
        fails = sum(r["failed"] for r in bandit.values())
        best_hand = min(grid[s][c][0] for s in SCHEDULES for c in grid[s])
        lines += ["## The bandit on the same problem", "",
                  f"One chain per seed, plain HMC (T0 = 1, dummy acceptance), the same 200,000 leapfrog steps as a grid "
                  f"run in {BANDIT_ST} super-transitions; (eps0, L) chosen by the GP bandit with the package's default "
                  f"reward model (ESJD/sqrt(L) from the realised jumps, rank transform, log eps0 axis, 3 warm-up "
                  f"super-transitions) in eps0 {BANDIT_BOUNDS['step_factor'][0]:g}..{BANDIT_BOUNDS['step_factor'][1]:g}, "
                  f"L {BANDIT_BOUNDS['num_steps'][0]}..{BANDIT_BOUNDS['num_steps'][1]}, nu {BANDIT_NU}, annealing rate "
                  f"of the move probability {BANDIT_RATE}; predictions from the last quarter of the compute.", "",
                  f"**{fails} of {len(errs)} runs fail** (the best hand cell: {best_hand} of {seeds}); test errors: "
                  + ", ".join(f"{e:.5f}" for e in sorted(errs)) + ".", "",
                  "| seed | test error | acceptance | final eps0 | final L |", "|---|---|---|---|---|"]
        for r in sorted(bandit.values(), key=lambda r: r["seed"]):
            e, L = r["actions"][-1]
            lines.append(f"| {r['seed']} | {r['test_error']:.5f} | {r['acceptance']:.2f} | {e:.3g} | {L} |")
        lines.append("")
    lines += [f"Neal's best cell (eps0 1e-4, nu 0.71): best runs {PUBLISHED_BEST['plain']} (plain) and "
              f"{PUBLISHED_BEST['annealed']} (annealed).", "",
              "Wall time on this machine: " + ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items()) + ".", ""]
    return "\n".join(lines)


def figure(grid: dict, eps_values, nu_values, seeds, path: Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
    for ax, s in zip(axes, SCHEDULES):
        for i, e in enumerate(eps_values):
            for j, n in enumerate(nu_values):
                f, runs, _, _ = grid[s][(e, n)]
                side = 0.9 * np.sqrt(f / max(runs, 1))
                ax.add_patch(plt.Rectangle((i - side / 2, j - side / 2), side, side, color="k"))
                ax.add_patch(plt.Rectangle((i - 0.45, j - 0.45), 0.9, 0.9, fill=False, color="0.7"))
        ax.set_xlim(-0.6, len(eps_values) - 0.4)
        ax.set_ylim(-0.6, len(nu_values) - 0.4)
        ax.set_xticks(range(len(eps_values)), [f"{e * 1e4:g}" for e in eps_values])
        ax.set_yticks(range(len(nu_values)), [f"{n:g}" for n in nu_values])
        ax.set_xlabel("eps0 (x 1e-4)")
        ax.set_title(f"{s}: failed runs (square area) of {seeds}")
        ax.set_aspect("equal")
    axes[0].set_ylabel("nu")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two step sizes, one nu, two seeds, short runs")
    ap.add_argument("--out", help="results directory (default: sweeps/neal1992_grid[_quick])")
    ap.add_argument("--workers", type=int, help="local Dask worker processes (default: one per core)")
    ap.add_argument("--scheduler", help="address of a running Dask scheduler instead of a local cluster")
    ap.add_argument("--docs", action="store_true", help="write docs/neal1992_grid.md and docs/img/neal1992_grid.png")
    args = ap.parse_args(argv)
    if args.quick:
        eps_values, nu_values, seeds, num_steps, scale = (EPS0[2], EPS0[4]), (NU[1],), 2, 100, 0.2
    else:
        eps_values, nu_values, seeds, num_steps, scale = EPS0, NU, SEEDS, 1000, 1.0
    out = Path(args.out or f"sweeps/neal1992_grid{'_quick' if args.quick else ''}")
    out.mkdir(parents=True, exist_ok=True)
    timings = out / "timings.json"
    seconds = json.loads(timings.read_text()) if timings.is_file() else {}
    with dask_session(args.scheduler, args.workers) as client:
        t0 = time.perf_counter()
        before = len(json.loads((out / "results.json").read_text())) if (out / "results.json").is_file() else 0
        results = run_grid(client, out, eps_values, nu_values, seeds, num_steps, scale)
        if len(results) > before:
            seconds["grid"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        before = len(json.loads((out / "bandit.json").read_text())) if (out / "bandit.json").is_file() else 0
        bandit = map_tasks(client, bandit_run, {str(k): (k, 20_000, 8) if args.quick else (k,)
                                                for k in range(seeds)}, out / "bandit.json")
        if len(bandit) > before:
            seconds["bandit"] = time.perf_counter() - t0
        timings.write_text(json.dumps(seconds))
    grid = cells(results, eps_values, nu_values)
    (out / "summary.json").write_text(json.dumps({s: {f"{e:g}/{n:g}": v for (e, n), v in c.items()}
                                                  for s, c in grid.items()}, indent=1))
    text = report(grid, eps_values, nu_values, seeds, args.quick, seconds, bandit)
    (out / "neal1992_grid.md").write_text(text)
    figure(grid, eps_values, nu_values, seeds, out / "neal1992_grid.png")
    if args.docs:
        (ROOT / "docs" / "neal1992_grid.md").write_text(text)
        figure(grid, eps_values, nu_values, seeds, ROOT / "docs" / "img" / "neal1992_grid.png")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
