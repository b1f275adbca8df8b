"""Settings that only apply beside another (issue 57): every entry of the one table, refused alone and let through
with what it needs, for `plan`'s flags and the spec's keys; every `plan` flag refused beside `--spec`.

The entries are enumerated from ``config/dependencies.py`` and the options from the command line itself, so a new
flag or a new requirement is covered without a new test (and a flag `plan --spec` would ignore must be listed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st

from recommender.cli.main import app
from recommender.config.dependencies import (
    FLAG_REQUIREMENTS,
    SPACE_REQUIREMENTS,
    SPEC_FLAG_EXCLUSIONS,
    PlanFlags,
    check_flags,
)
from recommender.config.spec import load_spec
from recommender.errors import BadInputError
from tests.cli.test_hostile_properties import run_cli
from tests.conftest import write_spec

#: A value each `plan` option takes (the flag alone for a switch); the test below fails for an option not listed.
SAMPLE: dict[str, list[str]] = {
    "--model": ["llama-3.1-8b"],
    "--spec": ["{spec}"],
    "--prompt-tokens": ["64"],
    "--output-tokens": ["64"],
    "--rps": ["4"],
    "--ttft-ms": ["900"],
    "--tpot-ms": ["40"],
    "--hardware": ["h100-sxm"],
    "--batch-size": ["64"],
    "--engine": ["vllm"],
    "--precision": ["fp8"],
    "--scheme": ["fp8-dynamic"],
    "--tensor-parallel": ["1"],
    "--kv-cache-dtype": ["auto"],
    "--engine-release": ["vllm=0.12.0"],
    "--price-set": ["runpod-secure"],
    "--layout": ["disaggregated"],
    "--link": ["pcie"],
    "--decode-hardware": ["h100-sxm"],
    "--expert-parallel": [],
    "--expert-skew": ["1"],
    "--redundant-experts": ["8"],
    "--routing": ["round-robin,prefix-aware"],
    "--json": [],
}


def _plan_options() -> list[str]:
    command = typer.main.get_command(app).commands["plan"]  # type: ignore[attr-defined]
    return [p.opts[0] for p in command.params if p.opts and p.opts[0].startswith("--") and p.name != "help"]


def test_every_plan_option_has_a_sample_value() -> None:
    assert set(_plan_options()) == set(SAMPLE)


def _error(args: list[str], cwd: Path) -> str:
    outcome = run_cli(args, cwd)
    assert outcome.code == 2 and outcome.out == "" and "Traceback" not in outcome.err, outcome.err
    assert outcome.written == set(), outcome.written
    [line] = [line for line in outcome.err.splitlines() if line.startswith("error:")]
    return line


@pytest.mark.parametrize("flag", sorted(set(SAMPLE) - SPEC_FLAG_EXCLUSIONS))
def test_every_flag_plan_spec_would_ignore_is_refused_beside_it(flag: str, tmp_path: Path) -> None:
    spec = str(write_spec(tmp_path / "spec.yaml"))
    line = _error(["plan", "--spec", spec, flag, *(v.replace("{spec}", spec) for v in SAMPLE[flag])], tmp_path)
    assert f"error: {flag}: ignored with --spec" in line, line


#: What makes a requirement unmet beyond its flag alone (a flag refused beside another, not without one).
UNMET_WITH: dict[str, list[str]] = {
    "--engine-release": ["--layout", "disaggregated"],
    "--routing": ["--layout", "disaggregated"],
}


@pytest.mark.parametrize("requirement", FLAG_REQUIREMENTS, ids=[r.setting for r in FLAG_REQUIREMENTS])
def test_every_flag_typed_without_what_it_needs_is_one_line_naming_both(requirement: Any, tmp_path: Path) -> None:
    args = ["plan", "--model", "qwen3-30b-a3b", "--hardware", "h100-sxm", *UNMET_WITH.get(requirement.setting, [])]
    line = _error([*args, requirement.setting, *SAMPLE[requirement.setting]], tmp_path)
    assert f"error: {requirement.setting}: applies only with" in line and "fix: " in line, line


@settings(max_examples=40, deadline=None)
@given(
    typed=st.sets(st.sampled_from(sorted(r.setting for r in FLAG_REQUIREMENTS))),
    layouts=st.sampled_from([(), ("aggregated",), ("disaggregated",), ("aggregated", "disaggregated")]),
    expert_parallel=st.booleans(),
)
def test_a_flag_is_refused_exactly_when_a_requirement_of_it_is_unmet(
    typed: set[str], layouts: tuple[str, ...], expert_parallel: bool
) -> None:
    flags = PlanFlags(frozenset(typed), layouts, expert_parallel)
    unmet = [r.setting for r in FLAG_REQUIREMENTS if r.setting in typed and not r.met(flags)]
    if unmet:
        with pytest.raises(BadInputError) as info:
            check_flags(flags)
        assert info.value.field == unmet[0]
    else:
        check_flags(flags)


#: An off-default value of each space key with a requirement, and the changes that meet it.
SPACE_VALUES: dict[str, tuple[Any, dict[str, Any]]] = {
    "space.redundant_experts": (8, {"space.expert_parallel": [1, 8]}),
    "space.expert_skew": (1.0, {"space.expert_parallel": [1, 8]}),
    "space.decode_hardware": (["h100-sxm"], {"space.layout": ["aggregated", "disaggregated"]}),
    "space.decode_tensor_parallel": ([1], {"space.layout": ["aggregated", "disaggregated"]}),
    "space.link": ("roce-400g", {"space.layout": ["aggregated", "disaggregated"]}),
}


def test_every_space_requirement_has_values_here() -> None:
    assert {r.setting for r in SPACE_REQUIREMENTS} == set(SPACE_VALUES)


@pytest.mark.parametrize("requirement", SPACE_REQUIREMENTS, ids=[r.setting for r in SPACE_REQUIREMENTS])
def test_every_space_key_given_without_what_it_needs_is_refused_and_with_it_read(
    requirement: Any, tmp_path: Path
) -> None:
    value, needed = SPACE_VALUES[requirement.setting]
    alone = write_spec(tmp_path / "alone.yaml", {requirement.setting: value})
    with pytest.raises(BadInputError) as info:
        load_spec(alone)
    assert info.value.field == f"{alone}: {requirement.setting}" and "applies only with" in info.value.problem
    load_spec(write_spec(tmp_path / "met.yaml", {requirement.setting: value, **needed}))  # the key is read: no refusal
