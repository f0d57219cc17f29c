"""Numba settings for every compiled kernel (one place), and a vectorisable tanh.

Flow position: used by every layer that runs compiled code (model, samplers, replicas).
"""
import functools
import hashlib
import importlib
import math
from pathlib import Path

import numba
import numpy as np
from llvmlite import binding as ll
from llvmlite import ir
from numba.core import caching, lowering, types
from numba.core.registry import CPUDispatcher
from numba.extending import intrinsic

from . import linker  # noqa: F401  (how our kernels are linked and cached: before anything compiles)

#: fastmath subset: reassociation, FMA contraction, no signed zeros, reciprocal
#: approximations. Deliberately WITHOUT "nnan"/"ninf": full fastmath lets LLVM
#: assume finiteness, which makes ``isfinite(nan)`` true and silently breaks the
#: divergence checks of the samplers.
FASTMATH = set({"reassoc", "contract", "nsz", "arcp"})

def _wide_vectors():
    """Let LLVM use the core's 512-bit vectors where it has AVX-512: LLVM tunes
    Intel's AVX-512 cores to prefer 256-bit vectors ("prefer-256-bit"), which
    halves the width of every vectorised case loop. Measured (benchmarks/
    bench_scale.py's network, one thread): a gradient of 2,000 rows and 32
    hidden units 220 -> 194 us, of 20,000 rows and 128 hidden units 9.3 -> 7.3
    ms, the tanh of a case 1.06 -> 0.75 ns. Only where NUMBA_CPU_FEATURES does
    not choose otherwise; numba's compile cache keys its entries on the features,
    so cached and fresh code agree. Takes effect if numba compiled nothing yet in
    the process (the package's modules import this one first)."""
    if numba.config.CPU_FEATURES is None:
        features = ll.get_host_cpu_features()
        if features.get("avx512f"):
            numba.config.CPU_FEATURES = features.flatten() + ",-prefer-256-bit"


_wide_vectors()

#: ``error_model="numpy"``: no zero-division checks, which would block vectorisation.
#: ``nogil``: replicas run kernels concurrently from Python threads.
#: ``no_cfunc_wrapper``: no C entry point (numba makes one for every kernel, for its use as a first-class
#: function value, which no kernel of the package is): compile time saved.
JIT_OPTIONS = dict(cache=True, nogil=True, error_model="numpy", fastmath=FASTMATH, no_cfunc_wrapper=True)


_PACKAGE = Path(__file__).resolve().parent
#: The files whose compiled code ends up inside the package's kernels.
KERNEL_SOURCES = ("jit.py", "linker.py", "models/*.py", "samplers/*.py")


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
    stale code. The stamp of every cached function also carries a hash of all
    the package's kernel sources, so that any change to them recompiles every
    kernel, and every compiled function outside the package that may call one
    (a benchmark's timed loop, a user's own): the package can't tell which do."""

    def patched(self):
        return (get_source_stamp(self), kernel_sources_hash())

    patched.__wrapped__ = get_source_stamp
    return patched


_Mixin = caching._SourceFileBackedLocatorMixin
if not hasattr(_Mixin.get_source_stamp, "__wrapped__"):
    _Mixin.get_source_stamp = _whole_package_stamp(_Mixin.get_source_stamp)
# Hashed now, with the sources this process imports: hashed at its first cache entry instead, a run whose
# sources were changed while it went on filed the code it had compiled under the new sources' stamp, and a
# later run loaded that code for them (a segmentation fault, seen once).
kernel_sources_hash()


def is_ready(dispatcher, *args) -> bool | None:
    """Whether calling ``dispatcher`` with ``args`` runs at once: compiled in
    this process, or held by the compile cache for these argument types
    (None: the cache could not tell)."""
    try:
        sig = tuple(numba.typeof(a) for a in args)
        if any(tuple(s) == sig for s in dispatcher.overloads):
            return True
        cache = dispatcher._cache
        if isinstance(cache, caching.NullCache):
            return False
        return cache._index_key(sig, dispatcher.targetctx.codegen()) in cache._cache_file._load_index()
    except Exception:   # a private numba interface: any change there makes the answer unknown, not an error
        return None


