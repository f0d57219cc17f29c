"""Experiment configuration: YAML -> validated objects, every problem found
before any work starts.

Flow position: the edge (DESIGN principle 8), above the runner: the library
takes keyword arguments and never reads YAML; this module validates a file and
converts each section into those arguments (one method per section), raising
:class:`ConfigError` naming the file, the key path, the value and what is
allowed. Reading the data is :mod:`adaptive_hmc.data`'s job.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Dict, List, Literal, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .data import DataError, Split, load_split
from .models.mlp import MLPSpec
from .models.priors import GammaPrior, PriorSpec
from .samplers.settings import HMCSettings, SettingsError, check_settings
from .tuners.schedules import Exponential, Polynomial, Wang2013

_SETTINGS = HMCSettings._field_defaults     # sampler defaults: declared once, in HMCSettings


class ConfigError(ValueError):
    """A configuration problem; the message names file, key path, value and what is allowed."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


Number = float   # strict mode still accepts ints for floats
#: [first, last] (YAML lists; tuples are not strict-mode input)
RowPair = Annotated[List[int], Field(min_length=2, max_length=2)]
NumberPair = Annotated[List[Number], Field(min_length=2, max_length=2)]


class GammaPriorConfig(_Strict):
    """Gamma(mean precision, shape); ``shape: .inf`` fixes the precision. Give
    either ``mean_precision`` or ``sd`` (= mean_precision^-1/2)."""

    mean_precision: Optional[Number] = Field(None, gt=0)
    sd: Optional[Number] = Field(None, gt=0)
    shape: Number = Field(0.5, gt=0)

    def gamma(self) -> GammaPrior:
        mean = self.mean_precision if self.mean_precision is not None else 1.0 / self.sd ** 2
        return GammaPrior(float(mean), float(self.shape))


class PriorsConfig(_Strict):
    input_hidden: Optional[GammaPriorConfig] = None
    hidden_hidden: Optional[GammaPriorConfig] = None
    hidden_bias: Optional[GammaPriorConfig] = None
    hidden_output: Optional[GammaPriorConfig] = None
    output_bias: Optional[GammaPriorConfig] = None
    input_output: Optional[GammaPriorConfig] = None
    noise: Optional[GammaPriorConfig] = None
    ard: bool = False
    ard_shape: Number = Field(0.5, gt=0)
    scale_hidden_output: bool = True

    def prior_spec(self) -> PriorSpec:
        groups = {g: getattr(self, g).gamma() for g in ("input_hidden", "hidden_hidden", "hidden_bias",
                                                       "hidden_output", "output_bias", "input_output", "noise")
                  if getattr(self, g) is not None}
        return PriorSpec(**groups, ard=self.ard, ard_shape=float(self.ard_shape),
                         scale_hidden_output=self.scale_hidden_output)


class DataConfig(_Strict):
    dataset: Optional[str] = None      # a folder of the shared data (robot_arm is shipped)
    file: Optional[str] = None         # the table to read in that folder (not for robot_arm)
    path: Optional[str] = None         # or a table anywhere (relative to the config file)
    target_columns: Optional[List[int]] = None
    train_rows: RowPair
    test_sets: Dict[str, RowPair] = Field(default_factory=dict)
    standardize_inputs: bool = False

    def split(self, likelihood: str, source: str) -> Split:
        """The training and test cases this section names (a relative path is
        relative to the config file's folder)."""
        try:
            return load_split(dataset=self.dataset, file=self.file, path=self.path,
                              base_dir=Path(source).parent, target_columns=self.target_columns,
                              train_rows=self.train_rows, test_sets=self.test_sets, likelihood=likelihood)
        except DataError as e:
            raise ConfigError(f"{source}: {e}") from None


