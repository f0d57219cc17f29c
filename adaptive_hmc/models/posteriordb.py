"""Eight posteriors of posteriordb (Magnusson, Bürkner & Vehtari), written as
user log densities: each a Numba function of the unconstrained position
returning (log density, gradient), its parameter names, and the maps between
the unconstrained coordinates and the reference draws' parameters. Their data,
reference summaries and a thinned fifth of the reference draws ship with the
package (``datasets/posteriordb``, see its PROVENANCE.md); the mathematics of
each is its folder's MODEL.md there.

Flow position: **models** (examples of :class:`~adaptive_hmc.models.density.LogDensity`
functions; the posteriordb experiment and the tests sample them).
"""
from __future__ import annotations

import numpy as np

from ..jit import njit

from .posteriordb_data import NAMES, Posterior, _columns, _log_last, _names, load, reference  # noqa: F401 (the API)


def eight_schools(centered: bool) -> Posterior:
    d = load("eight_schools_noncentered")
    y, sigma = d["data/y"].astype(float), d["data/sigma"].astype(float)
    J = y.size
    inv_var = 1.0 / sigma ** 2

    @njit
    def logp_grad_nc(q):
        tt, mu, v = q[:J], q[J], q[J + 1]
        tau = np.exp(v)
        g = np.empty(J + 2)
        lp, gmu, gv = 0.0, 0.0, 0.0
        for j in range(J):
            theta = mu + tau * tt[j]
            r = (y[j] - theta) * inv_var[j]
            lp += -0.5 * tt[j] * tt[j] - 0.5 * (y[j] - theta) * r
            g[j] = -tt[j] + r * tau
            gmu += r
            gv += r * tau * tt[j]
        x2 = tau * tau
        lp += -mu * mu / 50.0 - np.log1p(x2 / 25.0) + v
        g[J] = gmu - mu / 25.0
        g[J + 1] = gv - 2.0 * (x2 / 25.0) / (1.0 + x2 / 25.0) + 1.0
        return lp, g

    @njit
    def logp_grad_c(q):
        th, mu, v = q[:J], q[J], q[J + 1]
        x2 = np.exp(2.0 * v)
        g = np.empty(J + 2)
        lp, gmu, ss = 0.0, 0.0, 0.0
        for j in range(J):
            dev = th[j] - mu
            r = (y[j] - th[j]) * inv_var[j]
            lp += -v - 0.5 * dev * dev / x2 - 0.5 * (y[j] - th[j]) * r
            g[j] = -dev / x2 + r
            gmu += dev / x2
            ss += dev * dev
        lp += -mu * mu / 50.0 - np.log1p(x2 / 25.0) + v
        g[J] = gmu - mu / 25.0
        g[J + 1] = -J + ss / x2 - 2.0 * (x2 / 25.0) / (1.0 + x2 / 25.0) + 1.0
        return lp, g

    names = _names("theta", J) + ["mu", "tau"]

    def constrain(Q):
        Q = np.atleast_2d(Q)
        tau = np.exp(Q[:, J + 1])
        theta = Q[:, :J] if centered else Q[:, J:J + 1] + tau[:, None] * Q[:, :J]
        return _columns(np.column_stack([theta, Q[:, J], tau]), names)

    def unconstrain(draws):
        mu, tau = draws["mu"], draws["tau"]
        theta = np.column_stack([draws[n] for n in names[:J]])
        first = theta if centered else (theta - mu[:, None]) / tau[:, None]
        return np.column_stack([first, mu, np.log(tau)])

    return Posterior("eight_schools_centered" if centered else "eight_schools_noncentered", J + 2,
                     logp_grad_c if centered else logp_grad_nc, constrain, unconstrain, tuple(names))


