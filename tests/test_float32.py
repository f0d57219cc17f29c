"""The float32 path (``arithmetic="float32"``): its tanh, its kernel against the
float64 one and finite differences, the leapfrog's exactness on the network so
computed, and the option's refusals (a float32 chain against importance
sampling: tests/test_statistical.py)."""
import math

import numpy as np
import pytest

from adaptive_hmc.engine.network_options import Layout
from adaptive_hmc.engine.network_options import NetworkOptions
from adaptive_hmc.jit import fast_tanh32, njit
from adaptive_hmc.models.bnn import BayesianMLP
from adaptive_hmc.models.mlp import MLPSpec
from adaptive_hmc.models.priors import PriorSpec, precisions
from adaptive_hmc.samplers import init_state
from adaptive_hmc.samplers.leapfrog import kinetic, leapfrog

SPECS = [
    MLPSpec(2, (16,), 2),
    MLPSpec(9, (32,), 1),
    MLPSpec(3, (5, 4), 1, "logistic", direct=True),
    MLPSpec(4, (6, 3, 2), 3, "softmax", direct=True),
]
IDS = [f"{s.likelihood}-{s.hidden}-io{s.direct}" for s in SPECS]


def _data(spec, n, rng):
    X = rng.normal(size=(n, spec.n_inputs))
    if spec.likelihood == "gaussian":
        Y = rng.normal(size=(n, spec.n_outputs))
    else:
        Y = rng.integers(0, max(spec.n_outputs, 2), size=(n, 1)).astype(float)
    return X, Y


@njit(cache=False)
def _tanh_all(x, out):
    for i in range(x.size):
        out[i] = fast_tanh32(x[i])


def test_fast_tanh32_matches_numpy_to_float32_round_off():
    x = np.concatenate([np.linspace(-30, 30, 200001), np.logspace(-38, 1.5, 5000),
                        -np.logspace(-38, 1.5, 5000), [0.0, np.inf, -np.inf]]).astype(np.float32)
    out = np.empty_like(x)
    _tanh_all(x, out)
    err = np.abs(out.astype(float) - np.tanh(x.astype(float)))
    assert err.max() < 1.2e-7                                    # float32's epsilon
    small = np.abs(x) < 1e-3
    assert np.all(err[small] <= 2.4e-7 * np.abs(x[small]) + 1e-44)   # relative near 0: 2 ulps
    nan = np.array([np.nan], np.float32)
    _tanh_all(nan, nan)
    assert np.isnan(nan[0])


def _pair(spec, rng, n=300):
    """The float64 and float32 models of one network on the same data."""
    X, Y = _data(spec, n, rng)
    return BayesianMLP(spec, X, Y, PriorSpec(ard=True)), BayesianMLP(spec, X, Y, PriorSpec(ard=True),
                                                                    arithmetic="float32")


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_float32_energy_and_gradient_are_the_float64_ones_to_float32_round_off(spec):
    """Across blocks of cases (300 > one block); and they differ (the float32 path is in use)."""
    rng = np.random.default_rng(0)
    m64, m32 = _pair(spec, rng)
    assert m32.target.XT.dtype == np.float32 and m32.target.work.hidden.dtype == np.float32
    hyper = m64.initial_hyper(1.0)
    q = 0.5 * rng.normal(size=spec.n_params)
    u64, g64 = m64.energy_grad(q, hyper)
    u32, g32 = m32.energy_grad(q, hyper)
    assert abs(u32 - u64) < 1e-5 * abs(u64)
    assert np.max(np.abs(g32 - g64)) < 1e-4 * np.max(np.abs(g64))
    assert u32 != u64 and np.any(g32 != g64)


