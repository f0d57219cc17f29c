"""Speed of the core: energy+gradient evaluations/s and HMC leapfrog steps/s,
as a ratio of a minimal compiled kernel for the same network and against the
vectorised NumPy reference, each measured in the same run (alternating).

Run: python benchmarks/bench_core.py   (single-threaded; the last line is JSON)
"""
import json
import math
import time

import numpy as np

from adaptive_hmc.jit import fast_tanh, njit
from adaptive_hmc.models import reference
from adaptive_hmc.models.base import energy_grad
from adaptive_hmc.models.bnn import BayesianMLP
from adaptive_hmc.models.mlp import MLPSpec
from adaptive_hmc.models.predictive import new_accumulator
from adaptive_hmc.engine.network_options import DEFAULT_PREDICT_STEPS
from adaptive_hmc.engine.super_transition import predict_every
from adaptive_hmc.samplers import hmc_settings, init_state
from adaptive_hmc.samplers.chain import Observers, Record, new_chain, new_record, run_chain
from adaptive_hmc.samplers.hmc import hmc_kernel
from adaptive_hmc.samplers.leapfrog import leapfrog


@njit(cache=False)
def _grad_loop(n, q, g, target, hyper):
    s = 0.0
    for _ in range(n):
        s += energy_grad(q, g, target, hyper)
    return s


@njit
def minimal_energy_grad(q, g, XT, YT, prec, noise, A, D):
    """The minimal kernel the package's rate is measured against: energy and
    gradient of a one-hidden-layer tanh network with Gaussian outputs, written
    for that network alone (no layers, likelihoods, sparse inputs, direct
    connections or padding to choose from), in the package's layout
    q = [W1 (n_in, H), b1, W2 (H, n_out), b2] with cases along rows of XT
    (n_in, N), the same tanh and compiler options. A (H, N) and D (n_out + 1,
    N) are scratch."""
    n_in, N = XT.shape
    n_out = YT.shape[0]
    H = A.shape[0]
    w2 = n_in * H + H
    b2 = w2 + H * n_out
    U = 0.0
    for k in range(q.size):
        g[k] = prec[k] * q[k]
        U += 0.5 * prec[k] * q[k] * q[k]
    for j in range(H):
        a = A[j]
        b = q[n_in * H + j]
        for n in range(N):
            a[n] = b
        for i in range(n_in):
            w = q[i * H + j]
            x = XT[i]
            for n in range(N):
                a[n] += w * x[n]
        for n in range(N):
            a[n] = fast_tanh(a[n])
    for o in range(n_out):
        d = D[o]
        b = q[b2 + o]
        for n in range(N):
            d[n] = b
        for j in range(H):
            w = q[w2 + j * n_out + o]
            a = A[j]
            for n in range(N):
                d[n] += w * a[n]
        s = 0.0
        y = YT[o]
        for n in range(N):
            r = d[n] - y[n]
            s += r * r
            d[n] = noise[o] * r
        U += 0.5 * noise[o] * s
        gb = 0.0
        for n in range(N):
            gb += d[n]
        g[b2 + o] += gb
    for j in range(H):
        a = A[j]
        for o in range(n_out):
            s = 0.0
            d = D[o]
            for n in range(N):
                s += d[n] * a[n]
            g[w2 + j * n_out + o] += s
        # back through tanh: delta_n = sum_o d_on W2_jo (1 - a^2)
        t = D[n_out]
        w = q[w2 + j * n_out]
        d = D[0]
        for n in range(N):
            t[n] = w * d[n]
        for o in range(1, n_out):
            w = q[w2 + j * n_out + o]
            d = D[o]
            for n in range(N):
                t[n] += w * d[n]
        for n in range(N):
            a[n] = t[n] * (1.0 - a[n] * a[n])
        s = 0.0
        for n in range(N):
            s += a[n]
        g[n_in * H + j] += s
        for i in range(n_in):
            s = 0.0
            x = XT[i]
            for n in range(N):
                s += a[n] * x[n]
            g[i * H + j] += s
    return U


