import math

import numpy as np
import pytest

from adaptive_hmc.models.bnn import BayesianMLP
from adaptive_hmc.models.mlp import MLPSpec
from adaptive_hmc.models.priors import GammaPrior, PriorSpec
from adaptive_hmc.models.gaussian import GaussianTarget


#: Test modules by marker (the default run is the whole suite; ``-m "not slow and not statistical"`` the fast tier).
#: The slow modules are in the order a parallel run starts them: the most seconds first (``--durations``
#: with an empty compile cache: test_tasks about 230 s of whole benchmarks and experiments, test_linking 130
#: in one test, test_reproducible 125, ...).
MARKED = {"statistical": ("test_statistical",),
          "slow": ("test_tasks", "test_linking", "test_reproducible", "test_kill", "test_sweep", "test_versus_nuts",
                   "test_study", "test_neal1992", "test_neal1993")}


def pytest_collection_modifyitems(items):
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1]
        for marker, modules in MARKED.items():
            if module in modules:
                item.add_marker(getattr(pytest.mark, marker))
    # The slow tests first, the slowest modules before the others (a stable sort: each module's order kept),
    # so that the workers of a parallel run start them early instead of one finishing them alone at the end.
    rank = {m: i for i, m in enumerate(MARKED["slow"])}

    def order(item):
        module = item.module.__name__.rsplit(".", 1)[-1]
        return (0, rank.get(module, len(rank))) if item.get_closest_marker("slow") else (1, 0)
    items.sort(key=order)


@pytest.fixture
def bivariate():
    """The thesis's strongly correlated target (Wang, eq 2.3)."""
    return GaussianTarget(np.zeros(2), np.array([[1.0, 0.99], [0.99, 1.0]]))


@pytest.fixture
def wide10():
    """10-d Gaussian, independent coordinates with sds spanning 100x, nonzero mean."""
    sds = np.logspace(-1, 1, 10)
    return GaussianTarget(np.linspace(-1, 1, 10), np.diag(sds ** 2))


@pytest.fixture(scope="session")
def tiny_bnn():
    """1-1-1 regression net with fixed hyperparameters on 8 cases, three test
    inputs, and an independent estimate of the posterior predictive mean there
    (self-normalised importance sampling from the prior, 400k draws) with its
    standard error: (model, x_star, is_mean, is_se)."""
    rng = np.random.default_rng(9)
    X = np.linspace(-2, 2, 8)[:, None]
    Y = np.tanh(1.5 * X - 0.5) + 0.3 + 0.2 * rng.normal(size=(8, 1))
    fixed = GammaPrior(1.0, math.inf)
    priors = PriorSpec(input_hidden=fixed, hidden_bias=fixed, hidden_output=fixed,
                       output_bias=fixed, noise=GammaPrior(25.0, math.inf))
    model = BayesianMLP(MLPSpec(1, (1,), 1), X, Y, priors)
    x_star = np.array([[-1.0], [0.0], [1.5]])
    rng = np.random.default_rng(10)
    W = rng.normal(size=(400_000, 4))
    f = np.tanh(X[None, :, 0] * W[:, :1] + W[:, 1:2]) * W[:, 2:3] + W[:, 3:4]
    logw = -0.5 * 25.0 * np.sum((f - Y[None, :, 0]) ** 2, axis=1)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    f_star = np.tanh(x_star[None, :, 0] * W[:, :1] + W[:, 1:2]) * W[:, 2:3] + W[:, 3:4]
    is_mean = w @ f_star
    is_se = np.sqrt(w ** 2 @ (f_star - is_mean) ** 2)
    return model, x_star, is_mean, is_se


def assert_hmc_matches_importance_sampling(model, x_new, f_new, logw, settings, rng, n=12_000, burn=1000, z=4.0):
    """The posterior mean of the network output at ``x_new`` by HMC on ``model``
    (from a prior draw, ``n`` iterations after ``burn``) against importance
    sampling: prior draws whose outputs at ``x_new`` are ``f_new``, with log
    weights ``logw``; within z combined standard errors, each small enough to
    say something. Returns (importance-sampling mean, tolerance) for power checks."""
    from adaptive_hmc.diagnostics import batch_means_mcse
    from adaptive_hmc.models.mlp import predict
    from adaptive_hmc.samplers import init_state, make_hmc
    w = np.exp(logw - logw.max())
    is_mean = np.sum(w * f_new) / w.sum()
    is_se = math.sqrt(np.sum(w ** 2 * (f_new - is_mean) ** 2)) / w.sum()
    assert w.sum() ** 2 / np.sum(w ** 2) > 2000              # enough effective draws to say something
    hmc = make_hmc(model)
    st = init_state(model, model.initial_position(rng))
    fs = []
    for i in range(n + burn):
        st, _ = hmc(st, settings, rng)
        if i >= burn:
            fs.append(predict(model.spec, model.weights(st.position)[0], x_new)[0, 0])
    fs = np.array(fs)
    mcse = batch_means_mcse(fs)
    assert mcse < 0.05                                       # precise enough to test
    tol = z * math.hypot(mcse, is_se)
    assert abs(fs.mean() - is_mean) < tol, (fs.mean(), is_mean, mcse, is_se)
    return is_mean, tol
