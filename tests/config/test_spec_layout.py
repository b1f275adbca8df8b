"""`space.layout` and `space.link`: the spec's words for `plan --layout/--link`, validated like the other fields,
and a spec that does not name them searching (and naming its study) exactly as before."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from recommender.cli import main as cli
from recommender.config.spec import load_spec
from recommender.errors import BadInputError
from recommender.perf.catalog.gpus import BUILTIN_CATALOG
from recommender.study.space import candidate_of, params_of, space_choices
from tests.conftest import DEMO_MODEL, write_spec, write_suite


def test_a_spec_without_layout_is_aggregated_and_keeps_its_study_name(tmp_path: Path) -> None:
    plain = load_spec(write_spec(tmp_path / "plain.yaml", {}))
    assert plain.space.layout == ["aggregated"] and plain.space.link == "infiniband-ndr"
    assert plain.current.layout == "aggregated" and "layout" not in space_choices(plain)
    spelled = load_spec(write_spec(tmp_path / "a.yaml", {"space.layout": ["aggregated"]}))
    assert spelled.fingerprint() == plain.fingerprint()
    ep_one = load_spec(write_spec(tmp_path / "e.yaml", {"space.expert_parallel": [1]}))
    assert ep_one.fingerprint() == plain.fingerprint()
    with pytest.raises(BadInputError, match="space.link: applies only with disaggregated"):  # read by nothing here
        load_spec(write_spec(tmp_path / "l.yaml", {"space.expert_parallel": [1], "space.link": "nvlink"}))
    assert "expert_parallel" not in space_choices(ep_one)
    ep = load_spec(write_spec(tmp_path / "ep.yaml", {"space.expert_parallel": [1, 8]}))
    assert ep.fingerprint() != plain.fingerprint() and space_choices(ep)["expert_parallel"] == [1, 8]
    both = load_spec(write_spec(tmp_path / "b.yaml", {"space.layout": ["aggregated", "disaggregated"]}))
    assert both.fingerprint() != plain.fingerprint()  # a new space is a new study
    assert space_choices(both)["layout"] == ["aggregated", "disaggregated"]


def test_a_disaggregated_trial_round_trips_through_its_parameters_and_key(tmp_path: Path) -> None:
    spec = load_spec(
        write_spec(tmp_path / "s.yaml", {"space.layout": ["disaggregated", "aggregated"], "space.link": "roce-400g"})
    )
    assert spec.space.link == "roce-400g"
    disagg = candidate_of(params_of(spec.current) | {"layout": "disaggregated"})
    assert disagg.layout == "disaggregated" and disagg.key == spec.current.key + "/disagg"
    stored = {k: v for k, v in params_of(spec.current).items() if k != "layout"}  # a study from before layouts
    assert candidate_of(stored).layout == "aggregated"


@pytest.mark.parametrize(
    ("changes", "needles"),
    [
        ({"space.layout": ["disaggregated", "split"]}, ("space.layout", "aggregated", "disaggregated")),
        ({"space.layout": ["disaggregated", "disaggregated"]}, ("space.layout", "listed twice")),
        ({"space.expert_parallel": [0]}, ("space.expert_parallel", "greater than 0")),
        ({"space.link": "infiniband-xdr"}, ("space.link", "unknown link 'infiniband-xdr'", "infiniband-ndr")),
        # An RTX 4090 has no NVLink: the KV cannot cross one between its pools.
        (
            {"space.layout": ["aggregated", "disaggregated"], "space.link": "nvlink"},
            ("space.link", "rtx-4090 has no nvlink", "use pcie or a network link"),
        ),
    ],
)
def test_bad_layouts_and_links_are_one_line_naming_the_field(
    tmp_path: Path, changes: dict[str, object], needles: tuple[str, ...]
) -> None:
    with pytest.raises(BadInputError) as info:
        load_spec(write_spec(tmp_path / "bad.yaml", changes))
    line = str(info.value)
    assert "\n" not in line
    for needle in needles:
        assert needle in line, line


def test_pools_that_cannot_hold_the_model_exit_2_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A GPU of 16 MiB holds none of the demo model's pool workers: refused naming space.layout, nothing written."""
    catalog = yaml.safe_load(BUILTIN_CATALOG.read_text(encoding="utf-8"))["accelerators"]
    tiny = {**catalog["h100-sxm"], "name": "Tiny", "memory_gb": 0.016, "memory_mib": 16, "price_per_hour_usd": 1.0}
    (tmp_path / "catalog.yaml").write_text(yaml.safe_dump({"accelerators": {"tiny": tiny}}), encoding="utf-8")
    spec = write_spec(
        tmp_path / "spec.yaml",
        {
            "model.source": str(DEMO_MODEL),
            "use_case": str(write_suite(tmp_path / "suite.yaml")),
            "hardware_catalog": str(tmp_path / "catalog.yaml"),
            "space.hardware": ["tiny"],
            "space.schemes": {"bf16": ["baseline"]},
            "space.layout": ["aggregated", "disaggregated"],
            "space.speculative": None,
            "speculation": None,
        },
    )
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    monkeypatch.setattr(sys, "argv", ["recommender", "search", str(spec), "--output-dir", str(tmp_path / "out")])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert exit_info.value.code == 2 and "Traceback" not in err and len(lines) == 1, err
    assert "space.layout" in lines[0] and "no disaggregated pool worker fits" in lines[0], lines[0]
    assert sorted(tmp_path.rglob("*")) == before
