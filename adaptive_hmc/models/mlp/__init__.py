"""Multilayer perceptron: spec, flat parameter vector with named groups, compiled
energy, gradient and predictions, in rooms: :mod:`.spec` (the Python side),
:mod:`.arith` (the hidden units' arithmetic, the blocks of cases), :mod:`.layers`
(the affine maps and their gradients), :mod:`.passes` (forward, likelihood and
backward over one block), :mod:`.energy` (the threads' blocks, the energies,
the predictions, the step scales) and :mod:`.lines` (the interweaving moves'
lines), each importing only the ones before it.

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

The bit-identity rules every kernel here keeps (tests/test_reproducible.py,
tests/test_threads_within.py and test_float32.py test them):

1. **The blocks depend on N alone.** The cases are cut into blocks by
   :func:`~.arith.block_cases` from N (and the arithmetic) alone, and every sum
   over cases is taken block by block in the blocks' order, so that a kernel's
   sums round the same whatever the number of threads.
2. **The threads' terms are added in the blocks' order.** Threads that share
   a network's blocks write each block's terms of the energy and gradient to
   its own row (:class:`~.spec.ThreadScratch`); the caller adds them up in the
   blocks' order. Every gradient entry takes one term a block, and -0.0 + x is
   x, so the sums round exactly as one thread's running sums.
3. **Sums run in loops that only read.** A sum and a store in one loop is
   vectorised or not depending on whether the arrays' addresses pass LLVM's
   runtime overlap checks, and so would round differently from run to run.
4. **float64 sums round as they always have.** The float32 three-unit
   primitives (:func:`~.layers._affine3`, :func:`~.layers._dot_rows3`) are
   their own functions; the float64 networks run the one-unit ones.
5. **No write through a tuple's field inside ``prange``** (numba loses it):
   the threads' arrays are taken apart before the parallel loop.
"""
from .spec import (BLOCK, CASE_PAD, GAUSSIAN, Group, HAS_IO, HIDDEN, LIKELIHOOD, LIKELIHOODS, LOGISTIC, MLPSpec,
    N_IN, N_LAYERS, N_OUT, ARITHMETIC, SOFTMAX, SPARSE_DENSITY, SPARSE_MIN_INPUTS, SparseInputs, TARGET_TYPES,
    ThreadScratch, Workspace, cases_per_block, pad_cases, sparse_inputs, use_sparse)
from .arith import block_cases, tanh_of
from .passes import softmax_norm
from .energy import forward, mlp_data_energy, mlp_energy_grad, mlp_step_scales, predict
from .lines import line_data_energy, line_setup

__all__ = ["BLOCK", "CASE_PAD", "GAUSSIAN", "Group", "HAS_IO", "HIDDEN", "LIKELIHOOD", "LIKELIHOODS", "LOGISTIC",
           "MLPSpec", "N_IN", "N_LAYERS", "N_OUT", "ARITHMETIC", "SOFTMAX", "SPARSE_DENSITY", "SPARSE_MIN_INPUTS",
           "SparseInputs", "TARGET_TYPES", "ThreadScratch", "Workspace", "cases_per_block", "pad_cases",
           "sparse_inputs", "use_sparse", "block_cases", "tanh_of", "softmax_norm", "forward", "mlp_data_energy",
           "mlp_energy_grad", "mlp_step_scales", "predict", "line_data_energy", "line_setup"]
