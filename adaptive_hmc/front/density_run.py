"""A configured run of a user's log density (``model.kind: density``): load
the function from its file, check it at the starts, sample it with
:func:`~adaptive_hmc.front.general.sample` into a run directory (``checkpoint.npz``
after warm-up and every super-transition, the one before it kept as
``checkpoint.prev.npz``, the draws appended to the sample store ``store/``,
the tuner's log to ``log.jsonl``, all as a network run's; then
``posterior.nc`` and ``summary.json``), resume an interrupted one, and extend a
finished one (``metadata.json`` records when it started and each extension).

Flow position: config -> **density_run** (general + results' run-directory conventions).
"""
from __future__ import annotations

import contextlib
import sys
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..config import ConfigError, DensityConfig
from .experiment import Interrupted
from ..rundir.density_checkpoint import CheckpointError
from ..engine.density_chains import WarmupError
from .general import sample
from .user_files import callable_in, import_file
from ..models.density import DensityError, LogDensity
from ..rundir.results import CHECKPOINT, RunDir, RunError


def load(cfg: DensityConfig, source: str) -> tuple:
    """(the log density, the constrain function or None) named by ``cfg.model``; ConfigError naming the key."""
    m = cfg.model
    module = import_file(m.file, source, "model.file", "adaptive_hmc_density_")
    return tuple(None if name is None else callable_in(module, name, source, f"model.{key}", m.file)
                 for key, name in (("function", m.function), ("constrain", m.constrain)))


def starts(cfg: DensityConfig) -> np.ndarray:
    """The chains' starts: uniform in (-init_radius, init_radius), from the seed's third child
    (:func:`~adaptive_hmc.front.general.sample` uses the first two)."""
    rng = np.random.default_rng(np.random.SeedSequence(cfg.run.seed).spawn(3)[2])
    r = cfg.sampler.init_radius
    return rng.uniform(-r, r, size=(cfg.sampler.chains, cfg.model.dim))


def check(cfg: DensityConfig, source: str) -> tuple:
    """Everything a run checks before any work: (function, constrain, starts); ConfigError otherwise."""
    fn, constrain = load(cfg, source)
    q0 = starts(cfg)
    try:
        LogDensity(fn, cfg.model.dim, cfg.model.names).check_start(q0)
    except ValueError as e:
        raise ConfigError(f"{source}: model.function = {cfg.model.function!r}: {e}") from None
    if constrain is not None:                    # found now, not after all the sampling
        # at the starts and at twice as many rows: the draws come as (chains x draws, dim), and a function whose
        # answer fits the starts' count alone (Q[:3] of 3 starts) would fail only after the sampling
        for Q in (q0, np.concatenate([q0, q0])):
            try:
                out = constrain(Q)
                bad = not isinstance(out, dict) or any(np.shape(v)[:1] != (len(Q),) for v in out.values())
            except Exception as e:                   # noqa: BLE001 - any error of the user's function, named
                raise ConfigError(f"{source}: model.constrain = {cfg.model.constrain!r}: given draws Q ({len(Q)}, "
                                  f"{cfg.model.dim}) (the starts{'' if Q is q0 else ', twice'}) it raised "
                                  f"{type(e).__name__}: {e}") from None
            if bad:
                raise ConfigError(f"{source}: model.constrain = {cfg.model.constrain!r}: given draws Q ({len(Q)}, "
                                  f"{cfg.model.dim}) it must return {{name: array with {len(Q)} rows}} (one per "
                                  f"draw, whatever their number); it returned {type(out).__name__} {repr(out)[:80]}")
    return fn, constrain, q0


def run_density(cfg: DensityConfig, out, source: str, resume: bool = False, quiet: bool = False,
                extend: int = 0) -> dict:
    """Run ``cfg`` into directory ``out`` (or resume it from its checkpoint);
    the summary. ``extend``: add that many super-transitions to the finished
    run in ``out`` (the draws of a run asked for that many more at the start;
    its length is recorded in ``metadata.json``, so that ``resume`` continues
    an interrupted extension to it)."""
    out = Path(out)
    rd = RunDir(out)
    resuming = rd.prepare(resume, lambda m: print(m, file=sys.stderr, flush=True), extend)  # before any work
    fn, constrain, q0 = check(cfg, source)
    if resuming:
        rd.check_same_config(cfg)
    lock = rd.lock()                       # a second run into the directory is refused, naming the holder
    try:
        resuming = rd.prepare(resume, None, extend)     # the same, after a run that held the lock
        if not resuming:
            rd.clear_start()
            rd.start(cfg, source, cfg.run.threads)
        extended_to = rd.begin_extension(extend) if extend else rd.extended_to()   # the length an --extend set
        try:
            # the progress lines on stderr: stdout is the results' (run --json pipes)
            with warnings.catch_warnings(record=True) as said, contextlib.redirect_stdout(sys.stderr):
                warnings.simplefilter("always", ConvergenceWarning)
                idata = sample(fn, q0, names=cfg.model.names and {k: tuple(v) for k, v in cfg.model.names.items()},
                               constrain=constrain, checkpoint=out, verbose=not quiet,
                               **{**cfg.sample_options(),
                                  **({"super_transitions": extended_to, "until": None} if extended_to else {})})
        except KeyboardInterrupt:
            raise Interrupted(f"{out}: interrupted; the checkpoint holds the super-transitions done (and the "
                              f"warm-up once it ended); resume with: adaptive-hmc run {source} --out {out} "
                              f"--resume") from None
        except CheckpointError as e:                 # it names the directory or its file
            raise RunError(str(e)) from None
        except WarmupError as e:
            raise RunError(f"{out}: {e}") from None
        except DensityError as e:                # the Python log density raised during the run
            then = ("the checkpoint holds the run up to there: fix the function, then --resume"
                    if (out / CHECKPOINT).is_file() else "nothing was checkpointed: fix the function, then run again")
            raise RunError(f"{out}: model.function = {cfg.model.function!r}: {e}; {then}") from None
        summary = rd.write_density_results(idata)
    finally:
        lock.close()
    for w in said:
        if issubclass(w.category, ConvergenceWarning):
            print(f"{out}: warning: {w.message}".replace("more super_transitions", "run.super_transitions"),
                  file=sys.stderr, flush=True)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return summary
