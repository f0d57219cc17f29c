"""ArviZ InferenceData of a network's kept samples: the one conversion that
``adaptive-hmc export`` (of a run directory) and the estimators'
``to_inference_data()`` (of a fit) both use. Its groups:

- posterior: ``weights`` (weight) and the log of every hyperparameter
  that varies (a fixed one, whose R-hat would be NaN, is named with its
  value in the attribute ``constant`` instead);
- log_likelihood: ``y`` (case), log p(y_case | draw) of the **training**
  cases (outputs summed), what ``az.loo`` and ``az.waic`` need;
- observed_data / constant_data: the training targets ``y`` and inputs ``x``;
- posterior_predictive: ``y`` (case), a replicated target per draw and
  training case (Gaussian noise added, or a label drawn), for ``az.plot_ppc``;
- predictions (with ``tests``): ``y_hat`` (case, output or class), the
  network's outputs (regression, original units) or class probabilities at
  the test inputs (for classification also the outputs, ``logit``: the
  quantity of summary.json's R-hat and ESS, which saturated probabilities
  would leave undefined), and ``y`` a replicated target per draw;
  predictions_constant_data: the test inputs ``x`` and targets ``y_test``;
- sample_stats, in ArviZ's names, per draw: ``energy`` (the Hamiltonian
  U + K of the draw's iteration, so that ``az.bfmi`` and
  ``az.plot_energy`` read it as Stan's ``energy__``; E-BFMI of these
  draws, a sixteenth of a super-transition apart), ``lp`` (-U), ``acceptance_rate``,
  ``diverging``, ``n_steps`` (leapfrog steps), ``step_size`` (the
  super-transition's step factor: each weight's step is it times the
  weight's scale); and the package's ``super_transition`` and
  ``sample_weight``, the draw's weight in the run's averages
  (``weight_by``: 1, or its iteration's leapfrog steps; ArviZ's summaries
  treat draws as equal, so with unequal weights they describe the kept
  draws, not the run's weighted average). A run written before these were
  recorded has ``diverging`` (any divergence in the draw's
  super-transition) and ``step_size`` only.

Flow position: posterior, metrics -> **inference** -> export, estimators.
"""
from __future__ import annotations

import re
import warnings

import numpy as np

from ..diagnostics import arviz
from ..models.predictive import class_probabilities, pointwise_log_likelihood
from .metrics import draw_indices, evenly_spaced


#: The file's ``chains`` attribute: chains of one posterior (True) or cross-validation replicas (False).
CHAINS = {True: "chains of one posterior, every one on all the training cases: R-hat across them measures "
                "convergence",
          False: "cross-validation replicas, each without its fold's cases: different posteriors, so R-hat across "
                 "them does not measure convergence, and there is no log_likelihood group (leave-one-out needs the "
                 "posterior of every training case)"}


def _at(post, rng, X, Y) -> tuple:
    """(mean outputs or class probabilities, replicated targets (from ``rng``), log likelihood, outputs) of each
    draw of ``post`` at inputs ``X`` (the network's units), targets ``Y``."""
    lik = post.likelihood
    F, tau = post.outputs_at(X)                   # original units
    if lik == "gaussian":
        return F, F + rng.standard_normal(F.shape) / np.sqrt(tau[:, None, :]), \
            pointwise_log_likelihood(F, tau, Y, lik), F
    p = class_probabilities(F, lik)
    draw = (np.cumsum(p, axis=-1) < rng.uniform(size=p.shape[:-1])[..., None]).sum(axis=-1)
    return p, np.minimum(draw, p.shape[-1] - 1), pointwise_log_likelihood(F, tau, Y, lik), F


def _targets(Y, lik: str):
    return Y if lik == "gaussian" else Y[:, 0].astype(int)


def _sample_stats(kept: dict, pick, chains: list, n: int, log: list) -> dict:
    """The sample_stats of the draws ``pick`` (rows of ``kept``, ``n`` a chain of ``chains``), in ArviZ's names."""
    st = kept["super_transition"][pick]
    by_index = {e["i"]: e for e in log}
    stat = {"step_size": np.array([by_index[i]["step_factor"] for i in st]),
            "super_transition": st, "sample_weight": kept["weight"][pick]}
    if "energy" in kept and np.isfinite(kept["energy"][pick]).all():
        stat.update({k: kept[k][pick] for k in ("energy", "lp", "acceptance_rate", "n_steps")},
                    diverging=kept["diverging"][pick] > 0)
    else:                                     # a run from before the draws' statistics were kept
        chain_of = np.repeat(chains, n)
        stat["diverging"] = np.array([by_index[i]["chain_divergences"][c] > 0 for i, c in zip(st, chain_of)])
    return stat


