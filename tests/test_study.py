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


def test_rerun_runs_one_kind_and_reads_the_others_from_a_previous_study(tmp_path):
    """--rerun default: only the default bandit runs; the hand cells and the thesis's rows come from --reuse."""
    study = _study()
    first = tmp_path / "a" / "study.md"
    study.main(["--targets", "gauss2", "--quick", "--seeds", "1", "--gauss-grid-seeds", "1", "--out", str(first)])
    old = json.loads((tmp_path / "a" / "study.json").read_text())
    second = tmp_path / "b" / "study.md"
    study.main(["--targets", "gauss2", "--quick", "--seeds", "2", "--rerun", "default",
                "--reuse", str(tmp_path / "a" / "study.json"), "--out", str(second)])
    new = json.loads((tmp_path / "b" / "study.json").read_text())
    assert sorted((r["kind"], r["seed"]) for r in new if r["kind"] != "default") == \
        sorted((r["kind"], r["seed"]) for r in old if r["kind"] != "default")
    assert [(r["kind"], r["seed"]) for r in new if r["kind"] == "default"] == [("default", 2)]
    assert all(r == o for r, o in zip((r for r in new if r["kind"] == "hand"), (o for o in old if o["kind"] == "hand")))
