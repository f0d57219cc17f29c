"""Each chain's own convergence and the verdict of three cases (the chains met; they are still moving; each
settled, apart from the others), and the chains' stacked predictive offered for the last (Yao, Vehtari &
Gelman 2022)."""
import numpy as np
import pytest
from scipy import optimize, stats

from adaptive_hmc.diagnostics import (APART, MET, MOVING, SETTLED_RHAT, chain_loo, stacked_log_score,
                                      stacking_weights, verdict, within_chain_rhat)
from adaptive_hmc.diagnostics import chain_statistics


def _ar1(rng, chains, n, rho, v=1):
    """Stationary AR(1) draws (chains, n, v) of unit marginal variance."""
    y = np.empty((chains, n, v))
    y[:, 0] = rng.normal(size=(chains, v))
    e = rng.normal(size=(chains, n, v)) * np.sqrt(1 - rho ** 2)
    for t in range(1, n):
        y[:, t] = rho * y[:, t - 1] + e[:, t]
    return y


def _case(y):
    st = chain_statistics(y)
    return verdict(float(np.max(st["rhat"])), np.max(within_chain_rhat(y), axis=1))


def test_each_chains_own_split_rhat_is_arviz_rhat_of_its_halves():
    import arviz as az
    y = _ar1(np.random.default_rng(0), 3, 400, 0.9, 2)
    own = within_chain_rhat(y)
    assert own.shape == (3, 2)
    for c in range(3):
        for v in range(2):
            halves = np.stack([y[c, :200, v], y[c, 200:, v]])
            assert own[c, v] == pytest.approx(float(az.rhat(halves)), rel=1e-9)


def test_chains_that_drift_within_themselves_are_still_moving():
    """Slow chains (AR(1), autocorrelation time ~ the run): each one's halves disagree, so the verdict is
    "moving" (more time), not "apart", in every one of 20 seeds."""
    cases = [_case(_ar1(np.random.default_rng(s), 4, 400, 0.995)) for s in range(20)]
    assert cases.count(MOVING) == 20


def test_chains_settled_in_two_separated_modes_are_apart_and_mixed_ones_met():
    """Independent draws in one of two modes per chain (two chains at -3, two at +3): each chain has settled,
    they sit apart (R-hat far above 1.1): "apart" in every seed. Power: the same draws all in one mode are
    "met"; and where the chains hop between the modes slowly, "moving"."""
    for s in range(20):
        rng = np.random.default_rng(s)
        y = rng.normal(size=(4, 400, 3))
        assert _case(y) == MET
        y[:, :, 1] += np.array([-3.0, -3.0, 3.0, 3.0])[:, None]
        own = np.max(within_chain_rhat(y), axis=1)
        assert np.all(own <= SETTLED_RHAT)
        assert _case(y) == APART
    hop = np.where(_ar1(np.random.default_rng(1), 4, 400, 0.995) > 0, 3.0, -3.0) + \
        np.random.default_rng(2).normal(size=(4, 400, 1))
    assert _case(hop) == MOVING


def test_a_chain_that_never_moved_is_not_settled():
    y = np.random.default_rng(0).normal(size=(4, 100, 2))
    y[2, :, 0] = 0.5
    own = np.max(within_chain_rhat(y), axis=1)
    assert not np.isfinite(own[2])
    assert verdict(None, own) == MOVING
    assert verdict(1.005, own) == MET and verdict(None, np.array([1.0])) == MOVING     # one chain: never apart


