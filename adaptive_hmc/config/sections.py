"""The sections of an experiment config (data, model and priors, sampler,
replicas, tuner, run), each a strict pydantic model that declares its keys,
their defaults and what each allows, and converts itself into the library's
keyword arguments."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Dict, List, Literal, Optional, Union

import numpy as np
from pydantic import Field, field_validator, model_validator

from ..data import Split, load_split
from ..tables import DataError
from ..models.mlp import MLPSpec
from ..models.priors import HYPER_MOVES, GammaPrior, PriorSpec
from ..engine.network_options import DEFAULT_FOLDS, MODELS
from ..engine.runner import DEFAULT_REWARD, DEFAULT_WARMUP
from ..samplers.settings import KINDS, HMCSettings
from ..tuners.options import BanditOptions, FixedOptions, bandit_default
from ..tuners.schedules import Exponential, Polynomial, Wang2013
from .base import _SETTINGS, ConfigError, Number, NumberPair, RowList, Rows, _network_default, _Strict


class GammaPriorConfig(_Strict):
    """Gamma(mean precision, shape); ``shape: .inf`` fixes the precision. Give
    ``mean_precision`` or ``sd`` (= mean_precision^-1/2), or neither for the
    group's default."""

    mean_precision: Optional[Number] = Field(None, gt=0, description="mean of the Gamma prior of the precision")
    sd: Optional[Number] = Field(None, gt=0, description="or the prior sd, mean_precision = sd^-2 (0.05 is 400)")
    shape: Optional[Number] = Field(None, gt=0, description="shape alpha (Rasmussen's parameterisation; default "
                                    "the group's: 2 for the weight groups, 0.5 for the noise); `.inf` fixes the "
                                    "precision at its mean")

    def gamma(self, default: GammaPrior) -> GammaPrior:
        mean = (self.mean_precision if self.mean_precision is not None else
                1.0 / self.sd ** 2 if self.sd is not None else default.mean_precision)
        return GammaPrior(float(mean), float(default.shape if self.shape is None else self.shape))


class PriorsConfig(_Strict):
    input_hidden: Optional[GammaPriorConfig] = Field(None, description="input-to-hidden weights (default sd 0.05, "
                                                     "shape 2; Neal's papers 0.5)")
    hidden_hidden: Optional[GammaPriorConfig] = Field(None, description="hidden-to-hidden weights (same default)")
    hidden_bias: Optional[GammaPriorConfig] = Field(None, description="hidden biases (same default)")
    hidden_output: Optional[GammaPriorConfig] = Field(None, description="hidden-to-output weights (same default)")
    output_bias: Optional[GammaPriorConfig] = Field(None, description="output biases (default fixed sd 100)")
    input_output: Optional[GammaPriorConfig] = Field(None, description="direct input-to-output weights (default "
                                                     "sd 0.05, shape 2)")
    noise: Optional[GammaPriorConfig] = Field(None, description="noise precision of each output (regression; "
                                              "default sd 0.05, shape 0.5)")
    ard: bool = Field(False, description="one precision per input (Automatic Relevance Determination) under a "
                      "group-level mean")
    ard_shape: Number = Field(0.5, gt=0, description="shape of the per-input ARD precisions")
    scale_hidden_output: bool = Field(True, description="scale the hidden-output precision by the number of "
                                      "hidden units")
    hyper_moves: Literal[HYPER_MOVES] = Field(HYPER_MOVES[0], description="how the precisions are sampled: "
                                              "interweave (each Gibbs update followed by slice updates of each "
                                              "precision together with its weights' scale, and of each hidden "
                                              "layer's incoming against its outgoing weights; docs/METHOD.md) or "
                                              "gibbs (Neal's Gibbs updates given the weights alone)")
    collapse: bool = Field(False, description="integrate each free weight group's precision (ARD's excepted) and "
                           "the free noise precision out of HMC's density (a t prior, a t likelihood: one smooth "
                           "density); they are still drawn given the weights for the reports and predictions")

    def prior_spec(self) -> PriorSpec:
        defaults = PriorSpec()
        groups = {g: getattr(self, g).gamma(getattr(defaults, g)) for g in ("input_hidden", "hidden_hidden", "hidden_bias",
                                                       "hidden_output", "output_bias", "input_output", "noise")
                  if getattr(self, g) is not None}
        return PriorSpec(**groups, ard=self.ard, ard_shape=float(self.ard_shape),
                         scale_hidden_output=self.scale_hidden_output, hyper_moves=self.hyper_moves,
                         collapse=self.collapse)


