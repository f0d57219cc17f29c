"""Cross-validation replicas, super-transitions, rewards and predictions:
exact checks against NumPy computations from kept samples, and statistical
checks (seeded, tolerances in Monte Carlo standard errors)."""
import math
from pathlib import Path

import numpy as np
import pytest

from adaptive_hmc.engine.network_options import Layout
from adaptive_hmc.data import kfold, load_robot_arm
from adaptive_hmc.front.estimator import BNNClassifier, BNNRegressor
from adaptive_hmc.models.mlp import MLPSpec, predict
from adaptive_hmc.samplers.settings import Action
from adaptive_hmc.models.priors import PriorSpec
from adaptive_hmc.engine.network_state import chain_arrays
from adaptive_hmc.engine.network_chains import NetworkChains
from adaptive_hmc.engine.rewards import cv_error, cv_reward, esjd_reward, held_out_error
from adaptive_hmc.engine.driver import run_super_transitions
from adaptive_hmc.engine.runner import fallback_reward
from adaptive_hmc.samplers import HMCSettings
from adaptive_hmc.tuners import BanditOptions, BanditTuner, FixedTuner
from adaptive_hmc.engine.chain_set import advance

Z = 4.0


def _toy(n=40, seed=0, likelihood="gaussian"):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    f = np.sin(X[:, 0]) + 0.5 * X[:, 1]
    if likelihood == "gaussian":
        return MLPSpec(2, (5,), 2), X, np.column_stack([f, np.cos(X[:, 1])]) + 0.1 * rng.normal(size=(n, 2))
    if likelihood == "logistic":
        return MLPSpec(2, (5,), 1, "logistic"), X, (f > 0).astype(float)
    return MLPSpec(2, (5,), 3, "softmax"), X, np.digitize(f, [-0.5, 0.5]).astype(float)


def _replicas(likelihood="gaussian", full_data_chain=False, **kw):
    """4 CV replicas of a toy network (and a full-data chain with ``full_data_chain``)."""
    spec, X, Y = _toy(likelihood=likelihood)
    spec_t, Xt, Yt = _toy(17, seed=5, likelihood=likelihood)
    args = dict(layout=Layout.cv(4, full_data_chain), test_sets={"test": (Xt, Yt)}, seed=7, thin=1, threads=2)
    args.update(kw)
    return NetworkChains(spec, X, Y, **args)


def test_a_replica_sets_step_is_a_pure_function_of_its_state():
    """NetworkChains.step(state, action, budget) -> (state, result) (the ChainSet protocol's): the same state
    gives the same bits twice and is left as it was; run is that step from the present state."""
    rs = _replicas(start="random")
    before = rs.state
    saved = [c.position.copy() for c in before.chains], before.n_super
    (s1, r1), (s2, r2) = (rs.step(before, Action(0.3, 5), 40) for _ in range(2))
    assert np.array_equal(r1.record.accept_prob, r2.record.accept_prob) and r1.record.accept_prob.size
    assert all(np.array_equal(a.position, b.position) for a, b in zip(s1.chains, s2.chains))
    assert all(np.array_equal(a, c.position) for a, c in zip(saved[0], before.chains)) and rs.state is before
    assert s1.n_super == saved[1] + 1 and not np.array_equal(s1.chains[0].position, before.chains[0].position)
    result = advance(rs, Action(0.3, 5), 40)
    assert np.array_equal(result.record.accept_prob, r1.record.accept_prob) and rs.n_super == 1
    assert all(np.array_equal(a.position, b.position) for a, b in zip(rs.state.chains, s1.chains))


# -- folds ---------------------------------------------------------------------------

@pytest.mark.parametrize("n,k", [(200, 8), (37, 5), (10, 10)])
def test_kfold_disjoint_covering_balanced_and_seeded(n, k):
    folds = kfold(n, k, 3)
    allidx = np.concatenate(folds)
    assert np.array_equal(np.sort(allidx), np.arange(n))
    sizes = [len(f) for f in folds]
    assert max(sizes) - min(sizes) <= 1
    assert all(np.array_equal(a, b) for a, b in zip(folds, kfold(n, k, 3)))
    assert not all(np.array_equal(a, b) for a, b in zip(folds, kfold(n, k, 4)))


def test_kfold_stratified_keeps_class_shares():
    labels = np.repeat([0, 1, 2], [50, 30, 20])
    for f in kfold(100, 5, 0, labels):
        assert [int((labels[f] == c).sum()) for c in range(3)] == [10, 6, 4]
    with pytest.raises(ValueError, match="number of folds"):
        kfold(5, 6, 0)


def test_replica_training_sets_exclude_their_fold():
    rs = _replicas()
    spec, X, Y = _toy()
    for r, fold in zip(rs.chain_data, rs.folds):
        assert r.model.n_cases == len(X) - len(fold)
        np.testing.assert_array_equal(r.held.XT[:, :len(fold)], X[fold].T)
        assert not (set(map(tuple, r.model.X)) & set(map(tuple, X[fold])))


# -- budget, initial phase, determinism ------------------------------------------------

