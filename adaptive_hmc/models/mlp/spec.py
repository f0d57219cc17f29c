"""The network's spec and its pure-Python side: the flat parameter vector's groups, the
likelihoods' codes, the kernels' scratch (:class:`Workspace`, :class:`ThreadScratch`), the case padding,
the sparse inputs and the block size. Needs no compiled code.

Part of :mod:`adaptive_hmc.models.mlp` (its docstring: the layout and the bit-identity rules).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


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

    def workspace(self, n_cases: int, arithmetic: str = "float64") -> "Workspace":
        """Scratch the kernels need for ``n_cases`` cases (padded or not), the
        hidden units' in ``arithmetic`` (:data:`ARITHMETIC`)."""
        if arithmetic not in ARITHMETIC:
            raise ValueError(f"arithmetic={arithmetic!r}: allowed are {', '.join(ARITHMETIC)}")
        cols = max(n_cases, 1)
        return Workspace(np.empty((2 * sum(self.hidden), cols), arithmetic), np.empty((2 * self.n_outputs, cols)),
                         np.empty(self.n_params if arithmetic != "float64" else 0, arithmetic))

    def thread_scratch(self, n_cases: int, arithmetic: str, threads: int) -> "ThreadScratch | None":
        """The scratch of ``threads`` threads sharing the blocks of ``n_cases`` cases (padded) of one network
        (:class:`ThreadScratch`); None where one thread does it all (``threads`` 1, or a single block)."""
        most = cases_per_block(8 * np.dtype(arithmetic).itemsize)
        n = max(n_cases, 1)
        blocks = -(-n // most) + 1      # at least as many as block_cases makes of n or fewer cases
        threads = min(int(threads), blocks - 1)
        if threads <= 1:
            return None
        return ThreadScratch(np.empty((threads, 2 * sum(self.hidden), most), arithmetic),
                             np.empty((threads, 2 * self.n_outputs, most)), np.empty((blocks, self.n_params)),
                             np.empty(blocks))


#: The precisions of the hidden units' arithmetic: "float32" runs the inputs,
#: the hidden layers' weights, activations and deltas and the sums within a
#: block of cases in single precision (twice the numbers a vector instruction
#: holds, a cheaper tanh); the outputs, the likelihood, the energy and every sum
#: over blocks stay in double precision.
ARITHMETIC = ("float64", "float32")


class Workspace(NamedTuple):
    """The kernels' scratch: ``hidden`` (2 sum(H), columns) the activations
    (rows 0..sum(H)) and deltas (rows sum(H)..) of a block of cases, in the
    hidden units' arithmetic (:data:`ARITHMETIC`: that of the inputs ``XT``);
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


class Inputs(NamedTuple):
    """The read-only inputs of a pass over blocks of cases, as one argument of the kernels that share the
    blocks among threads (:func:`~.energy._threaded_blocks`): the weights ``q`` (float64) and ``qh`` (in the
    hidden units' arithmetic), ``arch``, the inputs ``XT`` (n_in, N), the targets ``YT`` and the noise
    precisions. Read only: an array written inside a parallel loop travels as an argument of its own
    (rule 5 of :mod:`adaptive_hmc.models.mlp`)."""

    q: np.ndarray
    qh: np.ndarray
    arch: np.ndarray
    XT: np.ndarray
    YT: np.ndarray
    noise: np.ndarray


class LineInputs(NamedTuple):
    """:class:`Inputs` of a line of the interweaving moves (:mod:`~.lines`), with its direction ``dw``."""

    q: np.ndarray
    qh: np.ndarray
    dw: np.ndarray
    arch: np.ndarray
    XT: np.ndarray
    YT: np.ndarray
    noise: np.ndarray


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