class SplitConfig(_Strict):
    """A seeded shuffled split into training cases and one test set named "test"."""

    train: Union[int, float] = Field(gt=0, description="number of training cases, or a fraction of the "
                                     "rows (0 < f < 1)")
    test: Optional[Union[int, float]] = Field(None, gt=0, description="number (or fraction) of test cases "
                                              "(default: all the others)")
    seed: int = Field(0, ge=0, description="seed of the shuffle")
    stratify: bool = Field(False, description="keep each class's share in both parts (classification)")
    parts: int = Field(1, ge=1, description="deal the shuffled training cases into this many disjoint subsets "
                       "(Rasmussen 1996: 1, 2, 4, 8) ...")
    part: int = Field(0, ge=0, description="... and train on this one (0..parts-1); the test set stays the same")


class DataConfig(_Strict):
    dataset: Optional[str] = Field(None, description="a named data set: a folder in $ADAPTIVE_HMC_DATA or "
                                   "shared/data (shipped: `robot_arm`, and auto_price, cpu, house, mpg and servo, "
                                   "which without `file` are Rasmussen's (1996) encoded tasks); give this or `path`")
    file: Optional[str] = Field(None, description="the table to read in the data set's folder (not for robot_arm)")
    path: Optional[str] = Field(None, description="or a table anywhere; a relative path is relative to the "
                                "config file's folder")
    target_columns: Optional[List[Union[int, str]]] = Field(
        None, description="columns holding the targets: numbers counted from 0 (negative from the end, -1 is "
        "the last) or, with a header row, names")
    header: Optional[bool] = Field(None, description="whether the first row names the columns (default: "
                                   "detected, a first row with text is a header)")
    delimiter: Optional[str] = Field(None, description="column separator (default: detected from the first "
                                     "line: comma, semicolon, tab, else white space)")
    encoding: Optional[str] = Field(None, description="the file's text encoding, e.g. latin-1 or cp1252 (default: "
                                    "UTF-8, or UTF-16 when the file starts with its byte-order mark)")
    categorical: Dict[str, List[str]] = Field(default_factory=dict, description="input columns holding text, each "
                                              "with its levels (`init` writes them): two levels become one 0/1 "
                                              "column `name=second`, more one 0/1 column a level `name=level`; "
                                              "stored with the run, applied by predict, which refuses a level not "
                                              "listed")
    missing: Literal["drop_rows", "error"] = Field("drop_rows", description="rows with a missing value (empty, "
                                                   "?, NA, nan) are left out (and counted), or are an error")
    train_rows: Optional[Rows] = Field(None, description="[first, last] training rows, counted from 1 below "
                                       "any header, both included, or {rows: [r1, r2, ...]}; or use `split`")
    test_sets: Dict[str, Rows] = Field(default_factory=dict, description="named test sets, each [first, last] "
                                       "or {rows: [...]} like train_rows; none may overlap the training rows")
    split: Optional[SplitConfig] = Field(None, description="instead of rows: a seeded shuffled split "
                                         "(section below)")
    select_features: Optional[int] = Field(None, ge=1, description="classification: keep this many input "
                                           "columns, those whose presence (nonzero) is most related to the label "
                                           "by a chi-squared test on the training cases only (Dexter: 295); "
                                           "stored with the run, applied by predict")
    log1p_inputs: bool = Field(False, description="inputs as log(1 + x) (counts; after the selection)")
    standardize_inputs: bool = Field(True, description="scale inputs to mean 0 and sd 1 on the training rows "
                                     "(stored with the run, applied by predict; false keeps zeros zero, so a "
                                     "wide and mostly zero table runs the first layer on its nonzeros)")
    standardize_targets: bool = Field(True, description="regression: the chains sample a network for the targets "
                                      "scaled to mean 0 and sd 1 on the training rows; predictions, test errors and "
                                      "predict's output are in the original units (ignored for classification)")

    def cases(self, likelihood: str, source: str) -> Split:
        """The training and test cases this section names (a relative path is
        relative to the config file's folder)."""
        try:
            return load_split(dataset=self.dataset, file=self.file, path=self.path,
                              base_dir=Path(source).parent, target_columns=self.target_columns,
                              train_rows=_rows(self.train_rows),
                              test_sets={n: _rows(v) for n, v in self.test_sets.items()},
                              split=None if self.split is None else self.split.model_dump(), header=self.header,
                              delimiter=self.delimiter, missing=self.missing, likelihood=likelihood,
                              categorical=self.categorical, encoding=self.encoding)
        except DataError as e:
            raise ConfigError(f"{source}: {e}") from None


