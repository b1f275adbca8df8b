"""Serving engines: where each runs which scheme, how it is launched, and the engine list, declared once here.

Each engine is one module (`vllm.py`, `sglang.py`, `tgi.py`, `trtllm.py`) holding an `Emitter` subclass:
its launch command, its `kernels` (the scheme families it runs, on which GPUs and with which flag) and its
`profile` (how it batches, for the simulator), every figure sourced in its docstring. Add an engine by writing
such a module and one line in `_EMITTERS` below; the spec's `engines`, eligibility, `plan`, `estimate`, the
search and the emitters read this registry. An engine without measured runs is simulated with its own
batching and the engine-agnostic step cost (a wider interval). Importing this package imports no engine
library and no torch.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from recommender.engines._base import EmittedConfig, Emitter, LaunchSettings
from recommender.engines.kernels import Kernel
from recommender.engines.sglang import SglangEmitter
from recommender.engines.tgi import TgiEmitter
from recommender.engines.trtllm import TrtllmEmitter
from recommender.engines.vllm import VllmEmitter
from recommender.errors import BadInputError
from recommender.perf.sim.engine_profiles import EngineProfile

if TYPE_CHECKING:
    from recommender.quantize import QuantMethod

__all__ = [
    "DEFAULT_ENGINES", "EMITTERS", "ENGINE_NAMES", "PROFILES", "SUPPORT", "EmittedConfig", "Emitter", "LaunchSettings",
    "emit_all", "evaluation_only", "get_emitter", "launch_flags",
]  # fmt: skip

_EMITTERS: tuple[Emitter, ...] = (
    VllmEmitter(),
    SglangEmitter(),
    TgiEmitter(),
    TrtllmEmitter(),
)

#: Every emitter by engine name, read-only.
EMITTERS: Mapping[str, Emitter] = MappingProxyType({emitter.name: emitter for emitter in _EMITTERS})
#: The engines, in registry order: the spec's `engines` names these.
ENGINE_NAMES: tuple[str, ...] = tuple(EMITTERS)
#: How each engine batches, by name (the simulator's `EngineProfile`s).
PROFILES: Mapping[str, EngineProfile] = MappingProxyType({name: e.profile for name, e in EMITTERS.items()})
#: The engines a spec checks when it names none: the two that load llm-compressor checkpoints best.
DEFAULT_ENGINES: tuple[str, ...] = ("vllm", "sglang")
#: Every (engine, family) row, read-only: the engines' `kernels` side by side.
SUPPORT: Mapping[tuple[str, str], Kernel] = MappingProxyType(
    {(emitter.name, row.family): row for emitter in _EMITTERS for row in emitter.kernels}
)


def get_emitter(name: str, *, field: str = "engine") -> Emitter:
    """The emitter called `name`, or a BadInputError naming the field and the closest names."""
    if name in EMITTERS:
        return EMITTERS[name]
    close = difflib.get_close_matches(name, EMITTERS, n=3)
    hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(sorted(EMITTERS))}"
    raise BadInputError(field, f"unknown serving engine {name!r}", hint)


def emit_all(settings: LaunchSettings) -> list[EmittedConfig]:
    """Every engine's answer for one launch, supported or not, in registry order."""
    return [emitter.emit(settings) for emitter in EMITTERS.values()]


def launch_flags(method: QuantMethod) -> dict[str, str | None]:
    """Each engine's quantization flag for `method` by engine name (None: no such scheme, "": no flag needed)."""
    return {name: emitter.flag_for(method) for name, emitter in EMITTERS.items()}


def evaluation_only(method: QuantMethod) -> bool:
    """No serving engine launches `method`: `recommender eval` scores it, the search never recommends it."""
    return all(emitter.row(method.kernel_family) is None for emitter in _EMITTERS)
