"""Annealing with dummy momentum (Neal 1992 eqs 24-27): exact properties of
the stochastic move and the acceptance rule, and statistical tests on
Gaussian targets with known answers."""
import math

import numpy as np
import pytest
from scipy import integrate, stats

from adaptive_hmc.diagnostics import batch_means_mcse
from adaptive_hmc.samplers import anneal, hmc_settings, init_state, make_hmc
from adaptive_hmc.samplers.annealing import anneal_momentum, dummy_accept_prob

Z = 4.0


@pytest.mark.parametrize("alpha, t0", [(0.0, 1.0), (0.9, 1.0), (0.95, 15.0)])
@pytest.mark.statistical
def test_the_stochastic_move_leaves_the_momentum_distribution_at_t0_invariant(alpha, t0):
    """Significant and dummy momenta drawn at temperature t0 keep their
    distribution under eq 24: |p_s|^2 / t0 and 2 K_d / t0 stay chi-squared with
    N_s degrees of freedom each (checked by mean, variance and a KS test)."""
    rng = np.random.default_rng(1)
    n_s, copies = 5, 20_000
    after_s, after_d = [], []
    for _ in range(copies):
        p = rng.normal(scale=math.sqrt(t0), size=n_s)
        kd = 0.5 * t0 * rng.chisquare(n_s)
        kd = anneal_momentum(p, kd, alpha, t0, rng)
        after_s.append(p @ p / t0)
        after_d.append(2 * kd / t0)
    for x in (np.array(after_s), np.array(after_d)):
        assert abs(x.mean() - n_s) < Z * math.sqrt(2 * n_s / copies)
        assert stats.kstest(x, stats.chi2(n_s).cdf).pvalue > 1e-3
    # power: from momenta at another temperature the same test sees the difference
    p = np.ones(n_s) * 3.0
    x = []
    for _ in range(2000):
        q = p.copy()
        anneal_momentum(q, 0.5 * 9.0 * n_s, 0.95, 1.0, rng)
        x.append(q @ q)
    assert stats.kstest(np.array(x), stats.chi2(n_s).cdf).pvalue < 1e-6


def test_rho_tends_to_exp_minus_dh_as_the_dummies_grow():
    """Eq 26: with K_d at its mean N_d T / 2 (T = 1), rho -> exp(-dH)."""
    for dh in (-0.5, 0.3, 2.0):
        errs = [abs(dummy_accept_prob(dh, n / 2, n) - min(1.0, math.exp(-dh))) for n in (10, 100, 10_000, 10 ** 6)]
        assert errs[-1] < 1e-5 and all(b <= a + 1e-15 for a, b in zip(errs, errs[1:]))
    assert dummy_accept_prob(5.0, 4.0, 10) == 0.0 and dummy_accept_prob(math.inf, 4.0, 10) == 0.0


@pytest.mark.parametrize("n_d", [2, 5, 40])
def test_rho_averaged_over_fresh_dummies_is_the_metropolis_probability(n_d):
    """With alpha = 0 the dummy kinetic energy is Gamma(N_d/2, T0) before each
    move; averaged over it, rho accepts a rise dH with probability exp(-dH),
    exactly as plain HMC does (eq 19), for any N_d."""
    for dh in (0.1, 1.0, 3.0):
        val, _ = integrate.quad(lambda k: dummy_accept_prob(dh, k, n_d) * stats.gamma(n_d / 2).pdf(k), 0, np.inf,
                                limit=200)
        assert val == pytest.approx(math.exp(-dh), rel=1e-6)


def _acceptance(target, settings, n, alpha, rng_seed, annealed):
    st = init_state(target, target.mean.copy())
    rng = np.random.default_rng(rng_seed)
    if annealed:
        trace = anneal(target, st, [(n, alpha, 1.0)], settings, rng)[2]
        return trace[:, 2]
    hmc = make_hmc(target)
    out = np.empty(n)
    for i in range(n):
        st, info = hmc(st, settings, rng)
        out[i] = info.accepted
    return out


@pytest.mark.statistical
def test_with_alpha_zero_the_acceptance_rate_is_plain_hmcs(wide10):
    settings = hmc_settings(10, step_factor=1.4, gibbs=False)
    a = _acceptance(wide10, settings, 6000, 0.0, 3, annealed=True)
    b = _acceptance(wide10, settings, 6000, 0.0, 4, annealed=False)
    se = math.hypot(batch_means_mcse(a), batch_means_mcse(b))
    assert 0.2 < b.mean() < 0.95                      # a regime where the rate says something
    assert abs(a.mean() - b.mean()) < Z * se


@pytest.mark.parametrize("metropolis", [False, True])
@pytest.mark.statistical
def test_annealed_chains_at_t1_sample_the_target(bivariate, metropolis):
    """After Neal's schedule (hot start at T0 = 15, cooling with alpha 0.95 (HMC)
    or 0.99995-like slow cooling (Metropolis), then T0 = 1 with alpha 0), the
    chain samples the Gaussian: means and variances within Monte Carlo error."""
    target = bivariate
    rng = np.random.default_rng(7)
    st = init_state(target, target.mean + 3.0)
    if metropolis:
        settings, n = hmc_settings(1, step_factor=1.0, gibbs=False), 200_000
        phases = [(500, 0.0, 15.0), (5000, 0.999, 1.0), (n, 0.0, 1.0)]
    else:
        settings, n = hmc_settings(20, step_factor=0.5, gibbs=False), 8000
        phases = [(10, 0.0, 15.0), (130, 0.95, 1.0), (n, 0.0, 1.0)]
    _, _, trace, x = anneal(target, st, phases, settings, rng, metropolis=metropolis)
    assert trace[:phases[0][0], 0].mean() > 5.0              # hot first (T measured from the momenta)
    x = x[-n:][n // 10:]
    for vals, truth in ((x, target.mean), ((x - target.mean) ** 2, np.diag(target.cov))):
        est, mcse = vals.mean(axis=0), batch_means_mcse(vals)
        assert np.all(mcse < 0.1 * np.sqrt(np.diag(target.cov)) + 0.1 * np.diag(target.cov))   # power
        assert np.all(np.abs(est - truth) < Z * mcse), (est, truth, mcse)


@pytest.mark.statistical
def test_the_schedule_cools_the_system_to_t0(bivariate):
    """Temperature measured from the momenta: near 15 in the hot phase, near 1
    at the end (the dummy components carry half of it)."""
    rng = np.random.default_rng(8)
    st = init_state(bivariate, bivariate.mean.copy())
    trace = anneal(bivariate, st, [(200, 0.0, 15.0), (300, 0.95, 1.0), (2000, 0.0, 1.0)],
                   hmc_settings(10, step_factor=0.5, gibbs=False), rng)[2]
    hot, cold = trace[:200, 0], trace[-1500:, 0]
    assert abs(hot.mean() - 15.0) < Z * batch_means_mcse(hot)
    assert abs(cold.mean() - 1.0) < Z * batch_means_mcse(cold)
    assert trace[200:500, 0][:50].mean() > trace[200:500, 0][-50:].mean()       # cooling during phase 2
