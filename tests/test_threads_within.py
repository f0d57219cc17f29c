"""A chain on more than one thread: the blocks of cases of each energy and
gradient shared by threads (models/mlp.ThreadScratch) give the bits of one
thread, whatever their number, and a run with more threads than chains
gives each chain the threads left over."""
import numpy as np
import pytest

from adaptive_hmc.engine.network_options import Layout
from adaptive_hmc.engine.network_state import chain_arrays
from adaptive_hmc.engine.network_chains import NetworkChains
from adaptive_hmc.engine.network_options import threads_within
from adaptive_hmc.models.base import energy_grad, gibbs_energy_grad
from adaptive_hmc.models.bnn import BayesianMLP
from adaptive_hmc.models.mlp import MLPSpec, block_cases, cases_per_block
from adaptive_hmc.samplers.settings import Action, HMCSettings
from adaptive_hmc.engine.chain_set import advance


def _data(spec: MLPSpec, N: int, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, spec.n_inputs))
    if spec.likelihood == "gaussian":
        return X, rng.standard_normal((N, spec.n_outputs))
    classes = 2 if spec.likelihood == "logistic" else spec.n_outputs
    return X, rng.integers(0, classes, (N, 1)).astype(float)


def _bits(x) -> bytes:
    return np.ascontiguousarray(np.atleast_1d(x)).tobytes()


CASES = [(MLPSpec(3, (5,), 1), "float32", 3 * 512 + 40), (MLPSpec(3, (4, 3), 2), "float64", 5 * 256 + 8),
         (MLPSpec(3, (6,), 3, "softmax"), "float32", 2 * 512 + 1), (MLPSpec(3, (4,), 1, "logistic"), "float64", 700)]


@pytest.mark.parametrize("spec,arithmetic,N", CASES)
def test_shared_blocks_give_one_threads_bits(spec, arithmetic, N):
    """The energy, the gradient, and a Gibbs update with the interweaving moves (the outputs for the noise,
    the slice moves' forward passes) then the gradient: byte for byte those of one thread, on 2 and 3
    threads; the threads' scratch is there (the shared path runs), and it is not for one block."""
    X, Y = _data(spec, N)
    rng = np.random.default_rng(1)
    q = 0.5 * rng.standard_normal(spec.n_params)
    out = []
    for threads in (1, 2, 3):
        m = BayesianMLP(spec, X, Y, arithmetic=arithmetic, threads=threads)
        assert (m.target.scratch is None) == (threads == 1)
        g = np.empty(spec.n_params)
        u = energy_grad(q.copy(), g, m.target, m.initial_hyper())
        q2, g2, h2 = q.copy(), np.empty(spec.n_params), m.initial_hyper()
        u2, _ = gibbs_energy_grad(q2, g2, m.target, h2, np.random.default_rng(5), True)
        out.append([_bits(v) for v in (u, g, u2, g2, q2, h2.prec, h2.noise)])
    assert out[1] == out[0] and out[2] == out[0]
    one_block = cases_per_block(8 * np.dtype(arithmetic).itemsize)
    assert BayesianMLP(spec, X[:one_block], Y[:one_block], arithmetic=arithmetic, threads=2).target.scratch is None


