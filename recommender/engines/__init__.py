"""Serving engines: where each runs which scheme, how it is launched, and the engine list, declared once here.

Each engine is one module (`vllm.py`, `sglang.py`, `tgi.py`, `trtllm.py`) holding an `Engine` subclass:
its launch command, its `kernels` (the scheme families it runs, on which GPUs and with which flag) and its
`profile` (how it batches, for the simulator), every figure sourced in its docstring. Add an engine by writing
such a module and one line in `_ALL_ENGINES` below; the spec's `engines`, eligibility, `plan`, `estimate`, the
search and the engines read this registry. An engine without measured runs is simulated with its own
batching and the engine-agnostic step cost (a wider interval). Importing this package imports no engine
library and no torch.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from recommender.engines._base import Engine, EngineLaunch, LaunchSettings
from recommender.engines.kernels import Kernel
from recommender.engines.sglang import SglangEngine
from recommender.engines.tgi import TgiEngine
from recommender.engines.trtllm import TrtllmEngine
from recommender.engines.vllm import VllmEngine
from recommender.errors import BadInputError
from recommender.perf.sim.engine_profiles import EngineProfile

if TYPE_CHECKING:
    from recommender.quantize import QuantScheme

__all__ = [
    "DEFAULT_ENGINES",
    "ENGINES_BY_NAME",
    "ENGINE_NAMES",
    "PROFILES",
    "SUPPORT",
    "EngineLaunch",
    "Engine",
    "LaunchSettings",
    "emit_all",
    "evaluation_only",
    "get_engine",
    "launch_flags",
]

_ALL_ENGINES: tuple[Engine, ...] = (
    VllmEngine(),
    SglangEngine(),
    TgiEngine(),
    TrtllmEngine(),
)

#: Every engine by name, read-only.
ENGINES_BY_NAME: Mapping[str, Engine] = MappingProxyType({engine.name: engine for engine in _ALL_ENGINES})
#: The engines, in registry order: the spec's `engines` names these.
ENGINE_NAMES: tuple[str, ...] = tuple(ENGINES_BY_NAME)
#: How each engine batches, by name (the simulator's `EngineProfile`s).
PROFILES: Mapping[str, EngineProfile] = MappingProxyType({name: e.profile for name, e in ENGINES_BY_NAME.items()})
#: The engines a spec checks when it names none: the two that load llm-compressor checkpoints best.
DEFAULT_ENGINES: tuple[str, ...] = ("vllm", "sglang")
#: Every (engine, family) row, read-only: the engines' `kernels` side by side.
SUPPORT: Mapping[tuple[str, str], Kernel] = MappingProxyType(
    {(engine.name, row.family): row for engine in _ALL_ENGINES for row in engine.kernels}
)


def get_engine(name: str, *, field: str = "engine") -> Engine:
    """The engine called `name`, or a BadInputError naming the field and the closest names."""
    if name in ENGINES_BY_NAME:
        return ENGINES_BY_NAME[name]
    close = difflib.get_close_matches(name, ENGINES_BY_NAME, n=3)
    hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(sorted(ENGINES_BY_NAME))}"
    raise BadInputError(field, f"unknown serving engine {name!r}", hint)


def emit_all(settings: LaunchSettings) -> list[EngineLaunch]:
    """Every engine's answer for one launch, supported or not, in registry order."""
    return [engine.emit(settings) for engine in ENGINES_BY_NAME.values()]


def launch_flags(method: QuantScheme) -> dict[str, str | None]:
    """Each engine's quantization flag for `method` by engine name (None: no such scheme, "": no flag needed)."""
    return {name: engine.flag_for(method) for name, engine in ENGINES_BY_NAME.items()}


def evaluation_only(method: QuantScheme) -> bool:
    """No serving engine launches `method`: `recommender eval` scores it, the search never recommends it."""
    return all(engine.row(method.kernel_family) is None for engine in _ALL_ENGINES)
