"""Quick robot-arm run: a 2-16-2 Bayesian MLP sampled by HMC with Gibbs updates
of the hyperparameters (Neal's hand-tuned style), test error printed.

Run: python experiments/quick_robot_arm.py [--iterations N] [--seed S]
"""
import argparse
import time

import numpy as np

from adaptive_hmc.data import load_robot_arm, robot_arm_truth
from adaptive_hmc.models.bnn import BayesianMLP
from adaptive_hmc.models.mlp import MLPSpec
from adaptive_hmc.samplers import HMCParams, init_state, make_hmc


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=1500, help="Gibbs+HMC iterations (default 1500)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    if args.iterations < 4:
        ap.error(f"--iterations {args.iterations}: need at least 4")

    arm = load_robot_arm()
    X, Y = arm.rows(1, 200)
    model = BayesianMLP(MLPSpec(2, (16,), 2), X, Y)
    rng = np.random.default_rng(args.seed)
    hmc = make_hmc(model)
    t0 = time.perf_counter()
    # Initial phase (Rasmussen 1996 section 2.3): hyperparameters fixed at 1.
    state = init_state(model, model.initial_position(), model.initial_hyper(1.0))
    for _ in range(20):
        state, _ = hmc(state, HMCParams(100, step_factor=0.3), rng)
    params = HMCParams(100, step_factor=0.3, window=10)
    samples, accepted, steps = [], 0, 2000
    for i in range(args.iterations):
        state, _ = model.gibbs(state, None, rng)
        state, info = hmc(state, params, rng)
        accepted += info.accepted
        steps += info.num_steps
        if i >= args.iterations // 4:
            samples.append(state.position)
    seconds = time.perf_counter() - t0
    Q = np.array(samples)
    print(f"robot arm, 2-16-2 MLP: {args.iterations} iterations of Gibbs + HMC (L=100, window 10, "
          f"step factor 0.3), {steps:,} leapfrog steps in {seconds:.1f} s; acceptance {accepted / args.iterations:.2f}")
    print(f"noise sd {np.round(1 / np.sqrt(state.hyper.noise), 4)} (true 0.05)")
    for first, last in ((201, 400), (401, 600)):
        Xt, Yt = arm.rows(first, last)
        pred = model.predict(Q, Xt).mean(axis=0)
        mse = np.mean(np.sum((pred - Yt) ** 2, axis=1))
        floor = np.mean(np.sum((robot_arm_truth(Xt) - Yt) ** 2, axis=1))
        print(f"test rows {first}-{last}: mean squared error {mse:.5f} "
              f"(noise-free truth scores {floor:.5f}; training-mean predictor {np.mean(np.sum((Y.mean(0) - Yt) ** 2, 1)):.3f})")


if __name__ == "__main__":
    main()
