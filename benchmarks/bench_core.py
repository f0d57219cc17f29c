"""Speed of the core: energy+gradient evaluations/s and HMC leapfrog steps/s,
against the vectorised NumPy reference measured in the same run.

Run: python benchmarks/bench_core.py   (single-threaded; the last line is JSON)
"""
import json
import time

import numpy as np

from adaptive_hmc.jit import njit
from adaptive_hmc.models import reference
from adaptive_hmc.models.base import energy_grad
from adaptive_hmc.models.bnn import BayesianMLP
from adaptive_hmc.models.mlp import MLPSpec
from adaptive_hmc.samplers import hmc_settings, init_state
from adaptive_hmc.samplers.hmc import hmc_kernel


@njit(cache=False)
def _grad_loop(n, q, g, target, hyper):
    s = 0.0
    for _ in range(n):
        s += energy_grad(q, g, target, hyper)
    return s


def _best_rate(fn, n, repeats=5):
    """Best of ``repeats`` timings of fn(n), as calls per second."""
    best = 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        fn(n)
        best = max(best, n / (time.perf_counter() - t))
    return best


def measure(hidden, n_cases, seed=0):
    rng = np.random.default_rng(seed)
    spec = MLPSpec(2, (hidden,), 2)
    X = rng.uniform(-2, 2, size=(n_cases, 2))
    Y = np.column_stack([np.cos(X[:, 0]), np.sin(X[:, 1])]) + 0.05 * rng.normal(size=(n_cases, 2))
    model = BayesianMLP(spec, X, Y)
    hyper = model.initial_hyper()
    q = 0.3 * rng.normal(size=model.dim)
    g = np.empty_like(q)
    t = model.target
    _grad_loop(1, q, g, t, hyper)
    n = max(200, int(2e7 / (hidden * n_cases)))
    grad_rate = _best_rate(lambda k: _grad_loop(k, q, g, t, hyper), n)
    prec, noise = hyper.prec.copy(), hyper.noise.copy()
    np_rate = _best_rate(lambda k: [reference.energy_grad(spec, q, X, Y, prec, noise) for _ in range(k)],
                         max(20, n // 20), repeats=3)
    # HMC: 200 iterations of L = 100, the trajectory loop compiled (hmc_kernel).
    st = init_state(model, q, hyper)
    settings = hmc_settings(100, step_factor=0.3)
    step = 0.3 * model.scales(hyper)
    qq, gg, pp = st.position.copy(), st.grad.copy(), st.momentum.copy()
    u = st.energy
    hmc_kernel(qq, u, gg, pp, step, settings, t, hyper, rng)
    iters = 200 if hidden * n_cases <= 3200 else 20
    t0 = time.perf_counter()
    acc = 0
    for _ in range(iters):
        a, _, _, _, _, u, _ = hmc_kernel(qq, u, gg, pp, step, settings, t, hyper, rng)
        acc += a
    lf_rate = iters * 100 / (time.perf_counter() - t0)
    return dict(hidden=hidden, cases=n_cases, grad_evals_per_s=grad_rate, numpy_grad_evals_per_s=np_rate,
                grad_speedup_vs_numpy=grad_rate / np_rate, leapfrog_per_s=lf_rate, hmc_acceptance=acc / iters)


def main():
    rows = [measure(16, 200), measure(64, 200), measure(16, 2000)]
    print(f"{'network':>10} {'cases':>6} {'grad/s':>10} {'numpy/s':>9} {'speedup':>8} {'leapfrog/s':>11}")
    for r in rows:
        print(f"{'2-%d-2' % r['hidden']:>10} {r['cases']:>6} {r['grad_evals_per_s']:>10,.0f} "
              f"{r['numpy_grad_evals_per_s']:>9,.0f} {r['grad_speedup_vs_numpy']:>7.1f}x {r['leapfrog_per_s']:>11,.0f}")
    main_row = rows[0]
    print(json.dumps({k: round(main_row[k], 1) for k in
                      ("grad_evals_per_s", "numpy_grad_evals_per_s", "grad_speedup_vs_numpy", "leapfrog_per_s")}))


if __name__ == "__main__":
    main()
