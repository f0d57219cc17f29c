"""The tuning study's pipeline, shrunk (experiments/tuning_study.py --quick, one Gaussian target)."""
import json

import numpy as np

from adaptive_hmc.tuners import FixedTuner
from cli_helpers import load_script


def _study():
    return load_script("experiments", "tuning_study")


def test_quick_study_on_a_gaussian_writes_its_table_figure_and_verdicts(tmp_path):
    study = _study()
    out = tmp_path / "docs" / "study.md"
    verdicts = study.main(["--targets", "gauss2", "--quick", "--seeds", "1", "--gauss-grid-seeds", "1",
                           "--out", str(out)])
    assert set(verdicts) == {("gauss2", "thesis"), ("gauss2", "default")}
    rows = json.loads((tmp_path / "docs" / "study.json").read_text())
    hand = [r for r in rows if r["kind"] == "hand"]
    assert len(hand) == 12 and all(np.isfinite(r["ess_full"]) and r["ess_full"] >= 0 for r in rows)
    best = max(study.figure_of(r) for r in hand)
    clean = max(study.figure_of(r) for r in hand if r["divergences"] <= study.CLEAN * r["trajectories"])
    for v in verdicts.values():
        assert v["best_cell"] == best and v["best_clean_cell"] == clean
        assert v["meets"] == (v["low_share"] <= 0.05 and v["ess"] >= study.BAR * best)
    text = out.read_text()
    assert "| gauss2 | bandit, default | 1 |" in text and (tmp_path / "docs" / "img" / "study.png").stat().st_size


def test_the_bar_is_a_share_of_the_best_cell_and_names_the_best_clean_cell():
    """bar(): a cell's figure is the median over its seeds; the bandit meets the
    bar at BAR times the best cell's ESS with no stuck share; the best cell whose
    seeds diverge at most CLEAN of their trajectories is named apart."""
    study = _study()

    def row(label, kind, ess, divergences=0, seed=1, low=0.0):
        return {"target": "t", "label": label, "kind": kind, "ess_full": ess, "divergences": divergences,
                "trajectories": 1000, "seed": seed, "low_share": low}
    rows = [row("a", "hand", 1.0, 50), row("a", "hand", 0.8, 0, 2), row("a", "hand", 0.9, 0, 3),
            row("b", "hand", 0.5), row("c", "hand", 0.1), row("x", "default", 0.63), row("y", "thesis", 0.62)]
    v = study.bar(rows)
    assert v[("t", "default")]["best_cell"] == 0.9 and v[("t", "default")]["best_clean_cell"] == 0.5
    assert v[("t", "default")]["meets"] and not v[("t", "thesis")]["meets"]          # 0.63 >= 0.7 x 0.9 > 0.62
    assert not study.bar([*rows[:5], row("x", "default", 0.9, low=0.1)])[("t", "default")]["meets"]


def test_a_gaussian_chain_with_the_wrong_answer_counts_zero_whatever_its_ess():
    """gauss1 at step 0.1 and L 30 is 10 whole periods of its short axis (leapfrog angle pi/3 a step), which
    then never moves from its start: a large ESS and the wrong means. bias_z flags it; one step fewer mixes
    both axes and passes (the check has power and no false alarm here), and bar() counts the wrong cell 0."""
    study = _study()
    cov, size = study.GAUSS["gauss1"]["cov"], dict(study.GAUSS_SIZE, super_transitions=40)
    wrong = study.gaussian_run(cov, FixedTuner(step_factor=0.1, num_steps=30), size, 1)
    right = study.gaussian_run(cov, FixedTuner(step_factor=0.1, num_steps=29), size, 1)
    assert wrong["bias_z"] > 4 * study.BIAS_Z and wrong["ess_full"] > right["ess_full"] > 0
    assert right["bias_z"] < study.BIAS_Z
    rows = [dict(wrong, target="g", label="a", kind="hand", seed=1),
            dict(right, target="g", label="b", kind="hand", seed=1),
            dict(right, target="g", label="x", kind="default", seed=1, ess_full=0.8 * right["ess_full"])]
    v = study.bar(rows)[("g", "default")]
    assert v["best_cell"] == right["ess_full"] and v["meets"]
    rng = np.random.default_rng(0)
    iid = rng.normal(size=(4000, 2)) @ np.linalg.cholesky(np.array(cov)).T
    assert study.bias_z(iid, cov) < study.BIAS_Z < study.bias_z(iid + [0.0, 0.1], cov)


def test_rerun_runs_one_kind_and_reads_the_others_from_a_previous_study(tmp_path):
    """--rerun default: only the default bandit runs; the hand cells and the thesis's rows come from --reuse."""
    study = _study()
    first = tmp_path / "a" / "study.md"
    study.main(["--targets", "gauss2", "--quick", "--seeds", "1", "--gauss-grid-seeds", "1", "--out", str(first)])
    old = json.loads((tmp_path / "a" / "study.json").read_text())
    second = tmp_path / "b" / "study.md"
    study.main(["--targets", "gauss2", "--quick", "--seeds", "2", "--rerun", "default",
                "--reuse", str(tmp_path / "a" / "study.json"), "--out", str(second)])
    new = json.loads((tmp_path / "b" / "study.json").read_text())
    assert sorted((r["kind"], r["seed"]) for r in new if r["kind"] != "default") == \
        sorted((r["kind"], r["seed"]) for r in old if r["kind"] != "default")
    assert [(r["kind"], r["seed"]) for r in new if r["kind"] == "default"] == [("default", 2)]
    assert all(r == o for r, o in zip((r for r in new if r["kind"] == "hand"), (o for o in old if o["kind"] == "hand")))


