"""TensorRT-LLM: ``trtllm-serve MODEL --backend pytorch ...`` plus, where needed, an ``--extra_llm_api_options`` YAML.

Verified against (flag names, accepted values, behaviour quoted in the notes):

- tensorrt_llm/commands/serve.py @ 4c05a74 and @ 00209af — ``trtllm-serve MODEL`` (positional:
  "model name | HF checkpoint path | TensorRT engine path"), ``--backend`` (pytorch, tensorrt,
  _autodeploy; default pytorch), ``--max_batch_size``, ``--max_num_tokens``, ``--max_seq_len``,
  ``--tp_size``, ``--kv_cache_free_gpu_memory_fraction`` ("Free GPU memory fraction reserved for
  KV Cache, after allocating model weights and buffers", default 0.9), ``--host`` (default
  localhost), ``--port`` (default 8000), ``--extra_llm_api_options`` ("Path to a YAML file that
  overwrites the parameters specified by trtllm-serve"). The later file spells the same options
  as aliases (``--tensor_parallel_size/--tp_size``, ``--free_gpu_memory_fraction/
  --kv_cache_free_gpu_memory_fraction``, ``--config/--extra_llm_api_options``), so the spellings
  used here work in both. ``get_llm_args`` builds ``KvCacheConfig(free_gpu_memory_fraction=...)``
  and passes ``enable_chunked_prefill`` (default False) to the LLM; there is no dtype option.
- tensorrt_llm/llmapi/llm_args.py @ 0004396 (``update_llm_args_with_extra_dict``) — the YAML's values
  win over the flags; this file deep-merges ``kv_cache_config``, earlier ones merged with a plain
  ``llm_args | llm_args_dict`` (a YAML ``kv_cache_config`` replaced the one trtllm-serve built), so
  the YAML repeats ``free_gpu_memory_fraction`` to hold in both.
- tensorrt_llm/_torch/pyexecutor/model_loader.py @ 004b733 — ``kv_cache_config.dtype`` accepts
  fp8, nvfp4, auto; an explicit dtype must match a KV-cache quantization the checkpoint carries.
- tensorrt_llm/_torch/model_config.py @ 008e0af — the PyTorch backend computes in the checkpoint's
  ``torch_dtype`` (bfloat16 when config.json names none); a checkpoint's quantization comes from
  hf_quant_config.json (ModelOpt) or config.json ``quantization_config``; ``compressed-tensors``
  ("llm-compressor's quantized checkpoints") goes to ``update_quant_config_from_compressed_tensors``.
- tensorrt_llm/models/quant_config_utils.py @ 21156a7 — a compressed-tensors group with 8-bit
  per-channel weights and per-token activations becomes ``FP8_PER_CHANNEL_PER_TOKEN`` (the type,
  int or float, is not read); 4-bit groups are accepted only as float (MXFP4, NVFP4).
- tensorrt_llm/_torch/modules/linear.py @ 00bbf71 — ``FP8RowwiseLinearMethod``: per-row FP8 weight scales,
  activations quantized per token at run time (``quantize_e4m3_activation``), ``fp8_rowwise_gemm``.
- tensorrt_llm/llmapi/llm_utils.py @ 0066b2a — any other ``quant_method`` in a checkpoint's
  ``quantization_config`` raises ``NotImplementedError("Unsupported quantization_config")``.
- docs/source/features/quantization.md @ 09d4c79 — the PyTorch backend runs pre-quantized
  checkpoints (ModelOpt offline quantization); hardware matrix: FP8 rowwise on Hopper only.

Where it runs each scheme family (``KERNELS``), verified against NVIDIA/TensorRT-LLM (``trtllm-serve`` with the
PyTorch backend; NVIDIA only: no ROCm, no CPU):
- docs/source/reference/support-matrix.md @ 03dad62 — Linux; GPU architectures Blackwell, Hopper, Ada
  Lovelace and Ampere (an architecture not listed is not developed or tested), so 16-bit from 8.0.
- tensorrt_llm/_torch/model_config.py @ 008e0af — a 16-bit Hugging Face checkpoint is served in its
  own torch_dtype; config.json ``quant_method: compressed-tensors`` ("llm-compressor's quantized
  checkpoints") is read by ``update_quant_config_from_compressed_tensors``.
- tensorrt_llm/models/quant_config_utils.py @ 21156a7 — 8-bit per-channel weights with per-token
  activations become FP8_PER_CHANNEL_PER_TOKEN whatever their type (so INT8 W8A8 is not loaded as
  INT8); 4-bit groups only as float (MXFP4, NVFP4), so the integer W4A16 schemes are not loaded.
- tensorrt_llm/_torch/modules/linear.py @ 00bbf71 — ``FP8RowwiseLinearMethod``: per-row weight scales, dynamic
  per-token activations (the fp8-dynamic numerics).
- docs/source/features/quantization.md @ 09d4c79 — hardware matrix: FP8 rowwise on Hopper only (not
  Ada, not Blackwell); quantized models are served pre-quantized (no in-flight fp8-online).
- tensorrt_llm/llmapi/llm_utils.py @ 0066b2a — a quantization_config with another quant_method
  (bitsandbytes, torchao) raises NotImplementedError.

FP8 per-tensor and block, and FP4 (compressed-tensors ``FP8``, ``FP8_BLOCK``, ``NVFP4``, ``NVFP4A16`` and
``MXFP4`` presets), verified against NVIDIA/TensorRT-LLM:
- tensorrt_llm/models/quant_config_utils.py @ 21156a7 (``_quant_config_from_config_group``) — 8-bit block
  weights with group-128 activations become ``FP8_BLOCK_SCALES``; any other 8-bit weight strategy than
  channel or block raises ("Supported strategies: 'channel', 'block'"), so the per-tensor FP8 preset is not
  loaded (no ct-fp8-tensor row). FP4 ``tensor_group`` weights with ``tensor_group`` activations, group 16,
  become ``NVFP4`` (W4A4; "SM120/121 execute this W4A4 contract through the FP4 CUTLASS path"); NVFP4
  weights without input activations (NVFP4A16) fail there (the activation strategy is read from a missing
  group), so no ct-nvfp4a16 row. Every ``mxfp4-pack-quantized`` group becomes ``W4A16_MXFP4``, weight-only,
  whether or not the checkpoint quantizes activations: an MXFP4 W4A4 checkpoint is not served as measured,
  so no ct-mxfp4 row.
- docs/source/features/quantization.md @ 09d4c79 — hardware matrix: NVFP4 on Blackwell sm100/103 and sm120,
  not Hopper; FP8 block scaling on Hopper and sm100/103 (not sm120, not Ada), where "FP8 block wise scaling
  GEMM kernels for sm100/103 are using MXFP8 recipe (E4M3 act/weight and UE8M0 act/weight scale), which is
  slightly different from SM90 FP8 recipe (E4M3 act/weight and FP32 act/weight scale)": the FP32 block
  scales that were measured run on Hopper only. FP8 per tensor runs on Ada, Hopper and Blackwell from ModelOpt
  checkpoints, but the compressed-tensors reader above refuses a per-tensor group; FP8 rowwise (ct-fp8-w8a8)
  stays Hopper-only, so Blackwell gains no FP8 row from compressed-tensors checkpoints.

ModelOpt checkpoints (``recommender/quantize/modelopt.py``: ModelOpt's ``export_hf_checkpoint``, which writes
hf_quant_config.json and config.json ``quant_method: modelopt``), verified against NVIDIA/TensorRT-LLM:
- tensorrt_llm/_torch/model_config.py @ 008e0af — the PyTorch backend reads a checkpoint's quantization from
  hf_quant_config.json (ModelOpt's) before config.json; no launch flag.
- docs/source/features/quantization.md @ 09d4c79 — "TensorRT LLM can directly run pre-quantized models generated
  with the NVIDIA TensorRT Model Optimizer"; hardware matrix: FP8 (per tensor) on Ada, Hopper, Blackwell sm100/103
  and sm120 (so from 8.9); NVFP4 on Blackwell only (10.0); W4A16 AWQ on Ampere, Ada and Hopper, not Blackwell
  (8.0 up to, not including, 10.0); FP8 KV cache on every listed architecture.

How it batches (``PROFILE``, for the scheduler simulation; defaults of the releases the measured runs used, read
in the released sources):

* TensorRT-LLM 1.x (`trtllm-serve`, PyTorch backend): `max_num_tokens` 8192, `max_batch_size`
  2048, `enable_chunked_prefill` False (tensorrt_llm/llmapi/llm_args.py); context and generation
  requests share an iteration within max_num_tokens — modelled as mixed chunks in that budget.

An expert-parallel replica (``LaunchSettings.expert_parallel``), verified against NVIDIA/TensorRT-LLM:
- tensorrt_llm/commands/serve.py @ 4c05a74 — ``--ep_size`` ("expert parallelism size", passed as
  ``moe_expert_parallel_size``) beside ``--tp_size``.
- docs/source/features/parallel-strategy.md @ f53fb4c — attention data parallelism is ``tensor_parallel_size: N``
  with ``enable_attention_dp: true`` in the YAML (the weights replicated, "the KV-cache is partitioned, because
  different user requests are routed to different DP ranks": --max_batch_size is taken as one rank's cap); "EP
  only" is ``tensor_parallel_size: 8`` with ``moe_expert_parallel_size: 8``; redundant expert slots belong to
  Wide-EP's load balancer, not emitted here.
- examples/models/core/deepseek_v3/deployment-guide-for-trt-llm-deepseek-r1.md @ 2ee475a — DeepSeek-R1 FP8 on 8
  GPUs: ``trtllm-serve ... --tp_size 8 --ep_size 8 --extra_llm_api_options`` a YAML with
  ``enable_attention_dp: true`` and ``kv_cache_config: dtype: fp8``. A replica of several nodes is one
  ``srun ... trtllm-llmapi-launch trtllm-serve ...`` (``trtllm_multinode.py``, its source cited there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml

from recommender.engines._base import (
    Engine,
    EngineLaunch,
    LaunchSettings,
    Option,
    check_choice,
    checkpoint_note,
    flatten,
)
from recommender.engines.kernels import Kernel
from recommender.engines.trtllm_multinode import slurm_command
from recommender.perf.sim.engine_profiles import EngineProfile

if TYPE_CHECKING:
    from recommender.quantize import QuantScheme

# tensorrt_llm/commands/serve.py @ 4c05a74 / 00209af: trtllm-serve has no quantization option; a
# scheme is read from the checkpoint, so the only valid `Kernel.flag` is "".
QUANTIZATION_CHOICES: frozenset[str] = frozenset()
# tensorrt_llm/_torch/pyexecutor/model_loader.py @ 004b733, _VALID_KV_CACHE_DTYPES; "auto" leaves it out.
KV_CACHE_DTYPE = {"auto": None, "fp8": "fp8"}
#: The file name the command gives ``--extra_llm_api_options``; `EngineLaunch.config_yaml` is its content.
EXTRA_OPTIONS_FILE = "extra_llm_api_options.yaml"


#: How Trtllm batches (sources in the module docstring).
PROFILE = EngineProfile(
    "trtllm",
    max_num_batched_tokens=8192,
    mixed_prefill=True,
    max_num_seqs=2048,
    reserve_whole_request=True,
    kv_read_at_width_since="1.2",
)
#: Where Trtllm runs each scheme family (sources in the module docstring).
KERNELS: tuple[Kernel, ...] = (
    Kernel("bf16", "TensorRT-LLM bf16", (8, 0)),
    Kernel("fp16", "TensorRT-LLM fp16", (8, 0)),
    Kernel("ct-fp8-w8a8", "TensorRT-LLM's FP8 rowwise (FP8_PER_CHANNEL_PER_TOKEN)", (9, 0), nvidia_below=(10, 0)),
    Kernel(
        "ct-fp8-block",
        "TensorRT-LLM's FP8_BLOCK_SCALES with FP32 scales (Blackwell uses UE8M0 scales)",
        (9, 0),
        nvidia_below=(10, 0),
    ),
    Kernel("ct-nvfp4", "TensorRT-LLM's NVFP4 W4A4 (FP4 CUTLASS)", (10, 0)),
    Kernel("mo-fp8", "TensorRT-LLM's FP8 per-tensor (ModelOpt checkpoint)", (8, 9)),
    Kernel("mo-nvfp4", "TensorRT-LLM's NVFP4 W4A4 (ModelOpt checkpoint)", (10, 0)),
    Kernel("mo-w4a16-awq", "TensorRT-LLM's W4A16 AWQ (ModelOpt checkpoint)", (8, 0), nvidia_below=(10, 0)),
)


class TrtllmEngine(Engine):
    """``trtllm-serve`` (PyTorch backend) with TensorRT-LLM's names for the launch settings."""

    name = "trtllm"
    label = "TensorRT-LLM"
    sources = (
        "https://github.com/NVIDIA/TensorRT-LLM/blob/4c05a74891e4df8066f08ed4ce14b0972abe4e25/"
        "tensorrt_llm/commands/serve.py",
        "https://github.com/NVIDIA/TensorRT-LLM/blob/00209af149e7774406881a37283dce303571eb11/"
        "tensorrt_llm/commands/serve.py",
        "https://github.com/NVIDIA/TensorRT-LLM/blob/0004396720054fd8e205cbf616f21f0b57c6b412/"
        "tensorrt_llm/llmapi/llm_args.py",
        "https://github.com/NVIDIA/TensorRT-LLM/blob/004b733e0ed7c03c83dcfa7de48e8ee6e4fa58d0/"
        "tensorrt_llm/_torch/pyexecutor/model_loader.py",
        "https://github.com/NVIDIA/TensorRT-LLM/blob/008e0af8980fc560003631ba4ac37828836a91c8/"
        "tensorrt_llm/_torch/model_config.py",
        "https://github.com/NVIDIA/TensorRT-LLM/blob/21156a7a57acd21e17feb5c2721c30f035e0f2af/"
        "tensorrt_llm/models/quant_config_utils.py",
        "https://github.com/NVIDIA/TensorRT-LLM/blob/00bbf71e796406ea8593a77cbfb828356182db16/"
        "tensorrt_llm/_torch/modules/linear.py",
        "https://github.com/NVIDIA/TensorRT-LLM/blob/0066b2a5696f5819dc4c98befa25e957e6e24fe5/"
        "tensorrt_llm/llmapi/llm_utils.py",
        "https://github.com/NVIDIA/TensorRT-LLM/blob/09d4c79ba941a5c2c62c878c3572c0dcc8b85efa/"
        "docs/source/features/quantization.md",
        "https://github.com/NVIDIA/TensorRT-LLM/blob/03dad6287acb4cd95294360a420ea72e91ffde7f/"
        "docs/source/reference/support-matrix.md",
    )
    kernels = KERNELS
    profile = PROFILE
    speculation_refusal = (
        "TensorRT-LLM's NGram decoding (speculative_config: decoding_type: NGram) keeps a pool of n-grams across "
        "requests (is_public_pool) and, once on, speculates at every batch size (docs/source/features/"
        "speculative-decoding.md: speed-ups only at low batch); vLLM's prompt lookup, which was measured, differs"
    )
    expert_parallel_refusal = ""  # attention DP on all ranks or none: ``_expert_parallel_refusal``

    def _emit(self, settings: LaunchSettings, flag: str) -> EngineLaunch:
        if flag:
            check_choice(self.label, "a quantization option", flag, QUANTIZATION_CHOICES)
        if why := _expert_parallel_refusal(settings):
            return self._unsupported(f"TensorRT-LLM's expert-parallel command is not emitted: {why}.")
        ep = settings.expert_parallel
        options: list[Option] = [
            ("--backend", "pytorch"),
            ("--tp_size", settings.tensor_parallel),
            *([] if ep is None else [("--ep_size", ep.ep)]),
            ("--max_batch_size", settings.max_num_seqs),
            ("--max_num_tokens", settings.max_num_batched_tokens),
            ("--max_seq_len", settings.max_model_len),
            ("--kv_cache_free_gpu_memory_fraction", settings.gpu_memory_utilization),
            ("--port", settings.port),
        ]
        extra = _extra_llm_api_options(settings)
        if extra:
            options.append(("--extra_llm_api_options", EXTRA_OPTIONS_FILE))
        notes = [
            *_quantization_notes(settings.method),
            *_dtype_notes(settings.dtype),
            *_extra_options_notes(settings, extra),
            "--kv_cache_free_gpu_memory_fraction is the share of the memory left after weights and buffers that "
            "the KV cache takes (vLLM's --gpu-memory-utilization is a share of all of it), so the same number "
            "gives TensorRT-LLM a somewhat larger KV cache.",
            "--max_batch_size caps the requests scheduled together; --max_num_tokens caps the tokens of one "
            "iteration, context and generation requests together.",
            "trtllm-serve listens on localhost unless --host is given (e.g. --host 0.0.0.0).",
        ]
        command = ["trtllm-serve", settings.model, *flatten(options)]
        if ep is not None and ep.nodes > 1:  # one srun starts every node (trtllm_multinode.py)
            command, launched = slurm_command(command, ep)
            notes += launched
        config_yaml = yaml.safe_dump(extra, sort_keys=False) if extra else None
        return self._config(command=command, notes=notes, config_yaml=config_yaml)

    def no_equivalent_hint(self, method: QuantScheme) -> str:
        if method.checkpoint_format == "compressed-tensors" and method.precision == "int8":
            return (
                "TensorRT-LLM reads every 8-bit per-channel, per-token compressed-tensors group as FP8 "
                "(FP8_PER_CHANNEL_PER_TOKEN in tensorrt_llm/models/quant_config_utils.py; the type is not read), so "
                "it has no INT8 W8A8 path for this checkpoint — serve it with another engine"
            )
        if method.checkpoint_format == "compressed-tensors" and method.precision == "int4":
            return (
                "TensorRT-LLM's compressed-tensors reader takes 4-bit groups only as float (MXFP4, NVFP4; "
                "tensorrt_llm/models/quant_config_utils.py), and its W4A16 AWQ/GPTQ kernels load ModelOpt "
                "checkpoints, not llm-compressor's — pick modelopt-w4a16-awq, or serve it with another engine"
            )
        if method.kernel_family == "ct-fp8-tensor":
            return (
                "TensorRT-LLM's compressed-tensors reader takes 8-bit groups only per channel (FP8 rowwise) or in "
                "blocks (FP8_BLOCK_SCALES) and raises on per-tensor FP8 (tensorrt_llm/models/quant_config_utils.py) "
                "— pick modelopt-fp8 (ModelOpt's per-tensor FP8, which TensorRT-LLM runs from 8.9), or serve it with "
                "another engine"
            )
        if method.kernel_family == "ct-nvfp4a16":
            return (
                "TensorRT-LLM's compressed-tensors reader maps NVFP4 only with NVFP4 activations (W4A4) and has no "
                "weight-only NVFP4 group (tensorrt_llm/models/quant_config_utils.py) — serve it with vllm"
            )
        if method.kernel_family == "ct-mxfp4":
            return (
                "TensorRT-LLM reads every mxfp4-pack-quantized group as weight-only W4A16_MXFP4, leaving the "
                "activations unquantized (tensorrt_llm/models/quant_config_utils.py), which is not what "
                f"{method.name} measured — serve it with vllm"
            )
        if method.checkpoint_format is None and method.library == "llmcompressor":
            return (
                "trtllm-serve has no in-flight quantization of 16-bit weights: its PyTorch backend serves FP8 from a "
                "pre-quantized checkpoint (ModelOpt, or an llm-compressor FP8 W8A8 one such as fp8-dynamic) — pick "
                "fp8-dynamic or serve this scheme with vllm"
            )
        if method.library in ("bitsandbytes", "torchao"):
            return (
                f"TensorRT-LLM has no {method.library} path: a checkpoint whose quantization_config names another "
                "quant_method than fp8, mxfp4, mxfp8, nvfp4 or compressed-tensors raises NotImplementedError "
                "(tensorrt_llm/llmapi/llm_utils.py) — pick a method with a TensorRT-LLM equivalent"
            )
        return super().no_equivalent_hint(method)


