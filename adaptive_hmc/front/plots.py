"""Figures from a run directory (DESIGN principle 9: plots only read results).

Flow position: results -> **plots**. Runs are read through
:func:`~adaptive_hmc.rundir.finished_run.read_run`; the reward model is refitted from the
tuner's saved history (no sampling); everything else is read as saved.
"""
from __future__ import annotations

import textwrap



import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..data import robot_arm_truth  # noqa: E402
from ..diagnostics import arviz, chain_statistics  # noqa: E402
from ..rundir.metrics import MIN_KEPT, kept_per_chain, hyper_draws, log_gradients  # noqa: E402
from ..models.mlp import predict  # noqa: E402
from ..models.predictive import predicted_labels, squared_errors  # noqa: E402
from ..rundir.finished_run import Run, read_run  # noqa: E402
from ..rundir.results import PLOTS  # noqa: E402

LABELS = {"step_factor": "step factor ε", "num_steps": "trajectory length L (leapfrog steps)"}


def _who(run: Run, fig=None) -> str:
    """The run and its data, for titles, in lines that fit the width of ``fig`` (default 6.5 inches) at a title's
    font size (a long path breaks)."""
    s = run.summary
    width = int(11.5 * (fig.get_figwidth() if fig is not None else 6.5))
    return textwrap.fill(f"{run.config.name}, seed {s['seed']} ({s['data']})", width)


def _reward_name(run: Run) -> str:
    return {"esjd": "ESJD/sqrt(L)", "slowest": "slowest quantity's movement"}.get(run.config.tuner.reward,
                                                                                   "minus CV error")


def _axes(ax, tuner, name: str, which: str):
    """Label an axis of the action ``name``, on a log scale where the tuner's reward model has one."""
    getattr(ax, f"set_{which}label")(LABELS[name])
    if name in getattr(tuner, "log_axes", ()):
        getattr(ax, f"set_{which}scale")("log")


def reward_limits(log: list) -> tuple | None:
    """The y-range of the reward panel: the told rewards' 5th percentile to their largest, with a tenth of the
    span beside (the rewards of the warm-up super-transitions, which a cold start makes large and the tuner is
    not told, are left out of the range so that they do not flatten the rest); None for 10 or fewer."""
    r = np.array([e["reward"] for e in log if e.get("told") is not None and e["reward"] is not None], float)
    r = r[np.isfinite(r)]
    if r.size <= 10:
        return None
    lo, hi = np.percentile(r, 5), r.max()
    return lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo)


