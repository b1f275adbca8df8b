"""Serving commands of every engine: every method x engine, real flag names, exact values, honest refusals."""

from __future__ import annotations

import dataclasses
import shlex

import pytest
import yaml

from recommender.config.candidate import Candidate
from recommender.device import DeviceInfo
from recommender.engines import (
    ENGINE_NAMES,
    ENGINES_BY_NAME,
    EngineLaunch,
    LaunchSettings,
    emit_all,
    evaluation_only,
    get_engine,
    launch_flags,
)
from recommender.errors import BadInputError
from recommender.fleet.launch import launch_commands
from recommender.perf.catalog.gpus import load_catalog
from recommender.quantize import QuantScheme, all_schemes
from recommender.quantize.bitsandbytes import BitsAndBytesScheme

MODEL = "/models/My Model v2"
METHODS = all_schemes()
PAIRS = [(method, engine) for method in sorted(METHODS) for engine in ENGINES_BY_NAME]
SUPPORTED_PAIRS = [(m, e) for m, e in PAIRS if launch_flags(METHODS[m])[e] is not None]
VLLM_METHODS = [m for m in sorted(METHODS) if launch_flags(METHODS[m])["vllm"] is not None]

#: The program prefix each engine's command starts with (the model follows its own flag).
PREFIX = {
    "vllm": ["vllm", "serve", MODEL],
    "sglang": ["python", "-m", "sglang.launch_server", "--model-path", MODEL],
    "tgi": ["text-generation-launcher", "--model-id", MODEL],
    "trtllm": ["trtllm-serve", MODEL],
}
#: The option that carries the method's flag.
QUANT_OPTION = {"vllm": "--quantization", "sglang": "--quantization", "tgi": "--quantize", "trtllm": "--quantization"}
#: The settings below under each engine's real flag names (vllm arg_utils.py, sglang server_args.py,
#: TGI launcher main.rs, TensorRT-LLM commands/serve.py).
EXPECTED_OPTIONS = {
    "vllm": {
        "--dtype": "bfloat16",
        "--kv-cache-dtype": "fp8",
        "--max-num-seqs": "48",
        "--max-num-batched-tokens": "3072",
        "--tensor-parallel-size": "2",
        "--gpu-memory-utilization": "0.85",
        "--max-model-len": "8192",
        "--port": "8123",
    },
    "sglang": {
        "--dtype": "bfloat16",
        "--kv-cache-dtype": "fp8_e4m3",
        "--tp-size": "2",
        "--max-running-requests": "48",
        "--chunked-prefill-size": "3072",
        "--max-prefill-tokens": "3072",
        "--mem-fraction-static": "0.85",
        "--context-length": "8192",
        "--port": "8123",
    },
    "tgi": {
        "--num-shard": "2",
        "--max-concurrent-requests": "128",
        "--max-batch-size": "48",
        "--max-batch-prefill-tokens": "3072",
        "--max-input-tokens": "8191",
        "--max-total-tokens": "8192",
        "--cuda-memory-fraction": "0.85",
        "--kv-cache-dtype": "fp8_e4m3fn",
        "--port": "8123",
    },
    "trtllm": {
        "--backend": "pytorch",
        "--tp_size": "2",
        "--max_batch_size": "48",
        "--max_num_tokens": "3072",
        "--max_seq_len": "8192",
        "--kv_cache_free_gpu_memory_fraction": "0.85",
        "--port": "8123",
        "--extra_llm_api_options": "extra_llm_api_options.yaml",
    },
}
#: The verified support matrix (each engine's KERNELS in recommender/engines/): True = the engine serves it as measured.
#: Columns: vLLM, SGLang, TGI, TensorRT-LLM (trtllm loads compressed-tensors only as FP8; no bitsandbytes, torchao,
#: online fp8).
SUPPORT = {
    "baseline": (True, True, True, True),
    "fp16": (True, True, True, True),
    "fp8-dynamic": (True, True, True, True),
    "int8-w8a8": (True, True, True, False),
    "w4a16-gptq-g128": (True, True, True, False),
    "w4a16-awq-g128": (True, True, False, False),  # TGI's GPTQ-Marlin takes zero points only from AWQ checkpoints
    "w4a16-rtn-g128": (True, True, True, False),
    "fp8-online": (True, False, False, False),  # SGLang's online fp8 scales weights per channel, TGI's per GPU
    "bnb-llm-int8": (False, False, True, False),
    "bnb-nf4": (True, True, True, False),
    "bnb-fp4": (False, False, True, False),
    "torchao-float8-wo": (False, False, False, False),
    "torchao-float8-dynamic": (False, False, False, False),
    "torchao-int8-wo": (False, False, False, False),
    "torchao-int8-dynamic": (False, False, False, False),
    "torchao-int4-wo-g32": (False, False, False, False),
    "torchao-int4-wo-g64": (False, False, False, False),
    "torchao-int4-wo-g128": (False, False, False, False),
    # compressed-tensors FP8 and FP4 presets (sources in each engine module's docstring, tests/engines/test_fp4_rows.py)
    "fp8-tensor": (True, True, False, False),  # TensorRT-LLM's reader raises on per-tensor FP8 groups
    "fp8-block": (True, True, False, True),  # TGI's FP8 loader reshapes every weight scale per output row
    "nvfp4": (True, True, False, True),
    "nvfp4a16": (True, False, False, False),  # FP4 Marlin in vLLM; SGLang's and TensorRT-LLM's readers lack it
    "mxfp4": (True, False, False, False),  # TensorRT-LLM reads MXFP4 weight-only; SGLang has no dense MXFP4
    # ModelOpt checkpoints (tests/engines/test_modelopt_rows.py): no TGI path; vLLM and SGLang have no W4A16_AWQ
    "modelopt-fp8": (True, True, False, True),
    "modelopt-nvfp4": (True, True, False, True),
    "modelopt-w4a16-awq": (False, False, False, True),
    # AMD Quark FP8 (tests/engines/test_quark_rows.py): vLLM's QuarkConfig only
    "quark-fp8": (True, False, False, False),
}
CHECKPOINT = "/ckpt/w8a8 int8 (sha 1a2b)"


