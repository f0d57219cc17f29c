"""Out-of-sample predictive accuracy of a finished run: exact K-fold
cross-validation from the chains of the fold posteriors, and PSIS-LOO with
its Pareto k verdict.

Flow position: results (and experiment, to run the folds) -> **elpd** -> cli.
K-fold elpd is exact: case i's log predictive density is taken under the
posterior of the training cases without i's fold, sampled by chains of
their own (the thesis's cross-validation replicas), elpd_i = log of the
weighted mean over their kept draws of p(y_i | draw). PSIS-LOO
(``az.loo``) approximates the same from the full-data posterior by importance
sampling, and is trusted only where every Pareto k is at most 0.7: a network
that fits some cases closely gives most of them k > 0.7, and its estimate is
then meaningless (Vehtari, Gelman & Gabry 2017).
"""
from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

from ..config import ConfigError, parse, to_dict
from ..models.predictive import pointwise_log_likelihood
from ..rundir.finished_run import read_run
from ..rundir.results import CONFIG, ELPD, KFOLD, RunDir, RunError

#: Above this Pareto k a case's PSIS-LOO term is unreliable (Vehtari et al. 2017; ArviZ's threshold).
PARETO_K_LIMIT = 0.7


def kfold_elpd(run) -> dict:
    """Exact K-fold elpd of a run whose cross-validation replicas sampled the
    fold posteriors (a config's ``cv``): per case the log weighted
    mean of p(y_i | draw) over its fold chain's kept draws after the burn-in;
    the sum, its standard error sqrt(N var), the mean per case."""
    P, s = run.predictions, run.samples
    if run.n_cv < 2 or "fold_of_case" not in P:
        raise RunError(f"{run.dir}: has no cross-validation replicas with their folds stored (cv: {{folds: K}}, "
                       f"K >= 2, by this version); export --kfold K runs them")
    fold_of, X, Y = P["fold_of_case"], P["X_train"], P["Y_train"]
    pointwise = np.full(len(Y), np.nan)
    draws = []
    for j in range(run.n_cv):
        keep = s["chain"] == j
        cases = np.flatnonzero(fold_of == j)
        if not keep.any():
            raise RunError(f"{run.dir}: fold chain {j} kept no samples after the burn-in (run.thin > 0 keeps them)")
        post = run.posterior(keep=keep)
        F, noise = post.outputs_at(X[cases])
        ll = pointwise_log_likelihood(F, noise, Y[cases], run.likelihood)               # (S, n_j)
        w = np.log(s["weight"][keep])[:, None]
        pointwise[cases] = logsumexp(ll + w, axis=0) - logsumexp(w)
        draws.append(int(keep.sum()))
    n = len(pointwise)
    return {"elpd": float(pointwise.sum()), "se": float(np.sqrt(n * pointwise.var(ddof=1))),
            "mean_per_case": float(pointwise.mean()), "k": run.n_cv, "cases": n, "draws_per_fold": draws,
            "pointwise": pointwise.tolist()}


def psis_loo(idata) -> dict:
    """PSIS-LOO of an export's log likelihood, with its verdict: how many
    cases have Pareto k above :data:`PARETO_K_LIMIT`."""
    import arviz as az
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                # ArviZ's own warning about k; the verdict says it
        loo = az.loo(idata, pointwise=True)
    k = np.asarray(loo.pareto_k)
    bad = int(np.sum(k > PARETO_K_LIMIT))
    return {"elpd": float(loo.elpd_loo), "se": float(loo.se), "cases": int(k.size), "pareto_k_above_0.7": bad,
            "pareto_k_max": float(k.max()), "reliable": bad == 0}


def loo_verdict(loo: dict) -> str:
    """One line on a PSIS-LOO estimate and whether it can be used."""
    head = f"PSIS-LOO elpd {loo['elpd']:.2f} ± {loo['se']:.2f} over {loo['cases']} training cases"
    if loo["reliable"]:
        return f"{head}; every Pareto k <= {PARETO_K_LIMIT}: usable"
    return (f"{head}; NOT usable: Pareto k > {PARETO_K_LIMIT} for {loo['pareto_k_above_0.7']} of {loo['cases']} "
            f"cases (max {loo['pareto_k_max']:.2f}), the importance weights have no finite variance there; use "
            f"exact K-fold cross-validation (export --kfold K) or a held-out test set")


