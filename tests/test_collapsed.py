"""The network's precisions integrated out of HMC's density (``PriorSpec(collapse=True)``,
:mod:`adaptive_hmc.models.collapsed`): the energy against the marginal by quadrature over each
precision, the gradient against finite differences on each of its paths (one Gaussian output, several,
a classifier, float32, two threads), the step scales' independence of the drawn precisions, and seeded
statistical tests of the chains against importance sampling (the groups' precisions, and the noise's)."""
import math

import numpy as np
import pytest
from scipy import integrate, special

from adaptive_hmc.engine.network_options import Layout
from adaptive_hmc.diagnostics import batch_means_mcse
from adaptive_hmc.models.bnn import BayesianMLP
from adaptive_hmc.models.mlp import MLPSpec
from adaptive_hmc.models.priors import GammaPrior, PriorSpec
from adaptive_hmc.samplers import hmc_settings, init_state, make_hmc

Z = 4.0
COLLAPSED = PriorSpec(collapse=True, input_hidden=GammaPrior(2.0, 2.0), hidden_bias=GammaPrior(1.0, 3.0),
                      hidden_output=GammaPrior(4.0, 2.0), noise=GammaPrior(3.0, 1.0))
SPECS = [MLPSpec(2, (3,), 1), MLPSpec(2, (3,), 2), MLPSpec(3, (4,), 1, "logistic", direct=True),
         MLPSpec(3, (4, 3), 3, "softmax")]


def _model(spec, rng, priors=COLLAPSED, n=11, **kw):
    X = rng.normal(size=(n, spec.n_inputs))
    if spec.likelihood == "gaussian":
        Y = rng.normal(size=(n, spec.n_outputs))
    else:
        Y = rng.integers(0, 2 if spec.likelihood == "logistic" else spec.n_outputs, size=(n, 1)).astype(float)
    return BayesianMLP(spec, X, Y, priors, **kw)


def _log_marginal_factor(a, b, n, ss):
    """log of the integral over tau of Gamma(tau; shape a, rate b) tau^(n/2) exp(-tau ss / 2), by
    quadrature in log tau (the marginal's factor of one precision, its constants included)."""
    def f(v):
        return math.exp(a * math.log(b) - math.lgamma(a) + (a + 0.5 * n) * v - math.exp(v) * (b + 0.5 * ss))
    mode = math.log((a + 0.5 * n) / (b + 0.5 * ss))
    value, _ = integrate.quad(f, mode - 30, mode + 30, points=[mode], limit=200, epsabs=0, epsrel=1e-12)
    return math.log(value)


def _marginal_energy(model, q, hyper):
    """Minus the log of the posterior density with every collapsed precision integrated out numerically
    (up to a constant in q), from the explicit Gaussian prior and likelihood."""
    prior, spec = model.prior, model.spec
    ss = np.bincount(prior.param_slot, weights=prior.param_scale * q ** 2, minlength=prior.slot_shape.size)
    count = np.bincount(prior.param_slot, minlength=prior.slot_shape.size)
    u = 0.0
    for s in range(ss.size):
        a = prior.slot_shape[s]
        if math.isfinite(a):
            u -= _log_marginal_factor(0.5 * a, 0.5 * a / prior.slot_mean[s], count[s], ss[s])
        else:
            u += 0.5 * prior.slot_mean[s] * ss[s]
    f = model.predict(q, model.X)
    if spec.likelihood == "gaussian":
        for o in range(spec.n_outputs):
            a = prior.noise_shape[o]
            sse = np.sum((f[:, o] - model.Y[:, o]) ** 2)
            u -= _log_marginal_factor(0.5 * a, 0.5 * a / prior.noise_mean[o], model.n_cases, sse)
        return u
    from adaptive_hmc.models import reference
    return u + reference.energy_grad(spec, q, model.X, model.Y, np.zeros(q.size), hyper.noise)[0]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.likelihood}-{s.n_outputs}")