def reward_surface(run: Run, path):
    """Learned mean reward over (eps, L), tried actions as dots (thesis Figs 4.1, 4.4)."""
    t = run.tuner()
    g = t.grid(60)
    fig, ax = plt.subplots(figsize=(6.5, 5))
    # Colours span the 10th percentile of the told rewards to the top, so that a
    # few very poor rewards (a chain still leaving its start) do not flatten the rest.
    rewards = np.array([h["reward"] for h in t.history])
    lo, hi = np.percentile(rewards, 10), max(rewards.max(), g["mean"].max())
    cs = ax.contourf(g["axes"][0], g["axes"][1], np.clip(g["mean"].T, lo, None), levels=np.linspace(lo, hi, 21),
                     cmap="viridis", extend="min")
    fig.colorbar(cs, ax=ax, label=f"GP mean reward ({_reward_name(run)})", format="%.4g")
    tried = np.array([[h["action"]["step_factor"], h["action"]["num_steps"]] for h in t.history])
    ax.scatter(tried[:, 0], tried[:, 1], s=12, c="white", edgecolors="black", linewidths=0.5, label="tried actions")
    best = t.best_action(tried_only=True)
    ax.scatter([best["step_factor"]], [best["num_steps"]], marker="*", s=160, c="red", label="best tried")
    _axes(ax, t, "step_factor", "x")
    _axes(ax, t, "num_steps", "y")
    ax.set_title(f"Reward model as the tuner ends, after {len(t.history)} rewards\n{_who(run)}", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=8)     # below: never over a point
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def reward_slice(run: Run, path):
    """GP mean +- 1 sd of the reward along eps at the best tried L, and the
    acquisition below it (thesis Figs 4.2, 4.6)."""
    t = run.tuner()
    best = t.best_action(tried_only=True)
    eps = t.space.dimension("step_factor").axis(300)
    A = np.column_stack([eps, np.full_like(eps, best["num_steps"])])
    m, s = t.predict(A)
    u = t.acquisition(A)
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(6.5, 6), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    a1.plot(eps, m, color="C0", label="GP mean")
    a1.fill_between(eps, m - s, m + s, color="C0", alpha=0.25, label="± 1 sd")
    near = [h for h in t.history if h["action"]["num_steps"] == best["num_steps"]]
    if near:
        a1.scatter([h["action"]["step_factor"] for h in near], [h["reward"] for h in near], s=10, c="k",
                   label="rewards at this L")
    a1.set_ylabel(f"reward ({_reward_name(run)})")
    a1.set_title(f"Slice at L = {best['num_steps']}\n{_who(run)}", fontsize=10)
    a1.legend(fontsize=8)
    a2.plot(eps, u, color="C3")
    a2.set_ylabel("acquisition ū")
    _axes(a2, t, "step_factor", "x")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def running_errors(run: Run) -> tuple:
    """(gradients, {test set: error}): the test error of the running model
    average of the predicting chains (``replicas.predict_from``, so the last
    is the summary's test error) at the end of each super-transition with
    retained samples, against the gradients the run had computed by then
    (every chain, warm-up and burn-in included)."""
    rows = run.chain_indices(run.config.layout.predict_from)
    P, C = run.predictions["history_pred"][:, rows], run.predictions["history_count"][:, rows]
    Y = run.predictions["Y_test"]
    cum_p = np.cumsum(P.sum(axis=1), axis=0)                  # (S, out, N)
    cum_c = np.cumsum(C.sum(axis=1))
    ok = cum_c > 0
    out = {}
    for name, cases in run.test_sets():
        mean = cum_p[ok][:, :, cases] / cum_c[ok][:, None, None]      # (S, out, N)
        y = Y[cases]
        if run.likelihood == "gaussian":
            out[name] = np.mean(squared_errors(np.transpose(mean, (0, 2, 1)), y), axis=1)
        else:
            out[name] = np.mean(predicted_labels(mean) != y[:, 0].astype(int), axis=1)
    return np.cumsum(log_gradients(run.log))[:len(cum_c)][ok], out


def running_error(run: Run, path):
    """The running test error of :func:`running_errors` (thesis Fig 4.3, whose
    axis counts samples; here the cost, since samples of different L cost
    differently)."""
    grads, errors = running_errors(run)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    gaussian = run.likelihood == "gaussian"
    for name, err in errors.items():
        ax.plot(grads, err, label=name, drawstyle="default" if gaussian else "steps-post")
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(matplotlib.ticker.EngFormatter())
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("gradients computed (every chain, warm-up and burn-in included)")
    ax.set_ylabel("test mean squared error" if gaussian else "test error rate")
    ax.set_title(f"Test error of the running model average of the {run.config.layout.predict_from!r} "
                 f"chains\n{_who(run)}", fontsize=10)
    if not gaussian:
        ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(6))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


#: Bins of the reliability diagram (equal widths of the predicted class's probability).
CALIBRATION_BINS = 10


def calibration_bins(P, y, bins: int = CALIBRATION_BINS) -> tuple:
    """(mean confidence, accuracy, cases) of each non-empty bin of the predicted class's probability
    (the largest of each row of ``P``, N x K) among ``bins`` equal-width bins, with the labels ``y``; and
    the expected calibration error, the bins' |accuracy - confidence| weighted by their cases."""
    conf = P.max(axis=1)
    right = P.argmax(axis=1) == y
    b = np.minimum((conf * bins).astype(int), bins - 1)
    used = np.unique(b)
    c = np.array([conf[b == k].mean() for k in used])
    a = np.array([right[b == k].mean() for k in used])
    n = np.array([(b == k).sum() for k in used])
    return c, a, n, float(np.sum(np.abs(a - c) * n) / len(y))


def hyper_rhats(run: Run) -> tuple:
    """({hyperparameter name: R-hat of its log}, which draws) across the predicting chains after the
    burn-in, from the draws summary.json's diagnostics use (:func:`~adaptive_hmc.rundir.metrics.hyper_draws`:
    the kept samples, as the export holds them, or each super-transition's last
    sample when too few were kept)."""
    burn = run.config.run.burn_in.super_transitions
    rows = run.chain_indices(run.config.layout.predict_from)
    names = [str(n) for n in run.predictions["hyper_names"]]
    h, varying = hyper_draws(run.samples, rows, run.predictions["history_hyper"][burn:], names)
    if h.ndim != 3 or h.shape[1] < 4 or len(rows) < 2:
        return {}, "too few draws"
    kind = ("the kept draws, as summary.json and the export" if kept_per_chain(run.samples, rows) >= MIN_KEPT
            else "each super-transition's last draw, as summary.json")
    return dict(zip(varying, chain_statistics(h)["rhat"])), kind