def test_rerun_targets_reruns_those_targets_alone(tmp_path):
    """--rerun default --rerun-targets gauss1: gauss1's default runs again; gauss2's every row is read back."""
    study = _study()
    args = ["--targets", "gauss1", "gauss2", "--quick", "--gauss-grid-seeds", "1"]
    study.main([*args, "--seeds", "1", "--out", str(tmp_path / "a" / "study.md")])
    old = json.loads((tmp_path / "a" / "study.json").read_text())
    study.main([*args, "--seeds", "2", "--rerun", "default", "--rerun-targets", "gauss1",
                "--reuse", str(tmp_path / "a" / "study.json"), "--out", str(tmp_path / "b" / "study.md")])
    new = json.loads((tmp_path / "b" / "study.json").read_text())
    assert [r for r in new if r["target"] == "gauss2"] == [o for o in old if o["target"] == "gauss2"]
    assert [r["seed"] for r in new if r["target"] == "gauss1" and r["kind"] == "default"] == [2]


def test_the_gaussians_loop_tells_the_reward_a_run_tells():
    """Each super-transition's reward is rewards.esjd of its iterations (their sum over sqrt(L)), as a run's
    (the Gaussians' loop is the package's driver)."""
    study = _study()

    class Recorder(FixedTuner):
        def __init__(self):
            super().__init__(step_factor=0.3, num_steps=10)
            self.told = []

        def tell(self, action, reward, acceptance=None, transient=False):
            self.told.append(reward)
            return super().tell(action, reward, acceptance, transient)

    size = {"super_transitions": 2, "budget": 200, "warmup": 0, "burn_in": 0}
    tuner = Recorder()
    study.gaussian_run([[1.0, 0.5], [0.5, 1.0]], tuner, size, seed=3)
    from adaptive_hmc.models.gaussian import GaussianTarget
    from adaptive_hmc.engine.rewards import esjd
    from adaptive_hmc.samplers.chain import init_state, make_hmc
    from adaptive_hmc.samplers.settings import hmc_settings
    model = GaussianTarget(np.zeros(2), np.array([[1.0, 0.5], [0.5, 1.0]]))
    hmc, rng = make_hmc(model), np.random.default_rng(3)
    state = init_state(model, rng.normal(size=2) * 3.0)
    settings = hmc_settings(num_steps=10, step_size=0.3)
    for told in tuner.told:
        infos = []
        for _ in range(20):                         # 200 steps at L 10
            state, info = hmc(state, settings, rng)
            infos.append(info)
        assert told == esjd([i.accept_prob for i in infos], [i.squared_jump for i in infos], 10)
        assert told > 10 * np.mean([i.accept_prob * i.squared_jump for i in infos]) / np.sqrt(10) * 0.99


def test_the_best_cells_run_again_on_more_seeds_and_count_by_their_median():
    """The study's best grid cells (by the median over the seeds they have) run
    again on the top seeds as hand cells (the bar takes each cell's median, as
    the test above checks), so one lucky seed no longer sets the best cell alone."""
    study = _study()
    rows = [{"target": "t", "kind": "hand", "action": (e, L), "seed": 1, "ess_full": v}
            for (e, L), v in {(0.1, 100): 0.5, (0.2, 100): 0.9, (0.4, 100): 0.7, (0.4, 500): 0.1}.items()]
    assert study.best_cells(rows, "t", 2) == [(0.2, 100), (0.4, 100)]
    runs = study.robot_runs("robot_arm", [1], [1], False, (), top=[(0.2, 100)], top_seeds=[2, 3])
    top = [r for r in runs if r[1] == "top"]
    assert [(r[2], r[4]) for r in top] == [((0.2, 100), 2), ((0.2, 100), 3)]
    assert top[0][0] == "hand eps=0.2 L=100" and top[0][3]["tuner.kind"] == "fixed"
    more = rows + [dict(rows[1], seed=s, ess_full=v) for s, v in ((2, 0.3), (3, 0.4))]
    assert study.best_cells(more, "t", 2) == [(0.4, 100), (0.1, 100)]       # (0.2, 100): median 0.4 of 0.9, 0.3, 0.4


def test_the_robot_runs_keep_every_thin_th_sample_as_asked():
    """--thin sets every robot-arm run's run.thin (1 by default): the ESS is measured on the kept samples."""
    study = _study()
    assert {r[3]["run.thin"] for r in study.robot_runs("robot_arm", [1], [1], False)} == {1}
    assert {r[3]["run.thin"] for r in study.robot_runs("robot_arm", [1], [1], False, (), thin=5)} == {5}
