"""Multilayer perceptron: spec, flat parameter vector with named groups, compiled
energy, gradient and predictions.

Flow position: data -> **model** -> integrator. Kernels take arrays (and
named tuples of arrays) only; :class:`MLPSpec` is the thin Python side.

Layout of the flat parameter vector ``q`` (all float64)::

    [W_1, b_1, W_2, b_2, ..., W_m, b_m, W_out, b_out, W_io]

``W_1`` is input->hidden (n_in x H_1), ``W_l`` hidden->hidden (H_{l-1} x H_l),
``W_out`` last hidden->output (H_m x n_out), ``W_io`` the optional direct
input->output connections (n_in x n_out) of Rasmussen (1996) section 2.1. Every
matrix is row-major (fan_in x fan_out). Hidden units are tanh, outputs identity.

Compiled kernels receive the architecture as an int64 array ``arch``, read
through the named positions below (never bare indices)::

    arch[N_IN], arch[N_OUT], arch[LIKELIHOOD], arch[HAS_IO], arch[N_LAYERS],
    arch[HIDDEN + l] (size of hidden layer l, from 0)

:meth:`MLPSpec.from_arch` rebuilds the spec from a stored ``arch``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from numba import prange, types
from numba.extending import overload

from ..jit import fast_exp, fast_log, fast_log1p, fast_tanh, fast_tanh32, njit

GAUSSIAN, LOGISTIC, SOFTMAX = 0, 1, 2
LIKELIHOODS = {"gaussian": GAUSSIAN, "logistic": LOGISTIC, "softmax": SOFTMAX}
#: The type of each likelihood's targets in the kernels (:meth:`MLPSpec.target_rows`): real values, or class
#: indices (a logistic network's one output against a softmax network's several tells the two apart). Labels as
#: booleans were tried: the logistic gradient ran slower (the conversion in its vectorised loops) and its draws
#: changed in the last bits.
TARGET_TYPES = {"gaussian": np.float64, "logistic": np.int64, "softmax": np.int64}

#: Positions in ``arch`` (compile-time constants inside the kernels).
N_IN, N_OUT, LIKELIHOOD, HAS_IO, N_LAYERS, HIDDEN = 0, 1, 2, 3, 4, 5


class Group(NamedTuple):
    """A named block of the flat parameter vector.

    ``kind`` is one of input_hidden, hidden_hidden, hidden_bias, hidden_output,
    output_bias, input_output; ``shape`` is (fan_in, fan_out) for weights and
    (n_units,) for biases; ``layer`` numbers hidden layers from 1.
    """

    name: str
    kind: str
    start: int
    stop: int
    shape: tuple
    layer: int

    @property
    def slice(self):
        return slice(self.start, self.stop)


@dataclass(frozen=True)
class MLPSpec:
    """Architecture of a tanh MLP.

    Parameters
    ----------
    n_inputs, n_outputs : int
        For ``likelihood="softmax"``, ``n_outputs`` is the number of classes; for
        ``"logistic"`` it must be 1 (the logit).
    hidden : tuple of int
        Sizes of the tanh hidden layers, e.g. ``(16,)`` or ``(20, 8)``.
    likelihood : {"gaussian", "logistic", "softmax"}
    direct : bool
        Direct input-to-output connections (Rasmussen 1996, section 2.1).
    """

    n_inputs: int
    hidden: tuple
    n_outputs: int
    likelihood: str = "gaussian"
    direct: bool = False

    def __post_init__(self):
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        if self.likelihood not in LIKELIHOODS:
            raise ValueError(f"likelihood={self.likelihood!r}: allowed are {sorted(LIKELIHOODS)}")
        if self.n_inputs < 1 or self.n_outputs < 1:
            raise ValueError(f"n_inputs={self.n_inputs}, n_outputs={self.n_outputs}: both must be >= 1")
        if not self.hidden or min(self.hidden) < 1:
            raise ValueError(f"hidden={self.hidden}: need at least one hidden layer, each of >= 1 unit")
        if self.likelihood == "logistic" and self.n_outputs != 1:
            raise ValueError(f"logistic likelihood needs n_outputs=1, got {self.n_outputs}")
        if self.likelihood == "softmax" and self.n_outputs < 2:
            raise ValueError(f"softmax likelihood needs n_outputs >= 2 classes, got {self.n_outputs}")

    @property
    def arch(self) -> np.ndarray:
        return np.array([self.n_inputs, self.n_outputs, LIKELIHOODS[self.likelihood],
                         int(self.direct), len(self.hidden), *self.hidden], dtype=np.int64)

    @classmethod
    def from_arch(cls, arch) -> "MLPSpec":
        """The spec whose :attr:`arch` is ``arch`` (as a run directory stores it)."""
        a = [int(v) for v in arch]
        names = {v: k for k, v in LIKELIHOODS.items()}
        return cls(a[N_IN], tuple(a[HIDDEN:HIDDEN + a[N_LAYERS]]), a[N_OUT], names[a[LIKELIHOOD]], bool(a[HAS_IO]))

    @property
    def groups(self) -> list:
        out, off, fan_in = [], 0, self.n_inputs
        for l, h in enumerate(self.hidden, start=1):
            kind = "input_hidden" if l == 1 else "hidden_hidden"
            name = "input_hidden" if l == 1 else f"hidden_hidden_{l - 1}_{l}"
            out.append(Group(name, kind, off, off + fan_in * h, (fan_in, h), l))
            off += fan_in * h
            out.append(Group(f"hidden_bias_{l}" if len(self.hidden) > 1 else "hidden_bias",
                             "hidden_bias", off, off + h, (h,), l))
            off += h
            fan_in = h
        out.append(Group("hidden_output", "hidden_output", off, off + fan_in * self.n_outputs,
                         (fan_in, self.n_outputs), len(self.hidden)))
        off += fan_in * self.n_outputs
        out.append(Group("output_bias", "output_bias", off, off + self.n_outputs, (self.n_outputs,), 0))
        off += self.n_outputs
        if self.direct:
            out.append(Group("input_output", "input_output", off, off + self.n_inputs * self.n_outputs,
                             (self.n_inputs, self.n_outputs), 0))
            off += self.n_inputs * self.n_outputs
        return out

    @property
    def n_params(self) -> int:
        return self.groups[-1].stop

    def unpack(self, q) -> dict:
        """Views of ``q`` by group name, reshaped to the group's shape."""
        q = np.asarray(q)
        return {g.name: q[g.slice].reshape(g.shape) for g in self.groups}

    def target_rows(self, Y) -> np.ndarray:
        """The targets Y (N, n_targets) as the kernels take them, one row a target (YT), in the type that
        names the likelihood (:data:`TARGET_TYPES`): the kernels' typing chooses the likelihood's code by it
        (:func:`_likelihood_terms`), so that a network compiles its own likelihood alone."""
        return np.ascontiguousarray(np.asarray(Y).T, dtype=TARGET_TYPES[self.likelihood])

    def workspace(self, n_cases: int, precision: str = "float64") -> "Workspace":
        """Scratch the kernels need for ``n_cases`` cases (padded or not), the
        hidden units' in ``precision`` (:data:`PRECISIONS`)."""
        if precision not in PRECISIONS:
            raise ValueError(f"precision={precision!r}: allowed are {', '.join(PRECISIONS)}")
        cols = max(n_cases, 1)
        return Workspace(np.empty((2 * sum(self.hidden), cols), precision), np.empty((2 * self.n_outputs, cols)),
                         np.empty(self.n_params if precision != "float64" else 0, precision))

    def thread_scratch(self, n_cases: int, precision: str, threads: int) -> "ThreadScratch | None":
        """The scratch of ``threads`` threads sharing the blocks of ``n_cases`` cases (padded) of one network
        (:class:`ThreadScratch`); None where one thread does it all (``threads`` 1, or a single block)."""
        most = cases_per_block(8 * np.dtype(precision).itemsize)
        n = max(n_cases, 1)
        blocks = -(-n // most) + 1      # at least as many as block_cases makes of n or fewer cases
        threads = min(int(threads), blocks - 1)
        if threads <= 1:
            return None
        return ThreadScratch(np.empty((threads, 2 * sum(self.hidden), most), precision),
                             np.empty((threads, 2 * self.n_outputs, most)), np.empty((blocks, self.n_params)),
                             np.empty(blocks))


#: The precisions of the hidden units' arithmetic: "float32" runs the inputs,
#: the hidden layers' weights, activations and deltas and the sums within a
#: block of cases in single precision (twice the numbers a vector instruction
#: holds, a cheaper tanh); the outputs, the likelihood, the energy and every sum
#: over blocks stay in double precision.
PRECISIONS = ("float64", "float32")


class Workspace(NamedTuple):
    """The kernels' scratch: ``hidden`` (2 sum(H), columns) the activations
    (rows 0..sum(H)) and deltas (rows sum(H)..) of a block of cases, in the
    hidden units' precision (:data:`PRECISIONS`: that of the inputs ``XT``);
    ``out`` (2 n_out, columns) float64, the outputs of all cases (rows
    0..n_out) and the block's derivatives of the likelihood with respect to
    them (rows n_out..); ``weights`` (D,) the weights in the hidden units'
    precision when it is not float64 (:func:`_in_precision`; else empty)."""

    hidden: np.ndarray
    out: np.ndarray
    weights: np.ndarray


class ThreadScratch(NamedTuple):
    """What the threads that share one network's blocks of cases need (:func:`_threaded_blocks`): each
    thread's scratch, as :class:`Workspace`'s ``hidden`` and ``out``'s rows n_out.. for one block
    (``hidden`` (T, 2 sum(H), block), ``dout`` (T, 2 n_out, block)), and each block's own terms, added up
    in the blocks' order afterwards: ``partial`` (blocks, D) of the gradient, ``energy`` (blocks,) of minus
    the log likelihood. Every gradient entry takes one term a block, and -0.0 + x is x, so the sums round
    exactly as one thread's running sums do, whatever the number of threads."""

    hidden: np.ndarray
    dout: np.ndarray
    partial: np.ndarray
    energy: np.ndarray


#: Case arrays are padded with zero columns to a multiple of this, so that every
#: case loop runs in whole SIMD vectors (a scalar remainder of up to 7 cases per
#: pass costs more than the padding: 18% of a 175-case tanh layer).
CASE_PAD = 8


def pad_cases(XT) -> np.ndarray:
    """Inputs (n_in, N) as a C-contiguous float64 array with zero columns added up
    to a multiple of :data:`CASE_PAD`. The kernels take N from the targets
    (energy, Gibbs) or the caller's arrays (predictions); padding cases get
    zero likelihood derivative and so add nothing to gradients."""
    XT = np.asarray(XT, dtype=np.float64)
    N = XT.shape[1]
    out = np.zeros((XT.shape[0], -(-max(N, 1) // CASE_PAD) * CASE_PAD))
    out[:, :N] = XT
    return out


class SparseInputs(NamedTuple):
    """The nonzero inputs of the cases, by input (CSC of the (N, n_in) matrix):
    input i's cases are ``rows[indptr[i]:indptr[i + 1]]`` with values
    ``vals[...]``. The kernels' first layer reads these instead of the dense
    inputs when given: the work of the first layer falls from n_in x N to the
    number of nonzeros (Dexter's word counts: about a tenth)."""

    indptr: np.ndarray   # (n_in + 1,) int64
    rows: np.ndarray     # (nnz,) int64, increasing within each input
    vals: np.ndarray     # (nnz,) float64


def sparse_inputs(X) -> SparseInputs:
    """The :class:`SparseInputs` of inputs X (N, n_in), dense or scipy.sparse."""
    import scipy.sparse as sp
    C = sp.csc_matrix(X, dtype=np.float64)
    C.sum_duplicates()
    C.sort_indices()
    C.eliminate_zeros()
    return SparseInputs(C.indptr.astype(np.int64), C.indices.astype(np.int64), C.data.astype(np.float64))


#: Inputs whose share of nonzeros is below this (and that have at least
#: SPARSE_MIN_INPUTS inputs) run the first layer on their nonzeros.
SPARSE_DENSITY = 0.3
SPARSE_MIN_INPUTS = 16


def use_sparse(X) -> bool:
    """Whether the first layer should read the nonzeros of X (N, n_in): wide and mostly zero."""
    X = np.asarray(X)
    return X.ndim == 2 and X.shape[1] >= SPARSE_MIN_INPUTS and X.size > 0 and \
        np.count_nonzero(X) < SPARSE_DENSITY * X.size


@njit(inline="always")
def _sparse_first_layer(q, h, n_in, sparse, work, N):
    """Hidden layer 0 from the nonzero inputs: work[j, n] = tanh(b_j + sum_i W_ij x_in),
    accumulated case by case in an (N, h) scratch so that the inner loop runs
    along a row of W (contiguous)."""
    zt = np.empty((N, h))
    for n in range(N):
        for j in range(h):
            zt[n, j] = q[n_in * h + j]
    for i in range(n_in):
        w = q[i * h:(i + 1) * h]
        for k in range(sparse.indptr[i], sparse.indptr[i + 1]):
            z = zt[sparse.rows[k]]
            v = sparse.vals[k]
            for j in range(h):
                z[j] += w[j] * v
    for j in range(h):
        z = work[j]
        for n in range(N):
            z[n] = fast_tanh(zt[n, j])


@njit(inline="always")
def _sparse_first_layer_grad(grad, h, n_in, sparse, work, sum_h, N):
    """dU/dW_ij = sum_n d_jn x_in over the nonzero inputs, and dU/db_j (the
    deltas transposed to (N, h) once, so the inner loop runs along a row of W)."""
    dt = np.empty((N, h))
    for j in range(h):
        d = work[sum_h + j]
        sb = 0.0
        for n in range(N):
            sb += d[n]
            dt[n, j] = d[n]
        grad[n_in * h + j] += sb
    for i in range(n_in):
        g = grad[i * h:(i + 1) * h]
        for k in range(sparse.indptr[i], sparse.indptr[i + 1]):
            d = dt[sparse.rows[k]]
            v = sparse.vals[k]
            for j in range(h):
                g[j] += d[j] * v


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


#: Cases per block. The kernels run the forward pass, the likelihood and the
#: backward pass over one block of cases at a time, the block's activations and
#: deltas in a scratch of BLOCK columns that stays in the core's caches from one
#: pass to the next (instead of every hidden unit's row of all N cases streaming
#: through memory); the sums over cases are taken block by block in a fixed
#: order. A first layer read from sparse inputs takes all cases as one block.
#: In float32 a block holds twice the cases (the same bytes: the fixed cost of
#: each pass over a block falls by half; 2,000 rows and 32 hidden units 1.9 ->
#: 1.6 ns a case and unit, benchmarks/bench_scale.py).
BLOCK = 256


def cases_per_block(bits: int) -> int:
    """Cases per block of inputs of ``bits`` bits (:data:`BLOCK` cases of float64: the same bytes)."""
    return BLOCK * 64 // bits


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


@njit(inner=True)
def _affine(z, A, a0, ca, w, w0, stride, count, b, add, tanh):
    """z[n] = f(b + sum_{m < count} w[w0 + m stride] A[a0 + m, ca + n]) for
    n < z.size (with ``add``: z[n] + the sum), f tanh (``tanh``) or the
    identity: four rows a pass over the cases (the last pass's missing rows
    weighted 0, :func:`_row`), so that each load and store of z carries four
    multiply-adds and neither the bias nor the tanh costs a pass of its own.
    The loops run over views from 0 (from a runtime start they do not
    vectorise: numba's negative-index wraparound)."""
    B = z.size
    passes = max((count + 3) // 4, 1)
    for p in range(passes):
        m = 4 * p
        wa, ra = _row(A, a0, ca, w, w0, stride, count, m, B)
        wb, rb = _row(A, a0, ca, w, w0, stride, count, m + 1, B)
        wc, rc = _row(A, a0, ca, w, w0, stride, count, m + 2, B)
        wd, rd = _row(A, a0, ca, w, w0, stride, count, m + 3, B)
        first = p == 0 and not add
        last = p == passes - 1 and tanh
        if first and last:
            for n in range(B):
                z[n] = tanh_of(b + wa * ra[n] + wb * rb[n] + wc * rc[n] + wd * rd[n])
        elif first:
            for n in range(B):
                z[n] = b + wa * ra[n] + wb * rb[n] + wc * rc[n] + wd * rd[n]
        elif last:
            for n in range(B):
                z[n] = tanh_of(z[n] + wa * ra[n] + wb * rb[n] + wc * rc[n] + wd * rd[n])
        else:
            for n in range(B):
                z[n] += wa * ra[n] + wb * rb[n] + wc * rc[n] + wd * rd[n]


@njit(inline="always")
def _weights3(w, w0, stride, count, m):
    """The weights of row m for the three units w0, w0 + 1, w0 + 2 (stride apart by row), 0 past ``count``."""
    k = w0 + min(m, count - 1) * stride
    zero = _like(0.0, w)
    return (w[k], w[k + 1], w[k + 2]) if m < count else (zero, zero, zero)


@njit(inner=True)
def _affine3(z0, z1, z2, A, a0, ca, w, w0, stride, count, b0, b1, b2):
    """:func:`_affine` with tanh of three units at once (weights w0, w0 + 1, w0 + 2 of each row), three rows a
    pass: each load of a row carries three multiply-adds, each load and store of a unit's sum three."""
    B = z0.size
    passes = max((count + 2) // 3, 1)
    for p in range(passes):
        m = 3 * p
        ra = _row(A, a0, ca, w, w0, stride, count, m, B)[1]
        rb = _row(A, a0, ca, w, w0, stride, count, m + 1, B)[1]
        rc = _row(A, a0, ca, w, w0, stride, count, m + 2, B)[1]
        wa0, wa1, wa2 = _weights3(w, w0, stride, count, m)
        wb0, wb1, wb2 = _weights3(w, w0, stride, count, m + 1)
        wc0, wc1, wc2 = _weights3(w, w0, stride, count, m + 2)
        first, last = p == 0, p == passes - 1
        if first and last:
            for n in range(B):
                z0[n] = tanh_of(b0 + wa0 * ra[n] + wb0 * rb[n] + wc0 * rc[n])
                z1[n] = tanh_of(b1 + wa1 * ra[n] + wb1 * rb[n] + wc1 * rc[n])
                z2[n] = tanh_of(b2 + wa2 * ra[n] + wb2 * rb[n] + wc2 * rc[n])
        elif first:
            for n in range(B):
                z0[n] = b0 + wa0 * ra[n] + wb0 * rb[n] + wc0 * rc[n]
                z1[n] = b1 + wa1 * ra[n] + wb1 * rb[n] + wc1 * rc[n]
                z2[n] = b2 + wa2 * ra[n] + wb2 * rb[n] + wc2 * rc[n]
        elif last:
            for n in range(B):
                z0[n] = tanh_of(z0[n] + wa0 * ra[n] + wb0 * rb[n] + wc0 * rc[n])
                z1[n] = tanh_of(z1[n] + wa1 * ra[n] + wb1 * rb[n] + wc1 * rc[n])
                z2[n] = tanh_of(z2[n] + wa2 * ra[n] + wb2 * rb[n] + wc2 * rc[n])
        else:
            for n in range(B):
                z0[n] += wa0 * ra[n] + wb0 * rb[n] + wc0 * rc[n]
                z1[n] += wa1 * ra[n] + wb1 * rb[n] + wc1 * rc[n]
                z2[n] += wa2 * ra[n] + wb2 * rb[n] + wc2 * rc[n]


def _tanh_layer(hid, row, B, A, a0, ca, w, off, h, fan_in):
    """The h units of a tanh layer on a block of B cases: hid[row + j, :B] = tanh(b_j + sum_i W_ij
    A[a0 + i, ca:ca + B]), W_ij = w[off + i h + j], b_j = w[off + fan_in h + j]. In float32 three units a pass
    (:func:`_affine3`); in float64 one (:func:`_affine`), whose sums round as they always have."""


@njit(inline="always")
def _tanh_units(hid, row, B, A, a0, ca, w, off, h, fan_in, j):
    """Units j..h of :func:`_tanh_layer`, one a pass (:func:`_affine`)."""
    for j in range(j, h):
        _affine(hid[row + j, :B], A, a0, ca, w, off + j, h, fan_in, w[off + fan_in * h + j], _NO, _YES)


def _tanh_layer_one(hid, row, B, A, a0, ca, w, off, h, fan_in):
    _tanh_units(hid, row, B, A, a0, ca, w, off, h, fan_in, 0)


def _tanh_layer_three(hid, row, B, A, a0, ca, w, off, h, fan_in):
    j = 0
    while j + 3 <= h:
        bo = off + fan_in * h + j
        _affine3(hid[row + j, :B], hid[row + j + 1, :B], hid[row + j + 2, :B], A, a0, ca, w, off + j, h, fan_in,
                 w[bo], w[bo + 1], w[bo + 2])
        j += 3
    _tanh_units(hid, row, B, A, a0, ca, w, off, h, fan_in, j)


#: The two choosers below compile their choice as a function of its own (not inlined: the energy and gradient of
#: a float64 network compiled cold in 10.4 s with them inlined, 8.1 s without, 7.2 s before they were there).
@overload(_tanh_layer)
def _tanh_layer_impl(hid, row, B, A, a0, ca, w, off, h, fan_in):
    return _tanh_layer_three if w.dtype == types.float32 else _tanh_layer_one


@njit(inline="always")
def _dot_rows(d, A, a0, ca, count, grad, g0, stride):
    """grad[g0 + m stride] += sum_{n < d.size} d[n] A[a0 + m, ca + n] for m < count,
    up to four rows a pass. The loops only read (see :func:`_likelihood_block`)."""
    B = d.size
    m = 0
    while m < count:
        ra = A[a0 + m, ca:ca + B]
        if count - m >= 4:
            rb, rc, rd = A[a0 + m + 1, ca:ca + B], A[a0 + m + 2, ca:ca + B], A[a0 + m + 3, ca:ca + B]
            sa = sb = sc = sd = _like(0.0, d)
            for n in range(B):
                sa += d[n] * ra[n]
                sb += d[n] * rb[n]
                sc += d[n] * rc[n]
                sd += d[n] * rd[n]
            grad[g0 + (m + 1) * stride] += sb
            grad[g0 + (m + 2) * stride] += sc
            grad[g0 + (m + 3) * stride] += sd
            k = 4
        elif count - m >= 2:
            rb = A[a0 + m + 1, ca:ca + B]
            sa = sb = _like(0.0, d)
            for n in range(B):
                sa += d[n] * ra[n]
                sb += d[n] * rb[n]
            grad[g0 + (m + 1) * stride] += sb
            k = 2
        else:
            sa = _like(0.0, d)
            for n in range(B):
                sa += d[n] * ra[n]
            k = 1
        grad[g0 + m * stride] += sa
        m += k


@njit(inner=True)
def _dot_rows3(d0, d1, d2, A, a0, ca, count, grad, g0, stride):
    """:func:`_dot_rows` of three units' deltas at once (their gradients g0, g0 + 1, g0 + 2 of each row),
    three rows a pass: each load of a row or a delta carries three multiply-adds."""
    B = d0.size
    m = 0
    while m < count:
        g = g0 + m * stride
        ra = A[a0 + m, ca:ca + B]
        if count - m >= 3:
            rb, rc = A[a0 + m + 1, ca:ca + B], A[a0 + m + 2, ca:ca + B]
            s00 = s01 = s02 = s10 = s11 = s12 = s20 = s21 = s22 = _like(0.0, d0)
            for n in range(B):
                s00 += d0[n] * ra[n]
                s01 += d1[n] * ra[n]
                s02 += d2[n] * ra[n]
                s10 += d0[n] * rb[n]
                s11 += d1[n] * rb[n]
                s12 += d2[n] * rb[n]
                s20 += d0[n] * rc[n]
                s21 += d1[n] * rc[n]
                s22 += d2[n] * rc[n]
            grad[g + stride] += s10
            grad[g + stride + 1] += s11
            grad[g + stride + 2] += s12
            grad[g + 2 * stride] += s20
            grad[g + 2 * stride + 1] += s21
            grad[g + 2 * stride + 2] += s22
            k = 3
        else:
            s00 = s01 = s02 = _like(0.0, d0)
            for n in range(B):
                s00 += d0[n] * ra[n]
                s01 += d1[n] * ra[n]
                s02 += d2[n] * ra[n]
            k = 1
        grad[g] += s00
        grad[g + 1] += s01
        grad[g + 2] += s02
        m += k


def _grad_layer(hid, drow, B, A, a0, ca, grad, off, h, fan_in):
    """Add a layer's weight and bias gradients from its units' deltas hid[drow + j, :B] and its inputs
    A[a0 + i, ca:ca + B]: dU/dW_ij (at grad[off + i h + j]) += sum_n d_j src_i, dU/db_j += sum_n d_j. In float32
    three units a pass (:func:`_dot_rows3`); in float64 one (:func:`_dot_rows`), whose sums round as they
    always have."""


@njit(inline="always")
def _grad_units(hid, drow, B, A, a0, ca, grad, off, h, fan_in, j):
    """Units j..h of :func:`_grad_layer`, one a pass (:func:`_dot_rows`)."""
    for j in range(j, h):
        d = hid[drow + j, :B]
        grad[off + fan_in * h + j] += _sum(d)
        _dot_rows(d, A, a0, ca, fan_in, grad, off + j, h)


def _grad_layer_one(hid, drow, B, A, a0, ca, grad, off, h, fan_in):
    _grad_units(hid, drow, B, A, a0, ca, grad, off, h, fan_in, 0)


def _grad_layer_three(hid, drow, B, A, a0, ca, grad, off, h, fan_in):
    j = 0
    while j + 3 <= h:
        d0, d1, d2 = hid[drow + j, :B], hid[drow + j + 1, :B], hid[drow + j + 2, :B]
        for u, d in enumerate((d0, d1, d2)):
            grad[off + fan_in * h + j + u] += _sum(d)
        _dot_rows3(d0, d1, d2, A, a0, ca, fan_in, grad, off + j, h)
        j += 3
    _grad_units(hid, drow, B, A, a0, ca, grad, off, h, fan_in, j)


@overload(_grad_layer)
def _grad_layer_impl(hid, drow, B, A, a0, ca, grad, off, h, fan_in):
    return _grad_layer_three if hid.dtype == types.float32 else _grad_layer_one


@njit(inline="always")
def _sum(d):
    s = _like(0.0, d)
    for n in range(d.size):
        s += d[n]
    return s


@njit(inner=True)
def _forward_block(q, qh, arch, XT, work, c0, c1, dense_first):
    """The network on the cases [c0, c1): their hidden activations in rows
    0..sum(H) of ``work.hidden``, columns 0..c1-c0 (the block's scratch), and
    their outputs in ``work.out`` rows 0..n_out, columns c0..c1 (the outputs of
    all cases); the first layer only when ``dense_first`` (else it was computed
    from the nonzero inputs beforehand). ``qh``: the weights in the hidden
    units' precision (:func:`_in_precision`). The case loop is innermost so
    that it vectorises."""
    hid = work.hidden
    n_in, n_out, has_io, n_layers = arch[N_IN], arch[N_OUT], arch[HAS_IO], arch[N_LAYERS]
    B = c1 - c0
    off = 0
    row = 0
    fan_in = n_in
    for l in range(n_layers):
        h = arch[HIDDEN + l]
        if l > 0 or dense_first:
            A = XT if l == 0 else hid
            a0 = 0 if l == 0 else row - fan_in
            ca = c0 if l == 0 else 0
            _tanh_layer(hid, row, B, A, a0, ca, qh, off, h, fan_in)
        off += fan_in * h + h
        row += h
        fan_in = h
    for o in range(n_out):
        y = work.out[o, c0:c1]
        _affine(y, hid, row - fan_in, _int(0), q, off + o, n_out, fan_in, q[off + fan_in * n_out + o], _NO, _NO)
        if has_io:
            _affine(y, XT, _int(0), c0, q, off + fan_in * n_out + n_out + o, n_out, n_in, 0.0, _YES, _NO)


@njit(inline="always")
def _first_layer(q, arch, XT, work, sparse):
    """The block size and whether the first layer reads the dense inputs; with
    non-empty ``sparse``, computes the first layer of all cases from the nonzero
    inputs (and then all cases are one block)."""
    N = XT.shape[1]
    if sparse is not None:
        if sparse.indptr.size > 0:
            _sparse_first_layer(q, arch[HIDDEN], arch[N_IN], sparse, work.hidden, N)
            return N, False
    return block_cases(N, _block(XT)), True


@njit
def forward(q, arch, XT, work, sparse, threads):
    """Network outputs for the cases in ``XT`` (n_in, N), N possibly padded
    (:func:`pad_cases`); with ``sparse`` (the :class:`SparseInputs` of the
    same cases, non-empty) the first layer reads its nonzeros instead, with
    None the dense inputs (every caller passes it, so that all dense calls
    share one compiled version); with ``threads`` (a :class:`ThreadScratch`)
    the blocks shared by its threads, with None on this one.

    Returns the view ``work.out[:n_out]`` holding the outputs (n_out, N),
    computed block of cases by block (:data:`BLOCK`); the hidden units in the
    precision of ``XT`` (:data:`PRECISIONS`).
    """
    N = XT.shape[1]
    qh = _in_precision(q, XT, work)
    step, dense_first = _first_layer(q, arch, XT, work, sparse)
    if threads is not None:
        if dense_first and N > step:
            _threaded_blocks(_OUTPUTS, q, qh, arch, XT, work.out, work.out[0], work, threads, N, step)
            return work.out[:arch[N_OUT]]
    for c0 in range(0, N, step):
        _forward_block(q, qh, arch, XT, work, c0, min(c0 + step, N), dense_first)
    return work.out[:arch[N_OUT]]


@njit(inline="always")
def softmax_norm(out, n):
    """(m, s) for case n of the outputs (n_out, N): m = max_o out[o, n] and
    s = sum_o exp(out[o, n] - m), so that p_o = exp(out[o, n] - m) / s and
    log p_o = out[o, n] - m - log s."""
    m = out[0, n]
    for o in range(1, out.shape[0]):
        m = max(m, out[o, n])
    s = 0.0
    for o in range(out.shape[0]):
        s += math.exp(out[o, n] - m)
    return m, s


@njit(inner=True)
def _likelihood_block(out, YT, noise, dout, c0, c1):
    """Minus log likelihood (up to a constant in the weights) of the cases
    [c0, c1) of the outputs ``out`` (n_out, N_padded), and its derivative with
    respect to each output, written into the block's ``dout`` (n_out, >= c1 - c0)
    from column 0; the padding cases beyond N = YT.shape[1] get derivative 0.
    The targets' type chooses the likelihood (:func:`_likelihood_terms`)."""
    n_out = out.shape[0]
    real = max(min(c1, YT.shape[1]) - c0, 0)
    for o in range(n_out):
        for n in range(real, c1 - c0):
            dout[o, n] = 0.0
    return _likelihood_terms(out, YT, noise, dout, c0, real)


def _likelihood_terms(out, YT, noise, dout, c0, real):
    """:func:`_likelihood_block`'s terms of its ``real`` cases, by the targets' type (:data:`TARGET_TYPES`):
    real values the Gaussian's, class indices the logistic's (one output) or the softmax's, so that a network
    compiles its own likelihood's code alone (a function of its own, not inlined: inlined, numba would compile
    it for typing and then lower it again inside the block's kernel)."""


@overload(_likelihood_terms)
def _likelihood_terms_impl(out, YT, noise, dout, c0, real):
    if isinstance(YT.dtype, types.Float):
        return lambda out, YT, noise, dout, c0, real: _gaussian_block(out, YT, noise, dout, c0, real)

    def classes(out, YT, noise, dout, c0, real):
        if out.shape[0] == 1:
            return _logistic_block(out, YT, dout, c0, real)
        return _softmax_block(out, YT, dout, c0, real)
    return classes


@njit(inline="always")
def _gaussian_block(out, YT, noise, dout, c0, real):
    # A sum and a store in one loop would be vectorised or not depending on
    # whether the arrays' addresses pass LLVM's runtime overlap checks, and so
    # round differently from run to run: sums run in loops that only read.
    e = 0.0
    for o in range(out.shape[0]):
        t = noise[o]
        d = dout[o, :real]
        y = out[o, c0:c0 + real]
        yt = YT[o, c0:c0 + real]
        for n in range(real):
            d[n] = y[n] - yt[n]
        s = 0.0
        for n in range(real):
            s += d[n] * d[n]
        for n in range(real):
            d[n] *= t
        e += 0.5 * t * s
    return e


@njit(inline="always")
def _logistic_block(out, YT, dout, c0, real):
    # log(1 + e^f) - y f = max(f, 0) + log1p(e^-|f|) - y f, and its derivative sigmoid(f) - y =
    # (1 + tanh(f / 2)) / 2 - y, in loops that vectorise (libm's exp and log1p do not): a third of the
    # gradient's time on 426 cases of 30 inputs and 16 units. The remainders log1p(e^-|f|) wait in
    # dout while a loop that only reads sums the terms.
    d = dout[0, :real]
    f = out[0, c0:c0 + real]
    yt = YT[0, c0:c0 + real]
    for n in range(real):
        d[n] = fast_log1p(fast_exp(-abs(f[n])))
    e = 0.0
    for n in range(real):
        e += max(f[n], 0.0) + d[n] - yt[n] * f[n]
    for n in range(real):
        d[n] = 0.5 + 0.5 * fast_tanh(0.5 * f[n]) - yt[n]
    return e


@njit(inline="always")
def _softmax_block(out, YT, dout, c0, real):
    # log sum_o e^{f_o} - f_c and its derivatives p_o - [o = c], p_o = e^{f_o - L}, with the classes in
    # the outer loops so that the loops over the cases vectorise: the maximum m (row 0 of dout), the
    # sum of e^{f_o - m} (row 1), then L = m + log of it (row 0), the terms summed in a loop that only
    # reads, and the derivatives, row 0's last (it holds L).
    n_out = out.shape[0]
    m, s = dout[0, :real], dout[1, :real]
    for n in range(real):
        m[n] = out[0, c0 + n]
    for o in range(1, n_out):
        f = out[o, c0:c0 + real]
        for n in range(real):
            m[n] = max(m[n], f[n])
    for n in range(real):
        s[n] = 0.0
    for o in range(n_out):
        f = out[o, c0:c0 + real]
        for n in range(real):
            s[n] += fast_exp(f[n] - m[n])
    for n in range(real):
        m[n] += fast_log(s[n])
    e = 0.0
    for n in range(real):
        e += m[n] - out[int(YT[0, c0 + n]), c0 + n]
    for o in range(n_out - 1, -1, -1):
        f, d = out[o, c0:c0 + real], dout[o, :real]
        for n in range(real):
            d[n] = fast_exp(f[n] - m[n]) - (1.0 if YT[0, c0 + n] == o else 0.0)
    return e


@njit(inner=True)
def _backward_block(q, qh, grad, arch, XT, work, dout, c0, c1, dense_first):
    """Add the terms of the cases [c0, c1) to dU/dq in ``grad``, from the
    derivatives with respect to the outputs (``dout``, columns from 0) and the
    activations of :func:`_forward_block`, leaving the block's deltas
    dU/d(summed input) in ``work.hidden`` rows sum(H)..2 sum(H); the first
    layer's weights only when ``dense_first``."""
    n_in, n_out, has_io, n_layers = arch[N_IN], arch[N_OUT], arch[HAS_IO], arch[N_LAYERS]
    B = c1 - c0
    sum_h = _sum_hidden(arch)
    hid = work.hidden
    off = _layer_offset(arch, n_layers)
    h = arch[HIDDEN - 1 + n_layers]
    top = sum_h - h
    # Output biases, direct connections and hidden-output weights dU/dW_jo = sum_n dout_o a_j.
    for o in range(n_out):
        d = dout[o, :B]
        grad[off + h * n_out + o] += _sum(d)
        if has_io:
            _dot_rows(d, XT, 0, c0, n_in, grad, off + h * n_out + n_out + o, n_out)
        _dot_rows(d, hid, top, 0, h, grad, off + o, n_out)
    # The top hidden layer's delta, dU/d(summed input) = (W_out dout) * (1 - a^2).
    for j in range(h):
        dj = hid[sum_h + top + j, :B]
        a = hid[top + j, :B]
        one = _like(1.0, a)
        if n_out == 1:
            w = qh[off + j]
            d = dout[0, :B]
            for n in range(B):
                dj[n] = w * _like(d[n], a) * (one - a[n] * a[n])
        else:
            _affine(dj, dout, _int(0), _int(0), q, off + j * n_out, _int(1), n_out, 0.0, _NO, _NO)
            for n in range(B):
                dj[n] *= one - a[n] * a[n]
    # Backpropagate through the hidden layers: dU/db_j, dU/dW_ij = sum_n d_j src_i.
    row = top
    for l in range(n_layers - 1, -1, -1):
        h = arch[HIDDEN + l]
        fan_in = n_in if l == 0 else arch[HIDDEN - 1 + l]
        off = _layer_offset(arch, l)
        if l > 0 or dense_first:
            A = XT if l == 0 else hid
            a0 = 0 if l == 0 else row - fan_in
            ca = c0 if l == 0 else 0
            _grad_layer(hid, sum_h + row, B, A, a0, ca, grad, off, h, fan_in)
        if l > 0:
            below = row - fan_in
            for i in range(fan_in):
                di = hid[sum_h + below + i, :B]
                a = hid[below + i, :B]
                one = _like(1.0, a)
                _affine(di, hid, sum_h + row, _int(0), qh, off + i * h, _int(1), h, _like(0.0, qh), _NO, _NO)
                for n in range(B):
                    di[n] *= one - a[n] * a[n]
            row = below


#: What :func:`_threaded_blocks` computes of each block: the outputs, also minus the log likelihood, also the
#: gradient's terms.
_OUTPUTS, _ENERGY, _GRADIENT = 0, 1, 2


@njit(inline="always")
def _blocks(N, step):
    return (N + step - 1) // step


@njit(inner=True)
def _thread_blocks(what, q, qh, arch, XT, YT, noise, hidden, out, weights, scratch_out, partial, energy, b0, b1, N,
                   step):
    """One thread's share of :func:`_threaded_blocks`: the blocks b0..b1, in its own scratch (``hidden`` and
    ``scratch_out`` as :class:`Workspace`'s), each block's terms in ``partial[b]`` and ``energy[b]``."""
    work = Workspace(hidden, out, weights)
    n_out = arch[N_OUT]
    dout = scratch_out[n_out:]
    for b in range(b0, b1):
        c0 = b * step
        c1 = min(c0 + step, N)
        _forward_block(q, qh, arch, XT, work, c0, c1, _YES)
        if what >= _ENERGY:
            energy[b] = _likelihood_block(out[:n_out], YT, noise, dout, c0, c1)
        if what == _GRADIENT:
            g = partial[b]
            for k in range(g.size):
                g[k] = -0.0
            _backward_block(q, qh, g, arch, XT, work, dout, c0, c1, _YES)


@njit(parallel=True)
def _threaded_blocks(what, q, qh, arch, XT, YT, noise, work, threads, N, step):
    """The blocks of the N cases shared by the threads of ``threads`` (a :class:`ThreadScratch`), each
    thread a run of consecutive blocks: the outputs into ``work.out`` (each block its own columns), and
    (``what``) each block's terms of the energy and the gradient in ``threads``; the caller adds them up
    in the blocks' order. The threads' arrays are taken apart here: written through a tuple's field inside
    the parallel loop, numba loses the writes."""
    hidden, scratch_out, partial, energy = threads.hidden, threads.dout, threads.partial, threads.energy
    out, weights = work.out, work.weights
    nb = _blocks(N, step)
    T = min(hidden.shape[0], nb)
    for t in prange(T):
        _thread_blocks(what, q, qh, arch, XT, YT, noise, hidden[t], out, weights, scratch_out[t], partial, energy,
                       t * nb // T, (t + 1) * nb // T, N, step)


@njit(inline="always")
def _prior_energy_grad(q, grad, prec):
    """grad = prec * q, and returns sum_k prec_k q_k^2 / 2."""
    for k in range(q.size):
        grad[k] = prec[k] * q[k]
    e = 0.0
    for k in range(q.size):         # a sum apart from the stores (see _likelihood_block)
        e += grad[k] * q[k]
    return 0.5 * e


@njit
def mlp_data_energy(q, arch, XT, YT, noise, work, sparse, threads):
    """Minus log likelihood at ``q`` (no prior term; up to the constant of
    :func:`mlp_energy_grad`), by one forward pass and no backward pass."""
    N = XT.shape[1]
    n_out = arch[N_OUT]
    out, dout = work.out[:n_out], work.out[n_out:]
    qh = _in_precision(q, XT, work)
    step, dense_first = _first_layer(q, arch, XT, work, sparse)
    e = 0.0
    if threads is not None:
        if dense_first and N > step:
            _threaded_blocks(_ENERGY, q, qh, arch, XT, YT, noise, work, threads, N, step)
            for b in range(_blocks(N, step)):
                e += threads.energy[b]
            return e
    for c0 in range(0, N, step):
        c1 = min(c0 + step, N)
        _forward_block(q, qh, arch, XT, work, c0, c1, dense_first)
        e += _likelihood_block(out, YT, noise, dout, c0, c1)
    return e


@njit(inner=True)
def _line_factors(dw, arch):
    """(whether :func:`line_setup` applies, c_w, c_b, c_v, c_o, how many first-layer weights move): one hidden
    layer, no direct connections, each group's moving weights one value of ``dw``."""
    n_in, n_out, H = arch[N_IN], arch[N_OUT], arch[HIDDEN]
    if arch[N_LAYERS] != 1 or arch[HAS_IO] != 0:
        return False, 0.0, 0.0, 0.0, 0.0, 0
    ob, o2, oo = n_in * H, n_in * H + H, n_in * H + H + H * n_out
    c_w, moving, ok = 0.0, 0, True
    for k in range(ob):
        if dw[k] != 0.0:
            ok = ok and (c_w == 0.0 or dw[k] == c_w)
            c_w = dw[k]
            moving += 1
    c_b, c_v, c_o = dw[ob], dw[o2], dw[oo]
    for k in range(ob, oo + n_out):
        ok = ok and dw[k] == (c_b if k < o2 else c_v if k < oo else c_o)
    return ok, c_w, c_b, c_v, c_o, moving


@njit
def line_setup(q, dw, arch, XT, YT, work, P, arow, threads):
    """Whether, and how, minus the log likelihood along the line q_k exp(x dw_k) can be computed without the
    first layer's products (:func:`line_data_energy`), for a network of one hidden layer without direct
    connections on dense inputs whose moving weights of each group (input-hidden, hidden biases,
    hidden-output, output biases) share one value of ``dw``: returns (kind, c_w, c_b, c_v, c_o), those values,
    with kind 0 where it cannot (then use :func:`mlp_data_energy`), else the pre-activations' parts made
    here from ``q``, the same for every x: the static part (the fixed inputs' products, the biases when they
    stay) in rows 0..H of ``work.hidden`` and the moving inputs' products in rows H..2H; kind 2 where
    neither part moves (the outputs' hidden part, sum_j W_jo tanh(z_j), then in ``P`` (n_out, N), so that a
    point costs the outputs alone), kind 1 where they do. ``arow`` (N,) is scratch in the hidden units'
    precision. Made block of cases by block, the blocks shared by the threads of ``threads`` as
    :func:`mlp_energy_grad`'s (None: all on this one)."""
    ok, c_w, c_b, c_v, c_o, moving = _line_factors(dw, arch)
    if not ok:
        return (0, 0.0, 0.0, 0.0, 0.0)
    line = (1 if c_w != 0.0 or c_b != 0.0 else 2, c_w, c_b, c_v, c_o)
    # The noise's place holds a float64 row that the setup does not read (the type of line_data_energy's noise:
    # one compiled line kernel).
    _line_blocks(_int(_SETUP), 0.0, line, moving, q, dw, arch, XT, YT, work.out[0, :0], work, P, arow, threads)
    return line


@njit
def line_data_energy(x, line, q, arch, XT, YT, noise, work, P, arow, threads):
    """Minus the log likelihood at the weights q_k exp(x dw_k), from the parts :func:`line_setup` made
    (``line``, what it returned, kind 1 or 2): one tanh a hidden unit and case (kind 1) or none (kind 2),
    instead of the first layer's products; block of cases by block, the blocks' terms added in their order
    whatever the number of threads of ``threads`` that share them."""
    return _line_blocks(_int(_POINT), x, line, _int(0), q, q, arch, XT, YT, noise, work, P, arow, threads)


#: What :func:`_line_blocks` does with each block: make the line's parts, or evaluate a point (passed as
#: run-time values, :func:`_int`: as literals they compiled the lines' kernels once for each, 2.2 s more).
_SETUP, _POINT = 0, 1


@njit(inline="always")
def _line_blocks(what, x, line, moving, q, dw, arch, XT, YT, noise, work, P, arow, threads):
    """:func:`line_setup`'s (``what`` _SETUP) or :func:`line_data_energy`'s (_POINT) work on every block of
    the N cases: on this thread (``threads`` None) or shared by ``threads``' threads; returns the sum of
    the blocks' terms of minus the log likelihood (0 for _SETUP)."""
    N = YT.shape[1]
    n_out = arch[N_OUT]
    qh = _in_precision(q, XT, work)
    step = block_cases(N, _block(XT))
    e = 0.0
    if threads is not None:
        if N > step:
            _threaded_line(what, x, line, moving, q, qh, dw, arch, XT, YT, noise, work, P, arow, threads, N, step)
            if what == _POINT:
                for b in range(_blocks(N, step)):
                    e += threads.energy[b]
            return e
    for c0 in range(0, N, step):
        e += _line_block(what, x, line, moving, q, qh, dw, arch, XT, YT, noise, work.hidden, work.out,
                         work.out[n_out:], P, arow, c0, min(c0 + step, N))
    return e


@njit(parallel=True)
def _threaded_line(what, x, line, moving, q, qh, dw, arch, XT, YT, noise, work, P, arow, threads, N, step):
    """:func:`_line_blocks`' blocks shared by the threads of ``threads``, each a run of consecutive blocks,
    each block's term of the energy in ``threads.energy`` (as :func:`_threaded_blocks`)."""
    hidden, out, scratch_out, energy = work.hidden, work.out, threads.dout, threads.energy
    nb = _blocks(N, step)
    T = min(scratch_out.shape[0], nb)
    for t in prange(T):
        _thread_line(what, x, line, moving, q, qh, dw, arch, XT, YT, noise, hidden, out, scratch_out[t], P, arow,
                     energy, t * nb // T, (t + 1) * nb // T, N, step)


@njit(inner=True)
def _thread_line(what, x, line, moving, q, qh, dw, arch, XT, YT, noise, hidden, out, scratch_out, P, arow, energy,
                 b0, b1, N, step):
    dout = scratch_out[arch[N_OUT]:]
    for b in range(b0, b1):
        c0 = b * step
        energy[b] = _line_block(what, x, line, moving, q, qh, dw, arch, XT, YT, noise, hidden, out, dout, P, arow,
                                c0, min(c0 + step, N))


@njit(inner=True)
def _line_block(what, x, line, moving, q, qh, dw, arch, XT, YT, noise, hidden, out, dout, P, arow, c0, c1):
    """The cases c0..c1 of :func:`_line_blocks`' work: their columns of the parts (``hidden``, ``P``,
    ``arow``) and outputs (``out``), ``dout`` the block's scratch; returns the block's term of minus the
    log likelihood (_POINT), else 0."""
    if what == _SETUP:
        _line_setup_block(line, moving, q, qh, dw, arch, XT, hidden, P, arow, c0, c1)
        return 0.0
    kind, c_w, c_b, c_v, c_o = line
    n_in, n_out, H = arch[N_IN], arch[N_OUT], arch[HIDDEN]
    ob, o2, oo = n_in * H, n_in * H + H, n_in * H + H + H * n_out
    fv, fo = math.exp(x * c_v), math.exp(x * c_o)
    for o in range(n_out):
        y, b = out[o, c0:c1], q[oo + o] * fo
        if kind == 2:
            p = P[o, c0:c1]
            for n in range(c1 - c0):
                y[n] = b + fv * p[n]
        else:
            for n in range(c1 - c0):
                y[n] = b
    if kind == 1:
        fw, fb = _like(math.exp(x * c_w), XT), _like(math.exp(x * c_b), XT)
        a = arow[c0:c1]
        for j in range(H):
            zs, zm = hidden[j, c0:c1], hidden[H + j, c0:c1]
            b = _like(q[ob + j], XT) * fb if c_b != 0.0 else _like(0.0, XT)
            for n in range(c1 - c0):
                a[n] = tanh_of(zs[n] + fw * zm[n] + b)
            for o in range(n_out):
                v, y = q[o2 + j * n_out + o] * fv, out[o, c0:c1]
                for n in range(c1 - c0):
                    y[n] += v * a[n]
    return _likelihood_block(out[:n_out], YT, noise, dout, c0, c1)


@njit(inline="always")
def _line_setup_block(line, moving, q, qh, dw, arch, XT, hidden, P, arow, c0, c1):
    """:func:`line_setup`'s parts of the cases c0..c1."""
    kind, c_w, c_b, c_v, c_o = line
    n_in, n_out, H = arch[N_IN], arch[N_OUT], arch[HIDDEN]
    ob, o2 = n_in * H, n_in * H + H
    B = c1 - c0
    zero = _like(0.0, XT)
    for j in range(H):
        zs, zm = hidden[j, c0:c1], hidden[H + j, c0:c1]
        b = qh[ob + j] if c_b == 0.0 else zero
        if moving == 0 or moving == ob:             # all in one part: the forward pass's four rows a pass
            _affine(zs if moving == 0 else zm, XT, _int(0), c0, qh, j, H, n_in, b if moving == 0 else zero,
                    _NO, _NO)
            other = zm if moving == 0 else zs
            for n in range(B):
                other[n] = zero if moving == 0 else b
            continue
        for n in range(B):
            zs[n] = b
            zm[n] = zero
        for i in range(n_in):
            w = qh[i * H + j]
            xi = XT[i, c0:c1]
            z = zm if dw[i * H + j] != 0.0 else zs
            for n in range(B):
                z[n] += w * xi[n]
    if kind == 1:
        return
    for o in range(n_out):
        P[o, c0:c1] = 0.0
    a = arow[c0:c1]
    for j in range(H):
        zs = hidden[j, c0:c1]
        for n in range(B):
            a[n] = tanh_of(zs[n])
        for o in range(n_out):
            v, p = q[o2 + j * n_out + o], P[o, c0:c1]
            for n in range(B):
                p[n] += v * a[n]


@njit
def mlp_energy_grad(q, grad, arch, XT, YT, prec, noise, work, sparse, threads):
    """Potential energy U(q) = -log p(q | hyperparameters, data) + const and its
    gradient (written into ``grad``), by one forward and one backward pass over
    each block of cases in turn (:data:`BLOCK`).

    U(q) = sum_k prec_k q_k^2 / 2 + minus log likelihood, with ``prec`` (D,) the
    prior precision of each weight and ``noise`` (n_out,) the noise precisions
    (Gaussian likelihood only). ``XT`` (n_in, N_padded) may carry zero padding
    columns (:func:`pad_cases`); the N cases are those of ``YT`` (n_targets, N).
    With ``sparse`` (non-empty :class:`SparseInputs` of the same cases) the
    first layer's forward and backward passes read only the nonzero inputs.
    With ``threads`` (a :class:`ThreadScratch`) the blocks are shared by its
    threads, to the same bits (None: all on this thread).
    Leaves the outputs of all cases in ``work.out`` as :func:`forward` does;
    the hidden units in the precision of ``XT`` (:data:`PRECISIONS`).
    """
    N = XT.shape[1]
    n_out = arch[N_OUT]
    out, dout = work.out[:n_out], work.out[n_out:]
    qh = _in_precision(q, XT, work)
    energy = _prior_energy_grad(q, grad, prec)
    step, dense_first = _first_layer(q, arch, XT, work, sparse)
    if threads is not None:
        if dense_first and N > step:
            _threaded_blocks(_GRADIENT, q, qh, arch, XT, YT, noise, work, threads, N, step)
            for b in range(_blocks(N, step)):
                energy += threads.energy[b]
                g = threads.partial[b]
                for k in range(grad.size):
                    grad[k] += g[k]
            return energy
    for c0 in range(0, N, step):
        c1 = min(c0 + step, N)
        _forward_block(q, qh, arch, XT, work, c0, c1, dense_first)
        energy += _likelihood_block(out, YT, noise, dout, c0, c1)
        _backward_block(q, qh, grad, arch, XT, work, dout, c0, c1, dense_first)
    if sparse is not None:
        if not dense_first:
            _sparse_first_layer_grad(grad, arch[HIDDEN], arch[N_IN], sparse, work.hidden, _sum_hidden(arch), N)
    return energy


def predict(spec: MLPSpec, Q, X) -> np.ndarray:
    """Network outputs for inputs ``X`` (N, n_in) and weight vectors ``Q``
    ((D,) or (S, D)); returns (N, n_out) or (S, N, n_out). For classification
    the outputs are logits. Each network is one call of :func:`forward` from
    here (a call costs microseconds), the very kernel a run compiles for its
    Gibbs updates, so that predicting compiles nothing new."""
    Q = np.asarray(Q, dtype=np.float64)
    single = Q.ndim == 1
    Q2 = np.ascontiguousarray(np.atleast_2d(Q))
    N = np.shape(X)[0]
    XT = pad_cases(np.asarray(X, dtype=np.float64).T)
    work = spec.workspace(XT.shape[1])
    res = np.empty((Q2.shape[0], N, spec.n_outputs))
    for s, q in enumerate(Q2):
        res[s] = forward(q, spec.arch, XT, work, None, None)[:, :N].T
    return res[0] if single else res


# Reasoning of mlp_step_scales. Write c_o for the largest second derivative of one case's minus
# log likelihood with respect to output o: the noise precision for Gaussian
# outputs, 1/4 for logistic and softmax outputs (p (1 - p) <= 1/4). A unit's
# value enters the outputs through weights whose typical square is their prior
# variance 1/prec, so the second derivative with respect to the value of
# hidden unit j is estimated top-down as
#
#     c_j = sum over units u fed by j of c_u / prec(w_ju),
#
# and since tanh' <= 1 the same bound holds for its summed input. A weight
# from source unit i into unit u then has
#
#     d^2 U / dw^2 ~ prec(w) + (sum over cases of x_i^2) c_u,
#
# where x_i is the training input for input units and is bounded by 1 (so the
# sum is the number of cases) for tanh units and biases.
@njit(inner=True)
def mlp_step_scales(arch, prec, noise, sumsq, n_cases, out):
    """Per-weight step scales s_k (FBM's heuristic, Neal 1995): the actual leapfrog step of weight k is
    ``step_factor * s_k``, s_k = (an estimate of d^2 U / dq_k^2)^(-1/2) from the hyperparameters and the
    training inputs only, never from the current weights, so that HMC for the weights given the
    hyperparameters stays exact (the comment above gives the estimate).
    ``sumsq`` (n_in,) holds the sum over training cases of each squared input.
    """
    n_in, n_out, lik, has_io, n_layers = arch[N_IN], arch[N_OUT], arch[LIKELIHOOD], arch[HAS_IO], arch[N_LAYERS]
    c_out = np.empty(n_out)
    for o in range(n_out):
        c_out[o] = noise[o] if lik == GAUSSIAN else 0.25
    sum_h = 0
    for l in range(n_layers):
        sum_h += arch[HIDDEN + l]
    c = np.zeros(sum_h)
    off = _layer_offset(arch, n_layers)
    h = arch[HIDDEN - 1 + n_layers]
    row = sum_h - h
    for j in range(h):
        s = 0.0
        for o in range(n_out):
            s += c_out[o] / prec[off + j * n_out + o]
        c[row + j] = s
    for l in range(n_layers - 1, 0, -1):
        h = arch[HIDDEN + l]
        fan_in = arch[HIDDEN - 1 + l]
        off_l = _layer_offset(arch, l)
        below = row - fan_in
        for i in range(fan_in):
            s = 0.0
            for j in range(h):
                s += c[row + j] / prec[off_l + i * h + j]
            c[below + i] = s
        row = below
    for k in range(out.size):
        out[k] = prec[k]
    row = 0
    fan_in = n_in
    for l in range(n_layers):
        h = arch[HIDDEN + l]
        off_l = _layer_offset(arch, l)
        for i in range(fan_in):
            x2 = sumsq[i] if l == 0 else n_cases
            for j in range(h):
                out[off_l + i * h + j] += x2 * c[row + j]
        for j in range(h):
            out[off_l + fan_in * h + j] += n_cases * c[row + j]
        row += h
        fan_in = h
    off = _layer_offset(arch, n_layers)
    for o in range(n_out):
        for j in range(fan_in):
            out[off + j * n_out + o] += n_cases * c_out[o]
        out[off + fan_in * n_out + o] += n_cases * c_out[o]
        if has_io:
            for i in range(n_in):
                out[off + fan_in * n_out + n_out + i * n_out + o] += sumsq[i] * c_out[o]
    for k in range(out.size):
        out[k] = 1.0 / math.sqrt(out[k])
    return out
