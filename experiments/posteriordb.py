"""posteriordb's reference posteriors, sampled as user log densities with the
package's defaults (no hand-set step or L) and with NumPyro's NUTS on the same
log densities (written in JAX here), each checked against the reference draws
nobody here computed: per posterior the largest |z| of the means and sds
(z from both Monte Carlo standard errors: ours from ArviZ's ESS, the
reference's from posteriordb), the largest R-hat, divergences, and the
smallest bulk ESS over the parameters per second (warm-up and sampling,
compiling apart) and per 1000 gradients (every gradient, warm-up included).
The centred eight schools (the funnel) runs too, against the non-centred
reference, with its log(tau). With --docs it writes docs/posteriordb.md and
.json, with --out PATH the table to PATH (and PATH's .json); else it prints.

Run: python experiments/posteriordb.py [--posteriors ...] [--seeds 1 2] [--chains 4] [--no-nuts]
     [--quick] [--docs | --out PATH]
--quick: two posteriors, short runs (the test's form; never the docs). NUTS needs numpyro
(pip install numpyro; never a dependency of the package); without it, or with
--no-nuts, its rows are left out.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
QUICK = dict(posteriors=["eight_schools_noncentered", "blr"], warmup=300, super_transitions=6, budget=500,
             nuts_warmup=300, nuts_draws=300)
FULL = dict(warmup=1000, super_transitions=40, budget=None, nuts_warmup=1000, nuts_draws=1000)   # both defaults


def jax_density(name: str):
    """The log density of posterior ``name`` over the same unconstrained
    coordinates, in JAX (for NumPyro's potential_fn)."""
    import jax.numpy as jnp
    from jax.scipy.linalg import solve_triangular  # noqa: F401 - kept for readers comparing with MODEL.md

    from adaptive_hmc.models import posteriordb as pdb
    d = pdb.load(name)
    if name.startswith("eight_schools"):
        y, sigma = jnp.asarray(d["data/y"], float), jnp.asarray(d["data/sigma"], float)
        J = y.size

        def lp(q):
            a, mu, v = q[:J], q[J], q[J + 1]
            tau = jnp.exp(v)
            if name.endswith("noncentered"):
                theta = mu + tau * a
                prior = -0.5 * jnp.sum(a ** 2)
            else:
                theta = a
                prior = jnp.sum(-v - 0.5 * (a - mu) ** 2 / tau ** 2)
            return (prior - 0.5 * jnp.sum((y - theta) ** 2 / sigma ** 2) - mu ** 2 / 50
                    - jnp.log1p(tau ** 2 / 25) + v)
        return lp
    if name == "arK":
        y, K = jnp.asarray(d["data/y"], float), int(d["data/K"])
        T = y.size
        lags = jnp.stack([y[K - k - 1:T - k - 1] for k in range(K)], axis=1)

        def lp(q):
            alpha, beta, s = q[0], q[1:K + 1], q[K + 1]
            r = y[K:] - alpha - lags @ beta
            return (-alpha ** 2 / 200 - jnp.sum(beta ** 2) / 200 - jnp.log1p(jnp.exp(2 * s) / 6.25) + s
                    - (T - K) * s - jnp.sum(r ** 2) / (2 * jnp.exp(2 * s)))
        return lp
    if name == "garch11":
        import jax
        y, s1 = jnp.asarray(d["data/y"], float), float(d["data/sigma1"])

        def lp(q):
            mu, a0 = q[0], jnp.exp(q[1])
            l3, l4 = jax.nn.sigmoid(q[2]), jax.nn.sigmoid(q[3])
            a1, b1 = l3, (1 - l3) * l4

            def step(s2, prev):
                s2 = a0 + a1 * (prev - mu) ** 2 + b1 * s2
                return s2, s2
            _, rest = jax.lax.scan(step, s1 ** 2, y[:-1])
            s2 = jnp.concatenate([jnp.array([s1 ** 2]), rest])
            ll = jnp.sum(-0.5 * jnp.log(s2) - 0.5 * (y - mu) ** 2 / s2)
            return ll + q[1] + jnp.log(l3) + jnp.log1p(-l3) + jnp.log1p(-a1) + jnp.log(l4) + jnp.log1p(-l4)
        return lp
    if name in ("logmesquite", "blr"):
        if name == "logmesquite":
            cols = [np.ones(int(d["data/N"]))] + [np.log(d[f"data/{k}"]) for k in
                                                  ("diam1", "diam2", "canopy_height", "total_height", "density")]
            Z, t = jnp.asarray(np.column_stack(cols + [d["data/group"]])), jnp.asarray(np.log(d["data/weight"]))
            prec, sprec = 0.0, 0.0
        else:
            Z, t, prec, sprec = jnp.asarray(d["data/X"], float), jnp.asarray(d["data/y"], float), 0.01, 0.01
        N, P = Z.shape

        def lp(q):
            beta, s = q[:P], q[P]
            r = t - Z @ beta
            return (-0.5 * prec * jnp.sum(beta ** 2) - 0.5 * sprec * jnp.exp(2 * s) + s - N * s
                    - jnp.sum(r ** 2) / (2 * jnp.exp(2 * s)))
        return lp
    if name == "gp_pois_regr":
        x, k = jnp.asarray(d["data/x"], float), jnp.asarray(d["data/k"], float)
        N = x.size
        D2 = (x[:, None] - x[None, :]) ** 2

        def lp(q):
            a, c, ft = q[0], q[1], q[2:]
            K = jnp.exp(2 * c) * jnp.exp(-0.5 * D2 / jnp.exp(2 * a)) + 1e-10 * jnp.eye(N)
            f = jnp.linalg.cholesky(K) @ ft
            return (25 * a - 4 * jnp.exp(a) - jnp.exp(2 * c) / 8 + c - 0.5 * jnp.sum(ft ** 2)
                    + jnp.sum(k * f - jnp.exp(f)))
        return lp
    if name == "diamonds":
        X, Y = np.asarray(d["data/X"], float), np.asarray(d["data/Y"], float)
        Xc = jnp.asarray(X[:, 1:] - X[:, 1:].mean(axis=0))
        Y = jnp.asarray(Y)
        N, P = Xc.shape

        def lp(q):
            b, icpt, s = q[:P], q[P], q[P + 1]
            r = Y - icpt - Xc @ b
            return (-0.5 * jnp.sum(b ** 2) - 2 * jnp.log1p((icpt - 8) ** 2 / 300) - 2 * jnp.log1p(jnp.exp(2 * s) / 300)
                    + s - N * s - jnp.sum(r ** 2) / (2 * jnp.exp(2 * s)))
        return lp
    raise ValueError(name)


def score(name: str, draws: dict, reference: dict) -> dict:
    """Agreement of ``draws`` {parameter: (chains, n)} with the reference, and mixing."""
    import arviz as az
    zm, zs, rhat, ess = [], [], [], []
    for p, (rm, rs, rmm, rms) in reference.items():
        x = np.asarray(draws[p])
        m, s = x.mean(), x.std(ddof=1)
        e = float(az.ess(x))
        d2 = (x - m) ** 2
        mcse_sd = d2.std(ddof=1) / math.sqrt(float(az.ess(d2))) / (2 * s)
        zm.append((m - rm) / math.hypot(s / math.sqrt(e), rmm))
        zs.append((s - rs) / math.hypot(mcse_sd, rms))
        rhat.append(float(az.rhat(x)))
        ess.append(e)
    worst = int(np.argmin(ess))
    out = dict(z_mean=float(np.max(np.abs(zm))), z_sd=float(np.max(np.abs(zs))), rhat=float(np.max(rhat)),
               ess_min=float(ess[worst]), ess_min_parameter=list(reference)[worst])
    if name == "eight_schools_centered":
        lt = np.log(np.asarray(draws["tau"])).ravel()
        out["log_tau"] = dict(mean=float(lt.mean()), sd=float(lt.std(ddof=1)), q05=float(np.quantile(lt, 0.05)))
    return out


def run_ours(name: str, seed: int, chains: int, cfg: dict) -> dict:
    from adaptive_hmc.front.general import sample
    from adaptive_hmc.models import posteriordb as pdb
    p = pdb.posterior(name)
    idata = sample(p.logp_grad, p.initial(np.random.default_rng(seed), chains), constrain=p.constrain, seed=seed,
                   warmup=cfg["warmup"], super_transitions=cfg["super_transitions"], budget=cfg["budget"])
    seconds = idata.attrs["warmup_seconds"] + idata.attrs["sampling_seconds"]
    row = score(name, {k: idata.posterior[k].values for k in p.parameters}, pdb.reference(name))
    row.update(sampler="adaptive_hmc", seed=seed, seconds=seconds, compile_s=idata.attrs["compile_seconds"],
               gradients=int(idata.attrs["gradients"]), divergences=int(idata.sample_stats.diverging.values.sum()),
               draws=int(idata.posterior.sizes["draw"]), budget=int(idata.attrs["budget"]),
               num_steps_bounds=[int(v) for v in idata.attrs["num_steps_bounds"]])
    return row


def run_nuts(name: str, seed: int, chains: int, cfg: dict) -> dict:
    import jax
    from numpyro.infer import MCMC, NUTS

    from adaptive_hmc.models import posteriordb as pdb
    p = pdb.posterior(name)
    lp = jax_density(name)

    def potential(q):
        return -lp(q)
    init = jax.numpy.asarray(p.initial(np.random.default_rng(seed), chains))

    def mcmc(warmup, draws):
        return MCMC(NUTS(potential_fn=potential), num_warmup=warmup, num_samples=draws, num_chains=chains,
                    chain_method="parallel", progress_bar=False)
    t0 = time.perf_counter()                             # a 2 + 2 draw run: what compiling costs
    tiny = mcmc(2, 2)
    tiny.run(jax.random.PRNGKey(seed), init_params=init)
    jax.block_until_ready(tiny.get_samples())
    compile_s = time.perf_counter() - t0
    m = mcmc(cfg["nuts_warmup"], cfg["nuts_draws"])
    t0 = time.perf_counter()
    m.warmup(jax.random.PRNGKey(seed), init_params=init, extra_fields=("num_steps",), collect_warmup=True)
    warm = jax.block_until_ready(m.get_extra_fields())
    m.run(m.post_warmup_state.rng_key, extra_fields=("num_steps", "diverging"))
    jax.block_until_ready(m.get_samples())
    seconds = time.perf_counter() - t0
    extra = m.get_extra_fields(group_by_chain=True)
    Q = np.asarray(m.get_samples(group_by_chain=True))                 # (chains, draws, dim)
    C, S, D = Q.shape
    draws = {k: v.reshape(C, S) for k, v in p.constrain(Q.reshape(C * S, D)).items()}
    row = score(name, draws, pdb.reference(name))
    row.update(sampler="NumPyro NUTS", seed=seed, seconds=seconds, compile_s=compile_s,
               gradients=int(np.sum(warm["num_steps"]) + np.sum(extra["num_steps"])),
               divergences=int(np.sum(extra["diverging"])), draws=S)
    return row


def markdown(rows: list, cfg: dict, chains: int, wall: float, command: str) -> str:
    lines = ["# posteriordb: user log densities against reference posteriors", "",
             f"Command: `{command}` ({wall / 60:.1f} min on this machine's 2 cores).", "",
             "Each posterior of posteriordb (Magnusson, Bürkner & Vehtari; reference draws from long Stan NUTS runs, "
             "shipped in `adaptive_hmc/datasets/posteriordb`) written as a user log density "
             "(`adaptive_hmc/models/posteriordb.py`) and sampled by `adaptive_hmc.front.general.sample` with its defaults "
             f"({chains} chains, {cfg['warmup']} warm-up iterations adapting a diagonal metric and a reference step, "
             f"then {cfg['super_transitions']} super-transitions of "
             + (f"{cfg['budget']}" if cfg["budget"] else "the default budget of") + " leapfrog steps per chain at the "
             "bandit's actions; the budget and L's bounds of each run are in the .json), and by NumPyro's NUTS on the same log density written in JAX "
             f"({chains} chains, {cfg['nuts_warmup']} warm-up + {cfg['nuts_draws']} draws, its defaults). "
             "z: (estimate - reference) / sqrt(MCSE^2 + reference MCSE^2), the largest |z| over the parameters, "
             "for the means and for the sds; ESS: the smallest bulk ESS over the parameters (ArviZ), per second of "
             "warm-up and sampling (compiling apart) and per 1000 gradients (warm-up included). "
             "The centred eight schools is the funnel; its answer is the non-centred reference.", "",
             "| posterior | sampler | seed | max abs z (mean) | max abs z (sd) | max R-hat | min ESS | ESS/s | "
             "ESS/1000 grad | divergences | seconds | compile s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['posterior']} | {r['sampler']} | {r['seed']} | {r['z_mean']:.2f} | {r['z_sd']:.2f} | "
                     f"{r['rhat']:.3f} | {r['ess_min']:.0f} ({r['ess_min_parameter']}) | "
                     f"{r['ess_min'] / r['seconds']:.0f} | {1000 * r['ess_min'] / r['gradients']:.2f} | "
                     f"{r['divergences']} | {r['seconds']:.1f} | {r['compile_s']:.1f} |")
    funnel = [r for r in rows if "log_tau" in r]
    if funnel:
        lines += ["", "Centred eight schools, log(tau) (reference: mean 0.808, sd 1.174, q05 -1.360):", ""]
        for r in funnel:
            lt = r["log_tau"]
            lines.append(f"- {r['sampler']}, seed {r['seed']}: mean {lt['mean']:.3f}, sd {lt['sd']:.3f}, "
                         f"q05 {lt['q05']:.3f}, {r['divergences']} divergent trajectories")
    return "\n".join(lines) + "\n"


def main(argv=None):
    from adaptive_hmc.models import posteriordb as pdb
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--posteriors", nargs="+", choices=pdb.NAMES)
    ap.add_argument("--seeds", nargs="+", type=int, default=[1])
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--no-nuts", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--docs", action="store_true", help="write docs/posteriordb.md and .json")
    ap.add_argument("--out", type=Path, help="write the table here (and its .json beside it)")
    args = ap.parse_args(argv)
    if args.docs and (args.quick or args.out):
        ap.error("--docs writes the full runs' table to docs/: not with --quick or --out")
    out = ROOT / "docs" / "posteriordb.md" if args.docs else args.out
    cfg = dict(QUICK if args.quick else FULL)
    names = args.posteriors or cfg.pop("posteriors", None) or list(pdb.NAMES)
    cfg.pop("posteriors", None)
    nuts = not args.no_nuts and importlib.util.find_spec("numpyro") is not None
    if not nuts and not args.no_nuts:
        print("numpyro is not installed: NUTS rows left out", file=sys.stderr)
    if nuts:
        import numpyro
        numpyro.set_host_device_count(args.chains)
        import jax
        jax.config.update("jax_enable_x64", True)
    t0 = time.perf_counter()
    rows = []
    for name in names:
        for seed in args.seeds:
            for run in ([run_ours, run_nuts] if nuts else [run_ours]):
                r = dict(run(name, seed, args.chains, cfg), posterior=name)
                rows.append(r)
                print(f"{name} {r['sampler']} seed {seed}: |z| {r['z_mean']:.2f}/{r['z_sd']:.2f} R-hat "
                      f"{r['rhat']:.3f} ESS {r['ess_min']:.0f} in {r['seconds']:.1f} s", flush=True)
    wall = time.perf_counter() - t0
    command = "python experiments/posteriordb.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(rows, cfg, args.chains, wall, command.strip())
    if out is None:
        print(text)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    out.with_suffix(".json").write_text(json.dumps(dict(config=cfg, chains=args.chains, rows=rows), indent=1))
    print(f"wrote {out} ({wall:.0f} s)")


if __name__ == "__main__":
    main()
