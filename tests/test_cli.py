"""Configs, the command line and run directories, end to end (smoke tier):
malformed configs, every quick config through the CLI, resume, plots, compare, export."""
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

from adaptive_hmc.cli import main
from adaptive_hmc.config import read_config
from adaptive_hmc.experiment import run_experiment
from adaptive_hmc.metrics import untimed
from adaptive_hmc.results import RunDir, read_run

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
QUICK = sorted(CONFIGS.glob("*_quick.yaml"))
ROBOT_ARM_QUICK = [p for p in QUICK if not p.stem.startswith("dexter")]     # Dexter's: test_dexter_*


def _raw(name="robot_arm_bandit_quick.yaml"):
    return yaml.safe_load((CONFIGS / name).read_text())


def _write(tmp_path, raw, name="c.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(raw))
    return p


def _small(raw, n=6, budget=600):
    if raw["model"].get("kind", "bnn") != "bnn":        # Neal's quick configs: already 6 short super-transitions
        raw["run"].update(super_transitions=n, burn_in={"super_transitions": 2})
        return raw
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
    "anneal with stochastic dynamics": (lambda r, t: r["sampler"].update(anneal=[[10, 0, 15]], window=1,
                                                                          kind="stochastic_dynamics"),
                                        "annealing is for kinds hmc and metropolis"),
    "anneal phase alpha 1": (lambda r, t: r["sampler"].update(anneal=[[10, 1.0, 15]], window=1),
                             "sampler.anneal = [10.0, 1.0, 15.0]: each phase"),
    "anneal phase of 2 numbers": (lambda r, t: r["sampler"].update(anneal=[[10, 0.5]]),
                                  "sampler.anneal[0] = [10, 0.5]: List should have at least 3 items"),
    "anneal with a window": (lambda r, t: r["sampler"].update(anneal=[[10, 0.5, 1]], window=5),
                             "sampler.window = 5: not with annealing"),
    "Neal's model for classes": (lambda r, t: r["model"].update(kind="neal1993", likelihood="logistic"),
                                 "model.kind = 'neal1993': Neal's models are for likelihood gaussian"),
    "unknown model kind": (lambda r, t: r["model"].update(kind="neal1994"), "model.kind = 'neal1994'"),
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
                                                   train_rows=[1, 8], test_sets={}, missing="error")),
                    "data.missing = 'error': 5 rows have missing values (first: row 2"),
    "infinity in data": (lambda r, t: (np.savetxt(t / "inf.csv", np.array([[1.0, 2.0, 3.0], [np.inf, 1.0, 2.0]] * 5),
                                                  delimiter=","),
                                       r["data"].update(dataset=None, path=str(t / "inf.csv"), target_columns=[-1],
                                                        train_rows=[1, 8], test_sets={})),
                         "NaN or infinite values (first at row 2, column 1)"),
    "network does not fit data": (lambda r, t: r["model"].update(likelihood="logistic"),
                                  "classification needs one label column"),
    "cv reward without replicas": (lambda r, t: (r["replicas"].update(k=0, full_data_chain=True),
                                                 r["tuner"].update(reward="cv")),
                                   "replicas.k = 0: the cv reward needs k >= 2"),
    "step calibration without warm-up": (lambda r, t: (r["sampler"].update(calibrate_steps=True),
                                                       r["tuner"].update(warmup_super_transitions=0)),
                                         "sampler.calibrate_steps = True: needs tuner.warmup_super_transitions >= 1"),
    "log axis of an unknown action": (lambda r, t: r["tuner"].update(log_axes=["eps"]),
                                      "tuner.log_axes"),
}


def _table(t, name="t.csv", rows=None):
    """A small numeric table (4 columns) in the test folder."""
    rows = rows if rows is not None else [[i, 2 * i, 3 * i, i % 2] for i in range(30)]
    (t / name).write_text("\n".join(",".join(str(v) for v in r) for r in rows) + "\n")
    return str(t / name)


def _use_table(r, t, **data):
    r["data"] = {"path": _table(t), "target_columns": [-1], "train_rows": [1, 20], "test_sets": {"rest": [21, 30]}}
    r["data"].update(data)


def _text(t, text, name="raw.yaml"):
    (t / name).write_text(text)
    return t / name


def _fixed(r):
    r["tuner"] = {"kind": "fixed", "step_factor": 0.3, "num_steps": 50}


