"""Hostile input below the command line: the reader, the name and path checks, MLflow filters, spec mutations.

The bad-input corpus (tests/cli/bad_inputs/cases.yaml) drives the CLI with one case per class; these
tests hit the same checks directly with many more values: every field of a valid spec replaced by
every hostile value must end in a spec or one BadInputError, never another exception.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml

from recommender.config.destinations import MAX_NAME_BYTES, check_name, check_storage_url, check_tracking_uri
from recommender.config.spec import SearchSpec, spec_from_mapping
from recommender.errors import BadInputError
from recommender.input_files import MAX_DEPTH, load_json, load_yaml
from tests.conftest import DEMO_SPEC, REPO, with_value

HOSTILE_VALUES: list[Any] = [
    None,
    0,
    -1,
    -(10**12),
    10**12,
    10**30,
    0.5,
    float("inf"),
    float("-inf"),
    float("nan"),
    True,
    "",
    "x" * 10_000,
    "../../etc",
    "a\0b",
    "é\u202e🙂",
    "'; DROP TABLE x; --",
    [],
    [1, 1],
    {},
    {"a": 1},
    [[[[[]]]]],
]


def _demo_raw() -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(DEMO_SPEC.read_text(encoding="utf-8"))
    raw["model"]["source"] = str(REPO / "recommender" / "demo" / "model")
    raw["use_case"] = str(REPO / "recommender" / "demo" / "use_case.yaml")
    return raw


def _leaf_paths(node: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every key path of the spec, leaves and sections alike (a section replaced by a number is hostile too)."""
    paths = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            paths += _leaf_paths(value, (*prefix, str(key)))
    return paths


def test_every_field_times_every_hostile_value_is_a_spec_or_one_refusal() -> None:
    """About 700 specs: each field (and each section) of the demo spec replaced by each hostile value."""
    raw, outcomes = _demo_raw(), {"accepted": 0, "refused": 0}
    cases = list(itertools.product(_leaf_paths(raw), HOSTILE_VALUES))
    assert len(cases) >= 500
    for path, value in cases:
        try:
            spec = spec_from_mapping(with_value(raw, path, value), spec_path=DEMO_SPEC, label="spec.yaml")
        except BadInputError as exc:
            assert str(exc).startswith("spec.yaml: ") and "\n" not in str(exc), (path, value, str(exc))
            outcomes["refused"] += 1
            continue
        assert isinstance(spec, SearchSpec)
        outcomes["accepted"] += 1
    assert outcomes["refused"] > outcomes["accepted"] > 0, outcomes


@pytest.mark.parametrize(
    "name",
    [
        "../x",
        "..",
        "a/../b",
        "/abs",
        "a/b",
        "a\\b",
        "a\0b",
        ".hidden",
        "-flag",
        "",
        " ",
        "é",
        "a" * (MAX_NAME_BYTES + 1),
    ],
)
def test_names_that_could_leave_their_folder_are_refused(name: str) -> None:
    with pytest.raises(BadInputError, match="study name"):
        check_name(name, field="search.study_name", what="study name")


def test_an_accepted_name_stays_one_folder_below_its_root(tmp_path: Path) -> None:
    for name in ["demo-0123456789", "a.b_c-d", "x" * MAX_NAME_BYTES, "v1.2.3"]:
        check_name(name, field="f")
        assert (tmp_path / name).resolve().parent == tmp_path.resolve()


