"""Experiment configuration: YAML -> validated objects, every problem found
before any work starts.

Flow position: the edge (DESIGN principle 8), above the runner: the library
takes keyword arguments and never reads YAML; this module validates a file and
converts each section into those arguments (one method per section), raising
:class:`ConfigError` naming the file, the key path, the value and what is
allowed. Reading the data is :mod:`adaptive_hmc.data`'s job.
"""
from __future__ import annotations

import difflib
import inspect
import math
from pathlib import Path
from typing import Annotated, Dict, List, Literal, Optional, Union, get_args, get_origin

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .data import DataError, Split, load_split
from .models.mlp import MLPSpec
from .models.priors import HYPER_MOVES, GammaPrior, PriorSpec
from .general import sample
from .runner import DEFAULT_REWARD, DEFAULT_WARMUP, MAX_SUPER_TRANSITIONS, RunOptions
from .tuners.options import BanditOptions, FixedOptions, bandit_default
from .replicas import MODELS, ReplicaOptions, default_data
from .tasks import LOADERS
from .samplers.settings import KINDS, HMCSettings, SettingsError, check_settings
from .tuners.schedules import Exponential, Polynomial, Wang2013

_SETTINGS = HMCSettings._field_defaults     # sampler defaults: declared once, in HMCSettings


def _replica_default(name: str):
    """The default of :class:`~adaptive_hmc.replicas.ReplicaOptions` field ``name``."""
    return ReplicaOptions.__dataclass_fields__[name].default


class ConfigError(ValueError):
    """A configuration problem; the message names file, key path, value and what is allowed."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


Number = float   # strict mode still accepts ints for floats
#: [first, last] (YAML lists; tuples are not strict-mode input)
RowPair = Annotated[List[int], Field(min_length=2, max_length=2)]


class RowList(BaseModel):
    """``{rows: [3, 8, 21, ...]}``: the rows listed, numbered from 1 below any header."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    rows: List[int] = Field(min_length=1, description="row numbers, from 1")


Rows = Union[RowPair, RowList]
NumberPair = Annotated[List[Number], Field(min_length=2, max_length=2)]


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

    def prior_spec(self) -> PriorSpec:
        defaults = PriorSpec()
        groups = {g: getattr(self, g).gamma(getattr(defaults, g)) for g in ("input_hidden", "hidden_hidden", "hidden_bias",
                                                       "hidden_output", "output_bias", "input_output", "noise")
                  if getattr(self, g) is not None}
        return PriorSpec(**groups, ard=self.ard, ard_shape=float(self.ard_shape),
                         scale_hidden_output=self.scale_hidden_output, hyper_moves=self.hyper_moves)


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
                              delimiter=self.delimiter, missing=self.missing, likelihood=likelihood)
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
    initial_hyper: Optional[Number] = Field(_replica_default("initial_hyper"), gt=0, description="starting value of every free precision "
                                            "(null: the prior means)")
    init_scale: Optional[Number] = Field(_replica_default("init_scale"), ge=0, description="initial weights N(0, init_scale^2); 0 starts "
                                         "at zero (FBM); default 0 with replicas.data folds, 0.1 with full (the "
                                         "chains of one posterior start apart, so that R-hat can see them meet)")
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


class ReplicasConfig(_Strict):
    data: Optional[Literal["full", "folds"]] = Field(None, description="what the chains see: full (k chains of "
                                                     "the one posterior, every chain on all training cases; their "
                                                     "samples are the answer) or folds (k cross-validation replicas, "
                                                     "for the thesis's cv reward); default: folds for tuner.reward "
                                                     "cv, full otherwise")
    k: int = Field(_replica_default("k"), ge=0, description="data full: chains of the posterior (>= 1); data folds: cross-validation "
                   "replicas (folds), >= 2, or 0 to run the full-data chain alone (no CV reward)")
    full_data_chain: Optional[bool] = Field(None, description="data folds: add a chain on all training cases "
                                            "(predicts, never rewards); default true (not with data full)")
    predict_from: Optional[Literal["all", "full", "replicas"]] = Field(
        None, description="the chains whose retained samples make the test predictions: full (the chains on all "
        "training cases: the posterior), replicas (the CV replicas) or all (the thesis's pooling of replicas and "
        "full-data chain, a wider, shifted distribution); default full, or replicas when data folds has no "
        "full-data chain")


