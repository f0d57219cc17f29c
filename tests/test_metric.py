"""The metric learned from the chains (samplers/metric.py): the factors
against their definition on draws of known variance, the compiled moments
against the kept draws, the step sizes against a NumPy reference, the windows'
schedule, and a resume in the middle of a window."""
import numpy as np
import pytest

from adaptive_hmc.engine.network_options import Layout
from adaptive_hmc.engine.network_chains import NetworkChains
from adaptive_hmc.jit import njit
from adaptive_hmc.models.bnn import BayesianMLP
from adaptive_hmc.models.mlp import MLPSpec
from adaptive_hmc.samplers import HMCSettings
from adaptive_hmc.samplers.chain import fill_step_sizes
from adaptive_hmc.samplers.metric import FACTOR_LIMIT, WINDOWS, learned_factors, window_of
from adaptive_hmc.samplers.settings import Action, SettingsError, hmc_settings
from adaptive_hmc.engine.chain_set import advance


@njit
def _fill_step_sizes(target, hyper, settings, out):
    """``fill_step_sizes`` (a kernel that compiled kernels alone call) from Python."""
    return fill_step_sizes(target, hyper, settings, out)


def _moments(draws, grads):
    """The sums (R, 4, D) the compiled iteration keeps, of draws and gradients (R, n, D)."""
    return np.stack([draws.sum(1), (draws ** 2).sum(1), grads.sum(1), (grads ** 2).sum(1)], axis=1)


def test_factors_recover_the_sds_of_a_gaussian_relative_to_the_heuristic():
    """Draws of N(mu, sigma^2) per coordinate and their gradients (q - mu) / sigma^2: the factors are
    sigma / s (s the heuristic scale) up to one common constant (their geometric mean is 1), within
    the sampling error of 4000 draws; a heuristic that is already right gives factors of 1."""
    rng = np.random.default_rng(0)
    R, n, D = 4, 1000, 6
    sigma = np.array([0.01, 0.1, 1.0, 3.0, 10.0, 0.5])
    mu = rng.normal(size=D)
    q = mu + sigma * rng.normal(size=(R, n, D))
    g = (q - mu) / sigma ** 2
    s = np.array([0.02, 0.02, 2.0, 0.3, 10.0, 0.5])
    f = learned_factors(_moments(q, g), n, np.tile(s, (R, 1)))
    expected = sigma / s
    expected /= np.exp(np.log(expected).mean())
    assert np.allclose(f, expected, rtol=0.02)
    assert np.exp(np.log(f).mean()) == pytest.approx(1.0)
    assert np.allclose(learned_factors(_moments(q, g), n, np.tile(sigma, (R, 1))), 1.0, rtol=0.02)
    assert not np.allclose(learned_factors(_moments(q, g), n, np.tile(s, (R, 1))), 1.0, rtol=0.1)   # power


def test_factors_are_limited_and_one_where_nothing_is_known():
    R, n, D = 2, 50, 3
    q = np.zeros((R, n, D))
    q[..., 0] = np.random.default_rng(1).normal(size=(R, n)) * 1e12     # huge: limited
    g = np.ones((R, n, D))                                                  # no gradient variance: factor 1
    g[..., 0] = np.random.default_rng(2).normal(size=(R, n))
    f = learned_factors(_moments(q, g), n, np.ones((R, D)))
    assert f[0] / f[1] == pytest.approx(FACTOR_LIMIT) and f[1] == f[2]
    assert np.array_equal(learned_factors(_moments(q, g), 1, np.ones((R, D))), np.ones(D))


def test_step_sizes_are_factor_times_heuristic_times_the_learned_factors():
    rng = np.random.default_rng(3)
    spec = MLPSpec(2, (4,), 1)
    m = BayesianMLP(spec, rng.normal(size=(20, 2)), rng.normal(size=(20, 1)))
    hyper = m.initial_hyper()
    scale = rng.uniform(0.5, 2.0, m.dim)
    s = hmc_settings(5, step_factor=0.3)._replace(step_scale=scale)
    out = _fill_step_sizes(m.target, hyper, s, np.empty(m.dim))
    assert np.allclose(out, 0.3 * m.scales(hyper) * scale, rtol=1e-14)
    with pytest.raises(SettingsError, match="step_scale"):
        hmc_settings(5, step_size=0.1, step_scale=scale)
    with pytest.raises(SettingsError, match="step_scale"):
        hmc_settings(5, step_factor=0.1, step_scale=-scale)


def _set(**kw):
    rng = np.random.default_rng(4)
    X = rng.uniform(-2, 2, size=(30, 2))
    Y = np.sin(X[:, :1]) + 0.1 * rng.normal(size=(30, 1))
    return NetworkChains(MLPSpec(2, (4,), 1), X, Y, **{**dict(layout=Layout.chains(3), seed=5, metric="learned", threads=2), **kw})