def settings(method: QuantScheme, **overrides: object) -> LaunchSettings:
    values: dict[str, object] = dict(
        model=MODEL,
        method=method,
        dtype="bfloat16",
        tensor_parallel=2,
        max_num_seqs=48,
        max_num_batched_tokens=3072,
        kv_cache_dtype="fp8",
        gpu_memory_utilization=0.85,
        max_model_len=8192,
        port=8123,
    )
    values.update(overrides)
    return LaunchSettings(**values)  # type: ignore[arg-type]


def emit(method_name: str, engine: str, **overrides: object) -> EngineLaunch:
    return get_engine(engine).emit(settings(METHODS[method_name], **overrides))


def options(argv: list[str], prefix: list[str]) -> dict[str, str]:
    """The ``--flag value`` pairs after the program prefix; every flag appears once and takes a value."""
    assert argv[: len(prefix)] == prefix
    rest = argv[len(prefix) :]
    assert len(rest) % 2 == 0, rest
    pairs = list(zip(rest[::2], rest[1::2], strict=True))
    flags = [flag for flag, _ in pairs]
    assert all(flag.startswith("--") for flag in flags), flags
    assert len(flags) == len(set(flags)), flags
    return dict(pairs)


@pytest.mark.parametrize(("method_name", "engine"), PAIRS)
def test_supported_exactly_when_the_engine_has_a_flag(method_name: str, engine: str) -> None:
    method = METHODS[method_name]
    flag = launch_flags(method)[engine]
    config = emit(method_name, engine)
    assert config.engine == engine
    assert config.supported is (flag is not None)
    assert config.sources and all(source.startswith("https://") for source in config.sources)
    if flag is None:
        label = ENGINES_BY_NAME[engine].label
        assert config.command is None and config.argv is None and config.config_yaml is None
        assert config.notes[0].startswith(f"{label} has no scheme equivalent to {method_name} ")
        assert method.description in config.notes[0]


@pytest.mark.parametrize(("method_name", "engine"), SUPPORTED_PAIRS)
def test_command_carries_every_setting_under_the_engines_flag_names(method_name: str, engine: str) -> None:
    flag = launch_flags(METHODS[method_name])[engine]
    config = emit(method_name, engine)
    assert config.command is not None
    argv = shlex.split(config.command)
    assert argv == config.argv
    got = options(argv, PREFIX[engine])
    expected = dict(EXPECTED_OPTIONS[engine])
    if flag:
        expected[QUANT_OPTION[engine]] = flag
    if engine == "sglang" and flag == "bitsandbytes":
        expected["--load-format"] = "bitsandbytes"
    if engine == "tgi" and not flag:
        expected["--dtype"] = "bfloat16"  # TGI refuses --dtype together with --quantize
    assert got == expected


