"""The edges of the newer surfaces (--extend, run directories of a density, checkpoints of sample(), init's
classes, damaged run files): a clear message naming the file, key or value, exit 2 before any work, never a
traceback, nothing written before a refusal. The stale K-fold and the constrain checked at twice the starts'
rows: test_cli_results.py and test_density.py."""
import json
import pickle

import numpy as np
import pytest

from adaptive_hmc.front.cli import main
from cli_helpers import _raw, _small, _write
from test_density import _eight_schools


def _finished(tmp_path, n=3):
    path = _write(tmp_path, _small(_raw(), n=n))
    assert main(["run", str(path), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    return path, tmp_path / "run"


def test_extend_without_out_goes_to_the_users_run_and_too_many_is_named(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _write(tmp_path, _small(_raw(), n=3))
    assert main(["run", str(path), "--quiet"]) == 0
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 1
    capsys.readouterr()
    assert main(["run", str(path), "--extend", "1", "--quiet"]) == 0          # the run there, not a new -2
    assert sorted((tmp_path / "runs").iterdir()) == runs
    assert json.loads((runs[0] / "summary.json").read_text())["super_transitions"] == 4
    capsys.readouterr()
    assert main(["run", str(path), "--out", str(runs[0]), "--extend", "1000000000000"]) == 2
    err = capsys.readouterr().err
    assert "--extend 1000000000000: the run would have 1,000,000,000,004 super-transitions, more than the " \
           "100,000 a run may have" in err and "Traceback" not in err and "model.hidden" not in err, err
    assert json.loads((runs[0] / "summary.json").read_text())["super_transitions"] == 4


def test_predict_on_a_density_run_says_it_has_no_predictions(tmp_path, capsys):
    cfg = _eight_schools(tmp_path, warmup=50, super_transitions=2)
    assert main(["run", str(cfg), "--out", str(tmp_path / "d"), "--quiet"]) == 0
    (tmp_path / "x.csv").write_text("a\n1\n")
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "d"), str(tmp_path / "x.csv"), "--out", str(tmp_path / "p.csv")]) == 2
    err = capsys.readouterr().err
    assert "a run of a log density, which has no network and so no predictions" in err, err
    assert "FileNotFoundError" not in err and "Traceback" not in err and not (tmp_path / "p.csv").exists()


def test_sample_into_a_folder_that_does_not_exist_is_refused_before_the_warm_up(tmp_path):
    from adaptive_hmc import sample
    from test_density import gaussian
    with pytest.raises(ValueError, match="checkpoint=.*: its folder .*nowhere.* does not exist"):
        sample(gaussian, np.zeros((2, 4)), checkpoint=tmp_path / "nowhere" / "ck.npz", warmup=10 ** 9)


def test_damaged_run_files_are_named_and_a_pickle_is_never_advised(tmp_path, capsys):
    _, out = _finished(tmp_path)
    summary = (out / "summary.json").read_text()
    (out / "summary.json").write_text("{not json")
    assert main(["predict", str(out), str(tmp_path / "x.csv"), "--out", str(tmp_path / "p.csv")]) == 2
    err = capsys.readouterr().err
    assert f"{out / 'summary.json'}: missing or damaged (JSONDecodeError" in err and "Traceback" not in err, err
    (out / "summary.json").write_text(summary)
    (out / "samples.npz").write_bytes(pickle.dumps({"x": 1}))
    assert main(["export", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out / 'samples.npz'}: missing or damaged" in err and "allow_pickle" not in err, err
    (out / "samples.npz").write_bytes(np.random.default_rng(0).bytes(3000))
    assert main(["export", str(out)]) == 2
    err = capsys.readouterr().err
    assert "samples.npz" in err and "allow_pickle" not in err and "Traceback" not in err, err


def test_a_pickle_where_a_checkpoint_should_be_is_not_advised_to_be_loaded(tmp_path, capsys):
    from adaptive_hmc.rundir.checkpoint import unpack_checkpoint
    from cli_helpers import _npz_bytes
    import io
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)       # an .npy of Python objects
    for data in (pickle.dumps({"x": 1}), buf.getvalue(), _npz_bytes(x=np.array([{"a": 1}], dtype=object))):
        with pytest.raises(ValueError) as e:
            unpack_checkpoint(data)
        assert "allow_pickle" not in str(e.value), e.value