def _rows(v):
    """A row pair as a tuple, a row list as {"rows": [...]} (what :func:`~adaptive_hmc.data.row_range` takes)."""
    return None if v is None else {"rows": list(v.rows)} if isinstance(v, RowList) else tuple(v)


class ModelConfig(_Strict):
    kind: Literal[MODELS] = Field(MODELS[0], description="bnn: the Bayesian MLP with the hierarchical priors "
                                  "below (FBM, Rasmussen 1996); neal1992 / neal1993: Neal's parameterisations "
                                  "(1992: uniform coordinates with reflected logistic weights, three scale groups; "
                                  "1993: N(0, 1) unscaled weights times three scale factors), the noise "
                                  "integrated out (m0 = s0 = 0.1), Gaussian outputs without direct connections, "
                                  "started from a prior draw; absolute steps (sampler.base_step) as in the papers")
    hidden: List[int] = Field(min_length=1, description="sizes of the tanh hidden layers, e.g. [16] or [20, 8]")
    likelihood: Literal["gaussian", "logistic", "softmax"] = Field("gaussian", description="gaussian noise "
                                                                   "(regression), logistic (0/1 labels) or softmax "
                                                                   "(class indices 0..K-1)")
    direct: bool = Field(False, description="direct input-to-output connections")
    priors: PriorsConfig = Field(default_factory=PriorsConfig, description="the section below")

    @field_validator("hidden")
    @classmethod
    def _positive(cls, v):
        if min(v) < 1:
            raise ValueError("every hidden layer needs >= 1 unit")
        return v

    def spec(self, n_inputs: int, n_outputs: int) -> MLPSpec:
        return MLPSpec(n_inputs, tuple(self.hidden), n_outputs, self.likelihood, self.direct)


