"""Runs through the command line (smoke tier): every quick config end to end with plots, compare and export,
resume after an interruption, damaged or locked run directories, failing disks, stuck chains, other transitions."""
import json
import warnings

import numpy as np
import pytest
import yaml

from adaptive_hmc.front.cli import main
from adaptive_hmc.config import read_config
from adaptive_hmc.front.experiment import run_experiment
from adaptive_hmc.rundir.metrics import untimed
from adaptive_hmc.rundir.finished_run import read_run
from adaptive_hmc.rundir.results import RunDir
from cli_helpers import CONFIGS, ROBOT_ARM_QUICK, _raw, _write, _small, _checkpointed, DAMAGE


@pytest.mark.parametrize("path", ROBOT_ARM_QUICK, ids=[p.stem for p in ROBOT_ARM_QUICK])
def test_quick_config_runs_through_the_cli_then_plot_compare_export(path, tmp_path, capsys):
    raw = _small(yaml.safe_load(path.read_text()))
    cfg = _write(tmp_path, raw, path.name)
    out = tmp_path / "run"
    assert main(["run", str(cfg), "--out", str(out), "--seed", "4"]) == 0
    err = " ".join(capsys.readouterr().err.split())            # the end of the run unfolded
    for f in ("config.resolved.yaml", "metadata.json", "log.jsonl", "predictions.npz", "summary.json",
              "checkpoint.npz", "tuner.json"):
        assert (out / f).is_file(), f
    s = json.loads((out / "summary.json").read_text())
    assert set(s["test_mse"]) == {"test_201_400", "test_401_600"} and s["seed"] == 4
    assert s["leapfrog_steps"] > 0 and 0 <= s["acceptance"] <= 1
    rhat = s["diagnostics"]["rhat_max"]
    assert ("warning: the largest R-hat" in err) == (rhat is None or rhat > 1.01)
    assert rhat is None or rhat <= 1.01 or "The chains are still on their way" in err \
        or f"(adaptive-hmc run {cfg} --out {out} --extend " in err               # how much longer, and how
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
    expected = {"traces", "running_error", "robot_arm_outputs", "predictive_check"}
    if raw["tuner"]["kind"] == "bandit":
        expected |= {"reward_surface", "reward_slice"}
    from adaptive_hmc.rundir.finished_run import read_run
    H = read_run(out).predictions["history_hyper"]
    if H.size and np.ptp(H, axis=(0, 1)).max() > 0:                                  # Gibbs-updated priors
        expected.add("hyperparameters")
    assert {p.stem for p in pngs} == expected
    assert "hyperparameters" in expected or path.stem != "robot_arm_bandit_quick"      # hierarchical: drawn
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000
    md = tmp_path / "table.md"
    assert main(["compare", str(out), str(out), "--markdown", str(md)]) == 0
    text = md.read_text()
    assert text.startswith("| run | tuner | chains | test MSE (original units) robot_arm/test_201_400 ± se")
    assert text.count("B vs A") == len(s["test_mse"]) and "indistinguishable" in text      # a run and itself
    assert "| sampling s | compile s |" in text
    assert ("| R-hat max of the predictions robot_arm/test_401_600 | ESS per 1000 grad (min / median) robot_arm/test_401_600 | "
            "ESS per s (min / median) robot_arm/test_401_600 |") in text
    assert main(["export", str(out)]) == 0
    import arviz as az
    idata = az.from_netcdf(str(out / "inference_data.nc"))
    n_chains, n_draws = idata.posterior["weights"].shape[:2]
    assert idata.predictions["y_hat"].shape == (n_chains, n_draws, 400, 2)         # the test cases
    assert idata.predictions_constant_data["y_test"].shape == (400, 2)
    posterior = "log_likelihood" in idata.groups()             # the thesis's folds: no full-data chain
    assert posterior == ((raw.get("cv") or {}).get("full_chain") is not False)
    assert all(c.startswith("full" if posterior else "fold") for c in idata.posterior.chain.values)
    bnn = raw["model"].get("kind", "bnn") == "bnn"
    if bnn:                                    # the hyperparameters that vary; the fixed ones named apart
        logs = [v for v in idata.posterior.data_vars if v.startswith("log_")]
        assert logs and all(idata.posterior[v].shape == (n_chains, n_draws) for v in logs) and n_draws >= 3
        assert all(float(np.ptp(idata.posterior[v].values)) > 0 for v in logs)
        fixed = {c.split(" = ")[0] for c in idata.attrs["constant"].split("; ")} - {"none"}
        assert not fixed & set(logs) and len(fixed) + len(logs) == len(read_run(out).predictions["hyper_names"])
    else:                                      # Neal's models integrate the noise out: no hyperparameters
        assert list(idata.posterior.data_vars) == ["weights"] and n_draws >= 3
    if posterior:                                               # the training cases'
        assert idata.log_likelihood["y"].shape == (n_chains, n_draws, 200)
    assert set(idata.sample_stats) >= {"acceptance_rate", "diverging", "energy", "lp", "step_size", "n_steps",
                                       "super_transition", "sample_weight"}
    stats = idata.sample_stats                 # the Hamiltonian of each draw: -lp plus a kinetic energy >= 0
    assert np.all(stats["energy"].values >= -stats["lp"].values) and np.all(stats["n_steps"].values >= 1)
    assert np.all((stats["acceptance_rate"].values >= 0) & (stats["acceptance_rate"].values <= 1))
    if n_draws >= 3:                          # az.bfmi of the export is the run's own E-BFMI figure
        assert np.allclose(az.bfmi(idata), s["e_bfmi"], atol=1e-6)
    assert idata.observed_data["y"].shape == (200, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if posterior:
            assert np.isfinite(az.loo(idata).elpd_loo)
        var = logs[0] if bnn else "weights"
        table = az.summary(idata, var_names=[var])
        assert len(table.index) == (1 if bnn else idata.posterior["weights"].shape[2])
        assert np.isfinite(table["r_hat"]).all() or n_chains < 2          # ArviZ: no R-hat of one chain
        if bnn:
            az.plot_trace(idata, var_names=[var])


def test_resume_after_interruption_gives_the_same_summary(tmp_path):
    raw = _small(_raw(), n=7)
    raw["run"]["checkpoint_seconds"] = 0                # a checkpoint after every super-transition
    path = _write(tmp_path, raw)
    cfg = read_config(path)
    full = run_experiment(cfg, tmp_path / "full", source=str(path), quiet=True)
    part = tmp_path / "part"
    assert run_experiment(cfg, part, source=str(path), quiet=True, stop_after=3) == {}
    # A kill after a super-transition but before its checkpoint: log has one entry too many.
    with open(part / "log.jsonl", "a") as f:
        f.write(json.dumps({"i": 3}) + "\n")
    assert RunDir(part).load_checkpoint()[0].chains["n_super"] == 3
    assert run_experiment(cfg, part, source=str(path), quiet=True, resume=True, stop_after=2) == {}
    resumed = run_experiment(cfg, part, source=str(path), quiet=True, resume=True)
    assert untimed(resumed) == untimed(full)
    a = [json.loads(x) for x in (tmp_path / "full" / "log.jsonl").read_text().splitlines()]
    b = [json.loads(x) for x in (part / "log.jsonl").read_text().splitlines()]
    strip = [untimed(e) for e in a]
    assert strip == [untimed(e) for e in b]
    with np.load(tmp_path / "full" / "predictions.npz") as x, np.load(part / "predictions.npz") as y:
        for k in x.files:
            assert np.array_equal(x[k], y[k]), k


def test_a_run_until_its_chains_meet_stops_at_the_check_that_met_and_resumes_alike(tmp_path, monkeypatch, capsys):
    """run.until: the run goes on past run.super_transitions, checks at the
    super-transitions driver.check_due names, stops at the first check that
    meets the targets (here: one that judges 10 draws a chain enough) and
    reports it; interrupted and resumed, it ends as the uninterrupted run."""
    from adaptive_hmc.front import experiment
    from adaptive_hmc.engine.driver import check_due
    checks = []

    def fake(diagnostics, target_ess):
        n = next(iter(diagnostics["test"].values()))["draws_per_chain"] if diagnostics else 0
        checks.append(n)
        return n >= 10, f"{n} draws"
    monkeypatch.setattr(experiment, "convergence", fake)
    raw = _small(_raw(), n=5)
    raw["run"].update(until={"max_seconds": 600, "target_ess": 50}, thin=0)     # draws: super-transition means
    path = _write(tmp_path, raw)
    cfg = read_config(path)
    full = run_experiment(cfg, tmp_path / "full", source=str(path), quiet=True)
    n = full["super_transitions"]
    assert full["convergence"] == {"met": True, "super_transitions": n, "status": f"{checks[-1]} draws"}
    assert checks == [0, 8, 13] and n == 15        # super-transition means after the burn-in of 2
    assert [k for k in range(1, 40) if check_due(k, 5)] == [5, 10, 15, 20, 25, 31, 38]
    part = tmp_path / "part"
    assert run_experiment(cfg, part, source=str(path), quiet=True, stop_after=7) == {}
    resumed = run_experiment(cfg, part, source=str(path), quiet=True, resume=True)
    assert untimed(resumed) == untimed(full)


def test_a_run_until_its_chains_meet_stops_at_its_time_limit_and_says_so(tmp_path, capsys):
    raw = _small(_raw(), n=4)
    raw["run"]["until"] = {"max_seconds": 1e-3, "target_ess": 400}
    path = _write(tmp_path, raw)
    out = tmp_path / "run"
    assert main(["run", str(path), "--out", str(out)]) == 0
    err = " ".join(capsys.readouterr().err.split())            # the end of the run unfolded
    s = json.loads((out / "summary.json").read_text())
    assert s["super_transitions"] == 4 and s["convergence"]["met"] is False
    assert "after 4 super-transitions: too few draws to judge yet; the time limit (run.until.max_seconds) is " \
           "reached" in err and "raise run.until.max_seconds" in err
    raw["data"] = {"dataset": "robot_arm", "train_rows": [1, 200]}                   # no test cases to judge
    assert main(["run", str(_write(tmp_path, raw, "d.yaml")), "--out", str(tmp_path / "none")]) == 2
    assert "run.until: checks the R-hat and ESS of the test predictions" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()


def test_extend_gives_the_run_asked_for_the_longer_length_at_the_start(tmp_path, capsys):
    """--extend N on a finished run of n: the draws, predictions and figures
    of a run of n + N with the same burn-in (a third of n, the default, as
    its config.yaml resolved it); an extension interrupted resumes to its new
    length; a second extension adds again; --extend is refused, changing
    nothing, where there is no finished run."""
    raw = _small(_raw(), n=4)
    raw["run"].pop("burn_in")                                   # the default: a third of the length
    path = _write(tmp_path, raw)
    long_raw = dict(raw, run=dict(raw["run"], super_transitions=7, burn_in={"super_transitions": 4 // 3}))
    long_path = _write(tmp_path, long_raw, "long.yaml")
    full = run_experiment(read_config(long_path), tmp_path / "full", source=str(long_path), quiet=True)
    out = tmp_path / "ext"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    assert main(["run", str(path), "--out", str(out), "--extend", "0"]) == 2
    assert "--extend 0: the number of super-transitions to add, an integer >= 1" in capsys.readouterr().err
    cfg = read_config(path)
    assert run_experiment(cfg, out, source=str(path), quiet=True, extend=2, stop_after=1) == {}
    assert RunDir(out).status() == "checkpointed" and RunDir(out).progress() == (5, 6)
    assert main(["run", str(path), "--out", str(out), "--extend", "1"]) == 2
    assert "this one is unfinished (--resume it first)" in capsys.readouterr().err
    assert run_experiment(cfg, out, source=str(path), quiet=True, resume=True)["super_transitions"] == 6
    assert main(["run", str(path), "--out", str(out), "--extend", "1", "--quiet"]) == 0
    extended = json.loads((out / "summary.json").read_text())
    assert untimed(extended) == untimed(full)
    for name in ("predictions.npz", "samples.npz"):
        with np.load(tmp_path / "full" / name) as x, np.load(out / name) as y:
            for k in x.files:
                assert np.array_equal(x[k], y[k]), (name, k)
    assert [e["to"] for e in RunDir(out).read_metadata()["extended"]] == [6, 7]
    assert main(["run", str(path), "--out", str(tmp_path / "none"), "--extend", "3"]) == 2
    assert "--extend 3: adds super-transitions to a finished run, and there is none here" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()
    for name in ("checkpoint.npz", "checkpoint.prev.npz"):              # the same refusals as a density run's
        (out / name).unlink(missing_ok=True)
    assert main(["run", str(path), "--out", str(out), "--extend", "1"]) == 2
    assert "its checkpoint is gone, so the chains cannot go on" in capsys.readouterr().err


def test_resume_refuses_a_changed_config(tmp_path, capsys):
    raw = _small(_raw(), n=3)
    path = _write(tmp_path, raw)
    out = tmp_path / "run"
    assert run_experiment(read_config(path), out, source=str(path), quiet=True, stop_after=1) == {}
    raw["run"]["budget"] = 700
    _write(tmp_path, raw)
    assert main(["run", str(path), "--out", str(out), "--resume"]) == 2
    assert "differs from the one this run started with" in capsys.readouterr().err


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


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_store_shard_is_refused_with_a_message(damage, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path, out = _checkpointed(tmp_path)
    shard = sorted((out / "store").glob("*.npz"))[0]
    shard.write_bytes(DAMAGE[damage](shard.read_bytes()))
    assert main(["run", str(path), "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "the sample store does not hold" in err and str(shard) in err and "Traceback" not in err, err
    assert not (tmp_path / "pwned").exists()


def test_missing_resolved_config_is_refused(tmp_path, capsys):
    path, out = _checkpointed(tmp_path)
    (out / "config.resolved.yaml").unlink()
    assert main(["run", str(path), "--out", str(out), "--resume"]) == 2
    assert f"{out / 'config.resolved.yaml'}: missing or damaged (No such file or directory)" in capsys.readouterr().err


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


def test_a_failing_disk_ends_with_a_message_and_keeps_the_checkpoint(tmp_path, capsys, monkeypatch):
    import errno

    from adaptive_hmc.rundir import results
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


def test_stuck_chains_are_flagged_in_log_progress_summary_and_compare(tmp_path, capsys):
    """A hand setting far past the stability limit accepts nothing: every place a
    user looks says so."""
    raw = _small(_raw(), n=3)
    raw["tuner"] = {"kind": "fixed", "step_factor": 20.0, "num_steps": 50}
    path = _write(tmp_path, raw)
    out = tmp_path / "run"
    assert main(["run", str(path), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())                      # the end of the run unfolded
    assert "STUCK: chains [0, 1, 2, 3, 4, 5, 6, 7] accepted nothing" in err
    assert "warning: in 3 of 3 super-transitions some chain accepted no trajectory" in err
    assert err.index("warning: in super-transition 0 (step factor 20, L 50) chains [0, 1, 2, 3, 4, 5, 6, 7] "
                              "accepted no trajectory; the run goes on") < err.index("in 3 of 3")
    log = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    assert all(e["stuck_chains"] == list(range(8)) for e in log)
    assert "(no test-set ESS)" in err           # 3 super-transitions: too few draws for an ESS
    s = json.loads((out / "summary.json").read_text())
    assert s["stuck_super_transitions"] == 3 and s["low_acceptance_share"] == 1.0
    assert s["stuck_by_chain"] == [3] * 8 and len(s["divergences_by_chain"]) == 8
    md = tmp_path / "t.md"
    assert main(["compare", str(out), "--markdown", str(md)]) == 0
    head, _, row = md.read_text().splitlines()[:3]
    cells = dict(zip(head.split(" | "), row.split(" | ")))
    assert cells["acc < 0.2 share"] == "1.00" and cells["stuck"] == "3"


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
    chains = raw["chains"]
    assert run.summary["leapfrog_steps"] == 4 * 600 * chains        # every chain spends the whole budget
    if kind == "metropolis":        # the share of proposals accepted, not of iterations
        assert 0.05 < run.summary["acceptance"] < 0.95 and np.isfinite(run.summary["test_mse"]["test_201_400"])
    else:                           # no acceptance test: every trajectory kept; it fits within this budget
        assert run.summary["acceptance"] == 1.0 and run.summary["test_mse"]["test_201_400"] < 1.0
    raw["sampler"]["window"] = 5
    assert main(["validate", str(_write(tmp_path, raw, "bad.yaml"))]) == 2
    assert "sampler.window = 5: windows and jitter are for kind hmc, not " + kind in capsys.readouterr().err


@pytest.mark.slow
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


def test_the_main_job_tunes_compares_with_hand_tuned_at_equal_compute_and_plots(tmp_path, capsys):
    """README's command 1 (configs/robot_arm_main.yaml), shrunk: the bandit's run, then the same chains with the
    hand-tuned setting of tuner.compare_with for as many super-transitions into DIR-fixed (no warning of its
    own), one comparison line, the reward surface drawn (run.plots), the end of the run folded at 100
    characters; --json carries both; a second run refuses a DIR-fixed already there, and compare_with is
    checked before any work."""
    from adaptive_hmc.front.versus import SUFFIX
    main_cfg = read_config(str(CONFIGS / "robot_arm_main.yaml"))
    t = main_cfg.tuner
    assert (main_cfg.data.dataset, t.kind, main_cfg.run.plots) == ("robot_arm", "bandit", True)
    assert t.compare_with is not None and main_cfg.run.until is not None and not main_cfg.sampler.gibbs
    readme = (CONFIGS.parent / "README.md").read_text()
    ci = (CONFIGS.parent / ".ci" / "run").read_text()
    assert "adaptive-hmc run configs/robot_arm_main.yaml" in readme
    assert next(x for x in ci.splitlines() if "adaptive-hmc\" run" in x).endswith("run configs/robot_arm_main.yaml")
    raw = _small(_raw("robot_arm_main.yaml"), n=8, budget=400)
    raw["tuner"]["compare_with"] = {"step_factor": 0.1, "num_steps": 40}
    cfg = _write(tmp_path, raw)
    out = tmp_path / "run"
    assert main(["run", str(cfg), "--out", str(out)]) == 0
    said = capsys.readouterr()
    fixed = tmp_path / f"run{SUFFIX}"
    s, f = (json.loads((d / "summary.json").read_text()) for d in (out, fixed))
    assert s["super_transitions"] == f["super_transitions"] == 8
    assert s["leapfrog_steps"] <= 8 * 400 * 4 and f["leapfrog_steps"] <= 8 * 400 * 4
    resolved = yaml.safe_load((fixed / "config.resolved.yaml").read_text())
    assert resolved["tuner"]["kind"] == "fixed" and resolved["tuner"]["step_factor"] == 0.1
    assert resolved["tuner"]["num_steps"] == 40 and resolved["run"]["until"] is None
    assert resolved["model"] == yaml.safe_load((out / "config.resolved.yaml").read_text())["model"]
    versus = " ".join(said.out.split())                       # the lines unfolded
    assert "versus hand-tuned eps=0.1 L=40, the same 8 super-transitions" in versus
    assert f"{fixed}): ESS per 1000 gradients" in versus and "test_201_400 mse" in versus and "R-hat" in versus
    assert (out / "plots" / "reward_surface.png").is_file() and f"plots: {out / 'plots'}/ (" in versus
    assert not (fixed / "plots").exists() and f"{fixed}: warning" not in said.err
    assert all(len(x) <= 100 or " " not in x.strip() for x in said.out.splitlines()[1:-1])   # but the paths' lines
    end = said.err[said.err.index(f"{out}: computing the predictions"):].splitlines()[1:]
    assert end and [x for x in end if len(x) > 100 and " " in x.strip()] == []
    # the tuned run finished, its comparison not: --resume runs the comparison alone, to the same draws
    import shutil
    shutil.rmtree(fixed)
    assert main(["run", str(cfg), "--out", str(out), "--resume"]) == 0
    assert json.loads((fixed / "summary.json").read_text())["test_mse"] == f["test_mse"]
    assert "versus hand-tuned eps=0.1 L=40" in capsys.readouterr().out
    assert main(["run", str(cfg), "--out", str(out), "--resume"]) == 2             # both finished
    assert "holds a finished run and its hand-tuned comparison" in capsys.readouterr().err
    # --json: the summary with the comparison and the plots
    again = tmp_path / "again"
    assert main(["run", str(cfg), "--out", str(again), "--json", "--quiet"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["compared_with"]["run_dir"] == str(tmp_path / f"again{SUFFIX}") and len(j["plots"]) >= 2
    assert j["compared_with"]["test_mse"] == f["test_mse"]            # the same seed: the same hand-tuned draws
    # refused before any work: a DIR-fixed already there, a fixed tuner's compare_with, L above the budget
    (tmp_path / f"third{SUFFIX}").mkdir()
    assert main(["run", str(cfg), "--out", str(tmp_path / "third")]) == 2
    assert "third-fixed (where this run's hand-tuned comparison goes) already exists" in capsys.readouterr().err
    assert not (tmp_path / "third").exists()
    raw["tuner"]["compare_with"]["num_steps"] = 500
    assert main(["run", str(_write(tmp_path, raw, "long.yaml")), "--out", str(tmp_path / "long")]) == 2
    assert "tuner.compare_with.num_steps = 500: must be <= run.budget (400)" in capsys.readouterr().err
    raw["tuner"] = {"kind": "fixed", "step_factor": 0.1, "num_steps": 40, "compare_with": {"step_factor": 0.2,
                                                                                         "num_steps": 40}}
    assert main(["run", str(_write(tmp_path, raw, "fx.yaml")), "--out", str(tmp_path / "fx")]) == 2
    assert "tuner.compare_with = {'step_factor': 0.2, 'num_steps': 40}: is for a tuned run" in \
        capsys.readouterr().err
