"""Comparison tables of finished runs: test errors with paired verdicts,
convergence and cost.

Flow position: results -> **reports**. Reads runs through
:func:`~adaptive_hmc.rundir.finished_run.read_run` only; never samples.
"""
from __future__ import annotations

import json
import textwrap

import numpy as np

from ..diagnostics import RHAT_LIMIT
from ..models.predictive import predicted_labels, squared_errors, standard_error
from ..rundir.metrics import run_diagnostics
from ..rundir.finished_run import Run, read_run
from ..rundir.results import RunDir, RunError


def diagnostics(run: Run) -> dict:
    """The run's multi-chain diagnostics (summary.json's ``diagnostics``:
    :func:`~adaptive_hmc.rundir.metrics.run_diagnostics`), computed from the run
    directory for a summary written without them."""
    if "diagnostics" in run.summary:
        return run.summary["diagnostics"]
    chains = run.config.layout.predict_from
    return run_diagnostics(run.spec, run.samples, run.chain_indices(chains), chains, run.predictions,
                           dict(run.test_sets()), run.predictions["history_hyper"],
                           run.summary.get("gradients", run.summary["leapfrog_steps"]), run.summary["wall_s"])


def case_errors(run: Run, chains: str | None = None) -> dict:
    """{test set: error of each case} of the model average of ``chains``
    ("all", "full", "replicas"; default the run's ``cv.predict_from``, or its chains,
    whose averages its summary reports): squared error summed over outputs in
    the targets' original units (regression), or 0/1 (classification)."""
    P, Y = run.predictions, run.predictions["Y_test"]
    if chains is not None:
        rows = run.chain_indices(chains)
        n = P["history_count"][:, rows].sum()
        if n == 0:
            return {}
        mean = P["history_pred"][:, rows].sum(axis=(0, 1)) / n                       # (out, N)
    out = {}
    for name, cases in run.test_sets():
        if chains is None:
            if f"{name}/mean" not in P:                                             # nothing retained
                return {}
            m = P[f"{name}/mean"]                                                   # (N, out) or probabilities (N, K)
            label = m.argmax(axis=1) if run.likelihood != "gaussian" else None
        else:
            m = mean[:, cases].T
            label = predicted_labels(mean[:, cases]) if run.likelihood != "gaussian" else None
        out[name] = (squared_errors(m, Y[cases]) if label is None else (label != Y[cases, 0]).astype(float))
    return out


def model_average_errors(run: Run, chains: str | None = None) -> tuple:
    """({test set: error}, {test set: its standard error over the cases}) of
    :func:`case_errors`: mean squared error for regression, error rate for
    classification."""
    return _mean_se(case_errors(run, chains))


def _mean_se(e: dict) -> tuple:
    return {n: float(v.mean()) for n, v in e.items()}, {n: standard_error(v) for n, v in e.items()}


#: Widest line of the terminal form of :func:`table`.
TERMINAL_WIDTH = 88
METRIC = {"gaussian": "MSE", "logistic": "error rate", "softmax": "error rate"}


def _metric(metric: str) -> str:
    """The test metric with its units."""
    return f"{metric} (original units)" if metric == "MSE" else metric


def _setup(run: Run) -> dict:
    """What must match for two runs to be compared like for like (their tuner may differ)."""
    c, s = run.config, run.summary
    r = c.layout
    chains = (f"{r.k} chains of one posterior (every training case)" if r.data == "full" else
              f"{r.k} CV replicas" + (" + a full-data chain" if r.full_data_chain else ""))
    return {"data": f"{s['data']}, test sets " + (", ".join(f"{n} ({sl.stop - sl.start} cases)"
                                                           for n, sl in run.test_sets()) or "none"),
            "model": f"{c.model.kind} {'-'.join(map(str, c.model.hidden))} {c.model.likelihood}"
                     + (" direct" if c.model.direct else ""),
            "priors": json.dumps(c.model.priors.model_dump(mode="json"), sort_keys=True),
            "chains": f"{chains}, predictions from {s['predict_from']}",
            "length": f"{c.run.super_transitions} super-transitions x {c.run.budget} leapfrog steps per chain"}


def _cv_label(run: Run) -> str:
    """What the CV error measures, in which units."""
    metric = run.config.tuner.cv_metric or ("mse" if run.likelihood == "gaussian" else "error_rate")
    if run.likelihood != "gaussian":
        return f"CV {metric.replace('_', ' ')}"
    return f"CV MSE ({'standardised targets' if run.config.data.standardize_targets else 'original units'})"


