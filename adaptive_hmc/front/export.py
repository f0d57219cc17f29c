"""What a finished run gives out: its predictions at new inputs (the
``predict`` table) and ArviZ InferenceData of its posterior (``export``).

Flow position: results -> **export**. Reads runs through
:func:`~adaptive_hmc.rundir.finished_run.read_run` only; never samples.
"""
from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import norm

from ..diagnostics import arviz
from ..models.predictive import class_probabilities, pointwise_log_likelihood
from ..rundir.finished_run import Run, read_run
from ..rundir.results import POSTERIOR, RunError, is_density_run
from ..rundir.store import atomic_write


def prediction_table(run: Run, X, chains: str | None = None, level: float = 0.95) -> tuple:
    """(column names, values (N, columns)) of the predictions of ``run`` at inputs
    X: for regression the predictive mean, sd (noise included) and central
    ``level`` interval of the Gaussian with that mean and sd, per output, named
    after the target (``price_mean``) when the training table had a header,
    else by position (``mean_0``); for classification the class probabilities
    and the label (with a header: ``p_TARGET_k`` of class k, then the label
    in a column named after the target; text labels of the training table
    name the classes and are the labels)."""
    if run.likelihood == "gaussian":
        mean, sd = run.predict(X, return_std=True, chains=chains)
        z = norm.ppf(0.5 + level / 2)
        targets = run.input_map.target_names
        named = len(targets) == mean.shape[1]
        names = [f"{targets[o]}_{what}" if named else f"{what}_{o}"
                 for what in ("mean", "sd", "lower", "upper") for o in range(mean.shape[1])]
        return names, np.column_stack([mean, sd, mean - z * sd, mean + z * sd])
    P = run.predict_proba(X, chains=chains)
    target = run.input_map.target_names[0] if run.input_map.target_names else None
    classes = run.input_map.classes or tuple(range(P.shape[1]))
    names = [f"p_{target}_{c}" if target else f"p_{c}" for c in classes] + [target or "label"]
    if not run.input_map.classes:
        return names, np.column_stack([P, P.argmax(axis=1)])
    return names, np.column_stack([P.astype(object), np.array(classes, dtype=object)[P.argmax(axis=1)]])


