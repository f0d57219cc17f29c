"""The low-rank metric (samplers/metric.py, samplers/leapfrog.py): the estimate against draws of known
covariance, the velocity, kinetic energy and momentum draws against NumPy, the leapfrog's reversibility and
second-order energy error under it, HMC under it on a correlated Gaussian (moments within Monte Carlo
error, and faster than without it), and a chain set that learns it in its windows and resumes bit for bit."""
import numpy as np
import pytest

from adaptive_hmc.diagnostics import batch_means_mcse
from adaptive_hmc.models.gaussian import GaussianTarget
from adaptive_hmc.samplers import hmc_settings, init_state, make_hmc
from adaptive_hmc.samplers.hmc import refresh_momentum_metric
from adaptive_hmc.samplers.leapfrog import kinetic_metric, leapfrog_metric, velocity
from adaptive_hmc.samplers.metric import LOW_RANK_WINDOWS, WINDOWS, low_rank_metric, window_of
from adaptive_hmc.samplers.settings import Action, SettingsError
from adaptive_hmc.engine.chain_set import advance

Z = 4.0


def _rows(D, lams, seed):
    """Low-rank rows [lambda_j, u_j] with orthonormal random u_j."""
    u = np.linalg.qr(np.random.default_rng(seed).normal(size=(D, len(lams))))[0].T
    return np.column_stack([lams, u])


def _inverse_mass(rows):
    D = rows.shape[1] - 1
    return np.eye(D) + sum((lam - 1.0) * np.outer(u, u) for lam, u in zip(rows[:, 0], rows[:, 1:]))


def test_the_estimate_finds_the_directions_and_variances_of_a_gaussian_and_nothing_in_white_noise():
    """Draws of a Gaussian whose covariance, after the diagonal, is I + 24 u u^T - 0.96 w w^T, with their
    gradients: two rows, lambda 25 and 0.04 within sampling error, along u and w; draws of a diagonal
    Gaussian: no row (power: the same estimate on the first draws does find them)."""
    rng = np.random.default_rng(0)
    D, n = 20, 2000
    (_, *u), (_, *w) = _rows(D, [1.0, 1.0], 1)
    sd = rng.uniform(0.5, 3.0, D)
    C = np.eye(D) + 24.0 * np.outer(u, u) - 0.96 * np.outer(w, w)
    cov = sd[:, None] * C * sd[None, :]
    q = rng.multivariate_normal(np.zeros(D), cov, size=n)
    m = low_rank_metric(q, q @ np.linalg.inv(cov), sd)
    assert m.shape == (2, D + 1)
    assert m[0, 0] == pytest.approx(25.0, rel=Z * np.sqrt(2.0 / n)) and m[1, 0] == pytest.approx(0.04, rel=0.15)
    assert abs(m[0, 1:] @ u) > 0.99 and abs(m[1, 1:] @ w) > 0.99
    assert np.allclose(m[:, 1:] @ m[:, 1:].T, np.eye(2), atol=1e-10)
    white = rng.normal(size=(n, D)) * sd
    assert low_rank_metric(white, white / sd ** 2, sd).shape == (0, D + 1)
    assert low_rank_metric(q[:2], q[:2], sd).shape == (0, D + 1)          # too few draws


def test_velocity_kinetic_energy_and_momentum_draws_follow_the_mass_matrix():
    """v = M^-1 p and K = p M^-1 p / 2 against NumPy; the fresh momenta's covariance is M within 4 standard
    errors, and a persistent refresh keeps N(0, M); no rows: the plain kinetic energy."""
    D = 6
    rows = _rows(D, [9.0, 0.25], 2)
    Minv = _inverse_mass(rows)
    p = np.random.default_rng(3).normal(size=D)
    assert np.allclose(velocity(p, rows, np.empty(D)), Minv @ p, atol=1e-12)
    assert kinetic_metric(p, rows) == pytest.approx(0.5 * p @ Minv @ p, rel=1e-12)
    assert kinetic_metric(p, np.empty((0, D + 1))) == pytest.approx(0.5 * p @ p, rel=1e-15)
    M = np.linalg.inv(Minv)
    rng = np.random.default_rng(4)
    n = 40_000
    for persistence in (0.0, 0.8):
        draws = np.empty((n, D))
        x = rng.normal(size=D)
        for i in range(n):
            refresh_momentum_metric(x, persistence, rows, rng)
            draws[i] = x
        draws = draws[100:]
        se = np.sqrt((np.outer(np.diag(M), np.diag(M)) + M ** 2) / (draws.shape[0] * (1 - persistence ** 2)))
        assert np.all(np.abs(np.cov(draws.T) - M) < Z * 2 * se), persistence
        assert not np.all(np.abs(np.cov(draws.T) - np.eye(D)) < Z * 2 * se)  # power: unit masses fail it


