"""The energies: the blocks of cases shared by threads (their terms added in the blocks' order), the
network's outputs (:func:`forward`), minus the log likelihood, the energy and gradient of the weights under
their Gaussian priors, the predictions and FBM's step-size heuristic.

Part of :mod:`adaptive_hmc.models.mlp` (its docstring: the layout and the bit-identity rules).
"""
from __future__ import annotations

import math

import numpy as np
from numba import prange

from ...jit import njit
from .spec import GAUSSIAN, HAS_IO, HIDDEN, LIKELIHOOD, Inputs, MLPSpec, N_IN, N_LAYERS, N_OUT, Workspace, pad_cases
from .arith import _YES, _in_precision, _layer_offset, _sum_hidden
from .layers import _sparse_first_layer_grad
from .passes import _backward_block, _first_layer, _forward_block, _likelihood_block


#: What :func:`_threaded_blocks` computes of each block: the outputs, also minus the log likelihood, also the
#: gradient's terms.
_OUTPUTS, _ENERGY, _GRADIENT = 0, 1, 2


@njit(inline="always")
def _blocks(N, step):
    return (N + step - 1) // step


@njit(inner=True)
def _thread_blocks(what, inp, hidden, out, weights, scratch_out, partial, energy, span):
    """One thread's share of :func:`_threaded_blocks`: the blocks b0..b1 of ``span`` (b0, b1, N, step) of
    ``inp`` (:class:`Inputs`), in its own scratch (``hidden`` and ``scratch_out`` as :class:`Workspace`'s),
    each block's terms in ``partial[b]`` and ``energy[b]``."""
    q, qh, arch, XT, YT, noise = inp
    b0, b1, N, step = span
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
def _threaded_blocks(what, inp, work, scratch, N, step):
    """The blocks of the N cases of ``inp`` (:class:`Inputs`) shared by the threads of ``scratch`` (a
    :class:`ThreadScratch`), each thread a run of consecutive blocks: the outputs into ``work.out`` (each
    block its own columns), and (``what``) each block's terms of the energy and the gradient in
    ``scratch``; the caller adds them up in the blocks' order. The threads' arrays are taken apart here:
    written through a tuple's field inside the parallel loop, numba loses the writes."""
    hidden, scratch_out, partial, energy = scratch.hidden, scratch.dout, scratch.partial, scratch.energy
    out, weights = work.out, work.weights
    nb = _blocks(N, step)
    T = min(hidden.shape[0], nb)
    for t in prange(T):
        _thread_blocks(what, inp, hidden[t], out, weights, scratch_out[t], partial, energy,
                       (t * nb // T, (t + 1) * nb // T, N, step))


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
def mlp_data_energy(q, arch, XT, YT, noise, work, sparse, scratch):
    """Minus log likelihood at ``q`` (no prior term; up to the constant of
    :func:`mlp_energy_grad`), by one forward pass and no backward pass."""
    N = XT.shape[1]
    n_out = arch[N_OUT]
    out, dout = work.out[:n_out], work.out[n_out:]
    qh = _in_precision(q, XT, work)
    step, dense_first = _first_layer(q, arch, XT, work, sparse)
    e = 0.0
    if scratch is not None:
        if dense_first and N > step:
            _threaded_blocks(_ENERGY, Inputs(q, qh, arch, XT, YT, noise), work, scratch, N, step)
            for b in range(_blocks(N, step)):
                e += scratch.energy[b]
            return e
    for c0 in range(0, N, step):
        c1 = min(c0 + step, N)
        _forward_block(q, qh, arch, XT, work, c0, c1, dense_first)
        e += _likelihood_block(out, YT, noise, dout, c0, c1)
    return e



@njit
def forward(q, arch, XT, work, sparse, scratch):
    """Network outputs for the cases in ``XT`` (n_in, N), N possibly padded
    (:func:`pad_cases`); with ``sparse`` (the :class:`SparseInputs` of the
    same cases, non-empty) the first layer reads its nonzeros instead, with
    None the dense inputs (every caller passes it, so that all dense calls
    share one compiled version); with ``scratch`` (a :class:`ThreadScratch`)
    the blocks shared by its scratch, with None on this one.

    Returns the view ``work.out[:n_out]`` holding the outputs (n_out, N),
    computed block of cases by block (:data:`BLOCK`); the hidden units in the
    arithmetic of ``XT`` (:data:`ARITHMETIC`).
    """
    N = XT.shape[1]
    qh = _in_precision(q, XT, work)
    step, dense_first = _first_layer(q, arch, XT, work, sparse)
    if scratch is not None:
        if dense_first and N > step:
            _threaded_blocks(_OUTPUTS, Inputs(q, qh, arch, XT, work.out, work.out[0]), work, scratch, N, step)
            return work.out[:arch[N_OUT]]
    for c0 in range(0, N, step):
        _forward_block(q, qh, arch, XT, work, c0, min(c0 + step, N), dense_first)
    return work.out[:arch[N_OUT]]

@njit
def mlp_energy_grad(q, grad, arch, XT, YT, prec, noise, work, sparse, scratch):
    """Potential energy U(q) = -log p(q | hyperparameters, data) + const and its
    gradient (written into ``grad``), by one forward and one backward pass over
    each block of cases in turn (:data:`BLOCK`).

    U(q) = sum_k prec_k q_k^2 / 2 + minus log likelihood, with ``prec`` (D,) the
    prior precision of each weight and ``noise`` (n_out,) the noise precisions
    (Gaussian likelihood only). ``XT`` (n_in, N_padded) may carry zero padding
    columns (:func:`pad_cases`); the N cases are those of ``YT`` (n_targets, N).
    With ``sparse`` (non-empty :class:`SparseInputs` of the same cases) the
    first layer's forward and backward passes read only the nonzero inputs.
    With ``scratch`` (a :class:`ThreadScratch`) the blocks are shared by its
    scratch, to the same bits (None: all on this thread).
    Leaves the outputs of all cases in ``work.out`` as :func:`forward` does;
    the hidden units in the arithmetic of ``XT`` (:data:`ARITHMETIC`).
    """
    N = XT.shape[1]
    n_out = arch[N_OUT]
    out, dout = work.out[:n_out], work.out[n_out:]
    qh = _in_precision(q, XT, work)
    energy = _prior_energy_grad(q, grad, prec)
    step, dense_first = _first_layer(q, arch, XT, work, sparse)
    if scratch is not None:
        if dense_first and N > step:
            _threaded_blocks(_GRADIENT, Inputs(q, qh, arch, XT, YT, noise), work, scratch, N, step)
            for b in range(_blocks(N, step)):
                energy += scratch.energy[b]
                g = scratch.partial[b]
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
