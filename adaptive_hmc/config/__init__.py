"""Experiment configuration: YAML -> validated objects, every problem found
before any work starts.

Flow position: the edge (DESIGN principle 8), above the runner: the library
takes keyword arguments and never reads YAML; this module validates a file and
converts each section into those arguments (one method per section), raising
:class:`ConfigError` naming the file, the key path, the value and what is
allowed. Reading the data is :mod:`adaptive_hmc.data`'s job.

Modules: ``base`` (the error, the strict model, shared types), ``sections``
(one model per section), ``schema`` (the whole config, network or density),
``parse`` (YAML in, the checks across keys, the reference, a dict out).
"""
from .base import ConfigError
from .parse import parse, read_config, reference, to_dict
from .schema import Config, DensityConfig
from .sections import (BurnInConfig, DataConfig, GammaPriorConfig, ModelConfig, PriorsConfig, CVConfig,
                       RunConfig, SamplerConfig, ScheduleConfig, SplitConfig, TunerConfig, UntilConfig)

__all__ = ["ConfigError", "Config", "DensityConfig", "parse", "read_config", "reference", "to_dict",
           "BurnInConfig", "DataConfig", "GammaPriorConfig", "ModelConfig", "PriorsConfig", "CVConfig",
           "RunConfig", "SamplerConfig", "ScheduleConfig", "SplitConfig", "TunerConfig", "UntilConfig"]