@pytest.mark.parametrize("jitter,window", [(False, 1), (True, 1), (False, 4), (True, 3)])
def test_budget_respected_exactly(jitter, window):
    """Without jitter a super-transition runs floor(budget / L) trajectories of
    L steps; with it (L drawn from 1..7, mean 4) 2 budget / (L + 1) = 25, whose
    steps average the budget (sd of one super-transition's total: 10)."""
    rs = _replicas(settings=HMCSettings(jitter=jitter, window=window), full_data_chain=True)
    res = advance(rs, Action(0.3, 7), 100)
    assert res.n_iter == (25 if jitter else 100 // 7)
    used = res.record.num_steps.sum(axis=1)
    assert np.all(rs.chains[0].counters == [used[0], res.n_iter])
    if jitter:
        more = np.concatenate([advance(rs, Action(0.3, 7), 100).record.num_steps.sum(axis=1) for _ in range(10)])
        assert abs(more.mean() - 100) < 4 * 10 / np.sqrt(more.size)
    else:
        assert np.all(used == 14 * 7)
    with pytest.raises(ValueError, match="num_steps"):
        advance(rs, Action(0.3, 101), 100)
    with pytest.raises(ValueError, match="step_factor"):
        advance(rs, Action(float("nan"), 10), 100)


@pytest.mark.parametrize("bad, field", [({"step_factor": 0.3}, "action"), (Action(0.3, 2.5), "num_steps"),
                                        (Action(0.3, 0), "num_steps"), (Action(0.3, True), "num_steps"),
                                        (Action(-1.0, 5), "step_factor"), (Action("0.3", 5), "step_factor")])
def test_an_action_is_checked_once_where_a_tuners_dict_becomes_one(bad, field):
    """A tuner's dict becomes an Action, checked, in one place (Action.of), which every chain set's run uses."""
    from adaptive_hmc.samplers.settings import SettingsError
    assert Action.of({"step_factor": 0.25, "num_steps": 12.0}) == (0.25, 12)
    assert type(Action.of({"step_factor": 1, "num_steps": np.int64(3)}).num_steps) is int
    with pytest.raises(SettingsError, match=field):
        Action.of(bad)


def test_a_super_transition_is_a_pure_function_of_its_state():
    """super_transition(setup, state, action, budget) -> (state, result): the
    same state and action give the same bits twice, the state given is left as
    it was, and the new one is the old with one more super-transition folded in."""
    from adaptive_hmc.engine.network_state import checkpoint_state
    from adaptive_hmc.engine.super_transition import super_transition
    rs = _replicas(full_data_chain=True, thin=1)
    advance(rs, Action(0.3, 10), 100)
    before = rs.state
    saved = checkpoint_state(before)
    action = Action(0.3, 10)
    (s1, r1), (s2, r2) = (super_transition(rs, before, action, 100) for _ in range(2))
    for u, v in zip(r1.record, r2.record):
        assert np.array_equal(u, v)
    for u, v in zip(s1.totals, s2.totals):
        assert np.array_equal(u, v)
    assert all(np.array_equal(u, v) for c, d in zip(s1.chains, s2.chains)
               for u, v in zip(chain_arrays(c), chain_arrays(d)))
    assert rs.state is before and s1.n_super == before.n_super + 1 == len(s1.history)
    assert not np.array_equal(s1.chains[0].position, before.chains[0].position)
    again = checkpoint_state(before)
    assert all(np.array_equal(u, v) for c, d in zip(saved["chains"], again["chains"]) for u, v in zip(c, d))
    assert s1.streams_spawned == before.streams_spawned + rs.n_chains
    assert np.array_equal(s1.totals.count, before.totals.count + r1.unit.count)


def test_initial_phase_keeps_hyperparameters_fixed():
    rs = _replicas(settings=HMCSettings(initial_phase_steps=50), initial_hyper=1.0)
    res = advance(rs, Action(0.2, 10), 100)
    h = res.record.hyper
    # Gibbs starts at the first iteration with >= 50 leapfrog steps done: iteration 5.
    assert np.all(h[:, :5] == h[:, :1])
    moved = np.all(h[:, 5:] != h[:, 4:5], axis=(0, 1))
    names = rs.hyper_names
    assert [n for n, m in zip(names, moved) if not m] == ["output_bias"]   # fixed sd 100
    assert np.all(h[:, 0, moved] == 1.0)


@pytest.mark.parametrize("arithmetic", ["float64", "float32"])
def test_serial_and_parallel_runs_are_bitwise_identical(arithmetic):
    """Bit-identical with 1 and 3 threads, and whatever other arrays are alive
    (each run's arrays land at other addresses: compiled loops whose
    vectorisation depended on addresses once made the bits differ), in either
    precision of the network's hidden units."""
    def go(threads):
        rs = _replicas(threads=threads, full_data_chain=True, arithmetic=arithmetic,
                       settings=HMCSettings(window=3, jitter=True, initial_phase_steps=30))
        out = [advance(rs, Action(eps, L), 120) for eps, L in ((0.3, 10), (0.5, 6))]
        return rs, out
    a, ra = go(1)
    alive = []
    for threads in (3, 3, 1, 3):
        b, rb = go(threads)
        alive.append((b, rb))          # kept, so the next run's arrays lie elsewhere
        for x, y in zip(a.chains, b.chains):
            for u, v in zip(chain_arrays(x), chain_arrays(y)):
                assert np.array_equal(u, v)
        for u, v in zip(ra, rb):
            for p, q in zip(u.record, v.record):
                assert np.array_equal(p, q)
        for name in ("test_pred", "test_sq", "test_var", "test_lse", "test_count"):
            assert np.array_equal(getattr(a, name), getattr(b, name))
        assert np.array_equal(a.samples()[0], b.samples()[0])


# -- predictions and rewards, exactly from kept samples ---------------------------------

def _probs(F, likelihood):
    """Class probabilities (S, N, K) of network outputs F (S, N, out), in plain NumPy."""
    if likelihood == "logistic":
        p1 = 1 / (1 + np.exp(-F[:, :, 0]))
        return np.stack([1 - p1, p1], axis=2)
    P = np.exp(F - F.max(2, keepdims=True))
    return P / P.sum(2, keepdims=True)


def _split_kept(rs, before):
    return [np.array(k[b:]) for k, b in zip(rs.kept, before)]


@pytest.mark.parametrize("likelihood", ["gaussian", "logistic", "softmax"])
def test_reward_uses_this_super_transitions_samples_only(likelihood):
    rs = _replicas(likelihood)
    spec = rs.spec
    D = spec.n_params
    metric = "mse" if likelihood == "gaussian" else "log_loss"
    advance(rs, Action(0.05, 5), 200)   # a first super-transition at another setting
    before = [len(k) for k in rs.kept]
    res = advance(rs, Action(0.4, 10), 200)
    rows = _split_kept(rs, before)
    errs = []
    for r, fold, kept in zip(rs.chain_data, rs.folds, rows):
        assert len(kept) == res.n_iter
        F = predict(spec, kept[:, :D], r.held.XT[:, :len(fold)].T)          # (S, N, out)
        y = r.held.YT.T
        if likelihood == "gaussian":
            errs.append(np.mean(np.sum((F.mean(0) - y) ** 2, axis=1)))
        else:
            P = _probs(F, likelihood)
            errs.append(-np.mean(np.log(P.mean(0)[np.arange(len(y)), y[:, 0].astype(int)])))
    assert cv_error(res, metric) == pytest.approx(np.mean(errs), rel=1e-10)
    assert cv_reward(res, metric) == -cv_error(res, metric)
    # The accumulated error over both super-transitions is a different number.
    both = [np.array(k) for k in rs.kept]
    if likelihood == "gaussian":
        F0 = predict(spec, both[0][:, :D], rs.chain_data[0].held.XT[:, :len(rs.folds[0])].T)
        assert not np.isclose(np.mean(np.sum((F0.mean(0) - rs.chain_data[0].held.YT.T) ** 2, 1)), errs[0])


@pytest.mark.parametrize("likelihood,predict_steps", [("gaussian", 0), ("gaussian", 25), ("logistic", 25),
                                                       ("softmax", 0)])
def test_test_predictions_match_numpy_from_kept_samples(likelihood, predict_steps):
    # predict_steps 25 at L 5: every 5th iteration predicts, and every 5th is kept (thin), the same ones
    every = 5 if predict_steps else 1
    rs = _replicas(likelihood, full_data_chain=True, burn_in_super_transitions=1, predict_steps=predict_steps,
                   thin=every)
    rs.diagnostic_draws = 0                # no rows besides every thin-th: the kept rows are the predicting ones
    spec = rs.spec
    advance(rs, Action(0.3, 5), 100)
    assert rs.retained.sum() == rs.test_count.sum() == 0 and all(len(k) == 0 for k in rs.kept)
    for _ in range(2):
        advance(rs, Action(0.3, 5), 100)
    Q, noise, _ = rs.samples()
    assert len(Q) == rs.retained.sum() == 2 * 20 // every * rs.n_chains      # one L: equal weights, plain averages
    Xt, Yt = rs.X_test, rs.Y_test
    F = predict(spec, Q, Xt)
    pr = rs.prediction("test")
    if likelihood == "gaussian":
        var = F.var(0) + (1 / noise).mean(0)
        np.testing.assert_allclose(pr.mean, F.mean(0), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(pr.var, var, rtol=1e-8)
        ll = -0.5 * np.log(2 * np.pi / noise[:, None, :]) - 0.5 * noise[:, None, :] * (F - Yt) ** 2
        lpd = np.log(np.mean(np.exp(ll.sum(2)), axis=0))
        m = rs.metrics()["test"]
        assert m["mse"] == pytest.approx(np.mean(np.sum((F.mean(0) - Yt) ** 2, 1)), rel=1e-10)
        assert np.all(pr.lower < pr.mean) and np.all(pr.upper > pr.mean)
        np.testing.assert_allclose(pr.upper - pr.mean, 1.959963984540054 * np.sqrt(var), rtol=1e-8)
    else:
        P = _probs(F, likelihood)
        np.testing.assert_allclose(pr.probs, P.mean(0), rtol=1e-10, atol=1e-14)
        y = Yt[:, 0].astype(int)
        lpd = np.log(P.mean(0)[np.arange(len(y)), y])
        assert rs.metrics()["test"]["error_rate"] == np.mean(P.mean(0).argmax(1) != y)
        # Majority vote of the replicas' own averages.
        per = P.reshape(rs.n_chains, -1, *P.shape[1:]).mean(1).argmax(2)     # (R, N)
        counts = np.stack([(per == c).sum(0) for c in range(P.shape[2])], 1)
        clear = (counts == counts.max(1, keepdims=True)).sum(1) == 1
        np.testing.assert_array_equal(pr.vote[clear], counts.argmax(1)[clear])
    np.testing.assert_allclose(pr.lpd, lpd, rtol=1e-9)


def test_esjd_reward_from_the_record():
    rs = _replicas()
    res = advance(rs, Action(0.3, 9), 90)
    r = res.record
    manual = np.mean([(r.accept_prob[j] * r.squared_jump[j]).sum() for j in range(rs.n_chains)]) / 3.0
    assert esjd_reward(res) == pytest.approx(manual, rel=1e-12)
    assert np.all(r.squared_jump > 0)


def test_held_out_error_rejects_wrong_metric():
    rs = _replicas("logistic")
    res = advance(rs, Action(0.3, 5), 20)
    with pytest.raises(ValueError, match="regression"):
        held_out_error(res.held_out.accumulators[0], "logistic", "mse")
    assert math.isfinite(cv_error(res))


def test_runner_scores_failures_below_every_success():
    t = FixedTuner(step_factor=0.3, num_steps=5)
    assert fallback_reward([]) == -1.0
    for r in (-0.5, -0.2):
        t.tell(t.ask(), r)
    assert fallback_reward([h["reward"] for h in t.history]) == pytest.approx(-0.8)
    rs = _replicas()
    log = run_super_transitions(rs, t, 2, 20, reward=lambda res: float("nan"))
    assert [e["reward"] for e in log] == [None, None]
    assert all(math.isfinite(e["told"]) and e["told"] < -0.5 for e in log)


def test_no_cv_replicas_needs_the_full_data_chain():
    spec, X, Y = _toy()
    with pytest.raises(ValueError, match="full_data_chain"):
        NetworkChains(spec, X, Y, layout=Layout.cv(0, False))
    rs = NetworkChains(spec, X, Y, layout=Layout.cv(0), test_sets={"t": (X[:5], Y[:5])})
    res = advance(rs, Action(0.3, 5), 20)
    # 4 iterations of L = 5, one predicting (predict_steps 100), weighing the 4 x 5 steps it stands for
    assert res.held_out is None and rs.retained[0] == 1 and rs.test_count[0] == 4 * 5


# -- statistical ---------------------------------------------------------------------------

@pytest.mark.statistical
def test_replica_loop_predictive_mean_agrees_with_importance_sampling(tiny_bnn):
    """The compiled replica loop (HMC, accumulation of test predictions) against
    an independent importance-sampling estimate; batch means over super-transitions."""
    model, x_star, is_mean, is_se = tiny_bnn
    rs = NetworkChains(model.spec, model.X, model.Y, layout=Layout.cv(0), priors=model.priors,
                    initial_hyper=None, settings=HMCSettings(gibbs=False, jitter=True),
                    test_sets={"x": (x_star, np.zeros((3, 1)))}, burn_in_super_transitions=2, seed=11)
    for _ in range(82):
        advance(rs, Action(0.4, 20), 5000)
    batches = np.array([p[0, 0] / c[0] for p, c in zip(rs.history_pred[2:], rs.history_count[2:])])
    mean = rs.prediction("x").mean[:, 0]
    se = np.sqrt(batches.std(axis=0, ddof=1) ** 2 / len(batches) + is_se ** 2)
    # with jitter each super-transition weighs its leapfrog steps (run.weight_by), nearly equal
    assert np.allclose(mean, np.average(batches, axis=0, weights=[c[0] for c in rs.history_count[2:]]))
    assert np.all(se < 0.02), se
    assert np.all(np.abs(mean - is_mean) < Z * se), (mean, is_mean, se)


def test_robot_arm_short_run_beats_mean_and_widens_outside_training_region():
    arm = load_robot_arm()
    X, Y = arm.rows(1, 200)
    Xt, Yt = arm.rows(201, 400)
    # Inputs beyond the training region (x1 in [-1.93, -0.45], x2 in [0.53, 3.14]).
    far = np.column_stack([np.linspace(0.5, 1.5, 20), np.linspace(-1.5, -0.5, 20)])
    rs = NetworkChains(MLPSpec(2, (16,), 2), X, Y, layout=Layout.cv(4), seed=2,
                    test_sets={"test": (Xt, Yt), "far": (far, np.zeros((20, 2)))},
                    settings=HMCSettings(window=5, initial_phase_steps=1000),
                    burn_in_super_transitions=4)
    for _ in range(12):
        res = advance(rs, Action(0.3, 50), 1000)
    mse = rs.metrics()["test"]["mse"]
    mean_mse = np.mean(np.sum((Y.mean(0) - Yt) ** 2, 1))
    assert mse < 0.02 * mean_mse, (mse, mean_mse)
    assert cv_error(res) < 0.05 * mean_mse
    sd_in = rs.prediction("test").sd.mean()
    sd_far = rs.prediction("far").sd.mean()
    assert sd_far > 3 * sd_in, (sd_in, sd_far)


# -- scikit-learn style entry point --------------------------------------------------------

def test_regressor_fit_predict():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(60, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=60)
    m = BNNRegressor(hidden=(8,), chains=3, super_transitions=8, budget=400, num_steps_bounds=(5, 50),
                     initial_phase_steps=200, seed=1, max_seconds=None).fit(X, y)
    Xs = np.linspace(-2.5, 2.5, 30)[:, None]
    mean, sd = m.predict(Xs, return_std=True)
    assert mean.shape == sd.shape == (30,)
    assert np.mean((mean - np.sin(Xs[:, 0])) ** 2) < 0.02
    assert np.all(sd > 0.05)                               # the noise is part of the predictive sd
    far = m.predict(np.array([[8.0]]), return_std=True)[1]
    assert far[0] > 1.5 * sd.mean()                        # wider away from the data (1.9x in this short run)
    assert len(m.log_) == 8 and m.score(X, y) > 0.8


def test_classifier_fit_predict():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 2))
    y = np.where(X[:, 0] + X[:, 1] > 0, "a", "b")
    m = BNNClassifier(hidden=(4,), chains=3, super_transitions=6, budget=300, num_steps_bounds=(5, 50),
                      initial_phase_steps=200, seed=2, max_seconds=None).fit(X, y)
    P = m.predict_proba(X)
    assert P.shape == (80, 2) and np.allclose(P.sum(1), 1)
    assert set(m.predict(X)) <= {"a", "b"} and m.score(X, y) > 0.9


