"""Configs and their checks through the command line (smoke tier): malformed configs and data exit 2 with a
clear message and write nothing, validate, the config reference, templates, tables as people have them, defaults."""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from adaptive_hmc.front.cli import main
from adaptive_hmc.config import read_config
from adaptive_hmc.front.experiment import run_experiment
from cli_helpers import CONFIGS, QUICK, _raw, _write, _small, CASES, _table


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


def test_relative_data_path_is_relative_to_the_config_file(tmp_path, monkeypatch):
    from adaptive_hmc.front.experiment import build
    (tmp_path / "sub").mkdir()
    _table(tmp_path / "sub")
    (tmp_path / "t.csv").write_text("not,a,table\n")          # a decoy in the working directory
    raw = _small(_raw(), n=2)
    raw["data"] = {"path": "t.csv", "target_columns": [-1], "train_rows": [1, 20], "test_sets": {"rest": [21, 30]}}
    raw["chains"] = 4
    path = _write(tmp_path / "sub", raw)
    monkeypatch.chdir(tmp_path)
    replicas = build(read_config(path), str(path))[0].chains
    assert replicas.X_test.shape == (10, 3)


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
    assert "the run will take about" in out.err and "for 2 super-transitions, compiling apart" in out.err
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
    code = ("import sys\nfrom adaptive_hmc.front.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('numba', 'sklearn', 'adaptive_hmc.models'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]", out


def test_tables_as_people_have_them(tmp_path, capsys):
    """A header row, targets by name, '?' for missing values, white space in a
    file named .csv, and a seeded stratified shuffled split."""
    from adaptive_hmc.front.experiment import build
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
    raw.pop("chains")
    raw["cv"] = {"folds": 3}
    raw["tuner"]["cv_metric"] = "log_loss"
    path = _write(tmp_path, raw)
    cfg = read_config(path)
    replicas = build(cfg, str(path))[0].chains
    err = capsys.readouterr().err
    assert "data: left out 1 of 50 rows with missing values (first: row 7)" in err, err
    assert sum(len(f) for f in replicas.folds) == 30 and replicas.test_names == ["test"]
    assert replicas.X_test.shape == (15, 3)
    keep = np.delete(np.arange(50), 6)
    share = label[keep].mean()
    train_share = np.mean(np.concatenate([r.model.Y[:, 0] for r in replicas.chain_data[:1]]).tolist()
                          + replicas.chain_data[0].held.YT[0].tolist())
    assert abs(train_share - share) < 0.05                         # stratified: the class share is kept
    again, _ = build(cfg, str(path))
    assert np.array_equal(again.chains.X_test, replicas.X_test)  # seeded
    raw["data"]["split"]["seed"] = 5
    other, _ = build(read_config(_write(tmp_path, raw, "o.yaml")), str(path))
    assert not np.array_equal(other.chains.X_test, replicas.X_test)
    for every in (1.0, 49):                                   # every complete row trains; no test set
        raw["data"]["split"] = {"train": every, "seed": 4}
        whole = build(read_config(_write(tmp_path, raw, "w.yaml")), str(path))[0].chains
        assert sum(len(f) for f in whole.folds) == 49 and whole.test_names == []


@pytest.mark.parametrize("kind", ["regression", "classification"])
def test_templates_validate_on_a_csv_with_a_header(kind, tmp_path, capsys):
    """The bare template, with the file it names, validates; init fills in a
    CSV's path (relative to the config), target, name and (classification)
    the likelihood, and the result validates."""
    from adaptive_hmc.front.templates import template_text
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
    err = capsys.readouterr().err                            # the file named (it names the column of one)
    assert f"--target = 'size': no column named 'size' in {tmp_path / 'data' / 't.csv'}; the header has ['u v', 'b'" \
        in err
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


def test_rows_can_be_listed(tmp_path, capsys):
    rng = np.random.default_rng(0)
    np.savetxt(tmp_path / "t.csv", np.column_stack([rng.normal(size=(30, 2)), rng.normal(size=30)]), delimiter=",")
    raw = _small(_raw())
    raw["data"] = {"path": str(tmp_path / "t.csv"), "target_columns": [-1], "train_rows": {"rows": [1, 3, 5, 7, 9, 11]},
                   "test_sets": {"odd": {"rows": [2, 4, 6]}, "tail": [20, 30]}}
    raw["chains"] = 2
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
    """Burn-in a third, warm-up, a full-data chain, inputs and targets standardised,
    4 chains of the posterior (8 folds for the thesis's cv reward): the same in a
    config that does not say and in the estimators."""
    from adaptive_hmc.front.estimator import BNNRegressor
    from adaptive_hmc.engine.runner import DEFAULT_WARMUP
    raw = _raw()
    raw["data"] = {"dataset": "robot_arm", "train_rows": [1, 200], "test_sets": {"t": [201, 300]}}
    raw.pop("chains")
    raw["tuner"].pop("warmup_super_transitions")
    raw["run"].pop("burn_in")
    raw["run"]["super_transitions"] = 30
    cfg = read_config(_write(tmp_path, raw))
    assert cfg.run.burn_in.super_transitions == 10 == 30 // 3
    assert cfg.tuner.warmup_super_transitions == DEFAULT_WARMUP
    assert cfg.layout.data == "full" and cfg.layout.predict_from == "full" and cfg.cv is None
    assert cfg.chains == cfg.layout.k == 4 == BNNRegressor().chains     # chains of the posterior: one default
    assert cfg.data.standardize_inputs and cfg.data.standardize_targets
    raw["tuner"]["reward"] = "cv"                                  # the thesis: folds, and a full-data chain predicts
    thesis = read_config(_write(tmp_path, raw, "cv.yaml"))
    assert thesis.chains is None and thesis.cv.folds == 8
    assert tuple(thesis.layout) == ("folds", 8, True, "full")
    assert BNNRegressor().burn_in_super_transitions is None         # resolved to super_transitions // 3 in fit


def test_jitter_is_on_for_the_tuned_hmc_sampler_only(tmp_path):
    """sampler.jitter left out: on with the bandit (kind hmc, no annealing), off with a fixed
    setting, with annealing or another transition; a value given is kept; the estimators' default on."""
    from adaptive_hmc.front.estimator import BNNRegressor
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


def test_hyperpriors_default_to_shape_2_for_the_weights_in_every_entry_point(tmp_path):
    """A config that names no prior, one that gives a group's sd alone or its
    shape alone, the estimators and the init templates: weight groups mean
    precision 400 and shape 2, the noise Neal's 0.5; a shape given is kept."""
    import importlib.resources
    from adaptive_hmc.models.priors import GammaPrior, PriorSpec, WEIGHT_SHAPE
    assert WEIGHT_SHAPE == 2.0
    raw = _raw()
    raw["model"]["priors"] = {}
    spec = read_config(_write(tmp_path, raw)).model.priors.prior_spec()
    assert spec == PriorSpec()
    assert spec.input_hidden == spec.hidden_bias == spec.hidden_output == GammaPrior(400.0, 2.0)
    assert spec.noise == GammaPrior(400.0, 0.5) and spec.output_bias == GammaPrior(1e-4, float("inf"))
    raw["model"]["priors"] = {"input_hidden": {"sd": 0.5}, "hidden_bias": {"shape": 0.5}, "noise": {"sd": 0.25}}
    spec = read_config(_write(tmp_path, raw, "partial.yaml")).model.priors.prior_spec()
    assert spec.input_hidden == GammaPrior(4.0, 2.0) and spec.hidden_bias == GammaPrior(400.0, 0.5)
    assert spec.noise == GammaPrior(16.0, 0.5)
    for kind in ("regression", "classification"):
        text = importlib.resources.files("adaptive_hmc").joinpath(f"front/templates/{kind}.yaml").read_text()
        priors = yaml.safe_load(text)["model"]["priors"]
        assert all(priors[g] == {"sd": 0.05, "shape": 2} for g in ("input_hidden", "hidden_bias", "hidden_output"))


def test_chains_and_folds_are_two_keys_and_the_old_section_reads_with_one_note(tmp_path, capsys):
    """chains: K and cv: {...} in every shipped config and template; an old config's replicas section runs
    as the key that replaced it, with one note naming it."""
    from adaptive_hmc.front.templates import KINDS, template_text
    shipped = {p.name: p.read_text() for p in CONFIGS.glob("*.yaml")} | {k: template_text(k) for k in KINDS}
    assert len(shipped) > 20 and not [name for name, text in shipped.items() if "replicas" in yaml.safe_load(text)]
    for old, new, layout in (({"k": 3}, "chains: 3", ("full", 3, False, "full")),
                             ({"data": "folds", "k": 4, "full_data_chain": False}, "cv: {folds: 4, full_chain: "
                              "false}", ("folds", 4, False, "replicas"))):
        raw = _small(_raw())
        del raw["chains"]
        raw["replicas"] = old
        path = _write(tmp_path, raw)
        assert main(["validate", str(path), "--no-estimate"]) == 0
        out = capsys.readouterr()
        notes = [line for line in out.err.splitlines() if "note:" in line]
        assert notes == [f"adaptive-hmc validate {path}: note: replicas is the old name of chains and cv: read as "
                         f"`{new}`; write that instead"], out.err
        resolved = yaml.safe_load(out.out)
        assert "replicas" not in resolved and tuple(read_config(path).layout) == layout
        assert (resolved["chains"] == 3) if layout[0] == "full" else (resolved["cv"]["folds"] == 4)


def test_the_old_arithmetic_key_reads_with_one_note_and_not_beside_the_new(tmp_path, capsys):
    """sampler.precision, the old name of sampler.arithmetic, runs as it with one note; both at once are refused."""
    raw = _small(_raw())
    raw["sampler"]["precision"] = "float32"
    path = _write(tmp_path, raw)
    assert main(["validate", str(path), "--no-estimate"]) == 0
    out = capsys.readouterr()
    notes = [line for line in out.err.splitlines() if "note:" in line]
    assert notes == [f"adaptive-hmc validate {path}: note: sampler.precision is the old name of sampler.arithmetic: "
                     "read as `arithmetic: float32`; write that instead"], out.err
    resolved = yaml.safe_load(out.out)
    assert resolved["sampler"]["arithmetic"] == "float32" and "precision" not in resolved["sampler"]
    assert read_config(path).network_options().arithmetic == "float32"
    raw["sampler"]["arithmetic"] = "float64"
    assert main(["validate", str(_write(tmp_path, raw, "both.yaml")), "--no-estimate"]) == 2
    assert "sampler.precision = 'float32': the old name of sampler.arithmetic" in capsys.readouterr().err


def test_the_rule_on_chains_and_folds_is_one_for_every_entry_point():
    """Layout.problem decides for a config, NetworkOptions and the runner alike (and can refuse)."""
    from adaptive_hmc.engine.network_options import Layout, NetworkOptions
    assert Layout.chains(3).problem() is None and Layout.cv().problem("cv") is None
    assert Layout.cv(1).problem()[0] == "k" and Layout.chains().problem("cv")[0] == "data"
    assert Layout.cv(0, full_chain=False).problem() == ("full_data_chain", False,
                                                        "must be true with 0 folds (it is the only chain)")
    with pytest.raises(ValueError, match="0 \\(the full-data chain alone\\) or >= 2 folds"):
        NetworkOptions(layout=Layout.cv(1, False))
