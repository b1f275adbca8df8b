"""`decode_hardware`: a disaggregated candidate's decode pool on another GPU of the space, one more key of the
candidate and one conditional parameter of the study, validated like the other fields and named in the study."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from recommender.config.candidate import Candidate
from recommender.config.spec import load_spec
from recommender.errors import BadInputError
from recommender.serialization import from_data, to_data
from recommender.study.space import space_choices
from tests.conftest import DEMO_SPEC, write_spec

BOTH = {"space.layout": ["aggregated", "disaggregated"]}


def test_the_decode_gpu_is_part_of_the_key_and_naming_the_prefill_gpu_is_the_one_gpu_candidate() -> None:
    same = Candidate("bf16", "baseline", "h100-sxm", 64, layout="disaggregated")
    other = Candidate("bf16", "baseline", "h100-sxm", 64, layout="disaggregated", decode_hardware="h200")
    assert other.key == same.key + "/decode-h200" and other.key != same.key and other != same
    assert (other.decode_gpu, same.decode_gpu) == ("h200", "h100-sxm")
    spelled = Candidate("bf16", "baseline", "h100-sxm", 64, layout="disaggregated", decode_hardware="h100-sxm")
    assert spelled == same and spelled.key == same.key and spelled.decode_hardware == ""
    assert from_data(Candidate, to_data(other)) == other
    stored = {k: v for k, v in to_data(same).items() if k != "decode_hardware"}  # a result stored before the field
    assert from_data(Candidate, stored) == same


def test_a_decode_gpu_on_an_aggregated_candidate_is_refused_naming_the_fix() -> None:
    with pytest.raises(ValidationError, match="set layout: disaggregated or drop decode_hardware"):
        Candidate("bf16", "baseline", "h100-sxm", 64, decode_hardware="h200")


def test_decode_gpus_are_searched_over_a_network_link_and_name_a_new_study(tmp_path: Path) -> None:
    one_gpu = load_spec(write_spec(tmp_path / "one.yaml", BOTH | {"space.hardware": ["h100-sxm"]}))
    assert "decode_hardware" not in space_choices(one_gpu)  # one GPU: no parameter, the study as before
    plain = load_spec(write_spec(tmp_path / "p.yaml", BOTH | {"space.hardware": ["h100-sxm", "h200"]}))
    assert space_choices(plain)["decode_hardware"] == ["h100-sxm", "h200"]  # the default link, infiniband-ndr
    nvlink = load_spec(
        write_spec(tmp_path / "n.yaml", BOTH | {"space.hardware": ["h100-sxm", "h200"], "space.link": "nvlink"})
    )
    assert "decode_hardware" not in space_choices(nvlink)  # as `plan`: a node link pairs no two GPU types
    assert nvlink.fingerprint() != plain.fingerprint()
    listed = load_spec(
        write_spec(
            tmp_path / "l.yaml", BOTH | {"space.hardware": ["h100-sxm"], "space.decode_hardware": ["h200", "l40s"]}
        )
    )
    assert space_choices(listed)["decode_hardware"] == ["h200", "l40s"]  # as listed: no same-GPU pools for h100
    assert listed.fingerprint() != one_gpu.fingerprint()


def test_a_spec_that_searches_no_decode_gpu_keeps_its_study_name(tmp_path: Path) -> None:
    """The fingerprints main gave these specs before decode pools (e746a4d): one GPU, or two over NVLink (which
    pairs no two GPU types), search no decode GPU, so their studies resume. Paths relative to the spec's folder and
    a hub id keep the fingerprint the same in any checkout."""
    shutil.copy(DEMO_SPEC.parent / "use_case.yaml", tmp_path / "use_case.yaml")
    base = BOTH | {"use_case": "use_case.yaml", "model.source": "meta-llama/Llama-3.1-8B"}
    for extra, before in (
        ({"space.hardware": ["h100-sxm"]}, "aee635f50a"),
        ({"space.hardware": ["h100-sxm", "h200"], "space.link": "nvlink"}, "6e3f4a55de"),
    ):
        spec = load_spec(write_spec(tmp_path / "s.yaml", base | extra))
        assert "decode_hardware" not in space_choices(spec) and spec.fingerprint() == before


@pytest.mark.parametrize(
    ("changes", "field", "needles"),
    [
        (
            {"space.hardware": ["h100-sxm", "h200"], "space.decode_hardware": ["h200"], "space.link": "nvlink"},
            "space.link",
            ("nvlink cannot join a prefill pool on h100-sxm to a decode pool on h200", "use a network link"),
        ),
        (
            {"space.hardware": ["h100-sxm"], "space.decode_hardware": ["h300"]},
            "space.decode_hardware[0]",
            ("h300",),
        ),
        (
            {"space.hardware": ["h100-sxm"], "space.decode_hardware": ["local"]},
            "space.decode_hardware[0]",
            ("the local device is one replica",),
        ),
        (
            {"space.hardware": ["h100-sxm"], "space.decode_hardware": ["h200", "h200"]},
            "space.decode_hardware",
            ("listed twice",),
        ),
        (
            {"space.hardware": ["h100-sxm"], "space.decode_hardware": ["l40s"], "space.link": "nvlink"},
            "space.link",
            ("l40s has no nvlink",),
        ),
    ],
)
def test_bad_decode_gpus_are_one_line_naming_the_field_and_the_fix(
    tmp_path: Path, changes: dict[str, object], field: str, needles: tuple[str, ...]
) -> None:
    with pytest.raises(BadInputError) as info:
        load_spec(write_spec(tmp_path / "bad.yaml", BOTH | changes))
    line = str(info.value)
    assert "\n" not in line and info.value.field.endswith(field), line
    for needle in needles:
        assert needle in line, line


def test_decode_gpus_without_disaggregated_pools_are_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInputError) as info:
        load_spec(write_spec(tmp_path / "bad.yaml", {"space.decode_hardware": ["h200"]}))
    assert info.value.field.endswith("space.decode_hardware")
    assert "add disaggregated to space.layout" in str(info.value)
