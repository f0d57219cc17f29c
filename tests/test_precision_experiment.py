"""experiments/precision.py --quick: float32 against float64 from different seeds, the pipeline shrunk."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.filterwarnings("ignore")
def test_quick_precision_comparison_reports_agreement_and_speed(tmp_path):
    spec = importlib.util.spec_from_file_location("precision", ROOT / "experiments" / "precision.py")
    precision = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(precision)
    docs = ROOT / "docs" / "precision.md"
    before = docs.stat().st_mtime_ns if docs.exists() else None
    row, control = precision.main(["--quick", "--targets", "diabetes", "--runs", str(tmp_path)])
    assert row["target"] == "diabetes" and row["quantities"] == 331 and row["pair"] == "float64 / float32"
    assert control["pair"] == "float64 / float64-control" and control["max_abs_z"] > 0
    assert 0 < row["mean_z2"] < 10 and row["max_abs_z"] > 0          # independent chains: z is not 0
    assert len(row["gradients_per_s"]) == 2 and row["speedup"] > 0
    assert (docs.stat().st_mtime_ns if docs.exists() else None) == before      # --quick writes no docs
