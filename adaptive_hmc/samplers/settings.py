"""The settings of every transition, in one type that is passed into compiled code.

Flow position: **samplers** (read by every kernel, built by replicas, the
config and the estimators).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

_NO_STEP = np.empty(0)
_NO_PHASES = np.empty((0, 3))
#: What a run without a low-rank metric has as its rows: a 1-d array, which the kernels compile to the plain
#: leapfrog, kinetic energy and momentum draws (a metric's rows, even none yet, are a 2-d array, whose code
#: compiles only into the runs that use it: :func:`~adaptive_hmc.samplers.leapfrog.leapfrog_with`).
NO_METRIC = np.empty(0)

#: The transition of each iteration, by ``HMCSettings.kind``: Hybrid Monte
#: Carlo, random-walk Metropolis (``num_steps`` proposals per iteration, each one
#: energy evaluation), uncorrected stochastic dynamics (``num_steps`` leapfrog
#: steps, no acceptance test).
KINDS = ("hmc", "metropolis", "stochastic_dynamics")
#: ``HMCSettings.kind`` of each entry of :data:`KINDS`.
HMC, METROPOLIS, STOCHASTIC_DYNAMICS = range(len(KINDS))


class KernelInfo(NamedTuple):
    """What every compiled transition kernel returns (as BlackJAX's kernels
    return a named info beside the state, which here is changed in place)."""

    accepted: float         # share of the transition's moves accepted: 0 or 1 (HMC), k/L (Metropolis)
    accept_prob: float      # min(1, exp(-energy_error)), or the mean over the moves; 0 for a divergence
    energy_error: float     # H(proposal) - H(current); for windows log(sum_reject e^-H / sum_accept e^-H)
    divergent: bool         # a non-finite energy or gradient, or an energy error above the limit
    num_steps: int          # energy and gradient evaluations (leapfrog steps, or Metropolis proposals)
    energy: float           # the potential energy of the state after the transition
    squared_jump: float     # ||proposal - current||^2 (Metropolis: see metropolis_kernel); 0 for a divergence


class SettingsError(ValueError):
    """A setting out of range: ``field``, ``value`` and what is ``allowed``."""

    def __init__(self, field: str, value, allowed: str):
        super().__init__(f"{field}={value!r}: {allowed}")
        self.field, self.value, self.allowed = field, value, allowed


def check_step_factor(value, template: bool = False) -> float:
    """The step factor ``value`` as a float: a finite number > 0 (or 0 in a
    ``template``, whose step is an absolute ``step_size`` or comes later);
    :class:`SettingsError` otherwise. The one check of a step factor: the
    settings, :func:`hmc_settings` and a super-transition's action use it (a
    config's schema declares the same bound for its own messages)."""
    try:
        f = float(value) if not isinstance(value, str) else math.nan
    except (TypeError, ValueError):
        f = math.nan
    if isinstance(value, bool) or not math.isfinite(f) or f < 0 or (f == 0 and not template):
        raise SettingsError("step_factor", value, "must be a finite number > 0")
    return f


class Action(NamedTuple):
    """What a tuner asks and a super-transition runs, the one value that goes
    from the tuner to the kernel: ``step_factor`` (times each chain's base
    steps) and ``num_steps``, the trajectory length L in leapfrog steps. Tuners
    speak dicts of their dimensions (they know nothing of HMC);
    :meth:`Action.of` turns one into this, checked once."""

    step_factor: float
    num_steps: int

    @classmethod
    def of(cls, action) -> "Action":
        """``action`` (a tuner's dict with ``step_factor`` and ``num_steps``, or
        an :class:`Action`) checked: the step factor by :func:`check_step_factor`,
        L a whole number >= 1; :class:`SettingsError` otherwise."""
        if not isinstance(action, Action):
            try:
                action = cls(action["step_factor"], action["num_steps"])
            except (KeyError, TypeError, IndexError):
                raise SettingsError("action", action, "need step_factor and num_steps") from None
        L = action.num_steps
        if isinstance(L, bool) or not isinstance(L, (int, float, np.integer, np.floating)) \
                or not (math.isfinite(L) and L >= 1 and float(L).is_integer()):
            raise SettingsError("num_steps", L, "must be a whole number >= 1")
        return cls(check_step_factor(action.step_factor), int(L))