def test_bandit_drives_replicas():
    rs = _replicas()
    tuner = BanditTuner(BanditOptions.thesis({"step_factor": (0.05, 0.8), "num_steps": (2, 20)}, maxfun=200), seed=0)
    log = run_super_transitions(rs, tuner, 4, 60, reward=cv_reward)
    assert [e["i"] for e in log] == [0, 1, 2, 3]
    assert all(math.isfinite(e["reward"]) and e["reward"] == -e["cv_error"] for e in log)
    assert [h["action"]["num_steps"] for h in tuner.history] == [e["num_steps"] for e in log]


def test_predictions_from_chosen_chains_match_numpy_from_kept_samples():
    rs = _replicas(full_data_chain=True, predict_steps=0)              # every iteration predicts and is kept
    for _ in range(2):
        advance(rs, Action(0.3, 5), 100)
    D = rs.spec.n_params
    kept = [np.array(k)[:, :D] for k in rs.kept]
    for chains, rows in (("full", [rs.n_cv]), ("replicas", range(rs.n_cv)), ("all", range(rs.n_chains))):
        Q = np.concatenate([kept[r] for r in rows])
        mean = predict(rs.spec, Q, rs.X_test).mean(0)
        np.testing.assert_allclose(rs.prediction("test", chains=chains).mean, mean, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="allowed are"):
        rs.prediction("test", chains="some")
    with pytest.raises(ValueError, match="no full-data chain"):
        _replicas().prediction("test", chains="full")


