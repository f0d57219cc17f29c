"""Monte Carlo error of chain averages, and the convergence diagnostics of a
run's chains.

Flow position: results -> **diagnostics**. Batch means (Flegal & Jones 2010):
the chain is cut into ``n_batches`` consecutive batches whose means are nearly
independent when batches are much longer than the autocorrelation time.
Across chains of one posterior: ArviZ's rank-normalised split R-hat and bulk
and tail ESS (Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021); from
the Hamiltonian of each draw, E-BFMI (Betancourt 2016); and what says that
draws of :func:`~adaptive_hmc.front.general.sample` cannot be trusted yet.
"""
import os
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy import fft, special, stats

#: R-hat above this says the chains have not met (Vehtari et al. 2021, section 4).
RHAT_LIMIT = 1.01
#: The bulk ESS that R-hat within :data:`RHAT_LIMIT` usually needs of the slowest
#: quantity (and the estimators' and templates' ``target_ess``): the warnings'
#: estimate of how much longer to run.
ENOUGH_ESS = 400


def run_longer(what: str, ess: float, longer=None, rhat: float | None = None) -> str:
    """The warnings' advice: \"Run longer: \" and, when the slowest quantity
    ``what`` has a bulk ESS ``ess`` below :data:`ENOUGH_ESS`, how many times the
    draws after the burn-in bring it there at this pace (``longer(factor)``,
    when given, says how: the command or parameter); when its ESS is enough but
    the largest ``rhat`` is above :data:`RHAT_LIMIT`, how many times the draws
    bring R-hat^2 - 1, which falls as one over the draws of chains that are
    still moving toward each other, to the limit's."""
    if ess is not None and np.isfinite(ess) and ess >= ENOUGH_ESS and rhat is not None and rhat > RHAT_LIMIT:
        factor = (rhat ** 2 - 1) / (RHAT_LIMIT ** 2 - 1)
        return (f"Run longer: the smallest bulk ESS, of {what}, is {ess:.0f}, but R-hat is {rhat:.3f}; about "
                f"{factor:.1f} times the draws after the burn-in bring R-hat^2 - 1 to the limit's if it falls as one "
                f"over the draws" + (f" ({longer(factor)})" if longer else ""))
    if not (ess is not None and np.isfinite(ess) and 0 < ess < ENOUGH_ESS):
        return "Run longer (more super-transitions)"
    factor = ENOUGH_ESS / ess
    return (f"Run longer: the smallest bulk ESS, of {what}, is {ess:.0f}; at this pace about {factor:.1f} times the "
            f"draws after the burn-in bring it to {ENOUGH_ESS}, which R-hat within {RHAT_LIMIT} usually needs"
            + (f" ({longer(factor)})" if longer else ""))


def more_super_transitions(factor: float, done: int, burn_in) -> int:
    """The fewest super-transitions to add to a run of ``done`` so that it
    keeps ``factor`` times the draws after its burn-in that it keeps now;
    ``burn_in`` is the burn-in (an int), or the burn-in of a run of n
    (a function of n, for a burn-in that grows with the run)."""
    b = burn_in if callable(burn_in) else (lambda n: burn_in)
    want = factor * max(done - b(done), 1)
    lo, hi = 0, 1                              # the draws kept grow with the length: bisect
    while done + hi - b(done + hi) < want:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if done + mid - b(done + mid) >= want else (mid, hi)
    return hi


def batch_means_mcse(x, n_batches: int = 40) -> np.ndarray:
    """Monte Carlo standard error of the mean of ``x`` (n_samples, ...) along axis 0."""
    x = np.asarray(x, dtype=float)
    b = x.shape[0] // n_batches
    if b < 1:
        raise ValueError(f"{x.shape[0]} samples: need at least n_batches={n_batches}")
    means = x[: b * n_batches].reshape(n_batches, b, *x.shape[1:]).mean(axis=1)
    return means.std(axis=0, ddof=1) / np.sqrt(n_batches)