def test_the_leapfrog_under_a_low_rank_metric_is_reversible_with_second_order_energy_error(wide10):
    rng = np.random.default_rng(5)
    rows = _rows(wide10.dim, [20.0, 0.2, 3.0], 6)
    st = init_state(wide10, wide10.mean + wide10.scales(), None)
    p = rng.normal(size=wide10.dim)
    q1, g1, p1 = st.position.copy(), st.grad.copy(), p.copy()
    step = 0.1 * wide10.scales()
    assert leapfrog_metric(q1, p1, g1, step, 40, wide10.target, st.hyper, rows)[2]
    assert not np.allclose(q1, st.position)
    p1 = -p1
    assert leapfrog_metric(q1, p1, g1, step, 40, wide10.target, st.hyper, rows)[2]
    np.testing.assert_allclose(q1, st.position, atol=1e-10)
    np.testing.assert_allclose(-p1, p, atol=1e-10)
    errs = []
    for eps in (0.1, 0.05, 0.025, 0.0125):
        q, g, pp = st.position.copy(), st.grad.copy(), p.copy()
        u, _, _ = leapfrog_metric(q, pp, g, eps * wide10.scales(), int(round(0.8 / eps)), wide10.target,
                                  st.hyper, rows)
        errs.append(abs(u + kinetic_metric(pp, rows) - st.energy[0] - kinetic_metric(p, rows)))
    ratios = np.array(errs[:-1]) / np.array(errs[1:])
    assert np.all((ratios > 3.0) & (ratios < 5.0)), ratios


def _correlated():
    """8-d Gaussian whose covariance, after its diagonal, has one direction of variance 50 and one of 0.05."""
    D = 8
    rows = _rows(D, [50.0, 0.05], 7)
    sd = np.linspace(0.5, 2.0, D)
    C = _inverse_mass(rows)
    return GaussianTarget(np.linspace(-1, 1, D), sd[:, None] * C * sd[None, :]), rows, sd


def _draws(target, settings, n, seed):
    step, rng = make_hmc(target), np.random.default_rng(seed)
    st = init_state(target, target.mean + 0.3)
    out = np.empty((n, target.dim))
    for i in range(n):
        st, _ = step(st, settings, rng)
        out[i] = st.position
    return out[n // 20:]


@pytest.mark.parametrize("window, persistence", [(1, 0.0), (3, 0.0), (1, 0.9)])
def test_hmc_under_the_low_rank_metric_samples_a_correlated_gaussian(window, persistence):
    """The metric the target's covariance has (the steps its diagonal sds): means and variances within Z
    batch-means MCSEs of the truth, the MCSEs small enough to test; the long direction's MCSE is smaller
    than without the metric at the same steps (the metric does what it is for)."""
    target, rows, sd = _correlated()
    L = 4 if persistence else 10
    settings = hmc_settings(L, step_size=0.25 * sd, window=window, persistence=persistence, low_rank=rows)
    x = _draws(target, settings, 12_000, 8)
    var = np.diag(target.cov)
    for vals, truth in ((x, target.mean), ((x - target.mean) ** 2, var)):
        mcse = batch_means_mcse(vals)
        assert np.all(mcse < 0.15 * np.sqrt(var) + 0.15 * var), mcse
        assert np.all(np.abs(vals.mean(axis=0) - truth) < Z * mcse)
    long = (rows[0, 1:] / sd)
    plain = _draws(target, settings._replace(low_rank=np.empty((0, target.dim + 1))), 12_000, 8)
    assert batch_means_mcse(x @ long) < 0.5 * batch_means_mcse(plain @ long)


def test_low_rank_rows_are_checked():
    rows = _rows(3, [4.0], 9)
    with pytest.raises(SettingsError, match="low_rank"):
        hmc_settings(5, step_factor=0.1, low_rank=rows * 2)                  # not a unit vector
    with pytest.raises(SettingsError, match="low_rank"):
        hmc_settings(5, step_factor=0.1, low_rank=rows, kind="metropolis")
    with pytest.raises(ValueError, match="low_rank rows"):
        make_hmc(GaussianTarget(np.zeros(4), np.eye(4)))(init_state(GaussianTarget(np.zeros(4), np.eye(4)),
                                                                    np.zeros(4)),
                                                         hmc_settings(5, step_factor=0.1, low_rank=rows), None)


def _set(**kw):
    """test_metric's chain set of a small network, with the low-rank metric."""
    from test_metric import _set as learned_set
    return learned_set(**{"metric": "low_rank", **kw})


def test_a_chain_set_learns_each_chains_low_rank_in_its_windows_and_resumes_bit_for_bit():
    """The low-rank windows extend the diagonal's; each window's end sets every chain's rows (orthonormal,
    lambda outside the cutoff or padding 1) and clears the trace; between ends the trace grows; a resume
    in the middle of a window continues bit for bit."""
    assert LOW_RANK_WINDOWS[:len(WINDOWS)] == WINDOWS and window_of(40, "low_rank") == (32, 64)
    assert window_of(40) is None
    rs = _set()
    action, steps = Action(0.2, 10), []
    for i in range(7):
        steps.append(advance(rs, action, 100).unit)
        if i + 1 == 4:
            assert rs.state.trace.shape[1] == 0 and rs.state.low_rank.shape[:1] == (3,)
            lr = rs.state.low_rank
            assert lr.shape[1] > 0 and lr.shape[2] == rs.dim + 1
            for rows in lr:
                real = rows[rows[:, 0] != 1.0]
                assert np.allclose(real[:, 1:] @ real[:, 1:].T, np.eye(len(real)), atol=1e-8)
    assert rs.state.trace.shape[:2] == (3, 30)                               # 5, 6, 7 of window (4, 8)
    from test_metric import resumed
    fresh = resumed(_set, rs, steps, action)
    assert np.array_equal(fresh.state.low_rank, rs.state.low_rank)
    assert np.array_equal(fresh.chains[0].position, rs.chains[0].position)
    with pytest.raises(ValueError, match="metric='low_rank': learns factors"):
        _set(settings=hmc_settings(5, step_factor=0.1, kind="metropolis")._replace(num_steps=1))