@pytest.mark.parametrize("likelihood", ["gaussian", "logistic"])
def test_weight_by_gradients_weighs_each_sample_by_its_leapfrog_steps(likelihood):
    """Super-transitions at L = 2 and L = 10 with the same budget: under
    weight_by="gradients" every retained sample weighs its L, so both
    super-transitions weigh the same in the model average although the first
    has 5 times the samples; the mean, the predictive variance and the log
    predictive density equal a NumPy weighted average over the kept samples
    (thin 1, every iteration predicting), and kept weights, summary counts and the estimator agree.
    Under "iterations" the same samples give a different (unweighted) mean."""
    from adaptive_hmc.models.predictive import class_probabilities, predictive_moments
    means = {}
    for weight_by in ("gradients", "iterations"):
        rs = _replicas(likelihood, full_data_chain=True, weight_by=weight_by, predict_steps=0)
        advance(rs, Action(0.3, 2), 100)
        advance(rs, Action(0.3, 10), 100)
        A, chain, st = rs.kept_rows()
        w = rs.kept_weights()
        assert np.array_equal(w, np.where(st == 0, 2.0, 10.0) if weight_by == "gradients" else np.ones(len(A)))
        assert int(rs.retained.sum()) == len(A) == rs.n_chains * 60
        assert np.allclose(rs.test_count, 100.0 * 2 if weight_by == "gradients" else 60)
        W, noise, _ = rs.samples()
        F = predict(rs.spec, W, rs.X_test)                                         # (S, N, out)
        pr = rs.prediction("test")
        if likelihood == "gaussian":
            mean, var = predictive_moments(F, noise, w)
            np.testing.assert_allclose(pr.var, var, rtol=1e-9)
            dens = np.exp(np.sum(-0.5 * np.log(2 * np.pi / noise[:, None, :])
                                 - 0.5 * noise[:, None, :] * (F - rs.Y_test) ** 2, axis=2))
        else:
            mean = np.average(class_probabilities(F, likelihood), axis=0, weights=w)[:, 1:]
            p1 = class_probabilities(F, likelihood)[:, :, 1]
            dens = np.where(rs.Y_test[None, :, 0] == 1, p1, 1 - p1)
        np.testing.assert_allclose(pr.mean if likelihood == "gaussian" else pr.probs[:, 1:], mean, rtol=1e-9)
        np.testing.assert_allclose(pr.lpd, np.log(np.average(dens, axis=0, weights=w)), rtol=1e-9, atol=1e-12)
        means[weight_by] = mean
    assert np.max(np.abs(means["gradients"] - means["iterations"])) > 1e-3       # the weighting matters here
    from adaptive_hmc.diagnostics import compute_spaced              # the experiments' weighted draws
    assert compute_spaced([2.0, 2.0, 2.0]).tolist() == [0, 1, 2]
    assert compute_spaced([20.0, 40.0, 20.0, 100.0]).tolist() == [0, 1, 1, 2, 3, 3, 3, 3, 3]
    # at most max_draws draws: a coarser unit (total / max_draws), light draws may drop out
    assert compute_spaced([20.0, 40.0, 20.0, 100.0], max_draws=4).tolist() == [1, 3, 3, 3]
    assert len(compute_spaced([1.0] + [1000.0] * 9, max_draws=20)) <= 20
    with pytest.raises(ValueError, match="weight_by"):
        _replicas(weight_by="compute")


