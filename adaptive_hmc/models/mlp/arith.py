"""The arithmetic every pass shares: tanh and sums in the hidden units' precision (float64 or
float32, chosen by the inputs' type when a kernel compiles), the weights in that precision, the
layers' offsets in ``q`` and the blocks of cases.

Part of :mod:`adaptive_hmc.models.mlp` (its docstring: the layout and the bit-identity rules).
"""
from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

from ...jit import fast_tanh, fast_tanh32, njit
from .spec import HIDDEN, N_IN, N_LAYERS, cases_per_block


def tanh_of(x):
    """tanh in the precision of ``x`` (compiled code: :func:`~adaptive_hmc.jit.fast_tanh` or
    :func:`~adaptive_hmc.jit.fast_tanh32`)."""
    return np.tanh(x)


def _like(x, a):
    """The scalar x in the type of a's elements (a sum over a float32 block starts from a float32 0 and
    stays in float32; over float64 derivatives, the sum of their products with float32 rows, in float64)."""


def _in_precision(q, XT, work):
    """The weights q in the precision of the inputs XT: q itself if they are float64, else copied into
    ``work.weights`` (no allocation in the kernels)."""


@overload(tanh_of, inline="always")
def _tanh_of(x):
    if x == types.float32:
        return lambda x: fast_tanh32(x)
    return lambda x: fast_tanh(x)


@overload(_like, inline="always")
def _like_impl(x, a):
    if a.dtype == types.float32:
        return lambda x, a: np.float32(x)
    return lambda x, a: x


@overload(_in_precision, inline="always")
def _in_precision_impl(q, XT, work):
    if XT.dtype == types.float32:
        def impl(q, XT, work):
            w = work.weights
            for k in range(q.size):
                w[k] = q[k]
            return w
        return impl
    return lambda q, XT, work: q


@njit(inline="always")
def _layer_offset(arch, layer):
    """Offset of W_layer in q (layer counts from 0); layer == n_layers gives W_out."""
    off = 0
    fan_in = arch[N_IN]
    for l in range(layer):
        h = arch[HIDDEN + l]
        off += fan_in * h + h
        fan_in = h
    return off


@njit(inline="always")
def _sum_hidden(arch):
    s = 0
    for l in range(arch[N_LAYERS]):
        s += arch[HIDDEN + l]
    return s



@njit
def block_cases(N, most):
    """Cases per block of N cases, at most ``most``: where they need more than one block, an even number
    of blocks of one size (rounded up to 16 cases), so that two threads (or four) that share them each get
    the same number of cases; N alone decides it, so that the blocks (and the order of their sums) are the
    same whatever the number of threads. Measured (one chain, two threads, 1,600 cases in float32): blocks of
    512, 512, 512 and 64 cases left one thread 1,024 and the other 576."""
    blocks = (N + most - 1) // most
    if blocks <= 1:
        return most
    blocks += blocks & 1
    return ((N + blocks - 1) // blocks + 15) // 16 * 16


def _block(XT):
    """Cases per block for inputs ``XT`` (:func:`cases_per_block`)."""


@overload(_block, inline="always")
def _block_impl(XT):
    cases = cases_per_block(XT.dtype.bitwidth)
    return lambda XT: cases


@njit(inline="always")
def _row(A, a0, ca, w, w0, stride, count, m, B):
    """Row m of an affine map's sum and its weight: A[a0 + m, ca:ca + B] and
    w[w0 + m stride]; past ``count``, the last row with weight 0 (which adds
    exactly nothing to a finite sum)."""
    r = min(m, count - 1)
    return w[w0 + r * stride] if m < count else _like(0.0, w), A[a0 + r, ca:ca + B]


#: The flags of :func:`_affine`'s calls, typed as run-time values: a literal True or False (or 0, 1: see
#: :func:`_int`) would compile one copy of it a combination (five, 0.7-1.1 s each on a first run).
_YES, _NO = np.bool_(True), np.bool_(False)


@njit(inline="always")
def _int(v):
    """``v`` as a run-time int64, not a literal (see :data:`_YES`)."""
    return np.int64(v)
