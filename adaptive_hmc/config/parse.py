"""YAML -> a validated config: strict reading (duplicate keys refused),
pydantic's errors in the config's own words (file, key path, value, what is
allowed, the nearest known key), the checks across keys that a schema cannot
express, the reference of every key (docs/CONFIG.md), and back to a dict."""
from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Annotated, Dict, List, Literal, Optional, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from ..samplers.settings import SettingsError, check_settings
from ..tuners.bandit import OptionError
from ..tasks import LOADERS
from ..engine.network_options import DEFAULT_CHAINS, default_data, sampler_problem
from .base import ConfigError, RowList
from .schema import Config, DensityConfig, DensityModelConfig, DensityRunConfig, DensitySamplerConfig
from .sections import (OLD_REPLICAS_KEYS, BurnInConfig, CVConfig, DataConfig, GammaPriorConfig, HandSettingConfig,
                       ModelConfig, PriorsConfig, RunConfig, SamplerConfig, ScheduleConfig, SplitConfig, TunerConfig)


def _fail(source, path, value, allowed):
    raise ConfigError(f"{source}: {path} = {value!r}: {allowed}")


def _check(cfg: Config, source: str):
    """Checks across keys that the schema cannot express."""
    _check_data(cfg.data, source)
    _check_sampler(cfg, source)
    _check_tuner(cfg, source)
    _check_layout(cfg, source)
    _check_settings(cfg, source)


def _check_data(d, source: str):
    """The data section's keys against each other."""
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


def _check_sampler(cfg: Config, source: str):
    """The sampler's kind, metric, arithmetic and start against the model (the rules of
    :func:`~adaptive_hmc.engine.network_options.sampler_problem`, named by their keys)."""
    s = cfg.sampler
    bad = sampler_problem(cfg.model.kind, s.start, s.arithmetic, s.metric, s.kind, s.base_step is not None,
                          bool(s.anneal))
    if bad is not None:
        field, value, allowed = bad
        _fail(source, f"sampler.{field}", value, allowed)


def _check_tuner(cfg: Config, source: str):
    """The tuner's kind and what it needs: a fixed action, or a bandit's bounds within the budget."""
    t = cfg.tuner
    own = t.kind not in ("bandit", "fixed")
    if own and (t.file is None or t.options_type is None):
        _fail(source, "tuner.kind", t.kind, "bandit, fixed, or the kind of a tuner of your own, with tuner.file "
              "and tuner.options_type")
    if not own and (t.file, t.options_type, t.settings) != (None, None, {}):
        _fail(source, "tuner.file", t.file, f"tuner.file, options_type and settings are for a tuner of your own "
              f"kind, not {t.kind}")
    if t.kind == "fixed":
        if t.step_factor is None or t.num_steps is None:
            _fail(source, "tuner", {"step_factor": t.step_factor, "num_steps": t.num_steps},
                  "a fixed tuner needs step_factor > 0 and num_steps >= 1")
        if t.bounds is not None:
            _fail(source, "tuner.bounds", t.bounds, "bounds are for kind: bandit")
    else:
        if t.bounds is None or set(t.bounds) != {"step_factor", "num_steps"}:
            _fail(source, "tuner.bounds", t.bounds, f"a {'bandit' if not own else 'tuner of your own'} needs "
                  f"bounds for both step_factor and num_steps")
        for name, (lo, hi) in t.bounds.items():
            if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo < hi):
                shown = [int(v) if name == "num_steps" and math.isfinite(v) and v == int(v) else v for v in (lo, hi)]
                _fail(source, f"tuner.bounds.{name}", shown, "need finite 0 < lower < upper")
        if any(v != int(v) for v in t.bounds["num_steps"]):
            _fail(source, "tuner.bounds.num_steps", list(t.bounds["num_steps"]), "need whole numbers")
        if t.bounds["num_steps"][1] > cfg.run.budget:
            _fail(source, "tuner.bounds.num_steps", [int(v) for v in t.bounds["num_steps"]],
                  f"upper bound must be <= run.budget ({cfg.run.budget})")
        if t.step_factor is not None or t.num_steps is not None:
            _fail(source, "tuner", {"step_factor": t.step_factor, "num_steps": t.num_steps},
                  "step_factor and num_steps are for kind: fixed (a bandit tunes them within bounds)")
    if t.kind == "fixed" and t.num_steps > cfg.run.budget:
        _fail(source, "tuner.num_steps", t.num_steps, f"must be <= run.budget ({cfg.run.budget})")
    if t.compare_with is not None:
        if t.kind == "fixed":
            _fail(source, "tuner.compare_with", t.compare_with.model_dump(), "is for a tuned run (kind: bandit or "
                  "your own), to compare with a hand-tuned one; a fixed tuner is the hand-tuned run")
        if t.compare_with.num_steps > cfg.run.budget:
            _fail(source, "tuner.compare_with.num_steps", t.compare_with.num_steps,
                  f"must be <= run.budget ({cfg.run.budget})")
    if cfg.sampler.calibrate_steps and t.warmup_super_transitions < 1:
        _fail(source, "sampler.calibrate_steps", True, "needs tuner.warmup_super_transitions >= 1 (the "
              "calibration is made after the warm-up, at states the chains have reached)")


