"""The tuning study's pipeline, shrunk (experiments/tuning_study.py --quick, one Gaussian target)."""
import importlib.util
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _study():
    spec = importlib.util.spec_from_file_location("tuning_study", ROOT / "experiments" / "tuning_study.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_study_on_a_gaussian_writes_its_table_figure_and_verdicts(tmp_path):
    study = _study()
    out = tmp_path / "docs" / "study.md"
    verdicts = study.main(["--targets", "gauss2", "--quick", "--seeds", "1", "--gauss-grid-seeds", "1",
                           "--out", str(out)])
    assert set(verdicts) == {("gauss2", "thesis"), ("gauss2", "default")}
    rows = json.loads((tmp_path / "docs" / "study.json").read_text())
    hand = [r for r in rows if r["kind"] == "hand"]
    assert len(hand) == 12 and all(np.isfinite(r["ess_full"]) and r["ess_full"] >= 0 for r in rows)
    best = max(r["ess_full"] for r in hand)
    for v in verdicts.values():
        assert v["best_cell"] == best and v["meets"] == (v["low_share"] <= 0.05 and v["ess"] >= best / 2
                                                         and v["ess"] > v["median_cell"])
    text = out.read_text()
    assert "| gauss2 | bandit, default | 1 |" in text and (tmp_path / "docs" / "img" / "study.png").stat().st_size
