"""Hypothesis strategies from a JSON Schema: the keywords pydantic writes for `recommender schema`.

hypothesis-jsonschema (0.23) no longer runs on current Hypothesis, and the spec's schema uses a
small part of the standard ($ref, anyOf, enum, bounds, patterns, arrays, objects with
required/optional properties or keys from an enum), so the translation lives here. A keyword it
does not know fails loudly: a schema change must not quietly narrow what the tests generate.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

#: Generated lists and free strings stay small: the spec's checks look at values, not volume.
MAX_ITEMS = 4
MAX_TEXT = 40
_IGNORED = {
    "title",
    "description",
    "default",
    "format",
    "$schema",
    "$defs",
    "type",
    "additionalProperties",
    "properties",
    "required",
    "items",
    "propertyNames",
}
_HANDLED = {
    "$ref",
    "anyOf",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "pattern",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
}


def from_schema(schema: dict[str, Any], root: dict[str, Any] | None = None) -> st.SearchStrategy[Any]:
    """Values valid against `schema` (whose ``$defs`` live in `root`, the whole schema)."""
    root = root if root is not None else schema
    unknown = set(schema) - _IGNORED - _HANDLED
    if unknown:
        raise ValueError(f"schema keywords this strategy does not generate: {sorted(unknown)}")
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return st.deferred(lambda: from_schema(root["$defs"][name], root))
    if "anyOf" in schema:
        return st.one_of([from_schema(option, root) for option in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    makers = {
        "null": lambda: st.none(),
        "boolean": st.booleans,
        "integer": lambda: _integers(schema),
        "number": lambda: _numbers(schema),
        "string": lambda: _strings(schema),
        "array": lambda: _arrays(schema, root),
        "object": lambda: _objects(schema, root),
    }
    if kind not in makers:
        raise ValueError(f"schema type this strategy does not generate: {kind!r}")
    return makers[kind]()


def _integers(schema: dict[str, Any]) -> st.SearchStrategy[int]:
    low = schema.get("minimum", schema.get("exclusiveMinimum", -(2**63)) + ("exclusiveMinimum" in schema))
    high = schema.get("maximum", schema.get("exclusiveMaximum", 2**63) - ("exclusiveMaximum" in schema))
    return st.integers(min_value=int(low), max_value=int(high))


def _numbers(schema: dict[str, Any]) -> st.SearchStrategy[float]:
    return st.floats(
        min_value=schema.get("minimum", schema.get("exclusiveMinimum")),
        max_value=schema.get("maximum", schema.get("exclusiveMaximum")),
        exclude_min="exclusiveMinimum" in schema,
        exclude_max="exclusiveMaximum" in schema,
        allow_nan=False,
        allow_infinity=False,
    )


def _strings(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    low, high = schema.get("minLength", 0), min(schema.get("maxLength", MAX_TEXT), MAX_TEXT)
    if "pattern" in schema:
        return st.from_regex(schema["pattern"], fullmatch=True).filter(lambda s: low <= len(s) <= high)
    return st.text(min_size=low, max_size=high)


def _arrays(schema: dict[str, Any], root: dict[str, Any]) -> st.SearchStrategy[list[Any]]:
    low = schema.get("minItems", 0)
    return st.lists(
        from_schema(schema.get("items", {}), root),
        min_size=low,
        max_size=max(low, min(schema.get("maxItems", MAX_ITEMS), MAX_ITEMS)),
    )


def _objects(schema: dict[str, Any], root: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", []))
        return st.fixed_dictionaries(
            {key: from_schema(sub, root) for key, sub in properties.items() if key in required},
            optional={key: from_schema(sub, root) for key, sub in properties.items() if key not in required},
        )
    names = schema.get("propertyNames", {})
    keys = st.sampled_from(names["enum"]) if "enum" in names else st.text(max_size=MAX_TEXT)
    values = schema.get("additionalProperties", {})
    return st.dictionaries(
        keys, from_schema(values, root) if isinstance(values, dict) else st.none(), max_size=MAX_ITEMS
    )