def test_stacking_weights_match_a_direct_optimisation():
    """The EM solve against SLSQP on the simplex (several starts) on known matrices of per-chain predictive
    densities: the same objective to 1e-7 and the same weights to 1e-3."""
    rng = np.random.default_rng(4)
    for K in (2, 3, 5):
        lpd = np.log(rng.uniform(0.01, 1.0, size=(80, K))) + rng.normal(0, 0.5, size=(1, K))
        w = stacking_weights(lpd)
        assert w.min() >= 0 and w.sum() == pytest.approx(1.0)

        def neg(v):
            return -np.sum(np.log(np.exp(lpd) @ v))
        best = min((optimize.minimize(neg, x0, method="SLSQP", bounds=[(0, 1)] * K,
                                      constraints=[{"type": "eq", "fun": lambda v: v.sum() - 1}],
                                      options={"ftol": 1e-14, "maxiter": 1000})
                    for x0 in rng.dirichlet(np.ones(K), size=5)), key=lambda r: r.fun)
        assert -neg(w) == pytest.approx(-best.fun, abs=1e-7)
        assert np.allclose(w, best.x, atol=1e-3)
    one = np.log(np.array([[0.9, 0.1]] * 10))                        # one distribution better on every case
    assert stacking_weights(one) == pytest.approx([1.0, 0.0], abs=1e-6)


def test_stacked_predictive_of_two_modes_scores_no_worse_than_equal_weights():
    """A two-mode example: y ~ N(2, 1); chains 0-1 sampled around the mode mu = 2, chains 2-3 around a
    spurious mode mu = -1. Each chain's PSIS-LOO densities give stacking weights on the good chains, and the
    stacked predictive's test log score is above the equal-weight mixture's (and no worse in every seed)."""
    for s in range(5):
        rng = np.random.default_rng(s)
        y_train, y_test = rng.normal(2, 1, 60), rng.normal(2, 1, 500)
        mu = np.concatenate([rng.normal(2, 0.15, (2, 300)), rng.normal(-1, 0.15, (2, 300))])   # (chains, draws)
        ll_train = stats.norm.logpdf(y_train[None, None], mu[..., None], 1.0)
        lpd, khat = chain_loo(ll_train)
        assert lpd.shape == (60, 4) and khat.shape == (4, 60) and khat.max() < 0.7
        w = stacking_weights(lpd)
        assert w[:2].sum() > 0.9
        ll_test = stats.norm.logpdf(y_test[None, None], mu[..., None], 1.0)
        dens = (np.log(np.exp(ll_test).mean(axis=1))).T                                     # (cases, chains)
        stacked, equal = stacked_log_score(dens, w), stacked_log_score(dens, np.full(4, 0.25))
        assert stacked >= equal and stacked > equal + 0.1


def test_the_warning_names_the_case_and_each_chains_own_rhat():
    from adaptive_hmc.rundir.verdicts import diagnostics_line, rhat_warning
    base = {"chains": "full", "rhat_max": 1.3, "hyper": {"rhat_max": 1.3, "apart": None},
            "within_chain": {"predictions": [1.2, 1.01], "hyper": [1.3, 1.02]}}
    moving = rhat_warning({**base, "verdict": MOVING})
    assert "still moving" in moving and "predictions 1.200, 1.010; log hyperparameters 1.300, 1.020" in moving
    apart = rhat_warning({**base, "verdict": APART})
    assert "settled" in apart and "stacked predictive" in apart and "not the posterior" in apart
    summary = {"diagnostics": {**base, "verdict": APART, "draws": "samples", "distinct_draws": 100,
                               "gradients": 1000, "sampling_s": 1.0,
                               "test": {"t": {"chains": 2, "rhat_max": 1.3,
                                              "ess_bulk": {"min": 10.0, "median": 20.0},
                                              "ess_per_1000_gradients": {"min": 1.0, "median": 2.0},
                                              "ess_per_second": {"min": 1.0, "median": 2.0}}}}}
    line = diagnostics_line(summary)
    assert "each chain's own split R-hat: predictions 1.200, 1.010" in line and "settled apart" in line


def test_moving_chains_with_enough_ess_are_told_how_much_longer_by_their_rhat():
    """R-hat 1.016 with an ESS of 476 (the hierarchical robot arm at its 600 s): (1.016^2 - 1) / (1.01^2 - 1)
    = 1.6 times the draws; below 400 the ESS sets the estimate as before."""
    from adaptive_hmc.diagnostics import run_longer
    line = run_longer("the log hyperparameters", 476.0, lambda f: f"--extend {int(f * 100)}", rhat=1.016)
    assert "R-hat is 1.016; about 1.6 times the draws" in line and "(--extend 160)" in line
    assert "about 5.0 times the draws" in run_longer("x", 80.0, rhat=1.3)
    assert run_longer("x", 476.0) == "Run longer (more super-transitions)"