def test_moments_are_the_sums_of_every_iterations_draw_and_the_factors_follow_the_windows():
    """With every iteration kept (thin 1), a window's moments are the sums of the kept positions and their
    squares; at each window's end the factors are learned_factors of them (then frozen till the next),
    after the last window frozen for good; heuristic sets learn nothing."""
    rs = _set(thin=1)
    assert window_of(0) is None and window_of(1) == WINDOWS[0] and window_of(WINDOWS[-1][1]) is None
    action, factors = Action(0.2, 10), []
    for i in range(WINDOWS[1][1] + 2):
        before = rs.state
        advance(rs, action, 100)
        w = window_of(i)
        if w and i + 1 < w[1]:
            rows = [k[-10:, :rs.dim] for k in rs.kept]
            q_sum = before.moments[:, 0] + np.stack([r.sum(0) for r in rows])
            q_sq = before.moments[:, 1] + np.stack([(r ** 2).sum(0) for r in rows])
            assert np.allclose(rs.state.moments[:, 0], q_sum, rtol=1e-12, atol=1e-12)
            assert np.allclose(rs.state.moments[:, 1], q_sq, rtol=1e-12, atol=1e-12)
            assert rs.state.moment_count == before.moment_count + 10
        if w and i + 1 == w[1]:
            assert rs.state.moment_count == 0 and not rs.state.moments.any()
            assert rs.step_scale.shape == (rs.dim,) and not np.array_equal(rs.step_scale, np.ones(rs.dim))
            factors.append(rs.step_scale.copy())
        elif i > 0:
            assert np.array_equal(rs.step_scale, factors[-1]) if factors else rs.step_scale.size == 0
    assert len(factors) == 2 and not np.array_equal(*factors)
    heuristic = _set(metric="heuristic")
    for _ in range(5):
        advance(heuristic, action, 100)
    assert heuristic.step_scale.size == 0 and heuristic.state.moments.shape[2] == 0


def resumed(make, rs, steps: list, action, n: int = 4):
    """A set made by ``make`` and restored from ``rs``'s checkpoint (its ``steps`` so far), after ``n`` more
    super-transitions of ``action``, which ``rs`` runs too."""
    saved = rs.checkpoint()
    for _ in range(n):
        advance(rs, action, 100)
    fresh = make()
    fresh.restore(saved, steps)
    for _ in range(n):
        advance(fresh, action, 100)
    return fresh


def test_a_resume_in_the_middle_of_a_window_continues_bit_for_bit():
    rs = _set()
    steps, action = [], Action(0.2, 10)
    for _ in range(6):                         # in the second window, its factors from the first
        steps.append(advance(rs, action, 100).unit)
    fresh = resumed(_set, rs, steps, action)
    assert np.array_equal(fresh.step_scale, rs.step_scale)
    assert np.array_equal(fresh.chains[0].position, rs.chains[0].position)


def test_a_learned_metric_is_refused_where_it_has_no_heuristic_scales_to_correct():
    with pytest.raises(ValueError, match="metric"):
        _set(metric="diagonal")
    with pytest.raises(ValueError, match="metric='learned': learns factors"):
        _set(settings=HMCSettings(kind="metropolis"))


def test_kept_draws_carry_their_iterations_hamiltonian_log_density_and_acceptance():
    """With fixed hyperparameters (no Gibbs updates), each kept row's lp is minus the energy at its weights,
    its energy that plus a kinetic energy >= 0, the acceptance in [0, 1] and the leapfrog steps L; every
    3rd iteration would keep 4 of a super-transition's 12, fewer than the diagnostics' 16, so all 12 are
    kept."""
    rs = _set(metric="heuristic", thin=3, settings=HMCSettings(gibbs=False))
    advance(rs, Action(0.2, 10), 120)
    A, chain, _ = rs.kept_rows()
    stats = rs.kept_stats()
    assert stats.shape == (len(A), 6) and np.array_equal(np.bincount(chain), [12, 12, 12])
    assert np.all(stats[:, 5] == 1)                             # each of the 12 a diagnostic draw
    for row, (energy, lp, accept, diverging, n_steps, _) in zip(A, stats):
        r = rs.chain_data[0]
        u, _ = r.model.energy_grad(row[:rs.dim], r.model.initial_hyper(1.0))
        assert lp == pytest.approx(-u, rel=1e-10) and energy >= -lp and 0 <= accept <= 1
        assert n_steps == 10 and diverging == 0


def test_the_diagnostic_draws_are_the_same_whatever_thin():
    """keep_at: k evenly spaced retained iterations of a super-transition (none with thin 0; only retained
    iterations); the replica set keeps them besides every thin-th and marks them, so that the same chains
    give the same diagnostic draws at thin 200 (16 rows of 40 iterations, not 0) as at thin 2."""
    from adaptive_hmc.engine.super_transition import diagnostic_draws, keep_at
    from adaptive_hmc.rundir.metrics import draw_indices, kept_samples
    assert keep_at(120, 0, 0, 200, 16).tolist() == [int((j + 0.5) * 120 / 16) for j in range(16)]
    assert keep_at(120, 0, 0, 2, 16).tolist() == keep_at(120, 0, 0, 200, 16).tolist()
    assert keep_at(120, 0, 0, 0, 16).size == 0
    assert keep_at(100, 950, 1000, 200, 4).tolist() == [50 + int((j + 0.5) * 50 / 4) for j in range(4)]
    assert keep_at(100, 0, np.iinfo(np.int64).max, 200, 4).size == 0                    # burn-in: none
    assert keep_at(3, 0, 0, 200, 16).tolist() == [0, 1, 2]
    assert diagnostic_draws(8, 90) == 16 and diagnostic_draws(4, 1300) == 6 and diagnostic_draws(64, 10 ** 5) == 2
    draws = {}
    for thin in (200, 2):
        rs = _set(metric="heuristic", thin=thin)
        for _ in range(2):
            advance(rs, Action(0.2, 5), 200)
        kept = kept_samples(rs)
        draws[thin] = kept["weights"][draw_indices(kept, range(3))]
        union = {i for i in range(40) if (i + 1) % thin == 0} | set(keep_at(40, 0, 0, thin, 16).tolist())
        assert np.array_equal(np.bincount(kept["chain"]), [2 * len(union)] * 3)        # thin 200: 16, thin 2: 28
    assert draws[200].shape == (3, 32, rs.dim) and np.array_equal(draws[200], draws[2])