def test_default_reward_scores_a_stuck_setting_below_a_mixing_one():
    """A step factor past the cliff (every trajectory rejected) against one that
    mixes, each run from the same state: the default reward (ESJD/sqrt(L)) puts
    the stuck one far below, and so does the GP target the tuner makes of it;
    the thesis's CV reward barely tells them apart (the gap this reward closes)."""
    from adaptive_hmc.engine.network_options import NetworkOptions
    from adaptive_hmc.engine.runner import DEFAULT_REWARD, RunOptions, make_run
    from adaptive_hmc.tuners.options import FixedOptions
    assert DEFAULT_REWARD == "esjd"
    spec, X, Y = _toy()
    scores = {}
    for name, eps in (("stuck", 30.0), ("mixing", 0.3)):               # each from the same state (seeded)
        # Neal's Gibbs updates: the interweaving moves would change a stuck chain's weights all the same
        runs = make_run(spec, X, Y, tuner=FixedOptions(0.3, 20), run=RunOptions(1, 2000, seed=4),
                        network=NetworkOptions(layout=Layout.cv(4, False), settings=HMCSettings(window=3),
                                                priors=PriorSpec(hyper_moves="gibbs")))
        rs = runs.chains
        advance(rs, Action(0.2, 20), 2000)                              # leave the start
        res = advance(rs, Action(eps, 20), 400, rng=np.random.SeedSequence(9))
        scores[name] = (res.acceptance.mean(), runs.reward(res), cv_reward(res))
    (acc_stuck, esjd_stuck, cv_stuck), (acc_mix, esjd_mix, cv_mix) = scores["stuck"], scores["mixing"]
    assert acc_stuck == 0.0 and acc_mix > 0.5                            # the test has its two cases
    assert esjd_stuck < 1e-3 * esjd_mix
    t = BanditTuner(BanditOptions({"step_factor": (0.01, 31.0), "num_steps": (10, 30)}), seed=0)
    others = [({"step_factor": 0.3 + 0.01 * i, "num_steps": 20}, esjd_mix * (0.8 + 0.1 * i)) for i in range(4)]
    for a, r in [({"step_factor": 30.0, "num_steps": 20}, esjd_stuck), *others]:
        t.tell(a, r)
    m, _ = t.predict(np.array([[30.0, 20], [0.3, 20]]))
    assert m[0] < m[1]
    assert abs(cv_stuck - cv_mix) < 0.2 * abs(cv_mix)


