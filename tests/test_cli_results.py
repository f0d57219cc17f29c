"""Finished runs through the command line (smoke tier): compare, predict, export, the predicting chains'
diagnostics, standardised targets, the own-CSV walkthrough."""
import json
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import yaml

from adaptive_hmc.front.cli import main
from adaptive_hmc.config import read_config
from adaptive_hmc.front.experiment import run_experiment
from adaptive_hmc.rundir.finished_run import read_run
from adaptive_hmc.rundir.results import RunError
from cli_helpers import _raw, _write, _small, _checkpointed, _table_run


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


def test_predictions_from_the_chains_asked_for(tmp_path, capsys):
    """cv.predict_from picks the chains of the summary's test errors, and
    compare --chains recomputes them from any run's per-chain sums."""
    raw = _small(_raw(), n=4)
    raw.pop("chains")
    raw["cv"] = {"folds": 8, "full_chain": True}
    runs = {}
    for chains in ("all", "full"):
        raw["cv"]["predict_from"] = chains
        path = _write(tmp_path, raw, f"{chains}.yaml")
        runs[chains] = tmp_path / chains
        assert main(["run", str(path), "--out", str(runs[chains]), "--quiet"]) == 0
    s = {c: json.loads((d / "summary.json").read_text()) for c, d in runs.items()}
    assert s["all"]["predict_from"] == "all" and s["full"]["predict_from"] == "full"
    assert s["full"]["test_mse"] != s["all"]["test_mse"]          # the same samples, other chains pooled
    from adaptive_hmc.front.reports import compare
    for chains in ("all", "full"):
        row = compare([runs["all"]], chains)[0]
        assert row["chains"] == chains
        for name, v in s[chains]["test_mse"].items():
            assert row["test"][name] == pytest.approx(v, rel=1e-12)
            assert row["test_se"][name] == pytest.approx(s[chains]["test_mse_se"][name], rel=1e-9)
    capsys.readouterr()
    raw["cv"].update(full_chain=False, predict_from="all")
    path = _write(tmp_path, raw, "nofull.yaml")
    assert main(["run", str(path), "--out", str(tmp_path / "nofull"), "--quiet"]) == 0
    assert main(["compare", str(tmp_path / "nofull"), "--chains", "full"]) == 2
    assert "has no full-data chain" in capsys.readouterr().err


def test_predict_from_a_finished_run(tmp_path, capsys):
    from adaptive_hmc.models.mlp import predict as mlp_predict
    from adaptive_hmc.rundir.finished_run import read_run
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
    from adaptive_hmc.rundir.finished_run import read_run
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


