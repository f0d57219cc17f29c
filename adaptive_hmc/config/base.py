"""The config's building blocks: the error every check raises, the strict
base model of its sections, the value types they share, and the defaults
read from the library's own declarations."""
from __future__ import annotations

from typing import Annotated, List, Union

from pydantic import BaseModel, ConfigDict, Field

from ..engine.network_options import NetworkOptions
from ..samplers.settings import HMCSettings


_SETTINGS = HMCSettings._field_defaults     # sampler defaults: declared once, in HMCSettings


def _network_default(name: str):
    """The default of :class:`~adaptive_hmc.engine.network_options.NetworkOptions` field ``name``."""
    return NetworkOptions.__dataclass_fields__[name].default


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
