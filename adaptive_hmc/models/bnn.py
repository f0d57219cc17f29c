"""A Bayesian MLP on a data set: spec + priors + training data, as a sampling
target (the kernels of :mod:`adaptive_hmc.models.base`'s interface).

Flow position: data -> **model** -> samplers. Ties together
:mod:`~adaptive_hmc.models.mlp` and :mod:`~adaptive_hmc.models.priors`.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import types
from numba.extending import overload

from ..tables import check_finite
from ..jit import njit
from .base import Model, TargetKernels
from .collapsed import Collapse, build_collapse, collapsed_energy_grad, collapsed_step_scales
from .mlp import (GAUSSIAN, LIKELIHOOD, N_OUT, MLPSpec, SparseInputs, ThreadScratch, Workspace, forward, mlp_data_energy,
                  mlp_energy_grad, mlp_step_scales, line_data_energy, line_setup, pad_cases, predict, sparse_inputs,
                  use_sparse)
from .predictive import accumulate
from .priors import (Hyper, Prior, PriorSpec, build_prior, gibbs_hyper, initial_hyper, log_precision_prior,
                     precisions, scale_directions)


def check_data(spec: MLPSpec, X, Y, name: str = "data"):
    """Validated float64 copies of X (N, n_in) and Y (N, n_targets); raises
    ValueError naming what is wrong (rows and columns counted from 0)."""
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim == 1:
        Y = Y[:, None]
    if X.ndim != 2 or X.shape[1] != spec.n_inputs:
        raise ValueError(f"{name}: inputs have shape {X.shape}; the network expects (N, {spec.n_inputs})")
    n_t = spec.n_outputs if spec.likelihood == "gaussian" else 1
    if Y.ndim != 2 or Y.shape != (X.shape[0], n_t):
        raise ValueError(f"{name}: targets have shape {Y.shape}; expected ({X.shape[0]}, {n_t}) "
                         f"for a {spec.likelihood} network with {spec.n_outputs} outputs")
    for what, arr in (("inputs", X), ("targets", Y)):
        problem = check_finite(arr, what, first_row=0)
        if problem:
            raise ValueError(f"{name}: {problem}")
    if spec.likelihood == "logistic" and not np.isin(Y, (0.0, 1.0)).all():
        raise ValueError(f"{name}: logistic targets must be 0 or 1")
    if spec.likelihood == "softmax" and not (np.isin(Y, np.arange(spec.n_outputs))).all():
        raise ValueError(f"{name}: softmax targets must be class indices 0..{spec.n_outputs - 1}")
    return X, Y


class MLPTarget(NamedTuple):
    """The posterior of an MLP's weights given hyperparameters, as arrays."""

    arch: np.ndarray    # (5 + n_layers,) int64, see models.mlp
    XT: np.ndarray      # (n_in, N padded) training inputs, cases along rows, in the hidden units' precision
    YT: np.ndarray      # (n_targets, N)
    work: Workspace     # scratch of the kernels
    prior: Prior
    sumsq: np.ndarray   # (n_in,) sum over training cases of each squared input
    sparse: SparseInputs | None  # the nonzero training inputs (None: the first layer reads XT)
    scale_dirs: np.ndarray | None  # (n, S) directions of the interweaving moves (priors.scale_directions; None: no
                                   # moves, whose code is then not even compiled)
    scratch: ThreadScratch | None  # the threads that share the blocks of cases (None: the calling thread alone)
    collapse: Collapse | None = None  # the precisions integrated out of the density (models.collapsed; None:
                                      # every precision explicit, the collapsed code not even compiled)


def _collapsed(t) -> bool:
    """Whether the target type ``t`` (numba's) integrates precisions out (its ``collapse`` not None)."""
    return not isinstance(t.types[t.fields.index("collapse")], types.NoneType)


def _energy(q, grad, t, hyper):
    """The network's energy and gradient: every precision explicit, or some integrated out (:mod:`collapsed`),
    chosen by the target's type (a function of its own, not inlined: see mlp.passes._likelihood_terms)."""


