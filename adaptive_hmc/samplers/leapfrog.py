"""Leapfrog integrator with per-coordinate step sizes (Neal 1992, eqs 20-22).

Flow position: models -> **integrator** -> transition. Knows nothing of Metropolis.
A step of eps_k per coordinate is the leapfrog for unit masses in the rescaled
coordinates q_k / eps_k, so it stays reversible and volume preserving.
"""
import math

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