class SamplerConfig(_Strict):
    """The fields of :class:`~adaptive_hmc.samplers.settings.HMCSettings` (its
    defaults and its checks), and how the chains start."""

    window: int = Field(_SETTINGS["window"], description="acceptance window W (1: plain HMC); at most the "
                        "shortest L the tuner may ask for")
    persistence: Number = Field(_SETTINGS["persistence"], description="alpha of the partial momentum refresh, in "
                                "[0, 1) (0: fresh momentum)")
    jitter: Optional[bool] = Field(None, description="draw each trajectory's length uniformly from 1..L (a "
                                   "super-transition then runs 2 budget / (L + 1) iterations, the budget on "
                                   "average); null: on with the bandit tuner for kind hmc without annealing (so "
                                   "that the tuned L does not lock onto a period of the posterior), off otherwise "
                                   "(the hand recipes and the thesis)")
    step_nu: Number = Field(_SETTINGS["step_nu"], description="randomise the step as eps exp(nu C), C Cauchy "
                            "(Neal 1992 eq 23); 0 keeps it fixed")
    max_energy_error: Number = Field(_SETTINGS["max_energy_error"], description="energy errors above this count "
                                     "as divergences")
    gibbs: bool = Field(_SETTINGS["gibbs"], description="Gibbs-update the hyperparameters before each trajectory")
    initial_phase_steps: int = Field(_SETTINGS["initial_phase_steps"], description="leapfrog steps per chain "
                                     "with the hyperparameters fixed, before Gibbs updates start")
    initial_hyper: Optional[Number] = Field(_network_default("initial_hyper"), gt=0, description="starting value of every free precision "
                                            "(null: the prior means)")
    init_scale: Optional[Number] = Field(_network_default("init_scale"), ge=0, description="initial weights N(0, init_scale^2); 0 starts "
                                         "at zero (FBM); default 0 with cv folds, 0.1 with chains (the "
                                         "chains of one posterior start apart, so that R-hat can see them meet)")
    start: Literal["random", "optimized"] = Field(_network_default("start"), description="random: the chains "
                                                 "start at their init_scale weights (FBM, the papers); optimized: "
                                                 "each chain from its own optimized network (L-BFGS from its "
                                                 "random weights with the hyperparameters held, then a Gibbs "
                                                 "update of them; the init templates' and the estimators' way; "
                                                 "model kind bnn only)")
    metric: Literal["heuristic", "learned", "low_rank"] = Field(
        _network_default("metric"), description="heuristic: each weight's step is the step factor times FBM's "
        "heuristic scale (the papers); learned: times a factor of that scale learned from the chains' draws and "
        "gradients in warm-up windows (super-transitions 1-3, 4-7, 8-15, 16-31), then frozen; low_rank: those "
        "factors (learned on to super-transition 127) and each chain's masses along the few directions in which "
        "its draws spread far more or less than the factors say (nutpie's low-rank estimate) (sampler.kind hmc, "
        "no base_step or anneal)")
    arithmetic: Literal["float64", "float32"] = Field(_network_default("arithmetic"), description="the "
                                                     "arithmetic of the network's hidden units: float32 "
                                                     "computes the inputs, hidden weights, activations and "
                                                     "deltas of a block of cases in single precision (about "
                                                     "1.5x the gradients a second), the outputs, likelihood, "
                                                     "energy and Metropolis test in double: an exact sampler "
                                                     "of the network so computed (model.kind bnn)")
    calibrate_steps: bool = Field(False, description="after the tuner's warm-up super-transitions, multiply each "
                                  "chain's step scales by 1/sqrt(largest eigenvalue of its scaled Hessian), frozen "
                                  "for the rest of the run: a step factor of 2 is then the leapfrog stability "
                                  "limit on any model (needs tuner.warmup_super_transitions >= 1)")

    base_step: Optional[Number] = Field(None, gt=0, description="an absolute base step: every parameter's step is "
                                        "the tuner's step factor times this, instead of times FBM's heuristic "
                                        "scale (Neal 1992's eps0, about 1e-4 in his parameterisation; with "
                                        "step_nu, eps0 exp(nu C)); null: the heuristic scales")
    anneal: List[Annotated[List[Number], Field(min_length=3, max_length=3)]] = Field(
        [], description="simulated annealing with dummy momentum (Neal 1992 eqs 24-27): phases [iterations, alpha, "
        "T0] counted from each chain's start, the last going on after the schedule, e.g. Neal's [[10, 0, 15], "
        "[130, 0.95, 1], [60, 0, 1]]; with kind hmc a trajectory, with kind metropolis num_steps moves of eq 27, "
        "accepted by the dummy momentum's rule (eq 25); [] for none")
    kind: Literal[KINDS] = Field(KINDS[0], description="the transition of each iteration: hmc; metropolis "
                                 "(random walk, num_steps proposals of one energy evaluation each, proposal sd "
                                 "= the step); stochastic_dynamics (num_steps leapfrog steps after a persistent "
                                 "momentum refresh, no acceptance test: biased, for comparison)")

    def settings(self) -> HMCSettings:
        """The settings template of every iteration (step and L come from the tuner)."""
        return HMCSettings(window=self.window, persistence=self.persistence, jitter=bool(self.jitter),
                           step_nu=self.step_nu, max_energy_error=self.max_energy_error, gibbs=self.gibbs,
                           initial_phase_steps=self.initial_phase_steps, kind=KINDS.index(self.kind),
                           step_size=np.empty(0) if self.base_step is None else np.array([float(self.base_step)]),
                           anneal=np.array(self.anneal, dtype=float).reshape(-1, 3))


