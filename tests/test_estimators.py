"""The estimators follow scikit-learn's conventions: its own estimator checks,
run at a tiny budget (every check but the two accuracy checks, which are run
separately at a budget that can learn)."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.utils.estimator_checks import check_classifiers_train, check_estimator, check_regressors_train

from adaptive_hmc import BNNClassifier, BNNRegressor
from adaptive_hmc.rundir.metrics import untimed

TINY = dict(hidden=(4,), chains=2, super_transitions=3, budget=60, num_steps_bounds=(5, 20), initial_phase_steps=0,
            thin=1, threads=1, max_seconds=None)
FAIR = dict(TINY, super_transitions=12, budget=400, num_steps_bounds=(5, 40))
ACCURACY = "an accuracy check: a 3-super-transition fit of 60 leapfrog steps cannot learn (run at a fair budget below)"


@pytest.mark.parametrize("cls", [BNNRegressor, BNNClassifier], ids=lambda c: c.__name__)
def test_scikit_learn_estimator_checks(cls):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)      # tiny fits are short by design
        results = check_estimator(cls(**TINY), on_fail=None,
                                  expected_failed_checks={"check_regressors_train": ACCURACY,
                                                          "check_classifiers_train": ACCURACY})
    failed = [(r["check_name"], repr(r["exception"])[:200]) for r in results if r["status"] == "failed"]
    assert len(results) > 50 and not failed, failed


@pytest.mark.slow
def test_accuracy_checks_at_a_fair_budget():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check_regressors_train("BNNRegressor", BNNRegressor(**FAIR))
        check_classifiers_train("BNNClassifier", BNNClassifier(**FAIR))


def test_the_convergence_warning_says_how_to_run_longer():
    """Chains that have not met: the warning says how many more
    super-transitions a warm start needs (max_seconds=None: the
    super_transitions to ask for; running until the chains meet: how many more
    and their seconds at this pace)."""
    import re
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    y = X[:, 0] + 0.1 * rng.normal(size=30)
    for options, pattern in [(TINY, r"fit again with warm_start=True and super_transitions=(\d+)\)"),
                             (dict(TINY, max_seconds=1e-3), r"fit again with warm_start=True: about (\d+) more "
                                                            r"super-transitions, \d+ s of sampling")]:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always", ConvergenceWarning)
            BNNRegressor(**options).fit(X, y)
        found = [re.search(pattern, str(w.message)) for w in said if w.category is ConvergenceWarning]
        found = [f for f in found if f]
        assert found and int(found[0].group(1)) > 3, [str(w.message) for w in said]


def test_clear_errors_and_warnings():
    X = np.random.default_rng(0).normal(size=(30, 2))
    y = X[:, 0] + 0.1 * X[:, 1]
    with pytest.raises(NotFittedError):
        BNNRegressor().predict(X)
    with pytest.raises(ValueError, match="Unknown label type"):
        BNNClassifier(**TINY).fit(X, y)                         # continuous y is not 30 classes
    with pytest.raises(ValueError, match=r"num_steps_bounds=\(10, 500\), budget=100: the longest trajectory "
                                         r"\(500\) must be at most the budget"):
        BNNRegressor(budget=100, num_steps_bounds=(10, 500)).fit(X, y)
    with pytest.raises(ValueError, match="Reshape your data"):
        BNNRegressor(**TINY).fit(X[:, 0], y)
    with pytest.raises(ValueError, match="thin=0: keep every thin-th sample, an integer >= 1"):   # before sampling
        BNNRegressor(**{**TINY, "thin": 0}).fit(X, y)
    X_nan = X.copy()
    X_nan[5, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):                 # found before any standardisation
        BNNRegressor(**TINY).fit(X_nan, y)
    with pytest.warns(ConvergenceWarning, match="very short run"):
        m = BNNRegressor(**dict(TINY, hidden=4)).fit(X, y)      # an int is one hidden layer
    assert m.spec_.hidden == (4,) and m.n_features_in_ == 2
    with pytest.warns(ConvergenceWarning, match="accepted no trajectory"):
        BNNRegressor(**dict(TINY, step_factor_bounds=(30.0, 40.0))).fit(X, y)


def test_a_fit_reports_the_diagnostics_of_its_posterior_chains(monkeypatch):
    """diagnostics_: R-hat and ESS of the fitted values (a seeded subset of at
    most CHECK_CASES training cases) across the k chains of the posterior, per
    1000 of every gradient the fit computed; chains that cannot have met (too
    short a fit) are warned about."""
    from adaptive_hmc.front import estimator
    monkeypatch.setattr(estimator, "CHECK_CASES", 30)
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = BNNRegressor(**FAIR).fit(X, y)
    d = m.diagnostics_["test"]["training"]
    grads = sum(e["gradients"] for e in m.log_)
    assert d["chains"] == 2 and d["variables"] == 30 and m.diagnostics_["gradients"] == grads
    assert m.diagnostics_["fitted_cases"] == {"cases": 30, "of": 40}
    own = m.diagnostics_["within_chain"]                                # each chain's own split R-hat
    assert len(own["predictions"]) == 2 and len(own["hyper"]) == 2
    assert m.diagnostics_["verdict"] in ("met", "moving", "apart")
    assert d["ess_per_1000_gradients"]["median"] == pytest.approx(1000 * d["ess_bulk"]["median"] / grads)
    after_burn_in = m.chains_.kept_rows()[2] >= m._burn_in(m.chains_.n_super)
    assert len(m.weights_) == int(after_burn_in.sum())                  # every chain is the posterior's
    with pytest.warns(ConvergenceWarning, match="R-hat across the 'full' chains"):
        BNNRegressor(**TINY).fit(X, y)


@pytest.mark.parametrize("cls", [BNNRegressor, BNNClassifier], ids=lambda c: c.__name__)
def test_every_documented_parameter_is_accepted(cls):
    """Each parameter the docstring documents is a keyword of the constructor
    (BNNClassifier once documented weight_by and refused it)."""
    import re
    documented = set(re.findall(r"^    (\w+(?:, \w+)*) :", cls.__doc__, flags=re.M))
    names = {n for group in documented for n in group.split(", ")}
    params = cls().get_params()
    assert names and names <= set(params), names - set(params)
    assert cls(weight_by="iterations").get_params()["weight_by"] == "iterations"


def test_a_fit_runs_until_its_chains_meet_or_its_time_is_up():
    """With ``max_seconds`` a fit goes on past ``super_transitions`` until R-hat
    <= 1.01 and the ESS of the fitted values reach ``target_ess`` (checked on the
    samples after the first quarter of the run), or stops at the time limit with a
    warning that says how far it got."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 2))
    y = np.sin(X[:, 0]) + 0.3 * rng.normal(size=40)
    opts = dict(FAIR, super_transitions=6, max_seconds=120.0, target_ess=100)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)          # it converges: no warning
        m = BNNRegressor(**opts).fit(X, y)
    c, n = m.convergence_, m.chains_.n_super
    assert c["met"] and c["super_transitions"] == n > 6 and len(m.log_) == n
    st = m.chains_.kept_rows()[2]
    assert len(m.weights_) == int((st >= max(6 // 3, n // 4)).sum())      # the first quarter is burn-in
    d = m.diagnostics_
    assert d["rhat_max"] <= 1.01 and d["test"]["training"]["ess_bulk"]["min"] > 50
    with pytest.warns(ConvergenceWarning, match=r"stopped at the time limit, max_seconds=1e-06, after 6 "
                                                r"super-transitions, before the chains met: R-hat max"):
        m = BNNRegressor(**dict(opts, max_seconds=1e-6)).fit(X, y)
    assert m.chains_.n_super == 6 and not m.convergence_["met"]
    with pytest.raises(ValueError, match="max_seconds=0, target_ess=100: both > 0"):
        BNNRegressor(**dict(opts, max_seconds=0)).fit(X, y)


def test_warm_start_continues_the_chains_as_one_longer_fit():
    """fit(6), then warm_start to 9: the kept samples, weights, diagnostics
    and log of one fit of 9; changed data or a parameter that decides the
    draws is refused, naming it."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=30)
    opts = dict(FAIR, max_seconds=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        long = BNNRegressor(**dict(opts, super_transitions=9)).fit(X, y)
        m = BNNRegressor(**dict(opts, super_transitions=6, warm_start=True)).fit(X, y)
        assert m.chains_.n_super == 6
        m.set_params(super_transitions=9).fit(X, y)
    assert m.chains_.n_super == 9 and np.array_equal(m.weights_, long.weights_)
    assert np.array_equal(m.sample_weights_, long.sample_weights_)
    assert np.array_equal(m.predict(X), long.predict(X))
    strip = [untimed(e) for e in long.log_]
    assert [untimed(e) for e in m.log_] == strip
    assert untimed(m.diagnostics_) == untimed(long.diagnostics_)
    with pytest.raises(ValueError, match="X or y differ"):
        m.fit(X[:-1], y[:-1])
    with pytest.raises(ValueError, match=r"budget=500 \(was 400\)"):
        m.set_params(budget=500).fit(X, y)


def test_class_probabilities_are_distributions_to_the_last_bit():
    """The samples' weighted average of class probabilities that are all 1 for
    one class can round to 1 + 2^-52, which scikit-learn's metrics refuse
    (this test meets such cases: the plain average exceeds 1 in some); the
    averaged probabilities stay in [0, 1], sum to 1 and log_loss takes them."""
    from sklearn.metrics import log_loss
    from adaptive_hmc.models.predictive import class_probabilities, predictive_probabilities
    rng = np.random.default_rng(0)
    exceeded = 0
    for _ in range(50):
        S = int(rng.integers(3, 400))
        F = np.zeros((S, 5, 3))
        F[..., 0] = 50.0
        w = rng.uniform(0.1, 10.0, S)
        exceeded += bool((np.average(class_probabilities(F, "softmax"), axis=0, weights=w) > 1).any())
        P = predictive_probabilities(F, "softmax", w)
        assert np.all((P >= 0) & (P <= 1)) and np.allclose(P.sum(axis=1), 1.0, rtol=0, atol=4e-16)
        log_loss(np.zeros(5, int), P, labels=[0, 1, 2])
    assert exceeded > 0


@pytest.mark.parametrize("cls", [BNNRegressor, BNNClassifier])
def test_to_inference_data_gives_arviz_what_it_reads(cls):
    """to_inference_data(): the posterior's chains after the burn-in as ArviZ InferenceData (export's
    function), with the training cases' log likelihood, replicated targets and observed values in the
    user's units, and sample stats in ArviZ's names: az.summary, az.loo and az.bfmi read it."""
    import arviz as az
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = X[:, 0] * 30 + 100 + rng.normal(size=40) if cls is BNNRegressor else np.where(X[:, 0] > 0, "yes", "no")
    m = cls(hidden=(3,), chains=3, super_transitions=8, budget=200, num_steps_bounds=(5, 10), max_seconds=None, thin=1,
            seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(X, y)
        idata = m.to_inference_data()
        assert list(idata.posterior.chain.values) == ["full 0", "full 1", "full 2"]
        n = idata.posterior.sizes["draw"]
        burn = m._burn_in(m.n_iter_)
        _, chain, st = m.chains_.kept_rows()
        diagnostic = m.chains_.kept_stats()[:, 5] > 0                   # the diagnostic draws after the burn-in
        assert n == min(np.sum((chain == j) & (st >= burn) & diagnostic) for j in range(3)) == 16 * (8 - burn)
        assert idata.posterior["weights"].shape == (3, n, m.chains_.dim)
        assert idata.log_likelihood["y"].shape == (3, n, 40)
        observed = idata.observed_data["y"].values
        if cls is BNNRegressor:
            assert np.allclose(observed[:, 0], y)
            assert abs(float(idata.posterior_predictive["y"].mean()) - y.mean()) < 0.5 * y.std()
        else:
            assert np.array_equal(m.classes_[observed], y) and idata.attrs["classes"] == ["no", "yes"]
        assert {"energy", "lp", "acceptance_rate", "diverging", "n_steps", "step_size"} <= set(idata.sample_stats)
        assert np.isfinite(az.bfmi(idata)).all() and np.isfinite(az.loo(idata).elpd_loo)
        assert np.isfinite(az.summary(idata, var_names=["~weights"])["r_hat"]).all()
        logs = [v for v in idata.posterior.data_vars if v.startswith("log_")]     # one R-hat: diagnostics_'s
        assert m.diagnostics_["draws"] == "samples"
        assert m.diagnostics_["hyper"]["rhat_max"] == pytest.approx(
            max(float(az.rhat(idata.posterior[v]).to_array().max()) for v in logs), rel=1e-9)
    with pytest.raises(NotFittedError):
        cls().to_inference_data()


def test_chains_and_cv_choose_the_layout_and_an_old_k_works_with_one_warning():
    """chains= (chains of the posterior), cv= (folds: a number or a config's dict), reward="cv" without cv
    (chains folds and a full-data chain); the deprecated k= is read as chains, with one FutureWarning;
    a wrong value is a ValueError naming the parameter."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 2)), rng.normal(size=40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m = BNNRegressor(**{**TINY, "chains": 3}).fit(X, y)
        assert m.layout_.data == "full" and m.layout_.k == 3 and m.chains_.n_chains == 3
        m = BNNRegressor(**{**TINY, "cv": {"folds": 2, "full_chain": True}}).fit(X, y)
        assert m.layout_.data == "folds" and m.chains_.n_cv == 2 and m.chains_.n_chains == 3
        m = BNNRegressor(**{**TINY, "reward": "cv"}).fit(X, y)
        assert m.chains_.n_cv == 2 and m.chains_.n_chains == 3
        old = dict(TINY)
        del old["chains"]
        with pytest.warns(FutureWarning, match="k=3 is deprecated") as caught:
            m = BNNRegressor(**old, k=3).fit(X, y)
        assert len([w for w in caught if issubclass(w.category, FutureWarning)]) == 1
        assert m.layout_.k == 3 and m.chains_.n_chains == 3
        with pytest.warns(FutureWarning, match="precision='float64' is deprecated: give arithmetic=") as caught:
            m = BNNRegressor(**TINY, precision="float64").fit(X, y)
        assert len([w for w in caught if issubclass(w.category, FutureWarning)]) == 1
        assert m.chains_.chain_data[0].model.arithmetic == "float64"
        with pytest.warns(FutureWarning, match="replicas_ is deprecated"):
            assert m.replicas_ is m.chains_
    with pytest.raises(ValueError, match="cv=1"):
        BNNRegressor(**{**TINY, "cv": 1}).fit(X, y)
    with pytest.raises(ValueError, match="cv="):
        BNNRegressor(**{**TINY, "cv": {"fold": 3}}).fit(X, y)
