"""UCB acquisition and its maximisation by DIRECT (Wang thesis sections 3.1, 3.3).

Flow position: GP model -> **acquisition** -> bandit. UCB is a pure function of
(mean, std, beta); the optimiser is scipy.optimize.direct over the unit box,
optionally polished by L-BFGS-B.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import direct, minimize


def ucb_beta(t: int, dim: int, delta: float = 0.1) -> float:
    """beta_t = 2 log(t^(d/2 + 2) pi^2 / (3 delta)) (Srinivas et al.; thesis section 3.1).
    The thesis uses beta_{i+1} after i observations."""
    return 2.0 * math.log(t ** (dim / 2.0 + 2.0) * math.pi ** 2 / (3.0 * delta))


def ucb(mean, std, beta: float, p: float = 1.0):
    """u(a) = mu(a) + p * sqrt(beta) * sigma(a); p = p_i anneals the exploration
    term (thesis section 3.3: u-bar)."""
    return mean + p * math.sqrt(beta) * std


def maximize(fn, dim: int, maxfun: int = 1000, polish: bool = True):
    """Argmax of ``fn`` (a function of one point in [0, 1]^dim) by DIRECT with
    ``maxfun`` evaluations, then (``polish``) a bounded L-BFGS-B from its best
    point. Deterministic. Returns (x, fn(x))."""
    bounds = [(0.0, 1.0)] * dim
    res = direct(lambda x: -fn(x), bounds, maxfun=maxfun, locally_biased=True, len_tol=1e-4)
    x, val = np.clip(res.x, 0.0, 1.0), -res.fun
    if polish:
        loc = minimize(lambda z: -fn(z), x, method="L-BFGS-B", bounds=bounds,
                       options={"maxfun": 50 * dim})
        if -loc.fun > val:
            x, val = np.clip(loc.x, 0.0, 1.0), -loc.fun
    return x, float(val)