def compare(dirs, chains: str | None = None) -> list:
    """One row (dict) per run directory: test errors (the metric named, in the
    targets' original units) with their standard errors over the test cases,
    each case's error (for the paired differences of :func:`verdicts`), CV
    error (the label says of what, in which units), acceptance, the share of
    post-warm-up super-transitions with mean acceptance below 0.2, the
    super-transitions with a stuck chain, divergences, cost (sampling and
    compile time apart), the multi-chain diagnostics of the predicting chains
    (:func:`diagnostics`: R-hat, ESS of the test predictions per 1000 of every
    gradient the run computed and per second of sampling, smallest and median
    over outputs), and the setup that must match for a like-for-like
    comparison. Test errors are of each run's predicting chains (``cv.predict_from``)
    chains, or, with ``chains``, of those chains' samples."""
    rows = []
    for d in dirs:
        run = read_run(d)
        s = run.summary
        try:
            errors = case_errors(run, chains)
        except ValueError as e:
            raise RunError(f"{d}: {e}") from None
        test, test_se = _mean_se(errors)
        rows.append({"run": str(d), "tuner": s["tuner"], "seed": s["seed"], "metric": METRIC[run.likelihood],
                     "data": s["data"], "chains": chains or s["predict_from"],
                     "test": test, "test_se": test_se, "errors": errors,
                     "targets": {n: run.predictions["Y_test"][sl] for n, sl in run.test_sets()},
                     "cv_error": s["cv_error"], "cv_label": _cv_label(run),
                     "acceptance": s["acceptance"], "divergences": s["divergences"],
                     "stuck": s["stuck_super_transitions"], "low_acceptance_share": s["low_acceptance_share"],
                     "leapfrog_steps": s["leapfrog_steps"], "wall_s": s["wall_s"],
                     "compile_s": s["compile_s"], "diagnostics": diagnostics(run), "setup": _setup(run)})
    return rows


#: The columns of a table of density runs: (header, summary.json key, format).
DENSITY_COLUMNS = (("run", "run", "{}"), ("chains", "chains", "{}"), ("draws per chain", "draws", "{}"),
                   ("R-hat max, every parameter", "rhat_max", "{:.3f}"), ("ESS min", "ess_bulk_min", "{:.0f}"),
                   ("ESS per s", "ess_per_second", "{:.1f}"), ("ESS per 1000 grad", "ess_per_1000_gradients", "{:.3f}"),
                   ("divergences", "divergences", "{}"), ("E-BFMI min", "e_bfmi_min", "{:.2f}"),
                   ("warm-up + sampling s", "seconds", "{:.1f}"), ("compile s", "compile_s", "{:.1f}"))


def density_rows(runs) -> list:
    """One row (dict) per finished density run (:class:`~adaptive_hmc.rundir.finished_run.DensityRun`): its
    summary's figures (R-hat over every reported parameter, the smallest bulk ESS per second of warm-up and
    sampling and per 1000 gradients of the whole run, divergences, E-BFMI), ``run`` its directory."""
    return [{"run": str(run.dir), **{k: run.summary.get(k) for _, k, _ in DENSITY_COLUMNS if k != "run"}}
            for run in runs]


def density_table(rows, markdown: bool = True) -> str:
    """The density runs' rows as a table (markdown), or a block of lines per run for a terminal."""
    def cell(r, key, fmt):
        return "-" if r.get(key) is None else fmt.format(r[key])
    if markdown:
        lines = ["| " + " | ".join(h for h, _, _ in DENSITY_COLUMNS) + " |", "|" + "---|" * len(DENSITY_COLUMNS)]
        return "\n".join(lines + ["| " + " | ".join(cell(r, k, f) for _, k, f in DENSITY_COLUMNS) + " |"
                                  for r in rows])
    return "\n".join(_wrap(f"{r['run']} (a density run): " + "; ".join(f"{h} {cell(r, k, f)}" for h, k, f in
                                                                       DENSITY_COLUMNS[1:])) for r in rows)


def unfinished(d) -> str | None:
    """None for a finished run directory ``d``; else one line saying what it
    holds and what to do (compare leaves it out of the table)."""
    rd = RunDir(d)
    status = rd.status()
    if status == "finished":
        return None
    if status == "checkpointed":
        try:
            n, total = rd.progress()
            held = f"its checkpoint holds {n} of {total} super-transitions"
        except RunError:
            held = "its checkpoint cannot be read"
        return f"{d}: not finished ({held}); resume it with adaptive-hmc run CONFIG --out {d} --resume"
    return f"{d}: " + {"new": "no run there (never started, or a wrong path)",
                       "started": "stopped before its first checkpoint; run it again",
                       "foreign": "not a run directory of this package"}[status]


