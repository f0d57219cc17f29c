"""The speed benchmarks run (their figures are printed, never asserted: the
machine is shared): small forms of bench_core's measurement and
bench_density's comparison, bench_scale's and bench_threads' measurements, in process."""
import pytest

from cli_helpers import load_script


def _load(name):
    return load_script("benchmarks", name)


@pytest.mark.slow
def test_bench_core_measures_a_small_network():
    row = _load("bench_core").measure(4, 20)
    assert row["grad_evals_per_s"] > 0 and row["minimal_grad_evals_per_s"] > 0 and row["leapfrog_per_s"] > 0
    assert 0 <= row["hmc_acceptance"] <= 1


@pytest.mark.slow
def test_bench_density_compares_the_user_forms_with_the_built_in_target():
    row = _load("bench_density").bench(3, budget=0.01)
    assert set(row["gradients_per_s"]) == {"builtin", "user_compiled", "user_in_place", "user_python"}
    assert all(v > 0 for v in row["gradients_per_s"].values())


def test_bench_scale_measures_the_kernel_against_the_gemms():
    r = _load("bench_scale").measure(200, 8, seconds=0.01, repeats=1)
    assert r["kernel_gflops"] > 0 and r["gemm_gflops"] > 0 and r["fraction"] == pytest.approx(
        r["kernel_gflops"] / r["gemm_gflops"], rel=0.02)
    top = _load("bench_scale").peak(64, repeats=1)                       # the square GEMM, both precisions
    assert set(top) == {"float64", "float32"} and min(top.values()) > 0


def test_bench_threads_measures_a_short_loop_with_the_same_draws_on_any_thread_count():
    b = _load("bench_threads")
    one, two = (b.measure(t, 4, 2, 200) for t in (1, 2))
    assert one["gradients_per_s"] > 0 and 0 <= one["serial_share"] <= one["between_share"] < 1
    assert (one["final"] == two["final"]).all()


def test_bench_diagnostics_agrees_with_arviz():
    r = _load("bench_diagnostics").measure(10, True)
    assert r["agree"] and r["seconds"] > 0
