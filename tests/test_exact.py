"""Exact tier: kernels against NumPy references and finite differences, leapfrog
reversibility and its O(eps^2) energy error, divergence handling."""
import math

import numpy as np
import pytest

from adaptive_hmc.jit import fast_exp, fast_log, fast_log1p, fast_tanh, njit
from adaptive_hmc.models import reference
from adaptive_hmc.models.bnn import BayesianMLP
from adaptive_hmc.models.mlp import MLPSpec, mlp_energy_grad
from adaptive_hmc.models.predictive import new_accumulator
from adaptive_hmc.models.priors import GammaPrior, PriorSpec, precisions
from adaptive_hmc.samplers import hmc_settings, init_state, make_hmc, make_metropolis
from adaptive_hmc.samplers.leapfrog import kinetic, leapfrog

SPECS = [
    MLPSpec(2, (16,), 2),
    MLPSpec(3, (5, 4), 1, "logistic", direct=True),
    MLPSpec(4, (6, 3, 2), 3, "softmax", direct=True),
    MLPSpec(1, (1,), 1),
]


def _data(spec, n, rng):
    X = rng.normal(size=(n, spec.n_inputs))
    if spec.likelihood == "gaussian":
        Y = rng.normal(size=(n, spec.n_outputs))
    elif spec.likelihood == "logistic":
        Y = rng.integers(0, 2, size=(n, 1)).astype(float)
    else:
        Y = rng.integers(0, spec.n_outputs, size=(n, 1)).astype(float)
    return X, Y


@njit(cache=False)
def _tanh_all(x, out):
    for i in range(x.size):
        out[i] = fast_tanh(x[i])


def test_fast_tanh_matches_numpy():
    x = np.concatenate([np.linspace(-30, 30, 100001), np.logspace(-300, 2, 5000),
                        -np.logspace(-300, 2, 5000), [0.0, np.inf, -np.inf]])
    out = np.empty_like(x)
    _tanh_all(x, out)
    assert np.max(np.abs(out - np.tanh(x))) < 1e-15
    nan = np.array([np.nan])
    _tanh_all(nan, nan)
    assert np.isnan(nan[0])


@njit(cache=False)
def _exp_log1p_all(x, t, out_exp, out_log1p):
    for i in range(x.size):
        out_exp[i] = fast_exp(x[i])
    for i in range(t.size):
        out_log1p[i] = fast_log1p(t[i])


def test_fast_exp_and_log1p_match_numpy():
    """fast_exp on [-700, 700] within 5e-16 + 4e-17 |x| relative of NumPy's (the argument's reduction by
    k log 2 loses a little with k) and fast_log1p on [0, 1] within 1e-15 (the logistic likelihood's
    exp(-|f|) and log1p of it), and the ends: exp clamped beyond +-700, log1p(0) = 0."""
    x = np.concatenate([np.linspace(-700, 700, 200001), np.linspace(-1, 1, 20001), -np.logspace(-300, 2, 3000)])
    t = np.concatenate([np.linspace(0, 1, 100001), np.logspace(-300, 0, 3000), [0.0]])
    e, lg = np.empty_like(x), np.empty_like(t)
    _exp_log1p_all(x, t, e, lg)
    assert np.all(np.abs(e / np.exp(x) - 1) < 5e-16 + 4e-17 * np.abs(x))
    nz = t > 0
    assert np.max(np.abs(lg[nz] / np.log1p(t[nz]) - 1)) < 1e-15 and not lg[~nz].any()
    ends = np.array([-800.0, 800.0])
    _exp_log1p_all(ends, t[:0], e[:2], lg[:0])
    np.testing.assert_allclose(e[:2], np.exp([-700.0, 700.0]), rtol=3e-14)


@njit(cache=False)
def _log_all(x, out):
    for i in range(x.size):
        out[i] = fast_log(x[i])