class ScheduleConfig(_Strict):
    kind: Literal["exponential", "polynomial", "wang2013"] = Field("exponential", description="p_i = "
                                                                    "exp(-rate (i-1)), i^-gamma, or "
                                                                    "max(i-burn_in+1, 1)^-1/2")
    rate: Number = Field(bandit_default("schedule").rate, gt=0, description="for exponential")
    gamma: Optional[Number] = Field(None, gt=0, description="for polynomial")
    burn_in: Optional[int] = Field(None, ge=0, description="for wang2013")


class TunerConfig(_Strict):
    kind: Literal["bandit", "fixed"] = Field(description="bandit (tunes eps and L within bounds) or fixed "
                                             "(hand-tuned: step_factor and num_steps)")
    step_factor: Optional[Number] = Field(None, gt=0, description="fixed: eps, multiplying FBM's heuristic "
                                          "step scales")
    num_steps: Optional[int] = Field(None, ge=1, description="fixed: trajectory length L")
    bounds: Optional[Dict[Literal["step_factor", "num_steps"], NumberPair]] = Field(
        None, description="bandit: {step_factor: [low, high], num_steps: [low, high]} (both required)")
    alpha: Number = Field(bandit_default("alpha"), gt=0, description="bandit: GP length scale as a fraction of "
                          "each box side")
    delta: Number = Field(bandit_default("delta"), gt=0, lt=1, description="bandit: UCB confidence parameter")
    noise: Number = Field(bandit_default("noise"), gt=0, description="bandit: reward noise sd in units of the "
                          "rewards' sd")
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig, description="bandit: annealing of the "
                                     "move probability p_i (section below)")
    first_action: Union[Literal["centre"], int] = Field(bandit_default("first_action"), description="bandit: "
                                                        "'centre' of the box, or n space-filling points first")
    reward: Literal["cv", "esjd"] = Field(DEFAULT_REWARD, description="esjd: ESJD/sqrt(L) (the default: see "
                                          "docs/RESULTS.md, tuning study); cv: minus the held-out error of this "
                                          "super-transition's samples (the thesis)")
    cv_metric: Optional[Literal["mse", "error_rate", "log_loss"]] = Field(
        None, description="held-out error of the cv reward (default mse for regression, error_rate for "
        "classification)")
    maxfun: int = Field(bandit_default("maxfun"), ge=10, description="bandit: DIRECT's evaluations per move")
    transform: Literal["standardize", "rank"] = Field(bandit_default("transform"), description="bandit: rewards to "
                                                      "GP targets: ranked "
                                                      "(a Gaussian copula, robust to a few extreme rewards; the "
                                                      "default) or standardised by all rewards told (the thesis)")
    log_axes: List[Literal["step_factor", "num_steps"]] = Field(
        list(bandit_default("log_axes")), description="bandit: dimensions the reward model sees on a log scale "
        "(the default: the step factor; the thesis: none, [])")
    leave_below: Optional[Number] = Field(
        bandit_default("leave_below"), gt=0, lt=1, description="bandit: when a reward ranks among the lowest "
        "this share of all rewards told, move by the acquisition whatever p_i says (the default: 0.05, so a chain "
        "that stops accepting late in a run does not keep its action for many super-transitions; the thesis: "
        "null, keep it with probability 1 - p_i)")
    accept_floor: Optional[Number] = Field(
        bandit_default("accept_floor"), gt=0, lt=1, description="bandit: learn where actions fail: a second GP "
        "models each action's acceptance (the chains' mean, 0 when a chain accepted nothing) and actions whose "
        "acceptance is likely below this floor are not proposed, so a region where chains stop accepting is "
        "visited once, not again; an action told below it is left at once (the default: 0.8; the thesis: null, "
        "no such model)")
    accept_memory: Optional[Number] = Field(
        bandit_default("accept_memory"), gt=0, description="bandit: tells over which a few chains' failure fades: an "
        "action at which a chain accepted nothing while most chains passed the floor weighs exp(-age / this) in the "
        "feasibility model (a chain still far from the posterior fails steps that every chain takes once there; "
        "a real cliff is found again by a probe); null: such failures count forever, as every other tell")
    fit_kernel: bool = Field(bandit_default("fit_kernel"), description="bandit: fit the GP's length scales and signal variance by "
                             "marginal likelihood (the thesis: fixed)")
    warmup_super_transitions: int = Field(DEFAULT_WARMUP, ge=0, description="first super-transitions whose "
                                          "rewards are not told to the tuner (a cold start measures the distance "
                                          "to equilibrium, not the action)")

    def options(self) -> BanditOptions | FixedOptions:
        """The ``tuner`` argument of :func:`~adaptive_hmc.runner.make_run`."""
        if self.kind == "fixed":
            return FixedOptions(float(self.step_factor), int(self.num_steps))
        sch = self.schedule
        schedule = {"exponential": lambda: Exponential(float(sch.rate)),
                    "polynomial": lambda: Polynomial(float(sch.gamma)),
                    "wang2013": lambda: Wang2013(int(sch.burn_in))}[sch.kind]()
        return BanditOptions(
            bounds={"step_factor": tuple(float(v) for v in self.bounds["step_factor"]),
                    "num_steps": tuple(int(v) for v in self.bounds["num_steps"])},
            alpha=float(self.alpha), delta=float(self.delta), noise=float(self.noise), schedule=schedule,
            first_action=self.first_action, maxfun=self.maxfun, transform=self.transform,
            log_axes=tuple(self.log_axes), fit_kernel=self.fit_kernel,
            leave_below=None if self.leave_below is None else float(self.leave_below),
            accept_floor=None if self.accept_floor is None else float(self.accept_floor),
            accept_memory=None if self.accept_memory is None else float(self.accept_memory))


