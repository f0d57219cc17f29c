"""A user's Python file named by a config (a log density's, a tuner's own),
imported as a module, and a name in it looked up, each failure a
:class:`~adaptive_hmc.config.ConfigError` naming the config's key.

Flow position: config -> **user_files** -> experiment, density_run.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ..config import ConfigError


def import_file(name: str, source: str, key: str, prefix: str):
    """The module of the file ``name`` (relative to the config ``source``'s folder, or absolute), for the
    config key ``key``, registered as ``prefix`` + its stem; ConfigError saying what is wrong."""
    path = Path(name) if Path(name).is_absolute() else Path(source).resolve().parent / name
    if path.suffix != ".py":
        raise ConfigError(f"{source}: {key} = {name!r}: a Python file (NAME.py)")
    if not path.is_file():
        raise ConfigError(f"{source}: {key} = {name!r}: no such file ({path})")
    spec = importlib.util.spec_from_file_location(f"{prefix}{path.stem}", path)
    # registered before it runs, as an import would: Numba's cache (a user's @njit(cache=True)) records a
    # function's module by its registered name, and a later process imports that name to load the entry
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:                               # noqa: BLE001 - any error of the user's file, named
        sys.modules.pop(spec.name, None)
        raise ConfigError(f"{source}: {key} = {name!r}: importing it raised {type(e).__name__}: {e}") from None
    return module


def callable_in(module, name: str, source: str, key: str, file: str):
    """``module``'s callable ``name`` (config key ``key``); ConfigError listing the file's callables."""
    fn = getattr(module, name, None)
    if not callable(fn):
        found = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_"))
        raise ConfigError(f"{source}: {key} = {name!r}: {file} defines no such function (its "
                          f"functions: {', '.join(found) or 'none'})")
    return fn
