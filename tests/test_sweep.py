"""Sweeps on a Dask LocalCluster: expansion, validation, failures, kill and resume."""
import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from adaptive_hmc.front.cli import main
from adaptive_hmc.rundir.results import RunDir
from adaptive_hmc.front.sweep import expand, prepare

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def _base(tmp_path, n=4, budget=400):
    raw = yaml.safe_load((CONFIGS / "robot_arm_bandit_quick.yaml").read_text())
    raw["run"].update(super_transitions=n, budget=budget, burn_in={"super_transitions": 1}, thin=0)
    raw["tuner"].update(bounds={"step_factor": [0.01, 0.5], "num_steps": [10, 100]}, warmup_super_transitions=1,
                        maxfun=200)
    raw["sampler"]["initial_phase_steps"] = 100
    raw["chains"] = 2
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(raw))
    return raw


def _sweep(tmp_path, grid=None, cases=None, name="tiny"):
    spec = {"name": name, "base": "base.yaml",
            "grid": grid if grid is not None else
            {"run.seed": [1, 2], "tuner": [{"kind": "fixed", "step_factor": 0.1, "num_steps": 20},
                                           {"kind": "bandit", "bounds": {"step_factor": [0.01, 0.5],
                                                                         "num_steps": [10, 100]},
                                            "warmup_super_transitions": 1, "maxfun": 200}]}}
    if cases:
        spec["cases"] = cases
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _rows(out):
    with open(out / "sweep.csv") as f:
        return list(csv.DictReader(f))


def test_expansion_names_each_combination_by_what_varies(tmp_path):
    _base(tmp_path)
    name, planned = expand(_sweep(tmp_path, cases=[{"label": "a", "run.budget": 300}, {"label": "b"}]))
    assert name == "tiny" and len(planned) == 8
    names = [p.name for p in planned]
    assert len(set(names)) == 8
    assert names[:2] == ["a__seed=1__tuner=fixed-0.1-20", "b__seed=1__tuner=fixed-0.1-20"]
    first = planned[0]
    assert first.raw["run"]["seed"] == 1 and first.raw["run"]["budget"] == 300
    assert first.raw["tuner"] == {"kind": "fixed", "step_factor": 0.1, "num_steps": 20}     # whole section
    assert first.raw["run"]["threads"] == 1
    assert expand(tmp_path / "sweep.yaml")[1] == planned                    # stable


@pytest.mark.parametrize("grid, message", [
    ({"run.seed": 3}, "grid.run.seed = 3: a non-empty list of values"),
    ({"run.sead": [1]}, "run.sead"),
    ({"tuner.step_factor": [0.1, 2.5]}, "(run tuner=bandit"),
    ({"data.nosuch.x": [1]}, "data.nosuch"),
])
def test_a_bad_grid_is_refused_before_anything_runs(tmp_path, capsys, grid, message):
    _base(tmp_path)
    if "tuner.step_factor" in grid:
        grid = {"tuner": [{"kind": "fixed", "step_factor": 0.1, "num_steps": 20}, {"kind": "bandit"}]}
    path = _sweep(tmp_path, grid=grid)
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and str(path) in err and message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_sweep_runs_on_a_local_cluster_and_a_finished_one_does_nothing(tmp_path, capsys):
    _base(tmp_path)
    path, out = _sweep(tmp_path), tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--workers", "2"]) == 0
    rows = _rows(out)
    assert [r["status"] for r in rows] == ["finished"] * 4
    assert all(0 < float(r["test MSE test_201_400"]) < 1 for r in rows)
    assert {r["run.seed"] for r in rows} == {"1", "2"} and {r["tuner"] for r in rows} == {"fixed-0.1-20",
                                                                                        "bandit-1-200"}
    assert (out / "sweep.md").read_text().count("\n") == 6
    for r in rows:       # each run's config is kept and runnable on its own
        assert yaml.safe_load((out / "configs" / f"{r['run']}.yaml").read_text())["run"]["threads"] == 1
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("runs/*/summary.json")}
    capsys.readouterr()
    assert main(["sweep", str(path), "--out", str(out)]) == 0
    assert "nothing to do" in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in out.glob("runs/*/summary.json")} == stamps
    assert main(["compare", str(out)]) == 0
    assert capsys.readouterr().out.count(str(out / "runs")) == 4
    path.write_text(path.read_text().replace("- 2\n", "- 3\n"))              # another sweep, same directory
    assert main(["sweep", str(path), "--out", str(out)]) == 2
    assert "holds a different sweep" in capsys.readouterr().err