def test_step_calibration_is_made_once_after_warm_up_and_kept_in_the_state():
    from adaptive_hmc.samplers.calibration import curvature_scale
    rs = _replicas(calibrate_after=1)
    steps = [advance(rs, Action(0.2, 10), 200).unit]                  # recorded, as a run's sample store does
    assert np.all(rs.step_calibration == 1.0)
    expected = [curvature_scale(r.model, c.position, c.hyper) for r, c in zip(rs.chain_data, rs.chains)]
    steps.append(advance(rs, Action(0.2, 10), 200).unit)
    assert rs.step_calibration == pytest.approx(expected, rel=1e-12) and np.all(rs.step_calibration != 1.0)
    state = rs.checkpoint()
    advance(rs, Action(0.2, 10), 200)
    assert rs.step_calibration == pytest.approx(expected, rel=1e-12)       # frozen
    fresh = _replicas(calibrate_after=1)
    fresh.restore(state, steps)
    assert np.array_equal(fresh.step_calibration, state["step_calibration"])
    with pytest.raises(ValueError, match="calibrate_after"):
        _replicas(calibrate_after=-1)


def test_an_absolute_base_step_is_scaled_by_the_step_factor():
    """With absolute base steps in the settings (sampler.base_step), a
    super-transition's steps are step_factor x base: base 0.002 at factor 1.5
    runs bit for bit as base 0.003 at factor 1, and not as base 0.002 at factor 1."""
    def run(base, factor):
        rs = _replicas(settings=HMCSettings(step_size=np.array([base]), window=2))
        return advance(rs, Action(factor, 8), 96).record

    a, b, c = run(0.002, 1.5), run(0.003, 1.0), run(0.002, 1.0)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not np.array_equal(a.energy, c.energy)
    assert a.accept_prob.mean() > 0.5           # a step the chains take


def test_base_step_from_a_config(tmp_path, capsys):
    import yaml

    from adaptive_hmc.front.cli import main
    from adaptive_hmc.config import read_config
    raw = yaml.safe_load((Path(__file__).resolve().parents[1] / "configs" / "robot_arm_human_quick.yaml").read_text())
    raw["sampler"].update(base_step=0.002, step_nu=0.5)
    raw["tuner"]["step_factor"] = 1.0
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    s = read_config(path).sampler.settings()
    assert s.step_size.tolist() == [0.002] and s.step_factor == 0.0
    assert main(["validate", str(path)]) == 0
    raw["sampler"]["calibrate_steps"] = True
    path.write_text(yaml.safe_dump(raw))
    assert main(["validate", str(path)]) == 2
    assert "sampler.calibrate_steps = True: calibrates FBM's heuristic scales" in capsys.readouterr().err


@pytest.mark.parametrize("model", ["neal1992", "neal1993"])
def test_annealed_chains_of_neals_models_resume_bit_for_bit(model):
    """Replicas of Neal's models annealed by a schedule (sampler.anneal): the
    schedule runs across super-transitions (hot first, then cooled), each
    chain's dummy kinetic energy is part of the saved state, and a set
    restored from a mid-run state continues exactly as the uninterrupted one;
    kept positions map to weights with the noise precision of eq 35."""
    arm = load_robot_arm()
    (X, Y) = arm.rows(1, 40)
    settings = HMCSettings(step_size=np.array([1e-4 if model == "neal1992" else 2e-3]), step_nu=0.5,
                           gibbs=False, anneal=np.array([[6, 0.0, 20.0], [6, 0.5, 1.0], [100, 0.0, 1.0]]))

    def make():
        return NetworkChains(MLPSpec(2, (3,), 2), X, Y, layout=Layout.cv(2), settings=settings, seed=5,
                          model=model, thin=1, test_sets={"t": arm.rows(401, 420)}, threads=1)

    rs = make()
    results = [advance(rs, Action(1.0, 20), 120) for _ in range(2)]
    temps = [r.record.temperature.mean() for r in results]
    assert temps[0] > 5.0 > temps[1]                   # 6 hot iterations then cooling
    state, steps = rs.checkpoint(), [r.unit for r in results]
    assert all(not np.isclose(c.kd[0], 0.5 * rs.dim) for c in rs.chains)
    a = [advance(rs, Action(1.0, 20), 120).record for _ in range(2)]
    fresh = make()
    fresh.restore(state, steps)
    b = [advance(fresh, Action(1.0, 20), 120).record for _ in range(2)]
    for ra, rb in zip(a, b):
        assert np.array_equal(ra.energy, rb.energy) and np.array_equal(ra.temperature, rb.temperature)
    W, noise, chain = rs.samples()
    A, _, _ = rs.kept_rows()
    j = chain[-1]
    np.testing.assert_allclose(W[-1], rs.chain_data[j].model.weights(A[-1, :rs.dim])[0])
    assert W.shape == (len(A), rs.spec.n_params) and noise.shape == (len(A), 2) and np.all(noise > 0)


