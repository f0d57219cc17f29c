"""Leapfrog integrator with per-coordinate step sizes (Neal 1992, eqs 20-22).

Flow position: models -> **integrator** -> transition. Knows nothing of Metropolis.
A step of eps_k per coordinate is the leapfrog for unit masses in the rescaled
coordinates q_k / eps_k, so it stays reversible and volume preserving. A
low-rank metric (:func:`leapfrog_metric`) changes the masses in those
coordinates along a few orthonormal directions u_j: the inverse mass matrix
is I + sum_j (lambda_j - 1) u_j u_j^T, lambda_j the posterior's variance along
u_j relative to the diagonal's (:func:`~adaptive_hmc.samplers.metric.low_rank_metric`).
The kernels reach it through :func:`leapfrog_with` and :func:`kinetic_with`,
which compile it only into the runs that have a low-rank metric (rows, a 2-d
array); every other run passes :data:`~adaptive_hmc.samplers.settings.NO_METRIC`
(1-d) and compiles the plain
leapfrog alone (the low-rank code in every kernel cost a cold compile 1.6 s). The choosers are functions of
their own, not inlined: numba compiles an overload's choice to type it, and an inlined one is lowered
again inside each caller.
"""
import math

import numpy as np
from numba.extending import overload

from ..jit import njit
from ..models.base import energy_grad


@njit(inline="always")
def leapfrog(q, p, g, step_sizes, num_steps, target, hyper):
    """Advance (q, p) by ``num_steps`` leapfrog steps in place; ``g`` holds
    dU/dq at q on entry and on exit. Returns (U, steps_done, finite): the
    trajectory stops at the first non-finite energy or gradient."""
    u = math.nan
    D = q.size
    for s in range(num_steps):
        for k in range(D):
            p[k] -= 0.5 * step_sizes[k] * g[k]          # eq 20
            q[k] += step_sizes[k] * p[k]                # eq 21
        u = energy_grad(q, g, target, hyper)
        gsum = 0.0
        for k in range(D):
            p[k] -= 0.5 * step_sizes[k] * g[k]          # eq 22
            gsum += g[k]
        if not (math.isfinite(u) and math.isfinite(gsum)):
            return u, s + 1, False
    return u, num_steps, True


@njit(inline="always")
def velocity(p, low_rank, v):
    """v <- (I + sum_j (lambda_j - 1) u_j u_j^T) p, the rows of ``low_rank`` being [lambda_j, u_j]."""
    for k in range(p.size):
        v[k] = p[k]
    for j in range(low_rank.shape[0]):
        d = 0.0
        for k in range(p.size):
            d += low_rank[j, k + 1] * p[k]
        c = (low_rank[j, 0] - 1.0) * d
        for k in range(p.size):
            v[k] += c * low_rank[j, k + 1]
    return v


@njit(inline="always")
def leapfrog_metric(q, p, g, step_sizes, num_steps, target, hyper, low_rank):
    """:func:`leapfrog` with the low-rank metric ``low_rank`` (rows [lambda_j, u_j], orthonormal u_j in the
    coordinates q_k / eps_k; no rows: :func:`leapfrog` itself): each position update moves by eps_k times
    the velocity M^-1 p (:func:`velocity`) instead of p."""
    if low_rank.shape[0] == 0:
        return leapfrog(q, p, g, step_sizes, num_steps, target, hyper)
    u = math.nan
    D = q.size
    v = np.empty(D)
    for s in range(num_steps):
        for k in range(D):
            p[k] -= 0.5 * step_sizes[k] * g[k]
        velocity(p, low_rank, v)
        for k in range(D):
            q[k] += step_sizes[k] * v[k]
        u = energy_grad(q, g, target, hyper)
        gsum = 0.0
        for k in range(D):
            p[k] -= 0.5 * step_sizes[k] * g[k]
            gsum += g[k]
        if not (math.isfinite(u) and math.isfinite(gsum)):
            return u, s + 1, False
    return u, num_steps, True


@njit(inline="always")
def set_state(q, g, p, q1, g1, p1, sign):
    """(q, g, p) <- (q1, g1, sign * p1) in place (a loop: no array temporaries,
    no shape checks to compile)."""
    for k in range(q.size):
        q[k] = q1[k]
        g[k] = g1[k]
        p[k] = sign * p1[k]


@njit(inline="always")
def copy_into(a, b):
    """a <- b in place, element by element."""
    for k in range(a.size):
        a[k] = b[k]


@njit(inline="always")
def kinetic(p):
    k = 0.0
    for i in range(p.size):
        k += 0.5 * p[i] * p[i]
    return k


@njit(inline="always")
def kinetic_metric(p, low_rank):
    """p^T M^-1 p / 2 under the low-rank metric (rows [lambda_j, u_j]; no rows: :func:`kinetic`)."""
    k = kinetic(p)
    for j in range(low_rank.shape[0]):
        d = 0.0
        for i in range(p.size):
            d += low_rank[j, i + 1] * p[i]
        k += 0.5 * (low_rank[j, 0] - 1.0) * d * d
    return k


def leapfrog_with(q, p, g, step_sizes, num_steps, target, hyper, low_rank):
    """In compiled code: :func:`leapfrog_metric` for a low-rank metric's rows, :func:`leapfrog` for
    :data:`~adaptive_hmc.samplers.settings.NO_METRIC`, chosen when it compiles."""
    raise NotImplementedError("compiled code only")


@overload(leapfrog_with)                 # a function of its own: inlined, its leapfrog compiled twice
def _leapfrog_with(q, p, g, step_sizes, num_steps, target, hyper, low_rank):
    if low_rank.ndim == 1:
        return lambda q, p, g, step_sizes, num_steps, target, hyper, low_rank: leapfrog(
            q, p, g, step_sizes, num_steps, target, hyper)
    return lambda q, p, g, step_sizes, num_steps, target, hyper, low_rank: leapfrog_metric(
        q, p, g, step_sizes, num_steps, target, hyper, low_rank)


def kinetic_with(p, low_rank):
    """In compiled code: :func:`kinetic_metric` for a low-rank metric's rows, :func:`kinetic` for
    :data:`~adaptive_hmc.samplers.settings.NO_METRIC`."""
    raise NotImplementedError("compiled code only")


@overload(kinetic_with)                 # not inlined in numba's IR: inlined twice in one function, it warns
def _kinetic_with(p, low_rank):
    if low_rank.ndim == 1:
        return lambda p, low_rank: kinetic(p)
    return lambda p, low_rank: kinetic_metric(p, low_rank)