def test_readme_walkthrough_own_csv_to_prediction(tmp_path, capsys, monkeypatch):
    """The README's walkthrough with the shipped template (shrunk): a CSV with a
    header, validate, run, predict new inputs with uncertainty."""
    rng = np.random.default_rng(8)
    X = rng.uniform(-2, 2, size=(80, 2))
    price = np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.05 * rng.normal(size=80)
    rows = ["size,age,price"] + [f"{a:.5f},{b:.5f},{p:.5f}" for (a, b), p in zip(X, price)]
    (tmp_path / "my_data.csv").write_text("\n".join(rows) + "\n")
    # the template comes from the installed package: run where the repository is not on the path
    done = subprocess.run([sys.executable, "-m", "adaptive_hmc.front.cli", "init", "regression", "--csv", "my_data.csv",
                           "--out", "my.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    raw = yaml.safe_load((tmp_path / "my.yaml").read_text())
    assert raw["data"]["path"] == "my_data.csv" and raw["data"]["target_columns"] == ["price"]
    assert raw["run"]["until"] == {"max_seconds": 600, "target_ess": 400}        # on until the chains meet
    raw["run"].update(super_transitions=6, budget=600, burn_in={"super_transitions": 2}, thin=5,
                      until={"max_seconds": 2, "target_ess": 400})
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
    (tmp_path / "plain.csv").write_text("0.5,1.0\n-1.0,0.0\n")                # no header: by position, said
    assert main(["predict", "runs/my", "plain.csv", "--out", "pred3.csv"]) == 0
    assert (tmp_path / "pred3.csv").read_text() == (tmp_path / "pred.csv").read_text()
    assert "plain.csv: no header row, so its columns are read by position as the run's inputs size, age" in \
        capsys.readouterr().err
    assert P.shape == (2, 4) and np.all(P[:, 1] > 0) and np.all(P[:, 2] < P[:, 0]) and np.all(P[:, 0] < P[:, 3])
    s = json.loads((tmp_path / "runs" / "my" / "summary.json").read_text())
    assert s["predict_from"] == "full" and set(s["test_mse"]) == {"test"}


def test_diagnostics_are_of_the_predicting_chains_and_cost_every_gradient(tmp_path, capsys):
    """summary.json's diagnostics: R-hat and ESS of the predicting chains' test
    predictions, per 1000 of every gradient the run computed (all chains,
    warm-up and burn-in) and per second of sampling; per-sample draws are the
    kept samples' outputs, each chain cut to the shortest (the export's draws);
    compare shows the smallest and the median."""
    from adaptive_hmc.diagnostics import chain_statistics
    from adaptive_hmc.models.mlp import predict
    from adaptive_hmc.front.reports import compare, table
    from adaptive_hmc.rundir.metrics import MIN_KEPT, prediction_draws
    from adaptive_hmc.rundir.verdicts import thin_limited
    raw = _small(_raw(), n=8)
    raw.pop("chains")
    raw["cv"] = {"folds": 8, "full_chain": False}                     # the thesis's: the replicas predict
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
    mine = (S["chain"] == 3) & (S["diagnostic"] > 0)             # the diagnostic draws among the kept samples
    assert 0 < diag["distinct_draws"] == 8 * mine.sum() < len(S["chain"])       # the ESS is measured on these
    assert thin_limited(diag) == (diag["test"]["test_201_400"]["ess_bulk"]["median"] > 0.5 * diag["distinct_draws"])
    assert thin_limited({"distinct_draws": 100, "test": {"t": {"ess_bulk": {"median": 80.0}}}})
    F = predict(run.spec, S["weights"][mine], run.predictions["X_test"])
    # per-sample draws: the diagnostic draws' network outputs in order, each chain cut to the shortest
    assert y.shape[1] == mine.sum()
    assert np.array_equal(y[3], F.reshape(-1, 800))                                   # (draws, cases x outputs)
    st = chain_statistics(y[:, :, :400])                           # test_201_400: the first 200 cases
    assert run.summary["diagnostics"]["test"]["test_201_400"]["rhat_max"] == pytest.approx(st["rhat"].max())
    a = read_run(tmp_path / "a")          # thin 5 keeps 4 of a super-transition's 20 iterations; 16 are kept
    assert a.summary["diagnostics"]["draws"] == "samples" and np.bincount(a.samples["chain"]).min() >= 16 * 4
    text = table(rows)
    regression, classification, notes = text.split("\n\n")
    assert "test MSE (original units) robot_arm/test_201_400" in regression and "error rate" not in regression
    assert "test error rate d/rest" in classification
    assert "the runs differ in data" in notes and "the runs differ in chains" in notes   # robot arm and a table
    assert "R-hat max of the predictions robot_arm/test_201_400" in regression
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "b"), "--chains", "replicas"]) == 2     # one posterior: no replicas
    assert "has no cross-validation replicas (its chains are all on the full training data" in capsys.readouterr().err


def test_standardized_targets_are_sampled_in_units_of_their_sd_and_reported_in_their_own(tmp_path):
    """Targets in the thousands: with data.standardize_targets the chains see
    them scaled to sd 1 (under priors set for that scale) and every prediction
    comes back in the original units: the model average in predictions.npz,
    the summary's test MSE, Run.predict from the kept samples (thin 1: the same
    samples, so equal to rounding), and the exported posterior predictive."""
    import arviz as az
    from adaptive_hmc.models.predictive import squared_errors
    from adaptive_hmc.rundir.finished_run import read_run
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


