"""A configured experiment: build the run from a
:class:`~adaptive_hmc.config.Config`, run the outer loop with a checkpoint
after every ``checkpoint_every`` super-transitions once ``checkpoint_seconds`` have passed, and write
the run directory.

Flow position: config -> **experiment** (runner + results).
"""
from __future__ import annotations

import os
import sys
import textwrap
import time
from dataclasses import replace

import numpy as np

from ..config import Config, ConfigError, parse, to_dict
from ..data import Standardizer, select_features
from ..engine.network_chains import memory_estimate
from ..engine.super_transition import iterations
from ..diagnostics import more_super_transitions
from ..rundir.metrics import convergence, chain_diagnostics
from ..rundir.verdicts import diagnostics_line, rhat_warning
from ..rundir.results import RunDir, RunDirSink, RunError
from ..engine.driver import Until, drive, end_warnings
from ..engine.progress import compile_kernels, start_chains
from ..engine.runner import MAX_SUPER_TRANSITIONS, CheckedTuner, TunerError, make_run
from ..tuners.registry import TUNERS
from .user_files import callable_in, import_file


def build(cfg: Config, source: str = "<config>") -> tuple:
    """(the run's parts, :func:`~adaptive_hmc.engine.runner.make_run`'s
    :class:`~adaptive_hmc.engine.runner.Plan`; the input transform, a
    :class:`~adaptive_hmc.data.Standardizer`) for ``cfg``; raises ConfigError."""
    split = cfg.data.cases(cfg.model.likelihood, source)
    for note in split.notes:
        print(f"{source}: {note}", file=sys.stderr, flush=True)
    (X, Y), tests = split.train, dict(split.tests)
    d = cfg.data
    columns = None
    if d.select_features is not None:
        if d.select_features > X.shape[1] or not np.isin(Y, (0.0, 1.0)).all():
            raise ConfigError(f"{source}: data.select_features = {d.select_features}: needs at most "
                              f"{X.shape[1]} (the input columns) and two classes labelled 0/1")
        columns = select_features(X, Y[:, 0], d.select_features)
    sc = Standardizer.fit(X, True, columns, d.log1p_inputs) if d.standardize_inputs else \
        Standardizer.identity(X.shape[1], columns, d.log1p_inputs)
    sc = sc._replace(names=split.input_names, target_names=split.target_names, classes=split.classes,
                     levels=split.levels)
    X = sc.transform(X)
    tests = {n: (sc.transform(a), b) for n, (a, b) in tests.items()}
    _check_fit(cfg, source, X, Y, tests, split.n_outputs, split.classes)
    tuner = tuner_options(cfg, source)                  # its errors name their keys already
    try:
        return make_run(cfg.model.spec(X.shape[1], split.n_outputs), X, Y, tuner=tuner,
                        run=cfg.run_options(), network=cfg.network_options(), test_sets=tests), sc
    except ValueError as e:
        raise ConfigError(f"{source}: model/data: {e}") from None


def tuner_options(cfg: Config, source: str):
    """The ``tuner`` of :func:`~adaptive_hmc.engine.runner.make_run` that ``cfg.tuner`` names: the package's
    (:meth:`~adaptive_hmc.config.TunerConfig.options`), or a tuner of one's own: its options type from
    ``tuner.file`` called with the bounds and ``tuner.settings``, the file having registered its kind (so that
    a resume restores it); ConfigError naming the key."""
    t = cfg.tuner
    if t.kind in ("bandit", "fixed"):
        return t.options()
    module = import_file(t.file, source, "tuner.file", "adaptive_hmc_tuner_")
    options_type = callable_in(module, t.options_type, source, "tuner.options_type", t.file)
    if t.kind not in TUNERS:
        raise ConfigError(f"{source}: tuner.kind = {t.kind!r}: {t.file} did not register a tuner of this kind "
                          f"(adaptive_hmc.tuners.register_tuner({t.kind!r}, YourTuner) in it; registered: "
                          f"{', '.join(sorted(TUNERS))})")
    try:
        options = options_type(bounds=t.action_bounds(), **t.settings)
    except Exception as e:                               # noqa: BLE001 - any error of the user's type, named
        raise ConfigError(f"{source}: tuner.settings = {t.settings!r}: {t.options_type}(bounds=..., **settings) "
                          f"raised {type(e).__name__}: {e}") from None
    if not callable(getattr(options, "tuner", None)):
        raise ConfigError(f"{source}: tuner.options_type = {t.options_type!r}: its value has no tuner(seed) method")
    return options


