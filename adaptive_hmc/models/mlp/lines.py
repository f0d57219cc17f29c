"""The interweaving moves' lines: the parts of a scale move of one hidden unit's weights that make
each point on its line cost a pass over the outputs alone (:func:`line_setup`, :func:`line_data_energy`).

Part of :mod:`adaptive_hmc.models.mlp` (its docstring: the layout and the bit-identity rules).
"""
from __future__ import annotations

import math

from numba import prange

from ...jit import njit
from .spec import HAS_IO, HIDDEN, LineInputs, N_IN, N_LAYERS, N_OUT
from .arith import _NO, _block, _in_precision, _int, _like, block_cases, tanh_of
from .layers import _affine
from .passes import _likelihood_block
from .energy import _blocks


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
def line_setup(q, dw, arch, XT, YT, work, P, arow, scratch):
    """Whether, and how, minus the log likelihood along the line q_k exp(x dw_k) can be computed without the
    first layer's products (:func:`line_data_energy`), for a network of one hidden layer without direct
    connections on dense inputs whose moving weights of each group (input-hidden, hidden biases,
    hidden-output, output biases) share one value of ``dw``: returns (kind, c_w, c_b, c_v, c_o), those values,
    with kind 0 where it cannot (then use :func:`mlp_data_energy`), else the pre-activations' parts made
    here from ``q``, the same for every x: the static part (the fixed inputs' products, the biases when they
    stay) in rows 0..H of ``work.hidden`` and the moving inputs' products in rows H..2H; kind 2 where
    neither part moves (the outputs' hidden part, sum_j W_jo tanh(z_j), then in ``P`` (n_out, N), so that a
    point costs the outputs alone), kind 1 where they do. ``arow`` (N,) is scratch in the hidden units'
    precision. Made block of cases by block, the blocks shared by the threads of ``scratch`` as
    :func:`mlp_energy_grad`'s (None: all on this one)."""
    ok, c_w, c_b, c_v, c_o, moving = _line_factors(dw, arch)
    if not ok:
        return (0, 0.0, 0.0, 0.0, 0.0)
    line = (1 if c_w != 0.0 or c_b != 0.0 else 2, c_w, c_b, c_v, c_o)
    # The noise's place holds a float64 row that the setup does not read (the type of line_data_energy's noise:
    # one compiled line kernel).
    inp = LineInputs(q, _in_precision(q, XT, work), dw, arch, XT, YT, work.out[0, :0])
    _line_blocks(_int(_SETUP), 0.0, line, moving, inp, work, P, arow, scratch)
    return line


@njit
def line_data_energy(x, line, q, arch, XT, YT, noise, work, P, arow, scratch):
    """Minus the log likelihood at the weights q_k exp(x dw_k), from the parts :func:`line_setup` made
    (``line``, what it returned, kind 1 or 2): one tanh a hidden unit and case (kind 1) or none (kind 2),
    instead of the first layer's products; block of cases by block, the blocks' terms added in their order
    whatever the number of threads of ``threads`` that share them."""
    inp = LineInputs(q, _in_precision(q, XT, work), q, arch, XT, YT, noise)
    return _line_blocks(_int(_POINT), x, line, _int(0), inp, work, P, arow, scratch)


#: What :func:`_line_blocks` does with each block: make the line's parts, or evaluate a point (passed as
#: run-time values, :func:`_int`: as literals they compiled the lines' kernels once for each, 2.2 s more).
_SETUP, _POINT = 0, 1


@njit(inline="always")
def _line_blocks(what, x, line, moving, inp, work, P, arow, scratch):
    """:func:`line_setup`'s (``what`` _SETUP) or :func:`line_data_energy`'s (_POINT) work on every block of
    the N cases of ``inp`` (:class:`LineInputs`): on this thread (``scratch`` None) or shared by
    the threads of ``scratch``; returns the sum of the blocks' terms of minus the log likelihood (0 for _SETUP)."""
    N = inp.YT.shape[1]
    n_out = inp.arch[N_OUT]
    step = block_cases(N, _block(inp.XT))
    e = 0.0
    if scratch is not None:
        if N > step:
            _threaded_line(what, x, line, moving, inp, work, P, arow, scratch, N, step)
            if what == _POINT:
                for b in range(_blocks(N, step)):
                    e += scratch.energy[b]
            return e
    for c0 in range(0, N, step):
        e += _line_block(what, x, line, moving, inp, work.hidden, work.out, work.out[n_out:], P, arow, c0,
                         min(c0 + step, N))
    return e


@njit(parallel=True)
def _threaded_line(what, x, line, moving, inp, work, P, arow, scratch, N, step):
    """:func:`_line_blocks`' blocks shared by the threads of ``scratch``, each a run of consecutive blocks,
    each block's term of the energy in ``scratch.energy`` (as :func:`_threaded_blocks`)."""
    hidden, out, scratch_out, energy = work.hidden, work.out, scratch.dout, scratch.energy
    nb = _blocks(N, step)
    T = min(scratch_out.shape[0], nb)
    for t in prange(T):
        _thread_line(what, x, line, moving, inp, hidden, out, scratch_out[t], P, arow, energy,
                     (t * nb // T, (t + 1) * nb // T, N, step))


@njit(inner=True)
def _thread_line(what, x, line, moving, inp, hidden, out, scratch_out, P, arow, energy, span):
    """One thread's share of :func:`_threaded_line`: the blocks b0..b1 of ``span`` (b0, b1, N, step)."""
    b0, b1, N, step = span
    dout = scratch_out[inp.arch[N_OUT]:]
    for b in range(b0, b1):
        c0 = b * step
        energy[b] = _line_block(what, x, line, moving, inp, hidden, out, dout, P, arow, c0, min(c0 + step, N))


@njit(inner=True)
def _line_block(what, x, line, moving, inp, hidden, out, dout, P, arow, c0, c1):
    """The cases c0..c1 of :func:`_line_blocks`' work: their columns of the parts (``hidden``, ``P``,
    ``arow``) and outputs (``out``), ``dout`` the block's scratch; returns the block's term of minus the
    log likelihood (_POINT), else 0."""
    q, qh, dw, arch, XT, YT, noise = inp
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