def test_ess_of_draws_that_never_change_is_zero():
    import arviz as az
    from adaptive_hmc.diagnostics import draws_ess
    rng = np.random.default_rng(0)
    y = np.stack([np.full(200, 0.3), rng.normal(size=200)], axis=1)[None]
    raw = np.nan_to_num(az.ess(az.convert_to_dataset(y))["x"].values)
    ess = draws_ess(y)
    assert ess[0] == 0.0 and ess[1] == pytest.approx(raw[1]) and ess[1] > 100


def test_one_chain_has_the_r_hat_of_its_halves():
    """ArviZ computes no R-hat for one chain (a run of Rasmussen's one chain
    warned that its chains had not met on every run): its halves count as two
    chains. iid draws pass; a shift between the halves, or a stuck draw, fails."""
    import arviz as az
    from adaptive_hmc.diagnostics import RHAT_LIMIT, chain_statistics
    y = np.random.default_rng(0).normal(size=(1, 2000, 3))
    y[0, 1000:, 1] += 0.3
    y[0, :, 2] = 0.3
    r = chain_statistics(y)["rhat"]
    assert r[0] < RHAT_LIMIT < r[1] and r[2] == np.inf
    both = az.rhat(az.convert_to_dataset(y[0].reshape(2, 1000, 3)), method="rank")["x"].values
    assert r[:2] == pytest.approx(both[:2])