class HMCSettings(NamedTuple):
    """Settings of the [Gibbs update, HMC transition] iteration (also read by
    random-walk Metropolis and stochastic dynamics).

    num_steps : trajectory length L (leapfrog steps).
    step_factor : multiplies the target's per-parameter heuristic scales (FBM's
        stepsize adjustment factor); 0 when ``step_size`` is given.
    step_size : absolute steps, one value or one per parameter; empty when
        ``step_factor`` is given.
    window : acceptance window W (1 = plain HMC). The trajectory has L + 1
        states, the current one placed uniformly among the first W (Neal 1994);
        W is at most L (with ``jitter``, a drawn L below W uses W = L + 1).
    persistence : alpha of the partial momentum refresh p <- alpha p +
        sqrt(1 - alpha^2) n, with momentum negation on rejection (Neal 1993 eq 16).
    jitter : draw L uniformly from 1..num_steps each transition.
    step_nu : randomise the step as eps exp(nu C), C standard Cauchy (Neal 1992 eq 23).
    max_energy_error : energy errors above this count as divergences.
    gibbs : update the hyperparameters by Gibbs sampling before each HMC
        transition (a no-op for targets without hyperparameters) ...
    initial_phase_steps : ... once this many leapfrog steps are done
        (Rasmussen 1996 section 2.3: hyperparameters fixed at first).
    kind : the transition, an index into :data:`KINDS` (0: HMC). Windows and
        jitter are for HMC only.
    anneal : simulated annealing with dummy momentum (Neal 1992 eqs 24-27), a
        schedule of phases, rows (iterations, alpha, T0), counted from the
        chain's first iteration; the last phase goes on after the schedule
        ends. Empty: none. With kind hmc each iteration is [eq 24, a trajectory
        of ``num_steps`` leapfrog steps accepted by eq 25]; with kind
        metropolis, ``num_steps`` of [eq 24, the move q + eps p_s of eq 27].
        No windows, jitter or persistence (eq 24 is the momentum update).
    step_scale : a factor per parameter of the heuristic scales (the learned
        metric, :mod:`~adaptive_hmc.samplers.metric`); empty: none. Not with
        ``step_size``.
    low_rank : a low-rank metric in the coordinates q_k / eps_k, rows
        [lambda_j, u_j] (u_j orthonormal, lambda_j > 0 the variance along u_j
        relative to 1; :func:`~adaptive_hmc.samplers.metric.low_rank_metric`);
        no rows: unit masses; :data:`NO_METRIC` (the default): none, and
        the kernels compile without it. For kind hmc without annealing.

    Build a checked instance with :func:`hmc_settings`; a template for the
    replicas (step and L come from the tuner's action) with ``HMCSettings(...)``.
    """

    num_steps: int = 1
    step_factor: float = 0.0
    step_size: np.ndarray = _NO_STEP
    window: int = 1
    persistence: float = 0.0
    jitter: bool = False
    step_nu: float = 0.0
    max_energy_error: float = 1000.0
    gibbs: bool = True
    initial_phase_steps: int = 0
    kind: int = 0
    anneal: np.ndarray = _NO_PHASES
    step_scale: np.ndarray = _NO_STEP
    low_rank: np.ndarray = NO_METRIC


def _check_low_rank(value, kind: int, anneal: np.ndarray) -> np.ndarray:
    """A low-rank metric's rows [lambda_j, u_j] as a float (r, D + 1) array, checked: lambda_j finite > 0,
    each u_j of unit length (or lambda_j 1, a row that changes nothing); rows only for kind hmc without
    annealing."""
    a = np.ascontiguousarray(value, dtype=np.float64)
    if a.ndim == 1 and a.size == 0:
        return a                                                    # NO_METRIC
    if a.ndim != 2 or a.shape[1] < 1:
        raise SettingsError("low_rank", value, "rows [lambda, u] (an (r, D + 1) array)")
    if a.shape[0] == 0:
        return a
    if kind != HMC or anneal.shape[0] > 0:
        raise SettingsError("low_rank", a.shape, "a low-rank metric is for kind hmc without annealing")
    norms = np.sqrt((a[:, 1:] ** 2).sum(axis=1))
    unit = (np.abs(norms - 1.0) <= 1e-6) | (a[:, 0] == 1.0)
    if not (np.all(np.isfinite(a)) and np.all(a[:, 0] > 0) and np.all(unit)):
        raise SettingsError("low_rank", a.shape, "each row: lambda finite > 0 and a unit vector u")
    return a


def _whole(name, v, lo):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) and not (
            isinstance(v, float) and v.is_integer()) or v < lo:
        raise SettingsError(name, v, f"must be an integer >= {lo}")
    return int(v)


