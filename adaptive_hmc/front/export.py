"""What a finished run gives out: its predictions at new inputs (the
``predict`` table) and ArviZ InferenceData of its posterior (``export``).

Flow position: results -> **export**. Reads runs through
:func:`~adaptive_hmc.rundir.finished_run.read_run` only; never samples.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.stats import norm

from .. import EXPORT_DRAWS
from ..rundir.finished_run import Run, read_run
from ..rundir.inference import inference_data
from ..rundir.metrics import evenly_spaced
from ..rundir.results import RunError
from ..rundir.store import atomic_netcdf, atomic_write


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


def export(d, max_draws: int | None = EXPORT_DRAWS) -> Path:
    """``d/inference_data.nc``: :func:`inference_data` of the finished run in
    directory ``d`` (a density run's posterior.nc is its InferenceData already,
    copied). Its chains are those on every training case (with chains of one
    posterior, all of them; in folds mode the full-data chain); only a run
    without such a chain (folds without ``full_data_chain``) exports its fold
    chains, which sample different posteriors: the file says so, and has no
    ``log_likelihood`` group. At most ``max_draws`` a chain, evenly spaced
    (None: every one); the attrs say how many the run holds."""
    run = read_run(d)
    if not run.network:                        # its posterior.nc is the InferenceData already
        out = run.dir / "inference_data.nc"
        idata = run.inference_data()
        n = idata.posterior.sizes["draw"]
        if max_draws is None or n <= max_draws:
            atomic_write(out, run.posterior_file.read_bytes())
            return out
        idata = idata.isel(draw=evenly_spaced(n, max_draws))
        for group in idata.groups():
            idata[group].attrs.update(draws_in_run=n, draws=idata.posterior.sizes["draw"])
        atomic_netcdf(idata, out)
        return out
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
    tests = None
    if len(P["X_test"]):
        tests = (P["X_test"], P["Y_test"], [f"{name}[{i}]" for name, sl in run.test_sets()
                                            for i in range(sl.stop - sl.start)])
    idata = inference_data(run.posterior(keep=np.ones(len(s["chain"]), bool)), s, chains,
                           [run.chain_role(r) for r in chains], P["hyper_names"], P["X_train"], P["Y_train"],
                           run.log, run.summary["seed"], tests, posterior,
                           {"run": str(run.dir),
                            "note": "posterior: the diagnostic draws (16 kept samples a super-transition, evenly spaced)"},
                           max_draws)
    path = run.dir / "inference_data.nc"
    idata.to_netcdf(str(path))
    return path
