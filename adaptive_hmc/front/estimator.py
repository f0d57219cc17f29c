"""scikit-learn style entry points: a Bayesian MLP sampled by bandit-tuned HMC
on cross-validation replicas, behind ``fit`` / ``predict``.

Flow position: the whole flow (data -> ... -> runner) behind one object; the
chains' weight vectors are kept (every ``thin``-th retained sample) so that
``predict`` works on any inputs.
"""
from __future__ import annotations

import hashlib
import inspect
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..data import Standardizer
from ..diagnostics import APART, more_super_transitions
from ..rundir.metrics import chain_stacking, convergence, kept_samples, log_gradients, run_diagnostics
from ..rundir.verdicts import rhat_warning
from ..models.mlp import MLPSpec
from ..models.priors import PriorSpec
from ..rundir.inference import inference_data
from ..rundir.posterior import Posterior
from ..engine.network_options import DEFAULT_CHAINS, DEFAULT_WEIGHT_BY, Layout, NetworkOptions
from ..engine.driver import Until, drive, end_warnings
from ..engine.progress import can_draw_bar, compile_kernels, start_chains
from ..engine.runner import DEFAULT_REWARD, MAX_SUPER_TRANSITIONS, RunOptions, make_run
from ..samplers.settings import HMCSettings
from ..tuners.options import BanditOptions

#: The most training cases whose fitted values the diagnostics read, at the checks of a run until the chains
#: meet (:class:`~adaptive_hmc.engine.driver.Until`) and at the end (a seeded subset, the same throughout;
#: ``diagnostics_["fitted_cases"]`` says how many of how many; the hyperparameters are read whole).
CHECK_CASES = 200


#: The parameters a warm start may change: how long the chains go on and what is said; the others decide the
#: draws.
#: A fit run until its chains meet discards the first 1/UNTIL_BURN_IN of what it ran (at least a third of
#: ``super_transitions``): each check measures the chains on the rest.
UNTIL_BURN_IN = 4
WARM_START_MAY_CHANGE = frozenset({"super_transitions", "max_seconds", "target_ess", "burn_in_super_transitions",
                                   "verbose", "threads", "warm_start"})