def test_energy_is_the_marginal_by_quadrature(spec):
    """Differences of the collapsed energy between points equal those of the marginal posterior
    computed by quadrature over each precision (to 1e-8), whatever the explicit precisions say."""
    rng = np.random.default_rng(1)
    model = _model(spec, rng)
    hyper = model.initial_hyper(3.0)
    points = [0.6 * rng.normal(size=model.dim) for _ in range(3)]
    u = np.array([model.energy_grad(q, hyper)[0] for q in points])
    ref = np.array([_marginal_energy(model, q, hyper) for q in points])
    assert np.allclose(u - u[0], ref - ref[0], atol=1e-8, rtol=1e-9), (u - u[0], ref - ref[0])
    other = model.initial_hyper(0.1)            # the collapsed precisions' values do not enter the energy
    assert model.energy_grad(points[1], other)[0] == u[1]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.likelihood}-{s.n_outputs}")
def test_gradient_matches_finite_differences(spec):
    rng = np.random.default_rng(2)
    model = _model(spec, rng)
    hyper = model.initial_hyper(1.0)
    q = 0.7 * rng.normal(size=model.dim)
    _, g = model.energy_grad(q, hyper)
    h = 1e-6
    fd = np.array([(model.energy_grad(q + h * e, hyper)[0] - model.energy_grad(q - h * e, hyper)[0]) / (2 * h)
                   for e in np.eye(model.dim)])
    assert np.allclose(g, fd, atol=1e-6 * max(1.0, np.abs(g).max()), rtol=1e-6), np.abs(g - fd).max()


def test_float32_and_two_threads():
    """The hidden units in float32 give the float64 energy to single precision; the blocks of cases shared
    by two threads give the same bits as one thread."""
    rng = np.random.default_rng(3)
    spec = MLPSpec(4, (5,), 1)
    X, Y = rng.normal(size=(600, 4)), rng.normal(size=(600, 1))
    one, two, f32 = (BayesianMLP(spec, X, Y, COLLAPSED, threads=t, arithmetic=p)
                     for t, p in ((1, "float64"), (2, "float64"), (1, "float32")))
    hyper = one.initial_hyper(1.0)
    q = 0.5 * rng.normal(size=one.dim)
    (u1, g1), (u2, g2), (u3, g3) = (m.energy_grad(q, hyper) for m in (one, two, f32))
    assert u1 == u2 and np.array_equal(g1, g2)
    assert abs(u3 - u1) < 1e-4 * abs(u1) and np.allclose(g3, g1, rtol=1e-3, atol=1e-3 * np.abs(g1).max())


def test_step_scales_do_not_follow_the_collapsed_precisions():
    """A collapsed precision drawn given the weights must not set the steps (the kernel would depend on the
    state): the scales are the same at any value of the collapsed ones, and follow a fixed group's."""
    priors = PriorSpec(collapse=True, hidden_bias=GammaPrior(2.0, math.inf))
    model = _model(MLPSpec(2, (3,), 1), np.random.default_rng(4), priors)
    explicit = _model(MLPSpec(2, (3,), 1), np.random.default_rng(4), PriorSpec(hidden_bias=GammaPrior(2.0, math.inf)))
    a, b = model.initial_hyper(0.1), model.initial_hyper(30.0)
    assert np.array_equal(model.scales(a), model.scales(b))
    assert np.allclose(model.scales(a), explicit.scales(explicit.initial_hyper(1.0)))
    assert not np.allclose(explicit.scales(a), explicit.scales(b))