def _extra_llm_api_options(settings: LaunchSettings) -> dict[str, Any]:
    """What only the YAML can say: an FP8 KV cache and chunked prefill; empty when the flags say it all."""
    extra: dict[str, Any] = {}
    kv_cache_dtype = KV_CACHE_DTYPE[settings.kv_cache_dtype]
    if kv_cache_dtype is not None:
        # The YAML's kv_cache_config replaces the one built from the flag: repeat the fraction.
        extra["kv_cache_config"] = {
            "free_gpu_memory_fraction": settings.gpu_memory_utilization,
            "dtype": kv_cache_dtype,
        }
    if settings.max_num_batched_tokens < settings.max_model_len:
        extra["enable_chunked_prefill"] = True
    if settings.expert_parallel is not None and settings.expert_parallel.attention_dp > 1:
        extra["enable_attention_dp"] = True
    return extra


def _expert_parallel_refusal(settings: LaunchSettings) -> str:
    """Why an expert-parallel replica's command is not emitted ('' when it is, or for tensor parallelism)."""
    ep = settings.expert_parallel
    if ep is None:
        return ""
    if ep.attention_dp not in (1, ep.ep):
        return f"enable_attention_dp makes every GPU an attention rank, not {ep.attention_dp} of {ep.ep}"
    if ep.redundant_experts:
        return "redundant expert slots are Wide-EP's load balancer configuration, not emitted here"
    return ""


