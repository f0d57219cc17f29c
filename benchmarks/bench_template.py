"""What the `init regression` template costs a super-transition, as written:
a synthetic table of 9 inputs (one target, sin and linear terms plus noise),
`adaptive-hmc init regression --csv` on it, then the run with a fixed length
(`run.until: null`, `run.super_transitions` N, the warm-up and burn-in scaled
down), random starts (`sampler.start: random`, so that the optimiser's cost
is left out) and the template's arithmetic or the one given; seconds a
super-transition from summary.json's wall_s (sampling alone, compiling
apart). A template without the keys ``sampler.start`` or ``sampler.arithmetic``
(an older version's) runs as it is: random starts, float64. ``--tree DIR`` runs another checkout of the package instead of this
one (its own `init` template), so that two versions compare on the same
table, alternating (`--repeats`, the best of each). ``--threads 1 2``
runs this checkout on each thread count instead (``run.threads``; with
``--chains 1``, one chain on more than one thread: its blocks of cases
shared), alternating, and checks that every thread count kept the same
samples, byte for byte.

Run: python benchmarks/bench_template.py [--rows 800 20000] [--arithmetic float64] [--tree OTHER]
     [--chains K] [--threads 1 2]
     (the last line is JSON: seconds a super-transition by rows and tree or threads)
"""
import argparse
import hashlib
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


def seconds_per_super(tree: Path, csv: Path, work: Path, n: int, arithmetic: str | None, chains: int | None = None,
                      threads: int | None = None) -> tuple:
    """One run of ``tree``'s template on ``csv`` (with ``chains`` and ``run.threads`` when given): (seconds of
    sampling a super-transition, the SHA-256 of its kept samples)."""
    config = work / f"{tree.name}.yaml"
    cli(tree, "init", "regression", "--csv", str(csv), "--out", str(config), "--force", cwd=work)
    raw = yaml.safe_load(config.read_text())
    raw["run"].update(super_transitions=n, until=None, burn_in={"super_transitions": 1})
    raw["tuner"]["warmup_super_transitions"] = 1
    if "start" in raw["sampler"]:                 # an older template (random starts only) has no such key
        raw["sampler"]["start"] = "random"
    if arithmetic and "arithmetic" in raw["sampler"]:   # nor an arithmetic (float64 only)
        raw["sampler"]["arithmetic"] = arithmetic
    if chains:
        raw["chains"] = chains
    if threads:
        raw["run"]["threads"] = threads
    config.write_text(yaml.safe_dump(raw))
    out = work / f"run-{tree.name}"
    cli(tree, "run", str(config), "--out", str(out), "--quiet", cwd=work)
    summary = json.loads((out / "summary.json").read_text())
    with np.load(out / "samples.npz") as z:
        digest = hashlib.sha256(b"".join(z[k].tobytes() for k in sorted(z.files))).hexdigest()
    subprocess.run(["rm", "-rf", str(out)])
    return summary["wall_s"] / summary["super_transitions"], digest


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[800, 20000])
    ap.add_argument("--super-transitions", type=int, default=6)
    ap.add_argument("--arithmetic", choices=["float32", "float64"], help="default: the template's")
    ap.add_argument("--tree", type=Path, help="another checkout to compare with, alternating")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--chains", type=int, help="default: the template's")
    ap.add_argument("--threads", type=int, nargs="+", help="thread counts to compare (this checkout)")
    args = ap.parse_args(argv)
    if args.tree and args.threads:
        ap.error("--tree compares checkouts, --threads thread counts: one of them")
    trees = [ROOT] + ([args.tree.resolve()] if args.tree else [])
    variants = [(tree, None) for tree in trees] if not args.threads else [(ROOT, t) for t in args.threads]
    best, digests = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for rows in args.rows:
            csv = table(work / f"t{rows}.csv", rows)
            for _ in range(args.repeats):
                for tree, threads in variants:
                    s, digest = seconds_per_super(tree, csv, work, args.super_transitions, args.arithmetic,
                                                  args.chains, threads)
                    key = f"{rows} {tree}" if threads is None else f"{rows} threads {threads}"
                    best[key] = min(best.get(key, np.inf), s)
                    digests.setdefault(rows, set()).add(digest)
                    print(f"{rows:>6} rows  {key.split(' ', 1)[1]}: {s:.3f} s a super-transition", flush=True)
    for rows in args.rows:
        if args.tree:
            print(f"{rows:>6} rows: {best[f'{rows} {args.tree.resolve()}'] / best[f'{rows} {ROOT}']:.2f}x faster "
                  f"than {args.tree} (best of {args.repeats} each)")
        if args.threads:
            one = best[f"{rows} threads {args.threads[0]}"]
            faster = ", ".join(f"{t} threads {one / best[f'{rows} threads {t}']:.2f}x" for t in args.threads[1:])
            print(f"{rows:>6} rows: {faster} as fast as {args.threads[0]} (best of {args.repeats} each); the same "
                  f"samples on every thread count: {len(digests[rows]) == 1}")
    print(json.dumps({**best, "identical": {rows: len(d) == 1 for rows, d in digests.items()} if args.threads
                      else None}))


if __name__ == "__main__":
    main()
