"""What the `init regression` template costs a super-transition, as written:
a synthetic table of 9 inputs (one target, sin and linear terms plus noise),
`adaptive-hmc init regression --csv` on it, then the run with a fixed length
(`run.until: null`, `run.super_transitions` N, the warm-up and burn-in scaled
down), random starts (`sampler.start: random`, so that the optimiser's cost
is left out) and the template's precision or the one given; seconds a
super-transition from summary.json's wall_s (sampling alone, compiling
apart). A template without the keys ``sampler.start`` or ``sampler.precision``
(an older version's) runs as it is: random starts, float64. ``--tree DIR`` runs another checkout of the package instead of this
one (its own `init` template), so that two versions compare on the same
table, alternating (`--repeats`, the best of each).

Run: python benchmarks/bench_template.py [--rows 800 20000] [--precision float64] [--tree OTHER]
     (the last line is JSON: seconds a super-transition by rows and tree)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]


def table(path: Path, rows: int) -> Path:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(rows, 9))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] - 0.3 * X[:, 2] * X[:, 3] + 0.1 * rng.normal(size=rows)
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", header=",".join([f"x{i}" for i in range(9)] + ["y"]),
               comments="", fmt="%.6g")
    return path


def cli(tree: Path, *args, cwd: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.run([sys.executable, "-m", "adaptive_hmc.front.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: adaptive-hmc {' '.join(args)} failed:\n{proc.stderr[-2000:]}")


def seconds_per_super(tree: Path, csv: Path, work: Path, n: int, precision: str | None) -> float:
    """One run of ``tree``'s template on ``csv``: seconds of sampling a super-transition."""
    config = work / f"{tree.name}.yaml"
    cli(tree, "init", "regression", "--csv", str(csv), "--out", str(config), "--force", cwd=work)
    raw = yaml.safe_load(config.read_text())
    raw["run"].update(super_transitions=n, until=None, burn_in={"super_transitions": 1})
    raw["tuner"]["warmup_super_transitions"] = 1
    if "start" in raw["sampler"]:                 # an older template (random starts only) has no such key
        raw["sampler"]["start"] = "random"
    if precision and "precision" in raw["sampler"]:   # nor a precision (float64 only)
        raw["sampler"]["precision"] = precision
    config.write_text(yaml.safe_dump(raw))
    out = work / f"run-{tree.name}"
    cli(tree, "run", str(config), "--out", str(out), "--quiet", cwd=work)
    summary = json.loads((out / "summary.json").read_text())
    subprocess.run(["rm", "-rf", str(out)])
    return summary["wall_s"] / summary["super_transitions"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[800, 20000])
    ap.add_argument("--super-transitions", type=int, default=6)
    ap.add_argument("--precision", choices=["float32", "float64"], help="default: the template's")
    ap.add_argument("--tree", type=Path, help="another checkout to compare with, alternating")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    trees = [ROOT] + ([args.tree.resolve()] if args.tree else [])
    best = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for rows in args.rows:
            csv = table(work / f"t{rows}.csv", rows)
            for _ in range(args.repeats):
                for tree in trees:
                    s = seconds_per_super(tree, csv, work, args.super_transitions, args.precision)
                    key = f"{rows} {tree}"
                    best[key] = min(best.get(key, np.inf), s)
                    print(f"{rows:>6} rows  {tree}: {s:.3f} s a super-transition", flush=True)
    if args.tree:
        for rows in args.rows:
            print(f"{rows:>6} rows: {best[f'{rows} {args.tree.resolve()}'] / best[f'{rows} {ROOT}']:.2f}x faster "
                  f"than {args.tree} (best of {args.repeats} each)")
    print(json.dumps(best))


if __name__ == "__main__":
    main()