@pytest.mark.parametrize("engine", list(ENGINES_BY_NAME))
def test_model_path_with_spaces_is_one_quoted_argument(engine: str) -> None:
    config = emit("bnb-nf4" if launch_flags(METHODS["bnb-nf4"])[engine] is not None else "baseline", engine)
    assert config.command is not None
    assert shlex.quote(MODEL) == "'/models/My Model v2'"
    assert "'/models/My Model v2'" in config.command
    assert config.argv is not None and config.argv.count(MODEL) == 1


def test_shell_metacharacters_in_the_model_stay_inert() -> None:
    model = "/tmp/a b; rm -rf ~ $(x)"
    config = get_engine("vllm").emit(settings(METHODS["baseline"], model=model))
    assert config.argv is not None and config.argv[:3] == ["vllm", "serve", model]


@pytest.mark.parametrize("method_name", VLLM_METHODS)
def test_vllm_yaml_holds_the_same_settings_as_the_command(method_name: str) -> None:
    flag = launch_flags(METHODS[method_name])["vllm"]
    config = emit(method_name, "vllm")
    assert config.config_yaml is not None
    document = yaml.safe_load(config.config_yaml)
    expected: dict[str, object] = {"model": MODEL}
    if flag:
        expected["quantization"] = flag
    expected |= {
        "dtype": "bfloat16",
        "kv-cache-dtype": "fp8",
        "max-num-seqs": 48,
        "max-num-batched-tokens": 3072,
        "tensor-parallel-size": 2,
        "gpu-memory-utilization": 0.85,
        "max-model-len": 8192,
        "port": 8123,
    }
    assert document == expected
    assert config.argv is not None
    command_options = options(config.argv, PREFIX["vllm"])
    assert {f"--{key}" for key in document if key != "model"} == set(command_options)


def test_auto_kv_cache_maps_to_each_engines_default() -> None:
    assert options(emit("baseline", "vllm", kv_cache_dtype="auto").argv or [], PREFIX["vllm"])["--kv-cache-dtype"] == (
        "auto"
    )
    sglang = options(emit("baseline", "sglang", kv_cache_dtype="auto").argv or [], PREFIX["sglang"])
    assert sglang["--kv-cache-dtype"] == "auto"
    tgi = emit("baseline", "tgi", kv_cache_dtype="auto")
    assert "--kv-cache-dtype" not in options(tgi.argv or [], PREFIX["tgi"])
    assert not any("fp8_e4m3fn" in note for note in tgi.notes)


def test_support_matrix_matches_the_verified_engine_flags() -> None:
    assert set(SUPPORT) == set(METHODS)
    for name, expected in SUPPORT.items():
        got = tuple(config.supported for config in emit_all(settings(METHODS[name])))
        assert got == expected, name
        assert evaluation_only(METHODS[name]) is (not any(expected)), name


def test_engine_flag_values_are_the_verified_ones() -> None:
    assert launch_flags(METHODS["bnb-nf4"]) == {
        "vllm": "bitsandbytes",
        "sglang": "bitsandbytes",
        "tgi": "bitsandbytes-nf4",
        "trtllm": None,
    }
    assert METHODS["bnb-nf4"].kernel_family == "bnb-nf4"
    int8 = {"vllm": None, "sglang": None, "tgi": "bitsandbytes", "trtllm": None}
    assert launch_flags(METHODS["bnb-llm-int8"]) == int8
    assert launch_flags(METHODS["fp8-online"]) == {"vllm": "fp8", "sglang": None, "tgi": None, "trtllm": None}
    # Checkpoints carry their scheme in config.json: no engine gets a quantization flag for them.
    for name in ("fp8-dynamic", "int8-w8a8", "w4a16-gptq-g128", "w4a16-awq-g128", "w4a16-rtn-g128"):
        assert METHODS[name].checkpoint_format == "compressed-tensors"
        assert {flag for flag in launch_flags(METHODS[name]).values() if flag is not None} == {""}, name
    for name in (n for n in METHODS if n.startswith("torchao-")):
        assert METHODS[name].kernel_family == "" and evaluation_only(METHODS[name]), name