@overload(_energy)
def _energy_impl(q, grad, t, hyper):
    if _collapsed(t):
        return lambda q, grad, t, hyper: collapsed_energy_grad(q, grad, t, hyper)
    return lambda q, grad, t, hyper: mlp_energy_grad(q, grad, t.arch, t.XT, t.YT, hyper.prec, hyper.noise, t.work,
                                                     t.sparse, t.scratch)


def _scales(t, hyper, out):
    """The step scales at the explicit precisions (collapsed ones at their reference), by the target's type."""


@overload(_scales)
def _scales_impl(t, hyper, out):
    if _collapsed(t):
        return lambda t, hyper, out: collapsed_step_scales(t, hyper, out)
    return lambda t, hyper, out: mlp_step_scales(t.arch, hyper.prec, hyper.noise, t.sumsq, float(t.YT.shape[1]), out)


@njit(inline="always")
def _energy_grad(q, grad, t, hyper):
    return _energy(q, grad, t, hyper)


@njit(inline="always")
def _step_scales(t, hyper, out):
    return _scales(t, hyper, out)


#: Slice sampling of the interweaving moves (Neal 2003): initial width (in log weight scale: 1 is a
#: factor e), most intervals of stepping out, most shrinkage steps (then the move stays put).
SLICE_WIDTH, SLICE_STEPS, SLICE_SHRINKS = 1.0, 10, 60
#: Rounds of updates along every direction per call of :func:`scale_moves`.
SCALE_ROUNDS = 3


@njit(inner=True)
def _line_log_density(x, q, d, t, hyper, logtau, qn, factor, line, P, arow):
    """Log density, up to a constant, of the move x along direction ``d``
    (:func:`~adaptive_hmc.models.priors.scale_directions`) in non-centred
    coordinates (each weight's z-score fixed, so that its prior does not
    change): minus the data energy at the weights q_k exp(x d_s(k)) plus each
    free log precision's prior at log tau_s - 2 x d_s (the joint density, so
    that its value at a point reached along one direction is the start of the
    next); -inf where not finite. The data energy from the parts ``line``
    (:func:`~adaptive_hmc.models.mlp.line_setup`'s answer for q and d) where its
    kind is not 0, else by a forward pass at the moved weights."""
    prior = t.prior
    if line[0] != 0:
        lp = -line_data_energy(x, line, q, t.arch, t.XT, t.YT, hyper.noise, t.work, P, arow, t.scratch)
    else:
        for s in range(d.size):
            factor[s] = math.exp(x * d[s])
        for k in range(q.size):
            qn[k] = q[k] * factor[prior.param_slot[k]]
        lp = -mlp_data_energy(qn, t.arch, t.XT, t.YT, hyper.noise, t.work, t.sparse, t.scratch)
    for s in range(d.size):
        if math.isfinite(prior.slot_shape[s]):
            lp += log_precision_prior(prior, hyper.top, s, logtau[s] - 2.0 * x * d[s])
    return lp if math.isfinite(lp) else -math.inf


@njit(inner=True)
def _slice_update(f0, q, d, t, hyper, logtau, qn, factor, line, P, arow, rng):
    """One slice-sampling update along ``d`` from x = 0, where the log density is ``f0``: (the point x
    drawn, 0 where shrinkage gave up; the density there; the evaluations made)."""
    evaluations = 0
    y = f0 - rng.exponential()
    left = -SLICE_WIDTH * rng.random()
    right = left + SLICE_WIDTH
    j = int(SLICE_STEPS * rng.random())
    k = SLICE_STEPS - 1 - j
    while j > 0:
        evaluations += 1
        if _line_log_density(left, q, d, t, hyper, logtau, qn, factor, line, P, arow) <= y:
            break
        left -= SLICE_WIDTH
        j -= 1
    while k > 0:
        evaluations += 1
        if _line_log_density(right, q, d, t, hyper, logtau, qn, factor, line, P, arow) <= y:
            break
        right += SLICE_WIDTH
        k -= 1
    for _ in range(SLICE_SHRINKS):
        x1 = left + rng.random() * (right - left)
        evaluations += 1
        f1 = _line_log_density(x1, q, d, t, hyper, logtau, qn, factor, line, P, arow)
        if f1 > y:
            return x1, f1, evaluations          # the joint density there: the next direction's start
        if x1 < 0.0:
            left = x1
        else:
            right = x1
    return 0.0, f0, evaluations