def test_fast_log_matches_numpy():
    """fast_log within 1e-15 relative of NumPy's on [1, 1e300] and [1e-300, 0.5] (the softmax likelihood's
    log of a sum in [1, classes]), within 3e-16 absolute near 1 from below, and 0 at 1."""
    x = np.concatenate([np.linspace(1, 20, 100001), np.logspace(0, 300, 5000), np.logspace(-300, np.log10(0.5), 5000)])
    out = np.empty_like(x)
    _log_all(x, out)
    assert np.max(np.abs(out / np.log(np.where(x == 1, 2.0, x)) - 1)[x != 1]) < 1e-15 and out[x == 1].max() == 0
    below = np.linspace(0.5, 1, 10001)
    _log_all(below, out[:below.size])
    assert np.max(np.abs(out[:below.size] - np.log(below))) < 3e-16


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.likelihood}-{s.hidden}-io{s.direct}")
def test_kernel_matches_numpy_reference(spec):
    rng = np.random.default_rng(0)
    X, Y = _data(spec, 37, rng)
    q = rng.normal(size=spec.n_params)
    prec = rng.uniform(0.5, 2, size=spec.n_params)
    noise = rng.uniform(1, 3, size=spec.n_outputs)
    g = np.empty_like(q)
    e = mlp_energy_grad(q, g, spec.arch, np.ascontiguousarray(X.T), spec.target_rows(Y),
                        prec, noise, spec.workspace(len(X)), None, None)
    e_ref, g_ref = reference.energy_grad(spec, q, X, Y, prec, noise)
    assert abs(e - e_ref) < 1e-10 * max(1.0, abs(e_ref))
    np.testing.assert_allclose(g, g_ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.likelihood}-{s.hidden}-io{s.direct}")
def test_the_targets_type_chooses_the_likelihood(spec):
    """A regression's targets are float64 and a classifier's int64 class indices (MLPSpec.target_rows), in the
    model's target and its accumulators alike: the kernels compile the likelihood that type names alone, so
    that a logistic network's labels read as floats give the Gaussian's energy, not the logistic's."""
    rng = np.random.default_rng(1)
    X, Y = _data(spec, 21, rng)
    YT = spec.target_rows(Y)
    assert YT.dtype == (np.float64 if spec.likelihood == "gaussian" else np.int64)
    assert YT.shape == (Y.shape[1], 21) and YT.flags.c_contiguous and np.array_equal(YT, Y.T)
    assert BayesianMLP(spec, X, Y).target.YT.dtype == YT.dtype == new_accumulator(spec, X, Y).YT.dtype
    if spec.likelihood == "logistic":
        q, g = rng.normal(size=spec.n_params), np.empty(spec.n_params)
        prec, noise = np.zeros(spec.n_params), np.ones(1)
        XT = np.ascontiguousarray(X.T)
        energies = [mlp_energy_grad(q, g, spec.arch, XT, T, prec, noise, spec.workspace(21), None, None)
                    for T in (YT, YT.astype(np.float64))]
        assert abs(energies[0] - reference.energy_grad(spec, q, X, Y, prec, noise)[0]) < 1e-10 * abs(energies[0])
        f = reference.energy_grad(MLPSpec(spec.n_inputs, spec.hidden, 1, direct=spec.direct), q, X, Y, prec,
                                  noise)[0]
        assert abs(energies[1] - f) < 1e-10 * abs(f) and abs(energies[1] - energies[0]) > 1e-3