def ark() -> Posterior:
    d = load("arK")
    y, K = d["data/y"].astype(float), int(d["data/K"])
    T = y.size
    n = T - K

    @njit
    def logp_grad(q):
        alpha, beta, s = q[0], q[1:K + 1], q[K + 1]
        x2 = np.exp(2.0 * s)
        g = np.zeros(K + 2)
        ss = 0.0
        for t in range(K, T):
            mean = alpha
            for k in range(K):
                mean += beta[k] * y[t - k - 1]
            r = y[t] - mean
            ss += r * r
            g[0] += r
            for k in range(K):
                g[1 + k] += r * y[t - k - 1]
        lp = -alpha * alpha / 200.0 - np.log1p(x2 / 6.25) + s - n * s - 0.5 * ss / x2
        for k in range(K):
            lp -= beta[k] * beta[k] / 200.0
            g[1 + k] = g[1 + k] / x2 - beta[k] / 100.0
        g[0] = g[0] / x2 - alpha / 100.0
        g[K + 1] = -2.0 * (x2 / 6.25) / (1.0 + x2 / 6.25) + 1.0 - n + ss / x2
        return lp, g

    names = ["alpha"] + _names("beta", K) + ["sigma"]
    return Posterior("arK", K + 2, logp_grad, *_log_last(names), tuple(names))


def garch11() -> Posterior:
    d = load("garch11")
    y, s1 = d["data/y"].astype(float), float(d["data/sigma1"])
    T = y.size

    @njit
    def logp_grad(q):
        mu, u2, u3, u4 = q[0], q[1], q[2], q[3]
        a0 = np.exp(u2)
        l3 = 1.0 / (1.0 + np.exp(-u3))
        l4 = 1.0 / (1.0 + np.exp(-u4))
        a1 = l3
        b1 = (1.0 - a1) * l4
        s2 = s1 * s1                       # sigma_t^2 and its derivatives in (mu, a0, a1, b1)
        d_mu = d_a0 = d_a1 = d_b1 = 0.0
        lp = 0.0
        g_mu = g_a0 = g_a1 = g_b1 = 0.0
        for t in range(T):
            if t > 0:
                e = y[t - 1] - mu
                n_mu = -2.0 * a1 * e + b1 * d_mu
                n_a0 = 1.0 + b1 * d_a0
                n_a1 = e * e + b1 * d_a1
                n_b1 = s2 + b1 * d_b1
                s2 = a0 + a1 * e * e + b1 * s2
                d_mu, d_a0, d_a1, d_b1 = n_mu, n_a0, n_a1, n_b1
            r = y[t] - mu
            lp += -0.5 * np.log(s2) - 0.5 * r * r / s2
            ds = -0.5 / s2 + 0.5 * r * r / (s2 * s2)
            g_mu += r / s2 + ds * d_mu
            g_a0 += ds * d_a0
            g_a1 += ds * d_a1
            g_b1 += ds * d_b1
        lp += u2 + np.log(l3) + np.log1p(-l3) + np.log1p(-a1) + np.log(l4) + np.log1p(-l4)
        g = np.empty(4)
        g[0] = g_mu
        g[1] = g_a0 * a0 + 1.0
        g[2] = (g_a1 - g_b1 * l4) * a1 * (1.0 - a1) + 1.0 - 3.0 * l3
        g[3] = g_b1 * (1.0 - a1) * l4 * (1.0 - l4) + 1.0 - 2.0 * l4
        return lp, g

    names = ["mu", "alpha0", "alpha1", "beta1"]

    def constrain(Q):
        Q = np.atleast_2d(Q)
        a1 = 1.0 / (1.0 + np.exp(-Q[:, 2]))
        return _columns(np.column_stack([Q[:, 0], np.exp(Q[:, 1]), a1, (1 - a1) / (1.0 + np.exp(-Q[:, 3]))]), names)

    def unconstrain(draws):
        a1 = draws["alpha1"]
        logit = lambda p: np.log(p) - np.log1p(-p)                      # noqa: E731
        return np.column_stack([draws["mu"], np.log(draws["alpha0"]), logit(a1), logit(draws["beta1"] / (1 - a1))])

    return Posterior("garch11", 4, logp_grad, constrain, unconstrain, tuple(names))


