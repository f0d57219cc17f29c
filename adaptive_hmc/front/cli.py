"""Command line: ``adaptive-hmc init | run | validate | sweep | compare | predict | plot | export | reference``.

Flow position: the edge. Bad input (config, paths) ends with a message on
stderr and exit code 2 before anything is written; Ctrl-C or SIGTERM during a
run ends with exit code 130 and says how to resume; a failing disk (full,
read-only) ends with exit code 1 and says what was kept. Never a traceback.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
import signal
import sys
import textwrap
from pathlib import Path

from .. import COMPILE_TIME, EXPORT_DRAWS

# The package's modules are imported after the arguments are parsed, so that
# `--help` answers at once (the compiled layers take a second or two to import).


def _read(args, command: str):
    """The config of ``args`` (its seed overridden by --seed), its notes said on stderr."""
    from ..config import read_config
    cfg = read_config(args.config, {} if args.seed is None else {"run.seed": args.seed})
    for note in getattr(cfg, "notes", ()):
        print(f"adaptive-hmc {command} {args.config}: note: {note}", file=sys.stderr, flush=True)
    return cfg


def _validate(args) -> int:
    """Check a config and its data as a run would, without running: the verdict first, then the resolved
    config, then how long the run will take."""
    from ..config import Config
    from .experiment import build, tuner_options
    cfg = _read(args, "validate" if not getattr(args, "dry_run", False) else "run")
    if not isinstance(cfg, Config):                      # model.kind: density
        from .density_run import check
        fn, _, starts = check(cfg, args.config)
        n = cfg.sampler.chains
        starts_of = "the chain's start" if n == 1 else f"the {n} chains' starts"
        print(f"# {args.config}: valid. A log density of {cfg.model.dim} coordinates ({cfg.model.file}: "
              f"{cfg.model.function}), finite at {starts_of}", file=sys.stderr, flush=True)
        _print_config(cfg, args)
        if not getattr(args, "no_estimate", False):
            _density_estimate(cfg, args.config, fn, starts)
        return 0
    net = build(cfg, args.config)[0].chains
    tests = ", ".join(f"{n} ({s.stop - s.start} cases)" for n, s in net.test_slices.items()) or "none"
    spec = net.spec
    n_train = net.chain_data[-1].model.n_cases if net.n_cv == 0 else sum(len(f) for f in net.folds)
    shape = "-".join(str(n) for n in (spec.n_inputs, *spec.hidden, spec.n_outputs))
    print(f"# {args.config}: valid. Network {shape} ({spec.likelihood}, {spec.n_params:,} parameters), "
          f"{net.n_chains} chain{'s' * (net.n_chains != 1)}, {n_train} training cases; test sets: "
          f"{tests}; the resolved config follows", file=sys.stderr, flush=True)
    _print_config(cfg, args)
    if not getattr(args, "no_estimate", False):
        from ..engine.progress import compile_kernels
        from ..engine.timing import describe, estimate
        compile_kernels(net)
        print(f"# {args.config}: measuring the sampler on this machine for a time estimate ...", file=sys.stderr,
              flush=True)
        until = cfg.run.until
        e = estimate(net, tuner_options(cfg, args.config), cfg.run.budget, cfg.run.super_transitions)
        said = describe(e, cfg.run.super_transitions, until.max_seconds if until else None)
        print(f"# {args.config}: the run will take {said}", file=sys.stderr)
    return 0


def _strict_json(obj) -> str:
    """``obj`` as one line of standard JSON, which every reader takes (``jq`` too): NaN as null, an infinity
    as the string "inf" or "-inf" (Python's json would write NaN and Infinity)."""
    def strict(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
        if isinstance(v, dict):
            return {k: strict(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [strict(x) for x in v]
        return v
    return json.dumps(strict(obj), allow_nan=False)


def _print_config(cfg, args) -> None:
    """The resolved config on standard output: YAML, or one JSON object with --json."""
    import yaml

    from ..config import to_dict
    if getattr(args, "json", False):
        print(_strict_json(to_dict(cfg)), flush=True)
    else:
        print(yaml.safe_dump(to_dict(cfg), sort_keys=False), end="", flush=True)


def _density_estimate(cfg, source: str, fn, starts) -> None:
    """validate's time estimate of a density config's run (:func:`~adaptive_hmc.engine.timing.density_estimate`)."""
    from ..engine.density_chains import DensityChains
    from ..models.density import LogDensity
    from ..engine.progress import compile_kernels
    from ..engine.timing import density_estimate, describe_density
    model = LogDensity(fn, cfg.model.dim, cfg.model.names)
    s, r = cfg.sampler, cfg.run
    compile_kernels(DensityChains(model, starts, 0, r.threads))
    print(f"# {source}: measuring the sampler on this machine for a time estimate ...", file=sys.stderr, flush=True)
    e = density_estimate(model, starts, s.warmup, r.super_transitions, r.budget, s.trajectory_bounds, r.threads,
                         s.step_factor_bounds)
    said = describe_density(e, s.warmup, r.super_transitions, r.until.max_seconds if r.until else None)
    print(f"# {source}: the run will take {said}", file=sys.stderr)


def _init(args) -> int:
    from ..config import ConfigError
    from ..tables import DataError
    from .templates import write_template
    out = Path(args.out or (f"{Path(args.csv).stem}.yaml" if args.csv else f"my_{args.kind}.yaml"))
    try:
        print(write_template(args.kind, out, Path(args.csv) if args.csv else None, args.target, args.force,
                             args.encoding))
    except DataError as e:
        raise ConfigError(str(e)) from None
    return 0


def _reference(args) -> int:
    from ..config import reference
    print(reference())
    return 0


def _starting(args) -> None:
    """The first line of a run, said before the second or two of imports (and a
    first run's compile) begins."""
    if not (args.quiet or args.dry_run):
        print(f"adaptive-hmc run {args.config}: starting (a model's first run compiles its sampler first, "
              f"{COMPILE_TIME})", file=sys.stderr, flush=True)


def _run(args) -> int:
    if args.dry_run:
        return _validate(args)
    from ..config import Config
    from .experiment import run_experiment
    from ..rundir.results import RunError
    cfg = _read(args, "run")
    run = run_experiment
    extra = {"extend": args.extend} if args.extend is not None else {}
    if args.extend is not None and args.extend < 1:
        raise RunError(f"--extend {args.extend}: the number of super-transitions to add, an integer >= 1")
    if not isinstance(cfg, Config):                      # model.kind: density
        from .density_run import run_density as run
    if args.out:
        out = Path(args.out)
    else:   # a fresh directory: runs/NAME-seedS, then -2, -3, ...
        base = out = Path("runs") / f"{cfg.name}-seed{cfg.run.seed}"
        n = 1
        while out.exists() and not (args.resume or args.extend is not None):   # --resume, --extend: the run there
            n += 1
            out = base.with_name(f"{base.name}-{n}")
    versus = isinstance(cfg, Config) and cfg.tuner.compare_with is not None and args.extend is None
    if versus:
        from .versus import check_sibling
        check_sibling(cfg, args.config, out, args.resume)        # before any work
    if versus and args.resume and (out / "summary.json").is_file():
        from .versus import sibling
        if (sibling(out) / "summary.json").is_file():
            raise RunError(f"{out}: holds a finished run and its hand-tuned comparison ({sibling(out)}); use "
                           f"another --out to run again")
        summary = json.loads((out / "summary.json").read_text())    # finished: on to its hand-tuned run
    else:
        summary = run(cfg, out, source=args.config, resume=args.resume, quiet=args.quiet, **extra)
    more, lines = {}, []
    if summary and versus:
        from .experiment import folded
        from .versus import run_fixed, versus_line
        fixed = run_fixed(cfg, args.config, out, summary, None if args.quiet else (
            lambda line: print(folded(f"{out}: {line}"), file=sys.stderr, flush=True)))
        more["compared_with"] = fixed
        lines.append(versus_line(cfg, summary, fixed))
    if summary and isinstance(cfg, Config) and cfg.run.plots:
        from .versus import draw
        more["plots"] = draw(out)
        lines.append(f"plots: {Path(out) / 'plots'}/ ({', '.join(Path(p).name for p in more['plots'])})")
    if args.json:
        print(_strict_json({"run_dir": str(out), **summary, **more}))
    else:
        print("\n".join(_summary_lines(out, summary, lines)))
    return 0


def _summary_lines(out, summary: dict, more: list = ()) -> list:
    """What a finished run says on stdout: its directory, length, largest R-hat (and the chains' verdict), each
    test set's errors, then ``more`` (a comparison, the plots), each folded at 100 characters (the whole summary:
    DIR/summary.json, or --json)."""
    lines = [f"run directory: {out}"]
    d = summary.get("diagnostics") or {}
    rhat = summary.get("rhat_max", d.get("rhat_max"))
    length = f"{summary['super_transitions']} super-transitions" if "super_transitions" in summary else ""
    verdict = {"met": "the chains met", "moving": "the chains are still moving",
               "apart": "the chains settled apart"}.get(d.get("verdict"))
    if length or rhat is not None:
        lines.append(", ".join(x for x in (length, None if rhat is None else f"largest R-hat {rhat:.3f}"
                                           + (f" ({verdict})" if verdict else "")) if x))
    sets: dict = {}
    for key, value in summary.items():
        if key.startswith("test_") and isinstance(value, dict):
            for name, v in value.items():
                if isinstance(v, (int, float)):
                    sets.setdefault(name, []).append(f"{key[5:]} {v:.6g}")
    lines += [f"test set {name}: {', '.join(v)}" for name, v in sets.items()]
    lines += [textwrap.fill(line, 100, subsequent_indent="  ", break_on_hyphens=False, break_long_words=False)
              for line in more]                             # as experiment.folded, without importing it
    lines.append(f"everything: {out}/summary.json (or run with --json)")
    return lines


def _compare(args) -> int:
    from .reports import compare, density_rows, density_table, table, unfinished
    from ..rundir.finished_run import read_run
    from ..rundir.results import RunError
    from .sweep import run_dirs
    dirs = [x for d in args.dirs for x in (run_dirs(d, finished_only=False) if (Path(d) / "sweep.yaml").is_file()
                                           else [d])]
    left_out = [line for line in map(unfinished, dirs) if line]
    finished = [d for d in dirs if unfinished(d) is None]
    if not finished:
        raise RunError("no finished run to compare" + "".join(f"\n  {line}" for line in left_out))
    runs = [read_run(d) for d in finished]
    rows = compare([d for d, run in zip(finished, runs) if run.network], args.chains)
    drows = density_rows([run for run in runs if not run.network])
    print("\n\n".join(([table(rows, markdown=False)] if rows else []) + ([density_table(drows, False)] if drows
                                                                          else [])))
    if left_out:
        print("\nnot in the table:\n" + "\n".join(f"  {line}" for line in left_out))
    md = "\n\n".join(([table(rows, markdown=True)] if rows else []) + ([density_table(drows)] if drows else [])) \
        + "".join(f"\n- not in the table: {line}" for line in left_out)
    if args.markdown:
        target = Path(args.markdown)
        if target.is_dir():
            from ..config import ConfigError
            raise ConfigError(f"--markdown {target}: is a directory; give a file name, e.g. {target / 'table.md'}")
        target.write_text(md + "\n")
        print(f"markdown table: {args.markdown}")
    return 0


def _sweep(args) -> int:
    from .sweep import run_sweep
    if args.workers is not None and args.workers < 1:
        from ..config import ConfigError
        raise ConfigError(f"--workers {args.workers}: at least 1")
    return run_sweep(args.sweep, args.out, args.scheduler, args.workers, args.resume, args.quiet)


def _predict(args) -> int:
    from ..data import read_inputs
    from .export import prediction_table
    from ..rundir.finished_run import read_run
    from ..config import ConfigError
    if not 0 < args.level < 1:
        raise ConfigError(f"--level {args.level}: must be between 0 and 1")
    run = read_run(args.dir).with_network("predictions")
    notes: list = []
    try:
        X = read_inputs(args.input, run.n_raw_inputs, run.input_map.names, notes, dict(run.input_map.levels),
                        args.encoding)
    except ValueError as e:
        raise ConfigError(f"{e}") from None
    for note in notes:
        print(f"adaptive-hmc predict: warning: {note}", file=sys.stderr)
    names, values = prediction_table(run, X, args.chains, args.level)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")                 # a label with a comma or a quote is quoted
    writer.writerow(names)
    writer.writerows([v if isinstance(v, str) else f"{v:.10g}" for v in row] for row in values)
    text = buf.getvalue()
    if args.out:
        Path(args.out).write_text(text)
        print(f"predictions for {len(X)} cases: {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def _plot(args) -> int:
    from .plots import plot_run
    for p in plot_run(args.dir):
        print(p)
    return 0


def _export(args) -> int:
    from ..diagnostics import arviz
    from .elpd import check_kfold, kfold_report, loo_verdict, psis_loo, report_lines
    from .export import export
    if args.kfold is not None:
        check_kfold(args.dir, args.kfold)            # before any work
    path = export(args.dir, None if args.draws == "all" else int(args.draws))
    print(path)
    idata = arviz().from_netcdf(str(path))
    if args.kfold is not None:
        for line in report_lines(kfold_report(args.dir, args.kfold, quiet=args.quiet, idata=idata)):
            print(line)
    elif "log_likelihood" in idata.groups():
        print(loo_verdict(psis_loo(idata)))
    return 0


def _add_init(sub) -> None:
    """The ``init`` command."""
    i = sub.add_parser("init", help="write a config template for your own table (prefilled from a CSV's header)")
    i.add_argument("kind", choices=["regression", "classification"])
    i.add_argument("--csv", help="your table (with a header row): fills data.path, the target column, the name "
                                 "and, for classification, the likelihood from the labels")
    i.add_argument("--target", help="the target (label) column's name (default: the last column)")
    i.add_argument("--out", help="the config file to write (default: CSV_NAME.yaml, or my_KIND.yaml)")
    i.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    i.add_argument("--encoding", help="the table's text encoding, e.g. latin-1 (default: UTF-8, or UTF-16 with its "
                                      "byte-order mark); written to the config as data.encoding")
    i.set_defaults(fn=_init)


def _add_run(sub) -> None:
    """The ``run`` command."""
    r = sub.add_parser("run", help="run (or resume) a YAML-configured experiment")
    r.add_argument("config")
    r.add_argument("--out", help="run directory (default: a new runs/NAME-seedSEED[-n])")
    r.add_argument("--seed", type=int, help="override run.seed")
    r.add_argument("--resume", action="store_true", help="continue from the run directory's last checkpoint")
    r.add_argument("--extend", type=int, metavar="N", help="add N super-transitions to the finished run in --out "
                   "(the same draws and figures as a run asked for N more at the start with the same burn-in; "
                   "run.until off)")
    r.add_argument("--quiet", action="store_true", help="no progress output")
    r.add_argument("--json", action="store_true", help="print the run's summary.json (with run_dir) as one JSON "
                   "object on stdout, and nothing else there (progress and messages go to stderr)")
    r.add_argument("--dry-run", action="store_true", help="check the config and its data, print the resolved "
                                                          "config, run nothing (as validate)")
    r.set_defaults(fn=_run, starting=_starting)


def _add_validate(sub) -> None:
    """The ``validate`` command."""
    v = sub.add_parser("validate", help="check a config and its data without running; print the resolved config")
    v.add_argument("config")
    v.add_argument("--seed", type=int, help="override run.seed")
    v.add_argument("--no-estimate", action="store_true", help="skip the time estimate (a second's probe of the "
                   "sampler, after compiling it if this model's first run has not)")
    v.set_defaults(fn=_validate)


def _add_sweep(sub) -> None:
    """The ``sweep`` command."""
    w = sub.add_parser("sweep", help="run every combination of a sweep file on a Dask cluster")
    w.add_argument("sweep", help="a sweep file: base config(s), a grid of overrides, cases (see docs/USAGE.md)")
    w.add_argument("--out", help="sweep directory (default: sweeps/NAME)")
    w.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. tcp://host:8786 (default: a "
                                       "local cluster); its workers must see the sweep directory")
    w.add_argument("--workers", type=int, help="local cluster: worker processes (default: one per core)")
    w.add_argument("--resume", action="store_true", help="skip finished runs, resume interrupted ones")
    w.add_argument("--quiet", action="store_true", help="no progress output")
    w.set_defaults(fn=_sweep)


def _add_compare(sub) -> None:
    """The ``compare`` command."""
    c = sub.add_parser("compare", help="table of test errors, CV error, acceptance, cost and ESS")
    c.add_argument("dirs", nargs="+", help="run directories or sweep directories")
    c.add_argument("--markdown", help="also write the table as markdown to this file")
    c.add_argument("--chains", choices=["all", "full", "replicas"],
                   help="test errors of these chains' samples (default: each run's cv.predict_from, or its chains)")
    c.set_defaults(fn=_compare)


def _add_predict(sub) -> None:
    """The ``predict`` command."""
    q = sub.add_parser("predict", help="predictions of a finished run for new inputs (CSV out)")
    q.add_argument("dir", help="a finished run directory (its config must keep samples: run.thin > 0)")
    q.add_argument("input", help="a table of inputs, one column per input column of the training table, in the "
                                 "original units (matched by header name; text columns as data.categorical lists "
                                 "their levels); the delimiter is detected")
    q.add_argument("--out", help="write the CSV here (default: standard output)")
    q.add_argument("--chains", choices=["all", "full", "replicas"],
                   help="whose samples predict (default: the run's cv.predict_from, or its chains)")
    q.add_argument("--level", type=float, default=0.95, help="central interval probability (regression)")
    q.add_argument("--encoding", help="the input table's text encoding, e.g. latin-1 (default: UTF-8, or UTF-16 with "
                                      "its byte-order mark)")
    q.set_defaults(fn=_predict)


def _add_plot(sub) -> None:
    """The ``plot`` command."""
    p = sub.add_parser("plot", help="write PNG figures into DIR/plots")
    p.add_argument("dir")
    p.set_defaults(fn=_plot)


def _draws(v: str) -> str:
    if v != "all" and not (v.isascii() and v.isdigit() and int(v) >= 1):     # "²" is a digit to isdigit alone
        raise argparse.ArgumentTypeError(f"{v!r}: a number of draws >= 1, or all")
    return v


def _add_export(sub) -> None:
    """The ``export`` command."""
    e = sub.add_parser("export", help="write DIR/inference_data.nc (ArviZ InferenceData)")
    e.add_argument("dir")
    e.add_argument("--kfold", type=int, metavar="K",
                   help="exact K-fold elpd: from the run's own K cross-validation replicas, or by running K chains of "
                        "the fold posteriors into DIR/kfold-K (as long as the run); beside PSIS-LOO's, with its "
                        "Pareto k verdict, and the test sets' log predictive density; written to DIR/elpd.json")
    e.add_argument("--quiet", action="store_true", help="no progress lines from --kfold's run")
    e.add_argument("--draws", default=str(EXPORT_DRAWS), type=_draws, metavar="N|all",
                   help=f"draws a chain to write, evenly spaced (default {EXPORT_DRAWS}; all: every diagnostic draw)")
    e.set_defaults(fn=_export)


def _add_reference(sub) -> None:
    """The ``reference`` command."""
    f = sub.add_parser("reference", help="print the config reference (every key, type, default; docs/CONFIG.md)")
    f.set_defaults(fn=_reference)


#: One function a command, in the order ``--help`` lists them.
COMMANDS = (_add_init, _add_run, _add_validate, _add_sweep, _add_compare, _add_predict, _add_plot, _add_export,
            _add_reference)


def parser() -> argparse.ArgumentParser:
    """The command line's parser: every command, its arguments and the function that runs it."""
    ap = argparse.ArgumentParser(prog="adaptive-hmc", description="Bayesian neural networks by adaptive HMC")
    sub = ap.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "starting", None):
        args.starting(args)
    from ..config import ConfigError
    from .experiment import Interrupted
    from ..rundir.results import RunError
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return args.fn(args)
    except Interrupted as err:
        print(f"adaptive-hmc {args.command}: {err}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print(f"adaptive-hmc {args.command}: interrupted before any super-transition ran; nothing to resume",
              file=sys.stderr)
        return 130
    except (ConfigError, RunError) as err:
        print(f"adaptive-hmc {args.command}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        where = f" ({err.filename})" if err.filename else ""
        print(f"adaptive-hmc {args.command}: error: {err.strerror or err}{where}; files already written, the last "
              f"checkpoint among them, are intact (resume with --resume once the problem is fixed)", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminate(signum, frame):
    """SIGTERM is handled like Ctrl-C: the run stops and says how to resume."""
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