#: The quant_algo ModelOpt writes for each ModelOpt family.
_MODELOPT_ALGO = {"mo-fp8": "FP8", "mo-nvfp4": "NVFP4", "mo-w4a16-awq": "W4A16_AWQ"}


def _quantization_notes(method: QuantScheme) -> list[str]:
    checkpoint = checkpoint_note(method, "TensorRT-LLM")
    if checkpoint is None:
        return []
    notes = [checkpoint]
    if method.kernel_family == "ct-fp8-w8a8":
        notes.append(
            "TensorRT-LLM reads this llm-compressor FP8 checkpoint as FP8_PER_CHANNEL_PER_TOKEN (FP8 rowwise: "
            "per-channel weight scales, activations quantized per token at run time), which NVIDIA's hardware "
            "matrix lists for Hopper only."
        )
    if method.kernel_family == "ct-fp8-block":
        notes.append(
            "TensorRT-LLM reads this checkpoint as FP8_BLOCK_SCALES (128x128 weight blocks, activations quantized "
            "per 128-value group at run time); Hopper keeps the FP32 scales, while Blackwell's block kernels use "
            "UE8M0 (power-of-two) scales, which is why only Hopper counts."
        )
    if method.checkpoint_format == "modelopt":
        notes.append(
            "TensorRT-LLM reads this ModelOpt checkpoint's hf_quant_config.json (quant_algo "
            f"{_MODELOPT_ALGO.get(method.kernel_family, '?')}) as ModelOpt wrote it: the scales it was scored with."
        )
    if method.kernel_family == "ct-nvfp4":
        notes.append(
            "TensorRT-LLM reads this checkpoint as NVFP4 (FP4 weights and activations, FP8 scales per 16 values), "
            "which NVIDIA's hardware matrix lists for Blackwell only."
        )
    return notes


