"""The package's linking against numba's own (adaptive_hmc/linker.py): with ``ADAPTIVE_HMC_LINKER=numba`` no
patch is applied, a note says so once, and a run's and an estimator's test errors are within 3 standard
errors of the default linking's; and a user's own ``numba.njit(cache=True)`` function compiled beside the
package is compiled and cached as numba alone does it (a process without the package loads it from the cache
and computes the same bits)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from llvmlite import binding as ll
from test_reproducible import _config           # the shrunk quick robot-arm config the bit-identity tests run

NOTE = "numba's own linking"

_SCRIPT = """
import json, sys
import numpy as np
from sklearn.datasets import load_diabetes
from adaptive_hmc import BNNRegressor, linker
from adaptive_hmc.front.cli import main
from numba.core import codegen, compiler
assert main(["run", sys.argv[1], "--out", sys.argv[2], "--quiet"]) == 0
X, y = load_diabetes(return_X_y=True)
model = BNNRegressor(hidden=4, super_transitions=6, budget=300, seed=1, max_seconds=None).fit(X[:200], y[:200])
err = (model.predict(X[200:300]) - y[200:300]) ** 2
patched = [hasattr(f, "__wrapped__") for f in (codegen.CPUCodeLibrary.finalize, compiler.CompileResult._rebuild)]
print(json.dumps(dict(linking=linker.LINKING, patched=patched, mse=err.mean(), se=err.std() / len(err) ** 0.5)))
"""


def _run(tmp_path: Path, name: str, env: dict) -> tuple:
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(_config(tmp_path)), str(tmp_path / name)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / name / "summary.json").read_text())
    return summary, json.loads(proc.stdout.splitlines()[-1]), proc.stderr


def _within(a: float, b: float, se_a: float, se_b: float) -> bool:
    return abs(a - b) <= 3 * max(se_a, se_b)


def test_numba_s_own_linking_answers_within_three_standard_errors(tmp_path):
    """The default linking (the suite's compile cache) and numba's own (a cache of its own, so that the two
    do not overwrite each other's index files): a configured run's test errors per test set and an
    estimator's on a small table are within 3 standard errors; numba's own applies no patch and says so
    in one line."""
    env = {k: v for k, v in os.environ.items() if k != "ADAPTIVE_HMC_LINKER"}
    default, est_default, err_default = _run(tmp_path, "default", env)
    own, est_own, err_own = _run(tmp_path, "numba", dict(env, ADAPTIVE_HMC_LINKER="numba",
                                                         NUMBA_CACHE_DIR=str(tmp_path / "numba_cache")))
    assert est_default["linking"] == "package" and est_default["patched"] == [True, True]
    assert est_own["linking"] == "numba" and est_own["patched"] == [False, False]
    assert NOTE not in err_default
    assert [line for line in err_own.splitlines() if NOTE in line] == [
        f"adaptive_hmc: ADAPTIVE_HMC_LINKER=numba: {NOTE} (no patch of the package's; a first compile is "
        f"slower, the draws differ from the default's within Monte Carlo error)"]
    for test_set, mse in default["test_mse"].items():
        assert _within(mse, own["test_mse"][test_set], default["test_mse_se"][test_set],
                       own["test_mse_se"][test_set]), (test_set, default["test_mse"], own["test_mse"])
    assert _within(est_default["mse"], est_own["mse"], est_default["se"], est_own["se"]), (est_default, est_own)


_USER = """
import sys
if sys.argv[1] == "beside":                     # the package imported first, as a user's script would
    import adaptive_hmc.jit
import numba
import numpy as np

@numba.njit(cache=True, fastmath=True)
def user_sum(x):
    s = 0.0
    for i in range(x.size):
        s += x[i] * x[i] + 0.5 * x[i]      # a sum LLVM vectorises: its bits depend on the vector width
    return s

if __name__ == "__main__":
    if sys.argv[1] == "beside":                 # after kernels of the package, compiled in this process
        from adaptive_hmc.jit import fast_exp, fast_tanh     # compiled by the package's linker, and cached
        assert fast_tanh(0.5) > 0 and fast_exp(0.5) > 1
    x = np.random.default_rng(0).standard_normal(1001)
    print(float(user_sum(x)).hex(), sum(user_sum.stats.cache_hits.values()), sum(user_sum.stats.cache_misses.values()),
          "adaptive_hmc" in sys.modules, numba.config.CPU_FEATURES is None)
"""


@pytest.mark.parametrize("features", [None, "host"], ids=["as-imported", "cpu-features-pinned"])
def test_a_user_s_own_function_is_compiled_and_cached_as_numba_alone_does(tmp_path, features):
    """A user's ``numba.njit(cache=True)`` function compiled in a process that imported the package and
    compiled some of its kernels: a later process without the package loads it from the cache (a hit, no
    miss) and computes the same bits, which are those of a process that never imported the package and
    compiled it into an empty cache; the package's own 512-bit vectors on AVX-512 (jit._wide_vectors) are its
    functions' alone. ``cpu-features-pinned``: NUMBA_CPU_FEATURES set to the host's own (what numba uses
    anyway), which leaves every patch of the linker in place and the wide vectors out."""
    module = tmp_path / "user_module.py"
    module.write_text(_USER)
    env = {k: v for k, v in os.environ.items() if k not in ("ADAPTIVE_HMC_LINKER", "NUMBA_CPU_FEATURES")}
    if features == "host":
        env["NUMBA_CPU_FEATURES"] = ll.get_host_cpu_features().flatten()

    def run(mode, cache):
        proc = subprocess.run([sys.executable, str(module), mode], env=dict(env, NUMBA_CACHE_DIR=str(cache)),
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout.split()

    beside = run("beside", tmp_path / "cache")
    assert beside[1:5] == ["0", "1", "True", str(features is None)], beside
    alone = run("alone", tmp_path / "cache")
    assert alone[1:4] == ["1", "0", "False"], (beside[:4], alone[:4])   # loaded: the package's process's entry
    fresh = run("alone", tmp_path / "fresh_cache")
    assert fresh[1:4] == ["0", "1", "False"]
    assert beside[0] == alone[0] == fresh[0] and np.isfinite(float.fromhex(beside[0]))
