"""Chains of any log density, tuned by the bandit: a user's function of the
unconstrained position returning (log density, gradient) in, ArviZ
InferenceData out.

Flow position: models (:class:`~adaptive_hmc.models.density.LogDensity`) ->
samplers (warm-up adaptation, the compiled chain loop) -> **general** ->
runner (the outer loop: ask -> super-transition -> reward -> tell). After a
warm-up that adapts a diagonal metric and a reference step
(:mod:`~adaptive_hmc.samplers.adaptation`), every chain samples the one
posterior in super-transitions of a fixed budget of leapfrog steps at the
tuner's (step factor, L); every sample after warm-up is kept.
"""
from __future__ import annotations

import json
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..diagnostics import chain_statistics, draws_convergence, more_super_transitions, summary_line, trust_warnings
from ..engine.density_chains import SAMPLE_DEFAULTS as D, DensityChains, RECORD_STATS, tuner_box
from ..models.density import LogDensity
from ..engine.network_options import as_seed_sequence
from ..engine.driver import Until, drive, end_warnings
from ..engine.progress import can_draw_bar, compile_kernels
from ..engine.runner import Plan
from ..rundir.density_checkpoint import DRAWS, CheckpointError, key_problem, run_key
from ..rundir.results import RunDir, RunDirSink, RunError
from ..tuners.options import BanditOptions

#: Per-draw statistics in InferenceData's names, from the record's fields (:data:`RECORD_STATS`).
STATS = tuple(zip(("acceptance_rate", "diverging", "n_steps", "lp", "energy"), RECORD_STATS))


def sample(logp_grad, initial_positions, *, names: dict | None = None, constrain=None, warmup: int = D.warmup,
           super_transitions: int = D.super_transitions, budget: int | None = D.budget,
           step_factor_bounds=D.step_factor_bounds, trajectory_bounds=D.trajectory_bounds,
           target_accept: float = D.target_accept, seed=0, threads: int | None = None,
           tuner: BanditOptions | None = None, verbose: bool = False, checkpoint=None,
           stop_after: int | None = None, until: dict | None = None, callback=None):
    """Sample ``logp_grad(q) -> (log p(q), d log p / dq)`` over unconstrained coordinates with bandit-tuned
    HMC; returns ArviZ InferenceData (docs/USAGE.md, "Your own model: any log density").
    ``logp_grad``: a Numba function (it runs inside the compiled chain loop) or any Python callable (called
    with the GIL held: slower). ``initial_positions`` (chains, dim): one start a chain. ``names`` {name: shape}
    splits q into named parameters (default one vector "q"); ``constrain(Q) -> {name: array}`` reports the
    draws Q (n, dim) on the constrained scale instead. ``warmup`` iterations adapt a diagonal metric (Stan's
    windows) and a reference step toward ``target_accept``; then ``super_transitions`` of ``budget`` leapfrog
    steps a chain (default: at least 1000, and 10 of the longest trajectories) run at the ``tuner``'s actions
    (other :class:`~adaptive_hmc.tuners.BanditOptions`; its bounds are replaced): a step factor within
    ``step_factor_bounds`` times the reference step, and L such that step x L, in posterior sds, is within
    ``trajectory_bounds``. ``seed`` decides every random number, whatever ``threads``. ``callback(log)`` is
    given the tuner's log (a dict a super-transition) when the run starts or resumes and after each one.
    The result: every post-warm-up draw; each draw's ``acceptance_rate``, ``diverging``, ``n_steps``, ``lp``,
    ``energy`` (the Hamiltonian), ``step_size`` (posterior sds); in ``attrs`` the tuner's log, the reference
    step, the metric's scale, every gradient evaluation, the seconds of compiling, warm-up and sampling.
    ``checkpoint``: a folder (made if its parent exists) kept as a run directory is: the state written to
    ``checkpoint.npz`` after warm-up and every super-transition (the one before kept as
    ``checkpoint.prev.npz``), the draws appended once to the sample store ``store/``, the tuner's log to
    ``log.jsonl``; the same arguments resume from it to the draws of an uninterrupted run, more
    ``super_transitions`` extend a finished run. ``stop_after``:
    return None after that many super-transitions, leaving the checkpoint. ``until`` ({"max_seconds": s,
    "target_ess": e}): go on until the chains meet (R-hat of every coordinate at most 1.01, bulk ESS at least
    e; checked when :func:`~adaptive_hmc.engine.driver.check_due`) or s seconds have passed;
    ``attrs["convergence"]`` says which.
    """
    limit, q0, (flo, fhi), (tlo, thi) = _checked(warmup, super_transitions, budget, threads, until,
                                                 initial_positions, step_factor_bounds, trajectory_bounds, checkpoint)
    model = LogDensity(logp_grad, q0.shape[1], names)
    model.check_start(q0)
    seed_chains, seed_tuner = as_seed_sequence(seed).spawn(2)
    chains = DensityChains(model, q0, seed_chains, threads)
    compile_s = compile_kernels(chains, quiet=not verbose and not can_draw_bar())
    key = run_key(q0, seed, warmup=int(warmup), budget=budget, step_factor_bounds=[flo, fhi],
                  trajectory_bounds=[tlo, thi], target_accept=float(target_accept), step_factor="of the reference step",
                  tuner=None if tuner is None else repr(tuner))
    rd = None if checkpoint is None else RunDir(checkpoint)
    if rd is not None and rd.has_checkpoint:
        run, bandit, log = _resumed(rd, key, chains, super_transitions)
    else:
        run, bandit = _warmed_up(chains, warmup, target_accept, budget, (flo, fhi), (tlo, thi), tuner,
                                 seed_tuner, verbose)
        log = _started(rd, chains, bandit, key, run)
    if callback is not None:
        callback(log)
    inner = rd and RunDirSink(rd, chains, bandit, log, 1, chains.unit, DRAWS, lambda: {"key": key, "run": run})
    units = _Units(rd, inner)
    rule = _until_rule(chains, units, super_transitions, limit, run, verbose)
    done = drive(Plan(chains, bandit, run["budget"]), super_transitions, until=rule, log=log,
                 wall=run["warmup_seconds"] + sum(e["seconds"] for e in log), quiet=not verbose, stop_after=stop_after,
                 sink=_Sink(inner, run, rule, callback, log, units))
    if not done.finished:
        return None
    return _inference_data(chains, units(), model, constrain, run, log, compile_s, limit, rule, verbose)


