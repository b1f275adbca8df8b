"""The spec is built once: paths taken from the spec's folder whatever the working directory, names
checked after the paths are resolved, the stored copy read back the same."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from recommender.cli import main as cli
from recommender.config.spec import SearchSpec, load_spec
from recommender.errors import BadInputError
from recommender.perf.catalog.gpus import BUILTIN_CATALOG
from recommender.study.prepare import portable_spec, prepare, spec_from_study
from recommender.study.space import grid, grid_size
from tests.conftest import DEMO_MODEL, DEMO_SPEC, write_spec, write_suite


def _spec_folder(tmp_path: Path, **changes: Any) -> Path:
    """A spec whose model, suite and catalog are all written relative to its own folder; its catalog adds
    an accelerator 'my-gpu' the built-in catalog lacks, and the space searches it."""
    folder = tmp_path / "specs"
    (folder / "suites").mkdir(parents=True)
    write_suite(folder / "suites" / "small.yaml")
    catalog = yaml.safe_load(BUILTIN_CATALOG.read_text(encoding="utf-8"))["accelerators"]
    mine = {**catalog["h100-sxm"], "name": "My GPU", "price_per_hour_usd": 1.23}
    (folder / "catalog.yaml").write_text(yaml.safe_dump({"accelerators": {"my-gpu": mine}}), encoding="utf-8")
    return write_spec(
        folder / "spec.yaml",
        {
            "model.source": os.path.relpath(DEMO_MODEL, folder),
            "use_case": "suites/small.yaml",
            "hardware_catalog": "catalog.yaml",
            "space.hardware": ["local", "my-gpu"],
            "local_device": {"price_per_hour_usd": 0.1, "price_source": "test"},  # the demo spec has none
            **changes,
        },
    )


def _elsewhere(tmp_path: Path) -> Path:
    other = tmp_path / "elsewhere"
    other.mkdir()
    return other


def test_relative_paths_come_from_the_spec_folder_in_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _spec_folder(tmp_path)
    monkeypatch.chdir(path.parent)
    here = load_spec(Path("spec.yaml"))
    monkeypatch.chdir(_elsewhere(tmp_path))
    there = load_spec(path)

    assert here == there and here.fingerprint() == there.fingerprint()
    assert there.spec_path == path.resolve()
    assert there.use_case == (path.parent / "suites" / "small.yaml").resolve()
    assert there.hardware_catalog == (path.parent / "catalog.yaml").resolve()
    assert there.model.source == str(DEMO_MODEL.resolve())


def test_prepare_reads_the_catalog_beside_the_spec_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _spec_folder(tmp_path)
    monkeypatch.chdir(_elsewhere(tmp_path))
    prepared = prepare(load_spec(path))
    assert prepared.catalog.get("my-gpu").price_per_hour_usd == 1.23
    assert prepared.source.is_local and prepared.source.location == str(DEMO_MODEL.resolve())
    assert prepared.use_case.suite_path == (path.parent / "suites" / "small.yaml").resolve()


def test_unknown_gpu_with_a_relative_catalog_is_one_line_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _spec_folder(tmp_path)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["space"]["hardware"] = ["local", "my-gpuu"]
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    monkeypatch.chdir(_elsewhere(tmp_path))
    monkeypatch.setattr(sys, "argv", ["recommender", "search", str(path)])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert exit_info.value.code == 2 and "Traceback" not in err and len(lines) == 1, err
    for needle in ("space.hardware[1]", "unknown accelerator 'my-gpuu'", "did you mean my-gpu"):
        assert needle in lines[0], lines[0]


def test_a_hub_id_stays_a_hub_id_unless_a_folder_of_that_name_is_beside_the_spec(tmp_path: Path) -> None:
    path = _spec_folder(tmp_path)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["model"]["source"] = "org/name"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert load_spec(path).model.source == "org/name"
    (path.parent / "org" / "name").mkdir(parents=True)
    assert load_spec(path).model.source == str((path.parent / "org" / "name").resolve())


def test_a_missing_model_folder_is_made_absolute_and_refused_by_prepare(tmp_path: Path) -> None:
    path = _spec_folder(tmp_path)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["model"]["source"] = "./no/such/dir"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    spec = load_spec(path)
    assert spec.model.source == str(path.parent.resolve() / "no" / "such" / "dir")
    with pytest.raises(BadInputError, match="model.source"):
        prepare(spec)


def test_the_study_copy_reads_back_as_the_same_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_spec(_spec_folder(tmp_path))
    study = optuna.create_study(directions=["minimize", "minimize"])
    study.set_user_attr("spec", portable_spec(spec, "the-study"))
    monkeypatch.chdir(_elsewhere(tmp_path))
    stored = spec_from_study(study, "the-study", "memory")
    assert stored.study_name == "the-study" and stored.fingerprint() == spec.fingerprint()
    assert stored.model_dump(exclude={"search"}) == spec.model_dump(exclude={"search"})
    assert stored.spec_path == spec.spec_path


def test_the_fingerprint_ignores_where_the_checkout_lives(tmp_path: Path) -> None:
    a, b = _spec_folder(tmp_path / "a"), _spec_folder(tmp_path / "b")
    assert load_spec(a).use_case != load_spec(b).use_case
    assert load_spec(a).fingerprint() == load_spec(b).fingerprint()


def test_timeout_override_is_validated_with_the_spec() -> None:
    spec = load_spec(DEMO_SPEC, timeout_s=5)
    assert spec.search.timeout_s == 5 and spec.fingerprint() == load_spec(DEMO_SPEC).fingerprint()


def test_spec_path_is_not_the_user_s_to_set(tmp_path: Path) -> None:
    path = _spec_folder(tmp_path, spec_path="/etc")
    with pytest.raises(BadInputError, match="spec_path: unknown key"):
        load_spec(path)


def test_grid_size_is_the_product_of_choice_counts() -> None:
    spec: SearchSpec = load_spec(DEMO_SPEC)
    assert grid_size(spec) == len(grid(spec)) == 5 * 4 * 2 * 2  # methods x GPUs x batch sizes x speculation


def test_engines_default_to_vllm_and_sglang_and_name_a_different_study(tmp_path: Path) -> None:
    default = load_spec(_spec_folder(tmp_path / "default"))
    assert default.engines == ["vllm", "sglang"]
    tgi = load_spec(_spec_folder(tmp_path / "tgi", engines=["tgi"]))
    assert tgi.engines == ["tgi"] and tgi.study_name != default.study_name


@pytest.mark.parametrize(
    ("engines", "words"),
    [
        (["vllm", "vlm"], ["engines", "unknown engine 'vlm'", "known engines: vllm, sglang, tgi"]),
        (["tgi", "vllm", "tgi"], ["engines", "tgi listed twice"]),
        ([], ["engines", "at least 1"]),
    ],
)
def test_engines_are_known_and_listed_once(tmp_path: Path, engines: list[str], words: list[str]) -> None:
    with pytest.raises(BadInputError) as caught:
        load_spec(_spec_folder(tmp_path, engines=engines))
    message = str(caught.value)
    assert "\n" not in message and all(word in message for word in words), message


def test_references_are_the_unquantized_scheme_on_every_gpu_at_its_largest_batch() -> None:
    from recommender.study.space import references

    spec: SearchSpec = load_spec(DEMO_SPEC)
    refs = references(spec)
    assert sorted(c.hardware for c in refs) == sorted(set(spec.space.hardware) | {spec.current.hardware})
    assert {c.method for c in refs} == {"baseline"} and {c.batch_size for c in refs} == {max(spec.space.batch_sizes)}
    assert all(c.kv_cache_dtype == "auto" for c in refs)
