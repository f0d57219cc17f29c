"""A run killed (SIGKILL) at any point, then the command the package prints,
finishes bit-identical to an uninterrupted run: among the points, during its
first checkpoint's write and during its summary's write. The sample store is
written once and the checkpoint holds state only."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from adaptive_hmc.rundir.metrics import untimed

CONFIGS = Path(__file__).resolve().parents[1] / "configs"

#: Runs the command line with a write that is killed half way: the n-th write
#: of the named file leaves half its .tmp and the process gets SIGKILL.
DYING = """
import os, signal, sys
from adaptive_hmc.rundir import results, store
target, nth = sys.argv[1], int(sys.argv[2])
seen = [0]
real = store.atomic_write
def dying(path, data, **kw):
    if path.name == target:
        seen[0] += 1
        if seen[0] == nth:
            path.with_name(path.name + ".tmp").write_bytes(data[:len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
    real(path, data, **kw)
results.atomic_write = store.atomic_write = dying
from adaptive_hmc.front.cli import main
sys.exit(main(sys.argv[3:]))
"""


def _cli(tmp_path, *args, dying=None):
    cmd = [sys.executable, "-c", DYING, *(dying or ("-", "0"))] + list(args)
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"})


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A short bandit run (6 super-transitions, a checkpoint after each) and its uninterrupted result."""
    tmp = tmp_path_factory.mktemp("kill")
    raw = yaml.safe_load((CONFIGS / "robot_arm_bandit_quick.yaml").read_text())
    raw["run"].update(super_transitions=6, budget=400, burn_in={"super_transitions": 2}, thin=5)
    raw["tuner"].update(bounds={"step_factor": [0.01, 1.01], "num_steps": [10, 100]}, warmup_super_transitions=1,
                        maxfun=200)
    raw["sampler"]["initial_phase_steps"] = 200
    raw["chains"] = 3
    raw["run"]["checkpoint_seconds"] = 0                   # a checkpoint after every super-transition
    cfg = tmp / "c.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    done = _cli(tmp, "run", str(cfg), "--out", "whole", "--quiet")
    assert done.returncode == 0, done.stderr
    return tmp, cfg, json.loads((tmp / "whole" / "summary.json").read_text())


def _finish_as_told(tmp, cfg, out):
    """Run again as a user would: plainly, and with --resume when the package says so."""
    done = _cli(tmp, "run", str(cfg), "--out", out, "--quiet")
    if done.returncode == 2 and "add --resume" in done.stderr:
        done = _cli(tmp, "run", str(cfg), "--out", out, "--quiet", "--resume")
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.parametrize("target, nth", [("checkpoint.npz", 1), ("checkpoint.npz", 4), ("000003.npz", 1),
                                         ("summary.json", 1), ("samples.npz", 1)])
def test_a_kill_during_any_write_then_the_printed_command_finishes_bit_identical(small, target, nth):
    tmp, cfg, whole = small
    out = f"killed_{target}_{nth}"
    killed = _cli(tmp, "run", str(cfg), "--out", out, "--quiet", dying=(target, str(nth)))
    assert killed.returncode == -9                                        # SIGKILL
    assert (tmp / out / f"{target}.tmp").exists() or (tmp / out / "store" / f"{target}.tmp").exists()
    _finish_as_told(tmp, cfg, out)
    summary = json.loads((tmp / out / "summary.json").read_text())
    assert untimed(summary) == untimed(whole)
    strip = [untimed(json.loads(x))
             for x in (tmp / out / "log.jsonl").read_text().splitlines()]
    assert strip == [untimed(json.loads(x))
                     for x in (tmp / "whole" / "log.jsonl").read_text().splitlines()]
    assert not list((tmp / out).rglob("*.tmp"))


def test_the_store_is_written_once_and_checkpoints_do_not_grow(small):
    """Every super-transition's rows are in exactly one shard, readable with
    numpy alone; the checkpoints after the first and the last
    super-transition are the same size (state only)."""
    import numpy as np
    tmp, cfg, whole = small
    shards = sorted((tmp / "whole" / "store").glob("*.npz"))
    assert [p.stem for p in shards] == [f"{i:06d}" for i in range(6)]          # a checkpoint after each
    with np.load(shards[-1]) as z:
        assert z["pred"].shape[:2] == (1, 3) and z["kept_rows"].shape[0] == z["kept_step"].size
    sizes = []
    for n in (1, 5):
        out = f"stop{n}"
        raw = yaml.safe_load(cfg.read_text())
        raw["run"]["super_transitions"] = n
        c = tmp / f"c{n}.yaml"
        c.write_text(yaml.safe_dump(raw))
        assert _cli(tmp, "run", str(c), "--out", out, "--quiet").returncode == 0
        sizes.append((tmp / out / "checkpoint.npz").stat().st_size)
    assert abs(sizes[1] - sizes[0]) < 0.02 * sizes[0], sizes


def test_a_damaged_newest_checkpoint_falls_back_to_the_previous_one(small):
    tmp, cfg, whole = small
    out = "damaged"
    killed = _cli(tmp, "run", str(cfg), "--out", out, "--quiet", dying=("checkpoint.npz", "5"))
    assert killed.returncode == -9
    ck = tmp / out / "checkpoint.npz"
    ck.write_bytes(ck.read_bytes()[:100])                                 # the newest is damaged
    done = _cli(tmp, "run", str(cfg), "--out", out, "--quiet", "--resume")
    assert done.returncode == 0, done.stderr
    assert "resuming from the previous checkpoint" in done.stderr
    assert untimed(json.loads((tmp / out / "summary.json").read_text())) == untimed(whole)


def test_checkpoints_a_few_seconds_apart_lose_at_most_those_and_resume_bit_identical(small):
    """With run.checkpoint_seconds longer than the run, the first super-transition and the last are the only
    checkpoints (two shards in the store); a kill during the last one's write loses the super-transitions
    after the first, and the printed command finishes bit-identical to a run checkpointed after each."""
    tmp, cfg, whole = small
    raw = yaml.safe_load(cfg.read_text())
    raw["run"]["checkpoint_seconds"] = 3600
    c = tmp / "seldom.yaml"
    c.write_text(yaml.safe_dump(raw))
    assert _cli(tmp, "run", str(c), "--out", "seldom", "--quiet").returncode == 0
    assert [p.stem for p in sorted((tmp / "seldom" / "store").glob("*.npz"))] == ["000000", "000001"]
    assert untimed(json.loads((tmp / "seldom" / "summary.json").read_text())) == untimed(whole)
    killed = _cli(tmp, "run", str(c), "--out", "seldom_killed", "--quiet", dying=("checkpoint.npz", "2"))
    assert killed.returncode == -9
    resumed = _cli(tmp, "run", str(c), "--out", "seldom_killed", "--quiet", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert untimed(json.loads((tmp / "seldom_killed" / "summary.json").read_text())) == untimed(whole)
