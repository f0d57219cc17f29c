"""One seed, one result: a run with a freshly compiled kernel set and a run
whose kernels come from the filled Numba cache agree bit for bit."""
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from adaptive_hmc.rundir.metrics import untimed

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def _command(config: Path, out: Path, *extra):
    return [sys.executable, "-m", "adaptive_hmc.front.cli", "run", str(config), "--out", str(out), "--quiet", *extra]


def _env(cache: Path) -> dict:
    return dict(os.environ, NUMBA_CACHE_DIR=str(cache))


def _run(config: Path, out: Path, cache: Path, *extra):
    proc = subprocess.run(_command(config, out, *extra), env=_env(cache), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr


def _config(tmp_path: Path, super_transitions=8, budget=800) -> Path:
    raw = yaml.safe_load((CONFIGS / "robot_arm_bandit_quick.yaml").read_text())
    raw["run"].update(super_transitions=super_transitions, budget=budget, burn_in={"super_transitions": 2}, thin=5)
    raw["tuner"].update(bounds={"step_factor": [0.01, 1.01], "num_steps": [10, 100]}, warmup_super_transitions=1,
                        maxfun=200)
    raw["sampler"]["initial_phase_steps"] = 200
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(raw))
    return config


def _assert_same_run(a: Path, b: Path):
    """Everything two run directories hold agrees bit for bit, but for timings."""
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
    assert untimed(sa) == untimed(sb)
    for name in ("predictions.npz", "samples.npz"):
        with np.load(a / name) as x, np.load(b / name) as y:
            assert x.files == y.files
            for k in x.files:
                assert np.array_equal(x[k], y[k]), (name, k)
    logs = [[untimed(json.loads(line))
             for line in (d / "log.jsonl").read_text().splitlines()] for d in (a, b)]
    assert logs[0] == logs[1]


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    """A Numba cache filled by a run that compiled every kernel (and that run)."""
    d = tmp_path_factory.mktemp("fresh")
    cache = d / "numba_cache"
    _run(_config(d), d / "fresh", cache)                      # every kernel compiled in the process
    assert any(cache.rglob("*.nbc")), "the first run should have filled the cache"
    return cache, d / "fresh"


def test_fresh_compile_and_cached_kernels_give_identical_results(tmp_path, warm_cache):
    cache, fresh = warm_cache
    _run(_config(tmp_path), tmp_path / "cached", cache)      # every kernel loaded from the cache
    _assert_same_run(fresh, tmp_path / "cached")


def test_kernels_compiled_after_other_kernels_are_the_fresh_compiles(tmp_path, warm_cache):
    """One process runs a user's density first (its array ``** 2`` has Numba
    compile a power helper without the package's fastmath flags, which later
    compiles in the process would reuse), then the robot arm, compiling its
    kernels into an empty cache: the run is the fresh process's bit for bit."""
    _, fresh = warm_cache
    import shutil
    shutil.copy(CONFIGS / "eight_schools.py", tmp_path / "eight_schools.py")
    raw = yaml.safe_load((CONFIGS / "eight_schools_density.yaml").read_text())
    raw["sampler"] = {"warmup": 100}                          # short: its compiles are what matters
    raw["run"].update(super_transitions=2)
    density = tmp_path / "es.yaml"
    density.write_text(yaml.safe_dump(raw))
    runs = [["run", str(density), "--out", str(tmp_path / "density"), "--quiet"],
            ["run", str(_config(tmp_path)), "--out", str(tmp_path / "after"), "--quiet"]]
    script = ("import json, sys\nfrom adaptive_hmc.front.cli import main\n"
              "for argv in json.loads(sys.argv[1]):\n    assert main(argv) == 0, argv\n")
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(runs)], env=_env(tmp_path / "cache"),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    _assert_same_run(fresh, tmp_path / "after")


