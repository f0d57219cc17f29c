"""A whole experiment config (:class:`Config`, the network) and a user
density's (:class:`DensityConfig`): the sections together, the defaults
that depend on several of them, and the library's arguments they make."""
from __future__ import annotations

from typing import Dict, List, Literal, Optional

from pydantic import Field, PrivateAttr, model_validator

from ..engine.density_chains import SAMPLE_DEFAULTS
from ..engine.network_options import DEFAULT_CHAINS, Layout, NetworkOptions, default_data
from ..engine.runner import MAX_SUPER_TRANSITIONS, RunOptions
from .base import Number, NumberPair, _Strict
from .sections import CVConfig, DataConfig, ModelConfig, RunConfig, SamplerConfig, TunerConfig, UntilConfig


class Config(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=100,
                      description="the run's name (letters, digits, '.', '_', '-'): runs/NAME-seedS by default")
    data: DataConfig = Field(description="where the cases come from")
    model: ModelConfig = Field(description="the network and its priors")
    sampler: SamplerConfig = Field(default_factory=SamplerConfig, description="the [Gibbs, HMC] iteration")
    chains: Optional[int] = Field(None, ge=1, description="chains of one posterior, every one on all the "
                                  "training cases; their samples are the answer (default 4, unless cv is given)")
    cv: Optional[CVConfig] = Field(None, description="cross-validation replicas instead of chains (the thesis's "
                                   "layout; the cv reward needs them): folds, the full-data chain, who predicts")
    tuner: TunerConfig = Field(description="who chooses (eps, L)")
    run: RunConfig = Field(description="budget, length, burn-in, seed, checkpoints")
    _notes: list = PrivateAttr(default_factory=list)

    @property
    def notes(self) -> list:
        """What reading the config noticed and a run prints (an old key read under its new name)."""
        return self._notes

    @model_validator(mode="after")
    def _jitter_default(self):
        """Fill sampler.jitter: on for the HMC sampler tuned by the bandit or a tuner of ones own, off otherwise."""
        s = self.sampler
        if s.jitter is not None:
            return self
        on = self.tuner.kind != "fixed" and s.kind == "hmc" and not s.anneal
        return self.model_copy(update={"sampler": s.model_copy(update={"jitter": on})})

    @model_validator(mode="after")
    def _layout_defaults(self):
        """Fill the chains' layout: cv's predict_from, or without chains and cv, 4 chains (the cv reward: the
        thesis's 8 folds and a full-data chain), so that the resolved config says which chains ran and which
        predict (both given: refused by the checks)."""
        if self.chains is not None and self.cv is not None:
            return self
        if self.cv is not None:
            cv = self.cv
            return self if cv.predict_from else self.model_copy(
                update={"cv": cv.model_copy(update={"predict_from": Layout.cv(cv.folds, cv.full_chain).predict_from})})
        if self.chains is None:
            if default_data(self.tuner.reward) == "folds":
                return self.model_copy(update={"cv": CVConfig(predict_from=Layout.cv().predict_from)})
            return self.model_copy(update={"chains": DEFAULT_CHAINS})
        return self

    @property
    def layout(self) -> Layout:
        """The chains the config asks for (:class:`~adaptive_hmc.engine.network_options.Layout`)."""
        if self.cv is None:
            return Layout.chains(self.chains)
        return Layout.cv(self.cv.folds, self.cv.full_chain, self.cv.predict_from)

    def network_options(self) -> NetworkOptions:
        """The ``network`` argument of :func:`~adaptive_hmc.engine.runner.make_run`."""
        s, r, t, m, layout = self.sampler, self.run, self.tuner, self.model, self.layout
        return NetworkOptions(
            layout=layout,
            priors=m.priors.prior_spec(), settings=s.settings(),
            initial_hyper=None if s.initial_hyper is None else float(s.initial_hyper),
            init_scale=None if s.init_scale is None else float(s.init_scale), burn_in_samples=r.burn_in.samples,
            burn_in_super_transitions=r.burn_in.super_transitions, thin=r.thin, threads=r.threads,
            calibrate_after=t.warmup_super_transitions if s.calibrate_steps else None,
            standardize_targets=self.data.standardize_targets and m.likelihood == "gaussian", model=m.kind,
            weight_by=r.weight_by, predict_steps=r.predict_steps, start=s.start,
            metric=s.metric, arithmetic=s.arithmetic)

    def run_options(self) -> RunOptions:
        """The ``run`` argument of :func:`~adaptive_hmc.engine.runner.make_run`."""
        r, t = self.run, self.tuner
        return RunOptions(MAX_SUPER_TRANSITIONS if r.until else r.super_transitions, r.budget, r.seed, t.reward,
                          t.cv_metric, t.warmup_super_transitions, r.until.max_seconds if r.until else None)


def _sample_default(name: str):
    """The default of :func:`~adaptive_hmc.front.general.sample`'s argument ``name``."""
    return getattr(SAMPLE_DEFAULTS, name)


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
    chains: int = Field(DEFAULT_CHAINS, ge=1, description="chains of the posterior")
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
    until: Optional[UntilConfig] = Field(None, description="go on after run.super_transitions until the largest "
                                         "R-hat of the unconstrained coordinates is at most 1.01 and their smallest "
                                         "bulk ESS reaches target_ess (here: of the coordinates), checking every 5 "
                                         "super-transitions and a quarter more than at the last check, within "
                                         "max_seconds of warm-up and sampling; null: exactly super_transitions")


class DensityConfig(_Strict):
    """A run of a user's log density (``model.kind: density``)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=100,
                      description="the run's name: runs/NAME-seedS by default")
    model: DensityModelConfig = Field(description="the log density")
    sampler: DensitySamplerConfig = Field(default_factory=DensitySamplerConfig, description="chains and warm-up")
    run: DensityRunConfig = Field(default_factory=DensityRunConfig, description="length, budget, seed")

    def sample_options(self) -> dict:
        """The keyword arguments of :func:`~adaptive_hmc.front.general.sample` (besides the density and the starts)."""
        s, r = self.sampler, self.run
        return dict(warmup=s.warmup, target_accept=s.target_accept, step_factor_bounds=tuple(s.step_factor_bounds),
                    trajectory_bounds=tuple(s.trajectory_bounds), super_transitions=r.super_transitions,
                    budget=r.budget, seed=r.seed, threads=r.threads,
                    until=None if r.until is None else dict(max_seconds=float(r.until.max_seconds),
                                                            target_ess=float(r.until.target_ess)))
