"""ModelOpt schemes in the engines' rows, the plan and the launch commands (sources in each engine module).

The seeds' deployment: a 70B model on L40S (Ada, capability 8.9) served by TensorRT-LLM. TensorRT-LLM refuses
llm-compressor's FP8 there (its rowwise and block FP8 are Hopper-only, per-tensor groups are not read), so FP8 on
an L40S with TensorRT-LLM is ModelOpt's per-tensor checkpoint, launched as ``trtllm-serve <dir>``.
"""

from __future__ import annotations

import shlex

import pytest

from recommender.config.candidate import Candidate
from recommender.config.spec import LatencySLA, Traffic
from recommender.device import DeviceInfo
from recommender.engines.eligibility import eligibility
from recommender.fleet.launch import launch_commands
from recommender.fleet.plan import method_for, plan
from recommender.fleet.plan_request import PlanRequest
from recommender.fleet.plan_scope import PlanScope
from recommender.perf.catalog.architectures import read_architecture
from recommender.perf.catalog.gpus import load_catalog
from recommender.perf.model.shape import ModelShape
from recommender.quantize import get_scheme

ADA, HOPPER, BLACKWELL, AMPERE = (DeviceInfo("cuda", compute_capability=c) for c in ((8, 9), (9, 0), (10, 0), (8, 0)))


def _engines(name: str, device: DeviceInfo) -> tuple[str, ...]:
    return eligibility(get_scheme(name), device, ("vllm", "sglang", "tgi", "trtllm")).engines


@pytest.mark.parametrize(
    ("name", "device", "engines"),
    [
        ("modelopt-fp8", ADA, ("vllm", "sglang", "trtllm")),
        ("modelopt-fp8", AMPERE, ()),  # every engine's ModelOpt FP8 needs 8.9; no weight-only fallback is counted
        ("modelopt-nvfp4", HOPPER, ()),  # W4A4 on Blackwell only (vLLM would run it weight-only through Marlin)
        ("modelopt-nvfp4", BLACKWELL, ("vllm", "sglang", "trtllm")),
        ("modelopt-w4a16-awq", ADA, ("trtllm",)),  # vLLM's and SGLang's ModelOpt loaders have no W4A16_AWQ
        ("modelopt-w4a16-awq", AMPERE, ("trtllm",)),
        ("modelopt-w4a16-awq", BLACKWELL, ()),  # not in TensorRT-LLM's Blackwell column
        ("modelopt-fp8+kv-fp8", ADA, ("vllm", "sglang", "trtllm")),
    ],
)
def test_engines_launch_modelopt_schemes_where_their_loaders_run_them(
    name: str, device: DeviceInfo, engines: tuple[str, ...]
) -> None:
    assert _engines(name, device) == engines


def test_fp8_on_an_l40s_with_tensorrt_llm_is_the_modelopt_checkpoint() -> None:
    l40s = load_catalog().accelerators["l40s"].device
    assert method_for("fp8", l40s, ("trtllm",)).name == "modelopt-fp8"
    assert method_for("fp8", l40s, ("vllm", "sglang")).name == "fp8-dynamic"  # unchanged where it already ran
    refused = eligibility(get_scheme("fp8-dynamic"), l40s, ("trtllm",))
    assert not refused.launchable and "9.0" in refused.reason("l40s")


def test_each_engine_launches_the_exported_directory_with_its_own_flag() -> None:
    catalog = load_catalog()
    candidate = Candidate("fp8", "modelopt-fp8", "l40s", 64, 4)
    commands = {
        e.engine: e
        for e in launch_commands(
            candidate,
            model="meta-llama/Llama-3.1-70B",
            max_model_len=768,
            checkpoint="/ckpt/llama-70b-modelopt-fp8",
            device=catalog.get("l40s").device,
            engine="trtllm",
        )
    }
    trtllm = shlex.split(commands["trtllm"].command or "")
    assert trtllm[:2] == ["trtllm-serve", "/ckpt/llama-70b-modelopt-fp8"] and "--quantization" not in trtllm
    assert any("hf_quant_config.json" in note for note in commands["trtllm"].notes)
    vllm = shlex.split(commands["vllm"].command or "")
    assert vllm[:3] == ["vllm", "serve", "/ckpt/llama-70b-modelopt-fp8"]
    assert vllm[vllm.index("--quantization") + 1] == "modelopt"
    sglang = shlex.split(commands["sglang"].command or "")
    assert sglang[sglang.index("--quantization") + 1] == "modelopt"
    assert not commands["tgi"].supported


def test_plan_for_tensorrt_llm_on_l40s_projects_modelopt_fp8_with_its_launch() -> None:
    """What `recommender plan --model llama-3.1-70b --hardware l40s --engine trtllm --precision fp8` computes (with
    the 16-bit KV cache only: the FP8 one doubles the simulations and changes neither the scheme nor the launch)."""
    catalog = load_catalog()
    _, config = read_architecture("llama-3.1-70b")
    traffic = Traffic(prompt_tokens=512, output_tokens=256, requests_per_second=2.0)
    rows = plan(
        PlanRequest(
            shape=ModelShape.from_config(config),
            catalog=catalog,
            hardware=("l40s",),
            precisions=("fp8",),
            traffic=traffic,
            sla=LatencySLA(ttft_p99_ms=3000, tpot_p99_ms=100),
            scope=PlanScope(batch_sizes=(64,), kv_cache_dtypes=("auto",)),
            engines=("trtllm",),
            model="meta-llama/Llama-3.1-70B",
        )
    )
    (row,) = rows
    assert (row.method, row.engine) == ("modelopt-fp8", "trtllm"), row.note
    assert row.launch.startswith("trtllm-serve Llama-3.1-70B-modelopt-fp8 --backend pytorch")
