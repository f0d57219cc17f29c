"""Smoke tier: the shipped robot-arm data (the configs run end to end in test_cli_run.py)."""
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
    from adaptive_hmc.engine import progress as console
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(sys.stderr, "fileno", lambda: 2, raising=False)
    monkeypatch.setattr(os, "get_terminal_size", lambda fd=None: os.terminal_size((0, 0)))
    progress = console.Progress(2, 0)
    assert progress.bar is None and not console.can_draw_bar()
    progress.update({"i": 0, "step_factor": 0.1, "num_steps": 20, "reward": 1.0, "acceptance": [0.9, 0.8],
                     "stuck_chains": [], "divergences": 0, "seconds": 0.1})
    said = capsys.readouterr()
    assert "super-transition 1/2: eps=0.1000" in said.err and "log i=" not in said.err and not said.out
    monkeypatch.setattr(os, "get_terminal_size", lambda fd=None: os.terminal_size((80, 24)))
    assert console.can_draw_bar()


def test_a_run_speaks_before_its_imports_and_while_its_sampler_compiles(monkeypatch, capsys):
    """The first line comes before the package's heavy imports (the CLI's own
    import is light); a compile that the cache cannot spare is announced with
    how long it usually takes, and a cached one says nothing."""
    import subprocess
    import sys
    import time
    from adaptive_hmc import COMPILE_TIME
    from adaptive_hmc.engine import progress as console
    from adaptive_hmc.front.cli import main
    code = ("import sys; from adaptive_hmc.front.cli import main\n"
            "sys.argv = ['adaptive-hmc', 'run', 'missing.yaml']\nsys.exit(main())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    first = done.stderr.splitlines()[0]
    assert first.startswith("adaptive-hmc run missing.yaml: starting") and COMPILE_TIME in first
    assert "error" in done.stderr and done.returncode == 2

    class Fake:
        def __init__(self, ready):
            self.ready = ready

        def kernels_ready(self):
            return self.ready

        def compile(self):
            time.sleep(0.05)
            return 0.05

    monkeypatch.setattr(console, "can_draw_bar", lambda: False)
    assert console.compile_kernels(Fake(True)) == 0.05
    assert capsys.readouterr().err == ""
    console.compile_kernels(Fake(False))
    err = capsys.readouterr().err
    assert "compiling the sampler for this model (first run only" in err and "compiled in 0.1 s" in err
    console.compile_kernels(Fake(False), quiet=True)
    assert capsys.readouterr().err == ""
    assert main(["run", "missing.yaml", "--quiet"]) == 2
    assert "starting" not in capsys.readouterr().err


def test_is_ready_tells_a_compiled_kernel_from_one_still_to_compile():
    """run_chain_ready answers from the dispatcher's compiled signatures and the
    cache index: a transition never compiled in this process or cached is not
    ready until it is."""
    from adaptive_hmc.jit import is_ready, njit

    @njit(cache=False)
    def twice(x):
        return 2 * x

    assert is_ready(twice, 1.0) is False
    twice(1.0)
    assert is_ready(twice, 1.0) is True and is_ready(twice, np.ones(2)) is False