def test_chain_stacking_of_a_run_weighs_the_chains_that_predict_the_training_cases():
    """metrics.chain_stacking on kept draws of a small network: two chains near weights that fit y = 2 x, two
    near weights that fit y = -2 x (the data follow the first): the stacking weights go to the first two, the
    stacked test log score beats the equal-weight mixture, every Pareto k is counted; None for one chain."""
    from adaptive_hmc.models.mlp import MLPSpec, predict
    from adaptive_hmc.rundir.metrics import chain_stacking
    spec = MLPSpec(1, (2,), 1)
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(80, 1))
    fit = optimize.least_squares(lambda w: (predict(spec, w, X)[:, 0] - 2 * X[:, 0]), rng.normal(size=spec.n_params))
    w_good, w_bad = fit.x, fit.x.copy()
    w_bad[-3:] *= -1                                        # the output layer's sign flipped: y = -2 x
    n = 60
    W = np.concatenate([w + 0.01 * rng.normal(size=(2 * n, spec.n_params)) for w in (w_good, w_bad)])
    kept = {"weights": W, "noise_precision": np.full((4 * n, 1), 25.0), "chain": np.repeat(np.arange(4), n),
            "diagnostic": np.ones(4 * n), "target_mean": np.zeros(1), "target_sd": np.ones(1)}
    Y = 2 * X + 0.2 * rng.normal(size=X.shape)
    Xt = rng.uniform(-1, 1, size=(50, 1))
    out = chain_stacking(spec, kept, [0, 1, 2, 3], (X, Y), {"test": (Xt, 2 * Xt + 0.2 * rng.normal(size=Xt.shape))})
    assert sum(out["weights"]) == pytest.approx(1.0) and sum(out["weights"][:2]) > 0.99
    score = out["test_log_score"]["test"]
    assert score["stacked"] > score["equal_weights"]
    assert len(out["pareto_k_above_0.7"]) == 4 and "not the posterior" in out["what"]
    assert chain_stacking(spec, kept, [0], (X, Y), {}) is None


def test_each_chains_own_split_rhat_in_the_summary_is_arviz_below_1_included():
    """summary.json's ``within_chain`` (run_diagnostics, from each super-transition's mean prediction and
    hyperparameters) is each chain's largest own split R-hat as ArviZ computes it: for independent draws it is
    often a little below 1, and is reported so, not raised to 1 (on any machine: the draws here are numpy's)."""
    import arviz as az
    from types import SimpleNamespace
    from adaptive_hmc.rundir.metrics import run_diagnostics
    rng = np.random.default_rng(5)
    S, R, N = 40, 3, 2
    pred, hyper = rng.normal(size=(S, R, 1, N)), np.exp(rng.normal(size=(S, R, 2)))
    kept = {"chain": np.zeros(0, int), "weight": np.zeros(0)}
    d = run_diagnostics(SimpleNamespace(n_outputs=1), kept, [0, 1, 2], "full",
                        {"X_test": np.zeros((N, 1)), "history_pred": pred, "history_count": np.ones((S, R))},
                        {"rest": slice(0, N)}, hyper, 1000, 1.0, ["a", "b"])
    draws = {"predictions": np.transpose(pred[:, :, 0], (1, 0, 2)), "hyper": np.transpose(np.log(hyper), (1, 0, 2))}
    below = 0
    for key, y in draws.items():
        expected = [max(float(az.rhat(np.stack([y[c, :S // 2, v], y[c, S // 2:, v]]))) for v in range(y.shape[2]))
                    for c in range(R)]
        assert d["within_chain"][key] == pytest.approx(expected, abs=1e-4)
        below += sum(e < 1 for e in expected)
    assert below >= 1                                      # the case a floor at 1 got wrong