def _started(rd: RunDir | None, chains: DensityChains, bandit, key: dict, run: dict) -> list:
    """The log of a run that starts: empty, and in run directory ``rd`` (when there is one) the first
    checkpoint, after warm-up, the store and the log file begun anew."""
    if rd is not None:
        rd.path.mkdir(exist_ok=True)
        rd.sample_store(DRAWS).remove()
        rd.write_log([])
        rd.save_checkpoint(chains, bandit, [], run["warmup_seconds"], [], DRAWS, {"key": key, "run": run})
    return []


def _draws(units: list) -> np.ndarray:
    """The draws (R, n, D) of a run's units (:meth:`~adaptive_hmc.engine.density_chains.DensityChains.unit`)."""
    return np.concatenate([u[0] for u in units], axis=1)


class _Units:
    """The units (:meth:`~adaptive_hmc.engine.density_chains.DensityChains.unit`: draws and their statistics)
    of :func:`sample`'s run so far, held in one place: with a run directory ``rd``, its sample store and the
    units its sink ``inner`` has not stored yet (read when asked); without one, the ``collected`` list that
    :class:`_Sink` appends to. Calling it gives the list."""

    def __init__(self, rd: RunDir | None, inner):
        self.rd, self.inner, self.collected = rd, inner, []

    def __call__(self) -> list:
        if self.rd is None:
            return self.collected
        return self.rd.sample_store(DRAWS).read() + list(self.inner.unsaved)


def _until_rule(chains: DensityChains, units: _Units, super_transitions: int, limit, run: dict,
                verbose: bool) -> Until | None:
    """:func:`sample`'s ``until`` as the driver's rule (None without one): the chains met when R-hat and ESS
    of every coordinate of the draws so far (``units()``) say so; a resumed run that it stopped stays
    stopped."""
    if not limit:
        return None
    return Until(super_transitions, limit[0], lambda n, seconds: draws_convergence(
        chain_statistics(_draws(units())), limit[1]), "until max_seconds",
        (lambda line: print(line, flush=True)) if verbose else None,
        stopped=run.get("stopped") if chains.n_super >= super_transitions else None)