def export(d) -> Path:
    """``d/inference_data.nc``, ArviZ InferenceData of the run's kept samples
    (``run.thin`` > 0) of the posterior: its chains on every training case
    (with chains of one posterior, all of them; in folds mode the full-data
    chain). Only a run without such a chain (folds without
    ``full_data_chain``) exports its fold chains, which sample different
    posteriors: the file says so, and has no ``log_likelihood`` group. Each
    chain is an ArviZ chain named by its role (``full 0``, ``fold 3``), cut to
    the shortest chain's number of kept samples, so the draws are rectangular:

    - posterior: ``weights`` (weight) and the log of every hyperparameter
      that varies (a fixed one, whose R-hat would be NaN, is named with its
      value in the attribute ``constant`` instead);
    - log_likelihood: ``y`` (case), log p(y_case | draw) of the **training**
      cases (outputs summed), what ``az.loo`` and ``az.waic`` need;
    - observed_data / constant_data: the training targets ``y`` (original
      units; labels for classification) and inputs ``x`` (the network's units);
    - posterior_predictive: ``y`` (case), a replicated target per draw and
      training case (Gaussian noise added, or a label drawn), for ``az.plot_ppc``;
    - predictions (with test sets): ``y_hat`` (case, output or class), the
      network's outputs (regression, original units) or class probabilities at
      the test inputs, and ``y`` a replicated target per draw;
      predictions_constant_data: the test inputs ``x`` and targets ``y_test``;
    - sample_stats: per draw, the super-transition, its step factor and L, the
      chain's acceptance, divergences (``diverging``: any) and mean potential
      energy in it, and the draw's ``sample_weight`` in the run's averages
      (``run.weight_by``: 1, or its iteration's leapfrog steps; ArviZ's
      summaries treat draws as equal, so with unequal weights they describe
      the kept draws, not the run's weighted average).
    """
    if is_density_run(d):                      # its posterior.nc is the InferenceData already
        src, out = Path(d) / POSTERIOR, Path(d) / "inference_data.nc"
        if not src.is_file():
            raise RunError(f"{d}: a density run without its {POSTERIOR}: not finished (resume it with --resume)")
        atomic_write(out, src.read_bytes())
        return out
    run = read_run(d)
    az = arviz()
    s, P = run.samples, run.predictions
    if not len(s["weights"]):
        raise RunError(f"{run.dir}: no kept samples to export (run.thin: 0 keeps none)")
    if "X_train" not in P:
        raise RunError(f"{run.dir}: written by an older version of adaptive_hmc, which did not store the training "
                       f"cases the export's log likelihood needs; run the config again")
    posterior = P["history_count"].shape[1] > run.n_cv           # a chain on every training case
    rows = run.chain_indices("full" if posterior else "replicas")
    chains = [int(r) for r in rows if np.any(s["chain"] == r)]
    if not chains:
        raise RunError(f"{run.dir}: no kept samples of the {'full-data' if posterior else 'fold'} chains to export")
    n = min(int(np.sum(s["chain"] == r)) for r in chains)
    pick = np.concatenate([np.flatnonzero(s["chain"] == r)[:n] for r in chains])       # chain-major
    W, st = s["weights"][pick], s["super_transition"][pick]
    R, lik = len(chains), run.likelihood
    rng = np.random.default_rng(np.random.SeedSequence([run.summary["seed"], 20]))   # replicated targets

    def shaped(a):
        return a.reshape(R, n, *a.shape[1:])

    def at(X, Y):
        """(mean outputs or probabilities, replicated targets, log likelihood) per draw at inputs X, targets Y."""
        F, tau = run.posterior(keep=pick).outputs_at(X)                   # original units
        if lik == "gaussian":
            return F, F + rng.standard_normal(F.shape) / np.sqrt(tau[:, None, :]), \
                pointwise_log_likelihood(F, tau, Y, lik)
        p = class_probabilities(F, lik)
        draw = (np.cumsum(p, axis=-1) < rng.uniform(size=p.shape[:-1])[..., None]).sum(axis=-1)
        return p, np.minimum(draw, p.shape[-1] - 1), pointwise_log_likelihood(F, tau, Y, lik)

    def targets(Y):
        return Y if lik == "gaussian" else Y[:, 0].astype(int)

    X, Y = P["X_train"], P["Y_train"]
    _, y_rep, loglik = at(X, Y)
    out_dim = ["output"] if lik == "gaussian" else []
    names = [re.sub(r"\W+", "_", str(v)).strip("_") for v in P["hyper_names"]]
    log = {e["i"]: e for e in run.log}
    chain_of = np.repeat(chains, n)
    stat = {"super_transition": st, "sample_weight": s["weight"][pick],
            "step_factor": np.array([log[i]["step_factor"] for i in st]),
            "num_steps": np.array([log[i]["num_steps"] for i in st]),
            "acceptance": np.array([log[i]["acceptance"][c] for i, c in zip(st, chain_of)]),
            "divergences": np.array([log[i]["chain_divergences"][c] for i, c in zip(st, chain_of)]),
            "energy": np.array([log[i]["chain_energy"][c] for i, c in zip(st, chain_of)])}
    stat["diverging"] = stat["divergences"] > 0
    logs = np.log(s["hyper"][pick])
    varying = np.ptp(logs, axis=0) > 0 if len(logs) else np.zeros(len(names), bool)
    constant = "; ".join(f"log_{v} = {logs[0, i]:.6g}" for i, v in enumerate(names) if not varying[i])
    groups = {"posterior": {"weights": shaped(W),
                            **{f"log_{v}": shaped(logs[:, i]) for i, v in enumerate(names) if varying[i]}},
              "posterior_predictive": {"y": shaped(y_rep)}, "observed_data": {"y": targets(Y)},
              "constant_data": {"x": X}, "sample_stats": {k: shaped(v) for k, v in stat.items()}}
    if posterior:
        groups["log_likelihood"] = {"y": shaped(loglik)}
    roles = [run.chain_role(r) for r in chains]
    with warnings.catch_warnings():         # "more chains than draws" when a run is short
        warnings.simplefilter("ignore", UserWarning)
        idata = az.from_dict(
            **groups,
            coords={"chain": roles, "case": np.arange(len(X)), "weight": [f"w{k}" for k in range(W.shape[1])]},
            dims={"weights": ["weight"], "y": ["case"] + out_dim, "x": ["case", "input"]},
            attrs={"run": str(run.dir), "likelihood": lik,
                   "chains": ("chains of one posterior, every one on all the training cases: R-hat across them "
                              "measures convergence" if posterior else
                              "cross-validation replicas, each without its fold's cases: different posteriors, so "
                              "R-hat across them does not measure convergence, and there is no log_likelihood "
                              "group (leave-one-out needs the posterior of every training case)"),
                   "note": f"posterior: the kept samples (every run.thin-th retained one), {n} per chain",
                   "constant": constant or "none"})
        if len(P["X_test"]):              # the test cases: a group pair of their own ("case" is theirs there)
            y_hat, y_test_rep, _ = at(P["X_test"], P["Y_test"])
            coords = {"chain": roles, "case": [f"{name}[{i}]" for name, sl in run.test_sets()
                                               for i in range(sl.stop - sl.start)]}
            dims = {"y_hat": ["case", "output" if lik == "gaussian" else "class"], "y": ["case"] + out_dim,
                    "x": ["case", "input"], "y_test": ["case"] + out_dim}
            idata.add_groups(
                predictions=az.dict_to_dataset({"y_hat": shaped(y_hat), "y": shaped(y_test_rep)},
                                               coords=coords, dims=dims),
                predictions_constant_data=az.dict_to_dataset({"x": P["X_test"], "y_test": targets(P["Y_test"])},
                                                             coords=coords, dims=dims, default_dims=[]))
    path = run.dir / "inference_data.nc"
    idata.to_netcdf(str(path))
    return path