def test_killed_and_resumed_runs_end_as_uninterrupted_ones(tmp_path, warm_cache):
    """kill -9 at random points (the first during a run compiling its kernels
    into an empty cache: before any checkpoint), each time followed by
    --resume, and a SIGTERM after a checkpoint, which says how to resume (exit
    130): every run ends exactly as an uninterrupted one."""
    config = _config(tmp_path, super_transitions=10, budget=1000)
    cache = warm_cache[0]
    rng = random.Random(2026)
    out = tmp_path / "killed"
    log = out / "log.jsonl"

    def progress():
        return len(log.read_text().splitlines()) if log.exists() else 0

    kills = 0
    for i in range(6):
        if (out / "summary.json").exists():
            break
        proc = subprocess.Popen(_command(config, out, *(["--resume"] if out.exists() else [])),  # as a user would
                                env=_env(tmp_path / "cold" if i == 0 else cache),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if i == 0:                  # while compiling, before any checkpoint
            time.sleep(rng.uniform(1.0, 3.0))
        else:                       # at a random moment after this process made progress of its own
            start, deadline = progress(), time.time() + 120
            while progress() <= start and proc.poll() is None and time.time() < deadline:
                time.sleep(0.02)
            time.sleep(rng.uniform(0.0, 0.3))
        if proc.poll() is None:
            proc.kill()
            kills += 1
        proc.wait()
    assert kills >= 2
    if not (out / "summary.json").exists():
        _run(config, out, cache, "--resume")
    _run(config, tmp_path / "whole", cache)
    _assert_same_run(tmp_path / "whole", out)

    term = tmp_path / "terminated"
    proc = subprocess.Popen(_command(config, term), env=_env(cache), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while not (term / "checkpoint.npz").exists() and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    if proc.returncode != 0:        # the run may have ended before the signal came
        assert proc.returncode == 130, err
        assert "interrupted at super-transition" in err and "--resume" in err and "Traceback" not in err, err
        _run(config, term, cache, "--resume")
    _assert_same_run(tmp_path / "whole", term)


def test_cached_kernels_are_stamped_with_every_kernel_source(tmp_path):
    """Numba keeps a cached kernel while its own file is unchanged; ours also
    carry a hash of every kernel source, so editing a callee in another file (or
    jit.py) recompiles the callers instead of running stale code. Ours alone: a
    user's own numba.njit function keeps numba's stamp (tests/test_linking.py)."""
    import numba
    from numba.core.caching import InTreeCacheLocator

    from adaptive_hmc import linker
    from adaptive_hmc.samplers import chain
    stamp = chain._run_chain._cache._cache_file._source_stamp
    own = InTreeCacheLocator.from_function(chain._run_chain.py_func, chain.__file__).get_source_stamp()
    assert stamp == (own, linker.kernel_sources_hash())
    users = numba.njit(cache=True)(lambda x: x)
    assert users._cache._cache_file._source_stamp == InTreeCacheLocator.from_function(
        users.py_func, __file__).get_source_stamp()
    files = sorted(p for pattern in linker.KERNEL_SOURCES for p in Path(linker.__file__).parent.glob(pattern))
    assert {"jit.py", "linker.py", "energy.py", "hmc.py", "chain.py"} <= {p.name for p in files}
    copies = []
    for p in files:
        copies.append(tmp_path / f"{len(copies)}_{p.name}")
        copies[-1].write_bytes(p.read_bytes())
    before = linker.sources_hash(copies)
    copies[0].write_bytes(copies[0].read_bytes() + b"\n# an edit\n")
    assert linker.sources_hash(copies) != before


def test_the_emitter_process_makes_the_object_code_this_process_would():
    """The compile cache's object code comes from the emitter process (adaptive_hmc/emitter.py), or from this
    process where that cannot run: the same bytes either way, and an error answered, not raised."""
    from llvmlite import binding as ll

    from adaptive_hmc import emitter, linker
    from adaptive_hmc.jit import njit

    @njit
    def twice(x):
        return 2.0 * x

    twice(1.0)
    library = twice.overloads[twice.signatures[0]].library
    options = linker._tm_options(library.codegen)
    bitcode = ll.parse_assembly(str(library.get_llvm_str())).as_bitcode()
    made = linker._submit(bitcode, options).result()
    here = ll.Target.from_triple(ll.get_process_triple()).create_target_machine(**options).emit_object(
        ll.parse_bitcode(bitcode))
    assert made == here and len(made) > 100
    proc = subprocess.Popen([sys.executable, emitter.__file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    emitter.send(proc.stdin, (b"not bitcode", options))
    ok, error = emitter.receive(proc.stdout)
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0 and not ok and "bitcode" in error.lower()
    saved = linker._emitter
    try:
        linker._emitter = False                      # the process cannot run: made here, the same bytes
        assert linker._emit(bitcode, options) == here
    finally:
        linker._emitter = saved



_PARALLEL_MODULE = """
import sys
import numpy as np
from numba import prange
from numba.core import compiler
from adaptive_hmc.jit import njit

if "undo" in sys.argv:          # numba's own loading of a cached kernel, without the package's fix
    compiler.CompileResult._rebuild = compiler.CompileResult._rebuild.__wrapped__

@njit(parallel=True)
def add_one(a):
    for i in prange(a.size):
        a[i] += 1.0

@njit
def caller(a):
    add_one(a)
    return a.sum()

a = np.zeros(1000)
print(add_one(a) if sys.argv[1] == "callee" else caller(a))
"""


def test_a_caller_of_a_cached_parallel_kernel_starts_the_threading_layer(tmp_path):
    """A parallel kernel compiled into the cache by one process, a caller compiled by a second that loaded it
    from there, the caller loaded alone by a third: the third starts numba's threading layer before the call.
    Power: without the fix (numba leaves a loaded library's start-up hooks out of its callers' entries) the
    third process dies (a segmentation fault)."""
    module = tmp_path / "parallel_module.py"
    module.write_text(_PARALLEL_MODULE)
    env = _env(tmp_path / "cache")

    def run(*args):
        return subprocess.run([sys.executable, str(module), *args], env=env, capture_output=True, text=True,
                              timeout=300)

    for undo in ((), ("undo",)):
        for f in (tmp_path / "cache").rglob("*"):
            if f.is_file():
                f.unlink()
        assert run("callee", *undo).returncode == 0
        second = run("caller", *undo)
        assert second.returncode == 0 and float(second.stdout) == 1000.0, second.stderr[-2000:]
        third = run("caller", *undo)
        if undo:
            assert third.returncode != 0
        else:
            assert third.returncode == 0 and float(third.stdout) == 1000.0, third.stderr[-2000:]


_INNER_MODULE = """
import sys
from adaptive_hmc.jit import njit

@njit(inner=True)
def inner(x):
    return 3.0 * x + 1.0

@njit
def outer(x):
    return inner(x) - 1.0

@njit
def plain(x):
    return 3.0 * x

print(outer(2.0))
for fn in (plain, inner):
    try:
        print(fn(2.0))
    except TypeError as e:
        print("TypeError:", e)
names = [cres.fndesc.llvm_cpython_wrapper_name for fn in (plain, outer) for cres in fn.overloads.values()]
names += [cres.fndesc.llvm_cpython_wrapper_name for cres in inner.overloads.values()]
code = [cres.library.get_llvm_str() for fn in (plain, outer, inner) for cres in fn.overloads.values()]
print([name in text for name, text in zip(names, code)])
"""


def test_an_inner_kernel_runs_in_its_callers_and_refuses_python(tmp_path):
    """A kernel compiled with ``njit(inner=True)`` has no entry point for Python (numba's wrapper is not
    made: its library lacks the wrapper's name, which a plain kernel's holds, the power of that check); its
    callers run it, compiled fresh and loaded from the cache alike, and a call from Python is refused with
    a TypeError that names it, even after a caller compiled it for that very argument type; with numba's
    NUMBA_DISABLE_JIT it is the plain Python function, as numba's own decorators give."""
    module = tmp_path / "inner_module.py"
    module.write_text(_INNER_MODULE)
    env = _env(tmp_path / "cache")
    for run in ("fresh", "cached"):
        proc = subprocess.run([sys.executable, str(module)], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        lines = proc.stdout.splitlines()
        assert lines[0] == "6.0" and lines[1] == "6.0"
        assert lines[2].startswith("TypeError: __main__.inner runs inside the package's compiled kernels")
        if run == "fresh":                      # (a library loaded from the cache holds object code, no IR)
            assert lines[3] == "[True, True, False]"
    assert any((tmp_path / "cache").rglob("*inner*.nbc"))
    plain = subprocess.run([sys.executable, "-c", "from adaptive_hmc.jit import njit\n"
                            "print(njit(inner=True)(lambda x: 3.0 * x)(2.0))"],
                           env=dict(env, NUMBA_DISABLE_JIT="1"), capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0 and plain.stdout.strip() == "6.0", plain.stderr[-2000:]   # numba's debugging switch