def _dtype_notes(dtype: str) -> list[str]:
    return [
        "trtllm-serve takes no dtype: the PyTorch backend computes in the checkpoint's torch_dtype (config.json, "
        f"bfloat16 when it names none), so serve a checkpoint saved in {dtype} to compute in {dtype} as measured."
    ]


def _extra_options_notes(settings: LaunchSettings, extra: dict[str, Any]) -> list[str]:
    if not extra:
        return []
    notes = [
        f"config_yaml is the file --extra_llm_api_options names: save it as {EXTRA_OPTIONS_FILE} where you run "
        "the command (its values override the flags)."
    ]
    if "kv_cache_config" in extra:
        notes.append(
            "kv_cache_config.dtype fp8 stores the KV cache in FP8; it must match a KV-cache quantization the "
            "checkpoint carries. The YAML repeats free_gpu_memory_fraction because older releases replace the "
            "kv_cache_config that --kv_cache_free_gpu_memory_fraction built with the YAML's."
        )
    if "enable_attention_dp" in extra:
        notes.append(
            "enable_attention_dp makes each GPU an attention rank with its own requests and KV cache; --ep_size splits "
            "the experts over them; --max_batch_size is one rank's batch cap, as planned."
        )
    if "enable_chunked_prefill" in extra:
        notes.append(
            f"--max_num_tokens {settings.max_num_batched_tokens} is below --max_seq_len {settings.max_model_len}: "
            "enable_chunked_prefill (off by default in trtllm-serve) lets a longer prompt be prefilled in chunks."
        )
    return notes