def _importance(spec, X, Y, groups, noise, x_star, n, seed):
    """Posterior means (and standard errors) of the log precisions of the three weight groups, of the log
    noise precision when ``noise`` is a (shape alpha, mean) pair (integrated out of the weights
    analytically; else the noise precision is fixed at 9), and of the output at ``x_star``, by self-normalised importance sampling from the prior."""
    r = np.random.default_rng(seed)
    tau = np.column_stack([r.gamma(a / 2, 2 * m / a, size=n) for a, m in groups])
    w_in, b_h, w_out = (r.normal(size=(n, 2)) / np.sqrt(tau[:, i:i + 1]) for i in range(3))
    b_out = r.normal(size=(n, 1))

    def f(x):
        return np.tanh(x[None, :, 0, None] * w_in[:, None, :] + b_h[:, None, :]) @ w_out[:, :, None] + b_out[:, None]

    sse = np.sum((f(X)[:, :, 0] - Y[None, :, 0]) ** 2, axis=1)
    if noise is None:
        logw = -0.5 * 9.0 * sse
        values = np.column_stack([np.log(tau), f(x_star)[:, :, 0]])
    else:                           # the noise precision integrated out: its log's conditional mean given the fit
        a, b = noise[0] / 2 + len(X) / 2, noise[0] / (2 * noise[1]) + sse / 2
        logw = -a * np.log(b)
        values = np.column_stack([np.log(tau), special.digamma(a) - np.log(b), f(x_star)[:, :, 0]])
    w = np.exp(logw - logw.max())
    w /= w.sum()
    assert 1 / np.sum(w ** 2) > 3000
    mean = w @ values
    return mean, np.sqrt(w ** 2 @ (values - mean) ** 2)