@njit(inner=True)
def scale_moves(q, t, hyper, rng):
    """The interweaving moves: along each of ``t.scale_dirs`` in turn, one
    univariate slice-sampling update (stepping out at most
    :data:`SLICE_STEPS` intervals of :data:`SLICE_WIDTH`, then shrinkage;
    Neal 2003, figs 3 and 5) of the weights' scale and their precisions
    together, in place on ``q`` and ``hyper`` (whose ``prec`` is refreshed).
    Each update leaves the posterior invariant: it samples the posterior's
    conditional along a fixed line of the non-centred coordinates, where the
    map is volume-preserving. A network of one hidden layer on dense inputs
    evaluates each line from its pre-activations' parts, made once an update
    (:func:`~adaptive_hmc.models.mlp.line_setup`: a tanh a unit and case a
    point instead of a forward pass); others by forward passes. Returns the
    number of data-energy evaluations it made (each part-making and each
    point counted as one, though a point costs a fraction of a pass)."""
    n_dirs, S = t.scale_dirs.shape
    if n_dirs == 0:
        return 0
    logtau = np.log(hyper.tau)
    qn = np.empty_like(q)
    factor = np.empty(S)
    dw = np.empty_like(q)
    N, n_out = t.YT.shape[1], t.arch[N_OUT]
    P = np.empty((n_out, N))
    arow = np.empty(N, t.XT.dtype)
    none = (0, 0.0, 0.0, 0.0, 0.0)
    evaluations = 0
    f0, carried = 0.0, False        # the density at the current point, when a forward pass's (kind 0) value
    for r in range(n_dirs * SCALE_ROUNDS):
        d = t.scale_dirs[r % n_dirs]
        line = none
        if t.sparse is None:
            for k in range(q.size):
                dw[k] = d[t.prior.param_slot[k]]
            line = line_setup(q, dw, t.arch, t.XT, t.YT, t.work, P, arow, t.scratch)
            evaluations += int(line[0] != 0)
        if line[0] != 0 or not carried:
            evaluations += 1
            f0 = _line_log_density(0.0, q, d, t, hyper, logtau, qn, factor, line, P, arow)
        x, f0, made = _slice_update(f0, q, d, t, hyper, logtau, qn, factor, line, P, arow, rng)
        evaluations += made
        carried = line[0] == 0
        if x != 0.0:
            for s in range(S):
                factor[s] = math.exp(x * d[s])
                if d[s] != 0.0:
                    logtau[s] -= 2.0 * x * d[s]
                    hyper.tau[s] = math.exp(logtau[s])
            for k2 in range(q.size):
                q[k2] *= factor[t.prior.param_slot[k2]]
    precisions(t.prior, hyper.tau, hyper.prec)
    return evaluations


def _moves(q, t, hyper, rng):
    """:func:`scale_moves` where the target has directions (its scale_dirs an array); where it has none (None),
    no moves, compiled as nothing: a network with Gibbs updates alone compiles no slice moves."""


@overload(_moves, inline="always")
def _moves_impl(q, t, hyper, rng):
    if isinstance(t.types[t.fields.index("scale_dirs")], types.NoneType):
        return lambda q, t, hyper, rng: 0
    return lambda q, t, hyper, rng: scale_moves(q, t, hyper, rng)


@njit(inline="always")
def _gibbs(q, t, hyper, rng):
    out = forward(q, t.arch, t.XT, t.work, t.sparse, t.scratch) if t.arch[LIKELIHOOD] == GAUSSIAN else t.work.out[:0]
    gibbs_hyper(q, hyper, t.prior, t.arch, out, t.YT, rng)
    _moves(q, t, hyper, rng)