def _add_tests(idata, tests: tuple, simulated: tuple, roles: list, shaped, lik: str) -> None:
    """The test cases' predictions and predictions_constant_data groups (their own "case" coordinate)."""
    az = arviz()
    X_test, Y_test, case_names = tests
    y_hat, y_test_rep, _, F = simulated
    out_dim = ["output"] if lik == "gaussian" else []
    coords = {"chain": roles, "case": case_names}
    dims = {"y_hat": ["case", "output" if lik == "gaussian" else "class"], "y": ["case"] + out_dim,
            "x": ["case", "input"], "y_test": ["case"] + out_dim, "logit": ["case", "output"]}
    groups = {"y_hat": shaped(y_hat), "y": shaped(y_test_rep)}
    if lik != "gaussian":             # the network's outputs: the quantity of summary.json's R-hat
        groups["logit"] = shaped(F)
    idata.add_groups(predictions=az.dict_to_dataset(groups, coords=coords, dims=dims),
                     predictions_constant_data=az.dict_to_dataset({"x": X_test, "y_test": _targets(Y_test, lik)},
                                                                  coords=coords, dims=dims, default_dims=[]))


def inference_data(post, kept: dict, chains: list, roles: list, hyper_names, X, Y, log: list, seed: int,
                   tests=None, posterior: bool = True, attrs: dict | None = None, max_draws: int | None = None):
    """ArviZ InferenceData of the kept samples of ``chains`` (rows of the
    chains' arrays, ArviZ chains named ``roles``): ``post``, a
    :class:`~adaptive_hmc.rundir.posterior.Posterior` of every row of ``kept``
    (samples.npz's arrays, :func:`~adaptive_hmc.rundir.metrics.kept_samples`),
    at :func:`~adaptive_hmc.rundir.metrics.draw_indices`: each chain's
    diagnostic draws (the kept samples evenly spaced in every
    super-transition, whatever ``thin``), cut to the shortest chain's number,
    so the draws are rectangular: the very draws of summary.json's R-hat, ESS
    and E-BFMI; the training inputs ``X`` (the network's units) and
    targets ``Y`` (original units; class codes), the run's ``log`` (one entry a
    super-transition), the run's ``seed`` (the replicated targets' stream),
    ``tests`` (X, Y, case names) or None, whether the chains are of the
    ``posterior`` (else fold replicas) and more ``attrs``; at most
    ``max_draws`` a chain (None: every one), evenly spaced, the same draws in
    every group, the attrs ``draws_in_run`` and ``draws`` saying how many: the
    groups of the module's docstring.
    """
    az = arviz()
    idx = draw_indices(kept, chains, None)   # every diagnostic draw; the default max_draws picks summary.json's
    in_run = idx.shape[1]
    idx = idx[:, evenly_spaced(in_run, max_draws)]
    n, pick = idx.shape[1], idx.ravel()                                                  # chain-major
    W = kept["weights"][pick]
    R, lik = len(chains), post.likelihood
    mine = post._replace(weights=post.weights[pick], noise=post.noise[pick], sample_weight=post.sample_weight[pick])
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 20]))   # replicated targets

    def shaped(a):
        return a.reshape(R, n, *a.shape[1:])

    _, y_rep, loglik, _ = _at(mine, rng, X, Y)
    out_dim = ["output"] if lik == "gaussian" else []
    names = [re.sub(r"\W+", "_", str(v)).strip("_") for v in hyper_names]
    stat = _sample_stats(kept, pick, chains, n, log)
    logs = np.log(kept["hyper"][pick])
    varying = np.ptp(logs, axis=0) > 0 if len(logs) else np.zeros(len(names), bool)
    constant = "; ".join(f"log_{v} = {logs[0, i]:.6g}" for i, v in enumerate(names) if not varying[i])
    groups = {"posterior": {"weights": shaped(W),
                            **{f"log_{v}": shaped(logs[:, i]) for i, v in enumerate(names) if varying[i]}},
              "posterior_predictive": {"y": shaped(y_rep)}, "observed_data": {"y": _targets(Y, lik)},
              "constant_data": {"x": X}, "sample_stats": {k: shaped(v) for k, v in stat.items()}}
    if posterior:
        groups["log_likelihood"] = {"y": shaped(loglik)}
    with warnings.catch_warnings():         # "more chains than draws" when a run is short
        warnings.simplefilter("ignore", UserWarning)
        idata = az.from_dict(
            **groups,
            coords={"chain": roles, "case": np.arange(len(X)), "weight": [f"w{k}" for k in range(W.shape[1])]},
            dims={"weights": ["weight"], "y": ["case"] + out_dim, "x": ["case", "input"]},
            attrs={**(attrs or {}), "likelihood": lik,
                   "chains": CHAINS[posterior],
                   "note": f"{(attrs or {}).get('note', 'posterior: the kept samples')}, {n} per chain: the "
                           f"draws of summary.json's R-hat, ESS and E-BFMI",
                   "constant": constant or "none", "draws_in_run": in_run, "draws": n})
        if tests is not None:              # the test cases: a group pair of their own ("case" is theirs there)
            _add_tests(idata, tests, _at(mine, rng, *tests[:2]), roles, shaped, lik)
    return idata