def _finite_differences(model, q, hyper, h=1e-5) -> np.ndarray:
    """Central differences of the model's energy at q, one coordinate at a time."""
    fd = np.empty_like(q)
    for k in range(q.size):
        e = np.zeros_like(q)
        e[k] = h
        fd[k] = (model.energy_grad(q + e, hyper)[0] - model.energy_grad(q - e, hyper)[0]) / (2 * h)
    return fd


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.likelihood}-{s.hidden}-io{s.direct}")
@pytest.mark.parametrize("ard", [False, True])
def test_gradient_matches_finite_differences(spec, ard):
    rng = np.random.default_rng(1)
    X, Y = _data(spec, 23, rng)
    model = BayesianMLP(spec, X, Y, PriorSpec(ard=ard))
    hyper = model.initial_hyper()
    hyper.tau[:] = rng.uniform(0.5, 3.0, size=hyper.tau.size)
    precisions(model.prior, hyper.tau, hyper.prec)
    q = rng.normal(size=spec.n_params)
    _, g = model.energy_grad(q, hyper)
    fd = _finite_differences(model, q, hyper)
    for grp in spec.groups:
        np.testing.assert_allclose(g[grp.slice], fd[grp.slice], rtol=1e-6, atol=1e-6, err_msg=grp.name)


def test_groups_cover_the_vector_once():
    for spec in SPECS:
        covered = np.zeros(spec.n_params, int)
        for grp in spec.groups:
            covered[grp.slice] += 1
            assert grp.stop - grp.start == int(np.prod(grp.shape))
        assert (covered == 1).all()
    assert MLPSpec(2, (16,), 2).n_params == 82  # the thesis's robot-arm state space


def _robot_model(rng):
    spec = MLPSpec(2, (16,), 2)
    X, Y = _data(spec, 30, rng)
    return BayesianMLP(spec, X, Y)


@pytest.mark.parametrize("which", ["mlp", "gaussian"])
def test_leapfrog_is_reversible(which, bivariate):
    rng = np.random.default_rng(2)
    if which == "mlp":
        model = _robot_model(rng)
        hyper = model.initial_hyper(1.0)
        q = 0.3 * rng.normal(size=model.dim)
    else:
        model, hyper, q = bivariate, None, np.array([0.5, -0.2])
    st = init_state(model, q, hyper)
    step = 0.1 * model.scales(hyper)
    p = rng.normal(size=model.dim)
    q1, g1, p1 = st.position.copy(), st.grad.copy(), p.copy()
    _, _, ok = leapfrog(q1, p1, g1, step, 50, model.target, st.hyper)
    assert ok
    p1 = -p1
    _, _, ok = leapfrog(q1, p1, g1, step, 50, model.target, st.hyper)
    assert ok
    np.testing.assert_allclose(q1, st.position, atol=1e-10)
    np.testing.assert_allclose(-p1, p, atol=1e-10)


def test_energy_error_shrinks_like_eps_squared(wide10):
    """Fixed trajectory time T = eps * L: |dH| is O(eps^2) for the leapfrog."""
    rng = np.random.default_rng(3)
    st = init_state(wide10, wide10.mean + wide10.scales(), None)
    p = rng.normal(size=wide10.dim)
    errs = []
    for eps in (0.2, 0.1, 0.05, 0.025):
        q, g, pp = st.position.copy(), st.grad.copy(), p.copy()
        u, _, _ = leapfrog(q, pp, g, eps * wide10.scales(), int(round(1.6 / eps)), wide10.target, st.hyper)
        errs.append(abs(u + kinetic(pp) - st.energy[0] - kinetic(p)))
    ratios = np.array(errs[:-1]) / np.array(errs[1:])
    assert np.all((ratios > 3.0) & (ratios < 5.0)), ratios


def test_step_scales_match_hand_computation():
    """FBM heuristic for a 1-3-1 regression net, written out by hand."""
    spec = MLPSpec(1, (3,), 1)
    X = np.array([[0.5], [-2.0], [1.0]])
    model = BayesianMLP(spec, X, np.zeros((3, 1)),
                        PriorSpec(input_hidden=GammaPrior(4.0), hidden_bias=GammaPrior(9.0),
                                  hidden_output=GammaPrior(2.0), noise=GammaPrior(25.0)))
    hyper = model.initial_hyper()
    s = model.scales(hyper)
    N, sumsq, noise = 3.0, 0.25 + 4.0 + 1.0, 25.0
    prec_ho = 2.0 * 3          # scaled by the 3 hidden units
    c_hidden = noise / prec_ho  # second derivative w.r.t. a hidden unit's value
    expect = np.concatenate([
        np.full(3, 1 / math.sqrt(4.0 + sumsq * c_hidden)),   # input-hidden
        np.full(3, 1 / math.sqrt(9.0 + N * c_hidden)),       # hidden biases
        np.full(3, 1 / math.sqrt(prec_ho + N * noise)),      # hidden-output
        [1 / math.sqrt(1e-4 + N * noise)],                   # output bias, sd 100
    ])
    np.testing.assert_allclose(s, expect, rtol=1e-12)


