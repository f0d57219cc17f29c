"""The one driver of every run: the outer loop (its one ``while``, in
:func:`drive`; :func:`run_super_transitions` is it bare) with what every
front wants of it: its progress, the rule of a run that goes on until its
chains meet (:class:`Until`), a sink that keeps each super-transition and
checkpoints the run (:class:`Sink`), an early stop, and the verdict said at
the end (:func:`end_warnings`). A configured run
(:mod:`~adaptive_hmc.front.experiment`), :func:`~adaptive_hmc.front.general.sample`
and the estimators are fronts over :func:`drive`.

Flow position: runner + progress -> **driver** -> experiment, general, estimator.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, NamedTuple, Protocol

from ..diagnostics import check_line, time_limit_warning
from ..linker import save_compiled
from .progress import Progress
from .rewards import esjd_reward
from .runner import MAX_SUPER_TRANSITIONS, Plan, iterate

#: While running until the chains meet: the fewest super-transitions between checks (and at least a
#: quarter of those run before, so that the checks' cost shrinks as the run grows).
CHECK_EVERY = 5


def check_due(n: int, first: int) -> bool:
    """Whether a run that goes on until its chains meet checks them after its
    ``n``-th super-transition: at ``first`` (at least :data:`CHECK_EVERY`),
    then each time at least :data:`CHECK_EVERY` and a quarter more than at the
    last check. The same super-transitions on any machine and across a resume."""
    c = max(int(first), CHECK_EVERY)
    while c < n:
        c += max(CHECK_EVERY, c // 4)
    return c == n


@dataclass
class Until:
    """The rule of a run that goes on past ``first`` super-transitions until
    its chains meet or ``max_seconds`` pass, the one rule of a configured run,
    the estimators and :func:`~adaptive_hmc.front.general.sample`: after
    super-transition n with ``seconds`` spent, when a check is due
    (:func:`check_due`) or the time is up, ``judge(n, seconds)`` says (met, status
    line); ``say`` (or None) is given the check's line, ``limit`` names the
    time limit in the user's terms (a config key, a parameter). ``last`` is the
    last check's verdict (met, super_transitions, status), ``stopped`` the one
    that ended the run."""

    first: int
    max_seconds: float
    judge: Callable
    limit: str
    say: Callable | None = None
    last: dict | None = None
    stopped: dict | None = None

    def done(self, n: int, seconds: float) -> bool:
        """Whether the run stops after super-transition ``n`` (checking the chains when due)."""
        out_of_time = seconds > self.max_seconds
        if n < self.first or not (out_of_time or check_due(n, self.first)):
            return False
        met, line = self.judge(n, seconds)
        self.last = {"met": met, "super_transitions": n, "status": line}
        if met or out_of_time:
            self.stopped = self.last
        if self.say is not None:
            self.say(check_line(n, line, met, out_of_time, self.limit))
        return met or out_of_time

    def warning(self) -> str | None:
        """What a run stopped at its time limit before its chains met says (None for any other run)."""
        s = self.stopped
        return None if s is None or s["met"] else time_limit_warning(s, self.limit, self.max_seconds)


class Sink(Protocol):
    """Where a driven run's super-transitions go: ``append`` gets each one's
    log entry and result as it ends, ``checkpoint`` is called after it with the
    number done, whether the run ends there and the run's seconds so far. A
    run directory (:class:`~adaptive_hmc.rundir.results.RunDirSink`: a
    configured run, and :func:`~adaptive_hmc.front.general.sample` given a
    checkpoint folder) or memory (:data:`MEMORY`: the estimators, whose chains
    keep their samples)."""

    def append(self, entry: dict, result) -> None: ...

    def checkpoint(self, n: int, end: bool, wall: float) -> None: ...


class Memory:
    """The sink of a run kept in memory alone: its chains and log hold it all."""

    def append(self, entry: dict, result) -> None:
        pass

    def checkpoint(self, n: int, end: bool, wall: float) -> None:
        pass


MEMORY = Memory()


class Driven(NamedTuple):
    """What :func:`drive` returns: the whole log, the run's seconds (warm-up and super-transitions, each
    with its writes, checks and checkpoint: the wall time a time limit counts) and whether it ended (its
    length reached, or its :class:`Until` stopped it; False when ``stop_after`` ended this call's work
    first)."""

    log: list
    wall: float
    finished: bool


def drive(plan: Plan, first: int, *, until: Until | None = None, log: list | None = None, wall: float = 0.0,
          sink: Sink = MEMORY, quiet: bool = True, stop_after: int | None = None,
          say: Callable | None = None, callback: Callable | None = None) -> Driven:
    """Run ``plan``'s chains to ``first`` super-transitions, or with ``until``
    on past them until it stops the run; ``log`` holds the entries of a run
    resumed (``wall`` its seconds), and gets the new ones. Each super-transition
    goes to ``sink`` and to the progress (a bar or lines, unless ``quiet``);
    ``say`` (or None) is told at once of the first one in which a chain
    accepted no trajectory. ``stop_after``: end this call's work after that
    many super-transitions (as an interruption would); ``callback(entry,
    result)`` after each ends the run when it returns True. A run whose ``until``
    stopped it before a resume (``until.stopped`` set, ``first`` reached) runs
    nothing more. The loop owns the chains' state: it makes the starts
    (``chains.start_chains()``, a network's optimized starts, when not yet made),
    threads the state through each super-transition (``state, result =
    chains.step(state, action, budget)``, :func:`~adaptive_hmc.engine.runner.iterate`)
    and publishes it as ``chains.state`` before the sink, the checks and the next
    probes read it."""
    log = [] if log is None else log
    chains = plan.chains
    if until is not None and until.stopped is not None and chains.n_super >= first:
        return Driven(log, wall, True)
    progress = Progress(None if until else first, len(log), quiet, until.max_seconds if until else None, first)
    tally = dict(wall=wall, done=0, stuck=False, last=time.perf_counter())
    chains.start_chains()
    chain_state = chains.state

    def after(entry, result) -> bool:
        now = time.perf_counter()       # since the last super-transition ended: it, and the last one's writes and checks
        tally["wall"], tally["last"] = tally["wall"] + now - tally["last"], now
        sink.append(entry, result)
        progress.update(entry)
        if entry["stuck_chains"] and not tally["stuck"] and say is not None:
            tally["stuck"] = True
            say(f"warning: in super-transition {entry['i']} (step factor {entry['step_factor']:.3g}, L "
                f"{entry['num_steps']}) chains {entry['stuck_chains']} accepted no trajectory; the run goes on (the "
                f"log's stuck_chains lists every such one)")
        tally["done"] += 1
        n = chains.n_super
        end = until.done(n, tally["wall"]) if until else n >= first
        sink.checkpoint(n, end, tally["wall"])
        save_compiled(wait=False)                    # the compile cache's entries whose code is made meanwhile
        asked = callback is not None and bool(callback(entry, result))
        return end or asked or (stop_after is not None and tally["done"] >= stop_after)

    try:
        last = MAX_SUPER_TRANSITIONS if until else first
        while chain_state.n_super < last:
            told = [e["told"] for e in log if e["told"] is not None]
            entry, result, chain_state = iterate(chains, chain_state, plan.tuner, plan.budget, plan.reward,
                                              plan.cv_metric, tell=chain_state.n_super >= plan.warmup, told=told)
            chains.state = chain_state
            log.append(entry)
            if after(entry, result):
                break
    finally:
        progress.close()
        save_compiled()
    return Driven(log, tally["wall"], bool(until.stopped) if until else chains.n_super >= first)


def run_super_transitions(chains, tuner, super_transitions: int, budget: int, reward=esjd_reward,
                          cv_metric: str | None = None, callback=None, warmup: int = 0,
                          log: list | None = None) -> list:
    """The outer loop bare (:func:`drive` without progress, checks or checkpoints): ``chains`` (a
    :class:`~adaptive_hmc.engine.runner.ChainSet`) run to ``super_transitions`` of ``budget`` leapfrog steps
    a chain, each ``reward`` (ESJD/sqrt(L) by default) told to ``tuner`` but the first ``warmup``'s (from a cold
    start they measure the distance to equilibrium, not the action); ``callback(entry, result)`` after each
    ends the run when it returns True. Entries are appended to ``log`` (a resumed run's; a new list by
    default), which is returned."""
    plan = Plan(chains, tuner, budget, reward, cv_metric, warmup)
    return drive(plan, super_transitions, log=log, callback=callback).log


def end_warnings(draws: list, until: Until | None, log: list, stuck_hint: str) -> list:
    """What every run says at its end: the warnings of its draws (``draws``:
    the network's :func:`~adaptive_hmc.rundir.verdicts.rhat_warning`, a
    density's :func:`~adaptive_hmc.diagnostics.trust_warnings`; None entries
    left out), the time limit's warning of ``until`` when it stopped the run
    before the chains met, and how many super-transitions had a chain that
    accepted no trajectory (``stuck_hint``: what to look at or change, in the
    front's terms)."""
    out = [w for w in (*draws, until and until.warning()) if w]
    stuck = sum(1 for e in log if e["stuck_chains"])
    if stuck:
        out.append(f"in {stuck} of {len(log)} super-transitions some chain accepted no trajectory; its samples "
                   f"repeat one state ({stuck_hint})")
    return out
