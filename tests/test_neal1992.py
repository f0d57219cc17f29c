"""Neal's (1992) model: the reflected logistic parameterisation (eqs 28-29) and
the noise integrated out (eqs 34-35), against NumPy, finite differences,
quadrature and importance sampling from the prior."""
import math

import numpy as np
import pytest
from conftest import assert_hmc_matches_importance_sampling
from scipy import integrate

from adaptive_hmc.models import reference
from adaptive_hmc.models.mlp import MLPSpec, predict
from adaptive_hmc.models.neal1992 import N_GROUPS, Neal92MLP, log_predictive
from adaptive_hmc.samplers import hmc_settings

Z = 4.0


def _reflect(x):
    f = np.floor(x)
    frac = x - f
    return np.where(f % 2 == 0, frac, 1 - frac)


def _weights(model, q):
    D = model.spec.n_params
    s = _reflect(q[D:])[model.target.group]
    a = _reflect(q[:D])
    return s / (1 - s) * np.log(a / (1 - a))


def _energy(model, q, m0=0.1, s0=0.1):
    half, _ = reference.energy_grad(model.spec, _weights(model, q), model.X, model.Y, 0.0, np.ones(model.spec.n_outputs))
    m = model.Y.size
    return 0.5 * (m0 + m) * (np.log(s0 + 2 * half) - np.log(s0))


def _model(rng, spec=MLPSpec(2, (4,), 2), n=15):
    X = rng.normal(size=(n, spec.n_inputs))
    Y = np.column_stack([np.sin(X[:, 0]), np.cos(X[:, 1])])[:, :spec.n_outputs] + 0.1 * rng.normal(size=(n, spec.n_outputs))
    return Neal92MLP(spec, X, Y)


def test_energy_matches_numpy_and_the_reflections():
    rng = np.random.default_rng(0)
    model = _model(rng)
    for _ in range(5):
        q = rng.uniform(-4, 4, size=model.dim)
        u, _ = model.energy_grad(q, model.initial_hyper())
        assert u == pytest.approx(_energy(model, q), rel=1e-10)
        shifted = q + 2 * rng.integers(-3, 4, size=model.dim)          # period 2
        assert model.energy_grad(shifted, model.initial_hyper())[0] == pytest.approx(u, rel=1e-10)
        assert model.energy_grad(-q, model.initial_hyper())[0] == pytest.approx(u, rel=1e-10)   # a(-x) = a(x)
    assert model.dim == model.spec.n_params + N_GROUPS


def test_gradient_matches_finite_differences_in_every_replica():
    """Coordinates in even and odd replicas (the sign of da/dq flips), negative
    ones, and close to (not on) the reflection points."""
    rng = np.random.default_rng(1)
    model = _model(rng)
    h = 1e-6
    for centre in (0.5, 1.5, -0.5, -2.3, 3.98, 5.02):
        q = centre + rng.uniform(-0.015, 0.015, size=model.dim)
        _, g = model.energy_grad(q, model.initial_hyper())
        fd = np.empty(model.dim)
        for k in range(model.dim):
            e = np.zeros(model.dim)
            e[k] = h
            fd[k] = (_energy(model, q + e) - _energy(model, q - e)) / (2 * h)
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(fd).max()))


@pytest.mark.parametrize("n_out", [1, 2])
def test_the_predictive_density_of_eq_35_integrates_to_one(n_out):
    for s_train, m in ((0.3, 20), (5.0, 3)):
        dens = lambda r2: math.exp(log_predictive(s_train, r2, m * n_out, n_out, 0.1, 0.1))
        if n_out == 1:
            total, _ = integrate.quad(lambda y: dens(y * y), -np.inf, np.inf)
        else:
            total, _ = integrate.quad(lambda r: 2 * math.pi * r * dens(r * r), 0, np.inf)
        assert total == pytest.approx(1.0, rel=1e-7)


def test_a_tiny_network_samples_as_importance_sampling_from_the_prior_says():
    """1-1-1 network (4 weights, 3 scales), 6 cases: the posterior mean of the
    network output at x = 0.7 by HMC against importance sampling with prior
    draws (uniform coordinates), within their combined standard errors."""
    rng = np.random.default_rng(2)
    spec = MLPSpec(1, (1,), 1)
    X = np.linspace(-1, 1, 6)[:, None]
    Y = 0.8 * np.tanh(1.5 * X) + 0.2 * rng.normal(size=X.shape)
    model = Neal92MLP(spec, X, Y)
    x_new = np.array([[0.7]])
    # importance sampling: prior draws, weights exp(-U)
    Q = rng.uniform(0, 1, size=(1_000_000, model.dim))
    D = spec.n_params
    s = Q[:, D:][:, model.target.group]
    a = Q[:, :D]
    Wt = s / (1 - s) * np.log(a / (1 - a))
    F = predict(spec, Wt, X)[:, :, 0]
    sse = ((F - Y[:, 0]) ** 2).sum(1)
    logw = -0.5 * (0.1 + Y.size) * np.log(0.1 + sse)
    f_new = predict(spec, Wt, x_new)[:, 0, 0]
    settings = hmc_settings(30, step_factor=0.01, step_nu=0.3, gibbs=False)
    is_mean, tol = assert_hmc_matches_importance_sampling(model, x_new, f_new, logw, settings, rng)
    assert abs(np.median(f_new) - is_mean) > 3 * tol          # power: the data move the answer far from the prior's


def test_accumulated_predictions_are_the_networks_and_eq_35():
    """One sample's accumulated means, noise variance and log densities against
    NumPy: the network's outputs, (s0 + S) / (m0 + m - 2), and log eq 35 with
    the training squared error S at that sample."""
    from adaptive_hmc.models.base import accumulate
    from adaptive_hmc.models.predictive import new_accumulator
    rng = np.random.default_rng(4)
    model = _model(rng)
    Xt = rng.normal(size=(9, 2))
    Yt = rng.normal(size=(9, 2))
    q = rng.uniform(0.1, 0.9, size=model.dim)
    acc = new_accumulator(model.spec, Xt, Yt)
    accumulate(q, model.target, model.initial_hyper(), acc)
    w = _weights(model, q)
    F = predict(model.spec, w, Xt)
    np.testing.assert_allclose(acc.pred.T, F, rtol=1e-12)
    S = np.sum((predict(model.spec, w, model.X) - model.Y) ** 2)
    m = model.Y.size
    np.testing.assert_allclose(acc.var, (0.1 + S) / (0.1 + m - 2), rtol=1e-12)
    lp = [log_predictive(S, np.sum((F[n] - Yt[n]) ** 2), m, 2, 0.1, 0.1) for n in range(9)]
    np.testing.assert_allclose(acc.lse, lp, rtol=1e-10)
