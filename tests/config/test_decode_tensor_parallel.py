"""`decode_tensor_parallel`: a disaggregated candidate's decode pool at its own tensor-parallel degree, one more key of
the candidate and one conditional parameter of the study, validated like the other fields and named in the study."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from recommender.config.candidate import Candidate
from recommender.config.spec import load_spec
from recommender.errors import BadInputError
from recommender.serialization import from_data, to_data
from recommender.study.space import space_choices
from tests.conftest import DEMO_SPEC, REPO, write_spec

BOTH = {"space.layout": ["aggregated", "disaggregated"], "space.hardware": ["h100-sxm"]}


def test_the_decode_degree_is_part_of_the_key_and_naming_the_prefill_degree_is_the_one_degree_candidate() -> None:
    same = Candidate("bf16", "baseline", "h100-sxm", 64, 2, layout="disaggregated")
    wider = Candidate("bf16", "baseline", "h100-sxm", 64, 2, layout="disaggregated", decode_tensor_parallel=4)
    assert wider.key == same.key + "/decode-tp4" and wider != same
    assert (wider.decode_tp, same.decode_tp) == (4, 2)
    spelled = Candidate("bf16", "baseline", "h100-sxm", 64, 2, layout="disaggregated", decode_tensor_parallel=2)
    assert spelled == same and spelled.key == same.key and spelled.decode_tensor_parallel == 0
    both = Candidate(
        "bf16", "baseline", "h100-sxm", 64, 2, layout="disaggregated", decode_hardware="h200", decode_tensor_parallel=1
    )
    assert both.key.endswith("/disagg/decode-h200/decode-tp1")
    assert from_data(Candidate, to_data(wider)) == wider
    stored = {k: v for k, v in to_data(same).items() if k != "decode_tensor_parallel"}  # stored before the field
    assert from_data(Candidate, stored) == same


def test_a_decode_degree_on_an_aggregated_candidate_is_refused_naming_the_fix() -> None:
    with pytest.raises(ValidationError, match="set layout: disaggregated or drop decode_tensor_parallel"):
        Candidate("bf16", "baseline", "h100-sxm", 64, 1, decode_tensor_parallel=2)


def test_decode_degrees_are_the_spaces_degrees_or_the_listed_ones_and_name_a_new_study(tmp_path: Path) -> None:
    one = load_spec(write_spec(tmp_path / "one.yaml", BOTH))
    assert "decode_tensor_parallel" not in space_choices(one)  # one degree: no parameter, the study as before
    several = load_spec(write_spec(tmp_path / "s.yaml", BOTH | {"space.tensor_parallel": [1, 2, 4]}))
    assert space_choices(several)["decode_tensor_parallel"] == [1, 2, 4]
    aggregated = load_spec(write_spec(tmp_path / "a.yaml", {"space.tensor_parallel": [1, 2, 4]}))
    assert "decode_tensor_parallel" not in space_choices(aggregated)  # no disaggregated pools: nothing to pair
    listed = load_spec(write_spec(tmp_path / "l.yaml", BOTH | {"space.decode_tensor_parallel": [2, 8]}))
    assert space_choices(listed)["decode_tensor_parallel"] == [2, 8]
    assert len({one.fingerprint(), several.fingerprint(), listed.fingerprint()}) == 3


def test_a_spec_that_searches_no_decode_degree_keeps_its_study_name(tmp_path: Path) -> None:
    """The fingerprints main gave these specs before decode degrees (the ones tests/config/test_decode_hardware.py
    pins): one degree searched, with or without disaggregated pools, so their studies resume."""
    shutil.copy(DEMO_SPEC.parent / "use_case.yaml", tmp_path / "use_case.yaml")
    base = BOTH | {"use_case": "use_case.yaml", "model.source": "meta-llama/Llama-3.1-8B"}
    for extra, before in (
        ({"space.hardware": ["h100-sxm"]}, "aee635f50a"),
        ({"space.hardware": ["h100-sxm", "h200"], "space.link": "nvlink"}, "6e3f4a55de"),
    ):
        spec = load_spec(write_spec(tmp_path / "s.yaml", base | extra))
        assert "decode_tensor_parallel" not in space_choices(spec) and spec.fingerprint() == before


@pytest.mark.parametrize(
    ("changes", "field", "needles"),
    [
        (
            {"space.decode_tensor_parallel": [2, 16]},
            "space.decode_tensor_parallel[1]",
            ("TP16 is wider than any decode GPU's node", "h100-sxm 8", "list degrees up to 8"),
        ),
        ({"space.decode_tensor_parallel": [2, 2]}, "space.decode_tensor_parallel", ("listed twice",)),
        ({"space.decode_tensor_parallel": [0]}, "space.decode_tensor_parallel[0]", ("greater than 0",)),
        (
            {"space.layout": ["aggregated"], "space.decode_tensor_parallel": [2]},
            "space.decode_tensor_parallel",
            ("only for disaggregated candidates", "add disaggregated to space.layout"),
        ),
    ],
)
def test_bad_decode_degrees_are_one_line_naming_the_field_and_the_fix(
    tmp_path: Path, changes: dict[str, object], field: str, needles: tuple[str, ...]
) -> None:
    with pytest.raises(BadInputError) as info:
        load_spec(write_spec(tmp_path / "bad.yaml", BOTH | changes))
    line = str(info.value)
    assert "\n" not in line and info.value.field.endswith(field), line
    for needle in needles:
        assert needle in line, line


def test_the_cli_refuses_a_decode_degree_no_gpu_takes_in_one_line_with_exit_2(tmp_path: Path) -> None:
    spec = write_spec(tmp_path / "bad.yaml", BOTH | {"space.decode_tensor_parallel": [16]})
    before = set(tmp_path.rglob("*"))
    got = subprocess.run(
        [sys.executable, "-m", "recommender.cli.main", "search", str(spec)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    errors = [line for line in got.stderr.splitlines() if line.startswith("error:")]
    assert got.returncode == 2 and "Traceback" not in got.stderr and len(errors) == 1, got.stderr
    assert "space.decode_tensor_parallel[0]" in errors[0] and "list degrees up to 8" in errors[0]
    assert set(tmp_path.rglob("*")) == before  # nothing written beside the spec