def test_step_scales_ignore_the_weights():
    rng = np.random.default_rng(4)
    model = _robot_model(rng)
    h = model.initial_hyper()
    a = model.scales(h)
    model.energy_grad(rng.normal(size=model.dim), h)
    np.testing.assert_array_equal(a, model.scales(h))


def test_divergent_trajectory_is_rejected_without_nan():
    rng = np.random.default_rng(5)
    model = _robot_model(rng)
    hyper = model.initial_hyper(1.0)
    st = init_state(model, 0.5 * rng.normal(size=model.dim), hyper)
    hmc = make_hmc(model)
    for params in (hmc_settings(20, step_size=1e6), hmc_settings(20, step_size=1e6, window=5),
                   hmc_settings(20, step_size=1e160)):
        new, info = hmc(st, params._replace(gibbs=False), rng)       # the interweaving moves would move the weights
        assert info.divergent and not info.accepted
        np.testing.assert_array_equal(new.position, st.position)
        assert np.isfinite(new.energy[0]) and np.all(np.isfinite(new.grad)) and np.all(np.isfinite(new.momentum))
    new, info = make_metropolis(model)(st, hmc_settings(step_size=1e160), rng)
    assert info.divergent and not info.accepted and np.all(np.isfinite(new.position))


def test_state_energy_is_cached_correctly_after_transitions(bivariate):
    rng = np.random.default_rng(6)
    model = _robot_model(rng)
    st = init_state(model, model.initial_position(), model.initial_hyper(1.0))
    hmc = make_hmc(model)
    for params in (hmc_settings(10, step_factor=0.2), hmc_settings(10, step_factor=0.2, window=3, persistence=0.9)):
        for _ in range(5):
            st, _ = hmc(st, params, rng)      # [Gibbs, HMC]
            u, g = model.energy_grad(st.position, st.hyper)
            assert abs(u - st.energy[0]) < 1e-9 * max(1, abs(u))
            np.testing.assert_allclose(g, st.grad, rtol=1e-12, atol=1e-12)


def test_hmc_params_are_validated():
    with pytest.raises(ValueError, match="exactly one"):
        hmc_settings(10)
    with pytest.raises(ValueError, match="window"):
        hmc_settings(10, step_factor=0.1, window=11)
    with pytest.raises(ValueError, match="persistence"):
        hmc_settings(10, step_factor=0.1, persistence=1.0)
    with pytest.raises(ValueError, match="num_steps"):
        hmc_settings(0, step_factor=0.1)


def test_bad_data_gets_a_clear_error():
    spec = MLPSpec(2, (4,), 1)
    X = np.zeros((5, 2))
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"non-finite.*row 3, column 1"):
        BayesianMLP(spec, X, np.zeros(5))
    with pytest.raises(ValueError, match=r"expects \(N, 2\)"):
        BayesianMLP(spec, np.zeros((5, 3)), np.zeros(5))