def predictive_check(run: Run, path):
    """The model average on each test set against what was observed: for
    regression each case's observed target against its predictive mean with
    the central interval of the predictive (the share of cases inside it
    beside the nominal level), for classification a reliability diagram
    (accuracy against the predicted class's probability in
    :data:`CALIBRATION_BINS` bins, with the expected calibration error)."""
    P, sets = run.predictions, [(n, sl) for n, sl in run.test_sets() if f"{n}/mean" in run.predictions]
    if not sets:
        return False
    gaussian = run.likelihood == "gaussian"
    n_out = P["Y_test"].shape[1] if gaussian else 1
    fig, axes = plt.subplots(n_out, len(sets), figsize=(4.8 * len(sets), 4 * n_out), squeeze=False)
    for j, (name, cases) in enumerate(sets):
        Y = P["Y_test"][cases]
        for o in range(n_out):
            ax = axes[o, j]
            if gaussian:
                mean, lo, hi = (P[f"{name}/{f}"][:, o] for f in ("mean", "lower", "upper"))
                y = Y[:, o]
                inside = np.mean((y >= lo) & (y <= hi))
                ax.errorbar(mean, y, xerr=[mean - lo, hi - mean], fmt="o", ms=2.5, lw=0.5, alpha=0.6,
                            color="tab:blue", ecolor="tab:gray")
                ends = [min(mean.min(), y.min()), max(mean.max(), y.max())]
                ax.plot(ends, ends, color="black", lw=0.8)
                ax.set_xlabel(f"predictive mean ({run.input_map.target_names[o]})"
                              if len(run.input_map.target_names) == n_out else f"predictive mean, output {o}")
                ax.set_ylabel("observed")
                ax.set_title(f"{name}: {inside:.0%} of {len(y)} inside the 95% interval", fontsize=9)
            else:
                c, a, n, ece = calibration_bins(P[f"{name}/mean"], Y[:, 0].astype(int))
                ax.plot([0, 1], [0, 1], color="black", lw=0.8, label="calibrated")
                ax.plot(c, a, "o-", color="tab:blue", label="this run")
                for x, v, k in zip(c, a, n):
                    ax.annotate(str(k), (x, v), textcoords="offset points", xytext=(0, 5), fontsize=7, ha="center")
                lo = min(0.0, float(c.min()) - 0.05) if len(c) else 0.0
                ax.set_xlim(lo, 1.02)
                ax.set_ylim(lo, 1.02)
                ax.set_xlabel("probability of the predicted class (bin mean; cases above)")
                ax.set_ylabel("accuracy")
                ax.set_title(f"{name}: expected calibration error {ece:.3f}", fontsize=9)
                ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"Test predictions of the {run.config.layout.predict_from!r} chains\n{_who(run, fig)}",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def traces(run: Run, path):
    """Actions, rewards and acceptance over super-transitions."""
    log = run.log
    i = [e["i"] + 1 for e in log]
    fig, ax = plt.subplots(4, 1, figsize=(6.5, 8), sharex=True)
    ax[0].plot(i, [e["step_factor"] for e in log], ".-", ms=3)
    ax[0].set_ylabel("ε")
    saved = run.tuner_state.get("options", run.tuner_state)         # read, not rebuilt: any kind of tuner
    if "step_factor" in (saved.get("log_axes") or ()):              # the axis the tuner works on
        ax[0].set_yscale("log")
    ax[1].plot(i, [e["num_steps"] for e in log], ".-", ms=3)
    ax[1].set_ylabel("L")
    r = np.array([np.nan if e["reward"] is None else e["reward"] for e in log])
    ax[2].plot(i, r, ".", ms=3)
    ax[2].set_ylabel("reward")
    limits = reward_limits(log)
    if limits is not None:
        ax[2].set_ylim(*limits)
    ax[3].plot(i, [np.mean(e["acceptance"]) for e in log], ".", ms=3)
    ax[3].set_ylabel("acceptance")
    ax[3].set_ylim(-0.02, 1.02)
    ax[3].set_xlabel("super-transition")
    warm, burn = run.config.tuner.warmup_super_transitions, run.config.run.burn_in.super_transitions
    for a in ax:
        if burn:
            a.axvspan(0.5, burn + 0.5, color="0.85", zorder=0)
        if warm:
            a.axvline(warm + 0.5, color="C3", lw=0.8, ls="--")
    ax[0].text(0.01, 0.95, "grey: burn-in (left out of predictions); dashed: end of warm-up (rewards told after)",
               transform=ax[0].transAxes, fontsize=7, va="top")
    fig.suptitle(f"Actions, rewards and acceptance\n{_who(run)}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def hyperparameters(run: Run, path, most: int = 6):
    """Each chain's log hyperparameters over super-transitions (the last
    sample of each), the ``most`` that vary whose chains disagree most,
    with the R-hat of each across the predicting chains after the burn-in
    (:func:`hyper_rhats`: the very figures of summary.json): where chains sit
    at different values, R-hat is high."""
    H = np.asarray(run.predictions["history_hyper"], dtype=float)          # (S, R, H)
    names = [str(n) for n in run.predictions["hyper_names"]]
    if H.ndim != 3 or not H.size:
        return False
    logs = np.log(H)
    varying = [h for h in range(H.shape[2]) if np.ptp(logs[:, :, h]) > 0]
    if not varying:
        return False
    burn = run.config.run.burn_in.super_transitions
    rows = run.chain_indices(run.config.layout.predict_from)
    by_name, draws = hyper_rhats(run)
    rhat = np.array([by_name.get(names[h], np.nan) for h in varying])
    order = np.argsort(np.where(np.isfinite(rhat), -rhat, np.inf), kind="stable")[:most]
    i = np.arange(1, H.shape[0] + 1)
    d = run.summary.get("diagnostics") or {}
    own = dict(zip([int(r) for r in rows], (d.get("within_chain") or {}).get("hyper") or []))

    def label(r):
        if r not in rows:
            return f"{run.chain_role(r)} (not predicting)"
        v = own.get(r, "")
        return f"{run.chain_role(r)}" + ("" if v == "" else f", own R-hat {'-' if v is None else f'{v:.3f}'}")
    fig, axes = plt.subplots(len(order), 1, figsize=(6.5, 1.6 + 1.5 * len(order)), sharex=True, squeeze=False)
    for ax, o in zip(axes[:, 0], order):
        h = varying[o]
        for r in range(H.shape[1]):
            ax.plot(i, logs[:, r, h], lw=0.8, label=label(r), ls="-" if r in rows else ":")
        ax.set_ylabel(f"log {names[h]}", fontsize=8)
        ax.set_title(f"R-hat {rhat[o]:.3f}" if np.isfinite(rhat[o]) else "R-hat -", fontsize=8, loc="right")
        if burn:
            ax.axvspan(0.5, burn + 0.5, color="0.85", zorder=0)
    axes[0, 0].legend(fontsize=6, ncol=2, loc="upper left")
    axes[-1, 0].set_xlabel("super-transition (each chain's last sample)")
    case = {"met": "the chains met", "moving": "the chains are still moving",
            "apart": "each chain settled, apart from the others"}.get(d.get("verdict"), "")
    fig.suptitle(textwrap.fill(f"Log hyperparameters of each chain ({len(order)} of {len(varying)} varying, "
                               f"largest R-hat first; grey: burn-in; R-hat of {draws}; own R-hat: each chain's "
                               f"halves{'; ' + case if case else ''})", 80) + f"\n{_who(run)}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def robot_arm_outputs(run: Run, path, train_box=((-1.932, -0.453), (0.534, 3.142)), n_nets=40):
    """Output space of the robot arm (Neal 1992 Fig 5): the image of the
    training input region outlined, true noise-free outputs for a grid of
    inputs (circles), outputs of sampled networks (dots)."""
    mine = np.isin(run.samples["chain"], run.chain_indices(run.config.layout.predict_from))
    Q, spec = run.samples["weights"][mine], run.spec                 # the predicting chains' samples
    (a0, a1), (b0, b1) = train_box
    fig, ax = plt.subplots(figsize=(6.5, 6.5))
    edge = np.concatenate([np.column_stack([np.linspace(a0, a1, 50), np.full(50, b0)]),
                           np.column_stack([np.full(50, a1), np.linspace(b0, b1, 50)]),
                           np.column_stack([np.linspace(a1, a0, 50), np.full(50, b1)]),
                           np.column_stack([np.full(50, a0), np.linspace(b1, b0, 50)])])
    e = robot_arm_truth(edge)
    ax.plot(e[:, 0], e[:, 1], "k-", lw=1, label="training region")
    g1, g2 = np.meshgrid(np.linspace(a0 - 0.6, a1 + 0.6, 6), np.linspace(b0 - 0.6, b1 + 0.4, 6))
    grid = np.column_stack([g1.ravel(), g2.ravel()])
    truth = robot_arm_truth(grid)
    if len(Q):
        pick = Q[np.linspace(0, len(Q) - 1, min(n_nets, len(Q))).astype(int)]
        F = predict(spec, pick, grid)                           # (S, G, 2)
        ax.scatter(F[:, :, 0].ravel(), F[:, :, 1].ravel(), s=2, c="C0", alpha=0.5, label="sampled networks")
    ax.scatter(truth[:, 0], truth[:, 1], s=60, facecolors="none", edgecolors="C3", label="true outputs")
    ax.set_xlabel("output 1 (x position)")
    ax.set_ylabel("output 2 (y position)")
    ax.set_aspect("equal")
    ax.set_title(f"Robot arm: predictions inside and outside the training region\n{_who(run)}", fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def density_traces(run, path, most: int = 6):
    """A density run (:class:`~adaptive_hmc.rundir.finished_run.DensityRun`): the tuner's actions, rewards
    and acceptance over super-transitions, and each chain's draws of the ``most`` scalar parameters whose
    chains disagree most (largest R-hat, as in summary.json)."""
    idata, log = run.inference_data(), run.log
    rhat = arviz().rhat(idata)
    scalars = [(float(rhat[v].values[i]), v, i) for v in rhat.data_vars
               for i in np.ndindex(rhat[v].shape)]
    scalars.sort(key=lambda t: -t[0] if np.isfinite(t[0]) else np.inf)
    shown = scalars[:most]
    fig, ax = plt.subplots(3 + len(shown), 1, figsize=(6.5, 5 + 1.4 * len(shown)))
    i = np.arange(1, len(log) + 1)
    ax[0].plot(i, [e["step_factor"] for e in log], ".-", ms=3)
    ax[0].set_ylabel("step factor")
    ax[1].plot(i, [e["num_steps"] for e in log], ".-", ms=3)
    ax[1].set_ylabel("L")
    ax[2].plot(i, [np.mean(e["acceptance"]) for e in log], ".", ms=3)
    ax[2].set_ylabel("acceptance")
    ax[2].set_xlabel("super-transition")
    post = idata.posterior
    for a, (r, v, idx) in zip(ax[3:], shown):
        x = post[v].values[(slice(None), slice(None)) + idx]             # (chains, draws)
        step = max(1, x.shape[1] // 2000)
        for c in range(x.shape[0]):
            a.plot(np.arange(0, x.shape[1], step), x[c, ::step], lw=0.5, label=f"chain {c}")
        a.set_ylabel(f"{v}{list(idx) if idx else ''}", fontsize=8)
        a.set_title(f"R-hat {r:.3f}", fontsize=8, loc="right")
    if shown:
        ax[3].legend(fontsize=7, ncol=4, loc="upper left")
        ax[-1].set_xlabel("draw after warm-up")
    fig.suptitle(f"Tuner and chains of the density run {run.dir.name}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_run(d) -> list:
    """Write every figure that applies to run ``d`` into ``d/plots``; returns the paths."""
    run = read_run(d)
    out = run.dir / PLOTS
    if not run.network:
        out.mkdir(exist_ok=True)
        density_traces(run, out / "traces.png")
        return [out / "traces.png"]
    out.mkdir(exist_ok=True)
    jobs = [("traces.png", traces), ("hyperparameters.png", hyperparameters)]
    if run.predictions["history_count"].sum() > 0 and run.test_sets():
        jobs += [("running_error.png", running_error), ("predictive_check.png", predictive_check)]
    if run.tuner_state["kind"] == "bandit":
        jobs += [("reward_surface.png", reward_surface), ("reward_slice.png", reward_slice)]
    if run.config.data.dataset == "robot_arm":
        jobs.append(("robot_arm_outputs.png", robot_arm_outputs))
    paths = []
    for name, fn in jobs:
        if fn(run, out / name) is not False:          # False: nothing to draw (no hyperparameter varies)
            paths.append(out / name)
    return paths
