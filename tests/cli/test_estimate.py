"""`recommender estimate` through the real CLI: every figure with its interval, bad input in one line, a warm-up
left out as the client did."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import run_cli_in_process


def _estimate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "recommender.cli.main", "estimate", *args], capture_output=True, text=True, timeout=300
    )


def test_estimate_json_has_every_figure_with_an_interval() -> None:
    run = _estimate(
        "--model",
        "qwen3-32b",
        "--hardware",
        "h200",
        "--precision",
        "fp8",
        "--concurrency",
        "32",
        "--prompt-tokens",
        "2048",
        "--output-tokens",
        "256",
        "--engine",
        "sglang",
        "--json",
    )
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    for metric in ("ttft_ms", "tpot_ms"):
        for stat in ("mean", "p50", "p90", "p99"):
            figure = doc[metric][stat]
            assert figure["interval"]["low"] <= figure["value"] <= figure["interval"]["high"]
    assert doc["output_tokens_per_s"]["value"] > 0 and doc["kv_cache_tokens"] > 0
    assert doc["provenance"]["kind"] == "calibrated" and "h200" in doc["provenance"]["detail"]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--precision", "fp8", "--hardware", "a100-80gb"], "--scheme"),
        (["--precision", "fp8", "--hardware", "a100-80gb", "--engine", "trtllm"], "--scheme"),
        (["--precision", "fp7", "--hardware", "h100-sxm"], "--precision"),
        (["--precision", "bf16", "--hardware", "h100-sxm", "--engine", "llamacpp"], "--engine"),
        (["--precision", "bf16", "--hardware", "l4"], "--tensor-parallel"),
        (["--precision", "fp8", "--hardware", "h100-sxm", "--kv-cache-dtype", "fp4"], "--kv-cache-dtype"),
        (["--precision", "bf16", "--hardware", "h100-sxm", "--rounds", "4", "--warmup-rounds", "4"], "--warmup-rounds"),
    ],
)
def test_estimate_refuses_bad_input_in_one_line(args: list[str], field: str) -> None:
    # In process: a refusal needs no second import of the package (the answers here run `python -m`).
    common = ("--model", "qwen3-32b", "--concurrency", "8", "--prompt-tokens", "128", "--output-tokens", "16")
    run = run_cli_in_process("estimate", *common, *args)
    assert run.returncode == 2
    assert run.stderr.count("error:") == 1 and field in run.stderr and "Traceback" not in run.stderr


def test_estimate_leaves_a_warm_up_out_as_the_client_did() -> None:
    """32 prompts of 4,000 tokens at once: the opening burst queues them (16 steps of 8,192 tokens); a client that
    drops its first half measures the steady state, where one prompt arrives as one request finishes."""
    base = (
        "--model",
        "qwen3-32b",
        "--hardware",
        "h100-sxm",
        "--precision",
        "fp8",
        "--tensor-parallel",
        "2",
        "--concurrency",
        "32",
        "--prompt-tokens",
        "4000",
        "--output-tokens",
        "500",
        "--engine",
        "trtllm",
        "--json",
    )
    burst, steady = (json.loads(_estimate(*base, *extra).stdout) for extra in ((), ("--warmup-rounds", "4")))
    assert steady["ttft_ms"]["mean"]["value"] < 0.7 * burst["ttft_ms"]["mean"]["value"]
    assert "warm-up" in steady["provenance"]["detail"] and "burst counted" in burst["provenance"]["detail"]
