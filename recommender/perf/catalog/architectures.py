"""Model architectures without weights: a shipped name, a Hugging Face hub id, a config.json or a directory.

The shipped ones live in ``perf/catalog/architectures/<name>.json``: the numbers of the model's
config.json (``_source`` says where they were read) and ``_hub_ids``, the hub ids that share
them, so ``--model Qwen/Qwen3-32B`` resolves offline to the shipped shape. Add a model by adding
one file there.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

from recommender.errors import BadInputError
from recommender.input_files import load_json
from recommender.perf.catalog.architecture_check import check_architecture
from recommender.perf.catalog.hf_config import language_model
from recommender.perf.model.shape import ModelShape

__all__ = [
    "ARCHITECTURES",
    "hub_ids",
    "known_architectures",
    "load_architecture",
    "read_architecture",
    "shipped_for_hub_id",
]

ARCHITECTURES = Path(str(resources.files("recommender.perf.catalog") / "architectures"))


def known_architectures() -> list[str]:
    return sorted(p.stem for p in ARCHITECTURES.glob("*.json"))


@cache
def hub_ids() -> dict[str, str]:
    """Lower-cased hub id -> shipped architecture name, from every shipped file's ``_hub_ids``."""
    out: dict[str, str] = {}
    for path in sorted(ARCHITECTURES.glob("*.json")):
        for hub_id in json.loads(path.read_text(encoding="utf-8")).get("_hub_ids", []):
            out[str(hub_id).lower()] = path.stem
    return out


#: Suffixes a quantized re-upload adds to the base model's repository name (nvidia/Llama-3.1-8B-Instruct-FP8,
#: Qwen/Qwen3-32B-FP8, RedHatAI/...-quantized.w8a8, ...-AWQ, ...-GPTQ-Int4): the shape is the base model's, the
#: scheme comes from the precision the caller names.
_QUANT_SUFFIX = re.compile(
    r"(-(fp8(-dynamic)?|fp4|nvfp4|mxfp4|awq|gptq(-int[48])?|int[48]|w8a8|w4a16|w8a16|quantized[.\w-]*|bnb-4bit))+$",
    re.IGNORECASE,
)


def _base_repo(hub_id: str) -> str:
    """The repository name without its organisation, a "Meta-" prefix or a quantization suffix, lower-cased."""
    repo = hub_id.rsplit("/", 1)[-1].lower()
    return _QUANT_SUFFIX.sub("", repo).removeprefix("meta-")


@cache
def _by_base_repo() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for hub_id, name in hub_ids().items():
        out.setdefault(_base_repo(hub_id), set()).add(name)
    return out


def shipped_for_hub_id(hub_id: str) -> str | None:
    """The shipped architecture of a hub id: one a shipped file lists, else the one whose listed repositories
    share its name once organisation and quantization suffix are dropped (None when none or several do)."""
    exact = hub_ids().get(hub_id.lower())
    if exact is not None or "/" not in hub_id:
        return exact
    names = _by_base_repo().get(_base_repo(hub_id), set())
    return next(iter(names)) if len(names) == 1 else None


def _config_path(model: str) -> Path:
    shipped = ARCHITECTURES / f"{model}.json"
    if shipped.is_file():
        return shipped
    path = Path(model)
    if path.is_dir():
        return path / "config.json"
    shipped_name = None if path.exists() else shipped_for_hub_id(model)
    if shipped_name is not None:
        return ARCHITECTURES / f"{shipped_name}.json"
    return path


def read_architecture(model: str, *, field: str = "--model") -> tuple[str, SimpleNamespace]:
    """A shipped name, a hub id a shipped file lists, a config.json path or a model directory -> (name, config).
    A multimodal wrapper's language model is read (``hf_config.language_model``) and its name says the towers
    left unpriced; ``config._language_model`` keeps what was read from where."""
    try:
        path = _config_path(model)
        found = path.is_file()
    except OSError:  # a name no filesystem holds (over 255 bytes) is no architecture: bad input, not a traceback
        found = False
    if not found:
        raise BadInputError(
            field,
            f"no architecture {model!r}",
            f"pass a config.json, a model directory, a hub id of a shipped one, or one of "
            f"{', '.join(known_architectures())}",
        )
    where = f"{field}: {path}"
    language = language_model(load_json(path, field=field, what="config.json", non_finite=True), field=where)
    config = SimpleNamespace(**language.fields, _language_model=language)
    check_architecture(config, field=where if language.nested_under is None else f"{where} ({language.nested_under})")
    name = config._name if isinstance(getattr(config, "_name", None), str) else path.parent.name
    return (name if language.note is None else f"{name} ({language.note})"), config


def load_architecture(model: str, *, field: str = "--model") -> tuple[str, ModelShape]:
    """As :func:`read_architecture`, with the config turned into the shape the performance model reads."""
    name, config = read_architecture(model, field=field)
    return name, ModelShape.from_config(config)