class ModelConfig(_Strict):
    hidden: List[int] = Field(min_length=1)
    likelihood: Literal["gaussian", "logistic", "softmax"] = "gaussian"
    direct: bool = False
    priors: PriorsConfig = Field(default_factory=PriorsConfig)

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

    window: int = _SETTINGS["window"]
    persistence: Number = _SETTINGS["persistence"]
    jitter: bool = _SETTINGS["jitter"]
    step_nu: Number = _SETTINGS["step_nu"]
    max_energy_error: Number = _SETTINGS["max_energy_error"]
    gibbs: bool = _SETTINGS["gibbs"]
    initial_phase_steps: int = _SETTINGS["initial_phase_steps"]
    initial_hyper: Optional[Number] = Field(1.0, gt=0)
    init_scale: Number = Field(0.0, ge=0)

    def settings(self) -> HMCSettings:
        """The settings template of every iteration (step and L come from the tuner)."""
        return HMCSettings(window=self.window, persistence=self.persistence, jitter=self.jitter,
                           step_nu=self.step_nu, max_energy_error=self.max_energy_error, gibbs=self.gibbs,
                           initial_phase_steps=self.initial_phase_steps)


class ReplicasConfig(_Strict):
    k: int = Field(8, ge=0)
    full_data_chain: bool = False
    #: the chains whose retained samples make the test predictions
    predict_from: Literal["all", "full", "replicas"] = "all"


class ScheduleConfig(_Strict):
    kind: Literal["exponential", "polynomial", "wang2013"] = "exponential"
    rate: Number = Field(0.01, gt=0)
    gamma: Optional[Number] = Field(None, gt=0)
    burn_in: Optional[int] = Field(None, ge=0)


class TunerConfig(_Strict):
    kind: Literal["bandit", "fixed"]
    step_factor: Optional[Number] = Field(None, gt=0)
    num_steps: Optional[int] = Field(None, ge=1)
    bounds: Optional[Dict[Literal["step_factor", "num_steps"], NumberPair]] = None
    alpha: Number = Field(0.2, gt=0)
    delta: Number = Field(0.1, gt=0, lt=1)
    noise: Number = Field(0.1, gt=0)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    first_action: Union[Literal["centre"], int] = "centre"
    reward: Literal["cv", "esjd"] = "cv"
    cv_metric: Optional[Literal["mse", "error_rate", "log_loss"]] = None
    maxfun: int = Field(1000, ge=10)
    warmup_super_transitions: int = Field(0, ge=0)

    def options(self) -> dict:
        """The ``tuner`` argument of :func:`~adaptive_hmc.runner.make_run`."""
        if self.kind == "fixed":
            return {"kind": "fixed", "step_factor": float(self.step_factor), "num_steps": int(self.num_steps)}
        sch = self.schedule
        schedule = {"exponential": lambda: Exponential(float(sch.rate)),
                    "polynomial": lambda: Polynomial(float(sch.gamma)),
                    "wang2013": lambda: Wang2013(int(sch.burn_in))}[sch.kind]()
        return {"kind": "bandit", "bounds": {"step_factor": tuple(float(v) for v in self.bounds["step_factor"]),
                                             "num_steps": tuple(int(v) for v in self.bounds["num_steps"])},
                "alpha": float(self.alpha), "delta": float(self.delta), "noise": float(self.noise),
                "schedule": schedule, "first_action": self.first_action, "maxfun": self.maxfun}


class BurnInConfig(_Strict):
    samples: int = Field(0, ge=0)
    super_transitions: int = Field(0, ge=0)


class RunConfig(_Strict):
    budget: int = Field(ge=1)
    super_transitions: int = Field(ge=1)
    burn_in: BurnInConfig = Field(default_factory=BurnInConfig)
    seed: int = Field(0, ge=0)
    checkpoint_every: int = Field(1, ge=1)
    thin: int = Field(0, ge=0)
    threads: Optional[int] = Field(None, ge=1)


class Config(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=100)
    data: DataConfig
    model: ModelConfig
    sampler: SamplerConfig = Field(default_factory=SamplerConfig)
    replicas: ReplicasConfig = Field(default_factory=ReplicasConfig)
    tuner: TunerConfig
    run: RunConfig


