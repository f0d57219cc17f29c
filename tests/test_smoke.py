"""Smoke tier: the shipped robot-arm data (the configs run end to end in test_cli.py)."""
import numpy as np

from adaptive_hmc.data import load_robot_arm, robot_arm_truth


def test_robot_arm_data_matches_its_provenance():
    arm = load_robot_arm()
    X, Y = arm.rows(1, 200)
    resid = Y - robot_arm_truth(X)
    # PROVENANCE.md: residual sd of cases 1-200 is 0.0524 / 0.0485
    np.testing.assert_allclose(resid.std(axis=0), [0.0524, 0.0485], atol=6e-4)


def test_progress_falls_back_to_lines_where_no_bar_can_be_drawn(monkeypatch, capsys):
    """A terminal that reports a width of 0 (some CI consoles and pipes behind a pty) gets
    plain lines, not a bar that draws nothing for the whole run."""
    import os
    import sys
    from adaptive_hmc import runner
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(sys.stderr, "fileno", lambda: 2, raising=False)
    monkeypatch.setattr(os, "get_terminal_size", lambda fd=None: os.terminal_size((0, 0)))
    progress = runner.Progress(2, 0)
    assert progress.bar is None and not runner.can_draw_bar()
    progress.update({"i": 0, "step_factor": 0.1, "num_steps": 20, "reward": 1.0, "acceptance": [0.9, 0.8],
                     "stuck_chains": [], "divergences": 0, "seconds": 0.1})
    assert "super-transition 1/2" in capsys.readouterr().out
    monkeypatch.setattr(os, "get_terminal_size", lambda fd=None: os.terminal_size((80, 24)))
    assert runner.can_draw_bar()
