"""A plan that can plan nothing is refused, one line and exit 2, whichever path reached it (issue 57); one with a
usable row stands. The paths are enumerated: the plain rows, the layouts' comparison, tensor against expert
parallelism, `plan --spec` (rows, and its layouts' comparison)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recommender.errors import BadInputError
from recommender.fleet.empty_plan import FLAG_FIELDS, refuse_empty_plan, spec_fields
from recommender.fleet.plan_row import PlanRow
from tests.cli.test_hostile_properties import run_cli
from tests.conftest import write_spec

#: Llama-3.1-70B in BF16 on two RTX 4090s: no degree tried holds one request (the issue's case).
TOO_BIG = ["--model", "llama-3.1-70b", "--hardware", "rtx-4090", "--precision", "bf16", "--engine", "vllm"]
TOO_BIG += ["--tensor-parallel", "2"]
#: TensorRT-LLM has no bnb-nf4 scheme: no engine of the plan launches it.
NO_ENGINE = ["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--engine", "trtllm", "--scheme", "bnb-nf4"]
PATHS = {"rows": [], "layouts": ["--layout", "disaggregated"]}


def _refused(args: list[str], tmp: Path) -> str:
    outcome = run_cli(["plan", *args], tmp, work=())  # the plan runs: the refusal is its answer
    assert outcome.code == 2 and outcome.out == "" and "Traceback" not in outcome.err, outcome.err
    assert outcome.written == set()
    [line] = [line for line in outcome.err.splitlines() if line.startswith("error:")]
    return line


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (TOO_BIG, ("error: --tensor-parallel: nothing planned", "rtx-4090/bf16: does not fit on 2 GPUs")),
        (NO_ENGINE, ("error: --engine: nothing planned", "trtllm: no bnb-nf4 scheme")),
    ],
    ids=["memory", "engine"],
)
def test_every_path_refuses_a_plan_with_nothing_usable_with_the_same_line(
    path: str, args: list[str], needles: tuple[str, ...], tmp_path: Path
) -> None:
    line = _refused([*args, *PATHS[path]], tmp_path)
    assert all(n in line for n in needles), line


def test_tensor_against_expert_parallelism_refuses_what_fits_neither(tmp_path: Path) -> None:
    args = ["--model", "qwen3-30b-a3b", "--hardware", "rtx-4090", "--precision", "bf16", "--engine", "vllm"]
    line = _refused([*args, "--tensor-parallel", "1", "--expert-parallel"], tmp_path)
    assert "nothing planned can serve the traffic" in line and "rtx-4090/bf16" in line, line


def test_plan_spec_refuses_a_space_with_nothing_usable_naming_its_key(tmp_path: Path) -> None:
    spec = write_spec(
        tmp_path / "spec.yaml",
        {"space.hardware": ["rtx-4090"], "space.schemes": {"bf16": ["baseline"]}, "space.batch_sizes": [64]},
    )
    line = _refused(["--spec", str(spec), "--model", "llama-3.1-70b"], tmp_path)
    assert f"error: {spec}: space.tensor_parallel: nothing planned" in line, line


def _empty(kind: str, gpu: str) -> PlanRow:
    return PlanRow(gpu, "bf16", "baseline", None, 1.0, None, "", "", f"{kind} reason", empty=kind)  # type: ignore[arg-type]


@given(kinds=st.lists(st.sampled_from(["engine", "memory", "degree"]), min_size=1, max_size=8))
def test_the_setting_named_is_the_most_common_reason_in_each_paths_words(kinds: list[str]) -> None:
    rows = [_empty(k, f"gpu{i}") for i, k in enumerate(kinds)]
    top = max(dict.fromkeys(kinds), key=lambda k: (kinds.count(k), k == kinds[0]))  # ties: the first met
    for fields in (FLAG_FIELDS, spec_fields("s.yaml: ")):
        with pytest.raises(BadInputError) as info:
            refuse_empty_plan(rows, fields=fields)
        assert info.value.field == fields.of(top)[0]  # type: ignore[arg-type]
        assert "\n" not in str(info.value) and rows[0].note in info.value.problem


def test_no_rows_at_all_is_not_this_refusal() -> None:
    refuse_empty_plan([], fields=FLAG_FIELDS)
