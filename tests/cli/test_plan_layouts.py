"""`recommender plan --layout aggregated --layout disaggregated` through the real CLI: both layouts side by side with
the winner and its reason; a layout or link it does not know is one line, exit 2, nothing printed on stdout (the
refusals run the entry point in process, `run_cli_in_process`; the plans a `python -m` subprocess end to end)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.conftest import REPO, run_cli_in_process

NARROW = (
    "plan",
    "--model",
    "llama-3.1-8b",
    "--hardware",
    "h100-sxm",
    "--precision",
    "fp8",
    "--engine",
    "vllm",
    "--tensor-parallel",
    "1",
    "--batch-size",
    "256",
    "--kv-cache-dtype",
    "auto",
    "--prompt-tokens",
    "128",
    "--output-tokens",
    "256",
    "--rps",
    "5",
    "--ttft-ms",
    "300",
    "--tpot-ms",
    "30",
)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "recommender.cli.main", *args], capture_output=True, text=True, cwd=REPO, timeout=300
    )


def test_plan_prints_both_layouts_with_the_winner_and_its_reason_as_json() -> None:
    result = _run(*NARROW, "--layout", "aggregated", "--layout", "disaggregated", "--link", "infiniband-ndr", "--json")
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)
    assert row["winner"] == "aggregated" and row["reason"].startswith("aggregated wins")
    assert row["disaggregated"]["link"] == "infiniband-ndr" and row["disaggregated"]["gpus"] == 2
    assert row["disaggregated"]["prefill"]["estimate"]["workers"] == 1
    assert row["aggregated"]["replicas"] == 1
    launch = row["disaggregated"]["launch"]  # the pools' commands serving the shipped model's hub id
    assert launch["engine"] == "vllm" and "kv_producer" in launch["prefill"] and "kv_consumer" in launch["decode"]
    assert "meta-llama/Llama-3.1-8B" in launch["prefill"] or "Llama-3.1-8B" in launch["prefill"]


@pytest.mark.parametrize(
    ("flags", "needles"),
    [
        (("--layout", "disaggregated", "--link", "carrier-pigeon"), ("--link", "unknown link", "infiniband-ndr")),
        (("--layout", "sideways"), ("--layout", "unknown layout", "disaggregated")),
        (("--layout", "disaggregated", "--layout", "disaggregated"), ("--layout", "given twice")),
        # a prefill pool on H100 SXM and a decode pool on H200 are never in one NVLink domain
        (
            ("--layout", "disaggregated", "--decode-hardware", "h200", "--link", "nvlink"),
            ("--link", "two GPU types", "infiniband-ndr"),
        ),
        (
            (
                "--decode-hardware",
                "h200",
            ),
            ("--decode-hardware", "--layout disaggregated"),
        ),
        (
            ("--layout", "disaggregated", "--decode-hardware", "hal-9000"),
            ("--decode-hardware", "hal-9000"),
        ),
    ],
)
def test_an_unknown_layout_or_link_is_one_line_and_exit_2(flags: tuple[str, ...], needles: tuple[str, ...]) -> None:
    result = run_cli_in_process(*NARROW, *flags)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert all(n in line for n in needles), line


@pytest.mark.parametrize(
    ("flags", "needles"),
    [
        (("--model", "llama-3.1-8b", "--expert-parallel"), ("--expert-parallel", "mixture-of-experts")),
        (
            ("--model", "deepseek-v3", "--expert-parallel", "--tensor-parallel", "8", "--redundant-experts", "3"),
            ("--tensor-parallel", "do not split 259 experts"),
        ),
        # the same refusals where the pools of --layout disaggregated would take expert-parallel workers
        (
            ("--model", "llama-3.1-8b", "--expert-parallel", "--layout", "disaggregated"),
            ("--expert-parallel", "mixture-of-experts"),
        ),
        (
            ("--model", "qwen3-30b-a3b", "--expert-parallel", "--layout", "disaggregated", "--tensor-parallel", "8")
            + ("--redundant-experts", "3"),
            ("--tensor-parallel", "do not split 131 experts"),
        ),
        # 671B parameters in FP8 fit no pool worker of two H200s, tensor- or expert-parallel
        (
            ("--model", "deepseek-v3", "--expert-parallel", "--layout", "disaggregated", "--tensor-parallel", "2")
            + ("--engine", "sglang", "--batch-size", "64", "--kv-cache-dtype", "auto"),
            ("--tensor-parallel", "holds one", "h200"),
        ),
    ],
)
def test_expert_parallelism_for_a_dense_model_or_an_uneven_expert_split_is_one_line_and_exit_2(
    flags: tuple[str, ...], needles: tuple[str, ...]
) -> None:
    result = run_cli_in_process("plan", "--hardware", "h200", "--precision", "fp8", *flags)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert all(n in line for n in needles), line


EP_NARROW = (
    "plan",
    "--model",
    "deepseek-v3",
    "--expert-parallel",
    "--hardware",
    "h200",
    "--precision",
    "fp8",
    "--engine",
    "sglang",
    "--tensor-parallel",
    "8",
    "--batch-size",
    "64",
    "--kv-cache-dtype",
    "auto",
    "--prompt-tokens",
    "512",
    "--output-tokens",
    "128",
    "--rps",
    "5",
    "--ttft-ms",
    "2000",
    "--tpot-ms",
    "50",
)


def test_plan_expert_parallel_gives_the_ep_row_its_expert_parallel_launch_in_json() -> None:
    result = _run(*EP_NARROW, "--json")
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)
    ep = row["expert_parallel"]
    assert ep["engine"] == "sglang" and ep["ep"] == 8 and ep["attention_dp"] == 8
    launch = ep["launch"]  # the field plan rows call `launch`, serving the checkpoint `quantize --out` writes
    assert launch.startswith("python -m sglang.launch_server --model-path DeepSeek-V3-fp8-dynamic ")
    for flag in ("--tp-size 8", "--ep-size 8", "--dp-size 8", "--enable-dp-attention", "--max-running-requests 512"):
        assert flag in launch, launch
    # Dynamo's file deploys the row's replicas of that command; llm-d has no aggregated SGLang wide-EP guide
    files = {d["engine"].split(" ")[0]: d for d in ep["deployments"]}
    worker = yaml.safe_load(files["Dynamo"]["config_yaml"])["spec"]["services"]["decode"]
    assert worker["replicas"] == ep["replicas"] and worker["resources"]["limits"]["gpu"] == "8"
    args = worker["extraPodSpec"]["mainContainer"]["args"]
    assert args[args.index("--ep-size") + 1] == "8" and args[args.index("--dp-size") + 1] == "8"
    assert not files["llm-d"]["supported"] and files["llm-d"]["config_yaml"] is None


def test_plan_disaggregated_with_expert_parallel_gives_ep_pools_with_their_flags_in_json() -> None:
    flags = ("--model", "qwen3-30b-a3b", "--hardware", "h100-sxm", "--precision", "fp8", "--engine", "sglang")
    flags += ("--tensor-parallel", "8", "--batch-size", "64", "--kv-cache-dtype", "auto", "--prompt-tokens", "512")
    flags += ("--output-tokens", "128", "--rps", "5", "--ttft-ms", "2000", "--tpot-ms", "50")
    result = _run(
        "plan", *flags, "--layout", "disaggregated", "--expert-parallel", "--redundant-experts", "8", "--json"
    )
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)
    decode = row["disaggregated"]["decode"]
    assert (decode["expert_parallel"], decode["attention_dp"], decode["redundant_experts"]) == (8, 8, 8)
    launch = row["disaggregated"]["launch"]["decode"]
    for flag in (
        "--ep-size 8",
        "--enable-dp-attention",
        "--ep-num-redundant-experts 8",
        "--disaggregation-mode decode",
    ):
        assert flag in launch, launch
    assert "EP8" in row["reason"]