def test_chains_of_one_posterior_see_every_case_from_their_own_starts():
    """data="full": k chains, every one on all the training cases (no fold
    held out), each from its own start and on its own stream, so their first
    super-transitions differ; one such chain with FBM's zero start is the old
    full-data chain alone (folds, k=0) bit for bit."""
    spec, X, Y = _toy()
    rs = NetworkChains(spec, X, Y, layout=Layout.chains(3), seed=4, thin=1)
    assert rs.n_cv == 0 and rs.folds == [] and rs.n_chains == 3
    assert list(rs.chain_indices("full")) == list(rs.chain_indices("all")) == [0, 1, 2]
    for r in rs.chain_data:
        assert r.model.n_cases == len(X) and r.held.YT.shape[1] == 0
    starts = np.array([c.position.copy() for c in rs.chains])
    assert np.all(np.abs(starts) > 0) and len({s.tobytes() for s in starts}) == 3      # N(0, 0.1^2), apart
    advance(rs, Action(0.3, 10), 200)
    ends = np.array([c.position for c in rs.chains])
    assert len({e.tobytes() for e in ends}) == 3
    with pytest.raises(ValueError, match="replicas"):
        rs.chain_indices("replicas")
    one = NetworkChains(spec, X, Y, layout=Layout.chains(1), seed=4, init_scale=0.0, thin=1)
    old = NetworkChains(spec, X, Y, layout=Layout.cv(0), seed=4, thin=1)
    for s in (one, old):
        advance(s, Action(0.3, 10), 200)
    assert np.array_equal(one.chains[0].position, old.chains[0].position)
    assert np.array_equal(one.kept_rows()[0], old.kept_rows()[0])
    with pytest.raises(ValueError, match="full_data_chain=True \\(data='full'\\): is for cross-validation folds"):
        NetworkChains(spec, X, Y, layout=Layout("full", 2, True, "full"))


def test_every_gradient_evaluation_is_counted():
    """A super-transition counts its leapfrog steps and, per iteration, the
    energy evaluations of the Gibbs update (the noise's forward pass and the
    gradient after it; or, while the
    hyperparameters are held, one at the start of each chain's super-transition),
    and the step calibration's; the run's log and summary carry the total."""
    from adaptive_hmc.samplers.calibration import CURVATURE_EVALUATIONS
    from adaptive_hmc.samplers.chain import HYPER_MOVE_STEPS
    held = _replicas(settings=HMCSettings(initial_phase_steps=10 ** 6))
    res = advance(held, Action(0.3, 5), 100)
    assert res.gradients == res.leapfrog_steps + held.n_chains                 # one at each chain's start
    gibbs = _replicas(settings=HMCSettings(initial_phase_steps=0), calibrate_after=1,
                      priors=PriorSpec(hyper_moves="gibbs"))
    res = advance(gibbs, Action(0.3, 5), 100)
    # two for each Gibbs update of the Gaussian network: the noise's forward pass and the gradient
    assert res.gradients == res.leapfrog_steps + gibbs.n_chains * 2 * res.n_iter
    res = advance(gibbs, Action(0.3, 5), 100)
    assert res.gradients == res.leapfrog_steps + gibbs.n_chains * (2 * res.n_iter + CURVATURE_EVALUATIONS)
    moves = _replicas(settings=HMCSettings(initial_phase_steps=0))               # with the interweaving moves,
    res = advance(moves, Action(0.3, HYPER_MOVE_STEPS), 3 * HYPER_MOVE_STEPS)                # their forward passes count too
    n_dirs = len(moves.chain_data[0].model.target.scale_dirs)
    assert res.gradients >= res.leapfrog_steps + moves.n_chains * res.n_iter * (1 + 2 * n_dirs)
    assert res.record.gradients.sum() == res.gradients
    log = run_super_transitions(_replicas(), FixedTuner(step_factor=0.3, num_steps=5), 2, 100)
    assert all(e["gradients"] > e["leapfrog_steps"] for e in log)


def test_a_probe_leaves_the_state_as_it_was_and_is_seeded_by_its_place():
    """NetworkChains.probe tries an action on copies of the chains: the state (its
    chains, streams and totals) is the same object afterwards and the next
    super-transition makes the same bits as without the probe; the probe runs
    PROBE_TRAJECTORIES trajectories a chain (three with jitter), counts its
    gradients, and draws the same numbers for the same (super-transition, k)
    and others for another k."""
    from adaptive_hmc.engine.super_transition import PROBE_TRAJECTORIES
    a, b = _replicas(full_data_chain=True), _replicas(full_data_chain=True)
    advance(a, Action(0.3, 10), 100)
    advance(b, Action(0.3, 10), 100)
    before = a.state
    p1, p2, p3 = a.probe(Action(0.5, 12), 100, 0), a.probe(Action(0.5, 12), 100, 0), a.probe(Action(0.5, 12), 100, 1)
    assert a.state is before
    assert np.array_equal(p1.record.accept_prob, p2.record.accept_prob)
    assert not np.array_equal(p1.record.accept_prob, p3.record.accept_prob)
    assert p1.n_iter == (3 if a.settings.jitter else PROBE_TRAJECTORIES)
    assert p1.gradients == int(p1.record.gradients.sum()) > 0
    ra, rb = advance(a, Action(0.3, 10), 100), advance(b, Action(0.3, 10), 100)
    for u, v in zip(ra.record, rb.record):
        assert np.array_equal(u, v)
    assert all(np.array_equal(u, v) for c, d in zip(a.state.chains, b.state.chains)
               for u, v in zip(chain_arrays(c), chain_arrays(d)))


