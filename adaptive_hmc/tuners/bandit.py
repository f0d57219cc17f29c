"""GP-bandit tuner with annealed adaptation (Wang thesis chapter 3, Algorithm 3).

Flow position: reward -> **tuner** -> next action. Knows nothing about HMC:
``ask()`` proposes an action (a dict), ``tell(action, reward)`` learns from it
(higher is better). After the i-th tell, with probability p_i the tuner moves
to the maximiser of u(a) = mu(a) + p_i sqrt(beta_{i+1}) sigma(a), found by
DIRECT; otherwise it keeps the action just told (unless ``leave_below`` says
the reward just told collapsed).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

import numpy as np
from scipy.special import ndtr
from scipy.stats import norm, qmc, rankdata

from .acquisition import maximize, ucb, ucb_beta
from .base import TellInfo
from .gp import GPRewardModel
from .schedules import Exponential, schedule_from_dict, schedule_to_dict
from .space import Space


#: How rewards become the GP's targets: "standardize" (the thesis: minus the
#: mean, over the sd, of all rewards told) or "rank" (a Gaussian copula of the
#: distinct actions' mean rewards: Phi^-1((rank - 1/2) / n)), which one
#: extreme reward cannot squeeze the others into.
TRANSFORMS = ("standardize", "rank")


#: The run length the schedules' defaults are set for: a run that can afford fewer super-transitions
#: (:attr:`BanditOptions.horizon`) anneals as much faster.
ANNEAL_HORIZON = 1000


class OptionError(ValueError):
    """A :class:`BanditOptions` field given a value it does not allow: ``field`` names it, ``allowed`` says
    what it takes (a config maps it to its key)."""

    def __init__(self, field: str, value, allowed: str):
        self.field, self.value, self.allowed = field, value, allowed
        super().__init__(f"{field}={value!r}: {allowed}")


@dataclass(frozen=True)
class BanditOptions:
    """The options of a :class:`BanditTuner`, each declared, defaulted and
    checked here alone (a ValueError naming the field): the tuner over
    ``bounds`` ({"step_factor": (low, high), "num_steps": (low, high)}, or any
    names), with the package's defaults (the tuning study, docs/RESULTS.md):
    ranked rewards, the step factor on a log axis, leaving collapsed actions,
    the feasibility model (whose length scale along the step factor is 0.1 of
    its log axis: acceptance falls off a cliff within a factor of 1.5-2 in step
    size) and a few chains' failure fading over 5 tells, Wang's length scale,
    confidence, noise and annealing rate. :meth:`thesis` gives the thesis's
    (Wang 2013): standardised rewards, linear axes, no feasibility model.

    Fields
    ------
    bounds : dict name -> (lower, upper). A dimension whose bounds are both
        ints is integer (rounded) unless the tuner's ``integer`` says otherwise.
    alpha : kernel length scale as a fraction of each box side (thesis: 0.2).
    delta : UCB confidence parameter (thesis: 0.1).
    noise : observation noise sd sigma_eta, in units of the reward's sd.
    schedule : p_i, e.g. ``Exponential(0.01)`` (default), ``Polynomial(gamma)``,
        ``Wang2013(burn_in)``.
    first_action : "centre", a dict, or an int n (n space-filling Latin
        hypercube points tried before the bandit starts).
    fit_kernel : fit length scales and signal variance by marginal likelihood.
    maxfun : DIRECT's evaluation budget; polish : L-BFGS-B after DIRECT.
    transform : how rewards become the GP's targets, :data:`TRANSFORMS`
        ("rank", the default, or "standardize", the thesis's).
    leave_below : None (the thesis), or a share q: when the reward just told
        ranks among the lowest q of all rewards told (mid-ranks for ties),
        the tuner moves by the acquisition even when the p_i coin says keep.
        Late in a run p_i is small, and an action whose chains stopped
        accepting would otherwise be kept for many super-transitions.
    log_axes : names of dimensions the GP sees on a log scale (their bounds
        must be > 0): a step factor in [0.01, 1.01] then spends as much of the
        box on 0.01-0.1 as on 0.1-1, where the linear scale (the thesis's)
        spends nine tenths of it above 0.1.
    accept_floor : None (the thesis), or an acceptance rate: the tuner also
        learns where actions fail (constrained Bayesian optimisation, Gelbart,
        Snoek & Adams 2014). Each tell may carry the action's ``acceptance``
        (the runner tells the chains' mean, 0 when a chain accepted nothing); a
        second GP over the box models it, and actions whose P(acceptance >
        floor) is below :data:`FEASIBLE` are not proposed: where nothing was
        tried that probability is one half, so the tuner moves near actions
        whose chains accepted (the feasible region grows from the first
        action), and a region where a chain stopped accepting is not visited
        again; an action told with acceptance below the floor is left at once,
        whatever p_i says.
    accept_length_scales : {name: length scale} of the feasibility GP, as a
        fraction of the box side (default ``alpha`` for every dimension): a
        dimension along which acceptance barely changes (L, for HMC) can say so.
    accept_memory : None (every told acceptance counts alike), or a number of
        tells tau: a failure told ``transient`` (a chain accepted nothing while
        most chains passed the floor) weighs exp(-age / tau) in the feasibility
        model, its age counted in tells since; every other tell keeps its
        weight. Such a failure is the stuck chain's, not the action's: early
        in a run one chain still far from the posterior's typical set (at 10
        to 60 times the others' energy) fails a step that every chain takes
        once there, and a failure that counted forever kept the tuner at a
        fraction of the usable step for the rest of the run. A cliff that is
        real is found again at the price of a probe, not a super-transition.
    horizon : None (the thesis: no end in view), or the super-transitions the run can afford (its time
        limit over a cost model of one, :func:`~adaptive_hmc.engine.runner.affordable`): the schedule then
        runs as if each tell were max(1, :data:`ANNEAL_HORIZON` / horizon) of them, so that a run of 60
        super-transitions spends as small a share of them exploring as one of 1000 does (the default
        Exponential(0.01): p falls to 0.05 by the 300th of 1000, and by the 18th of 60).
    """

    bounds: dict
    alpha: float = 0.2
    delta: float = 0.1
    noise: float = 0.1
    schedule: object = field(default_factory=lambda: Exponential(0.01))
    first_action: object = "centre"
    maxfun: int = 1000
    polish: bool = True
    fit_kernel: bool = False
    transform: str = "rank"
    log_axes: tuple = ("step_factor",)
    leave_below: float | None = 0.05
    accept_floor: float | None = 0.8
    accept_length_scales: dict | None = field(default_factory=lambda: {"step_factor": 0.1, "num_steps": 1.0})
    accept_memory: float | None = 5.0
    horizon: int | None = None

    #: What :meth:`thesis` changes: the thesis's reward model, without the package's additions.
    THESIS = dict(transform="standardize", log_axes=(), leave_below=None, accept_floor=None,
                  accept_length_scales=None, accept_memory=None)

    @classmethod
    def thesis(cls, bounds: dict, **changes) -> "BanditOptions":
        """The thesis's tuner over ``bounds`` (Wang 2013: standardised rewards, linear axes, no leaving
        and no feasibility model), with ``changes``."""
        return cls(bounds, **{**cls.THESIS, **changes})

    def __post_init__(self):
        for name in ("alpha", "noise"):
            if not getattr(self, name) > 0:
                raise OptionError(name, getattr(self, name), "must be > 0")
        if not self.maxfun >= 10:
            raise OptionError("maxfun", self.maxfun, "DIRECT's evaluations per move: at least 10")
        if not 0 < self.delta < 1:
            raise OptionError("delta", self.delta, "must be in (0, 1)")
        if self.transform not in TRANSFORMS:
            raise OptionError("transform", self.transform, f"allowed are {TRANSFORMS}")
        for name, what in (("leave_below", "a share"), ("accept_floor", "an acceptance rate")):
            v = getattr(self, name)
            if v is not None and not 0 < v < 1:
                raise OptionError(name, v, f"null (None: off) or {what} in (0, 1)")
        scales = self.accept_length_scales or {}
        if set(scales) - set(self.bounds) or not all(v > 0 for v in scales.values()):
            raise OptionError("accept_length_scales", self.accept_length_scales, f"positive scales of "
                              f"{list(self.bounds)}")
        if self.horizon is not None and not (isinstance(self.horizon, int) and self.horizon >= 1):
            raise OptionError("horizon", self.horizon, "null (None: no end in view) or super-transitions, an int >= 1")
        if self.accept_memory is not None and not self.accept_memory > 0:
            raise OptionError("accept_memory", self.accept_memory, "null (None: off) or a number of tells > 0")
        f = self.first_action
        if not (f == "centre" or isinstance(f, dict) or (isinstance(f, int) and not isinstance(f, bool) and f >= 1)):
            raise OptionError("first_action", f, "allowed are 'centre', a dict of the bound names, or a positive "
                              "int (number of space-filling points)")
        Space(self.bounds, None, self.log_axes)                 # the box and its log axes

    def tuner(self, seed: int) -> "BanditTuner":
        """The tuner these options describe, with its own ``seed``."""
        return BanditTuner(self, seed)

    def typical_num_steps(self) -> int:
        """The trajectory length a time estimate assumes: the geometric middle of the L bounds."""
        lo, hi = self.bounds["num_steps"]
        return int(round(math.sqrt(lo * hi)))

    def within(self, horizon: int) -> "BanditOptions":
        """These options for a run that can afford ``horizon`` super-transitions (its time limit's), unless
        they name a horizon of their own."""
        return self if self.horizon is not None else replace(self, horizon=int(horizon))


def _canonical(o: BanditOptions) -> BanditOptions:
    """``o`` with its numbers as floats and ints, its box and axes as tuples (one form, saved and restored)."""
    return replace(o, bounds={str(n): tuple(b) for n, b in o.bounds.items()}, alpha=float(o.alpha),
                   delta=float(o.delta), noise=float(o.noise), maxfun=int(o.maxfun), polish=bool(o.polish),
                   fit_kernel=bool(o.fit_kernel), log_axes=tuple(o.log_axes),
                   leave_below=None if o.leave_below is None else float(o.leave_below),
                   accept_floor=None if o.accept_floor is None else float(o.accept_floor),
                   accept_length_scales={str(k): float(v) for k, v in (o.accept_length_scales or {}).items()},
                   accept_memory=None if o.accept_memory is None else float(o.accept_memory))


#: The options :func:`options_from_dict` reads beyond the box and the schedule (absent in an older state: the
#: field's default, except where an older version's default differed).
_OLD_DEFAULTS = {"log_axes": (), "leave_below": None, "accept_floor": None, "accept_length_scales": None,
                 "accept_memory": None, "horizon": None}


def options_to_dict(o: BanditOptions) -> dict:
    """``o`` as JSON (the box's pairs as lists, the schedule as :func:`schedule_to_dict`)."""
    d = {f.name: getattr(o, f.name) for f in fields(o)}
    return {**d, "bounds": {n: list(b) for n, b in o.bounds.items()}, "log_axes": list(o.log_axes),
            "schedule": schedule_to_dict(o.schedule)}


def options_from_dict(d: dict) -> BanditOptions:
    """The options :func:`options_to_dict` wrote (or an older state's top-level keys)."""
    known = {f.name for f in fields(BanditOptions)} - {"bounds", "schedule"}
    given = {k: d[k] if k in d else _OLD_DEFAULTS[k] for k in known if k in d or k in _OLD_DEFAULTS}
    return BanditOptions({n: tuple(b) for n, b in d["bounds"].items()}, schedule=schedule_from_dict(d["schedule"]),
                         **{**given, "log_axes": tuple(given.get("log_axes", ()))})


class BanditTuner:
    """GP-UCB bandit over a box of actions with an annealed move probability,
    as its :class:`BanditOptions` say (``options``, checked there).
    ``seed``: the tuner's own random numbers (move decisions, space filling);
    ``integer``: {name: bool}, whether a dimension is rounded (default: those
    whose bounds are both ints); ``model``: a stand-in reward model
    (``fit(X, y, noise_var)``, ``predict(X, return_std=True)``), default
    :class:`GPRewardModel`."""

    def __init__(self, options: BanditOptions, seed: int = 0, *, integer=None, model=None):
        if not isinstance(options, BanditOptions):
            raise TypeError(f"options={options!r}: a BanditOptions (BanditOptions(bounds, ...), or "
                            f"BanditOptions.thesis(bounds, ...) for the thesis's tuner)")
        #: The options, in canonical types (what :meth:`state_dict` stores); the tuner reads them there.
        o = self.options = _canonical(options)
        #: The action box (:class:`~adaptive_hmc.tuners.space.Space`): bounds, integer and log axes, unit maps.
        self.space = Space(o.bounds, integer, o.log_axes)
        self.bounds, self.names = self.space.bounds, self.space.names
        self.log_axes, self.integer = self.space.log_axes, self.space.integer
        self.accept_floor = o.accept_floor              # the Tuner protocol's attribute
        self._feasibility_model = GPRewardModel(
            len(self.bounds), [o.accept_length_scales.get(n, o.alpha) for n in self.bounds])
        self._feasibility_known = True        # False once every observation is forgotten (_fit_feasibility)
        self.seed = int(seed)
        self.model = model if model is not None else GPRewardModel(len(self.names), o.alpha, o.fit_kernel)
        self._rng = np.random.default_rng(self.seed)
        self._history = []
        self._sums = {}
        self._accepts = {}          # action -> [unit point, [(tell index, told acceptance, transient), ...]]
        if isinstance(o.first_action, dict):
            self._initial = [self.space.action(self.space.unit(o.first_action))]
        elif o.first_action == "centre":
            self._initial = [self.space.action(np.full(len(self.names), 0.5))]
        else:
            pts = qmc.LatinHypercube(d=len(self.names), seed=self._rng).random(o.first_action)
            self._initial = [self.space.action(p) for p in pts]
        self._pending = self._initial.pop(0)

    # -- ask / tell --------------------------------------------------------------
    def ask(self) -> dict:
        """The action to try next (the same until the next tell)."""
        return dict(self._pending)

    def tell(self, action: dict, reward: float, acceptance: float | None = None,
             transient: bool = False) -> TellInfo:
        """Record ``reward`` (higher is better) for ``action`` and choose the
        next action; ``acceptance`` feeds the feasibility model when
        :attr:`accept_floor` is set, and fades (``accept_memory``) when told
        ``transient``."""
        self.space.unit(action)                                  # a ValueError naming what is wrong with it
        if not math.isfinite(reward):
            raise ValueError(f"reward={reward!r} for {action}: must be finite (score failures with a low reward)")
        acceptance = None if self.accept_floor is None or acceptance is None else float(acceptance)
        i = len(self._history) + 1
        collapsed = self._collapsed(float(reward))
        self._record({"action": {n: action[n] for n in self.names}, "reward": float(reward),
                      **({} if acceptance is None else {"acceptance": acceptance}),
                      **({"transient": True} if transient and acceptance is not None else {})})
        if self._initial:
            p, moved, left, nxt = 1.0, True, False, self._initial.pop(0)
        else:
            p = float(self.options.schedule(self._annealing_index(i)))
            moved = bool(self._rng.random() < p)
            failed = acceptance is not None and acceptance < self.accept_floor
            left = not moved and (failed or collapsed)
            moved = moved or left
            nxt = self._argmax(i, p) if moved else {n: action[n] for n in self.names}
        self._history[-1].update(p=p, moved=moved, **({"left": True} if left else {}))
        self._pending = nxt
        return TellInfo(p, moved)

    def _annealing_index(self, i: int) -> float:
        """The schedule's index at tell ``i``: ``i`` itself, or with a :attr:`BanditOptions.horizon` shorter
        than :data:`ANNEAL_HORIZON`, as many times further on as the horizon is shorter."""
        h = self.options.horizon
        return i if h is None or h >= ANNEAL_HORIZON else 1 + (i - 1) * ANNEAL_HORIZON / h

    def _record(self, h: dict) -> None:
        """Add history entry ``h`` and its reward (and acceptance) to the per-action sums."""
        key = tuple(h["action"][n] for n in self.names)
        x = self.space.unit(h["action"])
        s = self._sums.setdefault(key, [x, 0.0, 0])
        s[1] += h["reward"]
        s[2] += 1
        if "acceptance" in h:
            self._accepts.setdefault(key, [x, []])[1].append((len(self._history), h["acceptance"],
                                                              bool(h.get("transient"))))
        self._history.append(dict(h, action=dict(h["action"])))

    #: Acceptance units per unit of the feasibility GP's target, the told
    #: acceptances' noise sd, the prior's margin over the floor (in those
    #: units) and the cap on a told margin. With PRIOR_MARGIN 0 an untried
    #: region is feasible with probability one half, under :data:`FEASIBLE`:
    #: the tuner proposes actions near ones whose chains accepted (about a
    #: length scale away), so the feasible region grows from the first action
    #: instead of the first move probing the box's far corner (safe Bayesian
    #: optimisation; a PRIOR_MARGIN of 2 would make the unknown feasible with
    #: probability 0.98, and a move went to the corner in every run measured).
    ACCEPT_SCALE, ACCEPT_NOISE, PRIOR_MARGIN, SAFE_CAP = 0.05, 0.03, 0.0, 2.0
    #: Actions feasible with a smaller probability are not proposed.
    FEASIBLE = 0.8

    def _feasible(self, X) -> np.ndarray:
        """P(acceptance > :attr:`accept_floor`) at unit points X (n, d) under
        the feasibility GP (1 when nothing is known)."""
        if not self._accepts or not self._feasibility_known:
            return np.ones(len(np.atleast_2d(X)))
        return self._probability(*self._feasibility_model.predict(np.atleast_2d(X), return_std=True))

    def _probability(self, m, s):
        """P(acceptance > floor) from the feasibility GP's mean and sd (the normal cdf, without scipy.stats' checks)."""
        return ndtr((m + self.PRIOR_MARGIN) / np.maximum(s, 1e-9))

    def _loss(self, p):
        """What the acquisition loses where P(feasible) is ``p``: 0 from :data:`FEASIBLE` up, steeply more
        below (a constraint that keeps DIRECT's landscape continuous)."""
        return 100.0 * np.maximum(self.FEASIBLE - p, 0.0)

    def _penalty(self, X) -> np.ndarray:
        """:meth:`_loss` at unit points X (n, d) for likely failure."""
        return self._loss(self._feasible(X))

    def _penalty_at(self, x) -> float:
        """:meth:`_penalty` at one unit point x (d,), by the feasibility GP's ``point``."""
        if not self._accepts or not self._feasibility_known:
            return 0.0
        return float(self._loss(self._probability(*self._feasibility_model.point(x))))

    def _fit_feasibility(self):
        if self._accepts:
            v = list(self._accepts.values())
            now = len(self._history) - 1
            y, weights = np.empty(len(v)), np.empty(len(v))
            for i, a in enumerate(v):                  # weighted means, summed in order (all weights 1: the plain mean)
                total = weight = 0.0
                for t, acc, transient in a[1]:
                    memory = self.options.accept_memory
                    w = math.exp(-(now - t) / memory) if transient and memory else 1.0
                    total, weight = total + w * acc, weight + w
                y[i], weights[i] = (total / weight if weight > 0 else 0.0), weight
            # an action whose every observation was transient and long ago is forgotten (its weight underflows)
            known = weights > 0
            self._feasibility_known = bool(known.any())
            if not self._feasibility_known:
                return
            margin = np.minimum((y[known] - self.accept_floor) / self.ACCEPT_SCALE, self.SAFE_CAP)  # safe is safe
            with np.errstate(over="ignore"):         # a nearly forgotten action's noise: inf, which ignores it
                noise = (self.ACCEPT_NOISE / self.ACCEPT_SCALE) ** 2 / weights[known]
            self._feasibility_model.fit(np.array([a[0] for a in v])[known], margin - self.PRIOR_MARGIN, noise)

    def _collapsed(self, reward: float) -> bool:
        """Whether ``reward`` (not yet in the history) ranks among the lowest
        :attr:`leave_below` of all rewards told, itself included (mid-ranks)."""
        if self.options.leave_below is None:
            return False
        r = np.array([h["reward"] for h in self._history] + [reward])
        return bool((np.sum(r < reward) + 0.5 * np.sum(r == reward)) / r.size <= self.options.leave_below)

    def _targets(self, means) -> np.ndarray:
        """The GP's targets for the distinct actions' mean rewards (see ``transform``)."""
        if self.options.transform == "rank":
            y = norm.ppf((rankdata(means) - 0.5) / means.size)
            order = np.argsort(y, kind="stable")
            self._back = (y[order], means[order])
            return y
        rewards = np.array([h["reward"] for h in self._history])
        centre = rewards.mean() if rewards.size else 0.0
        sd = rewards.std() if rewards.size > 1 and rewards.std() > 0 else 1.0
        self._centre, self._sd = centre, sd
        return (means - centre) / sd

    def _fit(self):
        X = np.array([v[0] for v in self._sums.values()])
        means = np.array([v[1] / v[2] for v in self._sums.values()])
        counts = np.array([v[2] for v in self._sums.values()], float)
        self.model.fit(X, self._targets(means), self.options.noise ** 2 / counts)

    def _latent(self, actions) -> tuple:
        """GP mean and sd at ``actions`` (n, d) in original units, in the GP's own (transformed) units."""
        if not self._history:
            raise ValueError("no rewards told yet")
        self._fit()
        return self.model.predict(self.space.to_unit(actions), return_std=True)

    def _argmax(self, i, p) -> dict:
        self._fit()
        self._fit_feasibility()
        beta = ucb_beta(i + 1, len(self.names), self.options.delta)

        def latent(x):
            m, s = self.model.predict(np.atleast_2d(x), return_std=True)
            return m[0], s[0]
        at = getattr(self.model, "point", latent)      # a stand-in model may have predict alone

        def acq(x):
            m, s = at(x)
            return float(ucb(m, s, beta, p) - self._penalty_at(x))

        x, _ = maximize(acq, len(self.names), self.options.maxfun, self.options.polish)
        return self.space.action(x)

    # -- introspection -------------------------------------------------------------
    @property
    def history(self) -> list:
        """One dict per tell: action, reward, p (move probability used after it),
        moved, ``acceptance`` (with :attr:`accept_floor`), and ``left`` when the
        move was forced by :attr:`leave_below` or an acceptance below the floor."""
        return [dict(h, action=dict(h["action"])) for h in self._history]

    def predict(self, actions) -> tuple:
        """GP mean and sd of the reward (in reward units) at ``actions`` (n, d) in
        original units. With the rank transform, the GP's mean is mapped back by
        the monotone interpolation of (transformed, mean reward) of the tried
        actions, and its sd by that map's slope."""
        m, s = self._latent(actions)
        if self.options.transform == "standardize":
            return self._centre + self._sd * m, self._sd * s
        ys, ms = self._back
        h = 1e-3
        slope = (np.interp(m + h, ys, ms) - np.interp(m - h, ys, ms)) / (2 * h)
        return np.interp(m, ys, ms), slope * s

    def acquisition(self, actions) -> np.ndarray:
        """The acquisition u-bar (in the GP's units) that the next move would maximise."""
        i = len(self._history)
        m, s = self._latent(actions)
        self._fit_feasibility()
        o = self.options
        return (ucb(m, s, ucb_beta(i + 1, len(self.names), o.delta), float(o.schedule(max(i, 1))))
                - self._penalty(self.space.to_unit(actions)))

    def feasibility(self, actions) -> np.ndarray:
        """P(acceptance > :attr:`accept_floor`) at ``actions`` (n, d) in original units (1 when unknown)."""
        self._fit_feasibility()
        return self._feasible(self.space.to_unit(actions))

    def grid(self, n: int = 50) -> dict:
        """GP mean, sd and acquisition on an n-per-dimension grid (for plots;
        geometric along :attr:`log_axes`)."""
        axes, pts = self.space.grid(n)
        m, s = self.predict(pts)
        shape = (n,) * len(self.names)
        return {"names": self.names, "axes": axes, "mean": m.reshape(shape), "sd": s.reshape(shape),
                "acquisition": self.acquisition(pts).reshape(shape)}

    def best_action(self, tried_only: bool = False) -> dict:
        """The action with the highest posterior mean reward: the maximiser of
        the GP mean over the box (by DIRECT), or among the tried actions."""
        if tried_only:
            keys = list(self._sums)
            m, _ = self.predict(np.array([[float(v) for v in k] for k in keys]))
            return dict(zip(self.names, keys[int(np.argmax(m))]))
        self._fit()
        x, _ = maximize(lambda z: float(self.model.predict(np.atleast_2d(z))[0]), len(self.names),
                        self.options.maxfun, self.options.polish)
        return self.space.action(x)

    # -- state ------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """JSON-serialisable state; :meth:`from_state` resumes exactly."""
        return {"kind": "bandit", "options": options_to_dict(self.options), "integer": self.integer,
                "seed": self.seed, "rng": self._rng.bit_generator.state, "history": self.history,
                "pending": self.ask(), "initial": [dict(a) for a in self._initial]}

    @classmethod
    def from_state(cls, state: dict, model=None) -> "BanditTuner":
        """The tuner :meth:`state_dict` saved (or an older version's state, whose options stand at its top level)."""
        options = options_from_dict(state["options"] if "options" in state else state)
        t = cls(options, state["seed"], integer=state["integer"], model=model)
        t._rng.bit_generator.state = state["rng"]
        for h in state["history"]:
            t._record(h)
        t._pending = dict(state["pending"])
        t._initial = [dict(a) for a in state["initial"]]
        return t
