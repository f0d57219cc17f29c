"""Rasmussen's (1996) five tasks: encodings, his protocol's partitions, the
benchmark script in its quick form."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from adaptive_hmc.front.cli import main
from adaptive_hmc.data import data_dir, load_split
from adaptive_hmc.tasks import TASKS, TRAIN_CASES
from cli_helpers import load_script

ROOT = Path(__file__).resolve().parents[1]

# (complete cases, binary inputs, real inputs): his Table 1 where we match it, see tasks.ENCODINGS.
SHAPES = {"auto_price": (159, 0, 16), "cpu": (209, 0, 6), "house": (506, 1, 12), "mpg": (392, 3, 6),
          "servo": (167, 10, 2)}


@pytest.mark.parametrize("task", sorted(TASKS))
def test_each_task_is_its_complete_cases_with_binary_and_real_inputs(task):
    X, y = TASKS[task](data_dir(task))
    n, n_bin, n_real = SHAPES[task]
    assert X.shape == (n, n_bin + n_real) and y.shape == (n,)
    assert np.isfinite(X).all() and np.isfinite(y).all()
    binary = [j for j in range(X.shape[1]) if set(np.unique(X[:, j])) <= {0.0, 1.0}]
    assert len(binary) == n_bin
    assert TRAIN_CASES[task] < n < 2 * TRAIN_CASES[task] + 10       # roughly equal halves


def test_known_values_of_the_files():
    X, y = TASKS["auto_price"](data_dir("auto_price"))
    assert y.min() == 5118 and y.max() == 35056 and y.mean() == pytest.approx(11445.7, abs=0.05)  # PROVENANCE.md
    X, y = TASKS["servo"](data_dir("servo"))
    assert np.all(X[:, :5].sum(1) == 1) and np.all(X[:, 5:10].sum(1) == 1)          # one-hot motor, screw
    assert np.mean(np.abs(y - y.mean())) == pytest.approx(1.15, abs=0.005)            # servo.names
    X, y = TASKS["mpg"](data_dir("mpg"))
    assert y.min() == 9.0 and y.max() == 46.6 and np.all(X[:, 6:].sum(1) == 1)
    X, y = TASKS["cpu"](data_dir("cpu"))
    assert y.mean() == pytest.approx(105.6, abs=0.05) and y.std(ddof=1) == pytest.approx(160.8, abs=0.05)


@pytest.mark.parametrize("task", ["cpu", "servo"])
def test_the_partitions_are_disjoint_cover_the_training_half_and_share_the_test_half(task):
    full = load_split(dataset=task, split={"train": TRAIN_CASES[task], "seed": 1996})
    X_full, X_test = full.train[0], full.tests["test"][0]
    for parts in (2, 4, 8):
        sets = [load_split(dataset=task, split={"train": TRAIN_CASES[task], "seed": 1996, "parts": parts,
                                                "part": j}) for j in range(parts)]
        rows = np.concatenate([s.train[0] for s in sets])
        assert len(rows) == len(X_full)
        assert np.array_equal(np.unique(rows, axis=0), np.unique(X_full, axis=0))
        assert all(np.array_equal(s.tests["test"][0], X_test) for s in sets)
        assert {len(s.train[0]) for s in sets} <= {len(X_full) // parts, len(X_full) // parts + 1}


def test_a_task_config_validates_and_its_mistakes_are_named(tmp_path, capsys):
    raw = yaml.safe_load((ROOT / "configs" / "rasmussen1996_hand.yaml").read_text())
    for key, value, message in [
            ("target_columns", [-1], "data.target_columns = [-1]: cpu is read by its own loader"),
            ("split", {"train": 104, "parts": 4, "part": 4}, "data.split.part = 4: 0..3 of parts = 4"),
            ("dataset", "nosuch", "data.file = None: data set 'nosuch' needs the file to read in its folder")]:
        bad = yaml.safe_load(yaml.safe_dump(raw))
        bad["data"][key] = value
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(bad))
        assert main(["validate", str(path)]) == 2
        assert message in capsys.readouterr().err
    for name in ("hand", "bandit"):
        assert main(["validate", str(ROOT / "configs" / f"rasmussen1996_{name}.yaml")]) == 0
        assert "Network 6-13-1 (gaussian, 111 parameters), 1 chain, 104 training cases; test sets: test " \
               "(105 cases)" in capsys.readouterr().err


@pytest.mark.slow
def test_the_benchmark_runs_in_its_quick_form(tmp_path):
    out = tmp_path / "bench"
    r = subprocess.run([sys.executable, str(ROOT / "experiments" / "rasmussen1996.py"), "--quick", "--out",
                        str(out), "--workers", "2"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    methods = ("mc_hand", "mc_bandit", "gp", "ensemble", "linear")
    for task in ("cpu", "servo"):
        for m in methods:
            (n4, mu4, se4), (n1, mu1, se1) = summary["tasks"][task][m]
            assert n4 == TRAIN_CASES[task] // 4 and n1 == TRAIN_CASES[task]
            assert 0 < mu1 < 1.5 and 0 < mu4 < 3 and se4 > 0 and se1 is None
    for m in methods:
        assert all(0 < g < 3 for g in summary["geo"][m])
    # fitting helps: with all training cases every method beats predicting the mean on cpu
    assert all(summary["tasks"]["cpu"][m][1][1] < 0.8 for m in methods)
    assert (out / "rasmussen1996.png").stat().st_size > 10_000
    assert "| MC, bandit-tuned (ours) |" in (out / "rasmussen1996.md").read_text()
    rows = (out / "sweep" / "sweep.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * (4 + 1) * 2 and all(",finished," in r for r in rows[1:])
    chains = summary["chains"]                  # what the chains buy: every run's ESS, stuck and divergent shares
    for m in ("hand", "bandit"):
        assert chains[m]["runs"] == 10 and chains[m]["ess_median"] > 0 and chains[m]["trajectories"] > 0
    assert chains["hand"]["probes"] == 0 and chains["paired"]["runs"] == 10
    assert "## What the chains buy" in (out / "rasmussen1996.md").read_text()


def test_more_run_seeds_name_each_run_by_its_seed_as_the_sweep_does(tmp_path):
    """--seeds 1 2: the sweep grids run.seed, and the runs the report reads are the runs the sweep plans."""
    from adaptive_hmc.front.sweep import prepare
    ras = load_script("experiments", "rasmussen1996")
    for seeds in ((1,), (1, 2)):
        out = tmp_path / f"s{len(seeds)}"
        sweep_file = ras.write_sweep(out, ("cpu",), (8, 1), False, seeds)
        planned = {p.name for p in prepare(sweep_file, out / "sweep", False)[1]}
        read = {d.name for *_, d in ras.run_dirs(out / "sweep", ("cpu",), (8, 1), seeds)}
        assert planned == read and len(read) == 2 * 9 * len(seeds)


def test_an_input_that_never_varies_in_training_maps_to_zero():
    from adaptive_hmc.data import Standardizer
    A = np.array([[1.0, 0.0], [3.0, 0.0]])
    new = np.array([[2.0, 1.0], [5.0, 0.0]])
    assert np.array_equal(Standardizer.fit(A, inputs=True).transform(new), [[0.0, 0.0], [3.0, 0.0]])
    assert np.array_equal(Standardizer.fit(A).transform(new), [[0.0, 1.0], [3.0, 0.0]])     # targets: sd 1
    # servo with 11 training cases: a motor level absent from training says nothing to the network
    X, _ = load_split(dataset="servo", split={"train": 88, "seed": 1996, "parts": 8, "part": 4}).train
    sc = Standardizer.fit(X, inputs=True)
    assert np.isinf(sc.sd).sum() >= 1 and np.all(sc.transform(np.eye(12))[:, np.isinf(sc.sd)] == 0)


@pytest.mark.slow
def test_neal_1992_grid_runs_in_its_quick_form(tmp_path):
    out = tmp_path / "grid"
    r = subprocess.run([sys.executable, str(ROOT / "experiments" / "neal1992_grid.py"), "--quick", "--out", str(out),
                        "--workers", "2"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert len(results) == 2 * 2 * 1 * 2               # schedules x eps0 x nu x seeds
    for v in results.values():
        assert 0 < v["test_error"] and 0 <= v["acceptance"] <= 1 and v["failed"] == (not v["test_error"] <= 0.0075)
    text = (out / "neal1992_grid.md").read_text()
    assert "## annealed: failures out of 2" in text and (out / "neal1992_grid.png").stat().st_size > 5_000
    bandit = json.loads((out / "bandit.json").read_text())
    assert len(bandit) == 4 and all(r["test_error"] > 0 for r in bandit.values())
    assert sorted(len(r["actions"]) for r in bandit.values()) == [2, 2, 6, 6]
    assert all(r["warmup_steps"] > 0 for r in bandit.values() if r["variant"] == "bandit_cooled")
    for r in bandit.values():          # every action inside the box
        assert all(0.25e-4 <= e <= 2e-4 and 100 <= L <= 2000 for e, L in r["actions"])
    assert "## The bandit on the same problem" in text
    metropolis = json.loads((out / "metropolis.json").read_text())
    assert len(metropolis) == 2 * 2 * 1 * 2 and all(0 < r["acceptance"] < 1 for r in metropolis.values())
    assert "## Plain Metropolis (eq 27)" in text


def test_neal_1992_full_runs_in_their_quick_form(tmp_path):
    out = tmp_path / "full"
    r = subprocess.run([sys.executable, str(ROOT / "experiments" / "neal1992_full.py"), "--quick", "--out", str(out),
                        "--workers", "1"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert len(results) == 2
    for v in results.values():
        T = np.array(v["temperature"])
        assert T[:2].mean() > 10 * T[-15:].mean()                # hot start at T0 40, cooled towards 1
        assert len(v["averaged_test_errors"]) == len(v["test_errors"]) == 10
    assert (out / "neal1992_full.png").stat().st_size > 5_000


@pytest.mark.slow
def test_neal_1993_runs_in_their_quick_form(tmp_path):
    out = tmp_path / "n93"
    r = subprocess.run([sys.executable, str(ROOT / "experiments" / "neal1993.py"), "--quick", "--out", str(out),
                        "--workers", "1"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())
    assert set(res) == {"hmc", "sd_0.00012", "sd_0.0003", "bp_no_decay", "bp_decay"}
    assert 0 < res["hmc"]["acceptance"] <= 1 and len(res["hmc"]["scale_factors"][0]) == 3
    bp = res["bp_no_decay"]["train_errors"]
    assert bp[-1] < 0.5 * bp[0]                                  # gradient descent descends
    assert "| HMC, 500 x 1000 leapfrog steps" in (out / "neal1993.md").read_text()


def test_dexter_loads_sparse_and_its_feature_filter_is_a_chi_squared_test():
    from scipy import stats
    from adaptive_hmc.data import data_dir, select_features
    from adaptive_hmc.tasks import load_dexter
    X, y = load_dexter(data_dir("dexter"))
    assert X.shape == (300, 20_000) and X.nnz == 28_218 and y.sum() == 150 and X.max() == 907
    rows = np.arange(0, 300, 2)
    cols = select_features(X[rows], y[rows], 295)
    assert cols.size == 295 and np.all(np.diff(cols) > 0)
    present = X[rows].toarray() > 0

    def chi2(j):                                   # scipy's Pearson statistic of presence x class
        p = present[:, j]
        if p.all() or not p.any():
            return 0.0
        t = [[np.sum(p & (y[rows] == c)) for c in (1, 0)], [np.sum(~p & (y[rows] == c)) for c in (1, 0)]]
        return stats.chi2_contingency(t, correction=False)[0]

    worst_kept = min(chi2(j) for j in cols)
    others = [j for j in np.flatnonzero(present.any(axis=0)) if j not in set(cols)]
    assert len(others) > 1000 and max(chi2(j) for j in others[::5]) <= worst_kept + 1e-9      # the top k
    # power: a feature present exactly in the class-1 cases is chosen first, one absent everywhere never
    Z = X[rows].toarray()
    Z[:, 5] = y[rows] * 3
    Z[:, 7] = 0
    picked = select_features(Z, y[rows], 1)
    assert picked.tolist() == [5] and 7 not in select_features(Z, y[rows], 295)


@pytest.mark.slow
def test_the_dexter_benchmark_and_table_run_in_their_quick_forms(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_dexter.py"), "--quick"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    bench = json.loads(r.stdout.strip().splitlines()[-1])
    assert bench["n_params"] == 6097 and bench["sparse_grad_evals_per_s"] > 0 and bench["dense_grad_evals_per_s"] > 0
    r = subprocess.run([sys.executable, str(ROOT / "experiments" / "dexter_table.py"), "--quick", "--runs",
                        str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((tmp_path / "dexter_table.json").read_text())
    for kind in ("bandit", "human"):
        r1 = res["networks"][kind]["1"]
        assert 0 <= r1["majority"] < 0.4 and 0 <= r1["pooled"] < 0.4 and r1["mlpd"] < 0
    assert all(0 <= v < 0.3 for v in res["baselines"]["1"].values()) and len(res["baselines"]["1"]) == 4
    assert (tmp_path / "dexter_reward_surface.png").stat().st_size > 5_000
    assert "| adaptive HMC (bandit), majority vote | 0.0667 |" in (tmp_path / "dexter_table.md").read_text()
