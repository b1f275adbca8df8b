"""A spec writes ``space.schemes`` and ``current.scheme``; ``space.methods`` and ``current.method``, the old
spellings, still load as the same spec and the same study, a refusal names the key as the file wrote it, both
spellings at once are refused, and the JSON Schema shows the key a spec writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from recommender.config.spec import load_spec, spec_json_schema
from recommender.errors import BadInputError
from tests.conftest import DEMO_SPEC, REPO, spec_mapping, write_spec

SHIPPED = [DEMO_SPEC, *sorted((REPO / "search_spaces").glob("*.yaml"))]

#: A spec as written before the rename, its study fingerprint recorded by the code of that time (eeb95f6).
WRITTEN_BEFORE = """\
name: written-before-schemes
model: {source: model, release: v1}
use_case: suite.yaml
traffic: {prompt_tokens: 512, output_tokens: 64, requests_per_second: 10}
sla: {ttft_p99_ms: 500, tpot_p99_ms: 50}
space:
  methods:
    bf16: [baseline]
    int4: [bnb-nf4]
  hardware: [l4, h100-sxm]
  batch_sizes: [8]
current: {precision: bf16, method: baseline, hardware: h100-sxm, batch_size: 8}
"""


def _old_spelling(data: dict[str, Any]) -> dict[str, Any]:
    """The mapping with ``space.schemes`` and ``current.scheme`` written the old way."""
    space = {("methods" if k == "schemes" else k): v for k, v in data["space"].items()}
    current = {("method" if k == "scheme" else k): v for k, v in data["current"].items()}
    return {**data, "space": space, "current": current}


def _refusal(tmp_path: Path, data: dict[str, Any]) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(BadInputError) as refused:
        load_spec(path)
    return str(refused.value)


def test_both_spellings_load_as_the_same_spec_and_the_same_study(tmp_path: Path) -> None:
    new = spec_mapping()
    assert "schemes" in new["space"] and "scheme" in new["current"]
    written_new = write_spec(tmp_path / "new" / "spec.yaml")
    written_old = tmp_path / "old" / "spec.yaml"
    written_old.parent.mkdir()
    written_old.write_text(yaml.safe_dump(_old_spelling(new)), encoding="utf-8")
    a, b = load_spec(written_new), load_spec(written_old)
    assert a.model_dump(exclude={"spec_path"}) == b.model_dump(exclude={"spec_path"})
    assert a.space.schemes == new["space"]["schemes"] and a.current.method == new["current"]["scheme"]
    assert a.study_name == b.study_name


def test_a_spec_written_before_the_rename_keeps_its_study_name(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(WRITTEN_BEFORE, encoding="utf-8")
    assert load_spec(path).fingerprint() == "e645850623"


@pytest.mark.parametrize(
    ("section", "key", "old", "value"),
    [("space", "schemes", "methods", {"bf16": ["baseline"]}), ("current", "scheme", "method", "baseline")],
)
def test_both_spellings_at_once_are_refused_naming_the_key(
    tmp_path: Path, section: str, key: str, old: str, value: Any
) -> None:
    data = spec_mapping()
    data[section][old] = value
    line = _refusal(tmp_path, data)
    assert f"spec.yaml: {section}.{key}: given twice, as {key} and as {old} (its old spelling)" in line
    assert f"(fix: keep one, {key})" in line


@pytest.mark.parametrize("old", [False, True], ids=["new spelling", "old spelling"])
@pytest.mark.parametrize(
    ("section", "change", "named"),
    [
        ("space", {"int8": ["bnb-nf4"]}, "space.{schemes}.int8: scheme 'bnb-nf4' is a int4 scheme, listed under int8"),
        ("space", {}, "space.{schemes}: no schemes to search"),
        ("current", "fp9", "current.{scheme}: unknown quantization scheme 'fp9'"),
        ("current", 3, "current.{scheme}: Input should be a valid string"),
    ],
)
def test_a_refusal_names_the_key_as_the_spec_wrote_it(
    tmp_path: Path, section: str, change: Any, named: str, old: bool
) -> None:
    data = spec_mapping()
    if section == "space":
        data["space"]["schemes"] = change
    else:
        data["current"]["scheme"] = change
    line = _refusal(tmp_path, _old_spelling(data) if old else data)
    words = {"schemes": "methods", "scheme": "method"} if old else {"schemes": "schemes", "scheme": "scheme"}
    assert named.format(**words) in line


def test_a_missing_key_is_named_in_the_new_spelling(tmp_path: Path) -> None:
    data = spec_mapping()
    del data["current"]["scheme"]
    assert "current.scheme: required key is missing" in _refusal(tmp_path, data)
    data = spec_mapping()
    del data["space"]["schemes"]
    assert "space.schemes: required key is missing" in _refusal(tmp_path, data)


def test_the_json_schema_shows_the_keys_a_spec_writes() -> None:
    schema = spec_json_schema()
    defs = schema["$defs"]
    # `scheme` is shown on the Candidate the spec holds as `current`, the one place its input is mapped to `method`.
    assert json.dumps(schema).count('"#/$defs/Candidate"') == 1 and "$ref" in schema["properties"]["current"]
    assert "schemes" in defs["Space"]["properties"] and "methods" not in defs["Space"]["properties"]
    assert "schemes" in defs["Space"]["required"]
    current = defs["Candidate"]
    assert list(current["properties"])[:2] == ["precision", "scheme"] and "method" not in current["properties"]
    assert "scheme" in current["required"] and "method" not in current["required"]
    assert "old spelling" in current["properties"]["scheme"]["description"]


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_specs_write_the_keys_the_schema_shows(path: Path) -> None:
    defs = spec_json_schema()["$defs"]
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert set(data["space"]) <= set(defs["Space"]["properties"])
    assert set(data["current"]) <= set(defs["Candidate"]["properties"])