def compute_spaced(weights, max_draws: int | None = None) -> np.ndarray:
    """Indices of draws of weights (S,), in order, each repeated so that the
    draws are spaced by equal weight: draw i appears once for every multiple of
    a unit weight that the running sum of weights passes at it (systematic
    resampling). The unit is the smallest weight, or, when that would give
    more than ``max_draws`` draws, the total weight / ``max_draws`` (a draw
    lighter than the unit may then appear not at all). Equal weights give
    every index once; with weights in leapfrog steps, the sequence has one
    draw per that many gradients, so that its ESS is that of the weighted
    average (the estimator the run reports)."""
    w = np.asarray(weights, dtype=np.float64)
    if w.size == 0:
        return np.zeros(0, dtype=np.int64)
    unit = w.min() if max_draws is None else max(w.min(), w.sum() / max_draws)
    c = np.floor(np.cumsum(w) / unit + 1e-9).astype(np.int64)
    return np.repeat(np.arange(w.size), np.diff(c, prepend=0))


def arviz():
    """ArviZ, imported without its import-time warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz
    return arviz


#: Variables whose statistics are computed at once (bounds the FFT's memory: chains x 4 draws x this x 16 bytes).
CHUNK = 256


def _split(y: np.ndarray) -> np.ndarray:
    """Each chain of ``y`` (chains, draws, variables) cut into its first and last halves, as two chains."""
    half = y.shape[1] // 2
    return np.concatenate([y[:, :half], y[:, y.shape[1] - half:]], axis=0)


def _z_scale(y: np.ndarray) -> np.ndarray:
    """Rank-normalised ``y`` (chains, draws, variables): the normal quantile
    of each draw's rank among all draws of its variable (average ranks of
    ties, Blom's offset 3/8)."""
    c, n, v = y.shape
    size = c * n
    twice = (2 * stats.rankdata(y.reshape(size, v), method="average", axis=0)).astype(np.int64)  # 2, 3, ..., 2 size
    table = special.ndtri((np.arange(2, 2 * size + 1) / 2 - 0.375) / (size + 0.25))  # one quantile per (half) rank
    return table[twice - 2].reshape(c, n, v)


def _rhat(z: np.ndarray) -> np.ndarray:
    """Potential scale reduction of each variable of ``z`` (chains, draws, variables)."""
    n = z.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        between = n * np.var(z.mean(axis=1), axis=0, ddof=1)
        within = np.var(z, axis=1, ddof=1).mean(axis=0)
        return np.sqrt((between / within + n - 1) / n)