def test_unsupported_notes_point_to_the_real_alternative() -> None:
    (vllm_int8,) = emit("bnb-llm-int8", "vllm").notes
    assert "4-bit NF4" in vllm_int8 and "pre-quantized" in vllm_int8
    (sglang_int4,) = emit("torchao-int4-wo-g128", "sglang").notes
    assert "--torchao-config" in sglang_int4 and "#34304" in sglang_int4 and "GPTQ or AWQ" in sglang_int4
    (tgi_int4,) = emit("w4a16-awq-g128", "tgi").notes
    assert "bitsandbytes-nf4" in tgi_int4 and "gptq" in tgi_int4
    (tgi_torchao,) = emit("torchao-int8-wo", "tgi").notes
    assert "eetq" in tgi_torchao and "fp16" in tgi_torchao


def test_fp8_online_is_vllms_quantization_fp8_on_the_original_model() -> None:
    config = emit("fp8-online", "vllm")
    got = options(config.argv or [], PREFIX["vllm"])
    assert got["--quantization"] == "fp8" and got["--dtype"] == "bfloat16"
    notes = " ".join(config.notes)
    assert "Marlin" in notes and "8.9" in notes and "16-bit shard" in notes
    assert "per token" in notes


@pytest.mark.parametrize("engine", list(ENGINES_BY_NAME))
def test_checkpoint_scheme_serves_the_checkpoint_without_a_quantization_flag(engine: str) -> None:
    scheme = "int8-w8a8" if launch_flags(METHODS["int8-w8a8"])[engine] is not None else "fp8-dynamic"
    config = emit(scheme, engine, model=CHECKPOINT)
    assert config.supported and config.argv is not None
    got = options(config.argv, [*PREFIX[engine][:-1], CHECKPOINT])
    assert QUANT_OPTION[engine] not in got and "torchao" not in (config.command or "")
    assert config.argv.count(CHECKPOINT) == 1
    assert any("checkpoint directory" in note and "config.json" in note for note in config.notes)


def test_bitsandbytes_notes_name_the_in_flight_format_and_double_quantization() -> None:
    nf4 = METHODS["bnb-nf4"]
    assert isinstance(nf4, BitsAndBytesScheme)
    # bnb-nf4 is scored with double-quantized absmax statistics, as the engines quantize it: no mismatch to note.
    single = tuple(kv for kv in nf4.config if kv[0] != "bnb_4bit_use_double_quant")
    plain = dataclasses.replace(nf4, name="nf4-plain", config=single)
    for engine in ("vllm", "sglang", "tgi"):
        assert not any("compress_statistics" in note for note in emit("bnb-nf4", engine).notes), engine
        notes = " ".join(get_engine(engine).emit(settings(plain)).notes)
        assert "compress_statistics=True" in notes and "nf4-plain was evaluated with plain fp32 absmax" in notes, engine
    assert "NF4" in " ".join(emit("bnb-nf4", "vllm").notes)
    assert "deprecated" in " ".join(emit("bnb-llm-int8", "tgi").notes)
    assert not any("deprecated" in note for note in emit("bnb-nf4", "tgi").notes)


def test_tgi_never_combines_dtype_with_quantize() -> None:
    quantized = options(emit("bnb-nf4", "tgi").argv or [], PREFIX["tgi"])
    assert quantized["--quantize"] == "bitsandbytes-nf4" and "--dtype" not in quantized
    plain = options(emit("fp16", "tgi", dtype="float16").argv or [], PREFIX["tgi"])
    assert plain["--dtype"] == "float16" and "--quantize" not in plain


def test_tgi_admits_at_least_the_batch_cap() -> None:
    got = options(emit("baseline", "tgi", max_num_seqs=512, max_num_batched_tokens=8192).argv or [], PREFIX["tgi"])
    assert got["--max-batch-size"] == "512"
    assert got["--max-concurrent-requests"] == "512"


def test_budget_notes_appear_only_when_the_budget_is_below_the_context() -> None:
    short = " ".join(emit("baseline", "vllm").notes)
    assert "chunked prefill" in short
    long_budget = emit("baseline", "vllm", max_num_batched_tokens=8192)
    assert not any("below --max-model-len" in note for note in long_budget.notes)
    assert not any(
        "below --max-input-tokens" in note for note in emit("baseline", "tgi", max_num_batched_tokens=8191).notes
    )
    assert any(
        "below --max-input-tokens" in note for note in emit("baseline", "tgi", max_num_batched_tokens=8190).notes
    )


def test_a_wrong_engine_flag_is_refused_not_emitted() -> None:
    wrong = {"vllm": "fp9", "sglang": "fp8wo", "tgi": "fp8-e4m3", "trtllm": "fp8"}
    for name in ENGINES_BY_NAME:
        engine = get_engine(name)
        row = dataclasses.replace(engine.row("bf16"), flag=wrong[name])  # type: ignore[type-var]
        broken = type(f"Broken{type(engine).__name__}", (type(engine),), {"kernels": (row,)})()
        with pytest.raises(ValueError, match="does not accept"):
            broken.emit(settings(METHODS["baseline"]))