@pytest.mark.parametrize("spec", SPECS[1:3], ids=IDS[1:3])
def test_float32_gradient_matches_finite_differences_of_the_float32_energy(spec):
    """Central differences with a step large beside float32's round-off of the energy."""
    rng = np.random.default_rng(1)
    _, model = _pair(spec, rng, 40)
    hyper = model.initial_hyper()
    hyper.tau[:] = rng.uniform(0.5, 3.0, size=hyper.tau.size)
    precisions(model.prior, hyper.tau, hyper.prec)
    q = rng.normal(size=spec.n_params)
    _, g = model.energy_grad(q, hyper)
    h, fd = 1e-3, np.empty_like(q)
    for k in range(q.size):
        e = np.zeros_like(q)
        e[k] = h
        fd[k] = (model.energy_grad(q + e, hyper)[0] - model.energy_grad(q - e, hyper)[0]) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=2e-3, atol=2e-3 * np.abs(g).max())


def test_float32_leapfrog_is_reversible_and_its_energy_error_shrinks_like_eps_squared():
    rng = np.random.default_rng(2)
    spec = MLPSpec(2, (16,), 2)
    X, Y = _data(spec, 30, rng)
    model = BayesianMLP(spec, X, Y, arithmetic="float32")
    hyper = model.initial_hyper(1.0)
    st = init_state(model, 0.3 * rng.normal(size=model.dim), hyper)
    scales = model.scales(hyper)
    p = rng.normal(size=model.dim)
    q1, g1, p1 = st.position.copy(), st.grad.copy(), p.copy()
    assert leapfrog(q1, p1, g1, 0.1 * scales, 50, model.target, st.hyper)[2]
    p1 = -p1
    assert leapfrog(q1, p1, g1, 0.1 * scales, 50, model.target, st.hyper)[2]
    np.testing.assert_allclose(q1, st.position, atol=1e-9)
    np.testing.assert_allclose(-p1, p, atol=1e-9)
    errs = []
    for eps in (0.2, 0.1, 0.05, 0.025):
        q, g, pp = st.position.copy(), st.grad.copy(), p.copy()
        u, _, _ = leapfrog(q, pp, g, eps * scales, int(round(1.6 / eps)), model.target, st.hyper)
        errs.append(abs(u + kinetic(pp) - st.energy[0] - kinetic(p)))
    ratios = np.array(errs[:-1]) / np.array(errs[1:])
    assert np.all((ratios > 3.0) & (ratios < 5.0)), ratios


def test_float32_is_refused_where_the_model_has_no_float32_kernel():
    with pytest.raises(ValueError, match="arithmetic"):
        NetworkOptions(layout=Layout.chains(2), arithmetic="float16")
    with pytest.raises(ValueError, match="arithmetic='float32': is for model bnn"):
        NetworkOptions(layout=Layout.chains(2), model="neal1992", arithmetic="float32")
    with pytest.raises(ValueError, match="arithmetic"):
        MLPSpec(1, (1,), 1).workspace(8, "half")
    assert math.isfinite(MLPSpec(1, (1,), 1).workspace(8, "float32").hidden.dtype.itemsize)


def test_float32_with_sparse_inputs_is_the_float64_network_to_round_off():
    """The first layer over the nonzero inputs (all cases one block) in float32."""
    rng = np.random.default_rng(3)
    spec = MLPSpec(40, (8,), 1)
    X = rng.normal(size=(300, 40)) * (rng.uniform(size=(300, 40)) < 0.1)
    Y = rng.normal(size=(300, 1))
    m64, m32 = (BayesianMLP(spec, X, Y, sparse=True, arithmetic=p) for p in ("float64", "float32"))
    hyper = m64.initial_hyper(1.0)
    q = 0.5 * rng.normal(size=spec.n_params)
    (u64, g64), (u32, g32) = m64.energy_grad(q, hyper), m32.energy_grad(q, hyper)
    assert abs(u32 - u64) < 1e-5 * abs(u64) and u32 != u64
    assert np.max(np.abs(g32 - g64)) < 1e-4 * np.max(np.abs(g64))
