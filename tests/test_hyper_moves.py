"""The interweaving moves of the network's precisions (``PriorSpec.hyper_moves``):
their directions, the density they sample along a line against a plain NumPy
joint density, what they keep fixed, and a seeded statistical test of the whole
iteration [Gibbs, interweaving moves, HMC] on a small hierarchical network
against importance sampling."""
import math

import numpy as np
import pytest

from adaptive_hmc.engine.network_options import Layout
from adaptive_hmc.diagnostics import batch_means_mcse
from adaptive_hmc.engine.driver import drive
from adaptive_hmc.models import reference
from adaptive_hmc.jit import njit
from adaptive_hmc.models.bnn import BayesianMLP, _line_log_density, scale_moves
from adaptive_hmc.models.mlp import N_OUT, MLPSpec, line_setup, mlp_data_energy
from adaptive_hmc.models.priors import GammaPrior, PriorSpec
from adaptive_hmc.samplers import hmc_settings, init_state, make_hmc
from adaptive_hmc.samplers.chain import HYPER_MOVE_STEPS

Z = 4.0


@njit
def _line_log_density_at(x, q, d, t, hyper, logtau, qn, factor, line, P, arow):
    """``_line_log_density`` (a kernel that compiled kernels alone call) from Python."""
    return _line_log_density(x, q, d, t, hyper, logtau, qn, factor, line, P, arow)


@njit
def _scale_moves(q, t, hyper, rng):
    return scale_moves(q, t, hyper, rng)
SPECS = [MLPSpec(2, (5,), 2), MLPSpec(3, (4, 3), 1, "logistic", direct=True), MLPSpec(3, (4,), 3, "softmax")]


def _model(spec, rng, ard=False, n=17):
    X = rng.normal(size=(n, spec.n_inputs))
    if spec.likelihood == "gaussian":
        Y = rng.normal(size=(n, spec.n_outputs))
    else:
        Y = rng.integers(0, max(2, spec.n_outputs if spec.likelihood == "softmax" else 2), size=(n, 1)).astype(float)
    return BayesianMLP(spec, X, Y, PriorSpec(ard=ard))


def test_directions_are_each_free_precision_each_layers_inputs_and_each_layer_against_the_next():
    spec = MLPSpec(2, (3, 4), 1)
    model = BayesianMLP(spec, np.zeros((3, 2)), np.zeros((3, 1)))
    names = model.slot_names
    D = model.target.scale_dirs
    free = np.isfinite(model.prior.slot_shape)
    assert D.shape == (free.sum() + 4, len(names))
    np.testing.assert_array_equal(D[:free.sum()], np.eye(len(names))[free])
    assert not D[:, ~free].any()                                   # the fixed output bias never moves
    by = [dict(zip(names, d)) for d in D[free.sum():]]
    assert by[0] == {"input_hidden": 1, "hidden_bias_1": 1, "hidden_hidden_1_2": 0, "hidden_bias_2": 0,
                     "hidden_output": 0, "output_bias": 0}         # a layer's incoming weights and biases together
    assert by[1] == {"input_hidden": 1, "hidden_bias_1": 1, "hidden_hidden_1_2": -1, "hidden_bias_2": 0,
                     "hidden_output": 0, "output_bias": 0}         # ... against its outgoing weights
    assert by[2] == {"input_hidden": 0, "hidden_bias_1": 0, "hidden_hidden_1_2": 1, "hidden_bias_2": 1,
                     "hidden_output": 0, "output_bias": 0}
    assert by[3] == {"input_hidden": 0, "hidden_bias_1": 0, "hidden_hidden_1_2": 1, "hidden_bias_2": 1,
                     "hidden_output": -1, "output_bias": 0}
    gibbs_only = BayesianMLP(spec, np.zeros((3, 2)), np.zeros((3, 1)), PriorSpec(hyper_moves="gibbs"))
    assert gibbs_only.target.scale_dirs is None                        # no moves: their code is not compiled
    with pytest.raises(ValueError, match="hyper_moves='hmc': allowed are interweave, gibbs"):
        PriorSpec(hyper_moves="hmc")