def _same(a, b) -> bool:
    """Whether two parameter values are equal (sequences compared as tuples, priors by their fields)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return tuple(a) == tuple(b)
    return a == b


#: The shortest trajectory of the bandit's default L box (``num_steps_bounds`` None). Its reward, ESJD / sqrt(L),
#: takes the box's floor where the weights turn early (diabetes, every seed), while the hyperparameters, updated
#: once a trajectory, follow the weights better after longer ones: diabetes' smallest log-hyperparameter ESS a
#: second 46.8 with L >= 40, 38.8 with L >= 20, 27.7 with L >= 10 (8 seeds; breast_cancer, whose bandit picks
#: longer L, the same within noise; docs/RESULTS.md, chains that settle).
SHORTEST_TRAJECTORY = 40


#: The estimators' arithmetic of the hidden units: float32, whose answers agree with float64's within Monte Carlo
#: error (docs/precision.md) at 1.4-1.7 times the gradients a second.
DEFAULT_ARITHMETIC = "float32"


def _signature_with(init, **extra) -> inspect.Signature:
    """The signature of ``init`` (the shared estimators' parameters, declared once there) with the
    keyword parameters ``extra`` and their defaults added at its end."""
    sig = inspect.signature(init)
    added = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=v) for n, v in extra.items()]
    return sig.replace(parameters=list(sig.parameters.values()) + added)


class _BNN(BaseEstimator):
    def __init__(self, hidden=(16,), chains=DEFAULT_CHAINS, cv=None, super_transitions=30, budget=2000, step_factor_bounds=(0.01, 1.01),
                 num_steps_bounds=None, window=1, initial_phase_steps=1000,
                 burn_in_super_transitions=None, thin=5, priors=None, seed=0, threads=None, verbose=False,
                 reward=DEFAULT_REWARD, weight_by=DEFAULT_WEIGHT_BY, jitter=True, max_seconds=600.0, target_ess=400,
                 warm_start=False, start="optimized", metric="heuristic", random_state=None, arithmetic=DEFAULT_ARITHMETIC,
                 tuner=None, k=None, precision=None):
        for name, value in locals().items():           # each parameter kept as given (scikit-learn's rule)
            if name != "self":
                setattr(self, name, value)

    def _validate(self, X, y, **kw):
        """X (N, d) finite float64 (sparse and complex refused, names recorded) and
        y, before any transform; and the settings that depend on the data."""
        X, y = validate_data(self, X, y, dtype=np.float64, **kw)       # y itself stays as given
        self.layout_ = self._layout()
        n = max(self.layout_.k, 2)
        if X.shape[0] < n:
            raise ValueError(f"n_samples={X.shape[0]}: need at least {n} training cases (the chains or folds, "
                             f"and 2)")
        return X, y

    def _layout(self) -> Layout:
        """The chains of a fit: ``cv`` folds (an int, or a dict of ``folds``, ``full_chain`` and
        ``predict_from`` as a config's ``cv:``) when given, else ``chains`` chains of the posterior; with
        ``reward="cv"`` and no ``cv``, ``chains`` folds and a full-data chain (the earlier ``k``'s meaning).
        The deprecated ``k`` stands for ``chains`` (with a FutureWarning); ValueError names a wrong value."""
        chains, cv = self.chains, self.cv
        if self.k is not None:
            warnings.warn(f"k={self.k!r} is deprecated: give chains= (chains of the posterior) or cv= (cross-"
                          "validation folds)", FutureWarning, stacklevel=3)
            chains = self.k
        if cv is None and self.reward == "cv":
            cv = chains
        try:
            layout = Layout.chains(chains) if cv is None else \
                Layout.cv(**cv) if isinstance(cv, dict) else Layout.cv(int(cv))
        except TypeError:
            raise ValueError(f"cv={cv!r}: None, a number of folds, or a dict of folds, full_chain and "
                             "predict_from") from None
        bad = layout.problem(self.reward)
        if bad is not None:
            field, value, allowed = bad
            name = {"k": "cv" if layout.data == "folds" else "chains"}.get(field, field)
            raise ValueError(f"{name}={value!r}: {allowed}")
        return layout

    def _seed(self) -> int:
        """The seed of every random number: ``random_state`` (scikit-learn's name: an int, a RandomState or a
        Generator, which draws one) when given, else ``seed``."""
        r = self.seed if self.random_state is None else self.random_state
        if isinstance(r, (int, np.integer)) and not isinstance(r, bool) and r >= 0:
            return int(r)
        if isinstance(r, np.random.RandomState):
            return int(r.randint(0, 2 ** 31 - 1))
        if isinstance(r, np.random.Generator):
            return int(r.integers(0, 2 ** 63 - 1))
        name = "seed" if self.random_state is None else "random_state"
        raise ValueError(f"{name}={r!r}: an integer >= 0, a numpy RandomState or Generator"
                         + ("" if name == "seed" else ", or None (then seed decides)"))

    def _num_steps_bounds(self) -> tuple:
        """The bandit's L box: ``num_steps_bounds``, or by default (:data:`SHORTEST_TRAJECTORY`, budget):
        trajectories up to the whole budget (docs/RESULTS.md, chains that settle: longer ones move the
        weights far enough between two Gibbs updates for the hyperparameters to follow)."""
        if self.num_steps_bounds is None:
            hi = int(self.budget)
            return (max(1, min(SHORTEST_TRAJECTORY, hi // 2)), hi)
        lo, hi = (int(v) for v in self.num_steps_bounds)
        if hi > self.budget:
            raise ValueError(f"num_steps_bounds={tuple(self.num_steps_bounds)}, budget={self.budget!r}: the longest "
                             f"trajectory ({hi}) must be at most the budget, the leapfrog steps a chain makes in a "
                             f"super-transition; lower num_steps_bounds, raise budget, or leave num_steps_bounds=None "
                             f"(then ({SHORTEST_TRAJECTORY}, budget))")
        return lo, hi

    @staticmethod
    def _no_fit_params(fit_params: dict) -> None:
        if fit_params:
            raise TypeError(f"fit got {', '.join(sorted(fit_params))}: not supported (fit(X, y) only). In "
                            f"particular sample_weight: the posterior weighs every training case once in the "
                            f"likelihood; repeat rows to weigh a case more. (sample_weights_ after a fit are the "
                            f"weights of the kept draws, not of cases.)")

    def _hidden(self) -> tuple:
        hidden = (self.hidden,) if isinstance(self.hidden, (int, np.integer)) else tuple(self.hidden)
        if not hidden or any(not isinstance(h, (int, np.integer)) or h < 1 for h in hidden):
            raise ValueError(f"hidden={self.hidden!r}: a layer size (int >= 1) or a sequence of them")
        return hidden

    def _burn_in(self, n_done: int) -> int:
        """Super-transitions discarded from the answer of a fit of ``n_done``:
        ``burn_in_super_transitions``, or by default a third of
        ``super_transitions`` (a fit that ran until its chains met: the first
        quarter of what it ran, at least that; docs/RESULTS.md, chains that
        settle: a half cost breast_cancer 1.3 and diabetes 1.5 times the
        seconds to meet, with the same answers)."""
        if self.burn_in_super_transitions is not None:
            return self.burn_in_super_transitions
        return self.super_transitions // 3 if self.max_seconds is None else max(self.super_transitions // 3,
                                                                                 n_done // UNTIL_BURN_IN)

    def _fit(self, X, Y, spec, metric):
        if not (isinstance(self.thin, (int, np.integer)) and self.thin >= 1):
            raise ValueError(f"thin={self.thin!r}: keep every thin-th sample, an integer >= 1 (predict needs them)")
        until = self.max_seconds is not None
        if until and not (float(self.max_seconds) > 0 and float(self.target_ess) > 0):
            raise ValueError(f"max_seconds={self.max_seconds!r}, target_ess={self.target_ess!r}: both > 0 (or "
                             f"max_seconds=None: exactly super_transitions)")
        seed = self._fitted_seed if self.warm_start and hasattr(self, "chains_") else self._seed()
        self._fitted_seed = seed
        setup, log = self._continued(X, Y) if self.warm_start and hasattr(self, "chains_") else (None, [])
        if setup is None:
            setup = self._new_run(X, Y, spec, metric, seed)
        # Every sample is kept (the burn-in is left out at the end), so that a warm start continues the very
        # run a longer fit would have made.
        self._setup, self._fitted_with = setup, (self._data_fingerprint(X, Y), self._fixed_params())
        self.chains_, self.tuner_ = setup.chains, setup.tuner
        self.spec_ = spec
        rows = self.chains_.chain_indices("full")                         # the posterior: never the CV replicas
        compile_kernels(self.chains_, quiet=not (self.verbose or can_draw_bar()))
        start_chains(self.chains_, quiet=not self.verbose)
        check = X[np.sort(np.random.default_rng(seed).permutation(len(X))[:CHECK_CASES])]
        cases = {"cases": len(check), "of": len(X)}
        rule = Until(self.super_transitions, self.max_seconds, lambda n, seconds: convergence(
            self._diagnostics(check, rows, n, log), self.target_ess), "max_seconds",
            (lambda line: print(line, flush=True)) if self.verbose else None) if until else None
        self.log_ = drive(setup, self.super_transitions, until=rule, log=log, quiet=not self.verbose).log
        self.convergence_ = rule.last if until else None
        n_done = self.n_iter_ = self.chains_.n_super
        n_burn = self._keep(rows, n_done)
        # R-hat and ESS of the fitted values (the predictions at a seeded subset of the training inputs) across
        # the posterior's chains, per 1000 of every gradient the fit computed and per second of sampling.
        if self.verbose:
            print(f"computing R-hat and ESS of {len(check)} of {len(X)} fitted values and the hyperparameters",
                  flush=True)
        self.diagnostics_ = {**self._diagnostics(check, rows, n_done, self.log_), "fitted_cases": cases}
        if self.diagnostics_.get("verdict") == APART:          # settled apart: the chains' stacked predictive
            self.diagnostics_["stacking"] = chain_stacking(
                spec, kept_samples(self.chains_, after=self._burn_in(n_done)), rows, (X, Y), {})
        hyper_moves = (self.priors or PriorSpec()).hyper_moves
        for warning in end_warnings([rhat_warning(self.diagnostics_, hyper_moves, lambda f: self._longer(f, n_done))],
                                    rule, self.log_, "narrow step_factor_bounds or num_steps_bounds"):
            warnings.warn(warning, ConvergenceWarning, stacklevel=3)
        if len(self.weights_) == 0:
            raise RuntimeError("no samples kept: lower thin or burn_in_super_transitions")
        if n_done - n_burn < 5:
            warnings.warn(f"only {n_done - n_burn} super-transitions after burn-in: the predictions "
                          f"rest on a very short run (raise super_transitions)", ConvergenceWarning, stacklevel=3)
        return self

    def _keep(self, rows, n_done: int) -> int:
        """Keep the posterior's samples (of chains ``rows``) after the burn-in of a fit of ``n_done``
        super-transitions: ``weights_``, ``noise_``, ``sample_weights_``, ``posterior_``; returns the burn-in."""
        n_burn = self._burn_in(n_done)
        kept = kept_samples(self.chains_, after=n_burn)
        posterior = np.isin(kept["chain"], rows)
        self.weights_, self.noise_ = kept["weights"][posterior], kept["noise_precision"][posterior]
        self.sample_weights_ = kept["weight"][posterior]
        self.posterior_ = self._posterior(self.weights_, self.noise_, self.sample_weights_)
        return n_burn

    def _new_run(self, X, Y, spec, metric, seed):
        """The run a fit starts (:func:`~adaptive_hmc.engine.runner.make_run`), from the estimator's parameters."""
        bounds = {"step_factor": tuple(self.step_factor_bounds), "num_steps": self._num_steps_bounds()}
        return make_run(
            spec, X, Y, tuner=BanditOptions(bounds) if self.tuner is None else self.tuner,
            run=RunOptions(MAX_SUPER_TRANSITIONS, self.budget, seed, self.reward, metric,
                           max_seconds=None if self.max_seconds is None else float(self.max_seconds)),
            network=NetworkOptions(layout=self.layout_, priors=self.priors or PriorSpec(),
                                    settings=HMCSettings(window=self.window, initial_phase_steps=self.initial_phase_steps,
                                                         jitter=bool(self.jitter)),
                                    thin=self.thin, threads=self.threads, weight_by=self.weight_by,
                                    start=self.start, metric=self.metric, arithmetic=self._arithmetic()))

    def _arithmetic(self) -> str:
        """The hidden units' arithmetic: ``arithmetic``, or the deprecated ``precision`` (a FutureWarning)."""
        if self.precision is None:
            return self.arithmetic
        warnings.warn(f"precision={self.precision!r} is deprecated: give arithmetic= (the hidden units' "
                      "arithmetic, float32 or float64)", FutureWarning, stacklevel=4)
        return self.precision

    @property
    def replicas_(self):
        """Deprecated: :attr:`chains_` (a FutureWarning says so)."""
        chains = self.chains_                   # AttributeError before a fit, as for any fitted attribute
        warnings.warn("replicas_ is deprecated: read chains_ (the fitted chain set)", FutureWarning, stacklevel=2)
        return chains

    def _fixed_params(self) -> dict:
        """The parameters a warm start must not change (all but :data:`WARM_START_MAY_CHANGE`)."""
        return {k: v for k, v in self.get_params().items() if k not in WARM_START_MAY_CHANGE}

    @staticmethod
    def _data_fingerprint(X, Y) -> str:
        return hashlib.sha256(np.ascontiguousarray(X).tobytes() + np.ascontiguousarray(Y).tobytes()
                              + str((X.shape, Y.shape)).encode()).hexdigest()

    def _continued(self, X, Y) -> tuple:
        """(the previous fit's run, its log) for a warm start on the same data and
        settings; ValueError naming what changed otherwise."""
        data, params = self._fitted_with
        if self._data_fingerprint(X, Y) != data:
            raise ValueError("warm_start=True continues the chains of the previous fit on the same data; X or y "
                             "differ (set warm_start=False to fit anew)")
        changed = [f"{k}={v!r} (was {params[k]!r})" for k, v in self._fixed_params().items()
                   if not _same(v, params[k])]
        if changed:
            raise ValueError(f"warm_start=True continues the previous fit's chains; only "
                             f"{', '.join(sorted(WARM_START_MAY_CHANGE - {'warm_start'}))} may change, and "
                             f"{'; '.join(changed)} (set warm_start=False to fit anew)")
        return self._setup, list(self.log_)

    def _longer(self, factor: float, n_done: int) -> str:
        """How a warm start keeps ``factor`` times the draws after the burn-in (:func:`rhat_warning`)."""
        more = more_super_transitions(factor, n_done, self._burn_in)     # the burn-in of the longer fit
        if self.max_seconds is None:
            return f"fit again with warm_start=True and super_transitions={n_done + more}"
        seconds = more * self.diagnostics_["sampling_s"] / max(n_done, 1)
        return (f"fit again with warm_start=True: about {more} more super-transitions, {seconds:.0f} s of sampling "
                f"at this pace, so max_seconds above that")

    def _diagnostics(self, X, rows, n_done: int, log: list) -> dict:
        """R-hat and ESS across the posterior's chains of the fitted values at
        ``X`` and of the log hyperparameters, from the samples after the
        burn-in of a fit of ``n_done`` super-transitions (``log``: its
        entries, for the gradients and seconds)."""
        n_burn = self._burn_in(n_done)
        return run_diagnostics(self.spec_, kept_samples(self.chains_, after=n_burn), rows, "full",
                               {"X_test": X, "history_pred": [], "history_count": []}, {"training": slice(0, len(X))},
                               self.chains_.history_hyper[n_burn:], int(log_gradients(log).sum()),
                               sum(e["seconds"] for e in log), self.chains_.hyper_names)

    def _posterior(self, weights, noise, sample_weight) -> Posterior:
        """Kept samples as a :class:`Posterior` with the fit's input map and (regression) target scale."""
        n_out = self.spec_.n_outputs
        scale = getattr(self, "y_scale_", None)                         # regression's target standardisation
        return Posterior(self.spec_, weights, noise, sample_weight, self.x_scale_,
                         np.zeros(n_out) if scale is None else scale.mean, np.ones(n_out) if scale is None else scale.sd)

    def to_inference_data(self):
        """ArviZ InferenceData of the fit's samples after its burn-in, the
        posterior's chains (the same object ``adaptive-hmc export`` writes of a
        run, :func:`~adaptive_hmc.front.export.inference_data`): posterior
        (weights, log hyperparameters), log_likelihood and posterior_predictive
        of the training cases, observed_data and constant_data (the training
        targets, original units or class codes, and the standardised inputs),
        sample_stats in ArviZ's names (energy, lp, acceptance_rate, diverging,
        n_steps, step_size). ``az.summary``, ``az.loo``, ``az.plot_ppc`` and
        ``az.bfmi`` read it as they read PyMC's."""
        check_is_fitted(self)
        r = self.chains_
        kept = kept_samples(r, after=self._burn_in(r.n_super))
        chains = [int(j) for j in r.chain_indices("full") if np.any(kept["chain"] == j)]
        if not chains:
            raise ValueError("no samples kept after the burn-in: lower thin or burn_in_super_transitions")
        post = self._posterior(kept["weights"], kept["noise_precision"], kept["weight"])
        scale = getattr(self, "y_scale_", None)
        Y = r.Y_train if scale is None else scale.mean + scale.sd * r.Y_train
        return inference_data(post, kept, chains, [f"full {j}" for j in chains], r.hyper_names, r.X_train, Y,
                              self.log_, self._fitted_seed, posterior=True,
                              attrs={"estimator": type(self).__name__,
                                     "note": f"posterior: the diagnostic draws (evenly spaced kept samples) after the burn-in of "
                                             f"{self._burn_in(r.n_super)} super-transitions",
                                     **({"classes": [str(c) for c in self.classes_]}
                                        if hasattr(self, "classes_") else {})})

    def _inputs(self, X):
        check_is_fitted(self)
        return validate_data(self, X, reset=False, dtype=np.float64)


_COMMON_DOC = """
    hidden : sizes of the tanh hidden layers.
    chains : chains of the posterior (every chain on all the training cases; their samples predict).
    cv : None, or cross-validation replicas: a number of folds, or a dict as a config's ``cv:`` (``folds``,
        ``full_chain``, ``predict_from``); with ``reward="cv"`` they give the reward and a full-data chain
        predicts (without ``cv``, ``chains`` folds).
    k : deprecated: ``chains`` (a FutureWarning says so).
    precision : deprecated: ``arithmetic`` (a FutureWarning says so).
    reward : "esjd" (ESJD/sqrt(L), the default) or "cv" (minus the held-out error, the thesis's).
    super_transitions, budget : number of super-transitions (with ``max_seconds``, the fewest) and leapfrog
        steps per replica in each.
    max_seconds, target_ess : run until the chains meet: after ``super_transitions``, every 5 more (and at
        least a quarter more than at the last check) the
        largest R-hat of the fitted values (at up to 200 seeded training cases) and of the log
        hyperparameters and the smallest bulk ESS of those fitted values are measured on the samples after
        burn-in (by default the first quarter of the run), and the fit stops once R-hat <= 1.01 and the ESS >=
        ``target_ess``, or when ``max_seconds`` of sampling have passed (then with a ConvergenceWarning
        saying how far it got; where it stops then depends on the machine's speed, one that meets first
        does not); ``convergence_`` holds the last check. ``max_seconds=None``: exactly
        ``super_transitions``.
    step_factor_bounds, num_steps_bounds : the box the bandit tunes (eps, L) in; num_steps_bounds None (the
        default): (40, budget).
    window : acceptance window of the HMC transitions.
    jitter : draw each trajectory's length uniformly from 1..L (the budget is then spent on average), so
        that the tuned L does not lock onto a period of the posterior; False: every trajectory has L steps.
    initial_phase_steps : leapfrog steps with the hyperparameters fixed before Gibbs updates start.
    burn_in_super_transitions : discarded from predictions (default a third of ``super_transitions``;
        running until the chains meet, the first quarter of the run if that is more).
    thin : keep every thin-th retained sample for ``predict``; ``diagnostics_`` and ``to_inference_data()`` read
        each chain's diagnostic draws, 16 a super-transition evenly spaced (fewer for large networks;
        ``diagnostics_`` of at most 1,000 a chain).
    weight_by : "gradients" (each retained sample weighs its iteration's leapfrog steps; the default) or
        "iterations" (each once, as the thesis).
    verbose : print a line (a bar on a terminal) per super-transition.
    start : "optimized" (the default: each chain starts from its own optimized network, L-BFGS from its own
        random weights with the hyperparameters held, then a Gibbs update of them; docs/METHOD.md) or "random"
        (small random weights, FBM's and the papers' way).
    metric : "heuristic" (each weight's step the step factor times FBM's heuristic scale), "learned" (that
        scale times a factor learned from the chains' draws and gradients in the warm-up windows of
        super-transitions 1-3, 4-7, 8-15 and 16-31, then frozen; docs/METHOD.md) or "low_rank" (those factors
        and each chain's low-rank masses, learned on to super-transition 127).
    arithmetic : "float32" (the default) or "float64": the arithmetic of the network's hidden units (inputs,
        hidden weights, activations and deltas of a block of cases; the energy and the Metropolis test stay in
        float64, so the chains sample the network so computed exactly); float32 gives 1.4-1.7x the gradients a
        second, with answers within Monte Carlo error of float64's (docs/precision.md).
    tuner : the tuner's options (None: ``BanditOptions`` over ``step_factor_bounds`` and ``num_steps_bounds``):
        a ``BanditOptions``, a ``FixedOptions``, or one's own (``tuner(seed)`` gives a
        :class:`~adaptive_hmc.tuners.base.Tuner`, ``bounds`` or ``num_steps`` the longest L; register its
        kind with :func:`~adaptive_hmc.tuners.register_tuner` to read a saved fit back).
    priors : :class:`~adaptive_hmc.models.priors.PriorSpec` (default: the package's, mean precision 400 and shape 2 for
        the weight groups; Neal's papers use shape 0.5).

    Every parameter, the attributes set by ``fit`` and an example: docs/ESTIMATORS.md.
    seed : decides every random number; threads do not change results.
    random_state : scikit-learn's name for the seed: an int, a numpy RandomState or Generator (which draws
        one), or None (the default: ``seed`` decides).
    threads : worker threads for the chains (default: every core available); those the chains leave over
        share each chain's blocks of cases. The draws do not depend on it.
    warm_start : a second ``fit`` on the same data continues the chains of the first, to
        ``super_transitions`` in all (or, running until the chains meet, until they do): the same
        draws as one fit asked for that length at the start. Only super_transitions, max_seconds,
        target_ess, burn_in_super_transitions, verbose and threads may change in between.

    After ``fit``, ``diagnostics_`` holds R-hat and the bulk and tail ESS of the fitted values (the
    predictions at a seeded subset of at most 200 training inputs, ``fitted_cases``) and of the hyperparameters across the posterior's chains, the
    ESS per 1000 of every gradient the fit computed and per second of sampling (as a run's
    summary.json); a ConvergenceWarning says when the largest R-hat exceeds 1.01.
"""


class BNNRegressor(RegressorMixin, _BNN):
    __doc__ = "Bayesian MLP regression (Gaussian noise), inputs and targets standardised.\n" + _COMMON_DOC

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True          # y may be (N, m)
        return tags

    def fit(self, X, y, **fit_params):
        self._no_fit_params(fit_params)
        X, y = self._validate(X, y, multi_output=True, y_numeric=True)
        self.single_output_ = y.ndim == 1
        Y = y[:, None] if self.single_output_ else y
        self.x_scale_, self.y_scale_ = Standardizer.fit(X, inputs=True), Standardizer.fit(Y)
        spec = MLPSpec(X.shape[1], self._hidden(), Y.shape[1])
        return self._fit(self.x_scale_.transform(X), self.y_scale_.transform(Y), spec, "mse")

    def predict(self, X, return_std: bool = False):
        """Posterior predictive mean; with ``return_std`` also its sd, noise included."""
        X = self._inputs(X)                                # NotFittedError first
        mean, sd = self.posterior_.predict(X, return_std=True)
        if self.single_output_:
            mean, sd = mean[:, 0], sd[:, 0]
        return (mean, sd) if return_std else mean


class BNNClassifier(ClassifierMixin, _BNN):
    __doc__ = ("Bayesian MLP classification (logistic for two classes, softmax for more), inputs "
               "standardised; with ``reward='cv'`` the reward is the held-out ``cv_metric`` (log_loss or "
               "error_rate).\n" + _COMMON_DOC
               + '    cv_metric : with ``reward="cv"``, the held-out error rewarded: "log_loss" or "error_rate".\n')

    def __init__(self, *args, cv_metric="log_loss", **params):
        super().__init__(*args, **params)
        self.cv_metric = cv_metric

    __init__.__signature__ = _signature_with(_BNN.__init__, cv_metric="log_loss")   # scikit-learn reads each name

    def fit(self, X, y, **fit_params):
        self._no_fit_params(fit_params)
        X, y = self._validate(X, y)
        check_classification_targets(y)
        self.classes_, codes = np.unique(np.asarray(y), return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(f"y has {len(self.classes_)} class; need at least 2")
        K = len(self.classes_)
        spec = MLPSpec(X.shape[1], self._hidden(), 1 if K == 2 else K, "logistic" if K == 2 else "softmax")
        self.x_scale_ = Standardizer.fit(X, inputs=True)
        return self._fit(self.x_scale_.transform(X), codes.astype(float), spec, self.cv_metric)

    def predict_proba(self, X):
        X = self._inputs(X)
        return self.posterior_.predict_proba(X)

    def predict(self, X):
        P = self.predict_proba(X)
        return self.classes_[P.argmax(axis=1)]
