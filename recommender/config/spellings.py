"""The spec's words for a quantization scheme, and the old spellings it still reads.

The code, the CLI (``--scheme``) and the docs call a quantization recipe a *scheme*; specs written before that
said *method*. A spec now writes ``space.schemes`` and ``current.scheme``; ``space.methods`` and
``current.method`` are read as the same keys, so no spec or stored study stops loading. Both spellings of one
key in one section are refused: which should win is the user's to say, not ours to guess. That refusal is a
`BadInputError` raised inside validation (pydantic lets any other exception than ValueError through), so its
line names the key and the fix rather than only the section.

``current`` is a `Candidate`, whose field keeps the name ``method`` (Optuna's parameters, MLflow and
results.json store it under that name): the spec maps ``scheme`` onto it on the way in, and its JSON Schema
shows the key a spec writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recommender.errors import BadInputError

__all__ = [
    "OLD_SPELLINGS",
    "as_written",
    "current_scheme_as_method",
    "refuse_both_spellings",
    "schema_with_current_scheme",
]

#: (section, key a spec writes, its old spelling) for every renamed key of a spec.
OLD_SPELLINGS = (("space", "schemes", "methods"), ("current", "scheme", "method"))


def refuse_both_spellings(data: Any, section: str, key: str, old: str) -> None:
    """BadInputError when the spec's `section` (its input, before validation) gives `key` under both spellings."""
    if isinstance(data, Mapping) and key in data and old in data:
        raise BadInputError(
            f"{section}.{key}", f"given twice, as {key} and as {old} (its old spelling)", f"keep one, {key}"
        )


def current_scheme_as_method(data: Any) -> Any:
    """The spec's ``current`` with ``scheme`` under the `Candidate` field's name, ``method`` (key order kept);
    anything else is left for the `Candidate` to validate."""
    refuse_both_spellings(data, "current", "scheme", "method")
    if not isinstance(data, Mapping) or "scheme" not in data:
        return data
    return {("method" if k == "scheme" else k): v for k, v in data.items()}


def as_written(field: str, raw: Mapping[str, Any]) -> str:
    """A refusal's field (``space.schemes.int4``, ``current.method``) in the spelling the spec used, so a user
    who wrote ``methods:`` is pointed at ``space.methods.int4`` and one who wrote ``scheme:`` at
    ``current.scheme``."""
    for section, key, old in OLD_SPELLINGS:
        node = raw.get(section)
        written = old if isinstance(node, Mapping) and old in node and key not in node else key
        for spelling in (key, old):
            name = f"{section}.{spelling}"
            if field == name or field.startswith((f"{name}.", f"{name}[")):
                return f"{section}.{written}{field[len(name) :]}"
    return field


def schema_with_current_scheme(schema: dict[str, Any]) -> dict[str, Any]:
    """The spec's JSON Schema with ``current``'s ``method`` shown as ``scheme``, the key a spec writes (in
    place, returned). ``current`` is the only place the spec holds a `Candidate`; recommendation.json's schema,
    generated apart, keeps the field's stored name."""
    candidate = schema["$defs"]["Candidate"]
    candidate["properties"] = {
        ("scheme" if name == "method" else name): (
            {
                "title": "Scheme",
                "type": "string",
                "description": "Quantization scheme (`recommender quantize --help` lists them); `method`, "
                "its old spelling, is read too.",
            }
            if name == "method"
            else prop
        )
        for name, prop in candidate["properties"].items()
    }
    candidate["required"] = ["scheme" if name == "method" else name for name in candidate["required"]]
    return schema