def _fail(source, path, value, allowed):
    raise ConfigError(f"{source}: {path} = {value!r}: {allowed}")


def _check(cfg: Config, source: str):
    """Checks across keys that the schema cannot express."""
    d, t, r = cfg.data, cfg.tuner, cfg.replicas
    if (d.dataset is None) == (d.path is None):
        _fail(source, "data", {"dataset": d.dataset, "path": d.path}, "give exactly one of dataset and path")
    if d.dataset not in (None, "robot_arm") and d.file is None:
        _fail(source, "data.file", None, f"data set {d.dataset!r} needs the file to read in its folder")
    if d.dataset == "robot_arm" and (d.file is not None or d.target_columns is not None):
        _fail(source, "data", {"file": d.file, "target_columns": d.target_columns},
              "robot_arm is read by its own loader: no file or target_columns")
    if d.path is not None and d.file is not None:
        _fail(source, "data.file", d.file, "file is for a named dataset; with path give the whole path")
    if d.dataset != "robot_arm" and not d.target_columns:
        _fail(source, "data.target_columns", d.target_columns, "a table needs the list of target columns")
    for key, (lo, hi) in [("data.train_rows", d.train_rows)] + [(f"data.test_sets.{n}", v) for n, v in d.test_sets.items()]:
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
    # The sampler settings, by the samplers' own checks; the window must fit every L the tuner may ask.
    shortest = t.num_steps if t.kind == "fixed" else int(t.bounds["num_steps"][0])
    try:
        check_settings(cfg.sampler.settings()._replace(num_steps=shortest, step_factor=1.0))
    except SettingsError as e:
        where = "tuner.num_steps" if t.kind == "fixed" else "the lower bound of tuner.bounds.num_steps"
        too_long = e.field == "window" and e.allowed.startswith("must be in 1..num_steps")
        allowed = f"must be <= {where} ({shortest})" if too_long else e.allowed
        _fail(source, f"sampler.{e.field}", e.value, allowed)
    if cfg.model.likelihood == "logistic" and t.cv_metric == "mse" or \
            cfg.model.likelihood == "gaussian" and t.cv_metric == "error_rate":
        _fail(source, "tuner.cv_metric", t.cv_metric, f"not defined for a {cfg.model.likelihood} likelihood")


def _format(err: ValidationError, source: str, raw) -> str:
    lines = []
    for e in err.errors():
        loc = ""
        for p in e["loc"]:
            loc += f"[{p}]" if isinstance(p, int) else (f".{p}" if loc else str(p))
        value = e.get("input")
        if e["type"] == "missing":
            lines.append(f"{source}: {loc}: missing (required)")
        elif e["type"] == "extra_forbidden":
            lines.append(f"{source}: {loc} = {value!r}: unknown key; allowed keys here: {_allowed_keys(e['loc'])}")
        elif loc == "name" and e["type"] == "string_pattern_mismatch":
            lines.append(f"{source}: name = {value!r}: a plain name (letters, digits, '.', '_' and '-', starting "
                         f"with a letter or digit; it names the run directory)")
        else:
            lines.append(f"{source}: {loc} = {value!r}: {e['msg']}")
    return "\n".join(dict.fromkeys(lines))


def _allowed_keys(loc) -> str:
    """The keys of the section at ``loc`` (the path of an unknown key)."""
    model = Config
    for part in loc[:-1]:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        ann = getattr(field, "annotation", None)
        inner = [a for a in getattr(ann, "__args__", (ann,)) if isinstance(a, type) and issubclass(a, BaseModel)]
        if not inner:
            return "see docs"
        model = inner[0]
    return ", ".join(model.model_fields)


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


def parse(raw, source: str = "<config>") -> Config:
    """Validate a dict (the parsed YAML) into a :class:`Config`."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of sections, got {type(raw).__name__}")
    try:
        cfg = Config.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_format(err, source, raw)) from None
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