class _Sink:
    """:func:`sample`'s sink (:class:`~adaptive_hmc.engine.driver.Sink`): the run directory's
    (:class:`~adaptive_hmc.rundir.results.RunDirSink`, when there is one: ``inner``, which then holds the
    units on their way to the store), with the rule's stop kept in the run's state at the end, then the user's
    ``callback`` given the log; without a run directory it collects the units in ``units`` (:class:`_Units`)."""

    def __init__(self, inner, run, rule, callback, log, units: _Units):
        self.inner, self.run, self.rule, self.callback, self.log = inner, run, rule, callback, log
        self.units = units

    def append(self, entry, result):
        if self.inner is not None:
            self.inner.append(entry, result)
        else:
            self.units.collected.append(DensityChains.unit(result))

    def checkpoint(self, n: int, end: bool, wall: float):
        if end and self.rule is not None and self.rule.stopped is not None:
            self.run["stopped"] = self.rule.stopped
        if self.inner is not None:
            self.inner.checkpoint(n, end, wall)
        if self.callback is not None:
            self.callback(self.log)


def _checked(warmup, super_transitions, budget, threads, until, initial_positions, step_factor_bounds,
             trajectory_bounds, checkpoint) -> tuple:
    """:func:`sample`'s arguments checked (ValueError naming the one that is wrong): (the ``until``
    limit, the starts (chains, dim) as float64, the step factor's bounds, the trajectory's bounds)."""
    for name, value, least in (("warmup", warmup, 0), ("super_transitions", super_transitions, 1),
                               ("budget", 1 if budget is None else budget, 1),
                               ("threads", 1 if threads is None else threads, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise ValueError(f"{name}={value!r}: an integer >= {least}")
    limit = _until(until)
    raw = np.asarray(initial_positions)
    if not (np.issubdtype(raw.dtype, np.integer) or np.issubdtype(raw.dtype, np.floating)):
        raise ValueError(f"initial_positions: real numbers, got dtype {raw.dtype}")
    flo, fhi = (float(v) for v in step_factor_bounds)
    if not 0 < flo < fhi:
        raise ValueError(f"step_factor_bounds={tuple(step_factor_bounds)}: need 0 < low < high")
    tlo, thi = (float(v) for v in trajectory_bounds)
    if not 0 < tlo < thi:
        raise ValueError(f"trajectory_bounds={tuple(trajectory_bounds)}: need 0 < low < high")
    if checkpoint is not None:
        folder = Path(checkpoint)
        if not folder.parent.is_dir():
            raise ValueError(f"checkpoint={str(checkpoint)!r}: its folder {str(folder.parent)!r} does not exist "
                             f"(make it first; the checkpoint's own folder is made by the run)")
        if folder.exists() and not folder.is_dir():
            raise ValueError(f"checkpoint={str(checkpoint)!r}: a folder for the run's checkpoint.npz, store/ and "
                             f"log.jsonl (as a run directory's), and this is a file")
        if RunDir(folder).status() == "foreign":
            names = sorted(p.name for p in folder.iterdir())[:5]
            raise ValueError(f"checkpoint={str(checkpoint)!r}: holds files that are not a run's ({', '.join(names)}):"
                             f" give a new or empty folder")
    return limit, np.atleast_2d(raw.astype(np.float64)), (flo, fhi), (tlo, thi)


def _resumed(rd: RunDir, key: dict, chains: DensityChains, super_transitions: int) -> tuple:
    """(run, tuner, log) of the run checkpointed in ``rd``, its state restored into ``chains`` (the log file
    cut back to the checkpoint's entries; its draws stay in its store); CheckpointError when it cannot go on as
    this run."""
    def check(state):
        problem = key_problem(state["key"], key)
        return problem and f"{problem}; resume with the same arguments, or give another checkpoint path (a run's --out)"
    try:
        bandit, log, _, note, state = rd.restore(chains, DRAWS, check, "a checkpoint of sample()")
    except RunError as e:
        raise CheckpointError(str(e)) from None
    if note:
        print(note, file=sys.stderr, flush=True)
    rd.write_log(log)
    if chains.n_super > super_transitions:
        raise CheckpointError(f"checkpoint {rd.path}: holds {chains.n_super} super-transitions, more than the "
                              f"super_transitions={super_transitions} asked for; ask for at least "
                              f"{chains.n_super} (more extend the run), or give another checkpoint path")
    run = dict(state["run"])
    if "step" in run:                       # a checkpoint written before the key was named reference_step
        run["reference_step"] = run.pop("step")
    return run, bandit, log


def _warmed_up(chains: DensityChains, warmup: int, target_accept: float, budget, step_factor_bounds,
               trajectory_bounds, tuner, seed_tuner, verbose: bool) -> tuple:
    """(run, tuner) after ``chains``' warm-up: the reference step, the budget and the tuner's bounds in
    its units (``run``: reference_step, budget, bounds, warmup_seconds) and the bandit over them."""
    t0 = time.perf_counter()
    if verbose:
        print(f"warm-up: {warmup} iterations of {chains.R} chain{'s' * (chains.R != 1)} (a diagonal metric and a "
              f"reference step)", flush=True)
    step = chains.warm_up(int(warmup), target_accept)
    budget, bounds = tuner_box(step, step_factor_bounds, trajectory_bounds, budget)
    options = BanditOptions(bounds) if tuner is None else replace(tuner, bounds=bounds)
    bandit = options.tuner(int(seed_tuner.generate_state(1)[0]))
    run = dict(reference_step=step, budget=budget, bounds=bounds, warmup_seconds=time.perf_counter() - t0)
    if verbose:
        print(f"warm-up done in {run['warmup_seconds']:.1f} s: reference step {step:.3g} posterior sds; "
              f"super-transitions of {budget} leapfrog steps a chain, L in {bounds['num_steps'][0]}.."
              f"{bounds['num_steps'][1]}", flush=True)
    return run, bandit


def _inference_data(chains: DensityChains, units: list, model: LogDensity, constrain, run: dict, log: list,
                    compile_s: float, limit, rule, verbose: bool):
    """The InferenceData :func:`sample` returns, from the finished run (saying what it must)."""
    import arviz as az
    Q, stored = _draws(units), [u[1] for u in units]                              # (R, n, dim)
    step_size = np.concatenate([np.full(st["num_steps"].shape, e["step_factor"] * run["reference_step"])
                                for st, e in zip(stored, log)],
                               axis=1)                       # each draw's super-transition's step (posterior sds)
    stats = {name: np.concatenate([st[field] for st in stored], axis=1) for name, field in STATS}
    stats["step_size"] = step_size
    R, n, D = Q.shape
    stats["energy"] = stats["lp"] + 0.5 * D * stats["energy"]     # the Hamiltonian: U + K (K = D T / 2)
    stats["lp"] = -stats["lp"]
    posterior = {k: v.reshape(R, n, *v.shape[1:]) for k, v in
                 (constrain(Q.reshape(R * n, D)) if constrain else model.split(Q.reshape(R * n, D))).items()}
    gradients = chains.warmup_gradients + int(sum(e["gradients"] for e in log))
    attrs = dict(reference_step=run["reference_step"], scale=chains.scale.tolist(), budget=run["budget"],
                 num_steps_bounds=list(run["bounds"]["num_steps"]), gradients=gradients, compile_seconds=compile_s,
                 warmup_seconds=run["warmup_seconds"], sampling_seconds=sum(e["seconds"] for e in log),
                 tuner_log=[{k: e[k] for k in ("step_factor", "num_steps", "reward", "acceptance", "divergences")}
                            for e in log], convergence=run.get("stopped") if limit else None)
    st = chain_statistics(Q)
    if verbose:
        print(summary_line(st, stats, gradients, attrs["warmup_seconds"] + attrs["sampling_seconds"]), flush=True)
    n_super, seconds = len(log), attrs["sampling_seconds"]

    def longer(factor):                       # every draw after warm-up is kept: no burn-in
        more = more_super_transitions(factor, n_super, 0)
        return f"about {more} more super-transitions, {more * seconds / max(n_super, 1):.0f} s of sampling at this pace"
    for message in end_warnings(trust_warnings(st["rhat"], stats["diverging"], stats["energy"], st["ess_bulk"],
                                               longer), rule, log, "narrow step_factor_bounds or trajectory_bounds"):
        warnings.warn(message, ConvergenceWarning, stacklevel=3)       # the caller of sample()
    return az.from_dict(posterior={k: np.asarray(v) for k, v in posterior.items()}, sample_stats=stats,
                        attrs={k: str(v) if k == "tuner_log" else json.dumps(v) if k == "convergence" else v
                               for k, v in attrs.items() if v is not None})


def _until(until) -> tuple | None:
    """(max_seconds, target_ess) of :func:`sample`'s ``until``; ValueError naming what is wrong."""
    if until is None:
        return None
    if not isinstance(until, dict) or set(until) - {"max_seconds", "target_ess"}:
        raise ValueError(f"until={until!r}: a dict of max_seconds and target_ess (both numbers > 0), or None")
    values = (until.get("max_seconds", 600.0), until.get("target_ess", 400.0))
    for name, v in zip(("max_seconds", "target_ess"), values):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not v > 0:
            raise ValueError(f"until {name}={v!r}: a number > 0")
    return float(values[0]), float(values[1])