def test_blocks_are_even_in_number_and_size():
    """N cases in blocks of at most ``most``: one block where they fit; else an even number of blocks, each
    a multiple of 16 cases but the last, so that two threads (and four, where the count is a multiple of
    4) get the same cases to within a block's rounding."""
    for most in (256, 512):
        for N in list(range(1, 3 * most, 7)) + [1600, 2000, 16000, 20000]:
            s = block_cases(N, most)
            blocks = -(-N // s)
            if N <= most:
                assert s == most and blocks == 1
                continue
            assert s <= most and s % 16 == 0 and blocks <= -(-N // most) + 1
            sizes = [min(s, N - b * s) for b in range(blocks)]
            halves = [sum(sizes[:blocks // 2]), sum(sizes[blocks // 2:])]
            assert abs(halves[0] - halves[1]) <= 16 * blocks, (N, most, sizes)
    assert [min(block_cases(1600, 512), 1600 - b * 400) for b in range(4)] == [400] * 4


def test_the_shared_path_would_be_caught_adding_a_block_twice():
    """Power: a gradient whose threads' terms were added twice would differ from one thread's."""
    spec, arithmetic, N = CASES[0]
    X, Y = _data(spec, N)
    m1, m2 = (BayesianMLP(spec, X, Y, arithmetic=arithmetic, threads=t) for t in (1, 2))
    q = 0.3 * np.ones(spec.n_params)
    g1, g2 = np.empty(spec.n_params), np.empty(spec.n_params)
    energy_grad(q, g1, m1.target, m1.initial_hyper())
    energy_grad(q, g2, m2.target, m2.initial_hyper())
    assert not np.array_equal(g2 + m2.target.scratch.partial[1], g1)


def test_threads_left_over_by_the_chains_go_to_each_chain(monkeypatch):
    """threads // chains each; several chains sharing theirs only with a thread-safe threading layer."""
    import adaptive_hmc.engine.network_options as options
    assert threads_within(2, 1) == 2 and threads_within(3, 1) == 3 and threads_within(1, 1) == 1
    assert threads_within(2, 4) == 1 and threads_within(3, 2) == 1
    monkeypatch.setattr(options, "threadsafe_layer", lambda: True)
    assert options.threads_within(8, 4) == 2 and options.threads_within(9, 2) == 4
    monkeypatch.setattr(options, "threadsafe_layer", lambda: False)
    assert options.threads_within(8, 4) == 1 and options.threads_within(8, 1) == 8     # one chain launches alone


def test_the_threading_layer_named_decides_whether_it_is_thread_safe(monkeypatch):
    import numba
    from adaptive_hmc.engine.network_options import threadsafe_layer
    for layer, safe in (("workqueue", False), ("omp", True), ("tbb", True), ("threadsafe", True)):
        monkeypatch.setattr(numba.config, "THREADING_LAYER", layer)
        assert threadsafe_layer() is safe


def test_one_chain_on_two_threads_draws_what_one_thread_draws(arithmetic="float32"):
    """A run of one chain (of the posterior, 600 cases: two blocks) on 1 and 2 threads: the same chain state
    and records, byte for byte; the two-thread run's chain shares its blocks. (The kernels' test above
    covers float64; a chain of its own in float64 would compile the whole chain loop once more.)"""
    spec = MLPSpec(3, (4,), 1)
    X, Y = _data(spec, 600, seed=3)

    def go(threads):
        rs = NetworkChains(spec, X, Y, layout=Layout.chains(1), seed=7, thin=1, threads=threads, arithmetic=arithmetic, start="random",
                        settings=HMCSettings(window=3, jitter=True, initial_phase_steps=30))
        return rs, [advance(rs, Action(eps, L), 90) for eps, L in ((0.3, 10), (0.5, 6))]
    (a, ra), (b, rb) = go(1), go(2)
    assert a.threads_within == 1 and b.threads_within == 2
    assert b.chain_data[0].model.target.scratch is not None
    for u, v in zip(chain_arrays(a.chains[0]), chain_arrays(b.chains[0])):
        assert _bits(u) == _bits(v)
    for x, y in zip(ra, rb):
        for p, q in zip(x.record, y.record):
            assert _bits(p) == _bits(q)


def test_two_chains_sharing_their_blocks_at_once_draw_what_one_thread_draws():
    """Two chains on four threads (two each, their parallel loops launched at once from the chains' threads:
    the thread-safe layer's case; one thread each without one) against one thread: the same bits."""
    spec = MLPSpec(3, (4,), 1)
    X, Y = _data(spec, 600, seed=3)

    def go(threads):
        rs = NetworkChains(spec, X, Y, layout=Layout.chains(2), seed=7, thin=1, threads=threads, arithmetic="float32", start="random",
                        settings=HMCSettings(window=3, jitter=True, initial_phase_steps=30))
        return rs, advance(rs, Action(0.3, 10), 90)
    (a, ra), (b, rb) = go(1), go(4)
    assert b.threads_within == threads_within(4, 2)
    for x, y in zip(a.chains, b.chains):
        for u, v in zip(chain_arrays(x), chain_arrays(y)):
            assert _bits(u) == _bits(v)
    for p, q in zip(ra.record, rb.record):
        assert _bits(p) == _bits(q)
