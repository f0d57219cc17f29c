"""Smoke tier: the shipped robot-arm data (the configs run end to end in test_cli.py)."""
import numpy as np

from adaptive_hmc.data import load_robot_arm, robot_arm_truth


def test_robot_arm_data_matches_its_provenance():
    arm = load_robot_arm()
    X, Y = arm.rows(1, 200)
    resid = Y - robot_arm_truth(X)
    # PROVENANCE.md: residual sd of cases 1-200 is 0.0524 / 0.0485
    np.testing.assert_allclose(resid.std(axis=0), [0.0524, 0.0485], atol=6e-4)
