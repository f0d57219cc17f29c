"""The side-by-side against NUTS and the reward-noise measurement, shrunk
(experiments/versus_nuts.py --quick, experiments/reward_noise.py --quick)."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import load_script

ROOT = Path(__file__).resolve().parents[1]


def _has_numpyro() -> bool:
    return importlib.util.find_spec("numpyro") is not None


@pytest.mark.skipif(not _has_numpyro(), reason="numpyro is not installed (pip install numpyro, or '.[nuts]'): "
                    "experiments/versus_nuts.py --quick not run")
def test_quick_side_by_side_writes_both_samplers_figures_and_agreement(tmp_path):
    out = tmp_path / "versus_nuts.md"
    r = subprocess.run([sys.executable, str(ROOT / "experiments" / "versus_nuts.py"), "--quick", "--targets",
                        "fixed", "--seeds", "1", "--runs", str(tmp_path / "runs"), "--out", str(out)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads(out.with_suffix(".json").read_text())["results"]["fixed"]
    assert [row["sampler"] for row in rows] == ["adaptive_hmc (default)", "NumPyro NUTS", "NumPyro NUTS"]
    for row in rows:
        assert row["chains"] == 8 and row["gradients"] > 0 and row["sampling_s"] > 0
        assert row["per_1000"]["median"] == pytest.approx(1000 * row["ess_bulk"]["median"] / row["gradients"])
    ours = rows[0]
    log = [json.loads(line) for line in (tmp_path / "runs" / "quick" / "ours-fixed-seed1" / "log.jsonl").open()]
    probes = sum(p["gradients"] for e in log for p in e["probes"])
    assert ours["gradients"] == sum(e["gradients"] for e in log)
    assert ours["gradients"] <= 8 * 12 * 2000 + probes       # budget: 12 super-transitions of 2000 a chain, and probes
    for key in ("mean", "sd"):
        assert 0 <= ours["agreement"][key]["within_4"] <= 1 and np.isfinite(ours["agreement"][key]["rms_z"])
    text = out.read_text()
    assert "## fixed" in text and "ESS per 1000 gradients, median output" in text


def test_reward_noise_falls_with_the_chains_averaged(capsys):
    rows = load_script("experiments", "reward_noise").main(["--quick", "--actions", "0.05:20"])
    (row,) = rows
    assert row["chains"] == 8 and row["reward"] > 0
    assert row["ratio"] > 1                       # one chain's reward is noisier than the mean of 8
    assert "| 0.05 | 20 | 8 |" in capsys.readouterr().out