def _joint_log_density(model, q, logtau, top, noise):
    """log p(q, log tau | data) + const in the centred coordinates, by NumPy:
    minus the reference energy, each weight's normalising 1/2 log precision, and
    each free precision's Gamma prior with the Jacobian of its log."""
    prior = model.prior
    tau = np.exp(logtau)
    prec = tau[prior.param_slot] * prior.param_scale
    e, _ = reference.energy_grad(model.spec, q, model.X, model.Y, prec, noise)
    free = np.isfinite(prior.slot_shape)
    a = prior.slot_shape[free]
    mu = np.where(prior.slot_top >= 0, top[np.maximum(prior.slot_top, 0)] if top.size else 0.0,
                  prior.slot_mean)[free]
    return (-e + 0.5 * np.sum(np.log(prec)[free[prior.param_slot]])
            + np.sum(0.5 * a * logtau[free] - 0.5 * a / mu * tau[free]))


NO_LINE = (0, 0.0, 0.0, 0.0, 0.0)


def _line(t, q, d):
    """What scale_moves evaluates a line from: (line_setup's answer, P, arow) for q along d."""
    P, arow = np.empty((t.arch[N_OUT], t.YT.shape[1])), np.empty(t.YT.shape[1], t.XT.dtype)
    return line_setup(q, d[t.prior.param_slot], t.arch, t.XT, t.YT, t.work, P, arow, t.scratch), P, arow


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.likelihood}-{s.hidden}")
@pytest.mark.parametrize("ard", [False, True])
def test_line_density_is_the_joint_density_with_the_moves_jacobian(spec, ard):
    """Along each direction d, the kernel's log density at x minus at 0 equals
    the NumPy joint density's change from (q, log tau) to (q exp(x d), log tau
    - 2 x d) plus the log Jacobian of that map, sum_s n_s x d_s: by forward
    passes, and (one hidden layer, no direct connections) from the line's
    pre-activation parts, kind 1 where they move and 2 where they stay."""
    rng = np.random.default_rng(3)
    model = _model(spec, rng, ard)
    t = model.target
    hyper = model.initial_hyper()
    hyper.tau[:] = np.where(np.isfinite(model.prior.slot_shape), np.exp(rng.normal(size=hyper.tau.size)),
                            hyper.tau)
    if spec.likelihood == "gaussian":
        hyper.noise[:] = [2.0, 0.7]
    q = 0.7 * rng.normal(size=model.dim)
    logtau = np.log(hyper.tau)
    counts = np.bincount(model.prior.param_slot, minlength=logtau.size)
    qn, factor = np.empty_like(q), np.empty(logtau.size)
    kinds = []
    for d in t.scale_dirs:
        for fast in (False, True):          # the parts live in the forward pass's scratch: made after its use
            line, P, arow = _line(t, q, d)
            line = line if fast else NO_LINE
            kinds += [line[0]] if fast else []
            for x in (-1.3, 0.4, 2.1):
                got = (_line_log_density_at(x, q, d, t, hyper, logtau, qn, factor, line, P, arow)
                       - _line_log_density_at(0.0, q, d, t, hyper, logtau, qn, factor, line, P, arow))
                moved = q * np.exp(x * d[model.prior.param_slot])
                want = (_joint_log_density(model, moved, logtau - 2 * x * d, hyper.top, hyper.noise)
                        - _joint_log_density(model, q, logtau, hyper.top, hyper.noise) + x * np.sum(counts * d))
                assert abs(got - want) < 1e-9 * max(1.0, abs(want)), (d, x, line[0], got, want)
    one_layer = len(spec.hidden) == 1 and not spec.direct
    assert (set(kinds) == {1, 2}) if one_layer else (set(kinds) == {0})


