"""Numba settings for every compiled kernel (one place), and a vectorisable tanh.

Flow position: used by every layer that runs compiled code (model, samplers, replicas).
"""
import functools
import hashlib
import math
from pathlib import Path

import numba
from llvmlite import binding as ll
from llvmlite import ir
from numba.core import caching, codegen, types
from numba.extending import intrinsic

#: fastmath subset: reassociation, FMA contraction, no signed zeros, reciprocal
#: approximations. Deliberately WITHOUT "nnan"/"ninf": full fastmath lets LLVM
#: assume finiteness, which makes ``isfinite(nan)`` true and silently breaks the
#: divergence checks of the samplers.
FASTMATH = set({"reassoc", "contract", "nsz", "arcp"})

#: ``error_model="numpy"``: no zero-division checks, which would block vectorisation.
#: ``nogil``: replicas run kernels concurrently from Python threads.
JIT_OPTIONS = dict(cache=True, nogil=True, error_model="numpy", fastmath=FASTMATH)


def _private_copies(optimize_final_module):
    """Numba links a copy of every compiled callee into each caller's module,
    with "linkonce_odr" linkage, which the object code marks WEAK. A process
    that compiled a callee on its own (a fresh compile) binds the caller's calls
    to that separately optimised standalone copy, while a process that loads the
    caller from the cache runs the caller's own copy; under the fastmath flags
    the two copies can round differently, so results depended on the state of
    the compile cache (tests/test_reproducible.py). Before our kernels' modules
    are optimised, the linked-in copies get internal linkage, so every caller
    runs its own copy, the very code its cache entry holds, whatever else the
    process has loaded. The libraries' own functions keep their linkage."""

    def patched(self):
        mod = self._final_module
        if any("adaptive_hmc" in fn.name for fn in mod.functions
               if not fn.is_declaration and fn.linkage == ll.Linkage.external):
            for fn in mod.functions:
                if not fn.is_declaration and fn.linkage == ll.Linkage.linkonce_odr:
                    fn.linkage = "internal"
        return optimize_final_module(self)

    patched.__wrapped__ = optimize_final_module
    return patched


if not hasattr(codegen.CPUCodeLibrary._optimize_final_module, "__wrapped__"):
    codegen.CPUCodeLibrary._optimize_final_module = _private_copies(codegen.CPUCodeLibrary._optimize_final_module)


_PACKAGE = Path(__file__).resolve().parent
#: The files whose compiled code ends up inside the package's kernels.
KERNEL_SOURCES = ("jit.py", "models/*.py", "samplers/*.py")


def sources_hash(paths) -> str:
    """SHA-256 over the names and contents of ``paths``."""
    h = hashlib.sha256()
    for p in sorted(Path(p) for p in paths):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


@functools.lru_cache(maxsize=None)
def kernel_sources_hash() -> str:
    return sources_hash(p for pattern in KERNEL_SOURCES for p in _PACKAGE.glob(pattern))


def _whole_package_stamp(get_source_stamp):
    """Numba keeps a cached kernel while its own file is unchanged, even when a
    kernel it calls (in another file) or jit.py changed: the cache then runs
    stale code. For this package's files the stamp also carries a hash of all
    kernel sources, so that any change to them recompiles every kernel."""

    def patched(self):
        stamp = get_source_stamp(self)
        if Path(self._py_file).resolve().is_relative_to(_PACKAGE):
            return (stamp, kernel_sources_hash())
        return stamp

    patched.__wrapped__ = get_source_stamp
    return patched


_Mixin = caching._SourceFileBackedLocatorMixin
if not hasattr(_Mixin.get_source_stamp, "__wrapped__"):
    _Mixin.get_source_stamp = _whole_package_stamp(_Mixin.get_source_stamp)


def njit(*args, **kwargs):
    """``numba.njit`` with the package-wide options (overridable per function)."""
    opts = dict(JIT_OPTIONS, fastmath=set(FASTMATH))
    opts.update(kwargs)
    if args and callable(args[0]):
        return numba.njit(**opts)(args[0])
    return numba.njit(*args, **opts)


# expm1(r)/r ~ sum_k _E[k] r^k on |r| <= log(2)/2: Chebyshev interpolant of degree 10
# (relative error < 1e-15, measured against math.expm1).
_E0, _E1, _E2, _E3, _E4, _E5, _E6, _E7, _E8, _E9, _E10 = (
    0.9999999999999998, 0.5000000000000009, 0.16666666666659888, 0.04166666666659961,
    0.008333333337901667, 0.0013888888907903887, 0.00019841259476013556, 2.480154766388811e-05,
    2.756695529576679e-06, 2.7604846985143216e-07, 2.1910180099092297e-08)
_LN2_HI = 0.6931471803691238  # log(2) split so that k * _LN2_HI is exact (Cody & Waite)
_LN2_LO = 1.9082149292705877e-10
_ROUND = 6755399441055744.0  # 1.5 * 2**52: adding it puts an integer in the low mantissa bits


@intrinsic
def _as_int64(typingctx, x):
    """Reinterpret the bits of a float64 as an int64 (no conversion)."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


@intrinsic
def _as_float64(typingctx, x):
    """Reinterpret the bits of an int64 as a float64 (no conversion)."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@njit(inline="always")
def fast_tanh(x):
    """tanh(x) in plain arithmetic that LLVM vectorises (libm tanh does not).

    tanh(a) = u / (u + 2) with u = expm1(2a), a = |x| clamped to 20 (where tanh
    is 1 to double precision). expm1(y) = 2^k expm1(r) + (2^k - 1) with
    y = k log 2 + r, |r| <= log(2)/2, expm1(r) from a degree-10 polynomial and
    2^k built from its bits, so that only vectorisable operations remain and
    small arguments lose no precision. Error < 1e-15 against numpy.tanh
    (tests/test_exact.py).
    """
    y = 2.0 * min(abs(x), 20.0)
    k = math.floor(y * 1.4426950408889634 + 0.5)
    r = (y - k * _LN2_HI) - k * _LN2_LO
    em1 = r * (_E0 + r * (_E1 + r * (_E2 + r * (_E3 + r * (_E4 + r * (_E5 + r * (
        _E6 + r * (_E7 + r * (_E8 + r * (_E9 + r * _E10))))))))))
    ki = _as_int64(k + _ROUND) - _as_int64(_ROUND)
    two_k = _as_float64((ki + 1023) << 52)
    u = two_k * em1 + (two_k - 1.0)
    return math.copysign(u / (u + 2.0), x)
