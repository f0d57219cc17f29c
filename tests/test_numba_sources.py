"""The numba the package patches is the one tested: every numba function that adaptive_hmc/linker.py wraps,
overrides, restates or relies on hashes as recorded for this numba's minor (linker.NUMBA_SOURCES), so that a
numba release that changes one fails here, naming it, before a patched kernel can crash; and the package
falls back to numba's own linking on such a numba (which this test's check is)."""
import copy
import subprocess
import sys

import numba

from adaptive_hmc import linker


def test_every_patched_numba_function_is_the_tested_one():
    changed = linker.changed_sources()
    assert not changed, ("numba changed under the package's patches: check each function named against "
                         "adaptive_hmc/linker.py, then record its hash in NUMBA_SOURCES\n" + "\n".join(changed))
    assert linker.LINKING == "package" or linker.LINKER_ENV in (linker.WHY or "")


def test_the_table_covers_every_function_the_patches_touch():
    """Each minor records every function of NUMBA_FUNCTIONS, and every patch the linker applies wraps one."""
    for minor, recorded in linker.NUMBA_SOURCES.items():
        assert set(recorded) == set(linker.NUMBA_FUNCTIONS), minor
    patched = {"CPUCodeLibrary.finalize", "CPUCodeLibrary.serialize_using_object_code", "Cache.save_overload",
               "CPUCodeLibrary.add_ir_module",
               "CompileResult._rebuild", "Lower.create_cpython_wrapper"}
    assert patched <= set(linker.NUMBA_FUNCTIONS)
    overridden = {name for name, value in vars(linker.InnerDispatcher).items() if callable(value)}
    assert overridden == {"add_overload", "_compile_for_args"}
    assert {f"Dispatcher.{name}" for name in overridden} <= set(linker.NUMBA_FUNCTIONS)


def test_a_changed_function_is_named():
    """Power: a table with one doctored hash, and a numba minor it does not hold, are both reported."""
    minor = ".".join(numba.__version__.split(".")[:2])
    table = copy.deepcopy(linker.NUMBA_SOURCES)
    table[minor]["CompileResult._rebuild"] = "0" * 16
    changed = linker.changed_sources(table)
    print("\n".join(changed))
    assert len(changed) == 1 and "CompileResult._rebuild" in changed[0] and "0" * 16 in changed[0]
    assert "outside the tested range" in linker.changed_sources(table, version="0.99.0")[0]
    hashes = dict(linker.source_hashes(), **{"Lower.create_cpython_wrapper": "missing"})    # a function gone
    assert "Lower.create_cpython_wrapper" in linker.changed_sources(hashes=hashes)[0]


def test_an_untested_numba_gets_numba_s_own_linking():
    """The package imported beside a numba whose patched functions are not the tested ones (here: a doctored
    table) applies no patch and says so, once, in one line."""
    script = ("import sys\nfrom adaptive_hmc import linker\n"
              "print(linker.changed_sources(dict(linker.NUMBA_SOURCES, **{'" + ".".join(
                  numba.__version__.split(".")[:2]) + "': {}})))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "not the tested one" in proc.stdout, proc.stderr
    code = ("import numba\nfrom numba.core import codegen, caching, compiler, lowering\n"
            "import adaptive_hmc.linker as linker\n"
            "print(linker.LINKING, [hasattr(f, '__wrapped__') for f in (codegen.CPUCodeLibrary.finalize, "
            "caching.Cache.save_overload, compiler.CompileResult._rebuild, lowering.Lower.create_cpython_wrapper)])")
    fake = ("import numba\nnumba.__version__ = '0.99.0'\n")
    proc = subprocess.run([sys.executable, "-c", fake + code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "numba" and "True" not in proc.stdout, proc.stdout
    note = [line for line in proc.stderr.splitlines() if "adaptive_hmc" in line]
    assert len(note) == 1 and "0.99.0 is outside the tested range" in note[0] and "numba's own linking" in note[0]