def test_vectorised_r_hat_and_ess_are_arviz_figures():
    """chain_statistics computes all variables at once (blocks of CHUNK,
    threads); each figure is ArviZ's, per variable, to 1e-9: chains 1-5,
    draws 4-60 (odd counts, fewer than Geyer's pairs need), iid, random
    walks (long autocorrelation), ties, chains at different levels; more
    variables than one block."""
    import warnings
    import arviz as az
    from adaptive_hmc import diagnostics
    rng = np.random.default_rng(1)

    def arviz_figures(y):
        halves = y[:, : y.shape[1] // 2 * 2].reshape(2, y.shape[1] // 2, -1) if y.shape[0] == 1 else y
        ds = az.convert_to_dataset(y)
        out = {"rhat": az.rhat(az.convert_to_dataset(halves), method="rank")["x"].values,
               "ess_bulk": az.ess(ds, method="bulk")["x"].values, "ess_tail": az.ess(ds, method="tail")["x"].values}
        return {k: np.nan_to_num(v, nan=np.inf if k == "rhat" else 0.0) for k, v in out.items()}
    for trial in range(120):
        c, n, v = int(rng.integers(1, 6)), int(rng.integers(4, 60)), int(rng.integers(1, 4))
        y = rng.normal(size=(c, n, v))
        y = [y, y.cumsum(1) * rng.uniform(0.01, 2), np.round(y.cumsum(1)), y + 3 * rng.normal(size=(c, 1, v))][trial % 4]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = arviz_figures(y)
        got = diagnostics.chain_statistics(y)
        for k in want:
            assert got[k] == pytest.approx(want[k], rel=1e-9, abs=1e-9), (trial, k)
    y = rng.normal(size=(3, 40, diagnostics.CHUNK + 5)).cumsum(1)
    got = diagnostics.chain_statistics(y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = arviz_figures(y[:, :, -7:])
    assert got["ess_bulk"][-7:] == pytest.approx(want["ess_bulk"], rel=1e-9)
    assert got["rhat"][-7:] == pytest.approx(want["rhat"], rel=1e-9)


def test_the_end_of_run_warning_names_chains_that_have_not_met():
    from adaptive_hmc.rundir.verdicts import rhat_warning
    assert rhat_warning({"chains": "full", "rhat_max": 1.004}) is None
    assert "is 1.050, above 1.01" in rhat_warning({"chains": "full", "rhat_max": 1.05})
    assert "not finite (a chain never moved)" in rhat_warning({"chains": "full", "rhat_max": None})
    assert rhat_warning({}) is None
    one = {"chains": "full", "rhat_max": 1.05, "test": {"test": {"chains": 1}}}
    assert "between the halves of the one 'full' chain is 1.050" in rhat_warning(one)
    assert rhat_warning({**one, "rhat_max": 1.003}) is None


def test_the_warning_says_how_much_longer_to_run_and_how():
    """The slowest quantity's bulk ESS sets the estimate: 400 / ESS times the
    draws after the burn-in, and ``longer`` says how (the CLI's --extend N, of
    super-transitions past the burn-in); a run already on the interweaving
    moves is not told to use them; chains still climbing get no estimate."""
    from adaptive_hmc.diagnostics import ENOUGH_ESS, more_super_transitions
    from adaptive_hmc.rundir.verdicts import rhat_warning
    d = {"chains": "full", "rhat_max": 1.078,
         "test": {"t": {"chains": 8, "rhat_max": 1.006, "ess_bulk": {"min": 1927.0, "median": 2500.0}}},
         "hyper": {"chains": 8, "rhat_max": 1.078, "ess_bulk": {"min": 80.0, "median": 364.0}, "apart": None}}
    w = rhat_warning(d, "interweave", lambda f: f"--extend {more_super_transitions(f, 250, 50)}")
    assert ENOUGH_ESS == 400
    assert "the smallest bulk ESS, of the log hyperparameters, is 80; at this pace about 5.0 times the draws" in w
    assert "(--extend 800)" in w and "hyper_moves" not in w
    assert "hyper_moves: interweave mixes them faster than gibbs" in rhat_warning(d, "gibbs")
    assert more_super_transitions(1.001, 10, 9) == 1
    assert more_super_transitions(2.0, 100, lambda n: n // 2) == 99    # burn-in half the run: 199 - 99 kept
    d["hyper"]["apart"] = {"name": "a", "drifting": True, "first": [0.0], "last": [1.0], "sd": 0.1}
    assert "at this pace" not in rhat_warning(d, "interweave") and "still on their way" in rhat_warning(d)


def test_the_warning_says_whether_the_chains_still_drift_or_sit_apart():
    """chains_apart tells chains still climbing (every chain's mean moved the
    same way by more than half a within-chain sd between the first and last
    third of its draws; fair's log input-hidden precision) from steady chains
    that sit apart (separated modes), names the quantity, and stays quiet on
    neither (chains that agree: no drift); the end-of-run warning says which."""
    from adaptive_hmc.diagnostics import DRIFT_SDS, chains_apart
    from adaptive_hmc.rundir.verdicts import rhat_warning
    rng = np.random.default_rng(3)
    noise = rng.normal(size=(4, 300, 3))
    steady = noise.copy()
    steady[:, :, 2] += np.array([0.0, 2.0, 4.0, 6.0])[:, None]    # four steady chains at different levels
    found = chains_apart(steady, ["a", "b", "c"])
    assert found["name"] == "c" and not found["drifting"] and found["sd"] == pytest.approx(1.0, abs=0.1)
    climbing = noise.copy()
    climbing[:, :, 1] += np.linspace(0.0, -3.0, 300)[None, :]      # every chain descending: 3 sds over the run
    found = chains_apart(climbing, ["a", "b", "c"])
    assert found["name"] == "b" and found["drifting"]
    assert all(f > l for f, l in zip(found["first"], found["last"]))
    agree = chains_apart(noise, ["a", "b", "c"])
    assert not agree["drifting"]                                   # power: pure noise is not called a drift
    assert DRIFT_SDS == 0.5
    d = {"chains": "full", "rhat_max": 2.8, "hyper": {"rhat_max": 2.8, "apart": chains_apart(climbing, ["a", "b",
                                                                                                       "c"])}}
    assert "The chains are still on their way: the log b moved the same way in every chain" in rhat_warning(d)
    d["hyper"]["apart"] = chains_apart(steady, ["a", "b", "c"])
    assert "No quantity drifts the same way in every chain, but the chains sit apart: the log c's chain means are" \
        in rhat_warning(d)


def test_text_labels_are_classes_through_init_validate_run_and_predict(tmp_path, capsys):
    """A table labelled 'yes'/'no' (as the estimators accept): init picks the
    logistic likelihood, validate and run accept it, classes are the sorted
    labels (no = 0, yes = 1, as scikit-learn's), predict names the probability
    columns after them and writes the labels; three text classes with the
    logistic are refused naming them. Numeric labels are unchanged."""
    from adaptive_hmc.tables import read_table
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, size=(60, 3)) * [1, 10, 100]
    f = np.sin(X[:, 0]) + X[:, 1] / 10
    words = np.where(f > 0, "yes", "no")
    rows = ["a,b,c,answer"] + [f"{u:.5f},{v:.5f},{w:.5f},{lab}" for (u, v, w), lab in zip(X, words)]
    (tmp_path / "d.csv").write_text("\n".join(rows) + "\n")
    t = read_table(tmp_path / "d.csv", ["answer"], "data.path", "d.csv", labels=True)
    Y, classes = t.Y, t.classes
    assert classes == ("no", "yes") and np.array_equal(Y[:, 0], (f > 0).astype(float))
    with pytest.raises(Exception, match=r"not a numeric table: row 1, column 3 is '(yes|no)'"):
        read_table(tmp_path / "d.csv", ["answer"], "data.path", "d.csv")         # regression: text is an error
    assert main(["init", "classification", "--csv", str(tmp_path / "d.csv"), "--out", str(tmp_path / "t.yaml")]) == 0
    assert yaml.safe_load((tmp_path / "t.yaml").read_text())["model"]["likelihood"] == "logistic"
    assert main(["validate", str(tmp_path / "t.yaml"), "--no-estimate"]) == 0
    raw = _small(_raw(), n=4)
    raw["data"] = {"path": str(tmp_path / "d.csv"), "target_columns": ["answer"], "train_rows": [1, 45],
                   "test_sets": {"rest": [46, 60]}, "standardize_inputs": True, "standardize_targets": False}
    raw["model"]["likelihood"] = "logistic"
    raw["model"]["priors"].pop("noise")
    raw["chains"] = 3
    raw["tuner"]["cv_metric"] = "log_loss"
    assert main(["run", str(_write(tmp_path, raw, "r.yaml")), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    (tmp_path / "new.csv").write_text("a,b,c\n" + "".join(f"{u},{v},{w}\n" for u, v, w in X[:20]))
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "r"), str(tmp_path / "new.csv")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "p_answer_no,p_answer_yes,answer" and len(lines) == 21
    cells = [ln.split(",") for ln in lines[1:]]
    assert all(c[2] == ("yes" if float(c[1]) > float(c[0]) else "no") for c in cells)
    assert np.mean([c[2] == w for c, w in zip(cells, words[:20])]) >= 0.75     # it learnt something
    three = np.where(X[:, 2] > 50, "maybe", words)
    (tmp_path / "d.csv").write_text("\n".join(["a,b,c,answer"] + [f"{u},{v},{w},{lab}" for (u, v, w), lab in
                                                                   zip(X, three)]) + "\n")
    assert main(["validate", str(_write(tmp_path, raw, "r3.yaml")), "--no-estimate"]) == 2
    assert "needs two classes; the labels are 'maybe', 'no', 'yes' (3 classes: use softmax)" in capsys.readouterr().err


def test_kfold_elpd_is_exact_from_fold_chains_and_loo_says_when_it_is_unusable(tmp_path, capsys):
    """export --kfold K of a run of one posterior's chains runs K chains of
    the fold posteriors into DIR/kfold-K (as long as the run) and gives K-fold
    elpd: per case, the log weighted mean over its fold chain's kept draws of
    p(y | draw), checked here against a plain NumPy computation from the fold
    run's samples; a second call reuses the fold run. PSIS-LOO is printed
    with its Pareto k verdict. A run with its own CV replicas uses them."""
    from adaptive_hmc.front.elpd import kfold_elpd
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, size=(60, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] + 0.1 * rng.normal(size=60)
    np.savetxt(tmp_path / "d.csv", np.column_stack([X, y]), delimiter=",")
    raw = _small(_raw(), n=5)
    raw["data"] = {"path": str(tmp_path / "d.csv"), "target_columns": [-1], "train_rows": [1, 45],
                   "test_sets": {"rest": [46, 60]}, "standardize_inputs": True}
    raw["chains"] = 2
    raw["run"]["thin"] = 2
    raw["tuner"]["reward"] = "esjd"
    assert main(["run", str(_write(tmp_path, raw, "f.yaml")), "--out", str(tmp_path / "f"), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["export", str(tmp_path / "f"), "--kfold", "3", "--quiet"]) == 0
    said = capsys.readouterr().out
    assert re.search(r"K-fold elpd \(3 folds, exact; 3 fold chains in .*kfold-3\): -?\d+\.\d\d ± \d+\.\d\d over 45 "
                     r"training cases", said), said
    assert re.search(r"PSIS-LOO elpd -?\d+\.\d\d ± \d+\.\d\d over 45 training cases; (every Pareto k <= 0.7: usable|"
                     r"NOT usable: Pareto k > 0.7 for \d+ of 45 cases)", said), said
    assert "held-out test set rest: mean log predictive density" in said
    result = json.loads((tmp_path / "f" / "elpd.json").read_text())
    folds = read_run(tmp_path / "f" / "kfold-3")
    assert folds.summary["super_transitions"] == 5 and folds.n_cv == 3
    fold_of = folds.predictions["fold_of_case"]
    assert sorted(np.bincount(fold_of)) == [15, 15, 15]
    s, P = folds.samples, folds.predictions
    expected = np.empty(45)
    for j in range(3):                                   # plain NumPy: outputs, Gaussian densities, weighted mean
        keep, cases = s["chain"] == j, fold_of == j
        post = folds.posterior(keep=keep)
        F, tau = post.outputs_at(P["X_train"][cases])
        dens = np.sqrt(tau[:, None, 0] / (2 * np.pi)) * np.exp(-0.5 * tau[:, None, 0] * (P["Y_train"][cases, 0] -
                                                                                          F[:, :, 0]) ** 2)
        w = s["weight"][keep]
        expected[cases] = np.log(w @ dens / w.sum())
    np.testing.assert_allclose(result["kfold"]["pointwise"], expected, rtol=1e-10)
    assert result["kfold"]["elpd"] == pytest.approx(expected.sum())
    assert abs(result["kfold"]["mean_per_case"] - result["test"]["rest"]["mean_log_predictive_density"]) < 1.0
    mtime = (tmp_path / "f" / "kfold-3" / "summary.json").stat().st_mtime
    assert main(["export", str(tmp_path / "f"), "--kfold", "3", "--quiet"]) == 0      # the fold run is reused
    assert (tmp_path / "f" / "kfold-3" / "summary.json").stat().st_mtime == mtime
    # extended since: the fold chains are run again as long as the run (they went stale before)
    assert main(["run", str(tmp_path / "f.yaml"), "--out", str(tmp_path / "f"), "--extend", "2", "--quiet"]) == 0
    assert main(["export", str(tmp_path / "f"), "--kfold", "3", "--quiet"]) == 0
    assert read_run(tmp_path / "f" / "kfold-3").summary["super_transitions"] == 7
    capsys.readouterr()
    nc = tmp_path / "f" / "inference_data.nc"
    nc.unlink()
    assert main(["export", str(tmp_path / "f"), "--kfold", "46"]) == 2             # refused before any writing
    assert "--kfold 46: the run has 45 training cases, so at most --kfold 45 folds" in capsys.readouterr().err
    (tmp_path / "f" / "kfold-4").write_text("a file")
    assert main(["export", str(tmp_path / "f"), "--kfold", "4"]) == 2
    assert "kfold-4 is a file, where the fold chains' run folder goes" in capsys.readouterr().err
    assert not nc.exists()
    assert main(["export", str(tmp_path / "f"), "--kfold", "1"]) == 2
    assert "--kfold 1: the number of folds, an integer >= 2" in capsys.readouterr().err
    raw.pop("chains")
    raw["cv"] = {"folds": 3, "full_chain": True}                                          # its own CV replicas
    raw["tuner"]["reward"] = "cv"
    assert main(["run", str(_write(tmp_path, raw, "c.yaml")), "--out", str(tmp_path / "c"), "--quiet"]) == 0
    own = kfold_elpd(read_run(tmp_path / "c"))
    assert own["k"] == 3 and np.isfinite(own["elpd"]) and len(own["draws_per_fold"]) == 3
    assert main(["export", str(tmp_path / "c"), "--kfold", "4"]) == 2
    assert "has 3 cross-validation replicas of its own; use --kfold 3" in capsys.readouterr().err


def test_compare_export_and_plot_take_density_runs_beside_network_runs(tmp_path, capsys):
    """A run of a user's density (eight schools, short) and a network run:
    compare tables both (the density run's R-hat over every parameter, ESS
    per second and per 1000 gradients, divergences, E-BFMI), export writes
    the density run's InferenceData as inference_data.nc, plot draws its
    tuner and chains, and --kfold says a density has no cases to leave out;
    read_run reads both, each saying whether it has a network."""
    import shutil
    from pathlib import Path
    configs = Path(__file__).resolve().parents[1] / "configs"
    shutil.copy(configs / "eight_schools.py", tmp_path / "eight_schools.py")
    raw = yaml.safe_load((configs / "eight_schools_density.yaml").read_text())
    raw["sampler"] = {"warmup": 150}
    raw["run"].update(super_transitions=4)
    (tmp_path / "es.yaml").write_text(yaml.safe_dump(raw))
    assert main(["run", str(tmp_path / "es.yaml"), "--out", str(tmp_path / "es"), "--quiet"]) == 0
    net, _, _ = _table_run(tmp_path, name="net")
    capsys.readouterr()
    assert main(["compare", str(net), str(tmp_path / "es"), "--markdown", str(tmp_path / "t.md")]) == 0
    out = capsys.readouterr().out
    assert f"A: {net}" in out and re.search(rf"{re.escape(str(tmp_path / 'es'))}\s+\(a\s+density\s+run\):\s+chains", out)
    md = (tmp_path / "t.md").read_text()
    assert md.startswith("| run | tuner | chains | test MSE")                      # the network run's table
    summary = json.loads((tmp_path / "es" / "summary.json").read_text())
    assert "| run | chains | draws per chain | R-hat max, every parameter | ESS min |" in md
    assert f"| {summary['rhat_max']:.3f} | {summary['ess_bulk_min']:.0f} |" in md
    assert main(["export", str(tmp_path / "es")]) == 0
    import arviz as az
    idata = az.from_netcdf(str(tmp_path / "es" / "inference_data.nc"))
    assert set(idata.posterior.data_vars) == {"mu", "tau", "theta"} and "energy" in idata.sample_stats
    assert main(["plot", str(tmp_path / "es")]) == 0
    png = tmp_path / "es" / "plots" / "traces.png"
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 10_000
    assert main(["export", str(tmp_path / "es"), "--kfold", "3"]) == 2
    assert "is a run of a density, which has no cases to leave out" in capsys.readouterr().err
    density, network = read_run(tmp_path / "es"), read_run(net)
    assert (density.network, network.network) == (False, True)
    assert density.summary == summary and len(density.log) == 4 and density.config.model.kind == "density"
    assert density.inference_data().posterior.sizes["draw"] == summary["draws"]
    assert network.with_network("predictions") is network
    with pytest.raises(RunError, match="has no network and so no predictions"):
        density.with_network("predictions")


def test_each_chains_own_rhat_says_why_one_is_not_finite():
    """A chain's own split R-hat is infinite where one of its values never changed: the words say so."""
    from adaptive_hmc.rundir.verdicts import own_rhats
    assert own_rhats({"within_chain": {"predictions": [1.002, 1.004], "hyper": [None, 1.03]}}) == (
        "predictions 1.002, 1.004; log hyperparameters not finite (a value the chain never changed), 1.030")
