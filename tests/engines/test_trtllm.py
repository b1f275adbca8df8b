"""TensorRT-LLM's launch: `trtllm-serve` flags as tensorrt_llm/commands/serve.py spells them, the YAML only
when a setting has no flag, and refusals (schemes its PyTorch backend does not load as measured, non-NVIDIA
devices) that name the reason."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
import yaml

from recommender.config.spec import load_spec
from recommender.device import DeviceInfo
from recommender.engines import (
    ENGINE_NAMES,
    ENGINES_BY_NAME,
    SUPPORT,
    EngineLaunch,
    LaunchSettings,
    emit_all,
    get_engine,
    launch_flags,
)
from recommender.engines.eligibility import eligibility, refusal
from recommender.engines.kernels import Kernel
from recommender.engines.trtllm import EXTRA_OPTIONS_FILE, TrtllmEngine
from recommender.perf.catalog.gpus import load_catalog
from recommender.quantize import all_schemes, get_scheme
from tests.conftest import DEMO_MODEL, DEMO_SPEC, write_suite

MODEL = "/models/Llama 3.1 8B"
CHECKPOINT = "/ckpt/fp8-dynamic (sha 1a2b)"
CATALOG = load_catalog()
METHODS = all_schemes()


def device(gpu: str) -> DeviceInfo:
    return CATALOG.get(gpu).device


def settings(method: str = "baseline", **overrides: object) -> LaunchSettings:
    values: dict[str, object] = dict(
        model=MODEL,
        method=get_scheme(method),
        dtype="bfloat16",
        tensor_parallel=2,
        max_num_seqs=64,
        max_num_batched_tokens=8192,
        kv_cache_dtype="auto",
        gpu_memory_utilization=0.9,
        max_model_len=8192,
        port=8000,
        device=device("h100-sxm"),
    )
    values.update(overrides)
    return LaunchSettings(**values)  # type: ignore[arg-type]


def emit(method: str = "baseline", **overrides: object) -> EngineLaunch:
    return get_engine("trtllm").emit(settings(method, **overrides))


def flags(config: EngineLaunch, model: str = MODEL) -> dict[str, str]:
    """The ``--flag value`` pairs after ``trtllm-serve MODEL``; each flag once, each with a value."""
    assert config.argv is not None
    assert config.argv[:2] == ["trtllm-serve", model]
    rest = config.argv[2:]
    assert len(rest) % 2 == 0, rest
    pairs = list(zip(rest[::2], rest[1::2], strict=True))
    names = [name for name, _ in pairs]
    assert all(name.startswith("--") for name in names) and len(names) == len(set(names)), names
    return dict(pairs)


def test_the_16_bit_baseline_on_two_h100s() -> None:
    config = emit()
    assert config.engine == "trtllm" and config.supported and config.command is not None
    assert config.command.startswith("trtllm-serve ")
    assert shlex.quote(MODEL) in config.command and config.argv is not None and config.argv.count(MODEL) == 1
    assert flags(config) == {
        "--backend": "pytorch",
        "--tp_size": "2",
        "--max_batch_size": "64",
        "--max_num_tokens": "8192",
        "--max_seq_len": "8192",
        "--kv_cache_free_gpu_memory_fraction": "0.9",
        "--port": "8000",
    }
    # Nothing the flags cannot say: no YAML, no --extra_llm_api_options.
    assert config.config_yaml is None
    notes = " ".join(config.notes)
    assert "takes no dtype" in notes and "localhost" in notes and "after weights" in notes
    assert config.sources and all(
        source.startswith("https://github.com/NVIDIA/TensorRT-LLM/") for source in config.sources
    )


def test_fp8_kv_cache_and_chunked_prefill_go_to_the_extra_options_yaml() -> None:
    config = emit(kv_cache_dtype="fp8", max_num_batched_tokens=2048, gpu_memory_utilization=0.85)
    got = flags(config)
    assert got["--extra_llm_api_options"] == EXTRA_OPTIONS_FILE
    assert got["--max_num_tokens"] == "2048" and got["--kv_cache_free_gpu_memory_fraction"] == "0.85"
    assert config.config_yaml is not None
    # The YAML repeats the memory fraction: older releases replace the flag's kv_cache_config with the YAML's.
    assert yaml.safe_load(config.config_yaml) == {
        "kv_cache_config": {"free_gpu_memory_fraction": 0.85, "dtype": "fp8"},
        "enable_chunked_prefill": True,
    }
    notes = " ".join(config.notes)
    assert EXTRA_OPTIONS_FILE in notes and "enable_chunked_prefill" in notes and "free_gpu_memory_fraction" in notes
    only_kv = emit(kv_cache_dtype="fp8")
    assert yaml.safe_load(only_kv.config_yaml or "") == {
        "kv_cache_config": {"free_gpu_memory_fraction": 0.9, "dtype": "fp8"}
    }


def test_fp8_dynamic_checkpoint_runs_on_hopper_only() -> None:
    config = emit("fp8-dynamic", model=CHECKPOINT)
    assert config.supported
    got = flags(config, model=CHECKPOINT)
    assert "--quantization" not in got and "--quantize" not in got
    notes = " ".join(config.notes)
    assert "checkpoint directory" in notes and "FP8_PER_CHANNEL_PER_TOKEN" in notes and "Hopper only" in notes
    method = get_scheme("fp8-dynamic")
    assert refusal("trtllm", method, device("h200")) is None
    for gpu, why in (("l4", "needs 9.0"), ("a100-80gb", "needs 9.0"), ("b200", "runs only below 10.0")):
        refused = emit("fp8-dynamic", device=device(gpu))
        assert not refused.supported and refused.command is None, gpu
        assert "FP8 rowwise" in refused.notes[0] and why in refused.notes[0], refused.notes


@pytest.mark.parametrize(
    ("method", "words"),
    [
        ("int8-w8a8", ["FP8_PER_CHANNEL_PER_TOKEN", "quant_config_utils.py", "no INT8 W8A8 path"]),
        ("w4a16-gptq-g128", ["4-bit groups only as float", "quant_config_utils.py"]),
        ("w4a16-awq-g128", ["4-bit groups only as float", "ModelOpt"]),
        ("fp8-online", ["no in-flight quantization", "fp8-dynamic"]),
        ("bnb-nf4", ["no bitsandbytes path", "llm_utils.py"]),
        ("torchao-int4-wo-g128", ["no torchao path", "NotImplementedError"]),
    ],
)
def test_schemes_it_does_not_load_are_refused_with_the_reason(method: str, words: list[str]) -> None:
    config = emit(method)
    assert not config.supported and config.command is None and config.config_yaml is None
    (note,) = config.notes
    assert note.startswith(f"TensorRT-LLM has no scheme equivalent to {method} ")
    assert all(word in note for word in words), note


def test_amd_and_the_cpu_are_refused() -> None:
    mi300x = emit(device=device("mi300x"))
    assert not mi300x.supported and mi300x.command is None
    assert mi300x.notes == [
        "TensorRT-LLM does not serve baseline on AMD ROCm gfx942 as it was measured: "
        "TensorRT-LLM bf16 does not run on ROCm."
    ]
    for method in ("baseline", "fp16", "fp8-dynamic"):
        assert "does not run on ROCm" in (refusal("trtllm", get_scheme(method), device("mi300x")) or ""), method
        assert "does not run on the CPU" in (refusal("trtllm", get_scheme(method), DeviceInfo("cpu")) or ""), method


def test_16_bit_needs_ampere() -> None:
    assert refusal("trtllm", get_scheme("fp16"), device("t4")) == "TensorRT-LLM fp16 needs 8.0"
    assert refusal("trtllm", get_scheme("fp16"), device("a10g")) is None
    fp16 = emit("fp16", dtype="float16", device=device("a10g"))
    assert fp16.supported and "checkpoint saved in float16" in " ".join(fp16.notes)


def test_the_support_rows_are_exactly_the_schemes_with_a_flag() -> None:
    rows = {family for engine, family in SUPPORT if engine == "trtllm"}
    flagged = {m.kernel_family for m in METHODS.values() if launch_flags(m)["trtllm"] is not None}
    assert (
        rows
        == flagged
        == {"bf16", "fp16", "ct-fp8-w8a8", "ct-fp8-block", "ct-nvfp4", "mo-fp8", "mo-nvfp4", "mo-w4a16-awq"}
    )
    # trtllm-serve has no quantization flag
    assert all(launch_flags(m)["trtllm"] in (None, "") for m in METHODS.values())


def test_a_quantization_flag_is_refused_not_emitted() -> None:
    class Broken(TrtllmEngine):
        kernels = (Kernel("bf16", "TensorRT-LLM bf16", (8, 0), flag="fp8"),)

    with pytest.raises(ValueError, match="does not accept 'fp8'"):
        Broken().emit(settings())


def test_registered_as_an_engine_the_spec_and_the_search_accept(tmp_path: Path) -> None:
    assert "trtllm" in ENGINE_NAMES and isinstance(ENGINES_BY_NAME["trtllm"], TrtllmEngine)
    assert [c.engine for c in emit_all(settings())][-1] == "trtllm"
    assert eligibility(get_scheme("fp8-dynamic"), device("h100-sxm"), ("trtllm",)).engines == ("trtllm",)
    int8 = eligibility(get_scheme("int8-w8a8"), device("l4"), ("trtllm",))
    assert not int8.launchable and int8.reason("l4").startswith("no engine in engines: [trtllm] launches int8-w8a8")
    assert int8.fix.endswith("add vllm or sglang or tgi to engines")

    folder = tmp_path / "spec"
    (folder / "suites").mkdir(parents=True)
    write_suite(folder / "suites" / "small.yaml")
    data = yaml.safe_load(DEMO_SPEC.read_text(encoding="utf-8"))
    data["model"]["source"] = os.path.relpath(DEMO_MODEL, folder)
    data["use_case"] = "suites/small.yaml"
    data["engines"] = ["vllm", "trtllm"]
    (folder / "spec.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    assert load_spec(folder / "spec.yaml").engines == ["vllm", "trtllm"]
