"""How much noise the reward loses by using every chain of one posterior: the
ESJD/sqrt(L) reward of repeated super-transitions at one action, from all k
chains (their mean, the package's reward) and from one chain alone.

The reward of a super-transition is the mean over its chains of
sum_i a_i ||q'_i - q_i||^2 / sqrt(L) (rewards.esjd_reward). With chains of one
posterior the k terms are independent estimates of the same quantity, so the
mean's sd should fall by about sqrt(k) against one chain's; this measures it.

Run: python experiments/reward_noise.py [--config configs/robot_arm_fixed_hyper_bandit.yaml]
     [--actions 0.05:100 0.1:50] [--repeats 40] [--budget 24000] [--quick]
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from adaptive_hmc.config import read_config
from adaptive_hmc.front.experiment import build
from adaptive_hmc.samplers.settings import Action
from adaptive_hmc.engine.chain_set import advance

ROOT = Path(__file__).resolve().parents[1]


def chain_rewards(result) -> np.ndarray:
    """Each chain's ESJD/sqrt(L) in one super-transition (their mean is the reward)."""
    r = result.record
    return np.sum(r.accept_prob * r.squared_jump, axis=1) / math.sqrt(result.num_steps)


def measure(config: Path, actions, repeats: int, budget: int, warm: int, seed: int = 1) -> list:
    cfg = read_config(config, {"run.seed": seed})
    replicas = build(cfg, str(config))[0].chains
    for _ in range(warm):                                   # leave the start at a safe action
        advance(replicas, Action(actions[0][0], actions[0][1]), budget)
    rows = []
    for eps, L in actions:
        per = np.array([chain_rewards(advance(replicas, Action(eps, L), budget)) for _ in range(repeats)])
        mean_all, one = per.mean(axis=1), per[:, 0]
        rows.append({"step_factor": eps, "num_steps": L, "chains": per.shape[1], "reward": float(mean_all.mean()),
                     "cv_all": float(mean_all.std(ddof=1) / mean_all.mean()),
                     "cv_one": float(one.std(ddof=1) / one.mean()),
                     "ratio": float(one.std(ddof=1) / mean_all.std(ddof=1))})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "robot_arm_fixed_hyper_bandit.yaml")
    ap.add_argument("--actions", nargs="+", default=["0.05:100", "0.1:50", "0.2:20"],
                    help="step_factor:num_steps of each action measured")
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--budget", type=int, default=24000)
    ap.add_argument("--quick", action="store_true", help="5 repeats of a 2000-step budget")
    args = ap.parse_args(argv)
    actions = [(float(a.split(":")[0]), int(a.split(":")[1])) for a in args.actions]
    repeats, budget = (5, 2000) if args.quick else (args.repeats, args.budget)
    rows = measure(args.config, actions, repeats, budget, warm=2 if args.quick else 10)
    print(f"{args.config.name}: {repeats} super-transitions of {budget} leapfrog steps a chain at each action")
    print("| step factor | L | chains | mean reward | sd/mean, all chains | sd/mean, one chain | sd ratio |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['step_factor']} | {r['num_steps']} | {r['chains']} | {r['reward']:.4g} | {r['cv_all']:.3f} | "
              f"{r['cv_one']:.3f} | {r['ratio']:.2f} |")
    return rows


if __name__ == "__main__":
    main()