def test_registry() -> None:
    assert list(ENGINES_BY_NAME) == ["vllm", "sglang", "tgi", "trtllm"] == list(ENGINE_NAMES)
    assert get_engine("sglang") is ENGINES_BY_NAME["sglang"]
    with pytest.raises(BadInputError, match="did you mean vllm"):
        get_engine("vlm")
    with pytest.raises(TypeError):
        ENGINES_BY_NAME["other"] = ENGINES_BY_NAME["vllm"]  # type: ignore[index]
    configs = emit_all(settings(METHODS["baseline"]))
    assert [c.engine for c in configs] == ["vllm", "sglang", "tgi", "trtllm"]
    assert all(c.supported for c in configs)


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"dtype": "float32"}, "launch.dtype"),
        ({"kv_cache_dtype": "fp8_e5m2"}, "launch.kv_cache_dtype"),
        ({"tensor_parallel": 0}, "launch.tensor_parallel"),
        ({"max_num_batched_tokens": 16}, "launch.max_num_batched_tokens"),
        ({"gpu_memory_utilization": 1.5}, "launch.gpu_memory_utilization"),
        ({"max_model_len": 1}, "launch.max_model_len"),
        ({"port": 0}, "launch.port"),
        ({"model": " "}, "launch.model"),
    ],
)
def test_launch_settings_refuse_what_no_engine_accepts(override: dict[str, object], field: str) -> None:
    with pytest.raises(BadInputError) as caught:
        settings(METHODS["baseline"], **override)
    assert caught.value.field == field


def test_an_engine_without_the_kernel_on_the_launch_gpu_refuses_with_the_reason() -> None:
    a10g = load_catalog().get("a10g").device
    configs = {c.engine: c for c in emit_all(settings(METHODS["int8-w8a8"], device=a10g))}
    assert configs["vllm"].supported and configs["tgi"].supported
    sglang = configs["sglang"]
    assert not sglang.supported and sglang.command is None
    assert "compute capability 8.6" in sglang.notes[0] and "needs 8.9" in sglang.notes[0]


def test_launch_commands_serve_a_checkpoint_scheme_from_its_checkpoint_and_fp8_online_from_the_model() -> None:
    catalog = load_catalog()
    l4, t4 = catalog.get("l4").device, catalog.get("t4").device

    def vllm_argv(candidate: Candidate, device: DeviceInfo) -> list[str]:
        configs = launch_commands(candidate, model="org/model", max_model_len=640, checkpoint=CHECKPOINT, device=device)
        (vllm,) = [c for c in configs if c.engine == "vllm"]
        assert vllm.argv is not None
        return vllm.argv

    int8 = vllm_argv(Candidate("int8", "int8-w8a8", "l4", 16), l4)
    assert int8[:3] == ["vllm", "serve", CHECKPOINT] and "--quantization" not in int8
    online = launch_commands(
        Candidate("fp8", "fp8-online", "l4", 16), model="org/model", max_model_len=640, checkpoint=CHECKPOINT, device=l4
    )
    by_engine = {c.engine: c for c in online}
    assert (by_engine["vllm"].argv or [])[:3] == ["vllm", "serve", "org/model"]
    assert options(by_engine["vllm"].argv or [], ["vllm", "serve", "org/model"])["--quantization"] == "fp8"
    assert not by_engine["sglang"].supported and not by_engine["tgi"].supported
    fp16 = vllm_argv(Candidate("fp16", "fp16", "t4", 16), t4)
    assert options(fp16, ["vllm", "serve", "org/model"])["--dtype"] == "float16"


def test_launch_commands_put_the_engine_the_estimate_is_for_first() -> None:
    h100 = load_catalog().get("h100-sxm").device
    c = Candidate("bf16", "baseline", "h100-sxm", 64)
    default = [e.engine for e in launch_commands(c, model="org/model", max_model_len=640, device=h100)]
    chosen = [e.engine for e in launch_commands(c, model="org/model", max_model_len=640, device=h100, engine="sglang")]
    assert chosen[0] == "sglang" and sorted(chosen) == sorted(default)
    assert chosen[1:] == [e for e in default if e != "sglang"]  # the others keep their order