def test_init_refuses_a_class_of_one_row_and_validate_names_its_label(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = ["a,b,label"] + [f"{rng.normal():.3f},{rng.normal():.3f},{'yes' if i % 2 else 'no'}" for i in range(40)]
    (tmp_path / "d.csv").write_text("\n".join(rows + ["0.1,0.2,rare"]) + "\n")
    assert main(["init", "classification", "--csv", str(tmp_path / "d.csv"), "--out", str(tmp_path / "c.yaml")]) == 2
    err = capsys.readouterr().err
    assert "class 'rare' of" in err and "has a single row" in err and not (tmp_path / "c.yaml").exists(), err
    (tmp_path / "ok.csv").write_text("\n".join(rows) + "\n")
    assert main(["init", "classification", "--csv", str(tmp_path / "ok.csv"), "--out", str(tmp_path / "c.yaml")]) == 0
    text = (tmp_path / "c.yaml").read_text().replace("ok.csv", "d.csv")       # the same config on the table of 'rare'
    (tmp_path / "c.yaml").write_text(text)
    capsys.readouterr()
    assert main(["validate", str(tmp_path / "c.yaml"), "--no-estimate"]) == 2
    err = capsys.readouterr().err
    assert "class 'rare' has a single row" in err and "1.0" not in err and "Traceback" not in err, err


R_CSV = '"x1","x2","label"\n' + "".join(f'{a:.3f},{b:.3f},"{lab}"\n' for a, b, lab in
                                         [(0.1 * i - 2, (-1) ** i * 0.3, "yes, really" if i % 3 else "no")
                                          for i in range(40)])


@pytest.mark.parametrize("variant", ["R", "Excel", "quoted comma"])
def test_tables_are_read_as_pythons_csv_module_reads_them(tmp_path, variant):
    """R's write.csv (every name and label quoted), Excel's "CSV UTF-8" (a byte-order mark, CRLF lines) and a
    quoted cell holding the delimiter: names without quotes or mark, the cell whole."""
    from adaptive_hmc.tables import read_table
    text = {"R": R_CSV.replace("yes, really", "yes"), "Excel": "\ufeff" + R_CSV.replace("yes, really", "yes")
            .replace('"', "").replace("\n", "\r\n"), "quoted comma": R_CSV}[variant]
    (tmp_path / "t.csv").write_bytes(text.encode("utf-8"))
    X, Y, names, target, classes, _ = read_table(tmp_path / "t.csv", ["label"], "data.path", "t.csv", labels=True)
    assert names == ["x1", "x2"] and target == ["label"] and X.shape == (40, 2) and np.isfinite(X).all()
    assert classes == (("no", "yes, really") if variant == "quoted comma" else ("no", "yes"))
    assert np.array_equal(Y[:, 0], [0.0 if i % 3 == 0 else 1.0 for i in range(40)])


def test_a_quoted_table_goes_through_init_validate_run_and_predict_by_name(tmp_path, capsys):
    import csv
    import yaml
    (tmp_path / "t.csv").write_bytes(("\ufeff" + R_CSV).encode("utf-8"))
    cfg = tmp_path / "c.yaml"
    assert main(["init", "classification", "--csv", str(tmp_path / "t.csv"), "--out", str(cfg)]) == 0
    raw = yaml.safe_load(cfg.read_text())
    assert raw["data"]["target_columns"] == ["label"] and raw["model"]["likelihood"] == "logistic"
    raw["run"].update(super_transitions=3, budget=300, until=None, burn_in={"super_transitions": 1}, thin=2)
    raw["tuner"]["bounds"]["num_steps"] = [10, 100]
    raw["sampler"].update(initial_phase_steps=100, start="random")
    cfg.write_text(yaml.safe_dump(raw))
    assert main(["validate", str(cfg), "--no-estimate"]) == 0
    assert main(["run", str(cfg), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    (tmp_path / "new.csv").write_text('"x2","x1"\n0.3,-1.5\n-0.3,1.0\n')             # by name, in another order
    assert main(["predict", str(tmp_path / "run"), str(tmp_path / "new.csv"), "--out", str(tmp_path / "p.csv")]) == 0
    rows = list(csv.reader((tmp_path / "p.csv").read_text().splitlines()))
    assert len(rows) == 3 and all(len(r) == len(rows[0]) for r in rows)
    labels = {c for r in rows[1:] for c in r if c in ("no", "yes, really")}
    assert labels, rows                                                      # the label with its comma, whole


def test_the_estimators_edges_are_scikit_learns():
    """num_steps_bounds follows a small budget (or names both), sample_weight is refused naming itself,
    random_state is the seed's other name (a RandomState too), n_iter_ counts the super-transitions."""
    import warnings
    from adaptive_hmc import BNNRegressor
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = X[:, 0] + 0.1 * rng.normal(size=40)
    kw = dict(hidden=3, super_transitions=3, max_seconds=None, initial_phase_steps=50, start="random")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        small = BNNRegressor(budget=200, **kw).fit(X, y)
        assert max(e["num_steps"] for e in small.log_) <= 200
        assert small.n_iter_ == 3
        with pytest.raises(ValueError, match=r"num_steps_bounds=\(10, 500\), budget=200: the longest trajectory "
                                             r"\(500\) must be at most the budget"):
            BNNRegressor(budget=200, num_steps_bounds=(10, 500), **kw).fit(X, y)
        with pytest.raises(TypeError, match="fit got sample_weight: not supported"):
            BNNRegressor(budget=200, **kw).fit(X, y, sample_weight=np.ones(40))
        a = BNNRegressor(budget=200, random_state=np.random.RandomState(0), **kw).fit(X, y)
        b = BNNRegressor(budget=200, random_state=np.random.RandomState(0), **kw).fit(X, y)
        c = BNNRegressor(budget=200, seed=7, random_state=7, **kw).fit(X, y)
        d = BNNRegressor(budget=200, seed=7, **kw).fit(X, y)
    np.testing.assert_array_equal(a.weights_, b.weights_)
    np.testing.assert_array_equal(c.weights_, d.weights_)
    with pytest.raises(ValueError, match="random_state='x': an integer >= 0, a numpy RandomState or Generator"):
        BNNRegressor(budget=200, random_state="x", **kw).fit(X, y)


def test_run_json_prints_one_json_object_on_stdout_and_progress_goes_to_stderr(tmp_path, capsys):
    """`adaptive-hmc run CONFIG --json | jq .`: stdout is the summary as one JSON object (with run_dir), the
    progress lines (without internal indices) on stderr; without --json a short summary on stdout."""
    path = _write(tmp_path, _small(_raw(), n=3))
    assert main(["run", str(path), "--out", str(tmp_path / "j"), "--json"]) == 0
    said = capsys.readouterr()
    summary = json.loads(said.out)
    assert summary["run_dir"] == str(tmp_path / "j") and summary["super_transitions"] == 3
    assert "super-transition 1/3" in said.err and "log i=" not in said.err
    assert main(["run", str(path), "--out", str(tmp_path / "k")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"run directory: {tmp_path / 'k'}" and out[1].startswith("3 super-transitions")
    assert any(line.startswith("test set test_201_400: mse ") for line in out) and len(out) < 12


def test_plain_progress_lines_are_spaced_out():
    """Without a bar, a line for the first super-transition, each tenth of the run, the last and anything
    notable, not one per super-transition."""
    import io
    import contextlib
    from adaptive_hmc.engine.progress import Progress
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        p = Progress(200, 0)
        for i in range(200):
            p.update({"i": i, "step_factor": 0.1, "num_steps": 20, "reward": 1.0, "acceptance": [0.9],
                      "stuck_chains": [] if i != 57 else [0], "divergences": 0, "seconds": 0.01})
    lines = buf.getvalue().splitlines()
    assert 10 <= len(lines) <= 13 and lines[0].startswith("super-transition 1/200")
    assert lines[-1].startswith("super-transition 200/200") and any("STUCK" in line for line in lines)


def test_a_run_to_a_time_limit_says_how_much_is_left():
    from adaptive_hmc.engine.progress import Progress
    line = Progress(None, 0, quiet=True, limit_s=600.0, limit_from=60).timing(1)
    assert line.startswith("elapsed 0 s, at most about 600 s left (time limit 600 s, from super-transition 60 on)")


def test_the_reward_panel_leaves_the_cold_starts_rewards_out_of_its_range():
    """traces.png's reward panel: a cold start's reward (83.5, not told to the tuner) beside told rewards of at
    most 3.7 no longer sets the top of the range."""
    from adaptive_hmc.front.plots import reward_limits
    log = [{"reward": 83.5, "told": None}] + [{"reward": 1.0 + 0.2 * k, "told": 1.0 + 0.2 * k} for k in range(14)]
    lo, hi = reward_limits(log)
    assert hi < 5.0 and lo < 1.4
    assert reward_limits(log[:5]) is None