def check_settings(s: HMCSettings, need_step: bool = True) -> HMCSettings:
    """``s`` validated, with every field of the one type the kernels compile for
    (so a compiled kernel is reused from the cache whatever Python types came in).
    ``need_step=False`` checks a template whose step comes later."""
    num_steps = _whole("num_steps", s.num_steps, 1)
    window = _whole("window", s.window, 1)
    if window > num_steps and need_step:
        raise SettingsError("window", window, f"must be in 1..num_steps ({num_steps})")
    step_size = np.atleast_1d(np.asarray(s.step_size, dtype=np.float64)).ravel()
    step_factor = check_step_factor(s.step_factor, template=True)
    if need_step and (step_factor > 0) == (step_size.size > 0):
        raise SettingsError("step_factor", s.step_factor, "give exactly one of step_factor and step_size")
    if not np.all(step_size > 0):
        raise SettingsError("step_size", s.step_size, "every entry must be > 0")
    if not 0.0 <= s.persistence < 1.0:
        raise SettingsError("persistence", s.persistence, "must be in [0, 1)")
    if not s.step_nu >= 0:
        raise SettingsError("step_nu", s.step_nu, "must be >= 0")
    if not s.max_energy_error > 0:
        raise SettingsError("max_energy_error", s.max_energy_error, "must be > 0")
    step_scale = np.ascontiguousarray(s.step_scale, dtype=np.float64).ravel()
    if step_scale.size and (step_size.size or not np.all(np.isfinite(step_scale) & (step_scale > 0))):
        raise SettingsError("step_scale", s.step_scale, "finite factors > 0 of the heuristic scales, not with step_size")
    kind = KINDS.index(s.kind) if s.kind in KINDS else s.kind
    if isinstance(kind, bool) or not isinstance(kind, (int, np.integer)) or not 0 <= kind < len(KINDS):
        raise SettingsError("kind", s.kind, f"one of {', '.join(KINDS)} (or its index)")
    if kind != HMC and (window != 1 or s.jitter):
        raise SettingsError("window" if window != 1 else "jitter", window if window != 1 else s.jitter,
                            f"windows and jitter are for kind hmc, not {KINDS[kind]}")
    anneal = check_schedule(s.anneal, kind, window, s.jitter, s.persistence)
    return HMCSettings(num_steps, step_factor, step_size, window, float(s.persistence), bool(s.jitter),
                       float(s.step_nu), float(s.max_energy_error), bool(s.gibbs),
                       _whole("initial_phase_steps", s.initial_phase_steps, 0), int(kind), anneal, step_scale,
                       _check_low_rank(s.low_rank, int(kind), anneal))


def check_schedule(phases, kind: int, window: int = 1, jitter: bool = False, persistence: float = 0.0) -> np.ndarray:
    """An annealing schedule (rows (iterations, alpha, T0)) as a float (n, 3)
    array, checked, for a transition of ``kind``."""
    a = np.asarray(phases, dtype=np.float64)
    if a.size == 0:
        return _NO_PHASES
    if a.ndim != 2 or a.shape[1] != 3:
        raise SettingsError("anneal", phases, "phases (iterations, alpha, T0), one row each")
    for n, alpha, t0 in a:
        if not (n >= 0 and float(n).is_integer() and 0.0 <= alpha < 1.0 and t0 > 0 and math.isfinite(t0)):
            raise SettingsError("anneal", [float(n), float(alpha), float(t0)], "each phase: iterations an integer >= 0, alpha in "
                                "[0, 1), T0 > 0")
    if kind not in (0, 1):
        raise SettingsError("anneal", a.tolist(), f"annealing is for kinds hmc and metropolis, not {KINDS[kind]}")
    if window != 1 or jitter or persistence != 0.0:
        raise SettingsError("window" if window != 1 else "jitter" if jitter else "persistence",
                            window if window != 1 else jitter if jitter else persistence,
                            "not with annealing (its eq 24 is the momentum update)")
    return np.ascontiguousarray(a)


def hmc_settings(num_steps: int = 1, *, step_factor: float | None = None, step_size=None,
                 **options) -> HMCSettings:
    """Checked :class:`HMCSettings` of one transition: exactly one of
    ``step_factor`` (> 0) and ``step_size`` (> 0, scalar or per parameter);
    ``options`` are the other fields (ValueError names any problem)."""
    if step_factor is not None:
        check_step_factor(step_factor)
    return check_settings(HMCSettings(num_steps, 0.0 if step_factor is None else step_factor,
                                      _NO_STEP if step_size is None else step_size, **options))