def test_duplicate_keys_are_refused_at_any_depth(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("a:\n  b: 1\n  c: {d: 1, d: 2}\n", encoding="utf-8")
    with pytest.raises(BadInputError, match="key 'd' is written twice"):
        load_yaml(tmp_path / "a.yaml", field="f")
    (tmp_path / "a.json").write_text('{"a": {"b": [{"c": 1, "c": 1}]}}', encoding="utf-8")
    with pytest.raises(BadInputError, match="key 'c' is written twice"):
        load_json(tmp_path / "a.json", field="f")


def test_yaml_tags_that_build_python_objects_are_refused_not_run(tmp_path: Path) -> None:
    """The loader is YAML's SafeLoader (plus the duplicate-key check): no tag constructs or calls Python."""
    marker = tmp_path / "ran"
    for tag in ("!!python/object/apply:os.system", "!!python/object/apply:pathlib.Path.touch"):
        arg = f"touch {marker}" if "system" in tag else str(marker)
        (tmp_path / "evil.yaml").write_text(f"name: {tag} [{arg!r}]\n", encoding="utf-8")
        with pytest.raises(BadInputError, match="malformed YAML"):
            load_yaml(tmp_path / "evil.yaml", field="f")
    assert not marker.exists()


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000])
def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path: Path, depth: int) -> None:
    (tmp_path / "deep.yaml").write_text("a: " + "[" * depth + "]" * depth + "\n", encoding="utf-8")
    (tmp_path / "deep.json").write_text("[" * depth + "]" * depth, encoding="utf-8")
    for path, load in ((tmp_path / "deep.yaml", load_yaml), (tmp_path / "deep.json", load_json)):
        with pytest.raises(BadInputError, match="nests deeper"):
            load(path, field="f", expect=None)


def test_a_file_at_the_depth_limit_is_read(tmp_path: Path) -> None:
    depth = MAX_DEPTH - 1
    (tmp_path / "ok.yaml").write_text("a: " + "[" * depth + "]" * depth + "\n", encoding="utf-8")
    assert isinstance(load_yaml(tmp_path / "ok.yaml", field="f"), dict)


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "bom.yaml").write_bytes(b"\xef\xbb\xbfname: demo\n")
    assert load_yaml(tmp_path / "bom.yaml", field="f") == {"name": "demo"}


def test_uri_checks_only_look(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks refuse what the libraries would refuse later, and create nothing while looking."""
    check_storage_url(f"sqlite:///{tmp_path}/o.db")
    check_storage_url("postgresql+psycopg://u@h/db")
    check_tracking_uri(f"sqlite:///{tmp_path}/m.db")
    check_tracking_uri("http://127.0.0.1:5000")
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    for folder in (str(tmp_path / "file-store"), (tmp_path / "file-store").as_uri(), "inf"):
        with pytest.raises(BadInputError, match="MLflow 3 refuses"):  # MLflow raises its own exception on these
            check_tracking_uri(folder)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    check_tracking_uri(str(tmp_path / "file-store"))
    for bad in ("sqlite:///relative/missing/dir/o.db", f"sqlite:///{tmp_path}/no/dir/o.db", "mongodb://h/db"):
        with pytest.raises(BadInputError, match="--storage"):
            check_storage_url(bad)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # about 30 s on 2 busy cores: MLflow's import and its SQLite schema migrations
def test_mlflow_filters_take_no_user_string(tmp_path: Path) -> None:
    """Model names with quotes and backslashes select exactly their own runs: nothing is pasted into a filter."""
    from mlflow import MlflowClient

    from recommender.releases.history import _parent_runs

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("recommender/x", artifact_location=(tmp_path / "a").as_uri())
    names = ["it's", "back\\slash", "x' or '1'='1", "plain"]
    for name in names:
        run = client.create_run(experiment, tags={"recommender.model": name})
        client.set_terminated(run.info.run_id, "FINISHED")
    for name in names:
        found = _parent_runs(uri, name)
        assert [r.data.tags["recommender.model"] for r in found] == [name]
    assert _parent_runs(uri, "' or 1=1 or '") == []
    assert len(_parent_runs(uri, None)) == len(names)


def test_schema_command_prints_the_schema_the_properties_draw_from(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`recommender schema` is the spec's JSON Schema, without the field the reader sets; every section is in it."""
    import json
    import sys

    from recommender.cli import main as cli
    from recommender.config.spec import spec_json_schema

    monkeypatch.setattr(sys, "argv", ["recommender", "schema"])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    printed = json.loads(capsys.readouterr().out)
    assert exit_info.value.code == 0 and printed == spec_json_schema()
    assert "spec_path" not in printed["properties"]
    assert set(printed["properties"]) == set(SearchSpec.model_fields) - {"spec_path"}
    assert set(printed["required"]) == {"name", "model", "use_case", "traffic", "sla", "space", "current"}
