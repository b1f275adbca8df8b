"""The spec's lengths against the model's positions, checked where they are used: each trace row, a
conversation's last turn, the speculation measurement's prompt and new tokens.

`prepare` runs them once the model's config is loaded (through transformers, for a hub id too).
For a local model directory the command line runs them first on its config.json as written,
before the libraries a search needs are imported (seconds on a busy machine): a spec refused for
its lengths is refused within a second or two. The same functions decide both times.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from recommender.errors import BadInputError
from recommender.input_files import load_json
from recommender.perf.catalog.architecture_check import (
    check_architecture,
    check_speculation_fits,
    check_traffic_fits,
)
from recommender.perf.model.shape import ModelShape
from recommender.speculation.methods import NONE

if TYPE_CHECKING:
    from recommender.config.spec import SearchSpec
    from recommender.perf.catalog.gpus import Catalog


def searches_speculation(spec: SearchSpec) -> bool:
    """Whether a speculative method is searched or runs today: only then is ``spec.speculation`` measured."""
    return set(spec.space.speculative) | {spec.current.speculative} != {NONE}


def check_lengths(spec: SearchSpec, config: Any, shape: ModelShape, catalog: Catalog) -> None:
    """The traffic (constant, per trace row, per conversation's last turn) and, where speculation is searched,
    its measurement, against the model's positions and the largest catalog node."""
    prefix = f"{spec.spec_path}: "
    check_traffic_fits(config, shape, catalog, spec.traffic, field_prefix=prefix)
    if searches_speculation(spec):  # its settings are used only then
        check_speculation_fits(config, spec.speculation.prompt_tokens, spec.speculation.new_tokens, field_prefix=prefix)


def check_local_lengths(spec: SearchSpec) -> None:
    """`check_lengths` on a local model directory's config.json as written, before any library loads; a config
    this reading cannot shape is left to `prepare`, which loads it as transformers does and decides."""
    from recommender.perf.catalog.gpus import load_catalog

    path = Path(spec.model.source) / "config.json"
    if not path.is_file():
        return  # a hub id: its config is read (from the cache, or the hub) by prepare
    try:
        data = load_json(path, field=f"{spec.spec_path}: model.source", what="config.json")
        config = SimpleNamespace(**data)
        check_architecture(config, field="config.json")
        shape = ModelShape.from_config(config)
    except (BadInputError, TypeError, ValueError, ArithmeticError):
        return
    check_lengths(spec, config, shape, load_catalog(spec.hardware_catalog, price_set=spec.price_set))