def _letters(rows) -> list:
    """A short name per row: A, B, ..., Z, then R27, R28, ..."""
    return [chr(ord("A") + i) if i < 26 else f"R{i + 1}" for i in range(len(rows))]


def _cost(d: dict, name: str) -> tuple | None:
    """(gradients, seconds) per effective sample of test set ``name``'s predictions (median over outputs)."""
    t = (d or {}).get("test", {}).get(name)
    if not t or not t["ess_per_1000_gradients"]["median"] or not t["ess_per_second"]["median"]:
        return None
    return 1000 / t["ess_per_1000_gradients"]["median"], 1 / t["ess_per_second"]["median"]


def verdicts(rows) -> list:
    """One short verdict per run after the first (A), against A, on each test
    set they share (the same cases and targets): which is better on test error,
    with the standard error of the paired difference over those cases, and
    what each costs per effective sample of the predictions (gradients and
    seconds, median over outputs). A difference within 2 standard errors is
    called indistinguishable."""
    names, out = _letters(rows), []
    base = rows[0] if rows else None
    for name, r in zip(names[1:], rows[1:]):
        for ts, e in r["errors"].items():
            a = base["errors"].get(ts)
            if (a is None or base["data"] != r["data"] or a.shape != e.shape
                    or not np.array_equal(base["targets"][ts], r["targets"][ts])):
                continue
            d = e - a
            se = standard_error(d)
            diff = float(d.mean())
            if d.size < 2:
                say = "one case: no standard error"
            elif diff == 0 or abs(diff) < 2 * se:
                say = "indistinguishable on these cases (within 2 SE)"
            else:
                say = f"{'A' if diff > 0 else name} is better ({abs(diff) / se if se > 0 else float('inf'):.1f} SE)"
            text = (f"{name} vs A on {r['data']}/{ts} ({d.size} cases): test {_metric(r['metric'])} "
                    f"{r['test'][ts]:.5g} vs {base['test'][ts]:.5g}; {name} - A = {diff:+.3g} ± {se:.2g} "
                    f"(paired SE): {say}.")
            ca, cb = _cost(base["diagnostics"], ts), _cost(r["diagnostics"], ts)
            if ca and cb:
                text += (f" Per effective sample of the predictions: A {ca[0]:,.0f} gradients, {ca[1]:.3g} s; "
                         f"{name} {cb[0]:,.0f} gradients ({cb[0] / ca[0]:.2g}x), {cb[1]:.3g} s ({cb[1] / ca[1]:.2g}x).")
            out.append(text + "".join(_caution(n, x, ts) for n, x in (("A", base), (name, r))))
    return out


def _caution(name: str, r: dict, ts: str) -> str:
    """What makes run ``name``'s figures on test set ``ts`` less than an answer:
    chains that have not met (R-hat above the limit), stuck super-transitions."""
    t = (r["diagnostics"] or {}).get("test", {}).get(ts)
    rhat = None if t is None else t["rhat_max"]
    said = []
    if t is not None and (rhat is None or rhat > RHAT_LIMIT):
        said.append(f"its chains have not met (R-hat of the {ts} predictions {'inf' if rhat is None else f'{rhat:.3g}'})")
    if r["stuck"]:
        said.append(f"{r['stuck']} super-transitions had a chain that accepted nothing")
    return f" Caution, {name}: {'; '.join(said)}." if said else ""


def like_for_like(rows) -> list:
    """Warnings, one per setting in which the runs differ (data and test sets,
    model, priors, chains, run length): their difference is then not the
    tuners' alone."""
    names, out = _letters(rows), []
    for key in ("data", "model", "priors", "chains", "length"):
        values = [r["setup"][key] for r in rows]
        if len(set(values)) > 1:
            shown = "; ".join(f"{n}: {v}" for n, v in zip(names, values)) if key != "priors" else \
                ", ".join(f"{n}" for n in names) + " have different priors"
            out.append(f"warning: the runs differ in {key} ({shown}): not like for like")
    return out


