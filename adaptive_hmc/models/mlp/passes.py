"""The passes over one block of cases: forward, the likelihood's terms (Gaussian, logistic,
softmax: chosen by the targets' type) and backward.

Part of :mod:`adaptive_hmc.models.mlp` (its docstring: the layout and the bit-identity rules).
"""
from __future__ import annotations

import math

from numba import types
from numba.extending import overload

from ...jit import fast_exp, fast_log, fast_log1p, fast_tanh, njit
from .spec import HAS_IO, HIDDEN, N_IN, N_LAYERS, N_OUT
from .arith import _NO, _YES, _block, _int, _layer_offset, _like, _sum_hidden, block_cases
from .layers import _affine, _dot_rows, _grad_layer, _sparse_first_layer, _sum, _tanh_layer


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
