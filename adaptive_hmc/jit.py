"""Numba settings for every compiled kernel (one place), and a vectorisable tanh.

Flow position: used by every layer that runs compiled code (model, samplers, engine).
"""
import math

import numba
import numpy as np
from llvmlite import binding as ll
from llvmlite import ir
from numba.core import caching, types
from numba.extending import intrinsic

from . import linker  # how our kernels are linked and cached (the package's patches of numba): before any compile

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
    not choose otherwise, and for the package's own functions alone (each
    function its modules define carries the features: :func:`~adaptive_hmc.
    linker.own_features`; numba's CPU features, which its compile cache keys its
    entries on, stay numba's, so that a user's own functions are compiled and
    cached as numba alone does it); with the package's linking only (numba's own
    compiles every function for numba's features)."""
    if numba.config.CPU_FEATURES is None:
        features = ll.get_host_cpu_features()
        if features.get("avx512f"):
            linker.own_features(features.flatten() + ",-prefer-256-bit")


_wide_vectors()

#: ``error_model="numpy"``: no zero-division checks, which would block vectorisation.
#: ``nogil``: chains run kernels concurrently from Python threads.
#: ``no_cfunc_wrapper``: no C entry point (numba makes one for every kernel, for its use as a first-class
#: function value, which no kernel of the package is): compile time saved.
JIT_OPTIONS = dict(cache=True, nogil=True, error_model="numpy", fastmath=FASTMATH, no_cfunc_wrapper=True)


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


def njit(*args, inner: bool = False, **kwargs):
    """``numba.njit`` with the package-wide options (overridable per function), the kernel registered as the
    package's (:func:`~adaptive_hmc.linker.own`); ``inner``: a kernel that only compiled kernels call
    (:func:`~adaptive_hmc.linker.inner`)."""
    opts = dict(JIT_OPTIONS, fastmath=set(FASTMATH))
    opts.update(kwargs)
    if inner:
        if args:
            raise TypeError("njit(inner=True) takes options only, no signatures")

        def decorate(fn):
            if numba.config.DISABLE_JIT:          # numba's switch for debugging: the plain Python function
                return fn
            return linker.inner(fn, opts)
        return decorate
    if args and callable(args[0]):
        return linker.own(numba.njit(**opts)(args[0]))
    return lambda fn: linker.own(numba.njit(*args, **opts)(fn))


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