@pytest.mark.parametrize("window", [1, 4])
def test_rejection_negates_the_refreshed_momentum(window):
    """Persistent momentum (Neal 1993): after p <- a p + sqrt(1 - a^2) n, a
    rejected trajectory returns -p; an accepted one keeps the final momentum."""
    rng = np.random.default_rng(13)
    model = _robot_model(rng)
    st = init_state(model, 0.5 * rng.normal(size=model.dim), model.initial_hyper(1.0))
    st = st._replace(momentum=rng.normal(size=model.dim))
    a = 0.9
    n = np.random.default_rng(99).standard_normal(model.dim)
    refreshed = a * st.momentum + math.sqrt(1 - a * a) * n
    new, info = make_hmc(model)(st, hmc_settings(8, step_size=1e6, window=window, persistence=a, gibbs=False),
                                np.random.default_rng(99))
    assert not info.accepted
    np.testing.assert_allclose(new.momentum, -refreshed, rtol=1e-14)


def test_jittered_length_is_uniform_on_1_to_L(bivariate):
    rng = np.random.default_rng(14)
    st = init_state(bivariate, np.zeros(2))
    used = [make_hmc(bivariate)(st, hmc_settings(6, step_factor=0.1, jitter=True), rng)[1].num_steps
            for _ in range(600)]
    assert set(used) == set(range(1, 7))


def test_randomised_step_is_eps_times_exp_nu_cauchy():
    """Neal (1992) eq 23: the transition's steps are eps * exp(nu C), C the
    standard Cauchy draw tan(pi (u - 1/2)) from the same generator; nu = 0 keeps eps."""
    from adaptive_hmc.samplers.hmc import draw_step_sizes as draw_steps
    eps, nu = np.array([0.1, 0.2]), 0.5
    c = math.tan(math.pi * (np.random.default_rng(3).random() - 0.5))
    np.testing.assert_allclose(draw_steps(eps, nu, np.random.default_rng(3)), eps * math.exp(nu * c), rtol=1e-14)
    np.testing.assert_array_equal(draw_steps(eps, 0.0, np.random.default_rng(3)), eps)


def test_stochastic_dynamics_divergence_restores_the_state():
    from adaptive_hmc.samplers import make_stochastic_dynamics
    rng = np.random.default_rng(15)
    model = _robot_model(rng)
    st = init_state(model, 0.5 * rng.normal(size=model.dim), model.initial_hyper(1.0))
    new, info = make_stochastic_dynamics(model)(st, hmc_settings(5, step_size=1e160, gibbs=False), rng)
    assert info.divergent
    np.testing.assert_array_equal(new.position, st.position)
    assert np.all(np.isfinite(new.momentum)) and new.energy[0] == st.energy[0]


def test_curvature_scale_is_the_inverse_root_of_the_scaled_hessians_largest_eigenvalue():
    """On N(0, cov) the Hessian is A = cov^-1 and S = diag(A_kk^-1/2): power
    iteration on finite differences gives 1/sqrt(lambda_max(S A S)) to 1e-6."""
    from adaptive_hmc.models.gaussian import GaussianTarget
    from adaptive_hmc.samplers.calibration import curvature_scale
    rng = np.random.default_rng(0)
    B = rng.normal(size=(5, 5))
    cov = B @ B.T + 0.1 * np.eye(5)
    model = GaussianTarget(np.zeros(5), cov)
    A = np.linalg.inv(cov)
    S = np.diag(1 / np.sqrt(np.diag(A)))
    lam = np.linalg.eigvalsh(S @ A @ S).max()
    c = curvature_scale(model, rng.normal(size=5), model.initial_hyper(), iterations=200)
    assert c == pytest.approx(1 / np.sqrt(lam), rel=1e-6)
    assert c != pytest.approx(1.0, rel=0.1)          # the heuristic alone is off: the test can fail