def _check_fit(cfg: Config, source: str, X, Y, tests: dict, n_outputs: int, classes: tuple = ()) -> None:
    """Checks of the config against its data, each naming its key."""
    m, layout = cfg.model, cfg.layout
    k = layout.k
    if classes and m.likelihood == "logistic" and len(classes) != 2:
        raise ConfigError(f"{source}: model.likelihood = 'logistic': needs two classes; the labels are "
                          f"{', '.join(map(repr, classes[:10]))}{', ...' if len(classes) > 10 else ''} "
                          f"({len(classes)} classes: use softmax)")
    if k > len(X):
        key = "chains" if layout.data == "full" else "cv.folds"
        raise ConfigError(f"{source}: {key} = {k}: at most the number of training cases ({len(X)})")
    if m.likelihood == "logistic" and not np.isin(Y, (0.0, 1.0)).all():
        labels = np.unique(Y)
        found = ", ".join(f"{v:g}" for v in labels[:10]) + (", ..." if labels.size > 10 else "")
        if np.array_equal(labels, np.arange(labels.size)):          # 0, 1, ..., K-1: softmax's class indices
            raise ConfigError(f"{source}: model.likelihood = 'logistic': needs two classes labelled 0 and 1; the "
                              f"targets are the {labels.size} class indices {found} (use softmax for more than "
                              f"two classes)")
        if labels.size <= min(10, len(Y) // 2) and np.all(labels == np.round(labels)):   # a few whole numbers
            raise ConfigError(f"{source}: model.likelihood = 'logistic': needs two classes labelled 0 and 1; the "
                              f"targets are the whole numbers {found} (recode them as 0 and 1, or 0, 1, ..., K-1 "
                              f"with softmax for K classes)")
        raise ConfigError(f"{source}: model.likelihood = 'logistic': needs targets that are 0 or 1 labels; "
                          f"these are real numbers (use gaussian for regression)")
    if m.likelihood == "softmax" and not (np.all(Y >= 0) and np.all(Y == np.round(Y))):
        raise ConfigError(f"{source}: model.likelihood = 'softmax': needs class indices 0, 1, 2, ... as targets")
    if cfg.run.until is not None and not sum(len(a) for a, _ in tests.values()):
        raise ConfigError(f"{source}: run.until: checks the R-hat and ESS of the test predictions, and this data has "
                          f"no test cases (data.split, data.test_sets); set run.until: null or add a test set")
    spec = m.spec(X.shape[1], n_outputs)
    t, run = cfg.tuner, cfg.run
    shortest = t.num_steps if t.kind == "fixed" else int(t.bounds["num_steps"][0])
    chains = layout.n_chains
    kept = run.super_transitions * (iterations(run.budget, shortest, bool(cfg.sampler.jitter)) // run.thin + 1) * chains \
        if run.thin else 0
    need = memory_estimate(spec, len(X), sum(len(a) for a, _ in tests.values()), chains, kept)
    limit = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    if need > limit:
        raise ConfigError(f"{source}: model.hidden = {list(m.hidden)}: a network of {spec.n_params:,} parameters "
                          f"on these chains and cases needs about {need / 2**30:.1f} GiB; at most "
                          f"{limit / 2**30:.1f} GiB (half of this machine's memory) is allowed (fewer or smaller "
                          f"hidden layers, fewer net, or a larger run.thin)")


class Interrupted(RunError):
    """The run was stopped by Ctrl-C or SIGTERM; its last checkpoint is intact."""


def lengthened(cfg: Config, source: str, total: int) -> Config:
    """``cfg`` run for exactly ``total`` super-transitions (``run.until``
    off), its burn-in the one it started with: the config an extended run
    goes on with."""
    raw = to_dict(cfg)
    raw["run"].update(super_transitions=total, until=None)
    return parse(raw, source)


def run_experiment(cfg: Config, out, source: str = "<config>", resume: bool = False, quiet: bool = False,
                   stop_after=None, extend: int = 0, warn: bool = True) -> dict:
    """Run ``cfg`` into directory ``out``, or resume it from its last
    checkpoint (``resume``); a directory whose run stopped before its first
    checkpoint starts over. ``extend``: add that many super-transitions to the
    finished run in ``out`` (the same draws and figures as a run of ``cfg``
    asked for that many more at the start with the burn-in it started with,
    ``run.until`` off: :func:`lengthened`). Returns the summary ({} when stopped early).
    ``stop_after`` ends the process's work after that many super-transitions
    (as an interruption would), leaving the checkpoint behind. Ctrl-C or
    SIGTERM raise :class:`Interrupted`, saying how to resume. ``warn`` False: the end-of-run warnings are
    left to summary.json (a comparison run whose caller says what it found)."""
    rd = RunDir(out)

    def say(message):
        print(message, file=sys.stderr, flush=True)

    if not (isinstance(extend, (int, np.integer)) and extend >= 0):
        raise RunError(f"--extend {extend!r}: the number of super-transitions to add, an integer >= 1")
    resuming = rd.prepare(resume, say, extend)      # refusals come before any work or writing
    if resuming:
        rd.check_same_config(cfg)
    total = _length(rd, resuming, extend)
    run_cfg = cfg if total is None else lengthened(cfg, source, total)
    setup, x_scale = build(run_cfg, source)   # all validation before any writing
    lock = rd.lock()
    try:
        resuming = rd.prepare(resume, None, extend)
        now = _length(rd, resuming, extend)         # the length once no other run can change it
        if now != total:                            # another run extended it meanwhile: on from its end
            run_cfg = lengthened(cfg, source, now)
            setup, x_scale = build(run_cfg, source)
        if extend:
            rd.begin_extension(extend)
        return _run_locked(rd, run_cfg, source, resuming, quiet, stop_after, setup, x_scale, warn)
    finally:
        lock.close()


def _length(rd: RunDir, resuming: bool, extend: int) -> int | None:
    """The super-transitions the run in ``rd`` goes on to: its checkpoint's and ``extend`` more, or the
    length an interrupted extension set (None: the config's); RunError when it would be too long."""
    total = rd.progress()[0] + extend if extend else rd.extended_to() if resuming else None
    if total is not None and total > MAX_SUPER_TRANSITIONS:
        raise RunError(f"--extend {extend}: the run would have {total:,} super-transitions, more than the "
                       f"{MAX_SUPER_TRANSITIONS:,} a run may have; add fewer")
    return total


def _saved(rd: RunDir) -> int:
    """The super-transitions the last checkpoint in ``rd`` holds (0: none)."""
    return rd.load_checkpoint()[0].chains["n_super"] if rd.has_checkpoint else 0


def _begin(rd, cfg, source, resuming, quiet, net, tuner) -> tuple:
    """(tuner, log, wall seconds, metadata) of a run started or resumed in ``rd``, its kernels compiled and
    its chains started."""
    if resuming:
        tuner, log, wall, note, _ = rd.restore(net)
        if note:
            print(f"{rd.path}: {note}", file=sys.stderr, flush=True)
        meta = rd.read_metadata()
        meta.setdefault("resumed", []).append(time.strftime("%Y-%m-%dT%H:%M:%S"))
        rd.write_metadata(meta)
    else:
        rd.clear_start()
        meta = rd.start(cfg, source, net.threads)
        log, wall = [], 0.0
    rd.write_log(log)     # exactly the checkpointed entries (a kill may have left more)
    meta["compile_s"] = round(meta.get("compile_s", 0.0) + compile_kernels(net, quiet), 2)   # kept out of wall_s
    started = start_chains(net, quiet)               # its seconds count in the first super-transition's
    if started is not None:
        meta["start"] = {k: started[k] for k in ("seconds", "gradients", "cut_short")}
        rd.write_metadata(meta)
    return tuner, log, wall, meta


def _run_locked(rd, cfg, source, resuming, quiet, stop_after, setup, x_scale, warn=True) -> dict:
    net = setup.chains
    tuner, log, wall, meta = _begin(rd, cfg, source, resuming, quiet, net, setup.tuner)
    if cfg.tuner.kind not in ("bandit", "fixed"):          # a tuner of one's own: every call checked
        tuner = CheckedTuner(tuner, cfg.run.budget)
    until, first = cfg.run.until, cfg.run.super_transitions

    def say(line):
        print(f"{rd.path}: {line}", file=sys.stderr, flush=True)
    rule = Until(first, until.max_seconds, lambda n, seconds: convergence(
        chain_diagnostics(net, log, seconds, cfg.layout.predict_from), until.target_ess),
        "run.until.max_seconds", None if quiet else say) if until else None
    try:
        done = drive(replace(setup, tuner=tuner), first, until=rule, log=log, wall=wall,
                     sink=RunDirSink(rd, net, tuner, log, cfg.run.checkpoint_every,
                                     seconds=cfg.run.checkpoint_seconds), quiet=quiet,
                     stop_after=stop_after, say=say)
    except KeyboardInterrupt:
        raise Interrupted(f"{rd.path}: interrupted at super-transition {net.n_super + 1} of "
                          f"{'at least ' if until else ''}{first}; the last checkpoint holds {_saved(rd)}; resume "
                          f"with: adaptive-hmc run {source} --out {rd.path} --resume") from None
    except TunerError as e:
        n = _saved(rd)
        then = (f"the checkpoint holds {n} super-transition{'s' * (n != 1)}: fix the tuner, then --resume" if
                rd.has_checkpoint else "nothing was checkpointed: fix the tuner, then run again")
        raise RunError(f"{source}: tuner.kind = {cfg.tuner.kind!r} ({cfg.tuner.file}): {e}; {then}") from None
    if not done.finished:
        return {}
    meta["end"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    rd.write_metadata(meta)
    if not quiet:
        print(f"{rd.path}: computing the predictions, R-hat and ESS of the test sets and hyperparameters",
              file=sys.stderr, flush=True)
    summary = rd.write_results(net, tuner, log, done.wall, cfg, x_scale, compile_s=meta["compile_s"],
                               convergence=rule.stopped if until else None)
    if not quiet:
        print(folded(f"{rd.path}: {diagnostics_line(summary)}"), file=sys.stderr, flush=True)
    n, burn = net.n_super, net.burn_in_super_transitions
    for warning in () if not warn else end_warnings([rhat_warning(summary["diagnostics"], cfg.model.priors.hyper_moves, lambda factor: (
            f"adaptive-hmc run {source} --out {rd.path} --extend {more_super_transitions(factor, n, burn)}"))],
            rule, log, f"see stuck_chains in {rd.path / 'log.jsonl'}: the step factor or L is too large for it"):
        print(folded(f"{rd.path}: warning: {warning}"), file=sys.stderr, flush=True)
    return summary


#: The width the end of a run folds its lines to.
WIDTH = 100


def folded(line: str) -> str:
    """``line`` folded at :data:`WIDTH` characters, the lines after the first indented (a path or a command is
    never broken inside)."""
    return textwrap.fill(line, WIDTH, subsequent_indent="  ", break_on_hyphens=False, break_long_words=False)