@pytest.mark.parametrize("arithmetic", ["float64", "float32"])
def test_a_lines_data_energy_is_the_forward_passs_at_the_moved_weights(arithmetic):
    """From its parts, the data energy along every direction (and a random one, whose input-hidden weights do
    not move together: no parts) is mlp_data_energy's at q exp(x d), in either arithmetic, on enough cases
    for several blocks; the parts are made from q alone (the same answer after another line's)."""
    from adaptive_hmc.models.mlp import line_data_energy
    rng = np.random.default_rng(8)
    spec = MLPSpec(5, (7,), 1)
    X = rng.normal(size=(700, 5))
    model = BayesianMLP(spec, X, np.sin(X[:, :1]) + 0.1 * rng.normal(size=(700, 1)), PriorSpec(ard=True),
                        arithmetic=arithmetic)
    t = model.target
    noise = np.array([3.0])
    q = 0.5 * rng.normal(size=model.dim)
    tol = 1e-12 if arithmetic == "float64" else 1e-5
    for d in [*t.scale_dirs, t.scale_dirs[0]]:
        dw = d[t.prior.param_slot]
        xs = (-0.8, 0.0, 0.3)
        want = [mlp_data_energy(q * np.exp(x * dw), t.arch, t.XT, t.YT, noise, t.work, t.sparse, t.scratch)
                for x in xs]
        line, P, arow = _line(t, q, d)          # in the forward pass's scratch: made after its use
        assert line[0] in (1, 2)
        for x, w in zip(xs, want):
            got = line_data_energy(x, line, q, t.arch, t.XT, t.YT, noise, t.work, P, arow, t.scratch)
            assert abs(got - w) <= tol * abs(w), (d, x, got, w)
    mixed = rng.normal(size=len(model.slot_names))
    assert _line(t, q, mixed)[0][0] == 0


