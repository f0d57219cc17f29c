"""Thread scaling of a run: k chains of the fixed-prior robot arm
(configs/robot_arm_fixed_hyper_bandit.yaml, k = twice the cores, at least 4)
for a few super-transitions of the bandit, on 1, 2, ..., all cores; the
gradients per second of the whole loop, the speed-up over one thread and the
parallel efficiency, the share of the wall time spent between
super-transitions (``between_share``: the probes of new actions, the tuner's GP
fit and DIRECT, the Python work per chain) and of it the serial share
(``serial_share``: all but the probes, which run the chains' trajectories on
copies of them on every thread), which does not scale. Every thread count gives
the same draws (checked).

Run: python benchmarks/bench_threads.py [--super-transitions N] [--budget B]
(the last line is JSON)
"""
import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from adaptive_hmc.config import read_config
from adaptive_hmc.engine.driver import drive
from adaptive_hmc.front.experiment import build

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "robot_arm_fixed_hyper_bandit.yaml"


def measure(threads: int, k: int, super_transitions: int, budget: int) -> dict:
    over = {"chains": k, "run.threads": threads, "run.super_transitions": super_transitions,
            "run.budget": budget, "run.until": None, "run.burn_in": {"super_transitions": 0},
            "tuner.bounds": {"step_factor": [0.01, 1.01], "num_steps": [20, min(5020, budget)]}}
    cfg = read_config(CONFIG, over)
    setup = build(cfg, str(CONFIG))[0]
    setup.chains.compile()
    t0 = time.perf_counter()
    log = drive(setup, super_transitions).log
    wall = time.perf_counter() - t0
    inside = sum(e["seconds"] for e in log)
    probes = sum(p["seconds"] for e in log for p in e["probes"])
    gradients = sum(e["gradients"] for e in log)
    return {"threads": threads, "gradients_per_s": gradients / wall, "wall_s": wall,
            "between_share": (wall - inside) / wall, "serial_share": (wall - inside - probes) / wall, "final": np.concatenate([c.position for c in
                                                                              setup.chains.chains])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--super-transitions", type=int, default=12)
    ap.add_argument("--budget", type=int, default=8000, help="leapfrog steps a chain per super-transition")
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    k = max(4, 2 * cores)
    counts = sorted({1, *range(2, cores + 1, max(1, cores // 8)), cores})
    rows = [measure(t, k, args.super_transitions, args.budget) for t in counts]
    base = rows[0]["gradients_per_s"]
    print(f"{k} chains, {args.super_transitions} super-transitions of {args.budget} steps a chain, {cores} cores")
    print(f"{'threads':>7} {'gradients/s':>12} {'speed-up':>9} {'efficiency':>10} {'between super-transitions':>26} "
          f"{'serial (no probes)':>19}")
    for r in rows:
        s = r["gradients_per_s"] / base
        print(f"{r['threads']:>7} {r['gradients_per_s']:>12,.0f} {s:>9.2f} {s / r['threads']:>10.2f} "
              f"{r['between_share']:>25.1%} {r['serial_share']:>19.1%}")
    same = all(np.array_equal(r["final"], rows[0]["final"]) for r in rows)
    print(f"the same draws on every thread count: {same}")
    print(json.dumps({"chains": k, "cores": cores, "identical": bool(same),
                      "speedup": {r["threads"]: round(r["gradients_per_s"] / base, 3) for r in rows},
                      "between_share": {r["threads"]: round(r["between_share"], 3) for r in rows},
                      "serial_share": {r["threads"]: round(r["serial_share"], 3) for r in rows}}))


if __name__ == "__main__":
    main()