def _regression(name: str, Z, target, prior_sd: float | None, sigma_prior_sd: float | None, flat_sigma: bool,
                names: list) -> Posterior:
    """Linear regression target ~ Normal(Z beta, sigma) over (beta, log sigma):
    beta ~ Normal(0, prior_sd) (None: flat), sigma ~ half-Normal(0,
    sigma_prior_sd) (None: flat in sigma)."""
    Z, target = np.ascontiguousarray(Z, dtype=float), np.ascontiguousarray(target, dtype=float)
    N, P = Z.shape
    G, b, yy = Z.T @ Z, Z.T @ target, float(target @ target)
    prec = 0.0 if prior_sd is None else 1.0 / prior_sd ** 2
    sprec = 0.0 if sigma_prior_sd is None else 1.0 / sigma_prior_sd ** 2

    @njit
    def logp_grad(q):
        beta, s = q[:P], q[P]
        x2 = np.exp(2.0 * s)
        Gb = G @ beta
        ss = yy - 2.0 * (b @ beta) + beta @ Gb            # ||target - Z beta||^2
        g = np.empty(P + 1)
        for k in range(P):
            g[k] = (b[k] - Gb[k]) / x2 - prec * beta[k]
        lp = -0.5 * prec * (beta @ beta) - 0.5 * sprec * x2 + s - N * s - 0.5 * ss / x2
        g[P] = -sprec * x2 + 1.0 - N + ss / x2
        return lp, g

    return Posterior(name, P + 1, logp_grad, *_log_last(names), tuple(names))


def logmesquite() -> Posterior:
    d = load("logmesquite")
    cols = [np.ones(int(d["data/N"]))] + [np.log(d[f"data/{k}"]) for k in
                                          ("diam1", "diam2", "canopy_height", "total_height", "density")]
    Z = np.column_stack(cols + [d["data/group"]])
    return _regression("logmesquite", Z, np.log(d["data/weight"]), None, None, True, _names("beta", 7) + ["sigma"])


def blr() -> Posterior:
    d = load("blr")
    return _regression("blr", d["data/X"], d["data/y"], 10.0, 10.0, False, _names("beta", 5) + ["sigma"])


@njit
def _gp_factor(a, c, L, K0, D2):
    """L = chol(K), K = alpha^2 exp(-D2 / (2 rho^2)) + 1e-10 I (rho = exp(a), alpha = exp(c)); K0 = K without
    the jitter. False when K is not positive definite in floating point."""
    N = D2.shape[0]
    rho2, alpha2 = np.exp(2.0 * a), np.exp(2.0 * c)
    for i in range(N):
        for j in range(N):
            K0[i, j] = alpha2 * np.exp(-0.5 * D2[i, j] / rho2)
    for j in range(N):
        s = K0[j, j] + 1e-10
        for m in range(j):
            s -= L[j, m] * L[j, m]
        if not s > 0.0:
            return False
        L[j, j] = np.sqrt(s)
        for i in range(j + 1, N):
            t = K0[i, j]
            for m in range(j):
                t -= L[i, m] * L[j, m]
            L[i, j] = t / L[j, j]
        for i in range(j):
            L[i, j] = 0.0
    return True


@njit
def _lower_solve(L, B, out):
    """out = L^-1 B for lower-triangular L, column by column."""
    N = L.shape[0]
    for col in range(N):
        for i in range(N):
            t = B[i, col]
            for m in range(i):
                t -= L[i, m] * out[m, col]
            out[i, col] = t / L[i, i]


