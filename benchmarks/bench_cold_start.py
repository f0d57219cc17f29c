"""A first run and a second one: `adaptive-hmc run` on a config with an empty
Numba cache (a fresh temporary NUMBA_CACHE_DIR), then again with the cache it
filled. Prints when each line of the run's stderr appeared, the process wall
time and the summary's compile_s and wall_s of both.

Run: python benchmarks/bench_cold_start.py [CONFIG]   (default: the quick robot-arm config; the last line is JSON)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed_run(config: Path, out: Path, cache: Path) -> dict:
    """One run as a user starts it; the seconds at which each stderr line came."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "adaptive_hmc.front.cli", "run", str(config), "--out", str(out)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = [(time.perf_counter() - t0, line.rstrip()) for line in proc.stderr]
    if proc.wait() != 0:
        raise SystemExit(f"the run failed:\n" + "\n".join(l for _, l in lines))
    wall = time.perf_counter() - t0
    summary = json.loads((out / "summary.json").read_text())
    return dict(first_line_s=lines[0][0] if lines else None, process_wall_s=wall,
                compile_s=summary["compile_s"], wall_s=summary["wall_s"], lines=lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", default=str(ROOT / "configs" / "robot_arm_bandit_quick.yaml"))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        runs = {kind: timed_run(Path(args.config), tmp / kind, tmp / "cache") for kind in ("cold", "warm")}
    for kind, r in runs.items():
        print(f"{kind}: first line after {r['first_line_s']:.2f} s; process wall {r['process_wall_s']:.1f} s, "
              f"compile_s {r['compile_s']:.2f}, sampling wall_s {r['wall_s']:.2f}")
        for t, line in r["lines"][:3]:
            print(f"  {t:6.2f} s  {line[:100]}")
    print(json.dumps({f"{kind}_{k}": round(r[k], 2) for kind, r in runs.items()
                      for k in ("first_line_s", "process_wall_s", "compile_s", "wall_s")}))


if __name__ == "__main__":
    main()
