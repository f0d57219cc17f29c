"""Calibration of the step scales to the curvature of the target.

Flow position: models -> **samplers** (called by the replicas between
super-transitions, never inside a transition).

FBM's heuristic step scales s_k come from the priors and the data, not from the
posterior's actual curvature: under broad fixed priors the stable step factors
are a tenth of what they are under Neal's hierarchical priors, so a factor
means something different on every model. Leapfrog with steps eps * s_k is
stable in a quadratic well only while eps * sqrt(lambda_max(S H S)) < 2 (S =
diag(s_k), H the Hessian of the potential energy); :func:`curvature_scale`
returns c = 1 / sqrt(lambda_max) at a state, so that steps eps * c * s_k put the
factor eps = 2 at that stability limit whatever the model.
"""
from __future__ import annotations

import math

import numpy as np


#: Power iterations of :func:`curvature_scale` by default.
CURVATURE_ITERATIONS = 30
#: Its gradient evaluations (at most): one at the state, two per iteration.
CURVATURE_EVALUATIONS = 1 + 2 * CURVATURE_ITERATIONS


def curvature_scale(model, q, hyper, iterations: int = CURVATURE_ITERATIONS, h: float = 1e-4) -> float:
    """1 / sqrt(lambda_max) of the scaled Hessian S H S of ``model``'s
    potential energy at (``q``, ``hyper``), by power iteration on central
    finite differences of the gradient (2 gradient evaluations an iteration).
    lambda_max is the eigenvalue of largest magnitude (a negative curvature
    is as unstable for leapfrog as a positive one). Deterministic: the
    iteration starts from the scaled gradient. Returns 1.0 where the
    curvature is zero or not finite (nothing to calibrate against)."""
    s = model.scales(hyper)
    q = np.asarray(q, dtype=np.float64)
    _, g = model.energy_grad(q, hyper)
    v = s * g
    if not np.all(np.isfinite(v)) or not np.any(v):
        v = np.ones_like(q)
    v /= np.linalg.norm(v)
    lam = 0.0
    for _ in range(iterations):
        _, gp = model.energy_grad(q + h * s * v, hyper)
        _, gm = model.energy_grad(q - h * s * v, hyper)
        w = s * (gp - gm) / (2 * h)
        lam = float(v @ w)
        norm = np.linalg.norm(w)
        if not math.isfinite(norm) or norm == 0:
            return 1.0
        v = w / norm
    lam = abs(lam)
    return 1.0 / math.sqrt(lam) if math.isfinite(lam) and lam > 0 else 1.0