def test_a_failing_run_is_reported_and_the_others_finish(tmp_path, capsys):
    _base(tmp_path)
    path, out = _sweep(tmp_path), tmp_path / "out"
    _, planned, _, _ = prepare(path, out, resume=False)     # the sweep directory, nothing run yet
    bad = planned[1].name
    (out / "runs" / bad).mkdir(parents=True)
    (out / "runs" / bad / "notes.txt").write_text("not a run")      # the run will refuse this directory
    assert main(["sweep", str(path), "--out", str(out), "--workers", "2", "--resume"]) == 1
    err = capsys.readouterr().err
    assert f"1 failed (see sweep.csv and logs/): {bad}" in err
    rows = {r["run"]: r for r in _rows(out)}
    assert rows[bad]["status"] == "failed" and "not a run directory of this package" in rows[bad]["error"]
    assert all(r["status"] == "finished" for n, r in rows.items() if n != bad)
    assert "RunError" in (out / "logs" / f"{bad}.log").read_text()


def test_a_killed_sweep_resumes_where_it_stopped(tmp_path):
    _base(tmp_path, n=8, budget=1500)
    path, out = _sweep(tmp_path, grid={"run.seed": [1, 2, 3, 4, 5, 6]}), tmp_path / "out"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "adaptive_hmc.front.cli", "sweep", str(path), "--out", str(out), "--workers", "2"]
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    done = []
    while time.time() < deadline and proc.poll() is None:
        done = [d for d in out.glob("runs/*") if RunDir(d).is_finished]
        if done:
            break
        time.sleep(0.1)
    assert proc.poll() is None, proc.stderr.read()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = {d.name: (d / "summary.json").stat().st_mtime_ns for d in out.glob("runs/*") if RunDir(d).is_finished}
    assert 1 <= len(finished) < 6
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    assert r.returncode == 2 and "add --resume" in r.stderr
    r = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"{6 - len(finished)} of 6 runs to do" in r.stderr
    assert all((out / "runs" / n / "summary.json").stat().st_mtime_ns == t for n, t in finished.items())
    assert [row["status"] for row in _rows(out)] == ["finished"] * 6


def test_the_docs_sweep_example_expands_and_validates(tmp_path):
    import re
    readme = (CONFIGS.parent / "docs" / "USAGE.md").read_text()
    block = re.search(r"```yaml\n# sweep.yaml\n(.*?)```", readme, flags=re.S).group(1)
    spec = yaml.safe_load(block)
    spec["base"] = [str(CONFIGS / b) for b in spec["base"]]
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    name, planned = expand(path)
    assert name == "arm_seeds" and len(planned) == 2 * 3 * 2 * 2
    assert "robot_arm_human__small__seed=2__warmup_super_transitions=3" in {p.name for p in planned}


def test_a_sweep_runs_density_configs(tmp_path, capsys):
    """A sweep over a user's density (eight schools, two seeds): its file found from the base config's
    folder, each run a density run directory, the table with their R-hat, ESS and divergences; compare
    tables them."""
    import shutil
    (tmp_path / "model").mkdir()
    shutil.copy(CONFIGS / "eight_schools.py", tmp_path / "model" / "eight_schools.py")
    raw = yaml.safe_load((CONFIGS / "eight_schools_density.yaml").read_text())
    raw["model"]["file"] = "model/eight_schools.py"
    raw["sampler"] = {"warmup": 100}
    raw["run"].update(super_transitions=3)
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(raw))
    path, out = _sweep(tmp_path, grid={"run.seed": [1, 2]}, name="dens"), tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--workers", "1"]) == 0
    rows = _rows(out)
    assert [r["status"] for r in rows] == ["finished"] * 2 and {r["run.seed"] for r in rows} == {"1", "2"}
    assert all(0.9 < float(r["rhat_max"]) < 2 and float(r["ess_bulk_min"]) > 0 and r["divergences"] != ""
               for r in rows)
    assert all((out / "runs" / r["run"] / "posterior.nc").is_file() for r in rows)
    capsys.readouterr()
    assert main(["compare", str(out)]) == 0
    assert " ".join(capsys.readouterr().out.split()).count("(a density run)") == 2     # lines folded at 88
