"""Which direction holds a network run's chains: for each finished run directory, the R-hat across its
chains, the bulk ESS and each chain's own split R-hat (its halves) of the log norm of every weight group,
of every log hyperparameter that varies, of the energy and of a few hidden units' input scales (the log
norm of their incoming weights), on the kept samples after the run's first quarter (ArviZ's statistics).

The quantity with the smallest ESS names the direction the chains move slowest in: a group's norm or
precision (the coupling of the precisions and their weights), the noise precision against the fit, or a
hidden unit's scale (the weights' own geometry). Run a config as written and again with every precision
fixed at the first run's posterior mean (`shape: .inf`, `mean_precision` the exponential of its mean log)
to tell the two apart (docs/RESULTS.md, "What holds the regression chains").

Run: python experiments/slow_directions.py RUN_DIR [RUN_DIR ...] [--units 3] [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import arviz as az
import numpy as np

from adaptive_hmc.models.mlp import MLPSpec


def quantities(samples, units: int = 3) -> dict:
    """{name: (draws,) values} of a run's kept samples (samples.npz's arrays)."""
    spec = MLPSpec.from_arch(samples["arch"])
    W, h = samples["weights"], samples["hyper"]
    out = {f"log |{g.name}|": 0.5 * np.log((W[:, g.start:g.stop] ** 2).sum(axis=1)) for g in spec.groups}
    for j in range(h.shape[1]):
        if np.ptp(h[:, j]) > 0:
            out[f"log hyper {j}"] = np.log(h[:, j])
    out["energy"] = samples["energy"]
    first = next(g for g in spec.groups if g.kind == "input_hidden")
    w_in = W[:, first.start:first.stop].reshape(len(W), spec.n_inputs, -1)
    for u in range(min(units, w_in.shape[2])):
        out[f"log |w_in of unit {u}|"] = 0.5 * np.log((w_in[:, :, u] ** 2).sum(axis=1))
    return out


def statistics(run_dir: Path, units: int = 3) -> dict:
    """{quantity: {rhat, ess, own, means, sd}} of ``run_dir``'s samples after its first quarter."""
    samples = np.load(Path(run_dir) / "samples.npz")
    chain, st = samples["chain"], samples["super_transition"]
    keep = st > st.max() // 4
    chains = np.unique(chain)
    n = min(int(np.sum(keep & (chain == c))) for c in chains) // 2 * 2
    result = {}
    for name, v in quantities(samples, units).items():
        arr = np.stack([v[keep & (chain == c)][:n] for c in chains])
        result[name] = {"rhat": float(az.rhat(arr)), "ess": float(az.ess(arr)),
                        "own": [float(az.rhat(a.reshape(2, -1))) for a in arr],
                        "means": arr.mean(axis=1).tolist(), "sd": float(arr.std())}
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--units", type=int, default=3)
    p.add_argument("--json", action="store_true", help="one JSON line a run")
    a = p.parse_args(argv)
    for d in a.runs:
        stats = statistics(d, a.units)
        if a.json:
            print(json.dumps({"run": str(d), "quantities": stats}))
            continue
        print(d)
        for name, s in sorted(stats.items(), key=lambda kv: kv[1]["ess"]):
            own = ", ".join(f"{x:.2f}" for x in s["own"])
            means = ", ".join(f"{x:.2f}" for x in s["means"])
            print(f"  {name:24s} ESS {s['ess']:8.1f}  R-hat {s['rhat']:.3f}  own {own}  means {means}  sd {s['sd']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