def _check_layout(cfg: Config, source: str):
    """The chains: of one posterior (``chains``) or cross-validation folds (``cv``), by the one rule of
    :meth:`~adaptive_hmc.engine.network_options.Layout.problem`, in the config's keys."""
    if cfg.chains is not None and cfg.cv is not None:
        _fail(source, "chains", cfg.chains, "give chains (of one posterior) or cv (cross-validation folds), not both")
    bad = cfg.layout.problem(cfg.tuner.reward)
    if bad is not None:
        field, value, allowed = bad
        if field == "data":
            _fail(source, "chains", cfg.chains, f"{allowed}: give cv (e.g. cv: {{folds: 8}}) instead")
        key = "chains" if cfg.cv is None else {"k": "cv.folds", "full_data_chain": "cv.full_chain",
                                               "predict_from": "cv.predict_from"}[field]
        _fail(source, key, value, allowed)


def old_replicas(raw: dict, source: str) -> str | None:
    """Rewrite an old config's section ``replicas`` (data, k, full_data_chain, predict_from) in place as the
    ``chains`` or ``cv`` that took its place; the note a run prints (None when there is nothing to rewrite)."""
    if "replicas" not in raw:
        return None
    r = raw["replicas"]
    if not isinstance(r, dict):
        _fail(source, "replicas", r, "the old name of chains (a number) and cv (a section): give one of those")
    if "chains" in raw or "cv" in raw:
        _fail(source, "replicas", r, "the old name of chains and cv: give chains or cv alone")
    unknown = sorted(set(r) - set(OLD_REPLICAS_KEYS))
    if unknown:
        _fail(source, f"replicas.{unknown[0]}", r[unknown[0]], f"unknown key; replicas (the old name of chains "
              f"and cv) had {', '.join(OLD_REPLICAS_KEYS)}")
    tuner = raw.get("tuner") if isinstance(raw.get("tuner"), dict) else {}
    data = r.get("data") or default_data(tuner.get("reward", TunerConfig.model_fields["reward"].default))
    del raw["replicas"]
    if data not in ("full", "folds"):
        _fail(source, "replicas.data", data, "full or folds (chains or cv now)")
    if data == "full":
        if r.get("full_data_chain"):
            _fail(source, "replicas.full_data_chain", True, "is for data: folds (written cv: now)")
        if r.get("predict_from") == "replicas":
            _fail(source, "replicas.predict_from", "replicas", "needs data: folds (written cv: now)")
        if r.get("k") is not None:
            raw["chains"] = r["k"]
        new = f"chains: {r['k'] if r.get('k') is not None else DEFAULT_CHAINS}"
    else:
        cv = {name: r[old] for old, name in (("k", "folds"), ("full_data_chain", "full_chain"),
                                             ("predict_from", "predict_from")) if r.get(old) is not None}
        raw["cv"] = cv
        new = "cv: {" + ", ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in cv.items()) + "}"
    return f"replicas is the old name of chains and cv: read as `{new}`; write that instead"