def test_calibrated_step_factor_two_is_the_leapfrog_stability_limit():
    """With steps f * c * s_k (c from curvature_scale), long trajectories on a
    correlated Gaussian stay stable at f = 1.9 and blow up at f = 2.1, where
    the heuristic alone puts the limit elsewhere."""
    from adaptive_hmc.models.gaussian import GaussianTarget
    from adaptive_hmc.samplers.calibration import curvature_scale
    model = GaussianTarget(np.zeros(2), np.array([[1.0, 0.99], [0.99, 1.0]]))
    c = curvature_scale(model, np.array([0.3, -0.2]), model.initial_hyper(), iterations=100)
    hmc = make_hmc(model)
    accepted = {}
    for f in (1.9, 2.1):
        rng = np.random.default_rng(1)
        state = init_state(model, np.array([0.3, -0.2]))
        n = 0
        for _ in range(50):
            state, info = hmc(state, hmc_settings(200, step_factor=f * c), rng)
            n += info.accepted
        accepted[f] = n
    assert accepted[1.9] >= 10 and accepted[2.1] == 0, accepted
    assert abs(2 * c - 2) > 0.3          # uncalibrated, the limit is at factor 2c (1.42 here), not 2


def test_metropolis_iteration_is_its_proposals_one_by_one(bivariate):
    """An iteration of L proposals equals L iterations of one proposal, bit for
    bit (the same random numbers in the same order), costs L energy
    evaluations, and reports the sum over proposals of probability x squared
    jump as accept_prob x squared_jump (what the ESJD reward reads)."""
    from adaptive_hmc.samplers import make_metropolis
    met = make_metropolis(bivariate)
    st0 = init_state(bivariate, np.array([0.3, -0.2]))
    for L in (1, 4, 9):
        params = hmc_settings(L, step_factor=1.5, gibbs=False)
        whole, info = met(st0, params, np.random.default_rng(L))
        rng, st, esjd, accepted = np.random.default_rng(L), st0, 0.0, False
        for _ in range(L):
            st, one = met(st, hmc_settings(1, step_factor=1.5, gibbs=False), rng)
            esjd += one.accept_prob * one.squared_jump
            accepted = accepted or one.accepted
        assert np.array_equal(whole.position, st.position) and whole.energy[0] == st.energy[0]
        assert info.num_steps == L and info.accepted == accepted
        assert info.accept_prob * info.squared_jump == pytest.approx(esjd, rel=1e-12)
    with pytest.raises(ValueError, match="windows and jitter are for kind hmc"):
        met(st0, hmc_settings(4, step_factor=1.0, window=2), np.random.default_rng(0))


def test_stochastic_dynamics_iteration_is_the_leapfrog_without_a_test(bivariate):
    """With persistence 0 and one iteration: the momentum drawn, L leapfrog
    steps, the end state kept whatever its energy error."""
    from adaptive_hmc.samplers import make_stochastic_dynamics
    st = init_state(bivariate, np.array([0.3, -0.2]))
    params = hmc_settings(7, step_size=0.9, gibbs=False)
    new, info = make_stochastic_dynamics(bivariate)(st, params, np.random.default_rng(4))
    q, p, g = st.position.copy(), np.random.default_rng(4).standard_normal(2), st.grad.copy()
    u, used, ok = leapfrog(q, p, g, np.full(2, 0.9), 7, bivariate.target, bivariate.initial_hyper())
    np.testing.assert_array_equal(new.position, q)
    assert ok and used == 7 and info.num_steps == 7 and info.accepted and info.accept_prob == 1.0
    assert info.energy_error == pytest.approx(u + kinetic(p) - st.energy[0] - kinetic(
        np.random.default_rng(4).standard_normal(2)), abs=1e-12)
    assert info.squared_jump == pytest.approx(np.sum((q - st.position) ** 2), rel=1e-12)


SPARSE_SPECS = [MLPSpec(40, (6, 3), 1, "logistic"), MLPSpec(30, (5,), 2, direct=True),
                MLPSpec(25, (4,), 3, "softmax")]


def _sparse_data(spec, n, rng, density=0.1):
    X, Y = _data(spec, n, rng)
    X *= rng.random(X.shape) < density
    X[:, 3] = 0.0                                       # an input that is never on
    X[5] = 0.0                                          # a case with no input on
    return X, Y


