"""Neal (1992), Fig. 1: the step-size grid. Hybrid Monte Carlo with and without
annealing on the robot arm (8 hidden units, the first 100 training cases, his
parameterisation with the noise integrated out), L = 1000 leapfrog steps, 200
iterations, randomised steps eps0 exp(nu C); a run fails when the test error
(rows 201-400) of the predictions averaged over the last 50 iterations exceeds
0.0075. Then his comparison with the plain Metropolis algorithm (moves of eq 27
with dummy momentum): 200,000 iterations, eps0 1e-4 to 32e-4 by factors of 2,
every 1000th of the last 50,000 iterations predicting, 5 seeds; and the GP
bandit on the HMC problem.

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
from adaptive_hmc.samplers import anneal, hmc_settings, init_state
from adaptive_hmc.front.sweep import dask_session, timed_map_tasks

ROOT = Path(__file__).resolve().parents[1]
EPS0 = (0.25e-4, 0.35e-4, 0.5e-4, 0.71e-4, 1.0e-4, 1.41e-4, 2.0e-4)
NU = (0.50, 0.71, 1.00)
SEEDS = 9
FAIL = 0.0075
SCHEDULES = {"plain": [(200, 0.0, 1.0)], "annealed": [(10, 0.0, 15.0), (130, 0.95, 1.0), (60, 0.0, 1.0)]}
#: Neal's best cell (eps0 1e-4, nu 0.71): the errors of its best runs.
PUBLISHED_BEST = {"plain": 0.006565, "annealed": 0.006502}


#: Metropolis (eq 27): his step range, seeds, and the schedules with 1000 times the iterations
#: (alpha 0.99995 in the cooling phase for the same cooling effect).
M_EPS0 = (1e-4, 2e-4, 4e-4, 8e-4, 16e-4, 32e-4)
M_SEEDS = 5
M_SCHEDULES = {"plain": [(200_000, 0.0, 1.0)],
               "annealed": [(10_000, 0.0, 15.0), (130_000, 0.99995, 1.0), (60_000, 0.0, 1.0)]}
M_PUBLISHED_BEST = 0.016        # his best run (annealed, eps0 4e-4, nu 0.71)


def metropolis_run(eps0: float, nu: float, schedule: str, seed: int, scale: float = 1.0) -> dict:
    """One Metropolis run (eq 27 moves, acceptance with dummy momentum): test
    error of the predictions of every 1000th state of the last quarter."""
    t0 = time.perf_counter()
    arm = load_robot_arm()
    (X, Y), (Xt, Yt) = arm.rows(1, 100), arm.rows(201, 400)
    spec = MLPSpec(2, (8,), 2)
    model = Neal92MLP(spec, X, Y)
    rng = np.random.default_rng([seed, M_EPS0.index(eps0), NU.index(nu), list(M_SCHEDULES).index(schedule), 27])
    state = init_state(model, model.initial_position(rng))
    phases = [(max(1, int(n * scale)), a, t) for n, a, t in M_SCHEDULES[schedule]]
    settings = hmc_settings(1, step_size=eps0, step_nu=nu, gibbs=False)
    _, _, trace, positions = anneal(model, state, phases, settings, rng, metropolis=True,
                                    every=max(1, int(1000 * scale)))
    mean = predict(spec, model.weights(positions[-50:]), Xt).mean(axis=0)
    error = float(np.mean(squared_errors(mean, Yt)))
    return {"eps0": eps0, "nu": nu, "schedule": schedule, "seed": seed, "test_error": error,
            "acceptance": float(trace[:, 2].mean()), "seconds": time.perf_counter() - t0}


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
#: The grid's cell at the bandit's box centre (eps0, nu), beside which its failures are read.
CENTRE_CELL = (0.71e-4, 0.71)
#: The two bandits: from a prior draw (20 super-transitions, p_i = exp(-0.15 (i - 1)), 3 warm-up
#: super-transitions not told), and after Neal's own hot start and cooling at the box's centre (the
#: first 140 iterations of his annealed schedule, 10 x (0, 15) and 130 x (0.95, 1), as his hand runs
#: do), the bandit in place of his last 60 iterations: 6 super-transitions, p_i = exp(-0.3 (i - 1)),
#: every reward told. This variant was chosen on seeds 0-8 and 100-108 (beside a shorter cooling and
#: a tuner that runs through the cooling), so it is also run on the fresh seeds 200-208.
BANDITS = {"bandit": {"n_super": 20, "rate": 0.15, "warmup": None, "seeds": range(9)},
           "bandit_cooled": {"n_super": 6, "rate": 0.3, "warmup": SCHEDULES["annealed"][:2],
                             "seeds": [*range(9), *range(100, 109), *range(200, 209)]}}
#: The bandits' seed sets as the report and the key figures name them.
SEED_SETS = (("0-8", "", range(9)), ("100-108", "_more", range(100, 109)), ("200-208", "_fresh", range(200, 209)))
PREDICT_STEPS = 50_000   # predictions from the samples of the last 50 grid iterations' worth of compute


def bandit_run(variant: str, seed: int, total: int = 200_000) -> dict:
    """One chain whose (eps0, L) a GP bandit chooses (the package's default reward
    model: ESJD/sqrt(L), rank transform, log eps0 axis, told each super-transition's
    acceptance for its feasibility model) within the same 200,000
    leapfrog steps as a grid run, HMC at T0 = 1 with dummy acceptance (after
    Neal's hot start and cooling for the "bandit_cooled" variant, see :data:`BANDITS`);
    predictions from the samples of the last 50,000 steps' super-transitions."""
    from adaptive_hmc.engine.runner import DEFAULT_WARMUP, told_acceptance
    from adaptive_hmc.tuners import BanditOptions
    from adaptive_hmc.tuners import BanditTuner, Exponential
    v = BANDITS[variant]
    t0 = time.perf_counter()
    arm = load_robot_arm()
    (X, Y), (Xt, Yt) = arm.rows(1, 100), arm.rows(201, 400)
    spec = MLPSpec(2, (8,), 2)
    model = Neal92MLP(spec, X, Y)
    rng = np.random.default_rng([seed, 1992])
    tuner = BanditTuner(BanditOptions(BANDIT_BOUNDS, schedule=Exponential(v["rate"])), seed=seed)
    state, kd, used = init_state(model, model.initial_position(rng)), None, 0
    first = None
    if v["warmup"]:
        first = tuner.ask()                                  # the box's centre
        phases = [(max(1, round(n * total / 200_000)), a, t) for n, a, t in v["warmup"]]
        settings = hmc_settings(int(first["num_steps"]), step_size=float(first["step_factor"]), step_nu=BANDIT_NU,
                                gibbs=False)
        state, kd, trace, _ = anneal(model, state, phases, settings, rng)
        used = int(trace[:, 3].sum())
    n_super = v["n_super"] if total >= 100_000 else max(4, v["n_super"] // 3)
    n_super = max(1, min(n_super, (total - used) // BANDIT_BOUNDS["num_steps"][1]))   # each runs the longest L
    budget = (total - used) // n_super
    warm = 0 if v["warmup"] else DEFAULT_WARMUP
    kept, actions, accepted = [], [], []
    for i in range(n_super):
        action = first if i == 0 and first is not None else tuner.ask()
        eps0, L = float(action["step_factor"]), int(action["num_steps"])
        settings = hmc_settings(L, step_size=eps0, step_nu=BANDIT_NU, gibbs=False)
        start = state.position.copy()
        state, kd, trace, positions = anneal(model, state, [(budget // L, 0.0, 1.0)], settings, rng, kd=kd)
        jumps = np.diff(np.vstack([start, positions]), axis=0)
        if i >= warm:        # the acceptance as a run tells it: the feasibility model learns where chains stop
            tuner.tell(action, float(np.sum(jumps ** 2) / np.sqrt(L)), acceptance=told_acceptance([trace[:, 2].mean()]))
        kept += [(p, i) for p in positions]
        actions.append((eps0, L))
        accepted.append(trace[:, 2].mean())
    k = max(1, round(PREDICT_STEPS * total / 200_000 / budget))
    last = [p for p, i in kept if i >= n_super - k]
    mean = predict(spec, model.weights(np.array(last)), Xt).mean(axis=0)
    error = float(np.mean(squared_errors(mean, Yt)))
    return {"variant": variant, "seed": seed, "test_error": error, "failed": bool(not error <= FAIL),
            "actions": actions, "acceptance": float(np.mean(accepted)), "warmup_steps": used,
            "seconds": time.perf_counter() - t0}


def key(eps0, nu, schedule, seed):
    return f"{schedule}/{eps0:g}/{nu:g}/{seed}"


def run_grid(client, out: Path, eps_values, nu_values, seeds, num_steps, scale) -> dict:
    calls = {key(e, n, s, seed): (e, n, s, seed, num_steps, scale) for s in SCHEDULES for e in eps_values
             for n in nu_values for seed in range(seeds)}
    return timed_map_tasks(client, one_run, calls, out / "results.json", out / "timings.json", "grid")


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


def metropolis_report(results: dict, eps_values, nu_values) -> list:
    lines = ["## Plain Metropolis (eq 27), as in his comparison", "",
             "Moves q + eps p_s with dummy-momentum acceptance (`sampler.kind: metropolis` with `sampler.anneal`), "
             "one energy evaluation each: 200,000 iterations (the compute of one HMC run), plain (T0 = 1) or "
             "annealed (10,000 x (0, 15), 130,000 x (0.99995, 1), 60,000 x (0, 1)); predictions from every "
             "1000th state of the last 50,000. Best test error of the runs per cell (failures out of "
             f"{M_SEEDS} in brackets); his best run: {M_PUBLISHED_BEST} (annealed, eps0 4e-4, nu 0.71).", ""]
    for sched in M_SCHEDULES:
        lines += [f"**{sched}**", "", "| nu \\ eps0 | " + " | ".join(f"{e * 1e4:g}e-4" for e in eps_values) + " |",
                  "|---|" + "---|" * len(eps_values)]
        for n in nu_values:
            row = []
            for e in eps_values:
                errs = [r["test_error"] for r in results.values() if r["schedule"] == sched and r["eps0"] == e
                        and r["nu"] == n]
                finite = [x for x in errs if np.isfinite(x)]
                best = min(finite) if finite else float("nan")
                row.append(f"{best:.4f} ({sum(not x <= FAIL for x in errs)})")
            lines.append(f"| {n:g} | " + " | ".join(row) + " |")
        lines.append("")
    errs = [r["test_error"] for r in results.values() if np.isfinite(r["test_error"])]
    best = min(results.values(), key=lambda r: r["test_error"] if np.isfinite(r["test_error"]) else np.inf)
    lines += [f"Best Metropolis run here: {min(errs):.4f} ({best['schedule']}, eps0 {best['eps0'] * 1e4:g}e-4, "
              f"nu {best['nu']:g}); {sum(not x <= FAIL for x in errs)} of {len(results)} runs fail the HMC "
              f"grid's criterion ({FAIL}).", ""]
    return lines


def report(grid: dict, eps_values, nu_values, seeds, quick, seconds, bandit=None, metropolis=None,
           m_eps=M_EPS0) -> str:
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
        best_hand = min(grid[s][c][0] for s in SCHEDULES for c in grid[s])
        centre = grid["annealed"].get(CENTRE_CELL, (None,))[0]
        lines += ["## The bandit on the same problem", "",
                  "One chain per seed, HMC at T0 = 1 with dummy acceptance, the same 200,000 leapfrog steps as a grid "
                  "run; (eps0, L) chosen by the GP bandit with the package's default reward model (ESJD/sqrt(L) "
                  "from the realised jumps, rank transform, log eps0 axis; each super-transition's share of "
                  "trajectories accepted told to its feasibility model, floor 0.8, as a run tells it) in eps0 "
                  f"{BANDIT_BOUNDS['step_factor'][0]:g}..{BANDIT_BOUNDS['step_factor'][1]:g}, L "
                  f"{BANDIT_BOUNDS['num_steps'][0]}..{BANDIT_BOUNDS['num_steps'][1]}, nu {BANDIT_NU}; predictions "
                  "from the super-transitions of the last 50,000 steps. **bandit**: from the prior draw, 20 "
                  "super-transitions, move probability exp(-0.15 (i - 1)), the first 3 rewards not told. "
                  "**bandit_cooled**: first Neal's hot start and cooling at the box's centre (eps0 0.71e-4, L 1050), "
                  "the first 140 iterations of his annealed schedule (10 x (0, 15), 130 x (0.95, 1)), as his hand "
                  "runs; then the bandit in place of his last 60 iterations: 6 super-transitions, move probability "
                  "exp(-0.3 (i - 1)), every reward told. This variant was chosen on seeds 0-8 and 100-108 (against "
                  "a shorter cooling, 50 iterations, then 14 super-transitions: 3 of 18 failed; and a bandit tuning "
                  "through the cooling: 14 of 18), so seeds 200-208 are fresh.", "",
                  "| bandit | seeds | failed | test errors |", "|---|---|---|---|"]
        for name in BANDITS:
            for label, _, members in SEED_SETS:
                rs = [r for r in bandit.values() if r["variant"] == name and r["seed"] in members]
                if rs:
                    lines.append(f"| {name} | {label} | {sum(r['failed'] for r in rs)} of {len(rs)} | "
                                 + ", ".join(f"{r['test_error']:.5f}" for r in sorted(rs, key=lambda r: r['test_error']))
                                 + " |")
        lines += ["", f"The hand grid's best cell: {best_hand} of {seeds} failures; the annealed cell at the box's "
                  f"centre (eps0 0.71e-4, nu 0.71): {centre} of {seeds}.", "",
                  "| bandit | seed | test error | acceptance | final eps0 | final L |", "|---|---|---|---|---|---|"]
        for r in sorted(bandit.values(), key=lambda r: (r["variant"], r["seed"])):
            e, L = r["actions"][-1]
            lines.append(f"| {r['variant']} | {r['seed']} | {r['test_error']:.5f} | {r['acceptance']:.2f} | "
                         f"{e:.3g} | {L} |")
        lines.append("")
    if metropolis:
        lines += metropolis_report(metropolis, m_eps, nu_values)
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


def key_figures(grid: dict, bandit: dict, metropolis: dict) -> dict:
    """The figures the papers' comparison table (experiments/neal_papers.py) reads."""
    best_cell = (1.0e-4, 0.71)
    out = {s: {"failed": sum(c[0] for c in grid[s].values()), "runs": sum(c[1] for c in grid[s].values()),
               "best_cell_best_error": grid[s][best_cell][2], "best_cell_failed": grid[s][best_cell][0],
               "fewest_failed": min(c[0] for c in grid[s].values()),
               "centre_failed": grid[s].get(CENTRE_CELL, (None,))[0]} for s in SCHEDULES}
    for name in BANDITS:
        for _, label, members in SEED_SETS:
            rs = [r for r in bandit.values() if r["variant"] == name and r["seed"] in members]
            if rs:
                out[name + label] = {"failed": sum(r["failed"] for r in rs), "runs": len(rs),
                                     "errors": sorted(r["test_error"] for r in rs)}
    finite = [r for r in metropolis.values() if np.isfinite(r["test_error"])]
    best = min(finite, key=lambda r: r["test_error"])
    out["metropolis"] = {"best_error": best["test_error"], "best": [best["schedule"], best["eps0"], best["nu"]],
                         "failed": sum(not r["test_error"] <= FAIL for r in metropolis.values()),
                         "runs": len(metropolis)}
    out["published"] = {"hmc_best_cell": PUBLISHED_BEST, "metropolis_best": M_PUBLISHED_BEST}
    return out


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
        m_eps, m_seeds, m_scale = (M_EPS0[1], M_EPS0[2]), 2, 0.05
    else:
        eps_values, nu_values, seeds, num_steps, scale = EPS0, NU, SEEDS, 1000, 1.0
        m_eps, m_seeds, m_scale = M_EPS0, M_SEEDS, 1.0
    out = Path(args.out or f"sweeps/neal1992_grid{'_quick' if args.quick else ''}")
    out.mkdir(parents=True, exist_ok=True)
    timings = out / "timings.json"
    with dask_session(args.scheduler, args.workers) as client:
        results = run_grid(client, out, eps_values, nu_values, seeds, num_steps, scale)
        bandit = timed_map_tasks(client, bandit_run, {f"{name}/{k}": (name, k, 20_000 if args.quick else 200_000)
                                                      for name, v in BANDITS.items()
                                                      for k in (range(2) if args.quick else v["seeds"])},
                                 out / "bandit.json", timings, "bandit")
        metropolis = timed_map_tasks(client, metropolis_run, {key(e, n, sc, seed): (e, n, sc, seed, m_scale)
                                                              for sc in M_SCHEDULES for e in m_eps
                                                              for n in nu_values for seed in range(m_seeds)},
                                     out / "metropolis.json", timings, "metropolis")
    seconds = json.loads(timings.read_text())
    grid = cells(results, eps_values, nu_values)
    (out / "summary.json").write_text(json.dumps({s: {f"{e:g}/{n:g}": v for (e, n), v in c.items()}
                                                  for s, c in grid.items()}, indent=1))
    text = report(grid, eps_values, nu_values, seeds, args.quick, seconds, bandit, metropolis, m_eps)
    (out / "neal1992_grid.md").write_text(text)
    figure(grid, eps_values, nu_values, seeds, out / "neal1992_grid.png")
    if args.docs:
        (ROOT / "docs" / "neal1992_grid.md").write_text(text)
        (ROOT / "docs" / "neal1992_grid.json").write_text(json.dumps(key_figures(grid, bandit, metropolis),
                                                                     indent=1))
        figure(grid, eps_values, nu_values, seeds, ROOT / "docs" / "img" / "neal1992_grid.png")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