@pytest.mark.statistical
@pytest.mark.parametrize("free_noise, moves", [(False, "gibbs"), (True, "gibbs"), (True, "interweave")])
def test_collapsed_chains_agree_with_importance_sampling(free_noise, moves):
    """HMC on the 1-2-1 network's marginal posterior (each weight group's precision integrated out, and the
    noise's when free), the precisions drawn from their conditionals before each trajectory: the means of
    the log precisions and of the output at three inputs within Z combined standard errors of importance
    sampling from the prior. Power: the standard errors are under a tenth of each quantity's posterior sd."""
    rng = np.random.default_rng(21)
    X = np.linspace(-2, 2, 6)[:, None]
    Y = np.tanh(2.0 * X - 0.5) + (0.5 if free_noise else 0.1) * rng.normal(size=(6, 1))
    groups = [(4.0, 1.0)] * 3
    noise = (4.0, 4.0) if free_noise else None
    g = GammaPrior(1.0, 4.0)
    priors = PriorSpec(input_hidden=g, hidden_bias=g, hidden_output=g, output_bias=GammaPrior(1.0, math.inf),
                       noise=GammaPrior(4.0 if free_noise else 9.0, 4.0 if free_noise else math.inf), scale_hidden_output=False,
                       hyper_moves=moves, collapse=True)
    x_star = np.array([[-1.0], [0.3], [1.5]])
    is_mean, is_se = _importance(MLPSpec(1, (2,), 1), X, Y, groups, noise, x_star, 1_500_000, 22)
    model = BayesianMLP(MLPSpec(1, (2,), 1), X, Y, priors)
    hmc = make_hmc(model)
    st = init_state(model, 0.5 * rng.normal(size=model.dim), model.initial_hyper())
    settings = hmc_settings(15, step_factor=0.3, jitter=True)
    n, width = 30_000, is_mean.size
    draws = np.empty((n, width))
    for i in range(n):
        st, _ = hmc(st, settings, rng)
        draws[i, :width - 3] = np.log(np.concatenate([st.hyper.tau[:3], st.hyper.noise[:int(free_noise)]]))
        draws[i, width - 3:] = model.predict(st.position, x_star)[:, 0]
    draws = draws[n // 10:]
    se = np.sqrt(batch_means_mcse(draws) ** 2 + is_se ** 2)
    assert np.all(se < 0.1 * draws.std(axis=0)), (se, draws.std(axis=0))
    assert np.all(np.abs(draws.mean(axis=0) - is_mean) < Z * se), (draws.mean(axis=0), is_mean, se)


@pytest.mark.statistical
@pytest.mark.parametrize("metric, super_transitions", [("learned", 40), ("low_rank", 140)])
def test_collapsed_chains_with_a_learned_metric_agree_with_importance_sampling(metric, super_transitions,
                                                                              monkeypatch):
    """The replica set's four chains of the 1-2-1 network with every group's precision integrated out and
    the metric learned from the chains (the regression template's way; "low_rank": with each chain's
    low-rank masses too, at a cutoff of 1.2 so that this nearly diagonal posterior gets rows), the rows
    after the metric's last window: the means of the three log precisions and of the output at three inputs within Z combined
    standard errors of importance sampling. Power: the standard errors are under a tenth of each
    quantity's posterior sd."""
    from adaptive_hmc.engine.driver import drive
    from adaptive_hmc.engine.network_options import NetworkOptions
    from adaptive_hmc.engine.runner import RunOptions, make_run
    from adaptive_hmc.samplers.metric import LOW_RANK_WINDOWS, WINDOWS
    from adaptive_hmc.samplers import metric as metric_module
    from adaptive_hmc.tuners.options import FixedOptions
    monkeypatch.setattr(metric_module, "LOW_RANK_CUTOFF", 1.2)
    rng = np.random.default_rng(21)
    X = np.linspace(-2, 2, 6)[:, None]
    Y = np.tanh(2.0 * X - 0.5) + 0.1 * rng.normal(size=(6, 1))
    g = GammaPrior(1.0, 4.0)
    priors = PriorSpec(input_hidden=g, hidden_bias=g, hidden_output=g, output_bias=GammaPrior(1.0, math.inf),
                       noise=GammaPrior(9.0, math.inf), scale_hidden_output=False, collapse=True)
    x_star = np.array([[-1.0], [0.3], [1.5]])
    spec = MLPSpec(1, (2,), 1)
    is_mean, is_se = _importance(spec, X, Y, [(4.0, 1.0)] * 3, None, x_star, 1_500_000, 22)
    run = make_run(spec, X, Y, tuner=FixedOptions(0.3, 15), run=RunOptions(super_transitions, 240_000 //
                                                                           super_transitions, seed=3),
                   network=NetworkOptions(layout=Layout.chains(4), priors=priors, metric=metric, thin=1, predict_steps=0))
    drive(run, super_transitions)
    A, chain, st = run.chains.kept_rows()
    dim = run.chains.dim
    if metric == "low_rank":
        assert np.any(run.chains.state.low_rank[:, :, 0] != 1.0)
    first = (LOW_RANK_WINDOWS if metric == "low_rank" else WINDOWS)[-1][1]
    per_chain = []
    for j in range(4):
        rows = A[(chain == j) & (st >= first)]
        per_chain.append(np.column_stack([np.log(rows[:, dim:dim + 3]),
                                          BayesianMLP(spec, X, Y, priors).predict(rows[:, :dim], x_star)[:, :, 0]]))
    means = np.array([d.mean(axis=0) for d in per_chain])
    se = np.sqrt(np.sum([batch_means_mcse(d) ** 2 for d in per_chain], axis=0) / 16 + is_se ** 2)
    sd = np.concatenate(per_chain).std(axis=0)
    assert np.all(se < 0.1 * sd), (se, sd)
    assert np.all(np.abs(means.mean(axis=0) - is_mean) < Z * se), (means.mean(axis=0), is_mean, se)


def test_the_slow_directions_experiment_reads_a_finished_run(tmp_path, capsys):
    """experiments/slow_directions.py on a small finished run: every group's log norm, the varying log
    hyperparameters, the energy and the units' scales, each with R-hat, ESS and one own R-hat a chain."""
    import json
    from cli_helpers import _table_run, load_script
    out, _, _ = _table_run(tmp_path, thin=1)
    script = load_script("experiments", "slow_directions")
    capsys.readouterr()
    assert script.main([str(out), "--json", "--units", "2"]) == 0
    stats = json.loads(capsys.readouterr().out)["quantities"]
    assert {"log |input_hidden|", "log |hidden_output|", "energy", "log |w_in of unit 1|"} <= set(stats)
    assert any(k.startswith("log hyper") for k in stats)
    for s in stats.values():
        assert len(s["own"]) == 3 and len(s["means"]) == 3 and s["ess"] > 0 and np.isfinite(s["rhat"])
