"""Smoke tier: the README's main job runs end to end on the real robot-arm data."""
import runpy
import sys
from pathlib import Path

import numpy as np

from adaptive_hmc.data import load_robot_arm, robot_arm_truth


def test_robot_arm_data_matches_its_provenance():
    arm = load_robot_arm()
    X, Y = arm.rows(1, 200)
    resid = Y - robot_arm_truth(X)
    # PROVENANCE.md: residual sd of cases 1-200 is 0.0524 / 0.0485
    np.testing.assert_allclose(resid.std(axis=0), [0.0524, 0.0485], atol=6e-4)


def test_quick_robot_arm_script_beats_the_mean_predictor(capsys):
    script = Path(__file__).parents[1] / "experiments" / "quick_robot_arm.py"
    argv = sys.argv
    sys.argv = [str(script), "--iterations", "300", "--seed", "3"]
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = argv
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("test rows 201-400"))
    mse = float(line.split("error ")[1].split()[0])
    assert mse < 0.02  # the training-mean predictor scores 4.55 and the noise-free truth 0.00504
