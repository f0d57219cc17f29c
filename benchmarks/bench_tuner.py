"""Cost of the GP-bandit tuner: milliseconds for tell + ask when the tuner moves
(GP fit + DIRECT + polish), with 200 and 2000 observations of which at most 40
are distinct actions (the annealed schedule repeats actions).

Run: python benchmarks/bench_tuner.py   (the last line is JSON)
"""
import json
import time
from dataclasses import replace

import numpy as np

from adaptive_hmc import BanditTuner
from adaptive_hmc.tuners import BanditOptions
from adaptive_hmc.tuners import Polynomial


def time_at(n_obs, n_distinct=40, repeats=15, seed=0):
    rng = np.random.default_rng(seed)
    bounds = {"step_factor": (0.01, 1.01), "num_steps": (20, 5020)}
    # Prefill through the public API with p_i = i^-60 (no moves after the first),
    # then time with p_i = i^0 = 1 so every timed tell includes the GP fit and DIRECT.
    t = BanditTuner(BanditOptions.thesis(bounds, schedule=Polynomial(60.0)), seed=seed)
    actions = [{"step_factor": float(rng.uniform(0.01, 1.01)), "num_steps": int(rng.integers(20, 5021))}
               for _ in range(n_distinct)]
    for k in range(n_obs):
        a = actions[k % n_distinct]
        t.tell(a, -abs(a["step_factor"] - 0.3) + 0.05 * rng.normal())
    t.options = replace(t.options, schedule=Polynomial(0.0))
    times = []
    for k in range(repeats):
        a = actions[k % n_distinct]
        t0 = time.perf_counter()
        t.tell(a, -abs(a["step_factor"] - 0.3))
        t.ask()
        times.append(1e3 * (time.perf_counter() - t0))
    return float(np.median(times))


def main():
    res = {"ask_ms_at_200": round(time_at(200), 2), "ask_ms_at_2000": round(time_at(2000), 2)}
    print(f"tell+ask with a move: {res['ask_ms_at_200']} ms at 200 observations, "
          f"{res['ask_ms_at_2000']} ms at 2000 (40 distinct actions each)")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
