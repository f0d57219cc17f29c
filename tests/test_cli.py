"""Configs, the command line and run directories, end to end (smoke tier):
malformed configs, every quick config through the CLI, resume, plots, compare, export."""
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import yaml

from adaptive_hmc.cli import main
from adaptive_hmc.config import read_config
from adaptive_hmc.experiment import run_experiment

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
QUICK = sorted(CONFIGS.glob("*_quick.yaml"))


def _raw(name="robot_arm_bandit_quick.yaml"):
    return yaml.safe_load((CONFIGS / name).read_text())


def _write(tmp_path, raw, name="c.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(raw))
    return p


def _small(raw, n=6, budget=600):
    raw["run"].update(super_transitions=n, budget=budget, burn_in={"super_transitions": 2}, thin=5)
    if raw["tuner"]["kind"] == "bandit":
        raw["tuner"]["bounds"]["num_steps"] = [10, 100]
        raw["tuner"]["warmup_super_transitions"] = 1
        raw["tuner"]["maxfun"] = 200
    else:
        raw["tuner"]["num_steps"] = 50
    raw["sampler"]["initial_phase_steps"] = 200
    return raw


def _bad(mutate, tmp_path):
    raw = _raw()
    mutate(raw, tmp_path)
    return raw


CASES = {
    "unknown key": (lambda r, t: r["run"].update(sed=3), "run.sed = 3: unknown key"),
    "wrong type": (lambda r, t: r["run"].update(budget="many"), "run.budget = 'many'"),
    "missing section": (lambda r, t: r.pop("model"), "model: missing"),
    "lower > upper": (lambda r, t: r["tuner"]["bounds"].update(step_factor=[1.0, 0.1]),
                      "tuner.bounds.step_factor = [1.0, 0.1]: need finite 0 < lower < upper"),
    "L above budget": (lambda r, t: r["tuner"]["bounds"].update(num_steps=[20, 9000]), "must be <= run.budget"),
    "bad likelihood": (lambda r, t: r["model"].update(likelihood="poisson"), "model.likelihood = 'poisson'"),
    "rows beyond data": (lambda r, t: r["data"]["test_sets"].update(extra=[590, 700]),
                         "data.test_sets.extra = [590, 700]: the data has 600 rows"),
    "missing data file": (lambda r, t: r["data"].update(dataset=None, path=str(t / "nope.csv"), target_columns=[-1]),
                          "nope.csv': no such file"),
    "NaN in data": (lambda r, t: (np.savetxt(t / "nan.csv", np.array([[1.0, 2.0, 3.0], [np.nan, 1.0, 2.0]] * 5),
                                             delimiter=","),
                                  r["data"].update(dataset=None, path=str(t / "nan.csv"), target_columns=[-1],
                                                   train_rows=[1, 8], test_sets={})),
                    "NaN or infinite values (first at row 2, column 1)"),
    "network does not fit data": (lambda r, t: r["model"].update(likelihood="logistic"),
                                  "classification needs one label column"),
    "cv reward without replicas": (lambda r, t: r["replicas"].update(k=0, full_data_chain=True),
                                   "replicas.k = 0: the cv reward needs k >= 2"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_config_exits_2_with_a_clear_message_and_writes_nothing(case, tmp_path, capsys):
    mutate, expected = CASES[case]
    cfg = _write(tmp_path, _bad(mutate, tmp_path))
    out = tmp_path / "run"
    assert main(["run", str(cfg), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert expected in err and str(cfg) in err, err
    assert not out.exists()


def test_named_table_data_set_from_the_data_folder(tmp_path, monkeypatch):
    """A data set found through ADAPTIVE_HMC_DATA, read as a table with a target
    column, inputs standardised; a wrong column is named in the message."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(60, 3)) * [1, 10, 100]
    A = np.column_stack([X, np.sin(X[:, 0]) + X[:, 1] / 10 + 0.05 * rng.normal(size=60)])
    (tmp_path / "toy").mkdir()
    np.savetxt(tmp_path / "toy" / "toy.data", A)
    monkeypatch.setenv("ADAPTIVE_HMC_DATA", str(tmp_path))
    raw = _small(_raw(), n=3)
    raw["data"] = {"dataset": "toy", "file": "toy.data", "target_columns": [-1], "train_rows": [1, 40],
                   "test_sets": {"rest": [41, 60]}, "standardize_inputs": True}
    path = _write(tmp_path, raw)
    s = run_experiment(read_config(path), tmp_path / "run", source=str(path), quiet=True)
    assert s["test_mse"]["rest"] < np.var(A[40:, -1])
    raw["data"]["target_columns"] = [7]
    assert main(["run", str(_write(tmp_path, raw)), "--out", str(tmp_path / "r2")]) == 2


def test_missing_config_and_not_a_run_directory(tmp_path, capsys):
    assert main(["run", str(tmp_path / "absent.yaml")]) == 2
    assert "no such config file" in capsys.readouterr().err
    assert main(["plot", str(tmp_path)]) == 2
    assert "not a finished run directory" in capsys.readouterr().err


@pytest.mark.parametrize("path", QUICK, ids=[p.stem for p in QUICK])
def test_quick_configs_validate(path):
    cfg = read_config(path)
    assert cfg.name == path.stem


@pytest.mark.parametrize("path", QUICK, ids=[p.stem for p in QUICK])
def test_quick_config_runs_through_the_cli_then_plot_compare_export(path, tmp_path, capsys):
    raw = _small(yaml.safe_load(path.read_text()))
    cfg = _write(tmp_path, raw, path.name)
    out = tmp_path / "run"
    assert main(["run", str(cfg), "--out", str(out), "--seed", "4"]) == 0
    for f in ("config.resolved.yaml", "metadata.json", "log.jsonl", "predictions.npz", "summary.json",
              "checkpoint.pkl", "tuner.json"):
        assert (out / f).is_file(), f
    s = json.loads((out / "summary.json").read_text())
    assert set(s["test_mse"]) == {"test_201_400", "test_401_600"} and s["seed"] == 4
    assert s["leapfrog_steps"] > 0 and 0 <= s["acceptance"] <= 1
    assert max(s["test_mse"].values()) < 0.05      # the training-mean predictor scores 4.55
    log = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    assert [e["i"] for e in log] == list(range(6))
    assert {"i", "step_factor", "num_steps", "p", "moved", "reward", "acceptance", "divergences",
            "seconds"} <= set(log[0])
    # Running again into the same directory without --resume is refused.
    assert main(["run", str(cfg), "--out", str(out)]) == 2
    capsys.readouterr()
    assert main(["plot", str(out)]) == 0
    pngs = sorted((out / "plots").glob("*.png"))
    expected = {"traces", "running_error", "robot_arm_outputs"}
    if raw["tuner"]["kind"] == "bandit":
        expected |= {"reward_surface", "reward_slice"}
    assert {p.stem for p in pngs} == expected
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000
    md = tmp_path / "table.md"
    assert main(["compare", str(out), str(out), "--markdown", str(md)]) == 0
    text = md.read_text()
    assert text.startswith("| run | tuner | test_201_400 ± se") and text.count("\n") == 4
    assert main(["export", str(out)]) == 0
    import arviz as az
    idata = az.from_netcdf(str(out / "inference_data.nc"))
    assert idata.predictions["test_201_400"].shape[1] == 4      # draws: the retained super-transitions
    assert idata.posterior["log_noise_0"].shape[1] == 4


def test_resume_after_interruption_gives_the_same_summary(tmp_path):
    raw = _small(_raw(), n=7)
    path = _write(tmp_path, raw)
    cfg = read_config(path)
    full = run_experiment(cfg, tmp_path / "full", source=str(path), quiet=True)
    part = tmp_path / "part"
    assert run_experiment(cfg, part, source=str(path), quiet=True, stop_after=3) == {}
    # A kill after a super-transition but before its checkpoint: log has one entry too many.
    with open(part / "log.jsonl", "a") as f:
        f.write(json.dumps({"i": 3}) + "\n")
    assert pickle.loads((part / "checkpoint.pkl").read_bytes())["replicas"]["n_super"] == 3
    assert run_experiment(cfg, part, source=str(path), quiet=True, resume=True, stop_after=2) == {}
    resumed = run_experiment(cfg, part, source=str(path), quiet=True, resume=True)
    full.pop("wall_s")
    resumed.pop("wall_s")
    assert resumed == full
    a = [json.loads(x) for x in (tmp_path / "full" / "log.jsonl").read_text().splitlines()]
    b = [json.loads(x) for x in (part / "log.jsonl").read_text().splitlines()]
    strip = [{k: v for k, v in e.items() if k != "seconds"} for e in a]
    assert strip == [{k: v for k, v in e.items() if k != "seconds"} for e in b]
    with np.load(tmp_path / "full" / "predictions.npz") as x, np.load(part / "predictions.npz") as y:
        for k in x.files:
            assert np.array_equal(x[k], y[k]), k


def test_resume_refuses_a_changed_config(tmp_path, capsys):
    raw = _small(_raw(), n=3)
    path = _write(tmp_path, raw)
    out = tmp_path / "run"
    assert run_experiment(read_config(path), out, source=str(path), quiet=True, stop_after=1) == {}
    raw["run"]["budget"] = 700
    _write(tmp_path, raw)
    assert main(["run", str(path), "--out", str(out), "--resume"]) == 2
    assert "differs from the one this run started with" in capsys.readouterr().err
