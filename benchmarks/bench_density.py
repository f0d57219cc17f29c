"""Time per gradient of a user's log density against the same density written
as a built-in target: a dense Gaussian N(mean, A^-1), its energy and gradient
in the package's GaussianTarget kernel and, as a user would write it, a Numba
function returning (log density, gradient), one writing the gradient in place,
and a plain Python (NumPy) function. Each is timed in the compiled HMC loop (run_chain, L = 20,
step sizes giving the same trajectories' cost), alternating, best of 5.

Run: python benchmarks/bench_density.py [--dims 10 100] (the last line is JSON)
"""
import argparse
import json
import time

import numba
import numpy as np

from adaptive_hmc.models.base import NoHyper
from adaptive_hmc.models.density import LogDensity
from adaptive_hmc.models.gaussian import GaussianTarget
from adaptive_hmc.samplers import hmc_settings
from adaptive_hmc.samplers.chain import new_chain, new_record, Record, run_chain


def densities(D: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(D, D)) / np.sqrt(D)
    cov = B @ B.T + np.eye(D)
    mean = rng.normal(size=D)
    builtin = GaussianTarget(mean, cov)
    A = builtin.target.A

    @numba.njit(fastmath={"reassoc", "contract", "nsz", "arcp"})    # the built-in kernel's flags
    def user_in_place(q, g):            # and its loops (over q.size, as the kernel's), the gradient into g
        n = q.size
        d = q - mean
        u = 0.0
        for i in range(n):
            s = 0.0
            for j in range(n):
                s += A[i, j] * d[j]
            g[i] = -s
            u += 0.5 * d[i] * s
        return -u

    @numba.njit(fastmath={"reassoc", "contract", "nsz", "arcp"})
    def user(q):                        # the same, returning (log p, gradient)
        g = np.empty(D)
        return user_in_place(q, g), g

    def python(q):
        d = q - mean
        s = A @ d
        return -0.5 * float(d @ s), -s

    return builtin, user, user_in_place, python, mean


def rate(target, hyper, q, n_iter: int, L: int) -> float:
    """Gradient evaluations per second of n_iter HMC iterations of L steps."""
    chain = new_chain(q.copy(), hyper)
    rec = Record(*(a[0] for a in new_record(1, n_iter, 0)))
    s = hmc_settings(L, step_factor=0.1)
    rng = np.random.default_rng(1)
    t0 = time.perf_counter()
    run_chain(target, chain, s, n_iter, rec, None, rng)
    return float(rec.gradients.sum()) / (time.perf_counter() - t0)


def bench(D: int, L: int = 20, budget: float = 0.5) -> dict:
    builtin, user, user_in_place, python, mean = densities(D)
    scales = builtin.scales()
    targets = {"builtin": (builtin.target, NoHyper.empty(), mean),
               "user_compiled": (LogDensity(user, D).chain_target(scales), NoHyper.empty(), mean / scales),
               "user_in_place": (LogDensity(user_in_place, D).chain_target(scales), NoHyper.empty(), mean / scales),
               "user_python": (LogDensity(python, D).chain_target(scales), NoHyper.empty(), mean / scales)}
    for t, h, q in targets.values():                       # compile, and size each run to about `budget` seconds
        rate(t, h, q, 2, L)
    best = {k: 0.0 for k in targets}
    for _ in range(5):
        for k, (t, h, q) in targets.items():
            n = max(2, int(budget * (best[k] or 2e4 / D) / L))
            best[k] = max(best[k], rate(t, h, q, n, L))
    return dict(dim=D, L=L, gradients_per_s=best,
                time_ratio_user_compiled=best["builtin"] / best["user_compiled"],
                time_ratio_user_in_place=best["builtin"] / best["user_in_place"],
                time_ratio_user_python=best["builtin"] / best["user_python"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dims", type=int, nargs="+", default=[10, 100])
    args = ap.parse_args()
    rows = [bench(D) for D in args.dims]
    for r in rows:
        g = r["gradients_per_s"]
        print(f"D={r['dim']:4d}: built-in {g['builtin']:10.0f}/s, user (Numba) {g['user_compiled']:10.0f}/s "
              f"-> {r['time_ratio_user_compiled']:.2f}x the time per gradient; in place {g['user_in_place']:10.0f}/s -> "
              f"{r['time_ratio_user_in_place']:.2f}x; user (Python) "
              f"{g['user_python']:8.0f}/s -> {r['time_ratio_user_python']:.1f}x")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