@njit(inline="always")
def _gibbs_energy_grad(q, grad, t, hyper, rng, moves):
    # The outputs are read by the noise's update only (a forward pass, counted as
    # an evaluation like the moves'): the gradient runs its own forward pass block
    # by block, since the activations of all cases are not kept.
    noise = t.arch[LIKELIHOOD] == GAUSSIAN
    out = forward(q, t.arch, t.XT, t.work, t.sparse, t.scratch) if noise else t.work.out[:0]
    gibbs_hyper(q, hyper, t.prior, t.arch, out, t.YT, rng)
    moved = _moves(q, t, hyper, rng) if moves else 0
    energy = _energy(q, grad, t, hyper)
    return energy, 1 + int(noise) + moved


@njit
def _hyper_values(hyper, out):
    S, T = hyper.tau.size, hyper.top.size
    for k in range(S):
        out[k] = hyper.tau[k]
    for k in range(T):
        out[S + k] = hyper.top[k]
    for k in range(hyper.noise.size):
        out[S + T + k] = hyper.noise[k]


@njit(inline="always")
def _accumulate(q, t, hyper, acc):
    accumulate(acc, forward(q, t.arch, acc.XT, acc.work, None, None), hyper.noise)


MLPTarget.kernels = TargetKernels(_energy_grad, _step_scales, _gibbs, _hyper_values, _accumulate, _gibbs_energy_grad)


class BayesianMLP(Model):
    """Posterior of an MLP's weights and hyperparameters on training data (X, Y).

    Y is (N, n_outputs) for regression, 0/1 labels for logistic, and class
    indices 0..K-1 for softmax. ``sparse``: run the first layer on the nonzero
    inputs (None: when X is wide and mostly zero, :func:`~adaptive_hmc.models.mlp.use_sparse`).
    ``arithmetic``: of the hidden units' arithmetic (:data:`~adaptive_hmc.models.mlp.ARITHMETIC`);
    with "float32" the target is the network computed so, a function of the
    weights as exact as the float64 one (the energy, the likelihood and the
    Metropolis test in float64 on both sides). ``threads``: how many threads
    share each energy and gradient's blocks of cases (the same numbers
    whatever their number; :class:`~adaptive_hmc.models.mlp.ThreadScratch`).
    """

    def __init__(self, spec: MLPSpec, X, Y, priors: PriorSpec = PriorSpec(), sparse: bool | None = None,
                 arithmetic: str = "float64", threads: int = 1):
        X, Y = check_data(spec, X, Y, "training data")
        self.spec, self.priors = spec, priors
        self.X, self.Y = X, Y
        self.prior, self.slot_names = build_prior(spec, priors)
        XT = pad_cases(X.T)
        work = spec.workspace(XT.shape[1], arithmetic)
        self.arithmetic = arithmetic
        self.sparse = use_sparse(X) if sparse is None else bool(sparse)
        nonzero = sparse_inputs(X) if self.sparse else None   # None: the sparse code is not even compiled
        self.target = MLPTarget(spec.arch, XT.astype(arithmetic), spec.target_rows(Y), work,
                                self.prior, np.ascontiguousarray((XT ** 2).sum(axis=1)), nonzero,
                                scale_directions(spec, self.prior) if priors.hyper_moves == "interweave" else None,
                                spec.thread_scratch(XT.shape[1], arithmetic, threads),
                                build_collapse(self.prior, X.shape[0], spec.likelihood == "gaussian")
                                if priors.collapse else None)
        self.n_cases = X.shape[0]
        self.dim = spec.n_params

    def initial_hyper(self, value=None) -> Hyper:
        """Hyperparameters at their prior means, or every free precision at ``value``."""
        return initial_hyper(self.prior, value)

    def hyper_names(self) -> list:
        T = self.prior.top_shape.size
        return (list(self.slot_names) + [f"ard_mean_{t}" for t in range(T)]
                + [f"noise_{o}" for o in range(self.spec.n_outputs)])

    def initial_position(self, rng=None, scale: float = 0.0) -> np.ndarray:
        """Zero weights (FBM's default start), or N(0, scale^2) weights when scale > 0."""
        if scale > 0:
            return scale * rng.standard_normal(self.dim)
        return np.zeros(self.dim)

    def predict(self, Q, X) -> np.ndarray:
        return predict(self.spec, Q, X)
