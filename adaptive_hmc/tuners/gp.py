"""Gaussian-process reward model over the (unit-scaled) action box.

Flow position: reward -> **tuner** (GP model) -> acquisition. Built on
scikit-learn's GaussianProcessRegressor (fitting, optional marginal-likelihood
fit of the kernel, Cholesky factor); prediction reuses the fitted factor with a
lean NumPy formula and LAPACK's triangular solves called directly, and at one
point (:meth:`GPRewardModel.point`, what the acquisition optimiser calls a
thousand times per move) with a compiled loop of the same formula.

Kernel (Wang thesis section 3.1 and footnote 2): squared-exponential ARD,
k(a, a') = c exp(-1/2 sum_d ((a_d - a'_d) / l_d)^2), with actions scaled to
[0, 1] per dimension so that l_d = alpha (alpha = 0.2) is alpha x (upper - lower)
in the original units; c = 1 on standardised rewards. Repeated actions are
aggregated: an action tried m times enters once with its mean reward and noise
variance sigma_eta^2 / m, so the fit never meets a singular matrix and its cost
grows with the number of DISTINCT actions only.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.linalg import lapack
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel

from ..jit import njit


@njit
def gp_at(x, X, alpha, L, c, ls):
    """(mean, sd) of the GP at one point ``x`` (d,): k_i = c exp(-|x/ls - X_i|^2 / 2)
    for the scaled training points X (n, d), mean = k . alpha, var = c - |L^-1 k|^2
    with L the Cholesky factor of the training covariance (forward substitution)."""
    n, d = X.shape
    k = np.empty(n)
    for i in range(n):
        s = 0.0
        for j in range(d):
            t = x[j] / ls[j] - X[i, j]
            s += t * t
        k[i] = c * math.exp(-0.5 * s)
    mean = 0.0
    for i in range(n):
        mean += k[i] * alpha[i]
    v = np.empty(n)
    q = 0.0
    for i in range(n):
        s = k[i]
        for j in range(i):
            s -= L[i, j] * v[j]
        v[i] = s / L[i, i]
        q += v[i] * v[i]
    return mean, math.sqrt(max(c - q, 0.0))


class GPRewardModel:
    """GP over actions in [0, 1]^d; ``fit(X, y, noise_var)`` then
    ``predict(X, return_std=True)`` (any object with these two methods can stand
    in), and ``point(x)``, the mean and sd at one point."""

    def __init__(self, dim: int, length_scale=0.2, fit_kernel: bool = False):
        self.dim = dim
        self.length_scale = length_scale            # one for every dimension, or one per dimension
        self.fit_kernel = fit_kernel
        self.gp = None

    def fit(self, X, y, noise_var):
        ls_bounds = (1e-2, 1e1) if self.fit_kernel else "fixed"
        c_bounds = (1e-2, 1e2) if self.fit_kernel else "fixed"
        kernel = ConstantKernel(1.0, c_bounds) * RBF(np.broadcast_to(self.length_scale, (self.dim,)).tolist(),
                                                     ls_bounds)
        self.gp = GaussianProcessRegressor(kernel, alpha=np.asarray(noise_var) + 1e-10,
                                           optimizer="fmin_l_bfgs_b" if self.fit_kernel else None)
        self.gp.fit(np.asarray(X, float), np.asarray(y, float))
        k = self.gp.kernel_
        self._c = float(k.k1.constant_value)
        self._ls = np.broadcast_to(np.asarray(k.k2.length_scale, float), (self.dim,)).copy()
        self._X = self.gp.X_train_ / self._ls
        self._alpha = np.ascontiguousarray(self.gp.alpha_, dtype=float).ravel()
        self._L = np.ascontiguousarray(self.gp.L_, dtype=float)
        return self

    def point(self, x) -> tuple:
        """(mean, sd of the latent reward) at one action x (d,) in [0, 1]^d: :meth:`predict`
        of one point, compiled (the acquisition optimiser's call)."""
        return gp_at(np.asarray(x, dtype=float), self._X, self._alpha, self._L, self._c, self._ls)

    def predict(self, X, return_std=False):
        """Posterior mean (and sd of the latent reward) at actions X (n, d) in [0, 1]^d."""
        Z = np.atleast_2d(np.asarray(X, float)) / self._ls
        d2 = (Z * Z).sum(1)[:, None] + (self._X * self._X).sum(1)[None, :] - 2.0 * Z @ self._X.T
        K = self._c * np.exp(-0.5 * np.maximum(d2, 0.0))
        mean = K @ self.gp.alpha_
        if not return_std:
            return mean
        v, _ = lapack.dpotrs(self.gp.L_, K.T, lower=1)     # cho_solve's LAPACK call without its checks
        var = self._c - np.einsum("ij,ji->i", K, v)
        return mean, np.sqrt(np.maximum(var, 0.0))
