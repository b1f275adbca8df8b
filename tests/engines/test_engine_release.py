"""The engine release a prediction is for (`--engine-release`, a spec's ``engine_releases``): parsed in one place,
refused in one line, and what it changes (host time's release line, the fp8 KV read) said in the provenance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recommender.config.spec import load_spec
from recommender.engines.engine_release import check_release, engine_releases
from recommender.errors import BadInputError
from tests.conftest import run_cli_in_process, write_spec

ESTIMATE = (
    "estimate",
    *("--model", "llama-3.1-8b", "--hardware", "l4", "--precision", "fp8", "--engine", "trtllm"),
    *("--kv-cache-dtype", "fp8", "--concurrency", "16", "--prompt-tokens", "4000", "--output-tokens", "200", "--json"),
)


def test_releases_read_as_the_engines_print_them() -> None:
    for text in ("0.12", "0.12.0", "1.2.0rc3", "0.7.3.dev138+g21f6ca217", " 0.5.6 "):
        assert check_release(text, field="--engine-release") == text.strip()
    assert engine_releases(["vllm=0.12.0", "trtllm=1.0.0"]) == {"vllm": "0.12.0", "trtllm": "1.0.0"}


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (["vllm"], "names no engine"),
        (["=0.12"], "names no engine"),
        (["vlm=0.12"], "unknown engine 'vlm'"),
        (["vllm=0.12", "vllm=0.13"], "vllm given twice"),
        (["vllm=latest"], "vllm release 'latest' is not a version"),
    ],
)
def test_a_bad_pair_names_the_flag_and_the_fix(pairs: list[str], message: str) -> None:
    with pytest.raises(BadInputError, match=message) as raised:
        engine_releases(pairs)
    assert raised.value.field == "--engine-release" and raised.value.fix


def test_an_older_release_reads_the_fp8_cache_at_16_bit_cost_and_says_so() -> None:
    """On the datasheet path (an L4: no kernel tables), TensorRT-LLM 1.0's decode attention read an fp8 KV cache at
    16-bit cost (``engine_profiles``): a long-context decode is slower than on the current release, and the
    provenance names the release and that no host-time line of it is calibrated."""
    current = run_cli_in_process(*ESTIMATE)
    older = run_cli_in_process(*ESTIMATE, "--engine-release", "1.0.0")
    assert current.returncode == 0 and older.returncode == 0, (current.stderr, older.stderr)
    now, then = json.loads(current.stdout), json.loads(older.stdout)
    assert then["tpot_ms"]["mean"]["value"] > 1.1 * now["tpot_ms"]["mean"]["value"]
    assert "release 1.0.0 not calibrated" in then["provenance"]["detail"]
    assert "trtllm 1.0.0's decode attention reads the fp8 KV cache at 16-bit cost" in then["provenance"]["detail"]
    assert "release" not in now["provenance"]["detail"].split("no kernel tables for l4")[1].split(";")[1]


def test_estimate_refuses_a_release_that_is_no_version_in_one_line() -> None:
    run = run_cli_in_process(*ESTIMATE, "--engine-release", "banana")
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip().splitlines() == [
        "error: --engine-release: trtllm release 'banana' is not a version (fix: write it as the engine prints it, "
        "e.g. 0.12.0)"
    ]


def test_a_spec_names_releases_of_its_own_engines_only(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path / "ok.yaml", {"engine_releases": {"vllm": "0.12.0"}}))
    assert spec.engine_releases == {"vllm": "0.12.0"}
    plain = load_spec(write_spec(tmp_path / "plain.yaml", {}))
    assert spec.fingerprint() != plain.fingerprint()  # another release predicted: another study
    with pytest.raises(BadInputError, match="engine_releases names 'trtllm', which engines does not list"):
        load_spec(write_spec(tmp_path / "other.yaml", {"engine_releases": {"trtllm": "1.2.0"}}))
    with pytest.raises(BadInputError, match="release 'newest' is not a version"):
        load_spec(write_spec(tmp_path / "bad.yaml", {"engine_releases": {"vllm": "newest"}}))


PLAN = (
    "plan",
    *("--model", "llama-3.1-8b", "--hardware", "l4", "--precision", "fp8", "--kv-cache-dtype", "fp8"),
    *("--prompt-tokens", "4000", "--output-tokens", "200", "--rps", "2", "--json"),
)


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        (
            ("--engine", "trtllm", "--engine-release", "trtllm=1.0.0", "--layout", "disaggregated"),
            "error: --engine-release: applies only with the plain plan (the layout and expert-parallel comparisons "
            "price the current releases) (fix: drop --engine-release, or --layout disaggregated / --expert-parallel)",
        ),
        (
            ("--engine", "vllm", "--engine-release", "trtllm=1.0.0"),
            "error: --engine-release: trtllm is not planned (fix: add --engine trtllm)",
        ),
        (
            ("--engine-release", "vllm=0.12", "--engine-release", "vllm=0.13"),
            "error: --engine-release: vllm given twice (fix: give each engine's release once)",
        ),
    ],
)
def test_plan_refuses_a_release_it_would_not_use_in_one_line(extra: tuple[str, ...], line: str) -> None:
    run = run_cli_in_process(*PLAN, *extra)
    assert run.returncode == 2 and run.stdout == "" and run.stderr.strip().splitlines() == [line]


def test_plan_prices_the_release_asked_for_and_says_so() -> None:
    """The row's step cost is the release's: TensorRT-LLM 1.0's 16-bit fp8-cache read makes its decode slower."""
    now = run_cli_in_process(*PLAN, "--engine", "trtllm")
    then = run_cli_in_process(*PLAN, "--engine", "trtllm", "--engine-release", "trtllm=1.0.0")
    assert now.returncode == 0 and then.returncode == 0, (now.stderr, then.stderr)
    row_now, row_then = json.loads(now.stdout)[0], json.loads(then.stdout)[0]
    assert row_then["tpot_p99_ms"] > row_now["tpot_p99_ms"]
    assert "trtllm 1.0.0's decode attention reads the fp8 KV cache at 16-bit cost" in row_then["provenance"]["detail"]
    assert "1.0.0" not in row_now["provenance"]["detail"]