def test_moves_keep_every_z_score_and_change_the_scales():
    """A sweep of the moves changes the weights and their precisions but not
    any weight's z-score w sqrt(precision) (the non-centred coordinates), nor
    a fixed precision; it reports its forward passes."""
    rng = np.random.default_rng(4)
    model = _model(SPECS[1], rng, ard=True)
    hyper = model.initial_hyper()
    q = 0.3 * rng.normal(size=model.dim)
    z = q * np.sqrt(hyper.prec)
    fixed = ~np.isfinite(model.prior.slot_shape)
    before = hyper.tau.copy()
    q2 = q.copy()
    n = _scale_moves(q2, model.target, hyper, np.random.default_rng(5))
    assert n >= 2 * len(model.target.scale_dirs)                 # each update: its start and one point at least
    np.testing.assert_allclose(q2 * np.sqrt(hyper.prec), z, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(hyper.tau[fixed], before[fixed])
    assert np.all(hyper.tau[~fixed] != before[~fixed]) and not np.array_equal(q2, q)
    np.testing.assert_array_equal(hyper.prec, hyper.tau[model.prior.param_slot] * model.prior.param_scale)


def test_short_trajectories_make_the_moves_once_per_hyper_move_steps():
    """A Gibbs update makes the interweaving moves when the trajectory after it
    crosses a multiple of HYPER_MOVE_STEPS leapfrog steps: with L = 10 (no
    jitter) from step 0, at iterations 9, 19, 29 (each then counts more than
    the one evaluation of a plain Gibbs update); with L = HYPER_MOVE_STEPS,
    at every one."""
    from adaptive_hmc.samplers.chain import new_record, run_chain
    rng = np.random.default_rng(6)
    model = _model(SPECS[0], rng)
    for L, want in [(10, [9, 19, 29]), (HYPER_MOVE_STEPS, list(range(30)))]:
        st = init_state(model, 0.3 * rng.normal(size=model.dim))
        settings = hmc_settings(L, step_factor=0.2, initial_phase_steps=0)
        rec = new_record(1, 30, len(model.hyper_names()))
        rec = type(rec)(*(a[0] for a in rec))
        run_chain(model.target, st, settings, 30, rec, None, np.random.default_rng(7))
        extra = rec.gradients - rec.num_steps
        assert L == HYPER_MOVE_STEPS or extra.min() == 2, extra
        assert np.flatnonzero(extra > 2).tolist() == want, extra


@pytest.fixture(scope="module")
def hierarchical_tiny():
    """A 1-2-1 regression network on 6 cases whose three weight groups have
    free precisions (Gamma shape 2 a group, mean 1), the noise and output bias
    fixed; the posterior means of each log precision and of the output at
    three inputs by self-normalised importance sampling from the prior (1.5M
    draws), with standard errors."""
    rng = np.random.default_rng(21)
    X = np.linspace(-2, 2, 6)[:, None]
    Y = np.tanh(2.0 * X - 0.5) + 0.1 * rng.normal(size=(6, 1))
    g = GammaPrior(1.0, 4.0)
    priors = PriorSpec(input_hidden=g, hidden_bias=g, hidden_output=g, output_bias=GammaPrior(1.0, math.inf),
                       noise=GammaPrior(9.0, math.inf), scale_hidden_output=False)
    spec = MLPSpec(1, (2,), 1)
    x_star = np.array([[-1.0], [0.3], [1.5]])
    n = 1_500_000
    r = np.random.default_rng(22)
    tau = r.gamma(2.0, 0.5, size=(n, 3))                         # shape alpha/2 = 2, rate alpha/(2 mu) = 2
    w_in, b_h, w_out = (r.normal(size=(n, 2)) / np.sqrt(tau[:, i:i + 1]) for i in range(3))
    b_out = r.normal(size=(n, 1))

    def f(x):
        return np.tanh(x[None, :, 0, None] * w_in[:, None, :] + b_h[:, None, :]) @ w_out[:, :, None] + b_out[:, None]

    logw = -0.5 * 9.0 * np.sum((f(X)[:, :, 0] - Y[None, :, 0]) ** 2, axis=1)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    assert 1 / np.sum(w ** 2) > 3000
    values = np.column_stack([np.log(tau), f(x_star)[:, :, 0]])
    mean = w @ values
    se = np.sqrt(w ** 2 @ (values - mean) ** 2)
    return BayesianMLP(spec, X, Y, priors), x_star, mean, se


@pytest.mark.statistical
@pytest.mark.parametrize("moves, num_steps", [("interweave", 15), ("interweave", HYPER_MOVE_STEPS), ("gibbs", 15)])
def test_hierarchical_posterior_agrees_with_importance_sampling(hierarchical_tiny, moves, num_steps):
    """[Gibbs, interweaving moves, HMC] (and Neal's [Gibbs, HMC]) on the small
    hierarchical network: the means of the three log precisions and of the
    output at three inputs within Z combined standard errors of importance
    sampling; with trajectories of 15 steps the moves follow about every
    HYPER_MOVE_STEPS / 15-th Gibbs update, with HYPER_MOVE_STEPS every one.
    Power: the standard errors are under a tenth of each quantity's posterior
    sd."""
    base, x_star, is_mean, is_se = hierarchical_tiny
    model = BayesianMLP(base.spec, base.X, base.Y, base.priors.__class__(**{**base.priors.__dict__,
                                                                              "hyper_moves": moves}))
    rng = np.random.default_rng(23)
    hmc = make_hmc(model)
    st = init_state(model, 0.5 * rng.normal(size=model.dim), model.initial_hyper())
    settings = hmc_settings(num_steps, step_factor=0.3, jitter=True)
    n = 30_000
    draws = np.empty((n, 6))
    for i in range(n):
        st, _ = hmc(st, settings, rng)
        draws[i, :3] = np.log(st.hyper.tau[:3])
        draws[i, 3:] = model.predict(st.position, x_star)[:, 0]
    draws = draws[n // 10:]
    se = np.sqrt(batch_means_mcse(draws) ** 2 + is_se ** 2)
    assert np.all(se < 0.1 * draws.std(axis=0)), (se, draws.std(axis=0))
    assert np.all(np.abs(draws.mean(axis=0) - is_mean) < Z * se), (draws.mean(axis=0), is_mean, se)


@pytest.mark.slow
def test_the_mixing_experiment_runs_quick(capsys):
    """experiments/hierarchical_mixing.py --quick: a small fit of each row on
    diabetes, one JSON line each with its R-hat, ESS and test figures; a fit
    that runs until its chains meet discards the first quarter of what it ran."""
    import json
    from cli_helpers import load_script
    script = load_script("experiments", "hierarchical_mixing")
    assert script.main(["--quick", "--rows", "default", "gibbs-30"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["row"] for r in rows] == ["default", "gibbs-30"]
    for r in rows:
        assert r["rhat_test"] >= 1.0 and r["ess_test_min"] > 0 and r["rmse"] > 0 and np.isfinite(r["nll"])
        assert r["verdict"] in ("met", "moving", "apart") and len(r["own_rhat_test"]) == 4
        assert 0 <= r["low_reward_gradients"] <= 1 and r["ess_hyper_per_s"] > 0
    default, gibbs = rows
    assert default["burn_in"] == max(2, default["super_transitions"] // 4) and default["converged"] is not None
    assert gibbs["super_transitions"] == 6 and gibbs["burn_in"] == 2 and gibbs["converged"] is None


@pytest.mark.statistical
@pytest.mark.parametrize("start, metric, super_transitions", [("optimized", "heuristic", 4), ("random", "learned", 40),
                                                             ("random", "low_rank", 140)])
def test_chains_from_optimized_starts_or_with_a_learned_metric_agree_with_importance_sampling(
        hierarchical_tiny, start, metric, super_transitions, monkeypatch):
    """The replica set's chains of the small hierarchical network, each started from its own optimized
    network (start="optimized"), or with the metric learned from the chains (metric="learned", the rows
    after its last window), then [Gibbs, interweaving moves, HMC]: the means of the three log
    precisions and of the output at three inputs within Z combined standard errors of importance
    sampling (the start changes where the chains begin, the metric how far each weight steps, neither
    what they sample). Power: the standard errors are under a tenth of each quantity's posterior sd; the
    low rank's cutoff lowered to 1.2, so that its rows are used whatever a CPU's bits make of the
    directions (at the default 2 this small network's may all lie inside it)."""
    from adaptive_hmc.engine.network_options import NetworkOptions
    from adaptive_hmc.samplers import metric as metric_module
    from adaptive_hmc.engine.runner import RunOptions, make_run
    from adaptive_hmc.samplers.metric import LOW_RANK_WINDOWS, WINDOWS
    from adaptive_hmc.tuners.options import FixedOptions
    base, x_star, is_mean, is_se = hierarchical_tiny
    monkeypatch.setattr(metric_module, "LOW_RANK_CUTOFF", 1.2)
    run = make_run(base.spec, base.X, base.Y, tuner=FixedOptions(0.3, 15),
                   run=RunOptions(super_transitions, 240_000 // super_transitions, seed=3),
                   network=NetworkOptions(layout=Layout.chains(4), priors=base.priors, start=start, metric=metric, thin=1,
                                           predict_steps=0))
    drive(run, super_transitions)
    A, chain, st = run.chains.kept_rows()
    if start == "optimized":
        assert run.chains.start_info["gradients"] > 0
    if metric != "heuristic":
        assert run.chains.step_scale.size == base.dim and np.ptp(np.log(run.chains.step_scale)) > 0.1
    if metric == "low_rank":
        assert np.any(run.chains.state.low_rank[:, :, 0] != 1.0)
    first = {"learned": WINDOWS[-1][1], "low_rank": LOW_RANK_WINDOWS[-1][1]}.get(metric, 0)
    per_chain = []
    for j in range(4):
        rows = A[(chain == j) & (st >= first)]
        rows = rows[len(rows) // 10 if start == "optimized" else 0:]
        per_chain.append(np.column_stack([np.log(rows[:, base.dim:base.dim + 3]),
                                          base.predict(rows[:, :base.dim], x_star)[:, :, 0]]))
    means = np.array([d.mean(axis=0) for d in per_chain])
    se = np.sqrt(np.sum([batch_means_mcse(d) ** 2 for d in per_chain], axis=0) / len(per_chain) ** 2
                 + is_se ** 2)
    sd = np.concatenate(per_chain).std(axis=0)
    assert np.all(se < 0.1 * sd), (se, sd)
    assert np.all(np.abs(means.mean(axis=0) - is_mean) < Z * se), (means.mean(axis=0), is_mean, se)
