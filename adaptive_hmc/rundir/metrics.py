"""What a run's samples say: the summary (test errors, acceptance, cost) and the
multi-chain diagnostics of the predicting chains (R-hat, ESS per gradient and
per second); :mod:`~adaptive_hmc.rundir.verdicts` puts them in words.

Flow position: network_chains, config -> **metrics** -> results, estimator. Reads
a :class:`~adaptive_hmc.engine.network_chains.NetworkChains` or the arrays a run directory
stores; writes nothing.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

from .. import EXPORT_DRAWS
from ..config import Config
from ..diagnostics import (APART, RHAT_LIMIT, arviz, chain_loo, chains_apart, diagnose, e_bfmi, stacked_log_score,
                           stacking_weights, verdict, within_chain_rhat)
from ..models.mlp import MLPSpec, predict
from ..models.predictive import pointwise_log_likelihood
from ..engine.network_state import KEPT_STATS
from ..engine.network_chains import NetworkChains
from .verdicts import rhat_of

#: A super-transition whose mean acceptance is below this mixes poorly (issue of tuning, not of luck).
LOW_ACCEPTANCE = 0.2
#: Fewest kept samples of a chain for per-sample draws (below it, super-transition means are used).
MIN_KEPT = 50
#: The most draws a chain that every figure of a run's convergence is computed from (:func:`draw_indices`):
#: a longer run's evenly spaced, as the default export's (so that ArviZ's figures of the export are
#: summary.json's). Stan's 1,000 a chain, plenty for an ESS target of hundreds; the checks of a long run
#: cost as their draws (a 2,000-super-transition run of 1,000 cases, 28,000 a chain, spent 30% of its ten
#: minutes in them), now bounded.
DIAGNOSTIC_DRAWS = EXPORT_DRAWS


def kept_samples(net: NetworkChains, after: int = 0, draws_of=None) -> dict:
    """The kept samples of every chain as :func:`prediction_draws` and
    :func:`hyper_draws` take them (the arrays samples.npz stores); with
    ``after``, only those of the super-transitions numbered ``after`` and up
    (from 0); with each one's super-transition and iteration's
    :data:`~adaptive_hmc.engine.network_state.KEPT_STATS`. Given the chains
    ``draws_of``, only their :func:`draw_indices` (the draws every
    convergence figure reads, the same figures), gathered without the rest."""
    chain, st = net.kept_index()
    stats, weight = net.kept_stats(), net.kept_weights()
    at = np.flatnonzero(st >= after)
    if draws_of is not None:
        light = {"chain": chain[at], "diagnostic": stats[at, KEPT_STATS.index("diagnostic")]}
        at = at[np.sort(draw_indices(light, draws_of).ravel())]
    A, chain, st = net.kept_rows(at)
    W, noise = net.weights_of(A, chain)
    stats = stats[at]
    return {"weights": W, "noise_precision": noise, "chain": chain, "weight": weight[at],
            "hyper": A[:, net.dim:], "target_mean": net.target_mean, "target_sd": net.target_sd,
            "super_transition": st, **{name: stats[:, i] for i, name in enumerate(KEPT_STATS)}}


def convergence(diagnostics: dict, target_ess: float) -> tuple:
    """(met, line): whether the largest R-hat of ``diagnostics``
    (:func:`run_diagnostics`: the predictions and the log hyperparameters) is
    at most :data:`~adaptive_hmc.diagnostics.RHAT_LIMIT` and the smallest bulk
    ESS of every test set's predictions at least ``target_ess``; and a line
    saying how far each is."""
    if not diagnostics or not diagnostics.get("test"):
        return False, "too few draws to judge yet"
    r = diagnostics["rhat_max"]
    ess = min(t["ess_bulk"]["min"] for t in diagnostics["test"].values())
    met = r is not None and r <= RHAT_LIMIT and ess >= target_ess
    return met, (f"R-hat max of {rhat_of(diagnostics)} {'not finite' if r is None else f'{r:.3f}'} "
                 f"(target <= {RHAT_LIMIT}), smallest ESS of "
                 f"the predictions {ess:.0f} (target >= {target_ess:g})")


def evenly_spaced(n: int, most: int | None) -> np.ndarray:
    """Indices of at most ``most`` of ``n`` draws, evenly spaced, the first and last kept (all: None or n <= most)."""
    if most is None or n <= most:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, most)).astype(int))


def draw_indices(kept: dict, rows, most: int | None = DIAGNOSTIC_DRAWS) -> np.ndarray:
    """The draws every figure of a run's convergence is computed from, as
    indices (chains, draws) into the rows of ``kept``
    (:func:`kept_samples`): each of the chains ``rows``' diagnostic draws
    (the kept rows evenly spaced in every super-transition,
    :func:`~adaptive_hmc.engine.super_transition.keep_at`, whatever
    ``thin``; all kept rows of a run from before they were marked), in
    order, each chain cut to the shortest. summary.json's diagnostics, the
    run's line, the hyperparameters plot, the estimators' ``diagnostics_``
    and the ArviZ export (whose draws these are) all read these draws, as
    ArviZ reads an export: with equal weight (a super-transition's draws
    stand for its equal budget of leapfrog steps, as in the run's averages).
    At most ``most`` a chain (:data:`DIAGNOSTIC_DRAWS`; None: all), evenly
    spaced as the export's (:func:`evenly_spaced`)."""
    mark = kept.get("diagnostic")
    use = mark > 0 if mark is not None and np.any(mark > 0) else np.ones(len(kept["chain"]), bool)
    out = [np.flatnonzero(use & (kept["chain"] == r)) for r in rows]
    out = [x for x in out if x.size]
    if not out:
        return np.zeros((0, 0), np.int64)
    n = min(len(x) for x in out)
    return np.stack([x[:n][evenly_spaced(n, most)] for x in out])


def _draws(kept: dict, rows, values) -> np.ndarray:
    """Draws (chains, draws, ...) of ``values(rows of kept)`` at :func:`draw_indices`."""
    idx = draw_indices(kept, rows)
    return values(idx.ravel()).reshape(*idx.shape, -1)


def kept_per_chain(kept: dict, rows) -> int:
    """The fewest draws (:func:`draw_indices`) of the chains ``rows`` (0 when one has none)."""
    idx = draw_indices(kept, rows)
    return int(idx.shape[1]) if idx.shape[0] == len(rows) else 0


def prediction_draws(spec: MLPSpec, kept: dict, rows, X_test, history_pred, history_count) -> tuple:
    """(draws, kind): draws (chains, draws, cases x outputs) of the test
    predictions after burn-in of chains ``rows``. From the kept samples
    (``kept``: weights (S, D), chain and weight (S,), target_mean and
    target_sd: network outputs at the test inputs in the targets' units, or
    logits, which a saturated class probability does not pin to one value
    across a chain, as the export's ``y_hat`` and ``logit``) when every chain kept at least
    :data:`MIN_KEPT` (:func:`draw_indices`); otherwise one draw per super-transition in which every chain retained
    samples, the mean prediction of its samples (``history_pred`` (S, R, out,
    N) sums, ``history_count`` (S, R)). Chains are cut to the shortest."""
    fewest = kept_per_chain(kept, rows)
    if fewest >= MIN_KEPT or (np.size(history_pred) == 0 and fewest >= 4):
        def outputs(at):
            F = predict(spec, kept["weights"][at], X_test)                        # (S, N, out)
            if spec.likelihood == "gaussian":
                F = kept["target_mean"] + kept["target_sd"] * F
            return F.reshape(len(F), -1)
        return _draws(kept, rows, outputs), "samples"
    P, C = np.asarray(history_pred), np.asarray(history_count)
    if P.size == 0:
        return np.zeros((len(rows), 0, 0)), "none"
    P, C = P[:, rows], C[:, rows]
    keep = np.all(C > 0, axis=1)
    d = P[keep] / C[keep][:, :, None, None]                                         # (S, R, out, N)
    return (np.transpose(d, (1, 0, 3, 2)).reshape(len(rows), int(keep.sum()), P.shape[2] * P.shape[3]),
            "super-transition means")


def hyper_draws(kept: dict, rows, history_hyper, names=None) -> np.ndarray | tuple:
    """Draws (chains, draws, H') of the logs of the hyperparameters that vary
    (fixed ones are left out) of chains ``rows``: the kept samples' when every
    chain kept :data:`MIN_KEPT`, else each super-transition's last. Given the
    hyperparameters' ``names``, (draws, the names of those that vary)."""
    if kept_per_chain(kept, rows) >= MIN_KEPT:
        y = _draws(kept, rows, lambda at: kept["hyper"][at])
    else:
        H = np.asarray(history_hyper)
        y = np.transpose(H[:, rows], (1, 0, 2)) if H.size else np.empty((len(rows), 0, 0))
    varying = np.ptp(y.reshape(-1, y.shape[2]), axis=0) > 0 if y.size else np.zeros(0, bool)
    if names is None:
        return np.log(y[:, :, varying])
    return np.log(y[:, :, varying]), [n for n, v in zip(names, varying) if v]


def largest_own_rhat(y) -> np.ndarray:
    """Each chain's largest own split R-hat over the variables of draws ``y`` (chains, draws, variables)
    (:func:`~adaptive_hmc.diagnostics.within_chain_rhat`) as ArviZ computes it: a value below 1, which a
    chain of nearly independent draws gives, is reported as it is, not raised to 1; -inf (shown as None)
    for a chain of no variables."""
    return np.max(within_chain_rhat(y), axis=1, initial=-np.inf)


def run_diagnostics(spec: MLPSpec, kept: dict, rows, chains: str, predictions: dict, test_slices: dict,
                    history_hyper, gradients: int, seconds: float, hyper_names=None) -> dict:
    """summary.json's ``diagnostics``: R-hat and bulk and tail ESS across the
    predicting chains ``rows`` (``chains``) of the test predictions of each
    test set and of the hyperparameters
    (:func:`~adaptive_hmc.diagnostics.diagnose`); ESS per 1000 of every
    gradient the run computed (all chains, warm-up and burn-in included) and
    per second of sampling; for the hyperparameters also why their chains
    disagree most (:func:`~adaptive_hmc.diagnostics.chains_apart`, named by
    ``hyper_names``). Empty when there are fewer than 4 draws."""
    y, kind = prediction_draws(spec, kept, rows, predictions["X_test"], predictions["history_pred"],
                               predictions["history_count"])
    if y.shape[1] < 4:
        return {}
    n_out = spec.n_outputs
    distinct = int(draw_indices(kept, rows).size) if kind == "samples" else y.shape[0] * y.shape[1]
    out = {"chains": chains, "draws": kind, "distinct_draws": distinct, "gradients": int(gradients),
           "sampling_s": round(seconds, 2), "test": {}}
    for name, sl in test_slices.items():
        cols = (np.arange(sl.start, sl.stop)[:, None] * n_out + np.arange(n_out)).ravel()
        out["test"][name] = diagnose(y[:, :, cols], gradients, seconds)
    h, names = hyper_draws(kept, rows, history_hyper, list(hyper_names) if hyper_names is not None else
                           [f"hyperparameter {i}" for i in range(np.shape(history_hyper)[-1])]
                           if np.size(history_hyper) else [])
    out["hyper"] = diagnose(h, gradients, seconds) if h.size and h.shape[1] >= 4 else None
    if out["hyper"] is not None and h.shape[0] > 1:
        out["hyper"]["apart"] = chains_apart(h, names)
    found = [d["rhat_max"] for d in [*out["test"].values(), out["hyper"]] if d is not None]
    out["rhat_max"] = None if None in found else max(found, default=None)
    out["rhat_max_of"] = rhat_of(out)
    own = {"predictions": largest_own_rhat(y)}
    if out["hyper"] is not None:
        own["hyper"] = largest_own_rhat(h)
    out["within_chain"] = {k: [round(float(v), 4) if np.isfinite(v) else None for v in r] for k, r in own.items()}
    out["verdict"] = verdict(out["rhat_max"], np.max(list(own.values()), axis=0))
    return out


#: Draws a chain at most that :func:`chain_stacking` evaluates at every training case (evenly spaced).
STACKING_DRAWS = 400


def chain_stacking(spec: MLPSpec, kept: dict, rows, train: tuple, test_sets: dict) -> dict | None:
    """The chains' stacked predictive (Yao, Vehtari & Gelman 2022), for chains that settled apart: simplex
    weights maximising the summed log of each training case's mixture of the chains' PSIS-LOO predictive
    densities (:func:`~adaptive_hmc.diagnostics.stacking_weights`), and the log score of the stacked and of
    the equal-weight mixture on each test set. ``train`` is (X, Y) in the network's inputs and the targets'
    units; ``test_sets`` maps a name to such a pair. Where some case's Pareto k exceeds 0.7 in a chain, that
    chain's LOO density is unreliable there, and ``reliable`` says so (exact K-fold: ``export --kfold``).
    None with fewer than 2 chains or 20 draws a chain."""
    idx = draw_indices(kept, rows)
    if idx.shape[0] < 2 or idx.shape[1] < 20:
        return None
    idx = idx[:, np.unique(np.linspace(0, idx.shape[1] - 1, min(STACKING_DRAWS, idx.shape[1])).astype(int))]

    def loglik(X, Y):                                              # (chains, draws, cases)
        at = idx.ravel()
        F = predict(spec, kept["weights"][at], X)
        noise = kept["noise_precision"][at]
        if spec.likelihood == "gaussian":
            F, noise = kept["target_mean"] + kept["target_sd"] * F, noise / kept["target_sd"] ** 2
        return pointwise_log_likelihood(F, noise, Y, spec.likelihood).reshape(*idx.shape, len(Y))

    lpd, khat = chain_loo(loglik(*train))
    w = stacking_weights(lpd)
    bad = (khat > 0.7).sum(axis=1)
    scores = {}
    for name, (X, Y) in test_sets.items():
        ll = loglik(X, Y)
        dens = (logsumexp(ll, axis=1) - np.log(ll.shape[1])).T                          # (cases, chains)
        scores[name] = {"stacked": round(stacked_log_score(dens, w), 6),
                        "equal_weights": round(stacked_log_score(dens, np.full(len(w), 1 / len(w))), 6)}
    return {"what": "the chains' stacked predictive (Yao, Vehtari & Gelman 2022), not the posterior",
            "weights": [round(float(v), 6) for v in w], "loo_lpd_per_chain": [round(float(v), 4) for v in lpd.sum(0)],
            "pareto_k_above_0.7": [int(v) for v in bad], "reliable": bool(bad.sum() == 0),
            "test_log_score": scores}


def chain_diagnostics(net: NetworkChains, log: list, wall_s: float, chains: str, kept: dict | None = None) -> dict:
    """:func:`run_diagnostics` of a run's network chains now: the predicting
    ``chains``' test predictions and hyperparameters after the burn-in, costed
    by every gradient in ``log`` and ``wall_s`` of sampling ({} before any test
    prediction)."""
    if not net.history_pred:
        return {}
    rows = net.chain_indices(chains)
    return run_diagnostics(net.spec, kept or kept_samples(net, draws_of=rows), rows, chains,
                           {"X_test": net.X_test, "history_pred": net.history_pred,
                            "history_count": net.history_count}, net.test_slices,
                           net.history_hyper[net.burn_in_super_transitions:], int(log_gradients(log).sum()),
                           wall_s, net.hyper_names)


def log_gradients(log: list) -> np.ndarray:
    """Every energy and gradient evaluation of each super-transition of a
    run's ``log``, all chains (leapfrog steps, the Gibbs updates' and the step
    calibration's); a log written before these were counted apart holds its
    leapfrog steps alone."""
    return np.array([e.get("gradients", e["leapfrog_steps"]) for e in log], dtype=np.int64)


def summarize(net: NetworkChains, log: list, wall_s: float, cfg: Config, compile_s: float = 0.0,
              kept: dict | None = None) -> dict:
    """summary.json: test errors per test set, CV error, acceptance, divergences,
    stuck chains and the share of post-warm-up super-transitions with mean
    acceptance below :data:`LOW_ACCEPTANCE`, leapfrog steps and gradients
    (:func:`log_gradients`, every chain), wall time (sampling only) and compile time, final action, and
    the multi-chain diagnostics of the predicting chains
    (:func:`run_diagnostics`; ``kept``: :func:`kept_samples`, when the caller has them)."""
    chains = cfg.layout.predict_from
    rows = net.chain_indices(chains)
    metrics = net.metrics(chains) if net.test_count[rows].sum() > 0 else {}
    gradients = int(log_gradients(log).sum())
    kept = kept if kept is not None else kept_samples(net)
    diagnostics = chain_diagnostics(net, log, wall_s, chains, kept)
    if diagnostics.get("verdict") == APART:
        diagnostics["stacking"] = chain_stacking(
            net.spec, kept, rows, (net.X_train, net.Y_train),
            {name: (net.X_test[sl], net.Y_test[sl]) for name, sl in net.test_slices.items()})
    burn = cfg.run.burn_in.super_transitions
    cv = [e["cv_error"] for e in log[burn:] if e["cv_error"] is not None]
    key = "mse" if net.spec.likelihood == "gaussian" else "error_rate"
    return {
        "name": cfg.name, "data": cfg.data.dataset or Path(cfg.data.path).stem, "seed": cfg.run.seed,
        "tuner": cfg.tuner.kind, "predict_from": chains,
        f"test_{key}": {n: m[key] for n, m in metrics.items()},
        f"test_{key}_se": {n: m[f"{key}_se"] for n, m in metrics.items()},
        "test_mlpd": {n: m["mlpd"] for n, m in metrics.items()},
        "cv_error": float(np.mean(cv)) if cv else None,
        "acceptance": float(np.mean([np.mean(e["acceptance"]) for e in log])) if log else None,
        "divergences": int(sum(e["divergences"] for e in log)),
        "stuck_super_transitions": sum(1 for e in log if e["stuck_chains"]),
        "stuck_by_chain": np.bincount([c for e in log for c in e["stuck_chains"]],
                                      minlength=net.n_chains).tolist(),
        "divergences_by_chain": np.sum([e["chain_divergences"] for e in log], axis=0, dtype=np.int64).tolist()
        if log else [],
        "probes": {"tried": sum(len(e.get("probes", ())) for e in log),
                   "failed": sum(not p["passed"] for e in log for p in e.get("probes", ()))},
        "low_acceptance_share": _low_share(log[cfg.tuner.warmup_super_transitions if cfg.tuner.kind == "bandit"
                                               else 0:]),
        "leapfrog_steps": int(sum(e["leapfrog_steps"] for e in log)), "gradients": gradients,
        "super_transitions": len(log), "samples_retained": int(net.retained.sum()),
        "final_action": {"step_factor": log[-1]["step_factor"], "num_steps": log[-1]["num_steps"]} if log else None,
        "wall_s": round(wall_s, 2), "compile_s": round(compile_s, 2),
        "step_calibration": [round(float(c), 6) for c in net.step_calibration],
        "e_bfmi": kept_e_bfmi(kept,
                              net.chain_indices("full" if net.n_chains > net.n_cv else "replicas")),
        "diagnostics": diagnostics,
    }


def kept_e_bfmi(kept: dict, rows) -> list | None:
    """E-BFMI of each of the chains ``rows`` that kept samples, from the Hamiltonian of its diagnostic
    draws (:func:`draw_indices`, the export's, so that ``az.bfmi`` of the export gives the same figures;
    consecutive ones are a sixteenth of a super-transition apart, not consecutive iterations). None with
    fewer than 3 draws a chain or a run from before the draws' energies were kept."""
    if "energy" not in kept:
        return None
    E = kept["energy"][draw_indices(kept, rows)]
    if E.ndim != 2 or E.shape[1] < 3 or not np.isfinite(E).all():
        return None
    return [round(float(v), 6) for v in e_bfmi(E)]


TIMINGS = ("wall_s", "compile_s", "sampling_s", "ess_per_second", "seconds")


def untimed(summary):
    """The summary (or a log entry) without its timings (:data:`TIMINGS`, at any depth, in lists too): what
    the seed alone decides, whatever the machine, the thread count or a resume."""
    if isinstance(summary, dict):
        return {k: untimed(v) for k, v in summary.items() if k not in TIMINGS}
    if isinstance(summary, list):
        return [untimed(v) for v in summary]
    return summary


def _low_share(log: list) -> float | None:
    """Share of the super-transitions in ``log`` whose mean acceptance is below :data:`LOW_ACCEPTANCE`."""
    if not log:
        return None
    return float(np.mean([np.mean(e["acceptance"]) < LOW_ACCEPTANCE for e in log]))


def density_summary(idata) -> dict:
    """A density run's summary.json: per parameter mean, sd, R-hat and bulk and tail ESS; the whole run's
    largest R-hat, smallest ESS per second and per 1000 gradients, divergences, E-BFMI."""
    table = arviz().summary(idata, kind="all", round_to="none")
    a = idata.attrs
    seconds = float(a["warmup_seconds"]) + float(a["sampling_seconds"])
    ess = float(table["ess_bulk"].min())
    return dict(parameters={name: {k: float(v) for k, v in row.items()} for name, row in table.iterrows()},
                rhat_max=float(table["r_hat"].max()), rhat_max_of="every parameter, as reported (constrained)",
                e_bfmi_min=float(np.min(e_bfmi(idata.sample_stats.energy.values))), ess_bulk_min=ess, gradients=int(a["gradients"]),
                ess_per_1000_gradients=1000 * ess / int(a["gradients"]), ess_per_second=ess / seconds,
                divergences=int(idata.sample_stats.diverging.values.sum()), seconds=round(seconds, 3),
                compile_s=round(float(a["compile_seconds"]), 3), chains=int(idata.posterior.sizes["chain"]),
                draws=int(idata.posterior.sizes["draw"]), budget=int(a["budget"]),
                **({"convergence": json.loads(a["convergence"])} if "convergence" in a else {}),
                finished=time.strftime("%Y-%m-%dT%H:%M:%S"))