@pytest.mark.parametrize("spec", SPARSE_SPECS, ids=lambda s: f"{s.likelihood}-{s.hidden}-io{s.direct}")
def test_sparse_first_layer_matches_the_dense_kernel_and_numpy(spec):
    """Inputs that are mostly zero: the first layer run on the nonzeros (CSC)
    gives the dense kernel's energy and gradient and NumPy's, and the model
    chooses it by itself for such inputs (and not for dense ones)."""
    rng = np.random.default_rng(3)
    X, Y = _sparse_data(spec, 37, rng)
    model = BayesianMLP(spec, X, Y)
    dense = BayesianMLP(spec, X, Y, sparse=False)
    assert model.sparse and not dense.sparse and not BayesianMLP(spec, *_data(spec, 37, rng)).sparse
    assert model.target.sparse.vals.size == np.count_nonzero(X)
    hyper = model.initial_hyper()
    for _ in range(3):
        q = rng.normal(size=spec.n_params)
        e, g = model.energy_grad(q, hyper)
        e_dense, g_dense = dense.energy_grad(q, hyper)
        e_ref, g_ref = reference.energy_grad(spec, q, X, model.Y, hyper.prec, hyper.noise)
        assert abs(e - e_dense) < 1e-10 * max(1.0, abs(e_dense)) and abs(e - e_ref) < 1e-10 * max(1.0, abs(e_ref))
        np.testing.assert_allclose(g, g_dense, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(g, g_ref, rtol=1e-10, atol=1e-10)


def test_sparse_first_layer_gradient_matches_finite_differences():
    spec = SPARSE_SPECS[0]
    rng = np.random.default_rng(4)
    X, Y = _sparse_data(spec, 23, rng)
    model = BayesianMLP(spec, X, Y, PriorSpec(ard=True), sparse=True)
    hyper = model.initial_hyper()
    q = rng.normal(size=spec.n_params)
    _, g = model.energy_grad(q, hyper)
    np.testing.assert_allclose(g, _finite_differences(model, q, hyper), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("spec,sparse", [(SPECS[0], False), (SPECS[1], False), (SPARSE_SPECS[1], True)])
def test_gibbs_with_the_energy_is_the_gibbs_update_then_the_energy(spec, sparse):
    """The fused kernel (one forward pass read by the noise's update and the
    gradient) draws the same hyperparameters and returns the same energy and
    gradient, bit for bit, as the Gibbs update followed by a fresh evaluation,
    with the same random stream (the interweaving moves included), and counts
    the gradient and the moves' forward passes."""
    from adaptive_hmc.models.base import energy_grad, gibbs, gibbs_energy_grad
    rng = np.random.default_rng(5)
    X, Y = (_sparse_data if sparse else _data)(spec, 29, rng)
    model = BayesianMLP(spec, X, Y, PriorSpec(ard=True))
    assert bool(model.sparse) == sparse
    q = 0.5 * rng.normal(size=model.dim)
    q1, q2 = q.copy(), q.copy()                     # the interweaving moves change the weights too
    h1, h2 = model.initial_hyper(), model.initial_hyper()
    g1, g2 = np.empty(model.dim), np.empty(model.dim)
    u1, n1 = gibbs_energy_grad(q1, g1, model.target, h1, np.random.default_rng(9))
    gibbs(q2, model.target, h2, np.random.default_rng(9))
    u2 = energy_grad(q2, g2, model.target, h2)
    assert u1 == u2 and np.array_equal(g1, g2) and np.array_equal(q1, q2) and not np.array_equal(q1, q)
    assert n1 > 1 + len(model.target.scale_dirs)     # the gradient, and each move's forward passes
    q = q1
    assert all(np.array_equal(a, b) for a, b in zip(h1, h2)) and not np.array_equal(h1.tau, model.initial_hyper().tau)
    e_ref, g_ref = reference.energy_grad(spec, q, X, model.Y, h1.prec, h1.noise)
    assert abs(u1 - e_ref) < 1e-10 * max(1.0, abs(e_ref))
    np.testing.assert_allclose(g1, g_ref, rtol=1e-10, atol=1e-10)