class BurnInConfig(_Strict):
    samples: int = Field(_replica_default("burn_in_samples"), ge=0, description="samples of each chain left out of the predictions")
    super_transitions: Optional[int] = Field(None, ge=0, description="super-transitions left out of the "
                                             "predictions (default: the first third of the run, as the estimators)")


class UntilConfig(_Strict):
    max_seconds: float = Field(600.0, gt=0, description="stop when this much sampling time (resumes included) "
                               "has passed, met or not")
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
    thin: int = Field(_replica_default("thin"), ge=0, description="keep every thin-th retained weight vector (for plots and predict); "
                      "0 keeps none")
    predict_steps: int = Field(_replica_default("predict_steps"), ge=0, description="leapfrog steps between the retained samples "
                               "whose test predictions are accumulated, at least: every ceil(predict_steps / L)-th "
                               "iteration predicts, weighing the iterations it stands for; 0: every retained iteration")
    weight_by: Literal["gradients", "iterations"] = Field(
        _replica_default("weight_by"), description="how retained samples weigh in the predictions: gradients (each by its "
        "iteration's leapfrog steps, so every super-transition weighs its compute whatever its L; the default, "
        "docs/RESULTS.md: tuning study) or iterations (each retained iteration once, the thesis)")
    threads: Optional[int] = Field(None, ge=1, description="worker threads (default: the cores); results do not "
                                   "depend on it")

    @model_validator(mode="after")
    def _burn_in_default(self):
        if self.burn_in.super_transitions is None:
            burn = self.burn_in.model_copy(update={"super_transitions": self.super_transitions // 3})
            return self.model_copy(update={"burn_in": burn})
        return self


class Config(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=100,
                      description="the run's name (letters, digits, '.', '_', '-'): runs/NAME-seedS by default")
    data: DataConfig = Field(description="where the cases come from")
    model: ModelConfig = Field(description="the network and its priors")
    sampler: SamplerConfig = Field(default_factory=SamplerConfig, description="the [Gibbs, HMC] iteration")
    replicas: ReplicasConfig = Field(default_factory=ReplicasConfig, description="CV replicas and the "
                                     "full-data chain")
    tuner: TunerConfig = Field(description="who chooses (eps, L)")
    run: RunConfig = Field(description="budget, length, burn-in, seed, checkpoints")

    @model_validator(mode="after")
    def _jitter_default(self):
        """Fill sampler.jitter: on for the bandit-tuned HMC sampler, off otherwise."""
        s = self.sampler
        if s.jitter is not None:
            return self
        on = self.tuner.kind == "bandit" and s.kind == "hmc" and not s.anneal
        return self.model_copy(update={"sampler": s.model_copy(update={"jitter": on})})

    @model_validator(mode="after")
    def _replicas_defaults(self):
        """Fill replicas.data (by the reward), full_data_chain and predict_from, so the resolved config says
        which chains ran and which predict."""
        r = self.replicas
        data = r.data or default_data(self.tuner.reward)
        full = r.full_data_chain if r.full_data_chain is not None or data == "full" else True
        predict = r.predict_from or ("full" if data == "full" or full else "replicas")
        if (data, full, predict) == (r.data, r.full_data_chain, r.predict_from):
            return self
        return self.model_copy(update={"replicas": r.model_copy(update={"data": data, "full_data_chain": full,
                                                                         "predict_from": predict})})


    def replica_options(self) -> ReplicaOptions:
        """The ``replicas`` argument of :func:`~adaptive_hmc.runner.make_run`."""
        s, r, t, m = self.sampler, self.run, self.tuner, self.model
        return ReplicaOptions(
            k=self.replicas.k, data=self.replicas.data, full_data_chain=bool(self.replicas.full_data_chain),
            priors=m.priors.prior_spec(), settings=s.settings(),
            initial_hyper=None if s.initial_hyper is None else float(s.initial_hyper),
            init_scale=None if s.init_scale is None else float(s.init_scale), burn_in_samples=r.burn_in.samples,
            burn_in_super_transitions=r.burn_in.super_transitions, thin=r.thin, threads=r.threads,
            calibrate_after=t.warmup_super_transitions if s.calibrate_steps else None,
            standardize_targets=self.data.standardize_targets and m.likelihood == "gaussian", model=m.kind,
            weight_by=r.weight_by, predict_steps=r.predict_steps)

    def run_options(self) -> RunOptions:
        """The ``run`` argument of :func:`~adaptive_hmc.runner.make_run`."""
        r, t = self.run, self.tuner
        return RunOptions(MAX_SUPER_TRANSITIONS if r.until else r.super_transitions, r.budget, r.seed, t.reward,
                          t.cv_metric, t.warmup_super_transitions)


def _sample_default(name: str):
    """The default of :func:`~adaptive_hmc.general.sample`'s argument ``name``."""
    return inspect.signature(sample).parameters[name].default


class DensityModelConfig(_Strict):
    kind: Literal["density"] = Field(description="density: a user's own log density, sampled by the bandit-tuned "
                                     "chains (adaptive_hmc.sample)")
    file: str = Field(description="the Python file that defines it, relative to the config's folder")
    function: str = Field(description="its function of the unconstrained position q: (q) -> (log p, gradient), or "
                          "(q, grad) -> log p writing the gradient; Numba (njit) or plain Python")
    dim: int = Field(ge=1, description="the number of coordinates of q")
    names: Optional[Dict[str, List[int]]] = Field(None, description="parameter name -> shape, in the order of q "
                                                  "(default: one vector q)")
    constrain: Optional[str] = Field(None, description="a function of the same file mapping draws Q (n, dim) to "
                                     "{name: array} on the constrained scale, reported instead of q")


class DensitySamplerConfig(_Strict):
    chains: int = Field(4, ge=1, description="chains of the posterior")
    init_radius: Number = Field(2.0, gt=0, description="each chain starts uniform in (-r, r) in every coordinate "
                                "(Stan's convention)")
    warmup: int = Field(_sample_default("warmup"), ge=0, description="warm-up iterations adapting a diagonal metric "
                        "(Stan's windows) and a reference step (dual averaging)")
    target_accept: Number = Field(_sample_default("target_accept"), gt=0, lt=1, description="the warm-up step's "
                                  "target acceptance")
    step_factor_bounds: NumberPair = Field(list(_sample_default("step_factor_bounds")), description="the bandit's "
                                           "step factors, times the warm-up's reference step")
    trajectory_bounds: NumberPair = Field(list(_sample_default("trajectory_bounds")), description="the bandit's "
                                          "trajectory lengths, step x L, in posterior sds")


class DensityRunConfig(_Strict):
    super_transitions: int = Field(_sample_default("super_transitions"), ge=1, description="number of "
                                   "super-transitions after warm-up")
    budget: Optional[int] = Field(_sample_default("budget"), ge=1, description="leapfrog steps per chain in each "
                                  "(null: at least 1000, and 10 of the longest trajectories allowed)")
    seed: int = Field(0, ge=0, description="decides every random number (also --seed)")
    threads: Optional[int] = Field(None, ge=1, description="worker threads (default: the cores); results do not "
                                   "depend on it")


class DensityConfig(_Strict):
    """A run of a user's log density (``model.kind: density``)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=100,
                      description="the run's name: runs/NAME-seedS by default")
    model: DensityModelConfig = Field(description="the log density")
    sampler: DensitySamplerConfig = Field(default_factory=DensitySamplerConfig, description="chains and warm-up")
    run: DensityRunConfig = Field(default_factory=DensityRunConfig, description="length, budget, seed")

    def sample_options(self) -> dict:
        """The keyword arguments of :func:`~adaptive_hmc.general.sample` (besides the density and the starts)."""
        s, r = self.sampler, self.run
        return dict(warmup=s.warmup, target_accept=s.target_accept, step_factor_bounds=tuple(s.step_factor_bounds),
                    trajectory_bounds=tuple(s.trajectory_bounds), super_transitions=r.super_transitions,
                    budget=r.budget, seed=r.seed, threads=r.threads)


def _fail(source, path, value, allowed):
    raise ConfigError(f"{source}: {path} = {value!r}: {allowed}")


def _check(cfg: Config, source: str):
    """Checks across keys that the schema cannot express."""
    d, t, r = cfg.data, cfg.tuner, cfg.replicas
    if d.file is not None and d.dataset is None:
        _fail(source, "data.file", d.file, "file names a table in the folder of a named data set (data.dataset); "
              "for a table anywhere give data.path")
    if (d.dataset is None) == (d.path is None):
        _fail(source, "data", {"dataset": d.dataset, "path": d.path}, "give exactly one of dataset and path")
    encoded = ("robot_arm", *LOADERS)
    if d.dataset not in (None, *encoded) and d.file is None:
        _fail(source, "data.file", None, f"data set {d.dataset!r} needs the file to read in its folder (without "
              f"one: {', '.join(encoded)})")
    if d.dataset == "robot_arm" and (d.file is not None or d.target_columns is not None):
        _fail(source, "data", {"file": d.file, "target_columns": d.target_columns},
              "robot_arm is read by its own loader: no file or target_columns")
    if d.dataset in LOADERS and d.file is None and d.target_columns is not None:
        _fail(source, "data.target_columns", d.target_columns,
              f"{d.dataset} is read by its own loader (its target is fixed): no target_columns")
    if d.path is not None and d.file is not None:
        _fail(source, "data.file", d.file, "file is for a named dataset; with path give the whole path")
    if not (d.dataset in encoded and d.file is None) and not d.target_columns:
        _fail(source, "data.target_columns", d.target_columns, "a table needs the list of target columns")
    if (d.train_rows is None) == (d.split is None):
        _fail(source, "data", {"train_rows": d.train_rows, "split": d.split and d.split.model_dump()},
              "give exactly one of train_rows (with test_sets) and split")
    if d.split is not None and d.test_sets:
        _fail(source, "data.test_sets", d.test_sets, "split makes the test set \"test\"; give rows or a split")
    rows = [("data.train_rows", d.train_rows)] if d.train_rows else []
    for key, v in rows + [(f"data.test_sets.{n}", v) for n, v in d.test_sets.items()]:
        if isinstance(v, RowList):
            continue                      # checked against the data (range, repeats) when it is read
        lo, hi = v
        if not 1 <= lo <= hi:
            _fail(source, key, [lo, hi], "rows are numbered from 1 and need first <= last")
    if t.kind == "fixed":
        if t.step_factor is None or t.num_steps is None:
            _fail(source, "tuner", {"step_factor": t.step_factor, "num_steps": t.num_steps},
                  "a fixed tuner needs step_factor > 0 and num_steps >= 1")
        if t.bounds is not None:
            _fail(source, "tuner.bounds", t.bounds, "bounds are for kind: bandit")
    else:
        if t.bounds is None or set(t.bounds) != {"step_factor", "num_steps"}:
            _fail(source, "tuner.bounds", t.bounds, "a bandit needs bounds for both step_factor and num_steps")
        for name, (lo, hi) in t.bounds.items():
            if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo < hi):
                shown = [int(v) if name == "num_steps" and math.isfinite(v) and v == int(v) else v for v in (lo, hi)]
                _fail(source, f"tuner.bounds.{name}", shown, "need finite 0 < lower < upper")
        if any(v != int(v) for v in t.bounds["num_steps"]):
            _fail(source, "tuner.bounds.num_steps", list(t.bounds["num_steps"]), "need whole numbers")
        if t.bounds["num_steps"][1] > cfg.run.budget:
            _fail(source, "tuner.bounds.num_steps", [int(v) for v in t.bounds["num_steps"]],
                  f"upper bound must be <= run.budget ({cfg.run.budget})")
        if t.reward == "cv" and r.k < 2:
            _fail(source, "replicas.k", r.k, "the cv reward needs k >= 2 cross-validation replicas")
        if t.step_factor is not None or t.num_steps is not None:
            _fail(source, "tuner", {"step_factor": t.step_factor, "num_steps": t.num_steps},
                  "step_factor and num_steps are for kind: fixed (a bandit tunes them within bounds)")
    if t.kind == "fixed" and t.num_steps > cfg.run.budget:
        _fail(source, "tuner.num_steps", t.num_steps, f"must be <= run.budget ({cfg.run.budget})")
    if cfg.sampler.calibrate_steps and t.warmup_super_transitions < 1:
        _fail(source, "sampler.calibrate_steps", True, "needs tuner.warmup_super_transitions >= 1 (the "
              "calibration is made after the warm-up, at states the chains have reached)")
    if r.data == "full":
        if t.reward == "cv":
            _fail(source, "replicas.data", "full", "the cv reward reads held-out predictions: needs data: folds")
        if r.k < 1:
            _fail(source, "replicas.k", r.k, "data full needs k >= 1 chains")
        if r.full_data_chain is not None:
            _fail(source, "replicas.full_data_chain", r.full_data_chain, "is for data: folds (with data: full "
                  "every chain is on all the training cases); leave it out")
        if r.predict_from == "replicas":
            _fail(source, "replicas.predict_from", "replicas", "needs data: folds (data full has no CV replicas)")
    else:
        if r.k == 1:
            _fail(source, "replicas.k", 1, "0 (full-data chain only) or >= 2 folds")
        if r.k == 0 and not r.full_data_chain:
            _fail(source, "replicas.full_data_chain", False, "must be true when replicas.k is 0")
        if r.predict_from == "full" and not r.full_data_chain:
            _fail(source, "replicas.predict_from", "full", "needs replicas.full_data_chain: true")
        if r.predict_from == "replicas" and r.k == 0:
            _fail(source, "replicas.predict_from", "replicas", "needs replicas.k >= 2")
    s = t.schedule
    need = {"exponential": "rate", "polynomial": "gamma", "wang2013": "burn_in"}[s.kind]
    if t.kind == "bandit" and getattr(s, need) is None:
        _fail(source, f"tuner.schedule.{need}", None, f"schedule kind {s.kind} needs {need}")
    if cfg.sampler.base_step is not None and cfg.sampler.calibrate_steps:
        _fail(source, "sampler.calibrate_steps", True, "calibrates FBM's heuristic scales; not with "
              "sampler.base_step (absolute steps)")
    # The sampler settings, by the samplers' own checks; the window must fit every L the tuner may ask.
    shortest = t.num_steps if t.kind == "fixed" else int(t.bounds["num_steps"][0])
    try:
        check_settings(cfg.sampler.settings()._replace(num_steps=shortest,
                                                       step_factor=0.0 if cfg.sampler.base_step else 1.0))
    except SettingsError as e:
        where = "tuner.num_steps" if t.kind == "fixed" else "the lower bound of tuner.bounds.num_steps"
        too_long = e.field == "window" and e.allowed.startswith("must be in 1..num_steps")
        allowed = f"must be <= {where} ({shortest})" if too_long else e.allowed
        _fail(source, f"sampler.{e.field}", e.value, allowed)
    if d.select_features is not None and cfg.model.likelihood == "gaussian":
        _fail(source, "data.select_features", d.select_features, "a filter by class: for classification "
              "(likelihood logistic or softmax with 2 classes)")
    if cfg.model.kind != "bnn" and (cfg.model.likelihood != "gaussian" or cfg.model.direct):
        _fail(source, "model.kind", cfg.model.kind, "Neal's models are for likelihood gaussian without direct "
              "connections (use kind bnn)")
    if cfg.model.likelihood == "logistic" and t.cv_metric == "mse" or \
            cfg.model.likelihood == "gaussian" and t.cv_metric == "error_rate":
        _fail(source, "tuner.cv_metric", t.cv_metric, f"not defined for a {cfg.model.likelihood} likelihood")


def _format(err: ValidationError, source: str, raw, root=None) -> str:
    lines = []
    for e in err.errors():
        loc = ""
        for p in e["loc"]:
            loc += f"[{p}]" if isinstance(p, int) else (f".{p}" if loc else str(p))
        value = e.get("input")
        if e["type"] == "missing":
            lines.append(f"{source}: {loc}: missing (required)")
        elif e["type"] == "extra_forbidden":
            allowed = _allowed_keys(e["loc"], root or Config)
            key = str(e["loc"][-1])
            near = [k for k in allowed if k.startswith(key) or key in k] or difflib.get_close_matches(key, allowed, 1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            lines.append(f"{source}: {loc} = {value!r}: unknown key; {hint}allowed keys here: {', '.join(allowed)} "
                         f"(docs/CONFIG.md)")
        elif loc == "name" and e["type"] == "string_pattern_mismatch":
            lines.append(f"{source}: name = {value!r}: a plain name (letters, digits, '.', '_' and '-', starting "
                         f"with a letter or digit; it names the run directory)")
        else:
            lines.append(f"{source}: {loc} = {value!r}: {e['msg']}")
    return "\n".join(dict.fromkeys(lines))


def _section_model(annotation):
    """The section (model class) an annotation holds, or None."""
    inner = [a for a in (get_args(annotation) or (annotation,)) if isinstance(a, type) and issubclass(a, BaseModel)]
    return inner[0] if inner else None


def _allowed_keys(loc, root) -> list:
    """The keys of the section at ``loc`` (the path of an unknown key) of config class ``root``."""
    model = root
    for part in loc[:-1]:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        model = _section_model(getattr(field, "annotation", None))
        if model is None:
            return []
    return list(model.model_fields)


def _type_name(a) -> str:
    origin, args = get_origin(a), get_args(a)
    if origin is Annotated:
        return "[first, last] of " + _type_name(get_args(args[0])[0]) if get_origin(args[0]) in (list, List) \
            else _type_name(args[0])
    if origin is Union:
        names = [_type_name(x) for x in args if x is not type(None)]
        return " or ".join(names) + (" or null" if type(None) in args else "")
    if origin is Literal:
        return " \\| ".join(f"`{x}`" for x in args)
    if origin in (list, List):
        return f"list of {_type_name(args[0])}"
    if origin in (dict, Dict):
        return f"mapping of {_type_name(args[0])} to {_type_name(args[1])}"
    if isinstance(a, type) and issubclass(a, BaseModel):
        return "section"
    return {float: "number", int: "integer", bool: "true/false", str: "text"}.get(a, str(a))


def _default(field) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(section defaults)"
    return f"`{yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}`"


def reference() -> str:
    """docs/CONFIG.md: every key of a config, its type, default and meaning,
    generated from the schema (``adaptive-hmc reference``), so it cannot drift."""
    sections = [("top level", Config), ("data", DataConfig), ("data.split", SplitConfig), ("model", ModelConfig),
                ("model.priors", PriorsConfig), ("model.priors.GROUP (each prior)", GammaPriorConfig),
                ("sampler", SamplerConfig), ("replicas", ReplicasConfig), ("tuner", TunerConfig),
                ("tuner.schedule", ScheduleConfig), ("run", RunConfig), ("run.burn_in", BurnInConfig)]
    out = ["# Config reference", "",
           "Generated from the schema in `adaptive_hmc/config.py` by `adaptive-hmc reference`; do not edit.",
           "", "An experiment is one YAML file with the sections below. Unknown keys, keys given twice and values "
           "out of range are errors (exit 2, nothing written). `adaptive-hmc validate CONFIG` checks a config and "
           "its data without running it.", "", "Conventions:", "",
           "- rows are counted from 1 and both ends are included: `train_rows: [1, 200]` is the first 200 rows;",
           "- columns are counted from 0, and negative numbers count from the end (`-1` is the last column);",
           "- a relative `data.path` is relative to the folder of the config file;",
           "- a prior `shape: .inf` fixes that precision at its mean;",
           "- a bandit needs `tuner.bounds` for both `step_factor` and `num_steps`; a fixed tuner needs "
           "`step_factor` and `num_steps`.", ""]
    density = [("top level", DensityConfig), ("model", DensityModelConfig), ("sampler", DensitySamplerConfig),
               ("run", DensityRunConfig)]
    for i, (title, model) in enumerate(sections + density):
        if i == len(sections):
            out += ["# Your own log density: `model.kind: density`", "",
                    "A config whose `model.kind` is `density` runs a user's log density (a function in a Python "
                    "file) by `adaptive_hmc.sample` into a run directory (`posterior.nc`, `summary.json`, the "
                    "checkpoint `--resume` continues from); it has these sections instead.", ""]
        out += [f"## `{title}`", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        for name, f in model.model_fields.items():
            out.append(f"| `{name}` | {_type_name(f.annotation)} | {_default(f)} | {f.description or ''} |")
        out.append("")
    return "\n".join(out)


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def parse(raw, source: str = "<config>") -> Config | DensityConfig:
    """Validate a dict (the parsed YAML) into a :class:`Config`, or a
    :class:`DensityConfig` when ``model.kind`` is density."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of sections, got {type(raw).__name__}")
    density = isinstance(raw.get("model"), dict) and raw["model"].get("kind") == "density"
    try:
        root = DensityConfig if density else Config
        cfg = root.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_format(err, source, raw, root)) from None
    if not density:
        _check(cfg, source)
    return cfg


def read_config(path, overrides: Optional[dict] = None) -> Config:
    """Read and validate a YAML file; ``overrides`` maps "section.key" to values."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory; give a YAML config file")
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file (a YAML config is UTF-8 text)") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ConfigError(f"{path}: not valid YAML: {getattr(e, 'problem', None) or e}{where}") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e.strerror})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, got {type(raw).__name__}")
    for key, value in (overrides or {}).items():
        sec, k = key.split(".")
        section = raw.setdefault(sec, {})
        if not isinstance(section, dict):
            raise ConfigError(f"{path}: {sec} = {section!r}: must be a mapping (to set {key})")
        section[k] = value
    return parse(raw, str(path))


def to_dict(cfg: Config) -> dict:
    return cfg.model_dump(mode="json")
