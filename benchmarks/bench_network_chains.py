"""Speed of super-transitions: 8 cross-validation replicas of the robot-arm
2-16-2 network (175 training cases each), serial (1 thread) against parallel
(all cores), same seed; the two runs must agree bit for bit.

Each replica runs Gibbs + windowed HMC (L = 100, window 10, step factor 0.3),
evaluating every sample on its held-out fold and on the 400 test cases.

Run: python benchmarks/bench_network_chains.py [--budget N] [--repeats K]   (the last line is JSON)
"""
import argparse
import json
import os
import time

import numpy as np

from adaptive_hmc.engine.network_options import Layout
from adaptive_hmc.data import load_robot_arm
from adaptive_hmc.models.mlp import MLPSpec
from adaptive_hmc.engine.network_chains import NetworkChains
from adaptive_hmc.samplers.settings import Action
from adaptive_hmc.samplers import HMCSettings
from adaptive_hmc.engine.chain_set import advance


def make(threads):
    arm = load_robot_arm()
    X, Y = arm.rows(1, 200)
    return NetworkChains(MLPSpec(2, (16,), 2), X, Y, layout=Layout.cv(8, False), seed=3, threads=threads,
                      test_sets={"test_201_400": arm.rows(201, 400), "test_401_600": arm.rows(401, 600)},
                      settings=HMCSettings(window=10))


def rate(threads, budget, repeats):
    """Best leapfrog steps/s (total over replicas) over ``repeats`` super-transitions, and the final state."""
    rs = make(threads)
    advance(rs, Action(0.3, 100), 200)  # compile / load the cache, settle the chains
    best = 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        res = advance(rs, Action(0.3, 100), budget)
        best = max(best, res.leapfrog_steps / (time.perf_counter() - t))
    return best, rs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=4000, help="leapfrog steps per replica per super-transition")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    serial, a = rate(1, args.budget, args.repeats)
    parallel, b = rate(cores, args.budget, args.repeats)
    same = all(np.array_equal(x.position, y.position) for x, y in zip(a.chains, b.chains)) and \
        np.array_equal(a.test_pred, b.test_pred)
    print(f"8 replicas x {args.budget} leapfrog steps per super-transition, best of {args.repeats}")
    print(f"serial (1 thread):      {serial:12,.0f} leapfrog steps/s")
    print(f"parallel ({cores} threads):  {parallel:12,.0f} leapfrog steps/s")
    print(f"speedup {parallel / serial:.2f}x; serial and parallel states identical: {same}")
    print(json.dumps({"replica_leapfrog_per_s": round(parallel), "parallel_speedup": round(parallel / serial, 3),
                      "serial_leapfrog_per_s": round(serial), "threads": cores, "bitwise_identical": bool(same)}))


if __name__ == "__main__":
    main()
