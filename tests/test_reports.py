"""Reports of finished runs. The ArviZ export means what ArviZ says: its log
likelihood is the training cases', so ``az.loo`` estimates leave-one-out,
checked against brute force. ``compare`` answers: a verdict per pair from the
paired differences over the common test cases, warnings when runs are not like
for like, units in every header, a narrow terminal layout."""
import json
import warnings

import numpy as np
import pytest
import yaml

from adaptive_hmc.front.cli import main

N = 12          # training cases of the tiny problem


def _config(tmp_path, name, train_rows, test_sets=None, super_transitions=60):
    """A 1-3-1 network with fixed hyperparameters (the LOO posteriors differ
    only by the case left out), four chains of one posterior, a fixed (eps, L)."""
    fixed = {"sd": 1.0, "shape": float("inf")}
    raw = {"name": name,
           "data": {"path": "d.csv", "target_columns": ["y"], "train_rows": train_rows, "test_sets": test_sets or {},
                    "standardize_inputs": False, "standardize_targets": False},
           "model": {"hidden": [3], "likelihood": "gaussian",
                     "priors": {"input_hidden": fixed, "hidden_bias": fixed, "hidden_output": fixed,
                                "output_bias": fixed, "noise": {"sd": 0.3, "shape": float("inf")}}},
           "sampler": {"window": 1, "initial_phase_steps": 0},
           "chains": 4,
           "tuner": {"kind": "fixed", "step_factor": 0.3, "num_steps": 20},
           "run": {"budget": 400, "super_transitions": super_transitions, "burn_in": {"super_transitions": 5},
                   "thin": 1, "seed": 3}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _data(tmp_path):
    rng = np.random.default_rng(5)
    x = np.sort(rng.uniform(-2, 2, N))
    y = np.sin(1.5 * x) + 0.3 * rng.normal(size=N)
    y[-1] += 1.2                                  # one case the others explain poorly: LOO costs there
    (tmp_path / "d.csv").write_text("x,y\n" + "".join(f"{a:.17g},{b:.17g}\n" for a, b in zip(x, y)))


def _run(tmp_path, cfg):
    out = tmp_path / cfg.stem
    assert main(["run", str(cfg), "--out", str(out), "--quiet"]) == 0
    return out


def test_az_loo_of_the_export_agrees_with_brute_force_leave_one_out(tmp_path, capsys):
    """A run without a test set exports; ``az.loo`` on its log likelihood
    (Pareto-smoothed importance sampling over the training cases) agrees with
    the sum over cases of the log predictive density of case i under runs on
    the other N-1 cases (each run's own test_mlpd machinery, the case as its
    test set), within a tolerance far below p_loo, the gap between in-sample
    and leave-one-out fit: a log likelihood of other cases (or of the
    in-sample fit) fails it."""
    import arviz as az
    _data(tmp_path)
    out = _run(tmp_path, _config(tmp_path, "all", [1, N]))
    capsys.readouterr()
    assert main(["export", str(out)]) == 0
    idata = az.from_netcdf(str(out / "inference_data.nc"))
    assert idata.log_likelihood["y"].shape[2] == N and "predictions" not in idata.groups()
    assert list(idata.posterior.chain.values) == ["full 0", "full 1", "full 2", "full 3"]
    assert idata.observed_data["y"].shape == (N, 1) and idata.posterior_predictive["y"].shape[2:] == (N, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo = az.loo(idata, pointwise=True)
    assert (loo.pareto_k.values < 0.7).all()
    brute = []
    for i in range(1, N + 1):
        rows = [r for r in range(1, N + 1) if r != i]
        held = _run(tmp_path, _config(tmp_path, f"loo{i}", {"rows": rows}, {"held": {"rows": [i]}}))
        with np.load(held / "predictions.npz") as z:
            brute.append(float(z["held/lpd"][0]))
    brute = np.array(brute)
    ll = idata.log_likelihood["y"].values.reshape(-1, N)
    lppd = np.log(np.exp(ll).mean(axis=0))                        # in-sample: every case seen
    pointwise = loo.loo_i.values
    p_loo = float(np.sum(lppd - brute))
    print(f"elpd_loo {float(loo.elpd_loo):.3f} brute force {brute.sum():.3f} p_loo {p_loo:.3f}")
    assert p_loo > 1.0                                               # the test can tell LOO from in-sample
    assert abs(float(loo.elpd_loo) - brute.sum()) < 0.1 * p_loo, (loo.elpd_loo, brute.sum(), p_loo)
    assert np.abs(pointwise - brute).max() < 0.5 * np.abs(lppd - brute).max()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["test_mse"] == {}


def test_fold_chains_are_exported_as_what_they_are(tmp_path, capsys):
    """A folds run without a full-data chain exports its fold chains named as
    such, says they are different posteriors, and writes no log likelihood;
    with a full-data chain only that chain is the posterior."""
    import arviz as az
    _data(tmp_path)
    cfg = _config(tmp_path, "folds", [1, 9], {"rest": [10, N]}, super_transitions=12)
    raw = yaml.safe_load(cfg.read_text())
    del raw["chains"]
    raw["cv"] = {"folds": 3, "full_chain": False, "predict_from": "replicas"}
    cfg.write_text(yaml.safe_dump(raw))
    out = _run(tmp_path, cfg)
    assert main(["export", str(out)]) == 0
    idata = az.from_netcdf(str(out / "inference_data.nc"))
    assert list(idata.posterior.chain.values) == ["fold 0", "fold 1", "fold 2"]
    assert "log_likelihood" not in idata.groups() and "different posteriors" in idata.attrs["chains"]
    assert idata.predictions["y_hat"].shape[2:] == (3, 1)
    assert idata.predictions_constant_data["y_test"].shape == (3, 1)
    raw["cv"].update(full_chain=True, predict_from="full")
    cfg.write_text(yaml.safe_dump(raw))
    out = tmp_path / "with_full"
    assert main(["run", str(cfg), "--out", str(out), "--quiet"]) == 0
    assert main(["export", str(out)]) == 0
    idata = az.from_netcdf(str(out / "inference_data.nc"))
    assert list(idata.posterior.chain.values) == ["full 0"] and idata.log_likelihood["y"].shape[2] == 9
    capsys.readouterr()


def test_the_running_error_plot_follows_the_prediction_setting(tmp_path):
    """running_error.png's curve ends at the summary's test error (the
    predicting chains', here the full-data chain's, not every chain's pooled),
    and its axis counts the gradients the run computed."""
    from adaptive_hmc.front.plots import running_errors
    from adaptive_hmc.front.reports import model_average_errors
    from adaptive_hmc.rundir.finished_run import read_run
    _data(tmp_path)
    cfg = _config(tmp_path, "f", [1, 9], {"rest": [10, N]}, super_transitions=12)
    raw = yaml.safe_load(cfg.read_text())
    del raw["chains"]
    raw["cv"] = {"folds": 3, "full_chain": True, "predict_from": "full"}
    cfg.write_text(yaml.safe_dump(raw))
    run = read_run(_run(tmp_path, cfg))
    grads, errors = running_errors(run)
    assert errors["rest"][-1] == pytest.approx(run.summary["test_mse"]["rest"], rel=1e-9)
    assert abs(model_average_errors(run, "all")[0]["rest"] - errors["rest"][-1]) > 1e-6     # pooling would differ
    assert grads[-1] == sum(e["gradients"] for e in run.log) and np.all(np.diff(grads) > 0)
    assert main(["plot", str(run.dir)]) == 0 and (run.dir / "plots" / "running_error.png").is_file()


@pytest.mark.parametrize("likelihood", ["logistic", "softmax"])
def test_classification_log_likelihood_is_the_label_log_probability(likelihood):
    """The exported log likelihood of a labelled case is the log probability
    of its label (scipy's log_expit / log_softmax) to 1e-12, for large logits too,
    where log(1 - p) of a rounded probability is not."""
    from scipy.special import log_expit, log_softmax
    from adaptive_hmc.models.predictive import pointwise_log_likelihood
    rng = np.random.default_rng(0)
    K = 2 if likelihood == "logistic" else 3
    F = rng.normal(scale=30, size=(5, 7, 1 if likelihood == "logistic" else K))
    label = rng.integers(0, K, size=7)
    ll = pointwise_log_likelihood(F, None, label[:, None].astype(float), likelihood)
    if likelihood == "logistic":
        expected = np.where(label == 1, log_expit(F[..., 0]), log_expit(-F[..., 0]))
    else:
        expected = log_softmax(F, axis=-1)[:, np.arange(7), label]
    np.testing.assert_allclose(ll, expected, rtol=1e-12, atol=1e-12)
    assert ll.min() < -30                           # the test reaches the tails


def _rows(errors_a, errors_b, ess=(0.5, 0.1)):
    """Two compare rows on one test set of the same cases, with these per-case errors."""
    def row(run, e, per_1000):
        t = {"rhat_max": 1.001, "ess_per_1000_gradients": {"min": per_1000, "median": per_1000},
             "ess_per_second": {"min": 10 * per_1000, "median": 10 * per_1000}}
        return {"run": run, "data": "d", "metric": "MSE", "stuck": 0, "errors": {"t": e}, "targets": {"t": np.zeros(len(e))},
                "test": {"t": float(e.mean())}, "test_se": {"t": float(e.std(ddof=1) / np.sqrt(len(e)))},
                "diagnostics": {"test": {"t": t}}, "setup": {k: "same" for k in ("data", "model", "priors",
                                                                                  "chains", "length")}}
    return [row("a", errors_a, ess[0]), row("b", errors_b, ess[1])]


def test_the_verdict_is_of_the_paired_difference_over_the_common_cases():
    """Two runs whose per-case errors move together: each run's own standard
    error is far larger than the difference, the paired one is not, so the
    verdict names the better run; shuffled (unpaired) the same errors are
    indistinguishable. Costs are per effective sample, with the ratio."""
    from adaptive_hmc.front.reports import verdicts
    rng = np.random.default_rng(1)
    hard = rng.exponential(1.0, 400)                     # cases differ a lot in difficulty
    a = hard + 0.01 * rng.normal(size=400)
    b = hard + 0.02 + 0.01 * rng.normal(size=400)        # b worse by 0.02 on every case
    rows = _rows(a, b)
    assert rows[0]["test_se"]["t"] > 2 * (b.mean() - a.mean())      # per-run SEs cannot tell them apart
    (v,) = verdicts(rows)
    d = b - a
    assert f"B - A = {d.mean():+.3g} ± {d.std(ddof=1) / 20:.2g} (paired SE): A is better" in v
    assert "A 2,000 gradients, 0.2 s; B 10,000 gradients (5x), 1 s (5x)" in v and "Caution" not in v
    rows[1]["stuck"] = 3
    rows[1]["diagnostics"]["test"]["t"]["rhat_max"] = 1.2
    (v,) = verdicts(rows)                                # a better error from chains that have not met is flagged
    assert v.endswith("Caution, B: its chains have not met (R-hat of the t predictions 1.2); 3 super-transitions "
                      "had a chain that accepted nothing.")
    (v,) = verdicts(_rows(a, rng.permutation(b)))
    assert "indistinguishable" in v
    rows = _rows(a, b)
    rows[1]["targets"]["t"] = np.ones(400)               # other cases: no verdict
    assert verdicts(rows) == []


def test_compare_warns_when_runs_are_not_like_for_like_and_names_units(tmp_path, capsys):
    """Runs that differ in chains and run length are flagged; the terminal
    form is narrow and every figure says its units; the markdown table's
    headers too; the verdict's difference is that of the stored predictions."""
    from adaptive_hmc.front.reports import TERMINAL_WIDTH
    _data(tmp_path)
    a = _run(tmp_path, _config(tmp_path, "a", [1, 9], {"rest": [10, N]}, super_transitions=12))
    cfg = _config(tmp_path, "b", [1, 9], {"rest": [10, N]}, super_transitions=16)
    raw = yaml.safe_load(cfg.read_text())
    raw["chains"] = 2
    cfg.write_text(yaml.safe_dump(raw))
    b = _run(tmp_path, cfg)
    capsys.readouterr()
    md = tmp_path / "t.md"
    assert main(["compare", str(a), str(b), "--markdown", str(md)]) == 0
    text = capsys.readouterr().out
    for line in text.splitlines():                       # a run's path is never broken across lines
        assert len(line) <= TERMINAL_WIDTH or line.strip() in (f"run directory: {a}", f"run directory: {b}",
                                                               f"markdown table: {md}"), line
    assert "warning: the runs differ in chains (A: 4 chains of one posterior" in text
    assert "B: 2 chains of one posterior" in text and "warning: the runs differ in length" in text
    assert "warning: the runs differ in model" not in text
    assert "test MSE (original units) d/rest:" in text
    errors = []
    for d in (a, b):
        with np.load(d / "predictions.npz") as z:
            errors.append(((z["rest/mean"] - z["Y_test"]) ** 2).sum(axis=1))
    diff = errors[1] - errors[0]
    assert f"B - A = {diff.mean():+.3g} ± {diff.std(ddof=1) / np.sqrt(3):.2g} (paired SE)" in " ".join(text.split())
    table = md.read_text()
    assert "| test MSE (original units) d/rest ± se |" in table and "| CV MSE (original units) |" in table
    assert "- warning: the runs differ in chains" in table


def test_calibration_bins_and_the_predictive_check_plot(tmp_path):
    """calibration_bins: each bin's mean confidence and accuracy and the expected calibration error, against a
    hand count (a perfectly calibrated table has error 0, an overconfident one its gap); the regression run's
    predictive_check.png is written beside running_error.png."""
    from adaptive_hmc.front.plots import calibration_bins
    P = np.array([[0.95, 0.05], [0.9, 0.1], [0.35, 0.65], [0.3, 0.7], [0.62, 0.38], [0.55, 0.45]])
    y = np.array([0, 1, 1, 0, 0, 0])
    c, a, n, ece = calibration_bins(P, y)
    assert np.allclose(c, [0.55, 0.635, 0.7, 0.925]) and np.allclose(a, [1, 1, 0, 0.5]) and list(n) == [1, 2, 1, 2]
    assert ece == pytest.approx((0.45 + 2 * 0.365 + 0.7 + 2 * 0.425) / 6)
    sure = np.tile([[0.9, 0.1]], (10, 1))
    assert calibration_bins(sure, np.array([0] * 9 + [1]))[3] == pytest.approx(0.0)
    assert calibration_bins(sure, np.array([0] * 5 + [1] * 5))[3] == pytest.approx(0.4)
    _data(tmp_path)
    run = _run(tmp_path, _config(tmp_path, "p", [1, 9], {"rest": [10, N]}, super_transitions=8))
    assert main(["plot", str(run)]) == 0
    png = run / "plots" / "predictive_check.png"
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 10_000


@pytest.mark.parametrize("likelihood", ["gaussian", "logistic"])
def test_one_r_hat_per_quantity_in_the_summary_the_export_and_the_plot(tmp_path, likelihood):
    """The R-hat of the test predictions (outputs; logits for classification, the export's ``logit``)
    and of the log hyperparameters is one number wherever the run says it: summary.json's diagnostics,
    ArviZ's R-hat of the export (the same draws: the diagnostic draws, each chain cut to the shortest)
    and the hyperparameters plot's; and summary.json's E-BFMI is ArviZ's of the export."""
    import arviz as az
    from adaptive_hmc.front.plots import hyper_rhats
    from adaptive_hmc.rundir.finished_run import read_run
    _data(tmp_path)
    if likelihood == "logistic":                  # the same inputs, labels from the sign of the target
        rows = [line.split(",") for line in (tmp_path / "d.csv").read_text().splitlines()[1:]]
        (tmp_path / "d.csv").write_text("x,y\n" + "".join(f"{x},{int(float(y) > 0)}\n" for x, y in rows))
    cfg = _config(tmp_path, "h", [1, 9], {"rest": [10, N]}, super_transitions=10)
    raw = yaml.safe_load(cfg.read_text())
    raw["model"]["priors"]["hidden_output"] = {"sd": 1.0, "shape": 2.0}            # a hyperparameter that moves
    raw["model"]["likelihood"] = likelihood
    if likelihood != "gaussian":
        raw["model"]["priors"].pop("noise")
    raw["tuner"]["num_steps"] = 10
    cfg.write_text(yaml.safe_dump(raw))
    run = read_run(_run(tmp_path, cfg))
    d = run.summary["diagnostics"]
    assert d["draws"] == "samples" and d["hyper"] is not None
    assert main(["export", str(run.dir)]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = az.from_netcdf(str(run.dir / "inference_data.nc"))
        outputs = "y_hat" if likelihood == "gaussian" else "logit"
        rhat = az.rhat(idata.predictions[outputs])[outputs].values
        logs = [v for v in idata.posterior.data_vars if v.startswith("log_")]
        export = max(float(az.rhat(idata.posterior[v]).to_array().max()) for v in logs)
        bfmi = az.bfmi(idata)
    assert d["test"]["rest"]["rhat_max"] == pytest.approx(float(np.max(rhat)), rel=1e-9)
    by_name, draws = hyper_rhats(run)
    assert d["hyper"]["rhat_max"] == pytest.approx(export, rel=1e-9)
    assert d["hyper"]["rhat_max"] == pytest.approx(max(by_name.values()), rel=1e-9) and "kept draws" in draws
    assert np.allclose(bfmi, run.summary["e_bfmi"], atol=1e-6) and np.all(bfmi > 0)
    # each chain's own split R-hat (its halves as two chains, ArviZ's R-hat) is the export's too
    for c, own in enumerate(d["within_chain"]["hyper"]):
        values = []
        for v in logs:
            x = idata.posterior[v].values[c].reshape(idata.posterior[v].values.shape[1], -1)
            n = x.shape[0] // 2
            values += [float(az.rhat(np.stack([x[:n, j], x[n:2 * n, j]]))) for j in range(x.shape[1])]
        assert own == pytest.approx(max(values), abs=1e-4)
    assert d["verdict"] in ("met", "moving", "apart")


def test_export_writes_at_most_a_thousand_draws_a_chain_with_the_r_hat_of_the_summary(tmp_path, capsys):
    """A run of 80 super-transitions (75 after the burn-in) holds 1,200 diagnostic draws a chain; the
    default export writes 1,000, evenly spaced and the same in every group
    (the attrs say 1,200 and 1,000), whose R-hat (az.summary) is within 0.01 of
    summary.json's; ``--draws all`` writes every one."""
    import arviz as az
    _data(tmp_path)
    cfg = _config(tmp_path, "long", [1, 9], {"rest": [10, N]}, super_transitions=80)
    raw = yaml.safe_load(cfg.read_text())
    raw["model"]["priors"]["hidden_output"] = {"sd": 1.0, "shape": 2.0}            # a hyperparameter that moves
    raw["run"]["budget"] = 160                   # 16 iterations of L = 10: 16 diagnostic draws a super-transition
    raw["tuner"]["num_steps"] = 10
    cfg.write_text(yaml.safe_dump(raw))
    run_dir = _run(tmp_path, cfg)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert main(["export", str(run_dir), "--draws", "all"]) == 0
    (run_dir / "inference_data.nc").rename(tmp_path / "whole.nc")
    whole = az.from_netcdf(str(tmp_path / "whole.nc"))
    assert main(["export", str(run_dir)]) == 0
    cut = az.from_netcdf(str(run_dir / "inference_data.nc"))
    n = whole.posterior.sizes["draw"]
    assert n > 1000 and cut.posterior.sizes["draw"] == 1000
    assert cut.attrs["draws_in_run"] == n and cut.attrs["draws"] == 1000
    picked = np.unique(np.round(np.linspace(0, n - 1, 1000)).astype(int))
    for group, var in (("posterior", "weights"), ("predictions", "y_hat"), ("sample_stats", "super_transition"),
                       ("log_likelihood", "y")):
        np.testing.assert_array_equal(cut[group][var].values, whole[group][var].values[:, picked])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logs = [v for v in cut.posterior.data_vars if v.startswith("log_")]
        hyper = az.summary(cut, var_names=logs, kind="diagnostics")["r_hat"].max()
        test = az.summary(cut.predictions, var_names=["y_hat"], kind="diagnostics")["r_hat"].max()
    d = summary["diagnostics"]
    assert abs(hyper - d["hyper"]["rhat_max"]) <= 0.01 and abs(test - d["test"]["rest"]["rhat_max"]) <= 0.01


def test_every_title_of_the_plots_fits_in_its_figure(tmp_path, monkeypatch):
    """With a long run name and a deep data path, each figure's titles (the
    suptitle and the axes' titles) lie inside the figure when it is saved."""
    import matplotlib.figure
    from adaptive_hmc.front.plots import plot_run
    _data(tmp_path)
    deep = tmp_path / ("a_rather_long_folder_name_" * 3) / "and_deeper_still"
    deep.mkdir(parents=True)
    (tmp_path / "d.csv").rename(deep / "d.csv")
    cfg = _config(tmp_path, "a_long_run_name_that_says_what_was_tried_" * 2, [1, 9], {"rest": [10, N]},
                  super_transitions=10)
    raw = yaml.safe_load(cfg.read_text())
    raw["data"]["path"] = str(deep / "d.csv")
    raw["model"]["priors"]["hidden_output"] = {"sd": 1.0, "shape": 2.0}
    cfg.write_text(yaml.safe_dump(raw))
    run_dir = _run(tmp_path, cfg)
    outside, saved = [], []
    real = matplotlib.figure.Figure.savefig

    def checked(fig, path, *args, **kwargs):
        fig.canvas.draw()
        box = fig.bbox
        texts = [fig._suptitle] + [t for ax in fig.axes for t in (ax.title, ax._left_title, ax._right_title)]
        for t in texts:
            if t is not None and t.get_text():
                e = t.get_window_extent()
                if e.x0 < box.x0 - 1 or e.x1 > box.x1 + 1 or e.y1 > box.y1 + 1:
                    outside.append((str(path), t.get_text()[:60]))
        saved.append(path)
        return real(fig, path, *args, **kwargs)
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", checked)
    plot_run(run_dir)
    assert len(saved) >= 4 and not outside, outside
