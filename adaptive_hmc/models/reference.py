"""Plain NumPy reference of the MLP energy and gradient (vectorised over cases).

Flow position: beside the model. Obviously-correct code that the compiled kernels
are tested against, and the baseline the speed benchmark compares with.
"""
import numpy as np

from .mlp import MLPSpec


def energy_grad(spec: MLPSpec, q, X, Y, prec, noise):
    """U(q) and dU/dq as in :func:`adaptive_hmc.models.mlp.mlp_energy_grad`, with
    X (N, n_in) and Y (N, n_out) (class index in column 0 for softmax)."""
    p = spec.unpack(q)
    L = len(spec.hidden)
    acts, a = [], X
    for l in range(1, L + 1):
        W = p["input_hidden"] if l == 1 else p[f"hidden_hidden_{l - 1}_{l}"]
        b = p["hidden_bias"] if L == 1 else p[f"hidden_bias_{l}"]
        a = np.tanh(a @ W + b)
        acts.append(a)
    f = a @ p["hidden_output"] + p["output_bias"]
    if spec.direct:
        f = f + X @ p["input_output"]
    if spec.likelihood == "gaussian":
        r = f - Y
        e = 0.5 * np.sum(noise * r ** 2)
        d = noise * r
    elif spec.likelihood == "logistic":
        y = Y[:, :1]
        e = np.sum(np.logaddexp(0.0, f) - y * f)
        d = 1.0 / (1.0 + np.exp(-f)) - y
    else:
        c = Y[:, 0].astype(int)
        m = f.max(axis=1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(f - m).sum(axis=1))
        e = np.sum(lse - f[np.arange(len(c)), c])
        d = np.exp(f - lse[:, None])
        d[np.arange(len(c)), c] -= 1.0
    e += 0.5 * np.sum(prec * q ** 2)
    g = {"hidden_output": acts[-1].T @ d, "output_bias": d.sum(0)}
    if spec.direct:
        g["input_output"] = X.T @ d
    delta = (d @ p["hidden_output"].T) * (1 - acts[-1] ** 2)
    for l in range(L, 0, -1):
        src = X if l == 1 else acts[l - 2]
        wname = "input_hidden" if l == 1 else f"hidden_hidden_{l - 1}_{l}"
        g[wname] = src.T @ delta
        g["hidden_bias" if L == 1 else f"hidden_bias_{l}"] = delta.sum(0)
        if l > 1:
            delta = (delta @ p[wname].T) * (1 - acts[l - 2] ** 2)
    grad = np.concatenate([g[gr.name].ravel() for gr in spec.groups]) + prec * q
    return e, grad
