"""The outer loop (Wang thesis Algorithm 3): ask -> super-transition -> reward -> tell,
and the one builder of its parts that the experiments and the estimators share.

Flow position: tuner + super-transition -> **runner** -> results. A hand-tuned
run is the same loop with a :class:`~adaptive_hmc.tuners.fixed.FixedTuner`.
The runner speaks to tuners through ``ask`` and ``tell`` only.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import partial
from typing import Callable, Protocol, TypedDict

import numpy as np

from .network_options import NetworkOptions
from .network_chains import NetworkChains
from .rewards import cv_error, cv_reward, esjd_reward, slowest_movement
from ..samplers.settings import Action, SettingsError
from .super_transition import SuperTransitionResult
from ..tuners.base import Tuner


class ChainSet(Protocol):
    """What the outer loop drives, the one interface of every kind of run's
    chains: a network's network's chain set (:class:`~adaptive_hmc.engine.network_chains.NetworkChains`)
    and a user density's chains (:class:`~adaptive_hmc.engine.density_chains.DensityChains`).
    ``step(state, action, budget) -> (state, result)`` is one super-transition from a state (the set's
    ``state`` value: a network's :class:`~adaptive_hmc.engine.network_state.NetworkState`, a density's
    :class:`~adaptive_hmc.engine.density_chains.DensityState`) at an :class:`~adaptive_hmc.samplers.settings.Action`
    (step factor, L) of ``budget`` leapfrog steps a chain, a pure function of them, which the loop
    (:func:`~adaptive_hmc.engine.driver.drive`) threads, publishing each new state as ``state`` for the
    sink, the checks and the probes; ``started(state)`` is what the starts cost (gradients, seconds) when
    ``state`` is the set's start, which its first super-transition counts; ``compile`` loads or compiles the chain loop (its seconds),
    ``kernels_ready`` says whether that costs a compile; ``start_chains`` makes the chains' starts when they
    need more than their first super-transition does (a network's optimized starts; what it did, or None),
    before the loop so that it can be said; ``checkpoint`` is what
    a checkpoint holds of the chains, ``restore`` puts it back with what the
    run's store holds (the stored super-transitions); ``probe`` tries an action
    on copies of the chains (:func:`probed_action`), or returns None for a set
    that does not (a density's chains: their tuning path stays the one it was)."""

    n_super: int
    state: object

    def step(self, state, action: Action, budget: int) -> tuple: ...

    def started(self, state) -> dict | None: ...

    def compile(self) -> float: ...

    def kernels_ready(self) -> bool | None: ...

    def start_chains(self) -> dict | None: ...

    def checkpoint(self) -> dict: ...

    def restore(self, saved: dict, stored) -> None: ...

    def probe(self, action: Action, budget: int, k: int = 0) -> SuperTransitionResult | None: ...


class TunerError(RuntimeError):
    """A tuner of one's own misbehaved (:class:`CheckedTuner`); the message names the method and the value."""


class CheckedTuner:
    """A tuner of one's own (any :class:`~adaptive_hmc.tuners.base.Tuner`) whose every call is checked:
    :class:`TunerError` when ``ask``, ``tell``, ``history`` or ``state_dict`` raise, when ``ask`` returns
    other than an action (``step_factor`` a finite number > 0, ``num_steps`` a whole number from 1 to the
    ``budget``), and when ``state_dict`` returns what JSON cannot hold (a checkpoint stores it as JSON)."""

    def __init__(self, inner, budget: int):
        self.inner, self.budget = inner, int(budget)

    def _call(self, method: str, *args, **kwargs):
        try:
            return getattr(self.inner, method)(*args, **kwargs)
        except Exception as e:                           # noqa: BLE001 - any error of the user's tuner, named
            raise TunerError(f"{method}() raised {type(e).__name__}: {e}") from None

    @property
    def accept_floor(self):
        return getattr(self.inner, "accept_floor", None)

    @property
    def history(self) -> list:
        return self._call("__getattribute__", "history")

    def ask(self) -> dict:
        action = self._call("ask")
        try:
            L = Action.of(action).num_steps
        except SettingsError as e:
            raise TunerError(f"ask() returned {action!r}: {e.allowed if e.field == 'action' else e}") from None
        if L > self.budget:
            raise TunerError(f"ask() returned {action!r}: num_steps={L}: must be <= the budget ({self.budget}), "
                             f"the leapfrog steps per chain in a super-transition")
        return action

    def tell(self, action: dict, reward: float, acceptance: float | None = None, transient: bool = False):
        info = self._call("tell", action, reward, acceptance=acceptance, transient=transient)
        if not (hasattr(info, "p") and hasattr(info, "moved")):
            raise TunerError(f"tell() returned {info!r}: a TellInfo(p, moved) (adaptive_hmc.tuners.base)")
        return info

    def state_dict(self) -> dict:
        state = self._call("state_dict")
        try:
            json.dumps(state)
        except (TypeError, ValueError) as e:
            raise TunerError(f"state_dict() returned a value JSON cannot hold ({type(e).__name__}: {e}; "
                             f"{repr(state)[:80]}): a checkpoint stores it as JSON") from None
        return state


#: The package's default reward model (the tuning study, docs/tuning_study.md):
#: ESJD/sqrt(L) rewards, ranked (Gaussian copula) for the GP, the step factor on
#: a log axis. The thesis's is reward "cv", transform "standardize", no log axes.
DEFAULT_REWARD = "esjd"
#: The rewards a run may tell: ESJD/sqrt(L), the slowest quantity's movement (:func:`~adaptive_hmc.engine.rewards.
#: slowest_movement`: the log hyperparameters' and the energy's), or minus the held-out error (the thesis).
REWARDS = ("esjd", "slowest", "cv")
#: Super-transitions whose rewards are not told (configs and estimators alike).
DEFAULT_WARMUP = 3

#: Most super-transitions of a run that goes on until its chains meet (:class:`~adaptive_hmc.engine.driver.Until`).
MAX_SUPER_TRANSITIONS = 100_000
class LogEntry(TypedDict):
    """One super-transition in the run's log (a line of ``log.jsonl``)."""

    i: int                  # index of the super-transition, from 0
    step_factor: float      # the action
    num_steps: int
    p: float | None         # the tuner's move probability after this tell (None: not told)
    moved: bool             # whether the tuner moved to a new action after it
    reward: float | None    # the reward computed (None: not finite)
    told: float | None      # the reward told (the fallback for a failure; None: warm-up)
    cv_error: float | None  # held-out error with the run's CV metric (the reward's, for a cv reward)
    acceptance: list        # acceptance rate of each chain
    stuck_chains: list      # chains that accepted no trajectory in this super-transition
    divergences: int
    iterations: int         # [Gibbs, HMC] iterations per chain
    leapfrog_steps: int     # leapfrog steps, all chains (what the budget counts)
    gradients: int          # every energy and gradient evaluation, all chains: leapfrog steps, Gibbs updates, calibration
    chain_steps: list       # leapfrog steps of each chain
    chain_divergences: list # divergent trajectories of each chain
    chain_energy: list      # mean potential energy of each chain's samples
    probes: list            # trials before it (:func:`probed_action`): action, min_accept_prob, passed, gradients,
                            # seconds (the chains' work on copies of them, on every thread)
    seconds: float


def fallback_reward(told: list) -> float:
    """The reward told for a super-transition whose reward is not finite, given
    the rewards told so far: the worst minus their spread (or -1 when there are
    none), so a failure ranks below every success without a far outlier that
    would flatten the reward model."""
    if not told:
        return -1.0
    spread = max(told) - min(told)
    return min(told) - (spread if spread > 0 else abs(min(told)) + 1.0)


#: A divergent share d of the trajectories counts as acceptance 1 - DIVERGENCE_WEIGHT d at most: with
#: the default floor of 0.8, an action whose trajectories diverge more than 2% of the time fails. (40,
#: a 0.5% limit, failed the fixed-prior robot arm's chains at the box's centre for their transient
#: divergences after warm-up, and the tuner stayed at a quarter of the usable step: docs/RESULTS.md.)
DIVERGENCE_WEIGHT = 10.0


def told_acceptance(acceptance, divergent_share: float = 0.0) -> float:
    """What the tuner's feasibility model learns of a super-transition: the
    chains' mean acceptance, lowered to 1 - 10 x the share of divergent
    trajectories when that is less (a 2% divergent share counts as 0.8: the
    energy error blew up there, a cliff is near), or 0 when a chain accepted
    nothing (a stuck chain fails the action whatever the others did)."""
    acceptance = np.asarray(acceptance, float)
    if np.any(acceptance == 0):
        return 0.0
    return float(min(acceptance.mean(), max(0.0, 1.0 - DIVERGENCE_WEIGHT * divergent_share)))


def chains_failure(acceptance, divergent, floor, stuck=None) -> bool:
    """Whether a super-transition (or a probe) failed for a few chains alone:
    some chain is ``stuck`` (default: it accepted nothing) while most chains,
    each told alone (:func:`told_acceptance` of its acceptance and of its row
    of the ``divergent`` (chains, iterations) flags), pass ``floor`` (False
    when ``floor`` is None, and for one chain). Told to the tuner as
    ``transient``: a chain far from the others' typical set fails steps that it
    takes once there."""
    acceptance, divergent = np.asarray(acceptance, float), np.asarray(divergent)
    stuck = acceptance == 0 if stuck is None else np.asarray(stuck, bool)
    if floor is None or not stuck.any():
        return False
    passes = [told_acceptance([a], float(d.sum()) / max(d.size, 1)) >= floor and not s
              for a, d, s in zip(acceptance, divergent, stuck)]
    return sum(passes) > len(passes) / 2


#: A move to a step factor above PROBE_ABOVE times the largest one told feasible is tried first
#: (:func:`probed_action`); the trial fails when a chain's mean acceptance probability is below
#: PROBE_FLOOR; at most MAX_PROBES trials before a super-transition.
PROBE_ABOVE, PROBE_FLOOR, MAX_PROBES = 1.05, 0.1, 3


def _untried_high(tuner: Tuner, action: dict) -> bool:
    """Whether ``action`` raises the step factor past every one told feasible
    (acceptance at the floor or above), or is any action while none is (the
    first told one too: the warm-up ran there, but from a cold start), for a
    tuner that learns where actions fail."""
    floor = tuner.accept_floor
    if floor is None:
        return False
    safe = [h["action"]["step_factor"] for h in tuner.history if h.get("acceptance", 0.0) >= floor]
    return not safe or float(action["step_factor"]) > PROBE_ABOVE * max(safe)


def probed_action(chains: ChainSet, tuner: Tuner, budget: int, reward=esjd_reward, told: list = ()) -> tuple:
    """The tuner's action, tried first where it raises the step factor past
    every one told feasible (for a tuner with an ``accept_floor``, the feasibility
    model): a chain's stability limit is a cliff that the acceptance below it
    does not foretell, and a super-transition spent beyond it leaves chains
    stuck for its whole budget. A probe (:meth:`NetworkChains.probe`, a few
    trajectories on copies of the chains) that a chain fails is told to the
    tuner with acceptance 0 and its own reward, and the tuner's next action is
    taken instead (at most :data:`MAX_PROBES` probes). Returns (action, the
    probes as log entries, their gradients)."""
    action, probes, gradients = tuner.ask(), [], 0
    while len(probes) < MAX_PROBES and _untried_high(tuner, action):
        trial = chains.probe(Action.of(action), budget, len(probes))
        if trial is None:                                    # a chain set that does not probe
            break
        gradients += trial.gradients
        accept = trial.record.accept_prob.mean(axis=1)
        probes.append(dict(step_factor=trial.step_factor, num_steps=trial.num_steps,
                           min_accept_prob=round(float(accept.min()), 6), passed=bool(accept.min() >= PROBE_FLOOR),
                           gradients=trial.gradients, seconds=round(trial.seconds, 4)))
        if probes[-1]["passed"]:
            break
        raw = float(reward(trial))
        transient = chains_failure(accept, trial.record.divergent, tuner.accept_floor, stuck=accept < PROBE_FLOOR)
        tuner.tell(action, raw if math.isfinite(raw) else fallback_reward(list(told)), acceptance=0.0,
                   transient=transient)
        action = tuner.ask()
    return action, probes, gradients


def iterate(chains: ChainSet, state, tuner: Tuner, budget: int, reward=esjd_reward, cv_metric: str | None = None,
           tell: bool = True, told: list = ()) -> tuple:
    """One iteration of the loop from the chains' ``state``; returns (LogEntry, SuperTransitionResult, the new
    state); the first super-transition from the set's start counts the starts' cost (``chains.started``).
    With ``tell`` false (warm-up) the reward is logged but not told to the
    tuner; ``told`` are the rewards told before (for :func:`fallback_reward`).
    Told actions that raise the step factor are probed first (:func:`probed_action`)."""
    action, probes, probe_gradients = probed_action(chains, tuner, budget, reward, told) if tell \
        else (tuner.ask(), [], 0)
    started = chains.started(state)
    state, result = chains.step(state, Action.of(action), budget)
    if started:
        result = result._replace(setup_gradients=result.setup_gradients + started["gradients"],
                                 seconds=result.seconds + started["seconds"])
    raw = float(reward(result))
    rec = result.record
    value, info = None, None
    if tell:
        value = raw if math.isfinite(raw) else fallback_reward(list(told))
        transient = chains_failure(result.acceptance, rec.divergent, tuner.accept_floor)
        info = tuner.tell(action, value, acceptance=told_acceptance(
            result.acceptance, float(rec.divergent.sum()) / max(rec.divergent.size, 1)), transient=transient)
    entry = LogEntry(i=result.index, step_factor=result.step_factor, num_steps=result.num_steps,
                     p=None if info is None else info.p, moved=False if info is None else info.moved,
                     reward=raw if math.isfinite(raw) else None, told=value,
                     cv_error=cv_error(result, cv_metric) if result.held_out is not None else None,
                     acceptance=[round(float(a), 6) for a in result.acceptance],
                     stuck_chains=[int(j) for j in np.flatnonzero(result.acceptance == 0)],
                     divergences=int(rec.divergent.sum()), iterations=result.n_iter,
                     leapfrog_steps=result.leapfrog_steps, gradients=result.gradients + probe_gradients,
                     chain_steps=[int(v) for v in rec.num_steps.sum(axis=1)],
                     chain_divergences=[int(v) for v in rec.divergent.sum(axis=1)],
                     chain_energy=[float(v) for v in rec.energy.mean(axis=1)], probes=probes,
                     seconds=round(result.seconds, 4))
    return entry, result, state


@dataclass(frozen=True)
class Plan:
    """The outer loop's parts a front drives: the chains, the tuner, ``budget``
    leapfrog steps a chain in a super-transition, the ``reward`` of one, the
    CV metric the log reports (or None) and the ``warmup`` super-transitions whose rewards
    are not told."""

    chains: ChainSet
    tuner: Tuner
    budget: int
    reward: Callable = esjd_reward
    cv_metric: str | None = None
    warmup: int = 0


@dataclass(frozen=True)
class RunOptions:
    """The outer loop of a run: ``super_transitions`` of ``budget`` leapfrog
    steps per chain, the ``seed`` that decides every random number, the
    ``reward`` ("esjd", the default, "slowest", or "cv": minus the held-out ``cv_metric``
    error, which a run with folds also logs), the ``warmup``
    super-transitions whose rewards are not told and the time limit ``max_seconds`` of a run that goes on
    until its chains meet (None: none), from which the bandit's annealing follows what the run can afford
    (:func:`affordable`)."""

    super_transitions: int
    budget: int
    seed: int = 0
    reward: str = DEFAULT_REWARD
    cv_metric: str | None = None
    warmup: int = DEFAULT_WARMUP
    max_seconds: float | None = None

    def __post_init__(self):
        if self.reward not in REWARDS:
            raise ValueError(f"reward {self.reward!r}: allowed are {', '.join(map(repr, REWARDS))}")
        for name in ("super_transitions", "budget"):
            v = getattr(self, name)
            if int(v) != v or v < 1:
                raise ValueError(f"{name}={v!r}: must be an integer >= 1")
        if int(self.warmup) != self.warmup or self.warmup < 0:
            raise ValueError(f"warmup={self.warmup!r}: must be an integer >= 0")


#: The nominal speed of the cost model of :func:`affordable`, in floating-point operations a second: what a
#: 2-core laptop's chains reach on the network's kernels (the robot arm, breast_cancer, fair and digits
#: measured 17-20 GFLOP/s in float64 here). A constant, not a measurement, so that one seed decides every
#: action whatever the machine, its load or the thread count.
NOMINAL_FLOPS = 20e9


def affordable(spec, n_cases: int, n_chains: int, budget: int, max_seconds: float) -> int:
    """The super-transitions a run of ``max_seconds`` can afford under a fixed cost model: each of the
    ``n_chains`` chains' ``budget`` leapfrog steps costs a forward and a backward pass over the ``n_cases``
    training cases (6 operations a weight a case) at :data:`NOMINAL_FLOPS`; at least 1."""
    sizes = (spec.n_inputs, *spec.hidden, spec.n_outputs)
    weights = sum((a + 1) * b for a, b in zip(sizes[:-1], sizes[1:]))
    seconds = 6.0 * weights * n_cases * n_chains * budget / NOMINAL_FLOPS
    return max(1, int(max_seconds / seconds))


def make_run(spec, X, Y, *, tuner, run: RunOptions,
             network: NetworkOptions = NetworkOptions(), test_sets: dict | None = None) -> Plan:
    """Build a run from one seed (``run.seed``), as the :class:`Plan` that
    :func:`~adaptive_hmc.engine.driver.drive` takes: the network's chains (``network``) on the training
    data (X, Y) and ``test_sets``, and the tuner, each with its own child of
    the seed's ``SeedSequence``. ``tuner`` is a
    :class:`~adaptive_hmc.tuners.options.BanditOptions` (the package's
    defaults for every option not given), a
    :class:`~adaptive_hmc.tuners.options.FixedOptions`, or a user's options
    type: ``tuner(seed)`` gives its :class:`~adaptive_hmc.tuners.base.Tuner`
    and its ``bounds`` (or ``num_steps``) the longest L; the layout of the chains
    must suit the reward (:meth:`~adaptive_hmc.engine.network_options.Layout.problem`: "cv" needs folds)."""
    if not callable(getattr(tuner, "tuner", None)) or not (hasattr(tuner, "bounds") or hasattr(tuner, "num_steps")):
        raise TypeError(f"tuner={tuner!r}: a BanditOptions or a FixedOptions (adaptive_hmc.tuners.options), or "
                        f"options of one's own with tuner(seed) and bounds (or num_steps)")
    bad = network.layout.problem(run.reward)
    if bad is not None:
        raise ValueError(f"reward {run.reward!r}: {bad[0]}={bad[1]!r}: {bad[2]}")
    longest = tuner.bounds["num_steps"][1] if hasattr(tuner, "bounds") else tuner.num_steps
    if longest > run.budget:
        raise ValueError(f"the tuner's longest trajectory, L = {longest}, must be <= the budget ({run.budget}), the "
                         f"leapfrog steps per chain in a super-transition")
    seed_chains, seed_tuner = np.random.SeedSequence(run.seed).spawn(2)
    rs = NetworkChains(spec, X, Y, network, test_sets=test_sets, seed=seed_chains)
    if callable(getattr(tuner, "within", None)) and run.max_seconds is not None:
        tuner = tuner.within(affordable(spec, len(X), rs.n_chains, run.budget, run.max_seconds))
    t = tuner.tuner(int(seed_tuner.generate_state(1)[0]))
    if run.reward in ("esjd", "slowest"):
        fn = esjd_reward if run.reward == "esjd" else slowest_movement
    else:
        fn = partial(cv_reward, metric=run.cv_metric) if rs.n_cv else (lambda result: math.nan)
    return Plan(rs, t, run.budget, fn, run.cv_metric, run.warmup)
