"""The layers' block primitives: an affine map with its tanh (one unit a pass in float64, three in
float32), its gradient's dot products, and the first layer read from sparse inputs.

Part of :mod:`adaptive_hmc.models.mlp` (its docstring: the layout and the bit-identity rules).
"""
from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

from ...jit import fast_tanh, njit
from .arith import _NO, _YES, _like, _row, tanh_of


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
        if p == passes - 1 and tanh:                 # from b or z, left to right, as the sums below
            for n in range(B):
                z[n] = tanh_of((b if first else z[n]) + wa * ra[n] + wb * rb[n] + wc * rc[n] + wd * rd[n])
        elif first:
            for n in range(B):
                z[n] = b + wa * ra[n] + wb * rb[n] + wc * rc[n] + wd * rd[n]
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
def _affine3(z0, z1, z2, A, a0, ca, w, w0, stride, count, b):
    """:func:`_affine` with tanh of three units at once (weights w0, w0 + 1, w0 + 2 of each row, biases
    ``b`` (b0, b1, b2)), three rows a pass: each load of a row carries three multiply-adds, each load and
    store of a unit's sum three."""
    b0, b1, b2 = b
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
        first = p == 0
        if p == passes - 1:
            for n in range(B):
                z0[n] = tanh_of((b0 if first else z0[n]) + wa0 * ra[n] + wb0 * rb[n] + wc0 * rc[n])
                z1[n] = tanh_of((b1 if first else z1[n]) + wa1 * ra[n] + wb1 * rb[n] + wc1 * rc[n])
                z2[n] = tanh_of((b2 if first else z2[n]) + wa2 * ra[n] + wb2 * rb[n] + wc2 * rc[n])
        elif first:
            for n in range(B):
                z0[n] = b0 + wa0 * ra[n] + wb0 * rb[n] + wc0 * rc[n]
                z1[n] = b1 + wa1 * ra[n] + wb1 * rb[n] + wc1 * rc[n]
                z2[n] = b2 + wa2 * ra[n] + wb2 * rb[n] + wc2 * rc[n]
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
                 (w[bo], w[bo + 1], w[bo + 2]))
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