class CVConfig(_Strict):
    """Cross-validation replicas (the thesis's layout): ``folds`` replicas, each on the training cases of all
    folds but its own, whose held-out predictions give the cv reward, and a chain on all the training cases."""

    folds: int = Field(DEFAULT_FOLDS, ge=0, description="cross-validation replicas (folds), >= 2, or 0 to run "
                       "the full-data chain alone (no cv reward); the split is seeded and, for classification, "
                       "stratified")
    full_chain: bool = Field(True, description="add a chain on all training cases (it predicts, never rewards)")
    predict_from: Optional[Literal["all", "full", "replicas"]] = Field(
        None, description="the chains whose retained samples make the test predictions: full (the chain on all "
        "training cases: the posterior), replicas (the CV replicas) or all (the thesis's pooling of replicas and "
        "full-data chain, a wider, shifted distribution); default full, or replicas without the full chain")


#: The keys of the section ``replicas`` before ``chains:`` and ``cv:`` took its place (still read, with a note).
OLD_REPLICAS_KEYS = ("data", "k", "full_data_chain", "predict_from")


class ScheduleConfig(_Strict):
    kind: Literal["exponential", "polynomial", "wang2013"] = Field("exponential", description="p_i = "
                                                                    "exp(-rate (i-1)), i^-gamma, or "
                                                                    "max(i-burn_in+1, 1)^-1/2")
    rate: Number = Field(bandit_default("schedule").rate, gt=0, description="for exponential")
    gamma: Optional[Number] = Field(None, gt=0, description="for polynomial")
    burn_in: Optional[int] = Field(None, ge=0, description="for wang2013")


class HandSettingConfig(_Strict):
    step_factor: Number = Field(gt=0, description="eps, multiplying FBM's heuristic step scales")
    num_steps: int = Field(ge=1, description="trajectory length L (at most run.budget)")