def old_arithmetic(raw: dict, source: str) -> str | None:
    """Rewrite an old config's ``sampler.precision`` (the network's arithmetic) in place as
    ``sampler.arithmetic``; the note a run prints (None when there is nothing to rewrite)."""
    s = raw.get("sampler")
    if not isinstance(s, dict) or "precision" not in s:
        return None
    if "arithmetic" in s:
        _fail(source, "sampler.precision", s["precision"], "the old name of sampler.arithmetic: give arithmetic alone")
    s = raw["sampler"] = dict(s)
    s["arithmetic"] = s.pop("precision")
    return f"sampler.precision is the old name of sampler.arithmetic: read as `arithmetic: {s['arithmetic']}`; " \
        "write that instead"


def _check_settings(cfg: Config, source: str):
    """The bandit's schedule and options by their own types, the sampler settings by the samplers' checks (the
    window must fit every L the tuner may ask), and the likelihood's metric and model kind."""
    d, t = cfg.data, cfg.tuner
    s = t.schedule
    need = {"exponential": "rate", "polynomial": "gamma", "wang2013": "burn_in"}[s.kind]
    if t.kind == "bandit" and getattr(s, need) is None:
        _fail(source, f"tuner.schedule.{need}", None, f"schedule kind {s.kind} needs {need}")
    if t.kind == "bandit":
        try:
            t.options()                       # each option's rule is its type's (BanditOptions)
        except OptionError as e:
            _fail(source, f"tuner.{e.field}", e.value, e.allowed)
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
                ("sampler", SamplerConfig), ("cv", CVConfig), ("tuner", TunerConfig),
                ("tuner.schedule", ScheduleConfig), ("tuner.compare_with", HandSettingConfig), ("run", RunConfig),
                ("run.burn_in", BurnInConfig)]
    out = ["# Config reference", "",
           "Generated from the schema in `adaptive_hmc/config/` by `adaptive-hmc reference`; do not edit.",
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
    raw, notes = dict(raw), []
    if not density:
        notes = [n for n in (old_replicas(raw, source), old_arithmetic(raw, source)) if n]
    note = "; ".join(notes)
    try:
        root = DensityConfig if density else Config
        try:
            cfg = root.model_validate(raw)
        except ValidationError as err:
            raise ConfigError(_format(err, source, raw, root)) from None
        if not density:
            _check(cfg, source)
    except ConfigError as err:        # a key that the old section replicas became: named as written
        raise ConfigError(f"{err} ({note})" if note else str(err)) from None
    if notes:
        cfg.notes.extend(notes)
    return cfg


def read_config(path, overrides: Optional[dict] = None) -> Config:
    """Read and validate a YAML file; ``overrides`` maps "section.key" (or a top-level key) to values. What
    reading it noticed (an old key read under its new name) is in the config's ``notes``."""
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
        if "." not in key:                    # a top-level key (chains)
            raw[key] = value
            continue
        sec, k = key.split(".")
        section = raw.setdefault(sec, {})
        if not isinstance(section, dict):
            raise ConfigError(f"{path}: {sec} = {section!r}: must be a mapping (to set {key})")
        section[k] = value
    return parse(raw, str(path))


def to_dict(cfg: Config) -> dict:
    """The resolved config as plain data (of ``chains`` and ``cv``, the one in use)."""
    return cfg.model_dump(mode="json", exclude={k for k in ("chains", "cv") if getattr(cfg, k, 0) is None})