CASES.update({
    # names, files, YAML
    "name escapes the runs folder": (lambda r, t: r.update(name="../../escaped"),
                                     "name = '../../escaped': a plain name"),
    "name with a slash": (lambda r, t: r.update(name="a/b"), "name = 'a/b': a plain name"),
    "empty name": (lambda r, t: r.update(name=""), "name = '': a plain name"),
    "duplicate YAML key": (lambda r, t: _text(t, "name: x\nrun: {budget: 10, super_transitions: 1}\n"
                                                 "run: {budget: 20, super_transitions: 2}\n"), "duplicate key 'run'"),
    "empty config file": (lambda r, t: _text(t, ""), "the top level must be a mapping"),
    "list at the top level": (lambda r, t: _text(t, "- a\n- b\n"), "the top level must be a mapping"),
    "scalar section with --seed": (lambda r, t: _text(t, "name: x\nrun: 5\n"), "run = 5: must be a mapping"),
    "binary config": (lambda r, t: (t / "bin.yaml").write_bytes(bytes(range(256)) * 4) and t / "bin.yaml",
                      "not a text file"),
    "directory as config": (lambda r, t: (t / "adir").mkdir() or t / "adir", "is a directory"),
    "not YAML": (lambda r, t: _text(t, "name: [unclosed\n"), "not valid YAML"),
    "unknown key lists the allowed": (lambda r, t: r["sampler"].update(windw=3), "allowed keys here: window"),
    # sampler settings (their rules live in the samplers)
    "window above every L": (lambda r, t: r["sampler"].update(window=30),
                             "sampler.window = 30: must be <= the lower bound of tuner.bounds.num_steps (20)"),
    "window above fixed L": (lambda r, t: (_fixed(r), r["sampler"].update(window=60)),
                             "sampler.window = 60: must be <= tuner.num_steps (50)"),
    "window zero": (lambda r, t: r["sampler"].update(window=0), "sampler.window = 0: must be an integer >= 1"),
    "persistence one": (lambda r, t: r["sampler"].update(persistence=1.0), "sampler.persistence = 1.0"),
    "negative step_nu": (lambda r, t: r["sampler"].update(step_nu=-0.1), "sampler.step_nu = -0.1"),
    "zero max_energy_error": (lambda r, t: r["sampler"].update(max_energy_error=0), "sampler.max_energy_error = 0"),
    "negative initial phase": (lambda r, t: r["sampler"].update(initial_phase_steps=-1),
                               "sampler.initial_phase_steps = -1"),
    # model and data
    "hidden layer of 0": (lambda r, t: r["model"].update(hidden=[0]), "every hidden layer needs >= 1 unit"),
    "huge network": (lambda r, t: r["model"].update(hidden=[100000000]),
                     "model.hidden = [100000000]: a network of"),
    "duplicate target columns": (lambda r, t: _use_table(r, t, target_columns=[3, -1]),
                                 "data.target_columns = [3, -1]: names a column twice"),
    "target column beyond the file": (lambda r, t: _use_table(r, t, target_columns=[7]),
                                      "data.target_columns = [7]: the file has 4 columns"),
    "empty data file": (lambda r, t: _use_table(r, t, path=_text(t, "", "empty.csv").as_posix()),
                        "the file has no rows"),
    "text in a cell": (lambda r, t: _use_table(r, t, path=_text(t, "1,2,3,4\n1,x,3,4\n", "h.csv").as_posix()),
                       "not a numeric table: row 2, column 1 is 'x'"),
    "test rows overlap training rows": (lambda r, t: r["data"]["test_sets"].update(test_201_400=[150, 400]),
                                        "data.test_sets.test_201_400 = [150, 400]: overlaps the training rows"),
    "target name without header": (lambda r, t: _use_table(r, t, target_columns=["price"]),
                                   "column 'price' named, but the file has no header row"),
    "rows and a split": (lambda r, t: r["data"].update(split={"train": 100}), "give exactly one of train_rows"),
    "split larger than the data": (lambda r, t: (r["data"].pop("train_rows"), r["data"].pop("test_sets"),
                                                 r["data"].update(split={"train": 700})),
                                   "data.split.train = 700: a fraction below 1 or at most the 600 complete rows; "
                                   "train: 1.0 (or 600) trains on every row, with no test set"),
    "split sizes above the rows": (lambda r, t: (r["data"].pop("train_rows"), r["data"].pop("test_sets"),
                                                 r["data"].update(split={"train": 500, "test": 200})),
                                   "500 training and 200 test cases, but the table has 600 complete rows"),
    "split of every row with a test set": (lambda r, t: (r["data"].pop("train_rows"), r["data"].pop("test_sets"),
                                                         r["data"].update(split={"train": 1.0, "test": 5})),
                                           "every one of the 600 complete rows trains, none is left to test"),
    "k above the training cases": (lambda r, t: r["data"].update(train_rows=[1, 5]),
                                   "replicas.k = 8: at most the number of training cases (5)"),
    "logistic on real targets": (lambda r, t: (_use_table(r, t, target_columns=[2]),
                                               r["model"].update(likelihood="logistic")),
                                 "model.likelihood = 'logistic': needs targets that are 0 or 1"),
    "logistic on three classes": (lambda r, t: (_use_table(r, t, path=_table(t, "c.csv", [[i, i % 3] for i in
                                                                                           range(30)])),
                                                r["model"].update(likelihood="logistic")),
                                  "the targets are the 3 class indices 0, 1, 2 (use softmax for more than two"),
    "softmax on real targets": (lambda r, t: (_use_table(r, t, path=_table(t, "s.csv", [[i, 0.5 * i] for i in
                                                                                         range(30)])),
                                              r["model"].update(likelihood="softmax")),
                                "model.likelihood = 'softmax': needs class indices"),
    "one fold": (lambda r, t: r["replicas"].update(data="folds", k=1),
                 "replicas.k = 1: 0 (full-data chain only) or >= 2 folds"),
    "no chain at all": (lambda r, t: (_fixed(r), r["replicas"].update(data="folds", k=0, full_data_chain=False)),
                        "replicas.full_data_chain = False"),
    "no chain of the posterior": (lambda r, t: r["replicas"].update(k=0), "replicas.k = 0: data full needs k >= 1"),
    "full-data chain beside chains of one posterior": (lambda r, t: r["replicas"].update(full_data_chain=True),
                                                       "replicas.full_data_chain = True: is for data: folds"),
    "cv reward on chains of one posterior": (lambda r, t: (r["replicas"].update(data="full"),
                                                           r["tuner"].update(reward="cv")),
                                             "replicas.data = 'full': the cv reward reads held-out predictions"),
    "unknown chains": (lambda r, t: r["replicas"].update(data="both"), "replicas.data = 'both'"),
    "replicas from chains of one posterior": (lambda r, t: r["replicas"].update(predict_from="replicas"),
                                              "replicas.predict_from = 'replicas': needs data: folds"),
    "unknown data set": (lambda r, t: r["data"].update(dataset="nosuch", file="x.data", target_columns=[-1]),
                         "data.dataset = 'nosuch': data set 'nosuch' not found"),
    "dataset and path": (lambda r, t: r["data"].update(path="x.csv"), "give exactly one of dataset and path"),
    "robot arm with columns": (lambda r, t: r["data"].update(target_columns=[1]),
                               "robot_arm is read by its own loader"),
    "rows first above last": (lambda r, t: r["data"].update(train_rows=[10, 5]), "rows are numbered from 1"),
    "row zero": (lambda r, t: r["data"].update(train_rows=[0, 5]), "data.train_rows = [0, 5]"),
    # tuner and run
    "fixed tuner without L": (lambda r, t: r.update(tuner={"kind": "fixed", "step_factor": 0.3}),
                              "a fixed tuner needs step_factor > 0 and num_steps >= 1"),
    "bandit without bounds": (lambda r, t: r["tuner"].pop("bounds"), "tuner.bounds = None"),
    "bounds on a fixed tuner": (lambda r, t: r.update(tuner={"kind": "fixed", "step_factor": 0.3, "num_steps": 50,
                                                             "bounds": {"step_factor": [0.1, 1]}}),
                                "bounds are for kind: bandit"),
    "schedule without its parameter": (lambda r, t: r["tuner"].update(schedule={"kind": "polynomial"}),
                                       "tuner.schedule.gamma = None"),
    "metric of another likelihood": (lambda r, t: r["tuner"].update(cv_metric="error_rate"),
                                     "tuner.cv_metric = 'error_rate'"),
    "fractional L bounds": (lambda r, t: r["tuner"]["bounds"].update(num_steps=[20.5, 100]), "need whole numbers"),
    "integer bounds shown as integers": (lambda r, t: r["tuner"]["bounds"].update(num_steps=[20, 9000]),
                                         "tuner.bounds.num_steps = [20, 9000]: upper bound"),
    "zero budget": (lambda r, t: r["run"].update(budget=0), "run.budget = 0"),
    "predictions from a chain that is not there": (lambda r, t: r["replicas"].update(data="folds", predict_from="full",
                                                                                     full_data_chain=False),
                                                   "replicas.predict_from = 'full': needs replicas.full_data_chain"),
    "zero checkpoint interval": (lambda r, t: r["run"].update(checkpoint_every=0), "run.checkpoint_every = 0"),
})


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_exits_2_with_a_clear_message_and_writes_nothing(case, tmp_path, capsys):
    """Every bad input ends before any work: exit 2, one message naming the file
    and the key or what is wrong, no traceback, no run directory."""
    mutate, expected = CASES[case]
    raw = _raw()
    replaced = mutate(raw, tmp_path)
    cfg = replaced if isinstance(replaced, Path) else _write(tmp_path, raw)
    out = tmp_path / "run"
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["run", str(cfg), "--out", str(out), "--seed", "3"]) == 2
    err = capsys.readouterr().err
    assert expected in err and str(cfg) in err, err
    assert "Traceback" not in err and err.count("\n") <= 2, err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == before


def test_there_are_at_least_40_bad_input_cases():
    assert len(CASES) >= 40


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


