"""Eight schools (Rubin 1981), non-centred: a user's log density for
configs/eight_schools_density.yaml. q = (theta_tilde[8], mu, log tau);
theta = mu + tau theta_tilde; mu ~ N(0, 5), tau ~ half-Cauchy(0, 5)."""
import numba
import numpy as np

Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


@numba.njit
def logp_grad(q):
    tt, mu, v = q[:8], q[8], q[9]
    tau = np.exp(v)
    r = (Y - mu - tau * tt) / SIGMA ** 2
    lp = -0.5 * np.sum(tt * tt) - 0.5 * np.sum(r * (Y - mu - tau * tt)) - mu * mu / 50 - np.log1p(tau * tau / 25) + v
    g = np.empty(10)
    g[:8] = -tt + tau * r
    g[8] = np.sum(r) - mu / 25
    g[9] = tau * np.sum(r * tt) - 2 * (tau * tau / 25) / (1 + tau * tau / 25) + 1
    return lp, g


def constrain(Q):
    """Draws (n, 10) as theta (n, 8), mu and tau."""
    tau = np.exp(Q[:, 9])
    return {"theta": Q[:, 8:9] + tau[:, None] * Q[:, :8], "mu": Q[:, 8], "tau": tau}