@njit(cache=False)
def _leapfrog_steps(n, q, p, g, step_sizes, target, hyper):
    energy_grad(q, g, target, hyper)
    return leapfrog(q, p, g, step_sizes, n, target, hyper)[0]


@njit(cache=False)
def _minimal_loop(n, q, g, XT, YT, prec, noise, A, D):
    s = 0.0
    for _ in range(n):
        s += minimal_energy_grad(q, g, XT, YT, prec, noise, A, D)
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
    prec, noise = hyper.prec.copy(), hyper.noise.copy()
    XT, YT = np.ascontiguousarray(X.T), np.ascontiguousarray(Y.T)
    A, D, g_min = np.empty((hidden, n_cases)), np.empty((3, n_cases)), np.empty_like(q)
    u_pkg, u_min = _grad_loop(1, q, g, t, hyper), _minimal_loop(1, q, g_min, XT, YT, prec, noise, A, D)
    assert abs(u_pkg - u_min) <= 1e-9 * abs(u_min) and np.allclose(g, g_min, rtol=1e-9, atol=1e-9), \
        "the minimal kernel computes another energy"
    n = max(200, int(2e7 / (hidden * n_cases)))
    grad_rate = min_rate = 0.0
    for _ in range(5):   # alternating, best of each: the machine's noise hits both alike
        grad_rate = max(grad_rate, _best_rate(lambda k: _grad_loop(k, q, g, t, hyper), n, repeats=1))
        min_rate = max(min_rate, _best_rate(lambda k: _minimal_loop(k, q, g_min, XT, YT, prec, noise, A, D), n,
                                            repeats=1))
    np_rate = _best_rate(lambda k: [reference.energy_grad(spec, q, X, Y, prec, noise) for _ in range(k)],
                         max(20, n // 20), repeats=3)
    # HMC: 200 iterations of L = 100, the trajectory loop compiled (hmc_kernel).
    st = init_state(model, q, hyper)
    settings = hmc_settings(100, step_factor=0.3)
    step = 0.3 * model.scales(hyper)
    qq, gg, pp = st.position.copy(), st.grad.copy(), st.momentum.copy()
    u = float(st.energy[0])
    hmc_kernel(qq, u, gg, pp, step, settings, t, hyper, rng)
    iters = 200 if hidden * n_cases <= 3200 else 20
    t0 = time.perf_counter()
    acc = 0
    for _ in range(iters):
        info = hmc_kernel(qq, u, gg, pp, step, settings, t, hyper, rng)
        u, acc = info.energy, acc + info.accepted
    lf_rate = iters * 100 / (time.perf_counter() - t0)
    return dict(hidden=hidden, cases=n_cases, grad_evals_per_s=grad_rate, minimal_grad_evals_per_s=min_rate,
                ratio_to_minimal=grad_rate / min_rate, numpy_grad_evals_per_s=np_rate,
                grad_speedup_vs_numpy=grad_rate / np_rate, leapfrog_per_s=lf_rate, hmc_acceptance=acc / iters)


def iteration_overhead(L=20, n_iter=4000, seed=0):
    """Microseconds per iteration of the compiled loop beyond its L leapfrog
    steps (timed on their own, one long trajectory) (2-16-2 network, 200
    training cases, step factor 0.05), split into the Gibbs update (with the
    energy and gradient evaluation it needs after it, which the run counts as
    a gradient), accumulating the predictions on 400 test cases (from every
    iteration, and from those the default ``predict_steps`` picks), and the
    rest (momentum, acceptance test, records). Best of 5 alternating timings
    each."""
    rng = np.random.default_rng(seed)
    spec = MLPSpec(2, (16,), 2)
    X = rng.uniform(-2, 2, size=(600, 2))
    Y = np.column_stack([np.cos(X[:, 0]), np.sin(X[:, 1])]) + 0.05 * rng.normal(size=(600, 2))
    model = BayesianMLP(spec, X[:200], Y[:200])
    hyper = model.initial_hyper()
    q = 0.3 * rng.normal(size=model.dim)
    none = new_accumulator(spec, X[:0], Y[:0])
    H = len(model.hyper_names())
    every = predict_every(DEFAULT_PREDICT_STEPS, L, False, n_iter)

    def loop(gibbs, test, every):
        chain = new_chain(q.copy(), hyper.copy())
        s = hmc_settings(L, step_factor=0.05, gibbs=gibbs)
        rec = Record(*(a[0] for a in new_record(1, n_iter, H)))
        obs = Observers(none, new_accumulator(spec, X[200:], Y[200:]) if test else none, -1, 0,
                        np.empty((0, model.dim + H)), every)
        t = time.perf_counter()
        run_chain(model.target, chain, s, n_iter, rec, obs, np.random.default_rng(1))
        return (time.perf_counter() - t) / n_iter

    step = 0.05 * model.scales(hyper)

    def steps(n):
        qq, pp = q.copy(), rng.standard_normal(q.size)
        t = time.perf_counter()
        _leapfrog_steps(n, qq, pp, np.empty_like(q), step, model.target, hyper)
        return (time.perf_counter() - t) / n

    steps(1)
    cases = {"plain": (False, False, 1), "gibbs": (True, False, 1), "test_every": (False, True, 1),
             "test": (False, True, every), "both": (True, True, every)}
    for k, v in cases.items():
        loop(*v)                                  # compiled before timing
    best = dict.fromkeys(list(cases) + ["step"], math.inf)
    for _ in range(5):
        for k, v in cases.items():
            best[k] = min(best[k], loop(*v))
        best["step"] = min(best["step"], steps(n_iter * L))
    return dict(num_steps=L, step_us=1e6 * best["step"], iteration_us=1e6 * best["both"],
                overhead_us=1e6 * (best["both"] - L * best["step"]),
                beyond_gradients_us=1e6 * (best["both"] - (L + 1) * best["step"]),
                gibbs_us=1e6 * (best["gibbs"] - best["plain"]), predict_every=every,
                test_predictions_us=1e6 * (best["test"] - best["plain"]),
                every_iteration_predictions_us=1e6 * (best["test_every"] - best["plain"]),
                rest_us=1e6 * (best["plain"] - L * best["step"]))


def main():
    rows = [measure(16, 200), measure(16, 175), measure(64, 200), measure(16, 2000)]
    print(f"{'network':>10} {'cases':>6} {'grad/s':>10} {'minimal/s':>10} {'ratio':>6} {'numpy/s':>9} "
          f"{'speedup':>8} {'leapfrog/s':>11}")
    for r in rows:
        print(f"{'2-%d-2' % r['hidden']:>10} {r['cases']:>6} {r['grad_evals_per_s']:>10,.0f} "
              f"{r['minimal_grad_evals_per_s']:>10,.0f} {r['ratio_to_minimal']:>6.2f} "
              f"{r['numpy_grad_evals_per_s']:>9,.0f} {r['grad_speedup_vs_numpy']:>7.1f}x {r['leapfrog_per_s']:>11,.0f}")
    o = iteration_overhead()
    print(f"iteration at L = {o['num_steps']}: {o['iteration_us']:.1f} us, of which beyond its {o['num_steps']} "
          f"leapfrog steps ({o['step_us']:.2f} us each) {o['overhead_us']:.1f} us: Gibbs update with its counted "
          f"gradient {o['gibbs_us']:.1f}, test predictions (400 cases, one iteration in {o['predict_every']}) "
          f"{o['test_predictions_us']:.1f} (from every iteration {o['every_iteration_predictions_us']:.1f}), the rest "
          f"{o['rest_us']:.1f}; beyond all {o['num_steps'] + 1} counted gradients {o['beyond_gradients_us']:.1f} us")
    main_row = rows[0]
    print(json.dumps({k: round(main_row[k], 3 if k == "ratio_to_minimal" else 1) for k in
                      ("grad_evals_per_s", "minimal_grad_evals_per_s", "ratio_to_minimal", "numpy_grad_evals_per_s",
                       "grad_speedup_vs_numpy", "leapfrog_per_s")} | {"iteration_overhead_us": round(o["overhead_us"], 1),
                                                            "beyond_gradients_us": round(o["beyond_gradients_us"], 1)}))


if __name__ == "__main__":
    main()
