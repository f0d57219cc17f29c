"""Neal's (1993) model: unscaled weights times category scale factors, the
noise integrated out; against NumPy, finite differences and importance sampling
from the prior."""
import numpy as np
import pytest
from conftest import assert_hmc_matches_importance_sampling

from adaptive_hmc.models import reference
from adaptive_hmc.models.base import accumulate
from adaptive_hmc.models.mlp import MLPSpec, predict
from adaptive_hmc.models.neal1992 import N_GROUPS, log_predictive
from adaptive_hmc.models.neal1993 import Neal93MLP
from adaptive_hmc.models.predictive import new_accumulator
from adaptive_hmc.samplers import hmc_settings

Z = 4.0


def _model(rng, spec=MLPSpec(2, (4,), 2), n=15):
    X = rng.normal(size=(n, spec.n_inputs))
    Y = np.column_stack([np.sin(X[:, 0]), np.cos(X[:, 1])])[:, :spec.n_outputs] + 0.1 * rng.normal(size=(n, spec.n_outputs))
    return Neal93MLP(spec, X, Y)


def _weights(model, q):
    D = model.spec.n_params
    return q[:D] * q[D:][model.target.group]


def _energy(model, q, m0=0.1, s0=0.1):
    D = model.spec.n_params
    half, _ = reference.energy_grad(model.spec, _weights(model, q), model.X, model.Y, 0.0,
                                    np.ones(model.spec.n_outputs))
    m = model.Y.size
    return (0.5 * q[:D] @ q[:D] + 2 * np.log1p(np.abs(q[D:])).sum()
            + 0.5 * (m0 + m) * (np.log(s0 + 2 * half) - np.log(s0)))


def test_energy_and_weights_match_numpy():
    rng = np.random.default_rng(0)
    model = _model(rng)
    assert model.dim == model.spec.n_params + N_GROUPS
    for _ in range(5):
        q = rng.normal(size=model.dim)
        assert model.energy_grad(q, model.initial_hyper())[0] == pytest.approx(_energy(model, q), rel=1e-10)
        np.testing.assert_array_equal(model.weights(q)[0], _weights(model, q))
    # the three categories: input-hidden, hidden biases, hidden-output with the output biases
    kinds = {g.kind: set(model.target.group[g.slice]) for g in model.spec.groups}
    assert kinds == {"input_hidden": {0}, "hidden_bias": {1}, "hidden_output": {2}, "output_bias": {2}}


def test_gradient_matches_finite_differences():
    """Scale factors of both signs (the prior's |s| kink at 0 is avoided)."""
    rng = np.random.default_rng(1)
    model = _model(rng)
    h = 1e-6
    for sign in (1.0, -1.0):
        q = rng.normal(size=model.dim)
        q[-N_GROUPS:] = sign * rng.uniform(0.2, 2.0, N_GROUPS)
        _, g = model.energy_grad(q, model.initial_hyper())
        fd = np.empty(model.dim)
        for k in range(model.dim):
            e = np.zeros(model.dim)
            e[k] = h
            fd[k] = (_energy(model, q + e) - _energy(model, q - e)) / (2 * h)
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(fd).max()))


def test_accumulated_predictions_use_the_scaled_weights_and_eq_35():
    rng = np.random.default_rng(4)
    model = _model(rng)
    Xt, Yt = rng.normal(size=(9, 2)), rng.normal(size=(9, 2))
    q = rng.normal(size=model.dim)
    acc = new_accumulator(model.spec, Xt, Yt)
    accumulate(q, model.target, model.initial_hyper(), acc)
    w = _weights(model, q)
    F = predict(model.spec, w, Xt)
    np.testing.assert_allclose(acc.pred.T, F, rtol=1e-12)
    S = np.sum((predict(model.spec, w, model.X) - model.Y) ** 2)
    m = model.Y.size
    np.testing.assert_allclose(acc.var, (0.1 + S) / (0.1 + m - 2), rtol=1e-12)
    np.testing.assert_allclose(1.0 / model.noise_precisions(q)[0], (0.1 + S) / (0.1 + m - 2), rtol=1e-12)
    lp = [log_predictive(S, np.sum((F[n] - Yt[n]) ** 2), m, 2, 0.1, 0.1) for n in range(9)]
    np.testing.assert_allclose(acc.lse, lp, rtol=1e-10)


def test_a_tiny_network_samples_as_importance_sampling_from_the_prior_says():
    """1-2-1 network (7 weights, 3 scale factors), 6 cases: the posterior mean
    of the output at x = 0.7 by HMC against importance sampling with draws from
    the prior (u ~ N(0, 1); |s| = a / (1 - a), a uniform, random sign), within
    their combined standard errors."""
    rng = np.random.default_rng(2)
    spec = MLPSpec(1, (2,), 1)
    X = np.linspace(-1, 1, 6)[:, None]
    Y = 0.8 * np.tanh(1.5 * X) + 0.2 * rng.normal(size=X.shape)
    model = Neal93MLP(spec, X, Y)
    x_new = np.array([[0.7]])
    n, D = 1_000_000, spec.n_params
    a = rng.uniform(0, 1, size=(n, N_GROUPS))
    s = a / (1 - a) * rng.choice([-1.0, 1.0], size=(n, N_GROUPS))
    Wt = rng.standard_normal((n, D)) * s[:, model.target.group]
    sse = ((predict(spec, Wt, X)[:, :, 0] - Y[:, 0]) ** 2).sum(1)
    logw = -0.5 * (0.1 + Y.size) * np.log(0.1 + sse)
    f_new = predict(spec, Wt, x_new)[:, 0, 0]
    settings = hmc_settings(30, step_factor=0.05, step_nu=0.3, gibbs=False)
    is_mean, tol = assert_hmc_matches_importance_sampling(model, x_new, f_new, logw, settings, rng)
    assert abs(is_mean) > 3 * tol           # power: the data move the answer far from the prior's (0, by symmetry)