@pytest.mark.parametrize("path", ROBOT_ARM_QUICK, ids=[p.stem for p in ROBOT_ARM_QUICK])
def test_quick_config_runs_through_the_cli_then_plot_compare_export(path, tmp_path, capsys):
    raw = _small(yaml.safe_load(path.read_text()))
    cfg = _write(tmp_path, raw, path.name)
    out = tmp_path / "run"
    assert main(["run", str(cfg), "--out", str(out), "--seed", "4"]) == 0
    for f in ("config.resolved.yaml", "metadata.json", "log.jsonl", "predictions.npz", "summary.json",
              "checkpoint.npz", "tuner.json"):
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
    assert text.startswith("| run | tuner | chains | test MSE (original units) robot_arm/test_201_400 ± se")
    assert text.count("B vs A") == len(s["test_mse"]) and "indistinguishable" in text      # a run and itself
    assert "| sampling s | compile s |" in text
    assert ("| R-hat max robot_arm/test_401_600 | ESS per 1000 grad (min / median) robot_arm/test_401_600 | "
            "ESS per s (min / median) robot_arm/test_401_600 |") in text
    assert main(["export", str(out)]) == 0
    import arviz as az
    idata = az.from_netcdf(str(out / "inference_data.nc"))
    n_chains, n_draws = idata.posterior["weights"].shape[:2]
    assert idata.predictions["y_hat"].shape == (n_chains, n_draws, 400, 2)         # the test cases
    assert idata.predictions_constant_data["y_test"].shape == (400, 2)
    posterior = "log_likelihood" in idata.groups()             # the thesis's folds: no full-data chain
    assert posterior == (raw["replicas"].get("full_data_chain") is not False)
    assert all(c.startswith("full" if posterior else "fold") for c in idata.posterior.chain.values)
    bnn = raw["model"].get("kind", "bnn") == "bnn"
    if bnn:
        assert idata.posterior["log_noise_0"].shape == (n_chains, n_draws) and n_draws >= 3
    else:                                      # Neal's models integrate the noise out: no hyperparameters
        assert list(idata.posterior.data_vars) == ["weights"] and n_draws >= 3
    if posterior:                                               # the training cases'
        assert idata.log_likelihood["y"].shape == (n_chains, n_draws, 200)
    assert set(idata.sample_stats) >= {"acceptance", "diverging", "energy", "step_factor", "num_steps",
                                       "super_transition"}
    assert idata.observed_data["y"].shape == (200, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if posterior:
            assert np.isfinite(az.loo(idata).elpd_loo)
        var = "log_noise_0" if bnn else "weights"
        assert len(az.summary(idata, var_names=[var]).index) == (1 if bnn else idata.posterior["weights"].shape[2])
        if bnn:
            az.plot_trace(idata, var_names=[var])


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
    assert RunDir(part).load_checkpoint()[0].replicas["n_super"] == 3
    assert run_experiment(cfg, part, source=str(path), quiet=True, resume=True, stop_after=2) == {}
    resumed = run_experiment(cfg, part, source=str(path), quiet=True, resume=True)
    assert untimed(resumed) == untimed(full)
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


# -- run directories: damage, locks, interruptions ---------------------------------------

def _checkpointed(tmp_path, n=3, stop_after=1):
    path = _write(tmp_path, _small(_raw(), n=n))
    out = tmp_path / "run"
    summary = run_experiment(read_config(path), out, source=str(path), quiet=True, stop_after=stop_after)
    assert (summary == {}) == (stop_after is not None)
    return path, out


class _Payload:
    def __reduce__(self):
        import os
        return (os.system, ("touch pwned",))


def _npz_bytes(**arrays) -> bytes:
    import io
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


DAMAGE = {
    "truncated": lambda b: b[: len(b) // 2],
    "empty": lambda b: b"",
    "random bytes": lambda b: np.random.default_rng(0).bytes(4000),
    "a pickle": lambda b: __import__("pickle").dumps(_Payload()),
    "one flipped byte": lambda b: b[:-200] + bytes([b[-200] ^ 1]) + b[-199:],
    "another npz": lambda b: _npz_bytes(x=np.arange(3)),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_checkpoint_is_refused_with_a_message(damage, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path, out = _checkpointed(tmp_path)
    ck = out / "checkpoint.npz"
    ck.write_bytes(DAMAGE[damage](ck.read_bytes()))
    assert main(["run", str(path), "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "not an intact checkpoint" in err and str(ck) in err and "Traceback" not in err, err
    assert not (tmp_path / "pwned").exists()          # nothing in the file was executed


def test_missing_resolved_config_is_refused(tmp_path, capsys):
    path, out = _checkpointed(tmp_path)
    (out / "config.resolved.yaml").unlink()
    assert main(["run", str(path), "--out", str(out), "--resume"]) == 2
    assert "config.resolved.yaml is missing" in capsys.readouterr().err


def test_a_run_stopped_before_its_first_checkpoint_starts_over(tmp_path, capsys):
    path = _write(tmp_path, _small(_raw(), n=2))
    cfg = read_config(path)
    for i, extra in enumerate(([], ["--resume"])):
        out = tmp_path / f"run{i}"
        RunDir(out).start(cfg, str(path), 1)              # what a kill during the first super-transition leaves
        RunDir(out).write_log([])
        assert RunDir(out).status() == "started"
        assert main(["run", str(path), "--out", str(out), *extra]) == 0
        err = capsys.readouterr().err
        assert "stopped before its first checkpoint; starting it over" in err, err
        assert RunDir(out).is_finished
    assert main(["run", str(path), "--out", str(tmp_path / "typo"), "--resume"]) == 2      # a typo in --out
    assert "typo: no such run directory to resume (check --out)" in capsys.readouterr().err
    assert not (tmp_path / "typo").exists()
    (tmp_path / "empty").mkdir()
    assert main(["run", str(path), "--out", str(tmp_path / "empty"), "--resume"]) == 0
    assert "nothing to resume (no checkpoint); starting the run" in capsys.readouterr().err


def test_resume_of_a_finished_run_is_refused_and_changes_nothing(tmp_path, capsys):
    path, out = _checkpointed(tmp_path, n=3, stop_after=None)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert main(["run", str(path), "--out", str(out), "--resume"]) == 2
    assert "holds a finished run" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_a_locked_run_directory_is_refused(tmp_path, capsys):
    path, out = _checkpointed(tmp_path)
    held = RunDir(out).lock()
    try:
        assert main(["run", str(path), "--out", str(out), "--resume"]) == 2
        err = capsys.readouterr().err
        assert f"in use by another run (process {__import__('os').getpid()})" in err, err
    finally:
        held.close()
    assert main(["run", str(path), "--out", str(out), "--resume"]) == 0


def test_out_that_is_a_file_or_below_one(tmp_path, capsys):
    path = _write(tmp_path, _small(_raw(), n=2))
    (tmp_path / "f").write_text("x")
    assert main(["run", str(path), "--out", str(tmp_path / "f")]) == 2
    assert "not a run directory of this package" in capsys.readouterr().err
    assert main(["run", str(path), "--out", str(tmp_path / "f" / "sub")]) == 2
    assert "cannot create the run directory" in capsys.readouterr().err
    assert (tmp_path / "f").read_text() == "x"


def test_compare_with_damaged_or_missing_files(tmp_path, capsys):
    path, out = _checkpointed(tmp_path, n=3, stop_after=None)
    assert main(["compare", str(out), "--markdown", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    s = json.loads((out / "summary.json").read_text())
    s.pop("compile_s")                                        # as an older version wrote it
    (out / "summary.json").write_text(json.dumps(s))
    assert main(["compare", str(out)]) == 2
    assert "written by an older version" in capsys.readouterr().err
    (out / "summary.json").write_text("{garbage")
    assert main(["compare", str(out)]) == 2
    assert "missing or damaged" in capsys.readouterr().err
    (out / "summary.json").write_text("{}")
    (out / "predictions.npz").unlink()
    assert main(["compare", str(out)]) == 2
    err = capsys.readouterr().err
    assert "missing or damaged" in err and "Traceback" not in err


def test_compare_tables_the_finished_runs_and_names_the_others(tmp_path, capsys):
    path, done = _checkpointed(tmp_path, n=3, stop_after=None)
    part = tmp_path / "part"
    assert run_experiment(read_config(path), part, source=str(path), quiet=True, stop_after=1) == {}
    capsys.readouterr()
    assert main(["compare", str(done), str(part), str(tmp_path / "nothing")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"A: {done}") and "B vs A" not in out
    assert f"not in the table:\n  {part}: not finished (its checkpoint holds 1 of 3 super-transitions); resume " \
           f"it with adaptive-hmc run CONFIG --out {part} --resume" in out
    assert f"{tmp_path / 'nothing'}: no run there" in out
    assert main(["compare", str(part)]) == 2
    assert "no finished run to compare" in capsys.readouterr().err


def test_a_failing_disk_ends_with_a_message_and_keeps_the_checkpoint(tmp_path, capsys, monkeypatch):
    import errno

    from adaptive_hmc import results
    path, out = _checkpointed(tmp_path, n=3)
    kept = (out / "checkpoint.npz").read_bytes()
    real = results.atomic_write

    def full(p, data, **kw):
        if p.name == "checkpoint.npz":
            raise OSError(errno.ENOSPC, "No space left on device", str(p))
        real(p, data, **kw)
    monkeypatch.setattr(results, "atomic_write", full)
    assert main(["run", str(path), "--out", str(out), "--resume"]) == 1
    err = capsys.readouterr().err
    assert "No space left on device" in err and "resume with --resume" in err and "Traceback" not in err
    assert (out / "checkpoint.npz").read_bytes() == kept


def test_relative_data_path_is_relative_to_the_config_file(tmp_path, monkeypatch):
    from adaptive_hmc.experiment import build
    (tmp_path / "sub").mkdir()
    _table(tmp_path / "sub")
    (tmp_path / "t.csv").write_text("not,a,table\n")          # a decoy in the working directory
    raw = _small(_raw(), n=2)
    raw["data"] = {"path": "t.csv", "target_columns": [-1], "train_rows": [1, 20], "test_sets": {"rest": [21, 30]}}
    raw["replicas"]["k"] = 4
    path = _write(tmp_path / "sub", raw)
    monkeypatch.chdir(tmp_path)
    replicas = build(read_config(path), str(path))[0].replicas
    assert replicas.X_test.shape == (10, 3)


def test_stuck_chains_are_flagged_in_log_progress_summary_and_compare(tmp_path, capsys):
    """A hand setting far past the stability limit accepts nothing: every place a
    user looks says so."""
    raw = _small(_raw(), n=3)
    raw["tuner"] = {"kind": "fixed", "step_factor": 20.0, "num_steps": 50}
    path = _write(tmp_path, raw)
    out = tmp_path / "run"
    assert main(["run", str(path), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "STUCK: chains [0, 1, 2, 3, 4, 5, 6, 7] accepted nothing" in captured.out
    assert "warning: in 3 of 3 super-transitions some chain accepted no trajectory" in captured.err
    assert captured.err.index("warning: in super-transition 0 (step factor 20, L 50) chains [0, 1, 2, 3, 4, 5, 6, 7] "
                              "accepted no trajectory; the run goes on") < captured.err.index("in 3 of 3")
    log = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    assert all(e["stuck_chains"] == list(range(8)) for e in log)
    assert "(no test-set ESS)" in captured.err           # 3 super-transitions: too few draws for an ESS
    s = json.loads((out / "summary.json").read_text())
    assert s["stuck_super_transitions"] == 3 and s["low_acceptance_share"] == 1.0
    assert s["stuck_by_chain"] == [3] * 8 and len(s["divergences_by_chain"]) == 8
    md = tmp_path / "t.md"
    assert main(["compare", str(out), "--markdown", str(md)]) == 0
    head, _, row = md.read_text().splitlines()[:3]
    cells = dict(zip(head.split(" | "), row.split(" | ")))
    assert cells["acc < 0.2 share"] == "1.00" and cells["stuck"] == "3"


def test_predictions_from_the_chains_asked_for(tmp_path, capsys):
    """replicas.predict_from picks the chains of the summary's test errors, and
    compare --chains recomputes them from any run's per-chain sums."""
    raw = _small(_raw(), n=4)
    raw["replicas"].update(data="folds", full_data_chain=True)
    runs = {}
    for chains in ("all", "full"):
        raw["replicas"]["predict_from"] = chains
        path = _write(tmp_path, raw, f"{chains}.yaml")
        runs[chains] = tmp_path / chains
        assert main(["run", str(path), "--out", str(runs[chains]), "--quiet"]) == 0
    s = {c: json.loads((d / "summary.json").read_text()) for c, d in runs.items()}
    assert s["all"]["predict_from"] == "all" and s["full"]["predict_from"] == "full"
    assert s["full"]["test_mse"] != s["all"]["test_mse"]          # the same samples, other chains pooled
    from adaptive_hmc.reports import compare
    for chains in ("all", "full"):
        row = compare([runs["all"]], chains)[0]
        assert row["chains"] == chains
        for name, v in s[chains]["test_mse"].items():
            assert row["test"][name] == pytest.approx(v, rel=1e-12)
            assert row["test_se"][name] == pytest.approx(s[chains]["test_mse_se"][name], rel=1e-9)
    capsys.readouterr()
    raw["replicas"].update(full_data_chain=False, predict_from="all")
    path = _write(tmp_path, raw, "nofull.yaml")
    assert main(["run", str(path), "--out", str(tmp_path / "nofull"), "--quiet"]) == 0
    assert main(["compare", str(tmp_path / "nofull"), "--chains", "full"]) == 2
    assert "has no full-data chain" in capsys.readouterr().err


def _table_run(tmp_path, likelihood="gaussian", thin=5, name="run", y_scale=1.0, predict_steps=None, **data):
    """A finished run on a 3-input table with standardised inputs (the inputs' scales differ 100-fold);
    regression targets times ``y_scale``; ``data`` updates the data section; ``predict_steps`` the run's."""
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, size=(60, 3)) * [1, 10, 100]
    f = np.sin(X[:, 0]) + X[:, 1] / 10
    y = (f > 0).astype(float) if likelihood == "logistic" else y_scale * (f + 0.05 * rng.normal(size=60))
    np.savetxt(tmp_path / "d.csv", np.column_stack([X, y]), delimiter=",")
    raw = _small(_raw(), n=4)
    raw["data"] = {"path": str(tmp_path / "d.csv"), "target_columns": [-1], "train_rows": [1, 45],
                   "test_sets": {"rest": [46, 60]}, "standardize_inputs": True, "standardize_targets": False}
    raw["data"].update(data)
    raw["model"]["likelihood"] = likelihood
    raw["model"]["priors"].pop("noise") if likelihood != "gaussian" else None
    raw["replicas"].update(k=3)
    raw["run"]["thin"] = thin
    if predict_steps is not None:
        raw["run"]["predict_steps"] = predict_steps           # 0: every iteration predicts, as every one is kept
    if likelihood != "gaussian":
        raw["tuner"]["cv_metric"] = "log_loss"
    path = _write(tmp_path, raw, f"{name}.yaml")
    assert main(["run", str(path), "--out", str(tmp_path / name), "--quiet"]) == 0
    return tmp_path / name, X, y


def test_predict_from_a_finished_run(tmp_path, capsys):
    from adaptive_hmc.models.mlp import predict as mlp_predict
    from adaptive_hmc.results import read_run
    out, X, y = _table_run(tmp_path)
    np.savetxt(tmp_path / "new.csv", X[45:], delimiter=",")
    capsys.readouterr()
    assert main(["predict", str(out), str(tmp_path / "new.csv"), "--out", str(tmp_path / "p.csv")]) == 0
    header = (tmp_path / "p.csv").read_text().splitlines()[0].split(",")
    assert header == ["mean_0", "sd_0", "lower_0", "upper_0"]
    P = np.loadtxt(tmp_path / "p.csv", delimiter=",", skiprows=1)
    with np.load(out / "samples.npz") as z:       # the same from the stored samples and transform, by hand
        keep = z["chain"] >= 0
        w = z["weight"][keep]                     # each kept sample weighs its leapfrog steps (run.weight_by)
        assert len(np.unique(w)) > 1              # the bandit tried several L: the weights matter here
        F = mlp_predict(read_run(out).spec, z["weights"][keep], (X[45:] - z["input_mean"]) / z["input_sd"])
        mean = np.average(F, axis=0, weights=w)
        sd = np.sqrt(np.average((F - mean) ** 2, axis=0, weights=w)
                     + np.average(1 / z["noise_precision"][keep], axis=0, weights=w))
    np.testing.assert_allclose(P[:, 0], mean[:, 0], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(P[:, 1], sd[:, 0], rtol=1e-8)
    np.testing.assert_allclose(P[:, 3] - P[:, 0], 1.959963984540054 * sd[:, 0], rtol=1e-8)
    assert np.mean((P[:, 0] - y[45:]) ** 2) < 0.5 * np.var(y[45:])      # it learned, in original units
    mean, s = read_run(out).predict(X[45:], return_std=True, chains="full")
    assert mean.shape == s.shape == (15, 1) and np.allclose(mean[:, 0], P[:, 0])    # every chain: the posterior
    np.savetxt(tmp_path / "bad.csv", X[45:, :2], delimiter=",")
    assert main(["predict", str(out), str(tmp_path / "bad.csv")]) == 2
    assert "2 columns; the network takes 3 inputs" in capsys.readouterr().err
    assert main(["predict", str(out), str(tmp_path / "new.csv"), "--level", "1.5"]) == 2


def test_predict_needs_kept_samples_and_gives_class_probabilities(tmp_path, capsys):
    from adaptive_hmc.results import read_run
    out, X, y = _table_run(tmp_path, thin=0, name="nothin")
    np.savetxt(tmp_path / "new.csv", X[:5], delimiter=",")
    capsys.readouterr()
    assert main(["predict", str(out), str(tmp_path / "new.csv")]) == 2
    assert "no kept samples" in capsys.readouterr().err
    out, X, y = _table_run(tmp_path, likelihood="logistic", name="cls")
    capsys.readouterr()
    assert main(["predict", str(out), str(tmp_path / "new.csv")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "p_0,p_1,label" and len(lines) == 6
    P = read_run(out).predict_proba(X[:5])
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert np.array_equal(read_run(out).predict(X[:5]), P.argmax(axis=1))
    import arviz as az
    assert main(["export", str(tmp_path / "nothin")]) == 2
    assert "no kept samples to export" in capsys.readouterr().err
    assert main(["export", str(out)]) == 0
    idata = az.from_netcdf(str(out / "inference_data.nc"))
    probs = idata.predictions["y_hat"].values
    np.testing.assert_allclose(probs.sum(axis=-1), 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isfinite(az.loo(idata).elpd_loo)


def test_config_reference_is_generated_from_the_schema():
    from adaptive_hmc.config import reference
    committed = (CONFIGS.parent / "docs" / "CONFIG.md").read_text()
    assert committed.strip() == reference().strip(), "regenerate: adaptive-hmc reference > docs/CONFIG.md"
    for key in ("train_rows", "target_columns", "standardize_inputs", "bounds", "predict_from", "thin"):
        assert f"| `{key}` |" in committed


def test_validate_and_dry_run_check_everything_and_write_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _write(tmp_path, _small(_raw(), n=2))
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr()
    assert yaml.safe_load(out.out)["run"]["super_transitions"] == 2
    assert "valid. Network 2-16-2 (gaussian, 82 parameters), 8 chains, 200 training cases" in out.err
    assert main(["run", str(path), "--dry-run"]) == 0
    assert "valid." in capsys.readouterr().err and not (tmp_path / "runs").exists()
    raw = _small(_raw(), n=2)
    raw["data"]["test_sets"]["extra"] = [590, 700]          # a data problem, found without running
    assert main(["validate", str(_write(tmp_path, raw, "bad.yaml"))]) == 2
    assert "data.test_sets.extra = [590, 700]: the data has 600 rows" in capsys.readouterr().err


def test_unknown_keys_get_the_nearest_allowed_key(tmp_path, capsys):
    raw = _raw()
    raw["data"]["target"] = "last"
    assert main(["run", str(_write(tmp_path, raw)), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "data.target = 'last': unknown key; did you mean 'target_columns'?" in err and "docs/CONFIG.md" in err
    raw = _raw()
    raw["data"].update(dataset=None, file="/some/where.csv", target_columns=[-1])
    assert main(["run", str(_write(tmp_path, raw)), "--out", str(tmp_path / "o")]) == 2
    assert "data.file = '/some/where.csv': file names a table in the folder of a named data set" in \
        capsys.readouterr().err


def test_help_imports_no_compiled_layer():
    import subprocess
    import sys
    code = ("import sys\nfrom adaptive_hmc.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('numba', 'sklearn', 'adaptive_hmc.models'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]", out


def test_tables_as_people_have_them(tmp_path, capsys):
    """A header row, targets by name, '?' for missing values, white space in a
    file named .csv, and a seeded stratified shuffled split."""
    from adaptive_hmc.experiment import build
    rng = np.random.default_rng(5)
    X = rng.normal(size=(50, 3))
    label = (X[:, 0] > 0.3).astype(int)
    lines = ["crim  zn  rm  cls"] + [f"{a:.4f}  {b:.4f}  {c:.4f}  {d}" for (a, b, c), d in zip(X, label)]
    lines[7] = lines[7].replace(lines[7].split()[1], "?")             # a missing cell in data row 7
    (tmp_path / "h.csv").write_text("\n".join(lines) + "\n")
    raw = _small(_raw(), n=2)
    raw["data"] = {"path": str(tmp_path / "h.csv"), "target_columns": ["cls"],
                   "split": {"train": 30, "test": 15, "seed": 4, "stratify": True}}
    raw["model"]["likelihood"] = "logistic"
    raw["model"]["priors"].pop("noise")
    raw["replicas"].update(data="folds", k=3)
    raw["tuner"]["cv_metric"] = "log_loss"
    path = _write(tmp_path, raw)
    cfg = read_config(path)
    (replicas, *_), _ = build(cfg, str(path))
    err = capsys.readouterr().err
    assert "data: left out 1 of 50 rows with missing values (first: row 7)" in err, err
    assert sum(len(f) for f in replicas.folds) == 30 and replicas.test_names == ["test"]
    assert replicas.X_test.shape == (15, 3)
    keep = np.delete(np.arange(50), 6)
    share = label[keep].mean()
    train_share = np.mean(np.concatenate([r.model.Y[:, 0] for r in replicas.replicas[:1]]).tolist()
                          + replicas.replicas[0].held.YT[0].tolist())
    assert abs(train_share - share) < 0.05                         # stratified: the class share is kept
    again, _ = build(cfg, str(path))
    assert np.array_equal(again.replicas.X_test, replicas.X_test)  # seeded
    raw["data"]["split"]["seed"] = 5
    other, _ = build(read_config(_write(tmp_path, raw, "o.yaml")), str(path))
    assert not np.array_equal(other.replicas.X_test, replicas.X_test)
    for every in (1.0, 49):                                   # every complete row trains; no test set
        raw["data"]["split"] = {"train": every, "seed": 4}
        (whole, *_), _ = build(read_config(_write(tmp_path, raw, "w.yaml")), str(path))
        assert sum(len(f) for f in whole.folds) == 49 and whole.test_names == []


def test_readme_walkthrough_own_csv_to_prediction(tmp_path, capsys, monkeypatch):
    """The README's walkthrough with the shipped template (shrunk): a CSV with a
    header, validate, run, predict new inputs with uncertainty."""
    rng = np.random.default_rng(8)
    X = rng.uniform(-2, 2, size=(80, 2))
    price = np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.05 * rng.normal(size=80)
    rows = ["size,age,price"] + [f"{a:.5f},{b:.5f},{p:.5f}" for (a, b), p in zip(X, price)]
    (tmp_path / "my_data.csv").write_text("\n".join(rows) + "\n")
    # the template comes from the installed package: run where the repository is not on the path
    done = subprocess.run([sys.executable, "-m", "adaptive_hmc.cli", "init", "regression", "--csv", "my_data.csv",
                           "--out", "my.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    raw = yaml.safe_load((tmp_path / "my.yaml").read_text())
    assert raw["data"]["path"] == "my_data.csv" and raw["data"]["target_columns"] == ["price"]
    raw["run"].update(super_transitions=6, budget=600, burn_in={"super_transitions": 2}, thin=5)
    raw["tuner"].update(bounds={"step_factor": [0.01, 1.01], "num_steps": [10, 100]}, warmup_super_transitions=1,
                        maxfun=200)
    raw["sampler"]["initial_phase_steps"] = 200
    path = _write(tmp_path, raw, "my.yaml")
    monkeypatch.chdir(tmp_path)
    assert main(["validate", str(path)]) == 0
    assert main(["run", str(path), "--out", "runs/my", "--quiet"]) == 0
    (tmp_path / "new.csv").write_text("size,age\n0.5,1.0\n-1.0,0.0\n")
    assert main(["predict", "runs/my", "new.csv", "--out", "pred.csv"]) == 0
    assert (tmp_path / "pred.csv").read_text().splitlines()[0] == "price_mean,price_sd,price_lower,price_upper"
    P = np.loadtxt(tmp_path / "pred.csv", delimiter=",", skiprows=1)
    # columns are matched by header name: the same inputs in another order give the same predictions
    (tmp_path / "swapped.csv").write_text("age,size\n1.0,0.5\n0.0,-1.0\n")
    assert main(["predict", "runs/my", "swapped.csv", "--out", "pred2.csv"]) == 0
    assert (tmp_path / "pred2.csv").read_text() == (tmp_path / "pred.csv").read_text()
    (tmp_path / "bad.csv").write_text("size,weight\n0.5,1.0\n")
    capsys.readouterr()
    assert main(["predict", "runs/my", "bad.csv"]) == 2
    err = capsys.readouterr().err
    assert "do not match the run's inputs ['size', 'age']; missing: ['age']; not inputs of the run: ['weight']" in err
    (tmp_path / "plain.csv").write_text("0.5,1.0\n-1.0,0.0\n")                # no header: by position
    assert main(["predict", "runs/my", "plain.csv", "--out", "pred3.csv"]) == 0
    assert (tmp_path / "pred3.csv").read_text() == (tmp_path / "pred.csv").read_text()
    assert P.shape == (2, 4) and np.all(P[:, 1] > 0) and np.all(P[:, 2] < P[:, 0]) and np.all(P[:, 0] < P[:, 3])
    s = json.loads((tmp_path / "runs" / "my" / "summary.json").read_text())
    assert s["predict_from"] == "full" and set(s["test_mse"]) == {"test"}


def test_diagnostics_are_of_the_predicting_chains_and_cost_every_gradient(tmp_path, capsys):
    """summary.json's diagnostics: R-hat and ESS of the predicting chains' test
    predictions, per 1000 of every gradient the run computed (all chains,
    warm-up and burn-in) and per second of sampling; per-sample draws are the
    kept samples' outputs spaced by their weights; compare shows the smallest
    and the median."""
    from adaptive_hmc.diagnostics import chain_statistics, compute_spaced
    from adaptive_hmc.models.mlp import predict
    from adaptive_hmc.reports import compare, table
    from adaptive_hmc.metrics import MIN_KEPT, prediction_draws, thin_limited
    raw = _small(_raw(), n=8)
    raw["replicas"].update(data="folds", full_data_chain=False)      # the thesis's: the replicas predict
    path = _write(tmp_path, raw)
    raw = _small(_raw(), n=8)
    raw["run"]["thin"] = 1
    path_full = _write(tmp_path, raw, "full.yaml")
    assert main(["run", str(path), "--out", str(tmp_path / "a"), "--quiet"]) == 0
    assert main(["run", str(path_full), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    out, *_ = _table_run(tmp_path, likelihood="logistic", name="cls")
    rows = compare([tmp_path / "a", tmp_path / "b", out])
    for d, row, chains, n_chains in (("a", rows[0], "replicas", 8), ("b", rows[1], "full", 8)):
        run = read_run(tmp_path / d)
        diag = run.summary["diagnostics"]
        assert diag == row["diagnostics"] and diag["chains"] == chains
        grads = sum(e["gradients"] for e in run.log)          # the leapfrog steps and one per Gibbs update
        assert diag["gradients"] == grads == run.summary["gradients"]
        assert grads > run.summary["leapfrog_steps"] == np.sum([e["chain_steps"] for e in run.log])
        t = diag["test"]["test_201_400"]
        assert t["chains"] == n_chains and t["variables"] == 400
        assert t["ess_per_1000_gradients"]["min"] == pytest.approx(1000 * t["ess_bulk"]["min"] / grads)
        assert t["ess_per_second"]["median"] == pytest.approx(t["ess_bulk"]["median"] / diag["sampling_s"],
                                                              rel=0.05)
        assert 0 < t["ess_bulk"]["min"] <= t["ess_bulk"]["median"]
    run = read_run(tmp_path / "b")
    S = run.samples
    y, kind = prediction_draws(run.spec, S, run.chain_indices("full"), run.predictions["X_test"],
                               run.predictions["history_pred"], run.predictions["history_count"])
    assert kind == "samples" and np.bincount(S["chain"]).min() >= MIN_KEPT
    diag = run.summary["diagnostics"]
    assert diag["distinct_draws"] == len(S["chain"])               # the ESS is measured on these kept samples
    assert thin_limited(diag) == (diag["test"]["test_201_400"]["ess_bulk"]["median"] > 0.5 * len(S["chain"]))
    assert thin_limited({"distinct_draws": 100, "test": {"t": {"ess_bulk": {"median": 80.0}}}})
    F = predict(run.spec, S["weights"][S["chain"] == 3], run.predictions["X_test"])
    w = S["weight"][S["chain"] == 3]
    assert len(np.unique(w)) > 1                # the bandit tried several L
    # per-sample draws: the kept samples' network outputs, each repeated as its weight says (one draw per
    # shortest-L worth of gradients), so that the ESS is that of the run's weighted average
    spaced = F[compute_spaced(w, max_draws=2 * len(F))].reshape(-1, 800)                 # (draws, cases x outputs)
    assert np.array_equal(y[3], spaced[:y.shape[1]]) and y.shape[1] > len(F)
    assert np.sum(compute_spaced(w) == 0) == int(w[0] / w.min())
    st = chain_statistics(y[:, :, :400])                           # test_201_400: the first 200 cases
    assert run.summary["diagnostics"]["test"]["test_201_400"]["rhat_max"] == pytest.approx(st["rhat"].max())
    assert read_run(tmp_path / "a").summary["diagnostics"]["draws"] == "super-transition means"  # thin 5: few kept
    text = table(rows)
    regression, classification, notes = text.split("\n\n")
    assert "test MSE (original units) robot_arm/test_201_400" in regression and "error rate" not in regression
    assert "test error rate d/rest" in classification
    assert "the runs differ in data" in notes and "the runs differ in chains" in notes   # robot arm and a table
    assert "R-hat max robot_arm/test_201_400" in regression
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "b"), "--chains", "replicas"]) == 2     # one posterior: no replicas
    assert "has no cross-validation replicas (its chains are all on the full training data" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["regression", "classification"])
def test_templates_validate_on_a_csv_with_a_header(kind, tmp_path, capsys):
    """The bare template, with the file it names, validates; init fills in a
    CSV's path (relative to the config), target, name and (classification)
    the likelihood, and the result validates."""
    from adaptive_hmc.templates import template_text
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 2))
    y = (X[:, 0] > 0).astype(int) if kind == "classification" else X[:, 0] + 0.1 * rng.normal(size=40)
    target = yaml.safe_load(template_text(kind))["data"]["target_columns"][0]
    rows = [f"a,b,{target}"] + [f"{u:.4f},{v:.4f},{w}" for (u, v), w in zip(X, y)]
    (tmp_path / "my_data.csv").write_text("\n".join(rows) + "\n")
    assert main(["init", kind, "--out", str(tmp_path / "my.yaml")]) == 0
    assert main(["validate", str(tmp_path / "my.yaml")]) == 0
    assert "32 training cases" in capsys.readouterr().err
    if kind == "classification":
        y = np.where(X[:, 1] > 0.5, 2, y)                               # three classes
    rows = [f"u v,b,{'class' if kind == 'classification' else 'y'}"] + [f"{u:.4f},{v:.4f},{w}"
                                                                         for (u, v), w in zip(X, y)]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "t.csv").write_text("\n".join(rows) + "\n")
    cfg = tmp_path / "cfg" / "t.yaml"
    assert main(["init", kind, "--csv", str(tmp_path / "data" / "t.csv"), "--out", str(cfg)]) == 0
    raw = yaml.safe_load(cfg.read_text())
    assert raw["name"] == "t" and raw["data"]["path"] == "../data/t.csv"
    assert raw["data"]["target_columns"] == ["class" if kind == "classification" else "y"]
    assert raw["model"]["likelihood"] == {"regression": "gaussian", "classification": "softmax"}[kind]
    assert cfg.read_text().startswith(template_text(kind)[:200])           # the comments are kept
    assert main(["validate", str(cfg)]) == 0
    assert main(["init", kind, "--csv", str(tmp_path / "data" / "t.csv"), "--out", str(cfg)]) == 2
    assert "exists; choose another file name, or add --force" in capsys.readouterr().err
    assert main(["init", kind, "--csv", str(tmp_path / "data" / "t.csv"), "--target", "size", "--out",
                 str(tmp_path / "x.yaml")]) == 2
    assert "no column named 'size'; the header has ['u v', 'b'" in capsys.readouterr().err
    raw = _small(raw, n=3, budget=200)                       # a short run: predict names its columns
    raw["run"]["burn_in"] = {"super_transitions": 1}
    cfg.write_text(yaml.safe_dump(raw))
    assert main(["run", str(cfg), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    (tmp_path / "new.csv").write_text("b,u v\n0.1,0.2\n")
    assert main(["predict", str(tmp_path / "r"), str(tmp_path / "new.csv"), "--out", str(tmp_path / "p.csv")]) == 0
    assert (tmp_path / "p.csv").read_text().splitlines()[0] == (
        "p_class_0,p_class_1,p_class_2,class" if kind == "classification" else "y_mean,y_sd,y_lower,y_upper")
    if kind == "classification":
        (tmp_path / "one_two.csv").write_text("a,label\n1,1\n2,2\n")
        assert main(["init", kind, "--csv", str(tmp_path / "one_two.csv"), "--out", str(tmp_path / "y.yaml")]) == 2
        assert "the labels in" in capsys.readouterr().err and not (tmp_path / "y.yaml").exists()


def test_standardized_targets_are_sampled_in_units_of_their_sd_and_reported_in_their_own(tmp_path):
    """Targets in the thousands: with data.standardize_targets the chains see
    them scaled to sd 1 (under priors set for that scale) and every prediction
    comes back in the original units: the model average in predictions.npz,
    the summary's test MSE, Run.predict from the kept samples (thin 1: the same
    samples, so equal to rounding), and the exported posterior predictive."""
    import arviz as az
    from adaptive_hmc.models.predictive import squared_errors
    from adaptive_hmc.results import read_run
    out, X, y = _table_run(tmp_path, thin=1, name="scaled", y_scale=1000.0, standardize_targets=True,
                           predict_steps=0)
    run = read_run(out)
    assert run.samples["target_sd"][0] == pytest.approx(y[:45].std()) and run.samples["target_sd"][0] > 300
    with np.load(out / "predictions.npz") as z:
        mean, var = z["rest/mean"], z["rest/var"]
    m, sd = run.predict(X[45:], return_std=True, chains="all")
    np.testing.assert_allclose(m, mean, rtol=1e-8)
    np.testing.assert_allclose(sd ** 2, var, rtol=1e-6)
    mse = run.summary["test_mse"]["rest"]
    assert mse == pytest.approx(float(squared_errors(mean, y[45:, None]).mean()), rel=1e-10)
    assert mse < 0.5 * y[45:].var()                                  # it learned, in the original units
    assert main(["export", str(out)]) == 0
    idata = az.from_netcdf(str(out / "inference_data.nc"))
    y_hat = idata.predictions["y_hat"].values.reshape(-1, 15)
    assert np.mean((y_hat.mean(0) - y[45:]) ** 2) < 0.5 * y[45:].var()
    assert np.isfinite(idata.log_likelihood["y"].values).all()
    raw = yaml.safe_load((tmp_path / "scaled.yaml").read_text())
    raw["model"]["likelihood"] = "logistic"
    assert read_config(_write(tmp_path, raw, "cls.yaml")).data.standardize_targets   # ignored for labels


def test_rows_can_be_listed(tmp_path, capsys):
    rng = np.random.default_rng(0)
    np.savetxt(tmp_path / "t.csv", np.column_stack([rng.normal(size=(30, 2)), rng.normal(size=30)]), delimiter=",")
    raw = _small(_raw())
    raw["data"] = {"path": str(tmp_path / "t.csv"), "target_columns": [-1], "train_rows": {"rows": [1, 3, 5, 7, 9, 11]},
                   "test_sets": {"odd": {"rows": [2, 4, 6]}, "tail": [20, 30]}}
    raw["replicas"]["k"] = 2
    cfg = read_config(_write(tmp_path, raw))
    split = cfg.data.cases("gaussian", str(tmp_path / "c.yaml"))
    table = np.loadtxt(tmp_path / "t.csv", delimiter=",")
    np.testing.assert_array_equal(split.train[0], table[[0, 2, 4, 6, 8, 10], :2])
    np.testing.assert_array_equal(split.tests["odd"][1][:, 0], table[[1, 3, 5], 2])
    assert len(split.tests["tail"][0]) == 11
    for rows, message in (({"rows": [2, 3]}, "row 3 is in both"), ({"rows": [2, 2]}, "a row may be listed once"),
                          ({"rows": [31]}, "rows are numbered 1..30")):
        raw["data"]["test_sets"] = {"t": rows}
        assert main(["validate", str(_write(tmp_path, raw))]) == 2
        assert message in capsys.readouterr().err


def test_defaults_are_a_careful_users_and_the_estimators(tmp_path):
    """Burn-in a third, warm-up, a full-data chain, inputs and targets standardised:
    the same in a config that does not say and in the estimators."""
    from adaptive_hmc.estimator import BNNRegressor
    from adaptive_hmc.runner import DEFAULT_WARMUP
    raw = _raw()
    raw["data"] = {"dataset": "robot_arm", "train_rows": [1, 200], "test_sets": {"t": [201, 300]}}
    raw["replicas"] = {}
    raw["tuner"].pop("warmup_super_transitions")
    raw["run"].pop("burn_in")
    raw["run"]["super_transitions"] = 30
    cfg = read_config(_write(tmp_path, raw))
    assert cfg.run.burn_in.super_transitions == 10 == 30 // 3
    assert cfg.tuner.warmup_super_transitions == DEFAULT_WARMUP
    assert cfg.replicas.data == "full" and cfg.replicas.predict_from == "full" and cfg.replicas.k == 8
    assert cfg.data.standardize_inputs and cfg.data.standardize_targets
    raw["tuner"]["reward"] = "cv"                                  # the thesis: folds, and a full-data chain predicts
    thesis = read_config(_write(tmp_path, raw, "cv.yaml")).replicas
    assert (thesis.data, thesis.full_data_chain, thesis.predict_from) == ("folds", True, "full")
    assert BNNRegressor().burn_in_super_transitions is None         # resolved to super_transitions // 3 in fit


def test_jitter_is_on_for_the_tuned_hmc_sampler_only(tmp_path):
    """sampler.jitter left out: on with the bandit (kind hmc, no annealing), off with a fixed
    setting, with annealing or another transition; a value given is kept; the estimators' default on."""
    from adaptive_hmc.estimator import BNNRegressor
    raw = _raw()
    raw.get("sampler", {}).pop("jitter", None)

    def jitter(name, **over):
        r = json.loads(json.dumps(raw))
        for key, v in over.items():
            section, field = key.split("__")
            r.setdefault(section, {})[field] = v
        return read_config(_write(tmp_path, r, name)).sampler.jitter

    assert raw["tuner"]["kind"] == "bandit" and jitter("a.yaml") is True
    assert jitter("b.yaml", sampler__jitter=False) is False
    assert jitter("c.yaml", tuner__kind="fixed", tuner__step_factor=0.1, tuner__num_steps=20, tuner__bounds=None) is False
    assert jitter("d.yaml", sampler__kind="metropolis", sampler__window=1) is False
    assert jitter("e.yaml", sampler__anneal=[[10, 0.0, 2.0]], sampler__window=1) is False
    assert BNNRegressor().jitter is True


def test_ess_of_draws_that_never_change_is_zero():
    import arviz as az
    from adaptive_hmc.diagnostics import draws_ess
    rng = np.random.default_rng(0)
    y = np.stack([np.full(200, 0.3), rng.normal(size=200)], axis=1)[None]
    raw = np.nan_to_num(az.ess(az.convert_to_dataset(y))["x"].values)
    ess = draws_ess(y)
    assert ess[0] == 0.0 and ess[1] == pytest.approx(raw[1]) and ess[1] > 100


@pytest.mark.parametrize("kind", ["metropolis", "stochastic_dynamics"])
def test_other_transitions_run_on_the_replicas_from_a_config(kind, tmp_path, capsys):
    """sampler.kind: the replicas' iteration runs random-walk Metropolis or
    stochastic dynamics, within the same budget of energy evaluations."""
    raw = _small(_raw(), n=4)
    raw["sampler"].update(kind=kind, window=1)
    raw["tuner"] = {"kind": "fixed", "step_factor": 0.05 if kind == "metropolis" else 0.2, "num_steps": 20}
    path = _write(tmp_path, raw)
    assert main(["run", str(path), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    run = read_run(tmp_path / "r")
    chains = raw["replicas"]["k"]
    assert run.summary["leapfrog_steps"] == 4 * 600 * chains        # every chain spends the whole budget
    if kind == "metropolis":        # the share of proposals accepted, not of iterations
        assert 0.05 < run.summary["acceptance"] < 0.95 and np.isfinite(run.summary["test_mse"]["test_201_400"])
    else:                           # no acceptance test: every trajectory kept; it fits within this budget
        assert run.summary["acceptance"] == 1.0 and run.summary["test_mse"]["test_201_400"] < 1.0
    raw["sampler"]["window"] = 5
    assert main(["validate", str(_write(tmp_path, raw, "bad.yaml"))]) == 2
    assert "sampler.window = 5: windows and jitter are for kind hmc, not " + kind in capsys.readouterr().err


def test_dexter_runs_through_the_cli_and_predicts_from_raw_word_counts(tmp_path, capsys):
    """Dexter's quick config, shortened: 295 of the 20,000 features selected on
    the training cases, log(1 + count) inputs kept sparse (the first layer runs
    on the nonzeros), 10 CV replicas; the run beats chance on its 100 evaluation
    cases, and predict takes raw rows of 20,000 counts, mapping them as the run did."""
    from adaptive_hmc.data import data_dir, load_split
    from adaptive_hmc.tasks import load_dexter
    raw = _raw("dexter_bandit_quick.yaml")
    raw["run"].update(super_transitions=4, budget=1000, burn_in={"super_transitions": 2})
    raw["tuner"]["bounds"]["num_steps"] = [20, 500]
    raw["tuner"].update(warmup_super_transitions=1, maxfun=200)
    cfg = _write(tmp_path, raw)
    out = tmp_path / "run"
    assert main(["run", str(cfg), "--out", str(out)]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["test_error_rate"]["test"] < 0.35 and s["samples_retained"] > 0
    run = read_run(out)
    assert run.spec.n_inputs == 295 and run.n_raw_inputs == 20_000 and run.input_map.log1p
    X, _ = load_dexter(data_dir("dexter"))
    X = X.toarray()
    split = load_split(dataset="dexter", split=raw["data"]["split"], likelihood="logistic")
    Xt, Yt = split.tests["test"]
    np.testing.assert_array_equal(run.input_map.transform(Xt), run.predictions["X_test"])
    csv = tmp_path / "raw.csv"
    np.savetxt(csv, Xt[:5], delimiter=",", fmt="%g")
    capsys.readouterr()
    assert main(["predict", str(out), str(csv)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 6                                     # a header and one row per case
    np.savetxt(csv, Xt[:5, :100], delimiter=",", fmt="%g")
    assert main(["predict", str(out), str(csv)]) == 2
    assert "20000" in capsys.readouterr().err


def test_the_end_of_run_warning_names_chains_that_have_not_met():
    from adaptive_hmc.metrics import rhat_warning
    assert rhat_warning({"chains": "full", "rhat_max": 1.004}) is None
    assert "is 1.050, above 1.01" in rhat_warning({"chains": "full", "rhat_max": 1.05})
    assert "not finite (a chain never moved)" in rhat_warning({"chains": "full", "rhat_max": None})
    assert rhat_warning({}) is None