def table(rows, markdown: bool = True) -> str:
    """The rows as tables, one per metric (regression and classification apart),
    a column per data set and test set; markdown, or with ``markdown`` false a
    narrow block per run for a terminal. Then the verdicts and warnings."""
    notes = like_for_like(rows) + verdicts(rows)
    if markdown:
        out = [_table([r for r in rows if r["metric"] == m], m) for m in dict.fromkeys(r["metric"] for r in rows)]
        return "\n\n".join(out + (["\n".join("- " + t for t in notes)] if notes else []))
    text = "\n".join(_block(n, r) for n, r in zip(_letters(rows), rows)) + "".join("\n\n" + t for t in notes)
    return "\n".join(_wrap(line) for line in text.split("\n"))


def _wrap(line: str, width: int = TERMINAL_WIDTH) -> str:
    """A line folded to ``width`` characters, its continuations indented two more."""
    indent = " " * (len(line) - len(line.lstrip()) + 2)
    return textwrap.fill(line, width, subsequent_indent=indent, break_on_hyphens=False) if line else line


def _ess_cells(d: dict, name: str) -> list:
    """R-hat max, and the smallest / median ESS per 1000 gradients and per second, of test set ``name``."""
    t = (d or {}).get("test", {}).get(name)
    if t is None:
        return ["-", "-", "-"]
    r = t["rhat_max"]
    g, sec = t["ess_per_1000_gradients"], t["ess_per_second"]
    return ["inf" if r is None else f"{r:.3f}", f"{g['min']:.3f} / {g['median']:.3f}",
            f"{sec['min']:.2f} / {sec['median']:.2f}"]


def _block(name: str, r: dict) -> str:
    """One run as a few lines of at most about 80 characters."""
    low = r["low_acceptance_share"]
    lines = [f"{name}: {r['run']}",
             f"  {r['tuner']} tuner, seed {r['seed']}; {r['setup']['chains']}",
             f"  {r['setup']['model']}; {r['setup']['length']}"]
    for ts in r["test"]:
        lines.append(f"  test {_metric(r['metric'])} {r['data']}/{ts}: {r['test'][ts]:.5g} "
                     f"± {r['test_se'][ts]:.2g}")
        rhat, g, sec = _ess_cells(r["diagnostics"], ts)
        lines.append(f"    predictions' R-hat max {rhat}; ESS (min / median) per 1000 gradients {g}, per s {sec}")
    if r["cv_error"] is not None:
        lines.append(f"  {r['cv_label']}: {r['cv_error']:.5g}")
    lines.append(f"  acceptance {r['acceptance']:.3f}; acc < 0.2 share {'-' if low is None else f'{low:.2f}'}; "
                 f"stuck {r['stuck']}; divergences {r['divergences']}")
    lines.append(f"  {r['leapfrog_steps']:,} leapfrog steps; sampling {r['wall_s']:.1f} s, "
                 f"compile {r['compile_s']:.1f} s")
    return "\n".join(lines)


def _table(rows, metric: str) -> str:
    sets = sorted({(r["data"], n) for r in rows for n in r["test"]})
    label = {(d, n): f"{d}/{n}" for d, n in sets}
    cv = sorted({r["cv_label"] for r in rows})
    head = (["run", "tuner", "chains"] + [f"test {_metric(metric)} {label[s]} ± se" for s in sets]
            + [" / ".join(cv), "acceptance", "acc < 0.2 share", "stuck", "divergences", "leapfrog steps",
               "sampling s", "compile s"]
            + [f"{what} {label[s]}" for s in sets for what in
               ("R-hat max of the predictions", "ESS per 1000 grad (min / median)", "ESS per s (min / median)")])
    body = []
    for r in rows:
        mine = [(r["data"], n) for n in r["test"]]
        cells = [r["run"], r["tuner"], r["chains"]]
        cells += [f"{r['test'][s[1]]:.5f} ± {r['test_se'][s[1]]:.5f}" if s in mine else "-" for s in sets]
        low = r["low_acceptance_share"]
        cells += ["-" if r["cv_error"] is None else f"{r['cv_error']:.5f}", f"{r['acceptance']:.3f}",
                  "-" if low is None else f"{low:.2f}", str(r["stuck"]),
                  str(r["divergences"]), f"{r['leapfrog_steps']:,}", f"{r['wall_s']:.1f}", f"{r['compile_s']:.1f}"]
        for s in sets:
            cells += _ess_cells(r["diagnostics"], s[1]) if s in mine else ["-"] * 3
        body.append(cells)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in body])
