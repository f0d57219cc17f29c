"""Optimized starts (adaptive_hmc.samplers.starts): L-BFGS reaches a stationary
point of the weights' log posterior at the hyperparameters it holds, the starts
are the same whatever the thread count, and chains started in separated modes
stay apart (R-hat sees them); that the chains then sample the right posterior
is checked against importance sampling in test_hyper_moves.py."""
import math

import numpy as np

from adaptive_hmc.engine.network_options import Layout
from adaptive_hmc.diagnostics import chain_statistics
from adaptive_hmc.engine.driver import drive
from adaptive_hmc.engine.network_options import NetworkOptions
from adaptive_hmc.engine.network_chains import NetworkChains
from adaptive_hmc.engine.runner import RunOptions, make_run
from adaptive_hmc.models.bnn import BayesianMLP
from adaptive_hmc.models.mlp import MLPSpec
from adaptive_hmc.models.priors import GammaPrior, PriorSpec, precisions
from adaptive_hmc.samplers.starts import StartOptions, optimized_start
from adaptive_hmc.tuners.options import FixedOptions


def _regression(n=40, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    Y = np.tanh(1.5 * X[:, :1] - X[:, 1:]) + 0.1 * rng.normal(size=(n, 1))
    return X, Y


def test_optimized_start_reaches_a_stationary_point_of_the_energy_it_minimizes():
    """One round: the energy at the held hyperparameters falls, and its gradient there is under 1e-4 of the
    gradient at the random start; the Gibbs update after it leaves the precisions consistent (prec = tau's)."""
    X, Y = _regression()
    model = BayesianMLP(MLPSpec(2, (4,), 1), X, Y, PriorSpec(hyper_moves="gibbs"))
    rng = np.random.default_rng(0)
    q = 0.1 * rng.normal(size=model.dim)
    hyper = model.initial_hyper(1.0)
    held = hyper.copy()
    u0, g0 = model.energy_grad(q, held)
    info = optimized_start(model.target, q, hyper, rng, StartOptions(rounds=1, iterations=3000))
    u1, g1 = model.energy_grad(q, held)
    assert u1 < u0 - 1.0 and info["rounds"] == 1 and info["gradients"] > info["iterations"] and not info["cut_short"]
    assert np.linalg.norm(g1) < 1e-4 * np.linalg.norm(g0), (np.linalg.norm(g1), np.linalg.norm(g0))
    assert not np.array_equal(hyper.tau, held.tau)                  # freed: drawn given the optimized weights
    prec = np.empty_like(hyper.prec)
    precisions(model.prior, hyper.tau, prec)
    np.testing.assert_array_equal(prec, hyper.prec)


def test_optimized_start_stops_at_its_deadline():
    X, Y = _regression()
    model = BayesianMLP(MLPSpec(2, (4,), 1), X, Y)
    q, hyper = np.zeros(model.dim) + 0.1, model.initial_hyper(1.0)
    info = optimized_start(model.target, q, hyper, np.random.default_rng(0), StartOptions(), deadline=0.0)
    assert info["cut_short"] and info["rounds"] == 0 and np.all(q == 0.1)


def _starts(threads, start="optimized"):
    X, Y = _regression()
    rs = NetworkChains(MLPSpec(2, (4,), 1), X, Y, NetworkOptions(layout=Layout.chains(3), start=start, threads=threads), seed=5)
    rs.start_chains()
    return rs


def test_optimized_starts_are_the_same_whatever_the_threads_and_leave_random_starts_alone():
    one, two = _starts(1), _starts(2)
    for a, b in zip(one.state.chains, two.state.chains):
        np.testing.assert_array_equal(a.position, b.position)
        np.testing.assert_array_equal(a.hyper.tau, b.hyper.tau)
        np.testing.assert_array_equal(a.hyper.noise, b.hyper.noise)
    assert one.start_info["gradients"] > 0 and one.start_chains() is None          # made once
    random = _starts(1, "random")
    assert random.start_info is None and random.state is random.initial
    # each chain from its own random weights, to its own optimum: the starts differ
    q = [c.position for c in one.state.chains]
    assert not np.allclose(q[0], q[1]) and not np.allclose(q[1], q[2])
    # the random starts are what they were before optimized starts existed: N(0, 0.1^2) from the init seed
    assert np.abs(random.state.chains[0].position).max() < 0.5


def test_the_first_super_transition_counts_the_starts_gradients():
    X, Y = _regression()
    run = make_run(MLPSpec(2, (4,), 1), X, Y, tuner=FixedOptions(0.3, 10), run=RunOptions(2, 200, seed=1),
                   network=NetworkOptions(layout=Layout.chains(2), start="optimized"))
    results = []
    log = drive(run, 2, callback=lambda entry, result: results.append(result)).log    # the loop makes the starts
    started = run.chains.start_info["gradients"]
    first, second = results
    assert first.setup_gradients == started > 0 and second.setup_gradients == 0
    assert first.gradients == int(first.record.gradients.sum()) + started
    assert log[0]["gradients"] == first.gradients and log[1]["gradients"] == second.gradients


def _action():
    from adaptive_hmc.samplers.settings import Action
    return Action(0.3, 10)


def test_chains_started_in_two_separated_modes_stay_apart():
    """A 1-1-1 network fits y = tanh(2x) with its hidden unit's sign either way: two modes of the weights,
    (w, b, v) and (-w, -b, -v), the same function, a barrier between them where the unit is flat. Eight
    chains optimized from their own random starts land in both modes (the optimization does not pull them
    together), and after sampling R-hat of the input weight is far above 1.1: the diagnostics can still
    tell chains apart. Power: the same chains' output at an input (the same in both modes) has R-hat
    near 1."""
    rng = np.random.default_rng(7)
    X = np.linspace(-2, 2, 30)[:, None]
    Y = np.tanh(2.0 * X) + 0.05 * rng.normal(size=X.shape)
    fixed = GammaPrior(1.0, math.inf)
    priors = PriorSpec(input_hidden=fixed, hidden_bias=fixed, hidden_output=fixed, output_bias=fixed,
                       noise=GammaPrior(400.0, math.inf), scale_hidden_output=False)
    spec = MLPSpec(1, (1,), 1)
    run = make_run(spec, X, Y, tuner=FixedOptions(0.3, 20), run=RunOptions(4, 2000, seed=2),
                   network=NetworkOptions(layout=Layout.chains(8), priors=priors, start="optimized", thin=1))
    run.chains.start_chains()
    signs = np.sign([c.position[0] for c in run.chains.state.chains])
    assert set(signs) == {-1.0, 1.0}, signs
    drive(run, 4)
    kept = run.chains.kept
    n = min(len(k) for k in kept)
    w_in = np.stack([k[-n:, 0] for k in kept])[:, :, None]
    out = np.stack([BayesianMLP(spec, X, Y, priors).predict(k[-n:, :spec.n_params], np.array([[0.7]]))[:, 0, 0]
                    for k in kept])[:, :, None]
    assert chain_statistics(w_in)["rhat"][0] > 1.1
    assert chain_statistics(out)["rhat"][0] < 1.05