def gp_pois_regr() -> Posterior:
    d = load("gp_pois_regr")
    x, k = d["data/x"].astype(float), d["data/k"].astype(float)
    N = x.size
    D2 = (x[:, None] - x[None, :]) ** 2

    @njit
    def logp_grad(q):
        a, c, ft = q[0], q[1], q[2:]
        L, K0 = np.empty((N, N)), np.empty((N, N))
        g = np.empty(N + 2)
        if not _gp_factor(a, c, L, K0, D2):
            return np.nan, g
        f = L @ ft
        w = k - np.exp(f)
        La = L.T @ w                                     # d lp / d ft, before the prior's -ft
        g[2:] = La - ft
        lp = 25.0 * a - 4.0 * np.exp(a) - np.exp(2.0 * c) / 8.0 + c - 0.5 * (ft @ ft) + (k @ f) - np.exp(f).sum()
        # d lp / d theta through L: dL = L Phi(M), M = L^-1 dK L^-T, Phi the lower triangle with half its
        # diagonal, so d lp / d theta = w^T dL ft = (L^T w)^T Phi(M) ft.
        A, M, dK = np.empty((N, N)), np.empty((N, N)), np.empty((N, N))
        rho2 = np.exp(2.0 * a)
        for j in range(2):
            for r in range(N):
                for s in range(N):
                    dK[r, s] = K0[r, s] * D2[r, s] / rho2 if j == 0 else 2.0 * K0[r, s]
            _lower_solve(L, dK, A)                       # L^-1 dK
            _lower_solve(L, A.T.copy(), M)               # L^-1 (L^-1 dK)^T = L^-1 dK L^-T
            t = 0.0
            for r in range(N):
                t += La[r] * 0.5 * M[r, r] * ft[r]
                for s in range(r):
                    t += La[r] * M[r, s] * ft[s]
            g[j] = t
        g[0] += 25.0 - 4.0 * np.exp(a)
        g[1] += 1.0 - np.exp(2.0 * c) / 4.0
        return lp, g

    def chol(q):
        L, K0 = np.empty((N, N)), np.empty((N, N))
        _gp_factor(q[0], q[1], L, K0, D2)
        return L

    names = ["rho", "alpha"] + _names("f", N)

    def constrain(Q):
        Q = np.atleast_2d(Q)
        F = np.array([chol(q) @ q[2:] for q in Q]).reshape(-1, N)
        return _columns(np.column_stack([np.exp(Q[:, :2]), F]), names)

    def unconstrain(draws):
        rho, alpha = draws["rho"], draws["alpha"]
        F = np.column_stack([draws[n] for n in names[2:]])
        FT = np.array([np.linalg.solve(chol(np.array([np.log(r), np.log(al)])), f)
                       for r, al, f in zip(rho, alpha, F)])
        return np.column_stack([np.log(rho), np.log(alpha), FT])

    return Posterior("gp_pois_regr", N + 2, logp_grad, constrain, unconstrain, tuple(names))


def diamonds() -> Posterior:
    d = load("diamonds")
    X, Y = d["data/X"].astype(float), d["data/Y"].astype(float)
    Xc = X[:, 1:] - X[:, 1:].mean(axis=0)
    N, P = Xc.shape
    ybar = Y.mean()
    Yc = Y - ybar
    G, b, yy = Xc.T @ Xc, Xc.T @ Yc, float(Yc @ Yc)

    @njit
    def logp_grad(q):
        beta, icpt, s = q[:P], q[P], q[P + 1]
        x2 = np.exp(2.0 * s)
        Gb = G @ beta
        m = icpt - ybar
        ss = yy - 2.0 * (b @ beta) + beta @ Gb + N * m * m
        u = (icpt - 8.0) * (icpt - 8.0) / 300.0     # a product, not ** 2 (see samplers.hmc.squared_distance)
        lp = -0.5 * (beta @ beta) - 2.0 * np.log1p(u) - 2.0 * np.log1p(x2 / 300.0) + s - N * s - 0.5 * ss / x2
        g = np.empty(P + 2)
        for k in range(P):
            g[k] = -beta[k] + (b[k] - Gb[k]) / x2
        g[P] = -2.0 * (2.0 * (icpt - 8.0) / 300.0) / (1.0 + u) - N * m / x2
        g[P + 1] = -2.0 * (2.0 * x2 / 300.0) / (1.0 + x2 / 300.0) + 1.0 - N + ss / x2
        return lp, g

    names = _names("b", P) + ["Intercept", "sigma"]
    return Posterior("diamonds", P + 2, logp_grad, *_log_last(names), tuple(names))


_BUILD = {"eight_schools_noncentered": lambda: eight_schools(False), "eight_schools_centered": lambda: eight_schools(True),
          "arK": ark, "garch11": garch11, "logmesquite": logmesquite, "blr": blr, "gp_pois_regr": gp_pois_regr,
          "diamonds": diamonds}


def posterior(name: str) -> Posterior:
    """Posterior ``name`` (one of :data:`NAMES`)."""
    if name not in _BUILD:
        raise ValueError(f"posterior {name!r}: allowed are {', '.join(NAMES)}")
    return _BUILD[name]()
