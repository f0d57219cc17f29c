"""Kill a run with SIGKILL at random moments, each time running again the
command the package prints (the same command, with --resume once the
directory holds a checkpoint), until it finishes; repeat with new run
directories until at least --kills kills happened; every run must end
bit-identical (summary without timings, log without seconds) to an
uninterrupted one.

    python experiments/kill_resume.py [--kills 30] [--config configs/robot_arm_bandit_quick.yaml]
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from adaptive_hmc.rundir.metrics import untimed


def command(config, out, resume):
    return [sys.executable, "-m", "adaptive_hmc.front.cli", "run", str(config), "--out", str(out), "--quiet"] + \
        (["--resume"] if resume else [])


def run_killed(config, out, rng, lo, hi) -> int:
    """Run into ``out`` until it finishes, killing each attempt after a random delay; returns the kills."""
    kills, resume = 0, False
    while not (out / "summary.json").exists():
        proc = subprocess.Popen(command(config, out, resume), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        try:
            proc.wait(timeout=rng.uniform(lo, hi))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            kills += 1
            resume = False                                   # first the plain command again
            continue
        err = proc.stderr.read()
        if proc.returncode == 2 and "add --resume" in err:
            resume = True                                    # as the message says
            continue
        if proc.returncode != 0:
            raise SystemExit(f"{out}: exit {proc.returncode}: {err}")
    return kills


def log_without_seconds(d):
    return [{k: v for k, v in json.loads(x).items() if k != "seconds"}
            for x in (d / "log.jsonl").read_text().splitlines()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(Path(__file__).resolve().parents[1] / "configs" /
                                            "robot_arm_bandit_quick.yaml"))
    ap.add_argument("--kills", type=int, default=30)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--window", type=float, nargs=2, default=(2.0, 9.0), help="seconds before a kill")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="kill_resume_"))
    t0 = time.time()
    subprocess.run(command(args.config, tmp / "whole", False), check=True, capture_output=True)
    whole = untimed(json.loads((tmp / "whole" / "summary.json").read_text()))
    kills, runs, same = 0, 0, 0
    while kills < args.kills:
        out = tmp / f"killed{runs}"
        kills += run_killed(args.config, out, rng, *args.window)
        runs += 1
        ok = (untimed(json.loads((out / "summary.json").read_text())) == whole
              and log_without_seconds(out) == log_without_seconds(tmp / "whole"))
        same += ok
        print(f"run {runs}: {kills} kills so far; identical to the uninterrupted run: {ok}", flush=True)
    print(f"{kills} SIGKILLs over {runs} runs; {same} of {runs} identical to the uninterrupted run; "
          f"{time.time() - t0:.0f} s ({tmp})")
    return 0 if same == runs else 1


if __name__ == "__main__":
    sys.exit(main())