def kfold_config(run, k: int):
    """The run's config with ``k`` cross-validation replicas and no full-data
    chain, run for as many super-transitions as the run made (``run.until``
    off), the same seed, data, burn-in, priors, sampler and tuner (a
    relative ``data.path`` found from the folder of the config the run was
    started with, as metadata.json names it)."""
    raw = to_dict(run.config)
    source = RunDir(run.dir).read_metadata().get("config_source", "")
    if raw["data"].get("path") and not Path(raw["data"]["path"]).is_absolute():      # relative to the config
        raw["data"]["path"] = str((Path(source).parent / raw["data"]["path"]).resolve())
    raw.pop("chains", None)
    raw["cv"] = {"folds": int(k), "full_chain": False, "predict_from": "replicas"}
    raw["run"].update(super_transitions=int(run.summary["super_transitions"]), until=None,
                      seed=int(run.summary["seed"]))
    raw["name"] = f"{raw.get('name') or 'run'}-kfold{k}"
    return parse(raw, f"{run.dir}/config.resolved.yaml with cv.folds {k}")


def check_kfold(d, k) -> None:
    """ConfigError unless ``--kfold k`` can be asked of run ``d``: k >= 2 folds, a run with cases (not a
    density), and k its own number of cross-validation replicas when it has some."""
    if not (isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k >= 2):
        raise ConfigError(f"--kfold {k!r}: the number of folds, an integer >= 2")
    run = read_run(d)
    if not run.network:
        raise ConfigError(f"--kfold {k}: {d} is a run of a density, which has no cases to leave out")
    n_cv = run.n_cv
    if n_cv and n_cv != k:
        raise ConfigError(f"--kfold {k}: the run has {n_cv} cross-validation replicas of its own; use --kfold {n_cv}")
    cases = len(run.predictions["Y_train"]) if "Y_train" in run.predictions else None
    if cases is not None and k > cases:
        raise ConfigError(f"--kfold {k}: the run has {cases} training cases, so at most --kfold {cases} folds")
    folder = Path(d) / KFOLD.format(k=k)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--kfold {k}: {folder} is a file, where the fold chains' run folder goes; move it away")


def kfold_report(d, k: int, quiet: bool = False, idata=None) -> dict:
    """K-fold elpd of run ``d``: from its own fold chains when it has ``k``
    of them, else from a run of :func:`kfold_config` into ``d/kfold-K``
    (resumed when interrupted; reused when finished); beside it PSIS-LOO of
    the export ``idata`` (when given) and the held-out test sets' log
    predictive density. Written to ``d/elpd.json``; returned."""
    from .experiment import run_experiment
    check_kfold(d, k)
    run = read_run(d)
    if run.n_cv == k:
        folds_run, source = run, "the run's own cross-validation replicas"
    else:
        out = Path(d) / KFOLD.format(k=k)
        cfg = kfold_config(run, k)
        if out.is_dir() and (RunDir(out).file(CONFIG).is_file() or (out / "summary.json").is_file()):
            try:
                RunDir(out).check_same_config(cfg)
            except RunError:                    # the run was extended (or changed) since: its fold chains are stale
                if not quiet:
                    print(f"{out}: the fold chains were run for another length of {d} (extended since); "
                          f"running them again for {run.summary['super_transitions']} super-transitions", flush=True)
                shutil.rmtree(out)
        done = (out / "summary.json").is_file()
        if not done:
            if not quiet:
                print(f"{d}: running {k} chains, one per fold posterior, for {run.summary['super_transitions']} "
                      f"super-transitions into {out} (resumable with the same command)", flush=True)
            run_experiment(cfg, out, source=f"{d} --kfold {k}", resume=out.exists(), quiet=quiet)
        folds_run, source = read_run(out), f"{k} fold chains in {out}"
    result = {"kfold": dict(kfold_elpd(folds_run), source=source)}
    n = result["kfold"]["cases"]
    if idata is not None and "log_likelihood" in idata.groups():
        result["psis_loo"] = psis_loo(idata)
    mlpd = run.summary.get("test_mlpd") or {}
    result["test"] = {name: {"mean_log_predictive_density": v} for name, v in mlpd.items() if v is not None}
    result["note"] = (f"elpd sums over the {n} training cases; a test set's mean log predictive density is per "
                      f"case: compare it with kfold.mean_per_case")
    (Path(d) / ELPD).write_text(json.dumps(result, indent=1))
    return result


def report_lines(result: dict) -> list:
    """The lines the CLI prints of :func:`kfold_report`."""
    kf = result["kfold"]
    lines = [f"K-fold elpd ({kf['k']} folds, exact; {kf['source']}): {kf['elpd']:.2f} ± {kf['se']:.2f} over "
             f"{kf['cases']} training cases ({kf['mean_per_case']:.4f} per case)"]
    if "psis_loo" in result:
        lines.append(loo_verdict(result["psis_loo"]))
    for name, t in result["test"].items():
        lines.append(f"held-out test set {name}: mean log predictive density {t['mean_log_predictive_density']:.4f} "
                     f"per case")
    return lines
