"""The network gradient at the machine's limit: energy + gradient evaluations of
a one-hidden-layer tanh regression network (9 inputs, one output, as
statsmodels' randhie) for 200 to 20,000 training rows and hidden widths 8 to
128, as floating-point operations per second, against this machine's
double-precision matrix products of the same shapes (the five BLAS GEMMs a
gradient is made of, through NumPy, on one thread, in the same process,
alternating with the kernel).

flops of one gradient = 2 N (2 n_in H + 3 H n_out): the forward pass's two
products, the weight gradients' two and the delta's one (tanh and the
likelihood not counted).

The machine's own limit is measured in the same process too: square 2048 x 2048
GEMMs (one thread, best of five) in float64 and float32, the core's peak
(``peak_gflops``); each size reports the kernel against the float64 one
(``peak_fraction``), and the float32 kernel (``arithmetic="float32"``) beside it:
its rate (``kernel_gflops_float32``), its share of the float32 peak
(``peak_fraction_float32``) and its gradients a second over the float64
kernel's (``float32_speedup``).

Run: python benchmarks/bench_scale.py [--quick]   (one thread; the last line is
JSON, whose flop_fraction is the kernel's rate over the GEMMs' at the largest
size and peak_fraction its rate over the square float64 GEMM's)
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from adaptive_hmc.models.bnn import BayesianMLP
from adaptive_hmc.models.mlp import MLPSpec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import _grad_loop  # noqa: E402  (the same timed loop of energy_grad calls)

N_IN, N_OUT = 9, 1
ROWS = (200, 2000, 20000)
WIDTHS = (8, 32, 128)


def flops(N: int, H: int) -> float:
    """Floating-point operations of the matrix products of one gradient."""
    return 2.0 * N * (2 * N_IN * H + 3 * H * N_OUT)


def _best_seconds(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def measure(N: int, H: int, seconds: float = 0.2, repeats: int = 5) -> dict:
    """Gradients per second of the package's kernel and the GEMMs' rate, both as GFLOP/s."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, N_IN))
    Y = np.sin(X[:, :1]) + 0.1 * rng.normal(size=(N, 1))
    model = BayesianMLP(MLPSpec(N_IN, (H,), N_OUT), X, Y)
    model32 = BayesianMLP(MLPSpec(N_IN, (H,), N_OUT), X, Y, arithmetic="float32")
    hyper = model.initial_hyper()
    q = 0.1 * rng.normal(size=model.dim)
    g = np.empty_like(q)
    _grad_loop(1, q, g, model.target, hyper)                     # compile
    _grad_loop(1, q, g, model32.target, hyper)
    t = time.perf_counter()
    _grad_loop(3, q, g, model.target, hyper)
    n = max(1, int(seconds / max((time.perf_counter() - t) / 3, 1e-9)))
    # The same products through BLAS: A = tanh(W1' X), out = W2' A, dW2 = A d', delta = W2 d, dW1 = delta X'.
    XT = np.ascontiguousarray(X.T)
    W1, W2 = rng.normal(size=(N_IN, H)), rng.normal(size=(H, N_OUT))
    A, d = np.empty((H, N)), rng.normal(size=(N_OUT, N))
    out, dW2, delta, dW1 = np.empty((N_OUT, N)), np.empty((H, N_OUT)), np.empty((H, N)), np.empty((H, N_IN))

    def gemms():
        for _ in range(n):
            np.matmul(W1.T, XT, out=A)
            np.matmul(W2.T, A, out=out)
            np.matmul(A, d.T, out=dW2)
            np.matmul(W2, d, out=delta)
            np.matmul(delta, X, out=dW1)
    kernel, kernel32, blas = [], [], []
    with threadpool_limits(1):
        for _ in range(repeats):                                 # alternating, best of each
            kernel.append(_best_seconds(lambda: _grad_loop(n, q, g, model.target, hyper), 1))
            kernel32.append(_best_seconds(lambda: _grad_loop(n, q, g, model32.target, hyper), 1))
            blas.append(_best_seconds(gemms, 1))
    f = flops(N, H) * n
    k, k32, b = f / min(kernel) / 1e9, f / min(kernel32) / 1e9, f / min(blas) / 1e9
    return {"rows": N, "hidden": H, "kernel_gflops": _figures(k), "gemm_gflops": _figures(b),   # 3 significant
            "fraction": _figures(k / b), "gradients_per_s": round(n / min(kernel), 1),              # figures each
            "kernel_gflops_float32": _figures(k32), "float32_speedup": _figures(k32 / k)}


def peak(n: int = 2048, repeats: int = 5) -> dict:
    """The core's peak, GFLOP/s of a square n x n GEMM (2 n^3 flops) on one thread, best of ``repeats``,
    in float64 and float32."""
    out = {}
    rng = np.random.default_rng(1)
    with threadpool_limits(1):
        for dtype in (np.float64, np.float32):
            A, B = rng.normal(size=(n, n)).astype(dtype), rng.normal(size=(n, n)).astype(dtype)
            C = np.empty((n, n), dtype)
            np.matmul(A, B, out=C)                                   # warm
            out[np.dtype(dtype).name] = _figures(2.0 * n ** 3 / _best_seconds(lambda: np.matmul(A, B, out=C),
                                                                               repeats) / 1e9)
    return out


def _figures(x: float) -> float:
    """``x`` to 3 significant figures (a loaded machine's 0.0412 GFLOP/s keeps its precision)."""
    return float(f"{x:.3g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the smallest and largest sizes only, shorter timings")
    args = ap.parse_args()
    sizes = [(ROWS[0], WIDTHS[0]), (ROWS[-1], WIDTHS[-1])] if args.quick else [(N, H) for N in ROWS for H in WIDTHS]
    rows = []
    top = peak(512 if args.quick else 2048, 2 if args.quick else 5)
    print(f"the core's peak (square GEMM, one thread): {top['float64']} GFLOP/s float64, {top['float32']} float32")
    print(f"{'rows':>6} {'hidden':>6} {'kernel GFLOP/s':>15} {'GEMM GFLOP/s':>13} {'fraction':>9} "
          f"{'of peak':>8} {'gradients/s':>12} {'float32 GFLOP/s':>16} {'of peak':>8} {'speedup':>8}")
    for N, H in sizes:
        r = measure(N, H, seconds=0.05 if args.quick else 0.3, repeats=2 if args.quick else 5)
        r["peak_fraction"] = _figures(r["kernel_gflops"] / top["float64"])
        r["peak_fraction_float32"] = _figures(r["kernel_gflops_float32"] / top["float32"])
        rows.append(r)
        print(f"{r['rows']:>6} {r['hidden']:>6} {r['kernel_gflops']:>15} {r['gemm_gflops']:>13} "
              f"{r['fraction']:>9} {r['peak_fraction']:>8} {r['gradients_per_s']:>12} "
              f"{r['kernel_gflops_float32']:>16} {r['peak_fraction_float32']:>8} {r['float32_speedup']:>8}",
              flush=True)
    print(json.dumps({"flop_fraction": rows[-1]["fraction"], "peak_gflops": top,
                      "peak_fraction": rows[-1]["peak_fraction"], "largest": rows[-1], "sizes": rows}))


if __name__ == "__main__":
    main()