class TunerConfig(_Strict):
    kind: str = Field(description="bandit (tunes eps and L within bounds), fixed (hand-tuned: step_factor and "
                      "num_steps), or the kind of a tuner of your own (with tuner.file and tuner.options_type)")
    file: Optional[str] = Field(None, description="your own kind: a Python file (relative to this config) that "
                                "defines your tuner and its options type and registers the tuner under tuner.kind "
                                "(adaptive_hmc.tuners.register_tuner(kind, YourTuner))")
    options_type: Optional[str] = Field(None, description="your own kind: the name, in tuner.file, of its options "
                                        "type: called with bounds= (tuner.bounds) and tuner.settings, its "
                                        "tuner(seed) makes the tuner (docs/ARCHITECTURE.md, a new tuner)")
    settings: Dict[str, Any] = Field(default_factory=dict, description="your own kind: more keyword arguments of "
                                     "its options type")
    step_factor: Optional[Number] = Field(None, gt=0, description="fixed: eps, multiplying FBM's heuristic "
                                          "step scales")
    num_steps: Optional[int] = Field(None, ge=1, description="fixed: trajectory length L")
    bounds: Optional[Dict[Literal["step_factor", "num_steps"], NumberPair]] = Field(
        None, description="bandit: {step_factor: [low, high], num_steps: [low, high]} (both required)")
    alpha: Number = Field(bandit_default("alpha"), description="bandit: GP length scale as a fraction of "
                          "each box side")
    delta: Number = Field(bandit_default("delta"), description="bandit: UCB confidence parameter")
    noise: Number = Field(bandit_default("noise"), description="bandit: reward noise sd in units of the "
                          "rewards' sd")
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig, description="bandit: annealing of the "
                                     "move probability p_i (section below)")
    first_action: Union[Literal["centre"], int] = Field(bandit_default("first_action"), description="bandit: "
                                                        "'centre' of the box, or n space-filling points first")
    reward: Literal["cv", "esjd", "slowest"] = Field(DEFAULT_REWARD, description="esjd: ESJD/sqrt(L) (the "
                                                     "weights' movement; docs/RESULTS.md, tuning study); slowest: "
                                                     "the movement of the slowest log hyperparameter or of the "
                                                     "energy, per gradient (what the verdict waits on); cv: minus "
                                                     "the held-out error of this super-transition's samples (the "
                                                     "thesis)")
    cv_metric: Optional[Literal["mse", "error_rate", "log_loss"]] = Field(
        None, description="held-out error of the cv reward (default mse for regression, error_rate for "
        "classification)")
    maxfun: int = Field(bandit_default("maxfun"), description="bandit: DIRECT's evaluations per move")
    transform: Literal["standardize", "rank"] = Field(bandit_default("transform"), description="bandit: rewards to "
                                                      "GP targets: ranked "
                                                      "(a Gaussian copula, robust to a few extreme rewards; the "
                                                      "default) or standardised by all rewards told (the thesis)")
    log_axes: List[Literal["step_factor", "num_steps"]] = Field(
        list(bandit_default("log_axes")), description="bandit: dimensions the reward model sees on a log scale "
        "(the default: the step factor; the thesis: none, [])")
    leave_below: Optional[Number] = Field(
        bandit_default("leave_below"), description="bandit: when a reward ranks among the lowest "
        "this share of all rewards told, move by the acquisition whatever p_i says (the default: 0.05, so a chain "
        "that stops accepting late in a run does not keep its action for many super-transitions; the thesis: "
        "null, keep it with probability 1 - p_i)")
    accept_floor: Optional[Number] = Field(
        bandit_default("accept_floor"), description="bandit: learn where actions fail: a second GP "
        "models each action's acceptance (the chains' mean, 0 when a chain accepted nothing) and actions whose "
        "acceptance is likely below this floor are not proposed, so a region where chains stop accepting is "
        "visited once, not again; an action told below it is left at once (the default: 0.8; the thesis: null, "
        "no such model)")
    accept_memory: Optional[Number] = Field(
        bandit_default("accept_memory"), description="bandit: tells over which a few chains' failure fades: an "
        "action at which a chain accepted nothing while most chains passed the floor weighs exp(-age / this) in the "
        "feasibility model (a chain still far from the posterior fails steps that every chain takes once there; "
        "a real cliff is found again by a probe); null: such failures count forever, as every other tell")
    fit_kernel: bool = Field(bandit_default("fit_kernel"), description="bandit: fit the GP's length scales and signal variance by "
                             "marginal likelihood (the thesis: fixed)")
    warmup_super_transitions: int = Field(DEFAULT_WARMUP, ge=0, description="first super-transitions whose "
                                          "rewards are not told to the tuner (a cold start measures the distance "
                                          "to equilibrium, not the action)")
    compare_with: Optional[HandSettingConfig] = Field(
        None, description="bandit or your own kind: a hand-tuned setting {step_factor, num_steps} to compare "
        "with at equal compute: after the run, `adaptive-hmc run` runs the same chains with a fixed tuner at it for "
        "as many super-transitions (the same leapfrog steps) into the sibling directory DIR-fixed and prints one "
        "line comparing the two (ESS per 1000 gradients, test error, R-hat); null: no comparison")

    def action_bounds(self) -> dict:
        """``bounds`` as the tuners take them: {step_factor: (low, high) floats, num_steps: (low, high) ints}."""
        return {"step_factor": tuple(float(v) for v in self.bounds["step_factor"]),
                "num_steps": tuple(int(v) for v in self.bounds["num_steps"])}

    def options(self) -> BanditOptions | FixedOptions:
        """The ``tuner`` argument of :func:`~adaptive_hmc.engine.runner.make_run` (the package's kinds)."""
        if self.kind == "fixed":
            return FixedOptions(float(self.step_factor), int(self.num_steps))
        sch = self.schedule
        schedule = {"exponential": lambda: Exponential(float(sch.rate)),
                    "polynomial": lambda: Polynomial(float(sch.gamma)),
                    "wang2013": lambda: Wang2013(int(sch.burn_in))}[sch.kind]()
        return BanditOptions(
            bounds=self.action_bounds(),
            alpha=float(self.alpha), delta=float(self.delta), noise=float(self.noise), schedule=schedule,
            first_action=self.first_action, maxfun=self.maxfun, transform=self.transform,
            log_axes=tuple(self.log_axes), fit_kernel=self.fit_kernel,
            leave_below=None if self.leave_below is None else float(self.leave_below),
            accept_floor=None if self.accept_floor is None else float(self.accept_floor),
            accept_memory=None if self.accept_memory is None else float(self.accept_memory))