def _ess(z: np.ndarray) -> np.ndarray:
    """Effective sample size of each variable of ``z`` (chains, draws,
    variables): autocovariances by one FFT of all chains and variables, and
    Geyer's initial positive and monotone sequences as ArviZ's ``_ess``
    takes them, vectorised over variables (a constant variable: every
    draw counts)."""
    c, n, v = z.shape
    m = fft.next_fast_len(2 * n)
    f = fft.rfft(z - z.mean(axis=1, keepdims=True), n=m, axis=1, workers=1)
    acov = fft.irfft(f * np.conj(f), n=m, axis=1, workers=1)[:, :n] / n           # (chains, lags, variables)
    mean_var = acov[:, 0].mean(axis=0) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n + (np.var(z.mean(axis=1), axis=0, ddof=1) if c > 1 else 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (mean_var - acov.mean(axis=0)) / var_plus                       # (lags, variables)
    rho[0] = 1.0
    j_max = max((n - 1) // 2 - 1, 0)                # pairs (2j, 2j + 1), j = 1..j_max, that the bound lets in
    pairs = rho[: 2 * j_max + 2].reshape(j_max + 1, 2, v).sum(axis=1)               # P_0..P_jmax
    stop = pairs <= 0                                                                # the first such pair ends it
    last = np.where(stop.any(axis=0), stop.argmax(axis=0), j_max)
    last = np.minimum(last, j_max)                                                   # J: pairs 1..J computed
    k = np.arange(j_max + 1)[:, None]
    monotone = np.minimum.accumulate(pairs, axis=0)                                  # pairs 0..J-1 (all > 0)
    cols = np.arange(v)
    even = rho[2 * last, cols]
    kept_even = np.where((even > 0) | (pairs[last, cols] >= 0), even, 0.0)
    tail = np.where(last == 0, 1.0, kept_even)
    tau = -1.0 + 2.0 * np.where(k < last, monotone, 0.0).sum(axis=0) + tail
    size = c * n
    ess = size / np.maximum(tau, 1.0 / np.log10(size))
    ess = np.where(np.isnan(rho).any(axis=0), np.nan, ess)
    return np.where(np.ptp(z.reshape(size, v), axis=0) < np.finfo(float).resolution, float(size), ess)


def _statistics(y: np.ndarray) -> dict:
    """ArviZ's rank R-hat, bulk ESS and tail ESS of each variable of ``y``
    (chains, draws, variables), for a block of variables."""
    if y.shape[0] == 1:                             # one chain: its two halves as two chains (ArviZ: none)
        y_r = y[:, : y.shape[1] // 2 * 2].reshape(2, y.shape[1] // 2, -1)
    else:
        y_r = y
    rhat = np.full(y.shape[2], np.nan)
    z = _z_scale(_split(y))
    if y_r.shape[1] >= 4:
        r = _split(y_r)
        folded = np.abs(r - np.median(r.reshape(-1, r.shape[2]), axis=0))
        rhat = np.maximum(_rhat(z if y_r is y else _z_scale(r)), _rhat(_z_scale(folded)))
    flat = y.reshape(-1, y.shape[2])
    tail = np.minimum(*(_ess(_split((y <= np.quantile(flat, q, axis=0)).astype(float))) for q in (0.05, 0.95)))
    return {"rhat": rhat, "ess_bulk": _ess(z), "ess_tail": tail}


def chain_statistics(y) -> dict:
    """Rank-normalised split R-hat and bulk and tail ESS of each variable of
    draws ``y`` (chains, draws, variables): ArviZ's definitions (Vehtari et
    al. 2021; the tests check the figures against ArviZ's), vectorised over
    variables in blocks of :data:`CHUNK` on every core, so that
    thousands of variables cost seconds. A variable whose draws never change
    in some chain gets ESS 0 and R-hat inf (ArviZ would count such a chain
    as perfect): a chain that rejects everything is a failure. One chain's
    R-hat is that of its two halves as two chains (ArviZ computes none for
    one chain; split, as ArviZ splits every chain, into quarters): whether
    the chain's parts agree."""
    y = np.asarray(y, dtype=np.float64)
    if y.shape[1] < 4:
        nan = np.full(y.shape[2], np.nan)
        out = {"rhat": nan, "ess_bulk": nan, "ess_tail": nan}
    else:
        with warnings.catch_warnings(), ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            warnings.simplefilter("ignore")           # constant draws
            blocks = list(pool.map(_statistics, (y[:, :, i:i + CHUNK] for i in range(0, y.shape[2], CHUNK))))
        out = {k: np.concatenate([b[k] for b in blocks]) if blocks else np.zeros(0) for k in ("rhat", "ess_bulk",
                                                                                              "ess_tail")}
    out = {k: np.nan_to_num(np.atleast_1d(v), nan=np.inf if k == "rhat" else 0.0) for k, v in out.items()}
    stuck = np.any(np.ptp(y, axis=1) == 0, axis=0)
    out["rhat"] = np.where(stuck, np.inf, out["rhat"])
    for k in ("ess_bulk", "ess_tail"):
        out[k] = np.where(stuck, 0.0, out[k])
    return out


def draws_ess(y) -> np.ndarray:
    """Bulk ESS of each variable of draws ``y`` (chains, draws, variables);
    0 where the draws never change."""
    return chain_statistics(y)["ess_bulk"]


def diagnose(y, gradients: float, seconds: float) -> dict:
    """What the run's user needs of draws ``y`` (chains, draws, variables) of
    the quantities they care about: the largest R-hat, the smallest and the
    median over variables of the bulk and tail ESS, and of the bulk ESS per
    1000 ``gradients`` (every gradient the run computed) and per ``seconds``
    (of sampling)."""
    st = chain_statistics(y)
    bulk, tail = st["ess_bulk"], st["ess_tail"]
    rhat = float(np.max(st["rhat"]))

    def both(v):
        return {"min": float(np.min(v)), "median": float(np.median(v))}
    return {"chains": int(y.shape[0]), "draws_per_chain": int(y.shape[1]), "variables": int(y.shape[2]),
            "rhat_max": rhat if np.isfinite(rhat) else None,
            "ess_bulk": both(bulk), "ess_tail": both(tail),
            "ess_per_1000_gradients": both(1000 * bulk / gradients) if gradients > 0 else None,
            "ess_per_second": both(bulk / seconds) if seconds > 0 else None}


#: A quantity whose every chain moved the same way between the first and the last third of its draws by more
#: than this many within-chain sds is still drifting: the chains are on their way to the posterior, not in it.
DRIFT_SDS = 0.5


def chains_apart(y, names=None) -> dict | None:
    """Why the chains of draws ``y`` (chains, draws, variables) disagree, for
    the variable whose chains disagree most: ``drifting`` when every chain's
    mean moved the same way by more than :data:`DRIFT_SDS` within-chain sds
    between the first and the last third of its draws (the chains are still
    climbing toward the posterior: more time is the cure), else steady chains
    that sit apart (separated modes, or moves too slow to cross between them).
    Returns {"name", "drifting", "first", "last" (the chain means of the first
    and last third), "sd" (the pooled within-chain sd)}; None with fewer than
    6 draws a chain."""
    y = np.asarray(y, dtype=np.float64)
    n = y.shape[1] // 3
    if n < 2 or y.shape[2] == 0:
        return None
    first, last = y[:, :n].mean(axis=1), y[:, -n:].mean(axis=1)                      # (chains, variables)
    sd = np.sqrt(np.mean(y.var(axis=1, ddof=1), axis=0))
    with np.errstate(divide="ignore", invalid="ignore"):
        move = (last - first) / sd
        spread = np.ptp(y.mean(axis=1), axis=0) / sd
    same = np.all(move > 0, axis=0) | np.all(move < 0, axis=0)
    drift = np.where(same, np.min(np.abs(move), axis=0), 0.0)
    drift = np.nan_to_num(drift, nan=0.0, posinf=0.0)
    k = int(np.argmax(drift)) if drift.max() > DRIFT_SDS else int(np.argmax(np.nan_to_num(spread, nan=0.0)))
    name = names[k] if names is not None else f"variable {k}"
    return {"name": name, "drifting": bool(drift[k] > DRIFT_SDS), "first": [round(float(v), 3) for v in first[:, k]],
            "last": [round(float(v), 3) for v in last[:, k]], "sd": round(float(sd[k]), 3)}


def e_bfmi(energy) -> np.ndarray:
    """Each chain's energy Bayesian fraction of missing information (Betancourt
    2016): the mean squared change of the Hamiltonian between draws over its
    variance, from ``energy`` (chains, draws); ArviZ's ``bfmi`` formula, without
    importing ArviZ (a second and a half at the end of every run)."""
    E = np.atleast_2d(np.asarray(energy, dtype=np.float64))
    return np.square(np.diff(E, axis=1)).mean(axis=1) / np.var(E, axis=1, ddof=1)


#: Below this E-BFMI a chain's momentum resampling cannot move it across the energy levels of the posterior.
E_BFMI_LIMIT = 0.3


def check_line(n: int, status: str, met: bool, out_of_time: bool, limit: str) -> str:
    """What a run that goes on until its chains meet says at a check after super-transition ``n``."""
    return (f"after {n} super-transitions: {status}"
            + ("; done" if met else f"; the time limit ({limit}) is reached" if out_of_time else "; going on"))


def time_limit_warning(stopped: dict, limit: str, seconds: float) -> str:
    """The warning of a run stopped at its time limit ``limit`` = ``seconds`` before its chains met."""
    return (f"stopped at the time limit, {limit}={seconds:g}, after {stopped['super_transitions']} super-transitions, "
            f"before the chains met: {stopped['status']} (raise {limit})")


def draws_convergence(st: dict, target_ess: float) -> tuple:
    """(met, line) of a run of :func:`~adaptive_hmc.front.general.sample` that goes
    on until its chains meet: whether the largest R-hat of the unconstrained
    coordinates (``st``: :func:`chain_statistics`) is at most
    :data:`RHAT_LIMIT` and their smallest bulk ESS at least ``target_ess``;
    and a line saying how far each is."""
    r, ess = float(np.max(st["rhat"])), float(np.min(st["ess_bulk"]))
    met = bool(r <= RHAT_LIMIT and ess >= target_ess)
    return met, (f"R-hat max of the unconstrained coordinates {r:.3f} (target <= {RHAT_LIMIT}), smallest bulk ESS "
                 f"{ess:.0f} (target >= {target_ess:g})")


def summary_line(st: dict, stats: dict, gradients: int, seconds: float) -> str:
    """The line a run of :func:`~adaptive_hmc.front.general.sample` ends with (``verbose``, and the CLI's
    run of a density config): R-hat and ESS of the unconstrained coordinates
    (``st``: :func:`~adaptive_hmc.diagnostics.chain_statistics`), per second
    of warm-up and sampling and per 1000 gradients, divergences and E-BFMI."""
    r, ess = np.max(st["rhat"]), float(np.min(st["ess_bulk"]))
    div = stats["diverging"]
    bfmi = e_bfmi(stats["energy"]) if stats["energy"].shape[1] > 2 else [np.nan]
    return (f"{div.shape[0]} chain{'s' * (div.shape[0] != 1)} x {div.shape[1]} draws: R-hat max of the "
            f"unconstrained coordinates {r:.3f} (target <= {RHAT_LIMIT}); smallest bulk ESS {ess:.0f} "
            f"({ess / seconds:.1f} per second of warm-up and sampling, {1000 * ess / gradients:.3g} per 1000 "
            f"gradients); {int(div.sum())} divergent trajectories; E-BFMI min {np.min(bfmi):.2f}")


def trust_warnings(rhat, diverging, energy=None, ess=None, longer=None) -> list:
    """What says the answer cannot be trusted yet, from ``rhat`` of each
    unconstrained coordinate: R-hat of a coordinate above
    1.01 (naming the coordinates; with their bulk ``ess``, how much longer to
    run, :func:`run_longer` with ``longer``), any divergent trajectory after warm-up
    (a divergence marks a region the integrator cannot enter, such as a
    funnel's neck, so the draws may be biased), and an E-BFMI of a chain
    below :data:`E_BFMI_LIMIT` from the Hamiltonian of each draw ``energy``
    (chains, draws): heavy tails or a funnel the trajectories' energy cannot span."""
    out = []
    if np.max(rhat) > RHAT_LIMIT:
        worst = np.argsort(rhat)[::-1][:3]
        shown = ", ".join(f"q[{k}] {rhat[k]:.3f}" if np.isfinite(rhat[k]) else f"q[{k}] not finite" for k in worst)
        k = int(np.nanargmin(ess)) if ess is not None and np.isfinite(ess).any() else None
        advice = run_longer(f"q[{k}]", ess[k], longer) if k is not None else run_longer("", None)
        out.append(f"the largest R-hat of the unconstrained coordinates across the chains is above {RHAT_LIMIT} "
                   f"({shown}): the chains have not met. {advice}")
    n_div, total = int(np.sum(diverging)), int(np.size(diverging))
    if n_div:
        out.append(f"{n_div} of {total} trajectories after warm-up diverged ({n_div / total:.1%}): the draws may "
                   f"be biased away from where the integrator cannot go (a funnel's neck, a hard boundary); "
                   f"reparameterise (non-centred scales, constraints as smooth transforms) or raise target_accept")
    if energy is not None and np.shape(energy)[1] > 2:
        bfmi = e_bfmi(energy)
        low = [f"chain {j} {v:.2f}" for j, v in enumerate(bfmi) if v < E_BFMI_LIMIT]
        if low:
            out.append(f"E-BFMI below {E_BFMI_LIMIT} ({', '.join(low)}): resampling the momentum moves these chains "
                       f"too little between the posterior's energy levels (heavy tails, a funnel), so they explore "
                       f"it slowly and may miss its tails; reparameterise (non-centred scales, log transforms)")
    return out


#: A chain whose own split R-hat (its first half against its second, rank-normalised; Sommer et al. 2024, MILE
#: 2025) exceeds this for some quantity has not settled: it still moves within itself. Two halves of a chain
#: that has settled give about 1 + 1/ESS of the chain (1.02 at 95% for an ESS of 100).
SETTLED_RHAT = 1.05
#: Settled chains whose R-hat across them exceeds this sit apart: each holds a region of its own (separate
#: modes). Below it and above :data:`RHAT_LIMIT`, settled chains are close and more draws decide.
APART_RHAT = 1.1
#: The three answers of :func:`verdict`.
MET, MOVING, APART = "met", "moving", "apart"


def within_chain_rhat(y) -> np.ndarray:
    """Each chain's own split R-hat of each variable of draws ``y`` (chains, draws, variables): the
    rank-normalised R-hat of its first half against its second half (each half split again, as ArviZ splits
    every chain: ``az.rhat`` of the two halves), (chains, variables); inf where a chain's draws never change."""
    y = np.asarray(y, dtype=np.float64)
    return np.stack([chain_statistics(y[c:c + 1])["rhat"] for c in range(y.shape[0])]) if y.shape[0] \
        else np.zeros((0, y.shape[2]))


def verdict(rhat_across: float | None, within) -> str:
    """Which of three cases the chains are in, from the largest R-hat across them (None: not finite) and each
    chain's largest own split R-hat ``within`` (chains,): :data:`MET` (R-hat at most :data:`RHAT_LIMIT`);
    :data:`APART` when every chain has settled (its own R-hat at most :data:`SETTLED_RHAT`) and they sit apart
    (R-hat across above :data:`APART_RHAT`): a multimodal posterior, which more time does not cure; else
    :data:`MOVING`: some chain still moves within itself (or settled chains are close), so more time will
    bring them together."""
    if rhat_across is not None and rhat_across <= RHAT_LIMIT:
        return MET
    within = np.asarray(within, dtype=np.float64)
    settled = within.size > 1 and bool(np.all(within <= SETTLED_RHAT))
    return APART if settled and (rhat_across is None or rhat_across > APART_RHAT) else MOVING


def stacking_weights(lpd, iterations: int = 10_000, tol: float = 1e-12) -> np.ndarray:
    """Stacking weights of K predictive distributions (Yao, Vehtari, Simpson & Gelman 2018; of chains: Yao,
    Vehtari & Gelman 2022): the simplex weights w that maximise sum_i log sum_k w_k exp(lpd[i, k]), from the
    log predictive density of each case under each distribution ``lpd`` (N, K) (for chains, each chain's
    leave-one-out density). The objective is concave in w and is a mixture's likelihood in its weights, so
    the EM update w_k <- mean_i of case i's responsibility of k climbs it monotonically to the maximum."""
    lpd = np.asarray(lpd, dtype=np.float64)
    n, K = lpd.shape
    z = lpd - lpd.max(axis=1, keepdims=True)
    p = np.exp(z)
    w = np.full(K, 1.0 / K)
    last = -np.inf
    for _ in range(iterations):
        mix = p @ w
        value = float(np.log(mix).sum())
        w = w * (p / mix[:, None]).mean(axis=0)
        w /= w.sum()
        if value - last < tol * max(1.0, abs(value)):
            break
        last = value
    return w


def stacked_log_score(lpd, weights) -> float:
    """Mean over cases of log sum_k w_k exp(lpd[i, k]): the log score of the stacked predictive."""
    lpd = np.asarray(lpd, dtype=np.float64)
    m = lpd.max(axis=1, keepdims=True)
    return float(np.mean(m[:, 0] + np.log(np.exp(lpd - m) @ np.asarray(weights, dtype=np.float64))))


def chain_loo(loglik) -> tuple:
    """Each chain's PSIS-LOO log predictive density of every case from the pointwise log likelihood of its
    draws ``loglik`` (chains, draws, cases): (lpd (cases, chains), Pareto k (chains, cases)) (ArviZ's
    ``psislw`` of each chain's draws alone)."""
    az = arviz()
    loglik = np.asarray(loglik, dtype=np.float64)
    lpd, khat = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for ll in loglik:
            lw, k = az.psislw(-ll.T)                        # (cases, draws), normalised log weights
            lpd.append(special.logsumexp(ll.T + np.asarray(lw), axis=1))
            khat.append(np.asarray(k))
    return np.stack(lpd, axis=1), np.stack(khat)
