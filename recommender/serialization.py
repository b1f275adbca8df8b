"""The one place typed results become JSON and come back.

recommendation.json, results.json, Optuna user attributes, the quality claims and caches
and MLflow artifacts all go through `to_data` / `from_data`, so a field added to a result
dataclass is serialised everywhere at once and read back as the same type (tuples, nested
dataclasses, Literals and pydantic spec models included). pydantic's TypeAdapter does the
work from the dataclasses' own annotations; nothing here knows a field name.

Non-finite floats are kept (JSON's ``Infinity``/``NaN``, which Python's json reads back).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

T = TypeVar("T")


@cache
def _built_adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def _adapter(kind: Any) -> TypeAdapter[Any]:
    """A TypeAdapter for `kind`, built once per type: a build costs a few ms (pydantic generates the schema), which
    a search paid on every trial's result and attribute (about 2 s of the demo's 80 trials, py-spy)."""
    return _built_adapter(kind)


def to_data(value: object) -> Any:
    """JSON-ready Python data (dicts, lists, str, numbers, None) for a typed value."""
    return _adapter(type(value)).dump_python(value, mode="python", round_trip=True) if value is not None else None


def from_data(kind: type[T], data: Any) -> T:
    """The typed value of `kind` that `data` (from `to_data`, perhaps through JSON) describes.

    Raises ValueError with pydantic's explanation when the data does not describe a `kind`
    (an artifact written by an older schema, a hand-edited file).
    """
    try:
        return _adapter(kind).validate_python(data)  # type: ignore[no-any-return]
    except ValidationError as exc:
        raise ValueError(f"not a {kind.__name__}: {exc}") from None


def list_to_data(values: list[Any]) -> list[Any]:
    if not values:
        return []
    return _adapter(list[type(values[0])]).dump_python(values, mode="python", round_trip=True)  # type: ignore[no-any-return,misc]


def list_from_data(kind: type[T], data: Any) -> list[T]:
    try:
        return _adapter(list[kind]).validate_python(data)  # type: ignore[no-any-return,valid-type]
    except ValidationError as exc:
        raise ValueError(f"not a list of {kind.__name__}: {exc}") from None


def dumps(data: Any) -> str:
    """The JSON text every file of the project is written with (indented, keys in field order)."""
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def write_json(path: Path, data: Any) -> Path:
    """`data` as JSON at `path`, whole or not at all (a full disk: one line naming it, nothing half-written)."""
    from recommender.integrity import write_atomic

    return write_atomic(path, dumps(data).encode("utf-8"))
