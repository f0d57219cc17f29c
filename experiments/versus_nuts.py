"""Side by side against NumPyro's NUTS on the same posteriors: the package's
default run (the GP bandit over k chains of one posterior) and NUTS with its
default adaptation, the same number of chains, the same share of warm-up, both
on all of the machine's cores; ESS of the test predictions per 1000 gradients
(every gradient each sampler computed) and per second of sampling, and whether
the two answers agree with a long NUTS reference within their Monte Carlo
standard errors. Writes docs/versus_nuts.md and docs/versus_nuts.json.

Targets (MacKay's robot arm, a 2-16-2 network on training rows 1-200, test rows
201-400):

  fixed         configs/robot_arm_fixed_hyper_bandit.yaml with the output-bias prior
                sd 10: every precision fixed, no Gibbs updates;
  hierarchical  configs/robot_arm_bandit.yaml: Neal's hierarchical priors. The
                package samples the precisions by Gibbs updates between HMC
                trajectories; NUTS samples their logs jointly with the weights
                (NumPyro's Gamma priors under its log transform, the same
                posterior, centred parameterisation).

Run: python experiments/versus_nuts.py [--targets fixed hierarchical] [--seeds 1 2 3]
     [--runs runs/versus_nuts] [--reference-draws 6000] [--quick]
Needs numpyro (pip install numpyro; never a dependency of the package). Runs
already finished in RUNS are read, not re-run (an interrupted one resumes);
NUTS results are kept in RUNS/nuts-*.npz.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"fixed": ("robot_arm_fixed_hyper_bandit.yaml", {"output_bias": {"sd": 10, "shape": float("inf")}}),
           "hierarchical": ("robot_arm_bandit.yaml", {})}
TEST = "test_201_400"
#: Storage of the package's runs here (it changes no random number): every 2nd retained sample kept, since
#: the ESS is measured on the kept draws and cannot exceed their number (at the configs' thin 200, or even
#: 20, it measures the thinning, not the chains), and a checkpoint every 50 super-transitions.
STORAGE = {"thin": 2, "checkpoint_every": 50}
QUICK = {"super_transitions": 12, "budget": 2000, "burn_in": {"super_transitions": 3}, "thin": 2,
         "checkpoint_every": 4}


def target_config(target: str, seed: int, quick: bool):
    """The config of ``target`` (:data:`TARGETS`) for ``seed``."""
    from adaptive_hmc.config import parse
    name, priors = TARGETS[target]
    path = ROOT / "configs" / name
    raw = yaml.safe_load(path.read_text())
    raw["name"] = f"versus_nuts_{target}"
    raw["model"]["priors"].update(priors)
    raw["run"].update(seed=seed, **STORAGE)
    if quick:
        raw["run"].update(QUICK)
        raw["tuner"]["bounds"]["num_steps"] = [10, 200]
        raw["tuner"]["warmup_super_transitions"] = 2
        raw["sampler"].pop("initial_phase_steps", None)
    return parse(raw, str(path)), str(path)


def ours(target: str, seed: int, runs: Path, quick: bool) -> dict:
    """The package's run (resumed or read when there): its diagnostics and its
    answer, the predictive means and sds at the test inputs with their Monte
    Carlo standard errors."""
    from adaptive_hmc.diagnostics import compute_spaced
    from adaptive_hmc.front.experiment import run_experiment
    from adaptive_hmc.rundir.finished_run import read_run
    from adaptive_hmc.rundir.results import RunDir
    cfg, source = target_config(target, seed, quick)
    d = RunDir(runs / f"ours-{target}-seed{seed}")
    if not d.is_finished:
        print(f"{'resuming' if d.has_checkpoint else 'running'} ours, {target}, seed {seed}", flush=True)
        t0 = time.perf_counter()
        run_experiment(cfg, d.path, source=source, resume=d.has_checkpoint, quiet=True)
        print(f"  {time.perf_counter() - t0:.0f} s", flush=True)
    run = read_run(d.path)
    s, sl = run.summary, dict(run.test_sets())[TEST]
    mean, sd = run.predictions[f"{TEST}/mean"], np.sqrt(run.predictions[f"{TEST}/var"])     # (N, out)
    S, rows = run.samples, run.chain_indices("full")
    X = run.predictions["X_test"][sl]
    parts = []
    for r in rows:                               # the kept draws spaced by their weights, as the diagnostics
        mine = S["chain"] == r
        F, noise = run.posterior(keep=mine).outputs_at(X)
        idx = compute_spaced(S["weight"][mine], max_draws=2 * int(mine.sum()))
        parts.append((F[idx], 1.0 / noise[idx]))
    n = min(len(f) for f, _ in parts)
    F = np.stack([f[:n] for f, _ in parts])                                  # (C, S, N, out)
    noise_var = np.stack([v[:n] for _, v in parts])                          # (C, S, out)
    m_se, s_se = _mcse(F, noise_var, mean, sd)
    diag = s["diagnostics"]["test"][TEST]
    return {"sampler": "adaptive_hmc (default)", "seed": seed, "chains": diag["chains"],
            "gradients": s["gradients"], "sampling_s": s["wall_s"], "compile_s": s["compile_s"],
            "ess_bulk": diag["ess_bulk"], "ess_tail": diag["ess_tail"], "rhat_max": s["diagnostics"]["rhat_max"],
            "per_1000": diag["ess_per_1000_gradients"], "per_s": diag["ess_per_second"],
            "divergences": s["divergences"], "acceptance": s["acceptance"],
            "test_mse": s["test_mse"][TEST], "mean": mean, "sd": sd, "mean_se": m_se, "sd_se": s_se}


def _mcse(F, noise_var, mean, sd) -> tuple:
    """Monte Carlo standard errors of the predictive means and sds from draws F
    (C, S, N, out) of the network outputs and noise variances (C, S, out):
    sd / sqrt(ESS) of f for the mean; of (f - mean)^2 + noise variance (whose
    average is the predictive variance) for the variance, and the delta
    method for the sd."""
    from adaptive_hmc.diagnostics import chain_statistics
    C, S, N, n_out = F.shape
    f = F.reshape(C, S, N * n_out)
    v = ((F - mean[None, None]) ** 2 + noise_var[:, :, None, :]).reshape(C, S, N * n_out)
    ess_f, ess_v = chain_statistics(f)["ess_bulk"], chain_statistics(v)["ess_bulk"]
    m_se = f.reshape(C * S, -1).std(axis=0) / np.sqrt(np.maximum(ess_f, 1.0))
    v_se = v.reshape(C * S, -1).std(axis=0) / np.sqrt(np.maximum(ess_v, 1.0))
    return m_se.reshape(N, n_out), (v_se.reshape(N, n_out) / (2 * sd))


# -- NUTS ----------------------------------------------------------------------------------------------------
def nuts_model(spec, priors):
    """The package's network and priors as a NumPyro model (one tanh hidden
    layer): each precision fixed or Gamma(shape alpha/2, rate alpha/(2 mu))
    (Rasmussen's parameterisation, models/priors.py), the hidden-output one
    scaled by the number of hidden units, Gaussian noise per output."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    (H,) = spec.hidden

    def precision(name, g, scale=1.0):
        if math.isinf(g.shape):
            return g.mean_precision * scale
        return numpyro.sample(name, dist.Gamma(g.shape / 2, g.shape / (2 * g.mean_precision))) * scale

    def model(X, Y):
        n_in, n_out = spec.n_inputs, spec.n_outputs
        W1 = numpyro.sample("W1", dist.Normal(0, 1 / jnp.sqrt(precision("tau_input_hidden", priors.input_hidden)))
                            .expand([n_in, H]).to_event(2))
        b1 = numpyro.sample("b1", dist.Normal(0, 1 / jnp.sqrt(precision("tau_hidden_bias", priors.hidden_bias)))
                            .expand([H]).to_event(1))
        t_ho = precision("tau_hidden_output", priors.hidden_output, H if priors.scale_hidden_output else 1.0)
        W2 = numpyro.sample("W2", dist.Normal(0, 1 / jnp.sqrt(t_ho)).expand([H, n_out]).to_event(2))
        b2 = numpyro.sample("b2", dist.Normal(0, 1 / jnp.sqrt(precision("tau_output_bias", priors.output_bias)))
                            .expand([n_out]).to_event(1))
        if math.isinf(priors.noise.shape):
            tau = jnp.full(n_out, priors.noise.mean_precision)
        else:
            g = priors.noise
            tau = numpyro.sample("tau_noise", dist.Gamma(g.shape / 2, g.shape / (2 * g.mean_precision))
                                 .expand([n_out]).to_event(1))
        f = jnp.tanh(X @ W1 + b1) @ W2 + b2
        numpyro.sample("y", dist.Normal(f, 1 / jnp.sqrt(tau)).to_event(2), obs=Y)
    return model


def nuts(target: str, seed: int, chains: int, warmup: int, draws: int, runs: Path, label: str) -> dict:
    """NUTS (NumPyro's defaults: target acceptance 0.8, diagonal mass matrix,
    tree depth 10) on ``target``, ``chains`` chains in parallel, kept in
    RUNS/nuts-{label}.npz: draws of the test outputs, gradients, timings."""
    path = runs / f"nuts-{label}.npz"
    if not path.is_file():
        import jax
        from numpyro.infer import MCMC, NUTS
        cfg, source = target_config(target, seed, False)
        split = cfg.data.cases(cfg.model.likelihood, source)
        (X, Y), (Xt, _) = split.train, split.tests[TEST]
        spec = cfg.model.spec(X.shape[1], split.n_outputs)
        model = nuts_model(spec, cfg.model.priors.prior_spec())
        print(f"NUTS {label}: {chains} chains, {warmup} + {draws} draws each", flush=True)
        t0 = time.perf_counter()       # a 2 + 2 draw run: what compiling the model costs
        tiny = MCMC(NUTS(model), num_warmup=2, num_samples=2, num_chains=chains, chain_method="parallel",
                    progress_bar=False)
        tiny.run(jax.random.PRNGKey(seed), X, Y)
        jax.block_until_ready(tiny.get_samples())
        compile_s = time.perf_counter() - t0
        mcmc = MCMC(NUTS(model), num_warmup=warmup, num_samples=draws, num_chains=chains, chain_method="parallel",
                    progress_bar=False)
        t0 = time.perf_counter()
        mcmc.warmup(jax.random.PRNGKey(seed), X, Y, extra_fields=("num_steps", "diverging"), collect_warmup=True)
        warm = jax.block_until_ready(mcmc.get_extra_fields())
        mcmc.run(mcmc.post_warmup_state.rng_key, X, Y, extra_fields=("num_steps", "diverging"))
        jax.block_until_ready(mcmc.get_samples())       # JAX dispatches asynchronously: time the work itself
        wall = time.perf_counter() - t0
        extra = mcmc.get_extra_fields()
        p = {k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()}
        F = np.tanh(Xt @ p["W1"] + p["b1"][:, :, None, :]) @ p["W2"] + p["b2"][:, :, None, :]   # (C, S, N, out)
        pri = cfg.model.priors.prior_spec().noise
        noise_var = 1 / p["tau_noise"] if "tau_noise" in p else np.full(F.shape[:2] + (F.shape[3],),
                                                                        1 / pri.mean_precision)
        np.savez(path, F=F, noise_var=noise_var,
                 gradients=int(np.sum(warm["num_steps"]) + np.sum(extra["num_steps"])),
                 divergences=int(np.sum(extra["diverging"])), wall_s=wall, compile_s=compile_s)
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def nuts_summary(z: dict, seed) -> dict:
    from adaptive_hmc.diagnostics import diagnose
    F, noise_var = z["F"], z["noise_var"]
    C, S, N, n_out = F.shape
    mean = F.mean(axis=(0, 1))
    sd = np.sqrt(F.reshape(C * S, N, n_out).var(axis=0) + noise_var.mean(axis=(0, 1)))
    m_se, s_se = _mcse(F, noise_var, mean, sd)
    seconds = max(float(z["wall_s"]) - float(z["compile_s"]), 1e-9)
    d = diagnose(F.reshape(C, S, N * n_out), float(z["gradients"]), seconds)
    return {"sampler": "NumPyro NUTS", "seed": seed, "chains": C, "gradients": int(z["gradients"]),
            "sampling_s": round(seconds, 2), "compile_s": round(float(z["compile_s"]), 2),
            "ess_bulk": d["ess_bulk"], "ess_tail": d["ess_tail"], "rhat_max": d["rhat_max"],
            "per_1000": d["ess_per_1000_gradients"], "per_s": d["ess_per_second"],
            "divergences": int(z["divergences"]), "acceptance": None, "test_mse": None,
            "mean": mean, "sd": sd, "mean_se": m_se, "sd_se": s_se}


def agreement(a: dict, ref: dict) -> dict:
    """z-scores of a's predictive means and sds against the reference's,
    with both Monte Carlo standard errors: RMS, largest, and the share of the
    test outputs within 4."""
    out = {}
    for key in ("mean", "sd"):
        z = (a[key] - ref[key]) / np.hypot(a[f"{key}_se"], ref[f"{key}_se"])
        out[key] = {"rms_z": float(np.sqrt(np.mean(z ** 2))), "max_abs_z": float(np.max(np.abs(z))),
                    "within_4": float(np.mean(np.abs(z) <= 4))}
    out["sd_ratio"] = {"min": float(np.min(a["sd"] / ref["sd"])), "median": float(np.median(a["sd"] / ref["sd"])),
                       "max": float(np.max(a["sd"] / ref["sd"]))}
    return out


def write_docs(results: dict, out: Path, quick: bool, references: dict) -> None:
    """docs/versus_nuts.md and .json from ``results`` ({target: rows}) and
    ``references`` ({target: {draws, warmup}}), keeping the targets of an
    earlier .json that this call did not run."""
    stored = out.with_suffix(".json")
    if stored.is_file():
        old = json.loads(stored.read_text())
        results = {**old.get("results", {}), **results}
        references = {**old.get("references", {}), **references}
    lines = ["# Versus NUTS", "",
             "Generated by `python experiments/versus_nuts.py`" + (" --quick (tiny runs: figures mean nothing)"
                                                                     if quick else "") + "; do not edit.", "",
             "The package's default run (the GP bandit over 8 chains of one posterior, every chain on all 200 "
             "training cases) beside NumPyro's NUTS with its default adaptation on the same posterior: 8 chains "
             "in parallel on the machine's cores, the same share of warm-up (a quarter of each chain; the "
             "package's burn-in is a quarter of its super-transitions). ESS is ArviZ's bulk ESS of the "
             f"network's outputs at the {TEST} inputs (400 outputs: 200 cases x 2), the smallest and the median "
             "over outputs; per 1000 gradients counts every gradient each sampler computed (all chains, "
             "warm-up included); per second counts sampling time (compiling apart: NUTS's is the wall time of "
             "a 2 + 2 draw run of the same model). The package keeps every 2nd retained sample for the ESS "
             "(run.thin 2; the ESS of kept draws cannot exceed their number), so its ESS is a lower bound of its "
             "answer's.", "",
             "Agreement: z = (estimate - reference) / sqrt(MCSE^2 + MCSE_ref^2) for each output's predictive "
             "mean and sd, against a long NUTS run (seed 0, 8 chains); MCSE = sd / sqrt(ESS) of the draws (for "
             "the sd, of (f - mean)^2 + noise variance, by the delta method).", ""]
    for target, rows in results.items():
        ref = references[target]
        lines += [f"## {target}", "", f"{TARGETS[target][0]}" + (" with the output-bias prior sd 10" if
                                                                    TARGETS[target][1] else "") +
                  f"; reference: {ref['draws']} NUTS draws a chain after {ref['warmup']} of warm-up.", "",
                  "| sampler | seed | chains | gradients | sampling s | compile s | ESS min / median | "
                  "ESS per 1000 grad min / median | ESS per s min / median | R-hat max | divergences | "
                  "means: RMS z, within 4 | sds: RMS z, within 4 | sd / reference sd (median) |",
                  "|" + "---|" * 14]
        for r in rows:
            ag = r.get("agreement")
            agm = f"{ag['mean']['rms_z']:.2f}, {ag['mean']['within_4']:.1%}" if ag else "-"
            ags = f"{ag['sd']['rms_z']:.2f}, {ag['sd']['within_4']:.1%}" if ag else "-"
            ratio = f"{ag['sd_ratio']['median']:.3f}" if ag else "-"
            rh = "inf" if r["rhat_max"] is None else f"{r['rhat_max']:.3f}"
            timed = r["seed"] != "reference"            # the reference's draws are used, not its timing
            lines.append(f"| {r['sampler']} | {r['seed']} | {r['chains']} | {r['gradients']:,} | "
                         + (f"{r['sampling_s']:.1f} | {r['compile_s']:.1f} | " if timed else "- | - | ")
                         + f"{r['ess_bulk']['min']:.0f} / {r['ess_bulk']['median']:.0f} | "
                         f"{r['per_1000']['min']:.3f} / {r['per_1000']['median']:.3f} | "
                         + (f"{r['per_s']['min']:.2f} / {r['per_s']['median']:.2f}" if timed else "-")
                         + f" | {rh} | {r['divergences']} | "
                         f"{agm} | {ags} | {ratio} |")
        ours_ = [r for r in rows if r["sampler"].startswith("adaptive")]
        them = [r for r in rows if r["sampler"] == "NumPyro NUTS" and r["seed"] != "reference"]
        if ours_ and them:
            lines += ["", "Ratios, package / NUTS (medians over seeds):", ""]
            for what, key in (("ESS per 1000 gradients", "per_1000"), ("ESS per second", "per_s")):
                for stat in ("min", "median"):
                    a = np.median([r[key][stat] for r in ours_])
                    b = np.median([r[key][stat] for r in them])
                    ratio = f"**{a / b:.2f}x**" if b > 0 else "- (NUTS: no effective draws)"
                    lines.append(f"- {what}, {'smallest' if stat == 'min' else 'median'} output: "
                                 f"{a:.3f} / {b:.3f} = {ratio}")
        lines.append("")
    out.write_text("\n".join(lines))
    json_rows = {t: [{k: v for k, v in r.items() if not isinstance(v, np.ndarray)} for r in rows]
                 for t, rows in results.items()}
    stored.write_text(json.dumps({"results": json_rows, "references": references}, indent=1))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--runs", type=Path, default=Path("runs/versus_nuts"))
    ap.add_argument("--reference-draws", type=int, default=6000, help="draws a chain of the NUTS reference")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "versus_nuts.md")
    ap.add_argument("--quick", action="store_true", help="tiny runs (the test suite's check that it works)")
    args = ap.parse_args(argv)
    try:
        import numpyro
    except ImportError:
        print("versus_nuts: needs numpyro (pip install numpyro)", file=sys.stderr)
        return 2
    runs = args.runs / ("quick" if args.quick else "full")
    runs.mkdir(parents=True, exist_ok=True)
    chains = {t: target_config(t, args.seeds[0], args.quick)[0].layout.k for t in args.targets}
    numpyro.set_host_device_count(max(chains.values()))    # NUTS's chains in parallel, as the package's
    results, references = {}, {}
    for target in args.targets:
        cfg, _ = target_config(target, args.seeds[0], args.quick)
        chains = cfg.layout.k
        total = cfg.run.super_transitions
        share = cfg.run.burn_in.super_transitions / total
        n_draws = 60 if args.quick else 2000
        warmup = max(int(round(n_draws * share / (1 - share))), 10)
        ref_draws = 120 if args.quick else args.reference_draws
        reference = references[target] = {"draws": ref_draws,
                                          "warmup": max(int(round(ref_draws * share / (1 - share))), 10)}
        ref = nuts_summary(nuts(target, 0, chains, reference["warmup"], ref_draws, runs, f"{target}-reference"),
                           "reference")
        rows = []
        for seed in args.seeds:
            rows.append(ours(target, seed, runs, args.quick))
            rows.append(nuts_summary(nuts(target, seed, chains, warmup, n_draws, runs, f"{target}-seed{seed}"),
                                     seed))
        for r in rows:
            r["agreement"] = agreement(r, ref)
        results[target] = rows + [ref]
        print(f"{target}: done", flush=True)
    write_docs(results, args.out, args.quick, references)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
