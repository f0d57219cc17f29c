"""One seed, one result: a run with a freshly compiled kernel set and a run
whose kernels come from the filled Numba cache agree bit for bit."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def _run(config: Path, out: Path, cache: Path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    proc = subprocess.run([sys.executable, "-m", "adaptive_hmc.cli", "run", str(config), "--out", str(out), "--quiet"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr


def test_fresh_compile_and_cached_kernels_give_identical_results(tmp_path):
    raw = yaml.safe_load((CONFIGS / "robot_arm_bandit_quick.yaml").read_text())
    raw["run"].update(super_transitions=8, budget=800, burn_in={"super_transitions": 2}, thin=5)
    raw["tuner"].update(bounds={"step_factor": [0.01, 1.01], "num_steps": [10, 100]}, warmup_super_transitions=1,
                        maxfun=200)
    raw["sampler"]["initial_phase_steps"] = 200
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(raw))
    cache = tmp_path / "numba_cache"
    _run(config, tmp_path / "fresh", cache)                  # every kernel compiled in the process
    assert any(cache.rglob("*.nbc")), "the first run should have filled the cache"
    _run(config, tmp_path / "cached", cache)                 # every kernel loaded from the cache
    a, b = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("fresh", "cached"))
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b
    for name in ("predictions.npz", "samples.npz"):
        with np.load(tmp_path / "fresh" / name) as x, np.load(tmp_path / "cached" / name) as y:
            assert x.files == y.files
            for k in x.files:
                assert np.array_equal(x[k], y[k]), (name, k)
    strip = [{k: v for k, v in json.loads(line).items() if k != "seconds"}
             for line in (tmp_path / "fresh" / "log.jsonl").read_text().splitlines()]
    assert strip == [{k: v for k, v in json.loads(line).items() if k != "seconds"}
                     for line in (tmp_path / "cached" / "log.jsonl").read_text().splitlines()]
