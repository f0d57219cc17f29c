"""Speed of the first layer on sparse inputs: energy+gradient evaluations/s of
Dexter's 295-20-8-1 logistic network (hierarchical priors with ARD) on 200
training cases, the first layer reading the nonzero inputs (CSC) against the
dense kernel, measured back to back in the same run.

Run: python benchmarks/bench_dexter.py [--quick]   (single-threaded; the last line is JSON)
"""
import argparse
import json
import sys
import time

import numpy as np

from adaptive_hmc.data import data_dir, select_features
from adaptive_hmc.models.bnn import BayesianMLP
from adaptive_hmc.models.mlp import MLPSpec
from adaptive_hmc.models.priors import PriorSpec
from adaptive_hmc.tasks import load_dexter
from bench_core import _grad_loop          # the same compiled loop of energy_grad calls


def _rate(model, n, repeats, rng):
    hyper = model.initial_hyper()
    q = 0.1 * rng.normal(size=model.dim)
    g = np.empty_like(q)
    _grad_loop(1, q, g, model.target, hyper)
    best = 0.0
    for _ in range(repeats):
        t = time.perf_counter()
        _grad_loop(n, q, g, model.target, hyper)
        best = max(best, n / (time.perf_counter() - t))
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer evaluations")
    args = ap.parse_args(argv)
    X, y = load_dexter(data_dir("dexter"))
    rng = np.random.default_rng(0)
    train = np.sort(rng.permutation(X.shape[0])[:200])
    cols = select_features(X[train], y[train], 295)
    Xs = np.log1p(X[train][:, cols].toarray())
    spec = MLPSpec(295, (20, 8), 1, "logistic")
    priors = PriorSpec(ard=True, hyper_moves="gibbs")   # as configs/dexter_*.yaml
    sparse = BayesianMLP(spec, Xs, y[train], priors, sparse=True)
    dense = BayesianMLP(spec, Xs, y[train], priors, sparse=False)
    n, repeats = (200, 2) if args.quick else (3000, 5)
    rates = {}
    for name, model in (("dense", dense), ("sparse", sparse), ("dense_again", dense)):
        rates[name] = _rate(model, n, repeats, np.random.default_rng(1))
    d = max(rates["dense"], rates["dense_again"])
    nnz = np.count_nonzero(Xs)
    print(f"Dexter 295-20-8-1 logistic, 200 cases, {spec.n_params} parameters, {nnz} nonzero inputs "
          f"({nnz / Xs.size:.1%} of {Xs.size})", file=sys.stderr)
    print(f"dense kernel:  {d:10.0f} grad evals/s  ({1e6 / d:.1f} us each)", file=sys.stderr)
    print(f"sparse kernel: {rates['sparse']:10.0f} grad evals/s  ({1e6 / rates['sparse']:.1f} us each)", file=sys.stderr)
    print(f"speed-up: {rates['sparse'] / d:.1f}x", file=sys.stderr)
    print(json.dumps({"sparse_grad_evals_per_s": rates["sparse"], "dense_grad_evals_per_s": d,
                      "sparse_speedup": rates["sparse"] / d, "n_params": spec.n_params, "nonzero_share": nnz / Xs.size}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