class BurnInConfig(_Strict):
    samples: int = Field(_network_default("burn_in_samples"), ge=0, description="samples of each chain left out of the predictions")
    super_transitions: Optional[int] = Field(None, ge=0, description="super-transitions left out of the "
                                             "predictions (default: the first third of the run, as the estimators)")


class UntilConfig(_Strict):
    max_seconds: float = Field(600.0, gt=0, description="stop when this much sampling time (resumes included) "
                               "has passed, met or not; the bandit anneals over the super-transitions it affords "
                               "under a fixed cost model (the same on any machine), exploring less in a run of few")
    target_ess: float = Field(400.0, gt=0, description="the smallest bulk ESS of the test predictions wanted")


class RunConfig(_Strict):
    budget: int = Field(ge=1, description="leapfrog steps per chain in each super-transition")
    super_transitions: int = Field(ge=1, description="number of super-transitions (with run.until, the fewest)")
    until: Optional[UntilConfig] = Field(None, description="go on after run.super_transitions until the largest "
                                         "R-hat of the test predictions and the log hyperparameters is at most 1.01 "
                                         "and the test predictions' smallest bulk ESS reaches target_ess, checking "
                                         "every 5 super-transitions and a quarter more than at the last check, "
                                         "within max_seconds (the section below; the burn-in stays as set); null: "
                                         "exactly super_transitions")
    burn_in: BurnInConfig = Field(default_factory=BurnInConfig, description="the section below")
    seed: int = Field(0, ge=0, description="decides every random number (also --seed)")
    checkpoint_every: int = Field(1, ge=1, description="super-transitions between checkpoints")
    checkpoint_seconds: float = Field(5.0, ge=0, description="at least this many seconds of the run between "
                                      "checkpoints (the first super-transition and the last are always "
                                      "checkpointed): a kill loses at most these, and the resumed run is the same "
                                      "bit for bit; 0: every checkpoint_every super-transitions")
    thin: int = Field(_network_default("thin"), ge=0, description="keep every thin-th retained weight vector (for predict), "
                      "and besides these each chain's diagnostic draws, 16 a super-transition evenly spaced (fewer "
                      "for large networks), from which R-hat, ESS (of at most 1,000 a chain, evenly spaced) and the "
                      "export are made whatever thin; 0 keeps none")
    predict_steps: int = Field(_network_default("predict_steps"), ge=0, description="leapfrog steps between the retained samples "
                               "whose test predictions are accumulated, at least: every ceil(predict_steps / L)-th "
                               "iteration predicts, weighing the iterations it stands for; 0: every retained iteration")
    weight_by: Literal["gradients", "iterations"] = Field(
        _network_default("weight_by"), description="how retained samples weigh in the predictions: gradients (each by its "
        "iteration's leapfrog steps, so every super-transition weighs its compute whatever its L; the default, "
        "docs/RESULTS.md: tuning study) or iterations (each retained iteration once, the thesis)")
    threads: Optional[int] = Field(None, ge=1, description="worker threads (default: the cores): the chains run "
                                   "on them, and those the chains leave over share each chain's blocks of cases; "
                                   "results do not depend on it")
    plots: bool = Field(False, description="`adaptive-hmc run` draws the run's figures into DIR/plots at its end "
                        "(as `adaptive-hmc plot DIR`: the learned reward surface of a bandit, traces, running error, "
                        "...)")

    @model_validator(mode="after")
    def _burn_in_default(self):
        if self.burn_in.super_transitions is None:
            burn = self.burn_in.model_copy(update={"super_transitions": self.super_transitions // 3})
            return self.model_copy(update={"burn_in": burn})
        return self