class _Scripted:
    """A tuner with the feasibility model's attribute that asks the given
    actions in turn, moving on at each tell, and keeps what it was told."""

    accept_floor = 0.8

    def __init__(self, actions):
        self.actions, self.history = list(actions), []

    def ask(self):
        return dict(self.actions[0])

    def tell(self, action, reward, acceptance=None, transient=False):
        self.history.append({"action": dict(action), "reward": reward, "acceptance": acceptance,
                             "transient": transient})
        if len(self.actions) > 1:
            self.actions.pop(0)


def test_a_move_past_the_tried_step_factors_is_probed_and_a_failed_probe_is_not_run():
    """With a tuner that learns where actions fail, a move to a step factor
    past every feasible one told is tried first: one past the cliff (every
    trajectory rejected) is told with acceptance 0 (not transient: every chain
    failed) and no super-transition runs at it (no chain is stuck); one that
    mixes passes and runs; the first told action is probed too (it passes);
    the probes' gradients count in the super-transition's. A tuner without an
    accept_floor (the thesis's) is never probed, and its chains get stuck there."""
    actions = [{"step_factor": 0.1, "num_steps": 10}, {"step_factor": 40.0, "num_steps": 10},
               {"step_factor": 0.15, "num_steps": 10}]
    tuner = _Scripted(actions)
    log = run_super_transitions(_replicas(layout=Layout.chains(4), test_sets=None, priors=PriorSpec(hyper_moves="gibbs")),
                                tuner, 2, 200)
    assert [e["step_factor"] for e in log] == [0.1, 0.15]
    (first,) = log[0]["probes"]
    assert first["step_factor"] == 0.1 and first["passed"]
    failed, passed = log[1]["probes"]
    assert failed["step_factor"] == 40.0 and not failed["passed"] and failed["min_accept_prob"] < 0.1
    assert passed["step_factor"] == 0.15 and passed["passed"] and passed["min_accept_prob"] >= 0.1
    assert [h["action"]["step_factor"] for h in tuner.history] == [0.1, 40.0, 0.15]
    assert tuner.history[0]["acceptance"] >= 0.8 and tuner.history[1]["acceptance"] == 0.0
    assert not tuner.history[1]["transient"]
    own = log[1]["gradients"] - failed["gradients"] - passed["gradients"]
    assert failed["gradients"] > 0 and passed["gradients"] > 0
    assert log[1]["leapfrog_steps"] <= own <= log[1]["leapfrog_steps"] + 4 * (2 * log[1]["iterations"] + 1)
    assert all(not e["stuck_chains"] for e in log)
    thesis = _Scripted(actions[:2])
    thesis.accept_floor = None
    log = run_super_transitions(_replicas(layout=Layout.chains(4), test_sets=None), thesis, 2, 200)
    assert all(e["probes"] == [] for e in log) and log[1]["step_factor"] == 40.0 and log[1]["stuck_chains"]


def test_which_moves_are_probed():
    """Probed: a step factor above 1.05 times every one told feasible, or any
    action while every one told failed, or none was told (the first told
    action: the warm-up ran there from a cold start); never for a tuner
    without an accept_floor."""
    from adaptive_hmc.engine.runner import _untried_high
    t = _Scripted([{"step_factor": 0.1, "num_steps": 10}])
    assert _untried_high(t, {"step_factor": 0.1})
    t.history = [{"action": {"step_factor": 0.1}, "acceptance": 0.9},
                 {"action": {"step_factor": 0.5}, "acceptance": 0.0}]
    assert _untried_high(t, {"step_factor": 0.11}) and not _untried_high(t, {"step_factor": 0.104})
    assert not _untried_high(t, {"step_factor": 0.05})
    t.history = [{"action": {"step_factor": 0.1}, "acceptance": 0.3}]
    assert _untried_high(t, {"step_factor": 0.01})
    t.accept_floor = None
    assert not _untried_high(t, {"step_factor": 5.0})


def test_class_probabilities_of_extreme_logits_are_exact_and_silent():
    """Logits far past exp's range (a saturated network's) give probabilities
    without an overflow warning, each class's from its own sign (no 1 - p)."""
    import warnings
    from adaptive_hmc.models.predictive import class_probabilities
    F = np.array([[[-1000.0], [0.0], [800.0], [-40.0]]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        P = class_probabilities(F, "logistic")
    assert np.array_equal(P[0, :3], [[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    assert P[0, 3, 1] == pytest.approx(math.exp(-40.0), rel=1e-12) and P[0, 3, 0] == 1.0


def test_the_checks_gather_only_the_draws_they_read_and_give_the_same_figures():
    """kept_rows(at) gathers rows ``at`` alone, equal to those of every row gathered; chain_diagnostics
    (the checks of a run that goes on until its chains meet) gathers only the chains' diagnostic draws,
    and its figures equal those computed from every kept row, for the full-data chain and for all."""
    from adaptive_hmc.rundir.metrics import kept_samples, chain_diagnostics
    rs = _replicas(full_data_chain=True, predict_steps=0, thin=1)
    for _ in range(6):
        advance(rs, Action(0.3, 5), 100)
    A, chain, st = rs.kept_rows()
    at = np.random.default_rng(3).choice(len(A), 40, replace=False)
    B, c, s = rs.kept_rows(at)
    assert np.array_equal(B, A[at]) and np.array_equal(c, chain[at]) and np.array_equal(s, st[at])
    assert rs.kept_rows(at[:0])[0].shape == (0, A.shape[1])
    log = [{"leapfrog_steps": 400, "gradients": 500}] * 6
    for chains in ("full", "all"):
        fewer = kept_samples(rs, draws_of=rs.chain_indices(chains))
        assert 0 < len(fewer["chain"]) < len(A)
        assert chain_diagnostics(rs, log, 1.0, chains) == chain_diagnostics(rs, log, 1.0, chains, kept_samples(rs))