def threadsafe_layer() -> bool:
    """Whether numba's threading layer lets several threads run parallel loops at once: its tbb and omp
    layers do, its own workqueue (the one left where neither is installed) does not."""
    layer = numba.config.THREADING_LAYER
    if layer != "default":
        return layer != "workqueue"       # "tbb", "omp", "safe", "threadsafe": numba refuses them if absent
    for module in ("numba.np.ufunc.tbbpool", "numba.np.ufunc.omppool"):
        try:
            importlib.import_module(module)
            return True
        except ImportError:
            continue
    return False


def threads_within(threads: int, chains: int) -> int:
    """Threads that share each of ``chains`` chains' energy and gradient when a run has ``threads``: those
    the chains leave over (``threads // chains``, at least 1). Several chains sharing theirs run parallel
    loops at once, which needs a thread-safe layer (:func:`threadsafe_layer`); without one, 1. Results do not
    depend on it (:class:`~adaptive_hmc.models.mlp.ThreadScratch`)."""
    within = max(1, int(threads) // max(int(chains), 1))
    return 1 if within > 1 and chains > 1 and not threadsafe_layer() else within


#: (module, qualified name) of every inner kernel (:class:`InnerDispatcher`).
_INNER = set()


class InnerDispatcher(CPUDispatcher):
    """A kernel called by the package's compiled kernels alone (``njit(inner=True)``): compiled without
    numba's entry point for Python (the code that unboxes each argument, a
    :class:`~adaptive_hmc.models.mlp.MLPTarget`'s dozen arrays among them), which every kernel otherwise
    gets whoever calls it; with the C entry points left out too (:data:`JIT_OPTIONS`), a first run's compile
    13-18% shorter (``docs/RESULTS.md``, "A first run's compile"). A call from Python is refused with
    a TypeError (it has no code to run) instead of being dispatched. Its options are the other kernels'
    (numba's ``no_cpython_wrapper`` would do the same, but numba compiles an ``overload`` once for each set
    of options of its callers: the two sets compiled the gradient's dispatch, numpy's and the random
    generators' functions twice): :func:`_python_entry` leaves the entry point out instead."""

    def add_overload(self, cres):
        self.overloads[tuple(cres.signature.args)] = cres      # nothing for Python's calls to find

    def _compile_for_args(self, *args, **kws):
        raise TypeError(f"{self.py_func.__module__}.{self.py_func.__qualname__} runs inside the package's "
                        f"compiled kernels only (it has no entry point for Python): call a kernel that calls it")


def _python_entry(create):
    """numba's lowering makes the Python entry point of every kernel but an inner one."""
    def patched(self, *args, **kwargs):
        if (self.fndesc.modname, self.fndesc.qualname) in _INNER:
            return None
        return create(self, *args, **kwargs)

    patched.__wrapped__ = create
    return patched


linker._patch(lowering.Lower, "create_cpython_wrapper", _python_entry)


def njit(*args, inner: bool = False, **kwargs):
    """``numba.njit`` with the package-wide options (overridable per function); ``inner``: a kernel that
    only compiled kernels call (:class:`InnerDispatcher`)."""
    opts = dict(JIT_OPTIONS, fastmath=set(FASTMATH))
    opts.update(kwargs)
    if inner:
        if args:
            raise TypeError("njit(inner=True) takes options only, no signatures")
        cache = opts.pop("cache", False)

        def decorate(fn):
            if numba.config.DISABLE_JIT:          # numba's switch for debugging: the plain Python function
                return fn
            _INNER.add((fn.__module__, fn.__qualname__))
            dispatcher = InnerDispatcher(py_func=fn, locals={}, targetoptions=dict(opts, nopython=True))
            if cache:
                dispatcher.enable_caching()
            return dispatcher
        return decorate
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
def _as_int32(typingctx, x):
    """Reinterpret the bits of a float32 as an int32 (no conversion)."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.int32(types.float32), codegen


@intrinsic
def _as_float32(typingctx, x):
    """Reinterpret the bits of an int32 as a float32 (no conversion)."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


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


@njit(inline="always")
def fast_exp(x):
    """exp(x) for x in [-700, 700] (clamped there) in plain arithmetic that LLVM vectorises, as
    :func:`fast_tanh`: exp(x) = 2^k (1 + expm1(r)), x = k log 2 + r (relative error < 5e-16 + 4e-17 |x|:
    tests/test_exact.py)."""
    y = min(max(x, -700.0), 700.0)
    k = math.floor(y * 1.4426950408889634 + 0.5)
    r = (y - k * _LN2_HI) - k * _LN2_LO
    em1 = r * (_E0 + r * (_E1 + r * (_E2 + r * (_E3 + r * (_E4 + r * (_E5 + r * (
        _E6 + r * (_E7 + r * (_E8 + r * (_E9 + r * _E10))))))))))
    two_k = _as_float64(((_as_int64(k + _ROUND) - _as_int64(_ROUND)) + 1023) << 52)
    return two_k + two_k * em1


#: 2 / (2j + 1), j = 0..16: log1p(t) = 2 atanh(s) = sum_j (2 / (2j + 1)) s^(2j + 1), s = t / (2 + t).
(_A0, _A1, _A2, _A3, _A4, _A5, _A6, _A7, _A8, _A9, _A10, _A11, _A12, _A13, _A14, _A15,
 _A16) = tuple(2.0 / (2 * j + 1) for j in range(17))


@njit(inline="always")
def fast_log1p(t):
    """log(1 + t) for t in [0, 1] in plain arithmetic that LLVM vectorises: the series of 2 atanh(s),
    s = t / (2 + t) <= 1/3, to s^33 (relative error < 1e-15: tests/test_exact.py)."""
    s = t / (2.0 + t)
    u = s * s
    p = _A12 + u * (_A13 + u * (_A14 + u * (_A15 + u * _A16)))
    p = _A6 + u * (_A7 + u * (_A8 + u * (_A9 + u * (_A10 + u * (_A11 + u * p)))))
    return s * (_A0 + u * (_A1 + u * (_A2 + u * (_A3 + u * (_A4 + u * (_A5 + u * p))))))


@njit(inline="always")
def fast_log(x):
    """log(x) for finite x > 0 (normal) in plain arithmetic that LLVM vectorises: x = 2^k m with
    m in [1, 2) from its bits, log x = k log 2 + log1p(m - 1) (:func:`fast_log1p`; relative error
    < 1e-15 away from x = 1, absolute < 3e-16: tests/test_exact.py)."""
    bits = _as_int64(x)
    k = (bits >> 52) - 1023
    m = _as_float64((bits & 0xFFFFFFFFFFFFF) | (1023 << 52))
    return (k * _LN2_HI + fast_log1p(m - 1.0)) + k * _LN2_LO


# The same in float32: expm1(r)/r by its Taylor polynomial of degree 5 on |r| <= log(2)/2
# (truncation error < 4e-7 relative at the interval's ends, where tanh's error stays under float32's), log(2) split for float32, tanh(9) = 1 in float32.
_F = np.float32
_S0, _S1, _S2, _S3, _S4, _S5 = _F(1.0), _F(1 / 2), _F(1 / 6), _F(1 / 24), _F(1 / 120), _F(1 / 720)
_LOG2E_32, _HALF_32, _TWO_32, _CLAMP_32 = _F(1.4426950408889634), _F(0.5), _F(2.0), _F(9.0)
_LN2_HI_32, _LN2_LO_32 = _F(0.693145751953125), _F(1.428606765330187e-06)
_ROUND_32 = _F(12582912.0)  # 1.5 * 2**23


@njit(inline="always")
def fast_tanh32(x):
    """tanh of a float32 in float32 arithmetic, as :func:`fast_tanh` (absolute
    error < 1.2e-7 against numpy.tanh in double precision: tests/test_exact.py)."""
    y = _TWO_32 * min(abs(x), _CLAMP_32)
    k = np.floor(y * _LOG2E_32 + _HALF_32)
    r = (y - k * _LN2_HI_32) - k * _LN2_LO_32
    em1 = r * (_S0 + r * (_S1 + r * (_S2 + r * (_S3 + r * (_S4 + r * _S5)))))
    ki = _as_int32(k + _ROUND_32) - _as_int32(_ROUND_32)
    two_k = _as_float32(np.int32((ki + np.int32(127)) << np.int32(23)))
    u = two_k * em1 + (two_k - _F(1.0))
    return np.copysign(u / (u + _TWO_32), x)
